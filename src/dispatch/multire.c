#include "multire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef LX_HAVE_HS
#include <hs.h>

struct lx_multire_s {
    hs_database_t *db;
    uint32_t *ids; /* ascending */
    uint32_t n;
};

/* Prefilter: a superset of PCRE2's matches, taking constructs the engine
 * cannot run exactly (back-references, some lookarounds) by approximation.
 * Single match: a pattern is reported once however often it matches. Empty
 * matches allowed: "^$" or "x*" are rules too. */
#define FLAGS (HS_FLAG_PREFILTER | HS_FLAG_SINGLEMATCH | HS_FLAG_ALLOWEMPTY)

int lx_multire_available(void) {
    return 1;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int lx_multire_build(const char *const *pats, const uint32_t *ids, uint32_t n, lx_multire_t **out,
                     uint32_t *left_out, uint32_t *nleft) {
    *out = NULL;
    *nleft = 0;
    if (n == 0) return 0;
    const char **p = malloc(n * sizeof(*p));
    unsigned *fl = malloc(n * sizeof(*fl)), *id = malloc(n * sizeof(*id));
    lx_multire_t *m = calloc(1, sizeof(*m));
    uint32_t k = 0;
    if (p == NULL || fl == NULL || id == NULL || m == NULL) goto nomem;
    /* What the engine cannot parse at all is left out before the set is
     * compiled, so that one such rule does not cost the rest. */
    for (uint32_t i = 0; i < n; i++) {
        hs_expr_info_t *info = NULL;
        hs_compile_error_t *err = NULL;
        if (hs_expression_info(pats[i], FLAGS, &info, &err) != HS_SUCCESS) {
            hs_free_compile_error(err);
            left_out[(*nleft)++] = ids[i];
            continue;
        }
        free(info); /* allocated with the engine's allocator: malloc by default */
        p[k] = pats[i];
        fl[k] = FLAGS;
        id[k] = ids[i];
        k++;
    }
    /* A pattern can still fail in the set (too large, say): the compile
     * names it; it is left out and the rest compiled again. */
    while (k > 0) {
        hs_compile_error_t *err = NULL;
        if (hs_compile_multi(p, fl, id, k, HS_MODE_BLOCK, NULL, &m->db, &err) == HS_SUCCESS) break;
        int bad = err ? err->expression : -1;
        hs_free_compile_error(err);
        m->db = NULL;
        if (bad < 0 || (uint32_t)bad >= k) { /* the whole set: all plain */
            for (uint32_t i = 0; i < k; i++)
                left_out[(*nleft)++] = id[i];
            k = 0;
            break;
        }
        left_out[(*nleft)++] = id[bad];
        memmove(p + bad, p + bad + 1, (k - bad - 1) * sizeof(*p));
        memmove(id + bad, id + bad + 1, (k - bad - 1) * sizeof(*id));
        k--;
    }
    qsort(left_out, *nleft, sizeof(*left_out), cmp_u32);
    if (k == 0) {
        free(m);
        m = NULL;
    } else {
        m->ids = malloc(k * sizeof(*m->ids));
        if (m->ids == NULL) goto nomem;
        for (uint32_t i = 0; i < k; i++)
            m->ids[i] = id[i];
        qsort(m->ids, k, sizeof(*m->ids), cmp_u32);
        m->n = k;
    }
    free(p);
    free(fl);
    free(id);
    *out = m;
    return 0;
nomem:
    if (m) hs_free_database(m->db);
    free(m);
    free(p);
    free(fl);
    free(id);
    return -ENOMEM;
}

void lx_multire_free(lx_multire_t *m) {
    if (m == NULL) return;
    hs_free_database(m->db);
    free(m->ids);
    free(m);
}

const uint32_t *lx_multire_ids(const lx_multire_t *m, uint32_t *n) {
    *n = m ? m->n : 0;
    return m ? m->ids : NULL;
}

int lx_multire_scratch_fit(const lx_multire_t *m, lx_multire_scratch_t **s) {
    if (m == NULL) return 0;
    hs_scratch_t *hs = (hs_scratch_t *)*s;
    if (hs_alloc_scratch(m->db, &hs) != HS_SUCCESS) return -ENOMEM;
    *s = (lx_multire_scratch_t *)hs;
    return 0;
}

void lx_multire_scratch_free(lx_multire_scratch_t *s) {
    hs_free_scratch((hs_scratch_t *)s);
}

typedef struct {
    uint32_t *out;
    uint32_t n, cap;
} found_t;

static int on_match(unsigned id, unsigned long long from, unsigned long long to, unsigned flags,
                    void *ud) {
    found_t *f = ud;
    (void)from, (void)to, (void)flags;
    if (f->n == f->cap) return 1; /* stops the scan: the caller tests them all */
    f->out[f->n++] = id;          /* single match: each id once */
    return 0;
}

int lx_multire_scan(const lx_multire_t *m, lx_multire_scratch_t *s, const char *subject, size_t len,
                    uint32_t *out, uint32_t cap) {
    found_t f = {out, 0, cap};
    if (s == NULL || len > UINT32_MAX ||
        hs_scan(m->db, subject, (unsigned)len, 0, (hs_scratch_t *)s, on_match, &f) != HS_SUCCESS)
        return -1;
    /* Reports come in the order the matches end; callers want rule order.
     * Insertion sort: a path is a candidate for few rules. */
    for (uint32_t i = 1; i < f.n; i++) {
        uint32_t v = out[i], j = i;
        for (; j > 0 && out[j - 1] > v; j--)
            out[j] = out[j - 1];
        out[j] = v;
    }
    return (int)f.n;
}

#else /* no engine: every regex rule stays on the plain path */

int lx_multire_available(void) {
    return 0;
}

int lx_multire_build(const char *const *pats, const uint32_t *ids, uint32_t n, lx_multire_t **out,
                     uint32_t *left_out, uint32_t *nleft) {
    (void)pats;
    memcpy(left_out, ids, n * sizeof(*ids));
    *nleft = n;
    *out = NULL;
    return 0;
}

void lx_multire_free(lx_multire_t *m) {
    (void)m;
}

const uint32_t *lx_multire_ids(const lx_multire_t *m, uint32_t *n) {
    (void)m;
    *n = 0;
    return NULL;
}

int lx_multire_scratch_fit(const lx_multire_t *m, lx_multire_scratch_t **s) {
    (void)m, (void)s;
    return 0;
}

void lx_multire_scratch_free(lx_multire_scratch_t *s) {
    (void)s;
}

int lx_multire_scan(const lx_multire_t *m, lx_multire_scratch_t *s, const char *subject, size_t len,
                    uint32_t *out, uint32_t cap) {
    (void)m, (void)s, (void)subject, (void)len, (void)out, (void)cap;
    return -1;
}
#endif
