/* Strict HTTP/1 response parsing for upstreams (h1resp.h). */
#include "h1resp.h"

#include <stdlib.h>
#include <string.h>

#define P(x) ((lx_h1resp_t *)(x)->data)

static int fail(lx_h1resp_t *p, const char *why) {
    if (p->why == NULL) p->why = why;
    return -1;
}

static int save(lx_h1resp_t *p, const char *at, size_t len) {
    if (len == 0) return 0; /* hbuf may still be NULL: no memcpy to it */
    if (p->hlen + len > p->hcap) {
        size_t cap = p->hcap ? p->hcap : 2048;
        while (cap < p->hlen + len)
            cap *= 2;
        char *b = realloc(p->hbuf, cap);
        if (b == NULL) return fail(p, "out of memory");
        p->hbuf = b;
        p->hcap = cap;
    }
    memcpy(p->hbuf + p->hlen, at, len);
    p->hlen += len;
    return 0;
}

static int on_message_begin(llhttp_t *lp) {
    lx_h1resp_t *p = P(lp);
    p->hlen = 0;
    p->nmarks = 0;
    p->in = 0;
    p->te = 0;
    p->in_body = 0;
    return 0;
}

static int on_header_field(llhttp_t *lp, const char *at, size_t len) {
    lx_h1resp_t *p = P(lp);
    if (p->in_body) return 0; /* trailer fields after a chunked body: dropped */
    if (p->in != 1) {
        if (p->nmarks == p->mcap) {
            unsigned cap = p->mcap ? p->mcap * 2 : 32;
            uint32_t *m = realloc(p->marks, cap * 4 * sizeof(uint32_t));
            if (m == NULL) return fail(p, "out of memory");
            p->marks = m;
            p->mcap = cap;
        }
        uint32_t *m = &p->marks[4 * p->nmarks++];
        m[0] = (uint32_t)p->hlen;
        m[1] = m[2] = m[3] = 0;
        p->in = 1;
    }
    p->marks[4 * (p->nmarks - 1) + 1] += (uint32_t)len;
    return save(p, at, len);
}

static int on_header_value(llhttp_t *lp, const char *at, size_t len) {
    lx_h1resp_t *p = P(lp);
    if (p->in_body) return 0;
    if (p->nmarks == 0) return fail(p, "a header line without a name");
    uint32_t *m = &p->marks[4 * (p->nmarks - 1)];
    /* A value comes in pieces only where a read ended: scan_head refused
     * the obs-fold lines llhttp would have joined. */
    if (p->in != 2) {
        m[2] = (uint32_t)p->hlen;
        p->in = 2;
    }
    m[3] += (uint32_t)len;
    return save(p, at, len);
}

static int on_header_value_complete(llhttp_t *lp) {
    lx_h1resp_t *p = P(lp);
    if (p->in_body) return 0;
    p->in = 0;
    if (p->nmarks == 0) return fail(p, "a header line without a name");
    uint32_t *m = &p->marks[4 * (p->nmarks - 1)];
    const char *name = p->hbuf + m[0];
    if (m[1] == 0) return fail(p, "an empty header name");
    /* llhttp 8's response mode itself refuses a name that is no token
     * ("Name :" too), a control character or bare CR or LF in a value and
     * bare-LF line ends (t/94 and t/99 pin that down); obs-fold
     * and the transfer codings are ours to refuse. */
    const char *v = p->hbuf + m[2];
    while (m[3] && (v[m[3] - 1] == ' ' || v[m[3] - 1] == '\t'))
        m[3]--;
    lx_str_t n = {name, m[1]};
    if (lx_str_ieq(n, "transfer-encoding", 17)) {
        /* Only a lone chunked is relayed: another coding would reach the
         * client undecoded and unlabelled. */
        if (p->te || !lx_str_ieq((lx_str_t){v, m[3]}, "chunked", 7))
            return fail(p, "a transfer coding other than a lone chunked");
        p->te = 1;
    }
    return 0;
}

static int on_headers_complete(llhttp_t *lp) {
    lx_h1resp_t *p = P(lp);
    if (lp->http_major != 1 || lp->http_minor > 1)
        return fail(p, "a status line that is not HTTP/1.x");
    p->status = lp->status_code;
    if (p->status < 100 || p->status > 599) return fail(p, "a status outside 100..599");
    if ((lp->flags & F_CONTENT_LENGTH) && (lp->flags & F_CHUNKED))
        return fail(p, "both Content-Length and Transfer-Encoding");
    /* llhttp takes any 64-bit length; p->length is signed, and one past
     * INT64_MAX became -1, "unknown": relayed chunked, never ending. */
    if ((lp->flags & F_CONTENT_LENGTH) && lp->content_length > INT64_MAX)
        return fail(p, "a Content-Length too big");
    p->length = (lp->flags & F_CONTENT_LENGTH) && !(lp->flags & F_CHUNKED)
                    ? (int64_t)lp->content_length
                    : -1;
    if (p->nmarks > p->hdrcap || p->headers == NULL) {
        unsigned cap = p->nmarks > 16 ? p->nmarks : 16;
        lx_header_t *h = realloc(p->headers, cap * sizeof(*h));
        if (h == NULL) return fail(p, "out of memory");
        p->headers = h;
        p->hdrcap = cap;
    }
    lx_header_t *h = p->headers;
    for (unsigned i = 0; i < p->nmarks; i++) {
        const uint32_t *m = &p->marks[4 * i];
        h[i].name = (lx_str_t){p->hbuf + m[0], m[1]};
        h[i].value = (lx_str_t){p->hbuf + m[2], m[3]};
    }
    p->nheaders = p->nmarks;
    p->in_body = 1;
    if (p->status == 101 && !p->upgrade)
        return fail(p, "101 Switching Protocols to a request that asked no upgrade");
    if (p->ops->head(p) < 0) return fail(p, "refused by the proxy");
    /* A 1xx ends with its header section (RFC 9110 15.2), and a response
     * to HEAD, a 204 and a 304 have no body, whatever their framing fields
     * say (RFC 9110 9.3.2, 15.3.5, 15.4.5). llhttp 8 reads as a body what a
     * 304 announces (a backend that rightly sends none would stall the
     * response until read_timeout), and what a 1xx other than 100-103
     * announces: that went to ops->body before any final head, and a
     * Content-Length with no body after it ate the next head's first bytes.
     * (A 101 is the tunnel's start: llhttp stops at its end itself.) */
    if ((p->status < 200 && p->status != 101) || p->head_request || p->status == 204 ||
        p->status == 304)
        return 1;
    return 0;
}

static int on_body(llhttp_t *lp, const char *at, size_t len) {
    lx_h1resp_t *p = P(lp);
    return p->ops->body(p, at, len) < 0 ? fail(p, "the body could not be relayed") : 0;
}

static int on_message_complete(llhttp_t *lp) {
    lx_h1resp_t *p = P(lp);
    if (p->status == 101) {
        p->done = 1; /* llhttp stops with HPE_PAUSED_UPGRADE after this */
        return 0;
    }
    if (p->status < 200) {
        /* An interim response: the final one's head follows. */
        p->in_body = 0;
        p->head_bytes = 0;
        p->crlf = 0;
        return 0;
    }
    p->done = 1;
    return HPE_PAUSED; /* what follows is not this response's */
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void lx_h1resp_init(lx_h1resp_t *p, size_t max_head, int head_request, const lx_h1resp_ops_t *ops,
                    void *data) {
    memset(p, 0, sizeof(*p));
    lx_h1resp_reset(p, max_head, head_request, ops, data);
}

void lx_h1resp_reset(lx_h1resp_t *p, size_t max_head, int head_request, const lx_h1resp_ops_t *ops,
                     void *data) {
    /* The buffers stay, emptied, for the next response: a proxied request
     * made three allocations of them, and freed them, for its few fields. */
    char *hbuf = p->hbuf;
    size_t hcap = p->hcap;
    uint32_t *marks = p->marks;
    unsigned mcap = p->mcap;
    lx_header_t *headers = p->headers;
    unsigned hdrcap = p->hdrcap;
    memset(p, 0, sizeof(*p));
    p->hbuf = hbuf;
    p->hcap = hcap;
    p->marks = marks;
    p->mcap = mcap;
    p->headers = headers;
    p->hdrcap = hdrcap;
    llhttp_init(&p->parser, HTTP_RESPONSE, &settings);
    p->parser.data = p;
    p->ops = ops;
    p->data = data;
    p->max_head = max_head;
    p->head_request = head_request != 0;
    p->length = -1;
}

void lx_h1resp_free(lx_h1resp_t *p) {
    free(p->hbuf);
    free(p->marks);
    free(p->headers);
    p->hbuf = NULL;
    p->marks = NULL;
    p->headers = NULL;
    p->hcap = p->mcap = p->hdrcap = 0;
}

/* How many of the n bytes at b belong to the head being read, up to and
 * including its empty line. The head is measured here, byte for byte, so
 * that max_header_bytes is exact and a head too big fails before llhttp
 * copies any of it. Its line ends are checked here too, where no read
 * boundary hides them and where they decide the head's end as llhttp will:
 * llhttp's strict mode still takes CR LF LF for the end of a head, and
 * joins a line that starts with whitespace to the field before it
 * (obs-fold, which RFC 9112 5.2 lets a recipient refuse). On the first
 * byte that is wrong, or that is over the limit, *bad says why and the
 * count stops before that byte.
 *
 * p->crlf: 0 in a line, 1 after its CR, 2 at the start of a line, 3 after
 * the CR of an empty line, 4 the head ended. */
static size_t scan_head(lx_h1resp_t *p, const char *b, size_t n, const char **bad) {
    *bad = NULL;
    /* The last scan saw an end that was no head: empty lines before a
     * status line, which llhttp skips (and which count towards the limit). */
    if (p->crlf == 4) p->crlf = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned s = p->crlf;
        if (s == 0) {
            /* Inside a line only a CR or an LF changes anything: skip to
             * the first of them with memchr, never past the limit. */
            size_t stop = p->max_head - p->head_bytes;
            if (stop > n) stop = n;
            if (i < stop) {
                const char *cr = memchr(b + i, '\r', stop - i);
                size_t to = cr ? (size_t)(cr - b) : stop;
                const char *lf = memchr(b + i, '\n', to - i);
                i = lf ? (size_t)(lf - b) : to;
                if (i == n) break;
            }
        }
        char c = b[i];
        if (p->head_bytes + i >= p->max_head)
            *bad = "the response header is over max_header_bytes";
        else if (s == 1 || s == 3)
            s = c == '\n' ? s + 1 : 5;
        else if (c == '\r')
            s = s == 2 ? 3 : 1;
        else if (c == '\n')
            *bad = "a bare LF in the response header";
        else if (s == 2 && (c == ' ' || c == '\t'))
            *bad = "an obs-fold line (or whitespace before the first field) in the response header";
        else
            s = 0;
        if (s == 5) *bad = "a bare CR in the response header";
        if (*bad) {
            p->head_bytes += i;
            return i;
        }
        p->crlf = (uint8_t)s;
        if (s == 4) {
            p->head_bytes += i + 1;
            return i + 1;
        }
    }
    p->head_bytes += n;
    return n;
}

lx_h1resp_rc_t lx_h1resp_feed(lx_h1resp_t *p, const char *buf, size_t len, size_t *used) {
    *used = 0;
    if (p->done) return LX_H1R_DONE;
    if (p->why) return LX_H1R_ERROR; /* an error stays one */
    size_t off = 0;
    while (off < len) {
        size_t n = len - off;
        const char *bad = NULL;
        /* A head is given to llhttp up to its end only: what follows may
         * be the head of the final response after a 1xx, measured anew.
         * Before a byte scan_head refuses, the bytes ahead of it go to
         * llhttp all the same, so that the first fault in the bytes is the
         * one reported, wherever the reads happened to end. */
        if (!p->in_body) n = scan_head(p, buf + off, n, &bad);
        llhttp_errno_t e = llhttp_execute(&p->parser, buf + off, n);
        if (e == HPE_PAUSED && p->done) {
            *used = (size_t)(llhttp_get_error_pos(&p->parser) - buf);
            return LX_H1R_DONE;
        }
        if (e == HPE_PAUSED_UPGRADE && p->done && p->status == 101) {
            *used = (size_t)(llhttp_get_error_pos(&p->parser) - buf);
            return LX_H1R_UPGRADE;
        }
        if (e != HPE_OK) {
            if (p->why == NULL) p->why = llhttp_get_error_reason(&p->parser);
            if (p->why == NULL) p->why = llhttp_errno_name(e);
            return LX_H1R_ERROR;
        }
        if (bad) {
            p->why = bad;
            return LX_H1R_ERROR;
        }
        off += n;
    }
    *used = len;
    return LX_H1R_MORE;
}

size_t lx_h1resp_room(const lx_h1resp_t *p) {
    return p->hcap + (size_t)p->mcap * 4 * sizeof(uint32_t) +
           (size_t)p->hdrcap * sizeof(lx_header_t);
}

lx_h1resp_rc_t lx_h1resp_eof(lx_h1resp_t *p) {
    if (p->done) return LX_H1R_DONE;
    if (p->why) return LX_H1R_ERROR; /* the first fault is the one to tell */
    /* llhttp ends a body that runs until the close, and refuses a close in
     * the middle of anything else. */
    llhttp_errno_t e = llhttp_finish(&p->parser);
    if ((e == HPE_OK || e == HPE_PAUSED) && p->done) return LX_H1R_DONE;
    p->why = p->head_bytes || p->parser.status_code
                 ? "the upstream closed in the middle of the response"
                 : "the upstream closed without a response";
    return LX_H1R_ERROR;
}

int lx_h1resp_keepalive(const lx_h1resp_t *p) {
    /* A Transfer-Encoding in an HTTP/1.0 message: its framing is to be
     * taken as faulty and the connection closed after it (RFC 9112 6.1).
     * (llhttp would keep it for a "Connection: keep-alive", even one among
     * the trailer fields.) */
    if (p->te && p->parser.http_minor == 0) return 0;
    return p->done && llhttp_should_keep_alive(&p->parser);
}

lx_str_t lx_h1resp_get(const lx_h1resp_t *p, const char *lname, size_t len) {
    for (unsigned i = 0; i < p->nheaders; i++)
        if (lx_str_ieq(p->headers[i].name, lname, len)) return p->headers[i].value;
    return (lx_str_t){NULL, 0};
}
