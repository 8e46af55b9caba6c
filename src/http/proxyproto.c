/* PROXY protocol headers, versions 1 and 2 (proxyproto.h). Every answer
 * is taken from the bytes at hand alone, so the caller simply calls again
 * with more: a header cut at any byte gives the same result in the end. */
#include "proxyproto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

static const unsigned char V2_SIG[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                         0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

static ssize_t bad(const char **why, const char *what) {
    if (why) *why = what;
    return -EINVAL;
}

/* A decimal port, 0..65535, without a sign or leading zeros ("0" itself
 * is one); the spec's grammar. */
static int parse_port(const char *p, size_t n, uint16_t *out) {
    if (n == 0 || n > 5 || (n > 1 && p[0] == '0')) return -1;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (v > 65535) return -1;
    *out = (uint16_t)v;
    return 0;
}

/* An address of family af, as inet_pton takes it (which refuses leading
 * zeros in IPv4, and takes no zone or brackets). */
static int parse_addr(int af, const char *p, size_t n, unsigned char *out) {
    char buf[48];
    if (n == 0 || n >= sizeof(buf)) return -1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return inet_pton(af, buf, out) == 1 ? 0 : -1;
}

/* "PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n", "PROXY UNKNOWN...\r\n". */
static ssize_t parse_v1(const char *p, size_t n, lx_proxy_hdr_t *out, const char **why) {
    static const char pre[] = "PROXY ";
    size_t m = n < 6 ? n : 6;
    if (memcmp(p, pre, m) != 0) return bad(why, "not a PROXY protocol header");
    size_t lim = n < LX_PROXY_V1_MAX ? n : LX_PROXY_V1_MAX, end = 0;
    for (size_t i = 0; i < lim && end == 0; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\r') {
            if (i + 1 >= LX_PROXY_V1_MAX) return bad(why, "v1: no CRLF within 107 bytes");
            if (i + 1 < n && p[i + 1] != '\n') return bad(why, "v1: CR without LF");
            if (i + 1 < n) end = i;
            continue;
        }
        /* The line is printable ASCII; a bare LF is no line end here. */
        if (ch < 0x20 || ch > 0x7e) return bad(why, "v1: a control byte in the line");
    }
    if (end == 0) {
        if (n >= LX_PROXY_V1_MAX) return bad(why, "v1: no CRLF within 107 bytes");
        return 0;
    }
    memset(out, 0, sizeof(*out));
    out->version = 1;
    const char *q = p + 6, *e = p + end;
    /* UNKNOWN may be followed by anything up to the CRLF: the receiver
     * keeps the connection's own addresses. */
    if (e - q >= 7 && memcmp(q, "UNKNOWN", 7) == 0 && (e - q == 7 || q[7] == ' '))
        return (ssize_t)end + 2;
    /* Five fields, split at single spaces. */
    const char *f[5];
    size_t fl[5], nf = 0;
    for (;;) {
        const char *sp = memchr(q, ' ', (size_t)(e - q));
        const char *fe = sp ? sp : e;
        if (fe == q) return bad(why, "v1: an empty field");
        if (nf == 5) return bad(why, "v1: too many fields");
        f[nf] = q;
        fl[nf++] = (size_t)(fe - q);
        if (sp == NULL) break;
        q = sp + 1;
    }
    if (nf != 5) return bad(why, "v1: expected TCP4|TCP6 src dst sport dport");
    int af;
    if (fl[0] == 4 && memcmp(f[0], "TCP4", 4) == 0)
        af = AF_INET;
    else if (fl[0] == 4 && memcmp(f[0], "TCP6", 4) == 0)
        af = AF_INET6;
    else
        return bad(why, "v1: the protocol is not TCP4, TCP6 or UNKNOWN");
    if (parse_addr(af, f[1], fl[1], out->src) < 0 || parse_addr(af, f[2], fl[2], out->dst) < 0)
        return bad(why, "v1: an invalid address");
    if (parse_port(f[3], fl[3], &out->src_port) < 0 || parse_port(f[4], fl[4], &out->dst_port) < 0)
        return bad(why, "v1: an invalid port");
    out->family = af;
    return (ssize_t)end + 2;
}

static ssize_t parse_v2(const unsigned char *p, size_t n, lx_proxy_hdr_t *out, const char **why) {
    size_t m = n < sizeof(V2_SIG) ? n : sizeof(V2_SIG);
    if (memcmp(p, V2_SIG, m) != 0) return bad(why, "not a PROXY protocol header");
    if (n < LX_PROXY_V2_HEAD) return 0;
    unsigned ver = p[12] >> 4, cmd = p[12] & 15, fam = p[13] >> 4, proto = p[13] & 15;
    size_t len = (size_t)p[14] << 8 | p[15];
    if (ver != 2) return bad(why, "v2: version is not 2");
    if (cmd > 1) return bad(why, "v2: command is neither LOCAL nor PROXY");
    if (len > LX_PROXY_V2_MAX_LEN) return bad(why, "v2: longer than 2048 bytes");
    /* What the family needs of the length (LOCAL's are ignored, as the
     * spec says: the connection's own endpoints stand). */
    static const size_t need[4] = {0, 12, 36, 216};
    if (cmd == 1) {
        if (fam > 3 || proto > 2) return bad(why, "v2: unknown address family or protocol");
        if (len < need[fam]) return bad(why, "v2: too short for its address family");
    }
    if (n < LX_PROXY_V2_HEAD + len) return 0;
    memset(out, 0, sizeof(*out));
    out->version = 2;
    const unsigned char *a = p + LX_PROXY_V2_HEAD;
    if (cmd == 1 && fam == 1) {
        out->family = AF_INET;
        memcpy(out->src, a, 4);
        memcpy(out->dst, a + 4, 4);
        out->src_port = (uint16_t)(a[8] << 8 | a[9]);
        out->dst_port = (uint16_t)(a[10] << 8 | a[11]);
    } else if (cmd == 1 && fam == 2) {
        out->family = AF_INET6;
        memcpy(out->src, a, 16);
        memcpy(out->dst, a + 16, 16);
        out->src_port = (uint16_t)(a[32] << 8 | a[33]);
        out->dst_port = (uint16_t)(a[34] << 8 | a[35]);
    }
    /* TLVs after the addresses are skipped: luxd uses none of them. */
    return (ssize_t)(LX_PROXY_V2_HEAD + len);
}

ssize_t lx_proxy_parse(const char *p, size_t n, lx_proxy_hdr_t *out, const char **why) {
    if (n == 0) return 0;
    if (p[0] == 'P') return parse_v1(p, n, out, why);
    if (p[0] == '\r') return parse_v2((const unsigned char *)p, n, out, why);
    return bad(why, "not a PROXY protocol header");
}
