/* Connection deadlines without a timer per connection: a uv_timer_t is 152
 * bytes, a third of what an idle keep-alive connection may cost. Each loop
 * keeps one list per kind of deadline; the kinds have one duration each, so
 * a deadline set now is the latest of its kind and goes to the tail (a reload
 * that shortens a timeout makes the walk back from the tail longer, once).
 * One uv_timer_t per loop fires at the earliest head. */
#ifndef LX_DEADLINE_H
#define LX_DEADLINE_H

#include <stdint.h>
#include <uv.h>

typedef enum {
    LX_DL_NONE,
    LX_DL_HEADER, /**< header_timeout, from a request's first byte */
    LX_DL_BODY,   /**< body_timeout, between two reads of a request body */
    LX_DL_SEND,   /**< send_timeout, between two writes that moved output on */
    LX_DL_IDLE,   /**< keepalive_timeout, between requests */
    LX_DL_LINGER, /**< a half-closed connection draining input */
    LX_DL_REST,   /**< a TLS connection's reading waited LX_TP_REST_MS: its transport lets
                       go of its buffers (lx_conn_t.rest, beside the deadline above) */
    LX_DL_KINDS
} lx_dl_kind_t;

typedef struct lx_dl_s {
    struct lx_dl_s *prev, *next; /**< in the list of its kind; prev NULL when unset */
    uint64_t due;                /**< loop ms */
} lx_dl_t;

typedef struct lx_dlq_s lx_dlq_t;
/* Called for an expired deadline, already unlinked. */
typedef void (*lx_dl_cb)(lx_dlq_t *q, lx_dl_t *d, lx_dl_kind_t kind);

struct lx_dlq_s {
    uv_timer_t timer;          /**< fires at armed */
    uint64_t armed;            /**< loop ms the timer is set for; UINT64_MAX: not set */
    lx_dl_t head[LX_DL_KINDS]; /**< sentinels of circular lists */
    lx_dl_cb cb;               /**< what expiry calls */
};

void lx_dlq_init(lx_dlq_t *q, uv_loop_t *loop, lx_dl_cb cb);
/* Closes the timer (no callback; the queue must outlive the loop's run). */
void lx_dlq_close(lx_dlq_t *q);
/* (Re)sets d to expire at due, in the list of kind; kind NONE clears it. */
void lx_dl_set(lx_dlq_t *q, lx_dl_t *d, lx_dl_kind_t kind, uint64_t due);
void lx_dl_clear(lx_dl_t *d);
static inline int lx_dl_armed(const lx_dl_t *d) {
    return d->prev != NULL;
}

#endif
