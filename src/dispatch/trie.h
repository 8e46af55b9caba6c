/* A byte trie mapping keys to lists of rule ids: prefix rules are found by
 * walking the path forwards, suffix rules by walking it backwards, so the
 * cost of a lookup depends on the path's length, not on how many rules exist. */
#ifndef LX_TRIE_H
#define LX_TRIE_H

#include <stddef.h>
#include <stdint.h>

typedef struct lx_trie_s lx_trie_t;

lx_trie_t *lx_trie_new(void);
void lx_trie_free(lx_trie_t *t);

/* Adds id under key (stored reversed when the trie was made for suffixes by
 * the caller). Ids must be added in increasing order per key, which keeps
 * every list sorted. Returns 0 or -ENOMEM. */
int lx_trie_add(lx_trie_t *t, const char *key, size_t len, uint32_t id);

/* Number of keys added. */
size_t lx_trie_keys(const lx_trie_t *t);

/* Visits the id lists of the keys that are prefixes of `s` (reverse = 0) or
 * suffixes of it (reverse = 1, keys added reversed), shortest first. The
 * callback returns non-zero to stop. */
typedef int (*lx_trie_cb)(void *ud, const uint32_t *ids, uint32_t n, size_t depth);
void lx_trie_walk(const lx_trie_t *t, const char *s, size_t len, int reverse, lx_trie_cb cb,
                  void *ud);

#endif
