/* The config's Lua heap (src/config/lheap.c): a random run of allocations,
 * reallocations and frees across every size class and big blocks, each
 * block filled with its own pattern and checked before it is freed; then
 * resets, which keep what a load used and unmap the rest; then real LuaJIT
 * states on it, closed and run again without mapping more. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/lheap.h"
#include "tap.h"

static unsigned rnd(unsigned n) {
    static uint64_t seed = 42;
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(seed >> 33) % n;
}

typedef struct {
    unsigned char *p;
    size_t n;
    unsigned char tag;
} blk_t;

static int intact(const blk_t *b) {
    for (size_t i = 0; i < b->n; i++)
        if (b->p[i] != (unsigned char)(b->tag + i)) return 0;
    return 1;
}

static void fill(blk_t *b, size_t from) {
    for (size_t i = from; i < b->n; i++)
        b->p[i] = (unsigned char)(b->tag + i);
}

/* Sizes around every class edge: 1..600 bytes, then up to past a quarter
 * MiB (big), now and then a few MiB. */
static size_t any_size(void) {
    switch (rnd(40)) {
    case 0: return 256 * 1024 - 8 + rnd(16);
    case 1: return 1 + rnd(3 * 1024 * 1024);
    case 2:
    case 3:
    case 4:
    case 5: return 1 + rnd(64 * 1024);
    default: return 1 + rnd(600);
    }
}

#define NB 500

static int random_run(lx_lheap_t *h, int steps) {
    static blk_t b[NB];
    int bad = 0;
    memset(b, 0, sizeof(b));
    for (int s = 0; s < steps; s++) {
        blk_t *x = &b[rnd(NB)];
        if (x->p == NULL) {
            x->n = any_size();
            x->p = lx_lheap_alloc(h, NULL, 0, x->n);
            if (x->p == NULL) return -1;
            x->tag = (unsigned char)rnd(256);
            fill(x, 0);
        } else if (rnd(3) == 0) {
            bad += !intact(x);
            lx_lheap_alloc(h, x->p, x->n, 0);
            x->p = NULL;
        } else {
            /* Grow or shrink: the old bytes must come along. */
            bad += !intact(x);
            size_t n = rnd(2) ? any_size() : x->n / 2 + 1;
            unsigned char *p = lx_lheap_alloc(h, x->p, x->n, n);
            if (p == NULL) return -1;
            size_t keep = n < x->n ? n : x->n;
            x->p = p;
            x->n = keep;
            bad += !intact(x);
            x->n = n;
            fill(x, keep);
        }
    }
    for (int i = 0; i < NB; i++)
        if (b[i].p) {
            bad += !intact(&b[i]);
            lx_lheap_alloc(h, b[i].p, b[i].n, 0);
            b[i].p = NULL;
        }
    return bad;
}

static const char *script =
    "local t = {}\n"
    "for i = 1, 20000 do\n"
    "  t[i] = { name = string.format('site%05d.example', i), list = { i, i + 1 },\n"
    "           s = ('x'):rep(i % 300) }\n"
    "end\n"
    "local n = 0\n"
    "for _, v in ipairs(t) do n = n + #v.s + #v.name end\n"
    "return n\n";

static long run_lua(lx_lheap_t *h) {
    lua_State *L = lua_newstate(lx_lheap_alloc, h);
    if (L == NULL) return -1;
    luaL_openlibs(L);
    long n = -2;
    if (luaL_dostring(L, script) == 0) n = (long)lua_tointeger(L, -1);
    lua_close(L);
    lx_lheap_reset(h);
    return n;
}

int main(void) {
    lx_lheap_t *h = lx_lheap_new();
    ok(h != NULL, "a heap");
    is_int(random_run(h, 50000), 0, "50,000 random steps: every block kept its bytes");
    size_t peak = lx_lheap_mapped(h);
    ok(peak > 0, "memory was mapped (%zu bytes)", peak);
    lx_lheap_reset(h);
    size_t kept = lx_lheap_mapped(h);
    ok(kept > 0 && kept <= peak, "a reset keeps what the run used (%zu of %zu bytes)", kept, peak);
    is_int(random_run(h, 50000), 0, "a second run on the kept memory: every block intact");

    /* A run that uses little: the reset after it unmaps what it did not. */
    lx_lheap_reset(h);
    void *p = lx_lheap_alloc(h, NULL, 0, 100);
    ok(p != NULL, "one small block");
    lx_lheap_alloc(h, p, 100, 0);
    lx_lheap_reset(h);
    is_int((long long)lx_lheap_mapped(h), 1 << 20, "after a run of one block: one chunk kept");

    /* Real states: the same script gives the same answer each time, and the
     * second and third runs map nothing the first did not. */
    long want = 0;
    for (int i = 1; i <= 20000; i++)
        want += i % 300 + 17;
    is_int(run_lua(h), want, "a LuaJIT state runs on the heap");
    size_t after1 = lx_lheap_mapped(h);
    is_int(run_lua(h), want, "and again after a reset");
    is_int(run_lua(h), want, "and a third time");
    ok(lx_lheap_mapped(h) <= after1, "the runs after the first map no more (%zu <= %zu bytes)",
       lx_lheap_mapped(h), after1);
    lx_lheap_free(h);
    return done_testing();
}
