/* Unit tests for lx_range_parse (src/http/range.c). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/range.h"
#include "tap.h"

/* Parses `value` (copied into a buffer of exactly its length, so ASan sees any
 * read past it) and renders the result as text: "0-499,9500-9999" for ranges,
 * "ignore" for 0, "416" for -ERANGE, "err N" for anything else. */
static const char *parse_as(const char *value, uint64_t size, int max, int merge) {
    static char res[2048];
    lx_range_t r[64];
    size_t len = strlen(value), o = 0;
    char *buf = malloc(len ? len : 1);
    int n, i;

    memcpy(buf, value, len);
    memset(r, 0xa5, sizeof(r));
    n = lx_range_parse(buf, len, size, r, max);
    free(buf);
    if (merge && n > 0) n = lx_range_coalesce(r, n);

    if (n == 0) return "ignore";
    if (n == -ERANGE) return "416";
    if (n < 0 || n > max) {
        snprintf(res, sizeof(res), "err %d", n);
        return res;
    }
    res[0] = '\0';
    for (i = 0; i < n; i++) {
        if (r[i].first > r[i].last || r[i].last >= size) return "broken range";
        o += (size_t)snprintf(res + o, sizeof(res) - o, "%s%llu-%llu", i ? "," : "",
                              (unsigned long long)r[i].first, (unsigned long long)r[i].last);
    }
    return res;
}

static const char *parse(const char *value, uint64_t size, int max) {
    return parse_as(value, size, max, 0);
}

/* Renders a header value for a test description with control bytes as \xNN,
 * so a CR or LF cannot break the TAP stream. */
static const char *show(const char *s) {
    static char buf[256];
    size_t o = 0;

    for (; *s && o + 8 < sizeof(buf); s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f)
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
    return buf;
}

static void t(const char *value, uint64_t size, const char *exp) {
    is_str(parse(value, size, LX_RANGE_MAX), exp, "[%s] size %llu -> %s", show(value),
           (unsigned long long)size, exp);
}

/* Parses, then merges: what the static handler serves. */
static void m(const char *value, uint64_t size, const char *exp) {
    is_str(parse_as(value, size, LX_RANGE_MAX, 1), exp, "merged [%s] size %llu -> %s", show(value),
           (unsigned long long)size, exp);
}

int main(void) {
    char big[1024];
    size_t o;
    int i;

    /* RFC 9110 14.1.2, with the 10000-byte representation the text assumes. */
    t("bytes=0-499", 10000, "0-499");
    t("bytes=500-999", 10000, "500-999");
    t("bytes=-500", 10000, "9500-9999");
    t("bytes=9500-", 10000, "9500-9999");
    t("bytes=0-0,-1", 10000, "0-0,9999-9999");
    t("bytes= 0-999, 4500-5499, -1000", 10000, "0-999,4500-5499,9000-9999");
    t("bytes=500-600,601-999", 10000, "500-600,601-999");
    t("bytes=500-700,601-999", 10000, "500-700,601-999");

    /* RFC 9110 14.2 and the 206 examples of 15.3.7. */
    t("bytes=7000-7999", 8000, "7000-7999");
    t("bytes=21010-47021", 47022, "21010-47021");
    t("bytes=500-999,7000-7999", 8000, "500-999,7000-7999");
    t("bytes=0-50, 100-150", 1270, "0-50,100-150");

    /* Clamping to the size. */
    t("bytes=0-", 10, "0-9");
    t("bytes=0-9", 10, "0-9");
    t("bytes=0-10", 10, "0-9");
    t("bytes=5-1000000", 10, "5-9");
    t("bytes=9-9", 10, "9-9");
    t("bytes=9-", 10, "9-9");
    t("bytes=0-18446744073709551615", 10, "0-9");

    /* Suffix ranges. */
    t("bytes=-1", 10, "9-9");
    t("bytes=-10", 10, "0-9");
    t("bytes=-11", 10, "0-9");
    t("bytes=-1000000", 10, "0-9");
    t("bytes=-18446744073709551615", 10, "0-9");
    t("bytes=-0", 10, "416");
    t("bytes=-00", 10, "416");
    t("bytes=-0,0-0", 10, "0-0");

    /* First position at or beyond the size is unsatisfiable. */
    t("bytes=10-", 10, "416");
    t("bytes=10-20", 10, "416");
    t("bytes=100-200", 10, "416");
    t("bytes=18446744073709551615-", 10, "416");
    t("bytes=18446744073709551615-18446744073709551615", 10, "416");

    /* Mixed lists keep only the satisfiable ranges, in the client's order. */
    t("bytes=20-30,0-1", 10, "0-1");
    t("bytes=0-1,20-30", 10, "0-1");
    t("bytes=20-30,-0,5-", 10, "5-9");
    t("bytes=20-,30-40,-0", 10, "416");
    t("bytes=8-9,0-1,4-5", 10, "8-9,0-1,4-5");
    t("bytes=0-5,3-8", 10, "0-5,3-8");

    /* A zero-length representation satisfies no range. */
    t("bytes=0-", 0, "416");
    t("bytes=0-0", 0, "416");
    t("bytes=-1", 0, "416");
    t("bytes=-0", 0, "416");
    t("bytes=0-0,-5", 0, "416");
    t("bytes=x", 0, "ignore");
    t("bytes=5-1", 0, "ignore");

    /* A one-byte representation. */
    t("bytes=0-0", 1, "0-0");
    t("bytes=-1", 1, "0-0");
    t("bytes=-5", 1, "0-0");
    t("bytes=1-", 1, "416");

    /* Large sizes near the top of the range. */
    t("bytes=18446744073709551613-", UINT64_MAX, "18446744073709551613-18446744073709551614");
    t("bytes=-2", UINT64_MAX, "18446744073709551613-18446744073709551614");
    t("bytes=18446744073709551614-18446744073709551615", UINT64_MAX,
      "18446744073709551614-18446744073709551614");
    t("bytes=18446744073709551615-", UINT64_MAX, "416");

    /* Whitespace. */
    t("bytes=0-1 ,2-3", 10, "0-1,2-3");
    t("bytes=0-1, 2-3", 10, "0-1,2-3");
    t("bytes=0-1\t,\t2-3", 10, "0-1,2-3");
    t("bytes=  0-1  ,  2-3  ", 10, "0-1,2-3");
    t("  bytes=0-1  ", 10, "0-1");
    t("\tbytes=0-1\t", 10, "0-1");
    t("bytes =0-1", 10, "ignore");
    t("bytes= 0-1", 10, "0-1");
    t("bytes=0 -1", 10, "ignore");
    t("bytes=0- 1", 10, "ignore");
    t("bytes=- 1", 10, "ignore");
    t("bytes=0-1 2-3", 10, "ignore");

    /* Empty list elements are skipped, as the list rule allows. */
    t("bytes=0-1,,2-3", 10, "0-1,2-3");
    t("bytes=,0-1", 10, "0-1");
    t("bytes=0-1,", 10, "0-1");
    t("bytes=, ,0-1, ,", 10, "0-1");

    /* The unit is case-insensitive; other units are ignored. */
    t("Bytes=0-1", 10, "0-1");
    t("BYTES=0-1", 10, "0-1");
    t("bYtEs=-2", 10, "8-9");
    t("items=0-1", 10, "ignore");
    t("byte=0-1", 10, "ignore");
    t("bytesx=0-1", 10, "ignore");
    t("bytes:0-1", 10, "ignore");
    t("bytes0-1", 10, "ignore");
    t("none", 10, "ignore");

    /* Syntax errors make the whole header ignored, even next to good ranges. */
    t("", 10, "ignore");
    t("   ", 10, "ignore");
    t("bytes", 10, "ignore");
    t("bytes=", 10, "ignore");
    t("bytes= ", 10, "ignore");
    t("bytes=,", 10, "ignore");
    t("bytes=-", 10, "ignore");
    t("bytes=--1", 10, "ignore");
    t("bytes=1", 10, "ignore");
    t("bytes=1--2", 10, "ignore");
    t("bytes=1-2-3", 10, "ignore");
    t("bytes=a-b", 10, "ignore");
    t("bytes=0x1-2", 10, "ignore");
    t("bytes=+1-2", 10, "ignore");
    t("bytes=1-+2", 10, "ignore");
    t("bytes=1-2;3-4", 10, "ignore");
    t("bytes=0-1,x", 10, "ignore");
    t("bytes=0-1,2-3,junk", 10, "ignore");
    t("bytes=20-30,x", 10, "ignore");
    t("bytes=0-1\r\n", 10, "ignore");

    /* A range-spec with first > last makes the whole header invalid, even
     * when other range-specs are fine or the bad one is beyond the size. */
    t("bytes=5-1", 10, "ignore");
    t("bytes=0-1,5-1", 10, "ignore");
    t("bytes=500-499", 10, "ignore");
    t("bytes=50-40", 10, "ignore");
    t("bytes=1-0", 10, "ignore");

    /* Numbers that overflow 64 bits make the header ignored. */
    t("bytes=18446744073709551616-", 10, "ignore");
    t("bytes=0-18446744073709551616", 10, "ignore");
    t("bytes=-18446744073709551616", 10, "ignore");
    t("bytes=99999999999999999999999999-", 10, "ignore");
    t("bytes=0-1,-99999999999999999999999999", 10, "ignore");
    t("bytes=000000000000000000000000000000000001-2", 10, "1-2");

    /* At most LX_RANGE_MAX ranges; a longer list is ignored. */
    o = (size_t)snprintf(big, sizeof(big), "bytes=0-0");
    for (i = 1; i < LX_RANGE_MAX; i++)
        o += (size_t)snprintf(big + o, sizeof(big) - o, ",%d-%d", i, i);
    is_str(parse(big, 100, LX_RANGE_MAX),
           "0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7,8-8,9-9,10-10,11-11,12-12,13-13,14-14,15-15",
           "exactly %d ranges are all returned", LX_RANGE_MAX);
    snprintf(big + o, sizeof(big) - o, ",%d-%d", i, i);
    is_str(parse(big, 100, LX_RANGE_MAX), "ignore", "%d ranges are ignored", LX_RANGE_MAX + 1);
    is_str(parse(big, 5, LX_RANGE_MAX), "ignore",
           "%d ranges are ignored even when most are unsatisfiable", LX_RANGE_MAX + 1);
    o = (size_t)snprintf(big, sizeof(big), "bytes=");
    for (i = 0; i < 100; i++)
        o += (size_t)snprintf(big + o, sizeof(big) - o, "%s0-", i ? "," : "");
    is_str(parse(big, 100, LX_RANGE_MAX), "ignore", "100 ranges are ignored");
    o = (size_t)snprintf(big, sizeof(big), "bytes=");
    for (i = 0; i < 100; i++)
        o += (size_t)snprintf(big + o, sizeof(big) - o, ",");
    snprintf(big + o, sizeof(big) - o, "0-0");
    is_str(parse(big, 100, LX_RANGE_MAX), "0-0", "empty list elements do not count");

    /* The max argument is honoured. */
    is_str(parse("bytes=0-0,2-2", 10, 1), "ignore", "two ranges with max 1 are ignored");
    is_str(parse("bytes=0-0", 10, 1), "0-0", "one range with max 1");
    is_str(parse("bytes=0-0,2-2,4-4", 10, 3), "0-0,2-2,4-4", "three ranges with max 3");
    is_str(parse("bytes=0-0", 10, 0), "ignore", "max 0 ignores every range");

    /* Coalescing: overlapping and adjacent ranges become one, in ascending
     * order (RFC 9110 15.3.7.2 allows it regardless of the listed order). */
    m("bytes=0-", 200000, "0-199999");
    m("bytes=0-,0-", 200000, "0-199999");
    m("bytes=0-499", 10000, "0-499");
    m("bytes=0-4,10-14,-3", 1000, "0-4,10-14,997-999");
    m("bytes=500-600,601-999", 10000, "500-999");
    m("bytes=500-700,601-999", 10000, "500-999");
    m("bytes=500-600,602-999", 10000, "500-600,602-999");
    m("bytes=8-9,0-1,4-5", 10, "0-1,4-5,8-9");
    m("bytes=8-9,0-1,2-7", 10, "0-9");
    m("bytes=0-5,3-8", 10, "0-8");
    m("bytes=3-8,0-5", 10, "0-8");
    m("bytes=0-9,2-3", 10, "0-9");
    m("bytes=2-3,0-9", 10, "0-9");
    m("bytes=5-5,5-5,5-5", 10, "5-5");
    m("bytes=-1,9-9,0-0", 10, "0-0,9-9");
    m("bytes=-5,0-4", 10, "0-9");
    m("bytes=20-30,0-1,1-2", 10, "0-2");
    m("bytes=0-0,2-2,4-4,6-6,8-8,1-1,3-3,5-5,7-7,9-9", 10, "0-9");
    m("bytes=18446744073709551613-,-1", UINT64_MAX, "18446744073709551613-18446744073709551614");
    m("bytes=0-18446744073709551613,18446744073709551614-", UINT64_MAX, "0-18446744073709551614");
    o = (size_t)snprintf(big, sizeof(big), "bytes=");
    for (i = 0; i < LX_RANGE_MAX; i++)
        o += (size_t)snprintf(big + o, sizeof(big) - o, "%s0-", i ? "," : "");
    is_str(parse_as(big, 200000, LX_RANGE_MAX, 1), "0-199999",
           "%d overlapping 0- ranges merge into one", LX_RANGE_MAX);
    o = (size_t)snprintf(big, sizeof(big), "bytes=");
    for (i = LX_RANGE_MAX - 1; i >= 0; i--)
        o += (size_t)snprintf(big + o, sizeof(big) - o, "%s%d-%d", i < LX_RANGE_MAX - 1 ? "," : "",
                              i * 3, i * 3);
    is_str(
        parse_as(big, 100, LX_RANGE_MAX, 1),
        "0-0,3-3,6-6,9-9,12-12,15-15,18-18,21-21,24-24,27-27,30-30,33-33,36-36,39-39,42-42,45-45",
        "%d disjoint ranges listed backwards come out sorted", LX_RANGE_MAX);
    {
        lx_range_t r[1] = {{3, 4}};
        ok(lx_range_coalesce(r, 1) == 1 && r[0].first == 3 && r[0].last == 4, "one range is kept");
        ok(lx_range_coalesce(r, 0) == 0, "no ranges: 0");
    }

    /* Only `len` bytes are read. */
    {
        lx_range_t r[2];
        int n = lx_range_parse("bytes=0-1,junk", 9, 10, r, 2);
        ok(n == 1 && r[0].first == 0 && r[0].last == 1, "len shorter than the string is honoured");
    }

    return done_testing();
}
