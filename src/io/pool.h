/* Per-loop free lists of same-sized blocks: read buffers, output buffers and
 * request sessions are lent while a connection is busy and taken back when it
 * goes idle, so an idle keep-alive connection holds none of them, and the
 * busy ones reuse memory instead of calling malloc per request. */
#ifndef LX_POOL_H
#define LX_POOL_H

#include <stddef.h>

typedef struct lx_pool_item_s lx_pool_item_t;

typedef struct {
    lx_pool_item_t *free; /**< blocks ready to lend, most recent first */
    size_t size;          /**< bytes per block */
    unsigned nfree;       /**< blocks in free */
    unsigned keep;        /**< blocks kept at most; more are freed */
} lx_pool_t;

void lx_pool_init(lx_pool_t *p, size_t size, unsigned keep);
/* Frees the kept blocks and takes a new size (lent ones come back later and
 * are freed if their size is not the pool's). */
void lx_pool_resize(lx_pool_t *p, size_t size);
void lx_pool_free(lx_pool_t *p);
/* A block of p->size bytes, not zeroed, or NULL. */
void *lx_pool_get(lx_pool_t *p);
/* Takes back a block of `size` bytes (freed when the pool holds enough, or
 * when the size is not the pool's any more). */
void lx_pool_put(lx_pool_t *p, void *block, size_t size);

#endif
