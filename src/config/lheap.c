#include "lheap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* A free block is poisoned, so C code that reads a Lua string after its
 * state freed it is caught (LuaJIT itself is not instrumented). */
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define CHUNK ((size_t)1 << 20)
/* Up to 256 bytes, classes 16 bytes apart; then four per doubling, so a
 * block wastes at most a fifth of itself, up to a quarter of a chunk. Past
 * that a block is mapped on its own ("big"): few of them, a table's array or
 * hash part, or the text of a config file. */
#define SMALL_MAX  256
#define MEDIUM_MAX (CHUNK / 4)
#define NCLASS     56

typedef struct {
    char *p;
    size_t size;
    int in_use;
    int touched; /**< used since the last reset */
} big_t;

struct lx_lheap_s {
    void *free[NCLASS]; /**< a free block's first word points at the next */
    char **chunks;
    size_t nchunks, capchunks;
    size_t cur;       /**< chunk being carved; chunks before it are used up */
    char *bump, *end; /**< what is left of chunks[cur] */
    big_t *bigs;
    size_t nbigs, capbigs;
    size_t mapped;
};

/* The class of an n-byte block (0 < n <= MEDIUM_MAX) and its size. */
static unsigned class_of(size_t n, size_t *size) {
    if (n <= SMALL_MAX) {
        size_t c = (n + 15) >> 4;
        if (c == 0) c = 1;
        *size = c << 4;
        return (unsigned)c - 1;
    }
    unsigned b =
        63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1)); /* 2^b < n <= 2^(b+1) */
    size_t step = (size_t)1 << (b - 2);
    size_t k = (n - ((size_t)1 << b) + step - 1) / step; /* 1..4 */
    *size = ((size_t)1 << b) + k * step;
    return 16u + (b - 8u) * 4u + (unsigned)k - 1u;
}

/* Mapped with its pages in place: one mmap that populates a chunk's 256
 * pages costs half of what 256 first-touch faults do here (luxd -t of
 * t/36's config: 16,000 page faults, 355 ms; populated, 3,000 and 300 ms).
 * A thread populating chunks ahead on the other core was tried and gained
 * nothing measurable: what a fresh heap costs more than a kept one (a
 * 10,000-vhost Lua run: 220 against 120 ms) is user time, not the faults. */
static void *map(lx_lheap_t *h, size_t n) {
    void *p =
        mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    h->mapped += n;
    return p;
}

static void unmap(lx_lheap_t *h, void *p, size_t n) {
    UNPOISON(p, n);
    munmap(p, n);
    h->mapped -= n;
}

lx_lheap_t *lx_lheap_new(void) {
    return calloc(1, sizeof(lx_lheap_t));
}

/* A block of `size` bytes cut from the chunks: the next kept chunk once the
 * current one has too little left (its tail stays unused until the reset),
 * a new one once all kept ones are used. */
static void *carve(lx_lheap_t *h, size_t size) {
    if ((size_t)(h->end - h->bump) < size) {
        size_t next = h->bump ? h->cur + 1 : 0;
        if (next == h->nchunks) {
            if (h->nchunks == h->capchunks) {
                size_t cap = h->capchunks ? h->capchunks * 2 : 64;
                char **c = realloc(h->chunks, cap * sizeof(*c));
                if (c == NULL) return NULL;
                h->chunks = c;
                h->capchunks = cap;
            }
            char *c = map(h, CHUNK);
            if (c == NULL) return NULL;
            POISON(c, CHUNK);
            h->chunks[h->nchunks++] = c;
        }
        h->cur = next;
        h->bump = h->chunks[next];
        h->end = h->bump + CHUNK;
    }
    void *p = h->bump;
    h->bump += size;
    return p;
}

static void *big_alloc(lx_lheap_t *h, size_t n) {
    size_t size = (n + 4095) & ~(size_t)4095;
    big_t *best = NULL;
    /* A kept block that fits and wastes less than half of itself. */
    for (size_t i = 0; i < h->nbigs; i++) {
        big_t *b = &h->bigs[i];
        if (!b->in_use && b->size >= size && b->size / 2 < size && (!best || b->size < best->size))
            best = b;
    }
    if (best == NULL) {
        if (h->nbigs == h->capbigs) {
            size_t cap = h->capbigs ? h->capbigs * 2 : 16;
            big_t *bs = realloc(h->bigs, cap * sizeof(*bs));
            if (bs == NULL) return NULL;
            h->bigs = bs;
            h->capbigs = cap;
        }
        char *p = map(h, size);
        if (p == NULL) return NULL;
        best = &h->bigs[h->nbigs++];
        *best = (big_t){.p = p, .size = size};
    }
    best->in_use = best->touched = 1;
    return best->p;
}

static big_t *big_of(lx_lheap_t *h, void *p) {
    for (size_t i = 0; i < h->nbigs; i++)
        if (h->bigs[i].p == p) return &h->bigs[i];
    abort(); /* a pointer this heap never gave out */
}

static void *block_alloc(lx_lheap_t *h, size_t n) {
    if (n > MEDIUM_MAX) return big_alloc(h, n);
    size_t size;
    unsigned c = class_of(n, &size);
    void *p = h->free[c];
    if (p) {
        UNPOISON(p, sizeof(void *));
        h->free[c] = *(void **)p;
    } else if ((p = carve(h, size)) == NULL) {
        return NULL;
    }
    UNPOISON(p, n);
    return p;
}

static void block_free(lx_lheap_t *h, void *p, size_t n) {
    if (n > MEDIUM_MAX) {
        big_t *b = big_of(h, p);
        b->in_use = 0;
        return;
    }
    size_t size;
    unsigned c = class_of(n, &size);
    UNPOISON(p, sizeof(void *));
    *(void **)p = h->free[c];
    h->free[c] = p;
    POISON(p, size);
}

void *lx_lheap_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    lx_lheap_t *h = ud;
    if (nsize == 0) {
        if (ptr) block_free(h, ptr, osize);
        return NULL;
    }
    if (ptr == NULL) return block_alloc(h, nsize);
    /* The same class, or the same big block: in place. */
    size_t os, ns;
    if (osize <= MEDIUM_MAX && nsize <= MEDIUM_MAX &&
        class_of(osize, &os) == class_of(nsize, &ns)) {
        if (nsize > osize) UNPOISON((char *)ptr + osize, nsize - osize);
        return ptr;
    }
    if (osize > MEDIUM_MAX && nsize > MEDIUM_MAX) {
        big_t *b = big_of(h, ptr);
        if (nsize <= b->size && b->size / 2 < nsize) return ptr;
    }
    void *p = block_alloc(h, nsize);
    if (p == NULL) return NULL; /* Lua keeps the old block */
    memcpy(p, ptr, osize < nsize ? osize : nsize);
    block_free(h, ptr, osize);
    return p;
}

void lx_lheap_reset(lx_lheap_t *h) {
    memset(h->free, 0, sizeof(h->free));
    size_t used = h->bump ? h->cur + 1 : 0;
    for (size_t i = used; i < h->nchunks; i++)
        unmap(h, h->chunks[i], CHUNK);
    h->nchunks = used;
    for (size_t i = 0; i < used; i++)
        POISON(h->chunks[i], CHUNK);
    h->cur = 0;
    h->bump = h->end = NULL;
    size_t kept = 0;
    for (size_t i = 0; i < h->nbigs; i++) {
        big_t b = h->bigs[i];
        if (!b.touched) {
            unmap(h, b.p, b.size);
            continue;
        }
        b.in_use = b.touched = 0;
        h->bigs[kept++] = b;
    }
    h->nbigs = kept;
}

void lx_lheap_free(lx_lheap_t *h) {
    if (h == NULL) return;
    for (size_t i = 0; i < h->nchunks; i++)
        unmap(h, h->chunks[i], CHUNK);
    for (size_t i = 0; i < h->nbigs; i++)
        unmap(h, h->bigs[i].p, h->bigs[i].size);
    free(h->chunks);
    free(h->bigs);
    free(h);
}

size_t lx_lheap_mapped(const lx_lheap_t *h) {
    return h ? h->mapped : 0;
}
