/* Unit tests for the preconditions (src/http/precond.c): entity-tag lists
 * and RFC 9110 13.2.2's order of evaluation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/precond.h"
#include "tap.h"

#define M   1704164645 /* Tue, 02 Jan 2024 03:04:05 GMT */
#define LM  "Tue, 02 Jan 2024 03:04:05 GMT"
#define TAG "\"5f-1a\""

/* Control bytes as \xNN, so that no value breaks the TAP stream. */
static const char *show(const char *s, size_t len) {
    static char buf[512];
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < sizeof(buf); i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f)
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
    return buf;
}

/* lx_etag_match on a copy of exactly the value's length: ASan sees a read
 * past it. */
static int match_n(const char *v, size_t len, const char *etag, int weak) {
    char *b = malloc(len ? len : 1);
    memcpy(b, v, len);
    int r = lx_etag_match(b, len, etag, weak);
    free(b);
    return r;
}

static int match(const char *v, const char *etag, int weak) {
    return match_n(v, strlen(v), etag, weak);
}

static const struct {
    const char *value, *etag;
    int strong, weak; /* the answers of strong and of weak comparison */
} tags[] = {
    {"*", TAG, 1, 1},
    {" *\t", TAG, 1, 1},
    {"*", "", 1, 1}, /* no ETag sent (etag = false): the file is still there */
    {TAG, TAG, 1, 1},
    {"W/" TAG, TAG, 0, 1},
    {TAG, "W/" TAG, 0, 1},
    {"W/" TAG, "W/" TAG, 0, 1},
    {"\"other\"", TAG, 0, 0},
    {"\"5f-1A\"", TAG, 0, 0}, /* opaque-tags are compared byte for byte */
    {"\"x\", " TAG, TAG, 1, 1},
    {"\"x\"," TAG ",\"y\"", TAG, 1, 1},
    {"\"x\" ,\t" TAG, TAG, 1, 1},
    {", ,\"x\",," TAG ",", TAG, 1, 1},
    {"\"x\", W/" TAG, TAG, 0, 1},
    {TAG, "", 0, 0}, /* no ETag: no tag matches */
    {"\"\"", "\"\"", 1, 1},
    {"\"\x80\xff\"", "\"\x80\xff\"", 1, 1}, /* obs-text */
    {"", TAG, 0, 0},                        /* an empty list */
    {" , ", TAG, 0, 0},
    /* Not the grammar. */
    {"5f-1a", TAG, -EINVAL, -EINVAL}, /* a bare token */
    {"\"5f-1a", TAG, -EINVAL, -EINVAL},
    {TAG "x", TAG, -EINVAL, -EINVAL},
    {TAG " " TAG, TAG, -EINVAL, -EINVAL}, /* no comma */
    {"*, " TAG, TAG, -EINVAL, -EINVAL},
    {TAG ", *", TAG, -EINVAL, -EINVAL},
    {"**", TAG, -EINVAL, -EINVAL},
    {"w/" TAG, TAG, -EINVAL, -EINVAL}, /* W/ is case-sensitive */
    {"W/", TAG, -EINVAL, -EINVAL},
    {"W/ " TAG, TAG, -EINVAL, -EINVAL},
    {"\"a b\"", "\"a b\"", -EINVAL, -EINVAL},
    {"\"a\x7f\"", TAG, -EINVAL, -EINVAL},
    {"\"a\tb\"", TAG, -EINVAL, -EINVAL},
    {TAG ", \"x", TAG, -EINVAL, -EINVAL}, /* a match, then garbage: still refused */
    {"\"x\";q=1, " TAG, TAG, -EINVAL, -EINVAL},
};

static void etag_lists(void) {
    for (size_t i = 0; i < LX_ARRAY_SIZE(tags); i++) {
        const char *v = tags[i].value;
        is_int(match(v, tags[i].etag, 0), tags[i].strong, "strong: [%s] against %s",
               show(v, strlen(v)), tags[i].etag[0] ? tags[i].etag : "(none)");
        is_int(match(v, tags[i].etag, 1), tags[i].weak, "weak: [%s] against %s", show(v, strlen(v)),
               tags[i].etag[0] ? tags[i].etag : "(none)");
    }
}

/* Every prefix of a valid list (a value cut at each byte): the answer is
 * 1 once the matching tag is whole and nothing is left open, 0 before it,
 * -EINVAL inside a quoted tag or after a lone "W". */
static void prefixes(void) {
    const char *v = " \"ab\" , W/\"c\",\"5f-1a\" ,";
    size_t n = strlen(v), at = strstr(v, TAG) - v + strlen(TAG);
    int bad = 0;
    for (size_t len = 0; len <= n; len++) {
        int got = match_n(v, len, TAG, 0);
        int quotes = 0;
        for (size_t i = 0; i < len; i++)
            quotes += v[i] == '"';
        int open = quotes % 2 || (len > 0 && v[len - 1] == 'W') || (len > 0 && v[len - 1] == '/');
        int want = open ? -EINVAL : len >= at ? 1 : 0;
        if (got != want) {
            bad++;
            diag("prefix %zu [%s]: got %d, want %d", len, show(v, len), got, want);
        }
    }
    ok(bad == 0, "every prefix of a list gives the answer its bytes say");
}

static lx_str_t F(const char *s) {
    return (lx_str_t){s, s ? strlen(s) : 0};
}

static const char *name(int r) {
    switch (r) {
    case LX_PRECOND_OK: return "ok";
    case LX_PRECOND_FULL: return "full";
    case LX_PRECOND_304: return "304";
    case LX_PRECOND_412: return "412";
    default: return "?";
    }
}

/* One row: the fields (NULL: absent), the method's kind, and the answer,
 * against a representation with ETag TAG and Last-Modified LM, asked a
 * thousand seconds after it was modified; rep picks another (below). */
enum { REP_BOTH, REP_NO_ETAG, REP_NO_DATE, REP_THIS_SECOND, REP_FUTURE, REP_WED };
static const struct {
    const char *what;
    const char *im, *ius, *inm, *ims, *ir;
    int safe, range, rep, want;
} rows[] = {
    {"no conditional field", NULL, NULL, NULL, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    /* 1. If-Match */
    {"If-Match: the ETag", TAG, NULL, NULL, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    {"If-Match: another", "\"x\"", NULL, NULL, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_412},
    {"If-Match: in a list", "\"x\", " TAG, NULL, NULL, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    {"If-Match: *", "*", NULL, NULL, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    {"If-Match: weak form (strong comparison)", "W/" TAG, NULL, NULL, NULL, NULL, 1, 0, REP_BOTH,
     LX_PRECOND_412},
    {"If-Match: malformed", "5f-1a", NULL, NULL, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_412},
    {"If-Match: malformed after a match", TAG ", x", NULL, NULL, NULL, NULL, 1, 0, REP_BOTH,
     LX_PRECOND_412},
    {"If-Match: empty", "", NULL, NULL, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_412},
    {"If-Match: a tag, no ETag sent", TAG, NULL, NULL, NULL, NULL, 1, 0, REP_NO_ETAG,
     LX_PRECOND_412},
    {"If-Match: *, no ETag sent", "*", NULL, NULL, NULL, NULL, 1, 0, REP_NO_ETAG, LX_PRECOND_OK},
    /* 2. If-Unmodified-Since */
    {"If-Unmodified-Since: equal", NULL, LM, NULL, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    {"If-Unmodified-Since: later", NULL, "Wed, 03 Jan 2024 00:00:00 GMT", NULL, NULL, NULL, 1, 0,
     REP_BOTH, LX_PRECOND_OK},
    {"If-Unmodified-Since: a second earlier", NULL, "Tue, 02 Jan 2024 03:04:04 GMT", NULL, NULL,
     NULL, 1, 0, REP_BOTH, LX_PRECOND_412},
    {"If-Unmodified-Since: RFC 850 form, earlier", NULL, "Monday, 01-Jan-24 00:00:00 GMT", NULL,
     NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_412},
    {"If-Unmodified-Since: invalid date, ignored", NULL, "yesterday", NULL, NULL, NULL, 1, 0,
     REP_BOTH, LX_PRECOND_OK},
    {"If-Unmodified-Since: two dates, ignored", NULL, LM "," LM, NULL, NULL, NULL, 1, 0, REP_BOTH,
     LX_PRECOND_OK},
    {"If-Unmodified-Since: no date sent, ignored", NULL, "Tue, 02 Jan 2024 03:04:04 GMT", NULL,
     NULL, NULL, 1, 0, REP_NO_DATE, LX_PRECOND_OK},
    {"If-Match true: If-Unmodified-Since ignored", TAG, "Mon, 01 Jan 2024 00:00:00 GMT", NULL, NULL,
     NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    {"If-Match false, If-Unmodified-Since true", "\"x\"", LM, NULL, NULL, NULL, 1, 0, REP_BOTH,
     LX_PRECOND_412},
    /* 3. If-None-Match */
    {"If-None-Match: the ETag", NULL, NULL, TAG, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_304},
    {"If-None-Match: weak form", NULL, NULL, "W/" TAG, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_304},
    {"If-None-Match: *", NULL, NULL, "*", NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_304},
    {"If-None-Match: *, no ETag sent", NULL, NULL, "*", NULL, NULL, 1, 0, REP_NO_ETAG,
     LX_PRECOND_304},
    {"If-None-Match: another", NULL, NULL, "\"x\"", NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    {"If-None-Match: malformed", NULL, NULL, "5f-1a", NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    {"If-None-Match: the ETag, not GET or HEAD", NULL, NULL, TAG, NULL, NULL, 0, 0, REP_BOTH,
     LX_PRECOND_412},
    /* 4. If-Modified-Since */
    {"If-Modified-Since: equal", NULL, NULL, NULL, LM, NULL, 1, 0, REP_BOTH, LX_PRECOND_304},
    {"If-Modified-Since: earlier", NULL, NULL, NULL, "Tue, 02 Jan 2024 03:04:04 GMT", NULL, 1, 0,
     REP_BOTH, LX_PRECOND_OK},
    {"If-Modified-Since: asctime, equal", NULL, NULL, NULL, "Tue Jan  2 03:04:05 2024", NULL, 1, 0,
     REP_BOTH, LX_PRECOND_304},
    {"If-Modified-Since: invalid", NULL, NULL, NULL, "now", NULL, 1, 0, REP_BOTH, LX_PRECOND_OK},
    {"If-Modified-Since: not GET or HEAD", NULL, NULL, NULL, LM, NULL, 0, 0, REP_BOTH,
     LX_PRECOND_OK},
    {"If-Modified-Since: no date sent", NULL, NULL, NULL, LM, NULL, 1, 0, REP_NO_DATE,
     LX_PRECOND_OK},
    {"If-None-Match false: If-Modified-Since ignored", NULL, NULL, "\"x\"", LM, NULL, 1, 0,
     REP_BOTH, LX_PRECOND_OK},
    {"If-None-Match malformed: If-Modified-Since still ignored", NULL, NULL, "x", LM, NULL, 1, 0,
     REP_BOTH, LX_PRECOND_OK},
    /* The order between the steps. */
    {"If-Match false beats If-None-Match true", "\"x\"", NULL, TAG, NULL, NULL, 1, 0, REP_BOTH,
     LX_PRECOND_412},
    {"If-Unmodified-Since false beats If-None-Match true", NULL, "Mon, 01 Jan 2024 00:00:00 GMT",
     TAG, NULL, NULL, 1, 0, REP_BOTH, LX_PRECOND_412},
    {"If-Unmodified-Since false beats If-Modified-Since true", NULL,
     "Mon, 01 Jan 2024 00:00:00 GMT", NULL, LM, NULL, 1, 0, REP_BOTH, LX_PRECOND_412},
    {"If-Match true, If-None-Match true", TAG, NULL, TAG, NULL, NULL, 1, 0, REP_BOTH,
     LX_PRECOND_304},
    {"If-None-Match true beats If-Range false", NULL, NULL, TAG, NULL, "\"x\"", 1, 1, REP_BOTH,
     LX_PRECOND_304},
    /* 5. If-Range (with a Range on a GET) */
    {"resume: If-Match another, with a Range", "\"x\"", NULL, NULL, NULL, NULL, 1, 1, REP_BOTH,
     LX_PRECOND_412},
    {"resume: If-Match the ETag, with a Range", TAG, NULL, NULL, NULL, NULL, 1, 1, REP_BOTH,
     LX_PRECOND_OK},
    {"If-Range: the ETag", NULL, NULL, NULL, NULL, TAG, 1, 1, REP_BOTH, LX_PRECOND_OK},
    {"If-Range: weak form never matches", NULL, NULL, NULL, NULL, "W/" TAG, 1, 1, REP_BOTH,
     LX_PRECOND_FULL},
    {"If-Range: another", NULL, NULL, NULL, NULL, "\"x\"", 1, 1, REP_BOTH, LX_PRECOND_FULL},
    {"If-Range: a list", NULL, NULL, NULL, NULL, TAG ", \"x\"", 1, 1, REP_BOTH, LX_PRECOND_FULL},
    {"If-Range: *", NULL, NULL, NULL, NULL, "*", 1, 1, REP_BOTH, LX_PRECOND_FULL},
    {"If-Range: a tag, no ETag sent", NULL, NULL, NULL, NULL, TAG, 1, 1, REP_NO_ETAG,
     LX_PRECOND_FULL},
    {"If-Range: the date", NULL, NULL, NULL, NULL, LM, 1, 1, REP_BOTH, LX_PRECOND_OK},
    {"If-Range: the date in RFC 850 form", NULL, NULL, NULL, NULL,
     "Tuesday, 02-Jan-24 03:04:05 GMT", 1, 1, REP_BOTH, LX_PRECOND_OK},
    {"If-Range: a later date", NULL, NULL, NULL, NULL, "Wed, 03 Jan 2024 00:00:00 GMT", 1, 1,
     REP_BOTH, LX_PRECOND_FULL},
    {"If-Range: an earlier date", NULL, NULL, NULL, NULL, "Tue, 02 Jan 2024 03:04:04 GMT", 1, 1,
     REP_BOTH, LX_PRECOND_FULL},
    {"If-Range: the date, in its own second (weak)", NULL, NULL, NULL, NULL, LM, 1, 1,
     REP_THIS_SECOND, LX_PRECOND_FULL},
    {"If-Range: the date, stamped in the future (weak)", NULL, NULL, NULL, NULL, LM, 1, 1,
     REP_FUTURE, LX_PRECOND_FULL},
    {"If-Range: a date, no date sent", NULL, NULL, NULL, NULL, LM, 1, 1, REP_NO_DATE,
     LX_PRECOND_FULL},
    {"If-Range: a date on a Wednesday (not W/)", NULL, NULL, NULL, NULL,
     "Wed, 03 Jan 2024 00:00:00 GMT", 1, 1, REP_WED, LX_PRECOND_OK},
    {"If-Range: garbage", NULL, NULL, NULL, NULL, "\"5f-1a", 1, 1, REP_BOTH, LX_PRECOND_FULL},
    {"If-Range: empty", NULL, NULL, NULL, NULL, "", 1, 1, REP_BOTH, LX_PRECOND_FULL},
    {"If-Range without a Range: ignored", NULL, NULL, NULL, NULL, "\"x\"", 1, 0, REP_BOTH,
     LX_PRECOND_OK},
};

static void order(void) {
    for (size_t i = 0; i < LX_ARRAY_SIZE(rows); i++) {
        lx_precond_req_t q = {
            .if_match = F(rows[i].im),
            .if_unmodified_since = F(rows[i].ius),
            .if_none_match = F(rows[i].inm),
            .if_modified_since = F(rows[i].ims),
            .if_range = F(rows[i].ir),
            .safe = rows[i].safe != 0,
            .range = rows[i].range != 0,
        };
        lx_precond_rep_t v = {.etag = TAG, .has_mtime = 1, .mtime = M, .now = M + 1000};
        switch (rows[i].rep) {
        case REP_NO_ETAG: v.etag = ""; break;
        case REP_NO_DATE: v.has_mtime = 0; break;
        case REP_THIS_SECOND: v.now = M; break;
        case REP_FUTURE: v.now = M - 3600; break;
        case REP_WED: v.mtime = 1704240000, v.now = v.mtime + 1000; break;
        default: break;
        }
        int got = lx_precond_eval(&q, &v);
        ok(got == rows[i].want, "%s: %s", rows[i].what, name(rows[i].want));
        if (got != rows[i].want) diag("got %s", name(got));
    }
}

int main(void) {
    etag_lists();
    prefixes();
    order();
    return done_testing();
}
