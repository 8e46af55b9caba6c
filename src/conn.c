/* The connection state machine: read -> llhttp -> request -> write ->
 * keep-alive. One request is answered at a time; bytes of pipelined requests
 * wait in the read buffer until the response before them is queued. */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include "h1.h"
#include "io/filecache.h"
#include "log.h"

enum { TO_NONE, TO_HEADER, TO_BODY, TO_SEND, TO_IDLE, TO_LINGER };

/* How long a half-closed connection may keep sending before we close it. */
#define LINGER_MS 2000
/* Bytes sendfile moves per call: large enough to amortise the syscall, small
 * enough that one big download does not starve the loop's other clients. */
#define SENDFILE_CHUNK (512 * 1024)

/* Bytes the read buffer has beyond max_header_bytes: room for the blank line
 * that ends the header, the start of a body, and pipelined requests. */
#define RBUF_SLACK 4096
/* Where a header of max_header_bytes ends: the limit counts to the end of
 * the last field (on_headers_complete), then CRLF CRLF. A request needs that
 * much room behind its first byte, and one byte more to read a body into. */
#define HEADER_END(max)  ((max) + 4)
#define HEADER_ROOM(max) (HEADER_END(max) + 1)

static void conn_process(lx_conn_t *c);
static void conn_flush(lx_conn_t *c);
static void on_poll(uv_poll_t *p, int status, int events);
static void conn_read(lx_conn_t *c);

/* ---- deadlines ------------------------------------------------------ */

static void on_timer(uv_timer_t *t);
static void set_deadline_at(lx_conn_t *c, int kind, uint64_t due);
static void release_gen(lx_conn_t *c);

/* Moving a deadline later costs nothing: the timer fires at the old time and
 * re-arms itself. Only an earlier deadline restarts the timer. */
static void set_deadline_at(lx_conn_t *c, int kind, uint64_t due) {
    uint64_t now = uv_now(&c->w->loop);
    c->timeout_kind = kind;
    if (kind == TO_NONE) return;
    if (!uv_is_active((uv_handle_t *)&c->timer) || due < c->deadline)
        uv_timer_start(&c->timer, on_timer, due > now ? due - now : 0, 0);
    c->deadline = due;
}

static void set_deadline(lx_conn_t *c, int kind, uint32_t ms) {
    if (ms == 0) {
        c->timeout_kind = TO_NONE; /* e.g. keepalive_timeout = 0 */
        return;
    }
    set_deadline_at(c, kind, uv_now(&c->w->loop) + ms);
}

static void on_timer(uv_timer_t *t) {
    lx_conn_t *c = container_of(t, lx_conn_t, timer);
    uint64_t now = uv_now(&c->w->loop);
    if (c->timeout_kind == TO_NONE) return;
    if (now < c->deadline) {
        uv_timer_start(&c->timer, on_timer, c->deadline - now, 0);
        return;
    }
    if (c->timeout_kind == TO_IDLE && (c->waiting || c->in_request || c->out_n)) {
        /* The idle deadline of before this request: not idle any more. */
        set_deadline(c, TO_SEND, c->w->gen->srv.send_timeout);
        return;
    }
    switch (c->timeout_kind) {
    case TO_HEADER:
    case TO_BODY:
        /* Tell the client why, if it is listening, then close (408). */
        if (!c->req.responded && c->out_n == 0) {
            c->req.keepalive = 0;
            c->closing = 1;
            c->linger = 1;
            if (c->req.gen == NULL) {
                c->req.gen = c->w->gen;
                c->req.arena = &c->arena;
                c->req.conn = c;
            }
            lx_resp_error(&c->req, 408);
            lx_resp_done(&c->req);
            set_deadline(c, TO_SEND, 1000);
            conn_flush(c);
            return;
        }
        lx_conn_close(c);
        return;
    default: lx_conn_close(c);
    }
}

/* ---- poll interest -------------------------------------------------- */

/* The poll handle is created on first need: a request that arrives with its
 * connection (TCP_DEFER_ACCEPT) and asks for Connection: close is answered
 * and closed without the socket ever entering epoll. */
static void want(lx_conn_t *c, int events) {
    if (c->closed || events == c->events) return;
    if (!c->polled) {
        if (uv_poll_init(&c->w->loop, &c->poll, c->fd) < 0) {
            lx_conn_close(c);
            return;
        }
        c->poll.data = c;
        c->polled = 1;
    }
    c->events = events;
    if (events)
        uv_poll_start(&c->poll, events, on_poll);
    else
        uv_poll_stop(&c->poll);
}

/* ---- lifetime ------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h) {
    lx_conn_t *c = h->data;
    if (--c->handles > 0 || c->pending > 0) return;
    lx_arena_free(&c->arena);
    free(c->rbuf);
    free(c->obuf);
    free(c);
}

static void drop_output(lx_conn_t *c) {
    while (c->out_n) {
        lx_out_t *o = &c->out[c->out_head];
        if (o->file) lx_file_unref(o->file);
        c->out_head = (c->out_head + 1) % LX_OUT_MAX;
        c->out_n--;
    }
    c->olen = 0;
}

void lx_conn_close(lx_conn_t *c) {
    if (c->closed) return;
    c->closed = 1;
    release_gen(c);
    drop_output(c);
    lx_worker_t *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    w->nconns--;
    lx_worker_conn_closed(w);
    c->handles = 1 + c->polled;
    if (c->polled) uv_close((uv_handle_t *)&c->poll, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    close(c->fd);
}

void lx_conn_accept(lx_worker_t *w, int fd, const struct sockaddr *peer) {
    lx_conn_t *c = calloc(1, sizeof(*c));
    const lx_server_conf_t *s = &w->gen->srv;
    if (c == NULL) {
        close(fd);
        return;
    }
    c->rcap = s->max_header_bytes + RBUF_SLACK;
    c->rbuf = malloc(c->rcap);
    if (c->rbuf == NULL) {
        free(c);
        close(fd);
        return;
    }
    uv_timer_init(&w->loop, &c->timer);
    c->timer.data = c;
    c->fd = fd;
    c->w = w;
    if (peer->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)peer)->sin_addr, c->peer, sizeof(c->peer));
    else if (peer->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)peer)->sin6_addr, c->peer,
                  sizeof(c->peer));
    else
        strcpy(c->peer, "-");
    lx_addr_from_sockaddr(peer, &c->addr);
    lx_arena_init(&c->arena, 4096);
    llhttp_init(&c->parser, HTTP_REQUEST, &lx_h1_settings);
    /* luxd decides keep-alive once, from the header section (r->keepalive),
     * and never parses past a request it answers with Connection: close.
     * Strict llhttp decides again after the trailer section, so a trailer
     * "Connection: close" would make it refuse the next request on a
     * connection our response said stays open. Trailers change nothing. */
    llhttp_set_lenient_keep_alive(&c->parser, 1);
    c->parser.data = c;
    c->next = w->conns;
    if (w->conns) w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    /* With TCP_DEFER_ACCEPT the request is usually already here: try to read
     * it now instead of waiting a loop iteration for readiness. */
    set_deadline(c, TO_HEADER, s->header_timeout);
    conn_read(c);
}

void lx_conn_drain(lx_conn_t *c) {
    if (c->closed) return;
    if (!c->in_request && c->out_n == 0 && !c->waiting && c->rpos == c->rlen)
        lx_conn_close(c);
    else
        c->req.keepalive = 0; /* the response in progress says Connection: close */
}

/* ---- output --------------------------------------------------------- */

char *lx_conn_obuf_reserve(lx_conn_t *c, size_t n) {
    if (c->olen + n > c->ocap) {
        size_t cap = c->ocap ? c->ocap : 1024;
        while (cap < c->olen + n)
            cap *= 2;
        char *b = realloc(c->obuf, cap);
        if (b == NULL) return NULL;
        c->obuf = b;
        c->ocap = cap;
    }
    return c->obuf + c->olen;
}

static lx_out_t *out_push(lx_conn_t *c) {
    if (c->out_n == LX_OUT_MAX) return NULL;
    lx_out_t *o = &c->out[(c->out_head + c->out_n) % LX_OUT_MAX];
    c->out_n++;
    memset(o, 0, sizeof(*o));
    return o;
}

void lx_conn_queue_obuf(lx_conn_t *c, size_t from) {
    if (c->olen == from) return;
    /* Extend the previous obuf piece when it ends where this one starts. */
    if (c->out_n) {
        lx_out_t *last = &c->out[(c->out_head + c->out_n - 1) % LX_OUT_MAX];
        if (last->in_obuf && last->off + last->len == from) {
            last->len += c->olen - from;
            return;
        }
    }
    lx_out_t *o = out_push(c);
    if (o == NULL) {
        c->closing = 1; /* cannot happen with the pipelining bound; be safe */
        return;
    }
    o->in_obuf = 1;
    o->off = from;
    o->len = c->olen - from;
}

void lx_conn_queue_mem(lx_conn_t *c, lx_file_t *f, const char *p, size_t len) {
    if (len == 0) return;
    lx_out_t *o = out_push(c);
    if (o == NULL) {
        c->closing = 1;
        return;
    }
    o->file = f;
    if (f) lx_file_ref(f);
    o->ptr = p;
    o->len = len;
}

void lx_conn_queue_file(lx_conn_t *c, lx_file_t *f, uint64_t off, uint64_t len) {
    if (len == 0) return;
    lx_out_t *o = out_push(c);
    if (o == NULL) {
        c->closing = 1;
        return;
    }
    o->file = f;
    lx_file_ref(f);
    o->off = off;
    o->len = len;
}

static void out_consume(lx_conn_t *c, size_t n) {
    while (n && c->out_n) {
        lx_out_t *o = &c->out[c->out_head];
        size_t take = n < o->len ? n : (size_t)o->len;
        o->len -= take;
        o->off += take;
        if (o->ptr) o->ptr += take;
        n -= take;
        if (o->len == 0) {
            if (o->file) lx_file_unref(o->file);
            c->out_head = (c->out_head + 1) % LX_OUT_MAX;
            c->out_n--;
        }
    }
    if (c->out_n == 0) c->olen = 0;
}

/* Data for sendfile must be in the page cache, or sendfile blocks the loop.
 * Probe the chunk's first and last byte without blocking; a miss sends the
 * read to the thread pool, which pulls the chunk in, then resumes us. */
typedef struct {
    uv_work_t work;
    lx_conn_t *c;
    lx_file_t *file; /* referenced until done: a close of the connection or
                        a reload's cache drop must not close the fd under
                        the pread (and let it read a reused descriptor) */
    uint64_t off, len;
} readahead_t;

static void readahead_work(uv_work_t *w) {
    readahead_t *ra = container_of(w, readahead_t, work);
    char buf[64 * 1024];
    uint64_t off = ra->off, end = ra->off + ra->len;
    while (off < end) {
        size_t n = end - off < sizeof(buf) ? (size_t)(end - off) : sizeof(buf);
        ssize_t r = pread(ra->file->fd, buf, n, (off_t)off);
        if (r <= 0) break;
        off += (uint64_t)r;
    }
}

static void readahead_done(uv_work_t *w, int status) {
    readahead_t *ra = container_of(w, readahead_t, work);
    lx_conn_t *c = ra->c;
    (void)status;
    lx_log_debug("%s: read-ahead done at %llu", c->peer, (unsigned long long)ra->off);
    lx_file_unref(ra->file);
    free(ra);
    c->pending--;
    c->readahead = 0;
    if (c->closed) {
        if (c->pending == 0 && c->handles == 0) {
            c->handles = 1;
            on_handle_closed((uv_handle_t *)&c->timer);
        }
        return;
    }
    conn_flush(c);
}

static int in_page_cache(int fd, uint64_t off, uint64_t len) {
    char b;
    struct iovec iov = {&b, 1};
    if (preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT) < 0 && errno == EAGAIN) return 0;
    if (len > 1 && preadv2(fd, &iov, 1, (off_t)(off + len - 1), RWF_NOWAIT) < 0 && errno == EAGAIN)
        return 0;
    return 1;
}

/* Writes what the socket takes. Returns 0 when all is written, -EAGAIN when
 * the socket is full or a read-ahead is pending, another error to close. */
static int write_out(lx_conn_t *c) {
    while (c->out_n) {
        lx_out_t *o = &c->out[c->out_head];
        if (o->file && o->ptr == NULL) {
            /* One read-ahead at a time: until it is done, the socket's
             * readiness is of no use, and probing again would only queue
             * the same chunk once more. */
            if (c->readahead) return -EAGAIN;
            size_t n = o->len < SENDFILE_CHUNK ? (size_t)o->len : SENDFILE_CHUNK;
            if (!in_page_cache(o->file->fd, o->off, n)) {
                readahead_t *ra = malloc(sizeof(*ra));
                if (ra == NULL) return -ENOMEM;
                ra->c = c;
                ra->file = o->file;
                ra->off = o->off;
                ra->len = n;
                if (uv_queue_work(&c->w->loop, &ra->work, readahead_work, readahead_done) < 0) {
                    free(ra);
                    return -EIO;
                }
                lx_file_ref(ra->file);
                c->pending++;
                c->readahead = 1;
                lx_log_debug("%s: read-ahead of %zu bytes at %llu queued", c->peer, n,
                             (unsigned long long)o->off);
                want(c, 0);
                return -EAGAIN;
            }
            off_t off = (off_t)o->off;
            ssize_t r = sendfile(c->fd, o->file->fd, &off, n);
            if (r < 0) return errno == EAGAIN ? -EAGAIN : -errno;
            if (r == 0) return -EIO; /* the file shrank under us: the length is a lie now */
            out_consume(c, (size_t)r);
            continue;
        }
        struct iovec iov[16];
        int n = 0;
        size_t total = 0;
        int more = 0;
        for (unsigned i = 0; i < c->out_n && n < 16; i++) {
            lx_out_t *p = &c->out[(c->out_head + i) % LX_OUT_MAX];
            if (p->file && p->ptr == NULL) {
                more = 1; /* a file follows: let the headers ride with it */
                break;
            }
            iov[n].iov_base = (void *)(p->in_obuf ? c->obuf + p->off : p->ptr);
            iov[n].iov_len = (size_t)p->len;
            total += (size_t)p->len;
            n++;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t r = sendmsg(c->fd, &mh, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (r < 0) return errno == EAGAIN ? -EAGAIN : -errno;
        out_consume(c, (size_t)r);
        if ((size_t)r < total) return -EAGAIN;
    }
    return 0;
}

static void conn_flush(lx_conn_t *c) {
    /* Whether this write moved the output on: the head entry changed or
     * shrank. Cheaper than counting bytes, and all send_timeout needs. */
    unsigned head = c->out_head, n = c->out_n;
    uint64_t head_len = n ? c->out[head].len : 0;
    int r = write_out(c);
    if (r == -EAGAIN) {
        /* send_timeout bounds the time between two successful writes
         * (as nginx's does), not the whole response: every write that
         * moved the output on starts it afresh. Moving the deadline
         * later only stores a number (see set_deadline_at). */
        int progress = c->out_n != n || c->out_head != head || c->out[head].len != head_len;
        if (c->readahead) {
            /* A read-ahead in flight flushes again when it is done. The
             * writes before it count: without this, a client reading as
             * fast as the disk serves it (its socket never full) was cut
             * send_timeout after the socket was last full. */
            if (progress && c->timeout_kind == TO_SEND)
                set_deadline(c, TO_SEND, c->w->gen->srv.send_timeout);
            return;
        }
        if ((c->pending == 0 || !c->waiting) && c->out_n) {
            if (progress || c->timeout_kind != TO_SEND)
                set_deadline(c, TO_SEND, c->w->gen->srv.send_timeout);
            if (!(c->events & UV_WRITABLE)) want(c, UV_WRITABLE);
        }
        return;
    }
    if (r < 0) {
        lx_conn_close(c);
        return;
    }
    /* Everything is written. A stopping server ends keep-alive here, even
     * for a response that was sent before the stop began. */
    if (c->w->stop && !c->closing && !c->in_request) c->closing = 1;
    if (c->closing) {
        if (c->linger && !c->eof) {
            /* Half-close, then read and discard what the client still sends,
             * so our close does not reset the connection and destroy the
             * response in flight (nginx's lingering close). */
            shutdown(c->fd, SHUT_WR);
            set_deadline(c, TO_LINGER, LINGER_MS);
            want(c, UV_READABLE);
            return;
        }
        lx_conn_close(c);
        return;
    }
    /* Nothing was read while the output was pending (conn_process bounds
     * the pipeline): the rest of a request begun before it may be waiting
     * unread in the socket, so its header_timeout starts now, not at its
     * first byte, or a long response ahead would make it 408. */
    if (c->in_request && !c->headers_done) c->req_started = uv_now(&c->w->loop);
    if (!c->eof) want(c, UV_READABLE);
    conn_process(c);
}

/* ---- input ---------------------------------------------------------- */

static void linger_read(lx_conn_t *c) {
    char buf[4096];
    for (;;) {
        ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n > 0) continue;
        if (n < 0 && errno == EAGAIN) return;
        lx_conn_close(c);
        return;
    }
}

static void on_poll(uv_poll_t *p, int status, int events) {
    lx_conn_t *c = container_of(p, lx_conn_t, poll);
    if (status < 0) {
        lx_conn_close(c);
        return;
    }
    if (events & UV_WRITABLE) {
        conn_flush(c);
        return;
    }
    if (c->closing) {
        if (c->linger && c->out_n == 0) linger_read(c);
        return;
    }
    conn_read(c);
}

static void conn_read(lx_conn_t *c) {
    if (c->rlen == c->rcap) {
        want(c, 0); /* full: resumes when the request ahead is answered */
        return;
    }
    ssize_t n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
    if (n < 0) {
        if (errno == EAGAIN)
            want(c, UV_READABLE);
        else if (errno != EINTR)
            lx_conn_close(c);
        return;
    }
    if (n == 0) {
        /* The client closed its sending side. Requests it sent in full are
         * still answered (a half-close is legal); then we close. */
        c->eof = 1;
        want(c, c->events & ~UV_READABLE);
        if (c->waiting) return;
    } else {
        c->rlen += (size_t)n;
    }
    conn_process(c);
}

/* Answers a request that could not be parsed: the framing is in doubt, so
 * the connection closes after the response. */
static void parse_error(lx_conn_t *c, int status) {
    lx_req_t *r = &c->req;
    if (r->gen == NULL) r->gen = c->w->gen;
    r->keepalive = 0;
    c->closing = 1;
    c->linger = 1;
    if (r->arena == NULL) r->arena = &c->arena;
    /* A request answered before its body (100-continue) has had its one
     * response: a fault in the body that follows can only close. */
    if (!r->responded) {
        lx_resp_error(r, status);
        lx_resp_done(r);
    }
    lx_log_debug("%s: bad request (%d): %s", c->peer, status,
                 llhttp_get_error_reason(&c->parser) ? llhttp_get_error_reason(&c->parser)
                                                     : "limit");
    conn_flush(c);
}

/* Gives the read buffer room for a request under the current limits. The
 * buffer was sized for the limits at accept; a reload may have raised them
 * since. Called between requests, when nothing points into the buffer. */
static int rbuf_fit(lx_conn_t *c, size_t max_header_bytes) {
    if (c->rcap < max_header_bytes + RBUF_SLACK) {
        size_t cap = max_header_bytes + RBUF_SLACK;
        char *b = realloc(c->rbuf, cap);
        if (b == NULL) return -ENOMEM;
        c->rbuf = b;
        c->rcap = cap;
    }
    /* Make sure a whole header fits behind this request's first byte. */
    if (c->rcap - c->rpos < HEADER_ROOM(max_header_bytes) && c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    return 0;
}

static void request_begin(lx_conn_t *c) {
    const lx_server_conf_t *s = &c->w->gen->srv;
    lx_arena_reset(&c->arena);
    memset(&c->req, 0, sizeof(c->req));
    c->req.conn = c;
    c->req.gen = lx_worker_gen_acquire(c->w);
    c->gen_held = 1;
    c->req.arena = &c->arena;
    c->req_start = c->rpos;
    c->body_base = 0;
    c->in_request = 1;
    c->in_url = 1;
    c->headers_done = 0;
    c->message_done = 0;
    c->err_status = 0;
    c->te = LX_TE_NONE;
    c->expect = LX_EXPECT_NONE;
    c->ext_bytes = 0;
    c->trailer_bytes = 0;
    c->framing_bytes = 0;
    c->framing_parts = 0;
    c->ext_last = 0;
    c->ext_refeed = 0;
    c->cur_header = NULL;
    c->last_end = NULL;
    c->nreq++;
    /* The header deadline is armed only if the header does not arrive whole
     * in this read (see conn_process): the common request costs no timer. */
    c->req_started = uv_now(&c->w->loop);
    (void)s;
}

/* Bytes of a chunked body that no limit counts: chunk-size lines (llhttp
 * takes any number of leading zeros), CRLFs and the whitespace of trailer
 * lines. Each chunk and trailer field brings a few; many more are a client
 * streaming filler to keep a request going (the CVE-2024-22019 class), and
 * get 413. Of consumed body bytes just parsed, those that took the data,
 * extension and trailer counts past counted_before were counted already.
 * The check runs at the end of each read against the parts complete by
 * then, so a long size line cut across reads is refused sooner than the
 * same bytes in one read: stricter, never looser (t/51 tests the bound). */
#define FRAMING_PER_PART 32
static int framing_overflow(lx_conn_t *c, size_t consumed, uint64_t counted_before) {
    uint64_t counted = c->req.body_read + c->ext_bytes + c->trailer_bytes - counted_before;
    if (consumed > counted) c->framing_bytes += consumed - counted;
    return c->framing_bytes > (uint64_t)FRAMING_PER_PART * (c->framing_parts + 2);
}

static void conn_process(lx_conn_t *c) {
    const lx_server_conf_t *s = &c->w->gen->srv;
    while (!c->closed && !c->closing && !c->waiting) {
        /* Answer pipelined requests only while their output stays small. */
        if (c->out_n > LX_OUT_MAX / 2 || c->olen > 64 * 1024) break;
        if (!c->in_request) {
            if (c->rpos == c->rlen) {
                c->rpos = c->rlen = 0;
                if (c->eof)
                    c->closing = 1;
                else if (c->out_n == 0)
                    set_deadline(c, TO_IDLE, s->keepalive_timeout);
                break;
            }
            if (rbuf_fit(c, s->max_header_bytes) < 0) {
                lx_conn_close(c);
                return;
            }
            request_begin(c);
        }
        const char *start = c->rbuf + c->rpos;
        /* Framing is counted over runs that start inside a chunked body;
         * the run that ends the header block may take a little uncounted. */
        int chunked_body = c->headers_done && c->req.chunked;
        uint64_t counted = c->req.body_read + c->ext_bytes + c->trailer_bytes;
        llhttp_errno_t e = llhttp_execute(&c->parser, start, (size_t)(c->rlen - c->rpos));
        if (e == HPE_OK) {
            if (chunked_body && framing_overflow(c, c->rlen - c->rpos, counted)) {
                parse_error(c, 413);
                return;
            }
            c->rpos = c->rlen;
            if (!c->headers_done) {
                /* Only a header that can no longer end within the limit
                 * is refused here: one at exactly max_header_bytes may still
                 * be waiting for its CRLF CRLF, as on_headers_complete counts
                 * to the end of the last field. */
                /* A full buffer is the limit too: it was fitted to the
                 * limit in force when this request began (rbuf_fit), and a
                 * reload raising it since must not leave the request
                 * stalled until 408 with no room to read its end into. */
                if (c->rlen - c->req_start > HEADER_END(s->max_header_bytes) ||
                    c->rlen == c->rcap) {
                    parse_error(c, c->in_url ? 414 : 431);
                    return;
                }
                /* A deadline for the whole header, from its first byte: a
                 * client trickling bytes does not push it back. */
                set_deadline_at(c, TO_HEADER, c->req_started + s->header_timeout);
            } else {
                /* Body bytes are discarded: read the rest into the same space. */
                if (c->body_base == 0) c->body_base = c->rlen;
                if (c->body_base == c->rcap) {
                    /* The header filled the buffer to its last byte: with
                     * HEADER_ROOM kept free, only a header longer than
                     * max_header_bytes (padded after its last field) does,
                     * and no byte of its body could ever be read. */
                    parse_error(c, 431);
                    return;
                }
                c->rlen = c->rpos = c->body_base;
                set_deadline(c, TO_BODY, s->body_timeout);
            }
            if (c->eof) {
                c->closing = 1; /* the rest of this request will never come */
                break;
            }
            if (c->out_n == 0) want(c, UV_READABLE);
            break;
        }
        if (e == HPE_PAUSED) {
            size_t pos = (size_t)(llhttp_get_error_pos(&c->parser) - c->rbuf);
            if (c->ext_refeed) {
                /* Give llhttp the ';' it skipped again (on_chunk_extension_
                 * value_complete): it goes on with the next extension. */
                c->ext_refeed = 0;
                pos--;
            }
            if (chunked_body && framing_overflow(c, pos - c->rpos, counted)) {
                parse_error(c, 413);
                return;
            }
            c->rpos = pos;
            llhttp_resume(&c->parser);
            if (!c->message_done) {
                /* Paused at the end of a header block: of a chunked request,
                 * so that its framing is counted from the first body byte,
                 * or of one with 100-continue. A client that sent body
                 * bytes already is not waiting for us; otherwise the
                 * request is answered now, and the response's status
                 * decides whether the body is wanted. */
                if (c->expect == LX_EXPECT_WAITING) {
                    if (c->rpos < c->rlen)
                        c->expect = LX_EXPECT_NONE;
                    else
                        lx_request_run(&c->req);
                }
                continue;
            }
            c->in_request = 0;
            /* The request is here whole: a header or body deadline left
             * from its arrival must not answer 408 while the handler waits
             * on the thread pool. What the response needs (send_timeout)
             * is set when it is written. */
            set_deadline_at(c, TO_NONE, 0);
            if (c->expect != LX_EXPECT_ANSWERED)
                lx_request_run(&c->req);
            else if (!c->req.keepalive)
                /* A stop or reload began while the body of a request
                 * answered before it came in (lx_conn_drain): the
                 * connection is done now, not at drain_timeout. */
                c->closing = 1;
            continue;
        }
        int status = c->err_status ? c->err_status : 400;
        if (e == HPE_INVALID_METHOD && c->parser.method == 0) status = 400;
        parse_error(c, status);
        return;
    }
    if (c->closed || c->waiting) return;
    if (c->out_n)
        conn_flush(c);
    else if (c->closing)
        lx_conn_close(c);
}

/* The request no longer needs its generation (its response is queued). */
static void release_gen(lx_conn_t *c) {
    if (c->gen_held) {
        c->gen_held = 0;
        lx_worker_gen_release(c->w, c->req.gen);
    }
}

void lx_conn_request_done(lx_conn_t *c) {
    lx_req_t *r = &c->req;
    release_gen(c);
    if (!r->keepalive) {
        c->closing = 1;
        /* Unread body or pipelined bytes: half-close rather than reset. */
        c->linger = c->rpos != c->rlen || !c->message_done;
    }
    /* The fast path: the response is queued, conn_process writes it when
     * the pipeline is exhausted, so pipelined answers share one write. */
}

void lx_conn_resume(lx_conn_t *c) {
    c->pending--;
    if (c->closed) {
        if (c->pending == 0 && c->handles == 0) {
            c->handles = 1;
            on_handle_closed((uv_handle_t *)&c->timer);
        }
        return;
    }
    c->waiting = 0;
    lx_request_resume(&c->req);
    if (!c->waiting && !c->closed) conn_process(c);
}
