/* A bump allocator: memory that lives exactly as long as its owner (a request,
 * a config generation) and is freed in one go. */
#ifndef LX_ARENA_H
#define LX_ARENA_H

#include <stddef.h>

typedef struct lx_arena_block_s lx_arena_block_t;

typedef struct {
    lx_arena_block_t *head; /**< newest block; older ones follow */
    char *cur;              /**< next free byte in head */
    char *end;              /**< end of head's space */
    size_t block_size;      /**< size of a new block */
} lx_arena_t;

void lx_arena_init(lx_arena_t *a, size_t block_size);
/* Returns 16-byte aligned memory, or NULL when malloc fails. */
void *lx_arena_alloc(lx_arena_t *a, size_t n);
void *lx_arena_calloc(lx_arena_t *a, size_t n);
char *lx_arena_strndup(lx_arena_t *a, const char *s, size_t n);
char *lx_arena_strdup(lx_arena_t *a, const char *s);
/* Frees all blocks but the first, so a reused arena stops calling malloc. */
void lx_arena_reset(lx_arena_t *a);
void lx_arena_free(lx_arena_t *a);

#endif
