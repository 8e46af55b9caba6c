/* Path decoding and normalisation (src/http/path.c) against a model written
 * differently: decode everything first, then walk the segments with a stack.
 * Both must agree on accept or refuse and on the result, and the result must
 * hold the properties the rest of the server relies on: it starts with '/',
 * never names anything above the root, has no control byte, and normalising
 * it again (already decoded) or after percent-encoding it gives it back. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/path.h"

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The model. Returns the length of the normalised path in out, or -1 when
 * it must be refused. */
static long model(const unsigned char *in, size_t len, int decode, char *out) {
    if (len == 0 || in[0] != '/') return -1;
    unsigned char *d = malloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = in[i];
        if (c == '%' && decode) {
            if (i + 2 >= len || hexval(in[i + 1]) < 0 || hexval(in[i + 2]) < 0) goto refuse;
            c = (unsigned char)(hexval(in[i + 1]) << 4 | hexval(in[i + 2]));
            i += 2;
        }
        if (c < 0x20 || c == 0x7f) goto refuse;
        d[n++] = c;
    }
    /* Segments between slashes; starts[] and lens[] is the stack. */
    size_t *starts = malloc((n + 1) * sizeof(size_t)), *lens = malloc((n + 1) * sizeof(size_t));
    size_t depth = 0, i = 1;
    int dir = 0; /* the last segment was empty, "." or "..": the result names a directory */
    while (i <= n) {
        size_t j = i;
        while (j < n && d[j] != '/')
            j++;
        size_t sl = j - i;
        if (sl == 0 || (sl == 1 && d[i] == '.')) {
            dir = 1;
        } else if (sl == 2 && d[i] == '.' && d[i + 1] == '.') {
            if (depth == 0) {
                free(starts);
                free(lens);
                goto refuse;
            }
            depth--;
            dir = 1;
        } else {
            starts[depth] = i;
            lens[depth++] = sl;
            dir = 0;
        }
        i = j + 1;
    }
    size_t o = 0;
    out[o++] = '/';
    for (size_t k = 0; k < depth; k++) {
        memcpy(out + o, d + starts[k], lens[k]);
        o += lens[k];
        if (k + 1 < depth || dir) out[o++] = '/';
    }
    out[o] = '\0';
    free(starts);
    free(lens);
    free(d);
    return (long)o;
refuse:
    free(d);
    return -1;
}

/* What every accepted result must look like. */
static void check_shape(const char *p, size_t len) {
    assert(len >= 1 && p[0] == '/');
    assert(strlen(p) == len); /* no NUL inside */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        assert(c >= 0x20 && c != 0x7f);
        if (c == '/') {
            assert(i + 1 == len || p[i + 1] != '/'); /* no empty segment */
            /* No "." or ".." segment: nothing above the root, nothing odd. */
            const char *s = p + i + 1;
            size_t sl = strcspn(s, "/");
            assert(!(sl == 1 && s[0] == '.'));
            assert(!(sl == 2 && s[0] == '.' && s[1] == '.'));
        }
    }
}

static void one(const uint8_t *data, size_t size, int decode) {
    /* Exactly size bytes, so ASan sees any read past the input. */
    char *in = malloc(size ? size : 1);
    memcpy(in, data, size);
    char *out = malloc(size + 1), *want = malloc(size + 2);
    size_t outlen = 0;
    int r =
        decode ? lx_path_normalize(in, size, out, &outlen) : lx_path_clean(in, size, out, &outlen);
    long m = model(data, size, decode, want);
    if ((r == 0) != (m >= 0) || (r == 0 && ((size_t)m != outlen || memcmp(out, want, outlen)))) {
        fprintf(stderr, "path %s: luxd %d \"%.*s\", model %ld \"%s\"\n",
                decode ? "normalize" : "clean", r, r == 0 ? (int)outlen : 0, out, m,
                m >= 0 ? want : "");
        abort();
    }
    assert(r == 0 || r == -EINVAL);
    if (r == 0) {
        assert(outlen <= size);
        check_shape(out, outlen);
        /* Idempotent: the result is already clean. */
        char *again = malloc(outlen + 1);
        size_t alen = 0;
        assert(lx_path_clean(out, outlen, again, &alen) == 0);
        assert(alen == outlen && memcmp(again, out, outlen) == 0);
        /* Encoding for a Location and decoding again gives the same path. */
        size_t cap = 3 * outlen + 1;
        char *enc = malloc(cap);
        int el = lx_path_encode(out, outlen, enc, cap);
        assert(el >= 0 && (size_t)el < cap);
        assert(lx_path_encode(out, outlen, enc, (size_t)el) == -ENOSPC);
        el = lx_path_encode(out, outlen, enc, cap);
        char *dec = malloc((size_t)el + 1);
        size_t dlen = 0;
        assert(lx_path_normalize(enc, (size_t)el, dec, &dlen) == 0);
        assert(dlen == outlen && memcmp(dec, out, outlen) == 0);
        free(dec);
        free(enc);
        free(again);
    }
    free(want);
    free(out);
    free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one(data, size, 1);
    one(data, size, 0);
    return 0;
}
