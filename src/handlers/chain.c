/* The handler registry and the per-site chains. A chain is built for every
 * site of a generation before it is published (the site structs are the
 * generation's and read-only after that), from what the config asked for:
 *
 *   policy  (a policy function)      first: it may answer or refuse
 *   test    (test_handler, luxd-test) alone after the policy
 *   static  (always)                 files, index files, ranges
 *   listing (dir_listing)            a directory that has no index file
 *   proxy   (fallback = "upstream")  what no file answers goes to the backend
 *
 * and for proxy = "upstream", policy then proxy alone; for status = true,
 * policy then status alone (the counters, handlers/status.c).
 *
 * config/ records what a site asks for and never names a handler. */
#include "handler.h"

#include <stdio.h>

#include "../worker.h"

const lx_handler_t *const lx_handlers[] = {
    &lx_policy_handler, &lx_static_handler, &lx_listing_handler, &lx_proxy_handler,
    &lx_status_handler, &lx_test_handler, /* weak: NULL unless linked (luxd-test) */
};
const size_t lx_nhandlers = LX_ARRAY_SIZE(lx_handlers);

int lx_handlers_have_test(void) {
    return &lx_test_handler != NULL;
}

static void add_handlers(lx_site_t *s) {
    s->nchain = 0;
    if (s->policy) s->chain[s->nchain++] = &lx_policy_handler;
    if (s->test_handler && lx_handlers_have_test()) {
        s->chain[s->nchain++] = &lx_test_handler;
        return;
    }
    if (s->status) {
        s->chain[s->nchain++] = &lx_status_handler;
        return;
    }
    if (s->proxy) {
        s->chain[s->nchain++] = &lx_proxy_handler;
        return;
    }
    s->chain[s->nchain++] = &lx_static_handler;
    if (s->dir_listing) s->chain[s->nchain++] = &lx_listing_handler;
    if (s->fallback) s->chain[s->nchain++] = &lx_proxy_handler;
}

/* The chain, and the methods it serves: what a 405's Allow lists there
 * (request.c). */
static void build_chain(lx_site_t *s) {
    add_handlers(s);
    s->methods = 0;
    for (uint8_t i = 0; i < s->nchain; i++)
        s->methods |= s->chain[i]->methods;
}

static void gen_fini(lx_gen_t *g) {
    for (size_t i = 0; i < lx_nhandlers; i++)
        if (lx_handlers[i] && lx_handlers[i]->gen_free) lx_handlers[i]->gen_free(g);
}

int lx_handlers_gen_init(lx_gen_t *g, const char *file, const char *prefix, int nloops, char *err,
                         size_t errlen) {
    for (size_t v = 0; v < g->nvhosts; v++) {
        lx_vhost_t *vh = &g->vhosts[v];
        build_chain(&vh->site);
        for (size_t l = 0; l < vh->nlocations; l++)
            build_chain(&vh->locations[l].site);
    }
    build_chain(&g->mass_vhost.site);
    g->fini = gen_fini;
    for (size_t i = 0; i < lx_nhandlers; i++) {
        const lx_handler_t *h = lx_handlers[i];
        if (h == NULL || h->gen_init == NULL) continue;
        int r = h->gen_init(g, file, prefix, nloops, err, errlen);
        if (r < 0) return r;
    }
    return 0;
}

int lx_handlers_loop_init(lx_worker_t *w) {
    for (size_t i = 0; i < lx_nhandlers; i++) {
        const lx_handler_t *h = lx_handlers[i];
        if (h == NULL || h->loop_init == NULL) continue;
        int r = h->loop_init(w, &w->hstate[i]);
        if (r < 0) return r;
    }
    return 0;
}

void lx_handlers_loop_adopt(lx_worker_t *w, const lx_gen_t *g) {
    for (size_t i = 0; i < lx_nhandlers; i++) {
        const lx_handler_t *h = lx_handlers[i];
        if (h && h->loop_adopt) h->loop_adopt(w, w->hstate[i], g);
    }
}

void lx_handlers_loop_tick(lx_worker_t *w) {
    for (size_t i = 0; i < lx_nhandlers; i++) {
        const lx_handler_t *h = lx_handlers[i];
        if (h && h->loop_tick) h->loop_tick(w, w->hstate[i]);
    }
}

void lx_handlers_loop_free(lx_worker_t *w) {
    for (size_t i = 0; i < lx_nhandlers; i++) {
        const lx_handler_t *h = lx_handlers[i];
        if (h && h->loop_free) h->loop_free(w, w->hstate[i]);
        w->hstate[i] = NULL;
    }
}
