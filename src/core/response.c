/* Responses: a structured response (status, header lines in the request's
 * arena, a length or "unknown"), what is the same in every protocol (the
 * response's state, HEAD/1xx/204/304 send no body whatever the handler
 * sends, Expect, Allow, what the log counts), and the calls into the
 * protocol (proto.h) that write and frame it: h1/emit.c for HTTP/1. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "llhttp.h"
#include "request.h"

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

size_t lx_clamp_len(int n, size_t cap) {
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
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
static void settle_expect(lx_req_t *r) {
    if (r->expect != LX_EXPECT_WAITING) return;
    if (r->resp.status >= 300 || r->resp.status < 200) {
        r->expect = LX_EXPECT_ANSWERED;
        r->keepalive = 0;
    } else if (r->proto->cont(r) < 0) {
        r->keepalive = 0;
    }
}

/* "Allow: GET, HEAD, ...\r\n" for a set of methods (LX_METHOD bits), GET
 * and HEAD first, the others in llhttp's order; an empty value when none is
 * allowed (RFC 9110 10.2.1). Every method llhttp knows fits in ALLOW_MAX
 * (about 300 bytes). */
#define ALLOW_MAX 512
static void add_allow(lx_req_t *r, uint64_t m) {
    static const int first[] = {HTTP_GET, HTTP_HEAD};
    char b[ALLOW_MAX];
    size_t len = 6;
    memcpy(b, "Allow:", 6);
    const char *sep = " ";
    for (int i = -2; i < 64; i++) {
        int k = i < 0 ? first[i + 2] : i;
        if (!(m & LX_METHOD(k)) || (i >= 0 && (k == HTTP_GET || k == HTTP_HEAD))) continue;
        const char *name = llhttp_method_name((llhttp_method_t)k);
        size_t n = strlen(name), sn = strlen(sep);
        if (len + sn + n + 2 > ALLOW_MAX) break;
        memcpy(b + len, sep, sn);
        memcpy(b + len + sn, name, n);
        len += sn + n;
        sep = ", ";
    }
    memcpy(b + len, "\r\n", 2);
    lx_resp_header(r, b, len + 2);
}

void lx_resp_send_headers(lx_req_t *r) {
    lx_resp_t *rs = &r->resp;
    int st = rs->status;
    if (rs->state != LX_RESP_NONE || r->aborted) return;
    rs->state = LX_RESP_HEADERS;
    settle_expect(r);
    rs->no_body = r->head || st < 200 || st == 204 || st == 304;
    /* RFC 9110 15.5.6: a 405 lists what is allowed (its error page too);
     * a backend's 405 carries its own. */
    if (st == 405 && r->allow_set) add_allow(r, r->allow);
    r->proto->head(r);
}

void lx_resp_body_copy(lx_req_t *r, const char *p, size_t len) {
    if (r->resp.no_body || len == 0 || r->aborted) return;
    r->body_bytes += len;
    r->proto->copy(r, p, len);
}

void lx_resp_body_file(lx_req_t *r, lx_file_t *f, uint64_t off, uint64_t len) {
    if (r->resp.no_body || len == 0 || r->aborted) return;
    r->body_bytes += len;
    r->proto->file(r, f, off, len);
}

void lx_resp_interim(lx_req_t *r) {
    if (r->aborted || r->resp.state != LX_RESP_NONE) return;
    r->proto->interim(r);
    r->resp.len = 0; /* the final response's lines start afresh */
}

void lx_resp_done(lx_req_t *r) {
    if (r->aborted) return;
    if (r->resp.state == LX_RESP_NONE) lx_resp_simple(r, 500, NULL); /* a handler's bug */
    if (r->resp.state == LX_RESP_DONE) return;
    /* Ended before its body was whole (a backend that went away mid-body:
     * a stream never ended, or fewer bytes than its length): the client
     * must not take it for whole. HTTP/1 closes without the last chunk;
     * HTTP/2 resets the stream rather than end it. */
    lx_resp_t *rs = &r->resp;
    rs->cut = rs->state == LX_RESP_STREAMING ||
              (rs->length >= 0 && !rs->no_body && r->body_bytes < (uint64_t)rs->length);
    if (rs->cut) r->keepalive = 0;
    rs->state = LX_RESP_DONE;
    r->waiting = 0;
    r->proto->done(r);
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
    size_t blen = lx_clamp_len(n, sizeof(body));
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
    r->proto->output(r);
}

int lx_stream_send(lx_req_t *r, const char *p, size_t len) {
    if (r->aborted || r->resp.state != LX_RESP_STREAMING) return 0;
    r->body_bytes += len;
    return r->proto->send(r, p, len);
}

void lx_stream_end(lx_req_t *r) {
    if (r->aborted || r->resp.state != LX_RESP_STREAMING) return;
    r->proto->end(r);
    r->resp.producer = NULL;
    r->resp.state = LX_RESP_HEADERS; /* lx_resp_done marks it complete */
    lx_resp_done(r);
}

void lx_tunnel_start(lx_req_t *r, const lx_producer_t *p, lx_body_cb cb) {
    if (r->aborted) return;
    r->proto->tunnel(r, p, cb);
}

void lx_tunnel_more(lx_req_t *r) {
    if (!r->aborted) r->proto->tunnel_more(r);
}
