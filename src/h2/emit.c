/* HTTP/2's side of a response (core/proto.h): the head as HPACK fields, the
 * body as pieces (copies in pooled buffers, the file cache's memory, file
 * ranges) that nghttp2 takes as DATA frames when the windows allow, a file
 * read from the page cache or, when it is not there, by the thread pool
 * while the stream waits. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

#include "h2/h2i.h"
#include "io/filecache.h"
#include "stats.h"

/* The iovecs that lay n bytes of a file out in buf as frames read ahead
 * are (h2i.h H2_FRAME): how many. */
static int ahead_iov(char *buf, size_t n, struct iovec *v) {
    int k = 0;
    for (char *at = buf + 9; n; at += H2_FRAME_STEP, k++) {
        size_t m = n < H2_FRAME ? n : H2_FRAME;
        v[k] = (struct iovec){at, m};
        n -= m;
    }
    return k;
}
#define AHEAD_IOV ((H2_AHEAD_ROOM + H2_FRAME - 1) / H2_FRAME)

/* Reads what the page cache has of a file, never waiting on the disk:
 * bytes read, -EAGAIN when they are not cached, or another -errno. */
static ssize_t read_cached(lx_file_t *f, const struct iovec *v, int n, uint64_t off) {
    ssize_t r;
    if (f->probe == LX_PROBE_NONE) return -EAGAIN;
    if (f->probe == LX_PROBE_RAM)
        r = preadv(f->fd, v, n, (off_t)off);
    else
        r = preadv2(f->fd, v, n, (off_t)off, RWF_NOWAIT);
    if (r < 0) return errno == EOPNOTSUPP ? -EAGAIN : -errno;
    return r;
}

static void read_work(uv_work_t *wk) {
    lx_h2_stream_t *st = container_of(wk, lx_h2_stream_t, work);
    lx_h2_piece_t *p = st->head;
    struct iovec v[AHEAD_IOV];
    int k = ahead_iov(st->work_buf, p->len < H2_AHEAD_ROOM ? (size_t)p->len : H2_AHEAD_ROOM, v);
    ssize_t r = preadv(p->file->fd, v, k, (off_t)p->off);
    st->work_got = r < 0 ? -errno : r;
}

_Thread_local unsigned lx_h2_ahead;

/* Bytes of p that lie together at p->ptr: up to the end of its frame for a
 * file read ahead. */
static size_t piece_run(const lx_h2_piece_t *p) {
    if (!p->ahead) return (size_t)p->len;
    size_t left = H2_FRAME_STEP - (size_t)(p->ptr - p->buf) % H2_FRAME_STEP;
    return left < p->len ? left : (size_t)p->len;
}

/* Bytes used from the head of the queue. */
static void consume(lx_h2_stream_t *st, lx_h2_piece_t *p, size_t n) {
    if (p->kind != LX_H2P_FILE) p->ptr += n;
    if (p->ahead && (p->ptr - p->buf) % H2_FRAME_STEP == 0) p->ptr += 9; /* the next frame's */
    p->off += n;
    p->len -= n;
    st->queued -= n;
    if (p->len == 0) {
        st->head = p->next;
        if (st->head == NULL) st->tail = NULL;
        lx_h2_piece_release(st, p);
    }
}

/* Bytes of the file piece at the head, n of them read into a pooled
 * buffer, go before what is left of it as a buffer piece: 0, or -ENOMEM
 * (the buffer given back). */
static int put_read(lx_h2_stream_t *st, char *buf, size_t n) {
    lx_h2_piece_t *pc = st->spare;
    if (pc)
        st->spare = pc->next;
    else if ((pc = lx_arena_alloc(&st->arena, sizeof(*pc))) == NULL) {
        lx_pool_put(&st->req.w->obufs, buf, LX_OUT_BUF);
        return -ENOMEM;
    }
    *pc = (lx_h2_piece_t){.kind = LX_H2P_BUF, .buf = buf, .ptr = buf + 9, .len = n, .ahead = 1};
    lx_h2_ahead++;
    st->queued += n;
    consume(st, st->head, n); /* the file piece: released when all of it was read */
    pc->next = st->head;
    st->head = pc;
    if (st->tail == NULL) st->tail = pc;
    return 0;
}

static void read_done(uv_work_t *wk, int status) {
    lx_h2_stream_t *st = container_of(wk, lx_h2_stream_t, work);
    lx_worker_t *w = st->req.w;
    LX_ST_DEC(&w->stats->io_jobs);
    st->file_io = 0;
    char *buf = st->work_buf;
    st->work_buf = NULL;
    lx_h2_t *h = st->h;
    int ok = h->c && !st->closed && status == 0 && st->work_got > 0;
    size_t got = (size_t)st->work_got;
    if (!ok) lx_pool_put(&w->obufs, buf, LX_OUT_BUF);
    lx_h2_stream_pin(st);
    st->free_pending = 1; /* what the read held off (lx_h2_stream_maybe_free) */
    if (ok && put_read(st, buf, got) == 0) {
        st->deferred = 0;
        nghttp2_session_resume_data(h->ng, st->id);
        lx_h2_flush(h);
    } else if (h->c && !st->closed) {
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        lx_h2_flush(h);
    }
    lx_h2_stream_unpin(st);
}

static int read_start(lx_h2_stream_t *st) {
    lx_worker_t *w = st->req.w;
    st->work_buf = lx_pool_get(&w->obufs);
    if (st->work_buf == NULL) return -ENOMEM;
    if (uv_queue_work(&w->loop, &st->work, read_work, read_done) < 0) {
        lx_pool_put(&w->obufs, st->work_buf, LX_OUT_BUF);
        st->work_buf = NULL;
        return -ENOMEM;
    }
    st->file_io = 1;
    LX_ST_INC(&w->stats->io_jobs);
    LX_ST_INC(&w->stats->io_jobs_total);
    return 0;
}

/* The file piece at the head of the queue, for a DATA frame of at most
 * length bytes. With room in the loop's read-ahead budget, as much of it
 * as the windows let go (up to a pooled buffer) is read into a buffer
 * piece put before it, and a read serves several frames. Past the budget,
 * or when the windows let less go than the output would point to (it
 * copies that: a buffer each would be held for a few bytes), the frame's
 * bytes are read into the output after room for the frame header, and
 * st->direct says how many (lx_h2_send_data). Bytes read, -EAGAIN when
 * they are not in the page cache, or another -errno. */
static ssize_t read_file(lx_h2_stream_t *st, lx_h2_piece_t *p, size_t length) {
    lx_h2_t *h = st->h;
    int32_t win = nghttp2_session_get_stream_remote_window_size(h->ng, st->id);
    int32_t conn = nghttp2_session_get_remote_window_size(h->ng);
    size_t n = (size_t)(win < conn ? win : conn);
    if (n < length) n = length;
    if (n > H2_AHEAD_ROOM) n = H2_AHEAD_ROOM;
    if (n > p->len) n = (size_t)p->len;
    if (lx_h2_ahead >= H2_AHEAD_MAX || n < H2_REF_MIN) {
        n = length < p->len ? length : (size_t)p->len;
        char *d = lx_h2_batch_reserve(&h->out, 9 + n);
        if (d == NULL) return -ENOMEM;
        struct iovec v = {d + 9, n};
        ssize_t r = read_cached(p->file, &v, 1, p->off);
        if (r > 0) st->direct = (size_t)r;
        return r;
    }
    lx_pool_t *pool = &st->req.w->obufs;
    char *buf = lx_pool_get(pool);
    if (buf == NULL) return -ENOMEM;
    struct iovec v[AHEAD_IOV];
    ssize_t r = read_cached(p->file, v, ahead_iov(buf, n, v), p->off);
    if (r <= 0) {
        lx_pool_put(pool, buf, LX_OUT_BUF);
        return r;
    }
    return put_read(st, buf, (size_t)r) < 0 ? -ENOMEM : r;
}

/* nghttp2 asks what a DATA frame of the stream's may carry: as many bytes
 * as the pieces queued have, up to length, a file's read first (from the
 * page cache, or by the thread pool when they are not there: the frame
 * waits). The bytes go in lx_h2_send_data, with no copy in nghttp2's
 * buffers (NGHTTP2_DATA_FLAG_NO_COPY). */
static ssize_t data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud) {
    (void)ng, (void)id, (void)buf, (void)ud;
    lx_h2_stream_t *st = src->ptr;
    size_t got = 0;
    st->direct = 0;
    if (length > H2_FRAME) length = H2_FRAME;
    for (lx_h2_piece_t *p = st->head; p && got < length; p = p->next) {
        if (p->kind == LX_H2P_FILE) {
            if (got) break; /* what comes before it goes first */
            ssize_t r = read_file(st, p, length);
            if (r == -EAGAIN) {
                if (st->file_io) return NGHTTP2_ERR_DEFERRED;
                if (read_start(st) < 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
                st->deferred = 1;
                return NGHTTP2_ERR_DEFERRED;
            }
            /* Shorter than it was (truncated under us): the length said
             * cannot be kept, and the stream is reset. */
            if (r <= 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            if (st->direct) {
                got = st->direct;
                break;
            }
            p = st->head; /* the bytes read, as a buffer piece */
        }
        size_t run = piece_run(p);
        got += length - got < run ? length - got : run;
        if (run < p->len) break; /* a frame read ahead ends there */
    }
    if (got == 0 && !(st->eof && st->queued == 0)) {
        st->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st->eof && got == st->queued) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)got;
}

/* A DATA frame goes: its header, then its length bytes from the head of
 * the queue, into the output (no padding is asked for). */
int lx_h2_send_data(nghttp2_session *ng, nghttp2_frame *fr, const uint8_t *hd, size_t length,
                    nghttp2_data_source *src, void *ud) {
    (void)ng, (void)fr, (void)ud;
    lx_h2_stream_t *st = src->ptr;
    lx_h2_batch_t *b = &st->h->out;
    if (st->direct) {
        /* data_read put the bytes in the output after room for this. */
        memcpy(b->buf + b->len, hd, 9);
        st->direct = 0;
        if (lx_h2_batch_commit(b, 9 + length) < 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
        consume(st, st->head, length);
        return b->bytes < H2_GATHER ? 0 : NGHTTP2_ERR_PAUSE;
    }
    lx_h2_piece_t *p = st->head;
    if (p && p->ahead && (p->ptr - p->buf) % H2_FRAME_STEP == 9 && length <= p->len) {
        /* A frame read ahead, with its header in the room before it. */
        memcpy(p->ptr - 9, hd, 9);
        int rc = lx_h2_batch_ref(b, p->ptr - 9, 9 + length);
        if (rc < 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (rc) p->lent = 1;
        consume(st, p, length);
        return b->bytes < H2_GATHER ? 0 : NGHTTP2_ERR_PAUSE;
    }
    if (lx_h2_batch_copy(b, hd, 9) < 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    while (length) {
        p = st->head;
        size_t run = piece_run(p);
        size_t n = length < run ? length : run;
        int rc =
            p->file ? lx_h2_batch_ref_file(b, p->file, p->ptr, n) : lx_h2_batch_ref(b, p->ptr, n);
        if (rc < 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (rc) p->lent = 1; /* the batch points into it */
        consume(st, p, n);
        length -= n;
    }
    /* nghttp2 goes on to the next frame unless told: the output is
     * written first once there is enough of it. */
    return b->bytes < H2_GATHER ? 0 : NGHTTP2_ERR_PAUSE;
}

static lx_h2_piece_t *piece_add(lx_h2_stream_t *st, lx_h2_piece_kind_t kind) {
    lx_h2_piece_t *p = st->spare;
    if (p)
        st->spare = p->next;
    else if ((p = lx_arena_alloc(&st->arena, sizeof(*p))) == NULL)
        return NULL;
    *p = (lx_h2_piece_t){.kind = (uint8_t)kind};
    if (st->tail)
        st->tail->next = p;
    else
        st->head = p;
    st->tail = p;
    return p;
}

/* Copies bytes to the end of the queue: into the room left in the last
 * pooled buffer, then into new ones. */
static int queue_copy(lx_h2_stream_t *st, const char *s, size_t len) {
    st->queued += len;
    while (len) {
        lx_h2_piece_t *t = st->tail;
        size_t room = t && t->kind == LX_H2P_BUF && !t->ahead
                          ? (size_t)(t->buf + H2_BUF_ROOM - (t->ptr + t->len))
                          : 0;
        if (room == 0) {
            char *b = lx_pool_get(&st->req.w->obufs);
            if (b == NULL) return -ENOMEM;
            if ((t = piece_add(st, LX_H2P_BUF)) == NULL) {
                lx_pool_put(&st->req.w->obufs, b, LX_OUT_BUF);
                return -ENOMEM;
            }
            t->buf = t->ptr = b;
            room = H2_BUF_ROOM;
        }
        size_t n = len < room ? len : room;
        memcpy(t->ptr + t->len, s, n);
        t->len += n;
        s += n;
        len -= n;
    }
    return 0;
}

/* More of the response can go: nghttp2 asks the data source again. */
static void data_more(lx_h2_stream_t *st) {
    if (st->deferred && st->h->c && !st->closed && !st->file_io) {
        st->deferred = 0;
        nghttp2_session_resume_data(st->h->ng, st->id);
    }
}

/* The stream cannot go on (out of memory): it is reset. */
static void stream_fail(lx_h2_stream_t *st) {
    if (st->h->c && !st->closed) {
        nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        lx_h2_flush(st->h);
    }
}

/* Connection-specific fields (RFC 9113 8.2.2) never go out in HTTP/2; a
 * backend's response may carry them. */
static int hop_field(const char *n, size_t len) {
    switch (len) {
    case 7: return strncasecmp(n, "upgrade", 7) == 0;
    case 10: return strncasecmp(n, "connection", 10) == 0 || strncasecmp(n, "keep-alive", 10) == 0;
    case 16: return strncasecmp(n, "proxy-connection", 16) == 0;
    case 17: return strncasecmp(n, "transfer-encoding", 17) == 0;
    default: return 0;
    }
}

/* "Name: value\r\n" lines as header fields, the names lower case. */
static size_t put_lines(lx_req_t *r, nghttp2_nv *nv, size_t k, size_t max, const char *p,
                        size_t len) {
    const char *end = p + len;
    while (p < end && k < max) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *next = eol ? eol + 1 : end;
        const char *colon = memchr(p, ':', (size_t)(next - p));
        if (colon && colon > p) {
            size_t nlen = (size_t)(colon - p);
            const char *v = colon + 1, *ve = eol ? eol : end;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            char *name = lx_arena_alloc(r->arena, nlen);
            if (name && !hop_field(p, nlen)) {
                for (size_t i = 0; i < nlen; i++)
                    name[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] | 0x20 : p[i]);
                nv[k++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)v, nlen, (size_t)(ve - v),
                                       NGHTTP2_NV_FLAG_NONE};
                r->head_bytes += nlen + (size_t)(ve - v) + 2;
            }
        }
        p = next;
    }
    return k;
}

static size_t count_lines(const char *p, size_t len) {
    size_t n = 0;
    for (const char *e = p + len; p < e && (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        n++;
    return n + 1;
}

/* The response's header fields: :status, server, date, content-length,
 * then its lines. NULL when out of memory. */
static nghttp2_nv *head_fields(lx_req_t *r, int status, int with_length, size_t *n) {
    lx_resp_t *rs = &r->resp;
    size_t max = 4 + count_lines(rs->block, rs->block_len) + count_lines(rs->lines, rs->len) +
                 count_lines(r->extra, r->extra_len);
    nghttp2_nv *nv = lx_arena_alloc(r->arena, max * sizeof(*nv));
    char *st = lx_arena_alloc(r->arena, 4 + 20);
    if (nv == NULL || st == NULL) return NULL;
    st[0] = (char)('0' + status / 100 % 10), st[1] = (char)('0' + status / 10 % 10);
    st[2] = (char)('0' + status % 10), st[3] = 0;
    size_t k = 0;
    nv[k++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)st, 7, 3, NGHTTP2_NV_FLAG_NONE};
    if (status >= 200) {
        lx_worker_update_time(r->w);
        nv[k++] = (nghttp2_nv){(uint8_t *)"server", (uint8_t *)LX_SERVER, 6, sizeof(LX_SERVER) - 1,
                               NGHTTP2_NV_FLAG_NONE};
        nv[k++] = (nghttp2_nv){(uint8_t *)"date", (uint8_t *)r->w->date, 4, strlen(r->w->date),
                               NGHTTP2_NV_FLAG_NONE};
    }
    if (with_length) {
        /* Digits from the end of st's room (no printf per response). */
        char *end = st + 4 + 20, *num = end;
        uint64_t v = (uint64_t)rs->length;
        do
            *--num = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        nv[k++] = (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)num, 14, (size_t)(end - num),
                               NGHTTP2_NV_FLAG_NONE};
    }
    if (rs->block_len) k = put_lines(r, nv, k, max, rs->block, rs->block_len);
    if (rs->len) k = put_lines(r, nv, k, max, rs->lines, rs->len);
    if (r->extra_len) k = put_lines(r, nv, k, max, r->extra, r->extra_len);
    r->head_bytes += 16;
    *n = k;
    return nv;
}

static void h2_head(lx_req_t *r) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    lx_resp_t *rs = &r->resp;
    if (st->h->c == NULL || st->closed) return;
    int s = rs->status;
    size_t n;
    nghttp2_nv *nv = head_fields(r, s, rs->length >= 0 && s >= 200 && s != 204 && s != 304, &n);
    if (nv == NULL) {
        stream_fail(st);
        return;
    }
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = data_read};
    if (rs->no_body) st->eof = 1;
    int rc = nghttp2_submit_response(st->h->ng, st->id, nv, n, rs->no_body ? NULL : &prd);
    if (rc < 0) {
        stream_fail(st);
        return;
    }
    st->submitted = 1;
}

/* Interim responses queued in nghttp2 (HEADERS are not flow-controlled)
 * past which more are dropped. */
#define H2_INTERIM_QUEUE 8

static void h2_interim(lx_req_t *r) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    lx_h2_t *h = st->h;
    if (h->c == NULL || st->closed || r->resp.status == 101) return;
    /* A client that does not read while a backend sends 1xx after 1xx
     * would have them all queued, with nothing to stop the backend: while
     * the output is backed up they are dropped, as over HTTP/1 (h1/emit.c).
     * They are advice, and the final response still comes. */
    if (h->writing || nghttp2_session_get_outbound_queue_size(h->ng) > H2_INTERIM_QUEUE) return;
    size_t n;
    nghttp2_nv *nv = head_fields(r, r->resp.status, 0, &n);
    if (nv && nghttp2_submit_headers(h->ng, NGHTTP2_FLAG_NONE, st->id, NULL, nv, n, NULL) == 0)
        lx_h2_flush(h);
}

static void h2_copy(lx_req_t *r, const char *p, size_t len) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    if (queue_copy(st, p, len) < 0) stream_fail(st);
}

static void h2_file(lx_req_t *r, lx_file_t *f, uint64_t off, uint64_t len) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    lx_h2_piece_t *p = piece_add(st, f->data ? LX_H2P_MEM : LX_H2P_FILE);
    if (p == NULL) {
        stream_fail(st);
        return;
    }
    lx_file_ref(f);
    p->file = f;
    p->off = off;
    p->len = len;
    if (f->data) p->ptr = f->data + off;
    st->queued += len;
}

static void h2_output(lx_req_t *r) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    data_more(st);
    lx_h2_flush(st->h);
}

static int h2_send(lx_req_t *r, const char *p, size_t len) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    lx_h2_stream_pin(st); /* its queue is looked at once the output went */
    int rc = queue_copy(st, p, len);
    if (rc < 0)
        stream_fail(st);
    else
        h2_output(r);
    if (rc == 0 && st->queued > H2_HIGH_WATER) rc = -EAGAIN;
    lx_h2_stream_unpin(st);
    return rc;
}

static void h2_end(lx_req_t *r) {
    lx_h2_stream_of(r)->eof = 1;
}

static void h2_done(lx_req_t *r) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    if (r->resp.cut && st->submitted) {
        stream_fail(st); /* reset, never a clean END_STREAM on a short body */
        return;
    }
    st->eof = 1;
    h2_output(r);
}

static int h2_cont(lx_req_t *r) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    r->expect = LX_EXPECT_ANSWERED;
    if (st->h->c == NULL || st->closed) return -ECONNRESET;
    nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)"100", 7, 3, NGHTTP2_NV_FLAG_NONE};
    return nghttp2_submit_headers(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NULL, &nv, 1, NULL) < 0
               ? -ENOMEM
               : 0;
}

static void h2_body_resume(lx_req_t *r) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    lx_h2_t *h = st->h;
    if (h->c == NULL) return;
    lx_h2_hold(h);
    st->in_paused = 0;
    st->body_at = uv_now(&r->w->loop); /* the client's turn from now */
    lx_h2_give_back(st, st->in_unacked);
    st->in_unacked = 0;
    h->flush_pending = 1; /* the window update */
    lx_h2_body_pump(st);
    lx_h2_unhold(h);
}

/* HTTP/2 carries no 101 (RFC 9113 8.6): a tunnel cannot start; the stream
 * is reset, and its producer and reader are told as when a client goes. */
static void h2_tunnel(lx_req_t *r, const lx_producer_t *p, lx_body_cb cb) {
    lx_h2_stream_t *st = lx_h2_stream_of(r);
    r->resp.state = LX_RESP_STREAMING;
    r->resp.producer = p;
    r->body_cb = cb;
    if (st->h->c && !st->closed) {
        nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        lx_h2_flush(st->h);
    }
}

static void h2_tunnel_more(lx_req_t *r) {
    (void)r;
}

static void h2_enter(lx_req_t *r, int cork) {
    (void)cork;
    lx_h2_stream_enter(lx_h2_stream_of(r));
}

static void h2_leave(lx_req_t *r, int cork) {
    (void)cork;
    lx_h2_stream_leave(lx_h2_stream_of(r));
}

static void h2_orphaned(lx_req_t *r) {
    lx_h2_stream_maybe_free(lx_h2_stream_of(r));
}

/* As HTTP/1 does (serve.c lx_h1_flush): output that went out at once from
 * inside the producer's own send calls proceed again once that returns,
 * rather than from inside it. */
static void stream_proceed(lx_h2_stream_t *st) {
    lx_req_t *r = &st->req;
    if (st->proceeding) {
        st->proceed_again = 1;
        return;
    }
    lx_h2_stream_pin(st);
    st->proceeding = 1;
    do {
        st->proceed_again = 0;
        r->resp.producer->proceed(r);
    } while (st->proceed_again && st->h->c && r->resp.state == LX_RESP_STREAMING &&
             r->resp.producer && st->queued < H2_HIGH_WATER && !r->aborted);
    st->proceeding = 0;
    lx_h2_stream_unpin(st);
}

void lx_h2_streams_proceed(lx_h2_t *h) {
    /* A proceed may end its own stream or others: walk from a pinned one. */
    lx_h2_stream_t *st = h->streams;
    if (st) lx_h2_stream_pin(st);
    while (st && h->c) {
        lx_req_t *r = &st->req;
        if (st->state == LX_H2S_RUNNING && r->resp.state == LX_RESP_STREAMING && r->resp.producer &&
            st->queued < H2_HIGH_WATER && !r->aborted)
            stream_proceed(st);
        lx_h2_stream_t *next = st->linked ? st->next : NULL;
        if (next) lx_h2_stream_pin(next);
        lx_h2_stream_unpin(st);
        st = next;
    }
    if (st) lx_h2_stream_unpin(st);
}

const lx_proto_t lx_h2_proto = {
    .enter = h2_enter,
    .leave = h2_leave,
    .orphaned = h2_orphaned,
    .head = h2_head,
    .interim = h2_interim,
    .copy = h2_copy,
    .file = h2_file,
    .send = h2_send,
    .end = h2_end,
    .output = h2_output,
    .done = h2_done,
    .cont = h2_cont,
    .body_resume = h2_body_resume,
    .tunnel = h2_tunnel,
    .tunnel_more = h2_tunnel_more,
};
