#include "arena.h"

#include <stdlib.h>
#include <string.h>

struct lx_arena_block_s {
    lx_arena_block_t *next;
    size_t size;
    _Alignas(16) char data[];
};

void lx_arena_init(lx_arena_t *a, size_t block_size) {
    a->head = NULL;
    a->cur = a->end = NULL;
    a->block_size = block_size;
}

void *lx_arena_alloc(lx_arena_t *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if ((size_t)(a->end - a->cur) < n || a->cur == NULL) {
        size_t size = n > a->block_size ? n : a->block_size;
        lx_arena_block_t *b = malloc(sizeof(*b) + size);
        if (b == NULL) return NULL;
        b->size = size;
        /* An oversized request gets its own block behind the head, so the
         * head's remaining space is not wasted. */
        if (n > a->block_size && a->head != NULL) {
            b->next = a->head->next;
            a->head->next = b;
            return b->data;
        }
        b->next = a->head;
        a->head = b;
        a->cur = b->data;
        a->end = b->data + size;
    }
    void *p = a->cur;
    a->cur += n;
    return p;
}

void *lx_arena_calloc(lx_arena_t *a, size_t n) {
    void *p = lx_arena_alloc(a, n);
    if (p != NULL) memset(p, 0, n);
    return p;
}

char *lx_arena_strndup(lx_arena_t *a, const char *s, size_t n) {
    char *p = lx_arena_alloc(a, n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *lx_arena_strdup(lx_arena_t *a, const char *s) {
    return lx_arena_strndup(a, s, strlen(s));
}

void lx_arena_reset(lx_arena_t *a) {
    if (a->head == NULL) return;
    lx_arena_block_t *keep = a->head;
    /* Keep the last block in the chain: it is the first one allocated, of the
     * normal size unless the very first request was oversized. */
    while (keep->next != NULL) {
        lx_arena_block_t *b = keep;
        keep = keep->next;
        free(b);
    }
    if (keep->size != a->block_size) {
        free(keep);
        a->head = NULL;
        a->cur = a->end = NULL;
        return;
    }
    a->head = keep;
    a->cur = keep->data;
    a->end = keep->data + keep->size;
}

void lx_arena_free(lx_arena_t *a) {
    lx_arena_block_t *b = a->head;
    while (b != NULL) {
        lx_arena_block_t *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->cur = a->end = NULL;
}
