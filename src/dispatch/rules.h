/* Ordered rule lists (access, rewrite, redirect) compiled for lookup cost that
 * does not grow with their length: each rule is indexed by a literal prefix
 * or suffix (its own, or one read out of its regex), and only rules whose
 * literal fits the path are ever tested, in the order they were written. */
#ifndef LX_RULES_H
#define LX_RULES_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "multire.h"
#include "trie.h"

enum { LX_RULE_ALLOW, LX_RULE_DENY, LX_RULE_REWRITE, LX_RULE_REDIRECT };

typedef struct {
    int kind;            /**< LX_RULE_* */
    int status;          /**< deny and redirect status */
    uint64_t methods;    /**< bit per llhttp method; 0: any method */
    const char *prefix;  /**< path must start with this, or NULL */
    size_t prefix_len;   /**< strlen(prefix) */
    const char **suffix; /**< path must end with one of these */
    size_t *suffix_len;  /**< their lengths */
    size_t nsuffix;      /**< entries in suffix; 0: no condition */
    pcre2_code *re;      /**< path must match, or NULL */
    int re_utf;          /**< re is a UTF pattern ((*UTF)): see rule_matches */
    const char *regex;   /**< its source, for -T */
    lx_cidrset_t from;   /**< client address must be in it */
    int has_from;        /**< from applies */
    const char *target;  /**< rewrite or redirect target with $1..$9 */
    const char *file;    /**< where it was written */
    int line;
} lx_rule_t;

typedef struct {
    lx_rule_t *rules;     /**< in the order written */
    uint32_t n;           /**< entries in rules */
    lx_trie_t *by_prefix; /**< rule ids by literal prefix */
    lx_trie_t *by_suffix; /**< rule ids by reversed literal suffix */
    uint32_t *always;     /**< rules with no literal to index: always tested */
    uint32_t nalways;     /**< entries in always */
    int linear;           /**< no index: few enough rules to test each in turn */
    /* Regex rules with no literal to index that the prefilter may hold
     * (lx_multire_eligible), ascending: tested each until multi is there. */
    uint32_t *free_re;
    uint32_t nfree;      /**< entries in free_re */
    lx_multire_t *multi; /**< free_re as one prefilter, published (atomic, release) by
                              lx_ruleset_prefilter_build; NULL: not (yet) */
} lx_ruleset_t;

/* A set needs this many prefilter-eligible regex rules with no literal for
 * them to go to a prefilter (below it they are tested each, as cheap); the
 * unit tests and the fuzzer lower it. */
extern uint32_t lx_rules_prefilter_min;

/* Up to this many rules a set is tested rule by rule: its index would cost
 * more to walk than the rules to test, and ten nodes of memory per literal
 * byte (a 10,000-vhost config's one deny rule each: 15 MB of tries). */
#define LX_RULES_LINEAR_MAX 8

/* What a rule is matched against. */
typedef struct {
    const char *path;     /**< decoded, normalised */
    size_t len;           /**< strlen(path) */
    int method;           /**< llhttp_method_t */
    lx_addr_t addr;       /**< client address */
    pcre2_match_data *md; /**< per-loop; holds the captures of a regex match */
    uint32_t ncap;        /**< ovector pairs the last match set; 0: no regex matched */
    /* When set, addr is not known yet and this finds it (the connection
     * asks the kernel once, and only for a rule that has `from`). */
    lx_addr_t (*addr_of)(void *ud);
    void *ud; /**< for addr_of */
    /* The loop's scratch for rule sets' prefilters (grown by the scan when
     * it meets a database it does not fit); NULL: no prefilter is used. */
    lx_multire_scratch_t *scratch;
} lx_match_ctx_t;

/* Builds the index after rules[] is filled. Returns 0 or -ENOMEM. The
 * prefilter of free_re is not compiled here (see below). */
int lx_ruleset_index(lx_ruleset_t *rs);

/* Compiles rs's prefilter for nloops loops and publishes it (an atomic
 * release store of rs->multi); until then, and when this fails, the plain
 * path tests every rule of free_re. In this process: for tests (the server
 * compiles in a child, config/prefilter.c). Returns 0, or -ENOMEM. */
int lx_ruleset_prefilter_build(lx_ruleset_t *rs, uint32_t nloops);
/* The request (dispatch/multire_wire.c) that compiles rs's free_re in
 * another process, as bytes (free() them): they name the set exactly.
 * Returns 0 or -ENOMEM. */
int lx_ruleset_prefilter_request(const lx_ruleset_t *rs, char **req, size_t *len);
/* Publishes m (built elsewhere from free_re, in a child process say) as
 * rs's prefilter; rs owns it from here. Once per set: rs->multi was NULL. */
void lx_ruleset_prefilter_publish(lx_ruleset_t *rs, lx_multire_t *m);
void lx_ruleset_free(lx_ruleset_t *rs);

/* The first rule that matches, or -1. After a match of a rule with a regex,
 * ctx->md holds its captures and ctx->ncap says how many of its pairs that
 * match set; after any other outcome ctx->ncap is 0, so nothing can read the
 * offsets an earlier match (another request's) left in the match data. */
int lx_ruleset_first(const lx_ruleset_t *rs, lx_match_ctx_t *ctx);

/* Compiles a regex with JIT. Returns NULL and writes "message at offset N"
 * into err on failure. */
pcre2_code *lx_regex_compile(const char *src, char *err, size_t errlen);

/* How captured bytes are written by lx_rule_expand. A capture is data: it
 * must not become syntax of the URL it is put into. */
typedef enum {
    LX_EXPAND_RAW,   /**< as they are (a rewrite's path, cleaned afterwards) */
    LX_EXPAND_URL,   /**< a whole URL: bytes that may not stand in one are
                          encoded; after the target's own '?' also "&+;" */
    LX_EXPAND_QUERY, /**< a query: the URL set plus "&+;" from the start */
} lx_expand_t;

/* Expands $0..$9 in target with the captures of the last match in ctx (of
 * ctx->path). A group the match did not set, or one beyond ctx->ncap,
 * expands to nothing, and no capture is read outside ctx->path[0..len).
 * Returns the length written (at most cap - 1, NUL-terminated), or -ENOSPC.
 * `how` says which captured bytes are percent-encoded (a decoded "%", "?"
 * or, in a query, "&" from the path is encoded again). */
int lx_rule_expand(const char *target, const lx_match_ctx_t *ctx, char *out, size_t cap,
                   lx_expand_t how);

/* The highest $N that target refers to, or -1 when it has none: the config
 * loader refuses a target that names a group its regex does not have. */
int lx_rule_max_ref(const char *target);

/* Bit for a method name ("GET"); bit 63 for one llhttp does not know. */
uint64_t lx_method_bit(const char *name);

/* The literal a regex needs at the start (^abc) or end (abc$) of the path;
 * exposed for the unit tests. Returns the length, 0 when there is none. */
size_t lx_regex_literal(const char *src, int suffix, char *out, size_t cap);

#endif
