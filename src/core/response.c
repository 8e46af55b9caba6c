/* Responses: a structured response (status, header lines in the request's
 * arena, a length or "unknown") and the one serializer that turns it into
 * bytes, with every framing rule in one place:
 *
 *   length known      Content-Length (also on HEAD, as GET would send it)
 *   length unknown    HTTP/1.1: Transfer-Encoding: chunked; HTTP/1.0: the
 *                     body ends at the close (Connection: close)
 *   HEAD, 1xx, 204, 304   no body, whatever the handler sends
 *   1xx, 204          no Content-Length or Transfer-Encoding (RFC 9110 8.6)
 *
 * Streamed bodies are copied into pooled buffers, framed, and written as
 * the connection drains (lx_producer_t). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "h1/conn.h"
#include "io/filecache.h"
#include "llhttp.h"
#include "core/request.h"
#include "worker.h"

/* Output still queued above this after a write makes lx_stream_send ask
 * the producer to wait. The socket's own buffer (the kernel sizes it to
 * the connection) is the stream's buffer; luxd keeps at most about one
 * piece beyond it, so a thousand slow downloads cost a thousand pieces,
 * not a thousand quarter-megabytes. */
#define STREAM_HIGH_WATER (16 * 1024)

const char *lx_status_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 102: return "Processing";
    case 103: return "Early Hints";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 207: return "Multi-Status";
    case 208: return "Already Reported";
    case 226: return "IM Used";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 305: return "Use Proxy";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 423: return "Locked";
    case 424: return "Failed Dependency";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 506: return "Variant Also Negotiates";
    case 507: return "Insufficient Storage";
    case 508: return "Loop Detected";
    case 510: return "Not Extended";
    case 511: return "Network Authentication Required";
    default:
        /* An unregistered code (a backend's): its class (RFC 9110 15). */
        return status < 200   ? "Informational"
               : status < 300 ? "Success"
               : status < 400 ? "Redirection"
               : status < 500 ? "Client Error"
                              : "Server Error";
    }
}

/* What snprintf wrote into a buffer of cap bytes, given what it returned:
 * the return is the length the whole text would need, which is more than
 * was written when the text was cut. The texts formatted here have known
 * bounds, so a cut is a bug, but one that must not become an over-read. */
static size_t clamp_len(int n, size_t cap) {
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

static void put(lx_out_t *o, const char *p, size_t len) {
    char *b = lx_out_reserve(o, len);
    if (b == NULL) return; /* out of memory: the response comes out short and the close tells */
    memcpy(b, p, len);
    o->olen += len;
}

void lx_resp_init(lx_req_t *r, int status) {
    /* An error page keeps the status the request earned, whichever handler
     * serves it (the static one, the test handler, a backend): a page that
     * answers with success must not turn a 404 into a 200. */
    if (r->error_status && status >= 200 && status < 300) status = r->error_status;
    r->resp.status = status;
    r->resp.length = -1;
    r->resp.block = NULL;
    r->resp.block_len = 0;
    r->resp.len = 0;
    r->status = status;
}

/* Room for len more bytes of header lines, or NULL. */
static char *lines_room(lx_req_t *r, size_t len) {
    lx_resp_t *rs = &r->resp;
    if (rs->len + len > rs->cap) {
        size_t cap = rs->cap ? rs->cap * 2 : 512;
        while (cap < rs->len + len)
            cap *= 2;
        char *n = lx_arena_alloc(r->arena, cap);
        if (n == NULL) return NULL;
        if (rs->len) memcpy(n, rs->lines, rs->len);
        rs->lines = n;
        rs->cap = cap;
    }
    char *at = rs->lines + rs->len;
    rs->len += len;
    return at;
}

void lx_resp_header(lx_req_t *r, const char *line, size_t len) {
    char *at = len ? lines_room(r, len) : NULL;
    if (at) memcpy(at, line, len);
}

void lx_resp_field(lx_req_t *r, lx_str_t name, lx_str_t value) {
    char *at = lines_room(r, name.len + value.len + 4);
    if (at == NULL) return;
    memcpy(at, name.p, name.len);
    memcpy(at + name.len, ": ", 2);
    memcpy(at + name.len + 2, value.p, value.len);
    memcpy(at + name.len + 2 + value.len, "\r\n", 2);
}

/* Formats header lines. vsnprintf's result is what the text would need, not
 * what it wrote: a value longer than the stack buffer (a long Content-Type
 * from mime { }, say) is formatted again into a buffer of that size, because
 * a truncated header line would lose its CRLF and merge into the next. */
void lx_resp_headerf(lx_req_t *r, const char *fmt, ...) {
    char line[1024];
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(line)) {
        lx_resp_header(r, line, (size_t)n);
    } else if (n > 0) {
        char *big = lx_arena_alloc(r->arena, (size_t)n + 1);
        if (big && vsnprintf(big, (size_t)n + 1, fmt, again) == n)
            lx_resp_header(r, big, (size_t)n);
    }
    va_end(again);
}

/* A client waiting for 100 Continue whose request is answered without a
 * reader asking for the body: a success keeps the connection, so the 100
 * goes first and the body is read and dropped after the response; anything
 * else is the last response on the connection, as the client may or may
 * not send the body now and the next request's start is in doubt. */
static void settle_expect(lx_sess_t *s, lx_req_t *r) {
    if (s->expect != LX_EXPECT_WAITING) return;
    if (r->resp.status >= 300 || r->resp.status < 200) {
        s->expect = LX_EXPECT_ANSWERED;
        r->keepalive = 0;
    } else if (lx_sess_send_continue(s) < 0) {
        r->keepalive = 0;
    }
}

/* Writes v in decimal so that it ends at end; returns its length. Two
 * digits a step, from a table: every response with a length formats one. */
static size_t put_u64_before(char *end, uint64_t v) {
    static const char d2[201] = "0001020304050607080910111213141516171819"
                                "2021222324252627282930313233343536373839"
                                "4041424344454647484950515253545556575859"
                                "6061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    char *p = end;
    while (v >= 100) {
        const char *d = d2 + (v % 100) * 2;
        v /= 100;
        p -= 2;
        p[0] = d[0];
        p[1] = d[1];
    }
    if (v >= 10) {
        p -= 2;
        p[0] = d2[v * 2];
        p[1] = d2[v * 2 + 1];
    } else {
        *--p = (char)('0' + v);
    }
    return (size_t)(end - p);
}

static char *copy(char *dst, const char *src, size_t len) {
    memcpy(dst, src, len);
    return dst + len;
}

/* "Allow: GET, HEAD, ...\r\n" for a set of methods (LX_METHOD bits), GET and HEAD first, the others
 * in llhttp's order; an empty value when none is allowed (RFC 9110 10.2.1). Returns its length.
 * Every method llhttp knows fits in LX_ALLOW_MAX (about 300 bytes). */
#define LX_ALLOW_MAX 512
static size_t allow_line(uint64_t m, char *b) {
    static const int first[] = {HTTP_GET, HTTP_HEAD};
    char *p = copy(b, "Allow:", 6);
    const char *sep = " ";
    for (int i = -2; i < 64; i++) {
        int k = i < 0 ? first[i + 2] : i;
        if (!(m & LX_METHOD(k)) || (i >= 0 && (k == HTTP_GET || k == HTTP_HEAD))) continue;
        const char *name = llhttp_method_name((llhttp_method_t)k);
        size_t n = strlen(name);
        if ((size_t)(p - b) + n + 4 > LX_ALLOW_MAX) break;
        p = copy(p, sep, strlen(sep));
        p = copy(p, name, n);
        sep = ", ";
    }
    return (size_t)(copy(p, "\r\n", 2) - b);
}

void lx_resp_send_headers(lx_req_t *r) {
    lx_sess_t *s = lx_sess_of(r);
    lx_resp_t *rs = &r->resp;
    lx_out_t *o = &s->out;
    lx_worker_t *w = r->w;
    int st = rs->status;
    if (rs->state != LX_RESP_NONE || r->aborted) return;
    rs->state = LX_RESP_HEADERS;
    settle_expect(s, r);
    lx_worker_update_time(w);
    /* The common case costs one copy of a status line, Server and Date
     * built once a second. */
    const char *head = w->head200;
    size_t head_len = w->head200_len;
    char line[128];
    if (st != 200) {
        int n =
            snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\nServer: " LX_SERVER "\r\nDate: %s\r\n",
                     st, lx_status_reason(st), w->date);
        head = line;
        head_len = clamp_len(n, sizeof(line));
    }
    rs->no_body = r->head || st < 200 || st == 204 || st == 304;
    /* Framing: a Content-Length, chunked, or the close. */
    char num[20];
    size_t num_len = 0, te_len = 0;
    if (st < 200 || st == 204) {
        /* No body, so no framing either. */
    } else if (rs->length >= 0) {
        if (st != 304) num_len = put_u64_before(num + sizeof(num), (uint64_t)rs->length);
    } else if (st != 304) {
        if (r->http_minor >= 1) {
            rs->chunked = !rs->no_body;
            te_len = 28;
        } else {
            r->keepalive = 0; /* HTTP/1.0: the close ends the body */
        }
    }
    /* The end of the block, and what keep-alive needs said (a 101's own
     * lines carry Connection: upgrade). */
    const char *end = "\r\n";
    size_t end_len = 2;
    if (st != 101 && !r->keepalive) {
        end = "Connection: close\r\n\r\n";
        end_len = 21;
    } else if (st != 101 && r->http_minor == 0) {
        end = "Connection: keep-alive\r\n\r\n";
        end_len = 26;
    }
    /* RFC 9110 15.5.6: a 405 lists what is allowed (its error page too);
     * a backend's 405 carries its own. */
    char allow[LX_ALLOW_MAX];
    size_t allow_len = st == 405 && r->allow_set ? allow_line(r->allow, allow) : 0;
    size_t len = head_len + allow_len + rs->block_len + (num_len ? 16 + num_len + 2 : 0) + te_len +
                 rs->len + r->extra_len + end_len;
    /* One reservation for the whole header block. Out of memory, the
     * response comes out short and the close tells (out.failed). */
    char *b = lx_out_reserve(o, len);
    if (b == NULL) return;
    char *p = copy(b, head, head_len);
    if (allow_len) p = copy(p, allow, allow_len);
    if (rs->block_len) p = copy(p, rs->block, rs->block_len);
    if (num_len) {
        p = copy(p, "Content-Length: ", 16);
        p = copy(p, num + sizeof(num) - num_len, num_len);
        p = copy(p, "\r\n", 2);
    }
    if (te_len) p = copy(p, "Transfer-Encoding: chunked\r\n", 28);
    if (rs->len) p = copy(p, rs->lines, rs->len);
    if (r->extra_len) p = copy(p, r->extra, r->extra_len);
    copy(p, end, end_len);
    o->olen += len;
    r->head_bytes += len;
    lx_out_obuf(o, o->olen - len);
}

void lx_resp_body_copy(lx_req_t *r, const char *p, size_t len) {
    if (r->resp.no_body || len == 0 || r->aborted) return;
    lx_out_t *o = &lx_sess_of(r)->out;
    size_t from = o->olen;
    put(o, p, len);
    lx_out_obuf(o, from);
    r->body_bytes += len;
}

void lx_resp_body_file(lx_req_t *r, lx_file_t *f, uint64_t off, uint64_t len) {
    if (r->resp.no_body || len == 0 || r->aborted) return;
    lx_out_t *o = &lx_sess_of(r)->out;
    if (f->data)
        lx_out_mem(o, f, f->data + off, (size_t)len);
    else
        lx_out_file(o, f, off, len);
    r->body_bytes += len;
}

void lx_resp_interim(lx_req_t *r) {
    lx_sess_t *s = lx_sess_of(r);
    lx_resp_t *rs = &r->resp;
    lx_out_t *o = &s->out;
    if (r->aborted || rs->state != LX_RESP_NONE || r->http_minor == 0) return;
    /* A client that does not read while a backend sends 1xx after 1xx
     * (103s, 102s) would have them all queued here, with nothing to stop
     * the backend: past the stream's high-water mark they are dropped.
     * They are advice, and the final response still comes. */
    if (o->queued > STREAM_HIGH_WATER || o->n > LX_OUT_MAX / 2) {
        rs->len = 0;
        return;
    }
    char line[64];
    int n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", rs->status,
                     lx_status_reason(rs->status));
    size_t from = o->olen;
    put(o, line, clamp_len(n, sizeof(line)));
    if (rs->len) put(o, rs->lines, rs->len);
    put(o, "\r\n", 2);
    r->head_bytes += o->olen - from;
    lx_out_obuf(o, from);
    rs->len = 0;
    lx_sess_output(s);
}

void lx_resp_done(lx_req_t *r) {
    if (r->aborted) return;
    if (r->resp.state == LX_RESP_NONE) lx_resp_simple(r, 500, NULL); /* a handler's bug */
    if (r->resp.state == LX_RESP_DONE) return;
    r->resp.state = LX_RESP_DONE;
    r->waiting = 0;
    lx_sess_response_done(lx_sess_of(r));
}

void lx_resp_simple(lx_req_t *r, int status, const char *extra) {
    if (status == 405) lx_req_note_allow(r);
    if (r->error_status && status != r->error_status) {
        /* The error page itself could not be served (missing, a directory,
         * unreadable): the client still gets the status the request earned,
         * with the built-in page, not the page's own 404 or 301. */
        status = r->error_status;
        extra = NULL;
    }
    char body[256];
    const char *reason = lx_status_reason(status);
    int n = snprintf(body, sizeof(body),
                     "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>"
                     "<body><h1>%d %s</h1><hr>" LX_SERVER "</body></html>\n",
                     status, reason, status, reason);
    lx_resp_init(r, status);
    if (extra) lx_resp_header(r, extra, strlen(extra));
    if (r->site && r->site->headers_len) lx_resp_header(r, r->site->headers, r->site->headers_len);
    if (status < 200 || status == 204 || status == 304) {
        lx_resp_send_headers(r);
        return;
    }
    if (status == 205) {
        /* 205 Reset Content: no content, said with a zero length so that a
         * keep-alive client need not wait for a close (RFC 9110 15.3.6). */
        r->resp.length = 0;
        lx_resp_send_headers(r);
        return;
    }
    size_t blen = clamp_len(n, sizeof(body));
    r->resp.length = (int64_t)blen;
    lx_resp_header(r, "Content-Type: text/html; charset=utf-8\r\n", 40);
    lx_resp_send_headers(r);
    lx_resp_body_copy(r, body, blen);
}

/* ---- streamed bodies ----------------------------------------------------- */

void lx_stream_start(lx_req_t *r, const lx_producer_t *p) {
    lx_resp_send_headers(r);
    if (r->aborted) return;
    if (r->resp.no_body) {
        lx_resp_done(r); /* HEAD: the headers are all of it */
        return;
    }
    r->resp.producer = p;
    r->resp.state = LX_RESP_STREAMING;
    r->waiting = 0;
    lx_sess_output(lx_sess_of(r));
}

/* Writes a piece (as one chunk when chunked) at dst: returns its length. */
static size_t frame_piece(char *dst, const char *p, size_t n, int chunked) {
    size_t h = 0;
    if (chunked) h = (size_t)snprintf(dst, 20, "%zx\r\n", n);
    memcpy(dst + h, p, n);
    if (chunked) memcpy(dst + h + n, "\r\n", 2);
    return h + n + (chunked ? 2 : 0);
}

int lx_stream_send(lx_req_t *r, const char *p, size_t len) {
    if (r->aborted || r->resp.state != LX_RESP_STREAMING) return 0;
    lx_sess_t *s = lx_sess_of(r);
    lx_out_t *o = &s->out;
    int chunked = r->resp.chunked;
    /* Room for a chunk's size line and its closing CRLF. */
    size_t frame = chunked ? 20 : 0, room = LX_OUT_BUF - frame;
    r->body_bytes += len;
    while (len) {
        size_t n = len < room ? len : room;
        /* Small pieces share a buffer (and a queue entry), each its own
         * chunk; a buffer is given to a write only once it is queued. */
        char *dst = lx_out_last_room(o, n + frame);
        if (dst) {
            lx_out_grow_last(o, frame_piece(dst, p, n, chunked));
        } else {
            char *buf = lx_pool_get(&s->w->obufs);
            if (buf == NULL) {
                lx_conn_close(s->c);
                return -ENOMEM;
            }
            lx_out_buf(o, buf, buf, frame_piece(buf, p, n, chunked));
        }
        p += n;
        len -= n;
    }
    lx_sess_output(s);
    return o->queued > STREAM_HIGH_WATER || o->n > LX_OUT_MAX / 2 ? -EAGAIN : 0;
}

void lx_stream_end(lx_req_t *r) {
    if (r->aborted || r->resp.state != LX_RESP_STREAMING) return;
    if (r->resp.chunked) lx_out_mem(&lx_sess_of(r)->out, NULL, "0\r\n\r\n", 5);
    r->resp.producer = NULL;
    r->resp.state = LX_RESP_HEADERS; /* lx_resp_done marks it complete */
    lx_resp_done(r);
}
