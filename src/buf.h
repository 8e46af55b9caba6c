/* A growable byte buffer for text built piece by piece off the hot path (a
 * directory listing, a proxied request's head): put appends, and a failed
 * allocation is remembered once and checked at the end, not at every put. */
#ifndef LX_BUF_H
#define LX_BUF_H

#include <stddef.h>

typedef struct {
    char *p;         /**< the bytes (malloc), or NULL */
    size_t len, cap; /**< used and allocated; one byte past len is always room (a NUL) */
    int oom;         /**< an allocation failed: p holds what came before */
} lx_buf_t;

void lx_buf_put(lx_buf_t *b, const char *s, size_t n);

#define LX_BUF_PUTS(b, lit) lx_buf_put((b), (lit), sizeof(lit) - 1)

#endif
