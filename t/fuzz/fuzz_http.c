/* The whole request path, in process: each input is what one client sends on
 * one connection. The harness runs a worker loop of its own (no thread, no
 * listener), hands it one end of a socketpair through lx_conn_accept as
 * worker.c does for an accepted socket, writes the input into the other end
 * (whole, or in small pieces with the loop run in between, so requests split
 * at every kind of boundary), half-closes, and runs the loop until luxd
 * closes the connection. Then it checks the bytes that came back.
 *
 * What must hold for every input: no crash and no sanitizer report; the
 * connection is answered and closed without waiting on a timer (everything the
 * client will ever send has arrived, so any wait is a stall); and the output
 * is a sequence of well-framed HTTP/1.1 responses: a status line, header
 * lines that are all "name: value" with no stray CR or LF (no header
 * injection through a Location or a policy), a body delimited exactly by its
 * Content-Length or by chunked framing, nothing at all after a response that
 * said "Connection: close", and the last response complete.
 *
 * The harness parses the input itself (llhttp, as luxd does) to know what
 * each response answers: a response to a HEAD whose connection goes on has
 * no body at all, one to any other request carries all of its
 * Content-Length, a 1.0 request never gets chunked, and a policy that sees
 * an X-T header (and says so in X-T-Echo) saw it in the request's header
 * section with that value, never in its trailers (issue 8 #3). The policy
 * turns "\r" and "\n" in header values it copies into CR and LF, so
 * that what guards a response against header injection is reachable; no
 * response may carry the X-Injected header that such an injection would add.
 *
 * The config (written at start-up into a temporary directory) uses what
 * the request path offers: two vhosts and an alias, access rules with every
 * condition, rewrites and redirects with captures, locations with their own
 * root, error pages, listings, gzip_static, and a policy that reads headers,
 * sets headers, answers, redirects and uses the shared store.
 *
 * The first input byte is the mode: bits 0-5 give the piece size minus one
 * when bit 6 is set (pieces); otherwise the input is written at once. Bit 7
 * reloads the config between pieces. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "llhttp.h"
#include "h1/conn.h"
#include "h1/h1.h"
#include "handlers/handler.h"
#include "io/filecache.h"
#include "log.h"
#include "policy/policy.h"
#include "worker.h"
#include "common/world.h"

static const char config[] =
    "server {\n"
    "  listen = { '127.0.0.1:1' }, workers = 1,\n"
    "  error_log = DIR .. '/error.log', error_log_level = 'error',\n"
    "  access_log = DIR .. '/access.log', access_log_buffer = 512,\n"
    "  header_timeout = 3, body_timeout = 3, send_timeout = 3, "
    "keepalive_timeout = 3,\n"
    "  keepalive_requests = 20, max_header_bytes = 2048, max_body_bytes = "
    "4096,\n"
    "}\n"
    "mime { ['.long'] = 'application/' .. string.rep('x', 520) }\n"
    "vhost 'localhost' {\n"
    "  default = true, aliases = { 'alias.test', '*.wild.test' },\n"
    "  root = DIR .. '/www', index = { 'index.html' },\n"
    "  headers = { ['X-Site'] = 'main' }, cache_control = 'public, "
    "max-age=60',\n"
    "  gzip_static = true, dir_listing = false,\n"
    "  error_pages = { [404] = '/404.html', [403] = '/403.html' },\n"
    "  access = {\n"
    "    deny  { suffix = { '~', '.inc' } },\n"
    "    deny  { regex = [[/\\.]] },\n"
    "    allow { prefix = '/private/', from = { '127.0.0.1', '::1' } },\n"
    "    deny  { prefix = '/private/' },\n"
    "    deny  { prefix = '/admin/', from = { '10.0.0.0/8' } },\n"
    "    deny  { method = { 'TRACE', 'DELETE', 'PUT' }, status = 405 },\n"
    "    deny  { regex = [[^/(s3cr3t)/(.*)/(.*)$]], status = 404 },\n"
    "  },\n"
    "  rewrite = {\n"
    "    { [[^/old/(.*)\\.html$]], '/new/$1.html' },\n"
    "    { [[^/u/(\\w+)$]], '/user.html?name=$1' },\n"
    "    { [[^/two/(\\w+)/(\\w+)$]], '/$2/$1.txt' },\n"
    "    { [[^/nine/(.)(.)(.)(.)(.)(.)(.)(.)(.)$]], '/$9$8$7$6$5$4$3$2$1.txt' "
    "},\n"
    "    { [[^/esc/(.*)$]], '/sub/../../../$1' },\n"
    "    { [[^/loop/(.*)$]], '/loop/$1' },\n"
    "    { [[^/q/(.*)$]], '/$1.txt' },\n"
    "  },\n"
    "  redirect = {\n"
    "    { [[^/home$]], '/', status = 301 },\n"
    /* Optional groups that did not take part: after the three-group
     * access regex above matched an earlier request, they must expand to
     * nothing, never to that request's bytes (issue 8 #5). */
    "    { [[^/go/(a)?(b)?(.*)$]], '/to/$1/$2/$3' },\n"
    "    { [[^/r307/([^/]*)/(.*)$]], '/temp/$2/$1', status = 307 },\n"
    "    { [[^/abs/(.*)$]], 'http://$1.example/x?from=luxd', status = 308 },\n"
    "  },\n"
    "  location '/other/' { root = DIR .. '/other', dir_listing = true },\n"
    "  location '/static/' { cache_control = 'no-store', headers = { ['X-Loc'] "
    "= 'static' } },\n"
    "  location '/pol/' {\n"
    "    policy = function(r)\n"
    "      local k = r.headers['x-key']\n"
    "      local t = r.headers['x-t']\n"
    "      if t then r:set_header('X-T-Echo', t) end\n"
    "      if r.path:find('^/pol/deny') then return 403 end\n"
    "      if r.path:find('^/pol/respond') then r:respond(200, 'from policy ' "
    ".. #r.path) return "
    "end\n"
    "      if r.path:find('^/pol/empty') then r:respond(204) return end\n"
    "      if r.path:find('^/pol/go') then\n"
    "        r:redirect((('/index.html?' .. (r.query or '')):gsub('%%0[dD]', "
    "'\\r'):gsub('%%0[aA]', '\\n')))\n"
    "        return\n"
    "      end\n"
    "      if r.path:find('^/pol/hdr') then r:set_header('X-Echo', "
    "tostring(k)) end\n"
    "      if r.path:find('^/pol/any') then\n"
    "        local n = r.headers['x-n'] or 'X-A'\n"
    "        if n:lower() == 'x-injected' then n = 'X-A' end\n"
    "        local v = (r.headers['x-v'] or 'v'):gsub('\\\\r', "
    "'\\r'):gsub('\\\\n', '\\n')\n"
    "        r:set_header(n, v)\n"
    "        local st = tonumber(r.headers['x-s'])\n"
    "        if st then r:respond(st, r.headers['x-b']) return end\n"
    "      end\n"
    "      if k then\n"
    "        local n = luxd.shared.incr('n:' .. k:sub(1, 16), 1, 60)\n"
    "        if n and n > 50 then return 429 end\n"
    "        luxd.shared.set('last', r.path, 60)\n"
    "        local v = luxd.shared.get('last')\n"
    "      end\n"
    "    end,\n"
    "  },\n"
    "}\n"
    "vhost 'b.test' {\n"
    "  root = DIR .. '/b', index = { 'index.html' },\n"
    "  policy = function(r) if r.headers['x-user'] ~= 'admin' then return 401 "
    "end end,\n"
    "}\n";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    world_dir("fuzz");
    put_str("www/index.html", "<h1>home</h1>\n");
    put_str("www/404.html", "custom 404\n");
    put_str("www/a.txt", "0123456789abcdefghijklmnopqrstuvwxyz\n");
    put_str("www/a.txt.gz", "\x1f\x8b not really gzip");
    put_str("www/new/page.html", "new page\n");
    put_str("www/user.html", "user\n");
    put_str("www/y/x.txt", "swapped\n");
    put_str("www/987654321.txt", "nine\n");
    put_str("www/private/p.txt", "private\n");
    put_str("www/admin/a.txt", "admin\n");
    put_str("www/s3cr3t/x/y", "secret\n");
    put_str("www/static/s.css", "body{}\n");
    put_str("www/.hidden", "hidden\n");
    put_str("www/x.inc", "inc\n");
    put_str("www/sub/index.html", "sub\n");
    put_str("www/pol/f.txt", "policy file\n");
    put_str("www/pol/any", "policy any\n");
    put_str("www/f.long", "a file whose MIME type is 532 bytes long\n");
    put_str("other/o.txt", "other root\n");
    put_str("other/d/e.txt", "listed\n");
    put_str("b/index.html", "b site\n");
    /* Large enough for several read-aheads, sendfile and many ranges. */
    size_t big = 300 * 1024;
    char *b = malloc(big);
    for (size_t i = 0; i < big; i++)
        b[i] = (char)('a' + i % 26);
    put_file("www/big.bin", b, big);
    free(b);

    world_start(config);
    return 0;
}

/* ---- what the client asked ---------------------------------------------- */

/* One request of the input as llhttp frames it, with the settings luxd
 * uses (lx_h1_parser_init: strict mode, keep-alive and version lenient),
 * and Upgrade a header like others. */
typedef struct {
    int headers_done; /* the header section was parsed whole */
    int method;       /* llhttp's method; valid once headers_done */
    int minor;        /* HTTP/1.minor */
    int has_xt;       /* X-T was in the header section (not the trailers) */
    size_t xt_len;
    char xt[128];
} req_info_t;

#define MAX_REQS 64
static req_info_t reqs[MAX_REQS];
static int nreqs;
static req_info_t *cur_req;
static char field_buf[8], xt_buf[128];
static size_t field_len, xt_buf_len;
static int field_long, in_headers;

static int rq_begin(llhttp_t *p) {
    (void)p;
    cur_req = nreqs < MAX_REQS ? &reqs[nreqs++] : NULL;
    if (cur_req) memset(cur_req, 0, sizeof(*cur_req));
    in_headers = 1;
    field_len = xt_buf_len = 0;
    field_long = 0;
    return 0;
}

static int rq_field(llhttp_t *p, const char *at, size_t len) {
    (void)p;
    if (field_len + len > sizeof(field_buf)) {
        field_long = 1;
        return 0;
    }
    memcpy(field_buf + field_len, at, len);
    field_len += len;
    return 0;
}

static int is_xt(void) {
    return !field_long && field_len == 3 && strncasecmp(field_buf, "x-t", 3) == 0;
}

static int rq_value(llhttp_t *p, const char *at, size_t len) {
    (void)p;
    if (!in_headers || !is_xt()) return 0;
    size_t k = len < sizeof(xt_buf) - xt_buf_len ? len : sizeof(xt_buf) - xt_buf_len;
    memcpy(xt_buf + xt_buf_len, at, k);
    xt_buf_len += k;
    return 0;
}

static int rq_value_done(llhttp_t *p) {
    (void)p;
    /* The first X-T of the header section is what r.headers['x-t'] gives. */
    if (in_headers && cur_req && is_xt() && !cur_req->has_xt) {
        cur_req->has_xt = 1;
        cur_req->xt_len = xt_buf_len;
        memcpy(cur_req->xt, xt_buf, xt_buf_len);
    }
    field_len = xt_buf_len = 0;
    field_long = 0;
    return 0;
}

static int rq_headers_done(llhttp_t *p) {
    in_headers = 0;
    if (cur_req) {
        cur_req->headers_done = 1;
        cur_req->method = p->method;
        cur_req->minor = p->http_minor > 1 ? 1 : p->http_minor; /* 1.2-1.9 are 1.1 */
    }
    p->upgrade = 0; /* as conn.c on_headers_complete */
    return 0;
}

static void parse_requests(const uint8_t *data, size_t size) {
    static const llhttp_settings_t settings = {
        .on_message_begin = rq_begin,
        .on_header_field = rq_field,
        .on_header_value = rq_value,
        .on_header_value_complete = rq_value_done,
        .on_headers_complete = rq_headers_done,
    };
    llhttp_t p;
    nreqs = 0;
    cur_req = NULL;
    lx_h1_parser_init(&p, &settings);
    llhttp_execute(&p, (const char *)data, size);
}

/* ---- checking the output ------------------------------------------------ */

static const uint8_t *in_data;
static size_t in_size;

static void fail(const char *out, size_t len, size_t at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_http: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (at output byte %zu of %zu)\n--- input (%zu bytes):\n", at, len, in_size);
    fwrite(in_data, 1, in_size > 2000 ? 2000 : in_size, stderr);
    fprintf(stderr, "\n--- output:\n");
    fwrite(out, 1, len > 4000 ? 4000 : len, stderr);
    fprintf(stderr, "\n---\n");
    abort();
}

static int is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int ieq(const char *a, size_t alen, const char *b) {
    return alen == strlen(b) && strncasecmp(a, b, alen) == 0;
}

static void trim(const char **v, size_t *n) {
    while (*n && (**v == ' ' || **v == '\t')) {
        (*v)++;
        (*n)--;
    }
    while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
        (*n)--;
}

static const char *find_crlf(const char *p, const char *end) {
    for (; p + 1 < end; p++)
        if (p[0] == '\r' && p[1] == '\n') return p;
    return NULL;
}

static int starts_response(const char *p, const char *end) {
    return end - p >= 9 && memcmp(p, "HTTP/1.1 ", 9) == 0;
}

/* "bytes a-b/n" at s: stores the three numbers, or fails. */
static void content_range(const char *out, size_t len, const char *s, size_t sl,
                          unsigned long long r[3], int n) {
    char buf[96];
    if (sl >= sizeof(buf)) fail(out, len, (size_t)(s - out), "response %d: long Content-Range", n);
    memcpy(buf, s, sl);
    buf[sl] = '\0';
    int used = 0;
    if (sscanf(buf, "bytes %llu-%llu/%llu%n", &r[0], &r[1], &r[2], &used) != 3 ||
        (size_t)used != sl)
        fail(out, len, (size_t)(s - out), "response %d: bad Content-Range", n);
    if (r[0] > r[1] || r[1] >= r[2])
        fail(out, len, (size_t)(s - out), "response %d: Content-Range outside the file", n);
}

/* A 206: the part matches its Content-Range, or the parts of a multipart
 * body do not overlap and add up to no more than the file (issue 8 #9:
 * overlapping ranges must be merged, and parts that would exceed the file
 * are answered with the whole file and 200). */
static void check_partial(const char *out, size_t len, const char *body, size_t blen, int multipart,
                          const char *crange, size_t crange_len, int n) {
    unsigned long long r[3];
    if (!multipart) {
        if (crange == NULL)
            fail(out, len, (size_t)(body - out), "response %d: 206 without Content-Range", n);
        content_range(out, len, crange, crange_len, r, n);
        if (r[1] - r[0] + 1 != blen)
            fail(out, len, (size_t)(body - out), "response %d: 206 body is not its range", n);
        return;
    }
    unsigned long long seen[64][2], total = 0, size = 0;
    int parts = 0;
    static const char key[] = "\r\nContent-Range: ";
    for (const char *q = body; (q = memmem(q, (size_t)(body + blen - q), key, sizeof(key) - 1));) {
        q += sizeof(key) - 1;
        const char *e = memmem(q, (size_t)(body + blen - q), "\r\n", 2);
        if (e == NULL) fail(out, len, (size_t)(q - out), "response %d: part header cut", n);
        content_range(out, len, q, (size_t)(e - q), r, n);
        if (parts && r[2] != size)
            fail(out, len, (size_t)(q - out), "response %d: parts of two sizes", n);
        size = r[2];
        for (int i = 0; i < parts && i < 64; i++)
            if (r[0] <= seen[i][1] && seen[i][0] <= r[1])
                fail(out, len, (size_t)(q - out),
                     "response %d: overlapping parts %llu-%llu and %llu-%llu", n, seen[i][0],
                     seen[i][1], r[0], r[1]);
        if (parts < 64) {
            seen[parts][0] = r[0];
            seen[parts][1] = r[1];
        }
        parts++;
        total += r[1] - r[0] + 1;
        q = e;
    }
    if (parts == 0)
        fail(out, len, (size_t)(body - out), "response %d: multipart 206 without parts", n);
    if (total > size)
        fail(out, len, (size_t)(body - out),
             "response %d: %d parts send %llu bytes of a %llu-byte file", n, parts, total, size);
}

static void check_output(const char *out, size_t len) {
    const char *p = out, *end = out + len;
    int closed = 0, n = 0, finals = 0;
    while (p < end) {
        size_t at = (size_t)(p - out);
        if (closed) fail(out, len, at, "bytes after a response that said Connection: close");
        n++;
        /* Status line. */
        const char *eol = find_crlf(p, end);
        if (eol == NULL) fail(out, len, at, "response %d: no complete status line", n);
        if (!starts_response(p, end) || eol - p < 12 || p[9] < '1' || p[9] > '5' || p[10] < '0' ||
            p[10] > '9' || p[11] < '0' || p[11] > '9' || (eol - p > 12 && p[12] != ' '))
            fail(out, len, at, "response %d: bad status line", n);
        int status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
        for (const char *q = p; q < eol; q++)
            if (*q == '\r' || *q == '\n' || *q == '\0')
                fail(out, len, at, "response %d: CR, LF or NUL in the status line", n);
        p = eol + 2;
        /* Header lines. */
        long long clen = -1;
        int chunked = 0, te = 0, conn_close = 0, multipart = 0;
        const char *crange = NULL, *echo = NULL;
        size_t crange_len = 0, echo_len = 0;
        for (;;) {
            eol = find_crlf(p, end);
            if (eol == NULL)
                fail(out, len, (size_t)(p - out), "response %d: header block not ended", n);
            if (eol == p) break;
            const char *colon = memchr(p, ':', (size_t)(eol - p));
            if (colon == NULL || colon == p)
                fail(out, len, (size_t)(p - out), "response %d: header line without a name", n);
            for (const char *q = p; q < colon; q++)
                if (!is_tchar((unsigned char)*q))
                    fail(out, len, (size_t)(p - out), "response %d: bad header name", n);
            const char *v = colon + 1, *ve = eol;
            for (const char *q = v; q < ve; q++)
                if (*q == '\r' || *q == '\n' || *q == '\0')
                    fail(out, len, (size_t)(q - out),
                         "response %d: CR, LF or NUL in a header value", n);
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t nl = (size_t)(colon - p), vl = (size_t)(ve - v);
            if (ieq(p, nl, "content-length")) {
                if (clen >= 0)
                    fail(out, len, (size_t)(p - out), "response %d: two Content-Length", n);
                if (vl == 0 || vl > 18)
                    fail(out, len, (size_t)(p - out), "response %d: bad Content-Length", n);
                clen = 0;
                for (size_t i = 0; i < vl; i++) {
                    if (v[i] < '0' || v[i] > '9')
                        fail(out, len, (size_t)(p - out), "response %d: bad Content-Length", n);
                    clen = clen * 10 + (v[i] - '0');
                }
            } else if (ieq(p, nl, "transfer-encoding")) {
                te = 1;
                chunked = ieq(v, vl, "chunked");
            } else if (ieq(p, nl, "connection")) {
                if (ieq(v, vl, "close")) conn_close = 1;
            } else if (ieq(p, nl, "content-type")) {
                multipart = vl >= 20 && strncasecmp(v, "multipart/byteranges", 20) == 0;
            } else if (ieq(p, nl, "content-range")) {
                crange = v;
                crange_len = vl;
            } else if (ieq(p, nl, "x-t-echo")) {
                echo = v;
                echo_len = vl;
            } else if (ieq(p, nl, "x-injected")) {
                fail(out, len, (size_t)(p - out), "response %d: an injected header line", n);
            }
            p = eol + 2;
        }
        p += 2;
        if (te && !chunked)
            fail(out, len, at, "response %d: a transfer coding other than chunked", n);
        if (te && clen >= 0)
            fail(out, len, at, "response %d: Content-Length and Transfer-Encoding", n);
        if (status < 200) {
            if (te || clen >= 0)
                fail(out, len, at, "response %d: a %d with framing headers", n, status);
            if (status != 100) fail(out, len, at, "response %d: interim %d", n, status);
            continue; /* an interim answer; the final one follows */
        }
        /* The request this final response answers, when the harness's own
         * parse got through its header section. */
        const req_info_t *rq = finals < nreqs && reqs[finals].headers_done ? &reqs[finals] : NULL;
        finals++;
        int head = rq && rq->method == HTTP_HEAD;
        if (rq && chunked && rq->minor == 0)
            fail(out, len, at, "response %d: chunked to an HTTP/1.0 request", n);
        if (rq && echo) {
            const char *x = rq->xt;
            size_t xl = rq->xt_len;
            trim(&x, &xl);
            if (!rq->has_xt || xl != echo_len || memcmp(x, echo, xl) != 0)
                fail(out, len, at,
                     "response %d: the policy saw an X-T the request's header section "
                     "does not have (a trailer?)",
                     n);
        }
        if (status == 204 && (te || clen >= 0))
            fail(out, len, at, "response %d: a 204 with framing headers", n);
        if (status == 204 || status == 304) {
            /* No body, whatever the headers say (RFC 9110 6.4.1). */
        } else if (head && !conn_close) {
            /* A HEAD answer announces a length and sends nothing: on a
             * connection that goes on, the next response follows at once
             * (after a close, stray bytes are caught below). */
            if (p != end && !starts_response(p, end))
                fail(out, len, (size_t)(p - out), "response %d: a body after a HEAD", n);
        } else if (chunked) {
            for (;;) {
                eol = find_crlf(p, end);
                if (eol == NULL)
                    fail(out, len, (size_t)(p - out), "response %d: chunk size line cut", n);
                unsigned long long sz = 0;
                const char *q = p;
                if (q == eol) fail(out, len, (size_t)(p - out), "response %d: empty chunk size", n);
                for (; q < eol; q++) {
                    int d = *q >= '0' && *q <= '9'   ? *q - '0'
                            : *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
                            : *q >= 'A' && *q <= 'F' ? *q - 'A' + 10
                                                     : -1;
                    if (d < 0 || sz > (1ULL << 40))
                        fail(out, len, (size_t)(p - out), "response %d: bad chunk size", n);
                    sz = sz * 16 + (unsigned)d;
                }
                p = eol + 2;
                if (sz == 0) {
                    if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
                        fail(out, len, (size_t)(p - out), "response %d: chunked body not ended", n);
                    p += 2;
                    break;
                }
                if ((unsigned long long)(end - p) < sz + 2 || p[sz] != '\r' || p[sz + 1] != '\n')
                    fail(out, len, (size_t)(p - out), "response %d: chunk cut or misframed", n);
                p += sz + 2;
            }
        } else if (clen >= 0) {
            /* A HEAD answer announces a length and sends nothing: then the
             * next response or the end follows at once. Otherwise exactly
             * clen bytes, then the next response or the end. */
            size_t left = (size_t)(end - p);
            if (rq && !head &&
                (left < (size_t)clen || !(p + clen == end || starts_response(p + clen, end))))
                fail(out, len, (size_t)(p - out),
                     "response %d: body does not match Content-Length %lld (%zu bytes follow)", n,
                     clen, left);
            if (left >= (size_t)clen && (p + clen == end || starts_response(p + clen, end))) {
                if (status == 206)
                    check_partial(out, len, p, (size_t)clen, multipart, crange, crange_len, n);
                p += clen;
            } else if (!(clen > 0 && (p == end || starts_response(p, end))))
                fail(out, len, (size_t)(p - out),
                     "response %d: body does not match Content-Length %lld (%zu bytes "
                     "follow)",
                     n, clen, left);
        } else {
            fail(out, len, at, "response %d: a %d without Content-Length or chunked", n, status);
        }
        if (conn_close) closed = 1;
    }
}

/* ---- one connection ------------------------------------------------------ */

static char *obuf;
static size_t olen, ocap;

static int drain(int fd) {
    for (;;) {
        if (ocap - olen < 65536) {
            ocap = ocap ? ocap * 2 : 1 << 20;
            obuf = realloc(obuf, ocap);
        }
        ssize_t n = read(fd, obuf + olen, ocap - olen);
        if (n > 0) {
            olen += (size_t)n;
            continue;
        }
        if (n == 0) return 1; /* luxd closed */
        return 0;
    }
}

/* What tells whether the loop did anything. */
static size_t state(void) {
    lx_conn_t *c = world_conn();
    if (c == NULL) return 0;
    const lx_sess_t *s = c->link.tp.tcp.data;
    size_t sv = s ? s->rlen * 7 + s->rpos * 13 + s->out.n * 17 + s->out.olen * 3 : 0;
    return olen * 31 + sv + c->state + c->nreq * 101;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 64 * 1024) return 0;
    size_t piece = data[0] & 0x40 ? (size_t)(data[0] & 0x3f) + 1 : size;
    /* Bit 7: reload after every fourth piece (twice at most), as SIGHUPs
     * arriving while a keep-alive client is sending. */
    int reloads = data[0] & 0x80 ? 2 : 0, pieces = 0;
    data++;
    size--;
    in_data = data;
    in_size = size;
    olen = 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) abort();
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(40000)};
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lx_worker_update_time(&W);
    lx_conn_open(&W, sv[0], (struct sockaddr *)&peer, 0);
    size_t sent = 0;
    int shut = 0, server_closed = 0, idle = 0;
    while (!server_closed) {
        if (sent < size) {
            size_t k = size - sent < piece ? size - sent : piece;
            ssize_t n = write(sv[1], data + sent, k);
            if (n > 0) sent += (size_t)n;
            if (n > 0 && reloads && ++pieces % 4 == 0) {
                uv_run(&W.loop, UV_RUN_NOWAIT); /* let luxd read the piece first */
                world_reload();
                reloads--;
            }
        }
        if (sent == size && !shut) {
            shutdown(sv[1], SHUT_WR);
            shut = 1;
        }
        size_t before = state();
        server_closed = drain(sv[1]);
        if (server_closed) break;
        lx_conn_t *c = world_conn();
        const lx_sess_t *cs = c ? c->link.tp.tcp.data : NULL;
        if (cs && (cs->req.waiting || cs->req.pending || cs->out.writing)) {
            uv_run(&W.loop, UV_RUN_ONCE); /* a thread-pool job wakes the loop */
            idle = 0;
            continue;
        }
        uv_run(&W.loop, UV_RUN_NOWAIT);
        if (state() == before && shut && !world_conn()) {
            /* Closed, but the socket has not told us yet. */
            server_closed = drain(sv[1]);
            break;
        }
        if (state() == before && shut && ++idle > 200) {
            if (getenv("LUXD_FUZZ_STALL_OK") == NULL)
                fail(obuf, olen, olen,
                     "stall: the whole request and the client's EOF arrived, yet luxd "
                     "neither "
                     "answers nor closes (it waits on a timer)");
            uv_run(&W.loop, UV_RUN_ONCE);
            idle = 0;
        } else if (state() != before) {
            idle = 0;
        }
    }
    close(sv[1]);
    /* Let the close callbacks free the connection before the next input. */
    for (int i = 0; i < 4; i++)
        uv_run(&W.loop, UV_RUN_NOWAIT);
    if (getenv("LUXD_FUZZ_DUMP")) fwrite(obuf, 1, olen, stderr);
    parse_requests(data, size);
    check_output(obuf, olen);
    return 0;
}
