/* Address sets for `from = { "10.0.0.0/8", "::1" }`: sorted, merged ranges of
 * IPv6 addresses (IPv4 as ::ffff:a.b.c.d), searched in O(log n). */
#ifndef LX_CIDR_H
#define LX_CIDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An address as a 128-bit number, IPv4 mapped into ::ffff:0:0/96. */
typedef struct {
    uint64_t hi, lo;
} lx_addr_t;

typedef struct {
    lx_addr_t *first; /**< range starts, ascending */
    lx_addr_t *last;  /**< range ends, inclusive */
    size_t n;         /**< ranges */
} lx_cidrset_t;

/* Parses "a.b.c.d", "a.b.c.d/n", "v6", "v6/n". Returns 0 or -EINVAL. */
int lx_cidr_parse(const char *s, lx_addr_t *first, lx_addr_t *last);

/* Parses one address (no prefix length) of len bytes: "a.b.c.d" or an
 * IPv6 one ("::ffff:a.b.c.d" is the same number as "a.b.c.d"). Returns 0
 * or -EINVAL. */
int lx_addr_parse(const char *s, size_t len, lx_addr_t *a);

/* Builds a set from n parsed ranges (sorted and merged in place, so the
 * set refers to first and last). Returns 0, or -ENOMEM with an empty set. */
int lx_cidrset_build(lx_cidrset_t *set, lx_addr_t *first, lx_addr_t *last, size_t n);
int lx_cidrset_has(const lx_cidrset_t *set, lx_addr_t a);

void lx_addr_from_sockaddr(const struct sockaddr *sa, lx_addr_t *a);

#endif
