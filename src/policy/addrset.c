#include "addrset.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "../dispatch/cidr.h"
#include "policy.h"

#define META "luxd.cidr"

/* A set is one userdata: the lx_cidrset_t and its ranges after it. Each
 * Lua state (the config check's, each loop's policy state) runs the config
 * and so builds its own; nothing changes it after, so a loop reads only
 * its own memory. Lua's collector frees it with the state. */
typedef struct {
    lx_cidrset_t set;
    lx_addr_t r[]; /* n starts, then n ends */
} addrset_t;

/* set:contains(addr): true or false; nil and a message when addr is no
 * IP address (r.remote_addr is "-" for a client on a unix socket), which
 * an `if` takes as false. */
static int l_contains(lua_State *L) {
    const addrset_t *s = luaL_checkudata(L, 1, META);
    size_t len;
    const char *a = luaL_checklstring(L, 2, &len);
    lx_addr_t addr;
    if (lx_addr_parse(a, len, &addr) < 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "not an IP address");
        return 2;
    }
    lua_pushboolean(L, lx_cidrset_has(&s->set, addr));
    return 1;
}

static int l_tostring(lua_State *L) {
    const addrset_t *s = luaL_checkudata(L, 1, META);
    lua_pushfstring(L, "luxd.cidr (%d ranges)", (int)s->set.n);
    return 1;
}

/* luxd.cidr{ "10.0.0.0/8", "::1", ... }. An entry that is no address or
 * prefix is an error at its call, which the config loader reports as
 * file:line of the call. Refused while a request runs: the set is built
 * once, when the config loads, not per request. */
static int l_cidr(lua_State *L) {
    if (lx_policy_serving(L))
        return luaL_error(L, "luxd.cidr is only available while the config loads: build the set "
                             "once, outside the policy function");
    if (!lua_istable(L, 1))
        return luaL_error(L,
                          "luxd.cidr: expects a list of addresses and prefixes, as in "
                          "luxd.cidr{ \"10.0.0.0/8\", \"2001:db8::/32\" }, got %s",
                          luaL_typename(L, 1));
    size_t n = lua_objlen(L, 1), keys = 0;
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        keys++;
        lua_pop(L, 1);
    }
    if (keys != n)
        return luaL_error(L, "luxd.cidr: expects a list (keys 1..n), not a table with other keys");
    if (n > ((size_t)1 << 24)) return luaL_error(L, "luxd.cidr: more than %d entries", 1 << 24);
    addrset_t *s = lua_newuserdata(L, sizeof(*s) + 2 * (n ? n : 1) * sizeof(lx_addr_t));
    lx_addr_t *first = s->r, *last = s->r + n;
    s->set.n = 0;
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, 1, (int)i + 1);
        const char *e = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (e == NULL || strlen(e) != lua_objlen(L, -1) ||
            lx_cidr_parse(e, &first[i], &last[i]) < 0) {
            char shown[80];
            if (e)
                snprintf(shown, sizeof(shown), "\"%.64s\"", e);
            else
                snprintf(shown, sizeof(shown), "a %s", luaL_typename(L, -1));
            return luaL_error(L,
                              "luxd.cidr: entry %d (%s) is not an IPv4 or IPv6 address or "
                              "prefix (as \"10.0.0.0/8\", \"2001:db8::/32\", \"::1\")",
                              (int)i + 1, shown);
        }
        lua_pop(L, 1);
    }
    if (lx_cidrset_build(&s->set, first, last, n) < 0) return luaL_error(L, "not enough memory");
    luaL_getmetatable(L, META);
    lua_setmetatable(L, -2);
    return 1;
}

void lx_addrset_push(lua_State *L) {
    if (luaL_newmetatable(L, META)) {
        lua_newtable(L);
        lua_pushcfunction(L, l_contains);
        lua_setfield(L, -2, "contains");
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, l_tostring);
        lua_setfield(L, -2, "__tostring");
        /* getmetatable() gives this string, so no policy can reach the
         * methods table and change contains for every set. */
        lua_pushliteral(L, META);
        lua_setfield(L, -2, "__metatable");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_cidr);
}
