/* The output queue and its writer (out.h says how bytes go out). */
#include "h1/out.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/magic.h>

#include "h1/conn.h"
#include "io/filecache.h"
#include "log.h"
#include "stats.h"

/* Bytes sendfile moves per call: large enough to amortise the syscall, small
 * enough that one big download does not starve the loop's other clients. */
#define SENDFILE_CHUNK (512 * 1024)
#define MAX_IOV        16
/* Bytes of a file written by uv_write when the socket is full (see
 * file_to_buffer). */
#define WAIT_PIECE (4 * 1024)

/* Entry i of the queue, counted from its head (i < LX_OUT_MAX, so one
 * compare wraps it: no division by LX_OUT_MAX in the hot path). */
static lx_piece_t *at(lx_out_t *o, unsigned i) {
    unsigned k = o->head + i;
    return &o->q[k < LX_OUT_MAX ? k : k - LX_OUT_MAX];
}

/* The head moves on past a piece sent, or back for one put in front. */
static void head_next(lx_out_t *o) {
    o->head = o->head + 1 == LX_OUT_MAX ? 0 : o->head + 1;
}

static void head_prev(lx_out_t *o) {
    o->head = o->head ? o->head - 1 : LX_OUT_MAX - 1;
}

/* Whether bytes read from the head file piece can go in front of it as a
 * buffer piece: when they do not finish it, that takes an entry more, and
 * a full ring has none (81 entries would wrap onto the last one). */
static int room_in_front(const lx_out_t *o, uint64_t bytes) {
    return o->n < LX_OUT_MAX || bytes >= o->q[o->head].len;
}

void lx_out_init(lx_out_t *o) {
    memset(o, 0, sizeof(*o));
}

static void piece_release(lx_piece_t *p, lx_sess_t *s) {
    if (p->kind == LX_PIECE_FILE) { /* the next is checked anew */
        s->out.warm_to = s->out.cold = 0;
        s->out.missed = s->out.stalled = 0;
    }
    if (p->file) lx_file_unref(p->file);
    if (p->kind == LX_PIECE_BUF) lx_pool_put(&s->w->obufs, p->buf, LX_OUT_BUF);
    p->file = NULL;
}

void lx_out_reset(lx_out_t *o, lx_sess_t *s) {
    while (o->n) {
        piece_release(&o->q[o->head], s);
        head_next(o);
        o->n--;
    }
    o->head = 0;
    o->olen = 0;
    o->queued = 0;
    o->failed = 0;
    o->full = 0;
    o->burst = 0;
    o->warm_to = 0;
    o->stalled = 0;
}

void lx_out_free(lx_out_t *o) {
    free(o->obuf);
    o->obuf = NULL;
    o->ocap = 0;
}

char *lx_out_reserve(lx_out_t *o, size_t n) {
    if (o->olen + n > o->ocap) {
        size_t cap = o->ocap ? o->ocap : 1024;
        while (cap < o->olen + n)
            cap *= 2;
        char *b;
        if (o->writing && o->obuf_old == NULL) {
            /* A uv_write points into obuf (100 Continue, or headers, still
             * in flight): it moves to a copy, and the old one is freed when
             * the write is done (on_write). One write is in flight at a
             * time, so a second growth meanwhile may realloc the copy. */
            if ((b = malloc(cap)) != NULL) {
                memcpy(b, o->obuf, o->olen);
                o->obuf_old = o->obuf;
            }
        } else {
            b = realloc(o->obuf, cap);
        }
        if (b == NULL) {
            o->failed = 1;
            return NULL;
        }
        o->obuf = b;
        o->ocap = cap;
    }
    return o->obuf + o->olen;
}

static lx_piece_t *push(lx_out_t *o, lx_piece_kind_t kind, uint64_t len) {
    if (o->n == LX_OUT_MAX) {
        o->failed = 1; /* cannot happen with the bounds of the handlers; be safe */
        return NULL;
    }
    lx_piece_t *p = at(o, o->n);
    o->n++;
    memset(p, 0, sizeof(*p));
    p->kind = (uint8_t)kind;
    p->len = len;
    o->queued += len;
    return p;
}

void lx_out_obuf(lx_out_t *o, size_t from) {
    if (o->olen == from) return;
    /* Extend the previous obuf piece when it ends where this one starts. */
    if (o->n) {
        lx_piece_t *last = at(o, o->n - 1);
        if (last->kind == LX_PIECE_OBUF && last->off + last->len == from && !o->writing) {
            last->len += o->olen - from;
            o->queued += o->olen - from;
            return;
        }
    }
    lx_piece_t *p = push(o, LX_PIECE_OBUF, o->olen - from);
    if (p) p->off = from;
}

void lx_out_mem(lx_out_t *o, lx_file_t *f, const char *ptr, size_t len) {
    if (len == 0) return;
    lx_piece_t *p = push(o, LX_PIECE_MEM, len);
    if (p == NULL) return;
    p->ptr = (char *)ptr;
    p->file = f;
    if (f) lx_file_ref(f);
}

void lx_out_file(lx_out_t *o, lx_file_t *f, uint64_t off, uint64_t len) {
    if (len == 0) return;
    lx_piece_t *p = push(o, LX_PIECE_FILE, len);
    if (p == NULL) return;
    p->file = f;
    lx_file_ref(f);
    p->off = off;
}

void lx_out_buf(lx_out_t *o, char *buf, char *ptr, size_t len) {
    lx_piece_t *p = push(o, LX_PIECE_BUF, len);
    if (p == NULL) {
        free(buf);
        return;
    }
    p->buf = buf;
    p->ptr = ptr;
}

char *lx_out_last_room(lx_out_t *o, size_t n) {
    if (o->n == 0 || (o->writing && o->n - 1 < o->wpieces)) return NULL;
    lx_piece_t *p = at(o, o->n - 1);
    if (p->kind != LX_PIECE_BUF) return NULL;
    char *end = p->ptr + p->len;
    return (size_t)(p->buf + LX_OUT_BUF - end) >= n ? end : NULL;
}

void lx_out_grow_last(lx_out_t *o, size_t n) {
    at(o, o->n - 1)->len += n;
    o->queued += n;
}

static void consume(lx_sess_t *s, uint64_t n) {
    lx_out_t *o = &s->out;
    o->queued -= n;
    while (n && o->n) {
        lx_piece_t *p = &o->q[o->head];
        uint64_t take = n < p->len ? n : p->len;
        p->len -= take;
        p->off += take;
        if (p->ptr) p->ptr += take;
        n -= take;
        if (p->len == 0) {
            piece_release(p, s);
            head_next(o);
            o->n--;
        }
    }
    if (o->n == 0) {
        o->head = 0;
        o->olen = 0;
    }
}

/* The first k pieces, bytes in all, went out whole: consume without the
 * arithmetic of a partial write. */
static void drop(lx_sess_t *s, unsigned k, uint64_t bytes) {
    lx_out_t *o = &s->out;
    o->queued -= bytes;
    o->n -= k;
    while (k--) {
        piece_release(&o->q[o->head], s);
        head_next(o);
    }
    if (o->n == 0) {
        o->head = 0;
        o->olen = 0;
    }
}

/* n bytes of the head file piece, read into the pooled buffer buf, leave it
 * for a buffer piece in front of it (room_in_front said there is room). */
static void put_in_front(lx_sess_t *s, char *buf, uint64_t n) {
    lx_out_t *o = &s->out;
    consume(s, n);
    head_prev(o);
    o->n++;
    lx_piece_t *b = &o->q[o->head];
    memset(b, 0, sizeof(*b));
    b->kind = LX_PIECE_BUF;
    b->buf = b->ptr = buf;
    b->len = n;
    o->queued += n;
}

static lx_tp_t *tp_of(lx_sess_t *s) {
    return &s->c->link.tp;
}

/* ---- the asynchronous parts: uv_write and thread-pool reads ------------- */

static void on_write(uv_write_t *req, int status) {
    lx_out_t *o = container_of(req, lx_out_t, wreq);
    lx_sess_t *s = container_of(o, lx_sess_t, out);
    o->writing = 0;
    o->full = 0;  /* the socket took these bytes: it may take the next at once */
    o->burst = 0; /* and the loop has run since */
    free(o->obuf_old);
    o->obuf_old = NULL;
    if (status == 0) consume(s, o->wlen);
    o->wlen = 0;
    lx_sess_written(s, status);
}

/* Queues pieces [0, npieces) of iov (the queue's first pieces, whose first
 * `done` bytes the socket took already) with uv_write. */
static int write_rest(lx_sess_t *s, uv_buf_t *bufs, int nbufs, size_t done) {
    lx_out_t *o = &s->out;
    size_t total = 0;
    int i = 0;
    while (i < nbufs && done >= bufs[i].len)
        done -= bufs[i++].len;
    if (i < nbufs) {
        bufs[i].base += done;
        bufs[i].len -= done;
    }
    for (int k = i; k < nbufs; k++)
        total += bufs[k].len;
    int r = lx_tp_write(tp_of(s), &o->wreq, bufs + i, (unsigned)(nbufs - i), on_write);
    if (r < 0) return r;
    o->writing = 1;
    o->wpieces = (unsigned)(nbufs - i);
    o->wlen = total;
    return -EAGAIN;
}

static void read_work(uv_work_t *w) {
    lx_out_t *o = container_of(w, lx_out_t, work);
    ssize_t r = pread(o->work_file->fd, o->work_buf, (size_t)o->work_len, (off_t)o->work_off);
    o->work_got = r < 0 ? -errno : r;
}

static void read_done(uv_work_t *w, int status) {
    lx_out_t *o = container_of(w, lx_out_t, work);
    lx_sess_t *s = container_of(o, lx_sess_t, out);
    LX_ST_DEC(&s->w->stats->io_jobs);
    o->file_io = 0;
    s->req.pending--;
    lx_file_unref(o->work_file);
    o->work_file = NULL;
    char *buf = o->work_buf;
    o->work_buf = NULL;
    lx_log_debug("read-ahead done at %llu (%zd bytes)", (unsigned long long)o->work_off,
                 o->work_got);
    if (s->c == NULL || status < 0 || o->work_got <= 0 || o->n == 0 ||
        o->q[o->head].kind != LX_PIECE_FILE || o->q[o->head].off != o->work_off ||
        !room_in_front(o, (uint64_t)o->work_got)) {
        /* The connection is gone, or the file shrank (a short read makes the
         * announced length a lie: close), or the ring is full (no response
         * has that many pieces; be safe). */
        lx_pool_put(&s->w->obufs, buf, LX_OUT_BUF);
        lx_sess_written(s, s->c == NULL || status < 0 ? -ECANCELED : -EIO);
        return;
    }
    put_in_front(s, buf, (uint64_t)o->work_got);
    lx_sess_written(s, 0);
}

/* Whether err from a preadv2(RWF_NOWAIT) says the file cannot be asked at
 * all (overlayfs and tmpfs refuse it: EOPNOTSUPP; a seccomp filter or an
 * old kernel: ENOSYS, EPERM, EINVAL), rather than about these bytes. Then
 * the file's page cache is never asked again: a tmpfs or ramfs file lives
 * in memory and is always "cached" (sendfile, and plain reads); any other's
 * bytes go by the thread pool, never by sendfile in the loop, which could
 * wait for the disk (t/178). The latter is said once per process at info:
 * it costs a copy per byte. */
static int refused(lx_file_t *f, int err) {
    static int told;
    if (err != EOPNOTSUPP && err != ENOSYS && err != EPERM && err != EINVAL) return 0;
    struct statfs sf;
    if (fstatfs(f->fd, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)) {
        f->probe = LX_PROBE_RAM;
        return 1;
    }
    f->probe = LX_PROBE_NONE;
    if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        lx_log_info("\"%s\": its filesystem refuses non-blocking reads (RWF_NOWAIT: %s), so "
                    "files there are read on the thread pool, not sent by sendfile",
                    f->path, strerror(err));
    return 1;
}

/* Whether the loop thread's block reads are where they were at the last
 * look (and from now on, they are). */
static int loop_read_nothing(lx_worker_t *w) {
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0) return 1;
    int same = ru.ru_inblock == w->inblock;
    w->inblock = ru.ru_inblock;
    return same;
}

/* Reads up to n bytes at off from the page cache alone: preadv2 with
 * RWF_NOWAIT never waits on the disk (a file in memory, on tmpfs, is read
 * plainly). Returns the bytes read; -EAGAIN when none are cached, or the
 * file cannot be asked (refused(): the thread pool reads it); -EIO at the
 * end of the file (it shrank under us: the announced length is a lie now);
 * another negative errno on failure. */
static ssize_t read_cached(lx_worker_t *w, lx_file_t *f, char *buf, size_t n, uint64_t off) {
    if (f->probe == LX_PROBE_NONE) return -EAGAIN;
    struct iovec iov = {buf, n};
    int how = f->probe == LX_PROBE_RAM ? 0 : RWF_NOWAIT;
    ssize_t r = preadv2(f->fd, &iov, 1, (off_t)off, how);
    if (r < 0 && how && refused(f, errno) && f->probe == LX_PROBE_RAM)
        r = preadv2(f->fd, &iov, 1, (off_t)off, 0);
    /* A read that stopped at a page not cached started that page's read
     * from this thread: counted now, it does not make the next look at the
     * page cache (probe_ends, any connection's) a miss (t/181). A whole
     * read that a fast disk completed in line is not counted here (a
     * getrusage per read would cost what the probes did): the next look
     * then calls its range a miss, and the pool reads it once. */
    if (how && (r < 0 ? errno == EAGAIN : (size_t)r < n)) loop_read_nothing(w);
    if (r > 0) return r;
    if (r == 0) return -EIO;
    return errno == EAGAIN || f->probe == LX_PROBE_NONE ? -EAGAIN : -errno;
}

/* Reads up to LX_OUT_BUF bytes of the head file piece into a pooled buffer:
 * at once when the page cache has them (cached: 1), else on the thread
 * pool. Returns 0 when a buffer piece now heads the queue, -EAGAIN when the
 * read is on the thread pool, another negative errno on failure. */
static int file_to_buffer(lx_sess_t *s, int cached) {
    lx_out_t *o = &s->out;
    lx_piece_t *p = &o->q[o->head];
    size_t n = p->len < LX_OUT_BUF ? (size_t)p->len : LX_OUT_BUF;
    char *buf = lx_pool_get(&s->w->obufs);
    if (buf == NULL) return -ENOMEM;
    if (cached) {
        /* The socket is full: this piece only waits, in libuv's uv_write,
         * for it to take bytes again (sendfile goes on after it), and its
         * bytes are copied twice (pread, write) where sendfile's are not.
         * A small one does that as well as a whole buffer. A transport
         * without sendfile (TLS) sends every byte so: a whole buffer. */
        if (n > WAIT_PIECE && lx_tp_can_sendfile(tp_of(s))) n = WAIT_PIECE;
        ssize_t r = read_cached(s->w, p->file, buf, n, p->off);
        /* As push: no response has that many pieces. */
        if (r > 0 && !room_in_front(o, (uint64_t)r)) r = -ENOBUFS;
        if (r > 0) {
            put_in_front(s, buf, (uint64_t)r);
            return 0;
        }
        if (r != -EAGAIN) {
            lx_pool_put(&s->w->obufs, buf, LX_OUT_BUF);
            return (int)r;
        }
    }
    o->work_file = p->file;
    lx_file_ref(p->file);
    o->work_buf = buf;
    o->work_off = p->off;
    o->work_len = n;
    int r = uv_queue_work(&s->w->loop, &o->work, read_work, read_done);
    if (r < 0) {
        lx_file_unref(o->work_file);
        o->work_file = NULL;
        o->work_buf = NULL;
        lx_pool_put(&s->w->obufs, buf, LX_OUT_BUF);
        return r;
    }
    o->file_io = 1;
    s->req.pending++;
    LX_ST_INC(&s->w->stats->io_jobs);
    LX_ST_INC(&s->w->stats->io_jobs_total);
    lx_log_debug("read-ahead of %zu bytes at %llu queued", n, (unsigned long long)p->off);
    return -EAGAIN;
}

/* A range found not cached: the piece is counted page by page from now on. */
static int miss(lx_out_t *o) {
    o->missed = 1;
    return 0;
}

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* one number on every architecture (Linux 6.5) */
#endif
struct lx_cachestat_range {
    uint64_t off, len;
};
struct lx_cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* 0 when the page cache lacks a page of [off, end), 1 when it holds them
 * all (some may still be being read: the end probes see those), -1 when
 * the kernel will not say: Linux before 6.5 lacks cachestat (ENOSYS), and
 * later ones answer only a caller that owns the file or may write it
 * (EPERM), and overlayfs answers for its own empty inode (its files never
 * get here: LX_PROBE_NONE). */
static int cachestat_covers(lx_file_t *f, uint64_t off, uint64_t end) {
    static int absent;
    if (f->no_cstat || __atomic_load_n(&absent, __ATOMIC_RELAXED)) return -1;
    struct lx_cachestat_range r = {off, end - off};
    struct lx_cachestat cs;
    if (syscall(__NR_cachestat, f->fd, &r, &cs, 0) != 0) {
        if (errno == ENOSYS) __atomic_store_n(&absent, 1, __ATOMIC_RELAXED);
        f->no_cstat = 1;
        return -1;
    }
    uint64_t pg = (uint64_t)getpagesize();
    return cs.nr_cache >= (end - 1) / pg - off / pg + 1; /* the pages the range touches */
}

/* preadv2(RWF_NOWAIT) of the byte at: 1 cached, 0 not (or an error the
 * thread pool's read will meet and report), -1 the file cannot be asked
 * (refused() set its probe). */
static int probe_at(lx_file_t *f, uint64_t at) {
    char b;
    struct iovec iov = {&b, 1};
    if (preadv2(f->fd, &iov, 1, (off_t)at, RWF_NOWAIT) >= 0) return 1;
    return errno != EAGAIN && refused(f, errno) ? -1 : 0;
}

/* Whether preadv2(RWF_NOWAIT) finds the last byte of [off, end) cached, and
 * the first unless it is known. Such a probe can be fooled two ways:
 * - A probe that misses starts the page's read. A later probe of that page
 *   then hits, having proved nothing about the pages before it: at the end
 *   of a file every range ends on that page. So the page stays "cold" and
 *   ranges ending on it are misses until the piece ends.
 * - A fast disk (virtio) can complete that read before the call returns:
 *   the probe hits having read from the disk (t/160 saw it, and sendfile
 *   then read the pages between from the disk in the loop). The loop
 *   thread's block-input count tells: when it grew since the last look,
 *   the loop read from the disk, and the range counts as a miss.
 * Two hits say nothing of the pages between them: a file being read in
 * by the thread pool's reads (and the kernel's read-ahead behind them) has
 * holes. in_page_cache counts those where it can. */
static int probe_ends(lx_sess_t *s, lx_file_t *f, uint64_t off, uint64_t end, int first) {
    lx_out_t *o = &s->out;
    uint64_t last = (end - 1) / (uint64_t)getpagesize() + 1;
    if (last == o->cold) return miss(o);
    int r = first ? probe_at(f, off) : 1;
    if (r == 1 && (!first || end - off > 1) && (r = probe_at(f, end - 1)) == 0) o->cold = last;
    /* A miss started a read from this thread: it is counted now, so that it
     * does not make the next look (any connection's) a miss. */
    int quiet = loop_read_nothing(s->w);
    if (r < 0) return f->probe == LX_PROBE_RAM;
    if (r == 0) return miss(o);
    if (!quiet) o->missed = 1;
    return quiet;
}

void lx_out_thread_init(lx_worker_t *w) {
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0) w->inblock = ru.ru_inblock;
}

/* Whether the page cache holds the head file piece's next n bytes: a miss
 * would make sendfile wait for the disk in the loop. A big file goes out in
 * many sendfile calls, each starting where the last one stopped inside or
 * at the end of the range checked before: then only the new part is
 * checked. A piece found cold once is partly cached and being read in: its
 * ranges are counted page by page where cachestat answers (6 us per 512
 * KiB here, against 1.4 for the probes, which a warm file alone pays). */
static int in_page_cache(lx_sess_t *s, const lx_piece_t *p, uint64_t n) {
    lx_out_t *o = &s->out;
    if (p->file->probe != LX_PROBE_NOWAIT) return p->file->probe == LX_PROBE_RAM;
    uint64_t end = p->off + n;
    if (end <= o->warm_to) return 1;
    int goes_on = o->warm_to && p->off <= o->warm_to; /* bytes below warm_to are known */
    uint64_t from = goes_on ? o->warm_to : p->off;
    if (o->missed && cachestat_covers(p->file, from, end) == 0) return 0;
    if (!probe_ends(s, p->file, from, end, !goes_on)) return 0;
    o->warm_to = end;
    return 1;
}

/* Whether the head file piece p goes out copied (LX_OUT_COPY_MAX). What is
 * left of a piece counts, so the last 128 KiB of a larger file that never
 * met a full socket go copied too: the same bytes, in fewer syscalls than
 * a probe and sendfile. */
static int copied(lx_sess_t *s, const lx_piece_t *p) {
    const lx_out_t *o = &s->out;
    return (p->len <= LX_OUT_COPY_MAX || !lx_tp_can_sendfile(tp_of(s))) &&
           p->file->probe != LX_PROBE_NONE && !o->full && !o->stalled;
}

int lx_out_flush(lx_sess_t *s) {
    lx_out_t *o = &s->out;
    if (o->writing || o->file_io) return -EAGAIN; /* its callback flushes again */
    /* What the probes found holds only while this call runs: a client that
     * stalled since may find those pages evicted (t/160). */
    o->warm_to = 0;
    lx_tp_t *tp = tp_of(s);
    int uncached = 0; /* the head file piece's next bytes are not in the page cache */
    while (o->n) {
        lx_piece_t *p = &o->q[o->head];
        if (p->kind == LX_PIECE_FILE && (uncached || !copied(s, p))) {
            size_t n = p->len < SENDFILE_CHUNK ? (size_t)p->len : SENDFILE_CHUNK;
            if (!lx_tp_can_sendfile(tp)) {
                /* Read into a buffer, from the page cache when it has the
                 * bytes (a full socket, or a file whose probe failed). */
                int r = file_to_buffer(s, !uncached && p->file->probe != LX_PROBE_NONE);
                if (r < 0) return r;
                continue;
            }
            if (uncached || !in_page_cache(s, p, n)) {
                int r = file_to_buffer(s, 0);
                if (r < 0) return r;
                continue;
            }
            uint64_t off = p->off;
            ssize_t r = lx_tp_sendfile(tp, p->file->fd, &off, n);
            if (r > 0) {
                consume(s, (uint64_t)r);
                continue;
            }
            if (r == 0) return -EIO; /* the file shrank under us: the length is a lie now */
            if (r != -EAGAIN) return (int)r;
            /* The socket is full. libuv waits for writability only for a
             * uv_write, so the next piece of the file goes as one. */
            o->full = o->stalled = 1;
            if ((r = file_to_buffer(s, 1)) < 0) return (int)r;
            continue;
        }
        /* Buffers up to the next file piece, in one writev, and that piece
         * too when it goes out copied. Streamed pieces too: uv_write for
         * what the socket takes at once would cost an epoll_ctl each time
         * (libuv arms and disarms POLLOUT around it), so it is kept for what
         * the socket refuses; the producer's proceed runs from conn_flush,
         * which does not re-enter it. */
        uv_buf_t bufs[MAX_IOV];
        int nb = 0;
        size_t total = 0;
        lx_piece_t *file = NULL;
        int has_buf = 0;
        for (unsigned i = 0; i < o->n && nb < MAX_IOV; i++) {
            lx_piece_t *q = at(o, i);
            if (q->kind == LX_PIECE_FILE) {
                file = q;
                break;
            }
            has_buf |= q->kind == LX_PIECE_BUF;
            bufs[nb].base = q->kind == LX_PIECE_OBUF ? o->obuf + q->off : q->ptr;
            bufs[nb].len = (size_t)q->len;
            total += (size_t)q->len;
            nb++;
        }
        /* A socket just found full would refuse a try as well: libuv
         * waits for it (its uv_write tries once more first). */
        if (o->full || o->burst > LX_OUT_BURST) {
            if (nb) return write_rest(s, bufs, nb, 0);
            int r = file_to_buffer(s, 1); /* a copied piece at the head */
            if (r < 0) return r;
            continue;
        }
        size_t copy = 0; /* bytes of the file piece read into the loop's scratch */
        if (file && nb < MAX_IOV && total < LX_OUT_BUF && copied(s, file)) {
            /* One write of at most LX_OUT_BUF (one segment of 64 KiB at
             * most, on loopback) at a time, read just before it goes: a
             * 100 KiB write at once made two segments back to back, and
             * BBR's pacing held the second for a timer (the congestion
             * control here; bench/README.md, "Large files"). */
            size_t want = LX_OUT_BUF - total;
            if (want > file->len) want = (size_t)file->len;
            ssize_t c = read_cached(s->w, file->file, s->w->copybuf, want, file->off);
            if (c == -EAGAIN) {
                uncached = 1; /* the thread pool reads it, after the buffers before it */
            } else if (c < 0) {
                return (int)c;
            } else {
                copy = (size_t)c;
                bufs[nb].base = s->w->copybuf;
                bufs[nb++].len = copy;
                total += copy;
            }
        }
        if (nb == 0) continue; /* a cold piece at the head */
        /* Headers before a file go with MSG_MORE, so that they leave in
         * one segment with the file's first bytes (while libuv's queue is
         * empty: else its writes would come after). A file's bytes read
         * into a buffer fill segments of their own. */
        int more = file && !copy && !has_buf && lx_tp_queued(tp) == 0;
        ssize_t r = lx_tp_try_write(tp, bufs, (unsigned)nb, more);
        if (r < 0) return (int)r;
        o->burst += (uint32_t)r;
        if ((size_t)r < total) {
            o->full = 1;
            o->stalled |= copy != 0;
            /* The scratch is the loop's: what it held and the socket did
             * not take is read again from the file piece, a small part for
             * uv_write to wait with (as when sendfile finds it full). */
            if ((size_t)r >= total - copy) {
                consume(s, (uint64_t)r);
                int e = file_to_buffer(s, 1);
                if (e < 0) return e;
                continue;
            }
            int e = write_rest(s, bufs, nb - (copy != 0), (size_t)r);
            /* What the socket took is out; the rest is in flight. */
            consume(s, (uint64_t)r);
            return e;
        }
        if (copy)
            consume(s, total);
        else
            drop(s, (unsigned)nb, total);
    }
    return 0;
}
