/* Range request parsing (RFC 9110 section 14). */
#ifndef LX_HTTP_RANGE_H
#define LX_HTTP_RANGE_H

#include <stddef.h>
#include <stdint.h>

/* One satisfiable byte range, both ends inclusive, already clamped to the size. */
typedef struct {
    uint64_t first; /**< first byte offset */
    uint64_t last;  /**< last byte offset, inclusive; always < size */
} lx_range_t;

/* Most ranges one request may ask for; a request for more is answered as if it
 * had no Range header (200 with the whole body), which is what nginx and
 * Apache do to stop many-small-ranges amplification. */
#define LX_RANGE_MAX 16

/* Parses the value of a Range header against a representation of `size` bytes.
 * Handles "bytes=a-b", "bytes=a-", suffix "bytes=-n", lists with optional
 * whitespace, and the unit name case-insensitively.
 *
 * Returns the number of satisfiable ranges stored in `out` (1..max), in the
 * order the client listed them, neither merged nor sorted; 0 when the header
 * must be ignored and the whole body sent with 200 (a syntax error, a unit
 * other than bytes, a range-spec whose last is below its first, a number that
 * does not fit in 64 bits, more than `max` range-specs listed, counting the
 * unsatisfiable ones); -ERANGE when the header is valid but no range is
 * satisfiable (416): every first-pos is >= size, or a suffix is "-0", or the
 * representation is empty. Empty list elements ("0-1,,2-3") are skipped and
 * whitespace around the value is tolerated. */
int lx_range_parse(const char *value, size_t len, uint64_t size, lx_range_t *out, int max);

/* Sorts n ranges by their first byte and merges those that overlap or touch
 * ("0-9,10-19" becomes "0-19"), in place. Returns the number left (1..n; 0
 * for n = 0). RFC 9110 15.3.7.2 lets a server coalesce ranges regardless of
 * the order they were listed in; doing so bounds what one request can make
 * us send to the size of the representation plus the part headers, where
 * sixteen "0-" ranges would otherwise send the whole file sixteen times. */
int lx_range_coalesce(lx_range_t *r, int n);

#endif
