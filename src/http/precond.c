/* Conditional requests (RFC 9110 section 13).
 *
 *   If-Match      = "*" / #entity-tag
 *   If-None-Match = "*" / #entity-tag
 *   If-Range      = entity-tag / HTTP-date
 *   entity-tag    = [ weak ] opaque-tag
 *   weak          = %s"W/"
 *   opaque-tag    = DQUOTE *etagc DQUOTE
 *   etagc         = %x21 / %x23-7E / obs-text
 *
 * One pass over each value; nothing is copied. */
#include "http/precond.h"

#include <errno.h>
#include <string.h>

#include "http/date.h"

static int is_ows(char c) {
    return c == ' ' || c == '\t';
}

/* An entity-tag at *pp: 0 with its opaque-tag (quotes included) and
 * whether it is weak, *pp past it; or -EINVAL. */
static int parse_tag(const char **pp, const char *end, lx_str_t *opaque, int *weak) {
    const char *p = *pp;
    *weak = 0;
    if (end - p >= 2 && p[0] == 'W' && p[1] == '/') {
        *weak = 1;
        p += 2;
    }
    if (p == end || *p != '"') return -EINVAL;
    const char *s = p++;
    for (; p < end && *p != '"'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x21 || c == 0x7f) return -EINVAL; /* controls, SP, DEL: not etagc */
    }
    if (p == end) return -EINVAL; /* no closing quote */
    p++;
    *opaque = (lx_str_t){s, (size_t)(p - s)};
    *pp = p;
    return 0;
}

/* The representation's own tag, parsed from its ETag value: 0, or -EINVAL
 * when it has none (etag = false) and no listed tag can match it. */
static int own_tag(const char *etag, lx_str_t *opaque, int *weak) {
    if (etag == NULL || etag[0] == '\0') return -EINVAL;
    const char *p = etag, *end = etag + strlen(etag);
    if (parse_tag(&p, end, opaque, weak) < 0 || p != end) return -EINVAL;
    return 0;
}

/* 8.8.3.2: strong comparison needs both tags strong; weak ignores W/. */
static int same_tag(lx_str_t a, int aweak, lx_str_t b, int bweak, int weak) {
    if (!weak && (aweak || bweak)) return 0;
    return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

int lx_etag_match(const char *list, size_t len, const char *etag, int weak) {
    const char *p = list, *end = list + len;
    while (p < end && is_ows(*p))
        p++;
    while (end > p && is_ows(end[-1]))
        end--;
    if (end - p == 1 && *p == '*') return 1;
    lx_str_t mine;
    int mine_weak, have = own_tag(etag, &mine, &mine_weak) == 0, match = 0;
    /* The whole list is read even after a match: a value that is not the
     * grammar is refused whatever it holds, so that what a malformed value
     * does cannot depend on where the bad element is. */
    for (;;) {
        /* Empty elements and OWS around commas (the # rule, RFC 9110 5.6.1). */
        while (p < end && (is_ows(*p) || *p == ','))
            p++;
        if (p == end) break;
        lx_str_t t;
        int tweak;
        if (parse_tag(&p, end, &t, &tweak) < 0) return -EINVAL;
        if (have && same_tag(t, tweak, mine, mine_weak, weak)) match = 1;
        while (p < end && is_ows(*p))
            p++;
        if (p < end && *p != ',') return -EINVAL;
    }
    return match;
}

/* If-Range (13.1.5): the one validator given is the representation's. */
static int if_range_true(lx_str_t f, const lx_precond_rep_t *v) {
    const char *p = f.p, *end = f.p + f.len;
    while (p < end && is_ows(*p))
        p++;
    while (end > p && is_ows(end[-1]))
        end--;
    /* "W/" and not just 'W': "Wed, 03 Jan ..." is a date. */
    if (p < end && (*p == '"' || (end - p >= 2 && p[0] == 'W' && p[1] == '/'))) {
        lx_str_t t, mine;
        int tweak, mine_weak;
        if (parse_tag(&p, end, &t, &tweak) < 0 || p != end) return 0;
        return own_tag(v->etag, &mine, &mine_weak) == 0 && same_tag(t, tweak, mine, mine_weak, 0);
    }
    time_t t;
    return v->has_mtime && lx_http_date_parse(f.p, f.len, &t) == 0 && t == v->mtime &&
           v->now > v->mtime;
}

int lx_precond_eval(const lx_precond_req_t *q, const lx_precond_rep_t *v) {
    time_t t;
    /* Steps 1 and 2: the client's copy must still be the current one. */
    if (q->if_match.p) {
        if (lx_etag_match(q->if_match.p, q->if_match.len, v->etag, 0) != 1) return LX_PRECOND_412;
    } else if (q->if_unmodified_since.p && v->has_mtime &&
               lx_http_date_parse(q->if_unmodified_since.p, q->if_unmodified_since.len, &t) == 0) {
        if (v->mtime > t) return LX_PRECOND_412;
    }
    /* Steps 3 and 4: the client's copy is current enough to keep. */
    if (q->if_none_match.p) {
        if (lx_etag_match(q->if_none_match.p, q->if_none_match.len, v->etag, 1) == 1)
            return q->safe ? LX_PRECOND_304 : LX_PRECOND_412;
    } else if (q->safe && q->if_modified_since.p && v->has_mtime &&
               lx_http_date_parse(q->if_modified_since.p, q->if_modified_since.len, &t) == 0) {
        if (v->mtime <= t) return LX_PRECOND_304;
    }
    /* Step 5: a part of what the client holds, or all of what is here. */
    if (q->range && q->if_range.p && !if_range_true(q->if_range, v)) return LX_PRECOND_FULL;
    return LX_PRECOND_OK;
}
