/* Unit tests for the output ring and its writer (src/h1/out.c) with memory
 * pieces, against a fake stream: this file defines the libuv calls out.c
 * makes (uv_try_write takes as many bytes as the test allows, uv_write
 * completes when the test says), so the ring can be driven to its edges.
 *
 * No response luxd makes today fills the ring (a static one has at most
 * some 34 pieces, and a stream is told to wait at 16 KiB), and a queue
 * that empties starts again at entry 0: no test against a server gets its
 * head past the last entry. Here: LX_OUT_MAX pieces exactly and one more,
 * from the start and from the middle of the ring, and a long random run in
 * which the queue never empties while its head goes round many times,
 * with writes cut at any byte. What comes out must be what went in, in
 * order, and the queue's counts must agree with it all along.
 *
 * And a file piece at the head of a full ring: when the socket is full (or
 * the page cache lacks the bytes) a piece of the file is read into a
 * buffer put in front of it, which takes one entry more; with none free
 * the 81st entry was the last piece's, whose buffer was then given back
 * twice (sendfile, preadv2 and the thread pool are faked here too). */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include "h1/conn.h"
#include "io/filecache.h"
#include "h1/out.h"
#include "stats.h"
#include "plain_transport.h"
#include "tap.h"

/* ---- the fakes ------------------------------------------------------------ */

#define OUT_CAP (64u << 20)
static char *expect_buf; /* every byte queued, in order */
static size_t nexp;
static char *got_buf; /* every byte the "socket" took, in order */
static size_t ngot;
static size_t budget; /* bytes the next uv_try_write takes */

static struct {
    uv_write_t *req;
    uv_write_cb cb;
    uv_buf_t bufs[64];
    unsigned n;
    int pending;
} wr;
static int written_calls, written_status, file_refs;

static void take(const char *p, size_t n) {
    assert(ngot + n <= OUT_CAP);
    memcpy(got_buf + ngot, p, n);
    ngot += n;
}

int uv_try_write(uv_stream_t *h, const uv_buf_t bufs[], unsigned int nbufs) {
    (void)h;
    size_t took = 0;
    for (unsigned i = 0; i < nbufs && took < budget; i++) {
        size_t k = bufs[i].len < budget - took ? bufs[i].len : budget - took;
        take(bufs[i].base, k);
        took += k;
    }
    budget -= took;
    return took ? (int)took : UV_EAGAIN;
}

/* Headers before a file piece go by sendmsg(MSG_MORE), as uv_try_write. */
ssize_t sendmsg(int fd, const struct msghdr *mh, int flags) {
    (void)fd, (void)flags;
    int r = uv_try_write(NULL, (const uv_buf_t *)mh->msg_iov, (unsigned)mh->msg_iovlen);
    if (r == UV_EAGAIN) {
        errno = EAGAIN;
        return -1;
    }
    return r;
}

int uv_write(uv_write_t *req, uv_stream_t *h, const uv_buf_t bufs[], unsigned int nbufs,
             uv_write_cb cb) {
    (void)h;
    assert(!wr.pending && nbufs <= 64);
    wr.req = req;
    wr.cb = cb;
    memcpy(wr.bufs, bufs, nbufs * sizeof(*bufs));
    wr.n = nbufs;
    wr.pending = 1;
    return 0;
}

size_t uv_stream_get_write_queue_size(const uv_stream_t *stream) {
    (void)stream;
    return wr.pending;
}

/* A thread-pool read (file_to_buffer when the page cache lacks the bytes):
 * run when the test says, on this thread. */
static struct {
    uv_work_t *req;
    uv_work_cb work;
    uv_after_work_cb after;
    int pending;
} job;

int uv_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work_cb,
                  uv_after_work_cb after_work_cb) {
    (void)loop;
    assert(!job.pending);
    job.req = req;
    job.work = work_cb;
    job.after = after_work_cb;
    job.pending = 1;
    return 0;
}

static void run_job(void) {
    assert(job.pending);
    job.pending = 0;
    job.work(job.req);
    job.after(job.req, 0);
}

/* What conn.c would do next: flush again, or close on an error. */
void lx_sess_written(lx_sess_t *s, int status) {
    (void)s;
    if (status < 0) written_status = status;
    written_calls++;
}

void *lx_pool_get(lx_pool_t *p) {
    (void)p;
    return malloc(LX_OUT_BUF);
}

void lx_pool_put(lx_pool_t *p, void *block, size_t size) {
    (void)p, (void)size;
    free(block);
}

void lx_file_ref(lx_file_t *f) {
    (void)f;
    file_refs++;
}

void lx_file_unref(lx_file_t *f) {
    (void)f;
    file_refs--;
}

int lx_log_enabled(int level) {
    (void)level;
    return 0;
}

void lx_log(int level, const char *fmt, ...) {
    (void)level, (void)fmt;
}

/* Files: byte x of every file is file_byte(x). sendfile finds the socket
 * full, always, so each piece of a file is read (preadv2, "in the page
 * cache") into a pooled buffer put in front of the file piece, and written
 * by uv_write. */
static unsigned char file_byte(uint64_t x) {
    return (unsigned char)(x * 131 + 7);
}

ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count) {
    (void)out_fd, (void)in_fd, (void)offset, (void)count;
    errno = EAGAIN;
    return -1;
}

/* Whether the page cache "has" the files: if not, RWF_NOWAIT reads fail
 * and the thread pool reads them (pread, on the real file). */
static int cached = 1;

ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    (void)fd;
    if (!cached && (flags & RWF_NOWAIT)) {
        errno = EAGAIN;
        return -1;
    }
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++)
        for (size_t k = 0; k < iov[i].iov_len; k++)
            ((unsigned char *)iov[i].iov_base)[k] = file_byte((uint64_t)offset + n++);
    return (ssize_t)n;
}

/* The uv_write in flight is done: its bytes reach the "socket" in order. */
static void complete_write(void) {
    assert(wr.pending);
    wr.pending = 0;
    for (unsigned i = 0; i < wr.n; i++)
        take(wr.bufs[i].base, wr.bufs[i].len);
    wr.cb(wr.req, 0);
}

/* ---- pieces --------------------------------------------------------------- */

static char src[1 << 16]; /* what memory pieces point at */
static uint64_t rnd = 88172645463325252ULL;

static unsigned rand_below(unsigned n) {
    rnd ^= rnd << 13;
    rnd ^= rnd >> 7;
    rnd ^= rnd << 17;
    return (unsigned)(rnd % n);
}

static void expect_add(const char *p, size_t n) {
    assert(nexp + n <= OUT_CAP);
    memcpy(expect_buf + nexp, p, n);
    nexp += n;
}

/* A memory piece of len bytes (a cached file's data, static text). */
static void push_mem(lx_out_t *o, size_t len) {
    size_t off = rand_below((unsigned)(sizeof(src) - len));
    unsigned before = o->n;
    lx_out_mem(o, NULL, src + off, len);
    if (o->n > before) expect_add(src + off, len);
}

/* Header bytes into obuf (the previous obuf piece grows when it can). */
static void push_obuf(lx_out_t *o, size_t len) {
    size_t from = o->olen;
    size_t off = rand_below((unsigned)(sizeof(src) - len));
    char *b = lx_out_reserve(o, len);
    assert(b != NULL);
    memcpy(b, src + off, len);
    o->olen += len;
    unsigned before = o->n;
    int failed = o->failed;
    lx_out_obuf(o, from);
    if (o->n > before || (o->failed == failed && o->n == before)) expect_add(src + off, len);
}

/* A streamed piece: into the last pooled buffer when it has room and no
 * write holds it, else a new one (lx_stream_send's way). */
static void push_stream(lx_out_t *o, size_t len) {
    size_t off = rand_below((unsigned)(sizeof(src) - len));
    char *dst = lx_out_last_room(o, len);
    if (dst) {
        memcpy(dst, src + off, len);
        lx_out_grow_last(o, len);
        expect_add(src + off, len);
        return;
    }
    if (o->n == LX_OUT_MAX) return;
    char *buf = lx_pool_get(NULL);
    memcpy(buf, src + off, len);
    lx_out_buf(o, buf, buf, len);
    expect_add(src + off, len);
}

/* ---- the tests ------------------------------------------------------------ */

static lx_sess_t *new_sess(void) {
    lx_sess_t *s = calloc(1, sizeof(*s));
    s->c = calloc(1, sizeof(*s->c));
    s->w = calloc(1, sizeof(*s->w));
    s->w->stats = aligned_alloc(64, sizeof(lx_stats_t)); /* out.c counts its file-I/O jobs */
    s->w->copybuf = malloc(LX_OUT_BUF);
    memset(s->w->stats, 0, sizeof(lx_stats_t));
    lx_out_init(&s->out);
    /* A connection's first output is a header block, in obuf: obuf exists
     * before any write is in flight (lx_out_reserve copies it then). */
    lx_out_reserve(&s->out, 1);
    return s;
}

static void free_sess(lx_sess_t *s) {
    lx_out_reset(&s->out, s);
    lx_out_free(&s->out);
    free(s->c);
    free(s->w->stats);
    free(s->w->copybuf);
    free(s->w);
    free(s);
}

static void restart(void) {
    nexp = ngot = 0;
    written_status = 0;
    memset(&wr, 0, sizeof(wr));
}

/* Writes everything queued, the socket taking it all. */
static int flush_all(lx_sess_t *s) {
    budget = SIZE_MAX;
    for (int i = 0; i < 100000; i++) {
        if (wr.pending) complete_write();
        int r = lx_out_flush(s);
        if (r == 0 && !wr.pending) return s->out.n == 0;
        if (r != 0 && r != -EAGAIN) return 0;
    }
    return 0;
}

static int same_output(void) {
    return ngot == nexp && memcmp(got_buf, expect_buf, nexp) == 0;
}

/* LX_OUT_MAX pieces fit; one more fails the response (out.failed), and the
 * pieces already queued still go out whole, in order. start: how many
 * pieces go out first, so that the head stands there. */
static void full_ring(unsigned start) {
    lx_sess_t *s = new_sess();
    lx_out_t *o = &s->out;
    restart();
    if (start) {
        /* start + 1 pieces of 100 bytes, and a socket that takes all but
         * the last one's second half: the head moves on by start, and
         * that half waits in a uv_write. */
        for (unsigned i = 0; i <= start; i++)
            push_mem(o, 100);
        budget = 100 * start + 50;
        int r = lx_out_flush(s);
        ok(r == -EAGAIN && wr.pending && o->head == start && o->n == 1,
           "head at %u: one piece left, half of it in a uv_write (head %u, %u queued)", start,
           o->head, o->n);
    }
    unsigned head = o->head;
    while (o->n < LX_OUT_MAX)
        push_mem(o, 1 + rand_below(300));
    is_int(o->n, LX_OUT_MAX, "head at %u: LX_OUT_MAX pieces queued", head);
    ok(!o->failed, "head at %u: LX_OUT_MAX pieces are no failure", head);
    uint64_t queued = o->queued;
    lx_out_mem(o, NULL, src, 10);
    ok(o->failed && o->n == LX_OUT_MAX && o->queued == queued,
       "head at %u: one more fails, and is not queued", head);
    ok(flush_all(s), "head at %u: the queue drains", head);
    ok(same_output(), "head at %u: every byte out, in order (%zu)", head, nexp);
    is_int((long long)o->queued, 0, "head at %u: nothing counted as queued", head);
    free_sess(s);
}

/* A file piece at the head of a ring with no free entry: the bytes read
 * from it need an entry in front of it. Either they go out in order, or
 * the flush fails (the connection closes); never a 81st entry, which would
 * be the last piece's. */
static void file_in_front(unsigned behind, int in_cache, uint64_t flen) {
    lx_sess_t *s = new_sess();
    lx_out_t *o = &s->out;
    lx_file_t *f = calloc(1, sizeof(*f));
    restart();
    /* The real file, for the thread pool's pread. */
    char path[] = "/tmp/test_out-XXXXXX";
    f->fd = mkstemp(path);
    assert(f->fd >= 0);
    unlink(path);
    for (uint64_t x = 0; x < flen; x++) {
        unsigned char b = file_byte(x);
        assert(write(f->fd, &b, 1) == 1);
    }
    cached = in_cache;
    lx_out_file(o, f, 0, flen);
    for (uint64_t x = 0; x < flen; x++) {
        char b = (char)file_byte(x);
        expect_add(&b, 1);
    }
    for (unsigned i = 0; i < behind; i++)
        push_mem(o, 1 + rand_below(300));
    is_int(o->n, 1 + behind, "a file piece and %u behind it", behind);
    budget = SIZE_MAX;
    int r = 0, max_n = 0;
    for (int i = 0; i < 10000; i++) {
        if (wr.pending) complete_write();
        if (job.pending) run_job();
        r = lx_out_flush(s);
        if ((int)o->n > max_n) max_n = (int)o->n;
        if (r != -EAGAIN || o->n > LX_OUT_MAX || written_status < 0) break;
    }
    const char *how = in_cache ? "read on the loop" : "read on the thread pool";
    ok(max_n <= LX_OUT_MAX, "%u behind, %s: never more than LX_OUT_MAX entries (%d)", behind, how,
       max_n);
    if (behind + 1 < LX_OUT_MAX) {
        ok(r == 0 && o->n == 0 && same_output(), "%u behind, %s: every byte out, in order", behind,
           how);
    } else {
        /* The thread pool's read ends in lx_sess_written's error. */
        ok(r == 0 ? same_output() : r == -ENOBUFS || written_status < 0,
           "%u behind, %s: every byte out in order, or the flush fails (%d)", behind, how, r);
    }
    if (wr.pending) complete_write();
    if (job.pending) run_job();
    free_sess(s);
    close(f->fd);
    free(f);
    cached = 1;
}

/* A long run in which pieces of every kind are queued behind writes that
 * the socket takes in cuts anywhere, so that the queue rarely empties and
 * its head goes round. */
static void soak(unsigned steps) {
    lx_sess_t *s = new_sess();
    lx_out_t *o = &s->out;
    restart();
    unsigned wraps = 0, last_head = 0, fulls = 0, max_n = 0;
    int bad_count = 0, bad_queued = 0;
    for (unsigned i = 0; i < steps; i++) {
        /* More pieces in than flushes out: streamed pieces the socket
         * takes at once leave at once (uv_try_write), and a queue that
         * empties starts again at entry 0, so its head would seldom go
         * round. */
        unsigned a = rand_below(100);
        if (a < 70) {
            if (o->n < LX_OUT_MAX) {
                unsigned k = rand_below(3);
                size_t len = 1 + rand_below(k == 2 ? 3000 : 400);
                if (k == 0) push_mem(o, len);
                if (k == 1) push_obuf(o, len);
                if (k == 2) push_stream(o, len);
            } else {
                fulls++;
            }
        } else if (a < 85) {
            if (!wr.pending) {
                /* Mostly small cuts, so the queue fills up. */
                budget = rand_below(4) ? rand_below(300) : rand_below(5000);
                int r = lx_out_flush(s);
                if (r != 0 && r != -EAGAIN) bad_count++;
            }
        } else if (wr.pending) {
            complete_write();
        }
        if (o->n && o->head < last_head) wraps++;
        last_head = o->head;
        if (o->n > max_n) max_n = o->n;
        if (o->n > LX_OUT_MAX) bad_count++;
        /* Bytes queued are those in but not yet out (bytes in flight in a
         * uv_write are still queued). */
        if (o->queued != nexp - ngot) bad_queued++;
        if (o->failed) break;
    }
    ok(!o->failed, "soak: no piece refused (the test keeps below LX_OUT_MAX)");
    is_int(written_status, 0, "soak: no write failed");
    is_int(bad_count, 0, "soak: counts within bounds, no write error");
    is_int(bad_queued, 0, "soak: o->queued is what is in and not out, at every step");
    ok(wraps >= 20, "soak: the head went round %u times (queue up to %u, full %u times)", wraps,
       max_n, fulls);
    ok(flush_all(s), "soak: the queue drains");
    ok(same_output(), "soak: every byte out, in order (%zu bytes)", nexp);
    is_int(file_refs, 0, "soak: no file reference left");
    free_sess(s);
}

/* A file piece that goes out copied (LX_OUT_COPY_MAX), with headers in obuf
 * before it and a memory piece after it (a multipart boundary), through a
 * socket that takes `first` bytes at the first try and `step` at each one
 * after (a uv_write's completion takes all it holds): every cut inside the
 * headers, at their end, inside each 64 KiB write of the file and past it.
 * What the socket did not take of the scratch must be read again from the
 * file; what it did not take of the headers waits in a uv_write. The piece
 * is at the limit, one byte under it, and one past a 64 KiB write (a range,
 * or the tail of a file past the memory cache). */
static void copied_cut(int in_cache) {
    static const uint64_t lens[] = {LX_OUT_COPY_MAX, LX_OUT_COPY_MAX - 1, LX_OUT_BUF + 1};
    static const size_t steps[] = {SIZE_MAX, 4096, 65535, 65536, 65537};
    const size_t hdr = 300;
    /* Every cut in the headers and at their end, the socket then taking
     * all; and some in and past the file's first write, with every step. */
    static const size_t more[] = {302,
                                  1000,
                                  LX_OUT_BUF - 301,
                                  LX_OUT_BUF - 300,
                                  LX_OUT_BUF - 299,
                                  LX_OUT_BUF,
                                  LX_OUT_BUF + 1,
                                  2 * LX_OUT_BUF - 300,
                                  100000};
    int bad = 0, runs = 0;
    char path[] = "/tmp/test_out-XXXXXX";
    int fd = mkstemp(path);
    assert(fd >= 0);
    unlink(path);
    for (uint64_t x = 0; x < LX_OUT_COPY_MAX; x++) {
        unsigned char b = file_byte(x);
        assert(write(fd, &b, 1) == 1);
    }
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
        for (size_t fi = 0; fi < hdr + 2 + sizeof(more) / sizeof(more[0]); fi++)
            for (size_t si = 0; si < (fi < hdr + 2 ? 1 : sizeof(steps) / sizeof(steps[0])); si++) {
                size_t first = fi < hdr + 2 ? fi : more[fi - hdr - 2];
                lx_sess_t *s = new_sess();
                lx_out_t *o = &s->out;
                lx_file_t *f = calloc(1, sizeof(*f));
                f->fd = fd;
                restart();
                cached = in_cache;
                push_obuf(o, hdr);
                lx_out_file(o, f, 0, lens[li]);
                for (uint64_t x = 0; x < lens[li]; x++) {
                    char b = (char)file_byte(x);
                    expect_add(&b, 1);
                }
                push_mem(o, 40);
                budget = first;
                int r = 0;
                for (int i = 0; i < 1000000; i++) {
                    r = lx_out_flush(s);
                    if (r == 0 && !wr.pending && !job.pending) break;
                    if (r != 0 && r != -EAGAIN) break;
                    /* Another connection's flush uses the loop's scratch
                     * meanwhile: no uv_write may point into it. */
                    memset(s->w->copybuf, 0xAA, LX_OUT_BUF);
                    if (wr.pending) complete_write();
                    if (job.pending) run_job();
                    budget = steps[si];
                }
                runs++;
                if (r != 0 || o->n != 0 || written_status < 0 || !same_output() || o->queued) {
                    if (!bad++)
                        diag("file %llu, first %zu, step %zu: r %d, n %u, got %zu of %zu",
                             (unsigned long long)lens[li], first, steps[si], r, o->n, ngot, nexp);
                }
                free_sess(s);
                free(f);
            }
    close(fd);
    ok(bad == 0, "copied, %s: every byte out, in order, at every cut (%d runs, %d bad)",
       in_cache ? "in the page cache" : "read on the thread pool", runs, bad);
}

/* LX_OUT_BURST: streamed pieces go out at once while no more than the
 * limit has gone at once since the loop last ran the connection; then by
 * uv_write, whose completion (a turn of the loop) starts the count again. */
static void burst_limit(void) {
    lx_sess_t *s = new_sess();
    lx_out_t *o = &s->out;
    restart();
    budget = SIZE_MAX;
    for (size_t sent = 0; sent < LX_OUT_BURST; sent += 32768) {
        push_stream(o, 32768);
        lx_out_flush(s);
    }
    ok(!wr.pending && o->burst == LX_OUT_BURST && o->n == 0,
       "burst: exactly LX_OUT_BURST bytes went at once (%u)", o->burst);
    push_stream(o, 1);
    lx_out_flush(s);
    ok(!wr.pending && o->burst == LX_OUT_BURST + 1,
       "burst: at the limit, the next piece still goes at once");
    push_stream(o, 1);
    lx_out_flush(s);
    ok(wr.pending && o->burst == LX_OUT_BURST + 1,
       "burst: one byte past it, the next waits in a uv_write");
    complete_write();
    ok(o->burst == 0, "burst: the uv_write's completion starts the count again");
    push_stream(o, 1);
    lx_out_flush(s);
    ok(!wr.pending && o->n == 0, "burst: and the next piece goes at once again");
    ok(same_output(), "burst: every byte out, in order");
    free_sess(s);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    expect_buf = malloc(OUT_CAP);
    got_buf = malloc(OUT_CAP);
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (char)rand_below(256);
    full_ring(0);
    full_ring(1);
    full_ring(37);
    full_ring(LX_OUT_MAX - 1);
    /* Copied (LX_OUT_COPY_MAX), and by sendfile. */
    for (uint64_t flen = 100000; flen < 400000; flen += 200000)
        for (int c = 1; c >= 0; c--) {
            file_in_front(0, c, flen);
            file_in_front(LX_OUT_MAX - 2, c, flen);
            file_in_front(LX_OUT_MAX - 1, c, flen);
        }
    for (int c = 1; c >= 0; c--)
        copied_cut(c);
    soak(100000);
    burst_limit();
    free(expect_buf);
    free(got_buf);
    return done_testing();
}
