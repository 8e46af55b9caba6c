/* The loops' counters and the name -> slot registry (stats.h). */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "worker.h"

lx_stats_server_t lx_stats_server;

/* Written by the main thread before any loop starts, read-only after. */
static lx_stats_t *loops;
static int nloops;

static lx_stats_t *stats_new(void) {
    lx_stats_t *st = aligned_alloc(64, sizeof(lx_stats_t));
    if (st) memset(st, 0, sizeof(*st));
    return st;
}

int lx_stats_init(int n) {
    if (loops) return 0;
    loops = aligned_alloc(64, (size_t)n * sizeof(lx_stats_t));
    if (loops == NULL) return -ENOMEM;
    memset(loops, 0, (size_t)n * sizeof(lx_stats_t));
    nloops = n;
    return 0;
}

static int is_shared(const lx_stats_t *st) {
    return loops && st >= loops && st < loops + nloops;
}

lx_stats_t *lx_stats_loop(int i) {
    if (loops && i >= 0 && i < nloops) return &loops[i];
    return stats_new();
}

static void free_chunks(lx_stats_t *st) {
    for (int f = 0; f < LX_ST_FAMILIES; f++)
        for (int c = 0; c < LX_ST_CHUNKS; c++) {
            free(st->chunks[f][c]);
            st->chunks[f][c] = NULL;
        }
}

void lx_stats_loop_release(lx_stats_t *st) {
    if (st == NULL || is_shared(st)) return; /* lx_stats_free, after every loop has ended */
    free_chunks(st);
    free(st);
}

void lx_stats_free(void) {
    for (int i = 0; i < nloops; i++)
        free_chunks(&loops[i]);
    free(loops);
    loops = NULL;
    nloops = 0;
}

int lx_stats_nloops(void) {
    return nloops;
}

lx_stats_t *lx_stats_at(int i) {
    return &loops[i];
}

lx_stats_t *lx_stats_of(const uv_loop_t *loop) {
    return ((lx_worker_t *)loop->data)->stats;
}

static const size_t slot_size[LX_ST_FAMILIES] = {
    sizeof(lx_st_vhost_t),
    sizeof(lx_st_upstream_t),
    sizeof(lx_st_peer_t),
};

void *lx_stats_chunk_new(lx_stats_t *st, int family, uint32_t slot) {
    void *c = calloc((size_t)1 << LX_ST_SLOT_SHIFT, slot_size[family]);
    if (c == NULL) return NULL;
    /* Release: a scrape that sees the pointer sees the zeroed chunk. */
    __atomic_store_n(&st->chunks[family][slot >> LX_ST_SLOT_SHIFT], c, __ATOMIC_RELEASE);
    return c;
}

/* ---- names -> slots ------------------------------------------------------ */

/* A family's names: an array any thread reads up to n (published with
 * release after the name is in place), and a hash only the main thread
 * uses to find a name again. Names are never freed: a name keeps its slot
 * for the life of the process, bounded by LX_ST_SLOTS_MAX. */
typedef struct {
    const char **names;
    uint32_t n;
    uint32_t *hash; /* slot + 1, 0: empty */
    size_t hmask;
} registry_t;

static registry_t reg[LX_ST_FAMILIES];

static int reg_init(registry_t *g, int family) {
    g->names = calloc(LX_ST_SLOTS_MAX, sizeof(*g->names));
    g->hash = calloc(2 * LX_ST_SLOTS_MAX, sizeof(*g->hash));
    if (g->names == NULL || g->hash == NULL) {
        free(g->names);
        free(g->hash);
        g->names = NULL;
        g->hash = NULL;
        return -ENOMEM;
    }
    g->hmask = 2 * LX_ST_SLOTS_MAX - 1;
    /* Slot 0 of the vhosts: requests no vhost answered (no Host matched
     * and no default, or refused before the Host was read). */
    g->names[0] = family == LX_ST_VHOST ? "-" : "";
    __atomic_store_n(&g->n, 1, __ATOMIC_RELEASE);
    return 0;
}

uint32_t lx_stats_slot(int family, const char *name) {
    registry_t *g = &reg[family];
    if (g->names == NULL && reg_init(g, family) < 0) return 0;
    if (name == NULL) return 0;
    size_t len = strlen(name);
    uint64_t h = lx_hash(name, len, (uint64_t)family);
    for (size_t i = h & g->hmask;; i = (i + 1) & g->hmask) {
        uint32_t s = g->hash[i];
        if (s == 0) break;
        if (strcmp(g->names[s - 1], name) == 0) return s - 1;
    }
    uint32_t n = g->n;
    if (n == LX_ST_SLOTS_MAX) return LX_ST_SLOTS_MAX - 1; /* the overflow */
    /* The overflow slot's name is none a vhost (a host name), an upstream
     * (letters, digits, "_", "-", ".") or a server address (host:port,
     * unix:path) can have, so it never shows as one of them. */
    const char *copy = n == LX_ST_SLOTS_MAX - 1 ? LX_ST_OVERFLOW : strdup(name);
    if (copy == NULL) return 0;
    g->names[n] = copy;
    if (n < LX_ST_SLOTS_MAX - 1)
        for (size_t i = h & g->hmask;; i = (i + 1) & g->hmask)
            if (g->hash[i] == 0) {
                g->hash[i] = n + 1;
                break;
            }
    __atomic_store_n(&g->n, n + 1, __ATOMIC_RELEASE);
    return n;
}

uint32_t lx_stats_nslots(int family) {
    return __atomic_load_n(&reg[family].n, __ATOMIC_ACQUIRE);
}

const char *lx_stats_slot_name(int family, uint32_t slot) {
    return reg[family].names[slot];
}

/* ---- generations --------------------------------------------------------- */

void lx_stats_gen_live(lx_gen_t *g) {
    g->stats_live = 1;
    __atomic_fetch_add(&lx_stats_server.gens_alive, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&lx_stats_server.generation, g->id, __ATOMIC_RELAXED);
}

void lx_stats_gen_freed(lx_gen_t *g) {
    if (g->stats_live) __atomic_fetch_sub(&lx_stats_server.gens_alive, 1, __ATOMIC_RELAXED);
}
