/* The handler interface: what answers a request once vhost, rules and
 * location are settled. Each site has a chain of handlers, built when a
 * generation is made (handlers/chain.c); handle() answers LX_DONE,
 * LX_DECLINED (the next one tries), LX_ASYNC (it waits, and is run again
 * where it stopped: at this handler, not the chain's first) or an HTTP
 * status that request.c's finish turns into a page. The handlers
 * themselves, and the table of them, are in handlers/ (handler.h). */
#ifndef LX_CORE_HANDLER_H
#define LX_CORE_HANDLER_H

#include "request.h"

typedef struct lx_handler_s {
    const char *name; /**< for logs */
    /* Per generation, in the main thread, before it is published: builds
     * what the handler needs for it (policies: one Lua state per loop).
     * Returns 0, or a negative errno with err written. NULL: nothing. */
    int (*gen_init)(lx_gen_t *g, const char *file, const char *prefix, int nloops, char *err,
                    size_t errlen);
    void (*gen_free)(lx_gen_t *g); /**< undoes gen_init; NULL: nothing */
    /* Per loop, in the loop's thread: state kept in w->hstate[id]. */
    int (*loop_init)(lx_worker_t *w, void **state);
    void (*loop_free)(lx_worker_t *w, void *state);
    /* The loop now serves generation g (a reload): in the loop's thread.
     * NULL: nothing. */
    void (*loop_adopt)(lx_worker_t *w, void *state, const lx_gen_t *g);
    /* Once a second, in the loop's thread (trims what it keeps for reuse,
     * spares.h). NULL: nothing. */
    void (*loop_tick)(lx_worker_t *w, void *state);
    int (*handle)(lx_req_t *r); /**< answers, declines, waits, or returns a status */
    /* The methods it serves (LX_METHOD bits): a site's chain serves what
     * its handlers do together (lx_site_t.methods), which a 405's Allow
     * lists. 0: none of its own (a policy answers what it likes, but only
     * when it wants to; the rest of the chain serves the others). */
    uint64_t methods;
} lx_handler_t;

#endif
