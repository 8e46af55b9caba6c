/* HTTP/1 request parsing: the llhttp callbacks that fill a connection's
 * request (src/h1/conn.c drives llhttp and owns the buffers and the state
 * machine). Kept apart as lighttpd keeps h1.c apart from connections.c:
 * what RFC 9112 says about field syntax, framing, trailers, chunk
 * extensions and Expect lives here, the reading and writing in conn.c. */
#include "h1/h1.h"

#include <string.h>

#include "core/fields.h"
#include "h1/conn.h"
#include "log.h"

#define SESS(p) ((lx_sess_t *)(p)->data)

/* RFC 9110 5.6.2 tchar: visible ASCII but the delimiters
 * "(),/:;<=>?@[\]{} and DQUOTE. */
static const unsigned char tchar[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, /* 0x20 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, /* 0x30 */
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, /* 0x50 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, /* 0x70 */
    /* 0x80 and above: 0 */
};

/* Whether a field name is a token. A byte table, and no branch per byte:
 * every byte of every field name comes here. */
static int is_token(const char *p, size_t len) {
    unsigned char ok = 1;
    for (size_t i = 0; i < len; i++)
        ok &= tchar[(unsigned char)p[i]];
    return ok;
}

/* The empty lines a client may send before a request line (RFC 9112 2.2):
 * llhttp skips any mix of CR and LF there, a bare CR too, which RFC 9112
 * 2.2 says is invalid ("\r\r\rGET", HTTPWookiee's multiple_cr_line_prefix).
 * Returns where the request line starts, or NULL at a CR not followed by LF
 * (400). A LF alone is a line end a recipient may take. */
static const char *skip_empty_lines(const char *p, const char *end) {
    for (; p < end && (*p == '\r' || *p == '\n'); p++)
        if (*p == '\r' && (p + 1 == end || p[1] != '\n')) return NULL;
    return p;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
    lx_sess_t *c = SESS(p);
    if (c->req.target.p == NULL) {
        c->req.target.p = at;
        /* The method ends the empty lines: all of them are read. */
        if (skip_empty_lines(c->rbuf + c->req_start, at) == NULL) {
            c->err_status = 400;
            return -1;
        }
    }
    c->req.target.len = (size_t)(at + len - c->req.target.p);
    /* A piece that ends before the bytes read ends at the target's
     * delimiter. A line end there is an HTTP/0.9 request ("GET /"): llhttp
     * takes it and then waits for a header section that such a client
     * never sends, so it would have waited until header_timeout. RFC 9112
     * 3: a request line without a version is no request-line, 400; a 505
     * would name a version the client never sent (and a 0.9 client reads
     * no status line either way). The connection closes after it. */
    const char *end = at + len;
    if (end < c->rbuf + c->rlen && (*end == '\r' || *end == '\n')) {
        c->err_status = 400;
        return -1;
    }
    return 0;
}

/* The version's first piece starts right after the protocol name. */
static int on_version(llhttp_t *p, const char *at, size_t len) {
    lx_sess_t *c = SESS(p);
    (void)len;
    if (c->version_at == NULL) c->version_at = at;
    return 0;
}

/* llhttp parses the version with LENIENT_VERSION (lx_h1_parser_init): any
 * "HTTP/" DIGIT "." DIGIT comes here, and luxd answers what RFC 9112 2.3
 * asks. A major version other than 1 gets 505 (HTTP/0.x, 2.x, 3.x...: the
 * same for all of them, and at once, not after a header section that
 * another major version would not even frame the same way). 1.2 to 1.9
 * are HTTP/1.1 (on_headers_complete). llhttp also takes "RTSP/" and "ICE/"
 * in a request line, which are no HTTP: 400. */
static int on_version_complete(llhttp_t *p) {
    lx_sess_t *c = SESS(p);
    if (c->version_at == NULL || c->version_at - c->rbuf < 5 ||
        memcmp(c->version_at - 5, "HTTP/", 5) != 0) {
        c->err_status = 400;
        return -1;
    }
    if (p->http_major != 1) {
        c->err_status = 505;
        return -1;
    }
    return 0;
}

static int on_url_complete(llhttp_t *p) {
    lx_sess_t *c = SESS(p);
    c->in_url = 0;
    if (c->req.target.len > c->w->gen->srv.max_header_bytes) {
        c->err_status = 414;
        return -1;
    }
    return 0;
}

/* Adds len bytes to one of the counters that max_header_bytes bounds
 * besides the header section itself (trailers, chunk extensions); past the
 * limit, the request fails with status. */
static int count_framing(lx_sess_t *c, size_t *counter, size_t len, int status) {
    *counter += len;
    if (*counter > c->w->gen->srv.max_header_bytes) {
        c->err_status = status;
        return -1;
    }
    return 0;
}

/* Trailer fields (after a chunked body) are counted and dropped. They never
 * join the request's headers: the request was routed on its header section,
 * a Range or X-User sent after the body must not change what it gets, and
 * the bytes they point at are overwritten by the next read (body bytes are
 * not kept). RFC 9110 6.5.1 lets a recipient discard them. */
static int count_trailer(lx_sess_t *c, size_t len) {
    return count_framing(c, &c->trailer_bytes, len, 431);
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    lx_sess_t *c = SESS(p);
    lx_req_t *r = &c->req;
    lx_header_t *h = c->cur_header;
    if (c->req.head_done) return count_trailer(c, len);
    if (h == NULL) {
        if (r->headers == NULL) {
            r->headers = lx_arena_alloc(&c->arena, LX_MAX_HEADERS * sizeof(lx_header_t));
            if (r->headers == NULL) return -1;
        }
        if (r->nheaders == LX_MAX_HEADERS) {
            c->err_status = 431;
            return -1;
        }
        h = c->cur_header = &r->headers[r->nheaders++];
        h->name.p = at;
        h->name.len = 0;
        h->value.p = NULL;
        h->value.len = 0;
    }
    h->name.len = (size_t)(at + len - h->name.p);
    c->last_end = at + len;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    lx_sess_t *c = SESS(p);
    lx_header_t *h = c->cur_header;
    if (c->req.head_done) return count_trailer(c, len);
    if (h == NULL) return -1; /* a line with an empty field name */
    if (h->value.p == NULL) {
        h->value.p = at;
    } else if (at != c->last_end) {
        /* A second piece that does not continue the first: llhttp accepted
         * an obs-fold line, which RFC 9112 5.2 lets us reject. */
        return -1;
    }
    h->value.len = (size_t)(at + len - h->value.p);
    c->last_end = at + len;
    return 0;
}

/* Folds one Transfer-Encoding field line into c->te. RFC 9112 6.1 and 7:
 * chunked must be the last coding and may be applied once; luxd decodes no
 * other coding (nginx answers those with 501 too). The lines of a request
 * form one list, in order. */
static void note_transfer_codings(lx_sess_t *c, lx_str_t v) {
    const char *p = v.p, *end = v.p + v.len;
    int any = 0;
    while (p < end) {
        /* Empty list elements are allowed (RFC 9110 5.6.1). */
        while (p < end && (*p == ',' || *p == ' ' || *p == '\t'))
            p++;
        if (p == end) break;
        const char *t = p;
        while (p < end && *p != ',')
            p++;
        const char *q = p;
        while (q > t && (q[-1] == ' ' || q[-1] == '\t'))
            q--;
        lx_str_t coding = {t, (size_t)(q - t)};
        int chunked = lx_str_ieq(coding, "chunked", 7);
        any = 1;
        switch (c->te) {
        case LX_TE_NONE: c->te = chunked ? LX_TE_CHUNKED : LX_TE_OTHER; break;
        case LX_TE_OTHER: c->te = chunked ? LX_TE_UNKNOWN : LX_TE_OTHER; break;
        case LX_TE_CHUNKED:
        case LX_TE_UNKNOWN: c->te = LX_TE_BAD; break; /* a coding after chunked */
        default: break;
        }
    }
    if (!any) c->te = LX_TE_BAD; /* "Transfer-Encoding:" with no coding */
}

static int on_header_value_complete(llhttp_t *p) {
    lx_sess_t *c = SESS(p);
    lx_req_t *r = &c->req;
    lx_header_t *h = c->cur_header;
    if (c->req.head_done) {
        c->framing_parts++;
        return 0; /* a trailer field: dropped */
    }
    if (h == NULL) return -1; /* a line with an empty field name */
    c->cur_header = NULL;
    if (h->value.p == NULL) {
        h->value.p = c->last_end;
        h->value.len = 0;
    }
    /* llhttp lets "Name :" and ": value" through; RFC 9112 5.1 wants a
     * token and no whitespace before the colon, and such names are how
     * request smuggling starts. */
    if (h->name.len == 0) return -1;
    if (!is_token(h->name.p, h->name.len)) return -1;
    while (h->value.len &&
           (h->value.p[h->value.len - 1] == ' ' || h->value.p[h->value.len - 1] == '\t'))
        h->value.len--;
    int id = lx_known_header_str(h->name);
    if (id < 0) return 0;
    if (id == LX_H_HOST && r->hosts++ > 0) return -1; /* two Host headers: which one is meant? */
    if (id == LX_H_TRANSFER_ENCODING) note_transfer_codings(c, h->value);
    r->known[id] = h->value;
    return 0;
}

static int on_headers_complete(llhttp_t *p) {
    lx_sess_t *c = SESS(p);
    lx_req_t *r = &c->req;
    const lx_server_conf_t *s = &c->w->gen->srv;
    c->req.head_done = 1;
    /* Refused before the method and version are set: the log shows the
     * first line as received (conn.c keep_first_line). */
    if (c->last_end && (size_t)(c->last_end - (c->rbuf + c->req_start)) > s->max_header_bytes) {
        c->err_status = 431;
        r->unparsed = 1;
        return -1;
    }
    /* HTTP/1.2 to 1.9 (on_version_complete refused other majors) are
     * processed and answered as 1.1, the highest minor luxd implements
     * (RFC 9112 2.3). */
    r->http_major = 1;
    r->http_minor = p->http_minor > 1 ? 1 : p->http_minor;
    r->method = p->method;
    r->head = p->method == HTTP_HEAD;
    if (r->http_minor >= 1 && r->hosts == 0)
        return -1; /* RFC 9112 3.2: a 1.1 request without Host gets 400 */
    if ((p->flags & F_TRANSFER_ENCODING) && r->http_minor == 0)
        return -1; /* RFC 9112 6.1: Transfer-Encoding in 1.0 is a framing fault */
    switch ((lx_te_t)c->te) {
    case LX_TE_NONE: break;
    case LX_TE_CHUNKED:
        /* llhttp must frame the body the same way, or we would not agree
         * with it on where this request ends. */
        if (!(p->flags & F_CHUNKED)) return -1;
        break;
    case LX_TE_UNKNOWN: c->err_status = 501; return -1;
    default: return -1; /* RFC 9112 6.3: the length cannot be known: 400, close */
    }
    /* luxd is no tunnel or proxy: CONNECT is not allowed (nginx answers
     * 405 too), and for any other method Upgrade is a header like others.
     * The request is answered as HTTP/1.1 and the connection goes on. */
    if (p->method == HTTP_CONNECT) {
        c->err_status = 405;
        return -1;
    }
    p->upgrade = 0;
    r->chunked = (p->flags & F_CHUNKED) != 0;
    if (p->flags & F_CONTENT_LENGTH) {
        r->content_length = p->content_length;
        if (r->content_length > s->max_body_bytes) {
            c->err_status = 413;
            return -1;
        }
    }
    r->keepalive = llhttp_should_keep_alive(p) && s->keepalive_timeout > 0 &&
                   c->c->nreq < s->keepalive_requests && c->w->stop == 0 && !c->c->draining;
    /* RFC 9110 10.1.1: an HTTP/1.0 server knows no expectations, so one in
     * a 1.0 request is ignored. In 1.1, 100-continue asks whether to send
     * the body: luxd pauses here and answers first (conn_process), so a
     * request that will be refused gets its final status instead. */
    if (r->known[LX_H_EXPECT].len && r->http_minor >= 1 && (r->chunked || r->content_length)) {
        if (!lx_str_ieq(r->known[LX_H_EXPECT], "100-continue", 12)) {
            c->err_status = 417;
            return -1;
        }
        c->req.expect = LX_EXPECT_WAITING;
    }
    /* A request with a body is dispatched now, before its body (conn.c
     * dispatch); one without is parsed to its end first, in the same run
     * (on_message_complete pauses then), which costs no second one. */
    return r->chunked || r->content_length ? HPE_PAUSED : 0;
}

/* Body bytes go to the request's reader, if it has one; after each piece
 * the parser pauses until the reader asks for more (lx_body_more). */
static int on_body(llhttp_t *p, const char *at, size_t len) {
    lx_sess_t *c = SESS(p);
    lx_req_t *r = &c->req;
    if (len == 0) return 0; /* llhttp's span, re-entered with no byte */
    if (c->body_base == 0) c->body_base = (size_t)(at - c->rbuf);
    r->body_read += len;
    if (r->body_read > c->w->gen->srv.max_body_bytes) {
        c->err_status = 413;
        return -1;
    }
    if (r->body_state == LX_BODY_READING && r->body_cb) {
        c->body_paused = 1;
        r->body_cb(r, at, len, 0);
        return HPE_PAUSED;
    }
    return 0;
}

/* A chunk announced bigger than what is left of max_body_bytes is refused
 * before its bytes arrive. */
static int on_chunk_header(llhttp_t *p) {
    lx_sess_t *c = SESS(p);
    c->framing_parts++;
    if (p->content_length > c->w->gen->srv.max_body_bytes - c->req.body_read) {
        c->err_status = 413;
        return -1;
    }
    return 0;
}

/* Chunk extensions carry nothing luxd uses, but each byte costs a read:
 * without a bound, a client sends gigabytes of "1;x=aaaa..." with a body
 * of a few bytes (CVE-2024-22019). A request's extensions may add up to
 * max_header_bytes: the name and value bytes, and one for each ';' and '='. */
static int count_extension(lx_sess_t *c, size_t len) {
    return count_framing(c, &c->ext_bytes, len, 413);
}

static int on_chunk_extension_name(llhttp_t *p, const char *at, size_t len) {
    return count_extension(SESS(p), len);
}

static int on_chunk_extension_delimiter(llhttp_t *p) {
    return count_extension(SESS(p), 1);
}

/* llhttp 8 consumes the ';' after an unquoted extension value and then
 * reads on as if the chunk size went on, so a valid "1;a=1;b=2" gets 400
 * (fixed in later llhttp). The last piece of a value ends at its
 * delimiter, which is still in the buffer: when that is the ';' of an
 * unquoted value (a quoted one ends in '"', and llhttp reads the ';' after
 * it right), on_chunk_extension_value_complete pauses and conn_process
 * feeds the ';' again, which llhttp then takes for the next extension. */
static int on_chunk_extension_value(llhttp_t *p, const char *at, size_t len) {
    lx_sess_t *c = SESS(p);
#if LLHTTP_VERSION_MAJOR == 8
    if (len) c->ext_last = at[len - 1];
    if (at + len < c->rbuf + c->rlen && at[len] == ';' && c->ext_last != '"') c->ext_refeed = 1;
#endif
    return count_extension(c, len);
}

static int on_chunk_extension_value_complete(llhttp_t *p) {
    lx_sess_t *c = SESS(p);
    c->ext_last = 0;
    int r = count_extension(c, 1);
    return r == 0 && c->ext_refeed ? HPE_PAUSED : r;
}

static int on_message_complete(llhttp_t *p) {
    lx_sess_t *c = SESS(p);
    c->message_done = 1;
    return HPE_PAUSED;
}

/* Filled at compile time: every worker thread reads it, none writes it. */
const llhttp_settings_t lx_h1_settings = {
    .on_url = on_url,
    .on_url_complete = on_url_complete,
    .on_version = on_version,
    .on_version_complete = on_version_complete,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_header = on_chunk_header,
    .on_chunk_extension_name = on_chunk_extension_name,
    .on_chunk_extension_value = on_chunk_extension_value,
    .on_chunk_extension_name_complete = on_chunk_extension_delimiter,
    .on_chunk_extension_value_complete = on_chunk_extension_value_complete,
    .on_message_complete = on_message_complete,
};

void lx_h1_parser_init(llhttp_t *p, const llhttp_settings_t *settings) {
    llhttp_init(p, HTTP_REQUEST, settings);
    /* luxd decides keep-alive once, from the header section
     * (r->keepalive), and never parses past a request it answers with
     * Connection: close. Strict llhttp decides again after the trailer
     * section, so a trailer "Connection: close" would make it refuse the
     * next request on a connection our response said stays open. Trailers
     * change nothing. */
    llhttp_set_lenient_keep_alive(p, 1);
    /* llhttp 8 takes only the versions 0.9, 1.0, 1.1 and 2.0 and refuses
     * the others as malformed (400); leniently it takes any DIGIT.DIGIT and
     * on_version_complete answers as RFC 9112 2.3 says. llhttp 8.1 has no
     * setter for this flag; its lenient_flags field is public. */
    p->lenient_flags |= LENIENT_VERSION;
}

/* Whether a method token is one llhttp parses in an HTTP request. */
static int http_method_known(const char *m, size_t len) {
#define XX(num, name, string)                                                                      \
    if (len == sizeof(#string) - 1 && memcmp(m, #string, len) == 0) return 1;
    HTTP_METHOD_MAP(XX)
#undef XX
    return 0;
}

int lx_h1_line_status(const char *p, size_t len, size_t max) {
    const char *end = p + len;
    /* llhttp skips empty lines before a request line (RFC 9112 2.2). */
    p = skip_empty_lines(p, end);
    if (p == NULL) return 400;
    const char *m = p;
    while (p < end && tchar[(unsigned char)*p])
        p++;
    if (p == end) return 0;
    if (p == m || *p != ' ') return 400;
    size_t mlen = (size_t)(p - m);
    const char *t = ++p;
    while (p < end && (unsigned char)*p > ' ' && *p != 0x7f)
        p++;
    if (p == end) return 0;
    if (p == t || *p != ' ') return 400;
    p++;
    static const char version[] = "HTTP/9.9";
    char major = 0;
    for (size_t i = 0; i < sizeof(version) - 1; i++, p++) {
        if (p == end) return 0;
        int ok = version[i] == '9' ? *p >= '0' && *p <= '9' : *p == version[i];
        if (!ok) return 400;
        if (i == 5) major = *p;
    }
    const char *line_end = p;
    if (p < end && *p == '\r') p++;
    if (p == end) return 0;
    if (*p != '\n') return 400;
    /* A method llhttp knows failed on something else: that stands. */
    if (http_method_known(m, mlen)) return 400;
    /* The line counts against max_header_bytes as a whole (a known
     * method's target alone does: on_url_complete). */
    if ((size_t)(line_end - m) > max) return 414;
    return major != '1' ? 505 : 501;
}

int lx_h1_line_is_http1(const char *p, size_t n, size_t cap) {
    const char *end = p + n;
    while (p < end && (*p == '\r' || *p == '\n'))
        p++;
    const char *lf = memchr(p, '\n', (size_t)(end - p));
    if (lf == NULL) return n < cap ? 0 : 1;
    const char *e = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
    return e - p >= 10 && memcmp(e - 9, " HTTP/1.", 8) == 0 && e[-1] >= '0' && e[-1] <= '9' ? 1
                                                                                            : -1;
}
