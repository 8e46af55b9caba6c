/* Worker loops: each thread runs one libuv loop with its own SO_REUSEPORT
 * listeners, its own file cache and its own access log buffer, so loops share
 * nothing on the request path. */
#include "worker.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "dispatch/rules.h"
#include "io/filecache.h"
#include "log.h"

/* Connections taken per readiness event before other work gets a turn. */
#define ACCEPT_BATCH 64

static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void lx_worker_set_time(lx_worker_t *w, time_t t) {
    struct tm tm;
    w->now = t;
    lx_http_date(t, w->date);
    gmtime_r(&t, &tm);
    snprintf(w->clf_time, sizeof(w->clf_time), "%02d/%s/%04d:%02d:%02d:%02d +0000", tm.tm_mday,
             months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void on_accept(uv_poll_t *p, int status, int events);

static void listen_start(lx_worker_t *w) {
    if (w->listening || w->stop)
        return;
    for (size_t i = 0; i < w->nlisteners; i++)
        uv_poll_start(&w->listeners[i].poll, UV_READABLE, on_accept);
    w->listening = 1;
}

static void listen_pause(lx_worker_t *w) {
    if (!w->listening)
        return;
    for (size_t i = 0; i < w->nlisteners; i++)
        uv_poll_stop(&w->listeners[i].poll);
    w->listening = 0;
}

static void on_accept(uv_poll_t *p, int status, int events) {
    lx_listener_t *l = container_of(p, lx_listener_t, poll);
    lx_worker_t *w = p->data;
    (void)events;
    if (status < 0)
        return;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        if (w->nconns >= w->max_conns) {
            /* Leave the rest in the kernel's queue until a slot frees. */
            listen_pause(w);
            return;
        }
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(l->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                lx_log_error("accept: %s; pausing accepts for a second", strerror(errno));
                listen_pause(w);
            }
            return;
        }
        lx_conn_accept(w, fd, (struct sockaddr *)&ss);
    }
}

static void close_listeners(lx_worker_t *w) {
    listen_pause(w);
    for (size_t i = 0; i < w->nlisteners; i++) {
        if (w->listeners[i].fd >= 0) {
            uv_close((uv_handle_t *)&w->listeners[i].poll, NULL);
            close(w->listeners[i].fd);
            w->listeners[i].fd = -1;
        }
    }
}

static void finish(lx_worker_t *w) {
    if (w->alog_fd >= 0 && w->alog_len)
        lx_access_log_flush(w);
    if (!uv_is_closing((uv_handle_t *)&w->tick)) {
        uv_close((uv_handle_t *)&w->tick, NULL);
        uv_close((uv_handle_t *)&w->wakeup, NULL);
    }
}

void lx_worker_conn_closed(lx_worker_t *w) {
    if (w->stop) {
        if (w->nconns == 0)
            finish(w);
        return;
    }
    if (!w->listening && w->nconns < w->max_conns)
        listen_start(w);
}

static void begin_stop(lx_worker_t *w, int how) {
    if (how <= w->stop)
        return;
    int first = w->stop == 0;
    w->stop = how;
    if (first) {
        close_listeners(w);
        w->drain_deadline = uv_now(&w->loop) + w->gen->srv.drain_timeout;
    }
    for (lx_conn_t *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (how == 2)
            lx_conn_close(c);
        else
            lx_conn_drain(c);
    }
    if (w->nconns == 0)
        finish(w);
}

static void on_wakeup(uv_async_t *a) {
    lx_worker_t *w = a->data;
    int how = __atomic_load_n(&w->stop_request, __ATOMIC_ACQUIRE);
    if (how)
        begin_stop(w, how);
}

static void on_tick(uv_timer_t *t) {
    lx_worker_t *w = t->data;
    if (w->alog_fd >= 0 && w->alog_len)
        lx_access_log_flush(w);
    if (w->stop && uv_now(&w->loop) >= w->drain_deadline) {
        lx_log_warn("worker %d: drain timeout, closing %u connections", w->index, w->nconns);
        begin_stop(w, 2);
    }
    if (!w->stop && !w->listening && w->nconns < w->max_conns)
        listen_start(w); /* after EMFILE */
}

static void thread_main(void *arg) {
    lx_worker_t *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    lx_filecache_free(w->cache);
    w->cache = NULL;
    uv_run(&w->loop, UV_RUN_NOWAIT);
    if (uv_loop_close(&w->loop) != 0)
        lx_log_warn("worker %d: loop closed with handles open", w->index);
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    if (w->exited)
        uv_async_send(w->exited);
}

int lx_worker_start(lx_worker_t *w, int index, lx_gen_t *gen, const int *fds, size_t nfds,
                    int alog_fd) {
    const lx_server_conf_t *s = &gen->srv;
    int r = uv_loop_init(&w->loop);
    if (r < 0)
        return r;
    w->index = index;
    w->gen = gen;
    lx_gen_ref(gen);
    w->max_conns = s->max_connections / (uint32_t)s->workers;
    if (w->max_conns == 0)
        w->max_conns = 1;
    w->alog_fd = alog_fd;
    if (alog_fd >= 0 && (w->alog = malloc(s->access_log_buffer)) == NULL)
        return -ENOMEM;
    w->cache = lx_filecache_new(&w->loop, gen->mime);
    w->match_data = pcre2_match_data_create(10, NULL); /* $0..$9 */
    if (w->match_data == NULL)
        return -ENOMEM;
    w->listeners = calloc(nfds ? nfds : 1, sizeof(*w->listeners));
    if (w->cache == NULL || w->listeners == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < nfds; i++) {
        w->listeners[i].fd = fds[i];
        if ((r = uv_poll_init(&w->loop, &w->listeners[i].poll, fds[i])) < 0)
            return r;
        w->listeners[i].poll.data = w;
        w->nlisteners++;
    }
    uv_async_init(&w->loop, &w->wakeup, on_wakeup);
    w->wakeup.data = w;
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    uv_timer_start(&w->tick, on_tick, 1000, 1000);
    lx_worker_set_time(w, time(NULL));
    listen_start(w);
    return uv_thread_create(&w->thread, thread_main, w);
}

void lx_worker_stop(lx_worker_t *w, int how) {
    int cur = __atomic_load_n(&w->stop_request, __ATOMIC_ACQUIRE);
    if (how > cur)
        __atomic_store_n(&w->stop_request, how, __ATOMIC_RELEASE);
    uv_async_send(&w->wakeup);
}

void lx_worker_join(lx_worker_t *w) {
    uv_thread_join(&w->thread);
    free(w->listeners);
    free(w->alog);
    pcre2_match_data_free(w->match_data);
    lx_gen_unref(w->gen);
}
