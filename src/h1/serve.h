/* Inside h1/: what conn.c (the connection: deadlines, sessions, lifetime,
 * reading) and serve.c (its requests one after another: parse, dispatch,
 * write, end) share. Nothing outside h1/ includes it. */
#ifndef LX_H1_SERVE_H
#define LX_H1_SERVE_H

#include "h1/conn.h"
#include "stats.h"

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

/* A deadline (conn.h lx_conn_t.dl) at a loop time. */
void lx_h1_set_deadline_at(lx_conn_t *c, lx_dl_kind_t kind, uint64_t due);
void lx_h1_read_switch(lx_conn_t *c, int on);
/* Starts or stops reading; inline, as most calls find it as wanted. */
static inline void want_read(lx_conn_t *c, int on) {
    if ((unsigned)on != c->reading) lx_h1_read_switch(c, on);
}

/* Sessions (conn.c). */
void lx_h1_release_gen(lx_sess_t *s);
void lx_h1_sess_maybe_free(lx_sess_t *s);
void lx_h1_sess_return(lx_conn_t *c, lx_sess_t *s);
void lx_h1_sess_detach(lx_conn_t *c);

/* A request refused or failed while it was read (serve.c). */
int lx_h1_body_failed(lx_sess_t *s, int err);
void lx_h1_keep_first_line(lx_sess_t *s);

/* On a listener with http2 = true, before the first request: whether the
 * buffered bytes (from rpos) begin HTTP/2 by prior knowledge, which then
 * takes the connection (1), or a part of its preface that more bytes will
 * decide (1 too), or HTTP/1 (0). */
int lx_h1_h2_prior(lx_conn_t *c, lx_sess_t *s);

/* Requests (serve.c): parse what is buffered, write what is queued, end
 * the request whose response is out. */
void lx_h1_parse(lx_conn_t *c);
void lx_h1_flush(lx_sess_t *s);
void lx_h1_request_end(lx_sess_t *s);

#endif
