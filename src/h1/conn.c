/* The connection state machine (conn.h has the states): reads on the libuv
 * stream into a pooled buffer, runs llhttp over them (the callbacks are in
 * h1.c), dispatches a request as soon as its head is complete, and ends it
 * once its response is out and its body read. The output queue and writer
 * are in out.c, the request body's flow in body.c. */
#include "h1/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h1/h1.h"
#include "net/tls.h"
#include "net/tlsctx.h"
#include "io/accesslog.h"
#include "io/filecache.h"
#include "log.h"
#include "stats.h"
#include "upstream/upconn.h"

/* How long a half-closed connection may keep sending before we close it. */
#define LINGER_MS 2000
/* Sessions a loop keeps for reuse at most (spares.h: fewer once the load
 * drops, none under ASan); more are freed. */
#define SESS_KEEP LX_SPARES_KEEP(1024)

/* Bytes the read buffer has beyond max_header_bytes: room for the blank line
 * that ends the header, the start of a body, and pipelined requests. */
#define RBUF_SLACK 4096
/* Where a header of max_header_bytes ends: the limit counts to the end of
 * the last field (on_headers_complete), then CRLF CRLF. A request needs that
 * much room behind its first byte, and one byte more to read a body into. */
#define HEADER_END(max)  ((max) + 4)
#define HEADER_ROOM(max) (HEADER_END(max) + 1)

static void conn_parse(lx_conn_t *c);
static void conn_flush(lx_sess_t *s);
static void request_end(lx_sess_t *s);
static inline void want_read(lx_conn_t *c, int on);

static lx_worker_t *worker_of(lx_conn_t *c) {
    return c->link.tp.tcp.loop->data;
}

static lx_sess_t *sess(lx_conn_t *c) {
    return c->link.tp.tcp.data;
}

/* Every change of state goes through here: the loop's gauges of
 * connections by state (stats.h) follow it, two plain increments. */
static inline void set_state(lx_conn_t *c, lx_conn_state_t st) {
    lx_stats_t *t = worker_of(c)->stats;
    LX_ST_DEC(&t->conns[c->state]);
    LX_ST_INC(&t->conns[st]);
    c->state = (uint8_t)st;
}

/* ---- deadlines ------------------------------------------------------ */

static void set_deadline(lx_conn_t *c, lx_dl_kind_t kind, uint32_t ms) {
    lx_worker_t *w = worker_of(c);
    c->dl_kind = (uint8_t)kind;
    if (kind == LX_DL_NONE || ms == 0) {
        lx_dl_clear(&c->dl); /* e.g. keepalive_timeout = 0 */
        return;
    }
    lx_dl_set(&w->dlq, &c->dl, kind, uv_now(&w->loop) + ms);
}

static void set_deadline_at(lx_conn_t *c, lx_dl_kind_t kind, uint64_t due) {
    c->dl_kind = (uint8_t)kind;
    lx_dl_set(&worker_of(c)->dlq, &c->dl, kind, due);
}

/* A request refused before its method and version were known (before
 * on_headers_complete, or by its first checks, which set r->unparsed) has
 * none for the log: it shows the first line as received instead, cut at
 * LX_RAW_LINE_MAX (and escaped when written), where it would show the
 * method, target and version. Only refusals pay for this. */
static void keep_first_line(lx_sess_t *s) {
    lx_req_t *r = &s->req;
    if (s->req.head_done && !r->unparsed) return;
    r->unparsed = 1;
    r->target = (lx_str_t){"", 0};
    if (s->rbuf == NULL) return;
    const char *p = s->rbuf + s->req_start, *end = s->rbuf + s->rlen;
    while (p < end && (*p == '\r' || *p == '\n')) /* empty lines before a request */
        p++;
    const char *q = p;
    while (q < end && *q != '\r' && *q != '\n' && q - p < LX_RAW_LINE_MAX)
        q++;
    r->target = (lx_str_t){p, (size_t)(q - p)};
}

/* The core answers a request whose body broke (malformed, over a limit,
 * too slow): a handler reading it is told first and lets go (request.h),
 * as when the client goes away. Untold, the proxy's request lived on past
 * the request's end, with its generation freed under it. Returns 0, or -1
 * when the connection went with it. */
static int body_failed(lx_sess_t *s, int err) {
    lx_conn_t *c = s->c;
    lx_req_t *r = &s->req;
    if (r->body_state != LX_BODY_READING || r->body_cb == NULL) return 0;
    lx_body_cb cb = r->body_cb;
    r->body_cb = NULL;
    s->body_paused = 0;
    lx_sess_enter(s);
    cb(r, NULL, 0, err);
    lx_sess_leave(s);
    return c->state == LX_CONN_CLOSED || sess(c) != s ? -1 : 0;
}

/* A request that timed out reading: tell the client why if nothing of a
 * response went out (408), then close. */
static void timed_out_reading(lx_conn_t *c) {
    lx_sess_t *s = sess(c);
    /* Before its first request (a PROXY header, or nothing, came) there is
     * nobody to answer: a pooled session's request is an old one. */
    if (s == NULL || c->nreq == 0 || s->req.resp.state != LX_RESP_NONE || s->out.n ||
        s->req.gen == NULL) {
        lx_conn_close(c);
        return;
    }
    if (body_failed(s, -ETIMEDOUT) < 0) return;
    keep_first_line(s);
    s->req.keepalive = 0;
    s->req.body_state = LX_BODY_DONE; /* nothing more is read */
    set_state(c, LX_CONN_HANDLING);
    lx_resp_simple(&s->req, 408, NULL);
    lx_resp_done(&s->req);
}

/* The transport waits for bytes (over TLS: what it read is used up): if
 * none come within LX_TP_REST_MS, it lets go of its buffers, whatever the
 * connection waits in (between requests, in a head or a body, a tunnel).
 * One list move per read; a busy connection keeps its buffers (OpenSSL's
 * two, 34 KiB, and its own record buffer) rather than allocate them anew
 * for every request. */
static void rest_arm(lx_conn_t *c) {
    if (!lx_tp_can_rest(&c->link.tp) || c->state == LX_CONN_CLOSED) return;
    lx_worker_t *w = worker_of(c);
    lx_dl_set(&w->dlq, &c->rest, LX_DL_REST, uv_now(&w->loop) + LX_TP_REST_MS);
}

void lx_conn_on_deadline(lx_dlq_t *q, lx_dl_t *d, lx_dl_kind_t kind) {
    (void)q;
    if (kind == LX_DL_REST) {
        lx_conn_t *c = container_of(d, lx_conn_t, rest);
        /* Its last records still going out: again later. */
        if (!lx_tp_rest(&c->link.tp)) rest_arm(c);
        return;
    }
    lx_conn_t *c = container_of(d, lx_conn_t, dl);
    c->dl_kind = LX_DL_NONE;
    switch (kind) {
    case LX_DL_HEADER:
    case LX_DL_BODY: timed_out_reading(c); return;
    default: lx_conn_close(c); return;
    }
}

/* ---- sessions and buffers ------------------------------------------- */

static lx_sess_t *sess_get(lx_conn_t *c) {
    lx_worker_t *w = worker_of(c);
    lx_spare_t *sp = lx_spares_take(&w->sess_spares);
    lx_sess_t *s = sp ? container_of(sp, lx_sess_t, spare) : NULL;
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL) return NULL;
        lx_arena_init(&s->arena, 4096);
        lx_out_init(&s->out);
    }
    s->c = c;
    s->w = w;
    s->rbuf = NULL;
    s->rcap = s->rlen = s->rpos = 0;
    s->gen_held = 0;
    s->in_parse = 0;
    s->depth = 0;
    s->cork = 0;
    s->flush_pending = 0;
    s->proceeding = 0;
    s->proceed_again = 0;
    s->end_pending = s->free_pending = 0;
    /* request_begin clears the request; until then only what a close
     * looks at (sess_detach) must say "nothing in flight". */
    s->req.pending = 0;
    s->req.body_cb = NULL;
    s->req.resp.state = LX_RESP_NONE;
    s->req.resp.producer = NULL;
    s->req.proto = &lx_h1_proto;
    s->req.link = &c->link;
    if (!s->parser_ready) {
        lx_h1_parser_init(&s->parser, &lx_h1_settings);
        s->parser.data = s;
    }
    s->parser_ready = 0;
    c->link.tp.tcp.data = s;
    return s;
}

static void rbuf_release(lx_sess_t *s) {
    if (s->rbuf) lx_pool_put(&s->w->rbufs, s->rbuf, s->rcap);
    s->rbuf = NULL;
    s->rcap = s->rlen = s->rpos = 0;
}

static void sess_destroy(lx_spare_t *sp) {
    lx_sess_t *s = container_of(sp, lx_sess_t, spare);
    lx_arena_free(&s->arena);
    lx_out_free(&s->out);
    free(s);
}

/* Into the spares, or freed when the loop keeps enough. */
static void sess_pool_put(lx_sess_t *s) {
    s->c = NULL;
    /* A big output buffer (a policy's large r:respond body, a listing)
     * goes with the request. */
    if (s->out.ocap > LX_SPARE_ROOM) lx_out_free(&s->out);
    if (!lx_spares_put(&s->w->sess_spares, &s->spare)) sess_destroy(&s->spare);
}

/* The session goes back to the pool, once nothing calls back into it. */
static void sess_free(lx_sess_t *s) {
    rbuf_release(s);
    lx_out_reset(&s->out, s);
    lx_arena_reset(&s->arena);
    sess_pool_put(s);
}

void lx_sess_pool_init(lx_worker_t *w) {
    lx_spares_init(&w->sess_spares, SESS_KEEP);
}

void lx_sess_pool_trim(lx_worker_t *w, int all) {
    lx_spares_trim(&w->sess_spares, all, sess_destroy);
}

static void release_gen(lx_sess_t *s) {
    if (s->gen_held) {
        s->gen_held = 0;
        lx_worker_gen_release(s->w, s->req.gen);
    }
}

/* A session the connection let go of is freed once nothing refers to it. */
static void sess_maybe_free(lx_sess_t *s) {
    if (s->c != NULL || s->req.pending || s->out.writing) return;
    if (s->depth)
        s->free_pending = 1;
    else
        sess_free(s);
}

void lx_sess_enter(lx_sess_t *s) {
    s->depth++;
}

void lx_sess_leave(lx_sess_t *s) {
    if (--s->depth) return;
    if (s->free_pending) {
        /* Whatever ran since the connection let go may have held the
         * request again (a job queued by a handler that had not seen the
         * close): the last callback frees it then. */
        s->free_pending = 0;
        if (s->req.pending == 0 && !s->out.writing) sess_free(s);
        return;
    }
    if (s->end_pending) {
        s->end_pending = 0;
        if (s->c) request_end(s);
    }
}

/* An idle connection, its request over and nothing in flight, gives its
 * session back. Its parser stands between two messages, as for a pipelined
 * request, and serves the next connection as it is. */
static void sess_return(lx_conn_t *c, lx_sess_t *s) {
    c->link.tp.tcp.data = NULL;
    s->c = NULL;
    s->req.link = NULL;
    s->parser_ready = s->message_done;
    rbuf_release(s);
    lx_arena_reset(&s->arena); /* the output queue is empty (request_end) */
    sess_pool_put(s);
}

/* The connection lets go of its session: at once when nothing is in flight,
 * else when the last thread-pool job or write calls back (sess_orphan_done). */
static void sess_detach(lx_conn_t *c) {
    lx_sess_t *s = sess(c);
    if (s == NULL) return;
    c->link.tp.tcp.data = NULL;
    if (s->gen_held) {
        /* A request in progress: its client went, or the server cut it.
         * It is logged all the same (a tunnel's client that hangs up, a
         * download stopped halfway): with the status it was being
         * answered with, or nginx's 499 when no answer had begun. */
        LX_ST_INC(&s->w->stats->aborted);
        lx_req_t *r = &s->req;
        if (s->req.head_done) {
            if (r->status == 0) r->status = 499;
            const lx_access_log_conf_t *al = lx_access_log_of(r);
            if (al) lx_access_log(s->w, r, al);
        }
    }
    release_gen(s);
    s->c = NULL;
    s->req.link = NULL;
    s->req.aborted = 1;
    if (s->req.body_cb) {
        lx_body_cb cb = s->req.body_cb;
        s->req.body_cb = NULL;
        cb(&s->req, NULL, 0, -ECONNRESET); /* the reader lets go */
    }
    if (s->req.resp.state == LX_RESP_STREAMING && s->req.resp.producer &&
        s->req.resp.producer->stop) {
        const lx_producer_t *p = s->req.resp.producer;
        s->req.resp.producer = NULL;
        p->stop(&s->req);
    }
    if (s->req.on_abort) {
        void (*cb)(lx_req_t *) = s->req.on_abort;
        s->req.on_abort = NULL;
        cb(&s->req);
    }
    sess_maybe_free(s);
}

/* The request core's way in (core/proto.h enter/leave, orphaned). A
 * callback from outside (an upstream's read) may queue a head, a body
 * piece and the end at once: corked, they go out in one write when it
 * returns, not one write each. */
void lx_h1_enter(lx_req_t *r, int cork) {
    lx_sess_t *s = lx_sess_of(r);
    lx_sess_enter(s);
    if (cork && s->cork++ == 0) s->out.burst = 0; /* a turn of the loop of its own */
}

void lx_h1_leave(lx_req_t *r, int cork) {
    lx_sess_t *s = lx_sess_of(r);
    if (cork && --s->cork == 0 && s->flush_pending) {
        s->flush_pending = 0;
        if (s->c && !s->out.writing && !s->out.file_io) conn_flush(s);
    }
    lx_sess_leave(s);
}

void lx_h1_orphaned(lx_req_t *r) {
    sess_maybe_free(lx_sess_of(r));
}

/* ---- lifetime ------------------------------------------------------- */

static void on_closed(uv_handle_t *h) {
    lx_conn_t *c = container_of(h, lx_conn_t, link.tp.tcp);
    free(c);
}

void lx_conn_close(lx_conn_t *c) {
    if (c->state == LX_CONN_CLOSED) return;
    lx_worker_t *w = worker_of(c);
    set_state(c, LX_CONN_CLOSED);
    lx_dl_clear(&c->dl);
    lx_dl_clear(&c->rest);
    lx_sess_t *s = sess(c);
    /* A uv_write in flight is cancelled by uv_close, and its callback runs
     * before on_closed: the session stays until then. */
    (void)s;
    sess_detach(c);
    w->nconns--;
    lx_tp_close(&c->link.tp, on_closed);
    lx_worker_conn_closed(w);
}

static void conn_setup(lx_worker_t *w, lx_conn_t *c) {
    c->link.tp.tcp.data = NULL;
    c->state = LX_CONN_IDLE;
    LX_ST_INC(&w->stats->conns[LX_CONN_IDLE]);
    LX_ST_INC(&w->stats->accepted);
    w->nconns++;
}

static void conn_start(lx_conn_t *c);

/* The certificates a TLS connection's server name gets: from the loop's
 * generation when the ClientHello comes (a reload between the accept and
 * it gives the new ones). */
static SSL_CTX *pick_cert(void *arg, const char *name, size_t len) {
    return lx_tls_pick(((lx_worker_t *)arg)->gen, name, len);
}

/* The handshake is done: the first request has header_timeout from now
 * (until now, handshake_timeout from the accept ran). */
static void tls_ready(lx_tp_t *tp) {
    lx_conn_t *c = container_of(tp, lx_conn_t, link.tp);
    set_deadline(c, LX_DL_HEADER, worker_of(c)->gen->srv.header_timeout);
}

/* A connection of a tls = true listener: TLS under HTTP/1. */
static int conn_tls(lx_worker_t *w, lx_conn_t *c) {
    int r = w->gen->tls_base ? lx_tls_new(&c->link.tp, w->gen->tls_base, pick_cert, tls_ready, w)
                             : -EINVAL;
    if (r < 0) lx_conn_close(c);
    return r;
}

void lx_conn_accept(lx_worker_t *w, uv_stream_t *listener) {
    lx_conn_t *c = malloc(sizeof(*c));
    if (c == NULL || uv_tcp_init(&w->loop, &c->link.tp.tcp) < 0) {
        free(c);
        LX_ST_INC(&w->stats->refused);
        return;
    }
    memset((char *)c + sizeof(c->link.tp.tcp), 0, sizeof(*c) - sizeof(c->link.tp.tcp));
    if (uv_accept(listener, (uv_stream_t *)&c->link.tp.tcp) < 0) {
        uv_close((uv_handle_t *)&c->link.tp.tcp, on_closed);
        LX_ST_INC(&w->stats->refused);
        return;
    }
    lx_listener_t *l = container_of((uv_tcp_t *)listener, lx_listener_t, tcp);
    c->proxy_wait = (unsigned)!!l->proxy_protocol;
    conn_setup(w, c);
    if (l->tls && conn_tls(w, c) < 0) return;
    conn_start(c);
}

int lx_conn_open(lx_worker_t *w, int fd, const struct sockaddr *peer, unsigned flags) {
    lx_conn_t *c = malloc(sizeof(*c));
    if (c == NULL || uv_tcp_init(&w->loop, &c->link.tp.tcp) < 0) {
        free(c);
        close(fd);
        LX_ST_INC(&w->stats->refused);
        return -ENOMEM;
    }
    memset((char *)c + sizeof(c->link.tp.tcp), 0, sizeof(*c) - sizeof(c->link.tp.tcp));
    int r = uv_tcp_open(&c->link.tp.tcp, fd);
    if (r < 0) {
        LX_ST_INC(&w->stats->refused);
        close(fd);
        uv_close((uv_handle_t *)&c->link.tp.tcp, on_closed);
        return r;
    }
    if (peer && (peer->sa_family == AF_INET || peer->sa_family == AF_INET6)) {
        lx_addr_from_sockaddr(peer, &c->link.addr);
        c->link.addr_state = 1;
    } else if (peer) {
        c->link.addr_state = 2;
    }
    c->proxy_wait = (flags & LX_CONN_PROXY) != 0;
    conn_setup(w, c);
    if ((flags & LX_CONN_TLS) && conn_tls(w, c) < 0) return -ENOMEM;
    conn_start(c);
    return 0;
}

void lx_conn_drain(lx_conn_t *c) {
    if (c->state == LX_CONN_CLOSED) return;
    c->draining = 1;
    lx_sess_t *s = sess(c);
    if (c->state == LX_CONN_IDLE && (s == NULL || s->rpos == s->rlen))
        lx_conn_close(c);
    else if (s)
        s->req.keepalive = 0; /* the response in progress says Connection: close */
}

typedef struct {
    void (*fn)(lx_conn_t *c, void *arg);
    void *arg;
} each_t;

static void each_cb(uv_handle_t *h, void *arg) {
    each_t *e = arg;
    lx_worker_t *w = h->loop->data;
    /* The loop's connections are its uv_tcp_t handles that are not
     * listeners, nor the proxy's upstream connections: those are uv_tcp_t
     * too, and taken for an lx_conn_t they had a stop close them with the
     * client's callbacks (a crash at SIGQUIT with one in a pool). */
    if (h->type != UV_TCP || uv_is_closing(h) || lx_upconn_is(h)) return;
    for (size_t i = 0; i < w->nlisteners; i++)
        if ((uv_handle_t *)&w->listeners[i]->tcp == h) return;
    e->fn(container_of((uv_tcp_t *)h, lx_conn_t, link.tp.tcp), e->arg);
}

void lx_conn_each(lx_worker_t *w, void (*fn)(lx_conn_t *c, void *arg), void *arg) {
    each_t e = {fn, arg};
    uv_walk(&w->loop, each_cb, &e);
}

const lx_gen_t *lx_conn_gen(const lx_conn_t *c) {
    const lx_sess_t *s = c->link.tp.tcp.data;
    return s && s->gen_held ? s->req.gen : NULL;
}

/* ---- reading -------------------------------------------------------- */

/* libuv asks for a buffer just before it reads: a connection with a
 * request in progress reads into its own, an idle one borrows one from the
 * pool, which goes back at once if the read finds nothing. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    lx_conn_t *c = container_of((uv_tcp_t *)h, lx_conn_t, link.tp.tcp);
    lx_sess_t *s = sess(c);
    (void)suggested;
    if (s && s->rbuf) {
        buf->base = s->rbuf + s->rlen;
        buf->len = s->rcap - s->rlen;
        return;
    }
    lx_worker_t *w = worker_of(c);
    buf->base = lx_pool_get(&w->rbufs);
    buf->len = buf->base ? w->rbufs.size : 0;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

static void read_switch(lx_conn_t *c, int on) {
    if (c->state == LX_CONN_CLOSED || c->eof) return;
    if (on) {
        if (lx_tp_read_start(&c->link.tp, on_alloc, on_read) < 0) {
            lx_conn_close(c);
            return;
        }
    } else {
        lx_tp_read_stop(&c->link.tp);
    }
    c->reading = (unsigned)on;
}

/* Starts or stops reading; inline, as most calls find it as wanted. */
static inline void want_read(lx_conn_t *c, int on) {
    if ((unsigned)on != c->reading) read_switch(c, on);
}

static void got_bytes(lx_conn_t *c, char *base, size_t n) {
    lx_sess_t *s = sess(c);
    if (s == NULL || s->rbuf == NULL) {
        /* The first bytes after idleness, read into a borrowed buffer. */
        if (s == NULL && (s = sess_get(c)) == NULL) {
            lx_pool_put(&worker_of(c)->rbufs, base, worker_of(c)->rbufs.size);
            lx_conn_close(c);
            return;
        }
        s->rbuf = base;
        s->rcap = s->w->rbufs.size;
        s->rlen = s->rpos = 0;
    }
    s->rlen += n;
    s->out.burst = 0; /* a turn of the loop of its own (out.h LX_OUT_BURST) */
    lx_st_add(&s->w->stats->bytes_in, n);
    conn_parse(c);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
    lx_conn_t *c = container_of((uv_tcp_t *)st, lx_conn_t, link.tp.tcp);
    lx_sess_t *s = sess(c);
    int borrowed = buf->base && (s == NULL || buf->base != s->rbuf + s->rlen);
    if (n > 0) {
        got_bytes(c, buf->base, (size_t)n);
        return;
    }
    if (borrowed) lx_pool_put(&worker_of(c)->rbufs, buf->base, buf->len);
    if (n == 0) { /* EAGAIN; over TLS, what was read is used up */
        rest_arm(c);
        return;
    }
    if (n != UV_EOF || c->state == LX_CONN_LINGER) {
        lx_conn_close(c);
        return;
    }
    /* The client closed its sending side. A request it sent in full is
     * still answered (a half-close is legal); then we close. */
    c->eof = 1;
    c->reading = 0;
    if (c->state == LX_CONN_TUNNEL) {
        lx_conn_close(c); /* both ways end together */
        return;
    }
    if (c->state == LX_CONN_IDLE || c->state == LX_CONN_HEAD) {
        /* Pipelined requests still buffered are answered; a request cut
         * short will never be whole, nor a PROXY header. */
        if (s && s->rpos < s->rlen && c->state == LX_CONN_IDLE && !c->proxy_wait) return;
        lx_conn_close(c);
        return;
    }
    /* The rest of this request's body will never come, when the parser has
     * taken every byte buffered. A body nobody asked for yet (UNREAD), or
     * one whose reader paused, may be whole in the buffer: the request is
     * complete and is answered; conn_parse_run closes once parsing runs out
     * of bytes with the body still short. */
    if (s && (s->req.body_state == LX_BODY_READING || s->req.body_state == LX_BODY_DISCARD) &&
        s->rpos == s->rlen && !s->body_paused) {
        lx_conn_close(c);
        return;
    }
}

/* TCP_DEFER_ACCEPT hands over a connection once its first bytes are in:
 * read them now, as libuv would only at the next turn of the loop, after
 * adding the socket to epoll. A request answered with Connection: close
 * then never enters epoll at all. */
static void conn_start(lx_conn_t *c) {
    lx_worker_t *w = worker_of(c);
    set_state(c, LX_CONN_IDLE);
    set_deadline(c, LX_DL_HEADER,
                 c->link.tp.tls ? w->gen->srv.tls.handshake_timeout : w->gen->srv.header_timeout);
    char *b = lx_pool_get(&w->rbufs);
    if (b == NULL) {
        lx_conn_close(c);
        return;
    }
    ssize_t n = lx_tp_read_now(&c->link.tp, b, w->rbufs.size);
    if (n > 0) {
        got_bytes(c, b, (size_t)n); /* conn_parse decides whether to read on */
        return;
    }
    lx_pool_put(&w->rbufs, b, w->rbufs.size);
    if (n == 0 || (n != -EAGAIN && n != -EINTR)) {
        lx_conn_close(c);
        return;
    }
    want_read(c, 1);
}

/* Answers a request that could not be parsed: the framing is in doubt, so
 * the connection closes after the response. */
static void parse_error(lx_sess_t *s, int status) {
    lx_conn_t *c = s->c;
    lx_req_t *r = &s->req;
    if (body_failed(s, -EPROTO) < 0) return;
    r->keepalive = 0;
    r->body_state = LX_BODY_DONE; /* nothing more is parsed */
    keep_first_line(s);
    want_read(c, 0);
    lx_log_debug("bad request (%d): %s", status,
                 llhttp_get_error_reason(&s->parser) ? llhttp_get_error_reason(&s->parser)
                                                     : "limit");
    /* A request answered already (100-continue, or a response sent before
     * its body failed) can only close. */
    if (r->resp.state != LX_RESP_NONE) {
        lx_conn_close(c);
        return;
    }
    set_state(c, LX_CONN_HANDLING);
    lx_resp_simple(r, status, NULL);
    lx_resp_done(r);
}

/* Gives the read buffer room for a request under the current limits. The
 * buffer was sized for the limits when it was lent; a reload may have
 * raised them since. Called between requests, when nothing points into it. */
static int rbuf_fit(lx_sess_t *s, size_t max_header_bytes) {
    if (s->rcap < max_header_bytes + RBUF_SLACK) {
        size_t cap = max_header_bytes + RBUF_SLACK;
        char *b = s->rcap == s->w->rbufs.size ? NULL : s->rbuf;
        if (b == NULL) {
            b = malloc(cap);
            if (b == NULL) return -ENOMEM;
            memcpy(b, s->rbuf, s->rlen);
            lx_pool_put(&s->w->rbufs, s->rbuf, s->rcap);
        } else if ((b = realloc(b, cap)) == NULL) {
            return -ENOMEM;
        }
        s->rbuf = b;
        s->rcap = cap;
    }
    /* Make sure a whole header fits behind this request's first byte. */
    if (s->rcap - s->rpos < HEADER_ROOM(max_header_bytes) && s->rpos > 0) {
        memmove(s->rbuf, s->rbuf + s->rpos, s->rlen - s->rpos);
        s->rlen -= s->rpos;
        s->rpos = 0;
    }
    return 0;
}

static void request_begin(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    lx_arena_reset(&s->arena);
    memset(&s->req, 0, sizeof(s->req));
    s->req.gen = lx_worker_gen_acquire(s->w);
    s->req.w = s->w;
    s->gen_held = 1;
    s->req.arena = &s->arena;
    s->req.proto = &lx_h1_proto;
    s->req.link = &c->link;
    s->req.secure = lx_tp_secure(&c->link.tp) != 0;
    s->req_start = s->rpos;
    s->body_base = 0;
    s->in_url = 1;
    s->message_done = 0;
    s->body_paused = 0;
    s->tunnel_paused = 0;
    s->err_status = 0;
    s->te = LX_TE_NONE;
    s->ext_bytes = 0;
    s->trailer_bytes = 0;
    s->framing_bytes = 0;
    s->framing_parts = 0;
    s->ext_last = 0;
    s->ext_refeed = 0;
    s->line_wait = 0;
    s->cur_header = NULL;
    s->last_end = NULL;
    s->version_at = NULL;
    c->nreq++;
    set_state(c, LX_CONN_HEAD);
    s->req.started = uv_now(&s->w->loop);
    if (s->req.gen->srv.request_id_header_len) lx_req_add_id_header(&s->req);
}

/* Bytes of a chunked body that no limit counts: chunk-size lines (llhttp
 * takes any number of leading zeros), CRLFs and the whitespace of trailer
 * lines. Each chunk and trailer field brings a few; many more are a client
 * streaming filler to keep a request going (the CVE-2024-22019 class), and
 * get 413. Of consumed body bytes just parsed, those that took the data,
 * extension and trailer counts past counted_before were counted already.
 * The check runs at the end of each parse run against the parts complete
 * by then, so a long size line cut across reads is refused sooner than the
 * same bytes in one read: stricter, never looser (t/51 tests the bound). */
#define FRAMING_PER_PART 32
static int framing_overflow(lx_sess_t *s, size_t consumed, uint64_t counted_before) {
    uint64_t counted = s->req.body_read + s->ext_bytes + s->trailer_bytes - counted_before;
    if (consumed > counted) s->framing_bytes += consumed - counted;
    return s->framing_bytes > (uint64_t)FRAMING_PER_PART * (s->framing_parts + 2);
}

/* Whether the parser may go on: before the head is complete always; in the
 * body while someone takes it; after the request never (pipelined bytes
 * wait until the request ends). */
static int may_parse(lx_sess_t *s) {
    if (!s->req.head_done) return 1;
    if (s->message_done) return 0;
    lx_body_state_t b = (lx_body_state_t)s->req.body_state;
    return (b == LX_BODY_DISCARD || b == LX_BODY_READING) && !s->body_paused;
}

/* The bytes parsed so far end inside a request's head. Only a head that
 * can no longer end within the limit is refused here: one at exactly
 * max_header_bytes may still be waiting for its CRLF CRLF, as
 * on_headers_complete counts to the end of the last field. A full buffer
 * is the limit too: it was fitted to the limit in force when this request
 * began (rbuf_fit), and a reload raising it since must not leave the
 * request stalled until 408 with no room left. */
static void head_incomplete(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    const lx_server_conf_t *srv = &s->w->gen->srv;
    if (s->rlen - s->req_start > HEADER_END(srv->max_header_bytes) || s->rlen == s->rcap) {
        parse_error(s, s->in_url ? 414 : 431);
        return;
    }
    /* A deadline for the whole header, from its first byte: a client
     * trickling bytes does not push it back. */
    if (c->dl_kind != LX_DL_HEADER)
        set_deadline_at(c, LX_DL_HEADER, s->req.started + srv->header_timeout);
}

/* The head is complete: the request is dispatched. */
static void dispatch(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    lx_req_t *r = &s->req;
    set_state(c, LX_CONN_HANDLING);
    set_deadline(c, LX_DL_NONE, 0);
    /* A request without a body has been parsed to its end already
     * (on_headers_complete pauses only for one with a body), so the next
     * run starts at the next request. */
    r->body_state = (r->chunked || r->content_length) ? LX_BODY_UNREAD : LX_BODY_NONE;
    lx_request_run(r);
}

/* The body is all in: tell whoever takes it. */
static void body_complete(lx_sess_t *s) {
    lx_req_t *r = &s->req;
    lx_body_state_t was = (lx_body_state_t)r->body_state;
    r->body_state = LX_BODY_DONE;
    if (s->c && s->c->dl_kind == LX_DL_BODY) set_deadline(s->c, LX_DL_NONE, 0);
    if (was == LX_BODY_READING && r->body_cb) {
        lx_body_cb cb = r->body_cb;
        r->body_cb = NULL;
        cb(r, NULL, 0, 0);
    } else if (was == LX_BODY_DISCARD && r->waiting_body) {
        r->waiting_body = 0; /* a handler waits for the body to be gone */
        lx_request_resume(r);
    } else if (s->c && s->c->state == LX_CONN_BODY) {
        request_end(s); /* the response was out already */
    }
}

static void conn_parse_run(lx_conn_t *c, lx_sess_t *s);

/* Between requests with nothing of the next one buffered: the connection
 * waits for it under keepalive_timeout, and gives its session back once
 * nothing (a write, a job, a hold) refers to it. */
static void conn_idle(lx_conn_t *c, lx_sess_t *s) {
    if (s->req.pending || s->out.n || s->out.writing) return;
    if (c->eof || c->draining) {
        lx_conn_close(c);
        return;
    }
    /* With nobody left to tell (a body reader, a stream, on_abort: all done
     * with the request as a rule), and no call on the stack, the session
     * goes back at once; else sess_detach tells them and frees it once the
     * call returns. */
    if (s->depth == 0 && s->req.body_cb == NULL && s->req.on_abort == NULL &&
        s->req.resp.state != LX_RESP_STREAMING)
        sess_return(c, s);
    else
        sess_detach(c);
    /* A PROXY header alone: the first request's header_timeout, set at
     * accept, runs on (keepalive_timeout is for clients that were answered). */
    if (c->nreq == 0) return;
    set_deadline(c, LX_DL_IDLE, worker_of(c)->gen->srv.keepalive_timeout);
}

/* Runs llhttp over what the read buffer holds, as far as the state lets. */
static void conn_parse(lx_conn_t *c) {
    lx_sess_t *s = sess(c);
    if (s == NULL || s->in_parse) return;
    lx_sess_enter(s);
    conn_parse_run(c, s);
    lx_sess_leave(s);
}

/* A tunnel's bytes go to its reader as they are, one piece at a time: the
 * reader copies what it keeps, so the buffer is empty again at once. */
static void tunnel_feed(lx_sess_t *s) {
    lx_req_t *r = &s->req;
    if (s->tunnel_paused || s->rpos == s->rlen || r->body_cb == NULL) return;
    const char *p = s->rbuf + s->rpos;
    size_t n = s->rlen - s->rpos;
    s->tunnel_paused = 1;
    s->rpos = s->rlen = 0;
    r->body_cb(r, p, n, 0);
}

static void conn_parse_run(lx_conn_t *c, lx_sess_t *s) {
    s->in_parse = 1;
    while (c->state != LX_CONN_CLOSED && sess(c) == s) {
        const lx_server_conf_t *srv = &s->w->gen->srv;
        if (c->state == LX_CONN_TUNNEL) {
            tunnel_feed(s);
            break;
        }
        if (c->state == LX_CONN_IDLE) {
            if (s->rpos == s->rlen) break;
            if (c->proxy_wait) {
                int pr = lx_conn_proxy_header(c, s);
                if (pr < 0) {
                    s->in_parse = 0;
                    lx_conn_close(c);
                    return;
                }
                if (pr == 0) break;
                continue;
            }
            if (rbuf_fit(s, srv->max_header_bytes) < 0) {
                s->in_parse = 0;
                lx_conn_close(c);
                return;
            }
            request_begin(s);
        }
        if (c->state == LX_CONN_LINGER) {
            s->rpos = s->rlen = 0; /* read and dropped */
            break;
        }
        /* In a body, llhttp may still owe a callback with no byte left
         * (the end of the message, after a piece a reader paused at). */
        if (!may_parse(s) || (s->rpos == s->rlen && !s->req.head_done)) break;
        const char *start = s->rbuf + s->rpos;
        /* Framing is counted over runs that start inside a chunked body;
         * the run that ends the header block may take a little uncounted. */
        int chunked_body = s->req.head_done && s->req.chunked;
        uint64_t counted = s->req.body_read + s->ext_bytes + s->trailer_bytes;
        /* A request line whose method llhttp refused is read on without
         * it (its state is an error now) until lx_h1_line_status can tell. */
        llhttp_errno_t e = s->line_wait ? HPE_INVALID_METHOD
                                        : llhttp_execute(&s->parser, start, s->rlen - s->rpos);
        if (c->state == LX_CONN_CLOSED || sess(c) != s) break;
        if (e == HPE_OK) {
            if (chunked_body && framing_overflow(s, s->rlen - s->rpos, counted)) {
                parse_error(s, 413);
                break;
            }
            s->rpos = s->rlen;
            if (!s->req.head_done) {
                head_incomplete(s);
            } else {
                /* Body bytes are taken or dropped: read the rest into the
                 * same space. */
                if (s->body_base == 0) s->body_base = s->rlen;
                if (s->body_base == s->rcap) {
                    /* The header filled the buffer to its last byte: with
                     * HEADER_ROOM kept free, only a header longer than
                     * max_header_bytes (padded after its last field) does,
                     * and no byte of its body could ever be read. */
                    parse_error(s, 431);
                    break;
                }
                s->rlen = s->rpos = s->body_base;
                set_deadline(c, LX_DL_BODY, srv->body_timeout);
            }
            break;
        }
        if (e == HPE_PAUSED) {
            size_t pos = (size_t)(llhttp_get_error_pos(&s->parser) - s->rbuf);
            if (s->ext_refeed) {
                /* Give llhttp the ';' it skipped again (on_chunk_extension_
                 * value_complete): it goes on with the next extension. */
                s->ext_refeed = 0;
                pos--;
            }
            if (chunked_body && framing_overflow(s, pos - s->rpos, counted)) {
                parse_error(s, 413);
                break;
            }
            s->rpos = pos;
            llhttp_resume(&s->parser);
            /* A reader holds a piece: luxd reads nothing from the client
             * until it asks for more, so the client's body_timeout waits
             * too (lx_sess_body_resume starts it again). */
            if (s->body_paused && c->dl_kind == LX_DL_BODY) set_deadline(c, LX_DL_NONE, 0);
            if (s->message_done && s->req.body_state != LX_BODY_NONE &&
                s->req.body_state != LX_BODY_DONE) {
                body_complete(s);
                continue;
            }
            if (s->req.head_done && c->state == LX_CONN_HEAD) {
                /* An Expect: 100-continue whose body has started to arrive
                 * is no question any more. */
                if (s->req.expect == LX_EXPECT_WAITING && s->rpos < s->rlen)
                    s->req.expect = LX_EXPECT_NONE;
                dispatch(s);
            }
            continue;
        }
        if (!s->req.head_done && s->err_status == 0 &&
            (e == HPE_INVALID_METHOD || e == HPE_INVALID_CONSTANT)) {
            /* llhttp knows a fixed set of methods and stops at the first
             * byte that none of them continues with: a valid method it
             * does not know (501) looks the same to it as bytes that are
             * no method at all (400). Its state is lost either way, so
             * even a 501 closes the connection (parse_error): where this
             * request ends, and the next begins, is nobody's to say. */
            /* While it waits, the line is looked at again only once the
             * bytes just read hold a LF that may end it: each look reads it
             * from its start, and a line dribbled in small pieces up to a
             * large max_header_bytes would cost its length squared. A byte
             * that makes it no request line then has its 400 at the LF (or
             * the limit's status, or 408), not as it comes. */
            int st = s->line_wait && memchr(start, '\n', s->rlen - s->rpos) == NULL
                         ? 0
                         : lx_h1_line_status(s->rbuf + s->req_start, s->rlen - s->req_start,
                                             srv->max_header_bytes);
            if (st == 0) {
                s->line_wait = 1;
                s->rpos = s->rlen;
                head_incomplete(s);
                break;
            }
            parse_error(s, st);
            break;
        }
        int status = s->err_status ? s->err_status : 400;
        parse_error(s, status);
        break;
    }
    if (sess(c) == s) s->in_parse = 0;
    if (c->state == LX_CONN_CLOSED || sess(c) != s) return;
    if (c->state == LX_CONN_TUNNEL) {
        want_read(c, !s->tunnel_paused);
        return;
    }
    /* The client has stopped sending: a request begun in what it sent will
     * never be whole. */
    if (c->eof && (c->state == LX_CONN_HEAD ||
                   ((c->state == LX_CONN_HANDLING || c->state == LX_CONN_BODY) &&
                    s->req.body_state != LX_BODY_NONE && s->req.body_state != LX_BODY_DONE &&
                    s->rpos == s->rlen && !s->body_paused))) {
        lx_conn_close(c);
        return;
    }
    /* Backpressure: a full buffer stops reading until the request ahead
     * takes its bytes; a body reader that waits stops it at once. */
    int room = s->rbuf == NULL || s->rlen < s->rcap;
    int paused = s->req.head_done && !s->message_done && s->req.body_state == LX_BODY_READING &&
                 s->body_paused;
    want_read(c, room && !paused);
    if (c->state == LX_CONN_IDLE && s->rpos == s->rlen) conn_idle(c, s);
}

/* ---- output and the end of a request --------------------------------- */

static void conn_flush(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    if (s->cork) {
        s->flush_pending = 1; /* lx_req_leave writes it */
        return;
    }
    int r = lx_out_flush(s);
    if (r == -EAGAIN) {
        /* send_timeout bounds the time between two writes that moved the
         * output on (as nginx's does), not the whole response. */
        if (s->out.writing && c->dl_kind != LX_DL_SEND)
            set_deadline(c, LX_DL_SEND, s->w->gen->srv.send_timeout);
        return;
    }
    if (r < 0) {
        lx_conn_close(c);
        return;
    }
    if (c->dl_kind == LX_DL_SEND) set_deadline(c, LX_DL_NONE, 0);
    lx_req_t *req = &s->req;
    if (req->resp.state == LX_RESP_STREAMING && req->resp.producer) {
        /* Output written at once calls proceed from inside the producer's
         * own send: it is called again once the outer call returns, so a
         * stream the socket keeps taking loops here instead of growing
         * the stack. */
        if (s->proceeding) {
            s->proceed_again = 1;
            return;
        }
        lx_sess_enter(s);
        s->proceeding = 1;
        do {
            s->proceed_again = 0;
            req->resp.producer->proceed(req);
        } while (s->proceed_again && s->c && req->resp.state == LX_RESP_STREAMING &&
                 req->resp.producer);
        s->proceeding = 0;
        lx_sess_leave(s);
        return;
    }
    if (req->resp.state != LX_RESP_DONE || c->state != LX_CONN_WRITING) return;
    if (req->body_state == LX_BODY_DONE || req->body_state == LX_BODY_NONE || !req->keepalive) {
        request_end(s);
        return;
    }
    /* The response is out; the rest of the body is read and dropped before
     * the next request. */
    set_state(c, LX_CONN_BODY);
    req->body_state = LX_BODY_DISCARD;
    /* A reader that answered without asking for the rest (a piece left
     * it paused) is done with the body: it lets go, and the parser goes on
     * dropping, or nothing would parse again. */
    s->body_paused = 0;
    if (req->body_cb) {
        lx_body_cb cb = req->body_cb;
        req->body_cb = NULL;
        lx_sess_enter(s);
        cb(req, NULL, 0, -ECANCELED);
        lx_sess_leave(s);
        /* s may be gone if the reader closed; c lives until on_closed. */
        if (c->state == LX_CONN_CLOSED) return;
    }
    set_deadline(c, LX_DL_BODY, s->w->gen->srv.body_timeout);
    conn_parse(c);
}

void lx_sess_written(lx_sess_t *s, int status) {
    if (s->c == NULL) {
        sess_maybe_free(s);
        return;
    }
    if (status < 0) {
        lx_conn_close(s->c);
        return;
    }
    /* The write moved the output on: send_timeout starts afresh. */
    if (s->c->dl_kind == LX_DL_SEND) set_deadline(s->c, LX_DL_SEND, s->w->gen->srv.send_timeout);
    conn_flush(s);
}

void lx_sess_output(lx_sess_t *s) {
    if (s->c && !s->out.writing && !s->out.file_io) conn_flush(s);
}

void lx_sess_response_done(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    if (c == NULL) return;
    set_state(c, LX_CONN_WRITING);
    conn_flush(s);
}

/* Half-close, then read and drop what the client still sends, so that our
 * close does not reset the connection and destroy the response in flight
 * (nginx's lingering close). */
static void on_shutdown(uv_shutdown_t *req, int status) {
    lx_conn_t *c = req->data;
    free(req);
    if (status < 0 && c->state != LX_CONN_CLOSED) lx_conn_close(c);
}

static void linger(lx_conn_t *c) {
    uv_shutdown_t *req = malloc(sizeof(*req));
    if (req == NULL || c->eof) {
        free(req);
        lx_conn_close(c);
        return;
    }
    req->data = c;
    if (lx_tp_shutdown(&c->link.tp, req, on_shutdown) < 0) {
        free(req);
        lx_conn_close(c);
        return;
    }
    set_state(c, LX_CONN_LINGER);
    set_deadline(c, LX_DL_LINGER, LINGER_MS);
    lx_sess_t *s = sess(c);
    if (s) s->rpos = s->rlen = 0;
    want_read(c, 1);
}

/* The response is out and the body read: log, let the generation go, and
 * go on to the next request or close. */
static void request_end(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    lx_req_t *r = &s->req;
    if (s->depth) {
        s->end_pending = 1; /* a handler is on the stack: after it returns */
        return;
    }
    const lx_access_log_conf_t *al = lx_access_log_of(r);
    if (al) lx_access_log(s->w, r, al);
    lx_stats_request(s->w->stats, r->vhost ? r->vhost->stat_slot : 0, r->status,
                     r->head_bytes + r->body_bytes);
    release_gen(s);
    int unread = !s->message_done || s->rpos != s->rlen;
    /* A response that came out short (out of memory or queue entries in
     * out.c) said a length it did not send: the connection cannot go on. */
    if (!r->keepalive || s->out.failed || c->draining || s->w->stop || (c->eof && !unread)) {
        /* Bytes the transport took but the socket has not (TLS records
         * of its own in flight) go out before the close, as a plain
         * socket's would from the kernel: linger's shutdown waits for
         * them. */
        if ((unread || lx_tp_queued(&c->link.tp)) && !c->eof)
            linger(c);
        else
            lx_conn_close(c);
        return;
    }
    lx_out_reset(&s->out, s);
    set_state(c, LX_CONN_IDLE);
    if (s->rpos == s->rlen) {
        /* The common case, no pipelined request: nothing to parse. */
        s->rpos = s->rlen = 0;
        want_read(c, 1);
        /* A failed uv_read_start closed the connection (and pooled s). */
        if (c->state == LX_CONN_CLOSED) return;
        conn_idle(c, s);
        return;
    }
    /* A pipelined request waits in the buffer: its header_timeout starts
     * now, not at its first byte (a long response was ahead of it). */
    set_deadline(c, LX_DL_HEADER, s->w->gen->srv.header_timeout);
    conn_parse(c);
}

/* ---- for the request body (core/body.c) and tunnels ------------------------- */

void lx_sess_body_resume(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    if (c == NULL) return;
    s->body_paused = 0;
    /* Called from inside the reader's callback (llhttp runs): the parse
     * loop goes on by itself. */
    if (s->in_parse) return;
    /* Bytes delivered are gone: the rest moves down to where the body is
     * read into, so the buffer has room again. */
    if (s->body_base && s->rpos > s->body_base) {
        memmove(s->rbuf + s->body_base, s->rbuf + s->rpos, s->rlen - s->rpos);
        s->rlen -= s->rpos - s->body_base;
        s->rpos = s->body_base;
    }
    set_deadline(c, LX_DL_BODY, s->w->gen->srv.body_timeout);
    conn_parse(c);
}

void lx_h1_tunnel(lx_req_t *r, const lx_producer_t *p, lx_body_cb cb) {
    lx_sess_t *s = lx_sess_of(r);
    lx_conn_t *c = s->c;
    if (c == NULL) return;
    r->keepalive = 0;
    r->resp.no_body = 0;
    r->resp.chunked = 0;
    r->resp.state = LX_RESP_STREAMING;
    r->resp.producer = p;
    r->body_cb = cb;
    r->waiting = 0;
    set_state(c, LX_CONN_TUNNEL);
    set_deadline(c, LX_DL_NONE, 0);
    s->tunnel_paused = 0;
    lx_sess_output(s);
    if (s->c) conn_parse(c); /* bytes the client sent after the head, then read on */
}

void lx_h1_tunnel_more(lx_req_t *r) {
    lx_sess_t *s = lx_sess_of(r);
    s->tunnel_paused = 0;
    if (s->c && !s->in_parse) conn_parse(s->c);
}
