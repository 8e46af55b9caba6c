/* Counters for the status endpoint (handlers/status.c).
 *
 * Each loop owns one lx_stats_t, on cache lines of its own, and is the only
 * thread that writes it: an increment is a relaxed load and a relaxed store
 * of the value plus one, which compiles to the plain increment it would be
 * without atomics (no lock prefix), yet lets the loop answering a scrape
 * read the other loops' counters without a data race (relaxed loads). A
 * scrape sums the loops; the sum is not a snapshot of one instant, which
 * counters that only grow do not need.
 *
 * Counters keyed by a name (vhosts, upstreams, upstream servers) live in
 * slots: the main thread gives each name a slot when a generation is built
 * (lx_stats_slot, from the status handler's gen_init), and the same name
 * gets the same slot in every later generation. So a vhost's counters
 * survive reloads, as nginx's zones keyed by name do; a vhost removed keeps
 * its totals (a counter that went back would break rate()), a renamed one
 * starts at zero under its new name. Each loop allocates the slots it
 * counts in, 64 at a time, on first use.
 *
 * Built with -DLX_NO_STATS, every count compiles to nothing (the bench's
 * comparison build, bench/status.sh); the endpoint then says so. */
#ifndef LX_STATS_H
#define LX_STATS_H

#include <stdint.h>
#include <uv.h>

#include "lx.h"

/* Status classes: [0] anything outside 100..599 (none so far), [1..5] 1xx..5xx. */
#define LX_ST_CLASSES 6
/* Connection states counted (lx_conn_state_t: IDLE .. CLOSED). */
#define LX_ST_CONN_STATES 8

/* The loop's lag (worker.c on_lag) is counted by how large it was: up to
 * 2 ms (libuv's millisecond timers make up to about 1 ms of it in an idle
 * loop), 10 ms, 100 ms, 1 s, and more (the upper bounds in ns, lx_st_lag_le). */
#define LX_ST_LAG_BUCKETS 5
static const uint64_t lx_st_lag_le[LX_ST_LAG_BUCKETS - 1] = {2000000, 10000000, 100000000,
                                                             1000000000};

/* Policy faults, by kind. */
enum {
    LX_PF_ERROR,  /**< a Lua error (the policy raised one, or a call it made did) */
    LX_PF_BUDGET, /**< it ran past policy_budget instructions */
    LX_PF_MEMORY, /**< it needed more than policy_memory */
    LX_PF_RETURN, /**< it returned something that is no status */
    LX_PF_KINDS
};

/* TLS handshakes that failed, by why (net/tls.c). */
enum {
    LX_TF_UNFINISHED,  /**< luxd closed it unfinished: handshake_timeout, or a stop */
    LX_TF_CLOSED,      /**< the client closed it (or the socket failed) before the end */
    LX_TF_PLAIN,       /**< plain HTTP on the TLS port */
    LX_TF_TOO_LARGE,   /**< more than 64 KiB before the end */
    LX_TF_VERSION,     /**< no TLS version in common */
    LX_TF_CIPHER,      /**< no cipher, group or signature algorithm in common */
    LX_TF_NAME,        /**< no certificate for the server name */
    LX_TF_ALERT,       /**< the client sent an alert (mostly: it does not trust the certificate) */
    LX_TF_CLIENT_CERT, /**< a client certificate required and missing, or not verified */
    LX_TF_PROTOCOL,    /**< anything else: a malformed message, a bad record */
    LX_TF_KINDS
};

/* Slot families. */
enum {
    LX_ST_VHOST,    /**< by vhost name; slot 0: requests no vhost answered */
    LX_ST_UPSTREAM, /**< by upstream name */
    LX_ST_PEER,     /**< by upstream server address ("127.0.0.1:8081") */
    LX_ST_FAMILIES
};

#define LX_ST_SLOT_SHIFT 6 /* slots per chunk: 64 */
#define LX_ST_CHUNKS     256
/* Slots per family; names beyond it share the last slot, LX_ST_OVERFLOW. */
#define LX_ST_SLOTS_MAX (LX_ST_CHUNKS << LX_ST_SLOT_SHIFT)
#define LX_ST_OVERFLOW  "(other)"

/* The counters of one slot, per family (all uint64_t). */
typedef struct {
    uint64_t req[LX_ST_CLASSES]; /**< requests answered, by status class */
} lx_st_vhost_t;
typedef struct {
    uint64_t requests; /**< requests handed to it */
    uint64_t failures; /**< answered 502/504 because no server of it could */
} lx_st_upstream_t;
typedef struct {
    uint64_t idle;     /**< gauge: idle connections in this loop's pool */
    uint64_t connects; /**< connections opened */
    uint64_t failures; /**< connects or exchanges that failed */
} lx_st_peer_t;

typedef struct lx_stats_s {
    uint64_t bytes_in;                   /**< bytes read from clients */
    uint64_t bytes_out;                  /**< response bytes (heads and bodies) of ended requests */
    uint64_t conns[LX_ST_CONN_STATES];   /**< gauges by state; [CLOSED] counts closes */
    uint64_t accepted;                   /**< connections taken */
    uint64_t refused;                    /**< taken from the kernel and closed at once (out of
                                            memory, a failed accept) */
    uint64_t accept_paused;              /**< times accepting paused at max_connections */
    uint64_t aborted;                    /**< requests whose connection closed before they ended */
    uint64_t cache_hits, cache_misses;   /**< file cache lookups */
    uint64_t io_jobs;                    /**< gauge: file-I/O jobs on the thread pool, queued or
                                            running */
    uint64_t io_jobs_total;              /**< file-I/O jobs queued */
    uint64_t policy_runs;                /**< policy calls */
    uint64_t policy_faults[LX_PF_KINDS]; /**< failed ones, by kind */
    uint64_t tls_handshakes;             /**< TLS handshakes done, resumed ones too */
    uint64_t tls_resumed;                /**< those that resumed a session */
    uint64_t tls_failures[LX_TF_KINDS];  /**< TLS handshakes that failed, by why */
    uint64_t up_pools;                   /**< gauge: upstream connection pools the loop keeps */
    uint64_t generation;                 /**< gauge: the generation the loop serves */
    uint64_t draining;                   /**< gauge: older generations it still runs requests of */
    uint64_t lags[LX_ST_LAG_BUCKETS];    /**< the loop's lag, sampled, by size (lx_st_lag_le) */
    uint64_t lag_ns;                     /**< the samples' sum */
    uint64_t lag_max_ns;                 /**< gauge: the largest */
    void *chunks[LX_ST_FAMILIES][LX_ST_CHUNKS]; /**< slot chunks (release-stored by the owner) */
} __attribute__((aligned(64))) lx_stats_t;

#ifndef LX_NO_STATS
#define LX_STATS_ON 1
static inline void lx_st_add(uint64_t *p, uint64_t n) {
    __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}
static inline void lx_st_sub(uint64_t *p, uint64_t n) {
    __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) - n, __ATOMIC_RELAXED);
}
static inline void lx_st_set(uint64_t *p, uint64_t v) {
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
#else
#define LX_STATS_ON 0
static inline void lx_st_add(uint64_t *p, uint64_t n) {
    (void)p, (void)n;
}
static inline void lx_st_sub(uint64_t *p, uint64_t n) {
    (void)p, (void)n;
}
static inline void lx_st_set(uint64_t *p, uint64_t v) {
    (void)p, (void)v;
}
#endif
#define LX_ST_INC(p) lx_st_add((p), 1)
#define LX_ST_DEC(p) lx_st_sub((p), 1)

static inline uint64_t lx_st_get(const uint64_t *p) {
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* The loop's lag was ns (worker.c on_lag). */
static inline void lx_stats_lag(lx_stats_t *st, uint64_t ns) {
    if (!LX_STATS_ON) return;
    unsigned b = 0;
    while (b < LX_ST_LAG_BUCKETS - 1 && ns > lx_st_lag_le[b])
        b++;
    LX_ST_INC(&st->lags[b]);
    lx_st_add(&st->lag_ns, ns);
    if (ns > lx_st_get(&st->lag_max_ns)) lx_st_set(&st->lag_max_ns, ns);
}

/* Makes the chunk of a slot (the owner loop, on first use); NULL: out of memory. */
void *lx_stats_chunk_new(lx_stats_t *st, int family, uint32_t slot);

static inline void *lx_stats_slot_of(lx_stats_t *st, int family, uint32_t slot, size_t size) {
    char *c = __atomic_load_n(&st->chunks[family][slot >> LX_ST_SLOT_SHIFT], __ATOMIC_RELAXED);
    if (lx_unlikely(c == NULL) && (c = lx_stats_chunk_new(st, family, slot)) == NULL) return NULL;
    return c + (slot & ((1u << LX_ST_SLOT_SHIFT) - 1)) * size;
}

/* A counter of a keyed slot, or NULL (out of memory: not counted). */
static inline lx_st_vhost_t *lx_st_vhost(lx_stats_t *st, uint32_t slot) {
    return LX_STATS_ON ? lx_stats_slot_of(st, LX_ST_VHOST, slot, sizeof(lx_st_vhost_t)) : NULL;
}
static inline lx_st_upstream_t *lx_st_upstream(lx_stats_t *st, uint32_t slot) {
    return LX_STATS_ON ? lx_stats_slot_of(st, LX_ST_UPSTREAM, slot, sizeof(lx_st_upstream_t))
                       : NULL;
}
static inline lx_st_peer_t *lx_st_peer(lx_stats_t *st, uint32_t slot) {
    return LX_STATS_ON ? lx_stats_slot_of(st, LX_ST_PEER, slot, sizeof(lx_st_peer_t)) : NULL;
}

/* One request ended (conn.c request_end): its class under its vhost's slot
 * and its bytes. */
static inline void lx_stats_request(lx_stats_t *st, uint32_t vslot, int status, uint64_t bytes) {
    if (!LX_STATS_ON) return;
    unsigned cls = (unsigned)status / 100;
    if (cls > 5) cls = 0;
    lx_st_vhost_t *v = lx_st_vhost(st, vslot);
    if (v) LX_ST_INC(&v->req[cls]);
    lx_st_add(&st->bytes_out, bytes);
}

/* The loops' counters. lx_stats_init makes n of them, before any loop
 * starts (server.c); lx_stats_loop(i) is loop i's, or, for a loop run
 * without a server (the fuzz harness), one of its own. */
int lx_stats_init(int n);
lx_stats_t *lx_stats_loop(int i);
void lx_stats_loop_release(lx_stats_t *st);
void lx_stats_free(void);
int lx_stats_nloops(void);
lx_stats_t *lx_stats_at(int i);
/* The stats of the loop a libuv handle runs on. */
lx_stats_t *lx_stats_of(const uv_loop_t *loop);

/* The slot of name in a family (main thread, while a generation is made):
 * the same slot for the same name, always. */
uint32_t lx_stats_slot(int family, const char *name);
/* Slots given out so far, and each one's name (any thread). */
uint32_t lx_stats_nslots(int family);
const char *lx_stats_slot_name(int family, uint32_t slot);

/* Server-wide, written by the main thread only. */
typedef struct {
    uint64_t reloads_ok;     /**< reloads that took effect */
    uint64_t reloads_failed; /**< reloads refused (the old generation kept serving) */
    uint64_t generation;     /**< the live generation */
    uint64_t gens_alive;     /**< generations published and not yet freed (atomic RMW: the
                                last reference may go on any loop) */
} lx_stats_server_t;
extern lx_stats_server_t lx_stats_server;

struct lx_gen_s;
/* The generation is published (server start, a reload that worked). */
void lx_stats_gen_live(struct lx_gen_s *g);
/* A generation is freed (the status handler's gen_free). */
void lx_stats_gen_freed(struct lx_gen_s *g);

#endif
