/* Unit tests for lx_proxy_parse (src/http/proxyproto.c): both versions, the
 * bounds at and one past, hostile input, and every input fed cut at every
 * byte boundary (each prefix in a buffer of exactly its length, so ASan sees
 * a read past it). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http/proxyproto.h"
#include "tap.h"

static ssize_t parse_n(const char *p, size_t n, lx_proxy_hdr_t *h) {
    char *b = malloc(n ? n : 1);
    memcpy(b, p, n);
    ssize_t r = lx_proxy_parse(b, n, h, NULL);
    free(b);
    return r;
}

/* Every prefix of p[0..n): 0 until the answer is known, then the answer for
 * the whole and nothing else (a header or a refusal never changes its mind
 * with more bytes). Returns the answer for the whole input. */
static int split_ok(const char *p, size_t n, ssize_t want) {
    lx_proxy_hdr_t h, whole;
    ssize_t all = parse_n(p, n, &whole);
    if (all != want) {
        diag("whole input: got %zd, want %zd", all, want);
        return 0;
    }
    int decided = 0;
    for (size_t k = 0; k <= n; k++) {
        ssize_t r = parse_n(p, k, &h);
        if (r == 0 && !decided) continue;
        if (r != all) {
            diag("prefix of %zu bytes: got %zd, the whole %zd", k, r, all);
            return 0;
        }
        if (r > 0 && (h.family != whole.family || memcmp(h.src, whole.src, 16) != 0 ||
                      h.src_port != whole.src_port)) {
            diag("prefix of %zu bytes: another address", k);
            return 0;
        }
        decided = 1;
    }
    return 1;
}

static const char *src_text(const lx_proxy_hdr_t *h, char *buf) {
    if (h->family == 0) return strcpy(buf, "peer");
    char a[64];
    inet_ntop(h->family, h->src, a, sizeof(a));
    snprintf(buf, 80, "%s:%u", a, h->src_port);
    return buf;
}

/* A v1 line followed by an HTTP request: the header's length, and its
 * source as "addr:port" or "peer". */
static void v1(const char *line, const char *src, const char *name) {
    char in[512], got[80];
    snprintf(in, sizeof(in), "%sGET / HTTP/1.1\r\n\r\n", line);
    lx_proxy_hdr_t h;
    ssize_t r = parse_n(in, strlen(in), &h);
    if (src == NULL) {
        is_int(r, -EINVAL, "v1 refused: %s", name);
        ok(split_ok(in, strlen(in), -EINVAL), "v1 refused at every split: %s", name);
        return;
    }
    is_int(r, (long long)strlen(line), "v1 length: %s", name);
    if (r > 0) {
        is_str(src_text(&h, got), src, "v1 source: %s", name);
        is_int(h.version, 1, "v1 version: %s", name);
    }
    ok(split_ok(in, strlen(in), (ssize_t)strlen(line)), "v1 at every split: %s", name);
}

/* Builds a v2 header: signature, ver_cmd, fam, length, then body. */
static size_t v2_build(unsigned char *out, unsigned ver_cmd, unsigned fam, const void *body,
                       size_t len, size_t len_field) {
    static const unsigned char sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                          0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
    memcpy(out, sig, 12);
    out[12] = (unsigned char)ver_cmd;
    out[13] = (unsigned char)fam;
    out[14] = (unsigned char)(len_field >> 8);
    out[15] = (unsigned char)len_field;
    if (len) memcpy(out + 16, body, len);
    return 16 + len;
}

static void v2(unsigned ver_cmd, unsigned fam, const void *body, size_t len, const char *src,
               const char *name) {
    unsigned char in[4200];
    size_t n = v2_build(in, ver_cmd, fam, body, len, len);
    memcpy(in + n, "GET / HTTP/1.1\r\n\r\n", 18);
    lx_proxy_hdr_t h;
    char got[80];
    ssize_t r = parse_n((char *)in, n + 18, &h);
    if (src == NULL) {
        is_int(r, -EINVAL, "v2 refused: %s", name);
        ok(split_ok((char *)in, n + 18, -EINVAL), "v2 refused at every split: %s", name);
        return;
    }
    is_int(r, (long long)n, "v2 length: %s", name);
    if (r > 0) is_str(src_text(&h, got), src, "v2 source: %s", name);
    ok(split_ok((char *)in, n + 18, (ssize_t)n), "v2 at every split: %s", name);
}

int main(void) {
    /* ---- version 1 ---- */
    v1("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n", "192.0.2.1:56324", "TCP4");
    v1("PROXY TCP6 2001:db8::1 ::1 1 65535\r\n", "2001:db8::1:1", "TCP6");
    v1("PROXY TCP6 ::ffff:192.0.2.7 ::1 0 80\r\n", "::ffff:192.0.2.7:0", "TCP6, mapped v4, port 0");
    v1("PROXY UNKNOWN\r\n", "peer", "UNKNOWN");
    v1("PROXY UNKNOWN ffff::1 ::1 1 2\r\n", "peer", "UNKNOWN with addresses (ignored)");
    v1("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
       "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
       "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff:65535", "the longest TCP6 line (104 bytes)");
    /* 107 bytes with the CRLF: the limit, and one past. */
    char line[200];
    snprintf(line, sizeof(line), "PROXY UNKNOWN %-*s\r\n", 107 - 16, "x");
    is_int((long long)strlen(line), 107, "a line of 107 bytes");
    v1(line, "peer", "107 bytes: the limit");
    snprintf(line, sizeof(line), "PROXY UNKNOWN %-*s\r\n", 108 - 16, "x");
    v1(line, NULL, "108 bytes: one past");
    {
        char big[300];
        memset(big, 'A', sizeof(big));
        memcpy(big, "PROXY UNKNOWN ", 14);
        lx_proxy_hdr_t h;
        is_int(parse_n(big, 106, &h), 0, "106 bytes without CRLF: more needed");
        is_int(parse_n(big, 107, &h), -EINVAL, "107 bytes without CRLF: refused");
    }
    v1("GET / HTTP/1.1\r\n", NULL, "no header: a request");
    v1("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n", NULL, "lower case");
    v1("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", NULL, "bare LF");
    v1("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX\n", NULL, "CR without LF");
    v1("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", NULL, "two spaces");
    v1("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", NULL, "trailing space");
    v1("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", NULL, "six fields");
    v1("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", NULL, "four fields");
    v1("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", NULL, "a port with a leading zero");
    v1("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", NULL, "port 65536");
    v1("PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", NULL, "a negative port");
    v1("PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n", NULL, "an IPv4 part with a leading zero");
    v1("PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n", NULL, "an IPv4 part over 255");
    v1("PROXY TCP4 ::1 5.6.7.8 1 2\r\n", NULL, "TCP4 with an IPv6 address");
    v1("PROXY TCP6 1.2.3.4 ::1 1 2\r\n", NULL, "TCP6 with an IPv4 address");
    v1("PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", NULL, "an IPv6 zone");
    v1("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", NULL, "unknown protocol");
    v1("PROXY UNKNOWNX\r\n", NULL, "UNKNOWN run on");
    v1("PROXY \r\n", NULL, "nothing after PROXY");
    v1("PROXY\r\n", NULL, "no space after PROXY");
    v1("PROXY TCP4 1.2.3.4\t5.6.7.8 1 2\r\n", NULL, "a tab");
    {
        static const char nul[] = "PROXY TCP4 1.2.3.4\0 5.6.7.8 1 2\r\n";
        ok(split_ok(nul, sizeof(nul) - 1, -EINVAL), "a NUL byte: refused at every split");
    }

    /* ---- version 2 ---- */
    unsigned char a4[12] = {192, 0, 2, 1, 198, 51, 100, 1, 0xdc, 0x04, 0x01, 0xbb};
    v2(0x21, 0x11, a4, sizeof(a4), "192.0.2.1:56324", "PROXY TCP4");
    v2(0x21, 0x12, a4, sizeof(a4), "192.0.2.1:56324", "PROXY UDP4 (family decides)");
    unsigned char a6[36] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1, [31] = 1, [32] = 0, [33] = 80};
    v2(0x21, 0x21, a6, sizeof(a6), "2001:db8::1:80", "PROXY TCP6");
    unsigned char au[216] = {0};
    v2(0x21, 0x31, au, sizeof(au), "peer", "PROXY AF_UNIX: the peer stays");
    v2(0x21, 0x00, NULL, 0, "peer", "PROXY UNSPEC");
    v2(0x20, 0x00, NULL, 0, "peer", "LOCAL");
    v2(0x20, 0x11, a4, sizeof(a4), "peer", "LOCAL with addresses (ignored)");
    v2(0x20, 0x77, a4, 3, "peer", "LOCAL ignores the family");
    {
        /* Addresses, then TLVs (skipped). */
        unsigned char t[12 + 3 + 5 + 3 + 128];
        memcpy(t, a4, 12);
        unsigned char tl[] = {0x04, 0x00, 0x00, 0x05, 0x00, 0x02, 'x', 'y', 'z', 0, 0};
        memcpy(t + 12, tl, sizeof(tl));
        memset(t + 12 + sizeof(tl), 0xee, sizeof(t) - 12 - sizeof(tl));
        v2(0x21, 0x11, t, sizeof(t), "192.0.2.1:56324", "TLVs after the addresses are skipped");
    }
    static unsigned char big[LX_PROXY_V2_MAX_LEN + 1];
    memcpy(big, a4, 12);
    v2(0x21, 0x11, big, LX_PROXY_V2_MAX_LEN, "192.0.2.1:56324", "length 2048: the limit");
    v2(0x21, 0x11, big, LX_PROXY_V2_MAX_LEN + 1, NULL, "length 2049: one past");
    v2(0x21, 0x11, a4, 11, NULL, "TCP4 with 11 bytes of addresses");
    v2(0x21, 0x21, a6, 35, NULL, "TCP6 with 35 bytes of addresses");
    v2(0x21, 0x31, au, 215, NULL, "AF_UNIX with 215 bytes");
    v2(0x11, 0x11, a4, sizeof(a4), NULL, "version 1 in a v2 header");
    v2(0x31, 0x11, a4, sizeof(a4), NULL, "version 3");
    v2(0x22, 0x11, a4, sizeof(a4), NULL, "command 2");
    v2(0x21, 0x41, a4, sizeof(a4), NULL, "family 4");
    v2(0x21, 0x13, a4, sizeof(a4), NULL, "protocol 3");
    {
        unsigned char in[64];
        size_t n = v2_build(in, 0x21, 0x11, a4, 12, 12);
        in[5] = 0x0e; /* the signature broken */
        ok(split_ok((char *)in, n, -EINVAL), "a broken signature: refused at every split");
        lx_proxy_hdr_t h;
        is_int(parse_n((char *)in, 5, &h), 0, "its first 5 bytes could still be one");
        is_int(parse_n((char *)in, 6, &h), -EINVAL, "the 6th byte rules it out");
        /* The length field says more than what follows: more is needed. */
        n = v2_build(in, 0x21, 0x11, a4, 12, 40);
        is_int(parse_n((char *)in, n, &h), 0, "a length past the bytes: more needed");
    }
    v1("\r\nGET / HTTP/1.1\r\n", NULL, "CRLF then a request: not a v2 signature");

    /* ---- hostile input: random bytes, and random bytes after a valid start ---- */
    {
        unsigned seed = 12345;
        int broken = 0;
        char buf[300];
        static const char *starts[] = {"",
                                       "PROXY ",
                                       "PROXY TCP4 ",
                                       "PROXY TCP6 ::",
                                       "PROXY UNKNOWN",
                                       "\r\n\r\n\0\r\nQUIT\n\x21\x11\x00"};
        static const size_t slen[] = {0, 6, 11, 13, 13, 15};
        for (int i = 0; i < 20000 && !broken; i++) {
            size_t s = (size_t)i % 6, n = slen[s] + (size_t)(rand_r(&seed) % 140);
            memcpy(buf, starts[s], slen[s]);
            for (size_t k = slen[s]; k < n; k++) {
                int r = rand_r(&seed);
                /* Mostly the bytes a header is made of. */
                buf[k] = r % 4 ? "0123456789.: TCPUNKOWX\r\n"[r % 24] : (char)(r >> 8);
            }
            lx_proxy_hdr_t h;
            ssize_t all = parse_n(buf, n, &h);
            if (all > (ssize_t)n || all < -EINVAL || (all < 0 && all != -EINVAL)) broken = 1;
            if (all > 0 && all > (ssize_t)(s == 5 ? 16 + LX_PROXY_V2_MAX_LEN : 107)) broken = 1;
            if (!split_ok(buf, n, all)) broken = 1;
            if (broken) diag("input %d (%zu bytes) broke an invariant", i, n);
        }
        ok(!broken, "20000 hostile inputs: bounded answers, the same at every split");
    }
    return done_testing();
}
