/* What carries a request: the one interface between the request core and
 * the protocol that brought the request in.
 *
 * The request core (request.c, response.c, body.c, client.c) and all that
 * runs on it (handlers, policies, the proxy, the access log, the status
 * counters) see a request as an lx_req_t and nothing else. What they ask of
 * the connection behind it goes through r->proto, which HTTP/1 (h1/)
 * implements for its one request at a time and HTTP/2 for each of its
 * streams; what they may know of that connection is r->link. Neither names
 * a connection type: the core never includes a protocol's header.
 *
 * The core does what is the same whatever the protocol (the response's
 * state, what the log counts, what a response to HEAD leaves out, Expect),
 * then calls the protocol for what differs: how a head is written (a status
 * line and CRLFs, or HPACK), how a body is framed (Content-Length, chunked,
 * DATA frames), and when bytes go out. */
#ifndef LX_PROTO_H
#define LX_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "dispatch/cidr.h"
#include "net/transport.h"

typedef struct lx_file_s lx_file_t;
typedef struct lx_req_s lx_req_t;
typedef struct lx_vhost_s lx_vhost_t;
typedef struct lx_producer_s lx_producer_t;
typedef void (*lx_body_cb)(lx_req_t *r, const char *p, size_t len, int status);

/* What a request knows of the connection that carried it: the transport
 * (what TLS says of itself), the client's address, and the connection's
 * memory of its last Host answer, which keep-alive requests (and the
 * streams of one HTTP/2 connection) share. A connection embeds one and
 * points its requests at it; r->link is NULL once the connection is gone. */
typedef struct {
    lx_tp_t tp;              /**< the socket and its transport (first: container_of on tcp) */
    lx_addr_t addr;          /**< the client: the peer, or the address a trusted PROXY
                                protocol header gave (client.c lx_req_addr) */
    lx_addr_t peer;          /**< the TCP peer when a PROXY header replaced it (proxied) */
    uint64_t vh_gen_id;      /**< lx_gen_t.id of the cached Host -> vhost answer; 0: none */
    lx_vhost_t *vh;          /**< the vhost for vh_host */
    uint8_t vh_host_len;     /**< bytes in vh_host */
    uint8_t vh_name_len;     /**< bytes of vh_host that name the host (host_name's answer) */
    uint8_t vh_421;          /**< over TLS, the cached answer's 421 verdict (request.c
                                misdirected): 0 not known yet, 1 served, 2 misdirected */
    unsigned addr_state : 2; /**< 0: addr not asked yet, 1: known, 2: none (not IP) */
    unsigned proxied : 1;    /**< addr is a PROXY header's; peer holds the TCP peer */
    char vh_host[32]; /**< last Host value (as sent, port included); longer ones are not cached */
} lx_link_t;

/* A protocol's side of its requests. Every entry is called with the
 * request's own r, from the loop the request runs on, and only while the
 * client is there (the core checks r->aborted first) unless it says
 * otherwise. */
typedef struct {
    /* Around every call into handlers: a request that ends, or a
     * connection that closes, inside one is finished once it has
     * returned, never under its feet. cork: output queued meanwhile goes
     * out in one write at the last leave (an upstream's read may queue a
     * head, a piece and the end at once). Also called for a client that
     * is gone. */
    void (*enter)(lx_req_t *r, int cork);
    void (*leave)(lx_req_t *r, int cork);
    /* The last hold of a request whose client is gone was released: what
     * carried it may be freed now. */
    void (*orphaned)(lx_req_t *r);

    /* Serializes r->resp (state, length, no_body, status and lines set)
     * and queues it. It decides the framing: it may set r->resp.chunked,
     * and clear r->keepalive where only the close can end the body. */
    void (*head)(lx_req_t *r);
    /* Sends r->resp as an interim (1xx) response, if the protocol can. */
    void (*interim)(lx_req_t *r);
    /* Body bytes of a response of known length: copied, or a file's. */
    void (*copy)(lx_req_t *r, const char *p, size_t len);
    void (*file)(lx_req_t *r, lx_file_t *f, uint64_t off, uint64_t len);
    /* A streamed body's piece, copied: 0, or -EAGAIN when the output is
     * above its high-water mark (the piece is queued all the same; the
     * producer waits for proceed), or another negative errno when the
     * connection had to close. */
    int (*send)(lx_req_t *r, const char *p, size_t len);
    /* The end of a streamed body (the last chunk, END_STREAM). */
    void (*end)(lx_req_t *r);
    /* Output was queued: write what may go. */
    void (*output)(lx_req_t *r);
    /* All of the response is queued. */
    void (*done)(lx_req_t *r);

    /* Queues 100 Continue for a client that waits for it (r->expect):
     * 0, or a negative errno. */
    int (*cont)(lx_req_t *r);
    /* A body reader wants the next piece, or the body is to be dropped
     * (r->body_state says which): reading from the client goes on. */
    void (*body_resume)(lx_req_t *r);

    /* After a 101: raw bytes both ways (request.h lx_tunnel_start); a
     * protocol that cannot carry them answers the request instead. */
    void (*tunnel)(lx_req_t *r, const lx_producer_t *p, lx_body_cb cb);
    void (*tunnel_more)(lx_req_t *r);
} lx_proto_t;

#endif
