#include "pool.h"

#include <stdlib.h>

struct lx_pool_item_s {
    lx_pool_item_t *next;
};

void lx_pool_init(lx_pool_t *p, size_t size, unsigned keep) {
    p->free = NULL;
    p->size = size < sizeof(lx_pool_item_t) ? sizeof(lx_pool_item_t) : size;
    p->nfree = 0;
    p->keep = keep;
}

void lx_pool_free(lx_pool_t *p) {
    while (p->free) {
        lx_pool_item_t *it = p->free;
        p->free = it->next;
        free(it);
    }
    p->nfree = 0;
}

void lx_pool_resize(lx_pool_t *p, size_t size) {
    if (size == p->size) return;
    lx_pool_free(p);
    p->size = size;
}

void *lx_pool_get(lx_pool_t *p) {
    lx_pool_item_t *it = p->free;
    if (it == NULL) return malloc(p->size);
    p->free = it->next;
    p->nfree--;
    return it;
}

void lx_pool_put(lx_pool_t *p, void *block, size_t size) {
    if (block == NULL) return;
    if (size != p->size || p->nfree >= p->keep) {
        free(block);
        return;
    }
    lx_pool_item_t *it = block;
    it->next = p->free;
    p->free = it;
    p->nfree++;
}
