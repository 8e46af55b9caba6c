/* Range request parsing (RFC 9110 section 14).
 *
 *   ranges-specifier = range-unit "=" range-set
 *   range-set        = 1#range-spec
 *   range-spec       = int-range / suffix-range / other-range
 *   int-range        = first-pos "-" [ last-pos ]
 *   suffix-range     = "-" suffix-length
 *
 * The parser makes one pass over the value. Everything that is not this
 * grammar for the unit "bytes" makes the whole header ignored (return 0), as
 * RFC 9110 14.2 allows: a server may ignore a Range it does not understand,
 * and answering 200 with the full body is always a correct answer. */
#include "http/range.h"

#include <errno.h>

static int is_ows(char c) {
    return c == ' ' || c == '\t';
}

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* Parses 1*DIGIT at *p. Returns 0 and advances *p, or -EINVAL when there is no
 * digit or the number does not fit in 64 bits. A number too large for any file
 * is not worth a 416: it is a malformed or hostile header, so it is ignored. */
static int parse_u64(const char **p, const char *end, uint64_t *v) {
    const char *s = *p;
    uint64_t n = 0;

    if (s == end || !is_digit(*s)) return -EINVAL;
    for (; s < end && is_digit(*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (n > (UINT64_MAX - d) / 10) return -EINVAL;
        n = n * 10 + d;
    }
    *p = s;
    *v = n;
    return 0;
}

/* ASCII-only case folding, so the result cannot depend on the locale. */
static int unit_is_bytes(const char *p) {
    static const char bytes[] = "bytes";
    int i;

    for (i = 0; i < 5; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != bytes[i]) return 0;
    }
    return 1;
}

int lx_range_parse(const char *value, size_t len, uint64_t size, lx_range_t *out, int max) {
    const char *p = value, *end = value + len;
    int listed = 0, n = 0;

    /* A field value has no leading or trailing whitespace (RFC 9110 5.5), but
     * not every parser strips it, so tolerate it here. */
    while (p < end && is_ows(*p))
        p++;
    while (end > p && is_ows(end[-1]))
        end--;

    if (end - p < 6 || !unit_is_bytes(p) || p[5] != '=') return 0;
    p += 6;

    for (;;) {
        uint64_t first = 0, last = 0;
        int suffix = 0, open = 0;

        /* The list rule lets a recipient skip empty elements ("a, , b") and
         * whitespace before an element; RFC 9110's own example
         * "bytes= 0-999, 4500-5499, -1000" needs the latter. */
        while (p < end && (is_ows(*p) || *p == ','))
            p++;
        if (p == end) break;

        if (*p == '-') {
            p++;
            if (parse_u64(&p, end, &last) != 0) return 0;
            suffix = 1;
        } else {
            if (parse_u64(&p, end, &first) != 0) return 0;
            if (p == end || *p != '-') return 0;
            p++;
            if (p < end && is_digit(*p)) {
                if (parse_u64(&p, end, &last) != 0) return 0;
                /* RFC 9110 14.1.1 calls such a range-spec invalid, and one
                 * invalid range-spec makes the whole range-set invalid. */
                if (first > last) return 0;
            } else {
                open = 1;
            }
        }

        /* Only whitespace may sit between a range-spec and the next comma. */
        while (p < end && is_ows(*p))
            p++;
        if (p < end && *p != ',') return 0;

        /* The cap counts what the client listed, satisfiable or not: the
         * point is to refuse to do many-ranges work, and a long list is the
         * sign of a client asking for it. Counting before storing also keeps
         * `out` within its `max` slots. */
        if (++listed > max) return 0;

        if (suffix) {
            /* "-0" asks for no bytes at all, and nothing can be cut from an
             * empty representation, so both are unsatisfiable. A suffix
             * longer than the representation means all of it. */
            if (last == 0 || size == 0) continue;
            out[n].first = last >= size ? 0 : size - last;
            out[n].last = size - 1;
        } else {
            if (first >= size) continue;
            out[n].first = first;
            out[n].last = open || last >= size ? size - 1 : last;
        }
        n++;
    }

    /* "bytes=" and "bytes=," hold no range-spec, which the 1# rule forbids. */
    if (listed == 0) return 0;
    return n > 0 ? n : -ERANGE;
}

/* Insertion sort by first byte: at most LX_RANGE_MAX entries, so a library
 * sort would cost more in calls than it saves. */
static void sort_by_first(lx_range_t *r, int n) {
    for (int i = 1; i < n; i++) {
        lx_range_t v = r[i];
        int j = i;
        while (j > 0 && r[j - 1].first > v.first) {
            r[j] = r[j - 1];
            j--;
        }
        r[j] = v;
    }
}

int lx_range_coalesce(lx_range_t *r, int n) {
    if (n <= 1) return n;
    sort_by_first(r, n);
    int out = 0;
    for (int i = 1; i < n; i++) {
        /* Overlapping or adjacent (the next starts at most one byte after
         * this one ends): one part covers both. `last` is below the size,
         * which is at most UINT64_MAX, so last + 1 cannot wrap. */
        if (r[i].first <= r[out].last + 1) {
            if (r[i].last > r[out].last) r[out].last = r[i].last;
        } else {
            r[++out] = r[i];
        }
    }
    return out + 1;
}
