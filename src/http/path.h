/* Request-path decoding and normalisation: the one place that turns the bytes a
 * client sent into the path that rules and the file system see. */
#ifndef LX_HTTP_PATH_H
#define LX_HTTP_PATH_H

#include <stddef.h>

/* Decodes the percent-escapes of a request target's path (no query string) and
 * removes dot-segments (RFC 3986 5.2.4), collapsing repeated slashes.
 *
 * `in` must start with '/'. `out` must have room for `len + 1` bytes; the result
 * is NUL-terminated and its length stored in *outlen. Decoding happens exactly
 * once, so "%252e" stays the literal "%2e" and never becomes a dot. "%2f"
 * decodes to '/' before dot-segments are removed, so it cannot smuggle ".."
 * past the normaliser.
 *
 * A path that ends in '/' keeps it ("/dir/" stays "/dir/"), and so does one
 * whose last segment is "." or ".." ("/a/b/.." becomes "/a/"), since those
 * name a directory. Bytes >= 0x80 pass through, so UTF-8 names work; a backslash and
 * every other printable byte are ordinary data. The result is never longer
 * than the input.
 *
 * Returns 0, or -EINVAL when the path must be refused with 400: an input that
 * does not start with '/', a malformed escape ("%", "%4", "%zz"), a NUL or
 * other control byte (0x00-0x1f, 0x7f) before or after decoding, or a ".."
 * that would climb above the root ("/..", "/a/../.."). *out and *outlen are
 * unspecified after an error. */
int lx_path_normalize(const char *in, size_t len, char *out, size_t *outlen);

/* The same normalisation for a path that is already decoded (the target of
 * an internal rewrite): '%' is an ordinary byte here, so nothing is decoded
 * twice. */
int lx_path_clean(const char *in, size_t len, char *out, size_t *outlen);

/* Percent-encodes a decoded path for a Location header: bytes that may not
 * stand in a URL path as data (controls, space, non-ASCII, "%", "?", "#" and
 * friends) become %XX. Returns the length written (NUL-terminated), or
 * -ENOSPC when cap is too small. */
int lx_path_encode(const char *in, size_t len, char *out, size_t cap);

#endif
