/* A connection's output, gathered for one write (h2i.h lx_h2_batch_t).
 * Frames nghttp2 makes, and DATA frame headers, are copied into the
 * batch's buffer; a DATA frame's payload of some size stays where it is (a
 * pooled buffer a file was read into, a cached file's memory) and the
 * write sends it from there, so that a file's bytes are copied once, by
 * the read, before the kernel takes them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h2/h2i.h"
#include "io/filecache.h"

/* The next segment, or NULL when the array cannot grow. */
static uv_buf_t *seg_add(lx_h2_batch_t *b) {
    if (b->nseg == b->segcap) {
        unsigned cap = b->segcap ? b->segcap * 2 : 32;
        uv_buf_t *s = realloc(b->seg, cap * sizeof(*s));
        if (s == NULL) return NULL;
        b->seg = s;
        b->segcap = cap;
    }
    return &b->seg[b->nseg++];
}

char *lx_h2_batch_reserve(lx_h2_batch_t *b, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->buf, cap);
        if (p == NULL) return NULL;
        b->buf = p;
        b->cap = cap;
    }
    return b->buf + b->len;
}

/* A segment in the buffer has base NULL: its place is the sum of the
 * lengths of those before it (lx_h2_batch_iov), as the buffer may move
 * while it grows. */
int lx_h2_batch_commit(lx_h2_batch_t *b, size_t n) {
    uv_buf_t *last = b->nseg ? &b->seg[b->nseg - 1] : NULL;
    if (last == NULL || last->base != NULL) {
        if ((last = seg_add(b)) == NULL) return -ENOMEM;
        *last = uv_buf_init(NULL, 0);
    }
    last->len += n;
    b->len += n;
    b->bytes += n;
    return 0;
}

int lx_h2_batch_copy(lx_h2_batch_t *b, const void *p, size_t n) {
    char *d = lx_h2_batch_reserve(b, n);
    if (d == NULL) return -ENOMEM;
    memcpy(d, p, n);
    return lx_h2_batch_commit(b, n);
}

int lx_h2_batch_ref(lx_h2_batch_t *b, const char *p, size_t n) {
    if (n < H2_REF_MIN) return lx_h2_batch_copy(b, p, n);
    uv_buf_t *s = seg_add(b);
    if (s == NULL) return -ENOMEM;
    *s = uv_buf_init((char *)p, (unsigned)n);
    b->bytes += n;
    return 1;
}

int lx_h2_batch_ref_file(lx_h2_batch_t *b, lx_file_t *f, const char *p, size_t n) {
    if (n < H2_REF_MIN) return lx_h2_batch_copy(b, p, n);
    if (b->nfiles == b->filecap) {
        unsigned cap = b->filecap ? b->filecap * 2 : 8;
        lx_file_t **a = realloc(b->files, cap * sizeof(*a));
        if (a == NULL) return lx_h2_batch_copy(b, p, n);
        b->files = a;
        b->filecap = cap;
    }
    if (lx_h2_batch_ref(b, p, n) < 0) return -ENOMEM;
    lx_file_ref(f);
    b->files[b->nfiles++] = f;
    return 1;
}

/* A pooled buffer is kept on a list threaded through its last bytes,
 * which no stream fills (H2_BUF_ROOM): holding one never fails. */
void lx_h2_batch_hold(lx_h2_batch_t *b, char *buf) {
    memcpy(buf + H2_BUF_ROOM, &b->held, sizeof(b->held));
    b->held = buf;
}

uv_buf_t *lx_h2_batch_iov(lx_h2_batch_t *b) {
    size_t off = 0;
    for (unsigned i = 0; i < b->nseg; i++) {
        if (b->seg[i].base == NULL) {
            b->seg[i].base = b->buf + off;
            off += b->seg[i].len;
        }
    }
    return b->seg;
}

void lx_h2_batch_release(lx_h2_batch_t *b, lx_pool_t *pool) {
    while (b->held) {
        char *buf = b->held;
        memcpy(&b->held, buf + H2_BUF_ROOM, sizeof(b->held));
        lx_pool_put(pool, buf, LX_OUT_BUF);
    }
    for (unsigned i = 0; i < b->nfiles; i++)
        lx_file_unref(b->files[i]);
    b->nfiles = 0;
    b->nseg = 0;
    b->len = 0;
    b->bytes = 0;
}

void lx_h2_batch_free(lx_h2_batch_t *b, lx_pool_t *pool) {
    lx_h2_batch_release(b, pool);
    free(b->buf);
    free(b->seg);
    free(b->files);
    *b = (lx_h2_batch_t){0};
}
