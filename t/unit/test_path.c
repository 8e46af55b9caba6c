/* Unit tests for lx_path_normalize (src/http/path.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/path.h"
#include "tap.h"

/* Runs the normaliser on exactly `len` bytes copied into a buffer of that size,
 * so ASan catches a read past the input, and into an output buffer of exactly
 * len + 1 bytes, so it catches a write past the promised size. */
static int norm_n(const char *in, size_t len, char *res, size_t ressize) {
    char *ibuf = malloc(len ? len : 1);
    char *obuf = malloc(len + 1);
    size_t outlen = (size_t)-1;
    int rc;

    memcpy(ibuf, in, len);
    rc = lx_path_normalize(ibuf, len, obuf, &outlen);
    if (rc == 0) {
        if (outlen != strlen(obuf) || outlen > len)
            snprintf(res, ressize, "<bad outlen %zu>", outlen);
        else
            snprintf(res, ressize, "%s", obuf);
    } else {
        snprintf(res, ressize, "<error %d>", rc);
    }
    free(ibuf);
    free(obuf);
    return rc;
}

/* Renders bytes for a test description: control bytes and bytes >= 0x80
 * become \xNN so a raw newline cannot break the TAP stream, and long inputs
 * are cut short. */
static const char *show(const char *s, char *buf, size_t size) {
    size_t o = 0;

    for (; *s && o + 8 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (o > 60) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c >= 0x7f)
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
    return buf;
}

static void good(const char *in, const char *exp) {
    char res[4096], a[128], b[128];
    norm_n(in, strlen(in), res, sizeof(res));
    is_str(res, exp, "\"%s\" -> \"%s\"", show(in, a, sizeof(a)), show(exp, b, sizeof(b)));
}

static void bad(const char *in) {
    char res[4096], a[128];
    int rc = norm_n(in, strlen(in), res, sizeof(res));
    if (!is_int(rc, -EINVAL, "\"%s\" is refused", show(in, a, sizeof(a)))) diag("result: %s", res);
}

int main(void) {
    char res[4096];
    int rc, c;

    /* Plain paths pass through unchanged. */
    good("/", "/");
    good("/index.html", "/index.html");
    good("/a/b/c", "/a/b/c");
    good("/a/b/c/", "/a/b/c/");
    good("/dir/", "/dir/");
    good("/a-b_c~d!$&'()*+,;=:@", "/a-b_c~d!$&'()*+,;=:@");
    good("/a b", "/a b");
    good("/q?x=1", "/q?x=1");

    /* Slash collapsing. */
    good("//", "/");
    good("///", "/");
    good("//a///b", "/a/b");
    good("//a///b//", "/a/b/");
    good("/a//", "/a/");

    /* Single-dot segments. */
    good("/.", "/");
    good("/./", "/");
    good("/./a", "/a");
    good("/a/./b", "/a/b");
    good("/a/.", "/a/");
    good("/a/./", "/a/");
    good("/././.", "/");

    /* Double-dot segments that stay inside the root. */
    good("/a/..", "/");
    good("/a/../", "/");
    good("/a/b/..", "/a/");
    good("/a/b/../", "/a/");
    good("/a/b/../c", "/a/c");
    good("/a/b/../../c", "/c");
    good("/a/b/c/../../../d/", "/d/");
    good("/a//b/..//c", "/a/c");
    good("/a/./../b", "/b");
    good("/aa/bb/../cc/./dd/..", "/aa/cc/");

    /* Names that merely contain dots are not dot-segments. */
    good("/...", "/...");
    good("/a/.../b", "/a/.../b");
    good("/..a", "/..a");
    good("/a..", "/a..");
    good("/.hidden", "/.hidden");
    good("/a/.b/..c/", "/a/.b/..c/");
    good("/file.tar.gz", "/file.tar.gz");

    /* Climbing above the root. */
    bad("/..");
    bad("/../");
    bad("/../a");
    bad("/a/../..");
    bad("/a/../../b");
    bad("/a/b/../../../c");
    bad("/./..");
    bad("//..");
    bad("/a/./../..");

    /* Percent-decoding. */
    good("/%41%42c", "/ABc");
    good("/%7e%7E", "/~~");
    good("/a%20b", "/a b");
    good("/%25", "/%");
    good("/100%25/x", "/100%/x");
    good("/%3f", "/?");

    /* Escaped dots are dot-segments once decoded, in any case and mixture. */
    good("/a/%2e%2e", "/");
    good("/a/%2E%2e/b", "/b");
    good("/a/.%2e/b", "/b");
    good("/a/%2e./b", "/b");
    good("/a/%2e/b", "/a/b");
    bad("/%2e%2e");
    bad("/%2E%2e");
    bad("/%2e%2E/etc/passwd");
    bad("/.%2e/etc/passwd");
    bad("/a/%2e%2e/%2e%2e/etc");

    /* "%2f" decodes to '/' before dot-segments are removed. */
    good("/a%2fb", "/a/b");
    good("/a%2Fb%2f%2f", "/a/b/");
    good("/a/b%2f..", "/a/");
    good("/a/b/..%2f", "/a/");
    good("/a/b/%2f..", "/a/");
    bad("/..%2f");
    bad("/..%2fetc/passwd");
    bad("/%2f..");
    bad("/%2f..%2fetc");
    bad("/a%2f..%2f..%2fetc");
    bad("/a/%2e%2e%2f%2e%2e%2fetc");
    bad("%2f..");
    bad("%2fetc");

    /* Decoding happens exactly once. */
    good("/%252e%252e", "/%2e%2e");
    good("/%252e%252e/x", "/%2e%2e/x");
    good("/a/%252e%252e/%252e%252e", "/a/%2e%2e/%2e%2e");
    good("/%252f", "/%2f");
    good("/%2525", "/%25");
    good("/%25%32%65", "/%2e");

    /* Malformed escapes. */
    bad("/%");
    bad("/%4");
    bad("/a%");
    bad("/a%4");
    bad("/%zz");
    bad("/%4g");
    bad("/%g4");
    bad("/% 4");
    bad("/%%41");
    bad("/%-1");
    bad("/%+1");

    /* Control bytes, escaped and raw. */
    bad("/%00");
    bad("/a%00.html");
    bad("/%0a");
    bad("/%0D%0A");
    bad("/%1f");
    bad("/%7f");
    bad("/%09");
    bad("/a\tb");
    bad("/a\nb");
    bad("/a\rb");
    bad("/a\x01");
    bad("/a\x1f");
    bad("/a\x7f");
    rc = norm_n("/a\0b", 4, res, sizeof(res));
    is_int(rc, -EINVAL, "a raw NUL inside the given length is refused");

    /* Every control byte, raw and escaped, for completeness. */
    {
        int raw_ok = 1, esc_ok = 1;
        for (c = 0; c < 0x20 || c == 0x7f; c = c == 0x1f ? 0x7f : c + 1) {
            char in[8];
            in[0] = '/';
            in[1] = (char)c;
            if (norm_n(in, 2, res, sizeof(res)) != -EINVAL) raw_ok = 0;
            snprintf(in, sizeof(in), "/%%%02x", c);
            if (norm_n(in, 4, res, sizeof(res)) != -EINVAL) esc_ok = 0;
            if (c == 0x7f) break;
        }
        ok(raw_ok, "every raw control byte 0x00-0x1f and 0x7f is refused");
        ok(esc_ok, "every escaped control byte 0x00-0x1f and 0x7f is refused");
    }

    /* Bytes >= 0x80 are allowed, raw or escaped (UTF-8 names). */
    good("/caf\xc3\xa9", "/caf\xc3\xa9");
    good("/caf%C3%A9", "/caf\xc3\xa9");
    good("/%e6%97%a5%e6%9c%ac/", "/\xe6\x97\xa5\xe6\x9c\xac/");
    good("/\xff\x80", "/\xff\x80");
    good("/%ff", "/\xff");

    /* The input must start with '/'. */
    bad("");
    bad("a/b");
    bad(".");
    bad("..");
    bad("*");

    /* Only `len` bytes are read: a longer string cut short normalises as the
     * prefix does. */
    rc = norm_n("/a/b/../../../etc", 6, res, sizeof(res));
    is_int(rc, 0, "len shorter than the string is honoured");
    is_str(res, "/a/b/", "\"/a/b/.\" (first 6 bytes) -> \"/a/b/\"");
    rc = norm_n("/%41", 3, res, sizeof(res));
    is_int(rc, -EINVAL, "an escape cut by len is malformed");

    /* A long path of many segments and a long run of dot-dots that nets to
     * the root: checks the output stays within len + 1 bytes. */
    {
        char in[2048], exp[2048];
        size_t n = 0, e = 0;
        int i;

        for (i = 0; i < 200; i++) {
            memcpy(in + n, "/ab", 3);
            n += 3;
            memcpy(exp + e, "/ab", 3);
            e += 3;
        }
        for (i = 0; i < 200; i++) {
            memcpy(in + n, "/..", 3);
            n += 3;
        }
        in[n] = '\0';
        exp[e] = '\0';
        good(in, "/");
        in[n - 3] = '\0';
        good(in, "/ab/");
        memcpy(in + n, "/..", 4);
        in[n - 3] = '/';
        in[n + 3] = '\0';
        bad(in);
        good(exp, exp);
    }

    /* The output buffer is NUL-terminated and outlen matches. */
    {
        char out[16];
        size_t outlen = 0;
        memset(out, 'X', sizeof(out));
        rc = lx_path_normalize("/a/./b/", 7, out, &outlen);
        ok(rc == 0 && outlen == 5 && memcmp(out, "/a/b/", 6) == 0,
           "outlen is 5 and the output NUL-terminated for \"/a/./b/\"");
    }

    /* lx_path_clean: the same normalisation for an already-decoded path;
     * '%' is data, so nothing is decoded a second time. */
    {
        char out[64];
        size_t n;
        ok(lx_path_clean("/a/%2e%2e/b", 11, out, &n) == 0 && strcmp(out, "/a/%2e%2e/b") == 0,
           "clean: %%2e%%2e stays literal");
        ok(lx_path_clean("/a/../b", 7, out, &n) == 0 && strcmp(out, "/b") == 0,
           "clean: dot-segments removed");
        ok(lx_path_clean("/../b", 5, out, &n) == -EINVAL, "clean: climbing above the root refused");
    }
    /* lx_path_encode: Location headers carry decoded bytes as data. */
    {
        char out[64];
        is_int(lx_path_encode("/a b?c%#", 8, out, sizeof(out)), 16, "encode: length");
        is_str(out, "/a%20b%3Fc%25%23", "encode: space ? %% # are escaped");
        is_int(lx_path_encode("/\xc3\xa9", 3, out, sizeof(out)), 7, "encode: UTF-8 bytes");
        is_str(out, "/%C3%A9", "encode: UTF-8 bytes as %%XX");
        ok(lx_path_encode("/abcdef", 7, out, 4) == -ENOSPC, "encode: too small a buffer");
    }

    return done_testing();
}
