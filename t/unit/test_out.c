/* Unit tests for the output ring and its writer (src/out.c) with memory
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
 * order, and the queue's counts must agree with it all along. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "out.h"
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
static int written_calls, file_refs;

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

int uv_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work_cb,
                  uv_after_work_cb after_work_cb) {
    (void)loop, (void)req, (void)work_cb, (void)after_work_cb;
    return UV_ENOSYS; /* no file pieces here */
}

void lx_sess_written(lx_sess_t *s, int status) {
    (void)s;
    assert(status == 0);
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
    lx_out_init(&s->out);
    return s;
}

static void free_sess(lx_sess_t *s) {
    lx_out_reset(&s->out, s);
    lx_out_free(&s->out);
    free(s->c);
    free(s->w);
    free(s);
}

static void restart(void) {
    nexp = ngot = 0;
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
        unsigned a = rand_below(100);
        if (a < 55) {
            if (o->n < LX_OUT_MAX) {
                unsigned k = rand_below(3);
                size_t len = 1 + rand_below(k == 2 ? 3000 : 400);
                if (k == 0) push_mem(o, len);
                if (k == 1) push_obuf(o, len);
                if (k == 2) push_stream(o, len);
            } else {
                fulls++;
            }
        } else if (a < 80) {
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
    is_int(bad_count, 0, "soak: counts within bounds, no write error");
    is_int(bad_queued, 0, "soak: o->queued is what is in and not out, at every step");
    ok(wraps >= 20, "soak: the head went round %u times (queue up to %u, full %u times)", wraps,
       max_n, fulls);
    ok(flush_all(s), "soak: the queue drains");
    ok(same_output(), "soak: every byte out, in order (%zu bytes)", nexp);
    is_int(file_refs, 0, "soak: no file reference left");
    free_sess(s);
}

int main(void) {
    expect_buf = malloc(OUT_CAP);
    got_buf = malloc(OUT_CAP);
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (char)rand_below(256);
    full_ring(0);
    full_ring(1);
    full_ring(37);
    full_ring(LX_OUT_MAX - 1);
    soak(100000);
    free(expect_buf);
    free(got_buf);
    return done_testing();
}
