/* Unit tests for HTTP dates (src/http/date.c). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/date.h"
#include "tap.h"

/* Sun, 06 Nov 1994 08:49:37 GMT, the example of RFC 9110 5.6.7. */
#define EXAMPLE ((time_t)784111777)

static const char *fmt(time_t t) {
    static char buf[LX_HTTP_DATE_LEN + 8];
    memset(buf, 'X', sizeof(buf));
    lx_http_date(t, buf);
    return buf;
}

/* Parses from a heap copy of exactly the string's length, so ASan sees a read
 * past the end; returns the time or a sentinel for errors. */
static int parse(const char *s, time_t *t) {
    size_t len = strlen(s);
    char *buf = malloc(len ? len : 1);
    int rc;

    memcpy(buf, s, len);
    *t = (time_t)-12345;
    rc = lx_http_date_parse(buf, len, t);
    free(buf);
    return rc;
}

/* Renders a test input with control bytes as \xNN, so a CR or LF cannot
 * break the TAP stream. */
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

static void good(const char *s, time_t exp) {
    time_t t;
    int rc = parse(s, &t);
    ok(rc == 0 && t == exp, "parse [%s] -> %lld", show(s), (long long)exp);
    if (rc != 0 || t != exp) diag("rc %d, time %lld", rc, (long long)t);
}

static void bad(const char *s) {
    time_t t;
    int rc = parse(s, &t);
    /* A refused date must also leave *t alone. */
    ok(rc == -EINVAL && t == (time_t)-12345, "refuse [%s]", show(s));
    if (rc != -EINVAL) diag("rc %d, time %lld", rc, (long long)t);
}

int main(void) {
    time_t t, now;
    int64_t v;
    int i, all;

    /* Formatting. */
    is_str(fmt(EXAMPLE), "Sun, 06 Nov 1994 08:49:37 GMT", "format the RFC example");
    is_str(fmt(0), "Thu, 01 Jan 1970 00:00:00 GMT", "format the epoch");
    is_str(fmt(951782400), "Tue, 29 Feb 2000 00:00:00 GMT", "format a leap day");
    is_str(fmt(1709251199), "Thu, 29 Feb 2024 23:59:59 GMT", "format the end of a leap day");
    is_str(fmt(2147483647), "Tue, 19 Jan 2038 03:14:07 GMT", "format 2^31 - 1");
    is_str(fmt((time_t)2147483648LL), "Tue, 19 Jan 2038 03:14:08 GMT", "format 2^31");
    is_str(fmt(4102444800LL), "Fri, 01 Jan 2100 00:00:00 GMT", "format 2100");
    is_str(fmt(-1), "Wed, 31 Dec 1969 23:59:59 GMT", "format one second before the epoch");
    is_str(fmt(-86400), "Wed, 31 Dec 1969 00:00:00 GMT", "format one day before the epoch");
    is_str(fmt(-86401), "Tue, 30 Dec 1969 23:59:59 GMT", "format a negative time off a day");
    is_str(fmt(253402300799LL), "Fri, 31 Dec 9999 23:59:59 GMT", "format the last four-digit year");
    is_str(fmt(253402300800LL), "Fri, 31 Dec 9999 23:59:59 GMT", "clamp after year 9999");
    is_str(fmt(-62167219200LL), "Sat, 01 Jan 0000 00:00:00 GMT", "format year 0");
    is_str(fmt(-62167219201LL), "Sat, 01 Jan 0000 00:00:00 GMT", "clamp before year 0");
    {
        const char *s = fmt(EXAMPLE);
        ok(strlen(s) == LX_HTTP_DATE_LEN, "output is LX_HTTP_DATE_LEN bytes and NUL-terminated");
    }

    /* Formatting agrees with gmtime_r and strftime in the C locale. */
    all = 1;
    for (v = -5000000000LL; v < 40000000000LL; v += 86399LL * 37 + 4321) {
        struct tm tm;
        char exp[64];
        time_t tv = (time_t)v;
        gmtime_r(&tv, &tm);
        strftime(exp, sizeof(exp), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        if (strcmp(fmt(tv), exp) != 0) {
            if (all) diag("%lld: got %s, expected %s", (long long)v, fmt(tv), exp);
            all = 0;
        }
    }
    ok(all, "format matches gmtime_r over 1811..3237");

    /* The three forms of RFC 9110 5.6.7. */
    good("Sun, 06 Nov 1994 08:49:37 GMT", EXAMPLE);
    good("Sunday, 06-Nov-94 08:49:37 GMT", EXAMPLE);
    good("Sun Nov  6 08:49:37 1994", EXAMPLE);
    good("Sun Nov 06 08:49:37 1994", EXAMPLE);

    /* Round trips. */
    all = 1;
    for (v = -62167219200LL; v <= 253402300799LL; v += 86400LL * 1234 + 5678) {
        time_t back;
        if (parse(fmt((time_t)v), &back) != 0 || back != (time_t)v) {
            if (all) diag("round trip failed at %lld", (long long)v);
            all = 0;
        }
    }
    ok(all, "format then parse round-trips across years 0000..9999");
    now = time(NULL);
    ok(parse(fmt(now), &t) == 0 && t == now, "round trip of now");
    ok(parse(fmt(0), &t) == 0 && t == 0, "round trip of the epoch");

    /* Other valid dates in each form. */
    good("Thu, 01 Jan 1970 00:00:00 GMT", 0);
    good("Wed, 31 Dec 1969 23:59:59 GMT", -1);
    good("Tue, 29 Feb 2000 00:00:00 GMT", 951782400);
    good("Tue, 19 Jan 2038 03:14:08 GMT", (time_t)2147483648LL);
    good("Fri, 31 Dec 9999 23:59:59 GMT", (time_t)253402300799LL);
    good("Tuesday, 29-Feb-00 00:00:00 GMT", 951782400);
    good("Monday, 15-Jan-24 12:00:00 GMT", 1705320000);
    good("Wednesday, 09-Jun-21 10:18:14 GMT", 1623233894);
    good("Tue Feb 29 00:00:00 2000", 951782400);
    good("Thu Jan  1 00:00:00 1970", 0);
    good("Wed Dec 31 23:59:59 1969", -1);
    good("Sat Dec 25 12:34:56 2021", 1640435696);

    /* A leap second counts as the next second; surrounding whitespace is
     * tolerated. */
    good("Sat, 31 Dec 2016 23:59:60 GMT", 1483228800);
    good(" Sun, 06 Nov 1994 08:49:37 GMT", EXAMPLE);
    good("Sun, 06 Nov 1994 08:49:37 GMT  ", EXAMPLE);
    good("\tSun Nov  6 08:49:37 1994\t", EXAMPLE);

    /* Only `len` bytes are read. */
    ok(lx_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMTxyz", 29, &t) == 0 && t == EXAMPLE,
       "len shorter than the string is honoured");

    /* Garbage and near misses. */
    bad("");
    bad(" ");
    bad("garbage");
    bad("0");
    bad("784111777");
    bad("Sun, 06 Nov 1994 08:49:37 GMT;");
    bad("Sun, 06 Nov 1994 08:49:37 GMTx");
    bad("Sun, 06 Nov 1994 08:49:37 GMT x");
    bad("Sun, 06 Nov 1994 08:49:37 UTC");
    bad("Sun, 06 Nov 1994 08:49:37 gmt");
    bad("Sun, 06 Nov 1994 08:49:37 +0000");
    bad("Sun, 06 Nov 1994 08:49:37");
    bad("Sun, 6 Nov 1994 08:49:37 GMT");
    bad("Sun, 06 Nov 94 08:49:37 GMT");
    bad("Sun, 06 nov 1994 08:49:37 GMT");
    bad("sun, 06 Nov 1994 08:49:37 GMT");
    bad("Xyz, 06 Nov 1994 08:49:37 GMT");
    bad("Sun, 06 Nox 1994 08:49:37 GMT");
    bad("Sun, 06-Nov-1994 08:49:37 GMT");
    bad("Sun,  06 Nov 1994 08:49:37 GMT");
    bad("Sun, 06 Nov 1994  08:49:37 GMT");
    bad("Sun, 06 Nov 1994 08:49:37  GMT");
    bad("Sun, 06 Nov 199a 08:49:37 GMT");
    bad("Sun, 0a Nov 1994 08:49:37 GMT");
    bad("Sun, 06 Nov 1994 08.49.37 GMT");
    bad("Sun, 06 Nov 1994 8:49:37 GMT");
    bad("Sun, 06 Nov 1994 08:49:3 GMT");
    bad("Sun, 06 Nov 1994 24:00:00 GMT");
    bad("Sun, 06 Nov 1994 23:60:00 GMT");
    bad("Sun, 06 Nov 1994 23:59:61 GMT");
    bad("Sun, 00 Nov 1994 08:49:37 GMT");
    bad("Sun, 31 Nov 1994 08:49:37 GMT");
    bad("Sun, 32 Jan 1994 08:49:37 GMT");
    bad("Sun, 29 Feb 1900 08:49:37 GMT");
    bad("Sun, 30 Feb 2000 08:49:37 GMT");
    bad("Sun, 29 Feb 2023 08:49:37 GMT");
    bad("Sun, 06 Nov 1994 08:49:37 GMT\r\n");
    bad("Sun, 06 Nov -994 08:49:37 GMT");
    bad("Sun, 06 Nov +994 08:49:37 GMT");
    bad("Sun, 06 Nov 1994 -8:49:37 GMT");

    bad("Sunday, 06-Nov-94 08:49:37 GMTx");
    bad("Sunday, 06-Nov-94 08:49:37");
    bad("Sunday, 06-Nov-1994 08:49:37 GMT");
    bad("Sun, 06-Nov-94 08:49:37 GMT");
    bad("Sundayy, 06-Nov-94 08:49:37 GMT");
    bad("Sunda, 06-Nov-94 08:49:37 GMT");
    bad("Funday, 06-Nov-94 08:49:37 GMT");
    bad("sunday, 06-Nov-94 08:49:37 GMT");
    bad(", 06-Nov-94 08:49:37 GMT");
    bad("Sunday, 06 Nov 94 08:49:37 GMT");
    bad("Sunday, 31-Nov-94 08:49:37 GMT");
    bad("Sunday, 06-Nov-9x 08:49:37 GMT");
    bad("Sunday, 06-Nov-94 08:49:37 UTC");

    good("Sun Nov  6 08:49:37 1994 ", EXAMPLE);
    bad("Sun Nov  6 08:49:37 1994x");
    bad("Sun Nov  6 08:49:37 94");
    bad("Sun Nov 6 08:49:37 1994");
    bad("Sun Nov   6 08:49:37 1994");
    bad("Sun Nov  x 08:49:37 1994");
    bad("Sun Nov 31 08:49:37 1994");
    bad("Sun Nov  0 08:49:37 1994");
    bad("Sun Nov  6 08:49:37 199x");
    bad("Sun Nov  6 08:49:37 GMT");
    bad("Sunday Nov  6 08:49:37 1994");
    bad("Sun Nov  6 25:49:37 1994");

    /* A NUL inside the given length is garbage too. */
    ok(lx_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT\0", 30, &t) == -EINVAL,
       "refuse a trailing NUL inside len");

    /* Two-digit years in RFC 850 dates fall within 50 years of now. */
    {
        struct tm tm;
        int cy, yy, expect;
        char s[64];

        now = time(NULL);
        gmtime_r(&now, &tm);
        cy = tm.tm_year + 1900;
        all = 1;
        for (yy = 0; yy < 100; yy++) {
            expect = cy - cy % 100 + yy;
            if (expect > cy + 50) expect -= 100;
            if (expect <= cy - 50) expect += 100;
            /* Any weekday name is accepted; the date decides the time. */
            snprintf(s, sizeof(s), "Monday, 01-Jan-%02d 00:00:00 GMT", yy);
            if (parse(s, &t) != 0) {
                all = 0;
                continue;
            }
            gmtime_r(&t, &tm);
            if (tm.tm_year + 1900 != expect) {
                if (all) diag("%02d -> %d, expected %d", yy, tm.tm_year + 1900, expect);
                all = 0;
            }
        }
        ok(all, "every two-digit year lands in (now - 50, now + 50]");
    }

    /* All weekday and month names parse. */
    all = 1;
    for (i = 0; i < 7; i++) {
        /* 1994-11-06 was a Sunday; step a day at a time to get each name. */
        time_t d = EXAMPLE + (time_t)i * 86400;
        if (parse(fmt(d), &t) != 0 || t != d) all = 0;
    }
    for (i = 0; i < 12; i++) {
        time_t d = (time_t)(EXAMPLE + (time_t)i * 31 * 86400);
        if (parse(fmt(d), &t) != 0 || t != d) all = 0;
    }
    ok(all, "every weekday and month name round-trips");

    return done_testing();
}
