/* The strict HTTP/1 response parser of upstream connections
 * (src/upstream/h1resp.c): each input is what a backend sends back for one
 * request. It is parsed twice, once in a single feed and once cut into
 * pieces the way reads may cut it, and both runs must agree on everything:
 * the outcome, the reason for an error, the heads ops->head saw (status,
 * length, every field), the body bytes and how many bytes the response took.
 *
 * The first four bytes are the set-up:
 *   byte 0: bit 0 the request was HEAD; bit 1 the backend closes after the
 *           last byte (lx_h1resp_eof); bits 2-3 the cuts: 0 pieces of
 *           0..16 bytes (a feed may be empty), 1 pieces of 1..300, 2 one
 *           byte at a time, 3 two pieces cut where bytes 2-3 say;
 *   byte 1: max_header_bytes, 32 + 32 * byte 1 (32..8192);
 *   bytes 2-3: the seed of the cuts (or the one cut's offset).
 *
 * What must hold in every run besides: no crash, leak or sanitizer report;
 * MORE took every byte given, DONE no more than given, a feed after DONE
 * takes nothing and says DONE, an error has a reason and stays an error;
 * ops->head sees a status in 100..599 but 101, at most one final head and
 * nothing after it, fields that lie in the parser's own buffer (the head is
 * copied; the pieces fed are freed after each feed, so a pointer into one
 * would be caught), names that are tokens, values with no CR, LF or NUL and
 * no whitespace at either end, at most one Content-Length and p->length
 * equal to it, Transfer-Encoding only as one lone "chunked"; head bytes kept
 * within max_header_bytes; body bytes only after a final head that may have
 * a body (not for HEAD, 204, 304 or a 1xx), never more than its
 * Content-Length and all of it at DONE; the close completes only a body
 * that runs until the close, and such a connection is never kept. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "upstream/h1resp.h"

static const uint8_t *in_data;
static size_t in_size;

static void fail(const char *fmt, const char *what) {
    fprintf(stderr, "fuzz_h1resp: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\ninput (%zu bytes): ", in_size);
    for (size_t i = 0; i < in_size && i < 2048; i++) {
        unsigned char c = in_data[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            fputc(c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "\n");
    abort();
}

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) fail("%s", what);                                                             \
    } while (0)

/* ---- what one run saw --------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

static void put(buf_t *b, const void *s, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (b->p == NULL) abort();
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
}

typedef struct {
    int head_request;
    buf_t heads; /* status, length, then per field: lengths and bytes */
    buf_t body;
    int finals;     /* final heads seen */
    int no_body;    /* the final head has no body (HEAD, 204, 304) */
    int64_t length; /* the final head's p->length */
    int chunked;    /* the final head said chunked */
    uint64_t got;   /* body bytes so far */
} rec_t;

static int tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int ieq(lx_str_t s, const char *lower) {
    return s.len == strlen(lower) && strncasecmp(s.p, lower, s.len) == 0;
}

static int on_head(lx_h1resp_t *p) {
    rec_t *r = p->data;
    CHECK(p->status >= 100 && p->status <= 599, "ops->head saw a status outside 100..599");
    CHECK(p->status != 101, "ops->head saw a 101");
    CHECK(r->finals == 0, "a head after the final head");
    CHECK(p->hlen <= p->max_head, "more head bytes kept than max_header_bytes");
    int cls = 0, tes = 0;
    uint64_t cl = 0;
    for (unsigned i = 0; i < p->nheaders; i++) {
        lx_str_t n = p->headers[i].name, v = p->headers[i].value;
        const char *lo = p->hbuf, *hi = p->hbuf + p->hlen;
        CHECK(n.len > 0 && n.p >= lo && n.p + n.len <= hi,
              "a field name outside the parser's buffer");
        CHECK(v.len == 0 || (v.p >= lo && v.p + v.len <= hi),
              "a field value outside the parser's buffer");
        for (size_t k = 0; k < n.len; k++)
            CHECK(tchar((unsigned char)n.p[k]), "a field name that is no token");
        for (size_t k = 0; k < v.len; k++)
            CHECK(v.p[k] != '\r' && v.p[k] != '\n' && v.p[k] != '\0',
                  "a CR, LF or NUL in a field value");
        CHECK(v.len == 0 || (v.p[0] != ' ' && v.p[0] != '\t' && v.p[v.len - 1] != ' ' &&
                             v.p[v.len - 1] != '\t'),
              "whitespace at an end of a field value");
        if (ieq(n, "content-length")) {
            cls++;
            cl = 0;
            for (size_t k = 0; k < v.len; k++) {
                CHECK(v.p[k] >= '0' && v.p[k] <= '9', "a Content-Length that is no number");
                cl = cl * 10 + (uint64_t)(v.p[k] - '0');
            }
        } else if (ieq(n, "transfer-encoding")) {
            tes++;
            CHECK(ieq(v, "chunked"), "a transfer coding other than chunked");
        }
    }
    CHECK(cls <= 1, "two Content-Length fields");
    CHECK(tes <= 1, "two Transfer-Encoding fields");
    CHECK(!(cls && tes), "Content-Length with Transfer-Encoding");
    CHECK(cls ? p->length == (int64_t)cl : p->length == -1, "p->length is not the Content-Length");
    /* The transcript both runs must share. */
    int32_t st = p->status;
    put(&r->heads, &st, sizeof(st));
    put(&r->heads, &p->length, sizeof(p->length));
    for (unsigned i = 0; i < p->nheaders; i++) {
        lx_str_t n = p->headers[i].name, v = p->headers[i].value;
        put(&r->heads, &n.len, sizeof(n.len));
        put(&r->heads, n.p, n.len);
        put(&r->heads, &v.len, sizeof(v.len));
        put(&r->heads, v.p, v.len);
    }
    if (p->status >= 200) {
        r->finals++;
        r->no_body = r->head_request || p->status == 204 || p->status == 304;
        r->length = p->length;
        r->chunked = tes != 0;
    }
    return 0;
}

static int on_body(lx_h1resp_t *p, const char *at, size_t len) {
    rec_t *r = p->data;
    CHECK(r->finals == 1, "body bytes before a final head");
    CHECK(!r->no_body, "body bytes for HEAD, a 204 or a 304");
    CHECK(len > 0, "an empty body piece");
    r->got += len;
    CHECK(r->length < 0 || r->got <= (uint64_t)r->length, "more body than the Content-Length");
    put(&r->body, at, len);
    return 0;
}

static const lx_h1resp_ops_t ops = {on_head, on_body};

typedef struct {
    int rc;
    const char *why;
    size_t used;
    int keepalive;
    rec_t rec;
} out_t;

static uint32_t rnd_state;

static uint32_t rnd(void) {
    uint32_t x = rnd_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return rnd_state = x;
}

/* mode -1: one feed; else as byte 0 bits 2-3 say. */
static void run(const uint8_t *d, size_t len, int head, int eof, size_t max, int mode,
                uint16_t seed, out_t *o) {
    lx_h1resp_t p;
    memset(o, 0, sizeof(*o));
    o->rec.head_request = head;
    lx_h1resp_init(&p, max, head, &ops, &o->rec);
    rnd_state = 0x9e3779b9u ^ seed;
    lx_h1resp_rc_t rc = LX_H1R_MORE;
    size_t off = 0;
    int first = 1;
    while (off < len || first) {
        size_t n = len - off;
        if (mode == 0) n = rnd() % 17;
        if (mode == 1) n = 1 + rnd() % 300;
        if (mode == 2) n = 1;
        if (mode == 3) n = first ? seed % (len + 1) : len - off;
        if (n > len - off) n = len - off;
        first = 0;
        char *piece = malloc(n ? n : 1);
        if (n) memcpy(piece, d + off, n);
        size_t used = (size_t)-1;
        rc = lx_h1resp_feed(&p, piece, n, &used);
        free(piece);
        if (rc == LX_H1R_MORE) {
            CHECK(used == n, "MORE, yet not every byte was taken");
            off += n;
            continue;
        }
        if (rc == LX_H1R_DONE) {
            CHECK(used <= n, "DONE took more bytes than it was given");
            o->used = off + used;
        } else {
            CHECK(rc == LX_H1R_ERROR, "an outcome that is none of MORE, DONE, ERROR");
            CHECK(used == 0, "an error took bytes");
        }
        break;
    }
    if (rc == LX_H1R_MORE) {
        o->used = len;
        if (eof) {
            rc = lx_h1resp_eof(&p);
            if (rc == LX_H1R_DONE) {
                CHECK(o->rec.finals == 1 && o->rec.length == -1 && !o->rec.chunked &&
                          !o->rec.no_body,
                      "the close completed a response whose body does not run until the close");
                CHECK(!lx_h1resp_keepalive(&p), "a close-delimited response kept the connection");
            }
        }
    }
    if (rc == LX_H1R_DONE) {
        CHECK(o->rec.finals == 1, "DONE without a final head");
        if (o->rec.no_body)
            CHECK(o->rec.got == 0, "a body for HEAD, a 204 or a 304");
        else if (o->rec.length >= 0)
            CHECK(o->rec.got == (uint64_t)o->rec.length, "DONE before all of the Content-Length");
        o->keepalive = lx_h1resp_keepalive(&p);
        size_t used = (size_t)-1;
        CHECK(lx_h1resp_feed(&p, (const char *)d, len, &used) == LX_H1R_DONE && used == 0,
              "a feed after DONE took bytes");
        CHECK(lx_h1resp_eof(&p) == LX_H1R_DONE, "the close after DONE was not DONE");
    } else if (rc == LX_H1R_ERROR) {
        CHECK(p.why != NULL, "an error without a reason");
        const char *why = p.why;
        size_t used = (size_t)-1;
        CHECK(lx_h1resp_feed(&p, (const char *)d, len, &used) == LX_H1R_ERROR && used == 0,
              "a feed after an error was no error");
        CHECK(lx_h1resp_eof(&p) == LX_H1R_ERROR && p.why == why,
              "the close after an error changed it");
    } else {
        CHECK(!lx_h1resp_keepalive(&p), "keep-alive before the response ended");
    }
    o->rc = rc;
    o->why = p.why;
    lx_h1resp_free(&p);
}

static void out_free(out_t *o) {
    free(o->rec.heads.p);
    free(o->rec.body.p);
}

static int same_buf(const buf_t *a, const buf_t *b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4 || size > 64 * 1024) return 0;
    in_data = data;
    in_size = size;
    int head = data[0] & 1, eof = (data[0] >> 1) & 1, mode = (data[0] >> 2) & 3;
    size_t max = 32 + 32 * (size_t)data[1];
    uint16_t seed = (uint16_t)(data[2] | data[3] << 8);
    const uint8_t *d = data + 4;
    size_t len = size - 4;

    out_t whole, cut;
    run(d, len, head, eof, max, -1, seed, &whole);
    run(d, len, head, eof, max, mode, seed, &cut);
    CHECK(whole.rc == cut.rc, "the cuts changed the outcome");
    CHECK((whole.why == NULL) == (cut.why == NULL) &&
              (whole.why == NULL || strcmp(whole.why, cut.why) == 0),
          "the cuts changed the reason for the error");
    CHECK(same_buf(&whole.rec.heads, &cut.rec.heads), "the cuts changed the heads");
    CHECK(same_buf(&whole.rec.body, &cut.rec.body), "the cuts changed the body");
    CHECK(whole.rc != LX_H1R_DONE || whole.used == cut.used,
          "the cuts changed where the response ends");
    CHECK(whole.keepalive == cut.keepalive, "the cuts changed keep-alive");
    out_free(&whole);
    out_free(&cut);
    return 0;
}
