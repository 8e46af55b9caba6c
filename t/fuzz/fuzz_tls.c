/* What luxd itself parses of a ClientHello (src/net/tls.c): the
 * server_name extension (lx_tls_sni_parse) and the ALPN list
 * (lx_tls_alpn_choose). The first byte picks which; the rest is the
 * extension's body. Invariants: the answer is -1, 0 or 1; a name or a
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
    int r = lx_tls_alpn_choose(b, n, &out, &outlen);
    assert(r >= -1 && r <= 1);
    if (r == 1) {
        assert(out > b && out + outlen <= b + n);
        assert(outlen == 8 && memcmp(out, "http/1.1", 8) == 0 && out[-1] == 8);
    }
    free(b);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    int (*f)(const uint8_t *, size_t) = data[0] & 1 ? alpn : sni;
    int all = f(data + 1, size - 1);
    /* A server_name list is whole or not: cut anywhere, its length says
     * more than there is, and it is malformed, never another answer. */
    for (size_t k = 0; f == sni && all >= 0 && k + 1 < size; k++)
        assert(f(data + 1, k) == -1);
    return 0;
}
