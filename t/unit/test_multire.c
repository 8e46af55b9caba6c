/* Rule sets' prefilter (dispatch/multire.c): on random sets of regex rules
 * with no literal to index (the ones it takes), the first matching rule and
 * its captures are the same with the prefilter as on the plain PCRE2 path,
 * for random paths including newlines and bytes over 0x7f. Where the build
 * has no engine, the sets all take the plain path and agree trivially; the
 * test then says so and checks only that. */
#include "multire_diff.h"
#include "tap.h"

int main(void) {
    pcre2_match_data *md1 = pcre2_match_data_create(10, NULL);
    pcre2_match_data *md2 = pcre2_match_data_create(10, NULL);
    md_src_t s = {.seed = 20261206};
    int bad = 0, used = 0;
    for (int i = 0; i < 1000; i++) {
        int u;
        bad += md_check(&s, 60, &u, md1, md2);
        used += u;
    }
    ok(bad == 0, "1000 random rule sets x 60 paths: prefilter and plain path agree (%d differ)",
       bad);
    if (lx_multire_available())
        ok(used > 900, "the prefilter held rules in %d of the 1000 sets", used);
    else
        ok(used == 0, "no engine in this build: every set on the plain path");

    /* Exactly what the issue measures: literal-free regexes, none matching. */
    static char src[1000][32];
    static lx_rule_t rules[1000];
    for (int i = 0; i < 1000; i++) {
        char err[128];
        snprintf(src[i], sizeof(src[i]), "(a|b)%05d\\d+", i);
        rules[i] = (lx_rule_t){.kind = LX_RULE_REWRITE, .regex = src[i], .target = "/x"};
        rules[i].re = lx_regex_compile(src[i], err, sizeof(err));
    }
    lx_ruleset_t rs = {.rules = rules, .n = 1000};
    ok(lx_ruleset_index(&rs) == 0, "1000 literal-free regexes indexed");
    uint32_t nm = 0;
    lx_multire_ids(rs.multi, &nm);
    if (lx_multire_available()) ok(nm == 1000, "all 1000 in the prefilter (%u)", nm);
    lx_multire_scratch_t *scratch = NULL;
    ok(lx_multire_scratch_fit(rs.multi, &scratch) == 0, "scratch fits");
    lx_match_ctx_t c = {
        .path = "/index.html", .len = 11, .method = 1, .md = md1, .scratch = scratch};
    ok(lx_ruleset_first(&rs, &c) == -1, "a path none matches: no rule");
    c.path = "/b00777123/x";
    c.len = strlen(c.path);
    ok(lx_ruleset_first(&rs, &c) == 777, "b00777123 meets rule 777 first");
    ok(c.ncap == 2 && pcre2_get_ovector_pointer(md1)[2] == 1, "with its capture of (a|b)");
    c.path = "/a00012a00011999";
    c.len = strlen(c.path);
    ok(lx_ruleset_first(&rs, &c) == 11, "two rules match: the earlier one (11, not 12) wins");
    lx_multire_scratch_free(scratch);
    lx_ruleset_free(&rs);
    pcre2_match_data_free(md1);
    pcre2_match_data_free(md2);
    return done_testing();
}
