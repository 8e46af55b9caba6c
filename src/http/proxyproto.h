/* The PROXY protocol header (HAProxy's spec, versions 1 and 2) that a load
 * balancer sends before the client's bytes on a `proxy_protocol = true`
 * listener: the client's address as the balancer saw it. A pure parser:
 * conn.c calls it with the bytes read so far, from the connection's start. */
#ifndef LX_HTTP_PROXYPROTO_H
#define LX_HTTP_PROXYPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Version 1: one text line, at most 107 bytes with its CRLF (the spec's
 * bound; "PROXY TCP6" with two full IPv6 addresses and ports is 104). */
#define LX_PROXY_V1_MAX 107
/* Version 2: a 16-byte head, then a length of addresses and TLVs. The spec
 * allows 65535; balancers send the addresses and a few TLVs (an AWS VPC
 * endpoint id, a unique id of up to 128 bytes, TLS details), so 2048 bytes
 * is ample and keeps the whole header within a read buffer. */
#define LX_PROXY_V2_HEAD    16
#define LX_PROXY_V2_MAX_LEN 2048

typedef struct {
    int version;           /**< 1 or 2 */
    int family;            /**< AF_INET or AF_INET6: the source below is the client;
                              0: keep the connection's peer (LOCAL, UNKNOWN, AF_UNIX, UNSPEC) */
    unsigned char src[16]; /**< source address, network order (4 bytes for AF_INET) */
    unsigned char dst[16]; /**< destination address */
    uint16_t src_port;     /**< host order */
    uint16_t dst_port;
} lx_proxy_hdr_t;

/* Parses a PROXY header at the start of p[0..n). Returns the header's length
 * in bytes (> 0; the bytes after it are the client's own) with *out filled;
 * 0 when the n bytes are a valid beginning of a header and more are needed;
 * -EINVAL when they can no longer be one (not a PROXY header, malformed, or
 * over the bounds above). *why (if why is not NULL) says what is wrong then.
 * The answer for a prefix never contradicts the answer for more bytes: a
 * header split anywhere parses the same. */
ssize_t lx_proxy_parse(const char *p, size_t n, lx_proxy_hdr_t *out, const char **why);

#endif
