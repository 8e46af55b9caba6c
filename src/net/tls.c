/* The TLS transport (transport.h): OpenSSL 3 over the connection's
 * uv_tcp_t, on the loop.
 *
 * Records move through a BIO of our own rather than a socket BIO, so that
 * libuv keeps the socket: reads land in the loop thread's scratch and the
 * BIO hands OpenSSL those bytes where they lie; what OpenSSL writes is
 * appended to the session's record buffer, which goes to the socket with
 * uv_try_write, and what the socket refuses by a uv_write of ours that owns
 * the buffer. One record buffer is filling at a time; writes of ours go in
 * order in libuv's queue, with the protocol's write callback on the last
 * of them, so the protocol's one write in flight means what it does on a
 * plain socket: its bytes are out.
 *
 * Reading stops when the protocol stops it; records read past that point
 * stay in `keep`, and plain text OpenSSL holds stays there: when reading
 * resumes, an idle handle delivers them at the next turn of the loop, as a
 * socket that still has bytes would be readable. */
#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lx.h"
#include "stats.h"

/* Ciphertext read at once: four full records. */
#define TLS_RBUF (64 * 1024 + 4 * 64)
/* Plain text per record: small while a connection starts, or after it was
 * idle, so that the first bytes can be used before a 16 KiB record is
 * whole (TCP's window is small then); full records once it is going. */
#define REC_SMALL      4096
#define REC_FULL       16384
#define REC_SMALL_UPTO (64 * 1024)
#define REC_IDLE_MS    1000
/* A record's bytes past its plain text: its header, the AEAD tag and the
 * content type (TLS 1.3); TLS 1.2's, at most (an explicit IV, a MAC and
 * padding: CBC with SHA-384 takes 85). More than reserved only costs the
 * buffer a realloc (bio_write). */
#define REC_EXPANSION_13 22
#define REC_EXPANSION_12 96
/* Bytes a client may send before its handshake is done: a ClientHello
 * with post-quantum key shares is about 2 KiB, a client certificate chain
 * some more; OpenSSL alone would take a ClientHello of 128 KiB. */
#define HANDSHAKE_MAX (64 * 1024)
/* The longest ClientHello taken. OpenSSL makes room for the length a
 * ClientHello announces (up to 128 KiB) from its first four bytes: 300
 * clients announcing 100000 bytes held 139 KiB each (a break review). A
 * real one is under 2 KiB; some with many tickets or key shares, 4. */
#define CLIENT_HELLO_MAX (16 * 1024)
/* A record buffer larger than this is not kept between writes. */
#define OBUF_KEEP (64 * 1024)

/* The answer to plain HTTP on a TLS port (nginx says 400 too, after its
 * 497): the transport's refusal, in the only language the peer speaks. */
#define PLAIN_BODY "400 Bad Request: this port speaks HTTPS; use an https:// address.\n"
static const char PLAIN_ANSWER[] = "HTTP/1.1 400 Bad Request\r\n"
                                   "Content-Type: text/plain\r\n"
                                   "Content-Length: 66\r\n"
                                   "Connection: close\r\n"
                                   "\r\n" PLAIN_BODY;
_Static_assert(sizeof(PLAIN_BODY) - 1 == 66, "Content-Length of PLAIN_ANSWER");

struct lx_tls_s {
    SSL *ssl;
    lx_tp_t *tp;          /**< NULL once the connection closed */
    uv_idle_t idle;       /**< delivers what is buffered when reading resumes */
    uv_alloc_cb alloc_cb; /**< the protocol's */
    uv_read_cb read_cb;
    lx_tls_pick_fn pick;
    void *pick_arg;
    lx_tls_ready_fn ready;        /**< told when the handshake is done */
    lx_tls_session_fn on_session; /**< a client's: told of each session it may resume */
    unsigned long err;            /**< OpenSSL's error that ended the handshake, or 0 */
    size_t hs_bytes;              /**< bytes read while the handshake was not done */
    lx_tls_hello_scan_t hello;    /**< the ClientHello's length, read before OpenSSL sees it */
    const char *in;               /**< ciphertext the BIO reads from now */
    size_t in_len;                /**< its bytes left */
    char *keep;                   /**< ciphertext read while reading was stopped, or past it */
    size_t keep_len;              /**< bytes in keep */
    size_t keep_cap;              /**< its size */
    char *obuf;                   /**< records made and not yet handed to the socket */
    size_t olen, ocap;            /**< bytes in it, its size */
    uint64_t sent;                /**< plain bytes sent since the start or the last idle spell */
    uint64_t last_write;          /**< loop ms of the last write */
    unsigned inflight;            /**< uv_writes of ours in flight */
    int werr;                     /**< the error one of them met, or 0 */
    unsigned reading : 1;         /**< the protocol reads */
    unsigned eof : 1;             /**< the socket's end was read */
    unsigned first_seen : 1;      /**< the first byte was checked for plain HTTP */
    unsigned closing : 1;         /**< lx_tls_close was called */
    unsigned idle_closed : 1;     /**< idle's close callback ran */
    unsigned failed : 1;          /**< a record or the handshake failed: its session is not kept */
    unsigned hs_done : 1;         /**< the handshake is done and ready was told */
    unsigned fail : 4;            /**< why the handshake failed (LX_TF_* + 1), 0: not known */
    unsigned client_read : 1;     /**< client_subject and client_fp are made */
    unsigned client : 1;          /**< luxd is the client (an upstream connection) */
    unsigned eof_told : 1;        /**< the protocol was told of the end: nothing more is read */
    unsigned h2 : 1;              /**< ALPN may choose h2 (the listener's http2) */
    char *client_subject;         /**< the verified client certificate's subject, or NULL */
    char client_fp[65];           /**< its SHA-256 in hex, or "" */
};

/* A uv_write of ours: the records it sends, and the protocol's write to
 * complete with it (or none). */
typedef struct {
    uv_write_t req;
    lx_tls_t *t;
    char *buf;
    size_t cap; /**< buf's size, for keeping it as the next record buffer */
    uv_write_t *user;
    uv_write_cb cb;
} tls_write_t;

static uv_once_t once = UV_ONCE_INIT;
static BIO_METHOD *bio_method;
static int ex_index = -1;

static lx_tls_t *tls_of(const BIO *b) {
    return BIO_get_data((BIO *)b);
}

static int bio_read(BIO *b, char *buf, int len) {
    lx_tls_t *t = tls_of(b);
    BIO_clear_retry_flags(b);
    if (t->in_len == 0) {
        BIO_set_retry_read(b);
        return -1;
    }
    size_t n = t->in_len < (size_t)len ? t->in_len : (size_t)len;
    memcpy(buf, t->in, n);
    t->in += n;
    t->in_len -= n;
    return (int)n;
}

/* Room for n more bytes in the record buffer: 0, or -1. */
static int obuf_room(lx_tls_t *t, size_t n) {
    if (t->olen + n <= t->ocap) return 0;
    size_t cap = t->ocap ? t->ocap : REC_FULL + 256;
    while (cap < t->olen + n)
        cap *= 2;
    char *nb = realloc(t->obuf, cap);
    if (nb == NULL) return -1;
    t->obuf = nb;
    t->ocap = cap;
    return 0;
}

static int bio_write(BIO *b, const char *buf, int len) {
    lx_tls_t *t = tls_of(b);
    BIO_clear_retry_flags(b);
    if (obuf_room(t, (size_t)len) < 0) return -1;
    memcpy(t->obuf + t->olen, buf, (size_t)len);
    t->olen += (size_t)len;
    return len;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
    (void)b, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b) {
    BIO_set_init(b, 1);
    return 1;
}

static void init_once(void) {
    bio_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "luxd");
    if (bio_method) {
        BIO_meth_set_read(bio_method, bio_read);
        BIO_meth_set_write(bio_method, bio_write);
        BIO_meth_set_ctrl(bio_method, bio_ctrl);
        BIO_meth_set_create(bio_method, bio_create);
    }
    ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static uv_stream_t *stream(lx_tls_t *t) {
    return (uv_stream_t *)&t->tp->tcp;
}

/* ---- counting ----------------------------------------------------------- */

/* Why a handshake failed, from OpenSSL's reason (an alert the client sent
 * has the reason SSL_AD_REASON_OFFSET + its code). */
static unsigned why_failed(unsigned long e) {
    int r = ERR_GET_REASON(e);
    switch (r) {
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_VERSION_TOO_HIGH: return LX_TF_VERSION;
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_NO_SHARED_GROUPS:
    case SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
    case SSL_R_NO_SHARED_SIGNATURE_ALGORITHMS: return LX_TF_CIPHER;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_CERTIFICATE_VERIFY_FAILED: return LX_TF_CLIENT_CERT;
    default: return r >= SSL_AD_REASON_OFFSET ? LX_TF_ALERT : LX_TF_PROTOCOL;
    }
}

/* The first reason a handshake is known to have failed is kept (an
 * unrecognized name makes OpenSSL fail the ClientHello after it). */
static void set_fail(lx_tls_t *t, unsigned why) {
    t->failed = 1;
    if (!t->hs_done && t->fail == 0) t->fail = why + 1;
}

/* Counts the handshake's end: done (ready is told then), or, at close, how
 * it failed. */
static void count_end(lx_tls_t *t) {
    if (t->client) return; /* the counters are of clients' handshakes */
    lx_stats_t *st = lx_stats_of(t->tp->tcp.loop);
    if (t->hs_done) {
        LX_ST_INC(&st->tls_handshakes);
        if (SSL_session_reused(t->ssl)) LX_ST_INC(&st->tls_resumed);
        return;
    }
    /* A connection that sent nothing is no handshake (a balancer's health
     * check connects and closes): not counted. */
    if (t->hs_bytes == 0 && t->fail == 0) return;
    unsigned why = t->fail ? t->fail - 1u : t->eof ? LX_TF_CLOSED : LX_TF_UNFINISHED;
    LX_ST_INC(&st->tls_failures[why]);
}

/* ---- lifetime ----------------------------------------------------------- */

static void tls_free(lx_tls_t *t) {
    OPENSSL_free(t->client_subject);
    SSL_free(t->ssl); /* and its BIO */
    free(t->keep);
    free(t->obuf);
    free(t);
}

static void maybe_free(lx_tls_t *t) {
    if (t->closing && t->idle_closed && t->inflight == 0) tls_free(t);
}

static void on_idle_closed(uv_handle_t *h) {
    lx_tls_t *t = container_of((uv_idle_t *)h, lx_tls_t, idle);
    t->idle_closed = 1;
    maybe_free(t);
}

static int send_records(lx_tls_t *t, uv_write_t *user, uv_write_cb cb);

/* A session over tp's socket with ctx's settings, not yet started. */
static lx_tls_t *tls_make(lx_tp_t *tp, SSL_CTX *ctx, lx_tls_ready_fn ready) {
    uv_once(&once, init_once);
    if (bio_method == NULL || ex_index < 0) return NULL;
    lx_tls_t *t = calloc(1, sizeof(*t));
    if (t == NULL) return NULL;
    BIO *bio = NULL;
    if ((t->ssl = SSL_new(ctx)) == NULL || (bio = BIO_new(bio_method)) == NULL) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_data(bio, t);
    SSL_set_bio(t->ssl, bio, bio);
    SSL_set_ex_data(t->ssl, ex_index, t);
    t->tp = tp;
    t->ready = ready;
    uv_idle_init(tp->tcp.loop, &t->idle);
    tp->tls = t;
    return t;
}

int lx_tls_new(lx_tp_t *tp, SSL_CTX *base, lx_tls_pick_fn pick, lx_tls_ready_fn ready, void *arg) {
    lx_tls_t *t = tls_make(tp, base, ready);
    if (t == NULL) return -ENOMEM;
    SSL_set_accept_state(t->ssl);
    t->pick = pick;
    t->pick_arg = arg;
    return 0;
}

int lx_tls_client(lx_tp_t *tp, SSL_CTX *ctx, const char *name, int name_ip, void *session,
                  lx_tls_ready_fn ready, lx_tls_session_fn on_session) {
    lx_tls_t *t = tls_make(tp, ctx, ready);
    if (t == NULL) return -ENOMEM;
    t->client = 1;
    t->on_session = on_session;
    SSL_set_connect_state(t->ssl);
    int ok = name_ip || SSL_set_tlsext_host_name(t->ssl, name);
    if (ok && (SSL_get_verify_mode(t->ssl) & SSL_VERIFY_PEER))
        ok = name_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), name)
                     : SSL_set1_host(t->ssl, name);
    if (ok && session) {
        /* A copy: OpenSSL changes the session it resumes (a TLS 1.3
         * client's), and the pool's must stay good for the next one. */
        SSL_SESSION *copy = SSL_SESSION_dup(session);
        ok = copy && SSL_set_session(t->ssl, copy);
        SSL_SESSION_free(copy);
    }
    ERR_clear_error();
    return ok ? 0 : -EPROTO;
}

int lx_tls_handshake(lx_tp_t *tp) {
    lx_tls_t *t = tp->tls;
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    int ok = r == 1 || SSL_get_error(t->ssl, r) == SSL_ERROR_WANT_READ;
    if (!ok) t->err = ERR_peek_error();
    ERR_clear_error();
    return ok ? send_records(t, NULL, NULL) : -EPROTO;
}

const char *lx_tls_why(const lx_tp_t *tp, char *buf, size_t len) {
    const lx_tls_t *t = tp->tls;
    if (t == NULL) return NULL;
    /* OpenSSL works the verify result out with verify = false too: it is
     * the cause only when the certificate is checked. */
    long v = SSL_get_verify_result(t->ssl);
    if (t->client && v != X509_V_OK && (SSL_get_verify_mode(t->ssl) & SSL_VERIFY_PEER)) {
        X509_VERIFY_PARAM *p = SSL_get0_param(t->ssl);
        const char *host = X509_VERIFY_PARAM_get0_host(p, 0);
        char *ip = host ? NULL : X509_VERIFY_PARAM_get1_ip_asc(p);
        snprintf(buf, len, "TLS handshake: certificate verify failed: %s (checked for %s)",
                 X509_verify_cert_error_string(v),
                 host ? host
                 : ip ? ip
                      : "no name");
        OPENSSL_free(ip);
    } else if (t->err)
        snprintf(buf, len, "TLS handshake: %s", ERR_reason_error_string(t->err));
    else
        snprintf(buf, len, "TLS handshake: the connection ended before it was done");
    return buf;
}

static int on_client_session(SSL *ssl, SSL_SESSION *sess) {
    lx_tls_t *t = SSL_get_ex_data(ssl, ex_index);
    if (t == NULL || t->tp == NULL || t->on_session == NULL) return 0;
    t->on_session(t->tp, sess);
    return 1; /* the reference is the hook's */
}

void lx_tls_client_ctx_hooks(SSL_CTX *ctx) {
    uv_once(&once, init_once);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, on_client_session);
}

void lx_tls_session_free(void *session) {
    SSL_SESSION_free(session);
}

void lx_tls_close(lx_tp_t *tp, uv_close_cb cb) {
    lx_tls_t *t = tp->tls;
    if (!t->hs_done) count_end(t);
    t->closing = 1;
    t->reading = 0;
    /* OpenSSL drops a session from the cache when its connection ends
     * without close_notify, as most do (a keep-alive timeout, a client that
     * just goes): one whose handshake and records were sound stays
     * resumable, as nginx keeps it. */
    if (!t->failed && SSL_is_init_finished(t->ssl)) {
        /* A close after a whole response (Connection: close, a keep-alive
         * timeout) says so with close_notify, as a plain one with a FIN,
         * so that the client does not take it for a truncation; sent only
         * when nothing of ours waits before it, and never waited for. */
        if (t->inflight == 0 && !(SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN)) {
            SSL_shutdown(t->ssl);
            if (t->olen) {
                uv_buf_t b = uv_buf_init(t->obuf, (unsigned)t->olen);
                (void)uv_try_write((uv_stream_t *)&tp->tcp, &b, 1);
                t->olen = 0;
            }
        }
        ERR_clear_error();
        SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    }
    /* The idle handle first: libuv finishes closes last-in first-out, so
     * the socket's (which cancels our writes, then frees the connection)
     * runs before it, and t outlives both. */
    uv_close((uv_handle_t *)&t->idle, on_idle_closed);
    uv_close((uv_handle_t *)&tp->tcp, cb);
    t->tp = NULL;
    tp->tls = NULL;
}

/* ---- writing ------------------------------------------------------------ */

static void on_written(uv_write_t *req, int status) {
    tls_write_t *q = container_of(req, tls_write_t, req);
    lx_tls_t *t = q->t;
    t->inflight--;
    if (status < 0 && t->werr == 0) t->werr = status;
    /* The buffer is kept for the next records unless one is there or it
     * is large; with its real size (a break review: claiming OBUF_KEEP
     * for a smaller one let the next records overrun it). */
    if (t->obuf == NULL && !t->closing && t->hs_done && q->buf && q->cap <= OBUF_KEEP) {
        t->obuf = q->buf;
        t->ocap = q->cap;
        t->olen = 0;
    } else {
        free(q->buf);
    }
    if (q->user) q->cb(q->user, status);
    free(q);
    maybe_free(t);
}

/* Sends the records made: at once what the socket takes (when none of ours
 * is in flight and no write of the protocol's waits for them), the rest by
 * a write of ours that takes the buffer over. user/cb: the protocol's
 * write, completed when these are out. */
static int send_records(lx_tls_t *t, uv_write_t *user, uv_write_cb cb) {
    if (t->werr) return t->werr;
    size_t off = 0;
    if (user == NULL) {
        if (t->olen == 0) return 0;
        if (t->inflight == 0) {
            uv_buf_t b = uv_buf_init(t->obuf, (unsigned)t->olen);
            int r = uv_try_write(stream(t), &b, 1);
            if (r == (int)t->olen) {
                t->olen = 0;
                /* A handshake that stalls holds no record buffer. */
                if (!t->hs_done) {
                    free(t->obuf);
                    t->obuf = NULL;
                    t->ocap = 0;
                }
                return 0;
            }
            if (r > 0)
                off = (size_t)r;
            else if (r != UV_EAGAIN)
                return r;
        }
    }
    tls_write_t *q = malloc(sizeof(*q));
    if (q == NULL) return -ENOMEM;
    q->t = t;
    q->buf = t->obuf;
    q->cap = t->ocap;
    q->user = user;
    q->cb = cb;
    uv_buf_t b = uv_buf_init(t->obuf ? t->obuf + off : NULL, (unsigned)(t->olen - off));
    int r = uv_write(&q->req, stream(t), &b, 1, on_written);
    if (r < 0) {
        free(q);
        return r;
    }
    t->obuf = NULL;
    t->olen = t->ocap = 0;
    t->inflight++;
    return 0;
}

/* Encrypts bufs into the record buffer, in records sized as the top of
 * this file says. */
/* One record of plain text: len bytes at p. */
static int seal(lx_tls_t *t, const char *p, size_t len) {
    /* No ERR_clear_error first: SSL_get_error is not asked here. */
    if (SSL_write(t->ssl, p, (int)len) <= 0) { /* all or nothing: no partial writes */
        ERR_clear_error();
        return -EPROTO;
    }
    t->sent += len;
    return 0;
}

/* Records of bufs: pieces a record's size or more go as they are, smaller
 * ones are gathered into one record (a response's head and a short body
 * are one record, not two: each costs an AEAD pass, OpenSSL's set-up and
 * 22 bytes on the wire). What was gathered before a piece of a record or
 * more goes as a record of its own, so that the piece is sealed where it
 * lies rather than copied: an HTTP/1 head before its file's bytes, or the
 * frames before an HTTP/2 DATA frame of a full record (h2i.h H2_FRAME). */
static ssize_t encrypt(lx_tls_t *t, const uv_buf_t *bufs, unsigned n) {
    static _Thread_local char stage[REC_FULL];
    uint64_t now = uv_now(t->tp->tcp.loop);
    if (now - t->last_write > REC_IDLE_MS) t->sent = 0;
    t->last_write = now;
    /* The records' room at once: grown record by record, the buffer was
     * copied by each realloc (64 KiB of plain text: three). */
    size_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += bufs[i].len;
    if (total == 0) return 0;
    size_t per = SSL_version(t->ssl) == TLS1_3_VERSION ? REC_EXPANSION_13 : REC_EXPANSION_12;
    if (obuf_room(t, total + (total / REC_SMALL + n + 1) * per) < 0) return -ENOMEM;
    size_t staged = 0, rec = 0;
    for (unsigned i = 0; i < n; i++) {
        const char *p = bufs[i].base;
        size_t len = bufs[i].len;
        if (staged && len >= rec) {
            if (seal(t, stage, staged) < 0) return -EPROTO;
            staged = 0;
        }
        while (len) {
            if (staged == 0) rec = t->sent < REC_SMALL_UPTO ? REC_SMALL : REC_FULL;
            if (staged == 0 && len >= rec) {
                if (seal(t, p, rec) < 0) return -EPROTO;
                p += rec, len -= rec;
                continue;
            }
            size_t k = len < rec - staged ? len : rec - staged;
            memcpy(stage + staged, p, k);
            staged += k, p += k, len -= k;
            if (staged == rec) {
                if (seal(t, stage, staged) < 0) return -EPROTO;
                staged = 0;
            }
        }
    }
    if (staged && seal(t, stage, staged) < 0) return -EPROTO;
    return (ssize_t)total;
}

ssize_t lx_tls_try_write(lx_tp_t *tp, const uv_buf_t *bufs, unsigned n) {
    lx_tls_t *t = tp->tls;
    if (t->werr) return t->werr;
    /* All or nothing: while records of ours wait for the socket, nothing
     * more is taken, and the protocol waits with lx_tls_write. */
    if (t->inflight || !SSL_is_init_finished(t->ssl)) return 0;
    ssize_t r = encrypt(t, bufs, n);
    if (r < 0) return r;
    int rs = send_records(t, NULL, NULL);
    return rs < 0 ? rs : r;
}

int lx_tls_write(lx_tp_t *tp, uv_write_t *req, const uv_buf_t *bufs, unsigned n, uv_write_cb cb) {
    lx_tls_t *t = tp->tls;
    if (t->werr) return t->werr;
    ssize_t r = encrypt(t, bufs, n);
    return r < 0 ? (int)r : send_records(t, req, cb);
}

int lx_tls_shutdown(lx_tp_t *tp, uv_shutdown_t *req, uv_shutdown_cb cb) {
    lx_tls_t *t = tp->tls;
    /* close_notify, when the handshake is done (before, there is no one to
     * tell); it goes before the FIN, in libuv's queue. */
    if (SSL_is_init_finished(t->ssl)) {
        SSL_shutdown(t->ssl);
        ERR_clear_error();
        int r = send_records(t, NULL, NULL);
        if (r < 0) return r;
    }
    return uv_shutdown(req, stream(t), cb);
}

/* ---- reading ------------------------------------------------------------ */

static _Thread_local char rbuf[TLS_RBUF];

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h, (void)suggested;
    *buf = uv_buf_init(rbuf, sizeof(rbuf));
}

/* What the BIO did not take of the input stays in keep for later. */
static int stash(lx_tls_t *t) {
    if (t->in_len == 0) {
        t->keep_len = 0;
        if (t->keep_cap > TLS_RBUF) {
            free(t->keep);
            t->keep = NULL;
            t->keep_cap = 0;
        }
        return 0;
    }
    if (t->in_len > t->keep_cap) {
        char *k = malloc(t->in_len);
        if (k == NULL) return -ENOMEM;
        memcpy(k, t->in, t->in_len);
        free(t->keep);
        t->keep = k;
        t->keep_cap = t->in_len;
    } else {
        memmove(t->keep, t->in, t->in_len);
    }
    t->keep_len = t->in_len;
    t->in = NULL;
    t->in_len = 0;
    return 0;
}

/* Tells the protocol of the end (a close_notify, or the socket's end after
 * the last record), once, as libuv does: reading stops with it, and what
 * comes after a close_notify is not read. Told more than once, a
 * connection still answering kept every byte a client sent after its
 * close_notify (the fuzz harness fuzz_tlsbuf). */
static void tell_eof(lx_tls_t *t, uv_stream_t *st, const uv_buf_t *pb) {
    t->eof = t->eof_told = 1;
    t->reading = 0;
    t->in = NULL;
    t->in_len = t->keep_len = 0;
    uv_idle_stop(&t->idle);
    uv_read_stop(st);
    t->read_cb(st, UV_EOF, pb);
}

/* Hands the protocol plain text while it reads and OpenSSL has some; sends
 * what the handshake answers. */
static void deliver(lx_tls_t *t) {
    uv_stream_t *st = stream(t);
    while (t->reading) {
        uv_buf_t pb = uv_buf_init(NULL, 0);
        t->alloc_cb((uv_handle_t *)st, 64 * 1024, &pb);
        if (pb.base == NULL || pb.len == 0) {
            t->read_cb(st, UV_ENOBUFS, &pb);
            return;
        }
        ERR_clear_error();
        int n = SSL_read(t->ssl, pb.base, (int)(pb.len > INT32_MAX ? INT32_MAX : pb.len));
        int err = n > 0 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, n);
        if (!t->hs_done && SSL_is_init_finished(t->ssl)) {
            t->hs_done = 1;
            count_end(t);
            t->ready(t->tp);
            if (t->closing) return;
        }
        int r = send_records(t, NULL, NULL); /* the handshake's answers, alerts, tickets */
        if (r < 0 && (SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN)) {
            /* After our close_notify the sending side is shut: what OpenSSL
             * answers now (a KeyUpdate's) cannot go and need not; reading
             * (a lingering close draining the client) goes on. */
            t->olen = 0;
            r = 0;
        }
        if (r < 0) {
            t->read_cb(st, r, &pb);
            return;
        }
        if (n > 0) {
            t->read_cb(st, n, &pb);
            if (t->closing) return;
            continue;
        }
        if (err == SSL_ERROR_WANT_READ) {
            /* A handshake waiting for the client's next flight holds no
             * read buffer (17 KiB of a stalled one's cost). */
            if (!t->hs_done && t->in_len == 0) SSL_free_buffers(t->ssl);
            t->read_cb(st, 0, &pb); /* the buffer goes back: pb is not the protocol's now */
            if (t->closing) return;
            if (t->eof && t->in_len == 0 && t->reading) {
                tell_eof(t, st, &(uv_buf_t){0});
                return;
            }
            break;
        }
        if (err == SSL_ERROR_ZERO_RETURN) { /* close_notify */
            tell_eof(t, st, &pb);
            return;
        }
        unsigned long e = ERR_peek_error();
        if (!t->hs_done) t->err = e;
        set_fail(t, e ? why_failed(e) : LX_TF_CLOSED);
        lx_log_debug("TLS: %s", e ? ERR_reason_error_string(e) : "connection broken");
        ERR_clear_error();
        t->read_cb(st, UV_EPROTO, &pb);
        return;
    }
    if (!t->closing && stash(t) < 0) t->read_cb(st, UV_ENOMEM, &(uv_buf_t){0});
}

/* Plain HTTP where a ClientHello belongs: a method's first letter. */
static int looks_plain(unsigned char c) {
    return c >= 'A' && c <= 'Z';
}

int lx_tls_hello_scan(lx_tls_hello_scan_t *h, const char *p, size_t n) {
    for (size_t i = 0; i < n && h->msg_got < sizeof(h->msg_head); i++) {
        unsigned char c = (unsigned char)p[i];
        if (h->rec_left == 0) {
            h->rec_head[h->rec_got++] = c;
            if (h->rec_got < sizeof(h->rec_head)) continue;
            h->rec_got = 0;
            if (h->rec_head[0] != 22) {
                h->msg_got = sizeof(h->msg_head); /* OpenSSL refuses it */
                return -2;
            }
            h->rec_left = (uint16_t)(h->rec_head[3] << 8 | h->rec_head[4]);
            continue;
        }
        h->msg_head[h->msg_got++] = c;
        h->rec_left--;
    }
    if (h->msg_got < sizeof(h->msg_head)) return -1;
    if (h->rec_head[0] != 22 || h->msg_head[0] != 1) return -2;
    return (int)((uint32_t)h->msg_head[1] << 16 | (uint32_t)h->msg_head[2] << 8 | h->msg_head[3]);
}

/* Whether the ClientHello the stream announces is longer than
 * CLIENT_HELLO_MAX (lx_tls_hello_scan reads it as the bytes come). */
static int hello_too_long(lx_tls_t *t, const char *p, size_t n) {
    return lx_tls_hello_scan(&t->hello, p, n) > CLIENT_HELLO_MAX;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
    lx_tls_t *t = container_of((uv_tcp_t *)st, lx_tp_t, tcp)->tls;
    if (n == 0) return;
    if (n < 0) {
        if (n != UV_EOF) {
            /* After the handshake, a reset is how many clients go: the
             * session stays resumable (a break review: it was dropped). */
            if (!t->hs_done) set_fail(t, LX_TF_CLOSED);
            t->read_cb(st, n, &(uv_buf_t){0});
            return;
        }
        t->eof = 1;
        t->in = t->keep;
        t->in_len = t->keep_len;
        deliver(t);
        return;
    }
    if (!t->first_seen && !t->client) {
        t->first_seen = 1;
        if (looks_plain((unsigned char)buf->base[0])) {
            set_fail(t, LX_TF_PLAIN);
            uv_buf_t b = uv_buf_init((char *)PLAIN_ANSWER, sizeof(PLAIN_ANSWER) - 1);
            (void)uv_try_write(st, &b, 1);
            t->read_cb(st, LX_TP_EPLAIN, &(uv_buf_t){0});
            return;
        }
    }
    if (t->keep_len) {
        /* Records kept from before come first. */
        if (t->keep_len + (size_t)n > t->keep_cap) {
            size_t cap = t->keep_len + (size_t)n;
            char *k = realloc(t->keep, cap);
            if (k == NULL) {
                t->read_cb(st, UV_ENOMEM, &(uv_buf_t){0});
                return;
            }
            t->keep = k;
            t->keep_cap = cap;
        }
        memcpy(t->keep + t->keep_len, buf->base, (size_t)n);
        t->keep_len += (size_t)n;
        t->in = t->keep;
        t->in_len = t->keep_len;
    } else {
        t->in = buf->base;
        t->in_len = (size_t)n;
    }
    if (!t->client && t->hello.msg_got < sizeof(t->hello.msg_head) &&
        hello_too_long(t, buf->base, (size_t)n)) {
        set_fail(t, LX_TF_TOO_LARGE);
        lx_log_debug("TLS: a ClientHello of more than %d bytes", CLIENT_HELLO_MAX);
        t->read_cb(st, UV_EPROTO, &(uv_buf_t){0});
        return;
    }
    if (!t->hs_done) t->hs_bytes += (size_t)n;
    deliver(t);
    if (!t->hs_done && !t->closing && !t->client && t->hs_bytes > HANDSHAKE_MAX) {
        set_fail(t, LX_TF_TOO_LARGE);
        lx_log_debug("TLS: a handshake of more than %d bytes", HANDSHAKE_MAX);
        t->read_cb(st, UV_EPROTO, &(uv_buf_t){0});
    }
}

static int buffered(lx_tls_t *t) {
    return t->keep_len || SSL_has_pending(t->ssl) || t->eof;
}

static void on_idle(uv_idle_t *h) {
    lx_tls_t *t = container_of(h, lx_tls_t, idle);
    uv_idle_stop(h);
    if (!t->reading || t->closing) return;
    t->in = t->keep;
    t->in_len = t->keep_len;
    deliver(t);
}

int lx_tls_rest(lx_tp_t *tp) {
    lx_tls_t *t = tp->tls;
    if (t->closing) return 1;
    SSL_free_buffers(t->ssl); /* declines while it holds bytes */
    if (t->olen || t->inflight) return 0;
    free(t->obuf);
    t->obuf = NULL;
    t->ocap = 0;
    if (t->keep_len == 0) {
        free(t->keep);
        t->keep = NULL;
        t->keep_cap = 0;
    }
    return 1;
}

int lx_tls_read_start(lx_tp_t *tp, uv_alloc_cb alloc, uv_read_cb read) {
    lx_tls_t *t = tp->tls;
    t->alloc_cb = alloc;
    t->read_cb = read;
    t->reading = 1;
    if (t->eof_told) return 0; /* the end was told: there is nothing more */
    if (buffered(t)) uv_idle_start(&t->idle, on_idle);
    if (t->eof) return 0;
    return uv_read_start((uv_stream_t *)&tp->tcp, on_alloc, on_read);
}

void lx_tls_read_stop(lx_tp_t *tp) {
    lx_tls_t *t = tp->tls;
    t->reading = 0;
    uv_idle_stop(&t->idle);
    uv_read_stop((uv_stream_t *)&tp->tcp);
}

/* ---- the handshake's choices -------------------------------------------- */

int lx_tls_sni_parse(const unsigned char *p, size_t len, const char **name, size_t *nlen) {
    if (len < 2) return -1;
    size_t list = (size_t)p[0] << 8 | p[1];
    if (list != len - 2 || list == 0) return -1;
    p += 2;
    len -= 2;
    while (len) {
        if (len < 3) return -1;
        unsigned type = p[0];
        size_t n = (size_t)p[1] << 8 | p[2];
        if (n > len - 3) return -1;
        if (type == 0) { /* host_name: one only (RFC 6066 3) */
            if (n == 0 || memchr(p + 3, '\0', n)) return -1;
            *name = (const char *)p + 3;
            *nlen = n;
            return 1;
        }
        p += 3 + n;
        len -= 3 + n;
    }
    return 0;
}

int lx_tls_alpn_choose(const unsigned char *list, size_t len, const unsigned char **out,
                       unsigned char *outlen, int h2) {
    static const char H1[] = "http/1.1", H2[] = "h2";
    int found = 0; /* 1: http/1.1, 2: h2 */
    while (len) {
        size_t n = list[0];
        if (n == 0 || n > len - 1) return -1;
        if (found < 2 && h2 && n == sizeof(H2) - 1 && memcmp(list + 1, H2, n) == 0) {
            *out = list + 1;
            *outlen = (unsigned char)n;
            found = 2;
        } else if (!found && n == sizeof(H1) - 1 && memcmp(list + 1, H1, n) == 0) {
            *out = list + 1;
            *outlen = (unsigned char)n;
            found = 1;
        }
        list += 1 + n;
        len -= 1 + n;
    }
    return found != 0;
}

void lx_tls_offer_h2(lx_tp_t *tp) {
    tp->tls->h2 = 1;
}

int lx_tls_alpn_h2(const lx_tp_t *tp) {
    const unsigned char *p;
    unsigned int n;
    if (tp->tls == NULL) return 0;
    SSL_get0_alpn_selected(tp->tls->ssl, &p, &n);
    return n == 2 && memcmp(p, "h2", 2) == 0;
}

/* Before any extension is acted on, the server name picks the vhost's
 * certificates and session context: a session or ticket is then only ever
 * resumed under the vhost that issued it (OpenSSL checks the session id
 * context against the one set here, which the SNI callback, run after the
 * PSK extension, would set too late). */
static int on_client_hello(SSL *ssl, int *alert, void *arg) {
    (void)arg;
    lx_tls_t *t = SSL_get_ex_data(ssl, ex_index);
    const unsigned char *ext;
    size_t len;
    const char *name = NULL;
    size_t nlen = 0;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &len) &&
        lx_tls_sni_parse(ext, len, &name, &nlen) < 0) {
        *alert = SSL_AD_DECODE_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    SSL_CTX *ctx = t->pick(t->pick_arg, name, nlen);
    if (ctx == NULL) {
        set_fail(t, LX_TF_NAME);
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_CLIENT_HELLO_ERROR;
    }
    if (SSL_set_SSL_CTX(ssl, ctx) == NULL) {
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    /* SSL_set_SSL_CTX takes the certificates, not whether to ask for the
     * client's: that is the vhost's too. */
    SSL_set_verify(ssl, SSL_CTX_get_verify_mode(ctx), SSL_CTX_get_verify_callback(ctx));
    return SSL_CLIENT_HELLO_SUCCESS;
}

static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg) {
    (void)arg;
    lx_tls_t *t = SSL_get_ex_data(ssl, ex_index);
    int r = lx_tls_alpn_choose(in, inlen, out, outlen, t->h2);
    if (r < 0) return SSL_TLSEXT_ERR_ALERT_FATAL;
    /* A client that offers only protocols luxd does not speak (h2 alone,
     * to a listener without http2) goes on without ALPN, and speaks
     * HTTP/1.1 or fails: RFC 7301 3.2 allows either answer. */
    return r ? SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_NOACK;
}

/* The verified client certificate's subject and fingerprint, made when
 * first asked for (most connections never are). */
static void read_client(lx_tls_t *t) {
    t->client_read = 1;
    X509 *x = SSL_get0_peer_certificate(t->ssl);
    if (x == NULL || SSL_get_verify_result(t->ssl) != X509_V_OK) return;
    BIO *b = BIO_new(BIO_s_mem());
    char *p = NULL;
    long n = 0;
    if (b && X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0 &&
        (n = BIO_get_mem_data(b, &p)) >= 0)
        t->client_subject = OPENSSL_strndup(p ? p : "", (size_t)n);
    BIO_free(b);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (X509_digest(x, EVP_sha256(), md, &mdlen) && mdlen * 2 < sizeof(t->client_fp))
        for (unsigned i = 0; i < mdlen; i++)
            snprintf(t->client_fp + 2 * i, 3, "%02x", md[i]);
    ERR_clear_error();
}

const char *lx_tls_field(const lx_tp_t *tp, lx_tls_field_t f) {
    lx_tls_t *t = tp->tls;
    if (t == NULL || !t->hs_done) return NULL;
    switch (f) {
    case LX_TLS_PROTOCOL: return SSL_get_version(t->ssl);
    case LX_TLS_CIPHER: return SSL_get_cipher_name(t->ssl);
    case LX_TLS_SNI: return SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name);
    case LX_TLS_REUSED: return SSL_session_reused(t->ssl) ? "r" : ".";
    case LX_TLS_CLIENT_SUBJECT:
    case LX_TLS_CLIENT_FINGERPRINT:
        if (!t->client_read) read_client(t);
        if (f == LX_TLS_CLIENT_SUBJECT) return t->client_subject;
        return t->client_fp[0] ? t->client_fp : NULL;
    }
    return NULL;
}

const unsigned char *lx_tls_sid_ctx(const lx_tp_t *tp, unsigned *len) {
    const lx_tls_t *t = tp->tls;
    const SSL_SESSION *s = t && t->hs_done ? SSL_get_session(t->ssl) : NULL;
    return s ? SSL_SESSION_get0_id_context(s, len) : NULL;
}

/* The certificates were chosen by the ClientHello callback; this one only
 * makes OpenSSL acknowledge the server name (an empty server_name in the
 * answer: RFC 6066 3 says a server that used the name sends it). */
static int on_servername(SSL *ssl, int *alert, void *arg) {
    (void)ssl, (void)alert, (void)arg;
    return SSL_TLSEXT_ERR_OK;
}

void lx_tls_ctx_hooks(SSL_CTX *ctx) {
    uv_once(&once, init_once);
    SSL_CTX_set_client_hello_cb(ctx, on_client_hello, NULL);
    SSL_CTX_set_tlsext_servername_callback(ctx, on_servername);
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
}
