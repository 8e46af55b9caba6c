/* Batched sends through io_uring (sendbatch.h says why).
 *
 * A batch is filled during a loop turn and sent from a prepare handle,
 * which libuv runs after the turn's callbacks and before it polls again.
 * The send callbacks a batch makes may queue new sends (a written head
 * lets the body go on): they go to the other half of a pair of entry
 * arrays and buffers, so the half being reported on stays intact, and are
 * sent by the next round of the same flush. */
#include "sendbatch.h"

#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include "../log.h"

/* Sends queued in one turn at most, and their bytes; more go at once. */
#define SB_ENTRIES 256
#define SB_BYTES   65536
/* A head bigger than this is not copied into the batch: it goes at once.
 * A request head is a few hundred bytes. */
#define SB_MAX_SEND 4096
/* Rounds of one flush (sends queued by the callbacks of the round before);
 * what is left then waits for the next turn, which does not block. */
#define SB_ROUNDS 16

typedef struct lx_send_ent_s {
    lx_send_t *q; /**< NULL: cancelled */
    int fd;
    int res;      /**< the completion: bytes sent or a negative errno */
    uint32_t off; /**< in the half's buffer */
    uint32_t len;
} lx_send_ent_t;

typedef struct {
    lx_send_ent_t ents[SB_ENTRIES];
    char buf[SB_BYTES];
} sb_half_t;

struct lx_sendbatch_s {
    struct io_uring ring;
    uv_prepare_t prep; /**< runs the flush before the loop polls */
    uv_idle_t idle;    /**< while sends are left after SB_ROUNDS: the poll does not wait */
    int handles;       /**< open handles (freed when both are closed) */
    int broken;        /**< a submission failed: the ring is gone, sends go at once */
    sb_half_t *cur;    /**< the half being filled */
    sb_half_t *other;  /**< the half being reported on */
    unsigned n;        /**< entries in cur */
    size_t used;       /**< bytes in cur->buf */
};

/* io_uring's send honours MSG_DONTWAIT (completes with EAGAIN rather than
 * waiting for room in a worker) since long before 6.0; older kernels are
 * not trusted with a loop that must never block. */
static int kernel_ok(void) {
    struct utsname u;
    int major = 0;
    return uname(&u) == 0 && sscanf(u.release, "%d.", &major) == 1 && major >= 6;
}

lx_sendbatch_t *lx_sendbatch_new(uv_loop_t *loop, char *err, size_t errlen) {
    const char *env = getenv("LUXD_IO_URING");
    if (env && strcmp(env, "0") == 0) {
        snprintf(err, errlen, "LUXD_IO_URING=0");
        return NULL;
    }
    if (!kernel_ok()) {
        snprintf(err, errlen, "a kernel before 6.0");
        return NULL;
    }
    lx_sendbatch_t *b = calloc(1, sizeof(*b));
    sb_half_t *h = calloc(2, sizeof(*h));
    if (b == NULL || h == NULL) {
        free(b);
        free(h);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* Completions need no interrupt of the loop's thread. (Not
     * SINGLE_ISSUER: the ring is made before the loop's thread runs.) */
    int r = io_uring_queue_init(SB_ENTRIES, &b->ring, IORING_SETUP_COOP_TASKRUN);
    if (r == -EINVAL) r = io_uring_queue_init(SB_ENTRIES, &b->ring, 0);
    if (r < 0) {
        free(b);
        free(h);
        snprintf(err, errlen, "io_uring_setup: %s", strerror(-r));
        return NULL;
    }
    b->cur = &h[0];
    b->other = &h[1];
    uv_prepare_init(loop, &b->prep);
    uv_idle_init(loop, &b->idle);
    b->prep.data = b->idle.data = b;
    /* Neither keeps the loop alive: the connections do. */
    uv_unref((uv_handle_t *)&b->prep);
    uv_unref((uv_handle_t *)&b->idle);
    b->handles = 2;
    return b;
}

static void on_closed(uv_handle_t *h) {
    lx_sendbatch_t *b = h->data;
    if (--b->handles) return;
    free(b->cur < b->other ? b->cur : b->other);
    free(b);
}

void lx_sendbatch_free(lx_sendbatch_t *b) {
    if (b == NULL) return;
    for (unsigned i = 0; i < b->n; i++) /* dropped unsent: the loop has ended */
        if (b->cur->ents[i].q) b->cur->ents[i].q->ent = NULL;
    b->n = 0;
    if (!b->broken) io_uring_queue_exit(&b->ring);
    uv_close((uv_handle_t *)&b->prep, on_closed);
    uv_close((uv_handle_t *)&b->idle, on_closed);
}

static void on_prepare(uv_prepare_t *p);

int lx_sendbatch_add(lx_sendbatch_t *b, lx_send_t *q, int fd, const uv_buf_t *bufs, unsigned nbufs,
                     size_t total) {
    if (b->broken || total == 0 || total > SB_MAX_SEND || b->n == SB_ENTRIES ||
        b->used + total > SB_BYTES)
        return -ENOSPC;
    if (b->n == 0) uv_prepare_start(&b->prep, on_prepare);
    lx_send_ent_t *e = &b->cur->ents[b->n++];
    e->q = q;
    e->fd = fd;
    e->res = 0;
    e->off = (uint32_t)b->used;
    e->len = (uint32_t)total;
    for (unsigned i = 0; i < nbufs; i++) {
        memcpy(b->cur->buf + b->used, bufs[i].base, bufs[i].len);
        b->used += bufs[i].len;
    }
    q->ent = e;
    return 0;
}

void lx_sendbatch_cancel(lx_send_t *q) {
    if (q->ent) q->ent->q = NULL;
    q->ent = NULL;
}

/* Closes the ring for good: entries still in it are never sent, those in
 * flight end. From then on every send goes at once. */
static void give_up(lx_sendbatch_t *b, const char *what, int err) {
    lx_log_warn("upstream sends: %s (%s); one write(2) each from now on", what, strerror(-err));
    io_uring_queue_exit(&b->ring);
    b->broken = 1;
}

/* Submits the n entries of h and collects their completions, which the
 * kernel makes within the submission (MSG_DONTWAIT). An entry the kernel
 * did not take keeps res -EAGAIN: nothing of it went, and it goes by
 * uv_write. One it took but whose completion does not come (cannot happen
 * with inline sends; a guard against a loop that waits for ever) gets
 * -EPIPE: its bytes may or may not have gone, so the connection is not
 * used again, and the proxy treats it as a pooled connection found broken
 * (an idempotent request goes again on a new one; the server is not
 * counted as failed). Either way the ring is closed, so nothing of it is sent later. */
static void submit(lx_sendbatch_t *b, sb_half_t *h, unsigned n) {
    unsigned live = 0;
    for (unsigned i = 0; i < n; i++) {
        lx_send_ent_t *e = &h->ents[i];
        e->res = -EAGAIN; /* unsent, unless a completion says otherwise */
        if (e->q == NULL) continue;
        struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
        io_uring_prep_send(sqe, e->fd, h->buf + e->off, e->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        io_uring_sqe_set_data64(sqe, i);
        live++;
    }
    if (live == 0) return;
    int r;
    do
        r = io_uring_submit(&b->ring);
    while (r == -EINTR);
    if (r < 0) {
        give_up(b, "io_uring_enter failed", r);
        return;
    }
    /* The kernel takes entries in order: the first r live ones. */
    unsigned taken = (unsigned)r < live ? (unsigned)r : live, k = 0;
    for (unsigned i = 0; i < n && k < taken; i++)
        if (h->ents[i].q) {
            h->ents[i].res = -EPIPE;
            k++;
        }
    unsigned got = 0, waits = 0;
    while (got < taken) {
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&b->ring, head, cqe) {
            if (cqe->user_data < n) h->ents[cqe->user_data].res = cqe->res;
            seen++;
        }
        io_uring_cq_advance(&b->ring, seen);
        got += seen;
        if (got >= taken) break;
        struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
        int w = io_uring_wait_cqe_timeout(&b->ring, &cqe, &ts);
        if (w < 0 && w != -EINTR && w != -ETIME) break;
        if (w == -ETIME && ++waits >= 10) break; /* 10 ms: they are not coming */
    }
    if (got < taken)
        give_up(b, "completions missing", -ETIME);
    else if (taken < live)
        give_up(b, "io_uring_enter took part of a batch", -EAGAIN);
}

/* Only there so that the poll does not wait: the prepare handle, still
 * started, sends what is left. */
static void on_idle(uv_idle_t *i) {
    (void)i;
}

static void flush(lx_sendbatch_t *b) {
    for (int round = 0; round < SB_ROUNDS && b->n; round++) {
        sb_half_t *h = b->cur;
        unsigned n = b->n;
        submit(b, h, n);
        /* New sends from the callbacks fill the other half. */
        b->cur = b->other;
        b->other = h;
        b->n = 0;
        b->used = 0;
        for (unsigned i = 0; i < n; i++) {
            lx_send_ent_t *e = &h->ents[i];
            lx_send_t *q = e->q;
            if (q == NULL) continue;
            q->ent = NULL;
            size_t sent = e->res > 0 ? (size_t)e->res : 0;
            int res = e->res < 0 && e->res != -EAGAIN ? e->res : 0;
            q->done(q, h->buf + e->off, e->len, sent, res);
        }
    }
    if (b->n == 0) {
        uv_prepare_stop(&b->prep);
        uv_idle_stop(&b->idle);
    } else {
        uv_idle_start(&b->idle, on_idle);
    }
}

static void on_prepare(uv_prepare_t *p) {
    flush(p->data);
}
