/* A parsed request, its structured response, and the functions handlers
 * answer with. Handlers see the request only: the connection behind it is
 * the protocol's, reached through r->proto and r->link (proto.h). */
#ifndef LX_REQUEST_H
#define LX_REQUEST_H

#include <stdint.h>
#include <time.h>

#include "arena.h"
#include "config/config.h"
#include "dispatch/cidr.h"
#include "io/waiter.h"
#include "llhttp.h"
#include "lx.h"
#include "proto.h"

typedef struct lx_file_s lx_file_t;
typedef struct lx_req_s lx_req_t;
typedef struct lx_worker_s lx_worker_t;

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
    LX_H_IF_MATCH,
    LX_H_IF_UNMODIFIED_SINCE,
    LX_H_KNOWN
};

#define LX_MAX_HEADERS 100

/* Bytes of a refused request's first line the access log shows (r->target
 * of an unparsed request). */
#define LX_RAW_LINE_MAX 1024

/* What a handler's handle() answers: one of these, or an HTTP status
 * (200..599) that finish() turns into the site's error page or the
 * built-in one (a 1xx, which is no final answer, becomes 500). */
enum {
    LX_DONE = 0,      /**< a response is under way (complete, or streaming) */
    LX_DECLINED = -1, /**< not mine: the next handler of the chain */
    LX_ASYNC = -2,    /**< waiting (thread pool, request body, a timer); resumed at this handler */
    LX_REDIRECT = -3, /**< r->decoded (and r->query) changed: an internal redirect (try_files);
                         the location is chosen again and its chain runs from the start */
};

/* Internal redirects a request may take (try_files), as nginx's limit of
 * 10: past it, a cycle of redirects is answered 500. */
#define LX_REDIRECTS_MAX 10

/* Where the request body stands. */
typedef enum {
    LX_BODY_NONE,    /**< the request has none */
    LX_BODY_UNREAD,  /**< it has one nobody asked for yet; parsing stopped at its start */
    LX_BODY_READING, /**< handed piece by piece to a reader */
    LX_BODY_DISCARD, /**< read and dropped */
    LX_BODY_DONE,    /**< all of it is parsed */
} lx_body_state_t;

/* Where the response stands. */
typedef enum {
    LX_RESP_NONE,      /**< nothing queued yet */
    LX_RESP_HEADERS,   /**< headers queued; the body (of known length) is being queued */
    LX_RESP_STREAMING, /**< headers queued; a producer sends the body piece by piece */
    LX_RESP_DONE,      /**< all of it is queued */
} lx_resp_state_t;

/* A streamed body's producer, told by the connection what it may do. */
typedef struct lx_producer_s {
    /* The output drained below the low-water mark: send more. */
    void (*proceed)(lx_req_t *r);
    /* The client is gone: release what the producer holds; r is not to be
     * touched after this returns. */
    void (*stop)(lx_req_t *r);
} lx_producer_t;

/* A request body reader: called with each piece as it arrives (valid only
 * during the call), then with p NULL and status 0 at the end of the body,
 * or status < 0 when the body fails (the core answers the request then;
 * the reader only lets go of it). After each piece, the next one waits for
 * lx_body_more(): meanwhile luxd stops reading from the client. */
typedef void (*lx_body_cb)(lx_req_t *r, const char *p, size_t len, int status);

/* The response being built: status, headers in the request's arena, and a
 * length or "unknown". lx_resp_send_headers serializes it once. */
typedef struct {
    int status;                    /**< final status */
    int64_t length;                /**< body bytes, or -1: unknown (chunked, or close-delimited) */
    const char *block;             /**< pre-built header lines kept elsewhere (a cached file's) */
    size_t block_len;              /**< bytes in block */
    char *lines;                   /**< more "Name: value\r\n" lines (arena) */
    size_t len, cap;               /**< used and allocated of lines */
    const lx_producer_t *producer; /**< of a streamed body, or NULL */
    uint8_t state;                 /**< lx_resp_state_t */
    uint8_t chunked;               /**< the body goes out in chunked framing */
    uint8_t no_body;               /**< HEAD, 204, 304, 1xx: headers only, whatever is sent */
    uint8_t cut;                   /**< done before its body was whole (lx_resp_done) */
} lx_resp_t;

/* A method's bit (llhttp_method_t m) in a set of methods. */
#define LX_METHOD(m)        (1ULL << (m))
#define LX_METHODS_GET_HEAD (LX_METHOD(HTTP_GET) | LX_METHOD(HTTP_HEAD))
/* Every method llhttp parses in an HTTP request (its HTTP_METHOD_MAP, up to
 * SOURCE) but CONNECT, which h1.c refuses before any handler sees it. */
#define LX_METHODS_ALL (((LX_METHOD(HTTP_SOURCE) << 1) - 1) & ~LX_METHOD(HTTP_CONNECT))

/* Where a request with "Expect: 100-continue" stands: the client waits for
 * our word before it sends the body. */
typedef enum {
    LX_EXPECT_NONE,     /**< no expectation to meet */
    LX_EXPECT_WAITING,  /**< the client waits: a body reader or the first response decides */
    LX_EXPECT_ANSWERED, /**< answered (100, or a final status that ends the connection) */
} lx_expect_t;

struct lx_req_s {
    lx_gen_t *gen;                 /**< the generation it runs under, start to end */
    lx_worker_t *w;                /**< the loop it runs on */
    const lx_proto_t *proto;       /**< the protocol that carries it */
    lx_link_t *link;               /**< what it knows of its connection; NULL once that is gone */
    uint64_t started;              /**< loop time its first byte was read */
    int method;                    /**< llhttp_method_t; GET for an error page's redirect */
    int http_minor;                /**< 0 or 1 in HTTP/1 (0 in HTTP/2) */
    int http_major;                /**< 1, or 2 for a stream of an HTTP/2 connection */
    uint32_t head_bytes;           /**< status lines and header blocks queued, for the log */
    int pending;                   /**< thread-pool jobs that will call back into the request
                                      (here to fill a hole: request_begin clears the struct) */
    lx_str_t target;               /**< request target as sent; of a request refused before
                                      its head was parsed, its first line (unparsed) */
    lx_str_t path;                 /**< raw path part of target */
    lx_str_t query;                /**< after '?', without it; len 0 if none */
    lx_str_t known[LX_H_KNOWN];    /**< values of the headers above */
    lx_header_t *headers;          /**< all headers, in order (arena) */
    unsigned nheaders;             /**< entries in headers */
    unsigned hosts;                /**< Host headers seen (more than one is a 400) */
    char *decoded;                 /**< normalised path (arena) */
    size_t decoded_len;            /**< strlen(decoded) */
    lx_vhost_t *vhost;             /**< chosen by Host */
    const lx_site_t *site;         /**< vhost or location settings */
    const char *root;              /**< document root: the site's, or vhost_dir/host */
    size_t root_len;               /**< strlen(root) */
    int error_status;              /**< serving the error page for this status, or 0 */
    int status;                    /**< response status, for the log */
    uint64_t body_bytes;           /**< response body bytes, for the log */
    uint64_t content_length;       /**< request body length announced */
    uint64_t body_read;            /**< request body bytes received */
    lx_resp_t resp;                /**< the response */
    uint8_t body_state;            /**< lx_body_state_t */
    uint8_t handler;               /**< index in the site's chain of the handler that runs */
    uint8_t method_sent;           /**< the method as sent, once an error page changed it */
    uint8_t redirects;             /**< internal redirects taken (LX_REDIRECT) */
    uint8_t expect;                /**< lx_expect_t */
    unsigned head_done : 1;        /**< its head is parsed whole (headers are believable) */
    unsigned keepalive : 1;        /**< the connection stays open after this response */
    unsigned secure : 1;           /**< it came over TLS: r.scheme is "https" */
    unsigned head : 1;             /**< HEAD: headers only */
    unsigned chunked : 1;          /**< the request body is chunked */
    unsigned aborted : 1;          /**< the connection is gone: a waiter only lets go */
    unsigned waiting : 1;          /**< the handler at `handler` answered LX_ASYNC */
    unsigned waiting_body : 1;     /**< ... and waits for the body to be dropped */
    unsigned method_changed : 1;   /**< an error page made `method` GET: see method_sent */
    unsigned unparsed : 1;         /**< refused before its method and version were known:
                                      target is the first line as received, for the log */
    unsigned open_logged : 1;      /**< a file's open failure is in the error log (static.c):
                                      a handler that runs again after a wait says it once */
    unsigned dir_unindexed : 1;    /**< the static handler found a directory at the path and
                                      no index file in it: the listing's (lx_listing_takes) */
    unsigned allow_set : 1;        /**< allow is worked out: a 405 of luxd's own says it */
    uint64_t allow;                /**< the methods allowed at the target (LX_METHOD
                                      bits), for a 405's Allow */
    const char *request_id;        /**< $request_id, 32 hex digits in the arena, or NULL before
                                      it is first needed (lx_req_id) */
    lx_body_cb body_cb;            /**< the body's reader, or NULL */
    lx_waiter_t wait;              /**< what an ASYNC handler waits with */
    lx_arena_t *arena;             /**< request memory, reset when the request ends */
    void *handler_data;            /**< a handler's state across an LX_ASYNC wait */
    lx_str_t host;                 /**< Host without port, for policies */
    void (*on_abort)(lx_req_t *r); /**< told when the client is gone (then r is not touched) */
    const char *upstream_addr;     /**< the upstream server that answered, for the log, or NULL */
    int upstream_status;           /**< its status, for the log */
    uint32_t upstream_ms;          /**< ms from handing over to the end of its response */
    lx_addr_t client;              /**< lx_req_addr's answer, once client_state is 1 */
    uint8_t client_state;          /**< 0: not worked out yet, 1: client, 2: none (not IP) */
    char *extra;                   /**< header lines a policy added (arena) */
    size_t extra_len;              /**< bytes in extra */
    size_t extra_cap;              /**< bytes allocated for extra */
};

/* Runs a request whose head is complete through vhost, path, rules and the
 * site's handler chain; the single entry point of the request path
 * (doc/design.md). Returns with a response under way or the request
 * waiting; lx_request_resume continues it at the handler that waited. */
void lx_request_run(lx_req_t *r);
void lx_request_resume(lx_req_t *r);
/* What a handler's status becomes: an error page (an internal redirect to
 * the page's path, which chooses the location again, keeps the status and
 * makes the method GET) or the built-in page. Also for the core's own
 * failures (a body over max_body_bytes) before a response began. */
void lx_request_finish(lx_req_t *r, int status);
/* For a 405 of luxd's own (RFC 9110 15.5.6: it MUST carry Allow): works
 * out, once, the methods allowed at r's target, which the Allow line of
 * its response lists: those the location's chain serves that its access
 * rules let through at that path; none when nothing was routed (CONNECT,
 * whose target names no resource of luxd's). A relayed response (a
 * backend's 405) never has it: the backend's own Allow goes out. */
void lx_req_note_allow(lx_req_t *r);
/* Around anything that will call back into the request later (a thread-
 * pool job, a file-cache load, a timer): hold before, and when it calls
 * back, release (returns 1 when the client is gone: the caller lets go and
 * touches r no more) or wake (release, then run the handler that waited
 * again, with status 0 or an error). r->wait.cb is set to wake for the
 * file cache. */
void lx_req_hold(lx_req_t *r);
int lx_req_release(lx_req_t *r);
void lx_req_wake(lx_req_t *r, int status);

/* Around a callback into a handler from outside the core (an upstream
 * connection's): a request that ends, or a connection that closes, inside
 * it is finished once it returns (proto.h enter/leave). */
void lx_req_enter(lx_req_t *r);
void lx_req_leave(lx_req_t *r);

/* request_id_header: "Name: <$request_id>" goes out with whatever answers,
 * among the lines a policy adds (r->extra), so that the serializer pays
 * nothing for it when it is off. conn.c calls it as a request begins. */
void lx_req_add_id_header(lx_req_t *r);

/* $request_id: 32 hex digits, random, made once per request (the loop's
 * generator, seeded from the kernel). */
const char *lx_req_id(lx_req_t *r);

/* The client's address: the one place it is worked out, for `from` rules,
 * r.remote_addr, $remote_addr and X-Forwarded-For. The connection's peer
 * (asked of the kernel once per connection, when first needed), or the
 * source of a PROXY protocol header that peer is trusted for; then, when
 * that address is one real_ip trusts (the vhost's, else the server's), the
 * address its header names. lx_req_peer writes it as text ("-" when
 * unknown) into buf of 48 bytes; lx_req_conn_peer the TCP peer itself
 * ($realip_remote_addr). */
lx_addr_t lx_req_addr(lx_req_t *r);
/* The real_ip step of lx_req_addr alone, for a request whose head is
 * parsed (its headers, and its vhost once chosen) from a client at a; for
 * --explain, which has no connection (request.c lx_route_explain). */
lx_addr_t lx_req_realip(const lx_req_t *r, lx_addr_t a);
const char *lx_req_peer(lx_req_t *r, char *buf);
const char *lx_req_conn_peer(lx_req_t *r, char *buf);
/* The connection's client: its peer (asked of the kernel once), or what a
 * trusted PROXY header replaced it with. Returns 1 when it is an IP
 * address (in l->addr). */
int lx_link_addr(lx_link_t *l);
/* An address as text, into buf of 48 bytes. */
const char *lx_addr_text(lx_addr_t a, char *buf);
/* What the request's TLS connection tells of itself (an lx_tls_field_t of
 * net/transport.h), or NULL: over plain HTTP, or the connection is gone. */
const char *lx_req_tls(lx_req_t *r, int field);
/* The session id context of the request's TLS connection (net/tlsctx.h
 * lx_tls_misdirected), or NULL with *len 0. */
const unsigned char *lx_req_tls_sid(lx_req_t *r, unsigned *len);

/* ---- the response (response.c) ------------------------------------------- */

/* Begins a response: status, no headers yet, length unknown. */
void lx_resp_init(lx_req_t *r, int status);
void lx_resp_header(lx_req_t *r, const char *line, size_t len); /* "Name: value\r\n" */
void lx_resp_field(lx_req_t *r, lx_str_t name, lx_str_t value); /* the same, from its parts */
void lx_resp_headerf(lx_req_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Queues the headers (status line, Date, Server, the lines, the site's
 * extra lines, framing, Connection) in one serializer. */
void lx_resp_send_headers(lx_req_t *r);
/* Body pieces of a response of known length (after lx_resp_send_headers). */
void lx_resp_body_copy(lx_req_t *r, const char *p, size_t len);
void lx_resp_body_file(lx_req_t *r, lx_file_t *f, uint64_t off, uint64_t len);
/* Sends r->resp (a 1xx status and its lines) as an interim response to an
 * HTTP/1.1 client, before any final one, and clears it for the final. */
void lx_resp_interim(lx_req_t *r);
/* All of the response is queued. */
void lx_resp_done(lx_req_t *r);
/* A complete small answer: status, the site's headers, a short HTML body;
 * extra: more "Name: value\r\n" lines (Location, Content-Range), or NULL. */
void lx_resp_simple(lx_req_t *r, int status, const char *extra);

/* A streamed response: the headers go out now, then pieces as the
 * producer sends them, each copied. The length is r->resp.length if the
 * handler set it (a backend's Content-Length), else unknown: chunked in
 * HTTP/1.1, close-delimited in 1.0. lx_stream_send returns 0, or -EAGAIN when the output
 * is above the high-water mark (the piece is queued still; wait for
 * proceed). */
void lx_stream_start(lx_req_t *r, const lx_producer_t *p);
int lx_stream_send(lx_req_t *r, const char *p, size_t len);
void lx_stream_end(lx_req_t *r);

/* A tunnel (after a 101 the handler relayed with lx_resp_send_headers):
 * from now on the connection carries raw bytes. What the client sends goes
 * to cb piece by piece (valid during the call; the next waits for
 * lx_tunnel_more); bytes to the client go with lx_stream_send (no
 * framing), with proceed and stop as for a stream. The connection ends
 * with lx_stream_end, or when the client closes (stop is told). */
void lx_tunnel_start(lx_req_t *r, const lx_producer_t *p, lx_body_cb cb);
void lx_tunnel_more(lx_req_t *r);

const char *lx_status_reason(int status);
/* What snprintf wrote into a buffer of cap bytes, given what it returned:
 * the return is the length the whole text would need, which is more than
 * was written when the text was cut. The texts luxd formats have known
 * bounds, so a cut is a bug, but one that must not become an over-read. */
size_t lx_clamp_len(int n, size_t cap);

/* ---- the request body (body.c) ------------------------------------------- */

/* Hands the body to cb as it arrives; sends 100 Continue if the client
 * waits for it. Returns 0, or a status to finish with. */
int lx_body_read(lx_req_t *r, lx_body_cb cb);
/* The reader takes the next piece. */
void lx_body_more(lx_req_t *r);
/* Reads and drops the body; returns 0 when there is none left, or LX_ASYNC
 * with r->wait resumed once it is all in (a body over the limit is
 * answered by the core instead). */
int lx_body_discard(lx_req_t *r);

#endif
