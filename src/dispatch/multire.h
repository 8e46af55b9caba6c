/* A set of regexes matched in one pass (Hyperscan, where it is built in):
 * which of them may match a path, so that PCRE2 runs only on those. It is a
 * prefilter, never the judge: each pattern is compiled in the engine's
 * prefilter mode, which may report a pattern that does not match but never
 * misses one that does, and the caller confirms each candidate with PCRE2,
 * in rule order. So first-match semantics and captures stay PCRE2's.
 *
 * Hyperscan 5.4 (Debian's libhyperscan-dev), not vectorscan: Debian 12's
 * vectorscan 5.4.9 missed matches on AVX-512 machines depending on the
 * subject's length and alignment (doc/design.md). The engine must also pass
 * lx_multire_selftest before any database of it is used. */
#ifndef LX_MULTIRE_H
#define LX_MULTIRE_H

#include <stddef.h>
#include <stdint.h>

typedef struct lx_multire_s lx_multire_t;

/* One loop's scratch space for lx_multire_scan, grown on that loop when it
 * first meets a database it does not fit. Zero it, then set loop; epoch
 * starts at 0 and lx_multire_scan moves it on. */
typedef struct {
    void *hs;       /**< hs_scratch_t, or NULL */
    uint32_t epoch; /**< bumped whenever hs is lost: every fit is then stale */
    uint32_t loop;  /**< the owning loop's index (0..nloops-1 of the databases) */
} lx_multire_scratch_t;

/* Whether this build has a multi-pattern engine. */
int lx_multire_available(void);
/* For luxd -V: "Hyperscan 5.4.0 ..." or "none (built without libhs)". */
const char *lx_multire_version(void);

/* Whether pattern (PCRE syntax, non-UTF, already compiled by PCRE2) may go
 * to the engine: printable ASCII only (PCRE2 and the engine read bytes over
 * 0x7f differently, e.g. (?x) and 0x85), no (*VERB), and a syntactic
 * compile weight (atoms times counted repeats, nested) of at most
 * LX_MULTIRE_MAX_WEIGHT: the engine's compile time grows with counted
 * repeats ([a-z]{3000}: 0.1 s alone, 19 s for 200), so heavier patterns stay
 * on the plain path and never bound start or reload. */
#define LX_MULTIRE_MAX_WEIGHT 256
int lx_multire_eligible(const char *pattern);
/* The weight itself (saturating at 1e9); exposed for the unit tests. */
double lx_multire_weight(const char *pattern);

/* Runs once per process (later calls return the first answer): compiles
 * /(admin|manage)/ and scans /eee.../admin/qqq and the like at every length
 * up to 8 KiB and every buffer alignment 0..63, and without the word. 1 when
 * the engine found exactly the matches, else 0 (then use it never). */
int lx_multire_selftest(void);

/* Compiles pats[0..n) (NUL-terminated), reported by ids[i] (ascending), for
 * nloops loops. What the engine refuses (it names the pattern) is left out
 * and listed by lx_multire_left: the caller keeps testing those. *out is
 * NULL when nothing compiled. Returns 0 or -ENOMEM. */
int lx_multire_build(const char *const *pats, const uint32_t *ids, uint32_t n, uint32_t nloops,
                     lx_multire_t **out);
void lx_multire_free(lx_multire_t *m);

/* m's database as bytes (free() them): what a compile in another process
 * hands back (multire_wire.c). *buf NULL and 0 for a NULL m. Returns 0,
 * -ENOMEM, or -ENOTSUP without the engine. */
int lx_multire_serialize(const lx_multire_t *m, char **buf, size_t *len);
/* The prefilter of db[0..len) (lx_multire_serialize's bytes), holding n
 * patterns, with the ids left[0..nleft) (ascending) it does not hold, for
 * nloops loops. *out NULL when n is 0. Returns 0, -ENOMEM, -EINVAL (not a
 * database this engine reads) or -ENOTSUP without the engine. */
int lx_multire_load(const char *db, size_t len, uint32_t n, const uint32_t *left, uint32_t nleft,
                    uint32_t nloops, lx_multire_t **out);

/* The compile in another process (multire_wire.c). The child serves
 * requests on fd until it ends: 0 then, else -errno. The parent makes a
 * request's bytes (ids ascending, as lx_multire_build wants them; free()
 * them), writes them (lx_multire_write: 0 or -errno, never SIGPIPE), reads
 * one answer's bytes (free() them; -EPIPE: the stream ended), and parses
 * them against the request's ids[0..n): 0 with *out (NULL when the engine
 * held none), or -errno (-EPROTO: an answer that does not fit the
 * request). After an error on a stream it is in doubt: end that child. */
int lx_multire_serve(int fd);
int lx_multire_request(const char *const *pats, const uint32_t *ids, uint32_t n, char **out,
                       size_t *outlen);
int lx_multire_write(int fd, const void *buf, size_t len);
int lx_multire_read_answer(int fd, char **out, size_t *outlen);
int lx_multire_parse_answer(const char *a, size_t len, const uint32_t *ids, uint32_t n,
                            uint32_t nloops, lx_multire_t **out);

/* The ids of m that it does not hold, ascending. */
const uint32_t *lx_multire_left(const lx_multire_t *m, uint32_t *n);
/* How many patterns m holds. */
uint32_t lx_multire_count(const lx_multire_t *m);

/* The candidates for subject[0..len): their ids, ascending, into out (room
 * for cap). Returns how many, or -1 when the scan cannot say (no scratch
 * for it, more than cap candidates): then every id of m is one. Grows s to
 * fit m first when it does not (on the loop that owns s). */
int lx_multire_scan(const lx_multire_t *m, lx_multire_scratch_t *s, const char *subject, size_t len,
                    uint32_t *out, uint32_t cap);
void lx_multire_scratch_free(lx_multire_scratch_t *s);

#endif
