/* An HTTP/1 connection (conn.h has its states): accepted or adopted, read
 * on the libuv stream into a pooled buffer through its transport, given a
 * session from the loop's pool while a request is in progress, held to its
 * deadlines, and closed. What it does with the bytes it reads (parse,
 * dispatch, write, end) is serve.c's; the output queue and writer are
 * out.c's, the response's serializer emit.c's. */
#include "h1/serve.h"
#include "h2/h2.h"

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
#include "core/accesslog.h"
#include "io/filecache.h"
#include "log.h"
#include "stats.h"
#include "upstream/upconn.h"

void lx_conn_set_state(lx_conn_t *c, lx_conn_state_t st) {
    set_state(c, st);
}

/* ---- deadlines ------------------------------------------------------ */

void lx_conn_set_deadline(lx_conn_t *c, lx_dl_kind_t kind, uint32_t ms) {
    lx_worker_t *w = worker_of(c);
    c->dl_kind = (uint8_t)kind;
    if (kind == LX_DL_NONE || ms == 0) {
        lx_dl_clear(&c->dl); /* e.g. keepalive_timeout = 0 */
        return;
    }
    lx_dl_set(&w->dlq, &c->dl, kind, uv_now(&w->loop) + ms);
}

void lx_h1_set_deadline_at(lx_conn_t *c, lx_dl_kind_t kind, uint64_t due) {
    c->dl_kind = (uint8_t)kind;
    lx_dl_set(&worker_of(c)->dlq, &c->dl, kind, due);
}

/* A request refused before its method and version were known (before
 * on_headers_complete, or by its first checks, which set r->unparsed) has
 * none for the log: it shows the first line as received instead, cut at
 * LX_RAW_LINE_MAX (and escaped when written), where it would show the
 * method, target and version. Only refusals pay for this. */
void lx_h1_keep_first_line(lx_sess_t *s) {
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
int lx_h1_body_failed(lx_sess_t *s, int err) {
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
    if (lx_h1_body_failed(s, -ETIMEDOUT) < 0) return;
    lx_h1_keep_first_line(s);
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
    if (c->h2) {
        lx_h2_deadline(c, kind);
        return;
    }
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

void lx_h1_release_gen(lx_sess_t *s) {
    if (s->gen_held) {
        s->gen_held = 0;
        lx_worker_gen_release(s->w, s->req.gen);
    }
}

/* A session the connection let go of is freed once nothing refers to it. */
void lx_h1_sess_maybe_free(lx_sess_t *s) {
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
        if (s->c) lx_h1_request_end(s);
    }
}

/* An idle connection, its request over and nothing in flight, gives its
 * session back. Its parser stands between two messages, as for a pipelined
 * request, and serves the next connection as it is. */
void lx_h1_sess_return(lx_conn_t *c, lx_sess_t *s) {
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
void lx_h1_sess_detach(lx_conn_t *c) {
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
    lx_h1_release_gen(s);
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
    lx_h1_sess_maybe_free(s);
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
        if (s->c && !s->out.writing && !s->out.file_io) lx_h1_flush(s);
    }
    lx_sess_leave(s);
}

void lx_h1_orphaned(lx_req_t *r) {
    lx_h1_sess_maybe_free(lx_sess_of(r));
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
    lx_h2_detach(c);
    lx_h1_sess_detach(c);
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
 * (until now, handshake_timeout from the accept ran), in HTTP/2 when ALPN
 * chose it. */
static void tls_ready(lx_tp_t *tp) {
    lx_conn_t *c = container_of(tp, lx_conn_t, link.tp);
    lx_conn_set_deadline(c, LX_DL_HEADER, worker_of(c)->gen->srv.header_timeout);
    if (c->h2_ok && lx_tls_alpn_h2(tp)) lx_h2_start(c, NULL, 0);
}

/* A connection of a tls = true listener: TLS under HTTP/1 (or HTTP/2). */
static int conn_tls(lx_worker_t *w, lx_conn_t *c) {
    int r = w->gen->tls_base ? lx_tls_new(&c->link.tp, w->gen->tls_base, pick_cert, tls_ready, w)
                             : -EINVAL;
    if (r < 0) {
        lx_conn_close(c);
        return r;
    }
    if (c->h2_ok) lx_tls_offer_h2(&c->link.tp);
    return 0;
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
    c->h2_ok = (unsigned)!!l->http2;
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
    c->h2_ok = (flags & LX_CONN_H2) != 0;
    conn_setup(w, c);
    if ((flags & LX_CONN_TLS) && conn_tls(w, c) < 0) return -ENOMEM;
    conn_start(c);
    return 0;
}

void lx_conn_drain(lx_conn_t *c) {
    if (c->state == LX_CONN_CLOSED) return;
    c->draining = 1;
    if (c->h2) {
        lx_h2_drain(c);
        return;
    }
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
    if (c->h2) return lx_h2_gen(c);
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

void lx_h1_read_switch(lx_conn_t *c, int on) {
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

/* A listener with http2 = true and no TLS: a client that begins with the
 * HTTP/2 preface speaks h2 by prior knowledge (RFC 9113 3.3); any other
 * speaks HTTP/1. Returns 1 when the bytes were taken (h2, or a part of the
 * preface that more bytes will decide), 0 for HTTP/1. */
int lx_h1_h2_prior(lx_conn_t *c, lx_sess_t *s) {
    /* After a PROXY protocol header, the first request begins at rpos. */
    const char *p = s->rbuf + s->rpos;
    size_t len = s->rlen - s->rpos;
    int m = lx_h2_preface(p, len);
    if (m < 0) {
        /* Neither the preface nor an HTTP/1 request line: a client that
         * means h2 gets h2's answer to a bad preface (GOAWAY with
         * PROTOCOL_ERROR, RFC 9113 3.4), not HTTP/1's 400. */
        m = lx_h1_line_is_http1(p, len, s->rcap - s->rpos);
        if (m > 0) return 0;
        m = m == 0 ? 0 : 1;
    }
    if (m == 0) {
        want_read(c, 1);
        return 1;
    }
    char *b = s->rbuf;
    size_t cap = s->rcap;
    s->rbuf = NULL; /* kept until h2 has read it */
    lx_h1_sess_return(c, s);
    int r = lx_h2_start(c, p, len);
    lx_pool_put(&worker_of(c)->rbufs, b, cap); /* h2 has read it */
    if (r == 0 && c->state != LX_CONN_CLOSED) want_read(c, 1);
    return 1;
}

static void got_bytes(lx_conn_t *c, char *base, size_t n) {
    if (c->state == LX_CONN_LINGER && sess(c) == NULL) {
        /* An HTTP/2 connection's lingering close: dropped. */
        lx_pool_put(&worker_of(c)->rbufs, base, worker_of(c)->rbufs.size);
        return;
    }
    if (c->h2) {
        lx_h2_recv(c, base, n);
        lx_pool_put(&worker_of(c)->rbufs, base, worker_of(c)->rbufs.size);
        return;
    }
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
    if (c->h2_ok && c->nreq == 0 && !c->link.tp.tls && !c->proxy_wait && lx_h1_h2_prior(c, s))
        return;
    int proxied = c->proxy_wait;
    lx_h1_parse(c);
    /* A PROXY header was just taken (serve.c stops there on such a
     * listener): the bytes after it may be h2's preface. */
    if (proxied && !c->proxy_wait && c->h2_ok && c->nreq == 0 && c->state == LX_CONN_IDLE &&
        (s = sess(c)) != NULL && s->rpos < s->rlen && !lx_h1_h2_prior(c, s))
        lx_h1_parse(c);
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
    if (n != UV_EOF || c->state == LX_CONN_LINGER || c->h2) {
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
        if (s && s->rpos < s->rlen && c->state == LX_CONN_IDLE && !c->proxy_wait &&
            !(c->h2_ok && c->nreq == 0)) /* a part of a preface or first line: never whole */
            return;
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
    lx_conn_set_deadline(c, LX_DL_HEADER,
                         c->link.tp.tls ? w->gen->srv.tls.handshake_timeout
                                        : w->gen->srv.header_timeout);
    char *b = lx_pool_get(&w->rbufs);
    if (b == NULL) {
        lx_conn_close(c);
        return;
    }
    ssize_t n = lx_tp_read_now(&c->link.tp, b, w->rbufs.size);
    if (n > 0) {
        got_bytes(c, b, (size_t)n); /* lx_h1_parse decides whether to read on */
        return;
    }
    lx_pool_put(&w->rbufs, b, w->rbufs.size);
    if (n == 0 || (n != -EAGAIN && n != -EINTR)) {
        lx_conn_close(c);
        return;
    }
    want_read(c, 1);
}
