#include "rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llhttp.h"

pcre2_code *lx_regex_compile(const char *src, char *err, size_t errlen) {
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
    if (re == NULL) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof(msg));
        snprintf(err, errlen, "%s at offset %zu", (const char *)msg, (size_t)off);
        return NULL;
    }
    /* Without JIT (not built for this CPU) the interpreter still works. */
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

uint64_t lx_method_bit(const char *name) {
#define XX(num, id, string)                                                                        \
    if (num < 63 && strcmp(name, #string) == 0) return 1ULL << num;
    HTTP_ALL_METHOD_MAP(XX)
#undef XX
    /* A method llhttp does not know never reaches the rules (it is a 501),
     * so a rule naming only such methods matches nothing: bit 63 is never a
     * request's method. */
    return 1ULL << 63;
}

static int is_meta(char c) {
    return c != '\0' && strchr("\\^$.[]|()?*+{}", c) != NULL;
}

static int is_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A pattern is safe to read literals from when nothing can make its top
 * level optional or change how literals match: no top-level alternation, no
 * inline options or verbs "(?i)", "(*...)", no \Q...\E quoting. */
static int plain_structure(const char *s) {
    int depth = 0, in_class = 0;
    for (; *s; s++) {
        if (*s == '\\') {
            if (s[1] == 'Q' || s[1] == '\0') return 0;
            s++;
            continue;
        }
        if (in_class) {
            in_class = *s != ']';
            continue;
        }
        switch (*s) {
        case '[':
            in_class = 1;
            if (s[1] == ']') s++; /* "[]...]" : the first ] is a literal */
            break;
        case '(':
            if (s[1] == '?' || s[1] == '*') return 0;
            depth++;
            break;
        case ')': depth--; break;
        case '|':
            if (depth == 0) return 0;
            break;
        }
    }
    return 1;
}

size_t lx_regex_literal(const char *src, int suffix, char *out, size_t cap) {
    size_t n = 0, len = strlen(src);
    if (!plain_structure(src) || cap == 0) return 0;
    if (!suffix) {
        if (src[0] != '^') return 0;
        for (size_t i = 1; i < len && n + 1 < cap;) {
            char c = src[i];
            size_t step = 1;
            if (c == '\\') {
                if (is_alnum(src[i + 1]) || src[i + 1] == '\0')
                    break; /* \d, \w, \x41 ...: a class or an escape we do not read */
                c = src[i + 1];
                step = 2;
            } else if (is_meta(c)) {
                break;
            }
            char next = src[i + step];
            if (next == '*' || next == '+' || next == '?' || next == '{')
                break; /* the quantifier makes this character optional or repeated */
            out[n++] = c;
            i += step;
        }
        return n;
    }
    /* Suffix: the pattern must end in an unescaped '$'. Read backwards,
     * counting backslashes to know whether a character is escaped. */
    if (len < 2 || src[len - 1] != '$') return 0;
    size_t bs = 0;
    for (size_t j = len - 1; j > 0 && src[j - 1] == '\\'; j--)
        bs++;
    if (bs % 2) return 0;
    char rev[256];
    size_t i = len - 1;
    while (i > 0 && n + 1 < cap && n < sizeof(rev)) {
        char c = src[i - 1];
        size_t k = 0;
        for (size_t j = i - 1; j > 0 && src[j - 1] == '\\'; j--)
            k++;
        if (k % 2) {
            if (is_alnum(c)) break;
            rev[n++] = c;
            i -= 2;
        } else {
            if (is_meta(c)) break;
            rev[n++] = c;
            i -= 1;
        }
    }
    /* A literal right after an unescaped '^'-less start is fine; but one that
     * a quantifier could repeat (like the 'c' of "(ab)c" no, of "c+$") was
     * stopped by is_meta above. Return it in reading order. */
    for (size_t j = 0; j < n; j++)
        out[j] = rev[n - 1 - j];
    return n;
}

/* Appends id to the list *ids of *n entries. */
static int push_id(uint32_t **ids, uint32_t *n, uint32_t id) {
    uint32_t *a = realloc(*ids, (*n + 1) * sizeof(*a));
    if (a == NULL) return -ENOMEM;
    *ids = a;
    a[(*n)++] = id;
    return 0;
}

static int add_always(lx_ruleset_t *rs, uint32_t id) {
    return push_id(&rs->always, &rs->nalways, id);
}

static int add_suffix(lx_ruleset_t *rs, const char *s, size_t len, uint32_t id) {
    char rev[512];
    if (len > sizeof(rev)) len = sizeof(rev); /* the index needs only the last bytes */
    for (size_t i = 0; i < len; i++)
        rev[i] = s[len - 1 - i];
    if (rs->by_suffix == NULL && (rs->by_suffix = lx_trie_new()) == NULL) return -ENOMEM;
    return lx_trie_add(rs->by_suffix, rev, len, id);
}

uint32_t lx_rules_prefilter_min = 16;

static int cmp_id(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Too few literal-free regexes for a prefilter to pay: they join the
 * always-tested list, which must stay in rule order. */
static int free_to_always(lx_ruleset_t *rs) {
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < rs->nfree; i++)
        rc = add_always(rs, rs->free_re[i]);
    if (rc == 0 && rs->nfree) qsort(rs->always, rs->nalways, sizeof(*rs->always), cmp_id);
    free(rs->free_re);
    rs->free_re = NULL;
    rs->nfree = 0;
    return rc;
}

/* The patterns of free_re, in its order (free() the array), or NULL. */
static const char **free_patterns(const lx_ruleset_t *rs) {
    const char **pats = malloc((rs->nfree ? rs->nfree : 1) * sizeof(*pats));
    for (uint32_t i = 0; pats && i < rs->nfree; i++)
        pats[i] = rs->rules[rs->free_re[i]].regex;
    return pats;
}

int lx_ruleset_prefilter_request(const lx_ruleset_t *rs, char **req, size_t *len) {
    const char **pats = free_patterns(rs);
    if (pats == NULL) return -ENOMEM;
    int rc = lx_multire_request(pats, rs->free_re, rs->nfree, req, len);
    free(pats);
    return rc;
}

int lx_ruleset_prefilter_build(lx_ruleset_t *rs, uint32_t nloops) {
    if (rs->nfree == 0 || __atomic_load_n(&rs->multi, __ATOMIC_ACQUIRE) != NULL) return 0;
    const char **pats = free_patterns(rs);
    if (pats == NULL) return -ENOMEM;
    lx_multire_t *m = NULL;
    int rc = lx_multire_build(pats, rs->free_re, rs->nfree, nloops, &m);
    free(pats);
    if (rc == 0) lx_ruleset_prefilter_publish(rs, m);
    return rc;
}

void lx_ruleset_prefilter_publish(lx_ruleset_t *rs, lx_multire_t *m) {
    if (m == NULL) return;
    /* Release: a loop that sees the pointer sees the database behind it. */
    __atomic_store_n(&rs->multi, m, __ATOMIC_RELEASE);
}

int lx_ruleset_index(lx_ruleset_t *rs) {
    for (uint32_t id = 0; id < rs->n; id++) {
        lx_rule_t *r = &rs->rules[id];
        uint32_t opts = 0;
        if (r->re && pcre2_pattern_info(r->re, PCRE2_INFO_ALLOPTIONS, &opts) == 0)
            r->re_utf = (opts & PCRE2_UTF) != 0;
    }
    rs->linear = rs->n <= LX_RULES_LINEAR_MAX;
    if (rs->linear) return 0;
    for (uint32_t id = 0; id < rs->n; id++) {
        lx_rule_t *r = &rs->rules[id];
        char lit[256];
        size_t n = 0;
        int rc;
        if (r->prefix_len) {
            memcpy(lit, r->prefix, n = r->prefix_len < sizeof(lit) ? r->prefix_len : sizeof(lit));
        } else if (r->re) {
            n = lx_regex_literal(r->regex, 0, lit, sizeof(lit));
        }
        if (n) {
            if (rs->by_prefix == NULL && (rs->by_prefix = lx_trie_new()) == NULL) return -ENOMEM;
            rc = lx_trie_add(rs->by_prefix, lit, n, id);
        } else if (r->nsuffix) {
            rc = 0;
            for (size_t i = 0; rc == 0 && i < r->nsuffix; i++)
                rc = r->suffix_len[i] ? add_suffix(rs, r->suffix[i], r->suffix_len[i], id)
                                      : add_always(rs, id);
        } else if (r->re && (n = lx_regex_literal(r->regex, 1, lit, sizeof(lit))) > 0) {
            rc = add_suffix(rs, lit, n, id);
        } else if (r->re && !r->re_utf && lx_multire_available() && lx_multire_eligible(r->regex)) {
            /* (A UTF pattern stays out: the engine's UTF mode may not be
             * given a path that is not UTF-8, and a client chooses it.) */
            rc = push_id(&rs->free_re, &rs->nfree, id);
        } else {
            rc = add_always(rs, id);
        }
        if (rc < 0) return rc;
    }
    return rs->nfree < lx_rules_prefilter_min ? free_to_always(rs) : 0;
}

void lx_ruleset_free(lx_ruleset_t *rs) {
    for (uint32_t i = 0; i < rs->n; i++)
        if (rs->rules[i].re) pcre2_code_free(rs->rules[i].re);
    lx_trie_free(rs->by_prefix);
    lx_trie_free(rs->by_suffix);
    free(rs->always);
    free(rs->free_re);
    lx_multire_free(rs->multi);
}

static int rule_matches(const lx_rule_t *r, lx_match_ctx_t *c) {
    if (r->methods && !(r->methods & (1ULL << (c->method & 63)))) return 0;
    if (r->prefix_len && (c->len < r->prefix_len || memcmp(c->path, r->prefix, r->prefix_len)))
        return 0;
    if (r->nsuffix) {
        size_t i;
        for (i = 0; i < r->nsuffix; i++)
            if (c->len >= r->suffix_len[i] &&
                memcmp(c->path + c->len - r->suffix_len[i], r->suffix[i], r->suffix_len[i]) == 0)
                break;
        if (i == r->nsuffix) return 0;
    }
    /* The client's address is asked last: a set tested in order (up to
     * LX_RULES_LINEAR_MAX rules) reaches rules the indexed path never
     * would for this path, and -t's check of error pages (page_deny) sees
     * an address asked for as a rule that could deny the page. */
    int m = 0;
    if (r->re) {
        /* pcre2_jit_match skips the subject checks, and a UTF pattern
         * run on a path that is not UTF-8 (a client's %FF) is read past
         * its end: those go through pcre2_match, which checks and then
         * runs the same JIT code (an invalid path matches nothing). */
        m = r->re_utf ? PCRE2_ERROR_JIT_BADOPTION
                      : pcre2_jit_match(r->re, (PCRE2_SPTR)c->path, c->len, 0, 0, c->md, NULL);
        if (m == PCRE2_ERROR_JIT_BADOPTION)
            m = pcre2_match(r->re, (PCRE2_SPTR)c->path, c->len, 0, 0, c->md, NULL);
        if (m < 0) return 0;
    }
    if (r->has_from && !lx_cidrset_has(&r->from, c->addr_of ? c->addr_of(c->ud) : c->addr))
        return 0;
    /* PCRE2 never touches the pairs beyond the pattern's groups, so only
     * the m pairs it reports are this match's; 0 means all of them (the
     * pattern has more groups than the match data holds). Set once the
     * rule matches as a whole: the captures are the matching rule's. */
    if (r->re) c->ncap = m > 0 ? (uint32_t)m : pcre2_get_ovector_count(c->md);
    return 1;
}

/* Candidate lists found by the tries, merged in rule order. */
#define MAX_LISTS 64
/* Prefilter candidates kept per request; more, and all its rules are. */
#define MAX_CANDIDATES 256
typedef struct {
    const uint32_t *ids[MAX_LISTS];
    uint32_t n[MAX_LISTS];
    uint32_t pos[MAX_LISTS];
    int count;
    int overflow;
} lists_t;

static int collect(void *ud, const uint32_t *ids, uint32_t n, size_t depth) {
    lists_t *l = ud;
    (void)depth;
    if (l->count == MAX_LISTS) {
        l->overflow = 1;
        return 1;
    }
    l->ids[l->count] = ids;
    l->n[l->count] = n;
    l->pos[l->count] = 0;
    l->count++;
    return 0;
}

int lx_ruleset_first(const lx_ruleset_t *rs, lx_match_ctx_t *ctx) {
    ctx->ncap = 0; /* set again only by this call's own regex match */
    if (rs == NULL || rs->n == 0) return -1;
    if (rs->linear) {
        for (uint32_t i = 0; i < rs->n; i++)
            if (rule_matches(&rs->rules[i], ctx)) return (int)i;
        return -1;
    }
    lists_t l;
    l.count = 0;
    l.overflow = 0;
    if (rs->nalways) collect(&l, rs->always, rs->nalways, 0);
    /* The prefilter's candidates and the rules it could not take; while it
     * is compiling, or when it cannot say, all the rules it is for. */
    uint32_t cand[MAX_CANDIDATES];
    if (rs->nfree) {
        const lx_multire_t *mr = __atomic_load_n(&rs->multi, __ATOMIC_ACQUIRE);
        int nc = mr && ctx->scratch
                     ? lx_multire_scan(mr, ctx->scratch, ctx->path, ctx->len, cand, MAX_CANDIDATES)
                     : -1;
        if (nc < 0) {
            collect(&l, rs->free_re, rs->nfree, 0);
        } else {
            uint32_t nleft;
            const uint32_t *left = lx_multire_left(mr, &nleft);
            if (nc > 0) collect(&l, cand, (uint32_t)nc, 0);
            if (nleft) collect(&l, left, nleft, 0);
        }
    }
    lx_trie_walk(rs->by_prefix, ctx->path, ctx->len, 0, collect, &l);
    lx_trie_walk(rs->by_suffix, ctx->path, ctx->len, 1, collect, &l);
    if (l.overflow) {
        /* A path that meets more than MAX_LISTS literals: test every rule,
         * in order. Slower, never wrong. */
        for (uint32_t i = 0; i < rs->n; i++)
            if (rule_matches(&rs->rules[i], ctx)) return (int)i;
        return -1;
    }
    for (;;) {
        uint32_t min = UINT32_MAX;
        for (int i = 0; i < l.count; i++)
            if (l.pos[i] < l.n[i] && l.ids[i][l.pos[i]] < min) min = l.ids[i][l.pos[i]];
        if (min == UINT32_MAX) return -1;
        for (int i = 0; i < l.count; i++)
            if (l.pos[i] < l.n[i] && l.ids[i][l.pos[i]] == min) l.pos[i]++;
        if (rule_matches(&rs->rules[min], ctx)) return (int)min;
    }
}

int lx_rule_max_ref(const char *target) {
    int max = -1;
    for (const char *p = target; *p; p++)
        if (*p == '$' && p[1] >= '0' && p[1] <= '9') {
            if (p[1] - '0' > max) max = p[1] - '0';
            p++;
        }
    return max;
}

int lx_rule_expand(const char *target, const lx_match_ctx_t *ctx, char *out, size_t cap,
                   lx_expand_t how) {
    static const char hex[] = "0123456789ABCDEF";
    const PCRE2_SIZE *ov = ctx->ncap ? pcre2_get_ovector_pointer(ctx->md) : NULL;
    uint32_t pairs = ctx->ncap;
    if (ov && pairs > pcre2_get_ovector_count(ctx->md)) pairs = pcre2_get_ovector_count(ctx->md);
    size_t n = 0;
    /* In a query "&", "+" and ";" separate or change parameters, so a
     * capture's own must be encoded there (a path's "%26" would otherwise
     * give the next site a parameter the client made up). */
    int in_query = how == LX_EXPAND_QUERY;
    for (const char *p = target; *p; p++) {
        if (*p == '$' && p[1] >= '0' && p[1] <= '9') {
            uint32_t k = (uint32_t)(p[1] - '0');
            p++;
            /* An unset group, or one this match did not reach, expands to
             * nothing; offsets are checked against the subject all the same,
             * so match data that is not this subject's can never be read. */
            if (k >= pairs || ov[2 * k] == PCRE2_UNSET || ov[2 * k] > ov[2 * k + 1] ||
                ov[2 * k + 1] > ctx->len)
                continue;
            for (PCRE2_SIZE i = ov[2 * k]; i < ov[2 * k + 1]; i++) {
                unsigned char c = (unsigned char)ctx->path[i];
                int enc = how != LX_EXPAND_RAW &&
                          (c <= 0x20 || c >= 0x7f || strchr("\"<>\\^`{|}#%?", c) ||
                           (in_query && strchr("&+;", c)));
                if (n + (enc ? 3 : 1) >= cap) return -ENOSPC;
                if (enc) {
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
        if (n + 1 >= cap) return -ENOSPC;
        out[n++] = *p;
    }
    out[n] = '\0';
    return (int)n;
}
