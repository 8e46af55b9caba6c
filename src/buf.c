#include "buf.h"

#include <stdlib.h>

int lx_buf_grow(lx_buf_t *b, size_t n) {
    if (b->oom) return -1;
    if (b->len + n + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap * 2 : 1024;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}
