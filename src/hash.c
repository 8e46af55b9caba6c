/* SipHash, written from the paper's specification (section 2): four 64-bit
 * words of state initialised from the key and four constants, each 8-byte
 * little-endian message word xored into v3, c SipRounds, xored into v0;
 * the last word carries the remaining bytes and the length mod 256 in its
 * top byte; then v2 ^= 0xff, d SipRounds, and the xor of the four words.
 * luxd uses SipHash-1-3: the variant Python, Rust and Ruby hash their
 * tables with, which is still a PRF for this use (keys a client sends to a
 * server that never shows a hash) at under half the rounds of 2-4. */
#include "hash.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lx.h"

static uint64_t key0, key1;

static inline uint64_t rotl(uint64_t x, int b) {
    return (x << b) | (x >> (64 - b));
}

/* A little-endian word: one load on the machines luxd runs on. */
static inline uint64_t load_le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

/* c and d are constants at every call site that matters (lx_hash), so the
 * compiler unrolls the round loops there. */
static inline uint64_t siphash(int c, int d, uint64_t k0, uint64_t k1, const void *data,
                               size_t len) {
    const unsigned char *p = data, *end = p + (len & ~(size_t)7);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    for (; p < end; p += 8) {
        uint64_t m = load_le64(p);
        v3 ^= m;
        for (int i = 0; i < c; i++)
            SIPROUND;
        v0 ^= m;
    }
    /* The last word: 0 to 7 remaining bytes, the length's low byte on top. */
    uint64_t b = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++)
        b |= (uint64_t)p[i] << (8 * i);
    v3 ^= b;
    for (int i = 0; i < c; i++)
        SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < d; i++)
        SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t lx_siphash(int c, int d, const uint8_t key[16], const void *data, size_t len) {
    return siphash(c, d, load_le64(key), load_le64(key + 8), data, len);
}

/* seed tells keys of one table apart (the file cache's site id): it is
 * folded into the key, which gives another member of the PRF family. */
uint64_t lx_hash(const void *data, size_t len, uint64_t seed) {
    return siphash(1, 3, key0 ^ seed, key1, data, len);
}

void lx_hash_set_key(const uint8_t key[16]) {
    key0 = load_le64(key);
    key1 = load_le64(key + 8);
}

uint64_t lx_hash_fingerprint(void) {
    return siphash(1, 3, key0, key1, "", 0);
}

int lx_hash_seed(void) {
    uint8_t key[16];
    size_t got = 0;
    while (got < sizeof(key)) {
        /* Flags 0: block until the kernel's generator is initialised, which
         * on a running system it long is; a key guessed from the time at
         * boot would defeat the purpose. */
        ssize_t n = getrandom(key + got, sizeof(key) - got, 0);
        if (n > 0) {
            got += (size_t)n;
        } else if (n < 0 && errno == ENOSYS) {
            /* A kernel before 3.17: the device, which was always there. */
            int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
            if (fd < 0) return -errno;
            ssize_t r = read(fd, key + got, sizeof(key) - got);
            int e = errno;
            close(fd);
            if (r <= 0) return r < 0 ? -e : -EIO;
            got += (size_t)r;
        } else if (n < 0 && errno != EINTR) {
            return -errno;
        }
    }
    lx_hash_set_key(key);
    memset(key, 0, sizeof(key));
    return 0;
}
