/* The preconditions (src/http/precond.c) against a model written
 * differently: an entity-tag list read by a state machine, one byte at a
 * time, into a list of tags that is then searched; and RFC 9110 13.2.2's
 * steps written out as the RFC lists them. Both must agree on every input.
 *
 * Input: byte 0 is flags (bit 0: GET or HEAD, bit 1: a Range on a GET,
 * bit 2: a Last-Modified is sent, bits 3-4: the request's second after,
 * at or before it), byte 1 says which fields are present (bit k: field k),
 * then six pieces split at '\n': the representation's ETag (used when it
 * is one valid entity-tag, else none), If-Match, If-Unmodified-Since,
 * If-None-Match, If-Modified-Since, If-Range. Each is copied to a buffer
 * of its exact length, so that ASan sees a read past it. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/date.h"
#include "http/precond.h"

#define MTIME 1704164645 /* Tue, 02 Jan 2024 03:04:05 GMT */

typedef struct {
    const char *p; /* the opaque-tag, quotes included */
    size_t len;
    int weak;
} tag_t;

static int etagc(unsigned char c) {
    return c == 0x21 || (c >= 0x23 && c <= 0x7e) || c >= 0x80;
}

/* The list as tags into out (room for len / 2 + 1: a tag takes two bytes
 * at least): their number, -2 for "*" alone, -1 when the value is not
 * "*" / #entity-tag. */
static int model_list(const char *s, size_t len, tag_t *out) {
    enum { SEP, W, WS, IN, AFTER, STAR } st = SEP;
    int n = 0, seen = 0, weak = 0;
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int ows = c == ' ' || c == '\t';
        switch (st) {
        case STAR:
            if (!ows) return -1;
            break;
        case SEP:
            if (ows) break;
            if (c == '*' && !seen) {
                st = STAR;
                break;
            }
            seen = 1;
            if (c == ',') break;
            weak = 0;
            if (c == 'W') {
                st = W;
            } else if (c == '"') {
                start = i;
                st = IN;
            } else {
                return -1;
            }
            break;
        case W:
            if (c != '/') return -1;
            weak = 1;
            st = WS;
            break;
        case WS:
            if (c != '"') return -1;
            start = i;
            st = IN;
            break;
        case IN:
            if (c == '"') {
                out[n] = (tag_t){s + start, i + 1 - start, weak};
                n++;
                st = AFTER;
            } else if (!etagc(c)) {
                return -1;
            }
            break;
        case AFTER:
            if (c == ',')
                st = SEP;
            else if (!ows)
                return -1;
            break;
        }
    }
    if (st == STAR) return -2;
    if (st == W || st == WS || st == IN) return -1;
    return n;
}

/* Exactly one entity-tag, OWS around it: 1 with *t, or 0. */
static int model_one(const char *s, size_t len, tag_t *t) {
    tag_t *all = malloc((len / 2 + 1) * sizeof(*all));
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    /* One tag, and no comma outside it: a list of one. */
    int n = i < len && s[i] == ',' ? -1 : model_list(s, len, all), one = n == 1;
    for (const char *end = one ? all[0].p + all[0].len : s + len; end < s + len; end++)
        if (*end != ' ' && *end != '\t') one = 0;
    if (one) *t = all[0];
    free(all);
    return one;
}

static int model_match(const char *s, size_t len, const tag_t *mine, int weak) {
    tag_t *t = malloc((len / 2 + 1) * sizeof(*t));
    int n = model_list(s, len, t), match = n == -2;
    for (int i = 0; i < n && mine; i++)
        if ((weak || (!t[i].weak && !mine->weak)) && t[i].len == mine->len &&
            memcmp(t[i].p, mine->p, mine->len) == 0)
            match = 1;
    free(t);
    return n == -1 ? -EINVAL : match;
}

/* Splits off the next piece at '\n' into an exact-size copy. */
static char *piece(const uint8_t **d, size_t *n, size_t *len) {
    const uint8_t *nl = memchr(*d, '\n', *n);
    size_t l = nl ? (size_t)(nl - *d) : *n;
    char *b = malloc(l ? l : 1);
    memcpy(b, *d, l);
    *len = l;
    *d += l + (nl ? 1 : 0);
    *n -= l + (nl ? 1 : 0);
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint8_t flags = data[0], present = data[1];
    data += 2;
    size -= 2;
    char *buf[6];
    size_t len[6];
    for (int k = 0; k < 6; k++)
        buf[k] = piece(&data, &size, &len[k]);

    /* The representation's ETag: the first piece when it is one tag. */
    tag_t *own = malloc((len[0] / 2 + 1) * sizeof(*own));
    char *etag = malloc(len[0] + 1);
    memcpy(etag, buf[0], len[0]);
    etag[len[0]] = '\0';
    int own_n = memchr(buf[0], '\0', len[0]) ? -1 : model_list(buf[0], len[0], own);
    int has_tag = own_n == 1 && buf[0][0] != ' ' && buf[0][0] != '\t' && buf[0][0] != ',' &&
                  len[0] == own[0].len + (own[0].weak ? 2 : 0);
    if (!has_tag) etag[0] = '\0';
    tag_t mine = has_tag ? (tag_t){etag + (own[0].weak ? 2 : 0), own[0].len, own[0].weak}
                         : (tag_t){NULL, 0, 0};

    lx_str_t f[5];
    for (int k = 0; k < 5; k++)
        f[k] = (present >> k) & 1 ? (lx_str_t){buf[k + 1], len[k + 1]} : (lx_str_t){NULL, 0};
    lx_precond_req_t q = {.if_match = f[0],
                          .if_unmodified_since = f[1],
                          .if_none_match = f[2],
                          .if_modified_since = f[3],
                          .if_range = f[4],
                          .safe = flags & 1,
                          .range = (flags >> 1) & 1};
    int rel = (flags >> 3) & 3;
    lx_precond_rep_t v = {.etag = etag,
                          .has_mtime = (flags >> 2) & 1,
                          .mtime = MTIME,
                          .now = rel == 0   ? MTIME + 5
                                 : rel == 1 ? MTIME
                                            : MTIME - 5};

    /* The lists, both comparisons. */
    int want_strong[5], want_weak[5];
    for (int k = 0; k < 5; k++) {
        int s = lx_etag_match(buf[k + 1], len[k + 1], etag, 0);
        int w = lx_etag_match(buf[k + 1], len[k + 1], etag, 1);
        assert(s == 1 || s == 0 || s == -EINVAL);
        assert(s == -EINVAL ? w == -EINVAL : w != -EINVAL);
        assert(s != 1 || w == 1); /* a strong match is a weak one */
        int ms = model_match(buf[k + 1], len[k + 1], has_tag ? &mine : NULL, 0);
        int mw = model_match(buf[k + 1], len[k + 1], has_tag ? &mine : NULL, 1);
        assert(s == ms && w == mw);
        want_strong[k] = s;
        want_weak[k] = w;
    }

    /* 13.2.2, as the RFC lists it. */
    int want = LX_PRECOND_OK;
    time_t t;
    if (q.if_match.p && want_strong[0] != 1)
        want = LX_PRECOND_412;
    else if (!q.if_match.p && q.if_unmodified_since.p && v.has_mtime &&
             lx_http_date_parse(q.if_unmodified_since.p, q.if_unmodified_since.len, &t) == 0 &&
             MTIME > t)
        want = LX_PRECOND_412;
    else if (q.if_none_match.p && want_weak[2] == 1)
        want = q.safe ? LX_PRECOND_304 : LX_PRECOND_412;
    else if (!q.if_none_match.p && q.safe && q.if_modified_since.p && v.has_mtime &&
             lx_http_date_parse(q.if_modified_since.p, q.if_modified_since.len, &t) == 0 &&
             MTIME <= t)
        want = LX_PRECOND_304;
    else if (q.range && q.if_range.p) {
        /* One tag, strong, the same as a strong ETag; or the date, exact,
         * its second over. */
        const char *p = q.if_range.p;
        size_t l = q.if_range.len;
        while (l && (*p == ' ' || *p == '\t'))
            p++, l--;
        int is_tag = l && (p[0] == '"' || (l >= 2 && p[0] == 'W' && p[1] == '/'));
        int ok;
        tag_t one;
        if (is_tag)
            ok = model_one(q.if_range.p, q.if_range.len, &one) && !one.weak && has_tag &&
                 !mine.weak && one.len == mine.len && memcmp(one.p, mine.p, mine.len) == 0;
        else
            ok = v.has_mtime && lx_http_date_parse(q.if_range.p, q.if_range.len, &t) == 0 &&
                 t == MTIME && v.now > MTIME;
        if (!ok) want = LX_PRECOND_FULL;
    }
    int got = lx_precond_eval(&q, &v);
    assert(got == want);
    assert(got != LX_PRECOND_FULL || q.range);
    assert(got != LX_PRECOND_304 || (q.safe && (q.if_none_match.p || q.if_modified_since.p)));
    assert(got != LX_PRECOND_412 || q.if_match.p || q.if_unmodified_since.p ||
           (!q.safe && q.if_none_match.p));
    assert(lx_precond_eval(&q, &v) == got);

    for (int k = 0; k < 6; k++)
        free(buf[k]);
    free(etag);
    free(own);
    return 0;
}
