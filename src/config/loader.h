/* What the parts of the config loader share (load.c runs the Lua and
 * converts the description; load_server.c, load_upstream.c, load_vhost.c and
 * load_site.c read its tables): the loader's state, the readers of one
 * field, and the readers one part calls in another. Private to
 * src/config/. */
#ifndef LX_CONFIG_LOADER_H
#define LX_CONFIG_LOADER_H

#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glob.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "core/accesslog.h"
#include "../log.h"
#include "../net/tlsctx.h"
#include "lheap.h"
#include "lua_embed.h"
#include "../policy/addrset.h"
#include "../policy/shared.h"
#include "llhttp.h"

/* A key of the description's tables, interned once per load. */
typedef struct {
    const char *name; /**< the C string it was asked by (its address) */
    int ref;          /**< the Lua string, in the registry */
} ld_key_t;

#define LD_KEYS 256

typedef struct {
    lua_State *L;
    lx_gen_t *g;
    char *err;
    size_t errlen;
    const char *file; /* where the table being read was declared */
    int line;
    uint32_t site_ids;       /* site ids handed out so far */
    lx_site_t site_defaults; /* a vhost's site before its own keys */
    uint32_t nkeys;
    ld_key_t keys[LD_KEYS]; /* open addressing by the C string's address */
} loader_t;

/* lua_getfield for the description's tables, with the key interned once
 * per load: lua_getfield hashed the C string and looked it up among the
 * interned strings at every call, a seventh of converting a 10,000-vhost
 * description. The description's tables are luxd.config's own, without
 * metatables, so a raw get finds what lua_getfield did. Keys are told
 * apart by address: a key written twice may take two slots, never the
 * wrong one. */
static inline void ld_getfield(loader_t *ld, int idx, const char *key) {
    lua_State *L = ld->L;
    if (idx < 0 && idx > LUA_REGISTRYINDEX) idx = lua_gettop(L) + idx + 1;
    /* Not a table where one belongs: only a config that reached into
     * luxd's modules (require "luxd.schema") can do that. Nothing is
     * there, rather than a raw get on a string (a crash) or an index of
     * nil (a Lua error outside any pcall). */
    if (!lua_istable(L, idx)) {
        lua_pushnil(L);
        return;
    }
    size_t h = (size_t)(((uintptr_t)key * 0x9E3779B97F4A7C15u) >> 56) & (LD_KEYS - 1);
    ld_key_t *k;
    for (;; h = (h + 1) & (LD_KEYS - 1)) {
        k = &ld->keys[h];
        if (k->name == key) break;
        if (k->name == NULL) {
            if (ld->nkeys >= LD_KEYS / 2) { /* a table this full: no more */
                lua_getfield(L, idx, key);
                return;
            }
            lua_pushstring(L, key);
            k->ref = luaL_ref(L, LUA_REGISTRYINDEX);
            k->name = key;
            ld->nkeys++;
            break;
        }
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, k->ref);
    lua_rawget(L, idx);
}

/* Records "file:line: message" for the table on top of the stack. */
static inline int fail(loader_t *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int fail(loader_t *ld, const char *fmt, ...) {
    int n = snprintf(ld->err, ld->errlen, "%s:%d: ", ld->file ? ld->file : "?", ld->line);
    if (n < 0 || (size_t)n >= ld->errlen) return -EINVAL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ld->err + n, ld->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Sets ld->file/line from the _file/_line fields of the table at idx. */
static inline void locate(loader_t *ld, int idx) {
    ld_getfield(ld, idx, "_file");
    if (lua_isstring(ld->L, -1)) ld->file = lx_arena_strdup(&ld->g->arena, lua_tostring(ld->L, -1));
    lua_pop(ld->L, 1);
    ld_getfield(ld, idx, "_line");
    if (lua_isnumber(ld->L, -1)) ld->line = (int)lua_tointeger(ld->L, -1);
    lua_pop(ld->L, 1);
}

static inline const char *get_str(loader_t *ld, int idx, const char *key, const char *def) {
    ld_getfield(ld, idx, key);
    const char *v = def;
    if (lua_type(ld->L, -1) == LUA_TSTRING)
        v = lx_arena_strdup(&ld->g->arena, lua_tostring(ld->L, -1));
    lua_pop(ld->L, 1);
    return v;
}

static inline double get_num(loader_t *ld, int idx, const char *key, double def) {
    ld_getfield(ld, idx, key);
    double v = lua_type(ld->L, -1) == LUA_TNUMBER ? lua_tonumber(ld->L, -1) : def;
    lua_pop(ld->L, 1);
    return v;
}

static inline int get_bool(loader_t *ld, int idx, const char *key, int def) {
    ld_getfield(ld, idx, key);
    int v = lua_type(ld->L, -1) == LUA_TBOOLEAN ? lua_toboolean(ld->L, -1) : def;
    lua_pop(ld->L, 1);
    return v;
}

/* Seconds as ms; a positive value is at least 1 ms (0 means "none" to the
 * deadlines: handshake_timeout = 0.0004 turned the timeout off). */
static inline uint32_t get_ms(loader_t *ld, int idx, const char *key, double def_s) {
    double s = get_num(ld, idx, key, def_s);
    if (s <= 0) return 0;
    return s * 1000 > 4e9 ? 4000000000u : s * 1000 < 1 ? 1 : (uint32_t)(s * 1000);
}

/* Reads an array of strings at t[key] into arena memory. */
static inline const char **get_strings(loader_t *ld, int idx, const char *key, size_t *n) {
    lua_State *L = ld->L;
    const char **v = NULL;
    *n = 0;
    ld_getfield(ld, idx, key);
    if (lua_type(L, -1) == LUA_TSTRING) {
        v = lx_arena_alloc(&ld->g->arena, sizeof(char *));
        v[0] = lx_arena_strdup(&ld->g->arena, lua_tostring(L, -1));
        *n = 1;
    } else if (lua_istable(L, -1)) {
        size_t len = lua_objlen(L, -1);
        v = lx_arena_alloc(&ld->g->arena, (len ? len : 1) * sizeof(char *));
        for (size_t i = 0; i < len; i++) {
            lua_rawgeti(L, -1, (int)i + 1);
            const char *str = lua_tostring(L, -1);
            v[(*n)++] = lx_arena_strdup(&ld->g->arena, str ? str : "");
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    return v;
}

/* Appends "file:line: message" to the generation's warnings. */
static inline void add_warning(loader_t *ld, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void add_warning(loader_t *ld, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lx_gen_warn(ld->g, ld->file, ld->line, "%s", msg);
}

/* ---- one part's readers that another calls ------------------------------ */

/* load_server.c */
int ld_read_server(loader_t *ld, int idx);
int ld_read_access_log(loader_t *ld, int idx, lx_access_log_conf_t *c, const char *file, int line,
                       const char *what);
int ld_read_realip(loader_t *ld, int idx, const lx_realip_t **out, int *off);
/* load_upstream.c */
int ld_read_upstreams(loader_t *ld, int idx);
/* load_vhost.c */
int ld_read_vhosts(loader_t *ld, int idx);
/* load_site.c */
uint32_t ld_next_site_id(loader_t *ld);
int ld_read_site_defaults(loader_t *ld, int idx);
int ld_read_site(loader_t *ld, int idx, lx_site_t *site);
int ld_read_locations(loader_t *ld, int idx, lx_vhost_t *vh);
int ld_read_error_pages(loader_t *ld, int idx, lx_site_t *site);
int ld_read_rules(loader_t *ld, int idx, const char *key, int kind, const char *what,
                  lx_ruleset_t **out);
void ld_check_error_pages(loader_t *ld, const lx_vhost_t *vh);

#endif
