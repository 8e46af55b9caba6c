/* Unit tests for the strict HTTP/1 response parser of upstream connections
 * (src/upstream/h1resp.c): a table of responses, valid and hostile, each
 * parsed whole, then again split at every byte boundary (two feeds, the
 * first one possibly empty) and one byte at a time. Every way of cutting the
 * bytes must give the same outcome, the same heads (status, Content-Length,
 * fields as ops->head saw them), the same body bytes, the same count of bytes
 * taken and the same reason for an error: an upstream's reads may split a
 * response anywhere.
 *
 * The caller's side of the contract (src/handlers/proxy.c on_read): MORE
 * means every byte given was taken; after DONE the caller stops feeding and
 * bytes not taken (*used < len) are not this response's; a feed after DONE
 * returns DONE and takes nothing. Each piece is copied into a buffer of its
 * exact size and freed after its feed, so that ASan sees a read past a piece
 * or a pointer kept into one. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "upstream/h1resp.h"

/* ---- growable byte strings ---------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

static void put(buf_t *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (b->p == NULL) abort();
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void putf(buf_t *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    put(b, tmp, (size_t)n);
}

/* Bytes as text, control bytes and backslash as \xNN, so that a CR, LF or
 * NUL that got through shows (and cannot break the TAP stream). */
static void put_shown(buf_t *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '\\')
            putf(b, "\\x%02x", c);
        else
            put(b, (const char *)&c, 1);
    }
}

static const char *str(const buf_t *b) {
    return b->p ? b->p : "";
}

/* ---- the parser's caller ------------------------------------------------ */

typedef struct {
    buf_t heads;     /* per ops->head: "status length" line, then "name: value" lines */
    buf_t body;      /* what ops->body was given */
    int refuse;      /* 1: ops->head fails a final head, 2: ops->body fails */
    int outside;     /* a field's bytes were not in the parser's own buffer */
    int body_before; /* ops->body was called before any final head */
    int final_heads; /* heads of status 200 and up */
} rec_t;

/* Renders the fields of p->headers; *outside set when one is not inside
 * p->hbuf (the head's bytes are copied: a head may span reads). */
static void render_head(buf_t *b, const lx_h1resp_t *p, int *outside) {
    putf(b, "%d %lld\n", p->status, (long long)p->length);
    for (unsigned i = 0; i < p->nheaders; i++) {
        const lx_header_t *h = &p->headers[i];
        const char *lo = p->hbuf, *hi = p->hbuf + p->hlen;
        if (h->name.len == 0 || h->name.p < lo || h->name.p + h->name.len > hi ||
            (h->value.len && (h->value.p < lo || h->value.p + h->value.len > hi)))
            *outside = 1;
        put_shown(b, h->name.p, h->name.len);
        put(b, ": ", 2);
        put_shown(b, h->value.p, h->value.len);
        put(b, "\n", 1);
    }
}

static int on_head(lx_h1resp_t *p) {
    rec_t *r = p->data;
    render_head(&r->heads, p, &r->outside);
    if (p->status >= 200) r->final_heads++;
    return r->refuse == 1 && p->status >= 200 ? -1 : 0;
}

static int on_body(lx_h1resp_t *p, const char *at, size_t len) {
    rec_t *r = p->data;
    if (r->final_heads == 0) r->body_before = 1;
    if (r->refuse == 2) return -1;
    put(&r->body, at, len);
    return 0;
}

static const lx_h1resp_ops_t ops = {on_head, on_body};

/* ---- the table ---------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *in;
    size_t len;
    int head;          /* the request was HEAD */
    size_t max;        /* max_header_bytes; 0: 8192 */
    int eof;           /* the upstream closes after the input (lx_h1resp_eof) */
    int refuse;        /* as rec_t's */
    int rc;            /* LX_H1R_* */
    const char *why;   /* for an error: a part of p->why */
    int status;        /* p->status at the end */
    const char *heads; /* what ops->head saw, as render_head writes it */
    const char *body;
    long used;     /* bytes taken; -1: all */
    int keepalive; /* lx_h1resp_keepalive after DONE; -1: not checked */
    int owned;     /* in is malloc'd (generated cases) */
} case_t;

#define IN(s) .in = (s), .len = sizeof(s) - 1

/* What one way of feeding a case gave. */
typedef struct {
    int rc;
    const char *why;
    int status;
    size_t used;
    int keepalive;
    int contract; /* 0: a MORE took less than all, a DONE more than given, or a feed
                     after DONE or ERROR took bytes or said otherwise */
    int trailers; /* 0: after DONE, p->headers were not the final head's */
    int outside;
    int body_before;
    buf_t heads, body;
} out_t;

static void out_free(out_t *o) {
    free(o->heads.p);
    free(o->body.p);
}

/* Feeds c->in cut at cuts[0..ncuts-1] (ascending offsets). */
static void run(const case_t *c, const size_t *cuts, size_t ncuts, out_t *o) {
    lx_h1resp_t p;
    rec_t rec = {.refuse = c->refuse};
    lx_h1resp_init(&p, c->max ? c->max : 8192, c->head, &ops, &rec);
    memset(o, 0, sizeof(*o));
    o->contract = 1;
    o->trailers = 1;
    lx_h1resp_rc_t rc = LX_H1R_MORE;
    size_t off = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : c->len, n = end - off;
        char *piece = malloc(n ? n : 1);
        memcpy(piece, c->in + off, n);
        size_t used = (size_t)-1;
        rc = lx_h1resp_feed(&p, piece, n, &used);
        free(piece);
        if (rc == LX_H1R_MORE) {
            if (used != n) o->contract = 0;
            off = end;
            continue;
        }
        if (rc == LX_H1R_DONE) {
            if (used > n) o->contract = 0;
            o->used = off + used;
        }
        break;
    }
    if (rc == LX_H1R_MORE) {
        o->used = c->len;
        if (c->eof) rc = lx_h1resp_eof(&p);
    }
    o->rc = rc;
    o->why = p.why;
    o->status = p.status;
    if (rc == LX_H1R_DONE) {
        o->keepalive = lx_h1resp_keepalive(&p);
        /* The final head's fields are what p->headers still holds: no
         * trailer field was added to them or changed them. */
        buf_t again = {0};
        int outside = 0;
        render_head(&again, &p, &outside);
        const char *all = str(&rec.heads);
        size_t al = strlen(all);
        if (again.len > al || strcmp(all + al - again.len, again.p) != 0 || outside)
            o->trailers = 0;
        free(again.p);
        /* Done is done: more bytes and the close change nothing. */
        size_t used = (size_t)-1;
        if (lx_h1resp_feed(&p, "HTTP/1.1 200 OK\r\n\r\n", 19, &used) != LX_H1R_DONE || used != 0)
            o->contract = 0;
        if (lx_h1resp_eof(&p) != LX_H1R_DONE) o->contract = 0;
    } else if (rc == LX_H1R_ERROR) {
        /* An error stays one, with its reason. */
        const char *why = p.why;
        size_t used = (size_t)-1;
        if (lx_h1resp_feed(&p, "HTTP/1.1 200 OK\r\n\r\n", 19, &used) != LX_H1R_ERROR || used != 0 ||
            p.why != why)
            o->contract = 0;
        if (lx_h1resp_eof(&p) != LX_H1R_ERROR || p.why != why) o->contract = 0;
    }
    o->outside = rec.outside;
    o->body_before = rec.body_before;
    o->heads = rec.heads;
    o->body = rec.body;
    lx_h1resp_free(&p);
}

/* How two runs differ, or NULL. */
static const char *differ(const out_t *a, const out_t *b) {
    if (a->rc != b->rc) return "outcome";
    if ((a->why == NULL) != (b->why == NULL) || (a->why && b->why && strcmp(a->why, b->why) != 0))
        return "why";
    if (a->status != b->status) return "status";
    if (strcmp(str(&a->heads), str(&b->heads)) != 0) return "heads";
    if (a->body.len != b->body.len || (a->body.len && memcmp(a->body.p, b->body.p, a->body.len)))
        return "body";
    if (a->rc == LX_H1R_DONE && a->used != b->used) return "used";
    if (a->keepalive != b->keepalive) return "keepalive";
    if (!b->contract) return "contract";
    if (!b->trailers) return "trailers";
    if (b->outside) return "a field outside the parser's buffer";
    if (b->body_before) return "body before the final head";
    return NULL;
}

static const char *rc_name(int rc) {
    return rc == LX_H1R_DONE ? "DONE" : rc == LX_H1R_MORE ? "MORE" : "ERROR";
}

static void check(const case_t *c) {
    out_t w;
    run(c, NULL, 0, &w);
    const char *n = c->name;
    is_str(rc_name(w.rc), rc_name(c->rc), "%s: %s", n, rc_name(c->rc));
    if (c->rc == LX_H1R_ERROR) {
        ok(w.why != NULL && (c->why == NULL || strstr(w.why, c->why) != NULL), "%s: why says '%s'",
           n, c->why ? c->why : "something");
        if (w.why && c->why && !strstr(w.why, c->why)) diag("why: %s", w.why);
    } else {
        if (!ok(w.why == NULL, "%s: no why", n)) diag("why: %s", w.why);
    }
    is_int(w.status, c->status, "%s: status %d", n, c->status);
    is_str(str(&w.heads), c->heads, "%s: heads", n);
    buf_t got = {0}, exp = {0};
    put_shown(&got, w.body.p ? w.body.p : "", w.body.len);
    put_shown(&exp, c->body ? c->body : "", c->body ? strlen(c->body) : 0);
    is_str(str(&got), str(&exp), "%s: body", n);
    free(got.p);
    free(exp.p);
    if (c->rc == LX_H1R_DONE) {
        is_int(w.used, c->used < 0 ? (long)c->len : c->used, "%s: used %ld", n,
               c->used < 0 ? (long)c->len : c->used);
        if (c->keepalive >= 0)
            is_int(w.keepalive, c->keepalive, "%s: keep-alive %d", n, c->keepalive);
    }
    if (!ok(w.contract && w.trailers && !w.outside && !w.body_before,
            "%s: contract kept, fields in the parser's buffer, no trailer among them, no body "
            "before the final head",
            n))
        diag("contract %d trailers %d outside %d body_before %d", w.contract, w.trailers, w.outside,
             w.body_before);

    /* Two feeds, cut at every offset (0 and len: one feed is empty). */
    const char *bad = NULL;
    size_t at = 0;
    for (size_t k = 0; k <= c->len && bad == NULL; k++) {
        out_t s;
        run(c, &k, 1, &s);
        if ((bad = differ(&w, &s)) != NULL) at = k;
        out_free(&s);
    }
    if (!ok(bad == NULL, "%s: the same at every cut (%zu)", n, c->len + 1))
        diag("cut at %zu: %s differs", at, bad);

    /* One byte at a time. */
    size_t *cuts = malloc((c->len ? c->len : 1) * sizeof(*cuts));
    for (size_t k = 0; k < c->len; k++)
        cuts[k] = k + 1;
    out_t s;
    run(c, cuts, c->len ? c->len - 1 : 0, &s);
    bad = differ(&w, &s);
    if (!ok(bad == NULL, "%s: the same a byte at a time", n)) diag("%s differs", bad);
    out_free(&s);
    free(cuts);
    out_free(&w);
}

/* ---- generated responses ------------------------------------------------ */

static char *dup_buf(const buf_t *b) {
    char *s = malloc(b->len + 1);
    memcpy(s, b->p, b->len + 1);
    return s;
}

int main(void) {
    static const case_t cases[] = {
        /* ---- valid ---- */
        {.name = "Content-Length body",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 5\nContent-Length: 5\nContent-Type: text/plain\n",
         .body = "hello",
         .used = -1,
         .keepalive = 1},
        {.name = "Content-Length: 0",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 0\nContent-Length: 0\n",
         .body = "",
         .used = -1,
         .keepalive = 1},
        {.name = "chunked with trailers",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n"
            "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\nX-A: 2\r\n"
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\nX-A: 1\n",
         .body = "hello world",
         .used = -1,
         .keepalive = 1},
        /* Trailer fields are dropped, and none is checked, but llhttp reads
         * them into its flags: for HTTP/1.1 that can only take keep-alive
         * away (never give it), and closing is the safe side. */
        {.name = "trailers that say close",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "2\r\nok\r\n0\r\nConnection: close\r\nTransfer-Encoding: gzip\r\n"
            "X-Fold: a\r\n b\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = "ok",
         .used = -1,
         .keepalive = 0},
        {.name = "chunk extensions",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5;name=value\r\nhello\r\n1;a;b=\"q\"\r\n!\r\n0;last\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = "hello!",
         .used = -1,
         .keepalive = 1},
        {.name = "chunk sizes in hex, upper and lower case",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
            "A\r\n0123456789\r\n0b\r\nabcdefghijk\r\n0\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: Chunked\n",
         .body = "0123456789abcdefghijk",
         .used = -1,
         .keepalive = 1},
        {.name = "100 then 200",
         IN("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "100 -1\n200 2\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 1},
        {.name = "103 then 200",
         IN("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "103 -1\nLink: </a.css>; rel=preload\n200 2\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 1},
        {.name = "100, 103, then 200",
         IN("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </b.js>\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-B: b\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "100 -1\n103 -1\nLink: </b.js>\n200 2\nContent-Length: 2\nX-B: b\n",
         .body = "ok",
         .used = -1,
         .keepalive = 1},
        {.name = "no reason phrase",
         IN("HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 1\nContent-Length: 1\n",
         .body = "x",
         .used = -1,
         .keepalive = 1},
        {.name = "empty header values",
         IN("HTTP/1.1 200 OK\r\nX-Empty:\r\nX-Blank:   \r\nX-Tab:\t\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 0\nX-Empty: \nX-Blank: \nX-Tab: \nContent-Length: 0\n",
         .body = "",
         .used = -1,
         .keepalive = 1},
        {.name = "whitespace around values is not theirs",
         IN("HTTP/1.1 200 OK\r\nX-A:  a b \t\r\nX-B:\tb\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 0\nX-A: a b\nX-B: b\nContent-Length: 0\n",
         .body = "",
         .used = -1,
         .keepalive = 1},
        {.name = "close-delimited body ended by the close",
         IN("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close"),
         .eof = 1,
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nContent-Type: text/plain\n",
         .body = "until the close",
         .used = -1,
         .keepalive = 0},
        {.name = "close-delimited body, not closed yet",
         IN("HTTP/1.1 200 OK\r\n\r\nso far"),
         .rc = LX_H1R_MORE,
         .status = 200,
         .heads = "200 -1\n",
         .body = "so far"},
        {.name = "close-delimited empty body",
         IN("HTTP/1.1 200 OK\r\n\r\n"),
         .eof = 1,
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\n",
         .body = "",
         .used = -1,
         .keepalive = 0},
        {.name = "HTTP/1.0 without keep-alive",
         IN("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 2\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 0},
        /* RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message means
         * framing in doubt, and the connection is closed after it. */
        /* llhttp's own checks hold for trailer lines. */
        {.name = "a trailer field with whitespace before the colon",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX : v\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = "ok"},
        {.name = "HTTP/1.0 chunked with keep-alive",
         IN("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
            "2\r\nok\r\n0\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nConnection: keep-alive\nTransfer-Encoding: chunked\n",
         .body = "ok",
         .used = -1,
         .keepalive = 0},
        {.name = "HTTP/1.0 chunked, keep-alive in a trailer",
         IN("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "2\r\nok\r\n0\r\nConnection: keep-alive\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = "ok",
         .used = -1,
         .keepalive = 0},
        {.name = "HTTP/1.0 with keep-alive",
         IN("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 2\nConnection: keep-alive\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 1},
        {.name = "Connection: close",
         IN("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 2\nConnection: close\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 0},
        {.name = "204 with a Content-Length has no body",
         IN("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 204,
         .heads = "204 10\nContent-Length: 10\n",
         .body = "",
         .used = -1,
         .keepalive = 1},
        {.name = "response to HEAD has no body",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"),
         .head = 1,
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 100\nContent-Length: 100\n",
         .body = "",
         .used = -1,
         .keepalive = 1},
        {.name = "chunked response to HEAD has no body",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
         .head = 1,
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = "",
         .used = -1,
         .keepalive = 1},
        {.name = "a HEAD's 100 still comes first",
         IN("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"),
         .head = 1,
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "100 -1\n200 9\nContent-Length: 9\n",
         .body = "",
         .used = -1,
         .keepalive = 1},

        /* ---- bytes after the response are not taken ---- */
        {.name = "bytes after a Content-Length body",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 2\nContent-Length: 2\n",
         .body = "ok",
         .used = 40,
         .keepalive = 1},
        {.name = "bytes after a chunked body",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nEXTRA"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = "ok",
         .used = 59,
         .keepalive = 1},
        {.name = "bytes after a 304 (its Content-Length is no body)",
         IN("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n0123456789"),
         .rc = LX_H1R_DONE,
         .status = 304,
         .heads = "304 10\nContent-Length: 10\nETag: \"x\"\n",
         .body = "",
         .used = 60,
         .keepalive = 1},
        {.name = "bytes after a HEAD response",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"),
         .head = 1,
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 3\nContent-Length: 3\n",
         .body = "",
         .used = 38,
         .keepalive = 1},
        {.name = "bytes after a Connection: close response",
         IN("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nokjunk"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 2\nConnection: close\nContent-Length: 2\n",
         .body = "ok",
         .used = 59,
         .keepalive = 0},

        /* ---- the close ---- */
        {.name = "close before any byte",
         .in = "",
         .len = 0,
         .eof = 1,
         .rc = LX_H1R_ERROR,
         .why = "closed without a response",
         .heads = ""},
        {.name = "close in the status line",
         IN("HTTP/1.1 2"),
         .eof = 1,
         .rc = LX_H1R_ERROR,
         .why = "closed in the middle",
         .heads = ""},
        {.name = "close in the head",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"),
         .eof = 1,
         .rc = LX_H1R_ERROR,
         .why = "closed in the middle",
         .heads = ""},
        {.name = "close in a Content-Length body",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"),
         .eof = 1,
         .rc = LX_H1R_ERROR,
         .why = "closed in the middle",
         .status = 200,
         .heads = "200 10\nContent-Length: 10\n",
         .body = "short"},
        {.name = "close in a chunked body",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"),
         .eof = 1,
         .rc = LX_H1R_ERROR,
         .why = "closed in the middle",
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = "hel"},
        {.name = "close after the last chunk, before the trailers end",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n"),
         .eof = 1,
         .rc = LX_H1R_ERROR,
         .why = "closed in the middle",
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = ""},
        {.name = "close after a 100",
         IN("HTTP/1.1 100 Continue\r\n\r\n"),
         .eof = 1,
         .rc = LX_H1R_ERROR,
         .why = "closed in the middle",
         .status = 100,
         .heads = "100 -1\n"},

        /* ---- the status line ---- */
        {.name = "101 to a request that asked no upgrade",
         IN("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: "
            "upgrade\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "101",
         .status = 101,
         .heads = ""},
        {.name = "status 99",
         IN("HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "status",
         .status = 99,
         .heads = ""},
        /* llhttp takes a status of any number of digits up to 999. */
        {.name = "status of two digits",
         IN("HTTP/1.1 99 Low\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "status outside",
         .status = 99,
         .heads = ""},
        {.name = "status 600",
         IN("HTTP/1.1 600 High\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "status outside",
         .status = 600,
         .heads = ""},
        {.name = "status of four digits",
         IN("HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "HTTP/2.0",
         IN("HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "not HTTP/1.x",
         .heads = ""},
        {.name = "HTTP/1.2",
         IN("HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "HTTP/0.9",
         IN("HTTP/0.9 200 OK\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "not HTTP",
         IN("ICY 200 OK\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "lower-case protocol name",
         IN("http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "two spaces before the status",
         IN("HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},

        /* ---- framing ---- */
        {.name = "two Content-Length fields",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .why = "Content-Length",
         .heads = ""},
        {.name = "two Content-Length fields that differ",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a Content-Length list",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a Content-Length that is no number",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a negative Content-Length",
         IN("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a Content-Length past 2^64",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "Content-Length with Transfer-Encoding",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
            "0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "Content-Length",
         .heads = ""},
        {.name = "Transfer-Encoding with Content-Length",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
            "0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "Content-Length",
         .heads = ""},
        {.name = "Transfer-Encoding: gzip",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx"),
         .rc = LX_H1R_ERROR,
         .why = "transfer coding",
         .heads = ""},
        {.name = "Transfer-Encoding: gzip, chunked",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "transfer coding",
         .heads = ""},
        {.name = "Transfer-Encoding: chunked, chunked",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "transfer coding",
         .heads = ""},
        {.name = "two Transfer-Encoding: chunked fields",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
            "0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "transfer coding",
         .heads = ""},
        {.name = "Transfer-Encoding: identity",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .why = "transfer coding",
         .heads = ""},
        {.name = "a chunk size that is no hex",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = ""},
        {.name = "a chunk size past 2^64",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "10000000000000000\r\nx\r\n0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = ""},
        {.name = "chunk data without its CRLF",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = "ok"},
        {.name = "a chunk size line ended by a bare LF",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = ""},
        {.name = "a chunk size with a space before the extension",
         IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 ;x\r\nok\r\n0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .status = 200,
         .heads = "200 -1\nTransfer-Encoding: chunked\n",
         .body = ""},

        /* ---- field lines ---- */
        {.name = "whitespace before the colon",
         IN("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "tab before the colon",
         IN("HTTP/1.1 200 OK\r\nX-A\t: 5\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a space inside a name",
         IN("HTTP/1.1 200 OK\r\nX A: 5\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a name that is no token",
         IN("HTTP/1.1 200 OK\r\nX(y): 5\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a name with a NUL",
         IN("HTTP/1.1 200 OK\r\nX\0Y: 5\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "an empty name",
         IN("HTTP/1.1 200 OK\r\n: v\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a line without a colon",
         IN("HTTP/1.1 200 OK\r\nNoColon\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "obs-fold",
         IN("HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "obs-fold",
         .heads = ""},
        {.name = "obs-fold with a tab",
         IN("HTTP/1.1 200 OK\r\nX-A: a\r\n\tb\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "obs-fold",
         .heads = ""},
        {.name = "obs-fold of an empty value",
         IN("HTTP/1.1 200 OK\r\nX-A:\r\n b\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "obs-fold",
         .heads = ""},
        {.name = "whitespace before the first field",
         IN("HTTP/1.1 200 OK\r\n X-A: a\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "obs-fold",
         .heads = ""},
        {.name = "a bare CR in a value",
         IN("HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "bare CR",
         .heads = ""},
        {.name = "a NUL in a value",
         IN("HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        {.name = "a bare LF in a value",
         IN("HTTP/1.1 200 OK\r\nX-A: a\nX-Injected: 1\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .why = "bare LF",
         .heads = ""},
        {.name = "a control byte in a value",
         IN("HTTP/1.1 200 OK\r\nX-A: a\x01z\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .heads = ""},
        /* Bytes 0x80-0xff are obs-text, allowed in a value (RFC 9110 5.5). */
        {.name = "obs-text in a value",
         IN("HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 0\nX-A: caf\\xc3\\xa9\nContent-Length: 0\n",
         .body = "",
         .used = -1,
         .keepalive = 1},
        /* LF-only line endings are refused: RFC 9112 2.2 lets a recipient
         * take a bare LF for a line end, but llhttp's strict mode takes it
         * in some places (CR LF LF ended a head) and not in others, and
         * where the head ends must not be in doubt. scan_head refuses a
         * bare LF or CR anywhere in a head. */
        {.name = "LF-only line endings",
         IN("HTTP/1.1 200 OK\nContent-Length: 2\n\nok"),
         .rc = LX_H1R_ERROR,
         .why = "bare LF",
         .heads = ""},
        {.name = "LF-only line endings after the status line",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2\n\nok"),
         .rc = LX_H1R_ERROR,
         .why = "bare LF",
         .heads = ""},
        {.name = "an empty line ended by a bare LF",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok"),
         .rc = LX_H1R_ERROR,
         .why = "bare LF",
         .heads = ""},
        {.name = "a CR not followed by LF after the fields",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\rXok"),
         .rc = LX_H1R_ERROR,
         .why = "bare CR",
         .heads = ""},

        /* ---- interim responses ---- */
        /* A 1xx ends with its header section, whatever framing it claims
         * (RFC 9110 15.2): its Content-Length announces no body, and bytes
         * after it are the next head's. */
        {.name = "a 1xx's Content-Length is no body",
         IN("HTTP/1.1 150 Odd\r\nContent-Length: 3\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "150 3\nContent-Length: 3\n200 2\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 1},
        {.name = "a 1xx's body is no head",
         IN("HTTP/1.1 199 Odd\r\nContent-Length: 3\r\n\r\nabc"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .status = 199,
         .heads = "199 3\nContent-Length: 3\n"},
        {.name = "a chunked 1xx",
         IN("HTTP/1.1 110 Odd\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .status = 110,
         .heads = "110 -1\nTransfer-Encoding: chunked\n"},
        /* llhttp takes each 1xx for a whole message: after a 1xx that
         * closes the connection (HTTP/1.0 without keep-alive, or
         * Connection: close), what follows is refused. */
        {.name = "HTTP/1.0 100 then a response",
         IN("HTTP/1.0 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .why = "Connection: close",
         .status = 100,
         .heads = "100 -1\n"},
        {.name = "a 103 with Connection: close then a response",
         IN("HTTP/1.1 103 Early Hints\r\nConnection: close\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_ERROR,
         .why = "Connection: close",
         .status = 103,
         .heads = "103 -1\nConnection: close\n"},
        {.name = "a 100 not followed by the final response yet",
         IN("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"),
         .rc = LX_H1R_MORE,
         .status = 100,
         .heads = "100 -1\n"},
        {.name = "a 1xx refused like any other head",
         IN("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\nX: \x7f\r\n\r\n"),
         .rc = LX_H1R_ERROR,
         .status = 100,
         .heads = "100 -1\n"},

        /* ---- empty lines before the status line ---- */
        /* llhttp skips CR and LF before a status line (its start state);
         * they count towards max_header_bytes. */
        {.name = "an empty line before the status line",
         IN("\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 2\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 1},
        {.name = "two empty lines before the status line",
         IN("\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "200 2\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 1},
        {.name = "empty lines between a 100 and the final response",
         IN("HTTP/1.1 100 Continue\r\n\r\n\r\n\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: "
            "2\r\n\r\nok"),
         .rc = LX_H1R_DONE,
         .status = 200,
         .heads = "100 -1\n200 2\nContent-Length: 2\n",
         .body = "ok",
         .used = -1,
         .keepalive = 1},
        {.name = "empty lines count towards max_header_bytes",
         IN("\r\n\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"),
         .max = 24,
         .rc = LX_H1R_ERROR,
         .why = "max_header_bytes",
         .heads = ""},

        /* ---- the caller refuses ---- */
        {.name = "ops->head refuses",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .refuse = 1,
         .rc = LX_H1R_ERROR,
         .why = "refused",
         .status = 200,
         .heads = "200 2\nContent-Length: 2\n"},
        {.name = "ops->body refuses",
         IN("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
         .refuse = 2,
         .rc = LX_H1R_ERROR,
         .why = "body could not be relayed",
         .status = 200,
         .heads = "200 2\nContent-Length: 2\n",
         .body = ""},
    };
    for (size_t i = 0; i < LX_ARRAY_SIZE(cases); i++)
        check(&cases[i]);

    /* ---- generated: many fields, and the exact limit ---- */
    buf_t b = {0}, h = {0};
    put(&b, "HTTP/1.1 200 OK\r\n", 17);
    putf(&h, "200 4\n");
    for (int i = 0; i < 500; i++) {
        putf(&b, "X-Field-%d: value %d\r\n", i, i);
        putf(&h, "X-Field-%d: value %d\n", i, i);
    }
    put(&b, "Content-Length: 4\r\n\r\nbody", 25);
    put(&h, "Content-Length: 4\n", 18);
    case_t many = {.name = "500 fields",
                   .in = b.p,
                   .len = b.len,
                   .max = 65536,
                   .rc = LX_H1R_DONE,
                   .status = 200,
                   .heads = h.p,
                   .body = "body",
                   .used = -1,
                   .keepalive = 1};
    check(&many);
    free(b.p);
    free(h.p);

    /* A head of exactly 200 bytes, status line through the empty line. */
    const char *head200_pre = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Pad: ";
    buf_t e = {0};
    put(&e, head200_pre, strlen(head200_pre));
    while (e.len < 200 - 4)
        put(&e, "p", 1);
    put(&e, "\r\n\r\n", 4);
    size_t hl = e.len;
    put(&e, "abc", 3);
    char *exact = dup_buf(&e);
    ok(hl == 200, "the generated head is 200 bytes");
    buf_t eh = {0};
    putf(&eh, "200 3\nContent-Length: 3\nX-Pad: %.*s\n", (int)(hl - 4 - strlen(head200_pre)),
         exact + strlen(head200_pre));
    case_t at = {.name = "a head at max_header_bytes",
                 .in = exact,
                 .len = e.len,
                 .max = 200,
                 .rc = LX_H1R_DONE,
                 .status = 200,
                 .heads = eh.p,
                 .body = "abc",
                 .used = -1,
                 .keepalive = 1};
    check(&at);
    case_t over = at;
    over.name = "a head one byte over max_header_bytes";
    over.max = 199;
    over.rc = LX_H1R_ERROR;
    over.why = "max_header_bytes";
    over.status = 0;
    over.heads = "";
    over.body = NULL;
    check(&over);

    /* Each head is measured anew: a 1xx then a final head at the limit. */
    buf_t e2 = {0};
    put(&e2, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    put(&e2, exact, e.len);
    buf_t eh2 = {0};
    put(&eh2, "100 -1\n", 7);
    put(&eh2, eh.p, eh.len);
    case_t at2 = at;
    at2.name = "a 100 then a head at max_header_bytes";
    at2.in = e2.p;
    at2.len = e2.len;
    at2.heads = eh2.p;
    check(&at2);
    case_t over2 = at2;
    over2.name = "a 100 then a head one byte over max_header_bytes";
    over2.max = 199;
    over2.rc = LX_H1R_ERROR;
    over2.why = "max_header_bytes";
    over2.status = 100;
    over2.heads = "100 -1\n";
    over2.body = NULL;
    check(&over2);
    /* The limit holds for a head that never ends. */
    buf_t e3 = {0};
    put(&e3, "HTTP/1.1 200 OK\r\n", 17);
    while (e3.len < 4096)
        put(&e3, "X-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", 44);
    case_t endless = {.name = "a head that goes on past max_header_bytes",
                      .in = e3.p,
                      .len = e3.len,
                      .max = 1024,
                      .rc = LX_H1R_ERROR,
                      .why = "max_header_bytes",
                      .heads = ""};
    check(&endless);
    free(exact);
    free(e.p);
    free(eh.p);
    free(e2.p);
    free(eh2.p);
    free(e3.p);

    return done_testing();
}
