/* HTTP/2 (libnghttp2) on a client connection: what the connection (h1/conn.c,
 * which owns the socket, its transport and its deadlines) asks of it once
 * the connection speaks h2, by ALPN over TLS or by the client's preface on a
 * listener with http2 = true. Each stream is a request of the core
 * (core/proto.h), with its own arena and output. */
#ifndef LX_H2_H
#define LX_H2_H

#include <stddef.h>

#include "deadline.h"
#include "spares.h"

typedef struct lx_conn_s lx_conn_t;
typedef struct lx_h2_s lx_h2_t;
typedef struct lx_gen_s lx_gen_t;
typedef struct lx_worker_s lx_worker_t;

/* The client connection preface (RFC 9113 3.4) is 24 bytes. Whether the n
 * bytes at p are it (1), a part of it that more bytes may complete (0), or
 * not it (-1). */
#define LX_H2_PREFACE_LEN 24
int lx_h2_preface(const char *p, size_t n);

/* c speaks HTTP/2 from now on; the n bytes at p (n may be 0) are the first
 * it read, the preface included. Returns 0, or a negative errno when it
 * could not start (c is closed then). */
int lx_h2_start(lx_conn_t *c, const char *p, size_t n);
/* Bytes read from the client. */
void lx_h2_recv(lx_conn_t *c, const char *p, size_t n);
/* Stop keep-alive: GOAWAY; the streams begun finish, then the close. */
void lx_h2_drain(lx_conn_t *c);
/* The connection closes: every stream's request is told its client is
 * gone; the h2 state is freed once nothing refers to it. */
void lx_h2_detach(lx_conn_t *c);
/* A deadline of c's came (conn.c lx_conn_on_deadline). */
void lx_h2_deadline(lx_conn_t *c, lx_dl_kind_t kind);
/* A generation one of c's streams holds, the oldest first, or NULL. */
const lx_gen_t *lx_h2_gen(const lx_conn_t *c);
/* The loop's streams kept for reuse (spares.h): at each tick, the ones
 * unused since the last; all, when the loop ends. */
void lx_h2_spares_trim(lx_worker_t *w, int all);
/* The most a loop keeps (as h1's sessions: a thousand streams in flight
 * at -c 100 -m 10). */
#define LX_H2_STREAMS_KEEP LX_SPARES_KEEP(1024)

#endif
