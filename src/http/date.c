/* HTTP dates (RFC 9110 section 5.6.7).
 *
 * Both directions do their own calendar arithmetic (Howard Hinnant's
 * days_from_civil and civil_from_days, exact for the proleptic Gregorian
 * calendar) instead of calling gmtime_r, timegm and strftime. That keeps the
 * code free of the locale, of the time-zone database and of any lock in libc,
 * and makes it the same on every platform. */
#include "http/date.h"

#include <errno.h>
#include <stdint.h>

static const char wkday_name[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const weekday_name[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                            "Thursday", "Friday", "Saturday"};
static const char month_name[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* The span an IMF-fixdate can show: years 0000 to 9999. */
#define MIN_SECONDS (-62167219200LL) /* 0000-01-01T00:00:00Z */
#define MAX_SECONDS 253402300799LL   /* 9999-12-31T23:59:59Z */

/* Days since 1970-01-01 of y-m-d, for any year; m is 1..12. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    int64_t era;
    unsigned yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = (unsigned)(y - era * 400);
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* The inverse of days_from_civil. */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    int64_t era;
    unsigned doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = (unsigned)(z - era * 146097);
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static int is_leap(int64_t y) {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned days_in_month(int64_t y, unsigned m) {
    static const unsigned char days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

static void put2(char *p, unsigned v) {
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

void lx_http_date(time_t t, char buf[LX_HTTP_DATE_LEN + 1]) {
    int64_t s = (int64_t)t, days, secs, y;
    unsigned m, d, wd;
    int i;

    /* A year outside 0000-9999 cannot be written in four digits; clamping
     * keeps the output a valid date of the promised length. */
    if (s < MIN_SECONDS) s = MIN_SECONDS;
    if (s > MAX_SECONDS) s = MAX_SECONDS;

    days = s / 86400;
    secs = s % 86400;
    if (secs < 0) {
        secs += 86400;
        days--;
    }
    civil_from_days(days, &y, &m, &d);
    /* 1970-01-01 was a Thursday. */
    wd = (unsigned)(((days + 4) % 7 + 7) % 7);

    for (i = 0; i < 3; i++) {
        buf[i] = wkday_name[wd][i];
        buf[8 + i] = month_name[m - 1][i];
    }
    buf[3] = ',';
    buf[4] = ' ';
    put2(buf + 5, d);
    buf[7] = ' ';
    buf[11] = ' ';
    put2(buf + 12, (unsigned)(y / 100));
    put2(buf + 14, (unsigned)(y % 100));
    buf[16] = ' ';
    put2(buf + 17, (unsigned)(secs / 3600));
    buf[19] = ':';
    put2(buf + 20, (unsigned)(secs / 60 % 60));
    buf[22] = ':';
    put2(buf + 23, (unsigned)(secs % 60));
    buf[25] = ' ';
    buf[26] = 'G';
    buf[27] = 'M';
    buf[28] = 'T';
    buf[29] = '\0';
}

/* Reads n digits at p. Returns the value or -1. */
static int digits(const char *p, int n) {
    int v = 0, i;

    for (i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* The month 1..12 named by the three bytes at p, or 0. Names are
 * case-sensitive, as RFC 9110 5.6.7 defines them. */
static unsigned month_from(const char *p) {
    unsigned i;

    for (i = 0; i < 12; i++)
        if (p[0] == month_name[i][0] && p[1] == month_name[i][1] && p[2] == month_name[i][2])
            return i + 1;
    return 0;
}

static int is_wkday(const char *p) {
    int i;

    for (i = 0; i < 7; i++)
        if (p[0] == wkday_name[i][0] && p[1] == wkday_name[i][1] && p[2] == wkday_name[i][2])
            return 1;
    return 0;
}

/* Reads "HH:MM:SS" at p into seconds since midnight, or returns -1. A second
 * of 60 is a leap second, which the grammar allows; it counts as the first
 * second of the next minute, as POSIX time has no place for it. */
static int time_of_day(const char *p) {
    int h = digits(p, 2), mi = digits(p + 3, 2), s = digits(p + 6, 2);

    if (p[2] != ':' || p[5] != ':' || h < 0 || mi < 0 || s < 0) return -1;
    if (h > 23 || mi > 59 || s > 60) return -1;
    return h * 3600 + mi * 60 + s;
}

/* RFC 9110 5.6.7: a two-digit year that would lie more than 50 years in the
 * future means the most recent past year with those digits. This picks the
 * year with those last two digits in the window (now - 50, now + 50]. */
static int64_t expand_year(int yy) {
    int64_t now_days = (int64_t)time(NULL) / 86400, cy, y;
    unsigned m, d;

    civil_from_days(now_days, &cy, &m, &d);
    y = cy - cy % 100 + yy;
    if (y > cy + 50)
        y -= 100;
    else if (y <= cy - 50)
        y += 100;
    return y;
}

static int finish(int64_t y, unsigned mon, int day, int tod, time_t *t) {
    int64_t v;

    if (mon == 0 || day < 1 || (unsigned)day > days_in_month(y, mon) || tod < 0) return -EINVAL;
    v = days_from_civil(y, mon, (unsigned)day) * 86400 + tod;
    /* Refuse what time_t cannot hold rather than wrap, where it is narrower. */
    if ((int64_t)(time_t)v != v) return -EINVAL;
    *t = (time_t)v;
    return 0;
}

int lx_http_date_parse(const char *s, size_t len, time_t *t) {
    const char *p;
    int year, yy;

    /* Tolerate the whitespace a header parser may leave around a field value;
     * anything else after the date is refused. */
    while (len > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;

    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT". */
    if (len == 29 && s[3] == ',') {
        if (!is_wkday(s) || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
            s[25] != ' ' || s[26] != 'G' || s[27] != 'M' || s[28] != 'T')
            return -EINVAL;
        year = digits(s + 12, 4);
        if (year < 0) return -EINVAL;
        return finish(year, month_from(s + 8), digits(s + 5, 2), time_of_day(s + 17), t);
    }

    /* asctime: "Sun Nov  6 08:49:37 1994", the day padded with a space (or,
     * as some clients send, a zero). */
    if (len == 24 && s[3] == ' ') {
        int day;

        if (!is_wkday(s) || s[7] != ' ' || s[10] != ' ' || s[19] != ' ') return -EINVAL;
        day = s[8] == ' ' ? digits(s + 9, 1) : digits(s + 8, 2);
        year = digits(s + 20, 4);
        if (year < 0) return -EINVAL;
        return finish(year, month_from(s + 4), day, time_of_day(s + 11), t);
    }

    /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT", with the full day name.
     * After the comma come exactly 23 bytes. */
    for (p = s; p < s + len && *p != ','; p++) {
    }
    if (p < s + len && (size_t)(s + len - p) == 24) {
        size_t n = (size_t)(p - s);
        int i, named = 0;

        for (i = 0; i < 7; i++) {
            const char *w = weekday_name[i];
            size_t k = 0;
            while (w[k] != '\0' && k < n && w[k] == s[k])
                k++;
            if (w[k] == '\0' && k == n) named = 1;
        }
        if (!named || p[1] != ' ' || p[4] != '-' || p[8] != '-' || p[11] != ' ' || p[20] != ' ' ||
            p[21] != 'G' || p[22] != 'M' || p[23] != 'T')
            return -EINVAL;
        yy = digits(p + 9, 2);
        if (yy < 0) return -EINVAL;
        return finish(expand_year(yy), month_from(p + 5), digits(p + 2, 2), time_of_day(p + 12), t);
    }

    return -EINVAL;
}
