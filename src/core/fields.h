/* The header fields the request path consults (request.h LX_H_*), found
 * once per field as a protocol parses a request: every field of every
 * request comes here, so it is inline. */
#ifndef LX_FIELDS_H
#define LX_FIELDS_H

#include <stdint.h>
#include <string.h>

#include "request.h"

/* Their names, lower case (fields.c). */
extern const struct lx_known_name {
    const char *name;
    size_t len;
} lx_known_names[LX_H_KNOWN];

/* Whether a field name, a token (is_token), is the known name lower, eight
 * bytes a step. Known names are lower case letters and '-': OR-ing 0x20
 * into a token byte gives such a byte only from itself or its upper case
 * (the other byte that gives '-', CR, is no tchar). */
static inline int lx_name_is(lx_str_t n, const char *lower) {
    const uint64_t fold = 0x2020202020202020ULL;
    size_t i = 0;
    for (; i + 8 <= n.len; i += 8) {
        uint64_t a, b;
        memcpy(&a, n.p + i, 8);
        memcpy(&b, lower + i, 8);
        if ((a | fold) != b) return 0;
    }
    for (; i < n.len; i++)
        if (((unsigned char)n.p[i] | 0x20) != (unsigned char)lower[i]) return 0;
    return 1;
}

/* Which known header a field name (a token) is, or -1. Its length, and for
 * three lengths one letter, leave one candidate to compare: every field of
 * every request comes here. */
static inline int lx_known_header_str(lx_str_t n) {
    int id;
    switch (n.len) {
    case 4: id = LX_H_HOST; break;
    case 5: id = LX_H_RANGE; break;
    case 6: id = LX_H_EXPECT; break;
    case 7: id = LX_H_REFERER; break;
    case 8: id = (n.p[3] | 0x20) == 'm' ? LX_H_IF_MATCH : LX_H_IF_RANGE; break;
    case 10: id = (n.p[0] | 0x20) == 'c' ? LX_H_CONNECTION : LX_H_USER_AGENT; break;
    case 13: id = LX_H_IF_NONE_MATCH; break;
    case 15: id = LX_H_ACCEPT_ENCODING; break;
    case 17: id = (n.p[0] | 0x20) == 'i' ? LX_H_IF_MODIFIED_SINCE : LX_H_TRANSFER_ENCODING; break;
    case 19: id = LX_H_IF_UNMODIFIED_SINCE; break;
    default: return -1;
    }
    return n.len == lx_known_names[id].len && lx_name_is(n, lx_known_names[id].name) ? id : -1;
}

/* The same for a name as pointer and length (--explain, the static
 * handler's conditional headers). */
static inline int lx_known_header(const char *name, size_t len) {
    return lx_known_header_str((lx_str_t){name, len});
}

#endif
