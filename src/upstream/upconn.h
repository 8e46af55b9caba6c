/* Connections to upstream servers, and each loop's pool of idle ones.
 *
 * An upstream connection is a libuv stream (uv_tcp_t, or uv_pipe_t for a
 * "unix:" server) with a timer for its connect/read/send deadlines. The
 * proxy handler borrows one for a request: from the pool of its server's
 * address when an idle one is there, else a fresh connect. After a
 * complete, well-framed response it is given back, and the pool keeps it
 * (up to the upstream's keepalive) while it stays quiet: an idle connection
 * is still read, so a backend's close (or stray bytes) is seen at once and
 * the connection dropped, not handed to the next request; what came since
 * the loop last polled is looked for when it is lent (lx_upconn_take).
 *
 * Pools belong to the loop, not to a generation: they are keyed by the
 * server's address, so connections outlive a reload that keeps the
 * address. Idle connections are unref'ed: they never keep a loop alive. */
#ifndef LX_UPCONN_H
#define LX_UPCONN_H

#include <sys/socket.h>
#include <uv.h>

#include "../config/config.h"
#include "../net/transport.h"
#include "sendbatch.h"

typedef struct lx_upconn_s lx_upconn_t;
typedef struct lx_uppool_s lx_uppool_t;
typedef struct lx_uploop_s lx_uploop_t;

typedef enum {
    LX_UC_CONNECTING, /**< connect(2) in flight */
    LX_UC_ACTIVE,     /**< lent to a request */
    LX_UC_IDLE,       /**< in its pool, read for a close */
    LX_UC_CLOSING,    /**< uv_close called; freed when both handles are closed */
} lx_upconn_state_t;

/* What a lent connection tells its borrower. `status` is 0 or a negative
 * errno (UV_ETIMEDOUT for the deadline, UV_EOF for an orderly close). */
typedef struct {
    void (*connected)(lx_upconn_t *uc, int status);
    /* Bytes arrived (valid during the call), or nread < 0: EOF or error. */
    void (*read)(lx_upconn_t *uc, ssize_t nread, const char *p);
    void (*written)(lx_upconn_t *uc, int status); /**< a queued write is done */
    void (*timeout)(lx_upconn_t *uc);             /**< the deadline set passed */
} lx_upconn_ops_t;

struct lx_upconn_s {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        lx_tp_t tp; /**< a TCP socket and its TLS (tp.tls valid only when tls is set) */
        uv_pipe_t pipe;
    } h;                        /**< the socket */
    uv_timer_t timer;           /**< connect, read or send deadline */
    uv_connect_t creq;          /**< the connect in flight */
    uv_write_t wreq;            /**< the one write in flight */
    lx_send_t send;             /**< or that write, in the loop's batch (sendbatch.h) */
    lx_uppool_t *pool;          /**< the pool of its address */
    lx_upconn_t *next, *prev;   /**< in the pool's idle list */
    const lx_upconn_ops_t *ops; /**< the borrower's callbacks (NULL while idle) */
    void *data;                 /**< the borrower */
    char *wcopy;                /**< what uv_write sends (the part uv_try_write left) */
    uint64_t due;               /**< loop ms the deadline (or the idle time) passes; 0: none */
    uint64_t idle_since;        /**< loop ms it came back to its pool */
    uint64_t idle_due;          /**< loop ms its keepalive_timeout ends */
    uint64_t fires; /**< loop ms the timer fires, while on_timer is armed (0 while the connect timer
                       runs: arm() leaves that alone) */
    uint32_t nreq;  /**< requests it carried (> 0: it is a reused one) */
    uint8_t state;  /**< lx_upconn_state_t */
    uint8_t handles;      /**< handles still open (socket, timer) */
    unsigned writing : 1; /**< a write is in flight (send in the batch, or wreq) */
    unsigned reading : 1; /**< uv_read_start is in force */
    unsigned tls : 1; /**< it speaks TLS (h.tp.tls); state CONNECTING until its handshake ends */
    unsigned handshaking : 1; /**< connected, its TLS handshake under way */
    char why[160];            /**< why its TLS handshake failed, or "" */
};

/* Whether a handle of the loop is an upstream connection's socket (the
 * loop's uv_tcp_t handles are clients' connections, listeners and these):
 * its data points at the lx_upconn_t, which starts with the handle, while a
 * client connection's data is its session or NULL. */
static inline int lx_upconn_is(const uv_handle_t *h) {
    return h->data == (const void *)h;
}

/* A loop's pools (the proxy handler's per-loop state). */
lx_uploop_t *lx_uploop_new(uv_loop_t *loop);
/* Closes every idle connection and frees the pools (the loop's end). */
void lx_uploop_free(lx_uploop_t *ul);

/* A reload: each pool's limit becomes what the new generation's upstreams
 * ask of its address (0 for an address none names), and the idle ones
 * beyond it go (once idle a second, as always). */
void lx_uploop_retune(lx_uploop_t *ul, const lx_upstream_t *ups, size_t n);

/* The pool for the address of s and its TLS settings (made on first use;
 * pools live until the loop's end). NULL: out of memory. */
lx_uppool_t *lx_uppool_of(lx_uploop_t *ul, const lx_upstream_server_t *s);
/* An idle connection of p, lent to the caller with ops/data; NULL: none.
 * One that has bytes (or a close) waiting unread is closed, not lent. */
lx_upconn_t *lx_upconn_take(lx_uppool_t *p, const lx_upconn_ops_t *ops, void *data);
/* Starts a fresh connection to p's address, over TLS when s has it;
 * ops->connected is called with its result (after at most timeout_ms, the
 * handshake included). */
int lx_upconn_connect(lx_uppool_t *p, const lx_upstream_server_t *s, const lx_upconn_ops_t *ops,
                      void *data, uint32_t timeout_ms, lx_upconn_t **out);
/* Why a connection's TLS handshake failed (after ops->connected was told
 * UV_EPROTO), or NULL. */
const char *lx_upconn_why(const lx_upconn_t *uc);
/* Gives a connection back after a complete response: kept idle for
 * idle_ms; the least recently used beyond keepalive idle ones for a
 * second at most (the next burst of requests takes them); keepalive 0
 * closes it. */
void lx_upconn_put(lx_upconn_t *uc, uint32_t keepalive, uint32_t idle_ms);
/* Closes it; no callback is made after this. */
void lx_upconn_close(lx_upconn_t *uc);

/* Reading the response: on/off (backpressure). The bytes ops->read gets
 * are in a buffer all of the loop's upstream connections share: they are
 * to be used up (or copied) before the callback returns. */
int lx_upconn_read(lx_upconn_t *uc, int on);
/* Sends bufs: returns 1 when all went at once, 0 when the rest is queued
 * (ops->written follows), or a negative errno. One write at a time. */
int lx_upconn_write(lx_upconn_t *uc, const uv_buf_t *bufs, unsigned nbufs);
/* The same for a request's head, which may wait in the loop's batch (sent
 * before the loop polls again, sendbatch.h): then 0, and ops->written
 * follows. Body and tunnel pieces go by lx_upconn_write: a piece that went
 * at once lets the body go on within the same callback, so a broken chunk
 * already buffered is found before the backend's answer is relayed. */
int lx_upconn_write_head(lx_upconn_t *uc, const uv_buf_t *bufs, unsigned nbufs);
/* Arms the deadline (ms 0: none); ops->timeout is called when it passes. */
void lx_upconn_deadline(lx_upconn_t *uc, uint32_t ms);

#endif
