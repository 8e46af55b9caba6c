/* One event loop per core, each in its own thread with its own listeners. */
#ifndef LX_WORKER_H
#define LX_WORKER_H

#include <time.h>
#include <uv.h>

#include "config/config.h"
#include "deadline.h"
#include "http/date.h"
#include "io/pool.h"
#include "spares.h"

typedef struct lx_conn_s lx_conn_t;
typedef struct lx_filecache_s lx_filecache_t;

typedef struct {
    uv_tcp_t tcp;       /**< the SO_REUSEPORT socket of this loop, listening */
    int fd;             /**< its descriptor */
    int pending;        /**< libuv holds an accepted connection we had no room for */
    int proxy_protocol; /**< its connections begin with a PROXY protocol header (the
                           listen entry's, in the generation that last listed it) */
    int tls;            /**< its connections speak TLS (the same) */
    int http2;          /**< and HTTP/2 (the same) */
} lx_listener_t;

/* A generation replaced by a reload, kept while requests still use it. */
typedef struct {
    lx_gen_t *gen;    /**< one reference held */
    uint32_t users;   /**< requests of this loop still running under it */
    uint64_t retired; /**< loop ms when it was replaced */
} lx_retired_t;

/* What the main thread hands a loop on reload (under the mailbox lock).
 * Reloads queue up: each one's listener set is applied in order, so a
 * socket that one reload opened and the next dropped is still closed. */
typedef struct lx_mailbox_s {
    lx_gen_t *gen;             /**< the new generation, one reference for the loop */
    int *fds;                  /**< the loop's listening fds under the new config */
    size_t nfds;               /**< entries in fds */
    struct lx_mailbox_s *next; /**< the next (newer) reload, or NULL */
} lx_mailbox_t;

/* One access log file's lines gathered by a loop (io/accesslog.c). */
typedef struct lx_alog_buf_s {
    char *buf;  /**< alog_cap bytes, or NULL until the file is first used */
    size_t len; /**< bytes in buf */
    int fd;     /**< the file they are for */
} lx_alog_buf_t;

typedef struct lx_worker_s {
    uv_loop_t loop;                  /**< this worker's loop */
    uv_thread_t thread;              /**< the thread running it */
    int index;                       /**< 0..workers-1 */
    lx_gen_t *gen;                   /**< current generation (one reference held) */
    uint32_t gen_users;              /**< requests running under gen */
    lx_retired_t *retired;           /**< older generations still in use */
    size_t nretired;                 /**< entries in retired */
    uv_mutex_t mailbox_lock;         /**< guards mailbox and wakeup_closed */
    int wakeup_closed;               /**< wakeup is closed: the main thread must not send to it */
    lx_mailbox_t *mailbox;           /**< pending reloads, oldest first; NULL when none */
    lx_mailbox_t **mailbox_tail;     /**< where the next reload is linked in */
    uv_async_t wakeup;               /**< main thread -> loop: stop requested */
    uv_timer_t tick;                 /**< once a second: log flush, spares' trim, drain deadline */
    uv_timer_t lag;                  /**< every LX_LAG_MS: how late it fires (stats' lag) */
    uint64_t lag_due;                /**< uv_hrtime when it is due next */
    lx_listener_t **listeners;       /**< one per listen address (uv handles do not move) */
    size_t nlisteners;               /**< entries in listeners */
    int listening;                   /**< listeners are being polled */
    uint32_t nconns;                 /**< open connections (lx_conn_each walks them) */
    lx_dlq_t dlq;                    /**< the connections' deadlines */
    lx_pool_t rbufs;                 /**< read buffers, max_header_bytes + slack */
    lx_pool_t obufs;                 /**< output buffers of LX_OUT_BUF bytes */
    char *copybuf;                   /**< LX_OUT_BUF bytes: out.c's scratch within one flush */
    long inblock;                    /**< the loop thread's block reads, last seen (out.c) */
    lx_spares_t sess_spares;         /**< sessions kept for reuse (conn.c) */
    lx_spares_t h2_spares;           /**< HTTP/2 streams kept for reuse (h2/stream.c) */
    void *hstate[8];                 /**< handlers' per-loop state (handlers/chain.c) */
    uint32_t max_conns;              /**< this loop's share of max_connections */
    lx_filecache_t *cache;           /**< this loop's file cache */
    struct lx_stats_s *stats;        /**< this loop's counters (stats.h) */
    void *match_data;                /**< pcre2_match_data for this loop's regex matches */
    struct lx_alog_buf_s *alogs;     /**< access log buffers, by file slot (io/logfiles.c) */
    size_t nalogs;                   /**< entries in alogs */
    size_t alog_cap;                 /**< bytes in each buffer */
    int stop;                        /**< 1: graceful stop, 2: immediate */
    int stop_request;                /**< atomic: what the main thread asked for */
    uv_async_t *exited;              /**< signalled when the thread is about to end */
    int done;                        /**< atomic: the thread's loop has ended */
    uint64_t drain_deadline;         /**< loop ms after which a graceful stop gets forceful */
    time_t now;                      /**< second of the cached strings below */
    char date[LX_HTTP_DATE_LEN + 1]; /**< Date header value for `now` */
    char clf_time[32];               /**< "29/Nov/2026:17:50:54 +0000" for `now` */
    char iso_time[64];               /**< "2026-11-29T17:50:54+00:00" for `now` */
    uint8_t clf_time_len;            /**< strlen(clf_time) */
    uint8_t iso_time_len;            /**< strlen(iso_time) */
    uint64_t rng[4];                 /**< xoshiro256** state for $request_id */
    char head200[80];                /**< status line, Server and Date of a 200, for `now` */
    size_t head200_len;              /**< bytes in head200 */

    /* The rule sets' prefilter scratch (dispatch/multire.h), grown on this
     * loop when it meets a prefilter it does not fit. */
    lx_multire_scratch_t rule_scratch;
} lx_worker_t;

/* Starts a worker thread serving on the given listening fds (taken over). */
int lx_worker_start(lx_worker_t *w, int index, lx_gen_t *gen, const int *fds, size_t nfds);
/* Hands the worker a new generation and its listening fds (thread-safe; the
 * loop switches at its next wakeup, between requests). Takes over the
 * reference to gen and the fds array. */
void lx_worker_publish(lx_worker_t *w, lx_gen_t *gen, int *fds, size_t nfds);

/* A request started or ended under gen (request accounting for reload). */
static inline lx_gen_t *lx_worker_gen_acquire(lx_worker_t *w) {
    w->gen_users++;
    return w->gen;
}
void lx_worker_gen_release(lx_worker_t *w, lx_gen_t *gen);

/* Asks the worker to stop: graceful (1) or immediate (2). Thread-safe. */
void lx_worker_stop(lx_worker_t *w, int how);
void lx_worker_join(lx_worker_t *w);

/* Rebuilds the cached Date strings for second t. */
void lx_worker_set_time(lx_worker_t *w, time_t t);

/* 64 random bits from the loop's generator (not for secrets). */
uint64_t lx_worker_random(lx_worker_t *w);

/* Refreshes the cached Date strings when the second changed. */
static inline void lx_worker_update_time(lx_worker_t *w) {
    time_t t = time(NULL);
    if (t != w->now) lx_worker_set_time(w, t);
}

/* A connection of w closed (conn.c): resumes accepting, or ends a stop. */
void lx_worker_conn_closed(lx_worker_t *w);

/* Sets up what a loop's connections share (pools, deadline queue); for
 * lx_worker_start and for harnesses that run a loop themselves. */
int lx_worker_init_conns(lx_worker_t *w);
void lx_worker_free_conns(lx_worker_t *w);

#endif
