/* The TLS transport's own buffering (src/net/tls.c): ciphertext kept while
 * reading is stopped (keep, stash), plain text handed up through
 * lx_tls_read_start's callbacks into buffers of any size, reading stopped
 * and resumed (the idle handle delivers what was buffered), records written
 * (lx_tls_try_write, lx_tls_write, send_records) to a socket that takes
 * little at a time.
 *
 * Each input is a script over one connection: luxd's end of a socketpair is
 * the transport, as the server; at the other an OpenSSL client on memory
 * BIOs, whose records the harness moves over in chunks the script sizes
 * (cut anywhere, many in one read). The first byte sets the connection up
 * (TLS 1.2 or 1.3, AES or ChaCha, 512-byte client records, tickets or none,
 * the server's send buffer, reading on or off); then each byte is an op
 * (low nibble) and its argument, some with a size byte after: the client
 * sends, updates keys, sends close_notify, half-closes, has a byte changed
 * in flight or bytes added after its close_notify; the loop runs; luxd's
 * records are moved back; the protocol stops, resumes or closes (also in
 * its read callback), sizes its read buffers, writes (try_write, write; also
 * in its read callback), rests (lx_tls_rest), shuts down. At the end reading
 * is on and all is moved until quiet; then the connection is closed, the
 * loop run empty.
 *
 * Invariants: the plain text handed up is exactly a prefix of what the
 * client sent, in order, in the buffer alloc gave, within its length, only
 * while reading is on and after ready; at the end (no corruption, no early
 * close) all of it whose records went whole onto the socket, then EOF if
 * the client ended; one EOF or error, and nothing after it (but buffers
 * handed back); an error only from a corruption or a read buffer of none
 * (a KeyUpdate answered after luxd's shutdown is dropped, not a read
 * error); the client decrypts exactly what
 * luxd took of the protocol's writes, in order, all of it at the end; a
 * write's callback comes once, its bytes out by then; after lx_tls_close the
 * loop holds no handle; no crash, sanitizer report or leak.
 * corpus/tlsbuf/repro-eof-*: the end told twice (after a close_notify,
 * and by an idle handle armed as the end came), which kept every byte a
 * client sent after its close_notify. */
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tls.h"
#include "stats.h"
#include "worker.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_tlsbuf:%d: broken: %s\n", __LINE__, #c);                         \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

#define MAX_PLAIN (256 * 1024)  /* plain text each way */
#define MAX_WIRE  (1024 * 1024) /* the client's ciphertext */
#define MAX_MARKS 8192          /* the client's records */

static lx_worker_t W; /* its loop, and the counters tls.c adds to */
static SSL_CTX *sctx[2], *cctx;
static unsigned char cpat[MAX_PLAIN], spat[MAX_PLAIN]; /* what each side sends */
static unsigned char wire[MAX_WIRE];
static const size_t CHUNK[16] = {1,  2,   3,    5,    8,    13,    21,    64,
                                 99, 517, 1024, 4096, 5000, 16384, 16406, SIZE_MAX};

static struct {
    lx_tp_t tp;
    int fd; /* the client's end */
    SSL *c;
    BIO *crd, *cwr;
    size_t frag, queued, csent; /* the client's record size; plain text asked, encrypted */
    size_t wlen, woff;          /* ciphertext in wire; moved to the socket */
    size_t mark_wire[MAX_MARKS], mark_plain[MAX_MARKS], nmarks, mhead; /* record ends */
    size_t complete, notify_end; /* plain text whose records are on the socket; close_notify's */
    size_t got, alen;            /* plain text handed up; the size of alloc's buffers */
    size_t swritten, wend, cgot; /* taken by luxd; with the write in flight; decrypted */
    char *abuf;                  /* the buffer alloc gave, not yet back */
    uv_write_t wreq;
    uv_shutdown_t shreq;
    unsigned stop_in, stop_mode, echo, resume_on_write;
    int ended; /* the EOF or error handed up, or 0 */
    int reading, ready, closed, early, close_cbs, wbusy, sshut, shut_cb, sfail;
    int cshut, ceof, cfail, notified, s_eof, corrupt;
} S;

static const uint8_t *in, *in_end;

static int next(void) {
    return in < in_end ? *in++ : -1;
}

/* A size from a byte: often small, up to a record and over. */
static size_t size_of(int b) {
    b = b < 0 ? 0 : b;
    return b >> 6 == 3 ? 16352u + (b & 63) : 1 + ((size_t)(b & 63) << 4 * (b >> 6));
}

static uint8_t mix(uint64_t x) {
    x *= 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return (uint8_t)(x >> 56);
}

static SSL_CTX *pick(void *arg, const char *name, size_t len) {
    (void)name, (void)len;
    return arg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    signal(SIGPIPE, SIG_IGN); /* as luxd */
    for (size_t i = 0; i < MAX_PLAIN; i++)
        cpat[i] = mix(i), spat[i] = mix(i + (1ull << 40));
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *n = X509_get_subject_name(x);
    CHECK(key && X509_set_version(x, 2) && ASN1_INTEGER_set(X509_get_serialNumber(x), 1) &&
          X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"fuzz", -1, -1,
                                     0) &&
          X509_gmtime_adj(X509_getm_notBefore(x), 0) &&
          X509_gmtime_adj(X509_getm_notAfter(x), 86400) && X509_set_issuer_name(x, n) &&
          X509_set_pubkey(x, key) && X509_sign(x, key, EVP_sha256()));
    /* As tlsctx.c's ctx_new and a vhost's; [1] hands out no tickets. */
    for (int i = 0; i < 2; i++) {
        SSL_CTX *c = sctx[i] = SSL_CTX_new(TLS_server_method());
        CHECK(c && SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) &&
              SSL_CTX_set1_groups_list(c, "X25519:P-256:P-384") &&
              SSL_CTX_set_cipher_list(c, "ECDHE-ECDSA-AES128-GCM-SHA256:"
                                         "ECDHE-ECDSA-CHACHA20-POLY1305") &&
              SSL_CTX_use_certificate(c, x) && SSL_CTX_use_PrivateKey(c, key));
        SSL_CTX_set_options(c, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                   SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
        SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
        SSL_CTX_set_max_early_data(c, 0);
        SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF); /* nothing kept across inputs */
        if (i) SSL_CTX_set_num_tickets(c, 0);
        lx_tls_ctx_hooks(c);
    }
    X509_free(x);
    EVP_PKEY_free(key);
    CHECK((cctx = SSL_CTX_new(TLS_client_method())) != NULL);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);
    uv_loop_init(&W.loop);
    W.loop.data = &W;
    W.stats = lx_stats_loop(0);
    return 0;
}

/* ---- the client --------------------------------------------------------- */

static void take_wire(void) {
    int n;
    while ((n = BIO_read(S.cwr, wire + S.wlen, (int)(MAX_WIRE - S.wlen))) > 0)
        S.wlen += (size_t)n;
    CHECK(S.wlen < MAX_WIRE);
}

/* Handshakes, decrypts what luxd sent, and encrypts what was asked, a
 * record per SSL_write, each one's end on the wire marked. */
static void client_pump(void) {
    static unsigned char buf[16384];
    if (S.cfail) return;
    ERR_clear_error();
    int r = SSL_is_init_finished(S.c) ? 1 : SSL_do_handshake(S.c);
    while (r > 0 && (r = SSL_read(S.c, buf, sizeof(buf))) > 0) {
        CHECK(S.cgot + (size_t)r <= S.swritten && memcmp(buf, spat + S.cgot, (size_t)r) == 0);
        S.cgot += (size_t)r;
    }
    int e = SSL_get_error(S.c, r);
    if (r <= 0 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_ZERO_RETURN) {
        CHECK(S.corrupt);
        S.cfail = 1;
        return;
    }
    S.notified = (SSL_get_shutdown(S.c) & SSL_RECEIVED_SHUTDOWN) != 0;
    while (SSL_is_init_finished(S.c) && S.csent < S.queued && !S.cshut && S.nmarks < MAX_MARKS) {
        size_t k = S.queued - S.csent < S.frag ? S.queued - S.csent : S.frag;
        CHECK(SSL_write(S.c, cpat + S.csent, (int)k) == (int)k); /* a memory BIO takes all */
        S.csent += k;
        take_wire();
        S.mark_wire[S.nmarks] = S.wlen;
        S.mark_plain[S.nmarks++] = S.csent;
    }
    ERR_clear_error();
    take_wire();
}

static void move_c2s(size_t max) {
    size_t k = S.wlen - S.woff < max ? S.wlen - S.woff : max;
    ssize_t r = S.ceof || k == 0 ? 0 : write(S.fd, wire + S.woff, k);
    if (r > 0) S.woff += (size_t)r;
    while (S.mhead < S.nmarks && S.mark_wire[S.mhead] <= S.woff)
        S.complete = S.mark_plain[S.mhead++];
}

static void move_s2c(size_t max) {
    static char buf[16384];
    for (ssize_t r; max && (r = read(S.fd, buf, max < sizeof(buf) ? max : sizeof(buf))) >= 0;) {
        S.s_eof |= r == 0;
        if (r == 0) break;
        BIO_write(S.crd, buf, (int)r);
        max -= (size_t)r;
    }
    client_pump();
}

/* ---- the protocol ------------------------------------------------------- */

static void on_closed(uv_handle_t *h) {
    CHECK(h == (uv_handle_t *)&S.tp.tcp);
    S.close_cbs++;
}

static void close_tp(int early) {
    S.early |= early;
    if (S.closed) return;
    S.closed = 1;
    S.reading = 0;
    lx_tls_close(&S.tp, on_closed);
}

static void reading(int on);

static void on_write(uv_write_t *req, int status) {
    CHECK(req == &S.wreq && S.wbusy);
    S.wbusy = 0;
    CHECK(status == 0 || (status == UV_ECANCELED && S.closed));
    if (status == 0 && !S.corrupt) {
        move_s2c(SIZE_MAX); /* its bytes are out: the client has them all */
        CHECK(S.cgot >= S.wend);
    }
    if (S.resume_on_write) reading(1);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    CHECK(req == &S.shreq && !S.shut_cb);
    S.shut_cb = 1;
    CHECK(status == 0 || (status == UV_ECANCELED && S.closed));
}

enum { TRY, TRY_THEN_WAIT, WAIT };

static void server_write(size_t len, unsigned nbufs, int how) {
    if (!S.ready || S.closed || S.sshut || S.sfail) return;
    if (len > MAX_PLAIN - S.swritten) len = MAX_PLAIN - S.swritten;
    if (len == 0) return;
    uv_buf_t b[3];
    for (size_t i = 0, at = S.swritten, left = len; i < nbufs; i++) {
        size_t k = i + 1 == nbufs ? left : left / 2;
        b[i] = uv_buf_init((char *)spat + at, (unsigned)k);
        at += k, left -= k;
    }
    if (how != WAIT) {
        ssize_t r = lx_tls_try_write(&S.tp, b, nbufs); /* all or nothing */
        CHECK(r == (ssize_t)len || r == 0 || (r < 0 && S.corrupt));
        S.swritten += r ? len : 0; /* after an error some may be out: the prefix check only */
        S.sfail = r < 0;
        if (r || how == TRY) return;
    }
    if (S.wbusy) return; /* one at a time */
    int r = lx_tls_write(&S.tp, &S.wreq, b, nbufs, on_write);
    CHECK(r == 0 || S.corrupt);
    S.wend = S.swritten += len;
    S.sfail = r < 0;
    S.wbusy = r == 0;
}

static void on_ready(lx_tp_t *tp) {
    CHECK(tp == &S.tp && !S.ready && !S.closed);
    S.ready = 1;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
    (void)suggested;
    CHECK(h == (uv_handle_t *)&S.tp.tcp && S.reading && S.abuf == NULL);
    S.abuf = malloc(S.alen); /* exactly: ASan sees a write past it */
    *b = uv_buf_init(S.abuf, (unsigned)S.alen);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
    CHECK(st == (uv_stream_t *)&S.tp.tcp && S.reading && !S.closed);
    CHECK(b->base == S.abuf); /* what alloc gave comes back at once, and only that */
    if (n > 0) {
        CHECK(!S.ended && S.ready && (size_t)n <= b->len && S.got + (size_t)n <= S.csent);
        CHECK(memcmp(b->base, cpat + S.got, (size_t)n) == 0);
        S.got += (size_t)n;
    }
    free(S.abuf);
    S.abuf = NULL;
    /* After an EOF or error, nothing: a buffer handed back (n 0) is
     * nothing. */
    if (n == 0) return;
    CHECK(!S.ended);
    if (n < 0) {
        S.ended = (int)n;
        /* An error only from a corruption or a buffer of none; not from
         * what OpenSSL answers (a KeyUpdate) after luxd's shutdown, which
         * cannot go: the lingering close reads on. */
        CHECK(n == UV_EOF || S.corrupt || (n == UV_ENOBUFS && S.alen == 0));
        if (n != UV_EOF) close_tp(1); /* as conn.c */
        return;
    }
    if (S.echo) server_write((size_t)n * S.echo, 1, S.echo & 8 ? WAIT : TRY_THEN_WAIT);
    if (S.stop_in && --S.stop_in == 0) {
        if (S.stop_mode & 2) {
            close_tp(1);
            return;
        }
        lx_tls_read_stop(&S.tp);
        S.reading = S.stop_mode & 1;
        if (S.reading) CHECK(lx_tls_read_start(&S.tp, on_alloc, on_read) == 0);
    }
}

static void reading(int on) {
    S.resume_on_write &= !on;
    if (S.closed || S.ended || S.reading == on) return;
    if (on)
        CHECK(lx_tls_read_start(&S.tp, on_alloc, on_read) == 0);
    else
        lx_tls_read_stop(&S.tp);
    S.reading = on;
}

/* ---- the script --------------------------------------------------------- */

static void start(unsigned cfg) {
    memset(&S, 0, sizeof(S));
    S.alen = 65536;
    int sv[2], sndbuf[4] = {0, 1, 8192, 32768}; /* 1: the kernel's least */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    S.fd = sv[1];
    if (sndbuf[cfg >> 2 & 3])
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf[cfg >> 2 & 3], sizeof(int));
    CHECK(uv_tcp_init(&W.loop, &S.tp.tcp) == 0 && uv_tcp_open(&S.tp.tcp, sv[0]) == 0);
    SSL_CTX *base = sctx[cfg >> 4 & 1];
    CHECK(lx_tls_new(&S.tp, base, pick, on_ready, base) == 0);
    S.c = SSL_new(cctx);
    S.crd = BIO_new(BIO_s_mem());
    S.cwr = BIO_new(BIO_s_mem());
    CHECK(S.c && S.crd && S.cwr);
    SSL_set_bio(S.c, S.crd, S.cwr);
    SSL_set_connect_state(S.c);
    if (cfg & 1) SSL_set_max_proto_version(S.c, TLS1_2_VERSION);
    if (cfg & 2)
        CHECK(SSL_set_ciphersuites(S.c, "TLS_CHACHA20_POLY1305_SHA256") &&
              SSL_set_cipher_list(S.c, "ECDHE-ECDSA-CHACHA20-POLY1305"));
    S.frag = cfg & 0x20 ? 512 : 16384;
    SSL_set_max_send_fragment(S.c, S.frag);
    if (!(cfg & 0x40)) reading(1);
    client_pump();
}

static size_t progress(void) {
    return S.got + S.cgot + S.woff + S.csent + S.swritten + (size_t)(S.wbusy + S.s_eof) +
           (size_t)(S.close_cbs + !!S.ended) + BIO_pending(S.crd);
}

static void finish(void) {
    client_pump();
    S.stop_in = 0;
    reading(1);
    for (int i = 0, quiet = 0; i < 10000 && quiet < 4; i++) { /* all moved, until quiet */
        size_t before = progress();
        move_c2s(SIZE_MAX);
        move_s2c(SIZE_MAX);
        uv_run(&W.loop, UV_RUN_NOWAIT);
        quiet = progress() == before ? quiet + 1 : 0;
    }
    if (!S.early && !S.corrupt) {
        CHECK(S.got == S.complete);
        if (S.ceof || (S.cshut && S.woff >= S.notify_end)) CHECK(S.ended == UV_EOF);
        CHECK(S.cgot == S.swritten && !S.wbusy);
        if (S.sshut) CHECK(S.shut_cb && S.notified && S.s_eof);
    }
    close_tp(0);
    for (int i = 0; i < 1000 && uv_loop_alive(&W.loop); i++)
        uv_run(&W.loop, UV_RUN_NOWAIT);
    CHECK(!uv_loop_alive(&W.loop) && S.close_cbs == 1 && !S.wbusy && S.abuf == NULL);
    CHECK(!S.sshut || S.shut_cb);
    if (getenv("LUXD_FUZZ_TRACE"))
        fprintf(stderr,
                "tlsbuf: %s sent %zu (whole on the wire %zu) got %zu; server wrote %zu, client "
                "got %zu; ready %d ended %d corrupt %d early close %d\n",
                SSL_get_version(S.c), S.csent, S.complete, S.got, S.swritten, S.cgot, S.ready,
                S.ended, S.corrupt, S.early);
    SSL_free(S.c);
    close(S.fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    in = data + 1;
    in_end = data + size;
    start(data[0]);
    for (int b; (b = next()) >= 0;) {
        unsigned arg = (unsigned)b >> 4;
        switch (b & 15) {
        case 0: /* the client sends */
            S.queued += size_of(next());
            if (S.queued > MAX_PLAIN) S.queued = MAX_PLAIN;
            client_pump();
            break;
        case 1: move_c2s(CHUNK[arg]); break;
        case 2:
            for (unsigned i = 0; i <= arg; i++)
                uv_run(&W.loop, UV_RUN_NOWAIT);
            break;
        case 3: move_s2c(CHUNK[arg]); break;
        case 4: /* arg 8 and over: until the next write's callback (as conn.c, in the poll) */
            reading(0);
            S.resume_on_write = arg >> 3;
            break;
        case 5: reading(1); break;
        case 6: /* after arg%4+1 more reads, the read callback: stops, stops and restarts, closes */
            S.stop_in = 1 + (arg & 3);
            S.stop_mode = arg >> 2;
            break;
        case 7: /* the read buffers' size (arg 15: none, ENOBUFS) */
            S.alen = arg == 15 ? 0 : arg & 8 ? 65536u >> (arg & 7) : size_of(next());
            break;
        case 8: server_write(size_of(next()), 1 + arg % 3, arg & 8 ? TRY_THEN_WAIT : TRY); break;
        case 9: server_write(size_of(next()), 1 + arg % 3, WAIT); break;
        case 10:
        case 11: /* a key update (requested or not); close_notify after what was asked */
            if (S.cfail || S.cshut || !SSL_is_init_finished(S.c)) break;
            if ((b & 15) == 11) {
                client_pump();
                SSL_shutdown(S.c);
                S.cshut = 1;
            } else if (SSL_key_update(S.c, arg & 1 ? SSL_KEY_UPDATE_REQUESTED
                                                   : SSL_KEY_UPDATE_NOT_REQUESTED)) {
                SSL_do_handshake(S.c);
            }
            ERR_clear_error();
            take_wire();
            if (S.cshut) S.notify_end = S.wlen;
            break;
        case 12: /* the client's FIN: after what is in flight, or cutting it short */
            if (S.ceof) break;
            if (arg & 1) move_c2s(SIZE_MAX);
            shutdown(S.fd, SHUT_WR);
            S.ceof = 1;
            break;
        case 13: /* a byte changed on the wire; or bytes added (after close_notify: ignored) */
            if (S.ceof || (arg < 8 && (S.corrupt || S.woff == S.wlen))) break;
            if (arg < 8) {
                wire[S.woff + arg * 37 % (S.wlen - S.woff)] ^= (uint8_t)(1u << arg);
                S.corrupt = 1;
            } else if (S.wlen + 4201 < MAX_WIRE) {
                memcpy(wire + S.wlen, cpat, 1 + (arg & 7) * 600);
                S.wlen += 1 + (arg & 7) * 600;
                S.corrupt |= !S.cshut;
            }
            break;
        case 14: /* luxd closes, rests (lets go of its buffers), or shuts down */
            if (arg & 8) {
                close_tp(1);
            } else if (arg & 4) {
                if (!S.closed) lx_tls_rest(&S.tp);
            } else if (S.ready && !S.closed && !S.sshut) {
                int r = lx_tls_shutdown(&S.tp, &S.shreq, on_shutdown);
                CHECK(r == 0 || S.corrupt);
                S.sshut = r == 0;
                S.sfail |= r < 0;
            }
            break;
        case 15: S.echo = arg; break; /* the read callback writes arg times what it got */
        }
    }
    finish();
    return 0;
}
