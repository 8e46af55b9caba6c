#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
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

void lx_buf_printf(lx_buf_t *b, const char *fmt, ...) {
    for (;;) {
        if (b->oom) return;
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len; /* with the NUL's byte: vsnprintf counts it */
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        if (lx_buf_grow(b, (size_t)n) < 0) return;
    }
}
