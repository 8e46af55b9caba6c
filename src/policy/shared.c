#include "shared.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "../lx.h"

/* Bounds: the store is for counters and small flags, not a cache. */
#define MAX_ENTRIES 100000
#define MAX_KEY     256
#define MAX_VALUE   4096
#define NBUCKETS    65536

typedef struct entry_s {
    struct entry_s *next;
    uint64_t hash;
    uint64_t expires; /* monotonic ms; 0: never */
    int is_num;
    double num;
    size_t klen, vlen;
    char *str; /* value when !is_num */
    char key[];
} entry_t;

static uv_mutex_t lock;
static uv_once_t once = UV_ONCE_INIT;
static entry_t *buckets[NBUCKETS];
static size_t count;

static void init(void) {
    uv_mutex_init(&lock);
}

static uint64_t now_ms(void) {
    return uv_hrtime() / 1000000u;
}

static void entry_free(entry_t *e) {
    free(e->str);
    free(e);
}

/* Finds key, dropping it if expired. Called with the lock held. */
static entry_t **find(const char *k, size_t klen, uint64_t h, uint64_t now) {
    entry_t **pp = &buckets[h & (NBUCKETS - 1)];
    while (*pp) {
        entry_t *e = *pp;
        if (e->expires && e->expires <= now) {
            *pp = e->next;
            entry_free(e);
            count--;
            continue;
        }
        if (e->hash == h && e->klen == klen && memcmp(e->key, k, klen) == 0) return pp;
        pp = &e->next;
    }
    return pp;
}

/* When full, sweep expired entries from a stretch of buckets; still full
 * means the write is refused (the caller gets nil, "full"). */
static int make_room(uint64_t now) {
    static size_t sweep;
    for (size_t n = 0; count >= MAX_ENTRIES && n < NBUCKETS; n++) {
        entry_t **pp = &buckets[sweep++ & (NBUCKETS - 1)];
        while (*pp) {
            entry_t *e = *pp;
            if (e->expires && e->expires <= now) {
                *pp = e->next;
                entry_free(e);
                count--;
            } else {
                pp = &e->next;
            }
        }
    }
    return count < MAX_ENTRIES;
}

/* A new entry for key at the head of its bucket, or NULL when the store is
 * full. Called with the lock held. */
static entry_t *insert(const char *k, size_t klen, uint64_t h, uint64_t now) {
    entry_t *e;
    if (!make_room(now) || (e = calloc(1, sizeof(*e) + klen)) == NULL) return NULL;
    memcpy(e->key, k, klen);
    e->klen = klen;
    e->hash = h;
    entry_t **pp = &buckets[h & (NBUCKETS - 1)];
    e->next = *pp;
    *pp = e;
    count++;
    return e;
}

static int full(lua_State *L) {
    lua_pushnil(L);
    lua_pushliteral(L, "full");
    return 2;
}

/* Takes the lock and finds key; every accessor starts here once its
 * arguments are checked (a Lua error must never leave the lock held). */
static entry_t **lock_and_find(const char *k, size_t klen, uint64_t h, uint64_t now) {
    uv_once(&once, init);
    uv_mutex_lock(&lock);
    return find(k, klen, h, now);
}

static const char *check_key(lua_State *L, size_t *len) {
    const char *k = luaL_checklstring(L, 1, len);
    if (*len == 0 || *len > MAX_KEY) luaL_argerror(L, 1, "key must be 1..256 bytes");
    return k;
}

/* A ttl is 0 (never expires) up to MAX_TTL seconds. Anything else is an
 * error rather than a guess: an infinite or huge ttl overflowed the cast
 * and stored an entry that had already expired (set() said true, get()
 * said nil), and a NaN one never expired. */
#define MAX_TTL 2147483647.0

static uint64_t ttl_ms(lua_State *L, int idx, uint64_t now) {
    lua_Number ttl = luaL_optnumber(L, idx, 0);
    if (!(ttl >= 0 && ttl <= MAX_TTL)) luaL_argerror(L, idx, "ttl must be 0..2147483647 seconds");
    return ttl > 0 ? now + (uint64_t)(ttl * 1000) : 0;
}

/* get(key) -> value or nil. The value is copied out while the lock is
 * held and pushed after it is released: pushing a string allocates, and at
 * the policy_memory ceiling the allocation raises, which would unwind past
 * the unlock and leave every loop blocked on the store for good. No Lua API
 * call runs between lock and unlock in any function of this file. */
static int l_get(lua_State *L) {
    size_t klen;
    const char *k = check_key(L, &klen);
    uint64_t h = lx_hash(k, klen, 0), now = now_ms();
    char copy[MAX_VALUE]; /* set() refuses longer values */
    enum { MISSING, NUMBER, STRING } found = MISSING;
    double num = 0;
    size_t vlen = 0;
    entry_t **pp = lock_and_find(k, klen, h, now);
    if (*pp && (*pp)->is_num) {
        found = NUMBER;
        num = (*pp)->num;
    } else if (*pp) {
        found = STRING;
        vlen = (*pp)->vlen;
        memcpy(copy, (*pp)->str, vlen);
    }
    uv_mutex_unlock(&lock);
    if (found == NUMBER)
        lua_pushnumber(L, num);
    else if (found == STRING)
        lua_pushlstring(L, copy, vlen);
    else
        lua_pushnil(L);
    return 1;
}

/* set(key, value [, ttl]) -> true, or nil and a reason; value nil deletes */
static int l_set(lua_State *L) {
    size_t klen, vlen = 0;
    const char *k = check_key(L, &klen);
    int t = lua_type(L, 2);
    const char *v = NULL;
    if (t == LUA_TSTRING) {
        v = lua_tolstring(L, 2, &vlen);
        if (vlen > MAX_VALUE) luaL_argerror(L, 2, "value longer than 4096 bytes");
    } else if (t != LUA_TNUMBER && t != LUA_TNIL) {
        luaL_argerror(L, 2, "value must be a string, a number or nil");
    }
    uint64_t h = lx_hash(k, klen, 0), now = now_ms(), exp = ttl_ms(L, 3, now);
    char *copy = NULL;
    if (v && (copy = malloc(vlen ? vlen : 1)) == NULL) return luaL_error(L, "out of memory");
    if (v) memcpy(copy, v, vlen);
    double num = t == LUA_TNUMBER ? lua_tonumber(L, 2) : 0;
    entry_t **pp = lock_and_find(k, klen, h, now);
    if (t == LUA_TNIL) {
        if (*pp) {
            entry_t *e = *pp;
            *pp = e->next;
            entry_free(e);
            count--;
        }
        uv_mutex_unlock(&lock);
        lua_pushboolean(L, 1);
        return 1;
    }
    entry_t *e = *pp;
    if (e == NULL && (e = insert(k, klen, h, now)) == NULL) {
        uv_mutex_unlock(&lock);
        free(copy);
        return full(L);
    }
    free(e->str);
    e->str = copy;
    e->vlen = vlen;
    e->is_num = t == LUA_TNUMBER;
    e->num = num;
    e->expires = exp;
    uv_mutex_unlock(&lock);
    lua_pushboolean(L, 1);
    return 1;
}

/* incr(key [, by = 1 [, ttl]]) -> new value. A missing or expired key starts
 * at 0 and gets the ttl; an existing one keeps its expiry, so a window of
 * ttl seconds counts from its first hit. */
static int l_incr(lua_State *L) {
    size_t klen;
    const char *k = check_key(L, &klen);
    lua_Number by = luaL_optnumber(L, 2, 1);
    uint64_t h = lx_hash(k, klen, 0), now = now_ms(), exp = ttl_ms(L, 3, now);
    entry_t **pp = lock_and_find(k, klen, h, now);
    entry_t *e = *pp;
    if (e == NULL) {
        if ((e = insert(k, klen, h, now)) == NULL) {
            uv_mutex_unlock(&lock);
            return full(L);
        }
        e->is_num = 1;
        e->expires = exp;
    } else if (!e->is_num) {
        uv_mutex_unlock(&lock);
        lua_pushnil(L);
        lua_pushliteral(L, "not a number");
        return 2;
    }
    e->num += by;
    lua_Number v = e->num;
    uv_mutex_unlock(&lock);
    lua_pushnumber(L, v);
    return 1;
}

/* ttl(key) -> seconds left (0: never expires), or nil */
static int l_ttl(lua_State *L) {
    size_t klen;
    const char *k = check_key(L, &klen);
    uint64_t h = lx_hash(k, klen, 0), now = now_ms();
    entry_t **pp = lock_and_find(k, klen, h, now);
    int found = *pp != NULL;
    double left = found && (*pp)->expires ? (double)((*pp)->expires - now) / 1000.0 : 0;
    uv_mutex_unlock(&lock);
    if (found)
        lua_pushnumber(L, left);
    else
        lua_pushnil(L);
    return 1;
}

static int l_delete(lua_State *L) {
    lua_settop(L, 1);
    lua_pushnil(L);
    return l_set(L);
}

void lx_shared_push(lua_State *L) {
    static const luaL_Reg fns[] = {{"get", l_get}, {"set", l_set},       {"incr", l_incr},
                                   {"ttl", l_ttl}, {"delete", l_delete}, {NULL, NULL}};
    lua_newtable(L);
    for (const luaL_Reg *f = fns; f->name; f++) {
        lua_pushcfunction(L, f->func);
        lua_setfield(L, -2, f->name);
    }
}
