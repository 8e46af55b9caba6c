/* Batched sends: the request heads a loop turn writes to its upstream
 * connections go out together, in one
 * io_uring_enter(2) just before the loop waits again, instead of one
 * write(2) each.
 *
 * Why: where the front and its backend share a CPU (a small machine, or
 * both pinned), each write(2) that wakes the backend lets the backend
 * preempt the loop on the syscall's way out. The loop then resumes for
 * the next request only to be preempted again: a context switch pair for
 * every two or three proxied requests, a quarter of the front's CPU time
 * on this machine. One submission for the whole turn wakes the backend
 * once; it finds every request of the turn ready and answers them in one
 * go of its own.
 *
 * Sends go with MSG_DONTWAIT, so the kernel completes each one within the
 * submission: what a full socket did not take comes back as a short count
 * or EAGAIN and goes by uv_write, as before. Where io_uring is not there
 * (an old kernel, io_uring_disabled, a seccomp filter, LUXD_IO_URING=0 in
 * the environment) a batch is not made and every send is written at
 * once. */
#ifndef LX_SENDBATCH_H
#define LX_SENDBATCH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct lx_sendbatch_s lx_sendbatch_t;
typedef struct lx_send_s lx_send_t;

/* One send waiting in a batch; embedded in its connection. */
struct lx_send_s {
    /* Called once the batch went out: sent is what the socket took, res 0
     * or a negative errno. The bytes not taken (data + sent, len - sent)
     * are valid during the call only. Not called after lx_sendbatch_cancel. */
    void (*done)(lx_send_t *q, const char *data, size_t len, size_t sent, int res);
    struct lx_send_ent_s *ent; /**< its entry while queued, else NULL */
};

/* The loop's batch, or NULL where io_uring cannot be used (why is in err,
 * for a log line). */
lx_sendbatch_t *lx_sendbatch_new(uv_loop_t *loop, char *err, size_t errlen);
/* Frees it (the loop's end; nothing is queued then). */
void lx_sendbatch_free(lx_sendbatch_t *b);

/* Queues the bytes of bufs (copied) for fd: 0, or -ENOSPC when the batch
 * has no room for them (the caller writes them itself, at once). */
int lx_sendbatch_add(lx_sendbatch_t *b, lx_send_t *q, int fd, const uv_buf_t *bufs, unsigned nbufs,
                     size_t total);
/* Takes q's send out of its batch unsent (its connection is closing). */
void lx_sendbatch_cancel(lx_send_t *q);

#endif
