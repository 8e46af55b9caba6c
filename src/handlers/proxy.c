/* The proxy handler: hands a request to an upstream and relays the answer.
 *
 * One request borrows one upstream connection (upstream/upconn.c): an idle
 * one from its loop's pool, or a fresh connect to the next healthy server
 * in weighted round robin. The request head is rewritten once (hop-by-hop
 * fields out, X-Forwarded-*, Via, the site's proxy_headers in) and kept, so
 * that the one retry allowed (a pooled connection the backend had closed)
 * sends it again. The request body flows through the core's body stream:
 * a piece is written, and the next asked for only when it is out, so a
 * slow backend slows the client. The response is parsed strictly
 * (upstream/h1resp.c) and streamed to the client; when the client's output
 * is above its high-water mark, the backend is not read until `proceed`.
 *
 * Lifetime: the handler answers LX_ASYNC and drives itself from the
 * connection's callbacks; it never holds the request. The core tells it
 * when the client is gone (r->on_abort, or the producer's stop), and it
 * then closes the upstream connection (a connection in the middle of a
 * response is never pooled) and frees its state at once, so no callback
 * of it can reach a dead request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../log.h"
#include "../stats.h"
#include "../upstream/h1resp.h"
#include "../upstream/upconn.h"
#include "../worker.h"
#include "handler.h"
#include "proxy_fields.h"

/* A server's health and rotation, per loop (nginx keeps them per worker
 * too unless told to share a zone). */
typedef struct {
    uint32_t fails;      /**< failures in the current window */
    uint64_t fail_start; /**< loop ms the window began */
    uint64_t down_until; /**< loop ms it is skipped until */
    int64_t current;     /**< smooth weighted round robin's running weight */
} px_peer_t;

/* g->proxy: every loop's peers of every upstream. */
typedef struct {
    size_t total;   /**< servers of all upstreams */
    size_t *offset; /**< of each upstream's first server */
    px_peer_t *peers;
} px_gen_t;

/* Where the request body stands on its way to the upstream. */
typedef enum {
    PX_BODY_NONE,    /**< none, or not for this upstream (already dropped) */
    PX_BODY_EXPECT,  /**< Expect: 100-continue went on; the backend's 100 starts it */
    PX_BODY_PENDING, /**< to be read once the head is out */
    PX_BODY_SENDING, /**< read from the client and written on */
    PX_BODY_SENT,    /**< all of it is out */
    PX_BODY_CUT,     /**< given up (the backend answered first): the connection is not reused */
} px_body_t;

typedef struct px_s {
    lx_req_t *r;
    const lx_upstream_t *u;
    px_peer_t *peers;        /**< this loop's, for u */
    lx_uploop_t *ul;         /**< this loop's pools */
    lx_upconn_t *uc;         /**< the connection, or NULL */
    lx_h1resp_t resp;        /**< the response parser (its buffers kept with a spare) */
    lx_buf_t head;           /**< the request head as sent (its room kept with a spare) */
    struct px_loop_s *pl;    /**< this loop's proxy state */
    lx_spare_t spare;        /**< in pl's spares */
    uint64_t tried;          /**< servers tried (bit i: server i; past 64 not tracked) */
    size_t picks;            /**< servers picked so far: never more than the upstream has */
    uint64_t started;        /**< loop ms the request was handed over */
    int server;              /**< index of the server in use */
    int last_status;         /**< what the failures so far add up to: 502 or 504 */
    uint8_t body;            /**< px_body_t */
    unsigned busy;           /**< our code is on the stack: a free waits */
    unsigned head_out : 1;   /**< the head is written */
    unsigned got_bytes : 1;  /**< a byte of the response came */
    unsigned responding : 1; /**< the final response's head went to the client */
    unsigned paused : 1;     /**< the client's output is full: the backend is not read */
    unsigned retried : 1;    /**< the one retry on a fresh connection was made */
    unsigned fresh : 1;      /**< the next connection is a new one, not a pooled one */
    unsigned dead : 1;       /**< the client is gone: free when busy drops to 0 */
    unsigned chunked : 1;    /**< the body goes on in chunked framing */
    unsigned expect : 1;     /**< the head asks the backend for 100 Continue */
    unsigned upgrade : 1;    /**< the head asks the backend for an Upgrade (WebSocket) */
    unsigned tunnel : 1;     /**< the backend said 101: bytes flow both ways as they are */
} px_t;

/* The handler's per-loop state (w->hstate): the upstream pools, and the
 * request states of finished requests kept for the next ones, with their
 * buffers, so that a proxied request costs no allocation: it made five
 * (its state, its head, the parser's three) and freed them again. */
/* At most (spares.h: fewer once the load drops, none under ASan). */
#define PX_SPARES LX_SPARES_KEEP(1024)
typedef struct px_loop_s {
    lx_uploop_t *ul;
    lx_spares_t spares;
} px_loop_t;

/* Index of this handler in lx_handlers[]: w->hstate. Set by the first
 * px_loop_init, which runs in the main thread before any worker thread
 * starts; the workers only read it (set lazily by each, it was a data race
 * TSan reported). */
static int px_slot = -1;

static px_loop_t *loop_state(lx_worker_t *w) {
    return px_slot < 0 ? NULL : w->hstate[px_slot];
}

/* ---- per generation, per loop --------------------------------------- */

static int px_gen_init(lx_gen_t *g, const char *file, const char *prefix, int nloops, char *err,
                       size_t errlen) {
    (void)file;
    (void)prefix;
    if (g->nupstreams == 0) return 0;
    px_gen_t *pg = calloc(1, sizeof(*pg));
    if (pg) pg->offset = calloc(g->nupstreams, sizeof(size_t));
    for (size_t i = 0; pg && pg->offset && i < g->nupstreams; i++) {
        pg->offset[i] = pg->total;
        pg->total += g->upstreams[i].nservers;
    }
    if (pg && pg->offset)
        pg->peers = calloc((size_t)(nloops ? nloops : 1) * pg->total, sizeof(px_peer_t));
    if (pg == NULL || pg->offset == NULL || pg->peers == NULL) {
        if (pg) free(pg->offset);
        free(pg);
        snprintf(err, errlen, "out of memory for upstream state");
        return -ENOMEM;
    }
    g->proxy = pg;
    return 0;
}

static void px_gen_free(lx_gen_t *g) {
    px_gen_t *pg = g->proxy;
    if (pg == NULL) return;
    free(pg->peers);
    free(pg->offset);
    free(pg);
    g->proxy = NULL;
}

static int px_loop_init(lx_worker_t *w, void **state) {
    if (px_slot < 0)
        for (size_t i = 0; i < lx_nhandlers; i++)
            if (lx_handlers[i] == &lx_proxy_handler) px_slot = (int)i;
    px_loop_t *pl = calloc(1, sizeof(*pl));
    if (pl && (pl->ul = lx_uploop_new(&w->loop)) == NULL) {
        free(pl);
        pl = NULL;
    }
    if (pl) lx_spares_init(&pl->spares, PX_SPARES);
    *state = pl;
    return pl ? 0 : -ENOMEM;
}

static void px_loop_adopt(lx_worker_t *w, void *state, const lx_gen_t *g) {
    (void)w;
    px_loop_t *pl = state;
    if (pl) lx_uploop_retune(pl->ul, g->upstreams, g->nupstreams);
}

static void px_destroy(px_t *px) {
    lx_h1resp_free(&px->resp);
    free(px->head.p);
    free(px);
}

static void px_destroy_spare(lx_spare_t *sp) {
    px_destroy(container_of(sp, px_t, spare));
}

static void px_loop_tick(lx_worker_t *w, void *state) {
    (void)w;
    px_loop_t *pl = state;
    if (pl) lx_spares_trim(&pl->spares, 0, px_destroy_spare);
}

static void px_loop_free(lx_worker_t *w, void *state) {
    (void)w;
    px_loop_t *pl = state;
    lx_spares_trim(&pl->spares, 1, px_destroy_spare);
    lx_uploop_free(pl->ul);
    free(pl);
}

/* A new request's state: a spare, emptied but for its buffers, or a new
 * one. */
static px_t *px_new(px_loop_t *pl) {
    lx_spare_t *sp = lx_spares_take(&pl->spares);
    if (sp == NULL) {
        px_t *px = calloc(1, sizeof(*px));
        if (px) px->pl = pl;
        return px;
    }
    px_t *px = container_of(sp, px_t, spare);
    lx_h1resp_t resp = px->resp;
    lx_buf_t head = px->head;
    memset(px, 0, sizeof(*px));
    px->resp = resp;
    px->head = head;
    px->pl = pl;
    return px;
}

/* The end of a request's state: kept as a spare while there is room, and
 * unless its buffers grew past LX_SPARE_ROOM (a head near max_header_bytes,
 * or of thousands of short fields: t/185). */
static void px_release(px_t *px) {
    px_loop_t *pl = px->pl;
    if (lx_h1resp_room(&px->resp) + px->head.cap > LX_SPARE_ROOM ||
        !lx_spares_put(&pl->spares, &px->spare))
        px_destroy(px);
}

/* ---- servers: rotation and passive health --------------------------- */

static int peer_usable(const px_peer_t *p, uint64_t now) {
    return p->down_until <= now;
}

/* Smooth weighted round robin (as nginx's): each usable server gains its
 * weight, the one with the most is chosen and loses the total. */
static int pick(px_t *px, uint64_t now) {
    const lx_upstream_t *u = px->u;
    int best = -1;
    int64_t total = 0;
    for (size_t i = 0; i < u->nservers; i++) {
        px_peer_t *p = &px->peers[i];
        if (i < 64 && (px->tried >> i) & 1) continue;
        if (!peer_usable(p, now)) continue;
        p->current += u->servers[i].weight;
        total += u->servers[i].weight;
        if (best < 0 || p->current > px->peers[best].current) best = (int)i;
    }
    if (best >= 0) px->peers[best].current -= total;
    return best;
}

static void peer_failed(px_t *px, uint64_t now) {
    const lx_upstream_t *u = px->u;
    px_peer_t *p = &px->peers[px->server];
    lx_st_peer_t *ps = lx_st_peer(px->r->w->stats, u->servers[px->server].stat_slot);
    if (ps) LX_ST_INC(&ps->failures);
    /* A lone server is never marked down (as nginx does): skipping it
     * would turn one failure, a restart say, into fail_timeout of 502s
     * for everyone, with no other server to take them. */
    if (u->max_fails == 0 || u->nservers == 1) return;
    if (now - p->fail_start > u->fail_timeout) {
        p->fail_start = now;
        p->fails = 0;
    }
    if (++p->fails >= u->max_fails) {
        p->down_until = now + u->fail_timeout;
        p->fails = 0;
        lx_log_warn("upstream %s: server %s marked down for %u ms", u->name,
                    u->servers[px->server].addr_text, u->fail_timeout);
    }
}

static void peer_ok(px_t *px) {
    px_peer_t *p = &px->peers[px->server];
    p->fails = 0;
    p->down_until = 0;
}

/* ---- lifetime ------------------------------------------------------- */

static void px_abort(lx_req_t *r);
static const lx_upconn_ops_t px_ops;
static const lx_h1resp_ops_t px_resp_ops;

static void px_drop_conn(px_t *px) {
    if (px->uc) lx_upconn_close(px->uc);
    px->uc = NULL;
}

/* Lets go of the request (it is alive: the caller answers it next). */
static void px_free(px_t *px) {
    lx_req_t *r = px->r;
    if (!px->dead) {
        r->on_abort = NULL;
        if (r->handler_data == px) r->handler_data = NULL;
        r->upstream_ms = (uint32_t)(uv_now(&r->w->loop) - px->started);
    }
    px_drop_conn(px);
    if (px->busy) {
        px->dead = 1; /* released by px_leave */
        return;
    }
    px_release(px);
}

/* Around each of our callbacks: the request that ends inside one is
 * finished after it (lx_req_enter), and px lives until it returns. */
static void px_enter(px_t *px) {
    px->busy++;
    lx_req_enter(px->r);
}

static void px_leave(px_t *px) {
    lx_req_t *r = px->r;
    if (--px->busy == 0 && px->dead) px_release(px);
    lx_req_leave(r);
}

static void up_failed(lx_req_t *r, const lx_upstream_t *u) {
    lx_st_upstream_t *us = lx_st_upstream(r->w->stats, u->stat_slot);
    if (us) LX_ST_INC(&us->failures);
}

static void px_fail(px_t *px, int status) {
    lx_req_t *r = px->r;
    up_failed(r, px->u);
    px_free(px);
    lx_request_finish(r, status);
}

/* ---- connecting and sending ----------------------------------------- */

static void px_send_head(px_t *px);

/* Starts on the next server (or, for the retry, a fresh connection to the
 * same one); returns 0, or the status the request ends with. */
static int px_next(px_t *px) {
    uint64_t now = uv_now(&px->r->w->loop);
    for (;;) {
        int i = px->server;
        if (!px->fresh) {
            /* tried stops a server past the 64th being picked again only
             * until max_fails marks it down; with max_fails = 0 a request
             * to 65 refusing servers went round them for ever. */
            if (px->picks == px->u->nservers) return px->last_status;
            i = pick(px, now);
            if (i < 0) return px->last_status;
            px->picks++;
        }
        px->server = i;
        if (i < 64) px->tried |= 1ull << i;
        const lx_upstream_server_t *srv = &px->u->servers[i];
        px->r->upstream_addr = srv->addr_text;
        lx_uppool_t *pool = lx_uppool_of(px->ul, srv);
        if (pool == NULL) return 500;
        /* The answer is read as one to the method the head names (r->head
         * says what the client gets): a GET's body read as a HEAD's
         * answer's stayed on the connection, the next request's answer. */
        lx_h1resp_reset(&px->resp, px->u->max_header_bytes, px->r->method == HTTP_HEAD,
                        &px_resp_ops, px);
        px->resp.upgrade = px->upgrade;
        px->got_bytes = 0;
        px->head_out = 0;
        /* keepalive = 0 takes none, also of those pooled before a reload
         * set it (t/189). */
        if (!px->fresh && px->u->keepalive &&
            (px->uc = lx_upconn_take(pool, &px_ops, px)) != NULL) {
            px_send_head(px);
            return 0;
        }
        px->fresh = 0;
        int rc = lx_upconn_connect(pool, srv, &px_ops, px, px->u->connect_timeout, &px->uc);
        if (rc == 0) return 0;
        px->uc = NULL;
        lx_log_error("upstream %s: connect to %s: %s", px->u->name, srv->addr_text,
                     uv_strerror(rc));
        peer_failed(px, now);
    }
}

static void px_start_body(px_t *px);

/* The upstream connection failed (or said something we cannot relay). */
static void px_error(px_t *px, int err, const char *why) {
    lx_req_t *r = px->r;
    const lx_upstream_server_t *srv = &px->u->servers[px->server];
    int reused = px->uc && px->uc->nreq > 0;
    px_drop_conn(px);
    if (px->responding) {
        /* The client has part of the answer: the body is cut, and the
         * connection ends with it so that the client sees it was. */
        lx_log_error("upstream %s: %s: %s after the response began", px->u->name, srv->addr_text,
                     why ? why : uv_strerror(err));
        r->keepalive = 0;
        px_fail(px, 502);
        return;
    }
    /* The idle-close race: a pooled connection the backend closed just as
     * it was lent (or that held stray bytes, which are no response to this
     * request). Nothing of it reached the backend's application, so an
     * idempotent request goes again once, on a new connection. */
    int idempotent = r->method == HTTP_GET || r->method == HTTP_HEAD || r->method == HTTP_OPTIONS ||
                     r->method == HTTP_PUT || r->method == HTTP_DELETE || r->method == HTTP_TRACE;
    int stale = err == UV_EOF || err == UV_ECONNRESET || err == UV_EPIPE
                    ? !px->got_bytes
                    : err == UV_EPROTO && px->resp.parser.status_code == 0;
    int race = reused && stale;
    if (race && !px->retried && idempotent &&
        (px->body == PX_BODY_NONE || px->body == PX_BODY_PENDING || px->body == PX_BODY_EXPECT)) {
        px->retried = 1;
        px->fresh = 1;
        if (px->body != PX_BODY_NONE) px->body = px->expect ? PX_BODY_EXPECT : PX_BODY_PENDING;
        int rc = px_next(px);
        if (rc) px_fail(px, rc);
        return;
    }
    lx_log_error("upstream %s: %s: %s", px->u->name, srv->addr_text, why ? why : uv_strerror(err));
    /* A pooled connection the backend closed says nothing about the
     * server: counted as a failure, one POST that met the idle-close race
     * marked a healthy server down (502 for everyone for fail_timeout). */
    if (!race &&
        (err == UV_ETIMEDOUT || err == UV_ECONNRESET || err == UV_EOF || err == UV_ECONNREFUSED))
        peer_failed(px, uv_now(&r->w->loop));
    px_fail(px, err == UV_ETIMEDOUT ? 504 : 502);
}

static void on_connected(lx_upconn_t *uc, int status) {
    px_t *px = uc->data;
    if (status == 0) {
        px_enter(px);
        px_send_head(px);
        px_leave(px);
        return;
    }
    const lx_upstream_server_t *srv = &px->u->servers[px->server];
    const char *why = lx_upconn_why(uc);
    lx_log_error("upstream %s: connect to %s: %s", px->u->name, srv->addr_text,
                 why ? why : uv_strerror(status));
    if (px->uc) lx_upconn_close(px->uc); /* (a timed-out one is closed already) */
    px->uc = NULL;
    px->last_status = status == UV_ETIMEDOUT ? 504 : 502;
    peer_failed(px, uv_now(&px->r->w->loop));
    /* Nothing was sent: any request may go to the next server. */
    px_enter(px);
    int rc = px_next(px);
    if (rc) px_fail(px, rc);
    px_leave(px);
}

static void px_send_head(px_t *px) {
    lx_upconn_deadline(px->uc, px->u->send_timeout);
    if (lx_upconn_read(px->uc, 1) < 0) {
        px_error(px, UV_EPIPE, NULL);
        return;
    }
    uv_buf_t b = uv_buf_init(px->head.p, (unsigned)px->head.len);
    int rc = lx_upconn_write_head(px->uc, &b, 1);
    if (rc < 0) {
        px_error(px, rc, NULL);
        return;
    }
    if (rc == 0) return; /* on_written goes on */
    px->head_out = 1;
    px_start_body(px);
}

static void px_body_cb(lx_req_t *r, const char *p, size_t len, int status);

/* The deadline while luxd waits on the client, not on the backend (for the
 * next piece of the request body, or for room in the client's output):
 * none, unless a response is being read meanwhile. The client's own
 * timeouts bound that wait; a backend timed out (504, and marked down) for
 * a slow client would let one client take an upstream away from all. */
static void wait_client(px_t *px) {
    lx_upconn_deadline(px->uc, px->responding && !px->paused ? px->u->read_timeout : 0);
}

/* The head is out: the body follows (or waits for the backend's 100). */
static void px_start_body(px_t *px) {
    if (px->body == PX_BODY_EXPECT) {
        /* As curl does, a backend that says nothing for a second is sent
         * the body anyway (RFC 9110 10.1.1 allows it). */
        lx_upconn_deadline(px->uc, 1000);
        return;
    }
    if (px->body != PX_BODY_PENDING) {
        lx_upconn_deadline(px->uc, px->u->read_timeout);
        return;
    }
    px->body = PX_BODY_SENDING;
    int rc = lx_body_read(px->r, px_body_cb);
    if (rc > 0) px_fail(px, rc);
}

static void px_body_cb(lx_req_t *r, const char *p, size_t len, int status) {
    px_t *px = r->handler_data;
    if (px == NULL || px->body != PX_BODY_SENDING) return; /* we let go of the body */
    if (status < 0) {
        /* The core answers the request (the body broke a limit or the
         * client went away): the upstream connection is not reusable. */
        px_free(px);
        return;
    }
    px_enter(px);
    if (p == NULL) {
        px->body = PX_BODY_SENT;
        if (px->chunked) {
            uv_buf_t b = uv_buf_init("0\r\n\r\n", 5);
            int rc = lx_upconn_write(px->uc, &b, 1);
            if (rc < 0) px_error(px, rc, NULL);
        }
        if (!px->dead && px->uc && !px->uc->writing)
            lx_upconn_deadline(px->uc, px->u->read_timeout);
        px_leave(px);
        return;
    }
    char size[24];
    uv_buf_t b[3];
    unsigned n = 0;
    if (px->chunked)
        b[n++] = uv_buf_init(size, (unsigned)snprintf(size, sizeof(size), "%zx\r\n", len));
    b[n++] = uv_buf_init((char *)p, (unsigned)len);
    if (px->chunked) b[n++] = uv_buf_init("\r\n", 2);
    lx_upconn_deadline(px->uc, px->u->send_timeout);
    int rc = lx_upconn_write(px->uc, b, n);
    if (rc < 0) {
        px_error(px, rc, NULL);
    } else if (rc == 1) {
        wait_client(px);
        lx_body_more(r);
    }
    px_leave(px);
}

static void on_written(lx_upconn_t *uc, int status) {
    px_t *px = uc->data;
    px_enter(px);
    if (status < 0) {
        if (px->responding) {
            /* The backend answered and stopped reading the body: the
             * answer is relayed; the connection is not used again. */
            px->body = PX_BODY_CUT;
        } else {
            px_error(px, status, NULL);
        }
    } else if (px->tunnel) {
        lx_upconn_deadline(uc, px->u->read_timeout);
        lx_tunnel_more(px->r);
    } else if (!px->head_out) {
        px->head_out = 1;
        px_start_body(px);
    } else if (px->body == PX_BODY_SENDING) {
        wait_client(px);
        lx_body_more(px->r);
    } else {
        lx_upconn_deadline(uc, px->u->read_timeout);
    }
    px_leave(px);
}

static void on_timeout(lx_upconn_t *uc) {
    px_t *px = uc->data;
    px_enter(px);
    if (px->body == PX_BODY_EXPECT && !px->got_bytes) {
        px->body = PX_BODY_PENDING;
        px_start_body(px);
    } else {
        px_error(px, UV_ETIMEDOUT, NULL);
    }
    px_leave(px);
}

/* ---- the response --------------------------------------------------- */

static void px_proceed(lx_req_t *r) {
    px_t *px = r->handler_data;
    if (px == NULL || px->uc == NULL) return;
    if (px->paused) {
        px->paused = 0;
        lx_upconn_deadline(px->uc, px->u->read_timeout); /* lifted while paused */
    }
    if (lx_upconn_read(px->uc, 1) < 0) px_error(px, UV_EPIPE, NULL);
}

static const lx_producer_t px_producer = {px_proceed, px_abort};

/* Returns -1 once px is dead (what it called let the request go: the
 * client's write failed, or the body did): the parser must stop, or it
 * went on through the rest of the buffer, into the final response's head,
 * with px's parser state freed and its request answered. */
static int on_resp_head(lx_h1resp_t *p) {
    px_t *px = p->data;
    lx_req_t *r = px->r;
    if (px->dead) return -1;
    if (p->status == 101) {
        /* Switching to what the request asked for: the 101 goes to the
         * client with the backend's Upgrade; on_read starts the tunnel. */
        peer_ok(px);
        r->upstream_status = 101;
        px->responding = 1;
        px->tunnel = 1;
        lx_resp_init(r, 101);
        lx_proxy_relay_fields(r, p);
        lx_str_t up = lx_h1resp_get(p, "upgrade", 7);
        lx_resp_field(r, LX_STR("Upgrade"), up);
        lx_resp_header(r, "Connection: upgrade\r\n", 21);
        lx_resp_send_headers(r);
        return px->dead ? -1 : 0;
    }
    if (p->status < 200) {
        if (p->status == 100) {
            /* The backend wants the body: now the client is asked for it
             * (lx_body_read sends the client its 100). A 100 that comes
             * while the head is still being written waits for on_written:
             * a body piece now would meet the write in flight (-EBUSY, a
             * 502). */
            if (px->body == PX_BODY_EXPECT) {
                px->body = PX_BODY_PENDING;
                if (px->head_out) px_start_body(px);
            }
            return px->dead ? -1 : 0;
        }
        /* 103 Early Hints and others: passed on to a client that can take
         * them (RFC 9110 15.2: never to HTTP/1.0). */
        if ((r->http_major == 2 || r->http_minor >= 1) && r->resp.state == LX_RESP_NONE) {
            lx_resp_init(r, p->status);
            lx_proxy_relay_fields(r, p);
            lx_resp_interim(r);
        }
        return px->dead ? -1 : 0;
    }
    peer_ok(px);
    r->upstream_status = p->status;
    if (px->body == PX_BODY_EXPECT || px->body == PX_BODY_PENDING) px->body = PX_BODY_CUT;
    px->responding = 1;
    lx_resp_init(r, p->status);
    lx_proxy_relay_fields(r, p);
    if (r->site->headers_len) lx_resp_header(r, r->site->headers, r->site->headers_len);
    r->resp.length = p->length;
    lx_stream_start(r, &px_producer);
    return px->dead ? -1 : 0;
}

static int on_resp_body(lx_h1resp_t *p, const char *at, size_t len) {
    px_t *px = p->data;
    if (px->dead) return -1;
    if (lx_stream_send(px->r, at, len) == -EAGAIN) px->paused = 1;
    return px->dead ? -1 : 0;
}

static const lx_h1resp_ops_t px_resp_ops = {on_resp_head, on_resp_body};

/* ---- the tunnel (after a 101) --------------------------------------- */

/* Bytes from the backend to the client, as they are. */
static void tunnel_down(px_t *px, const char *p, size_t len) {
    if (len && lx_stream_send(px->r, p, len) == -EAGAIN) px->paused = 1;
    if (!px->dead && px->paused && px->uc) {
        lx_upconn_read(px->uc, 0);
        lx_upconn_deadline(px->uc, 0); /* waiting on the client: px_proceed */
    }
}

/* Bytes from the client to the backend; the next piece is asked for when
 * this one is out (on_written), so neither side's buffer grows. */
static void tunnel_up(lx_req_t *r, const char *p, size_t len, int status) {
    px_t *px = r->handler_data;
    if (px == NULL) return;
    if (status < 0 || p == NULL || px->uc == NULL) {
        px_abort(r);
        return;
    }
    px_enter(px);
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)len);
    lx_upconn_deadline(px->uc, px->u->read_timeout);
    int rc = lx_upconn_write(px->uc, &b, 1);
    if (rc < 0)
        px_error(px, rc, NULL);
    else if (rc == 1)
        lx_tunnel_more(r);
    px_leave(px);
}

/* The final response is complete: the connection goes back to its pool if
 * nothing about it is in doubt. */
static void px_done(px_t *px, int extra_bytes) {
    lx_req_t *r = px->r;
    lx_upconn_t *uc = px->uc;
    px->uc = NULL;
    int reuse = !extra_bytes && lx_h1resp_keepalive(&px->resp) &&
                (px->body == PX_BODY_NONE || px->body == PX_BODY_SENT) && !uc->writing;
    if (reuse) {
        /* It stays read (a pooled connection is): stopping and starting
         * again costs two epoll_ctl calls for nothing. */
        lx_upconn_deadline(uc, 0);
        /* The pool is the address's, shared by every upstream naming it:
         * it keeps the most any of them asks for. */
        const lx_upstream_server_t *srv = &px->u->servers[px->server];
        lx_upconn_put(uc, px->u->keepalive ? srv->pool_keepalive : 0, px->u->keepalive_timeout);
    } else {
        lx_upconn_close(uc);
    }
    px_free(px);
    lx_stream_end(r);
}

static void on_read(lx_upconn_t *uc, ssize_t nread, const char *buf) {
    px_t *px = uc->data;
    px_enter(px);
    if (px->tunnel) {
        lx_upconn_deadline(uc, px->u->read_timeout);
        if (nread < 0) {
            /* The backend's side ended: so does the client's, once what
             * is queued for it is out. */
            lx_req_t *r = px->r;
            px_free(px);
            lx_stream_end(r);
        } else {
            tunnel_down(px, buf, (size_t)nread);
        }
        px_leave(px);
        return;
    }
    if (nread < 0) {
        if (nread == UV_EOF && lx_h1resp_eof(&px->resp) == LX_H1R_DONE)
            px_done(px, 1);
        else
            px_error(px, (int)nread, nread == UV_EOF ? px->resp.why : NULL);
        px_leave(px);
        return;
    }
    px->got_bytes = 1;
    lx_upconn_deadline(uc, px->u->read_timeout);
    size_t used;
    lx_h1resp_rc_t rc = lx_h1resp_feed(&px->resp, buf, (size_t)nread, &used);
    if (px->dead) {
        px_leave(px);
        return;
    }
    if (rc == LX_H1R_UPGRADE) {
        lx_upconn_deadline(uc, px->u->read_timeout);
        lx_tunnel_start(px->r, &px_producer, tunnel_up);
        if (!px->dead) tunnel_down(px, buf + used, (size_t)nread - used);
    } else if (rc == LX_H1R_ERROR)
        px_error(px, UV_EPROTO, px->resp.why);
    else if (rc == LX_H1R_DONE)
        px_done(px, used < (size_t)nread);
    else if (px->paused && px->uc) {
        lx_upconn_read(px->uc, 0);
        lx_upconn_deadline(px->uc, 0); /* waiting on the client: px_proceed */
    }
    px_leave(px);
}

static const lx_upconn_ops_t px_ops = {on_connected, on_read, on_written, on_timeout};

/* The client is gone (r->on_abort, or the producer's stop): nothing of
 * the upstream connection is kept. r is not touched after this. */
static void px_abort(lx_req_t *r) {
    px_t *px = r->handler_data;
    r->on_abort = NULL;
    r->handler_data = NULL;
    if (px == NULL) return;
    px->dead = 1;
    px_free(px);
}

/* ---- the handler ---------------------------------------------------- */

int lx_proxy_handoff(lx_req_t *r, const lx_upstream_t *u) {
    px_loop_t *pl = loop_state(r->w);
    px_gen_t *pg = r->gen->proxy;
    if (pl == NULL || pg == NULL) return 500;
    lx_st_upstream_t *us = lx_st_upstream(r->w->stats, u->stat_slot);
    if (us) LX_ST_INC(&us->requests);
    px_t *px = px_new(pl);
    if (px == NULL) return 500;
    px->r = r;
    px->u = u;
    px->ul = pl->ul;
    px->peers = &pg->peers[(size_t)r->w->index * pg->total + pg->offset[u->index]];
    px->last_status = 502;
    px->started = uv_now(&r->w->loop);
    /* A body some handler already dropped is not the backend's, nor is
     * that of a request whose error page this is: the page is a GET, and
     * the body was meant for the location that failed (perhaps another
     * upstream); the core drops it after the answer. */
    px->body = r->body_state == LX_BODY_UNREAD && !r->error_status ? PX_BODY_PENDING : PX_BODY_NONE;
    lx_proxy_head_t h = {0};
    if (lx_proxy_head(r, u, px->body != PX_BODY_NONE, &px->head, &h) < 0) {
        px_release(px);
        return 500;
    }
    px->chunked = h.chunked;
    px->expect = h.expect;
    px->upgrade = h.upgrade;
    if (h.expect) px->body = PX_BODY_EXPECT;
    r->handler_data = px;
    r->on_abort = px_abort;
    px_enter(px);
    int rc = px_next(px);
    if (rc) {
        lx_log_error("upstream %s: no server to send %.*s to", u->name, (int)r->target.len,
                     r->target.p);
        px_free(px);
    }
    px_leave(px);
    if (rc) {
        up_failed(r, u);
        return rc;
    }
    return r->resp.state == LX_RESP_NONE ? LX_ASYNC : LX_DONE;
}

static int px_handle(lx_req_t *r) {
    const lx_site_t *s = r->site;
    const lx_upstream_t *u = s->proxy ? s->proxy : s->fallback;
    if (u == NULL) return LX_DECLINED;
    return lx_proxy_handoff(r, u);
}

const lx_handler_t lx_proxy_handler = {
    .name = "proxy",
    .gen_init = px_gen_init,
    .gen_free = px_gen_free,
    .loop_init = px_loop_init,
    .loop_free = px_loop_free,
    .loop_adopt = px_loop_adopt,
    .loop_tick = px_loop_tick,
    .handle = px_handle,
    .methods = LX_METHODS_ALL, /* passed on as sent: the backend decides */
};
