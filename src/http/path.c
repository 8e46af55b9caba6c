/* Request-path decoding and normalisation.
 *
 * The work is one pass over the input. Each byte (or each %XX escape, decoded
 * once) is checked and appended to `out`; whenever a segment ends, at a '/' or
 * at the end of the input, the segment just written is inspected and removed
 * again if it is empty, "." or "..". Because the check runs on the decoded
 * bytes, "%2e%2e" and ".%2E" are dot-segments just as ".." is, and because a
 * decoded "%2f" ends a segment like a literal '/', "/a%2f..%2f..%2fetc" is
 * refused exactly as "/a/../../etc" is. Bytes are never decoded twice: the '%'
 * that "%25" yields is copied as data, so "%252e" ends up as the three bytes
 * "%2e" and never as a dot.
 *
 * The output can never be longer than the input: an escape shrinks three bytes
 * to one, every other byte maps to at most one byte, and removing segments
 * only shortens. That is why `len + 1` bytes of `out` suffice and no
 * allocation is needed. */
#include "http/path.h"

#include <errno.h>

/* The value of one hex digit, or -1. Written out rather than using isxdigit()
 * so the result cannot depend on the locale. */
static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Called when the segment out[*seg .. *o) has ended. A normal segment is kept
 * and, when `more` says a '/' ended it, followed by that '/'. An empty segment
 * (from "//" or a trailing '/') and "." vanish; ".." also takes the segment
 * before it away. Both leave *o just after a '/', so a path that ends in "/."
 * or "/.." keeps its trailing slash, as RFC 3986 5.2.4 wants ("/a/b/.." is
 * "/a/"). */
static int end_segment(char *out, size_t *o, size_t *seg, int more) {
    size_t n = *o - *seg;
    const char *s = out + *seg;

    if (n == 0) return 0;
    if (n == 1 && s[0] == '.') {
        *o = *seg;
        return 0;
    }
    if (n == 2 && s[0] == '.' && s[1] == '.') {
        /* A ".." in the first segment would name the root's parent. Refusing
         * it, rather than clamping at the root as RFC 3986 does, makes a
         * client that tries it get a 400 instead of some other file. */
        if (*seg == 1) return -EINVAL;

        /* out[*seg - 1] is the '/' that ended the previous segment, which
         * cannot be empty because empty segments are never kept; walk back
         * to the '/' before it. out[0] is '/', so the walk stops. */
        *o = *seg - 1;
        while (out[*o - 1] != '/')
            (*o)--;
        *seg = *o;
        return 0;
    }
    if (more) {
        out[(*o)++] = '/';
        *seg = *o;
    }
    return 0;
}

static int normalize(const char *in, size_t len, char *out, size_t *outlen, int decode) {
    size_t i, o, seg;
    int err;

    if (len == 0 || in[0] != '/') return -EINVAL;

    out[0] = '/';
    o = seg = 1;
    for (i = 1; i < len; i++) {
        unsigned char c = (unsigned char)in[i];

        if (c == '%' && decode) {
            int hi, lo;

            if (len - i < 3) return -EINVAL;
            hi = hex_value((unsigned char)in[i + 1]);
            lo = hex_value((unsigned char)in[i + 2]);
            if (hi < 0 || lo < 0) return -EINVAL;
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
        }

        /* One test covers a raw control byte and an escaped one alike, since
         * `c` is the decoded byte either way. Bytes >= 0x80 pass: they are
         * how UTF-8 names arrive. */
        if (c < 0x20 || c == 0x7f) return -EINVAL;

        if (c == '/') {
            err = end_segment(out, &o, &seg, 1);
            if (err) return err;
        } else {
            out[o++] = (char)c;
        }
    }

    err = end_segment(out, &o, &seg, 0);
    if (err) return err;

    out[o] = '\0';
    *outlen = o;
    return 0;
}

int lx_path_normalize(const char *in, size_t len, char *out, size_t *outlen) {
    return normalize(in, len, out, outlen, 1);
}

int lx_path_clean(const char *in, size_t len, char *out, size_t *outlen) {
    return normalize(in, len, out, outlen, 0);
}

int lx_path_encode(const char *in, size_t len, char *out, size_t cap) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        int enc = c <= 0x20 || c >= 0x7f;
        for (const char *p = "\"<>\\^`{|}#%?"; !enc && *p; p++)
            enc = c == (unsigned char)*p;
        if (n + (enc ? 3 : 1) >= cap) return -ENOSPC;
        if (enc) {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        } else {
            out[n++] = (char)c;
        }
    }
    if (n >= cap) return -ENOSPC;
    out[n] = '\0';
    return (int)n;
}
