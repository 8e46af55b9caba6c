/* The transport: the bytes of a client connection, plain or TLS, under
 * HTTP/1 (conn.c reads, out.c writes). The protocol above never asks which
 * it runs on: it reads and writes plain text through these calls, with
 * libuv's callback types, and a TLS connection's transport turns that into
 * records on the same uv_tcp_t (net/tls.c).
 *
 * The plain transport is libuv itself: each call here is one branch and
 * the libuv call, inline, so plain HTTP pays nothing for the layer. The
 * one thing a transport may lack is sendfile(2): TLS cannot send a file's
 * bytes without reading them (lx_tp_sendfile says -ENOTSUP; with kernel
 * TLS it could, doc/design.md). */
#ifndef LX_NET_TRANSPORT_H
#define LX_NET_TRANSPORT_H

#include <errno.h>
#include <stdint.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <uv.h>

typedef struct lx_tls_s lx_tls_t;

typedef struct lx_tp_s {
    uv_tcp_t tcp;  /**< the socket; tcp.data belongs to the protocol above */
    lx_tls_t *tls; /**< the TLS session over it, or NULL: plain */
} lx_tp_t;

/* A TLS transport's refusal of a peer that spoke plain HTTP to it: what
 * lx_tp_read_start's read callback gets as nread after the transport has
 * answered it (net/tls.c). The connection is to be closed. */
#define LX_TP_EPLAIN (-EPROTONOSUPPORT)

/* What a TLS connection tells of itself, for the access log and policies:
 * its protocol ("TLSv1.3"), cipher (OpenSSL's name), the server name the
 * client sent, "r" when it resumed a session ("." when not), and the
 * verified client certificate's subject (RFC 2253) and SHA-256
 * fingerprint (hex). NULL on a plain connection, before the handshake is
 * done, or when there is none (no server name, no client certificate). */
typedef enum {
    LX_TLS_PROTOCOL,
    LX_TLS_CIPHER,
    LX_TLS_SNI,
    LX_TLS_REUSED,
    LX_TLS_CLIENT_SUBJECT,
    LX_TLS_CLIENT_FINGERPRINT,
} lx_tls_field_t;
const char *lx_tls_field(const lx_tp_t *tp, lx_tls_field_t f);
/* The session id context the connection's handshake was made under (the
 * vhost and its client certificate policy, net/tlsctx.c), or NULL. */
const unsigned char *lx_tls_sid_ctx(const lx_tp_t *tp, unsigned *len);

int lx_tls_read_start(lx_tp_t *tp, uv_alloc_cb alloc, uv_read_cb read);
int lx_tls_rest(lx_tp_t *tp);
void lx_tls_read_stop(lx_tp_t *tp);
ssize_t lx_tls_try_write(lx_tp_t *tp, const uv_buf_t *bufs, unsigned n);
int lx_tls_write(lx_tp_t *tp, uv_write_t *req, const uv_buf_t *bufs, unsigned n, uv_write_cb cb);
int lx_tls_shutdown(lx_tp_t *tp, uv_shutdown_t *req, uv_shutdown_cb cb);
void lx_tls_close(lx_tp_t *tp, uv_close_cb cb);

/* Reads on; the callbacks get the stream &tp->tcp and plain text. */
static inline int lx_tp_read_start(lx_tp_t *tp, uv_alloc_cb alloc, uv_read_cb read) {
    if (tp->tls) return lx_tls_read_start(tp, alloc, read);
    return uv_read_start((uv_stream_t *)&tp->tcp, alloc, read);
}

static inline void lx_tp_read_stop(lx_tp_t *tp) {
    if (tp->tls)
        lx_tls_read_stop(tp);
    else
        uv_read_stop((uv_stream_t *)&tp->tcp);
}

/* Reads what the socket has now into buf, before the loop polls it (the
 * first bytes of a TCP_DEFER_ACCEPT connection): bytes read, 0 at its end,
 * -EAGAIN when none are there or the transport reads only from the loop. */
static inline ssize_t lx_tp_read_now(lx_tp_t *tp, char *buf, size_t n) {
    if (tp->tls) return -EAGAIN;
    ssize_t r = recv(tp->tcp.io_watcher.fd, buf, n, 0);
    return r < 0 ? -errno : r;
}

/* Writes what the transport takes at once: bytes taken (0 when none, the
 * socket is full), or a negative errno. more: bytes follow at once (a
 * file's, by lx_tp_sendfile), so these may wait for them (MSG_MORE). A
 * TLS transport takes all or nothing: what the socket refuses of its
 * records it sends itself, and takes nothing more until they are gone. */
static inline ssize_t lx_tp_try_write(lx_tp_t *tp, const uv_buf_t *bufs, unsigned n, int more) {
    if (tp->tls) return lx_tls_try_write(tp, bufs, n);
    if (more) {
        struct msghdr mh = {.msg_iov = (struct iovec *)bufs, .msg_iovlen = n};
        ssize_t r = sendmsg(tp->tcp.io_watcher.fd, &mh, MSG_NOSIGNAL | MSG_MORE);
        return r >= 0 ? r : errno == EAGAIN ? 0 : -errno;
    }
    int r = uv_try_write((uv_stream_t *)&tp->tcp, bufs, n);
    return r == UV_EAGAIN ? 0 : r;
}

/* Writes all of bufs, waiting for the socket; cb(req, status) once they
 * are out. One such write is in flight at a time per connection. */
static inline int lx_tp_write(lx_tp_t *tp, uv_write_t *req, const uv_buf_t *bufs, unsigned n,
                              uv_write_cb cb) {
    if (tp->tls) return lx_tls_write(tp, req, bufs, n, cb);
    return uv_write(req, (uv_stream_t *)&tp->tcp, bufs, n, cb);
}

/* Whether lx_tp_sendfile can send a file's bytes without reading them. */
static inline int lx_tp_can_sendfile(const lx_tp_t *tp) {
    return tp->tls == NULL;
}

/* sendfile(2) of n bytes at *off of fd: bytes sent (*off moved on), 0 at
 * the file's end, -EAGAIN when the socket is full, -ENOTSUP when the
 * transport cannot (lx_tp_can_sendfile), another negative errno. */
static inline ssize_t lx_tp_sendfile(lx_tp_t *tp, int fd, uint64_t *off, size_t n) {
    if (tp->tls) return -ENOTSUP;
    off_t o = (off_t)*off;
    ssize_t r = sendfile(tp->tcp.io_watcher.fd, fd, &o, n);
    if (r < 0) return -errno;
    *off = (uint64_t)o;
    return r;
}

/* How long a connection's reading waits before lx_tp_rest. */
#define LX_TP_REST_MS 1000

/* No byte came for LX_TP_REST_MS: the transport lets go of what it holds
 * for traffic only (TLS: its record buffers, 34 KiB and more), which a
 * busy connection keeps rather than allocate and free them for each
 * request. 1 when all went, 0 when some are still in use (records going
 * out): ask again later. The plain transport holds nothing. */
static inline int lx_tp_rest(lx_tp_t *tp) {
    return tp->tls ? lx_tls_rest(tp) : 1;
}

/* Whether lx_tp_rest has anything to let go of. */
static inline int lx_tp_can_rest(const lx_tp_t *tp) {
    return tp->tls != NULL;
}

/* Whether the bytes are encrypted on the wire (a request's scheme). */
static inline int lx_tp_secure(const lx_tp_t *tp) {
    return tp->tls != NULL;
}

/* Bytes written but not yet taken by the socket (libuv's queue). */
static inline size_t lx_tp_queued(const lx_tp_t *tp) {
    return uv_stream_get_write_queue_size((const uv_stream_t *)&tp->tcp);
}

/* Ends the sending side once what was written is out (TLS: after its
 * close_notify). */
static inline int lx_tp_shutdown(lx_tp_t *tp, uv_shutdown_t *req, uv_shutdown_cb cb) {
    if (tp->tls) return lx_tls_shutdown(tp, req, cb);
    return uv_shutdown(req, (uv_stream_t *)&tp->tcp, cb);
}

/* Closes; cb(&tp->tcp) once the socket is closed (writes in flight are
 * cancelled first, as libuv's). The TLS session frees itself after. */
static inline void lx_tp_close(lx_tp_t *tp, uv_close_cb cb) {
    if (tp->tls)
        lx_tls_close(tp, cb);
    else
        uv_close((uv_handle_t *)&tp->tcp, cb);
}

#endif
