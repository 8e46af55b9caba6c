/* A growable byte buffer for text built piece by piece (a directory
 * listing, a proxied request's head): put appends, and a failed allocation
 * is remembered once and checked at the end, not at every put. A buffer
 * kept from one use to the next (len set to 0) keeps its room, so the
 * common put is a bounds check and a memcpy, inlined: a proxied request's
 * head is some 25 puts. */
#ifndef LX_BUF_H
#define LX_BUF_H

#include <stddef.h>
#include <string.h>

typedef struct {
    char *p;         /**< the bytes (malloc), or NULL */
    size_t len, cap; /**< used and allocated; one byte past len is always room (a NUL) */
    int oom;         /**< an allocation failed: the bytes are not to be used */
} lx_buf_t;

/* Makes room for n more bytes (and the NUL); returns 0, or -1 with b->oom
 * set. */
int lx_buf_grow(lx_buf_t *b, size_t n);

static inline void lx_buf_put(lx_buf_t *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap && lx_buf_grow(b, n) < 0) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

#define LX_BUF_PUTS(b, lit) lx_buf_put((b), (lit), sizeof(lit) - 1)

/* Appends what printf would write. */
void lx_buf_printf(lx_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The bytes as a C string (the NUL written in the room kept for it), or
 * "" when there are none or an allocation failed. */
static inline const char *lx_buf_str(lx_buf_t *b) {
    if (b->oom || b->p == NULL) return "";
    b->p[b->len] = '\0';
    return b->p;
}

#endif
