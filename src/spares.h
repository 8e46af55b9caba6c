/* Spares: objects a loop keeps after use for the next request, so that a
 * busy loop in its steady state calls no malloc. How many are kept follows
 * the load rather than a fixed guess: a cap bounds the list, and at each
 * tick (once a second) the spares that no use needed since the tick before
 * (the list's low-water mark) are handed back, so a burst's objects are
 * freed a second or two after it ends. A fixed small cap cost a proxied
 * request five malloc/free pairs whenever more requests were in flight
 * than the cap (100 connections against 32 or 64 spares). */
#ifndef LX_SPARES_H
#define LX_SPARES_H

#include <stddef.h>

/* How many spares a list may keep: n, but none under ASan, so that a use
 * of an object after its request is caught at once. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LX_SPARES_NONE 1 /* clang's ASan */
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(LX_SPARES_NONE)
#define LX_SPARES_KEEP(n) 0
#else
#define LX_SPARES_KEEP(n) (n)
#endif
/* The buffer room a spare may keep (a usual request needs a few KiB); one
 * with more gives the rest back before it is kept, or a thousand spares
 * would each hold the largest buffer they ever grew to (t/185, t/191). */
#define LX_SPARE_ROOM 16384

typedef struct lx_spare_s {
    struct lx_spare_s *next;
} lx_spare_t;

typedef struct {
    lx_spare_t *head; /**< the last one put first: the warmest */
    unsigned n;       /**< on the list */
    unsigned low;     /**< fewest on the list since the last tick */
    unsigned cap;     /**< most kept; 0 keeps none */
} lx_spares_t;

static inline void lx_spares_init(lx_spares_t *l, unsigned cap) {
    l->head = NULL;
    l->n = l->low = 0;
    l->cap = cap;
}

/* The warmest spare, or NULL. */
static inline lx_spare_t *lx_spares_take(lx_spares_t *l) {
    lx_spare_t *s = l->head;
    if (s == NULL) return NULL;
    l->head = s->next;
    if (--l->n < l->low) l->low = l->n;
    return s;
}

/* Keeps s: 1, or 0 when the list is full (the caller frees s). */
static inline int lx_spares_put(lx_spares_t *l, lx_spare_t *s) {
    if (l->n >= l->cap) return 0;
    s->next = l->head;
    l->head = s;
    l->n++;
    return 1;
}

/* At a tick: gives free_one the spares unused since the last tick (the
 * coldest, at the list's end), or every one when all is set. */
void lx_spares_trim(lx_spares_t *l, int all, void (*free_one)(lx_spare_t *s));

#endif
