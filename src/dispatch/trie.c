#include "trie.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Nodes live in one array and refer to each other by index. Children are
 * kept sorted by byte, so a step is a binary search over at most 256 edges. */
typedef struct {
    unsigned char *bytes; /* sorted edge labels */
    uint32_t *kids;       /* node index per edge */
    uint32_t nkids, capkids;
    uint32_t *ids; /* rule ids ending here, ascending */
    uint32_t nids, capids;
} node_t;

struct lx_trie_s {
    node_t *nodes;
    uint32_t n, cap;
    size_t keys;
};

static int new_node(lx_trie_t *t, uint32_t *out) {
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 16; /* a prefix rule set is often one short path */
        node_t *nodes = realloc(t->nodes, cap * sizeof(*nodes));
        if (nodes == NULL) return -ENOMEM;
        t->nodes = nodes;
        t->cap = cap;
    }
    memset(&t->nodes[t->n], 0, sizeof(node_t));
    *out = t->n++;
    return 0;
}

lx_trie_t *lx_trie_new(void) {
    lx_trie_t *t = calloc(1, sizeof(*t));
    uint32_t root;
    if (t == NULL || new_node(t, &root) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

void lx_trie_free(lx_trie_t *t) {
    if (t == NULL) return;
    for (uint32_t i = 0; i < t->n; i++) {
        free(t->nodes[i].bytes);
        free(t->nodes[i].kids);
        free(t->nodes[i].ids);
    }
    free(t->nodes);
    free(t);
}

static int find_edge(const node_t *n, unsigned char c, uint32_t *pos) {
    uint32_t lo = 0, hi = n->nkids;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (n->bytes[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    *pos = lo;
    return lo < n->nkids && n->bytes[lo] == c;
}

int lx_trie_add(lx_trie_t *t, const char *key, size_t len, uint32_t id) {
    uint32_t cur = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)key[i];
        uint32_t pos, kid;
        if (find_edge(&t->nodes[cur], c, &pos)) {
            cur = t->nodes[cur].kids[pos];
            continue;
        }
        if (new_node(t, &kid) < 0) return -ENOMEM;
        node_t *n = &t->nodes[cur]; /* after new_node: the array may have moved */
        if (n->nkids == n->capkids) {
            uint32_t cap = n->capkids ? n->capkids * 2 : 2;
            unsigned char *b = realloc(n->bytes, cap);
            if (b == NULL) return -ENOMEM;
            n->bytes = b;
            uint32_t *k = realloc(n->kids, cap * sizeof(*k));
            if (k == NULL) return -ENOMEM;
            n->kids = k;
            n->capkids = cap;
        }
        memmove(n->bytes + pos + 1, n->bytes + pos, n->nkids - pos);
        memmove(n->kids + pos + 1, n->kids + pos, (n->nkids - pos) * sizeof(uint32_t));
        n->bytes[pos] = c;
        n->kids[pos] = kid;
        n->nkids++;
        cur = kid;
    }
    node_t *n = &t->nodes[cur];
    if (n->nids == n->capids) {
        uint32_t cap = n->capids ? n->capids * 2 : 1;
        uint32_t *ids = realloc(n->ids, cap * sizeof(*ids));
        if (ids == NULL) return -ENOMEM;
        n->ids = ids;
        n->capids = cap;
    }
    n->ids[n->nids++] = id;
    t->keys++;
    return 0;
}

size_t lx_trie_keys(const lx_trie_t *t) {
    return t ? t->keys : 0;
}

void lx_trie_walk(const lx_trie_t *t, const char *s, size_t len, int reverse, lx_trie_cb cb,
                  void *ud) {
    if (t == NULL) return;
    uint32_t cur = 0;
    for (size_t i = 0;; i++) {
        const node_t *n = &t->nodes[cur];
        if (n->nids && cb(ud, n->ids, n->nids, i)) return;
        if (i == len || n->nkids == 0) return;
        unsigned char c = (unsigned char)(reverse ? s[len - 1 - i] : s[i]);
        uint32_t pos;
        if (!find_edge(n, c, &pos)) return;
        cur = n->kids[pos];
    }
}
