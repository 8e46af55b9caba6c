/* Worker loops: each thread runs one libuv loop with its own SO_REUSEPORT
 * listeners, its own file cache and its own access log buffer, so loops share
 * nothing on the request path. */
#include "worker.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h1/conn.h"
#include "h2/h2.h"
#include "dispatch/rules.h"
#include "handlers/handler.h"
#include "core/accesslog.h"
#include "io/filecache.h"
#include "log.h"
#include "stats.h"

/* Read buffers fit a request head under the generation's limits (conn.c
 * RBUF_SLACK). */
#define RBUF_SIZE(s) ((s)->max_header_bytes + 4096)

static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void lx_worker_set_time(lx_worker_t *w, time_t t) {
    struct tm tm;
    w->now = t;
    lx_http_date(t, w->date);
    w->head200_len =
        (size_t)snprintf(w->head200, sizeof(w->head200),
                         "HTTP/1.1 200 OK\r\nServer: " LX_SERVER "\r\nDate: %s\r\n", w->date);
    gmtime_r(&t, &tm);
    snprintf(w->clf_time, sizeof(w->clf_time), "%02d/%s/%04d:%02d:%02d:%02d +0000", tm.tm_mday,
             months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    snprintf(w->iso_time, sizeof(w->iso_time), "%04d-%02d-%02dT%02d:%02d:%02d+00:00",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    w->clf_time_len = (uint8_t)strlen(w->clf_time);
    w->iso_time_len = (uint8_t)strlen(w->iso_time);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t lx_worker_random(lx_worker_t *w) {
    uint64_t *s = w->rng;
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Each loop its own generator, seeded from the kernel: request ids of two
 * loops, or of two runs, never follow one sequence. */
static void seed_random(lx_worker_t *w) {
    ssize_t n = getrandom(w->rng, sizeof(w->rng), GRND_NONBLOCK);
    if (n != (ssize_t)sizeof(w->rng)) {
        /* No entropy yet (early boot): time, address and index, mixed. */
        uint64_t x = uv_hrtime() ^ (uint64_t)(uintptr_t)w ^ ((uint64_t)w->index << 56);
        for (int i = 0; i < 4; i++) {
            x += 0x9e3779b97f4a7c15ULL; /* splitmix64 */
            uint64_t z = x;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            w->rng[i] = z ^ (z >> 31);
        }
    }
    if ((w->rng[0] | w->rng[1] | w->rng[2] | w->rng[3]) == 0) w->rng[0] = 1;
}

/* Connections are accepted with libuv (uv_listen on each loop's own
 * SO_REUSEPORT socket, uv_accept into the connection's uv_tcp_t). libuv
 * takes every connection waiting in the queue, one callback each. */
static void on_connection(uv_stream_t *st, int status);

static void listen_start(lx_worker_t *w) {
    if (w->listening || w->stop) return;
    w->listening = 1;
    for (size_t i = 0; i < w->nlisteners; i++) {
        lx_listener_t *l = w->listeners[i];
        if (l->pending) {
            /* libuv holds one accepted connection and waits for us to
             * take it before it accepts more. */
            l->pending = 0;
            lx_conn_accept(w, (uv_stream_t *)&l->tcp);
        }
    }
}

/* Leaves connections in the kernel's queue until a slot frees: libuv stops
 * watching a listener whose accepted connection we do not take. */
static void listen_pause(lx_worker_t *w) {
    w->listening = 0;
}

static void on_connection(uv_stream_t *st, int status) {
    lx_listener_t *l = container_of((uv_tcp_t *)st, lx_listener_t, tcp);
    lx_worker_t *w = st->loop->data;
    if (status < 0) {
        lx_log_error("accept: %s", uv_strerror(status));
        return;
    }
    if (!w->listening || w->nconns >= w->max_conns) {
        if (w->listening) LX_ST_INC(&w->stats->accept_paused);
        listen_pause(w);
        l->pending = 1;
        return;
    }
    lx_conn_accept(w, st);
}

static void close_listener(lx_listener_t *l) {
    uv_close((uv_handle_t *)&l->tcp, (uv_close_cb)free);
}

static void close_listeners(lx_worker_t *w) {
    listen_pause(w);
    for (size_t i = 0; i < w->nlisteners; i++)
        close_listener(w->listeners[i]);
    w->nlisteners = 0;
}

static lx_listener_t *new_listener(lx_worker_t *w, int fd) {
    lx_listener_t *l = calloc(1, sizeof(*l));
    if (l == NULL) return NULL;
    uv_tcp_init(&w->loop, &l->tcp);
    if (uv_tcp_open(&l->tcp, fd) < 0 ||
        uv_listen((uv_stream_t *)&l->tcp, w->gen->srv.backlog, on_connection) < 0) {
        /* The handle owns no fd yet if open failed; close it either way. */
        uv_close((uv_handle_t *)&l->tcp, (uv_close_cb)free);
        return NULL;
    }
    l->fd = fd;
    return l;
}

/* Serves what waits in a dropped listener's queue before it is closed:
 * clients that connected while the address was still ours. */
static void accept_rest(lx_worker_t *w, lx_listener_t *l) {
    if (l->pending && w->nconns < w->max_conns) {
        l->pending = 0;
        lx_conn_accept(w, (uv_stream_t *)&l->tcp);
    }
    /* As many as the (new) limit has room for; the rest are reset by the
     * close, as a full loop's would be. */
    while (w->nconns < w->max_conns) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(l->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        lx_conn_open(w, fd, (struct sockaddr *)&ss,
                     (l->proxy_protocol ? LX_CONN_PROXY : 0) | (l->tls ? LX_CONN_TLS : 0) |
                         (l->http2 ? LX_CONN_H2 : 0));
    }
}

static void finish(lx_worker_t *w) {
    lx_access_log_flush(w);
    if (!uv_is_closing((uv_handle_t *)&w->tick)) {
        uv_close((uv_handle_t *)&w->tick, NULL);
        uv_close((uv_handle_t *)&w->lag, NULL);
        lx_dlq_close(&w->dlq);
        /* The main thread may still ask this loop to stop (a second SIGTERM
         * just as the drain ended) or hand it a reload; uv_async_send on a
         * closed handle writes to the loop's closed eventfd and libuv
         * aborts. It checks this flag under the same lock first. */
        uv_mutex_lock(&w->mailbox_lock);
        w->wakeup_closed = 1;
        uv_mutex_unlock(&w->mailbox_lock);
        uv_close((uv_handle_t *)&w->wakeup, NULL);
    }
}

void lx_worker_conn_closed(lx_worker_t *w) {
    if (w->stop) {
        if (w->nconns == 0) finish(w);
        return;
    }
    if (!w->listening && w->nconns < w->max_conns) listen_start(w);
}

static void stop_one(lx_conn_t *c, void *arg) {
    if (*(int *)arg == 2)
        lx_conn_close(c);
    else
        lx_conn_drain(c);
}

static void begin_stop(lx_worker_t *w, int how) {
    if (how <= w->stop) return;
    int first = w->stop == 0;
    w->stop = how;
    if (first) {
        close_listeners(w);
        w->drain_deadline = uv_now(&w->loop) + w->gen->srv.drain_timeout;
    }
    lx_conn_each(w, stop_one, &how);
    if (w->nconns == 0) finish(w);
}

void lx_worker_gen_release(lx_worker_t *w, lx_gen_t *gen) {
    if (gen == w->gen) {
        w->gen_users--;
        return;
    }
    for (size_t i = 0; i < w->nretired; i++) {
        lx_retired_t *rt = &w->retired[i];
        if (rt->gen != gen) continue;
        if (--rt->users == 0) {
            lx_log_debug("worker %d: generation %llu drained", w->index,
                         (unsigned long long)gen->id);
            lx_filecache_drop_gen(w->cache, gen);
            /* The last reference may close the files gen logs to (and
             * free their slots for others): its lines go out first. */
            lx_access_log_flush(w);
            lx_gen_unref(gen);
            *rt = w->retired[--w->nretired];
            lx_st_set(&w->stats->draining, w->nretired);
        }
        return;
    }
}

/* Starts polling fds that are new, closes the ones the new config dropped;
 * an unchanged address keeps its socket and with it its accept queue, so no
 * connection waiting there is lost. */
static void swap_listeners(lx_worker_t *w, const lx_gen_t *gen, const int *fds, size_t nfds) {
    lx_listener_t **nl = calloc(nfds ? nfds : 1, sizeof(*nl));
    lx_listener_t **dropped = calloc(w->nlisteners ? w->nlisteners : 1, sizeof(*dropped));
    if (nl == NULL || dropped == NULL) {
        lx_log_error("worker %d: out of memory swapping listeners", w->index);
        free(nl);
        free(dropped);
        return;
    }
    listen_pause(w);
    size_t ndropped = 0;
    for (size_t i = 0; i < w->nlisteners; i++) {
        size_t j = 0;
        while (j < nfds && fds[j] != w->listeners[i]->fd)
            j++;
        if (j < nfds)
            nl[j] = w->listeners[i];
        else
            dropped[ndropped++] = w->listeners[i];
    }
    size_t n = 0;
    for (size_t j = 0; j < nfds; j++) {
        if (nl[j] == NULL && (nl[j] = new_listener(w, fds[j])) == NULL) {
            lx_log_error("worker %d: cannot listen on a new socket", w->index);
            close(fds[j]);
            continue;
        }
        /* fds[j] is the socket of listen entry j (server.c's slots): a
         * reload may turn proxy_protocol on or off for an address kept. */
        nl[j]->proxy_protocol = j < gen->srv.nlisten && gen->srv.listen[j].proxy_protocol;
        nl[j]->tls = j < gen->srv.nlisten && gen->srv.listen[j].tls;
        nl[j]->http2 = j < gen->srv.nlisten && gen->srv.listen[j].http2;
        nl[n++] = nl[j];
    }
    free(w->listeners);
    w->listeners = nl;
    w->nlisteners = n;
    /* Each SO_REUSEPORT socket has its own accept queue, and closing it
     * resets what the kernel completed there: clients that connected while
     * the address was still ours. Serve them rather than drop them. This
     * comes after the new set is in place, as a connection that ends at
     * once (lx_worker_conn_closed) starts polling whatever set is there. */
    for (size_t i = 0; i < ndropped; i++) {
        accept_rest(w, dropped[i]);
        close_listener(dropped[i]);
    }
    free(dropped);
    /* A full loop stays paused; lx_worker_conn_closed resumes it when a
     * slot frees. */
    if (!w->stop && w->nconns < w->max_conns) listen_start(w);
}

/* Switches the loop to the generation and listeners one reload handed it. */
static void adopt_one(lx_worker_t *w, lx_mailbox_t *m) {
    /* The limit first: swap_listeners accepts what is queued on a dropped
     * socket, and those accepts happen under the new generation, so they
     * must count against its limit, not against the one it replaces. */
    const lx_server_conf_t *s = &m->gen->srv;
    w->max_conns = s->max_connections / (uint32_t)s->workers;
    if (w->max_conns == 0) w->max_conns = 1;
    swap_listeners(w, m->gen, m->fds, m->nfds);
    free(m->fds);
    lx_pool_resize(&w->rbufs, RBUF_SIZE(&m->gen->srv));
    /* Cached files carry the old sites' headers: start afresh. Requests
     * still running under the old generation keep only the loads they wait
     * for, until the generation drains (lx_worker_gen_release). */
    lx_filecache_adopt(w->cache, m->gen);
    if (w->gen_users == 0) lx_filecache_drop_gen(w->cache, w->gen);
    if (w->gen_users > 0) {
        lx_retired_t *rt = realloc(w->retired, (w->nretired + 1) * sizeof(*rt));
        if (rt != NULL) {
            w->retired = rt;
            rt[w->nretired++] = (lx_retired_t){w->gen, w->gen_users, uv_now(&w->loop)};
        } else {
            lx_gen_unref(w->gen); /* cannot track it: requests keep it by luck */
        }
    } else {
        lx_access_log_flush(w); /* as in lx_worker_gen_release */
        lx_gen_unref(w->gen);
    }
    w->gen = m->gen;
    w->gen_users = 0;
    lx_handlers_loop_adopt(w, w->gen);
    lx_st_set(&w->stats->generation, w->gen->id);
    lx_st_set(&w->stats->draining, w->nretired);
    free(m);
}

/* Takes every reload queued since the last wakeup, oldest first. Going
 * through each (rather than jumping to the newest) lets swap_listeners close
 * the sockets of an address that one reload added and a later one removed;
 * a generation nobody used on this loop is dropped at once. */
static void adopt(lx_worker_t *w) {
    uv_mutex_lock(&w->mailbox_lock);
    lx_mailbox_t *m = w->mailbox;
    w->mailbox = NULL;
    w->mailbox_tail = &w->mailbox;
    uv_mutex_unlock(&w->mailbox_lock);
    while (m) {
        lx_mailbox_t *next = m->next;
        adopt_one(w, m);
        m = next;
    }
}

static void on_wakeup(uv_async_t *a) {
    lx_worker_t *w = a->data;
    adopt(w);
    int how = __atomic_load_n(&w->stop_request, __ATOMIC_ACQUIRE);
    if (how) begin_stop(w, how);
}

/* Wakes the loop, unless it has finished (finish): a loop that stopped has
 * nothing left to be told. Called with mailbox_lock held. */
static void wake(lx_worker_t *w) {
    if (!w->wakeup_closed) uv_async_send(&w->wakeup);
}

void lx_worker_publish(lx_worker_t *w, lx_gen_t *gen, int *fds, size_t nfds) {
    lx_mailbox_t *m = malloc(sizeof(*m));
    if (m == NULL) {
        /* That loop keeps the old generation, as when fds could not be
         * allocated (server.c). */
        lx_log_error("worker %d: out of memory handing over a reload", w->index);
        lx_gen_unref(gen);
        free(fds);
        return;
    }
    *m = (lx_mailbox_t){gen, fds, nfds, NULL};
    uv_mutex_lock(&w->mailbox_lock);
    *w->mailbox_tail = m;
    w->mailbox_tail = &m->next;
    wake(w);
    uv_mutex_unlock(&w->mailbox_lock);
}

static void close_if_gen(lx_conn_t *c, void *g) {
    if (lx_conn_gen(c) == g) lx_conn_close(c);
}

/* A generation replaced by a reload may live drain_timeout longer; then
 * the requests still holding it (a client trickling a body, say) are cut. */
static void expire_retired(lx_worker_t *w) {
    uint64_t now = uv_now(&w->loop), limit = w->gen->srv.drain_timeout;
    for (size_t i = 0; i < w->nretired;) {
        lx_retired_t *rt = &w->retired[i];
        if (now - rt->retired < limit) {
            i++;
            continue;
        }
        lx_gen_t *g = rt->gen;
        lx_log_warn("worker %d: generation %llu still has %u request%s after drain_timeout; "
                    "closing them",
                    w->index, (unsigned long long)g->id, rt->users, rt->users == 1 ? "" : "s");
        size_t before = w->nretired;
        lx_conn_each(w, close_if_gen, g); /* the last release drops the entry */
        if (w->nretired == before)
            i++; /* users we could not find (cannot happen): keep the entry */
    }
}

static void on_tick(uv_timer_t *t) {
    lx_worker_t *w = t->data;
    lx_access_log_flush(w);
    lx_sess_pool_trim(w, 0);
    lx_h2_spares_trim(w, 0);
    lx_handlers_loop_tick(w);
    if (w->nretired) expire_retired(w);
    if (w->stop && uv_now(&w->loop) >= w->drain_deadline) {
        lx_log_warn("worker %d: drain timeout, closing %u connections", w->index, w->nconns);
        begin_stop(w, 2);
    }
    if (!w->stop && !w->listening && w->nconns < w->max_conns) listen_start(w); /* after EMFILE */
}

/* The loop's lag: how late a timer due every LX_LAG_MS fires. A turn of
 * the loop that runs long (a slow policy; a read from a cold disk, were
 * one made in the loop) delays it by about that much less up to LX_LAG_MS,
 * so the largest lag is the longest stall to within LX_LAG_MS
 * (bench/cold.sh). A timer, not a clock read per turn: nothing on the
 * request path (libuv's UV_METRICS_IDLE_TIME, which would give each turn's
 * length, costs an epoll_wait more each time the loop goes idle). It wakes
 * an idle loop 100 times a second. */
#define LX_LAG_MS 10

static void on_lag(uv_timer_t *t) {
    lx_worker_t *w = container_of(t, lx_worker_t, lag);
    uint64_t now = uv_hrtime();
    lx_stats_lag(w->stats, now > w->lag_due ? now - w->lag_due : 0);
    w->lag_due = now + LX_LAG_MS * 1000000ull;
}

static void thread_main(void *arg) {
    lx_worker_t *w = arg;
    lx_out_thread_init(w);
    w->lag_due = uv_hrtime() + LX_LAG_MS * 1000000ull;
    uv_update_time(&w->loop); /* the timer counts from now, not from lx_worker_start */
    uv_timer_start(&w->lag, on_lag, LX_LAG_MS, LX_LAG_MS);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    lx_filecache_free(w->cache);
    w->cache = NULL;
    uv_run(&w->loop, UV_RUN_NOWAIT);
    lx_worker_free_conns(w);
    if (uv_loop_close(&w->loop) != 0)
        lx_log_warn("worker %d: loop closed with handles open", w->index);
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    if (w->exited) uv_async_send(w->exited);
}

int lx_worker_init_conns(lx_worker_t *w) {
    w->loop.data = w;
    if (w->stats == NULL && (w->stats = lx_stats_loop(w->index)) == NULL) return -ENOMEM;
    lx_st_set(&w->stats->generation, w->gen->id);
    seed_random(w);
    lx_dlq_init(&w->dlq, &w->loop, lx_conn_on_deadline);
    lx_pool_init(&w->rbufs, RBUF_SIZE(&w->gen->srv), 256);
    lx_pool_init(&w->obufs, LX_OUT_BUF, 64);
    if (w->copybuf == NULL && (w->copybuf = malloc(LX_OUT_BUF)) == NULL) return -ENOMEM;
    lx_sess_pool_init(w);
    lx_spares_init(&w->h2_spares, LX_H2_STREAMS_KEEP);
    return lx_handlers_loop_init(w);
}

void lx_worker_free_conns(lx_worker_t *w) {
    lx_handlers_loop_free(w);
    lx_sess_pool_trim(w, 1);
    lx_h2_spares_trim(w, 1);
    lx_pool_free(&w->rbufs);
    lx_pool_free(&w->obufs);
    free(w->copybuf);
    w->copybuf = NULL;
    lx_stats_loop_release(w->stats);
    w->stats = NULL;
}

int lx_worker_start(lx_worker_t *w, int index, lx_gen_t *gen, const int *fds, size_t nfds) {
    const lx_server_conf_t *s = &gen->srv;
    int r = uv_loop_init(&w->loop);
    if (r < 0) return r;
    w->index = index;
    w->gen = gen;
    lx_gen_ref(gen);
    w->max_conns = s->max_connections / (uint32_t)s->workers;
    if (w->max_conns == 0) w->max_conns = 1;
    w->alog_cap = s->access_log_buffer;
    w->cache = lx_filecache_new(&w->loop);
    w->match_data = pcre2_match_data_create(10, NULL); /* $0..$9 */
    if (w->match_data == NULL) return -ENOMEM;
    w->rule_scratch = (lx_multire_scratch_t){.loop = (uint32_t)index};
    w->listeners = calloc(nfds ? nfds : 1, sizeof(*w->listeners));
    if (w->cache == NULL || w->listeners == NULL) return -ENOMEM;
    if ((r = lx_worker_init_conns(w)) < 0) return r;
    for (size_t i = 0; i < nfds; i++) {
        if ((w->listeners[i] = new_listener(w, fds[i])) == NULL) return -ENOMEM;
        w->listeners[i]->proxy_protocol = i < s->nlisten && s->listen[i].proxy_protocol;
        w->listeners[i]->tls = i < s->nlisten && s->listen[i].tls;
        w->listeners[i]->http2 = i < s->nlisten && s->listen[i].http2;
        w->nlisteners++;
    }
    uv_mutex_init(&w->mailbox_lock);
    w->mailbox = NULL;
    w->mailbox_tail = &w->mailbox;
    uv_async_init(&w->loop, &w->wakeup, on_wakeup);
    w->wakeup.data = w;
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    uv_timer_start(&w->tick, on_tick, 1000, 1000);
    uv_timer_init(&w->loop, &w->lag);
    uv_unref((uv_handle_t *)&w->lag);
    lx_worker_set_time(w, time(NULL));
    listen_start(w);
    return uv_thread_create(&w->thread, thread_main, w);
}

void lx_worker_stop(lx_worker_t *w, int how) {
    int cur = __atomic_load_n(&w->stop_request, __ATOMIC_ACQUIRE);
    if (how > cur) __atomic_store_n(&w->stop_request, how, __ATOMIC_RELEASE);
    uv_mutex_lock(&w->mailbox_lock);
    wake(w);
    uv_mutex_unlock(&w->mailbox_lock);
}

void lx_worker_join(lx_worker_t *w) {
    uv_thread_join(&w->thread);
    free(w->listeners);
    for (size_t i = 0; i < w->nalogs; i++)
        free(w->alogs[i].buf);
    free(w->alogs);
    pcre2_match_data_free(w->match_data);
    lx_multire_scratch_free(&w->rule_scratch);
    for (size_t i = 0; i < w->nretired; i++)
        lx_gen_unref(w->retired[i].gen);
    free(w->retired);
    for (lx_mailbox_t *m = w->mailbox, *next; m; m = next) {
        next = m->next;
        lx_gen_unref(m->gen);
        free(m->fds);
        free(m);
    }
    uv_mutex_destroy(&w->mailbox_lock);
    lx_gen_unref(w->gen);
}
