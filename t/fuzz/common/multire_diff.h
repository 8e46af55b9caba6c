/* The differential check of rule sets' prefilter (dispatch/multire.c),
 * shared by t/unit/test_multire.c (random sets from a seed) and
 * t/fuzz/fuzz_multire.c (sets from the fuzzer's bytes): the same rules
 * matched with the prefilter (a scratch that fits) and without (no scratch:
 * every regex rule tested by PCRE2 in order, the plain path) must give the
 * same first rule and the same captures. */
#ifndef LX_MULTIRE_DIFF_H
#define LX_MULTIRE_DIFF_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/rules.h"

/* Pieces the generator strings together: what literal-free regexes are
 * made of, constructs the engine only approximates (back-references,
 * lookarounds, \b, inline options) and PCRE2 syntax it may refuse. */
static const char *const md_atoms[] = {
    "a",     "b",        "c",           "/",       ".",        "-",      "_",
    "0",     "[a-c]",    "[^/]",        "\\d",     "\\w",      "\\s",    "\\.",
    "(a|b)", "(?:ab|c)", "(x|/)",       "a*",      "b+",       "c?",     "[0-9]{1,3}",
    "\\w*?", ".*",       ".+",          "$",       "\\z",      "\\Z",    "\\b",
    "(?=a)", "(?!b)",    "(?<=/)",      "(a)\\1",  "(?i)A",    "(?i:B)", "\\Ac",
    "%",     "\\x41",    "[[:alpha:]]", "(*UTF)a", "\\Qa.\\E", "a{2}",   "(?<n>c)\\k<n>",
    "^",     "|",        "\\n",         "[\\n/]",  "(?s).",    "(?m)$",  "\\K",
    "(?#x)", "a++",      "(?>a|ab)",    "\\p{L}",  "\\R",
};
static const char md_path_bytes[] = "abcABC/.-_0%\n\xe9\xff ";

typedef struct {
    const unsigned char *p, *end;
    unsigned seed;
    int from_bytes;
} md_src_t;

static unsigned md_next(md_src_t *s, unsigned n) {
    if (s->from_bytes) return s->p < s->end ? (unsigned)(*s->p++) % n : 0;
    s->seed = s->seed * 1103515245u + 12345u;
    return (s->seed >> 16) % n;
}

/* One regex: 1 to 5 atoms, never a literal prefix (no leading ^ + literal)
 * so that most land in the prefilter, sometimes a literal suffix. */
static void md_regex(md_src_t *s, char *out, size_t cap) {
    size_t n = 0;
    unsigned k = 1 + md_next(s, 5);
    out[0] = '\0';
    if (md_next(s, 8) == 0) n += (size_t)snprintf(out + n, cap - n, "(.)");
    for (unsigned i = 0; i < k && n + 24 < cap; i++) {
        const char *a = md_atoms[md_next(s, sizeof(md_atoms) / sizeof(*md_atoms))];
        if (i == 0 && strcmp(a, "^") == 0) a = "^.";
        n += (size_t)snprintf(out + n, cap - n, "%s", a);
    }
}

static void md_path(md_src_t *s, char *out, size_t *len) {
    size_t n = md_next(s, 12);
    for (size_t i = 0; i < n; i++)
        out[i] = md_path_bytes[md_next(s, sizeof(md_path_bytes) - 1)];
    out[n] = '\0';
    *len = n;
}

/* Builds a set of up to 24 rules and matches npaths paths both ways. Returns
 * the number of disagreements (printed); *used says whether the prefilter
 * held any rule. */
static int md_check(md_src_t *s, int npaths, int *used, pcre2_match_data *md1,
                    pcre2_match_data *md2) {
    static char src[24][256];
    lx_rule_t rules[24];
    uint32_t n = 1 + md_next(s, 24), k = 0;
    memset(rules, 0, sizeof(rules));
    for (uint32_t i = 0; i < n; i++) {
        char err[256];
        md_regex(s, src[k], sizeof(src[k]));
        pcre2_code *re = lx_regex_compile(src[k], err, sizeof(err));
        if (re == NULL) continue;
        rules[k] = (lx_rule_t){.kind = LX_RULE_DENY, .status = 403, .regex = src[k], .re = re};
        if (md_next(s, 6) == 0) rules[k].methods = lx_method_bit("POST");
        k++;
    }
    int bad = 0;
    lx_ruleset_t rs = {.rules = rules, .n = k};
    *used = 0;
    if (k && lx_ruleset_index(&rs) == 0) {
        lx_multire_scratch_t *scratch = NULL;
        *used = rs.multi != NULL;
        if (lx_multire_scratch_fit(rs.multi, &scratch) != 0) abort();
        for (int i = 0; i < npaths; i++) {
            char path[16];
            size_t len;
            md_path(s, path, &len);
            int method = md_next(s, 2) ? 3 /* POST */ : 1 /* GET */;
            lx_match_ctx_t a = {
                .path = path, .len = len, .method = method, .md = md1, .scratch = scratch};
            lx_match_ctx_t b = {.path = path, .len = len, .method = method, .md = md2};
            int x = lx_ruleset_first(&rs, &a), y = lx_ruleset_first(&rs, &b);
            int same = x == y && a.ncap == b.ncap;
            if (same && x >= 0 && a.ncap) {
                const PCRE2_SIZE *o1 = pcre2_get_ovector_pointer(md1);
                const PCRE2_SIZE *o2 = pcre2_get_ovector_pointer(md2);
                same = memcmp(o1, o2, 2 * a.ncap * sizeof(*o1)) == 0;
            }
            if (!same) {
                bad++;
                printf("# prefilter %d, plain %d on \"", x, y);
                for (size_t j = 0; j < len; j++)
                    printf((unsigned char)path[j] < 0x20 || (unsigned char)path[j] > 0x7e
                               ? "\\x%02x"
                               : "%c",
                           (unsigned char)path[j]);
                printf("\" method %d; rules:", method);
                for (uint32_t j = 0; j < k; j++)
                    printf(" /%s/%s", rules[j].regex, rules[j].methods ? "POST" : "");
                printf("\n");
            }
        }
        lx_multire_scratch_free(scratch);
    }
    lx_ruleset_free(&rs);
    return bad;
}

#endif
