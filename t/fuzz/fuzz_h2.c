/* HTTP/2 by prior knowledge, in process: each input is what one client sends
 * on one connection of a listener with http2 = true. As fuzz_http does, the
 * harness runs a worker loop of its own, hands luxd one end of a socketpair
 * (lx_conn_open with LX_CONN_H2), writes the client's bytes into the other
 * end, half-closes and runs the loop until luxd closes the connection; then
 * it checks the frames that came back.
 *
 * The first input byte is the mode:
 *   bit 0  raw: the rest of the input is sent as it is (after the preface,
 *          unless bit 1); otherwise it is a list of compact descriptions of
 *          frames (below) that the harness turns into valid frame headers
 *          and, for requests, valid HPACK, so the fuzzer reaches deep states
 *          instead of spending its bytes on framing
 *   bit 1  raw only: no client preface (HTTP/1 or a bad preface)
 *   bit 2  early EOF: the half-close follows the input at once, while
 *          responses, file reads and writes are in flight; otherwise the
 *          loop first runs until luxd has nothing left to do (everything it
 *          may send without a WINDOW_UPDATE is out), then the half-close
 *   bit 3  raw: written in pieces of (bits 4-7) * 5 + 1 bytes with the
 *          loop run in between (structured inputs say where, op 10);
 *          structured: no empty SETTINGS frame after the preface (the
 *          harness sends one otherwise, as a client must)
 *
 * Structured ops, one byte each (low nibble the op, high nibble its flags),
 * then their arguments; stream ids are 2 * byte + 1:
 *   0 HEADERS request   sid method path mask0 mask1 [len bytes when path is
 *                       0xff]; flags: 1 END_STREAM, 2 split in CONTINUATION
 *                       frames, 4 PRIORITY, 8 PADDED
 *   1 DATA              sid len_lo len_hi; flags: 1 END_STREAM, 8 PADDED
 *   2 WINDOW_UPDATE     sid (0 is the connection's) increment-choice
 *   3 SETTINGS          flags&7 entries of (id, value-choice); flag 8 ACK
 *   4 RST_STREAM        sid code
 *   5 PING              flag 1 ACK
 *   6 PRIORITY          sid dep weight
 *   7 GOAWAY            sid code
 *   8 any frame         type flags sid len bytes (the header is made right)
 *   9 raw bytes         len bytes
 *  10 send what is built so far and run the loop (flag 1: until it settles)
 *  11 trailers          sid (HEADERS with END_STREAM, no pseudo-header)
 *  12 drain             lx_conn_drain, as a reload or a stop does
 *  13 reload            a new generation (as fuzz_http)
 *
 * What must hold: no crash, sanitizer report or leak; no stall after the
 * client's EOF; and the output is, after the server's SETTINGS, a sequence
 * of well-formed frames: a length within SETTINGS_MAX_FRAME_SIZE, a type a
 * server sends, the stream id that type needs, the sizes RFC 9113 gives
 * SETTINGS, PING, RST_STREAM, WINDOW_UPDATE and GOAWAY, CONTINUATION only
 * after its HEADERS; HPACK that decodes; responses whose fields are lower
 * case, not connection-specific, with no CR, LF or NUL and no edge
 * whitespace in values; :status first and of 3 digits; no DATA before the
 * final HEADERS nor after END_STREAM or RST_STREAM; DATA within the windows
 * the client gave; the DATA of a response that ended with END_STREAM as
 * long as its content-length (none for HEAD, 204 and 304); no new response
 * above a GOAWAY's last stream id; and, when the loop settled, an answer
 * (HEADERS or RST_STREAM) to each complete request the client sent, unless
 * a GOAWAY excuses it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "h1/conn.h"
#include "handlers/handler.h"
#include "io/filecache.h"
#include "log.h"
#include "policy/policy.h"
#include "worker.h"
#include "common/world.h"

#define PREFACE  "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define BIG_SIZE (300 * 1024)

static const char config[] =
    "server {\n"
    "  listen = { '127.0.0.1:1' }, workers = 1,\n"
    "  error_log = DIR .. '/error.log', error_log_level = 'error',\n"
    "  access_log = DIR .. '/access.log', access_log_buffer = 512,\n"
    /* Long: no deadline may end a run (a slow one under ASan included). */
    "  header_timeout = 60, body_timeout = 60, send_timeout = 60, keepalive_timeout = 60,\n"
    "  max_header_bytes = 4096, max_body_bytes = 8192,\n"
    "}\n"
    "vhost 'localhost' {\n"
    "  default = true, aliases = { 'alias.test' },\n"
    "  root = DIR .. '/www', index = { 'index.html' },\n"
    "  headers = { ['X-Site'] = 'main' }, cache_control = 'public, max-age=60',\n"
    "  gzip_static = true, dir_listing = false,\n"
    "  error_pages = { [404] = '/404.html', [403] = '/403.html' },\n"
    "  access = {\n"
    "    deny  { regex = [[/\\.]] },\n"
    "    deny  { prefix = '/private/' },\n"
    "    deny  { method = { 'TRACE', 'DELETE', 'PUT' }, status = 405 },\n"
    "  },\n"
    "  rewrite = { { [[^/old/(.*)\\.html$]], '/new/$1.html' } },\n"
    "  redirect = { { [[^/home$]], '/', status = 301 } },\n"
    "  location '/spa/' { try_files = { '$uri', '$uri.html', '/index.html' } },\n"
    "  location '/gone/' { try_files = { '$uri', '=410' } },\n"
    "  location '/other/' { root = DIR .. '/other', dir_listing = true },\n"
    "  location '/static/' { cache_control = 'no-store', headers = { ['X-Loc'] = 'static' } },\n"
    "  location '/status' { status = true },\n"
    "  location '/pol/' {\n"
    "    policy = function(r)\n"
    "      local k = r.headers['x-key']\n"
    "      if r.path:find('^/pol/deny') then return 403 end\n"
    "      if r.path:find('^/pol/respond') then r:respond(200, 'from policy ' .. #r.path) return "
    "end\n"
    "      if r.path:find('^/pol/empty') then r:respond(204) return end\n"
    "      if r.path:find('^/pol/notmod') then r:respond(304) return end\n"
    "      if r.path:find('^/pol/go') then\n"
    "        r:redirect((('/index.html?' .. (r.query or '')):gsub('%%0[dD]', "
    "'\\r'):gsub('%%0[aA]', '\\n')))\n"
    "        return\n"
    "      end\n"
    "      if r.path:find('^/pol/hdr') then r:set_header('X-Echo', tostring(k)) end\n"
    "      if r.path:find('^/pol/any') then\n"
    "        local n = r.headers['x-n'] or 'X-A'\n"
    "        local v = (r.headers['x-v'] or 'v'):gsub('\\\\r', '\\r'):gsub('\\\\n', '\\n')\n"
    "        r:set_header(n, v)\n"
    "        local st = tonumber(r.headers['x-s'])\n"
    "        if st then r:respond(st, r.headers['x-b']) return end\n"
    "      end\n"
    "      if k then\n"
    "        local n = luxd.shared.incr('n:' .. k:sub(1, 16), 1, 60)\n"
    "        if n and n > 50 then return 429 end\n"
    "      end\n"
    "    end,\n"
    "  },\n"
    "}\n"
    "vhost 'b.test' {\n"
    "  root = DIR .. '/b', index = { 'index.html' },\n"
    "  policy = function(r) if r.headers['x-user'] ~= 'admin' then return 401 end end,\n"
    "}\n";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    world_dir("fuzz-h2");
    put_str("www/index.html", "<h1>home</h1>\n");
    put_str("www/404.html", "custom 404\n");
    put_str("www/403.html", "custom 403\n");
    put_str("www/a.txt", "0123456789abcdefghijklmnopqrstuvwxyz\n");
    put_str("www/a.txt.gz", "\x1f\x8b not really gzip");
    put_str("www/empty.txt", "");
    put_str("www/new/page.html", "new page\n");
    put_str("www/spa/p.html", "pretty\n");
    put_str("www/private/p.txt", "private\n");
    put_str("www/static/s.css", "body{}\n");
    put_str("www/pol/f.txt", "policy file\n");
    put_str("www/pol/any", "policy any\n");
    put_str("other/o.txt", "other root\n");
    put_str("other/d/e.txt", "listed\n");
    put_str("b/index.html", "b site\n");
    /* Past one stream window (mid), and many windows and read-aheads (big). */
    char *b = malloc(BIG_SIZE);
    for (size_t i = 0; i < BIG_SIZE; i++)
        b[i] = (char)('a' + i % 26);
    put_file("www/big.bin", b, BIG_SIZE);
    put_file("www/mid.bin", b, 70 * 1024);
    free(b);

    world_start(config);
    return 0;
}

/* ---- failing ------------------------------------------------------------- */

static const uint8_t *in_data;
static size_t in_size;
static char *obuf;
static size_t olen, ocap;

static void hexdump(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%02x%s", p[i], i % 32 == 31 ? "\n" : " ");
    fprintf(stderr, "\n");
}

static void fail(size_t at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_h2: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (at output byte %zu of %zu)\n--- input (%zu bytes):\n", at, olen, in_size);
    hexdump(in_data, in_size > 1024 ? 1024 : in_size);
    fprintf(stderr, "--- output from byte %zu:\n", at > 64 ? at - 64 : 0);
    size_t from = at > 64 ? at - 64 : 0;
    hexdump((const uint8_t *)obuf + from, olen - from > 512 ? 512 : olen - from);
    fprintf(stderr, "---\n");
    abort();
}

/* ---- what the client sends ------------------------------------------------ */

static uint8_t *cbuf; /* the client's bytes, the preface included */
static size_t clen_, ccap, csent;

static void cput(const void *p, size_t n) {
    if (clen_ + n > ccap) {
        while (clen_ + n > ccap)
            ccap = ccap ? ccap * 2 : 1 << 16;
        cbuf = realloc(cbuf, ccap);
    }
    memcpy(cbuf + clen_, p, n);
    clen_ += n;
}

static void frame_hd(size_t len, uint8_t type, uint8_t flags, uint32_t sid) {
    uint8_t h[9] = {
        (uint8_t)(len >> 16), (uint8_t)(len >> 8),  (uint8_t)len,        type,        flags,
        (uint8_t)(sid >> 24), (uint8_t)(sid >> 16), (uint8_t)(sid >> 8), (uint8_t)sid};
    cput(h, 9);
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The input, read one byte at a time (zeros past its end). */
static const uint8_t *rp, *rend;
static uint8_t rb(void) {
    return rp < rend ? *rp++ : 0;
}
static uint32_t sid_of(uint8_t b) {
    return 2u * b + 1;
}

static const char *const methods[] = {"GET", "HEAD", "POST",    "OPTIONS", "PUT", "DELETE",
                                      "GET", "HEAD", "CONNECT", "BREW",    "get", "TRACE",
                                      "GET", "GET",  "PATCH",   ""};
static const char *const paths[] = {"/",
                                    "/index.html",
                                    "/a.txt",
                                    "/big.bin",
                                    "/mid.bin",
                                    "/missing",
                                    "/pol/respond",
                                    "/pol/empty",
                                    "/pol/deny",
                                    "/pol/hdr",
                                    "/pol/any",
                                    "/pol/go?a%0d%0aX-Injected:%20y",
                                    "/home",
                                    "/old/page.html",
                                    "/other/",
                                    "/other/d/",
                                    "/static/s.css",
                                    "/private/p.txt",
                                    "/spa/p",
                                    "/spa/nothing",
                                    "/gone/x",
                                    "/status",
                                    "/status?format=json",
                                    "/empty.txt",
                                    "/%2e%2e/etc/passwd",
                                    "/a.txt?q=1",
                                    "*",
                                    "/pol/notmod",
                                    "/big.bin?x=1",
                                    "/.hidden",
                                    "",
                                    "/pol/f.txt"};

static nghttp2_hd_deflater *cdefl;

static void add_nv(nghttp2_nv *nv, size_t *n, const char *name, const char *value, size_t vlen) {
    nv[*n] =
        (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), vlen, NGHTTP2_NV_FLAG_NONE};
    ++*n;
}

/* A header block from nv, sent as HEADERS (and CONTINUATIONs when split). */
static void send_block(uint32_t sid, const nghttp2_nv *nv, size_t n, uint8_t f, uint8_t split) {
    size_t bound = nghttp2_hd_deflate_bound(cdefl, nv, n);
    uint8_t *blk = malloc(bound);
    ssize_t bl = nghttp2_hd_deflate_hd(cdefl, blk, bound, nv, n);
    if (bl < 0) bl = 0;
    size_t first = f & 2 ? (size_t)bl * split / 256 : (size_t)bl;
    uint8_t flags = (uint8_t)((f & 1 ? NGHTTP2_FLAG_END_STREAM : 0) |
                              (first == (size_t)bl ? NGHTTP2_FLAG_END_HEADERS : 0));
    size_t pre = 0, pad = 0;
    uint8_t extra[6];
    if (f & 8) {
        flags |= NGHTTP2_FLAG_PADDED;
        extra[pre++] = (uint8_t)(pad = split & 15);
    }
    if (f & 4) {
        flags |= NGHTTP2_FLAG_PRIORITY;
        put32(extra + pre, split & 0x10 ? sid : 0); /* 0x10: depends on itself */
        extra[pre + 4] = split;
        pre += 5;
    }
    frame_hd(pre + first + pad, NGHTTP2_HEADERS, flags, sid);
    cput(extra, pre);
    cput(blk, first);
    static const uint8_t zeros[16];
    cput(zeros, pad);
    /* The rest in CONTINUATIONs of up to 64 bytes. */
    for (size_t at = first; at < (size_t)bl;) {
        size_t k = (size_t)bl - at < 64 ? (size_t)bl - at : 64;
        frame_hd(k, NGHTTP2_CONTINUATION, at + k == (size_t)bl ? NGHTTP2_FLAG_END_HEADERS : 0, sid);
        cput(blk + at, k);
        at += k;
    }
    free(blk);
}

static void op_request(uint8_t f) {
    uint32_t sid = sid_of(rb());
    uint8_t m = rb(), p = rb(), m0 = rb(), m1 = rb(), split = rb();
    char pathbuf[256];
    const char *path;
    size_t plen;
    if (p == 0xff) {
        plen = rb();
        for (size_t i = 0; i < plen; i++)
            pathbuf[i] = (char)rb();
        path = pathbuf;
    } else {
        path = paths[p % (sizeof(paths) / sizeof(paths[0]))];
        plen = strlen(path);
    }
    const char *meth = methods[m & 15];
    nghttp2_nv nv[40];
    size_t n = 0;
    if (!(m & 0x10)) add_nv(nv, &n, ":method", meth, strlen(meth));
    if (!(m & 0x20)) add_nv(nv, &n, ":scheme", m & 0x40 ? "https" : "http", m & 0x40 ? 5 : 4);
    if (!(m & 0x80)) add_nv(nv, &n, ":path", path, plen);
    static const char *const hosts[] = {"localhost", "b.test", "alias.test", "other.test"};
    if (!(m0 & 1)) add_nv(nv, &n, ":authority", hosts[m1 >> 6], strlen(hosts[m1 >> 6]));
    if (m0 & 2) add_nv(nv, &n, "host", "b.test", 6);
    if (m0 & 4) add_nv(nv, &n, "range", "bytes=0-99", 10);
    if (m0 & 8) add_nv(nv, &n, "range", "bytes=0-0,5-9,100-", 18);
    if (m0 & 16)
        add_nv(nv, &n, "range", m1 & 1 ? "bytes=-500" : "bytes=70000-300000", 10 + 8 * !(m1 & 1));
    if (m0 & 32) add_nv(nv, &n, "if-none-match", "*", 1);
    if (m0 & 64) add_nv(nv, &n, "if-modified-since", "Fri, 01 Jan 2100 00:00:00 GMT", 29);
    if (m0 & 128) add_nv(nv, &n, "accept-encoding", "gzip, br", 8);
    if (m1 & 2) add_nv(nv, &n, "x-key", "k1", 2);
    if (m1 & 4) add_nv(nv, &n, "content-length", m1 & 1 ? "5" : "100000", m1 & 1 ? 1 : 6);
    if (m1 & 8) add_nv(nv, &n, "expect", "100-continue", 12);
    if (m1 & 16) {
        add_nv(nv, &n, "cookie", "a=1", 3);
        add_nv(nv, &n, "cookie", "b=2", 3);
    }
    if (m1 & 32) {
        static const char *const xn[] = {"X-A", "content-length", "connection", "Bad Name"};
        static const char *const xv[] = {"v\\r\\nX-Injected: 1", " padded ", "keep-alive", "12"};
        static const char *const xs[] = {"200", "204", "304", "103"};
        add_nv(nv, &n, "x-n", xn[split & 3], strlen(xn[split & 3]));
        add_nv(nv, &n, "x-v", xv[(split >> 2) & 3], strlen(xv[(split >> 2) & 3]));
        add_nv(nv, &n, "x-s", xs[(split >> 4) & 3], 3);
        if (split & 0x40) add_nv(nv, &n, "x-b", "policy body", 11);
    }
    if (m1 & 1 && m0 & 1) add_nv(nv, &n, "te", "trailers", 8);
    if ((m1 & 0xc0) == 0xc0 && m0 & 2) {
        static char longv[3000];
        memset(longv, 'l', sizeof(longv));
        add_nv(nv, &n, "x-long", longv, m0 & 4 ? sizeof(longv) : 1500);
    }
    send_block(sid, nv, n, f, split);
}

static uint32_t incr_choice(uint8_t k) {
    static const uint32_t t[] = {
        1, 100, 16384, 65535, 1u << 20, 1u << 24, 0x7fffffffu - 65535, 0x7fffffffu, 0, 70 * 1024};
    if (k < 10) return t[k];
    return (uint32_t)k * 997;
}

static void build_frame(uint8_t op) {
    uint8_t f = op >> 4;
    uint8_t b[16];
    switch (op & 15) {
    case 0: op_request(f); break;
    case 1: {
        uint32_t sid = sid_of(rb());
        size_t len = rb();
        len |= (size_t)rb() << 8;
        len %= 20000;
        uint8_t pad = f & 8 ? rb() : 0;
        uint8_t flags =
            (uint8_t)((f & 1 ? NGHTTP2_FLAG_END_STREAM : 0) | (f & 8 ? NGHTTP2_FLAG_PADDED : 0));
        size_t total = len + (f & 8 ? 1u + pad : 0);
        if (total > 16384) len = 16384 - (total - len), total = 16384;
        frame_hd(total, NGHTTP2_DATA, flags, sid);
        if (f & 8) cput(&pad, 1);
        static uint8_t body[16384];
        if (body[0] == 0) memset(body, 'd', sizeof(body));
        cput(body, len);
        static const uint8_t zeros[256];
        if (f & 8) cput(zeros, pad);
        break;
    }
    case 2: {
        uint8_t s = rb();
        uint32_t sid = s == 0 ? 0 : sid_of((uint8_t)(s - 1));
        put32(b, incr_choice(rb()));
        frame_hd(4, NGHTTP2_WINDOW_UPDATE, 0, sid);
        cput(b, 4);
        break;
    }
    case 3: {
        if (f & 8) {
            frame_hd(0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0);
            break;
        }
        unsigned n = f & 7;
        frame_hd(6 * n, NGHTTP2_SETTINGS, 0, 0);
        for (unsigned i = 0; i < n; i++) {
            uint8_t id = rb(), v = rb();
            static const uint32_t vals[] = {0,           1,           100,      4096,
                                            16384,       65535,       65536,    16777215,
                                            0x7fffffffu, 0x80000000u, 16777216, 1 << 20};
            uint32_t val = v < 12 ? vals[v] : (uint32_t)v * 131;
            uint8_t e[6] = {0, (uint8_t)(id % 10)};
            put32(e + 2, val);
            cput(e, 6);
        }
        break;
    }
    case 4:
        frame_hd(4, NGHTTP2_RST_STREAM, 0, sid_of(rb()));
        put32(b, rb() % 16);
        cput(b, 4);
        break;
    case 5:
        frame_hd(8, NGHTTP2_PING, f & 1 ? NGHTTP2_FLAG_ACK : 0, 0);
        memset(b, f, 8);
        cput(b, 8);
        break;
    case 6: {
        uint32_t sid = sid_of(rb());
        uint8_t d = rb();
        frame_hd(5, NGHTTP2_PRIORITY, 0, sid);
        put32(b, (d & 0x80 ? 0x80000000u : 0) | sid_of(d & 0x7f));
        b[4] = rb();
        cput(b, 5);
        break;
    }
    case 7:
        frame_hd(8, NGHTTP2_GOAWAY, 0, 0);
        put32(b, sid_of(rb()));
        put32(b + 4, rb() % 16);
        cput(b, 8);
        break;
    case 8: {
        uint8_t type = rb(), flags = rb(), s = rb(), len = rb();
        uint32_t sid = f & 1 ? s : sid_of(s);
        if (f & 2) sid |= 0x80000000u;
        frame_hd(len, type, flags, sid);
        for (unsigned i = 0; i < len; i++) {
            uint8_t c = rb();
            cput(&c, 1);
        }
        break;
    }
    case 9: {
        uint8_t len = rb();
        for (unsigned i = 0; i < len; i++) {
            uint8_t c = rb();
            cput(&c, 1);
        }
        break;
    }
    case 11: {
        nghttp2_nv nv[2];
        size_t n = 0;
        add_nv(nv, &n, "x-trailer", "t", 1);
        if (f & 1) add_nv(nv, &n, ":path", "/x", 2);
        send_block(sid_of(rb()), nv, n, 1, 0);
        break;
    }
    }
}

/* ---- the loop -------------------------------------------------------------- */

static int sv[2], server_closed, early;

static void drain(void) {
    if (server_closed) return;
    for (;;) {
        if (ocap - olen < 65536) {
            ocap = ocap ? ocap * 2 : 1 << 20;
            obuf = realloc(obuf, ocap);
        }
        ssize_t n = read(sv[1], obuf + olen, ocap - olen);
        if (n > 0) {
            olen += (size_t)n;
            continue;
        }
        if (n == 0) server_closed = 1;
        return;
    }
}

/* One turn: what luxd wrote is read; a job or a write in flight is waited
 * for (the socket was just drained, so a write completes). Returns whether
 * anything happened. */
static int turn(void) {
    size_t before = olen;
    unsigned reqs = W.loop.active_reqs.count;
    drain();
    uv_run(&W.loop, reqs ? UV_RUN_ONCE : UV_RUN_NOWAIT);
    drain();
    return reqs || olen != before;
}

/* Runs the loop until luxd has nothing left to do with what it has: no job,
 * no write, no output in a few turns. */
static void settle(void) {
    int idle = 0;
    for (long i = 0; !server_closed && idle < 8; i++) {
        if (i > 200000) fail(olen, "luxd never settles: output or jobs go on and on");
        idle = turn() ? 0 : idle + 1;
    }
}

/* Sends the client's bytes built so far. */
static void send_out(void) {
    int stuck = 0;
    while (csent < clen_ && !server_closed) {
        ssize_t n = write(sv[1], cbuf + csent, clen_ - csent);
        if (n > 0) {
            csent += (size_t)n;
            stuck = 0;
        } else if (n < 0 && errno != EAGAIN) {
            return; /* luxd closed its end */
        }
        if (!turn() && n <= 0 && ++stuck > 1000) return; /* luxd reads no more */
    }
    for (int i = 0; i < 3 && !early; i++)
        turn();
}

/* ---- checking the output ------------------------------------------------------ */

#define MAX_ST 1024
typedef struct {
    uint32_t id;
    /* the client's side */
    int c_method_head; /* its request is a HEAD */
    int c_complete;    /* the first HEADERS on it, a new stream, with END_STREAM */
    int c_rst;         /* the client reset it */
    uint64_t c_window; /* what its WINDOW_UPDATEs gave */
    /* the server's side */
    int s_final, s_status, s_ended, s_reset, s_headers;
    long long s_clen;
    uint64_t s_data, s_flow;
} st_t;

static st_t sts[MAX_ST];
static int nsts;

static st_t *st_find(uint32_t id, int make) {
    for (int i = 0; i < nsts; i++)
        if (sts[i].id == id) return &sts[i];
    if (!make || nsts == MAX_ST) return NULL;
    st_t *s = &sts[nsts++];
    memset(s, 0, sizeof(*s));
    s->id = id;
    s->s_clen = -1;
    return s;
}

/* What the client's bytes say, decoded as nghttp2 on the server would. */
static uint32_t c_max_frame, c_init_win, c_table, c_hi_id;
static uint64_t c_conn_window;
static int c_settings, c_pings, c_broken;

static int c_hdr_method_head;

static int inflate_block(nghttp2_hd_inflater *inf, const uint8_t *p, size_t n,
                         void (*fn)(const nghttp2_nv *, void *), void *arg) {
    for (;;) {
        nghttp2_nv nv;
        int fl = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &fl, p, n, 1);
        if (r < 0) return -1;
        p += r;
        n -= (size_t)r;
        if (fl & NGHTTP2_HD_INFLATE_EMIT) fn(&nv, arg);
        if (fl & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(inf);
            return 0;
        }
        if (r == 0 && !(fl & NGHTTP2_HD_INFLATE_EMIT)) return n ? -1 : 0;
    }
}

static void c_field(const nghttp2_nv *nv, void *arg) {
    (void)arg;
    if (nv->namelen == 7 && memcmp(nv->name, ":method", 7) == 0)
        c_hdr_method_head = nv->valuelen == 4 && memcmp(nv->value, "HEAD", 4) == 0;
}

/* The frames of the client's bytes after the preface. */
static void scan_client(const uint8_t *p, size_t n) {
    c_max_frame = 16384;
    c_init_win = 65535;
    c_table = 4096;
    c_conn_window = 65535;
    c_settings = c_pings = c_broken = 0;
    c_hi_id = 0;
    nghttp2_hd_inflater *inf;
    if (nghttp2_hd_inflate_new(&inf) != 0) abort();
    uint8_t *blk = NULL;
    size_t blen = 0;
    uint32_t bsid = 0;
    int bfirst = 0, bend = 0;
    while (n >= 9) {
        size_t len = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
        uint8_t type = p[3], fl = p[4];
        uint32_t sid =
            (uint32_t)(p[5] & 0x7f) << 24 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 8 | p[8];
        if (n - 9 < len) break;
        const uint8_t *pl = p + 9;
        p += 9 + len;
        n -= 9 + len;
        if (len > 16384) c_broken = 1; /* the server never raised its own */
        if (type == NGHTTP2_SETTINGS && !(fl & NGHTTP2_FLAG_ACK) && sid == 0 && len % 6 == 0) {
            c_settings++;
            for (size_t i = 0; i < len; i += 6) {
                uint16_t id = (uint16_t)(pl[i] << 8 | pl[i + 1]);
                uint32_t v = (uint32_t)pl[i + 2] << 24 | (uint32_t)pl[i + 3] << 16 |
                             (uint32_t)pl[i + 4] << 8 | pl[i + 5];
                if (id == NGHTTP2_SETTINGS_MAX_FRAME_SIZE && v > c_max_frame && v <= 16777215)
                    c_max_frame = v;
                if (id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE && v > c_init_win &&
                    v <= 0x7fffffffu)
                    c_init_win = v;
                if (id == NGHTTP2_SETTINGS_HEADER_TABLE_SIZE && v > c_table) c_table = v;
            }
        } else if (type == NGHTTP2_PING && !(fl & NGHTTP2_FLAG_ACK)) {
            c_pings++;
        } else if (type == NGHTTP2_WINDOW_UPDATE && len == 4) {
            uint32_t v = ((uint32_t)(pl[0] & 0x7f) << 24) | (uint32_t)pl[1] << 16 |
                         (uint32_t)pl[2] << 8 | pl[3];
            if (sid == 0)
                c_conn_window += v;
            else {
                st_t *s = st_find(sid, 1);
                if (s) s->c_window += v;
            }
        } else if (type == NGHTTP2_RST_STREAM) {
            st_t *s = st_find(sid, 1);
            if (s) s->c_rst = 1;
        } else if (type == NGHTTP2_HEADERS || type == NGHTTP2_CONTINUATION) {
            if (c_broken) continue;
            if (type == NGHTTP2_HEADERS) {
                if (blk) { /* a HEADERS while a block is open: the server ends it all */
                    c_broken = 1;
                    continue;
                }
                size_t pad = 0, off = 0;
                if (fl & NGHTTP2_FLAG_PADDED) {
                    if (len < 1) {
                        c_broken = 1;
                        continue;
                    }
                    pad = pl[0];
                    off = 1;
                }
                if (fl & NGHTTP2_FLAG_PRIORITY) off += 5;
                if (off + pad > len) {
                    c_broken = 1;
                    continue;
                }
                blen = len - off - pad;
                blk = malloc(blen + 1);
                memcpy(blk, pl + off, blen);
                bsid = sid;
                bend = (fl & NGHTTP2_FLAG_END_STREAM) != 0;
                bfirst = sid > c_hi_id && (sid & 1);
                if (sid > c_hi_id && (sid & 1)) c_hi_id = sid;
                st_find(sid, 1);
            } else {
                if (blk == NULL || sid != bsid) {
                    c_broken = 1;
                    continue;
                }
                blk = realloc(blk, blen + len + 1);
                memcpy(blk + blen, pl, len);
                blen += len;
            }
            if (fl & NGHTTP2_FLAG_END_HEADERS) {
                c_hdr_method_head = 0;
                if (inflate_block(inf, blk, blen, c_field, NULL) < 0) {
                    c_broken = 1;
                } else if (bfirst) {
                    st_t *s = st_find(bsid, 1);
                    if (s) {
                        s->c_method_head = c_hdr_method_head;
                        s->c_complete = bend;
                    }
                }
                free(blk);
                blk = NULL;
            }
        } else if (blk) {
            c_broken = 1; /* another frame inside a header block */
        }
    }
    free(blk);
    nghttp2_hd_inflate_del(inf);
}

static int lower_name(const uint8_t *n, size_t l) {
    for (size_t i = 0; i < l; i++)
        if (n[i] >= 'A' && n[i] <= 'Z') return 0;
    return 1;
}

static int name_is(const nghttp2_nv *nv, const char *s) {
    return nv->namelen == strlen(s) && memcmp(nv->name, s, nv->namelen) == 0;
}

typedef struct {
    st_t *s;
    size_t at;
    int nfields, trailers, status;
    long long clen;
} blk_ctx_t;

static void s_field(const nghttp2_nv *nv, void *arg) {
    blk_ctx_t *b = arg;
    size_t at = b->at;
    uint32_t id = b->s->id;
    b->nfields++;
    if (nv->namelen == 0) fail(at, "stream %u: an empty field name", id);
    if (!lower_name(nv->name, nv->namelen))
        fail(at, "stream %u: field name '%.*s' has upper case", id, (int)nv->namelen, nv->name);
    static const char *const hop[] = {"connection", "keep-alive",       "transfer-encoding",
                                      "upgrade",    "proxy-connection", "te",
                                      "x-injected"};
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (name_is(nv, hop[i])) fail(at, "stream %u: a '%s' field in a response", id, hop[i]);
    for (size_t i = 0; i < nv->namelen; i++)
        if (nv->name[i] <= ' ' || (nv->name[i] == ':' && i > 0) || nv->name[i] >= 0x7f)
            fail(at, "stream %u: a bad byte in field name '%.*s'", id, (int)nv->namelen, nv->name);
    for (size_t i = 0; i < nv->valuelen; i++)
        if (nv->value[i] == '\r' || nv->value[i] == '\n' || nv->value[i] == 0)
            fail(at, "stream %u: CR, LF or NUL in the value of '%.*s'", id, (int)nv->namelen,
                 nv->name);
    if (nv->valuelen && (nv->value[0] == ' ' || nv->value[0] == '\t' ||
                         nv->value[nv->valuelen - 1] == ' ' || nv->value[nv->valuelen - 1] == '\t'))
        fail(at, "stream %u: white space around the value of '%.*s'", id, (int)nv->namelen,
             nv->name);
    if (nv->name[0] == ':') {
        if (b->trailers) fail(at, "stream %u: a pseudo-header in trailers", id);
        if (!name_is(nv, ":status") || b->nfields != 1)
            fail(at, "stream %u: pseudo-header '%.*s' (only :status, first)", id, (int)nv->namelen,
                 nv->name);
        if (nv->valuelen != 3 || nv->value[0] < '1' || nv->value[0] > '5' || nv->value[1] < '0' ||
            nv->value[1] > '9' || nv->value[2] < '0' || nv->value[2] > '9')
            fail(at, "stream %u: :status '%.*s'", id, (int)nv->valuelen, nv->value);
        b->status = (nv->value[0] - '0') * 100 + (nv->value[1] - '0') * 10 + nv->value[2] - '0';
        return;
    }
    if (!b->trailers && b->nfields == 1)
        fail(at, "stream %u: a response without :status first", id);
    if (name_is(nv, "content-length")) {
        if (b->trailers) fail(at, "stream %u: content-length in trailers", id);
        if (b->clen >= 0) fail(at, "stream %u: two content-length fields", id);
        if (nv->valuelen == 0 || nv->valuelen > 18) fail(at, "stream %u: bad content-length", id);
        long long v = 0;
        for (size_t i = 0; i < nv->valuelen; i++) {
            if (nv->value[i] < '0' || nv->value[i] > '9')
                fail(at, "stream %u: bad content-length", id);
            v = v * 10 + (nv->value[i] - '0');
        }
        b->clen = v;
    }
}

/* The stream's response is over (END_STREAM): its DATA matches. */
static void s_end(st_t *s, size_t at) {
    s->s_ended = 1;
    int st = s->s_status;
    if (st == 204 || st == 304 || (st >= 100 && st < 200) || s->c_method_head) {
        if (s->s_data)
            fail(at, "stream %u: %llu bytes of DATA in a %d response%s", s->id,
                 (unsigned long long)s->s_data, st, s->c_method_head ? " to a HEAD" : "");
    } else if (s->s_clen >= 0 && (uint64_t)s->s_clen != s->s_data) {
        fail(at, "stream %u: content-length %lld, but %llu bytes of DATA (status %d)", s->id,
             s->s_clen, (unsigned long long)s->s_data, st);
    }
}

static void check_output(int settled) {
    const uint8_t *o = (const uint8_t *)obuf, *p = o, *end = o + olen;
    nghttp2_hd_inflater *inf;
    if (nghttp2_hd_inflate_new(&inf) != 0) abort();
    if (c_table > 4096) nghttp2_hd_inflate_change_table_size(inf, c_table);
    uint8_t *blk = NULL;
    size_t blen = 0, bat = 0;
    uint32_t bsid = 0, goaway_last = 0x7fffffff;
    uint8_t bflags = 0;
    int nframes = 0, acks = 0, pongs = 0, goaway_err = 0;
    uint64_t conn_flow = 0;
    while (p < end) {
        size_t at = (size_t)(p - o);
        if (end - p < 9) {
            if (settled) fail(at, "a frame header cut short");
            break;
        }
        size_t len = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
        uint8_t type = p[3], fl = p[4];
        if (p[5] & 0x80) fail(at, "the reserved bit of a stream id is set");
        uint32_t sid = (uint32_t)p[5] << 24 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 8 | p[8];
        if (len > c_max_frame)
            fail(at, "a frame of %zu bytes (the client's limit is %u)", len, c_max_frame);
        if ((size_t)(end - p - 9) < len) {
            if (settled) fail(at, "a frame cut short");
            break;
        }
        const uint8_t *pl = p + 9;
        p += 9 + len;
        if (nframes++ == 0 && (type != NGHTTP2_SETTINGS || (fl & NGHTTP2_FLAG_ACK)))
            fail(at, "the server's first frame is not its SETTINGS");
        if (blk && (type != NGHTTP2_CONTINUATION || sid != bsid))
            fail(at, "a frame of type %u inside the header block of stream %u", type, bsid);
        int conn_frame = type == NGHTTP2_SETTINGS || type == NGHTTP2_PING || type == NGHTTP2_GOAWAY;
        if (conn_frame && sid != 0) fail(at, "a frame of type %u on stream %u", type, sid);
        if (!conn_frame && type != NGHTTP2_WINDOW_UPDATE && (sid == 0 || !(sid & 1)))
            fail(at, "a frame of type %u on stream %u", type, sid);
        st_t *s = sid ? st_find(sid, 0) : NULL;
        switch (type) {
        case NGHTTP2_DATA: {
            if (s == NULL || !s->s_final)
                fail(at, "DATA on stream %u before its response's HEADERS", sid);
            if (s->s_ended || s->s_reset) fail(at, "DATA on stream %u after its end", sid);
            size_t pad = 0;
            if (fl & NGHTTP2_FLAG_PADDED) pad = len ? pl[0] + 1u : 1u;
            if (pad > len) fail(at, "DATA with bad padding");
            s->s_data += len - pad;
            s->s_flow += len;
            conn_flow += len;
            if (s->s_flow > (uint64_t)c_init_win + s->c_window)
                fail(at, "stream %u: %llu bytes of DATA, past the window the client gave (%llu)",
                     sid, (unsigned long long)s->s_flow,
                     (unsigned long long)(c_init_win + s->c_window));
            if (conn_flow > c_conn_window)
                fail(at, "%llu bytes of DATA, past the connection's window (%llu)",
                     (unsigned long long)conn_flow, (unsigned long long)c_conn_window);
            if (fl & NGHTTP2_FLAG_END_STREAM) s_end(s, at);
            break;
        }
        case NGHTTP2_HEADERS:
            if (s == NULL) fail(at, "HEADERS on stream %u, which the client never opened", sid);
            if (s->s_ended || s->s_reset) fail(at, "HEADERS on stream %u after its end", sid);
            if (!s->s_headers && sid > goaway_last)
                fail(at, "a response on stream %u after a GOAWAY with last stream %u", sid,
                     goaway_last);
            if (fl & (NGHTTP2_FLAG_PADDED | NGHTTP2_FLAG_PRIORITY))
                fail(at, "HEADERS with padding or priority from the server");
            s->s_headers = 1;
            blk = malloc(len + 1);
            memcpy(blk, pl, len);
            blen = len;
            bsid = sid;
            bflags = fl;
            bat = at;
            break;
        case NGHTTP2_CONTINUATION:
            if (blk == NULL) fail(at, "a CONTINUATION without its HEADERS");
            blk = realloc(blk, blen + len + 1);
            memcpy(blk + blen, pl, len);
            blen += len;
            fl |= bflags & NGHTTP2_FLAG_END_STREAM;
            break;
        case NGHTTP2_RST_STREAM:
            if (len != 4) fail(at, "RST_STREAM of %zu bytes", len);
            if (s == NULL) fail(at, "RST_STREAM on stream %u, which the client never used", sid);
            s->s_reset = 1;
            break;
        case NGHTTP2_SETTINGS:
            if (fl & NGHTTP2_FLAG_ACK) {
                if (len) fail(at, "a SETTINGS ACK with a payload");
                if (++acks > c_settings) fail(at, "more SETTINGS ACKs than SETTINGS came");
            } else {
                if (len % 6) fail(at, "SETTINGS of %zu bytes", len);
                if (nframes != 1) fail(at, "a second SETTINGS from the server");
            }
            break;
        case NGHTTP2_PING:
            if (len != 8) fail(at, "PING of %zu bytes", len);
            if (!(fl & NGHTTP2_FLAG_ACK)) fail(at, "a PING from the server that is no ACK");
            if (++pongs > c_pings) fail(at, "more PING ACKs than PINGs came");
            break;
        case NGHTTP2_GOAWAY: {
            if (len < 8) fail(at, "GOAWAY of %zu bytes", len);
            uint32_t last = (uint32_t)(pl[0] & 0x7f) << 24 | (uint32_t)pl[1] << 16 |
                            (uint32_t)pl[2] << 8 | pl[3];
            uint32_t code =
                (uint32_t)pl[4] << 24 | (uint32_t)pl[5] << 16 | (uint32_t)pl[6] << 8 | pl[7];
            if (last > goaway_last) fail(at, "a GOAWAY raises the last stream id to %u", last);
            goaway_last = last;
            if (code) goaway_err = 1;
            break;
        }
        case NGHTTP2_WINDOW_UPDATE: {
            if (len != 4) fail(at, "WINDOW_UPDATE of %zu bytes", len);
            uint32_t v = (uint32_t)(pl[0] & 0x7f) << 24 | (uint32_t)pl[1] << 16 |
                         (uint32_t)pl[2] << 8 | pl[3];
            if (v == 0) fail(at, "a WINDOW_UPDATE of 0");
            break;
        }
        default: fail(at, "a frame of type %u from the server", type);
        }
        if (blk && (fl & NGHTTP2_FLAG_END_HEADERS)) {
            st_t *bs = st_find(bsid, 0);
            blk_ctx_t b = {bs, bat, 0, bs->s_final, 0, -1};
            if (inflate_block(inf, blk, blen, s_field, &b) < 0)
                fail(bat, "stream %u: the response's HPACK does not decode", bsid);
            free(blk);
            blk = NULL;
            int es = (bflags & NGHTTP2_FLAG_END_STREAM) != 0;
            if (bs->s_final) {
                if (!es) fail(bat, "stream %u: trailers without END_STREAM", bsid);
            } else {
                if (b.status == 0) fail(bat, "stream %u: a response without :status", bsid);
                if (b.status < 200) {
                    if (es) fail(bat, "stream %u: an interim %d ends the stream", bsid, b.status);
                    if (b.clen >= 0)
                        fail(bat, "stream %u: an interim %d with content-length", bsid, b.status);
                } else {
                    bs->s_final = 1;
                    bs->s_status = b.status;
                    bs->s_clen = b.clen;
                }
            }
            if (es) s_end(bs, bat);
        }
    }
    free(blk);
    nghttp2_hd_inflate_del(inf);
    if (settled && olen == 0) fail(0, "no answer at all to the preface");
    /* Every complete request was answered, when nothing excuses it. */
    if (settled && !goaway_err && !c_broken) {
        for (int i = 0; i < nsts; i++) {
            st_t *s = &sts[i];
            if (!s->c_complete || s->c_rst || s->id > goaway_last) continue;
            if (!s->s_headers && !s->s_reset)
                fail(olen, "stream %u: a complete request with no answer after the loop settled",
                     s->id);
        }
    }
}

/* ---- one connection ------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 16 * 1024) return 0;
    uint8_t mode = data[0];
    int raw = mode & 1, preface = !(raw && (mode & 2));
    early = (mode & 4) != 0;
    in_data = data;
    in_size = size;
    olen = 0;
    clen_ = csent = 0;
    nsts = 0;
    server_closed = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) abort();
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(40000)};
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lx_worker_update_time(&W);
    lx_conn_open(&W, sv[0], (struct sockaddr *)&peer, LX_CONN_H2);
    if (preface) cput(PREFACE, 24);
    if (raw) {
        size_t piece = mode & 8 ? (size_t)(mode >> 4) * 5 + 1 : size;
        for (size_t at = 1; at < size; at += piece) {
            cput(data + at, size - at < piece ? size - at : piece);
            send_out();
        }
        send_out();
    } else {
        if (nghttp2_hd_deflate_new(&cdefl, 4096) != 0) abort();
        rp = data + 1;
        rend = data + size;
        /* The client's SETTINGS that must follow its preface, unless bit 3
         * leaves it to the input. */
        if (!(mode & 8)) frame_hd(0, NGHTTP2_SETTINGS, 0, 0);
        int reloads = 2;
        while (rp < rend && clen_ < (1 << 20)) {
            uint8_t op = rb();
            if ((op & 15) == 10) {
                send_out();
                if (op & 0x10) settle();
            } else if ((op & 15) == 12) {
                send_out();
                lx_conn_t *c = world_conn();
                if (c) lx_conn_drain(c);
            } else if ((op & 15) == 13) {
                send_out();
                if (reloads-- > 0) world_reload();
            } else {
                build_frame(op);
            }
        }
        send_out();
        nghttp2_hd_deflate_del(cdefl);
    }
    if (!early) settle();
    int settled = !early && !server_closed;
    /* The half-close: luxd must close, without waiting on a timer. */
    shutdown(sv[1], SHUT_WR);
    int idle = 0;
    while (!server_closed) {
        if (turn()) {
            idle = 0;
            continue;
        }
        if (!world_conn()) {
            drain();
            break;
        }
        if (++idle > 200) {
            if (getenv("LUXD_FUZZ_STALL_OK") == NULL)
                fail(olen, "stall: the client's EOF came, yet luxd does not close (it waits "
                           "on a timer)");
            /* Told to go on (to fuzz past a known stall): the close the
             * timer would bring, now. */
            lx_conn_t *c = world_conn();
            if (c) lx_conn_close(c);
            idle = 0;
        }
    }
    close(sv[1]);
    for (int i = 0; i < 4; i++)
        uv_run(&W.loop, UV_RUN_NOWAIT);
    /* A job of a stream whose connection went (a file read) still runs: it
     * ends, and frees what it holds, before the next input. */
    for (int i = 0; i < 1000 && W.loop.active_reqs.count; i++)
        uv_run(&W.loop, UV_RUN_ONCE);
    if (getenv("LUXD_FUZZ_DUMP")) fwrite(obuf, 1, olen, stderr);
    if (!preface && !(olen >= 9 && obuf[3] == NGHTTP2_SETTINGS)) return 0; /* HTTP/1 */
    /* Without the harness's preface, the frames count only after the
     * input's own. */
    size_t skip = preface || (clen_ >= 24 && memcmp(cbuf, PREFACE, 24) == 0) ? 24 : clen_;
    scan_client(cbuf + skip, clen_ > skip ? clen_ - skip : 0);
    check_output(settled);
    return 0;
}
