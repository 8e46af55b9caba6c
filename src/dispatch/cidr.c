#include "cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

static lx_addr_t from_bytes(const unsigned char b[16]) {
    lx_addr_t a = {0, 0};
    for (int i = 0; i < 8; i++)
        a.hi = a.hi << 8 | b[i];
    for (int i = 8; i < 16; i++)
        a.lo = a.lo << 8 | b[i];
    return a;
}

static void map_v4(const void *v4, unsigned char out[16]) {
    memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    memcpy(out + 12, v4, 4);
}

void lx_addr_from_sockaddr(const struct sockaddr *sa, lx_addr_t *a) {
    unsigned char b[16] = {0};
    if (sa->sa_family == AF_INET)
        map_v4(&((const struct sockaddr_in *)sa)->sin_addr, b);
    else if (sa->sa_family == AF_INET6)
        memcpy(b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    *a = from_bytes(b);
}

static int cmp(lx_addr_t a, lx_addr_t b) {
    return a.hi < b.hi ? -1 : a.hi > b.hi ? 1 : a.lo < b.lo ? -1 : a.lo > b.lo ? 1 : 0;
}

/* The address in s (NUL-terminated) as bytes; 4 for IPv4 (mapped), 6 for
 * IPv6, -EINVAL for neither. */
static int parse_bytes(const char *s, unsigned char b[16]) {
    struct in_addr v4;
    if (inet_pton(AF_INET, s, &v4) == 1) {
        map_v4(&v4, b);
        return 4;
    }
    return inet_pton(AF_INET6, s, b) == 1 ? 6 : -EINVAL;
}

int lx_addr_parse(const char *s, size_t len, lx_addr_t *a) {
    char buf[64];
    unsigned char b[16];
    /* inet_pton wants a C string, and a NUL inside would end it early. */
    if (len == 0 || len >= sizeof(buf) || memchr(s, '\0', len)) return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (parse_bytes(buf, b) < 0) return -EINVAL;
    *a = from_bytes(b);
    return 0;
}

int lx_cidr_parse(const char *s, lx_addr_t *first, lx_addr_t *last) {
    char buf[64];
    size_t len = strlen(s);
    if (len == 0 || len >= sizeof(buf)) return -EINVAL;
    memcpy(buf, s, len + 1);
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        char *end;
        *slash = '\0';
        /* Digits only: strtol would take " 8" and "+8". */
        if (slash[1] < '0' || slash[1] > '9') return -EINVAL;
        bits = strtol(slash + 1, &end, 10);
        if (*end != '\0' || bits < 0) return -EINVAL;
    }
    unsigned char b[16];
    int family = parse_bytes(buf, b);
    if (family == 4) {
        if (bits > 32) return -EINVAL;
        bits = bits < 0 ? 128 : bits + 96;
    } else if (family == 6) {
        if (bits > 128) return -EINVAL;
        if (bits < 0) bits = 128;
    } else {
        return -EINVAL;
    }
    /* Host bits set in "10.1.2.3/8" are cleared, as routers do. */
    lx_addr_t a = from_bytes(b);
    uint64_t mhi = bits >= 64 ? ~0ULL : bits == 0 ? 0 : ~0ULL << (64 - bits);
    uint64_t mlo = bits <= 64 ? 0 : bits >= 128 ? ~0ULL : ~0ULL << (128 - bits);
    first->hi = a.hi & mhi;
    first->lo = a.lo & mlo;
    last->hi = first->hi | ~mhi;
    last->lo = first->lo | ~mlo;
    return 0;
}

typedef struct {
    lx_addr_t f, l;
} pair_t;

static int pair_cmp(const void *a, const void *b) {
    return cmp(((const pair_t *)a)->f, ((const pair_t *)b)->f);
}

int lx_cidrset_build(lx_cidrset_t *set, lx_addr_t *first, lx_addr_t *last, size_t n) {
    pair_t *p = malloc((n ? n : 1) * sizeof(*p));
    set->first = first;
    set->last = last;
    set->n = 0;
    if (p == NULL) return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        p[i] = (pair_t){first[i], last[i]};
    qsort(p, n, sizeof(*p), pair_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0) {
            /* Merge overlapping or adjacent ranges. */
            lx_addr_t end = last[m - 1];
            lx_addr_t next = end;
            if (++next.lo == 0) next.hi++;
            if (cmp(p[i].f, next) <= 0 || (end.hi == ~0ULL && end.lo == ~0ULL)) {
                if (cmp(p[i].l, end) > 0) last[m - 1] = p[i].l;
                continue;
            }
        }
        first[m] = p[i].f;
        last[m] = p[i].l;
        m++;
    }
    set->n = m;
    free(p);
    return 0;
}

int lx_cidrset_has(const lx_cidrset_t *set, lx_addr_t a) {
    size_t lo = 0, hi = set->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp(set->last[mid], a) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < set->n && cmp(set->first[lo], a) <= 0;
}
