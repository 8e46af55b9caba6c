/* The heap of the Lua states that run the config (start-up, reload, -t):
 * blocks by size class, carved from 1 MiB chunks that stay mapped from one
 * load to the next.
 *
 * Why not LuaJIT's own allocator: it unmaps its memory at lua_close, so each
 * reload touches its whole heap afresh, and on a guest whose memory the host
 * backs lazily a first touch costs about 11 us a page (this machine; bench/
 * README.md "reload"). A 10,000-vhost load is ~45 MB of Lua heap: 120 ms of
 * page faults that a kept heap does not pay again. What is kept is the last
 * load's peak; chunks it did not use are unmapped at the next reset.
 *
 * One heap serves one state at a time, on one thread. */
#ifndef LX_LHEAP_H
#define LX_LHEAP_H

#include <stddef.h>

typedef struct lx_lheap_s lx_lheap_t;

lx_lheap_t *lx_lheap_new(void);
/* A lua_Alloc: lua_newstate(lx_lheap_alloc, heap). */
void *lx_lheap_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
/* After lua_close of the heap's state: every block is free again. Keeps the
 * chunks that state used and unmaps the others. */
void lx_lheap_reset(lx_lheap_t *h);
void lx_lheap_free(lx_lheap_t *h);
/* Bytes mapped now. */
size_t lx_lheap_mapped(const lx_lheap_t *h);

#endif
