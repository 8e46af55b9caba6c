/* Unit tests for the compiled rule tables: CIDR sets, the byte trie, the
 * literals read out of regexes, and first-match order through the index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/cidr.h"
#include "dispatch/rules.h"
#include "dispatch/trie.h"
#include "tap.h"

static lx_addr_t addr(const char *s) {
    lx_addr_t f, l;
    lx_cidr_parse(s, &f, &l);
    return f;
}

static int collect(void *ud, const uint32_t *ids, uint32_t n, size_t depth) {
    char *out = ud;
    (void)depth;
    for (uint32_t i = 0; i < n; i++)
        sprintf(out + strlen(out), "%u,", ids[i]);
    return 0;
}

static unsigned rnd(unsigned n) {
    static unsigned seed = 7;
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) % n;
}

static lx_rule_t regex_rule(const char *re) {
    char err[256];
    lx_rule_t r = {.kind = LX_RULE_DENY, .status = 403, .regex = re};
    r.re = lx_regex_compile(re, err, sizeof(err));
    return r;
}

int main(void) {
    /* CIDR parsing and sets. */
    lx_addr_t f[4], l[4];
    ok(lx_cidr_parse("10.0.0.0/8", &f[0], &l[0]) == 0, "parse 10.0.0.0/8");
    ok(lx_cidr_parse("::1", &f[1], &l[1]) == 0, "parse ::1");
    ok(lx_cidr_parse("192.168.1.7/24", &f[2], &l[2]) == 0, "host bits are cleared");
    ok(lx_cidr_parse("2001:db8::/32", &f[3], &l[3]) == 0, "parse 2001:db8::/32");
    ok(lx_cidr_parse("10.0.0.0/33", &f[0], &l[0]) < 0, "/33 on IPv4 refused");
    ok(lx_cidr_parse("::/129", &f[0], &l[0]) < 0, "/129 refused");
    ok(lx_cidr_parse("10.0.0", &f[0], &l[0]) < 0, "three octets refused");
    ok(lx_cidr_parse("10.0.0.0/", &f[0], &l[0]) < 0, "empty prefix length refused");
    ok(lx_cidr_parse("example.com", &f[0], &l[0]) < 0, "a name refused");
    lx_cidr_parse("10.0.0.0/8", &f[0], &l[0]);
    lx_cidrset_t set;
    lx_cidrset_build(&set, f, l, 4);
    ok(lx_cidrset_has(&set, addr("10.1.2.3")), "10.1.2.3 in 10/8");
    ok(!lx_cidrset_has(&set, addr("11.0.0.0")), "11.0.0.0 not in the set");
    ok(lx_cidrset_has(&set, addr("::1")), "::1 in the set");
    ok(!lx_cidrset_has(&set, addr("::2")), "::2 not in the set");
    ok(lx_cidrset_has(&set, addr("192.168.1.255")), "192.168.1.255 in /24");
    ok(!lx_cidrset_has(&set, addr("192.168.2.0")), "192.168.2.0 not in /24");
    ok(lx_cidrset_has(&set, addr("2001:db8:ffff::1")), "2001:db8:ffff::1 in /32");
    ok(!lx_cidrset_has(&set, addr("::ffff:11.0.0.1")), "v4-mapped 11.0.0.1 not in the set");
    ok(lx_cidrset_has(&set, addr("::ffff:10.9.9.9")), "v4-mapped 10.9.9.9 in 10/8");
    lx_addr_t af[2], al[2];
    lx_cidr_parse("0.0.0.0/0", &af[0], &al[0]);
    lx_cidr_parse("::/0", &af[1], &al[1]);
    lx_cidrset_build(&set, af, al, 2);
    is_int((long long)set.n, 1, "::/0 swallows 0.0.0.0/0 when merged");
    ok(lx_cidrset_has(&set, addr("255.255.255.255")), "::/0 holds everything");
    ok(lx_cidr_parse("10.0.0.0/+8", &f[0], &l[0]) < 0, "a signed prefix length refused");
    ok(lx_cidr_parse("10.0.0.0/ 8", &f[0], &l[0]) < 0, "a blank before the length refused");

    /* One address, as luxd.cidr's contains() takes it (issue 17 #16). */
    lx_addr_t a;
    ok(lx_addr_parse("10.1.2.3", 8, &a) == 0 && a.hi == addr("10.1.2.3").hi &&
           a.lo == addr("10.1.2.3").lo,
       "an IPv4 address");
    ok(lx_addr_parse("::ffff:10.1.2.3", 15, &a) == 0 && a.lo == addr("10.1.2.3").lo,
       "its mapped IPv6 form is the same number");
    ok(lx_addr_parse("2001:db8::1", 11, &a) == 0, "an IPv6 address");
    ok(lx_addr_parse("10.1.2.3xyz", 8, &a) == 0, "only len bytes are read");
    ok(lx_addr_parse("10.0.0.0/8", 10, &a) < 0, "a prefix is no address");
    ok(lx_addr_parse("10.1.2.3\0", 9, &a) < 0, "a NUL inside refused");
    ok(lx_addr_parse("", 0, &a) < 0, "empty refused");
    ok(lx_addr_parse("-", 1, &a) < 0, "\"-\" refused");
    char big[80];
    memset(big, '1', sizeof(big));
    ok(lx_addr_parse(big, sizeof(big), &a) < 0, "longer than any address refused");

    /* The trie: prefixes shortest first, suffixes by reversed keys. */
    lx_trie_t *t = lx_trie_new();
    lx_trie_add(t, "/a/", 3, 0);
    lx_trie_add(t, "/", 1, 1);
    lx_trie_add(t, "/a/b/", 5, 2);
    lx_trie_add(t, "/b/", 3, 3);
    lx_trie_add(t, "/a/", 3, 4);
    char got[64] = "";
    lx_trie_walk(t, "/a/b/c", 6, 0, collect, got);
    is_str(got, "1,0,4,2,", "prefixes of /a/b/c, shortest first, ids in order");
    got[0] = '\0';
    lx_trie_walk(t, "/c", 2, 0, collect, got);
    is_str(got, "1,", "only / is a prefix of /c");
    is_int((long long)lx_trie_keys(t), 5, "five keys");
    lx_trie_free(t);

    /* Literals read out of regexes: only where they are certain. */
    char lit[64];
    size_t n;
    n = lx_regex_literal("^/old/(.*)$", 0, lit, sizeof(lit));
    lit[n] = '\0';
    is_str(lit, "/old/", "prefix of ^/old/(.*)$");
    n = lx_regex_literal("^/a\\.b/", 0, lit, sizeof(lit));
    lit[n] = '\0';
    is_str(lit, "/a.b/", "an escaped dot is a literal dot");
    n = lx_regex_literal("^/ab?c", 0, lit, sizeof(lit));
    lit[n] = '\0';
    is_str(lit, "/a", "a quantified character is not part of the prefix");
    is_int((long long)lx_regex_literal("^/a|^/b", 0, lit, sizeof(lit)), 0,
           "top-level alternation: no prefix");
    is_int((long long)lx_regex_literal("(?i)^/admin", 0, lit, sizeof(lit)), 0,
           "inline options: no prefix");
    is_int((long long)lx_regex_literal("^\\Q/a\\E", 0, lit, sizeof(lit)), 0, "\\Q..\\E: no prefix");
    is_int((long long)lx_regex_literal("/old/", 0, lit, sizeof(lit)), 0, "unanchored: no prefix");
    is_int((long long)lx_regex_literal("^\\d+/", 0, lit, sizeof(lit)), 0, "\\d starts: no prefix");
    n = lx_regex_literal("\\.bak$", 1, lit, sizeof(lit));
    lit[n] = '\0';
    is_str(lit, ".bak", "suffix of \\.bak$");
    is_int((long long)lx_regex_literal("\\.(bak|swp)$", 1, lit, sizeof(lit)), 0,
           "a group before $: no suffix");
    is_int((long long)lx_regex_literal("a\\$", 1, lit, sizeof(lit)), 0,
           "an escaped $ anchors nothing");
    n = lx_regex_literal("x\\\\$", 1, lit, sizeof(lit));
    lit[n] = '\0';
    is_str(lit, "x\\", "an escaped backslash before $ is a literal backslash");
    is_int((long long)lx_regex_literal("\\d$", 1, lit, sizeof(lit)), 0, "\\d$: no suffix");

    /* First match in written order, through the index: five rules, and
     * behind them enough that match nothing to make the set indexed. */
    lx_rule_t rules[5 + LX_RULES_LINEAR_MAX] = {0};
    rules[0] = regex_rule("\\.(bak|swp)$"); /* always tested */
    rules[1] = (lx_rule_t){.kind = LX_RULE_ALLOW, .prefix = "/pub/", .prefix_len = 5};
    rules[2] = regex_rule("^/pub/.*\\.txt$"); /* by prefix /pub/ */
    rules[3] = (lx_rule_t){.kind = LX_RULE_DENY, .status = 404, .prefix = "/", .prefix_len = 1};
    rules[4] = regex_rule("\\.txt$"); /* by suffix .txt */
    for (int i = 5; i < 5 + LX_RULES_LINEAR_MAX; i++)
        rules[i] = (lx_rule_t){
            .kind = LX_RULE_DENY, .status = 403, .prefix = "/nothing-here/", .prefix_len = 14};
    lx_ruleset_t rs = {.rules = rules, .n = 5 + LX_RULES_LINEAR_MAX};
    ok(lx_ruleset_index(&rs) == 0, "index built");
    ok(!rs.linear, "one rule past the limit: indexed");
    is_int(rs.nalways, 1, "one rule must always be tested");
    pcre2_match_data *md = pcre2_match_data_create(10, NULL);
    lx_match_ctx_t m = {"/pub/a.txt", 10, 1, addr("127.0.0.1"), md, 0, NULL, NULL, NULL};
    is_int(lx_ruleset_first(&rs, &m), 1, "/pub/a.txt: the allow written first wins");
    m.path = "/pub/a.bak";
    m.len = 10;
    is_int(lx_ruleset_first(&rs, &m), 0, "/pub/a.bak: the always-tested rule 0 wins");
    m.path = "/x.txt";
    m.len = 6;
    is_int(lx_ruleset_first(&rs, &m), 3, "/x.txt: the / prefix (rule 3) before the suffix (4)");
    lx_ruleset_t empty = {0};
    is_int(lx_ruleset_first(&empty, &m), -1, "an empty set matches nothing");
    ok(lx_method_bit("GET") != 0 && lx_method_bit("GET") != lx_method_bit("HEAD"), "method bits");
    is_int((long long)(lx_method_bit("TRACK") >> 63), 1, "an unknown method gets bit 63");

    /* Captures are this match's only (issue 8 #5): a three-group match of a
     * long path first, then a one-group match of a short one. */
    lx_rule_t three[1] = {regex_rule("^/(s3cr3t)/(.*)/(.*)$")};
    lx_rule_t one[1] = {regex_rule("^/go/(.*)$")};
    lx_ruleset_t rs3 = {.rules = three, .n = 1}, rs1 = {.rules = one, .n = 1};
    ok(lx_ruleset_index(&rs3) == 0 && lx_ruleset_index(&rs1) == 0, "capture sets indexed");
    char out[256];
    m.path = "/s3cr3t/first-client-secret/tail";
    m.len = strlen(m.path);
    is_int(lx_ruleset_first(&rs3, &m), 0, "the three-group regex matches");
    is_int(lx_rule_expand("$1|$2|$3", &m, out, sizeof(out), LX_EXPAND_RAW), 31,
           "its captures expand");
    is_str(out, "s3cr3t|first-client-secret|tail", "to its own groups");
    m.path = "/go/x";
    m.len = 5;
    is_int(lx_ruleset_first(&rs1, &m), 0, "the one-group regex matches");
    lx_rule_expand("/to/$1/$2/$3", &m, out, sizeof(out), LX_EXPAND_RAW);
    is_str(out, "/to/x//", "groups beyond this match's expand to nothing, never to stale offsets");
    m.path = "/nothing";
    m.len = 8;
    is_int(lx_ruleset_first(&rs1, &m), -1, "no match");
    is_int((long long)m.ncap, 0, "a failed lookup leaves no captures to read");
    lx_rule_expand("[$0$1]", &m, out, sizeof(out), LX_EXPAND_RAW);
    is_str(out, "[]", "so $0 and $1 expand to nothing");
    is_int(lx_rule_max_ref("/to/$1/$3?x=$2"), 3, "max_ref: the highest $N");
    is_int(lx_rule_max_ref("/plain$"), -1, "max_ref: none");
    lx_ruleset_free(&rs3);
    lx_ruleset_free(&rs1);

    /* At the limit a set is tested rule by rule, one past it through the
     * index; either way the first match is the same. Random sets of
     * prefix, suffix and regex rules, random paths over the same bytes. */
    static const char *const pieces[] = {"/", "a", "b", ".txt", "/a/", "/b", "x"};
    static const char *const regexes[] = {"^/a/.*b$", "b", "\\.txt$", "^/(a|b)", "a{2}", "^/b/"};
    int differ = 0, linear_seen = 0, indexed_seen = 0;
    for (int round = 0; round < 400; round++) {
        uint32_t nr = 1 + rnd(2 * LX_RULES_LINEAR_MAX);
        lx_rule_t rr[2 * LX_RULES_LINEAR_MAX], alone[1];
        static char texts[2 * LX_RULES_LINEAR_MAX][16];
        for (uint32_t i = 0; i < nr; i++) {
            const char *pa = pieces[rnd(7)], *pb = pieces[rnd(7)];
            snprintf(texts[i], sizeof(texts[i]), "%s%s", pa, pb);
            switch (rnd(3)) {
            case 0:
                rr[i] = (lx_rule_t){
                    .kind = LX_RULE_DENY, .prefix = texts[i], .prefix_len = strlen(texts[i])};
                break;
            case 1:
                rr[i] = (lx_rule_t){.kind = LX_RULE_DENY};
                rr[i].suffix = (const char **)malloc(sizeof(char *));
                rr[i].suffix_len = malloc(sizeof(size_t));
                rr[i].suffix[0] = texts[i];
                rr[i].suffix_len[0] = strlen(texts[i]);
                rr[i].nsuffix = 1;
                break;
            default: rr[i] = regex_rule(regexes[rnd(6)]);
            }
        }
        lx_ruleset_t set_rs = {.rules = rr, .n = nr};
        lx_ruleset_index(&set_rs);
        if (nr == LX_RULES_LINEAR_MAX) linear_seen += set_rs.linear;
        if (nr == LX_RULES_LINEAR_MAX + 1) indexed_seen += !set_rs.linear;
        for (int p = 0; p < 40; p++) {
            char path[64] = "";
            for (int k = 1 + (int)rnd(4); k > 0; k--)
                strcat(path, pieces[rnd(7)]);
            m.path = path;
            m.len = strlen(path);
            int want = -1;
            for (uint32_t i = 0; i < nr && want < 0; i++) {
                alone[0] = rr[i];
                lx_ruleset_t single = {.rules = alone, .n = 1, .linear = 1};
                if (lx_ruleset_first(&single, &m) == 0) want = (int)i;
            }
            differ += lx_ruleset_first(&set_rs, &m) != want;
        }
        for (uint32_t i = 0; i < nr; i++) {
            free(rr[i].suffix);
            free(rr[i].suffix_len);
        }
        lx_ruleset_free(&set_rs);
    }
    ok(linear_seen > 0 && indexed_seen > 0, "sets at the limit and one past were both drawn");
    is_int(differ, 0, "random sets: the first match through the index is the rule-by-rule one");

    pcre2_match_data_free(md);
    lx_ruleset_free(&rs);
    return done_testing();
}
