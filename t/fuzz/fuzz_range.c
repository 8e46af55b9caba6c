/* Range and date headers (src/http/range.c, src/http/date.c), the inputs of
 * 206, 416, 304 and If-Range. The first input byte picks what is tested:
 *   even: a Range value; the next two bytes (or eight, when bit 1 is set)
 *         are the representation size, the rest is the header value;
 *   odd:  the rest is an HTTP date (If-Modified-Since, If-Range), or with
 *         bit 1 set eight bytes of a time_t to format.
 * Invariants: a range is always within the representation and never empty,
 * the answer is one of the documented kinds, coalescing the ranges (what
 * static.c sends) gives sorted parts with a gap between any two that cover
 * exactly the bytes the client asked for (issue 8 #9), and a date
 * round-trips through the formatter unchanged. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/date.h"
#include "http/range.h"

#define MIN_SECONDS (-62167219200LL)
#define MAX_SECONDS 253402300799LL

static uint64_t le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The coalesced ranges, computed another way: a byte is in the result when
 * some input range holds it, so the result's parts start at an input's
 * first byte that no other input range holds (or touches from the left),
 * and each part runs as far as the input ranges keep overlapping. */
static int model_coalesce(const lx_range_t *in, int n, lx_range_t *out) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        int starts = 1;
        for (int j = 0; j < n; j++)
            if (j != i && in[j].first < in[i].first && in[j].last + 1 >= in[i].first) starts = 0;
        for (int j = 0; j < i; j++) /* the same start counts once */
            if (in[j].first == in[i].first) starts = 0;
        if (!starts) continue;
        uint64_t last = in[i].last;
        for (int grew = 1; grew;) {
            grew = 0;
            for (int j = 0; j < n; j++)
                if (in[j].first <= last + 1 && in[j].first >= in[i].first && in[j].last > last) {
                    last = in[j].last;
                    grew = 1;
                }
        }
        /* Insertion by first byte. */
        int at = k++;
        while (at > 0 && out[at - 1].first > in[i].first) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = (lx_range_t){in[i].first, last};
    }
    return k;
}

static void check_coalesce(const lx_range_t *in, int n) {
    lx_range_t got[LX_RANGE_MAX], want[LX_RANGE_MAX];
    memcpy(got, in, (size_t)n * sizeof(*in));
    int g = lx_range_coalesce(got, n);
    int w = model_coalesce(in, n, want);
    assert(g == w);
    for (int i = 0; i < g; i++) {
        assert(got[i].first == want[i].first && got[i].last == want[i].last);
        assert(i == 0 || got[i].first > got[i - 1].last + 1); /* sorted, a gap between */
    }
}

static void range(const uint8_t *data, size_t size, int wide) {
    size_t nsz = wide ? 8 : 2;
    if (size < nsz) return;
    uint64_t fsize = le(data, nsz);
    data += nsz;
    size -= nsz;
    char *v = malloc(size ? size : 1); /* exact size: ASan sees an over-read */
    memcpy(v, data, size);
    /* One spare slot past max, poisoned: the parser must respect max. */
    lx_range_t out[LX_RANGE_MAX + 1];
    memset(out, 0xa5, sizeof(out));
    int max = 1 + (int)(fsize % LX_RANGE_MAX);
    int n = lx_range_parse(v, size, fsize, out, max);
    assert(n == -ERANGE || (n >= 0 && n <= max));
    if (n == -ERANGE) assert(1); /* unsatisfiable: nothing to check in out */
    for (int i = 0; i < n; i++) {
        assert(out[i].first <= out[i].last); /* never empty, never reversed */
        assert(out[i].last < fsize);         /* within the file */
    }
    if (fsize == 0) assert(n <= 0); /* nothing can be sent from an empty file */
    if (n > 0) check_coalesce(out, n);
    const lx_range_t poison = out[LX_RANGE_MAX];
    if (max < LX_RANGE_MAX) assert(memcmp(&out[max], &poison, sizeof(poison)) == 0);
    free(v);
}

static void date_parse(const uint8_t *data, size_t size) {
    char *s = malloc(size ? size : 1);
    memcpy(s, data, size);
    time_t t = (time_t)0x5a5a5a5a, t2;
    int r = lx_http_date_parse(s, size, &t);
    assert(r == 0 || (r == -EINVAL && t == (time_t)0x5a5a5a5a));
    if (r == 0) {
        assert((long long)t >= MIN_SECONDS && (long long)t <= MAX_SECONDS + 1);
        if ((long long)t <= MAX_SECONDS) {
            char buf[LX_HTTP_DATE_LEN + 1];
            lx_http_date(t, buf);
            assert(strlen(buf) == LX_HTTP_DATE_LEN);
            assert(lx_http_date_parse(buf, LX_HTTP_DATE_LEN, &t2) == 0 && t2 == t);
        }
    }
    free(s);
}

static void date_format(const uint8_t *data, size_t size) {
    if (size < 8) return;
    time_t t = (time_t)(int64_t)le(data, 8), t2;
    char buf[LX_HTTP_DATE_LEN + 1];
    lx_http_date(t, buf);
    assert(strlen(buf) == LX_HTTP_DATE_LEN);
    assert(lx_http_date_parse(buf, LX_HTTP_DATE_LEN, &t2) == 0);
    long long want = (long long)t < MIN_SECONDS   ? MIN_SECONDS
                     : (long long)t > MAX_SECONDS ? MAX_SECONDS
                                                  : (long long)t;
    assert((long long)t2 == want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    if ((mode & 1) == 0)
        range(data, size, mode & 2);
    else if (mode & 2)
        date_format(data, size);
    else
        date_parse(data, size);
    return 0;
}
