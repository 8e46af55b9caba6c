/* Rule sets' prefilter (dispatch/multire.c): on random sets of regex rules
 * with no literal to index (the ones it takes), the first matching rule and
 * its captures are the same with the prefilter as on the plain PCRE2 path,
 * for random paths of up to 8 KiB (newlines, bytes over 0x7f, long runs of
 * one byte), each matched from every buffer alignment 0..63. Where the
 * build has no engine, the sets all take the plain path and agree
 * trivially; the test then says so and checks only that. */
#include "multire_diff.h"
#include "tap.h"

#ifdef LX_HAVE_HS
#include <hs.h>

/* A scratch allocator that can fail on demand and remembers what it freed:
 * hs_alloc_scratch frees the scratch it was asked to grow before it
 * allocates the new one, and on failure the caller must not keep the old
 * pointer (d14decf kept it: a use-after-free). */
static int fail_countdown; /* > 0: the allocation that brings it to 0 fails */
static struct {
    char *p;
    size_t n;
    int freed;
} blocks[256];
static int nblocks;

static void *test_alloc(size_t n) {
    if (fail_countdown > 0 && --fail_countdown == 0) return NULL;
    char *p = malloc(n);
    if (p && nblocks < 256) blocks[nblocks++] = (typeof(blocks[0])){p, n, 0};
    return p;
}

static void test_free(void *p) {
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].p == p && !blocks[i].freed) {
            blocks[i].freed = 1;
            break;
        }
    free(p);
}

static int in_freed_block(const void *q) {
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].freed && (const char *)q >= blocks[i].p &&
            (const char *)q < blocks[i].p + blocks[i].n)
            return 1;
    return 0;
}
#endif

/* The rules of the measure: literal-free regexes. */
static void literal_free_set(lx_ruleset_t *rs, lx_rule_t *rules, char (*src)[32], int n) {
    for (int i = 0; i < n; i++) {
        char err[128];
        snprintf(src[i], sizeof(src[i]), "(a|b)%05d\\d+", i);
        rules[i] = (lx_rule_t){.kind = LX_RULE_REWRITE, .regex = src[i], .target = "/x"};
        rules[i].re = lx_regex_compile(src[i], err, sizeof(err));
    }
    *rs = (lx_ruleset_t){.rules = rules, .n = (uint32_t)n};
}

int main(void) {
    pcre2_match_data *md1 = pcre2_match_data_create(10, NULL);
    pcre2_match_data *md2 = pcre2_match_data_create(10, NULL);
    int have = lx_multire_available();
    if (have) ok(lx_multire_selftest(), "the engine passes its self-test");

    /* The guard: what would make the engine's compile slow stays plain. */
    ok(lx_multire_eligible("(a|b)00001\\d+"), "a literal-free regex may go to the engine");
    ok(!lx_multire_eligible("[a-z]{3000}q1"), "[a-z]{3000}: too heavy to compile");
    ok(!lx_multire_eligible("(ab{20}){20}"), "nested counted repeats multiply (%.0f)",
       lx_multire_weight("(ab{20}){20}"));
    ok(lx_multire_eligible("[0-9]{4}-[0-9]{2}"), "small counted repeats are fine (%.0f)",
       lx_multire_weight("[0-9]{4}-[0-9]{2}"));
    /* An escape's counted repeat is weighed like any atom's (a break
     * review: \w{3000} weighed 1, and \c{ skipped to the next brace). */
    ok(!lx_multire_eligible("[ab]\\w{3000}[0]"), "\\w{3000} is as heavy as [a-z]{3000} (%.0f)",
       lx_multire_weight("[ab]\\w{3000}[0]"));
    ok(!lx_multire_eligible("\\d{3000}q1"), "\\d{3000} too (%.0f)",
       lx_multire_weight("\\d{3000}q1"));
    ok(!lx_multire_eligible("[ab](?:\\w{200}){100}[0]"), "nested over an escape (%.0f)",
       lx_multire_weight("[ab](?:\\w{200}){100}[0]"));
    ok(!lx_multire_eligible("[ab]\\c{[a-z]{3000}}"),
       "\\c takes one character, not a brace group (%.0f)",
       lx_multire_weight("[ab]\\c{[a-z]{3000}}"));
    ok(lx_multire_eligible("[ab]\\x{41}[0]"), "\\x{41} is one atom (%.0f)",
       lx_multire_weight("[ab]\\x{41}[0]"));
    ok(!lx_multire_eligible("(?x)a\x85"), "a raw byte over 0x7f stays off the engine");
    ok(!lx_multire_eligible("(*CR)a$"), "a (*VERB) stays off the engine");

    /* Sets of every size: the prefilter for a set of any size here. */
    lx_rules_prefilter_min = 1;
    md_src_t s = {.seed = 20261207};
    int bad = 0, used = 0;
    for (int i = 0; i < 300; i++) {
        int u;
        bad += md_check(&s, 16, i % 4 == 0 ? MD_MAX_PATH : 64, &u, md1, md2);
        used += u;
    }
    ok(bad == 0,
       "300 random rule sets x 16 paths (to 8 KiB) x 64 alignments: prefilter and "
       "plain path agree (%d differ)",
       bad);
    if (have)
        ok(used > 200, "the prefilter held rules in %d of the 300 sets", used);
    else
        ok(used == 0, "no engine in this build: every set on the plain path");

    /* The break review's case: a deny among literal-free rules, long paths
     * of 'e' with /admin/ near the end, every length to 8 KiB, every
     * alignment (a sample of lengths: each alignment meets them all). */
    lx_rules_prefilter_min = 16;
    static char fsrc[1000][32];
    static lx_rule_t rules[1000];
    lx_ruleset_t rs;
    literal_free_set(&rs, rules, fsrc, 20);
    pcre2_code_free(rules[7].re);
    rules[7] = (lx_rule_t){.kind = LX_RULE_DENY, .status = 403, .regex = "/(admin|manage)/"};
    rules[7].re = lx_regex_compile(rules[7].regex, (char[64]){0}, 64);
    ok(lx_ruleset_index(&rs) == 0 && lx_ruleset_prefilter_build(&rs, 1) == 0, "20 rules indexed");
    if (have) ok(rs.multi && lx_multire_count(rs.multi) == 20, "all 20 in the prefilter");
    lx_multire_scratch_t scratch = {0};
    static char path[MD_MAX_PATH + 1];
    int denied = 0, tried = 0;
    bad = 0;
    for (size_t len = 12; len <= MD_MAX_PATH; len += len < 300 ? 1 : 97) {
        memset(path, 'e', len);
        path[0] = '/';
        memcpy(path + len - 10, "/admin/qqq", 10);
        bad += md_compare(&rs, &scratch, path, len, 1, 64, md1, md2);
        lx_match_ctx_t c = {.path = path, .len = len, .method = 1, .md = md1, .scratch = &scratch};
        denied += lx_ruleset_first(&rs, &c) == 7;
        tried++;
    }
    ok(bad == 0 && denied == tried,
       "/eee.../admin/qqq denied at every length and alignment "
       "(%d of %d lengths; %d differ)",
       denied, tried, bad);
    lx_multire_scratch_free(&scratch);
    lx_ruleset_free(&rs);

    /* Exactly what the issue measures: 1,000 literal-free regexes. */
    literal_free_set(&rs, rules, fsrc, 1000);
    ok(lx_ruleset_index(&rs) == 0, "1000 literal-free regexes indexed");
    ok(rs.nfree == (have ? 1000u : 0u), "%s",
       have ? "all 1000 for the prefilter" : "none (no engine)");
    lx_match_ctx_t c = {
        .path = "/b00777123/x", .len = 12, .method = 1, .md = md1, .scratch = &scratch};
    ok(lx_ruleset_first(&rs, &c) == 777, "before the prefilter is built: the plain path answers");
    ok(lx_ruleset_prefilter_build(&rs, 1) == 0, "prefilter built");
    if (have) ok(lx_multire_count(rs.multi) == 1000, "all 1000 in it");
    c.path = "/index.html";
    c.len = 11;
    ok(lx_ruleset_first(&rs, &c) == -1, "a path none matches: no rule");
    c.path = "/b00777123/x";
    c.len = strlen(c.path);
    ok(lx_ruleset_first(&rs, &c) == 777, "b00777123 meets rule 777 first");
    ok(c.ncap == 2 && pcre2_get_ovector_pointer(md1)[2] == 1, "with its capture of (a|b)");
    c.path = "/a00012a00011999";
    c.len = strlen(c.path);
    ok(lx_ruleset_first(&rs, &c) == 11, "two rules match: the earlier one (11, not 12) wins");
    /* A scratch lost (as when the engine cannot grow it) is grown again,
     * not used after its free. */
    lx_multire_scratch_free(&scratch);
    ok(lx_ruleset_first(&rs, &c) == 11, "after the scratch is dropped: grown again, same answer");
#ifdef LX_HAVE_HS
    /* A grow that fails: the scratch fitted to a small set is freed by the
     * engine, and the loop must drop it, not scan with it. */
    hs_set_scratch_allocator(test_alloc, test_free);
    lx_ruleset_t small;
    static lx_rule_t srules[20];
    static char ssrc[20][32];
    literal_free_set(&small, srules, ssrc, 20);
    ok(lx_ruleset_index(&small) == 0 && lx_ruleset_prefilter_build(&small, 1) == 0,
       "a small set's prefilter");
    lx_multire_scratch_t lost = {0};
    lx_match_ctx_t sc = {.path = "/a00012345", .len = 10, .method = 1, .md = md1, .scratch = &lost};
    ok(lx_ruleset_first(&small, &sc) == 12 && lost.hs != NULL, "its scratch made");
    void *old = lost.hs;
    c.scratch = &lost;
    fail_countdown = 2; /* the sizing prototype first, then the grown scratch */
    ok(lx_ruleset_first(&rs, &c) == 11,
       "the grow for the large set fails: plain path, same answer");
    ok(fail_countdown == 0, "the grow's allocation was refused");
    ok(in_freed_block(old), "the engine freed the old scratch");
    ok(lost.hs == NULL || !in_freed_block(lost.hs), "the loop does not keep the freed scratch");
    ok(lx_ruleset_first(&rs, &c) == 11 && lost.hs != NULL && !in_freed_block(lost.hs),
       "the next request grows a new one");
    ok(lx_ruleset_first(&small, &sc) == 12, "which serves the small set again (fit made stale)");
    lx_multire_scratch_free(&lost);
    lx_ruleset_free(&small);
    hs_set_scratch_allocator(NULL, NULL);
#endif
    lx_multire_scratch_t other = {.loop = 5};
    c.scratch = &other;
    ok(lx_ruleset_first(&rs, &c) == 11, "a loop the prefilter was not built for: plain path");
    lx_multire_scratch_free(&other);
    lx_multire_scratch_free(&scratch);
    lx_ruleset_free(&rs);
    pcre2_match_data_free(md1);
    pcre2_match_data_free(md2);
    return done_testing();
}
