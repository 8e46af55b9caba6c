/* Building responses into the connection's output buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "conn.h"
#include "request.h"
#include "worker.h"

const char *lx_status_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default:
        return status < 300   ? "OK"
               : status < 400 ? "Redirect"
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

static void put(lx_req_t *r, const char *p, size_t len) {
    lx_conn_t *c = r->conn;
    char *b = lx_conn_obuf_reserve(c, len);
    if (b == NULL) return; /* out of memory: the response comes out short and the close tells */
    memcpy(b, p, len);
    c->olen += len;
}

void lx_resp_start(lx_req_t *r, int status) {
    lx_conn_t *c = r->conn;
    lx_worker_t *w = c->w;
    lx_worker_update_time(w);
    r->status = status;
    r->responded = 1;
    if (c->expect == LX_EXPECT_WAITING) lx_conn_answer_expect(c, r, status);
    c->resp_from = c->olen;
    if (status == 200) {
        /* The common case costs one copy of a string built once a second. */
        put(r, w->head200, w->head200_len);
        return;
    }
    char line[128];
    int n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\nServer: " LX_SERVER "\r\nDate: %s\r\n",
                     status, lx_status_reason(status), w->date);
    put(r, line, clamp_len(n, sizeof(line)));
}

void lx_resp_header(lx_req_t *r, const char *line, size_t len) {
    put(r, line, len);
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
        put(r, line, (size_t)n);
    } else if (n > 0) {
        char *big = malloc((size_t)n + 1);
        int m = big ? vsnprintf(big, (size_t)n + 1, fmt, again) : -1;
        /* Out of memory: the response comes out short and the close tells. */
        if (m == n) put(r, big, (size_t)n);
        free(big);
    }
    va_end(again);
}

void lx_resp_end_headers(lx_req_t *r) {
    if (r->extra_len) put(r, r->extra, r->extra_len);
    if (!r->keepalive)
        put(r, "Connection: close\r\n\r\n", 21);
    else if (r->http_minor == 0)
        put(r, "Connection: keep-alive\r\n\r\n", 26);
    else
        put(r, "\r\n", 2);
    lx_conn_queue_obuf(r->conn, r->conn->resp_from);
}

void lx_resp_body_copy(lx_req_t *r, const char *p, size_t len) {
    if (r->head || len == 0) return;
    size_t from = r->conn->olen;
    put(r, p, len);
    lx_conn_queue_obuf(r->conn, from);
    r->body_bytes += len;
}

void lx_resp_error(lx_req_t *r, int status) {
    lx_resp_error_with(r, status, NULL);
}

void lx_resp_error_with(lx_req_t *r, int status, const char *extra) {
    /* Inside a handler an error page is served by running the handlers
     * again for the page's path (request.c); elsewhere finish() does it. */
    if (r->in_handlers && status >= 400 && lx_request_error_page(r, status)) {
        r->reroute = 1;
        return;
    }
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
    lx_resp_start(r, status);
    if (status == 405) put(r, "Allow: GET, HEAD\r\n", 18);
    if (extra) put(r, extra, strlen(extra));
    if (r->site && r->site->headers_len) put(r, r->site->headers, r->site->headers_len);
    if (status < 200 || status == 204 || status == 304) {
        /* No body, so no Content-Length either (RFC 9110 8.6). */
        lx_resp_end_headers(r);
        return;
    }
    if (status == 205) {
        /* 205 Reset Content: no content, said with a zero length so that a
         * keep-alive client need not wait for a close (RFC 9110 15.3.6). */
        put(r, "Content-Length: 0\r\n", 19);
        lx_resp_end_headers(r);
        return;
    }
    size_t blen = clamp_len(n, sizeof(body));
    lx_resp_headerf(r, "Content-Type: text/html; charset=utf-8\r\nContent-Length: %zu\r\n", blen);
    lx_resp_end_headers(r);
    lx_resp_body_copy(r, body, blen);
}

void lx_resp_done(lx_req_t *r) {
    lx_conn_t *c = r->conn;
    if (r->gen->srv.access_log.path) lx_access_log(c->w, r);
    lx_conn_request_done(c);
}
