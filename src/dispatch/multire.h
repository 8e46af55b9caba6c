/* A set of regexes matched in one pass (vectorscan, where it is built in):
 * which of them may match a path, so that PCRE2 runs only on those. It is a
 * prefilter, never the judge: each pattern is compiled in vectorscan's
 * prefilter mode, which may report a pattern that does not match but never
 * misses one that does, and the caller confirms each candidate with PCRE2,
 * in rule order. So first-match semantics and captures stay PCRE2's. */
#ifndef LX_MULTIRE_H
#define LX_MULTIRE_H

#include <stddef.h>
#include <stdint.h>

typedef struct lx_multire_s lx_multire_t;

/* Per-thread scratch space for lx_multire_scan; NULL is a valid empty one. */
typedef struct lx_multire_scratch_s lx_multire_scratch_t;

/* Whether this build has a multi-pattern engine. */
int lx_multire_available(void);

/* Compiles pats[0..n) (NUL-terminated, PCRE syntax, each already compiled
 * by PCRE2), reported by ids[i]. *out is NULL when there is no engine, no
 * pattern, or none it takes. A pattern the engine cannot take even as a
 * prefilter is left out and its id written to left_out (room for n;
 * *nleft set): the caller keeps testing it the plain way. Returns 0 or
 * -ENOMEM. */
int lx_multire_build(const char *const *pats, const uint32_t *ids, uint32_t n, lx_multire_t **out,
                     uint32_t *left_out, uint32_t *nleft);
void lx_multire_free(lx_multire_t *m);

/* The ids of m, ascending (every pattern it holds). */
const uint32_t *lx_multire_ids(const lx_multire_t *m, uint32_t *n);

/* Grows *s so that it serves m (and whatever it served before). 0 or
 * -ENOMEM. Called where the thread that owns *s adopts m's generation. */
int lx_multire_scratch_fit(const lx_multire_t *m, lx_multire_scratch_t **s);
void lx_multire_scratch_free(lx_multire_scratch_t *s);

/* The candidates for subject[0..len): their ids, ascending, into out (room
 * for cap). Returns how many, or -1 when the scan could not say (no fitting
 * scratch, or more than cap candidates): then every id of m is one. */
int lx_multire_scan(const lx_multire_t *m, lx_multire_scratch_t *s, const char *subject, size_t len,
                    uint32_t *out, uint32_t cap);

#endif
