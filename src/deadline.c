#include "deadline.h"

#include "lx.h"

static void on_timer(uv_timer_t *t);

static void arm(lx_dlq_t *q, uint64_t due) {
    if (due >= q->armed) return;
    uint64_t now = uv_now(q->timer.loop);
    q->armed = due;
    uv_timer_start(&q->timer, on_timer, due > now ? due - now : 0, 0);
}

static void on_timer(uv_timer_t *t) {
    lx_dlq_t *q = container_of(t, lx_dlq_t, timer);
    uint64_t now = uv_now(t->loop), next = UINT64_MAX;
    q->armed = UINT64_MAX;
    for (int k = 1; k < LX_DL_KINDS; k++) {
        lx_dl_t *h = &q->head[k];
        /* A callback may set other deadlines (of any kind, even this one's
         * at a later time): take the head afresh each time. */
        while (h->next != h && h->next->due <= now) {
            lx_dl_t *d = h->next;
            lx_dl_clear(d);
            q->cb(q, d, (lx_dl_kind_t)k);
        }
    }
    for (int k = 1; k < LX_DL_KINDS; k++)
        if (q->head[k].next != &q->head[k] && q->head[k].next->due < next)
            next = q->head[k].next->due;
    if (next != UINT64_MAX) arm(q, next);
}

void lx_dlq_init(lx_dlq_t *q, uv_loop_t *loop, lx_dl_cb cb) {
    uv_timer_init(loop, &q->timer);
    q->armed = UINT64_MAX;
    q->cb = cb;
    for (int k = 0; k < LX_DL_KINDS; k++)
        q->head[k].prev = q->head[k].next = &q->head[k];
}

void lx_dlq_close(lx_dlq_t *q) {
    uv_close((uv_handle_t *)&q->timer, NULL);
}

void lx_dl_clear(lx_dl_t *d) {
    if (d->prev == NULL) return;
    d->prev->next = d->next;
    d->next->prev = d->prev;
    d->prev = d->next = NULL;
}

void lx_dl_set(lx_dlq_t *q, lx_dl_t *d, lx_dl_kind_t kind, uint64_t due) {
    lx_dl_clear(d);
    if (kind == LX_DL_NONE) return;
    d->due = due;
    lx_dl_t *h = &q->head[kind], *after = h->prev;
    while (after != h && after->due > due)
        after = after->prev;
    d->prev = after;
    d->next = after->next;
    after->next->prev = d;
    after->next = d;
    if (d->prev == h) arm(q, due);
}
