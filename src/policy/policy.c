#include "policy.h"

#include <lauxlib.h>
#include <luajit.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../handlers/handler.h"
#include "../worker.h"
#include "../log.h"
#include "../net/transport.h"
#include "../stats.h"
#include "llhttp.h"

/* The budget is checked every HOOK_EVERY instructions. */
#define HOOK_EVERY 10000

/* The header lines one request's policy may add with r:set_header, in all:
 * room for long Content-Security-Policy and Set-Cookie headers, while the
 * memory they take (the request's arena, outside policy_memory) stays
 * bounded. */
#define MAX_POLICY_HEADERS 65536

struct lx_policy_vm_s {
    lua_State *L;
    int *refs;                    /* registry refs of the functions, by slot - 1 */
    uint32_t n;                   /* slots */
    size_t mem;                   /* bytes the state holds */
    size_t limit;                 /* bytes it may hold; 0 while the config loads */
    uint64_t ticks;               /* hook calls left in this call */
    uint64_t budget;              /* hook calls per call */
    lx_req_t *cur;                /* the request being run, NULL between calls */
    int answered;                 /* r:respond or r:redirect queued a response */
    const lx_upstream_t *handoff; /* r:proxy("name") asked for this upstream */
    int req_ref;                  /* the request object, made once */
};

/* Lua's allocator with a ceiling: past it, LuaJIT raises "not enough memory"
 * in the policy, which fails closed like any other error. */
static void *vm_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    lx_policy_vm_t *vm = ud;
    if (nsize == 0) {
        free(ptr);
        vm->mem -= osize;
        return NULL;
    }
    if (vm->limit && nsize > osize && vm->mem + (nsize - osize) > vm->limit) return NULL;
    void *p = realloc(ptr, nsize);
    if (p) vm->mem = vm->mem - osize + nsize;
    return p;
}

static lx_policy_vm_t *vm_of(lua_State *L) {
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

int lx_policy_serving(lua_State *L) {
    void *ud;
    return lua_getallocf(L, &ud) == vm_alloc && ((lx_policy_vm_t *)ud)->cur != NULL;
}

static void budget_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lx_policy_vm_t *vm = vm_of(L);
    /* Once spent, the budget stays spent: a policy that catches the error
     * with pcall gets it again at the next check, and one of those checks
     * lands outside its pcall. */
    if (vm->cur && (vm->ticks == 0 || --vm->ticks == 0)) {
        /* lua_pushfstring knows no %llu: format here. */
        char msg[96];
        snprintf(msg, sizeof(msg), "policy stopped: it ran more than %llu instructions",
                 (unsigned long long)vm->budget * HOOK_EVERY);
        lua_pushstring(L, msg);
        lua_error(L);
    }
}

/* ---- the request object ---------------------------------------------- */

static lx_req_t *current(lua_State *L) {
    lx_req_t *r = vm_of(L)->cur;
    if (r == NULL) luaL_error(L, "the request object is only valid while its policy runs");
    return r;
}

/* A field value is visible characters, spaces and tabs (RFC 9110 5.5): a
 * CR, LF or NUL would end the header early or smuggle another one in, and
 * DEL is no visible character either. */
static int valid_header_value(const char *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) return 0;
    }
    return 1;
}

/* Headers that frame the message or manage the connection. The server
 * writes them from what it actually sends; a second Content-Length, a
 * Transfer-Encoding or a "Connection: keep-alive" from a policy would make
 * the client read the body or the next response at the wrong place. */
static int framing_header(const char *name, size_t n) {
    static const char *const names[] = {
        "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection",
        "upgrade",        "trailer",           "te",         NULL};
    for (size_t i = 0; names[i]; i++)
        if (strlen(names[i]) == n && strncasecmp(names[i], name, n) == 0) return 1;
    return 0;
}

static int valid_token(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", c)) return 0;
    }
    return 1;
}

/* r:set_header(name, value): added to the response, whatever answers. */
static int r_set_header(lua_State *L) {
    lx_req_t *r = current(L);
    size_t nl, vl;
    const char *name = luaL_checklstring(L, 2, &nl);
    const char *value = luaL_checklstring(L, 3, &vl);
    if (!valid_token(name, nl)) return luaL_error(L, "r:set_header: the name is not an HTTP token");
    if (framing_header(name, nl))
        return luaL_error(L, "r:set_header: %s is set by the server, not by a policy", name);
    if (!valid_header_value(value, vl))
        return luaL_error(L,
                          "r:set_header: %s: a value cannot hold control characters "
                          "(CR, LF, NUL, DEL)",
                          name);
    size_t add = nl + vl + 4; /* "Name: value\r\n" */
    /* extra may hold more than the limit already (request_id_header's
     * line is put there first): MAX - extra_len must not wrap around. */
    if (r->extra_len > MAX_POLICY_HEADERS || add > MAX_POLICY_HEADERS - r->extra_len)
        return luaL_error(L, "r:set_header: %s: the headers a policy adds are limited to %d bytes",
                          name, MAX_POLICY_HEADERS);
    if (r->extra_len + add > r->extra_cap) {
        /* Doubling keeps a loop of set_header calls linear: copying the
         * whole block on every call was quadratic, in time the budget does
         * not count and in arena memory policy_memory does not bound. */
        size_t cap = r->extra_cap ? r->extra_cap : 256;
        while (cap < r->extra_len + add)
            cap *= 2;
        if (cap > MAX_POLICY_HEADERS) cap = MAX_POLICY_HEADERS;
        char *b = lx_arena_alloc(r->arena, cap);
        if (b == NULL) return luaL_error(L, "out of memory");
        if (r->extra_len) memcpy(b, r->extra, r->extra_len); /* extra is NULL at first */
        r->extra = b;
        r->extra_cap = cap;
    }
    char *b = r->extra + r->extra_len;
    memcpy(b, name, nl);
    memcpy(b + nl, ": ", 2);
    memcpy(b + nl + 2, value, vl);
    memcpy(b + nl + 2 + vl, "\r\n", 2);
    r->extra_len += add;
    return 0;
}

/* The status a policy names, or -1 when the number is no integer in
 * 200..599. It is checked as the Lua number it is: casting first would turn
 * 204.5 or 2^32 + 204 into 204, an answer the policy never named (and a
 * double out of int range into undefined behaviour). */
static int policy_status(lua_Number n) {
    if (!(n >= 200 && n <= 599) || n != (lua_Number)(int)n) return -1;
    return (int)n;
}

static void once_only(lua_State *L, lx_policy_vm_t *vm) {
    if (vm->answered) luaL_error(L, "the request was already answered");
}

/* r:redirect(url [, status = 302]) */
static int r_redirect(lua_State *L) {
    lx_req_t *r = current(L);
    lx_policy_vm_t *vm = vm_of(L);
    size_t n;
    const char *url = luaL_checklstring(L, 2, &n);
    lua_Number sn = luaL_optnumber(L, 3, 302);
    int status = policy_status(sn);
    if (status != 301 && status != 302 && status != 303 && status != 307 && status != 308)
        return luaL_error(L, "r:redirect: the status is 301, 302, 303, 307 or 308, not %f", sn);
    if (n == 0 || !valid_header_value(url, n))
        return luaL_error(L, "r:redirect: not a usable Location (empty, or a control character)");
    once_only(L, vm);
    char *hdr = lx_arena_alloc(r->arena, n + 13);
    if (hdr == NULL) return luaL_error(L, "out of memory");
    memcpy(hdr, "Location: ", 10);
    memcpy(hdr + 10, url, n);
    memcpy(hdr + 10 + n, "\r\n", 3);
    lx_resp_simple(r, status, hdr);
    vm->answered = 1;
    return 0;
}

/* r:respond(status [, body]). A 204, 205 or 304 has no body (RFC 9110
 * 15.3.5, 15.3.6, 15.4.5): asking for one is an error, not a body the
 * client would read as the start of the next response. An empty body is
 * the same as none. On HEAD the body is left out and its Content-Length
 * kept. */
static int r_respond(lua_State *L) {
    lx_req_t *r = current(L);
    lx_policy_vm_t *vm = vm_of(L);
    lua_Number sn = luaL_checknumber(L, 2);
    size_t n = 0;
    const char *body = luaL_optlstring(L, 3, NULL, &n);
    int status = policy_status(sn);
    if (status < 0) return luaL_error(L, "r:respond: the status must be 200..599, not %f", sn);
    /* 205 as well: RFC 9110 15.3.6 forbids content in it. */
    int bodiless = status == 204 || status == 205 || status == 304;
    if (bodiless && n > 0) return luaL_error(L, "r:respond: a %d response has no body", status);
    once_only(L, vm);
    /* For an error page only a success is the page's content (sent with
     * the page's status, lx_resp_init); any other answer refuses the page:
     * lx_resp_simple sends the built-in page of the original status. */
    int refused = r->error_status && (status < 200 || status > 299);
    if (status == 405) lx_req_note_allow(r); /* luxd's own answer: Allow is said */
    if (body == NULL || bodiless || refused) {
        lx_resp_simple(r, status, NULL);
    } else {
        lx_resp_init(r, status);
        r->resp.length = (int64_t)n;
        lx_resp_header(r, "Content-Type: text/plain; charset=utf-8\r\n", 41);
        lx_resp_header(r, r->site->headers, r->site->headers_len);
        lx_resp_send_headers(r);
        lx_resp_body_copy(r, body, n);
    }
    vm->answered = 1;
    return 0;
}

/* r:proxy("name"): once the policy returns, the request goes to that
 * upstream (return r:proxy("app") reads as what it does). A name no
 * upstream has is an error of the policy, which fails closed. */
static int r_proxy(lua_State *L) {
    lx_req_t *r = current(L);
    lx_policy_vm_t *vm = vm_of(L);
    size_t n;
    const char *name = luaL_checklstring(L, 2, &n);
    const lx_upstream_t *u = lx_gen_upstream(r->gen, name, n);
    if (u == NULL) return luaL_error(L, "r:proxy: no upstream is named \"%s\"", name);
    once_only(L, vm);
    vm->handoff = u;
    vm->answered = 1;
    return 0;
}

/* r.headers[name]: the first header of that name (any case). */
static int headers_index(lua_State *L) {
    lx_req_t *r = current(L);
    size_t n;
    const char *name = luaL_checklstring(L, 2, &n);
    for (unsigned i = 0; i < r->nheaders; i++) {
        lx_str_t h = r->headers[i].name;
        if (h.len == n && strncasecmp(h.p, name, n) == 0) {
            lua_pushlstring(L, r->headers[i].value.p, r->headers[i].value.len);
            return 1;
        }
    }
    lua_pushnil(L);
    return 1;
}

/* r.<field>: computed from the C request on each access, so nothing per
 * request is allocated unless the policy asks. Upvalues: set_header,
 * redirect, respond, headers, proxy. */
static int req_index(lua_State *L) {
    lx_req_t *r = current(L);
    size_t n;
    const char *k = luaL_checklstring(L, 2, &n);
    switch (n) {
    case 3:
        if (memcmp(k, "tls", 3) == 0) {
            /* nil over plain HTTP; a table made on each access. */
            const char *proto = lx_req_tls(r, LX_TLS_PROTOCOL);
            if (proto == NULL) {
                lua_pushnil(L);
                return 1;
            }
            const char *sni = lx_req_tls(r, LX_TLS_SNI);
            const char *reused = lx_req_tls(r, LX_TLS_REUSED);
            lua_createtable(L, 0, 5);
            lua_pushstring(L, proto);
            lua_setfield(L, -2, "protocol");
            lua_pushstring(L, lx_req_tls(r, LX_TLS_CIPHER));
            lua_setfield(L, -2, "cipher");
            if (sni) {
                lua_pushstring(L, sni);
                lua_setfield(L, -2, "sni");
            }
            lua_pushboolean(L, reused && reused[0] == 'r');
            lua_setfield(L, -2, "resumed");
            const char *subject = lx_req_tls(r, LX_TLS_CLIENT_SUBJECT);
            if (subject) {
                lua_createtable(L, 0, 2);
                lua_pushstring(L, subject);
                lua_setfield(L, -2, "subject");
                lua_pushstring(L, lx_req_tls(r, LX_TLS_CLIENT_FINGERPRINT));
                lua_setfield(L, -2, "fingerprint");
                lua_setfield(L, -2, "client");
            }
            return 1;
        }
        break;
    case 4:
        if (memcmp(k, "path", 4) == 0) {
            lua_pushlstring(L, r->decoded, r->decoded_len);
            return 1;
        }
        if (memcmp(k, "host", 4) == 0) {
            /* Lower case, as vhost matching sees it: a check against
             * "admin.example" cannot be sidestepped with "ADMIN.example". */
            char buf[256];
            size_t hl = r->host.len < sizeof(buf) ? r->host.len : sizeof(buf);
            for (size_t i = 0; i < hl; i++) {
                char c = r->host.p[i];
                buf[i] = (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
            }
            lua_pushlstring(L, buf, hl);
            return 1;
        }
        break;
    case 5:
        if (memcmp(k, "query", 5) == 0) {
            lua_pushlstring(L, r->query.p ? r->query.p : "", r->query.len);
            return 1;
        }
        if (memcmp(k, "proxy", 5) == 0) {
            lua_pushvalue(L, lua_upvalueindex(5));
            return 1;
        }
        break;
    case 6:
        if (memcmp(k, "method", 6) == 0) {
            lua_pushstring(L, llhttp_method_name((llhttp_method_t)r->method));
            return 1;
        }
        if (memcmp(k, "scheme", 6) == 0) {
            lua_pushstring(L, r->secure ? "https" : "http");
            return 1;
        }
        break;
    case 7:
        if (memcmp(k, "headers", 7) == 0) {
            lua_pushvalue(L, lua_upvalueindex(4));
            return 1;
        }
        if (memcmp(k, "respond", 7) == 0) {
            lua_pushvalue(L, lua_upvalueindex(3));
            return 1;
        }
        break;
        break;
    case 8:
        if (memcmp(k, "redirect", 8) == 0) {
            lua_pushvalue(L, lua_upvalueindex(2));
            return 1;
        }
        break;
    case 10:
        if (memcmp(k, "set_header", 10) == 0) {
            lua_pushvalue(L, lua_upvalueindex(1));
            return 1;
        }
        break;
    case 11:
        if (memcmp(k, "remote_addr", 11) == 0) {
            char peer[48];
            lua_pushstring(L, lx_req_peer(r, peer));
            return 1;
        }
        break;
    case 12:
        /* The status whose error page this is (r.path is the page), or
         * nil for a request: lets a policy keep pages that clients may not
         * fetch themselves (nginx's `internal`). */
        if (memcmp(k, "error_status", 12) == 0) {
            if (r->error_status)
                lua_pushinteger(L, r->error_status);
            else
                lua_pushnil(L);
            return 1;
        }
        break;
    }
    lua_pushnil(L);
    return 1;
}

static int req_newindex(lua_State *L) {
    return luaL_error(L, "the request object is read-only; use r:set_header()");
}

static void make_request_object(lua_State *L, lx_policy_vm_t *vm) {
    lua_newuserdata(L, 1); /* r */
    lua_newtable(L);       /* its metatable */
    lua_pushcfunction(L, r_set_header);
    lua_pushcfunction(L, r_redirect);
    lua_pushcfunction(L, r_respond);
    lua_newuserdata(L, 1); /* r.headers */
    lua_newtable(L);
    lua_pushcfunction(L, headers_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_pushcfunction(L, r_proxy);
    lua_pushcclosure(L, req_index, 5);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, req_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushliteral(L, "luxd request");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    vm->req_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* ---- building the states ---------------------------------------------- */

static int refuse(lua_State *L) {
    return luaL_error(L,
                      "%s is not available while serving requests (only while the "
                      "config loads)",
                      lua_tostring(L, lua_upvalueindex(1)));
}

/* Replaces tbl[name] (tbl at the top of the stack) by refuse(). Library
 * tables are shared, so a policy that captured `io` at config time gets the
 * refusing functions too. */
static void neuter(lua_State *L, const char *lib, const char *const names[]) {
    for (size_t i = 0; names[i]; i++) {
        char what[64];
        snprintf(what, sizeof(what), "%s%s%s", lib ? lib : "", lib ? "." : "", names[i]);
        lua_pushstring(L, what);
        lua_pushcclosure(L, refuse, 1);
        lua_setfield(L, -2, names[i]);
    }
}

/* Nothing a policy runs may block the loop or escape the budget. */
static void sandbox(lua_State *L, const lx_policy_vm_t *vm) {
    static const char *const io_fns[] = {"open",  "popen",  "lines", "read",    "write",
                                         "input", "output", "close", "tmpfile", NULL};
    static const char *const os_fns[] = {"execute", "exit",      "remove", "rename",
                                         "tmpname", "setlocale", NULL};
    static const char *const base_fns[] = {"dofile", "loadfile", "require", NULL};
    static const char *const debug_fns[] = {"sethook",  "gethook",     "debug",
                                            "setlocal", "setupvalue",  "setmetatable",
                                            "setfenv",  "getregistry", NULL};
    static const char *const pkg_fns[] = {"loadlib", NULL};
    /* Turning the JIT back on would compile loops the count hook cannot
     * stop. */
    static const char *const jit_fns[] = {"on", "off", "flush", NULL};
    static const struct {
        const char *lib;
        const char *const *fns;
    } libs[] = {{"io", io_fns},
                {"os", os_fns},
                {"debug", debug_fns},
                {"package", pkg_fns},
                {"jit", jit_fns}};
    for (size_t i = 0; i < LX_ARRAY_SIZE(libs); i++) {
        lua_getglobal(L, libs[i].lib);
        if (lua_istable(L, -1)) neuter(L, libs[i].lib, libs[i].fns);
        lua_pop(L, 1);
    }
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    neuter(L, NULL, base_fns);
    lua_pop(L, 1);
    lua_getglobal(L, "jit");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "opt");
        if (lua_istable(L, -1)) {
            static const char *const opt_fns[] = {"start", NULL};
            neuter(L, "jit.opt", opt_fns);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    /* Lua patterns run in C, where the count hook never fires, and a few
     * quantifiers over a long subject backtrack for minutes. Each pattern
     * call is priced first: subject length to the power of the number of
     * quantifiers must stay under 1e8 steps (~0.3 s), or it is refused.
     * Plain finds are free. String methods (s:find) use the global string
     * table, the config's environment has its own copy: both are wrapped. */
    static const char guard[] =
        "local string, type, error, select = ...\n"
        "local gsub = string.gsub\n"
        "local function price(s, p)\n"
        "  if type(s) ~= 'string' or type(p) ~= 'string' then return end\n"
        "  local q = select(2, gsub(gsub(p, '%%.', 'x'), '[%*%+%-%?]', ''))\n"
        "  if q > 0 and (#s) ^ q > 1e8 then\n"
        "    error('pattern too costly for a "
        "subject of ' .. #s .. ' bytes (' .. q ..\n"
        "          ' quantifiers); use a plain find or a shorter subject', 3)\n"
        "  end\n"
        "end\n"
        "local function wrap(t)\n"
        "  local find, match, gmatch, sub = t.find, t.match, t.gmatch, t.gsub\n"
        "  t.find = function(s, p, i, plain) if not plain then price(s, p) end "
        "return find(s, p, i, plain) end\n"
        "  t.match = function(s, p, i) price(s, p) return match(s, p, i) end\n"
        "  t.gmatch = function(s, p) price(s, p) return gmatch(s, p) end\n"
        "  t.gsub = function(s, p, r, n) price(s, p) return sub(s, p, r, n) end\n"
        "end\n"
        "return wrap\n";
    if (luaL_loadbuffer(L, guard, sizeof(guard) - 1, "=luxd pattern guard") == 0) {
        lua_getglobal(L, "string");
        lua_getglobal(L, "type");
        lua_getglobal(L, "error");
        lua_getglobal(L, "select");
        if (lua_pcall(L, 4, 1, 0) == 0) {
            int wrap = lua_gettop(L);
            lua_pushvalue(L, wrap);
            lua_getglobal(L, "string");
            lua_call(L, 1, 0);
            for (uint32_t i = 0; i < vm->n; i++) {
                lua_rawgeti(L, LUA_REGISTRYINDEX, vm->refs[i]);
                lua_getfenv(L, -1);
                lua_getfield(L, -1, "string");
                if (lua_istable(L, -1)) {
                    lua_pushvalue(L, wrap);
                    lua_insert(L, -2);
                    lua_call(L, 1, 0);
                } else {
                    lua_pop(L, 1);
                }
                lua_pop(L, 2);
            }
        }
        lua_settop(L, 0);
    }
    /* The config's own environment holds its own `require`. */
    for (uint32_t i = 0; i < vm->n; i++) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, vm->refs[i]);
        lua_getfenv(L, -1);
        if (lua_istable(L, -1)) neuter(L, NULL, base_fns);
        lua_pop(L, 2);
    }
}

/* The key a policy is bound by: its vhost's name, then, for a location's own
 * policy, a NUL and the location's prefix. Host names never hold a NUL, so
 * two different places never share a key. Pushed onto L. */
static void push_key(lua_State *L, const char *vhost, const char *prefix) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, vhost);
    if (prefix) {
        luaL_addchar(&b, '\0');
        luaL_addstring(&b, prefix);
    }
    luaL_pushresult(&b);
}

/* "vhost "a.test"" or "vhost "a.test" location "/p/"", for messages. */
static void describe(char *buf, size_t len, const char *vhost, const char *prefix) {
    if (prefix)
        snprintf(buf, len, "vhost \"%s\" location \"%s\"", vhost, prefix);
    else
        snprintf(buf, len, "vhost \"%s\"", vhost);
}

/* Writes "file:line" of the vhost `name` (or of its location `prefix`) as
 * the description at desc records it, or just path when it records none. */
static void declared_at(lua_State *L, int desc, const char *name, const char *prefix,
                        const char *path, char *buf, size_t len) {
    int top = lua_gettop(L);
    snprintf(buf, len, "%s", path);
    lua_getfield(L, desc, "vhosts");
    size_t nv = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    for (size_t i = 1; i <= nv; i++) {
        lua_rawgeti(L, top + 1, (int)i);
        lua_getfield(L, -1, "name");
        int match = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), name) == 0;
        lua_pop(L, 1);
        if (!match) {
            lua_pop(L, 1);
            continue;
        }
        if (prefix) {
            lua_getfield(L, -1, "locations");
            size_t nl = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
            for (size_t j = 1; j <= nl; j++) {
                lua_rawgeti(L, -1, (int)j);
                lua_getfield(L, -1, "prefix");
                match = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), prefix) == 0;
                lua_pop(L, 1);
                if (match) break;
                lua_pop(L, 1);
            }
            if (!match) break;
        }
        lua_getfield(L, -1, "_file");
        lua_getfield(L, -2, "_line");
        if (lua_isstring(L, -2) && lua_isnumber(L, -1))
            snprintf(buf, len, "%s:%d", lua_tostring(L, -2), (int)lua_tointeger(L, -1));
        break;
    }
    lua_settop(L, top);
}

/* Gathers every policy function of the description at desc into a table
 * keyed by push_key(), left on the stack. A key seen twice (which the DSL
 * already refuses) fails rather than dropping one of the two. */
static int gather(lua_State *L, int desc, const char *path, char *err, size_t errlen) {
    lua_newtable(L);
    int found = lua_gettop(L);
    lua_getfield(L, desc, "vhosts");
    size_t nv = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    for (size_t i = 1; i <= nv; i++) {
        lua_rawgeti(L, -1, (int)i);
        int vh = lua_gettop(L);
        lua_getfield(L, vh, "name");
        const char *name = lua_tostring(L, -1);
        lua_getfield(L, vh, "locations");
        size_t nl = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
        /* j == 0 is the vhost's own policy, j >= 1 its locations'. */
        for (size_t j = 0; name && j <= nl; j++) {
            const char *prefix = NULL;
            if (j == 0) {
                lua_pushvalue(L, vh);
            } else {
                lua_rawgeti(L, vh + 2, (int)j);
                lua_getfield(L, -1, "prefix");
                prefix = lua_tostring(L, -1);
                lua_pop(L, 1); /* the location table keeps the string alive */
                if (prefix == NULL) {
                    lua_pop(L, 1);
                    continue;
                }
            }
            lua_getfield(L, -1, "policy");
            if (lua_isfunction(L, -1)) {
                push_key(L, name, prefix);
                lua_pushvalue(L, -1);
                lua_rawget(L, found);
                int dup = !lua_isnil(L, -1);
                lua_pop(L, 1);
                if (dup) {
                    char where[600];
                    describe(where, sizeof(where), name, prefix);
                    snprintf(err, errlen, "%s: %s declares two policies", path, where);
                    lua_settop(L, found - 1);
                    return -EINVAL;
                }
                lua_insert(L, -2);
                lua_rawset(L, found);
            } else {
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        }
        lua_settop(L, vh - 1);
    }
    lua_pop(L, 1);
    return 0;
}

/* Finds, for each slot the loader numbered (load_site.c), the function this run declared at
 * the same vhost and location, and fails when the two runs disagree on any
 * of them. Binding by position would hand a policy to another vhost
 * whenever the config declares its vhosts in another order on this run, as
 * a pairs() loop does: LuaJIT seeds string hashes per state. */
static int collect(lua_State *L, lx_policy_vm_t *vm, const lx_gen_t *g, int desc, const char *path,
                   char *err, size_t errlen) {
    if (gather(L, desc, path, err, errlen) < 0) return -EINVAL;
    int found = lua_gettop(L);
    vm->refs = calloc(g->npolicies, sizeof(int));
    if (vm->refs == NULL) return -ENOMEM;
    for (size_t i = 0; i < g->nvhosts; i++) {
        const lx_vhost_t *vh = &g->vhosts[i];
        /* A location starts as a copy of its vhost's site, so it owns a
         * policy exactly when its slot differs from the vhost's. */
        for (size_t j = 0; j <= vh->nlocations; j++) {
            uint32_t slot = j == 0 ? vh->site.policy : vh->locations[j - 1].site.policy;
            if (slot == 0 || (j > 0 && slot == vh->site.policy)) continue;
            const char *prefix = j == 0 ? NULL : vh->locations[j - 1].prefix;
            if (slot > g->npolicies || vm->refs[slot - 1] != 0) {
                snprintf(err, errlen, "%s: policy slot %u is numbered twice", path, slot);
                return -EINVAL;
            }
            push_key(L, vh->name, prefix);
            lua_pushvalue(L, -1);
            lua_rawget(L, found);
            if (!lua_isfunction(L, -1)) {
                char where[600];
                describe(where, sizeof(where), vh->name, prefix);
                snprintf(err, errlen,
                         "%s:%d: %s has a policy when the config first ran, but not when it "
                         "ran again for a worker; a config must declare the same vhosts and "
                         "policies each time it runs",
                         j == 0 ? vh->file : vh->locations[j - 1].file,
                         j == 0 ? vh->line : vh->locations[j - 1].line, where);
                return -EINVAL;
            }
            vm->refs[slot - 1] = luaL_ref(L, LUA_REGISTRYINDEX);
            lua_pushnil(L);
            lua_rawset(L, found); /* bound: what stays in found was not in the first run */
            vm->n++;
        }
    }
    lua_pushnil(L);
    if (lua_next(L, found)) {
        lua_pop(L, 1);
        size_t klen;
        const char *key = lua_tolstring(L, -1, &klen);
        size_t vlen = strlen(key); /* the vhost name ends at the NUL, if there is one */
        const char *prefix = vlen < klen ? key + vlen + 1 : NULL;
        char where[600], at[300];
        describe(where, sizeof(where), key, prefix);
        declared_at(L, desc, key, prefix, path, at, sizeof(at));
        snprintf(err, errlen,
                 "%s: %s has a policy when the config ran again for a worker, but not when it "
                 "first ran; a config must declare the same vhosts and policies each time it runs",
                 at, where);
        return -EINVAL;
    }
    if (vm->n != g->npolicies) {
        snprintf(err, errlen, "%s: %u of %u policy slots are bound to a vhost", path, vm->n,
                 g->npolicies);
        return -EINVAL;
    }
    lua_pop(L, 1);
    return 0;
}

static void vm_free(lx_policy_vm_t *vm) {
    if (vm == NULL) return;
    if (vm->L) lua_close(vm->L);
    free(vm->refs);
    free(vm);
}

static lx_policy_vm_t *vm_build(const lx_gen_t *g, const char *path, const char *prefix, char *err,
                                size_t errlen) {
    lx_policy_vm_t *vm = calloc(1, sizeof(*vm));
    if (vm == NULL || (vm->L = lua_newstate(vm_alloc, vm)) == NULL) {
        snprintf(err, errlen, "%s: cannot create a Lua state for policies", path);
        vm_free(vm);
        return NULL;
    }
    lua_State *L = vm->L;
    luaL_openlibs(L);
    if (lx_config_run(L, path, prefix, err, errlen) < 0) {
        vm_free(vm);
        return NULL;
    }
    int rc = collect(L, vm, g, lua_gettop(L), path, err, errlen);
    if (rc < 0) {
        if (rc == -ENOMEM) snprintf(err, errlen, "%s: out of memory binding policies", path);
        vm_free(vm);
        return NULL;
    }
    lua_pop(L, 1); /* the description: only the functions stay */
    sandbox(L, vm);
    make_request_object(L, vm);
    /* The interpreter honours the count hook; compiled traces would not,
     * and a runaway loop must be stoppable. */
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, HOOK_EVERY);
    lua_gc(L, LUA_GCCOLLECT, 0);
    vm->budget = g->srv.policy_budget / HOOK_EVERY + 1;
    vm->limit = vm->mem + g->srv.policy_memory;
    return vm;
}

int lx_policy_build(lx_gen_t *g, const char *path, const char *prefix, int nloops, char *err,
                    size_t errlen) {
    if (g->npolicies == 0) return 0;
    g->vms = calloc((size_t)nloops, sizeof(*g->vms));
    if (g->vms == NULL) return -ENOMEM;
    for (int i = 0; i < nloops; i++) {
        if ((g->vms[i] = vm_build(g, path, prefix, err, errlen)) == NULL)
            return -EINVAL; /* lx_gen_unref frees what was built */
        g->nvms = i + 1;
    }
    return 0;
}

void lx_policy_free(lx_gen_t *g) {
    for (int i = 0; i < g->nvms; i++)
        vm_free(g->vms[i]);
    free(g->vms);
    g->vms = NULL;
    g->nvms = 0;
}

/* ---- running ------------------------------------------------------------ */

int lx_policy_run(lx_req_t *r, int loop, uint32_t slot, const lx_upstream_t **handoff) {
    lx_gen_t *g = r->gen;
    if (loop >= g->nvms || slot == 0 || slot > g->vms[loop]->n) {
        lx_log_error("vhost \"%s\": policy slot %u missing; failing closed", r->vhost->name, slot);
        lx_resp_simple(r, 500, NULL);
        return -1;
    }
    lx_policy_vm_t *vm = g->vms[loop];
    lua_State *L = vm->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, vm->refs[slot - 1]);
    lua_rawgeti(L, LUA_REGISTRYINDEX, vm->req_ref);
    vm->cur = r;
    vm->answered = 0;
    vm->handoff = NULL;
    vm->ticks = vm->budget;
    lx_stats_t *st = r->w->stats;
    LX_ST_INC(&st->policy_runs);
    int rc = lua_pcall(L, 1, 1, 0);
    vm->cur = NULL;
    if (rc != 0) {
        /* The budget hook leaves ticks at 0 once it has fired. */
        LX_ST_INC(&st->policy_faults[rc == LUA_ERRMEM ? LX_PF_MEMORY
                                     : vm->ticks == 0 ? LX_PF_BUDGET
                                                      : LX_PF_ERROR]);
        const char *msg = lua_tostring(L, -1);
        /* An error raised by r:respond in `return r:respond(...)` has no
         * line: the tail call replaced the policy's frame. Such a message
         * then names where the policy itself is defined. */
        char where[128] = "";
        lua_Debug ar;
        lua_rawgeti(L, LUA_REGISTRYINDEX, vm->refs[slot - 1]);
        if (lua_getinfo(L, ">S", &ar) && ar.linedefined > 0) {
            size_t sl = strlen(ar.short_src);
            if (rc == LUA_ERRMEM || msg == NULL || strncmp(msg, ar.short_src, sl) != 0 ||
                msg[sl] != ':')
                snprintf(where, sizeof(where), " (in the policy at %s:%d)", ar.short_src,
                         ar.linedefined);
        }
        lx_log_error("policy of vhost \"%s\" failed for %s: %s%s", r->vhost->name, r->decoded,
                     rc == LUA_ERRMEM ? "out of memory (policy_memory)"
                     : msg            ? msg
                                      : "error",
                     where);
        lua_settop(L, 0);
        if (rc == LUA_ERRMEM) lua_gc(L, LUA_GCCOLLECT, 0);
        if (r->resp.state == LX_RESP_NONE) lx_resp_simple(r, 500, NULL);
        return -1;
    }
    int status = 0;
    if (lua_type(L, -1) == LUA_TNUMBER) {
        lua_Number sn = lua_tonumber(L, -1);
        status = policy_status(sn);
        if (status < 0) {
            lx_log_error("policy of vhost \"%s\" returned %.14g, not a status; failing closed",
                         r->vhost->name, (double)sn);
            LX_ST_INC(&st->policy_faults[LX_PF_RETURN]);
            status = 500;
        }
    } else if (!lua_isnil(L, -1)) {
        lx_log_error("policy of vhost \"%s\" returned a %s; return a status or nil", r->vhost->name,
                     luaL_typename(L, -1));
        LX_ST_INC(&st->policy_faults[LX_PF_RETURN]);
        status = 500;
    }
    lua_settop(L, 0);
    if (vm->handoff) {
        *handoff = vm->handoff;
        return -2;
    }
    if (vm->answered) return -1;
    return status;
}

/* The policy as the first handler of its site's chain. It runs for an
 * error page too, as the page's location's access rules do (request.c): a
 * page in a place the policy guards is guarded. Any answer but nil (go
 * on), a 2xx r:respond or r:proxy refuses the page: the client gets the
 * built-in page of the original status (lx_resp_simple), never the page.
 * r.error_status tells the policy it guards a page. */
static int policy_handle(lx_req_t *r) {
    if (r->site->policy == 0) return LX_DECLINED;
    const lx_upstream_t *u = NULL;
    int status = lx_policy_run(r, r->w->index, r->site->policy, &u);
    if (status == -2) return lx_proxy_handoff(r, u); /* r:proxy("name") */
    if (status < 0) return LX_DONE;                  /* it answered, or failed closed with a 500 */
    return status > 0 ? status : LX_DECLINED;
}

const lx_handler_t lx_policy_handler = {
    .name = "policy",
    .gen_init = lx_policy_build,
    .gen_free = lx_policy_free,
    .handle = policy_handle,
};
