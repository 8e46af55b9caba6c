/* HTTP dates (RFC 9110 section 5.6.7). */
#ifndef LX_HTTP_DATE_H
#define LX_HTTP_DATE_H

#include <stddef.h>
#include <time.h>

#define LX_HTTP_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */

/* Writes `t` as an IMF-fixdate into buf and NUL-terminates it. Thread-safe,
 * no locale, no tz lookup. Times outside the years 0000-9999 are clamped to
 * that span, so the output is always LX_HTTP_DATE_LEN bytes. */
void lx_http_date(time_t t, char buf[LX_HTTP_DATE_LEN + 1]);

/* Parses IMF-fixdate, the obsolete RFC 850 form and asctime() form.
 * Names and "GMT" are case-sensitive, as RFC 9110 defines them; the weekday
 * must be a valid name but is not checked against the date. Whitespace around
 * the value is tolerated, anything else after the date is refused. An RFC 850
 * two-digit year is read as the year within 50 years of the current clock
 * (RFC 9110 5.6.7). A second of 60 (a leap second) is accepted and counts as
 * the next second. Returns 0 and stores the time, or -EINVAL and leaves *t
 * alone. */
int lx_http_date_parse(const char *s, size_t len, time_t *t);

#endif
