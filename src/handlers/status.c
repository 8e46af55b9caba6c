/* status = true: the location answers with the server's counters (stats.h),
 * summed over the loops, in the Prometheus text format (version 0.0.4) or,
 * asked for with ?format=json or "Accept: application/json", as JSON.
 *
 * It is a handler like the others: access rules guard it (they run before
 * the chain), a policy before it may refuse. Its gen_init gives each vhost,
 * upstream and upstream server of a generation the counter slot of its name
 * (the same slot in every generation: counters survive reloads), and its
 * gen_free tells the counters a generation is gone (generations draining).
 *
 * What a scrape reports for requests is what ended before it: the scrape
 * itself is counted once it is out, in the next one. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "../stats.h"
#include "../worker.h"
#include "../buf.h"
#include "handler.h"
#include "llhttp.h"

static int st_gen_init(lx_gen_t *g, const char *file, const char *prefix, int nloops, char *err,
                       size_t errlen) {
    (void)file, (void)prefix, (void)nloops, (void)err, (void)errlen;
    for (size_t i = 0; i < g->nvhosts; i++)
        g->vhosts[i].stat_slot = lx_stats_slot(LX_ST_VHOST, g->vhosts[i].name);
    /* vhost_dir hosts share one slot: a name per host would let clients
     * make up slots with Host headers. */
    g->mass_vhost.stat_slot = g->srv.vhost_dir ? lx_stats_slot(LX_ST_VHOST, "(vhost_dir)")
                                               : lx_stats_slot(LX_ST_VHOST, NULL);
    for (size_t i = 0; i < g->nupstreams; i++) {
        lx_upstream_t *u = &g->upstreams[i];
        u->stat_slot = lx_stats_slot(LX_ST_UPSTREAM, u->name);
        for (size_t j = 0; j < u->nservers; j++)
            u->servers[j].stat_slot = lx_stats_slot(LX_ST_PEER, u->servers[j].addr_text);
    }
    return 0;
}

static void st_gen_free(lx_gen_t *g) {
    lx_stats_gen_freed(g);
}

/* ---- output (the page is built in an lx_buf_t, buf.h) ------------------ */

/* The length of the UTF-8 sequence at s (1..4), or 0 when the byte at s
 * begins none (a stray continuation byte, an overlong form, a surrogate,
 * past U+10FFFF, or cut short: the string's NUL is no continuation byte). */
static size_t utf8_seq(const unsigned char *s) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xc2 || c > 0xf4) return 0;
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (c == 0xe0) lo = 0xa0; /* overlong */
    if (c == 0xed) hi = 0x9f; /* surrogates */
    if (c == 0xf0) lo = 0x90; /* overlong */
    if (c == 0xf4) hi = 0x8f; /* past U+10FFFF */
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

/* A name as a Prometheus label value or a JSON string body, whole, in b
 * (reused from name to name). Names are bytes (a unix socket path may hold
 * any but NUL) and both formats are UTF-8 text, so the name shown is the
 * name with each byte that is no part of valid UTF-8 as the four characters
 * \xHH, and, so that no other name can show the same, each backslash
 * doubled: two names never come out as one series. That name is then
 * escaped as the format wants: Prometheus escapes \, " and newline only
 * (any other byte goes as it is), JSON \, " and every control byte
 * (\u00XX). Returns "" if out of memory (b->oom). */
static const char *esc(lx_buf_t *b, const char *name, int json) {
    const unsigned char *s = (const unsigned char *)name;
    b->len = 0;
    while (*s) {
        char e[16];
        size_t n = utf8_seq(s);
        if (n == 0) {
            snprintf(e, sizeof(e), "\\\\x%02x", *s); /* the name's \xHH, escaped */
            lx_buf_put(b, e, 5);
            s++;
            continue;
        }
        unsigned char c = *s;
        if (c == '\\')
            lx_buf_put(b, "\\\\\\\\", 4); /* the name's \\, escaped */
        else if (c == '"')
            lx_buf_put(b, "\\\"", 2);
        else if (c == '\n')
            lx_buf_put(b, "\\n", 2);
        else if (json && c < 0x20) {
            snprintf(e, sizeof(e), "\\u%04x", c);
            lx_buf_put(b, e, 6);
        } else
            lx_buf_put(b, (const char *)s, n);
        s += n;
    }
    return lx_buf_str(b);
}

/* ---- summing the loops --------------------------------------------------- */

typedef struct {
    uint64_t bytes_in, bytes_out, conns[LX_ST_CONN_STATES], accepted, refused, accept_paused;
    uint64_t aborted, cache_hits, cache_misses, io_jobs, io_jobs_total, policy_runs;
    uint64_t policy_faults[LX_PF_KINDS];
    uint64_t tls_handshakes, tls_resumed, tls_failures[LX_TF_KINDS];
    uint64_t up_pools;
    uint64_t req[LX_ST_CLASSES];
} totals_t;

static void sum_loop(totals_t *t, const lx_stats_t *st) {
    t->bytes_in += lx_st_get(&st->bytes_in);
    t->bytes_out += lx_st_get(&st->bytes_out);
    for (int i = 0; i < LX_ST_CONN_STATES; i++)
        t->conns[i] += lx_st_get(&st->conns[i]);
    t->accepted += lx_st_get(&st->accepted);
    t->refused += lx_st_get(&st->refused);
    t->accept_paused += lx_st_get(&st->accept_paused);
    t->aborted += lx_st_get(&st->aborted);
    t->cache_hits += lx_st_get(&st->cache_hits);
    t->cache_misses += lx_st_get(&st->cache_misses);
    t->io_jobs += lx_st_get(&st->io_jobs);
    t->io_jobs_total += lx_st_get(&st->io_jobs_total);
    t->policy_runs += lx_st_get(&st->policy_runs);
    for (int i = 0; i < LX_PF_KINDS; i++)
        t->policy_faults[i] += lx_st_get(&st->policy_faults[i]);
    t->tls_handshakes += lx_st_get(&st->tls_handshakes);
    t->tls_resumed += lx_st_get(&st->tls_resumed);
    for (int i = 0; i < LX_TF_KINDS; i++)
        t->tls_failures[i] += lx_st_get(&st->tls_failures[i]);
    t->up_pools += lx_st_get(&st->up_pools);
}

typedef struct {
    lx_stats_t **loops;
    int n;
} loops_t;

/* Sums nwords uint64_t counters of a slot over the loops into out. */
static void sum_slot(const loops_t *l, int family, uint32_t slot, size_t size, uint64_t *out,
                     size_t nwords) {
    memset(out, 0, nwords * sizeof(*out));
    for (int i = 0; i < l->n; i++) {
        const char *c = __atomic_load_n(&l->loops[i]->chunks[family][slot >> LX_ST_SLOT_SHIFT],
                                        __ATOMIC_ACQUIRE);
        if (c == NULL) continue;
        const uint64_t *w = (const uint64_t *)(c + (slot & ((1u << LX_ST_SLOT_SHIFT) - 1)) * size);
        for (size_t k = 0; k < nwords; k++)
            out[k] += lx_st_get(&w[k]);
    }
}

static const char *const state_names[LX_ST_CONN_STATES] = {"idle", "head",   "handling", "writing",
                                                           "body", "linger", "tunnel",   "closed"};
static const char *const class_names[LX_ST_CLASSES] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const fault_names[LX_PF_KINDS] = {"error", "budget", "memory", "return"};
static const char *const tls_fail_names[] = {"unfinished",  "closed",  "plain_http", "too_large",
                                             "version",     "cipher",  "name",       "alert",
                                             "client_cert", "protocol"};
_Static_assert(sizeof(tls_fail_names) / sizeof(tls_fail_names[0]) == LX_TF_KINDS,
               "a name for each LX_TF_*");

#define VH_WORDS (sizeof(lx_st_vhost_t) / 8)
#define UP_WORDS (sizeof(lx_st_upstream_t) / 8)
#define PE_WORDS (sizeof(lx_st_peer_t) / 8)

/* Slots of the live generation are shown even at zero, so that a new
 * vhost's series exist from the first scrape; others once they counted. */
static uint8_t *live_slots(const lx_gen_t *g, int family, uint32_t n) {
    uint8_t *m = calloc(n ? n : 1, 1);
    if (m == NULL) return NULL;
    if (family == LX_ST_VHOST) {
        for (size_t i = 0; i < g->nvhosts; i++)
            if (g->vhosts[i].stat_slot < n) m[g->vhosts[i].stat_slot] = 1;
    } else {
        for (size_t i = 0; i < g->nupstreams; i++) {
            const lx_upstream_t *u = &g->upstreams[i];
            if (family == LX_ST_UPSTREAM && u->stat_slot < n) m[u->stat_slot] = 1;
            for (size_t j = 0; family == LX_ST_PEER && j < u->nservers; j++)
                if (u->servers[j].stat_slot < n) m[u->servers[j].stat_slot] = 1;
        }
    }
    return m;
}

static int nonzero(const uint64_t *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (v[i]) return 1;
    return 0;
}

/* ---- Prometheus ---------------------------------------------------------- */

static void prom_head(lx_buf_t *o, const char *name, const char *type, const char *help) {
    lx_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_one(lx_buf_t *o, const char *name, const char *type, const char *help,
                     uint64_t v) {
    prom_head(o, name, type, help);
    lx_buf_printf(o, "%s %llu\n", name, (unsigned long long)v);
}

static void render_prom(lx_buf_t *o, const lx_req_t *r, const loops_t *l, const totals_t *t) {
    lx_buf_t nb = {0}; /* a name, escaped */
    if (!LX_STATS_ON) lx_buf_printf(o, "# luxd was built with -DLX_NO_STATS: every counter is 0\n");
    uint32_t nv = lx_stats_nslots(LX_ST_VHOST);
    uint8_t *live = live_slots(r->gen, LX_ST_VHOST, nv);
    prom_head(o, "luxd_requests_total", "counter",
              "Requests answered (their response out), by vhost and status class.");
    uint64_t v[VH_WORDS > PE_WORDS ? VH_WORDS : PE_WORDS];
    for (uint32_t s = 0; s < nv; s++) {
        sum_slot(l, LX_ST_VHOST, s, sizeof(lx_st_vhost_t), v, VH_WORDS);
        int show = live && live[s];
        if (!show && !nonzero(v, VH_WORDS)) continue;
        const char *name = esc(&nb, lx_stats_slot_name(LX_ST_VHOST, s), 0);
        for (int c = 0; c < LX_ST_CLASSES; c++)
            if (v[c] || (show && c > 0))
                lx_buf_printf(o, "luxd_requests_total{vhost=\"%s\",class=\"%s\"} %llu\n", name,
                              class_names[c], (unsigned long long)v[c]);
    }
    free(live);
    prom_head(o, "luxd_requests_by_class_total", "counter",
              "Requests answered, by status class (luxd_requests_total summed over vhosts).");
    for (int c = 1; c < LX_ST_CLASSES; c++)
        lx_buf_printf(o, "luxd_requests_by_class_total{class=\"%s\"} %llu\n", class_names[c],
                      (unsigned long long)t->req[c]);
    if (t->req[0])
        lx_buf_printf(o, "luxd_requests_by_class_total{class=\"other\"} %llu\n",
                      (unsigned long long)t->req[0]);
    prom_one(o, "luxd_requests_aborted_total", "counter",
             "Requests whose connection closed before they were answered.", t->aborted);
    prom_one(o, "luxd_received_bytes_total", "counter", "Bytes read from clients.", t->bytes_in);
    prom_one(o, "luxd_sent_bytes_total", "counter",
             "Response bytes (status lines, headers, bodies) of answered requests.", t->bytes_out);
    prom_head(o, "luxd_connections", "gauge", "Open client connections, by state.");
    for (int i = 0; i < LX_ST_CONN_STATES - 1; i++)
        lx_buf_printf(o, "luxd_connections{state=\"%s\"} %llu\n", state_names[i],
                      (unsigned long long)t->conns[i]);
    prom_one(o, "luxd_connections_accepted_total", "counter", "Client connections accepted.",
             t->accepted);
    prom_one(o, "luxd_connections_refused_total", "counter",
             "Connections taken from the kernel and closed at once (out of memory, a failed "
             "accept).",
             t->refused);
    prom_one(o, "luxd_connections_closed_total", "counter", "Client connections closed.",
             t->conns[LX_ST_CONN_STATES - 1]);
    prom_one(o, "luxd_accept_paused_total", "counter",
             "Times a loop stopped accepting at its share of max_connections.", t->accept_paused);
    prom_one(o, "luxd_file_cache_hits_total", "counter", "File cache lookups answered from memory.",
             t->cache_hits);
    prom_one(o, "luxd_file_cache_misses_total", "counter",
             "File cache lookups that loaded the file (on the thread pool).", t->cache_misses);
    prom_one(o, "luxd_file_io_jobs", "gauge",
             "File-I/O jobs of luxd on the thread pool, queued or running.", t->io_jobs);
    prom_one(o, "luxd_file_io_jobs_total", "counter", "File-I/O jobs queued on the thread pool.",
             t->io_jobs_total);
    prom_one(o, "luxd_policy_runs_total", "counter", "Policy calls.", t->policy_runs);
    prom_head(o, "luxd_policy_faults_total", "counter",
              "Policy calls that failed (answered 500), by kind.");
    for (int i = 0; i < LX_PF_KINDS; i++)
        lx_buf_printf(o, "luxd_policy_faults_total{kind=\"%s\"} %llu\n", fault_names[i],
                      (unsigned long long)t->policy_faults[i]);
    prom_head(o, "luxd_tls_handshakes_total", "counter",
              "TLS handshakes done, by whether they resumed a session.");
    lx_buf_printf(o, "luxd_tls_handshakes_total{session=\"new\"} %llu\n",
                  (unsigned long long)(t->tls_handshakes - t->tls_resumed));
    lx_buf_printf(o, "luxd_tls_handshakes_total{session=\"resumed\"} %llu\n",
                  (unsigned long long)t->tls_resumed);
    prom_head(o, "luxd_tls_handshake_failures_total", "counter",
              "TLS handshakes that failed, by why.");
    for (int i = 0; i < LX_TF_KINDS; i++)
        lx_buf_printf(o, "luxd_tls_handshake_failures_total{reason=\"%s\"} %llu\n",
                      tls_fail_names[i], (unsigned long long)t->tls_failures[i]);
    prom_head(o, "luxd_reloads_total", "counter", "Reloads, by outcome.");
    lx_buf_printf(o, "luxd_reloads_total{result=\"ok\"} %llu\n",
                  (unsigned long long)lx_st_get(&lx_stats_server.reloads_ok));
    lx_buf_printf(o, "luxd_reloads_total{result=\"failed\"} %llu\n",
                  (unsigned long long)lx_st_get(&lx_stats_server.reloads_failed));
    uint64_t live_gen = lx_st_get(&lx_stats_server.generation);
    uint64_t alive = lx_st_get(&lx_stats_server.gens_alive);
    prom_one(o, "luxd_generation", "gauge", "The live configuration generation.",
             live_gen ? live_gen : r->gen->id);
    prom_one(o, "luxd_generations_draining", "gauge",
             "Older generations still held by requests that began under them.",
             alive > 1 ? alive - 1 : 0);
    prom_one(o, "luxd_workers", "gauge", "Event loops.", (uint64_t)l->n);
    prom_head(o, "luxd_worker_generation", "gauge", "The generation each loop serves.");
    for (int i = 0; i < l->n; i++)
        lx_buf_printf(o, "luxd_worker_generation{worker=\"%d\"} %llu\n", i,
                      (unsigned long long)lx_st_get(&l->loops[i]->generation));
    prom_head(o, "luxd_worker_generations_draining", "gauge",
              "Older generations each loop still runs requests of.");
    for (int i = 0; i < l->n; i++)
        lx_buf_printf(o, "luxd_worker_generations_draining{worker=\"%d\"} %llu\n", i,
                      (unsigned long long)lx_st_get(&l->loops[i]->draining));
    prom_head(o, "luxd_worker_lag_seconds", "histogram",
              "Each loop's lag: how late a timer due every 10 ms fired, sampled at each firing. "
              "A loop kept busy (a slow policy) lags by about as long, less up to 10 ms.");
    for (int i = 0; i < l->n; i++) {
        const lx_stats_t *st = l->loops[i];
        uint64_t n = 0;
        for (int b = 0; b < LX_ST_LAG_BUCKETS; b++) {
            n += lx_st_get(&st->lags[b]);
            if (b < LX_ST_LAG_BUCKETS - 1)
                lx_buf_printf(o, "luxd_worker_lag_seconds_bucket{worker=\"%d\",le=\"%g\"} %llu\n",
                              i, (double)lx_st_lag_le[b] / 1e9, (unsigned long long)n);
            else
                lx_buf_printf(o, "luxd_worker_lag_seconds_bucket{worker=\"%d\",le=\"+Inf\"} %llu\n",
                              i, (unsigned long long)n);
        }
        lx_buf_printf(o, "luxd_worker_lag_seconds_sum{worker=\"%d\"} %.6f\n", i,
                      (double)lx_st_get(&st->lag_ns) / 1e9);
        lx_buf_printf(o, "luxd_worker_lag_seconds_count{worker=\"%d\"} %llu\n", i,
                      (unsigned long long)n);
    }
    prom_head(o, "luxd_worker_lag_max_seconds", "gauge",
              "The largest lag of each loop since luxd started.");
    for (int i = 0; i < l->n; i++)
        lx_buf_printf(o, "luxd_worker_lag_max_seconds{worker=\"%d\"} %.6f\n", i,
                      (double)lx_st_get(&l->loops[i]->lag_max_ns) / 1e9);

    uint32_t nu = lx_stats_nslots(LX_ST_UPSTREAM);
    live = live_slots(r->gen, LX_ST_UPSTREAM, nu);
    prom_head(o, "luxd_upstream_requests_total", "counter", "Requests handed to each upstream.");
    for (uint32_t s = 1; s < nu; s++) {
        sum_slot(l, LX_ST_UPSTREAM, s, sizeof(lx_st_upstream_t), v, UP_WORDS);
        if (!(live && live[s]) && !nonzero(v, UP_WORDS)) continue;
        lx_buf_printf(o, "luxd_upstream_requests_total{upstream=\"%s\"} %llu\n",
                      esc(&nb, lx_stats_slot_name(LX_ST_UPSTREAM, s), 0), (unsigned long long)v[0]);
    }
    prom_head(o, "luxd_upstream_failures_total", "counter",
              "Requests an upstream could not answer (502 or 504 to the client).");
    for (uint32_t s = 1; s < nu; s++) {
        sum_slot(l, LX_ST_UPSTREAM, s, sizeof(lx_st_upstream_t), v, UP_WORDS);
        if (!(live && live[s]) && !nonzero(v, UP_WORDS)) continue;
        lx_buf_printf(o, "luxd_upstream_failures_total{upstream=\"%s\"} %llu\n",
                      esc(&nb, lx_stats_slot_name(LX_ST_UPSTREAM, s), 0), (unsigned long long)v[1]);
    }
    free(live);
    prom_one(o, "luxd_upstream_pools", "gauge",
             "Pools of upstream connections the loops keep: one per server address and TLS "
             "settings an upstream names, and those that still lend a connection.",
             t->up_pools);
    uint32_t np = lx_stats_nslots(LX_ST_PEER);
    live = live_slots(r->gen, LX_ST_PEER, np);
    static const char *const peer_metric[PE_WORDS][3] = {
        {"luxd_upstream_idle_connections", "gauge",
         "Idle connections kept in the pools, by upstream server address."},
        {"luxd_upstream_connects_total", "counter",
         "Connections opened to each upstream server address."},
        {"luxd_upstream_server_failures_total", "counter",
         "Connects and exchanges that failed, by upstream server address."},
    };
    for (size_t k = 0; k < PE_WORDS; k++) {
        prom_head(o, peer_metric[k][0], peer_metric[k][1], peer_metric[k][2]);
        for (uint32_t s = 1; s < np; s++) {
            sum_slot(l, LX_ST_PEER, s, sizeof(lx_st_peer_t), v, PE_WORDS);
            if (!(live && live[s]) && !nonzero(v, PE_WORDS)) continue;
            lx_buf_printf(o, "%s{server=\"%s\"} %llu\n", peer_metric[k][0],
                          esc(&nb, lx_stats_slot_name(LX_ST_PEER, s), 0), (unsigned long long)v[k]);
        }
    }
    free(live);
    if (nb.oom) o->oom = 1;
    free(nb.p);
}

/* ---- JSON ---------------------------------------------------------------- */

static void render_json(lx_buf_t *o, const lx_req_t *r, const loops_t *l, const totals_t *t) {
    lx_buf_t nb = {0}; /* a name, escaped */
    uint64_t live_gen = lx_st_get(&lx_stats_server.generation);
    uint64_t alive = lx_st_get(&lx_stats_server.gens_alive);
    uint64_t total = 0;
    for (int c = 0; c < LX_ST_CLASSES; c++)
        total += t->req[c];
    lx_buf_printf(o,
                  "{\"server\":{\"version\":\"" LX_VERSION "\",\"counters\":%s,\"workers\":%d,"
                  "\"generation\":%llu,\"generations_draining\":%llu,\"reloads\":{\"ok\":%llu,"
                  "\"failed\":%llu}},\n",
                  LX_STATS_ON ? "true" : "false", l->n,
                  (unsigned long long)(live_gen ? live_gen : r->gen->id),
                  (unsigned long long)(alive > 1 ? alive - 1 : 0),
                  (unsigned long long)lx_st_get(&lx_stats_server.reloads_ok),
                  (unsigned long long)lx_st_get(&lx_stats_server.reloads_failed));
    lx_buf_printf(o, "\"requests\":{\"total\":%llu,\"aborted\":%llu,\"by_class\":{",
                  (unsigned long long)total, (unsigned long long)t->aborted);
    for (int c = 1; c < LX_ST_CLASSES; c++)
        lx_buf_printf(o, "%s\"%s\":%llu", c > 1 ? "," : "", class_names[c],
                      (unsigned long long)t->req[c]);
    lx_buf_printf(o, ",\"other\":%llu}},\n", (unsigned long long)t->req[0]);
    lx_buf_printf(o, "\"vhosts\":{");
    uint32_t nv = lx_stats_nslots(LX_ST_VHOST);
    uint8_t *live = live_slots(r->gen, LX_ST_VHOST, nv);
    uint64_t v[VH_WORDS > PE_WORDS ? VH_WORDS : PE_WORDS];
    int first = 1;
    for (uint32_t s = 0; s < nv; s++) {
        sum_slot(l, LX_ST_VHOST, s, sizeof(lx_st_vhost_t), v, VH_WORDS);
        if (!(live && live[s]) && !nonzero(v, VH_WORDS)) continue;
        uint64_t sum = 0;
        for (int c = 0; c < LX_ST_CLASSES; c++)
            sum += v[c];
        lx_buf_printf(o, "%s\n \"%s\":{\"total\":%llu", first ? "" : ",",
                      esc(&nb, lx_stats_slot_name(LX_ST_VHOST, s), 1), (unsigned long long)sum);
        for (int c = 1; c < LX_ST_CLASSES; c++)
            lx_buf_printf(o, ",\"%s\":%llu", class_names[c], (unsigned long long)v[c]);
        lx_buf_printf(o, ",\"other\":%llu}", (unsigned long long)v[0]);
        first = 0;
    }
    free(live);
    lx_buf_printf(o, "},\n\"bytes\":{\"in\":%llu,\"out\":%llu},\n", (unsigned long long)t->bytes_in,
                  (unsigned long long)t->bytes_out);
    lx_buf_printf(o,
                  "\"connections\":{\"accepted\":%llu,\"refused\":%llu,\"closed\":%llu,"
                  "\"accept_paused\":%llu,\"states\":{",
                  (unsigned long long)t->accepted, (unsigned long long)t->refused,
                  (unsigned long long)t->conns[LX_ST_CONN_STATES - 1],
                  (unsigned long long)t->accept_paused);
    for (int i = 0; i < LX_ST_CONN_STATES - 1; i++)
        lx_buf_printf(o, "%s\"%s\":%llu", i ? "," : "", state_names[i],
                      (unsigned long long)t->conns[i]);
    lx_buf_printf(o, "}},\n\"file_cache\":{\"hits\":%llu,\"misses\":%llu},\n",
                  (unsigned long long)t->cache_hits, (unsigned long long)t->cache_misses);
    lx_buf_printf(o, "\"file_io\":{\"jobs\":%llu,\"total\":%llu},\n",
                  (unsigned long long)t->io_jobs, (unsigned long long)t->io_jobs_total);
    lx_buf_printf(o, "\"policy\":{\"runs\":%llu,\"faults\":{", (unsigned long long)t->policy_runs);
    for (int i = 0; i < LX_PF_KINDS; i++)
        lx_buf_printf(o, "%s\"%s\":%llu", i ? "," : "", fault_names[i],
                      (unsigned long long)t->policy_faults[i]);
    lx_buf_printf(o, "}},\n\"tls\":{\"handshakes\":%llu,\"resumed\":%llu,\"failures\":{",
                  (unsigned long long)t->tls_handshakes, (unsigned long long)t->tls_resumed);
    for (int i = 0; i < LX_TF_KINDS; i++)
        lx_buf_printf(o, "%s\"%s\":%llu", i ? "," : "", tls_fail_names[i],
                      (unsigned long long)t->tls_failures[i]);
    lx_buf_printf(o, "}},\n\"workers\":[");
    for (int i = 0; i < l->n; i++)
        lx_buf_printf(o,
                      "%s{\"generation\":%llu,\"generations_draining\":%llu,\"lag_max_seconds\":"
                      "%.6f}",
                      i ? "," : "", (unsigned long long)lx_st_get(&l->loops[i]->generation),
                      (unsigned long long)lx_st_get(&l->loops[i]->draining),
                      (double)lx_st_get(&l->loops[i]->lag_max_ns) / 1e9);
    lx_buf_printf(o, "],\n\"upstream_pools\":%llu,\n\"upstreams\":{",
                  (unsigned long long)t->up_pools);
    uint32_t nu = lx_stats_nslots(LX_ST_UPSTREAM);
    live = live_slots(r->gen, LX_ST_UPSTREAM, nu);
    first = 1;
    for (uint32_t s = 1; s < nu; s++) {
        sum_slot(l, LX_ST_UPSTREAM, s, sizeof(lx_st_upstream_t), v, UP_WORDS);
        if (!(live && live[s]) && !nonzero(v, UP_WORDS)) continue;
        lx_buf_printf(o, "%s\n \"%s\":{\"requests\":%llu,\"failures\":%llu}", first ? "" : ",",
                      esc(&nb, lx_stats_slot_name(LX_ST_UPSTREAM, s), 1), (unsigned long long)v[0],
                      (unsigned long long)v[1]);
        first = 0;
    }
    free(live);
    lx_buf_printf(o, "},\n\"upstream_servers\":{");
    uint32_t np = lx_stats_nslots(LX_ST_PEER);
    live = live_slots(r->gen, LX_ST_PEER, np);
    first = 1;
    for (uint32_t s = 1; s < np; s++) {
        sum_slot(l, LX_ST_PEER, s, sizeof(lx_st_peer_t), v, PE_WORDS);
        if (!(live && live[s]) && !nonzero(v, PE_WORDS)) continue;
        lx_buf_printf(o, "%s\n \"%s\":{\"idle\":%llu,\"connects\":%llu,\"failures\":%llu}",
                      first ? "" : ",", esc(&nb, lx_stats_slot_name(LX_ST_PEER, s), 1),
                      (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[2]);
        first = 0;
    }
    free(live);
    lx_buf_printf(o, "}}\n");
    if (nb.oom) o->oom = 1;
    free(nb.p);
}

/* ---- the handler --------------------------------------------------------- */

/* True when an Accept value lists the media type application/json, in any
 * case (RFC 9110 8.3.1: type and subtype are case-insensitive), with or
 * without parameters; "application/json-seq" is another type. */
static int accepts_json(lx_str_t v) {
    const char *p = v.p, *end = v.p + v.len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *semi = memchr(p, ';', (size_t)(e - p));
        const char *te = semi ? semi : e;
        while (p < te && (*p == ' ' || *p == '\t'))
            p++;
        while (te > p && (te[-1] == ' ' || te[-1] == '\t'))
            te--;
        if (lx_str_ieq((lx_str_t){p, (size_t)(te - p)}, "application/json", 16)) return 1;
        p = comma ? comma + 1 : end;
    }
    return 0;
}

/* ?format=json|prometheus decides; else an Accept naming application/json. */
static int wants_json(const lx_req_t *r) {
    const char *q = r->query.p, *end = q + r->query.len;
    while (q && q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *e = amp ? amp : end;
        lx_str_t kv = {q, (size_t)(e - q)};
        if (lx_str_eq(kv, "format=json", 11)) return 1;
        if (lx_str_eq(kv, "format=prometheus", 17)) return 0;
        q = amp ? amp + 1 : NULL;
    }
    for (unsigned i = 0; i < r->nheaders; i++) {
        const lx_header_t *h = &r->headers[i];
        if (!lx_str_ieq(h->name, "accept", 6)) continue;
        if (accepts_json(h->value)) return 1;
    }
    return 0;
}

static int st_handle(lx_req_t *r) {
    if (r->method != HTTP_GET && r->method != HTTP_HEAD) {
        return 405; /* the core says Allow: its methods */
    }
    lx_stats_t *one[1] = {r->w->stats};
    lx_stats_t *many[64];
    loops_t l = {one, 1};
    int n = lx_stats_nloops();
    lx_stats_t **heap = NULL;
    if (n > 0) {
        l.loops = n <= 64 ? many : (heap = malloc((size_t)n * sizeof(*heap)));
        if (l.loops == NULL) return 500;
        for (int i = 0; i < n; i++)
            l.loops[i] = lx_stats_at(i);
        l.n = n;
    }
    totals_t t;
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < l.n; i++)
        sum_loop(&t, l.loops[i]);
    uint64_t v[VH_WORDS];
    uint32_t nv = lx_stats_nslots(LX_ST_VHOST);
    for (uint32_t s = 0; s < nv; s++) {
        sum_slot(&l, LX_ST_VHOST, s, sizeof(lx_st_vhost_t), v, VH_WORDS);
        for (int c = 0; c < LX_ST_CLASSES; c++)
            t.req[c] += v[c];
    }
    int json = wants_json(r);
    lx_buf_t o = {0};
    if (json)
        render_json(&o, r, &l, &t);
    else
        render_prom(&o, r, &l, &t);
    free(heap);
    if (o.oom) {
        free(o.p);
        return 500;
    }
    lx_resp_init(r, 200);
    static const char ct_json[] = "Content-Type: application/json\r\n";
    static const char ct_prom[] = "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n";
    static const char no_store[] = "Cache-Control: no-store\r\n";
    if (json)
        lx_resp_header(r, ct_json, sizeof(ct_json) - 1);
    else
        lx_resp_header(r, ct_prom, sizeof(ct_prom) - 1);
    lx_resp_header(r, no_store, sizeof(no_store) - 1);
    if (r->site->headers_len) lx_resp_header(r, r->site->headers, r->site->headers_len);
    r->resp.length = (int64_t)o.len;
    lx_resp_send_headers(r);
    lx_resp_body_copy(r, o.p, o.len);
    free(o.p);
    lx_resp_done(r);
    return LX_DONE;
}

const lx_handler_t lx_status_handler = {
    .name = "status",
    .gen_init = st_gen_init,
    .gen_free = st_gen_free,
    .handle = st_handle,
    .methods = LX_METHODS_GET_HEAD,
};
