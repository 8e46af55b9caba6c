/* A client connection on a libuv stream (uv_tcp_t): read -> llhttp ->
 * request -> handler -> response -> keep-alive.
 *
 * A connection is two parts. lx_conn_t is what every open connection holds,
 * idle ones too, so it is kept small (the uv_tcp_t is most of it). The
 * session (lx_sess_t) is what a request in progress needs: the parser, the
 * read buffer, the request and its arena, the output queue. A connection
 * takes a session from its loop's pool when bytes arrive and gives it back
 * when it is idle again, so an idle keep-alive connection holds no buffer. */
#ifndef LX_CONN_H
#define LX_CONN_H

#include <sys/socket.h>
#include <uv.h>

#include "deadline.h"
#include "dispatch/cidr.h"
#include "llhttp.h"
#include "net/transport.h"
#include "h1/out.h"
#include "core/proto.h"
#include "core/request.h"
#include "worker.h"

/* Where a connection stands. One request is in flight at a time: bytes of
 * pipelined requests wait in the read buffer. */
typedef enum {
    LX_CONN_IDLE,     /**< between requests, no byte of the next one yet */
    LX_CONN_HEAD,     /**< reading a request's head */
    LX_CONN_HANDLING, /**< handlers have the request: answering, waiting, reading its body */
    LX_CONN_WRITING,  /**< the response is complete; its bytes are going out */
    LX_CONN_BODY,     /**< the response is out; the rest of the request body is read and dropped */
    LX_CONN_LINGER,   /**< half-closed: what the client still sends is read and dropped */
    LX_CONN_TUNNEL,   /**< after a 101: raw bytes both ways between client and a handler */
    LX_CONN_CLOSED,   /**< uv_close called */
} lx_conn_state_t;

/* What the Transfer-Encoding lines of a request added up to. Only a lone
 * "chunked" frames a body luxd can read; any other list is refused. */
typedef enum {
    LX_TE_NONE,    /**< no Transfer-Encoding line */
    LX_TE_CHUNKED, /**< exactly one coding, chunked */
    LX_TE_OTHER,   /**< only codings other than chunked so far (gzip, ...) */
    LX_TE_UNKNOWN, /**< other codings, then chunked last: 501 */
    LX_TE_BAD,     /**< chunked twice or not last, or an empty coding: 400 */
} lx_te_t;

typedef struct lx_sess_s lx_sess_t;

struct lx_conn_s {
    lx_link_t link;          /**< the socket and what requests know of the connection;
                                link.tp.tcp.data is the session or NULL */
    lx_dl_t dl;              /**< the pending deadline, in the loop's queue */
    lx_dl_t rest;            /**< over TLS: when the transport lets go of its buffers if no
                                byte comes meanwhile (LX_DL_REST) */
    struct lx_h2_s *h2;      /**< its HTTP/2 state once it speaks h2 (h2/h2.h), or NULL */
    uint32_t nreq;           /**< requests started on this connection */
    uint8_t state;           /**< lx_conn_state_t */
    uint8_t dl_kind;         /**< lx_dl_kind_t of dl */
    unsigned eof : 1;        /**< the client closed its sending side */
    unsigned reading : 1;    /**< uv_read_start is in force */
    unsigned draining : 1;   /**< no keep-alive: the server stops or reloads */
    unsigned proxy_wait : 1; /**< a PROXY protocol header must come first (proxy_protocol) */
    unsigned h2_ok : 1;      /**< its listener speaks HTTP/2 (http2 = true) */
};

/* What a request in progress needs; lent by the loop's pool. */
struct lx_sess_s {
    lx_spare_t spare;           /**< in w->sess_spares while unused */
    lx_conn_t *c;               /**< the connection, NULL once it is gone */
    lx_worker_t *w;             /**< its loop */
    llhttp_t parser;            /**< HTTP/1 parser state */
    char *rbuf;                 /**< read buffer (from w->rbufs) */
    size_t rcap;                /**< its size */
    size_t rlen;                /**< bytes in it */
    size_t rpos;                /**< bytes parsed */
    size_t req_start;           /**< offset where the current request began */
    size_t body_base;           /**< offset body bytes are read into (0: unset) */
    lx_req_t req;               /**< the request being read or answered */
    lx_arena_t arena;           /**< its memory */
    lx_out_t out;               /**< output queue and writer */
    lx_header_t *cur_header;    /**< header being parsed */
    const char *last_end;       /**< end of the last header byte seen */
    const char *version_at;     /**< the request line's version, after "HTTP/" (h1.c) */
    int err_status;             /**< status to answer a parse error with */
    uint8_t te;                 /**< lx_te_t: the Transfer-Encoding codings seen so far */
    char ext_last;              /**< last byte of the chunk-extension value being read */
    size_t ext_bytes;           /**< chunk-extension bytes of this request */
    size_t trailer_bytes;       /**< trailer-section bytes of this request */
    uint64_t framing_bytes;     /**< chunked-body bytes no other limit counts */
    uint32_t framing_parts;     /**< chunks and trailer fields that may bring such bytes */
    unsigned in_url : 1;        /**< the request line is not complete */
    unsigned message_done : 1;  /**< whole request parsed */
    unsigned ext_refeed : 1;    /**< llhttp 8 skipped the ';' of the next chunk extension */
    unsigned line_wait : 1;     /**< llhttp refused the method: the request line is read to
                                     its end to tell 501 from 400 (lx_h1_line_status) */
    unsigned body_paused : 1;   /**< on_body handed a piece to a reader that wants no more yet */
    unsigned tunnel_paused : 1; /**< a tunnel's reader holds a piece (lx_tunnel_more goes on) */
    unsigned gen_held : 1;      /**< req.gen is counted in the worker's users */
    unsigned in_parse : 1;      /**< conn_parse is on the stack: do not re-enter it */
    unsigned end_pending : 1;   /**< the request ended while depth > 0 */
    unsigned free_pending : 1;  /**< the connection let go while depth > 0 */
    unsigned parser_ready : 1;  /**< in the pool: the parser is between messages (no llhttp_init) */
    unsigned depth;             /**< calls into the request layer on the stack */
    unsigned cork;              /**< outside callbacks on the stack (lx_req_enter): output waits */
    unsigned flush_pending : 1; /**< output came while corked: written at the last lx_req_leave */
    unsigned proceeding : 1;    /**< the producer's proceed is on the stack (conn_flush) */
    unsigned proceed_again : 1; /**< its output went out at once: call it again when it returns */
};

/* Takes the connection waiting on a listener (after uv_listen's callback). */
void lx_conn_accept(lx_worker_t *w, uv_stream_t *listener);
/* What a connection's listener says of it (lx_conn_open's flags). */
#define LX_CONN_PROXY 1 /**< it begins with a PROXY protocol header */
#define LX_CONN_TLS   2 /**< it speaks TLS */
#define LX_CONN_H2    4 /**< HTTP/2 too: by ALPN over TLS, else by the client's preface */
/* Adopts a connected socket (a dropped listener's queue; the fuzz harness,
 * which uses a socketpair). */
int lx_conn_open(lx_worker_t *w, int fd, const struct sockaddr *peer, unsigned flags);
/* Every change of state goes through here (the loop's gauges follow). */
void lx_conn_set_state(lx_conn_t *c, lx_conn_state_t st);
/* The connection's one deadline: its kind, in ms from now; LX_DL_NONE or
 * 0 ms for none. */
void lx_conn_set_deadline(lx_conn_t *c, lx_dl_kind_t kind, uint32_t ms);
/* Closes now (drops queued output). */
void lx_conn_close(lx_conn_t *c);
/* Half-closes (after what is queued), then reads and drops what the client
 * still sends until it closes or LINGER_MS pass, so that our close does not
 * reset the connection and destroy what we sent last (nginx's lingering
 * close). */
void lx_conn_linger(lx_conn_t *c);
/* Stops keep-alive: idle connections close, busy ones after their response. */
void lx_conn_drain(lx_conn_t *c);
/* Calls fn for every open connection of w (stop, drain, reload expiry). */
void lx_conn_each(lx_worker_t *w, void (*fn)(lx_conn_t *c, void *arg), void *arg);
/* The generation the connection's request holds, or NULL. */
const lx_gen_t *lx_conn_gen(const lx_conn_t *c);
void lx_sess_pool_init(lx_worker_t *w);
/* Frees the sessions the loop kept for reuse: those unused since the last
 * tick, or all of them (at the loop's end). */
void lx_sess_pool_trim(lx_worker_t *w, int all);
/* Deadline expiry for the loop's queue (worker.c sets it up). */
void lx_conn_on_deadline(lx_dlq_t *q, lx_dl_t *d, lx_dl_kind_t kind);
/* client.c: the PROXY protocol header at the head of s's read buffer.
 * Returns 1 when taken (what follows is the first request), 0 when more
 * bytes are needed, -1 when the connection is to be closed. */
int lx_conn_proxy_header(lx_conn_t *c, lx_sess_t *s);

/* Between the request and its connection (request.c, response.c, body.c):
 * what the request asks of the connection, never by writing its fields. */
static inline lx_sess_t *lx_sess_of(lx_req_t *r) {
    return container_of(r, lx_sess_t, req);
}
/* Around every call into the request layer: a request that ends, or a
 * connection that closes, inside a handler is finished once the handler
 * has returned, never under its feet. */
void lx_sess_enter(lx_sess_t *s);
void lx_sess_leave(lx_sess_t *s);
/* The output was extended (a response begun, a piece streamed). */
void lx_sess_output(lx_sess_t *s);
/* The response is complete (all of it queued). */
void lx_sess_response_done(lx_sess_t *s);
/* A body reader wants more, or the request body is to be dropped. */
void lx_sess_body_resume(lx_sess_t *s);

/* HTTP/1's side of its requests (core/proto.h): emit.c writes and frames
 * responses, conn.c does the rest. */
extern const lx_proto_t lx_h1_proto;
void lx_h1_enter(lx_req_t *r, int cork);
void lx_h1_leave(lx_req_t *r, int cork);
void lx_h1_orphaned(lx_req_t *r);
void lx_h1_tunnel(lx_req_t *r, const lx_producer_t *p, lx_body_cb cb);
void lx_h1_tunnel_more(lx_req_t *r);

#endif
