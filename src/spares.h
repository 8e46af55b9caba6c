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
