#include "multire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A counted repeat "{n}", "{n,}" or "{n,m}" at s (PCRE2 10.42: anything else
 * is a literal '{'). Returns the characters it spans, 0 when it is none;
 * *k is the bound that weighs (m, or n + 1 for "{n,}"). */
static size_t counted(const char *s, double *k) {
    const char *p = s + 1;
    double n = 0, m = -1;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9')
        n = n * 10 + (*p++ - '0');
    if (*p == ',') {
        p++;
        if (*p >= '0' && *p <= '9') {
            m = 0;
            while (*p >= '0' && *p <= '9')
                m = m * 10 + (*p++ - '0');
        } else {
            m = n + 1;
        }
    }
    if (*p != '}') return 0;
    *k = m > n ? m : n;
    return (size_t)(p + 1 - s);
}

/* The escape at s ("\d", "\x{41}", "\p{L}", "\Qab\E"): its length and how
 * many atoms it stands for. */
static size_t escape(const char *s, double *atoms) {
    *atoms = 1;
    if (s[1] == '\0') return 1;
    if (s[1] == 'Q') {
        const char *e = strstr(s + 2, "\\E");
        size_t n = e ? (size_t)(e - s) + 2 : strlen(s);
        *atoms = (double)(e ? e - (s + 2) : (long)n - 2);
        return n;
    }
    /* Only these escapes take a braced argument (\x{41}, \p{L}, \g{1}):
     * in \d{3000} the braces are the atom's counted repeat, which must be
     * weighed (a break review: \w{3000} weighed 1 and took seconds to
     * compile). */
    if (s[2] == '{' && strchr("xopPgkN", s[1])) {
        const char *e = strchr(s + 2, '}');
        return e ? (size_t)(e - s) + 1 : 2;
    }
    if (s[1] == 'c' && s[2]) return 3; /* \cX: one control character */
    return 2;
}

/* "[...]" at s: its length (a class is one atom, however large). */
static size_t class_len(const char *s) {
    const char *p = s + 1;
    if (*p == '^') p++;
    if (*p == ']') p++; /* "[]...]": the first ] is a literal */
    while (*p && *p != ']') {
        if (*p == '\\' && p[1]) {
            p += 2;
        } else if (*p == '[' && p[1] == ':') {
            const char *e = strstr(p + 2, ":]");
            p = e ? e + 2 : p + 1;
        } else {
            p++;
        }
    }
    return (size_t)(p - s) + (*p == ']');
}

#define WEIGHT_CAP 1e9

double lx_multire_weight(const char *s) {
    double stack[64], cur = 0, last = 0;
    int depth = 0;
    while (*s) {
        double k, atoms;
        size_t n;
        switch (*s) {
        case '\\':
            n = escape(s, &atoms);
            cur += atoms;
            last = atoms ? 1 : 0;
            s += n;
            continue;
        case '[':
            n = class_len(s);
            cur += 1;
            last = 1;
            s += n;
            continue;
        case '(':
            if (depth == 64) return WEIGHT_CAP;
            stack[depth++] = cur;
            cur = 0;
            last = 0;
            break;
        case ')':
            if (depth == 0) break;
            last = cur;
            cur = stack[--depth] + cur;
            break;
        case '{':
            if ((n = counted(s, &k)) > 0) {
                cur += last * (k - 1);
                last *= k;
                s += n;
                if (cur > WEIGHT_CAP) return WEIGHT_CAP;
                continue;
            }
            cur += 1;
            last = 1;
            break;
        case '|':
        case '*':
        case '+':
        case '?':
        case '^':
        case '$': break;
        default: cur += 1; last = 1;
        }
        s++;
    }
    while (depth > 0)
        cur += stack[--depth];
    return cur > WEIGHT_CAP ? WEIGHT_CAP : cur;
}

int lx_multire_eligible(const char *p) {
    for (const char *s = p; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) return 0;
    if (strstr(p, "(*") != NULL) return 0; /* verbs: newline conventions, UTF, limits */
    return lx_multire_weight(p) <= LX_MULTIRE_MAX_WEIGHT;
}

#ifdef LX_HAVE_HS
#include <hs.h>
#include <pthread.h>

struct lx_multire_s {
    hs_database_t *db;
    uint32_t n;       /* patterns in db */
    uint32_t *left;   /* ids the engine refused, ascending */
    uint32_t nleft;   /* entries in left */
    uint32_t *fitted; /* by loop: the scratch epoch that loop's scratch was fitted at */
    uint32_t nloops;  /* entries in fitted */
};

/* Prefilter: a superset of PCRE2's matches, taking constructs the engine
 * cannot run exactly (back-references, some lookarounds) by approximation.
 * Single match: a pattern is reported once however often it matches. Empty
 * matches allowed: "^$" or "x*" are rules too. */
#define FLAGS (HS_FLAG_PREFILTER | HS_FLAG_SINGLEMATCH | HS_FLAG_ALLOWEMPTY)

int lx_multire_available(void) {
    return 1;
}

const char *lx_multire_version(void) {
    static char v[128];
    if (v[0] == '\0') snprintf(v, sizeof(v), "Hyperscan %s", hs_version());
    return v;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int lx_multire_build(const char *const *pats, const uint32_t *ids, uint32_t n, uint32_t nloops,
                     lx_multire_t **out) {
    *out = NULL;
    if (n == 0) return 0;
    const char **p = malloc(n * sizeof(*p));
    unsigned *fl = malloc(n * sizeof(*fl)), *id = malloc(n * sizeof(*id));
    lx_multire_t *m = calloc(1, sizeof(*m));
    uint32_t k = 0;
    if (p == NULL || fl == NULL || id == NULL || m == NULL ||
        (m->left = malloc(n * sizeof(*m->left))) == NULL ||
        (m->fitted = calloc(nloops ? nloops : 1, sizeof(*m->fitted))) == NULL)
        goto nomem;
    m->nloops = nloops;
    /* What the engine cannot parse at all is left out before the set is
     * compiled, so that one such rule does not cost the rest. */
    for (uint32_t i = 0; i < n; i++) {
        hs_expr_info_t *info = NULL;
        hs_compile_error_t *err = NULL;
        if (hs_expression_info(pats[i], FLAGS, &info, &err) != HS_SUCCESS) {
            hs_free_compile_error(err);
            m->left[m->nleft++] = ids[i];
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
                m->left[m->nleft++] = id[i];
            k = 0;
            break;
        }
        m->left[m->nleft++] = id[bad];
        memmove(p + bad, p + bad + 1, (k - bad - 1) * sizeof(*p));
        memmove(id + bad, id + bad + 1, (k - bad - 1) * sizeof(*id));
        k--;
    }
    qsort(m->left, m->nleft, sizeof(*m->left), cmp_u32);
    m->n = k;
    free(p);
    free(fl);
    free(id);
    if (k == 0) {
        lx_multire_free(m);
        m = NULL;
    }
    *out = m;
    return 0;
nomem:
    lx_multire_free(m);
    free(p);
    free(fl);
    free(id);
    return -ENOMEM;
}

int lx_multire_serialize(const lx_multire_t *m, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    if (m == NULL) return 0;
    /* The engine allocates it with its allocator: malloc by default. */
    return hs_serialize_database(m->db, buf, len) == HS_SUCCESS ? 0 : -ENOMEM;
}

int lx_multire_load(const char *db, size_t len, uint32_t n, const uint32_t *left, uint32_t nleft,
                    uint32_t nloops, lx_multire_t **out) {
    *out = NULL;
    if (n == 0) return 0;
    lx_multire_t *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->left = malloc((nleft ? nleft : 1) * sizeof(*m->left))) == NULL ||
        (m->fitted = calloc(nloops ? nloops : 1, sizeof(*m->fitted))) == NULL) {
        lx_multire_free(m);
        return -ENOMEM;
    }
    if (hs_deserialize_database(db, len, &m->db) != HS_SUCCESS) {
        m->db = NULL;
        lx_multire_free(m);
        return -EINVAL; /* not a database of this engine, or not whole */
    }
    memcpy(m->left, left, nleft * sizeof(*left));
    m->nleft = nleft;
    m->n = n;
    m->nloops = nloops;
    *out = m;
    return 0;
}

void lx_multire_free(lx_multire_t *m) {
    if (m == NULL) return;
    hs_free_database(m->db);
    free(m->left);
    free(m->fitted);
    free(m);
}

const uint32_t *lx_multire_left(const lx_multire_t *m, uint32_t *n) {
    *n = m ? m->nleft : 0;
    return m ? m->left : NULL;
}

uint32_t lx_multire_count(const lx_multire_t *m) {
    return m ? m->n : 0;
}

/* hs_alloc_scratch frees the scratch it was given when it cannot grow it
 * (and sets it NULL): so it is always handed s->hs itself, never a copy, and
 * on any failure the scratch is dropped and every fit made stale. */
static int fit(const lx_multire_t *m, lx_multire_scratch_t *s) {
    if (s->epoch == 0) s->epoch = 1;
    if (s->loop >= m->nloops) return -1;
    if (s->hs != NULL && m->fitted[s->loop] == s->epoch) return 0;
    hs_scratch_t *h = s->hs;
    hs_error_t rc = hs_alloc_scratch(m->db, &h);
    s->hs = h;
    if (rc != HS_SUCCESS) {
        if (s->hs) hs_free_scratch(s->hs);
        s->hs = NULL;
        s->epoch++;
        return -1;
    }
    /* A grown scratch still serves every database it served (the engine
     * sizes it for both), so the older fits stay good. */
    m->fitted[s->loop] = s->epoch;
    return 0;
}

void lx_multire_scratch_free(lx_multire_scratch_t *s) {
    if (s == NULL) return;
    hs_free_scratch(s->hs);
    s->hs = NULL;
    s->epoch++;
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
    if (m == NULL || s == NULL || len > UINT32_MAX || fit(m, s) < 0 ||
        hs_scan(m->db, subject, (unsigned)len, 0, s->hs, on_match, &f) != HS_SUCCESS)
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

static int count_match(unsigned id, unsigned long long from, unsigned long long to, unsigned flags,
                       void *ud) {
    (void)id, (void)from, (void)to, (void)flags;
    ++*(int *)ud;
    return 0;
}

#define SELFTEST_LEN   8192
#define SELFTEST_ALIGN 64

static int selftest_ok;

/* The check that found Debian's vectorscan 5.4.9 missing matches: a deny
 * rule's /(admin|manage)/ in /eeee.../admin/qqq, at every subject length and
 * buffer alignment. Each subject must match exactly once; the same subject
 * with the word broken ("/admin" + "x") must not. */
static void selftest_run(void) {
    hs_database_t *db = NULL;
    hs_compile_error_t *err = NULL;
    hs_scratch_t *scratch = NULL;
    unsigned char *buf = NULL;
    int ok = 0;
    if (hs_compile("/(admin|manage)/", FLAGS, HS_MODE_BLOCK, NULL, &db, &err) != HS_SUCCESS) {
        hs_free_compile_error(err);
        goto out;
    }
    if (hs_alloc_scratch(db, &scratch) != HS_SUCCESS) goto out;
    if ((buf = aligned_alloc(SELFTEST_ALIGN, SELFTEST_LEN + 2 * SELFTEST_ALIGN)) == NULL) goto out;
    ok = 1;
    for (size_t len = 8; ok && len <= SELFTEST_LEN; len++) {
        const char *word = len & 1 ? "/admin/" : "/manage/";
        size_t wl = strlen(word);
        if (len < wl + 1) continue;
        /* Where the word sits moves with the length: at the end, near it,
         * and anywhere between. */
        size_t room = len - wl, at = len % 3 == 0   ? room
                                     : len % 3 == 1 ? room / 2
                                                    : room - room / 7;
        for (size_t a = 0; ok && a < SELFTEST_ALIGN; a++) {
            unsigned char *s = buf + a;
            memset(s, 'e', len);
            s[0] = '/';
            memcpy(s + at, word, wl);
            int hits = 0;
            if (hs_scan(db, (const char *)s, (unsigned)len, 0, scratch, count_match, &hits) !=
                    HS_SUCCESS ||
                hits != 1)
                ok = 0;
            s[at + wl - 1] = 'x'; /* "/admin/" -> "/adminx": no match left */
            hits = 0;
            if (hs_scan(db, (const char *)s, (unsigned)len, 0, scratch, count_match, &hits) !=
                    HS_SUCCESS ||
                hits != 0)
                ok = 0;
        }
    }
out:
    free(buf);
    hs_free_scratch(scratch);
    hs_free_database(db);
    selftest_ok = ok;
}

int lx_multire_selftest(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, selftest_run);
    return selftest_ok;
}

#else /* no engine: every regex rule stays on the plain path */

int lx_multire_available(void) {
    return 0;
}

const char *lx_multire_version(void) {
    return "none (built without libhs)";
}

int lx_multire_selftest(void) {
    return 0;
}

int lx_multire_build(const char *const *pats, const uint32_t *ids, uint32_t n, uint32_t nloops,
                     lx_multire_t **out) {
    (void)pats, (void)ids, (void)n, (void)nloops;
    *out = NULL;
    return 0;
}

int lx_multire_serialize(const lx_multire_t *m, char **buf, size_t *len) {
    (void)m;
    *buf = NULL;
    *len = 0;
    return -ENOTSUP;
}
int lx_multire_load(const char *db, size_t len, uint32_t n, const uint32_t *left, uint32_t nleft,
                    uint32_t nloops, lx_multire_t **out) {
    (void)db, (void)len, (void)n, (void)left, (void)nleft, (void)nloops;
    *out = NULL;
    return -ENOTSUP;
}
void lx_multire_free(lx_multire_t *m) {
    (void)m;
}

const uint32_t *lx_multire_left(const lx_multire_t *m, uint32_t *n) {
    (void)m;
    *n = 0;
    return NULL;
}

uint32_t lx_multire_count(const lx_multire_t *m) {
    (void)m;
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
