/* A parsed request and the functions that answer it. One request per
 * connection is in flight at a time; pipelined ones wait in the read buffer. */
#ifndef LX_REQUEST_H
#define LX_REQUEST_H

#include <stdint.h>
#include <time.h>

#include "arena.h"
#include "config/config.h"
#include "lx.h"

typedef struct lx_conn_s lx_conn_t;
typedef struct lx_file_s lx_file_t;

/* Headers the request path consults, found once while parsing. */
enum {
    LX_H_HOST,
    LX_H_CONNECTION,
    LX_H_IF_NONE_MATCH,
    LX_H_IF_MODIFIED_SINCE,
    LX_H_RANGE,
    LX_H_IF_RANGE,
    LX_H_ACCEPT_ENCODING,
    LX_H_USER_AGENT,
    LX_H_REFERER,
    LX_H_EXPECT,
    LX_H_TRANSFER_ENCODING,
    LX_H_KNOWN
};

typedef struct {
    lx_str_t name;  /**< as sent */
    lx_str_t value; /**< without surrounding whitespace */
} lx_header_t;

#define LX_MAX_HEADERS 100

typedef struct lx_req_s {
    lx_conn_t *conn;            /**< the connection it arrived on */
    lx_gen_t *gen;              /**< the generation it runs under, start to end */
    int method;                 /**< llhttp_method_t */
    int http_minor;             /**< 0 or 1 (major is always 1) */
    lx_str_t target;            /**< request target as sent */
    lx_str_t path;              /**< raw path part of target */
    lx_str_t query;             /**< after '?', without it; len 0 if none */
    lx_str_t known[LX_H_KNOWN]; /**< values of the headers above */
    lx_header_t *headers;       /**< all headers, in order (arena) */
    unsigned nheaders;          /**< entries in headers */
    unsigned hosts;             /**< Host headers seen (more than one is a 400) */
    char *decoded;              /**< normalised path (arena) */
    size_t decoded_len;         /**< strlen(decoded) */
    lx_vhost_t *vhost;          /**< chosen by Host */
    const lx_site_t *site;      /**< vhost or location settings */
    const char *root;           /**< document root: the site's, or vhost_dir/host */
    size_t root_len;            /**< strlen(root) */
    int error_status;           /**< serving the error page for this status, or 0 */
    int status;                 /**< response status, for the log */
    uint64_t body_bytes;        /**< response body bytes, for the log */
    uint64_t content_length;    /**< request body length announced */
    uint64_t body_read;         /**< request body bytes received */
    unsigned keepalive : 1;     /**< the connection stays open after this response */
    unsigned head : 1;          /**< HEAD: headers only */
    unsigned chunked : 1;       /**< the request body is chunked */
    unsigned responded : 1;     /**< a response has been queued */
    unsigned in_handlers : 1;   /**< lx_resp_error may reroute to an error page */
    unsigned reroute : 1;       /**< run the handlers again for r->decoded */
    lx_arena_t *arena;          /**< request memory, reset when the request ends */
    void *handler_data;         /**< a handler's state across an LX_ASYNC wait */
    lx_str_t host;              /**< Host without port, for policies */
    char *extra;                /**< header lines a policy added (arena) */
    size_t extra_len;           /**< bytes in extra */
    size_t extra_cap;           /**< bytes allocated for extra */
} lx_req_t;

/* Runs a complete request through vhost, path and handler; the single entry
 * point of the request path (doc/design.md). May queue a response, or return with
 * the request waiting on the thread pool; lx_request_resume continues it. */
void lx_request_run(lx_req_t *r);
void lx_request_resume(lx_req_t *r);
/* Points the request at its site's error page for status (error_pages), if
 * there is one and none was tried yet. Returns 1 when it did. */
int lx_request_error_page(lx_req_t *r, int status);

/* Response building (response.c). Status line, Server and Date come first;
 * callers add their headers, then end the header block, then the body. */
void lx_resp_start(lx_req_t *r, int status);
void lx_resp_header(lx_req_t *r, const char *line, size_t len); /* "Name: value\r\n" */
void lx_resp_headerf(lx_req_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lx_resp_end_headers(lx_req_t *r);
void lx_resp_body_copy(lx_req_t *r, const char *p, size_t len);
/* A small complete answer: status, vhost headers, a short HTML body. */
void lx_resp_error(lx_req_t *r, int status);
/* The same with extra "Name: value\r\n" lines (Location, Content-Range). */
void lx_resp_error_with(lx_req_t *r, int status, const char *extra);
/* Called once the whole response is queued: logs it and lets the connection
 * go on to the next request. */
void lx_resp_done(lx_req_t *r);

const char *lx_status_reason(int status);

#endif
