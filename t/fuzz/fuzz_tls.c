/* What luxd itself parses of a ClientHello (src/net/tls.c): the
 * server_name extension (lx_tls_sni_parse), the ALPN list
 * (lx_tls_alpn_choose), and the length a ClientHello announces, read from
 * the stream before OpenSSL sees it (lx_tls_hello_scan). The first byte
 * picks which; the rest is the extension's body or the stream. The stream
 * is fed whole, a byte at a time, and in pieces the input's last bytes
 * choose: the answer must be the same, and that of a plain reading of the
 * records. Invariants: the answer is -1, 0 or 1; a name or a
 * protocol found lies inside the input; a name is not empty and has no
 * NUL; the protocol chosen is "http/1.1" and was offered as a whole entry;
 * every strict prefix of a well-formed server_name list is malformed; no
 * read past the end (ASan). */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/tls.h"

static int sni(const uint8_t *p, size_t n) {
    uint8_t *b = malloc(n ? n : 1); /* exactly n bytes: ASan sees a read past them */
    memcpy(b, p, n);
    const char *name = NULL;
    size_t len = 0;
    int r = lx_tls_sni_parse(b, n, &name, &len);
    assert(r >= -1 && r <= 1);
    if (r == 1) {
        assert((const uint8_t *)name >= b && (const uint8_t *)name + len <= b + n);
        assert(len > 0 && memchr(name, '\0', len) == NULL);
    }
    free(b);
    return r;
}

static int alpn(const uint8_t *p, size_t n) {
    uint8_t *b = malloc(n ? n : 1);
    memcpy(b, p, n);
    const unsigned char *out = NULL;
    unsigned char outlen = 0;
    int h2 = n & 1; /* both ways, by the input's length */
    int r = lx_tls_alpn_choose(b, n, &out, &outlen, h2);
    assert(r >= -1 && r <= 1);
    if (r == 1) {
        assert(out > b && out + outlen <= b + n);
        assert((outlen == 8 && memcmp(out, "http/1.1", 8) == 0 && out[-1] == 8) ||
               (h2 && outlen == 2 && memcmp(out, "h2", 2) == 0 && out[-1] == 2));
    }
    free(b);
    return r;
}

/* The announced length by a plain reading of the whole stream. */
static int hello_ref(const uint8_t *p, size_t n) {
    uint8_t type = 0, msg[4];
    size_t got = 0;
    while (got < 4) {
        if (n < 5) return -1;
        if (p[0] != 22) return -2;
        type = p[0];
        size_t len = (size_t)p[3] << 8 | p[4];
        p += 5, n -= 5;
        for (size_t i = 0; i < len && got < 4; i++) {
            if (n == 0) return -1;
            msg[got++] = *p++, n--;
        }
    }
    if (type != 22 || msg[0] != 1) return -2;
    return (int)((uint32_t)msg[1] << 16 | (uint32_t)msg[2] << 8 | msg[3]);
}

static int hello(const uint8_t *p, size_t n) {
    uint8_t *b = malloc(n ? n : 1);
    memcpy(b, p, n);
    lx_tls_hello_scan_t whole = {0}, bytes = {0}, pieces = {0};
    int r = lx_tls_hello_scan(&whole, (const char *)b, n);
    assert(r == hello_ref(b, n));
    int rb = -1;
    for (size_t i = 0; i < n; i++)
        rb = lx_tls_hello_scan(&bytes, (const char *)b + i, 1);
    if (n) assert(rb == r);
    int rp = -1;
    size_t at = 0, k = n;
    while (at < n) {
        size_t cut = 1 + (k ? b[--k] % 7 : 0);
        if (cut > n - at) cut = n - at;
        rp = lx_tls_hello_scan(&pieces, (const char *)b + at, cut);
        at += cut;
    }
    if (n) assert(rp == r);
    free(b);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    if (data[0] % 3 == 2) return hello(data + 1, size - 1);
    int (*f)(const uint8_t *, size_t) = data[0] & 1 ? alpn : sni;
    int all = f(data + 1, size - 1);
    /* A server_name list is whole or not: cut anywhere, its length says
     * more than there is, and it is malformed, never another answer. */
    for (size_t k = 0; f == sni && all >= 0 && k + 1 < size; k++)
        assert(f(data + 1, k) == -1);
    return 0;
}
