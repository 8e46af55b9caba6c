/* The differential check of rule sets' prefilter (dispatch/multire.c),
 * shared by t/unit/test_multire.c (random sets from a seed) and
 * t/fuzz/fuzz_multire.c (sets from the fuzzer's bytes): the same rules
 * matched with the prefilter (a scratch that fits) and without (no scratch:
 * every regex rule tested by PCRE2 in order, the plain path) must give the
 * same first rule and the same captures. Long paths (up to 8 KiB) are
 * matched from every buffer alignment 0..63: Debian's vectorscan 5.4.9
 * missed matches depending on both, and paths of 11 bytes in fixed buffers
 * never showed it. */
#ifndef LX_MULTIRE_DIFF_H
#define LX_MULTIRE_DIFF_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/rules.h"

/* Pieces the generator strings together: what literal-free regexes are
 * made of, constructs the engine only approximates (back-references,
 * lookarounds, \b, inline options), PCRE2 syntax it may refuse, and bytes
 * the two read differently (raw bytes over 0x7f, which must stay off it). */
static const char *const md_atoms[] = {
    "a",
    "b",
    "c",
    "/",
    ".",
    "-",
    "_",
    "0",
    "[a-c]",
    "[^/]",
    "\\d",
    "\\w",
    "\\s",
    "\\.",
    "(a|b)",
    "(?:ab|c)",
    "(x|/)",
    "a*",
    "b+",
    "c?",
    "[0-9]{1,3}",
    "\\w*?",
    ".*",
    ".+",
    "$",
    "\\z",
    "\\Z",
    "\\b",
    "(?=a)",
    "(?!b)",
    "(?<=/)",
    "(a)\\1",
    "(?i)A",
    "(?i:B)",
    "\\Ac",
    "%",
    "\\x41",
    "[[:alpha:]]",
    "(*UTF)a",
    "\\Qa.\\E",
    "a{2}",
    "(?<n>c)\\k<n>",
    "^",
    "|",
    "\\n",
    "[\\n/]",
    "(?s).",
    "(?m)$",
    "\\K",
    "(?#x)",
    "a++",
    "(?>a|ab)",
    "\\p{L}",
    "\\R",
    "(admin|manage)",
    "/(admin|manage)/",
    "(?x) a b",
    "(?x)\x85",
    "\x85",
    "\\x85",
    "[[:space:]]",
    "\\v",
    "\\h",
    "\\N",
    "(?i)admin",
    "[\\x80-\\xff]",
    "\\W",
    "[^a]{2,4}",
    "e{3,}",
    "(?:/e+)+",
    "q$",
    "\\S+",
    "\\D",
    "(?i)[A-C]",
    "\\t",
};
static const char md_path_bytes[] = "abcABC/.-_0%\n\xe9\xff \x85\xa0\x0b\r\teqnm";
static const char *const md_words[] = {"/admin/", "/manage/", "a00012", "/eeeeee", "b1",
                                       "qqq",     "\n",       "ADMIN",  "/c/"};

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

/* A path of up to max bytes: single bytes and, in long ones, words that
 * the atoms match, scattered. */
static size_t md_path(md_src_t *s, char *out, size_t max) {
    size_t want = md_next(s, 13);
    if (md_next(s, 4) == 0) /* long: two draws, as a fuzzer's byte is < 256 */
        want = (((size_t)md_next(s, 256) << 5) | md_next(s, 32)) % (max + 1);
    size_t n = 0;
    while (n < want) {
        if (md_next(s, 16) == 0) {
            const char *w = md_words[md_next(s, sizeof(md_words) / sizeof(*md_words))];
            size_t wl = strlen(w);
            if (n + wl > want) break;
            memcpy(out + n, w, wl);
            n += wl;
        } else {
            /* Long stretches of one byte, as /eeee...: the engine's
             * vector loops, not only its tails. */
            char c = md_path_bytes[md_next(s, sizeof(md_path_bytes) - 1)];
            size_t run = md_next(s, 4) == 0 ? 1 + md_next(s, 200) : 1;
            for (size_t i = 0; i < run && n < want; i++)
                out[n++] = c;
        }
    }
    return n;
}

#define MD_MAX_PATH 8192
#define MD_RULES    40

static void md_print(const char *what, const char *p, size_t len) {
    printf("# %s (%zu bytes) \"", what, len);
    for (size_t j = 0; j < len && j < 300; j++)
        printf((unsigned char)p[j] < 0x20 || (unsigned char)p[j] > 0x7e ? "\\x%02x" : "%c",
               (unsigned char)p[j]);
    printf("%s\"\n", len > 300 ? "..." : "");
}

/* The first rule of rs for path[0..len) with the prefilter (scratch), from
 * each of naligns buffer alignments, against the plain path's answer.
 * Returns how many alignments disagree. */
static int md_compare(lx_ruleset_t *rs, lx_multire_scratch_t *scratch, const char *path, size_t len,
                      int method, int naligns, pcre2_match_data *md1, pcre2_match_data *md2) {
    static char *buf;
    if (buf == NULL && (buf = aligned_alloc(64, MD_MAX_PATH + 128)) == NULL) abort();
    lx_match_ctx_t b = {.path = path, .len = len, .method = method, .md = md2};
    int y = lx_ruleset_first(rs, &b), bad = 0;
    for (int al = 0; al < naligns; al++) {
        memcpy(buf + al, path, len);
        buf[al + len] = '\0';
        lx_match_ctx_t a = {
            .path = buf + al, .len = len, .method = method, .md = md1, .scratch = scratch};
        int x = lx_ruleset_first(rs, &a);
        int same = x == y && a.ncap == b.ncap;
        if (same && x >= 0 && a.ncap) {
            const PCRE2_SIZE *o1 = pcre2_get_ovector_pointer(md1);
            const PCRE2_SIZE *o2 = pcre2_get_ovector_pointer(md2);
            same = memcmp(o1, o2, 2 * a.ncap * sizeof(*o1)) == 0;
        }
        if (!same) {
            bad++;
            printf("# prefilter %d, plain %d, method %d, alignment %d; rules:", x, y, method, al);
            for (uint32_t j = 0; j < rs->n; j++)
                printf(" /%s/%s", rs->rules[j].regex, rs->rules[j].methods ? "POST" : "");
            printf("\n");
            md_print("path", path, len);
        }
    }
    return bad;
}

/* Builds a set of 1 to MD_RULES rules, its prefilter at once, and matches
 * npaths paths (up to maxpath bytes; the long ones from every alignment)
 * both ways. Returns the number of disagreements (printed); *used says
 * whether the prefilter held any rule. */
static int md_check(md_src_t *s, int npaths, size_t maxpath, int *used, pcre2_match_data *md1,
                    pcre2_match_data *md2) {
    static char src[MD_RULES][256];
    static char path[MD_MAX_PATH + 1];
    lx_rule_t rules[MD_RULES];
    uint32_t n = 1 + md_next(s, MD_RULES), k = 0;
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
    if (maxpath > MD_MAX_PATH) maxpath = MD_MAX_PATH;
    if (k && lx_ruleset_index(&rs) == 0 && lx_ruleset_prefilter_build(&rs, 1) == 0) {
        lx_multire_scratch_t scratch = {0};
        *used = rs.multi != NULL;
        for (int i = 0; i < npaths; i++) {
            size_t len = md_path(s, path, maxpath);
            path[len] = '\0';
            int method = md_next(s, 2) ? 3 /* POST */ : 1 /* GET */;
            bad += md_compare(&rs, &scratch, path, len, method, 64, md1, md2);
        }
        lx_multire_scratch_free(&scratch);
    }
    lx_ruleset_free(&rs);
    return bad;
}

#endif
