/* Rule expansion with captures (src/dispatch/rules.c): rewrite and redirect
 * targets with $0..$9. The per-loop match data is shared by every rule and
 * every request of a loop, so the harness first matches an unrelated regex
 * on an unrelated subject (the earlier request) and then the rule's own; the
 * expansion must be exactly what the rule's own match says: template bytes,
 * and for $N a capture of the rule's regex within the current subject, or
 * nothing. Bytes of the earlier subject must never appear.
 *
 * Input: four fields split at '\n': earlier regex, earlier subject, regex,
 * subject, and the rest is the target template. The first byte chooses
 * how captures are written (its value mod 3: raw, URL, query) and the output
 * capacity (the rest). */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/rules.h"

static pcre2_match_data *shared_md;

/* Splits the next field (up to '\n') off *p into a malloc'ed exact-size copy
 * with a NUL after it. */
static char *field(const uint8_t **p, const uint8_t *end, size_t *len) {
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
    char *s = malloc(n + 1);
    memcpy(s, *p, n);
    s[n] = '\0';
    *p += n + (nl != NULL);
    *len = n;
    return s;
}

/* The expansion as the rule's own match defines it. */
static size_t reference(const char *t, const char *subj, pcre2_code *re, pcre2_match_data *md,
                        lx_expand_t how, char *out) {
    static const char hex[] = "0123456789ABCDEF";
    uint32_t groups = 0;
    pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t pairs = pcre2_get_ovector_count(md);
    size_t n = 0;
    int in_query = how == LX_EXPAND_QUERY;
    for (const char *p = t; *p; p++) {
        if (*p == '$' && p[1] >= '0' && p[1] <= '9') {
            uint32_t k = (uint32_t)(*++p - '0');
            if (k > groups || k >= pairs || ov[2 * k] == PCRE2_UNSET) continue;
            for (PCRE2_SIZE i = ov[2 * k]; i < ov[2 * k + 1]; i++) {
                unsigned char c = (unsigned char)subj[i];
                if (how != LX_EXPAND_RAW &&
                    (c <= 0x20 || c >= 0x7f || strchr("\"<>\\^`{|}#%?", c) ||
                     (in_query && strchr("&+;", c)))) {
                    out[n++] = '%';
                    out[n++] = hex[c >> 4];
                    out[n++] = hex[c & 15];
                } else {
                    out[n++] = (char)c;
                }
            }
            continue;
        }
        if (*p == '?' && how == LX_EXPAND_URL) in_query = 1;
        out[n++] = *p;
    }
    out[n] = '\0';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static pcre2_code *clear;
    if (shared_md == NULL) {
        shared_md = pcre2_match_data_create(10, NULL); /* as worker.c */
        char e[64];
        clear = lx_regex_compile("(x)?(x)?(x)?(x)?(x)?(x)?(x)?(x)?(x)?", e, sizeof(e));
    }
    /* Every input starts from the same match data (all nine groups unset),
     * so that what it finds reproduces on its own; the earlier match within
     * the input stands for the loop's earlier requests. */
    pcre2_match(clear, (PCRE2_SPTR) "", 0, 0, 0, shared_md, NULL);
    lx_expand_t how = (lx_expand_t)(data[0] % 3);
    size_t cap = 1 + (data[0] / 3) * 6; /* 1..511: small enough to hit -ENOSPC */
    const uint8_t *p = data + 1, *end = data + size;
    size_t l1, s1l, l2, s2l, tl;
    char *re1s = field(&p, end, &l1), *s1 = field(&p, end, &s1l);
    char *re2s = field(&p, end, &l2), *s2 = field(&p, end, &s2l);
    char *t = malloc((size_t)(end - p) + 1);
    tl = (size_t)(end - p);
    memcpy(t, p, tl);
    t[tl] = '\0';
    char err[256];
    /* A config author's regex may backtrack for long; that is not what is
     * tested here, so keep patterns and subjects short. */
    if (l1 > 64 || l2 > 64 || s1l > 512 || s2l > 512) goto out;
    pcre2_code *re1 = lx_regex_compile(re1s, err, sizeof(err));
    pcre2_code *re2 = lx_regex_compile(re2s, err, sizeof(err));
    if (re1) pcre2_match(re1, (PCRE2_SPTR)s1, s1l, 0, 0, shared_md, NULL);
    int m = re2 ? pcre2_match(re2, (PCRE2_SPTR)s2, s2l, 0, 0, shared_md, NULL) : -1;
    if (m > 0) {
        pcre2_match_data *own = pcre2_match_data_create_from_pattern(re2, NULL);
        int rc = pcre2_match(re2, (PCRE2_SPTR)s2, s2l, 0, 0, own, NULL);
        assert(rc > 0);
        /* The subject is copied to exactly its length: ASan catches a
         * capture that reaches past it. */
        char *subj = malloc(s2l ? s2l : 1);
        memcpy(subj, s2, s2l);
        char *want = malloc(tl + (tl / 2 + 1) * 3 * s2l + 1);
        size_t wl = reference(t, subj, re2, own, how, want);
        char *out = malloc(cap);
        /* What lx_ruleset_first leaves for a rule whose regex matched: the
         * pairs this match set, over the shared match data. */
        lx_match_ctx_t ctx = {.path = subj, .len = s2l, .md = shared_md, .ncap = (uint32_t)m};
        int n = lx_rule_expand(t, &ctx, out, cap, how);
        if (wl < cap) {
            if (n < 0 || (size_t)n != wl || memcmp(out, want, wl) != 0) {
                fprintf(stderr,
                        "expand \"%s\" on \"%s\" by /%s/ (after /%s/ on \"%s\"):\n"
                        "  got %d \"%.*s\"\n  want %zu \"%s\"\n",
                        t, s2, re2s, re1s, s1, n, n > 0 ? n : 0, out, wl, want);
                abort();
            }
            assert(out[n] == '\0');
        } else {
            assert(n == -ENOSPC);
        }
        free(out);
        free(want);
        free(subj);
        pcre2_match_data_free(own);
    }
    pcre2_code_free(re1);
    pcre2_code_free(re2);
out:
    free(re1s);
    free(s1);
    free(re2s);
    free(s2);
    free(t);
    return 0;
}
