/* The handlers luxd has (their interface is core/handler.h), the table
 * a site's chain is built from when a generation is made (chain.c), and
 * what handlers ask of one another. */
#ifndef LX_HANDLER_H
#define LX_HANDLER_H

#include "core/handler.h"

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
