/* The handler interface: what answers a request once vhost, rules and
 * location are settled. Each site has a chain of handlers, built when a
 * generation is made (handlers/chain.c); handle() answers LX_DONE,
 * LX_DECLINED (the next one tries), LX_ASYNC (it waits, and is run again
 * where it stopped: at this handler, not the chain's first) or an HTTP
 * status that request.c's finish turns into a page. */
#ifndef LX_HANDLER_H
#define LX_HANDLER_H

#include "core/request.h"

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

/* The handlers luxd knows, in the order a chain tries them. */
extern const lx_handler_t lx_policy_handler;
extern const lx_handler_t lx_test_handler __attribute__((weak)); /* luxd-test only */
extern const lx_handler_t lx_static_handler;
extern const lx_handler_t lx_listing_handler;
extern const lx_handler_t lx_proxy_handler;
extern const lx_handler_t lx_status_handler;

/* Hands r to upstream u (the proxy handler's handle, for a policy's
 * r:proxy too): returns LX_ASYNC, or a status. */
int lx_proxy_handoff(lx_req_t *r, const lx_upstream_t *u);

/* True when the listing handler lists r's directory: the static handler
 * found one at the path (a path ending in "/") without an index file, and
 * the site lists directories. Anything else it declines, so a directory
 * that is not there goes on to the fallback, as a missing file does.
 * --explain asks the same. */
int lx_listing_takes(const lx_req_t *r);

/* The status the static handler answers for a file that fails to open
 * with err (404, 403 or 500); --explain says the same. */
int lx_static_status(int err);
/* try_files (static.c), for --explain to tell it the same way: an entry's n
 * bytes with $uri and $args put in (arena), and an expanded path normalised
 * (NULL: none below the root). */
char *lx_static_try_expand(lx_req_t *r, const char *e, size_t n, size_t *outlen);
char *lx_static_try_clean(lx_req_t *r, const char *p, size_t n, size_t *outlen);

#define LX_HANDLERS_MAX 8
/* All of them, for per-generation and per-loop set-up. */
extern const lx_handler_t *const lx_handlers[];
extern const size_t lx_nhandlers;

/* Builds every site's chain of g and runs the handlers' gen_init. */
int lx_handlers_gen_init(lx_gen_t *g, const char *file, const char *prefix, int nloops, char *err,
                         size_t errlen);
int lx_handlers_loop_init(lx_worker_t *w);
/* Tells the handlers the loop now serves g. */
void lx_handlers_loop_adopt(lx_worker_t *w, const lx_gen_t *g);
/* The loop's tick (a second) for the handlers. */
void lx_handlers_loop_tick(lx_worker_t *w);
void lx_handlers_loop_free(lx_worker_t *w);
/* Whether this binary has the test handler (luxd-test). */
int lx_handlers_have_test(void);

#endif
