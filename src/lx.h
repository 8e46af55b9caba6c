/* Definitions every luxd source file shares: a string view, container_of, and
 * the branch hints used on the request path. */
#ifndef LX_H
#define LX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>

#define LX_VERSION "0.1.0"
#define LX_SERVER  "luxd"

#define lx_likely(x)   __builtin_expect(!!(x), 1)
#define lx_unlikely(x) __builtin_expect(!!(x), 0)

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif

#define LX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A borrowed byte range: requests point into the connection's read buffer
 * instead of copying what llhttp hands them. */
typedef struct {
    const char *p; /**< first byte, not NUL-terminated */
    size_t len;    /**< number of bytes */
} lx_str_t;

/* A header field: a request's as parsed, or one a config sets. */
typedef struct {
    lx_str_t name;  /**< as sent */
    lx_str_t value; /**< without surrounding whitespace */
} lx_header_t;

#define LX_STR(s) ((lx_str_t){(s), sizeof(s) - 1})

static inline int lx_str_eq(lx_str_t a, const char *b, size_t blen) {
    return a.len == blen && memcmp(a.p, b, blen) == 0;
}

/* ASCII case-insensitive compare of a view with a lower-case literal. */
static inline int lx_str_ieq(lx_str_t a, const char *lower, size_t llen) {
    if (a.len != llen) return 0;
    for (size_t i = 0; i < llen; i++) {
        unsigned char c = (unsigned char)a.p[i];
        if (c >= 'A' && c <= 'Z') c |= 0x20;
        if (c != (unsigned char)lower[i]) return 0;
    }
    return 1;
}

/* The keyed hash (SipHash-1-3 under the process's random key, hash.c) of
 * the tables whose keys a client chooses: seed tells tables or key spaces
 * apart. */
uint64_t lx_hash(const void *data, size_t len, uint64_t seed);

#endif
