/* A random run of out.c's writer over four sessions of one loop, which
 * share the loop's scratch buffer (the copied path, LX_OUT_COPY_MAX): file
 * pieces of every size, writes cut anywhere, uv_writes and thread-pool reads
 * completing in any order, page-cache misses and short reads. Each
 * session's output must be what it queued, in order, and its queued count
 * must agree all along. (From the break review of issue 18's copied path;
 * it caught a uv_write left pointing into the scratch. Arguments: steps,
 * seed; SHRINK=1 shrinks a file half-way, which must fail only the sessions
 * that read it.) */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "h1/conn.h"
#include "io/filecache.h"
#include "h1/out.h"
#include "stats.h"
#include "plain_transport.h"

#define NS      4
#define OUT_CAP (64u << 20)

typedef struct {
    lx_sess_t *s;
    char *exp, *got;
    size_t nexp, ngot;
    size_t budget;
    struct {
        uv_write_t *req;
        uv_write_cb cb;
        uv_buf_t bufs[64];
        unsigned n;
        int pending;
    } wr;
    struct {
        uv_work_t *req;
        uv_work_cb work;
        uv_after_work_cb after;
        int pending;
    } job;
    int failed;
    int written_status;
    size_t checked;
} fs_t;

static fs_t S[NS];
static lx_worker_t W;
static lx_file_t FILES[8];
static uint64_t fsize[8];
static int cached_mode; /* 0 all cached, 1 random miss, 2 random short */
static long n_writes;
static uint64_t rnd = 88172645463325252ULL;
static unsigned rb(unsigned n) {
    rnd ^= rnd << 13;
    rnd ^= rnd >> 7;
    rnd ^= rnd << 17;
    return (unsigned)(rnd % n);
}

static fs_t *by_stream(const uv_stream_t *h) {
    for (int i = 0; i < NS; i++)
        if ((const uv_stream_t *)&S[i].s->c->link.tp.tcp == h) return &S[i];
    abort();
}
static fs_t *by_fd(int fd) {
    for (int i = 0; i < NS; i++)
        if (S[i].s->c->link.tp.tcp.io_watcher.fd == fd) return &S[i];
    abort();
}
static fs_t *by_sess(lx_sess_t *s) {
    for (int i = 0; i < NS; i++)
        if (S[i].s == s) return &S[i];
    abort();
}
static unsigned char file_byte(int fd, uint64_t x) {
    return (unsigned char)((x * 131 + 7) ^ (uint64_t)fd * 77);
}
static void take(fs_t *f, const char *p, size_t n) {
    assert(f->ngot + n <= OUT_CAP);
    memcpy(f->got + f->ngot, p, n);
    f->ngot += n;
}

int uv_try_write(uv_stream_t *h, const uv_buf_t bufs[], unsigned int nbufs) {
    fs_t *f = by_stream(h);
    if (f->wr.pending) return UV_EAGAIN;
    size_t took = 0;
    for (unsigned i = 0; i < nbufs && took < f->budget; i++) {
        size_t k = bufs[i].len < f->budget - took ? bufs[i].len : f->budget - took;
        take(f, bufs[i].base, k);
        took += k;
    }
    f->budget -= took;
    n_writes++;
    return took ? (int)took : UV_EAGAIN;
}
ssize_t sendmsg(int fd, const struct msghdr *mh, int flags) {
    (void)flags;
    fs_t *f = by_fd(fd);
    size_t took = 0;
    for (size_t i = 0; i < mh->msg_iovlen && took < f->budget; i++) {
        size_t l = mh->msg_iov[i].iov_len;
        size_t k = l < f->budget - took ? l : f->budget - took;
        take(f, mh->msg_iov[i].iov_base, k);
        took += k;
    }
    f->budget -= took;
    if (!took) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)took;
}
int uv_write(uv_write_t *req, uv_stream_t *h, const uv_buf_t bufs[], unsigned int nbufs,
             uv_write_cb cb) {
    fs_t *f = by_stream(h);
    assert(!f->wr.pending && nbufs <= 64);
    f->wr.req = req;
    f->wr.cb = cb;
    memcpy(f->wr.bufs, bufs, nbufs * sizeof(*bufs));
    f->wr.n = nbufs;
    f->wr.pending = 1;
    return 0;
}
size_t uv_stream_get_write_queue_size(const uv_stream_t *h) {
    return by_stream(h)->wr.pending;
}
int uv_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work_cb, uv_after_work_cb after) {
    (void)loop;
    lx_out_t *o = container_of(req, lx_out_t, work);
    lx_sess_t *s = container_of(o, lx_sess_t, out);
    fs_t *f = by_sess(s);
    assert(!f->job.pending);
    f->job.req = req;
    f->job.work = work_cb;
    f->job.after = after;
    f->job.pending = 1;
    return 0;
}
void lx_sess_written(lx_sess_t *s, int status) {
    fs_t *f = by_sess(s);
    if (status < 0) f->written_status = status;
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
}
void lx_file_unref(lx_file_t *f) {
    (void)f;
}
int lx_log_enabled(int level) {
    (void)level;
    return 0;
}
void lx_log(int level, const char *fmt, ...) {
    (void)level, (void)fmt;
}

static size_t file_read(int fd, char *buf, size_t n, uint64_t off) {
    uint64_t size = fsize[fd - 1000];
    if (off >= size) return 0;
    if (n > size - off) n = (size_t)(size - off);
    for (size_t k = 0; k < n; k++)
        buf[k] = (char)file_byte(fd, off + k);
    return n;
}
ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count) {
    fs_t *f = by_fd(out_fd);
    if (f->wr.pending) abort(); /* sendfile while a uv_write is queued: out of order */
    size_t k = count < f->budget ? count : f->budget;
    if (!k) {
        errno = EAGAIN;
        return -1;
    }
    char *tmp = malloc(k);
    k = file_read(in_fd, tmp, k, (uint64_t)*offset);
    take(f, tmp, k);
    free(tmp);
    f->budget -= k;
    *offset += (off_t)k;
    return (ssize_t)k;
}
ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    assert(iovcnt == 1);
    if (flags & RWF_NOWAIT) {
        if (cached_mode == 1 && rb(4) == 0) {
            errno = EAGAIN;
            return -1;
        }
    }
    size_t n = iov[0].iov_len;
    if ((flags & RWF_NOWAIT) && cached_mode == 2 && n > 1 && rb(3) == 0)
        n = 1 + rb((unsigned)n - 1);
    return (ssize_t)file_read(fd, iov[0].iov_base, n, (uint64_t)offset);
}
ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    return (ssize_t)file_read(fd, buf, n, (uint64_t)off);
}

static void complete(fs_t *f) {
    f->wr.pending = 0;
    for (unsigned i = 0; i < f->wr.n; i++)
        take(f, f->wr.bufs[i].base, f->wr.bufs[i].len);
    f->wr.cb(f->wr.req, 0);
}
static void run_job(fs_t *f) {
    f->job.pending = 0;
    f->job.work(f->job.req);
    f->job.after(f->job.req, 0);
}

static char src[1 << 16];
static void expect(fs_t *f, const char *p, size_t n) {
    memcpy(f->exp + f->nexp, p, n);
    f->nexp += n;
}
static void push_obuf(fs_t *f, size_t len) {
    lx_out_t *o = &f->s->out;
    size_t from = o->olen;
    size_t off = rb((unsigned)(sizeof(src) - len));
    char *b = lx_out_reserve(o, len);
    memcpy(b, src + off, len);
    o->olen += len;
    lx_out_obuf(o, from);
    expect(f, src + off, len);
}
static void push_file(fs_t *f, int fi, uint64_t off, uint64_t len) {
    lx_out_file(&f->s->out, &FILES[fi], off, len);
    char *tmp = malloc(len);
    file_read(FILES[fi].fd, tmp, len, off);
    expect(f, tmp, len);
    free(tmp);
}
static void push_mem(fs_t *f, size_t len) {
    size_t off = rb((unsigned)(sizeof(src) - len));
    lx_out_mem(&f->s->out, NULL, src + off, len);
    expect(f, src + off, len);
}

static size_t sizes[] = {1,     100,    4095,   4096,   4097,   30000,  65535, 65536,
                         65537, 100000, 131071, 131072, 131073, 200000, 600000};

/* A response: headers, then a body of 1..3 file pieces with obuf between. */
static void push_response(fs_t *f) {
    push_obuf(f, 50 + rb(400));
    int parts = 1 + rb(3);
    for (int p = 0; p < parts; p++) {
        int fi = rb(8);
        uint64_t len = sizes[rb(sizeof(sizes) / sizeof(sizes[0]))];
        if (len > fsize[fi]) len = fsize[fi];
        uint64_t off = rb((unsigned)(fsize[fi] - len + 1));
        if (rb(5) == 0) push_mem(f, 1 + rb(2000));
        push_file(f, fi, off, len);
        if (parts > 1) push_obuf(f, 20 + rb(100));
    }
}

int main(int argc, char **argv) {
    unsigned steps = argc > 1 ? (unsigned)atoi(argv[1]) : 200000;
    if (argc > 2) rnd ^= (uint64_t)atoll(argv[2]) * 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (char)rb(256);
    W.copybuf = malloc(LX_OUT_BUF);
    W.stats = aligned_alloc(64, sizeof(lx_stats_t));
    memset(W.stats, 0, sizeof(lx_stats_t));
    for (int i = 0; i < 8; i++) {
        FILES[i].fd = 1000 + i;
        fsize[i] = 700000;
    }
    for (int i = 0; i < NS; i++) {
        fs_t *f = &S[i];
        f->s = calloc(1, sizeof(*f->s));
        f->s->c = calloc(1, sizeof(*f->s->c));
        f->s->c->link.tp.tcp.io_watcher.fd = 100 + i;
        f->s->w = &W;
        lx_out_init(&f->s->out);
        lx_out_reserve(&f->s->out, 1);
        f->exp = malloc(OUT_CAP);
        f->got = malloc(OUT_CAP);
    }
    int bad = 0;
    for (unsigned step = 0; step < steps; step++) {
        if (step % 20000 == 0) cached_mode = rb(3);
        if (getenv("SHRINK") && step == steps / 2) {
            fsize[0] = 150000; /* the file shrank under us */
            for (int i = 0; i < NS; i++)
                S[i].s->out.failed = 0;
        }
        fs_t *f = &S[rb(NS)];
        lx_out_t *o = &f->s->out;
        if (f->failed) continue;
        unsigned a = rb(100);
        if (a < 15) {
            if (o->n < 20 && f->nexp < OUT_CAP - 4000000) push_response(f);
        } else if (a < 60) {
            if (!o->writing && !o->file_io) {
                f->budget = rb(3) ? rb(3000) : rb(3) ? rb(70000) : rb(400000);
                int r = lx_out_flush(f->s);
                if (r != 0 && r != -EAGAIN) {
                    fprintf(stderr, "session %ld: flush %d\n", (long)(f - S), r);
                    f->failed = 1;
                    bad++;
                }
            }
        } else if (a < 85) {
            if (f->wr.pending) complete(f);
        } else {
            if (f->job.pending) run_job(f);
        }
        if (f->written_status) {
            fprintf(stderr, "session %ld: written %d\n", (long)(f - S), f->written_status);
            f->failed = 1;
            bad++;
        }
        for (int i = 0; i < NS; i++) {
            fs_t *g = &S[i];
            if (g->s->out.queued != g->nexp - g->ngot && !g->failed) {
                fprintf(stderr, "step %u session %d: queued %llu, in-out %zu\n", step, i,
                        (unsigned long long)g->s->out.queued, g->nexp - g->ngot);
                g->failed = 1;
                bad++;
            }
            if (g->ngot > g->nexp ||
                memcmp(g->got + g->checked, g->exp + g->checked, g->ngot - g->checked) != 0) {
                size_t k = 0;
                while (k < g->ngot && g->got[k] == g->exp[k])
                    k++;
                printf("# step %u session %d: output differs at byte %zu of %zu\n", step, i, k,
                       g->ngot);
                printf("1..1\nnot ok 1 - four sessions sharing the scratch: the output differs\n");
                return 1;
            }
            g->checked = g->ngot;
        }
    }
    /* drain */
    for (int round = 0; round < 100000; round++) {
        int busy = 0;
        for (int i = 0; i < NS; i++) {
            fs_t *f = &S[i];
            if (f->failed) continue;
            if (f->wr.pending) complete(f), busy = 1;
            if (f->job.pending) run_job(f), busy = 1;
            f->budget = SIZE_MAX;
            if (!f->s->out.writing && !f->s->out.file_io && f->s->out.n) {
                int r = lx_out_flush(f->s);
                busy = 1;
                if (r != 0 && r != -EAGAIN) f->failed = 1, bad++;
            }
        }
        if (!busy) break;
    }
    for (int i = 0; i < NS; i++) {
        fs_t *f = &S[i];
        int same = f->ngot == f->nexp && memcmp(f->got, f->exp, f->nexp) == 0;
        printf("# session %d: %zu bytes expected, %zu got, %s%s\n", i, f->nexp, f->ngot,
               same ? "same" : "DIFFERENT", f->failed ? " (failed)" : "");
        if (!same && !(getenv("SHRINK") && f->failed)) bad++;
        if (f->s->out.n && !f->failed) {
            printf("# session %d: stuck with %u pieces\n", i, f->s->out.n);
            bad++;
        }
    }
    printf("1..1\n%sok 1 - four sessions sharing the scratch, %u steps: every byte out, in order "
           "(%ld writes, %d bad)\n",
           bad ? "not " : "", steps, n_writes, bad);
    return bad != 0;
}
