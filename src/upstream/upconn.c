/* Upstream connections and the per-loop pools of idle ones (upconn.h). */
#include "upconn.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "../log.h"
#include "../lx.h"
#include "../net/tls.h"
#include "../stats.h"

/* lx_upconn_is() tells an upstream socket by its data pointing at itself. */
_Static_assert(offsetof(lx_upconn_t, h) == 0, "the socket is the first member of lx_upconn_t");

struct lx_uppool_s {
    struct sockaddr_storage addr; /**< the server's address: the pool's key */
    socklen_t addrlen;
    uint64_t id;    /**< and what else its connections share (lx_upstream_server_t pool_id) */
    void *tls_sess; /**< the TLS session a new connection offers to resume, or NULL */
    lx_uploop_t *ul;
    lx_upconn_t *idle;      /**< most recently used first */
    lx_upconn_t *idle_tail; /**< least recently used */
    uint32_t nidle;
    uint32_t nconns;    /**< its connections not closed yet, idle or lent */
    unsigned named;     /**< an upstream of the loop's generation names it (else it goes once
                           nconns is 0: lx_uploop_retune) */
    uint32_t keepalive; /**< idle ones kept longer than SURPLUS_MS, as the last put said: the most
                           of the upstreams naming the address (config/load_upstream.c) */
    uint32_t stat_slot; /**< the address's counters (stats.h, LX_ST_PEER) */
    lx_uppool_t *next;
};

struct lx_uploop_s {
    uv_loop_t *loop;
    lx_stats_t *stats; /**< the loop's counters */
    lx_uppool_t *pools;
    lx_sendbatch_t *batch; /**< the loop's batched sends; NULL: each goes at once */
    /* The one read buffer of all the loop's upstream connections: a read's
     * bytes are used up within its callback (the head copied, body bytes
     * copied into the client's output), so none needs its own, and a
     * thousand slow downloads do not hold a thousand of them. */
    char rbuf[65536];
};

lx_uploop_t *lx_uploop_new(uv_loop_t *loop) {
    lx_uploop_t *ul = calloc(1, sizeof(*ul));
    if (ul) {
        ul->loop = loop;
        ul->stats = lx_stats_of(loop);
        char why[128];
        ul->batch = lx_sendbatch_new(loop, why, sizeof(why));
        if (ul->batch == NULL)
            lx_log_info("upstream sends: one write(2) each, not batched through io_uring (%s)",
                        why);
    }
    return ul;
}

static void idle_unlink(lx_upconn_t *uc) {
    lx_uppool_t *p = uc->pool;
    if (uc->prev)
        uc->prev->next = uc->next;
    else
        p->idle = uc->next;
    if (uc->next)
        uc->next->prev = uc->prev;
    else
        p->idle_tail = uc->prev;
    uc->next = uc->prev = NULL;
    p->nidle--;
    lx_st_peer_t *ps = lx_st_peer(p->ul->stats, p->stat_slot);
    if (ps) LX_ST_DEC(&ps->idle);
}

/* A pool no upstream names and no connection uses any more goes: reloads
 * that move upstreams (new ports, new TLS settings) would otherwise add
 * pools for ever, and lx_uppool_of looks through them all. One that still
 * lends a connection goes at a later reload. */
static void pool_drop(lx_uploop_t *ul, lx_uppool_t **link) {
    lx_uppool_t *p = *link;
    *link = p->next;
    if (p->tls_sess) lx_tls_session_free(p->tls_sess);
    free(p);
    if (ul->stats) LX_ST_DEC(&ul->stats->up_pools);
}

void lx_uploop_free(lx_uploop_t *ul) {
    if (ul == NULL) return;
    for (lx_uppool_t *p = ul->pools; p; p = p->next)
        while (p->idle)
            lx_upconn_close(p->idle);
    lx_sendbatch_free(ul->batch);
    /* The close callbacks run on the loop; it has stopped serving, so one
     * turn of it frees the connections before the pools go. */
    uv_run(ul->loop, UV_RUN_NOWAIT);
    while (ul->pools)
        pool_drop(ul, &ul->pools);
    free(ul);
}

lx_uppool_t *lx_uppool_of(lx_uploop_t *ul, const lx_upstream_server_t *s) {
    /* A TLS server and a plain one on one address (or two names checked
     * for one address) have pools of their own: a connection lent must
     * speak what its request expects. */
    for (lx_uppool_t *p = ul->pools; p; p = p->next)
        if (p->addrlen == s->addrlen && p->id == s->pool_id &&
            memcmp(&p->addr, &s->addr, s->addrlen) == 0)
            return p;
    lx_uppool_t *p = calloc(1, sizeof(*p));
    if (p == NULL) return NULL;
    memcpy(&p->addr, &s->addr, s->addrlen);
    p->addrlen = s->addrlen;
    p->id = s->pool_id;
    p->stat_slot = s->stat_slot;
    p->named = 1;
    p->ul = ul;
    if (ul->stats) LX_ST_INC(&ul->stats->up_pools);
    p->next = ul->pools;
    ul->pools = p;
    return p;
}

/* ---- lifetime ------------------------------------------------------- */

static void trim(lx_uppool_t *p);

void lx_uploop_retune(lx_uploop_t *ul, const lx_upstream_t *ups, size_t n) {
    lx_uppool_t **link = &ul->pools;
    while (*link) {
        lx_uppool_t *p = *link;
        uint32_t keep = 0; /* an address no upstream names any more: none */
        p->named = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < ups[i].nservers; k++) {
                const lx_upstream_server_t *s = &ups[i].servers[k];
                if (s->addrlen == p->addrlen && s->pool_id == p->id &&
                    memcmp(&s->addr, &p->addr, p->addrlen) == 0) {
                    p->named = 1;
                    if (s->pool_keepalive > keep) keep = s->pool_keepalive;
                }
            }
        p->keepalive = keep;
        if (!p->named) /* its idle ones close now, whatever their idle time */
            while (p->idle)
                lx_upconn_close(p->idle);
        trim(p);
        if (!p->named && p->nconns == 0)
            pool_drop(ul, link);
        else
            link = &p->next;
    }
}

static void on_handle_closed(uv_handle_t *h) {
    lx_upconn_t *uc = h->data;
    if (--uc->handles) return;
    free(uc->wcopy);
    free(uc);
}

void lx_upconn_close(lx_upconn_t *uc) {
    if (uc->state == LX_UC_CLOSING) return;
    if (uc->state == LX_UC_IDLE) idle_unlink(uc);
    uc->pool->nconns--;
    uc->state = LX_UC_CLOSING;
    uc->ops = NULL;
    uc->data = NULL;
    lx_sendbatch_cancel(&uc->send);
    if (uc->tls)
        lx_tls_close(&uc->h.tp, on_handle_closed);
    else
        uv_close(&uc->h.handle, on_handle_closed);
    uv_close((uv_handle_t *)&uc->timer, on_handle_closed);
}

static void on_timer(uv_timer_t *t);

/* Deadlines move on with every read and write, and a connection goes from
 * a request to its pool and back: the timer is not moved each time (a
 * heap update, four per request), only when it would fire after the new
 * due time. When it fires it looks at uc->due and starts again for what is
 * left. */
static void arm(lx_upconn_t *uc, uint64_t due) {
    if (uv_is_active((uv_handle_t *)&uc->timer) && uc->fires <= due) return;
    uint64_t now = uv_now(uc->timer.loop);
    uint64_t in = due > now ? due - now : 0;
    uv_timer_start(&uc->timer, on_timer, in, 0);
    uc->fires = now + in;
}

/* How long an idle connection beyond keepalive stays. Closed at once, as
 * nginx does, a load of more concurrent requests than keepalive made
 * half the requests connect anew: a burst of answers gave back more
 * connections than were kept, and the next burst of requests connected
 * again (bench/proxy.sh: 520 connects per 1,000 requests at keepalive 32
 * and 100 clients). Kept for a second, they carry the next burst; when the
 * load ends, they go. Which ones go is decided by use, not by when they
 * came back: the pool lends its most recently used first, so the least
 * recently used are the ones beyond keepalive. */
#define SURPLUS_MS 1000

/* Closes the least recently used idle connections beyond keepalive that
 * have been idle SURPLUS_MS, and cuts the next one's idle time to that. */
static void trim(lx_uppool_t *p) {
    uint64_t now = uv_now(p->ul->loop);
    while (p->nidle > p->keepalive) {
        lx_upconn_t *t = p->idle_tail;
        uint64_t cut = t->idle_since + SURPLUS_MS;
        if (cut <= now) {
            lx_upconn_close(t);
            continue;
        }
        if (t->due > cut) {
            t->due = cut;
            arm(t, cut);
        }
        return;
    }
}

static void on_timer(uv_timer_t *t) {
    lx_upconn_t *uc = container_of(t, lx_upconn_t, timer);
    if (uc->due == 0) return; /* the deadline was lifted */
    uint64_t now = uv_now(t->loop);
    if (now < uc->due) {
        arm(uc, uc->due); /* it moved on meanwhile */
        return;
    }
    if (uc->state == LX_UC_IDLE) {
        lx_uppool_t *p = uc->pool;
        if (now < uc->idle_due && p->nidle <= p->keepalive) {
            /* Cut as one beyond keepalive, but others went since. */
            uc->due = uc->idle_due;
            arm(uc, uc->due);
            return;
        }
        lx_upconn_close(uc); /* idle longer than keepalive_timeout, or beyond keepalive */
        trim(p);
        return;
    }
    uc->due = 0;
    if (uc->ops && uc->ops->timeout) uc->ops->timeout(uc);
}

void lx_upconn_deadline(lx_upconn_t *uc, uint32_t ms) {
    if (ms == 0) {
        uc->due = 0;
        return;
    }
    uc->due = uv_now(uc->timer.loop) + ms;
    arm(uc, uc->due);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    lx_upconn_t *uc = h->data;
    (void)hint;
    *buf = uv_buf_init(uc->pool->ul->rbuf, sizeof(uc->pool->ul->rbuf));
}

static void handshake_failed(lx_upconn_t *uc, int err);

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    lx_upconn_t *uc = st->data;
    if (nread == 0) return;              /* EAGAIN */
    if (uc->state == LX_UC_CONNECTING) { /* a TLS handshake: it failed */
        handshake_failed(uc, nread < 0 ? (int)nread : UV_EPROTO);
        return;
    }
    if (uc->state == LX_UC_IDLE) {
        /* A close, or bytes nobody asked for: either way the connection
         * cannot carry another request. (The backend closes its longest
         * idle first, the one trim cut: the next is cut now, t/187.) */
        lx_uppool_t *p = uc->pool;
        lx_upconn_close(uc);
        trim(p);
        return;
    }
    if (uc->ops) uc->ops->read(uc, nread, buf->base);
}

int lx_upconn_read(lx_upconn_t *uc, int on) {
    if (on == uc->reading) return 0;
    uc->reading = on != 0;
    if (uc->tls) {
        if (on) return lx_tls_read_start(&uc->h.tp, on_alloc, on_read);
        lx_tls_read_stop(&uc->h.tp);
        return 0;
    }
    if (!on) return uv_read_stop(&uc->h.stream);
    return uv_read_start(&uc->h.stream, on_alloc, on_read);
}

/* ---- lending -------------------------------------------------------- */

static void lend(lx_upconn_t *uc, const lx_upconn_ops_t *ops, void *data) {
    uc->ops = ops;
    uc->data = data;
    uc->state = LX_UC_ACTIVE;
    uv_ref(&uc->h.handle);
    uv_ref((uv_handle_t *)&uc->timer);
}

/* Whether an idle connection has bytes or a close waiting that its read
 * callback has not been told of: what came since the loop last polled (the
 * answer just given back, then a body after a 204, a 304 or a HEAD's
 * answer, in a packet of its own). Lent, those bytes were read as the next
 * request's answer, another client's, and the pool one answer out of step
 * from then on. One recv(2) that finds nothing, a reused connection. */
static int stale(lx_upconn_t *uc) {
    uv_os_fd_t fd;
    char c;
    if (uv_fileno(&uc->h.handle, &fd) < 0) return 1;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

lx_upconn_t *lx_upconn_take(lx_uppool_t *p, const lx_upconn_ops_t *ops, void *data) {
    lx_upconn_t *uc;
    while ((uc = p->idle) != NULL && stale(uc))
        lx_upconn_close(uc);
    if (uc == NULL) return NULL;
    idle_unlink(uc);
    uc->due = 0; /* the timer may stay armed: it finds no deadline */
    lend(uc, ops, data);
    return uc;
}

void lx_upconn_put(lx_upconn_t *uc, uint32_t keepalive, uint32_t idle_ms) {
    lx_uppool_t *p = uc->pool;
    /* Every put says the pool's limit (a reload may have lowered it, to 0
     * even): the idle ones beyond it go as well as this one (t/189). */
    p->keepalive = keepalive;
    /* A pool no upstream names any more (a reload while it was lent) keeps
     * nothing: no request can borrow from it. */
    if (uc->state != LX_UC_ACTIVE || uc->writing || keepalive == 0 || !p->named) {
        lx_upconn_close(uc);
        trim(p);
        return;
    }
    uc->nreq++;
    uc->ops = NULL;
    uc->data = NULL;
    uc->state = LX_UC_IDLE;
    uc->next = p->idle;
    uc->prev = NULL;
    if (p->idle)
        p->idle->prev = uc;
    else
        p->idle_tail = uc;
    p->idle = uc;
    p->nidle++;
    lx_st_peer_t *ps = lx_st_peer(p->ul->stats, p->stat_slot);
    if (ps) LX_ST_INC(&ps->idle);
    /* Read on while idle: the backend's close is seen when it happens. */
    if (lx_upconn_read(uc, 1) < 0) {
        lx_upconn_close(uc);
        return;
    }
    uc->idle_since = uv_now(uc->timer.loop);
    uc->due = uc->idle_due = uc->idle_since + (idle_ms ? idle_ms : 1);
    arm(uc, uc->due);
    uv_unref(&uc->h.handle);
    uv_unref((uv_handle_t *)&uc->timer);
    trim(p);
}

/* ---- connecting ----------------------------------------------------- */

/* The TLS handshake is done: the connection is the borrower's. */
static void on_tls_ready(lx_tp_t *tp) {
    lx_upconn_t *uc = container_of(tp, lx_upconn_t, h.tp);
    uc->handshaking = 0;
    uv_timer_stop(&uc->timer);
    uc->state = LX_UC_ACTIVE;
    uc->ops->connected(uc, 0);
}

/* The server handed out a session: the next connection of the pool offers
 * it, so that it need not do a full handshake. */
static void on_tls_session(lx_tp_t *tp, void *session) {
    lx_uppool_t *p = container_of(tp, lx_upconn_t, h.tp)->pool;
    if (p->tls_sess) lx_tls_session_free(p->tls_sess);
    p->tls_sess = session;
}

static void handshake_failed(lx_upconn_t *uc, int err) {
    uv_timer_stop(&uc->timer);
    lx_tls_why(&uc->h.tp, uc->why, sizeof(uc->why));
    /* A session the server would not resume is not offered again. */
    if (uc->pool->tls_sess) {
        lx_tls_session_free(uc->pool->tls_sess);
        uc->pool->tls_sess = NULL;
    }
    uc->ops->connected(uc, err == UV_EOF ? UV_EPROTO : err);
}

const char *lx_upconn_why(const lx_upconn_t *uc) {
    return uc->why[0] ? uc->why : NULL;
}

static void on_connect(uv_connect_t *req, int status) {
    lx_upconn_t *uc = req->data;
    if (uc->state == LX_UC_CLOSING) return;
    if (status == 0 && uc->h.handle.type == UV_TCP) uv_tcp_nodelay(&uc->h.tcp, 1);
    if (status == 0 && uc->tls) {
        /* The connect timeout runs on over the handshake. */
        uc->handshaking = 1;
        status = lx_tls_handshake(&uc->h.tp);
        if (status == 0) status = lx_upconn_read(uc, 1);
        if (status == 0) return; /* on_tls_ready, or a read error */
        lx_tls_why(&uc->h.tp, uc->why, sizeof(uc->why));
    }
    uv_timer_stop(&uc->timer);
    if (status == 0) uc->state = LX_UC_ACTIVE;
    uc->ops->connected(uc, status);
}

static void on_connect_timeout(uv_timer_t *t) {
    lx_upconn_t *uc = container_of(t, lx_upconn_t, timer);
    if (uc->tls && uc->handshaking)
        snprintf(uc->why, sizeof(uc->why),
                 "TLS handshake: not done within connect_timeout (the TCP connect was)");
    const lx_upconn_ops_t *ops = uc->ops;
    void *data = uc->data;
    /* The connect callback comes with UV_ECANCELED after the close and is
     * ignored then; the borrower hears of the timeout here, with its data
     * still on the (closing) connection for this one call. */
    lx_upconn_close(uc);
    uc->data = data;
    ops->connected(uc, UV_ETIMEDOUT);
    uc->data = NULL;
}

static void on_sent(lx_send_t *q, const char *data, size_t len, size_t sent, int res);

int lx_upconn_connect(lx_uppool_t *p, const lx_upstream_server_t *s, const lx_upconn_ops_t *ops,
                      void *data, uint32_t timeout_ms, lx_upconn_t **out) {
    uv_loop_t *loop = p->ul->loop;
    lx_upconn_t *uc = calloc(1, sizeof(*uc));
    if (uc == NULL) return -ENOMEM;
    uc->pool = p;
    uc->ops = ops;
    uc->data = data;
    uc->state = LX_UC_CONNECTING;
    lx_st_peer_t *ps = lx_st_peer(p->ul->stats, p->stat_slot);
    if (ps) LX_ST_INC(&ps->connects);
    int r;
    if (p->addr.ss_family == AF_UNIX)
        r = uv_pipe_init(loop, &uc->h.pipe, 0);
    else
        r = uv_tcp_init(loop, &uc->h.tcp);
    if (r < 0) {
        free(uc);
        return r;
    }
    uv_timer_init(loop, &uc->timer);
    uc->send.done = on_sent;
    uc->h.handle.data = uc;
    uc->timer.data = uc;
    uc->creq.data = uc;
    uc->handles = 2;
    p->nconns++; /* from here on, lx_upconn_close counts it out */
    if (s->tls) {
        /* Made now, while the generation that holds the context is the
         * request's; the session keeps its own reference to it. */
        uc->h.tp.tls = NULL;
        uc->tls = 1;
        r = lx_tls_client(&uc->h.tp, s->tls->ctx, s->tls_name, s->tls_name_ip, p->tls_sess,
                          on_tls_ready, on_tls_session);
        if (r < 0) {
            uc->ops = NULL;
            if (uc->h.tp.tls == NULL) uc->tls = 0;
            lx_upconn_close(uc);
            return r;
        }
    }
    if (p->addr.ss_family == AF_UNIX) {
        const struct sockaddr_un *sun = (const struct sockaddr_un *)&p->addr;
        uv_pipe_connect(&uc->creq, &uc->h.pipe, sun->sun_path, on_connect);
        r = 0;
    } else {
        r = uv_tcp_connect(&uc->creq, &uc->h.tcp, (const struct sockaddr *)&p->addr, on_connect);
    }
    if (r < 0) {
        uc->ops = NULL;
        lx_upconn_close(uc);
        return r;
    }
    if (timeout_ms) uv_timer_start(&uc->timer, on_connect_timeout, timeout_ms, 0);
    *out = uc;
    return 0;
}

/* ---- writing -------------------------------------------------------- */

static void written(lx_upconn_t *uc, int status) {
    uc->writing = 0;
    if (uc->state == LX_UC_CLOSING) return;
    if (uc->ops && uc->ops->written) uc->ops->written(uc, status);
}

static void on_write(uv_write_t *req, int status) {
    lx_upconn_t *uc = container_of(req, lx_upconn_t, wreq);
    free(uc->wcopy);
    uc->wcopy = NULL;
    written(uc, status);
}

/* What a write left (skip bytes of bufs went) goes by uv_write, copied:
 * the caller's pieces are valid during the call only (a request body
 * piece lives in the client's read buffer). 0 or a negative errno. */
static int write_rest(lx_upconn_t *uc, const uv_buf_t *bufs, unsigned nbufs, size_t left,
                      size_t skip) {
    char *copy = malloc(left);
    if (copy == NULL) return -ENOMEM;
    size_t at = 0;
    for (unsigned i = 0; i < nbufs; i++) {
        size_t len = bufs[i].len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        memcpy(copy + at, bufs[i].base + skip, len - skip);
        at += len - skip;
        skip = 0;
    }
    uv_buf_t b = uv_buf_init(copy, (unsigned)left);
    int r = uv_write(&uc->wreq, &uc->h.stream, &b, 1, on_write);
    if (r < 0) {
        free(copy);
        return r;
    }
    uc->wcopy = copy;
    return 0;
}

/* The batch went out (sendbatch.h): what the socket did not take waits
 * for room, as any write's rest. */
static void on_sent(lx_send_t *q, const char *data, size_t len, size_t sent, int res) {
    lx_upconn_t *uc = container_of(q, lx_upconn_t, send);
    if (res == 0 && sent < len) {
        uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
        res = write_rest(uc, &b, 1, len - sent, sent);
        if (res == 0) return; /* on_write goes on */
    }
    written(uc, res);
}

/* Over TLS: the transport takes the bytes whole (into records) or not at
 * all while its records wait for the socket; then they go with a write of
 * its own, which owns its buffer. */
static int write_tls(lx_upconn_t *uc, const uv_buf_t *bufs, unsigned nbufs) {
    ssize_t n = lx_tls_try_write(&uc->h.tp, bufs, nbufs);
    if (n < 0) return (int)n;
    if (n > 0 || nbufs == 0) return 1;
    int r = lx_tls_write(&uc->h.tp, &uc->wreq, bufs, nbufs, on_write);
    if (r == 0) uc->writing = 1;
    return r;
}

static int write_bufs(lx_upconn_t *uc, const uv_buf_t *bufs, unsigned nbufs, int batch) {
    if (uc->writing) return -EBUSY;
    if (uc->tls) return write_tls(uc, bufs, nbufs);
    size_t total = 0;
    for (unsigned i = 0; i < nbufs; i++)
        total += bufs[i].len;
    lx_sendbatch_t *sb = batch ? uc->pool->ul->batch : NULL;
    uv_os_fd_t fd;
    if (sb && uv_fileno(&uc->h.handle, &fd) == 0 &&
        lx_sendbatch_add(sb, &uc->send, fd, bufs, nbufs, total) == 0) {
        uc->writing = 1;
        return 0;
    }
    int n = uv_try_write(&uc->h.stream, bufs, nbufs);
    if (n == UV_EAGAIN) n = 0;
    if (n < 0) return n;
    if ((size_t)n == total) return 1;
    int r = write_rest(uc, bufs, nbufs, total - (size_t)n, (size_t)n);
    if (r == 0) uc->writing = 1;
    return r;
}

int lx_upconn_write(lx_upconn_t *uc, const uv_buf_t *bufs, unsigned nbufs) {
    return write_bufs(uc, bufs, nbufs, 0);
}

int lx_upconn_write_head(lx_upconn_t *uc, const uv_buf_t *bufs, unsigned nbufs) {
    return write_bufs(uc, bufs, nbufs, 1);
}
