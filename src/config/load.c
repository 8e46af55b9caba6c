/* Runs the Lua config and turns its description into a generation.
 *
 * The DSL (lua/luxd/config.lua) does the user-facing validation and returns a
 * plain table with defaults filled in; this file reads that table into C
 * structs and checks what only C can (addresses, header bytes). Every error
 * names the file and line the description recorded. */
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

#include "../io/accesslog.h"
#include "../log.h"
#include "../net/tlsctx.h"
#include "lheap.h"
#include "lua_embed.h"
#include "../policy/addrset.h"
#include "../policy/shared.h"
#include "llhttp.h"

typedef struct {
    lua_State *L;
    lx_gen_t *g;
    char *err;
    size_t errlen;
    const char *file; /* where the table being read was declared */
    int line;
    uint32_t site_ids; /* site ids handed out so far */
} loader_t;

/* Records "file:line: message" for the table on top of the stack. */
static int fail(loader_t *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(loader_t *ld, const char *fmt, ...) {
    int n = snprintf(ld->err, ld->errlen, "%s:%d: ", ld->file ? ld->file : "?", ld->line);
    if (n < 0 || (size_t)n >= ld->errlen) return -EINVAL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ld->err + n, ld->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Sets ld->file/line from the _file/_line fields of the table at idx. */
static void locate(loader_t *ld, int idx) {
    lua_getfield(ld->L, idx, "_file");
    if (lua_isstring(ld->L, -1)) ld->file = lx_arena_strdup(&ld->g->arena, lua_tostring(ld->L, -1));
    lua_pop(ld->L, 1);
    lua_getfield(ld->L, idx, "_line");
    if (lua_isnumber(ld->L, -1)) ld->line = (int)lua_tointeger(ld->L, -1);
    lua_pop(ld->L, 1);
}

static const char *get_str(loader_t *ld, int idx, const char *key, const char *def) {
    lua_getfield(ld->L, idx, key);
    const char *v = def;
    if (lua_type(ld->L, -1) == LUA_TSTRING)
        v = lx_arena_strdup(&ld->g->arena, lua_tostring(ld->L, -1));
    lua_pop(ld->L, 1);
    return v;
}

static double get_num(loader_t *ld, int idx, const char *key, double def) {
    lua_getfield(ld->L, idx, key);
    double v = lua_type(ld->L, -1) == LUA_TNUMBER ? lua_tonumber(ld->L, -1) : def;
    lua_pop(ld->L, 1);
    return v;
}

static int get_bool(loader_t *ld, int idx, const char *key, int def) {
    lua_getfield(ld->L, idx, key);
    int v = lua_type(ld->L, -1) == LUA_TBOOLEAN ? lua_toboolean(ld->L, -1) : def;
    lua_pop(ld->L, 1);
    return v;
}

/* Seconds as ms; a positive value is at least 1 ms (0 means "none" to the
 * deadlines: handshake_timeout = 0.0004 turned the timeout off). */
static uint32_t get_ms(loader_t *ld, int idx, const char *key, double def_s) {
    double s = get_num(ld, idx, key, def_s);
    if (s <= 0) return 0;
    return s * 1000 > 4e9 ? 4000000000u : s * 1000 < 1 ? 1 : (uint32_t)(s * 1000);
}

static int parse_listen(loader_t *ld, int idx, lx_listen_t *l) {
    locate(ld, idx);
    l->file = ld->file;
    l->line = ld->line;
    const char *host = get_str(ld, idx, "host", "");
    int port = (int)get_num(ld, idx, "port", 0);
    l->proxy_protocol = get_bool(ld, idx, "proxy_protocol", 0);
    l->tls = get_bool(ld, idx, "tls", 0);
    if (port < 1 || port > 65535) return fail(ld, "listen: port %d out of range", port);
    snprintf(l->text, sizeof(l->text), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    memset(&l->addr, 0, sizeof(l->addr));
    if (*host == '\0') {
        /* "all addresses": IPv6 any, dual-stack, so one socket serves both
         * families (worker.c clears IPV6_V6ONLY for it). */
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&l->addr;
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_any;
        a6->sin6_port = htons((uint16_t)port);
        l->addrlen = sizeof(*a6);
        return 0;
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%d", port);
    int r = getaddrinfo(host, portstr, &hints, &res);
    if (r != 0) return fail(ld, "listen \"%s\": %s", l->text, gai_strerror(r));
    memcpy(&l->addr, res->ai_addr, res->ai_addrlen);
    l->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* An access_log value (a table, a path, or false) at idx into c; file and
 * line are where the key is written. */
static int read_access_log(loader_t *ld, int idx, lx_access_log_conf_t *c, const char *file,
                           int line, const char *what) {
    lua_State *L = ld->L;
    c->slot = c->fd = -1;
    c->file = file;
    c->line = line;
    if (lua_istable(L, idx)) {
        c->path = get_str(ld, idx, "path", NULL);
        c->format = get_str(ld, idx, "format", "combined");
        const char *esc = get_str(ld, idx, "escape", "default");
        c->json = strcmp(esc, "json") == 0;
    } else if (lua_type(L, idx) == LUA_TSTRING) {
        c->path = lx_arena_strdup(&ld->g->arena, lua_tostring(L, idx));
        c->format = "combined";
    }
    if (c->path == NULL) return 0;
    /* luxd.schema checked the template already; this is what the loops
     * print from, so that no request matches a variable name. */
    char why[160];
    int r = lx_access_log_compile(&ld->g->arena, c, why, sizeof(why));
    if (r == -ENOMEM) return fail(ld, "%s: out of memory", what);
    if (r < 0) {
        ld->file = file;
        ld->line = line;
        return fail(ld, "%s: access_log: %s", what, why);
    }
    return 0;
}

static const char **get_strings(loader_t *ld, int idx, const char *key, size_t *n);

/* real_ip at t[key] (a table, false, or absent) into *out: NULL when absent
 * or false, *off set for false. */
static int read_realip(loader_t *ld, int idx, const lx_realip_t **out, int *off) {
    lua_State *L = ld->L;
    *out = NULL;
    if (off) *off = 0;
    lua_getfield(L, idx, "real_ip");
    int t = lua_gettop(L);
    if (lua_type(L, t) == LUA_TBOOLEAN && !lua_toboolean(L, t) && off) *off = 1;
    if (!lua_istable(L, t)) {
        lua_pop(L, 1);
        return 0;
    }
    lx_realip_t *ri = lx_arena_calloc(&ld->g->arena, sizeof(*ri));
    if (ri == NULL) return fail(ld, "out of memory");
    locate(ld, t);
    ri->file = ld->file;
    ri->line = ld->line;
    size_t n;
    const char **from = get_strings(ld, t, "from", &n);
    lx_addr_t *first = lx_arena_alloc(&ld->g->arena, (n ? n : 1) * sizeof(lx_addr_t));
    lx_addr_t *last = lx_arena_alloc(&ld->g->arena, (n ? n : 1) * sizeof(lx_addr_t));
    if (first == NULL || last == NULL) return fail(ld, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (lx_cidr_parse(from[i], &first[i], &last[i]) < 0)
            return fail(ld, "real_ip: invalid address \"%s\" in from", from[i]);
    lx_cidrset_build(&ri->from, first, last, n);
    const char *h = get_str(ld, t, "header", NULL);
    if (h) {
        char *lower = lx_arena_strdup(&ld->g->arena, h);
        for (char *p = lower; *p; p++)
            if (*p >= 'A' && *p <= 'Z') *p |= 0x20;
        ri->header = lower;
        ri->header_len = strlen(lower);
        ri->xff = strcmp(lower, "x-forwarded-for") == 0;
    }
    lua_pop(L, 1);
    *out = ri;
    return 0;
}

/* server { tls = { ... } }, as the schema gives it: the files and the
 * cipher list are checked by lx_tls_gen_build. */
static int read_server_tls(loader_t *ld, int idx, lx_server_tls_t *t) {
    lua_State *L = ld->L;
    t->min_version = 0x0303; /* TLS 1.2 */
    t->max_version = 0x0304; /* TLS 1.3 */
    t->handshake_timeout = 10000;
    lua_getfield(L, idx, "tls");
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    int tt = lua_gettop(L);
    t->file = get_str(ld, tt, "_file", ld->file);
    t->line = (int)get_num(ld, tt, "_line", ld->line);
    t->ticket_key_file = get_str(ld, tt, "ticket_key_file", NULL);
    t->ticket_key_file_line = (int)get_num(ld, tt, "_ticket_key_file_line", t->line);
    t->ciphers = get_str(ld, tt, "ciphers", NULL);
    t->ciphers_line = (int)get_num(ld, tt, "_ciphers_line", t->line);
    t->handshake_timeout = get_ms(ld, tt, "handshake_timeout", 10);
    lua_getfield(L, tt, "protocols");
    if (lua_istable(L, -1)) {
        int n = (int)lua_objlen(L, -1), lo = 0x0304, hi = 0x0303;
        for (int i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            int v = strcmp(lua_tostring(L, -1), "TLSv1.3") == 0 ? 0x0304 : 0x0303;
            lua_pop(L, 1);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        t->min_version = lo;
        t->max_version = hi;
    }
    lua_pop(L, 2);
    return 0;
}

static int read_server(loader_t *ld, int idx) {
    lua_State *L = ld->L;
    lx_server_conf_t *s = &ld->g->srv;
    locate(ld, idx);
    s->file = ld->file;
    s->line = ld->line;
    lua_getfield(L, idx, "listen");
    size_t n = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    s->listen = lx_arena_calloc(&ld->g->arena, (n ? n : 1) * sizeof(*s->listen));
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, -1, (int)i + 1);
        int r = parse_listen(ld, lua_gettop(L), &s->listen[i]);
        lua_pop(L, 1);
        if (r < 0) return r;
    }
    s->nlisten = n;
    lua_pop(L, 1);
    ld->file = s->file;
    ld->line = s->line;
    if (n == 0) return fail(ld, "server: no listen address");

    s->workers = (int)get_num(ld, idx, "workers", 0);
    if (s->workers <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        s->workers = cpus > 0 ? (int)cpus : 1;
    }
    s->user = get_str(ld, idx, "user", NULL);
    s->pid_file = get_str(ld, idx, "pid_file", NULL);
    s->error_log = get_str(ld, idx, "error_log", "stderr");
    const char *level = get_str(ld, idx, "error_log_level", "info");
    s->error_log_level = lx_log_level_parse(level);
    if (s->error_log_level < 0) return fail(ld, "server: unknown error_log_level \"%s\"", level);

    lua_getfield(L, idx, "_lines");
    if (lua_istable(L, -1)) {
        s->error_log_line = (int)get_num(ld, lua_gettop(L), "error_log", s->line);
        s->access_log_line = (int)get_num(ld, lua_gettop(L), "access_log", s->line);
        s->mime_types_line = (int)get_num(ld, lua_gettop(L), "mime_types", s->line);
    } else {
        s->error_log_line = s->access_log_line = s->mime_types_line = s->line;
    }
    lua_pop(L, 1);
    lua_getfield(L, idx, "access_log");
    int r =
        read_access_log(ld, lua_gettop(L), &s->access_log, s->file, s->access_log_line, "server");
    lua_pop(L, 1);
    if (r < 0) return r;
    s->request_id_header = get_str(ld, idx, "request_id_header", NULL);
    s->request_id_header_len = s->request_id_header ? strlen(s->request_id_header) : 0;
    s->access_log_buffer = (size_t)get_num(ld, idx, "access_log_buffer", 65536);
    s->access_log_unbuffered = s->access_log_buffer == 0;
    if (s->access_log_buffer < 16384) s->access_log_buffer = 16384;

    s->keepalive_timeout = get_ms(ld, idx, "keepalive_timeout", 30);
    s->keepalive_requests = (uint32_t)get_num(ld, idx, "keepalive_requests", 1000);
    s->header_timeout = get_ms(ld, idx, "header_timeout", 10);
    s->body_timeout = get_ms(ld, idx, "body_timeout", 30);
    s->send_timeout = get_ms(ld, idx, "send_timeout", 60);
    s->drain_timeout = get_ms(ld, idx, "drain_timeout", 30);
    s->max_header_bytes = (size_t)get_num(ld, idx, "max_header_bytes", 8192);
    if (s->max_header_bytes < 256) return fail(ld, "server: max_header_bytes must be at least 256");
    s->max_body_bytes = (uint64_t)get_num(ld, idx, "max_body_bytes", 1048576);
    s->max_connections = (uint32_t)get_num(ld, idx, "max_connections", 10000);
    s->tcp_nodelay = get_bool(ld, idx, "tcp_nodelay", 1);
    s->defer_accept = get_bool(ld, idx, "defer_accept", 1);
    s->backlog = (int)get_num(ld, idx, "backlog", 511);
    s->policy_budget = (uint64_t)get_num(ld, idx, "policy_budget", 10000000);
    s->policy_memory = (size_t)get_num(ld, idx, "policy_memory", 64 * 1048576);
    s->mime_types = get_str(ld, idx, "mime_types", NULL);
    s->vhost_dir = get_str(ld, idx, "vhost_dir", NULL);
    if (s->vhost_dir) {
        size_t dl = strlen(s->vhost_dir);
        while (dl > 1 && s->vhost_dir[dl - 1] == '/')
            dl--;
        s->vhost_dir_len = dl;
    }
    int rr = read_realip(ld, idx, &s->real_ip, NULL);
    return rr < 0 ? rr : read_server_tls(ld, idx, &s->tls);
}

static int is_token_char(unsigned char c) {
    return c > 0x20 && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

/* Appends "Name: value\r\n" to buf, refusing what would split a header. */
static int add_header(loader_t *ld, char **buf, size_t *len, size_t *cap, const char *name,
                      const char *value) {
    for (const char *p = name; *p; p++)
        if (!is_token_char((unsigned char)*p))
            return fail(ld, "header name \"%s\" is not an HTTP token", name);
    if (*name == '\0') return fail(ld, "empty header name");
    for (const char *p = value; *p; p++)
        if ((unsigned char)*p < 0x20 && *p != '\t')
            return fail(ld, "header \"%s\": value contains a control character", name);
    size_t need = strlen(name) + strlen(value) + 4;
    if (*len + need + 1 > *cap) {
        size_t ncap = (*cap + need) * 2;
        char *nb = realloc(*buf, ncap);
        if (nb == NULL) return -ENOMEM;
        *buf = nb;
        *cap = ncap;
    }
    *len += (size_t)sprintf(*buf + *len, "%s: %s\r\n", name, value);
    return 0;
}

/* proxy = / fallback = at idx: nil keeps what the site has (a location
 * inherits its vhost's), false clears it, a name points into g->upstreams,
 * which read_upstreams filled before any vhost is read. */
static int get_upstream_ref(loader_t *ld, int idx, const char *key, const lx_upstream_t **out) {
    lua_getfield(ld->L, idx, key);
    int r = 0;
    if (lua_type(ld->L, -1) == LUA_TBOOLEAN && !lua_toboolean(ld->L, -1)) {
        *out = NULL;
    } else if (lua_type(ld->L, -1) == LUA_TSTRING) {
        size_t len;
        const char *name = lua_tolstring(ld->L, -1, &len);
        *out = lx_gen_upstream(ld->g, name, len);
        /* luxd.config checks the name; this only guards the pointer. */
        if (*out == NULL) r = fail(ld, "%s: upstream \"%s\" is not declared", key, name);
    }
    lua_pop(ld->L, 1);
    return r;
}

/* The proxy keys of a vhost or location: each one not given is inherited. */
static int read_site_proxy(loader_t *ld, int idx, lx_site_t *site) {
    lua_State *L = ld->L;
    int r = get_upstream_ref(ld, idx, "proxy", &site->proxy);
    if (r == 0) r = get_upstream_ref(ld, idx, "fallback", &site->fallback);
    if (r < 0) return r;
    lua_getfield(L, idx, "proxy_host");
    if (lua_type(L, -1) == LUA_TSTRING)
        site->proxy_host = lx_arena_strdup(&ld->g->arena, lua_tostring(L, -1));
    else if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1))
        site->proxy_host = NULL; /* false: the client's Host again */
    lua_pop(L, 1);
    site->proxy_via = (unsigned)get_bool(ld, idx, "proxy_via", site->proxy_via);
    site->proxy_underscores =
        (unsigned)get_bool(ld, idx, "proxy_underscores", site->proxy_underscores);

    /* A site's own proxy_headers replace the inherited ones whole, as its
     * own headers do. */
    lua_getfield(L, idx, "proxy_headers");
    if (lua_istable(L, -1)) {
        size_t n = lua_objlen(L, -1);
        lx_header_t *h = n ? lx_arena_calloc(&ld->g->arena, n * sizeof(*h)) : NULL;
        if (n && h == NULL) r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < n; i++) {
            lua_rawgeti(L, -1, (int)i + 1);
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            size_t nl, vl;
            const char *name = lua_tolstring(L, -2, &nl), *value = lua_tolstring(L, -1, &vl);
            if (name == NULL || value == NULL || nl == 0) {
                r = fail(ld, "proxy_headers: entries must be strings");
            } else {
                /* luxd.config refuses these too; what reaches a request line
                 * must never be able to split it. */
                for (size_t j = 0; r == 0 && j < nl; j++)
                    if (!is_token_char((unsigned char)name[j]))
                        r = fail(ld, "proxy_headers: \"%s\" is not an HTTP token", name);
                for (size_t j = 0; r == 0 && j < vl; j++)
                    if (((unsigned char)value[j] < 0x20 && value[j] != '\t') || value[j] == 0x7f)
                        r = fail(ld, "proxy_headers: \"%s\": value contains a control character",
                                 name);
            }
            if (r == 0) {
                h[i].name = (lx_str_t){lx_arena_strndup(&ld->g->arena, name, nl), nl};
                h[i].value = (lx_str_t){lx_arena_strndup(&ld->g->arena, value, vl), vl};
            }
            lua_pop(L, 3);
        }
        site->proxy_headers = h;
        site->nproxy_headers = r == 0 ? n : 0;
    }
    lua_pop(L, 1);
    return r;
}

/* Reads the serving keys of a vhost or location table into site, starting
 * from the values already there (a location inherits its vhost's). */
/* The file cache keys entries by site id, so every site of a generation
 * (vhost, location, the vhost_dir one) needs its own: ids are handed out in
 * sequence. Ids computed from positions (vhost index * 1024 + location
 * index) made the 1024th location of one vhost share the next vhost's id,
 * and so its cached files and their headers. */
static uint32_t next_site_id(loader_t *ld) {
    return ++ld->site_ids;
}

int lx_config_test_handlers;

static int read_site(loader_t *ld, int idx, lx_site_t *site) {
    lua_State *L = ld->L;
    site->id = next_site_id(ld);
    lua_getfield(L, idx, "root");
    if (lua_type(L, -1) == LUA_TSTRING) {
        size_t len;
        const char *root = lua_tolstring(L, -1, &len);
        while (len > 1 && root[len - 1] == '/')
            len--;
        site->root = lx_arena_strndup(&ld->g->arena, root, len);
        site->root_len = len;
        site->root_file = ld->file;
        site->root_line = (int)get_num(ld, idx, "_root_line", ld->line);
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "index");
    if (lua_istable(L, -1)) {
        size_t n = lua_objlen(L, -1);
        site->index = lx_arena_alloc(&ld->g->arena, (n ? n : 1) * sizeof(char *));
        site->nindex = n;
        for (size_t i = 0; i < n; i++) {
            lua_rawgeti(L, -1, (int)i + 1);
            const char *name = lua_tostring(L, -1);
            if (name == NULL || *name == '\0' || strchr(name, '/'))
                return fail(ld, "index entries must be file names");
            site->index[i] = lx_arena_strdup(&ld->g->arena, name);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);

    /* try_files: the schema checked the entries; false in a location turns
     * the vhost's off. */
    lua_getfield(L, idx, "try_files");
    if (lua_type(L, -1) == LUA_TBOOLEAN) {
        site->try_files = NULL;
        site->ntry_files = 0;
        site->try_status = 0;
    } else if (lua_istable(L, -1)) {
        size_t n = lua_objlen(L, -1);
        if (n < 2) return fail(ld, "try_files needs at least two entries");
        site->try_files = lx_arena_alloc(&ld->g->arena, n * sizeof(char *));
        if (site->try_files == NULL) return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            lua_rawgeti(L, -1, (int)i + 1);
            const char *e = lua_tostring(L, -1);
            site->try_files[i] = lx_arena_strdup(&ld->g->arena, e ? e : "/");
            lua_pop(L, 1);
        }
        site->ntry_files = n;
        const char *last = site->try_files[n - 1];
        site->try_status = last[0] == '=' ? atoi(last + 1) : 0;
    }
    lua_pop(L, 1);

    lua_getfield(L, idx, "policy");
    if (lua_isfunction(L, -1)) {
        site->policy = ++ld->g->npolicies; /* policy.c binds it by vhost name and prefix */
        /* Where the function was written, for --explain: Lua knows the
         * chunk ("@file") and the line its definition starts on. */
        lua_Debug ar;
        lua_pushvalue(L, -1);
        if (lua_getinfo(L, ">S", &ar) && ar.source && ar.linedefined > 0) {
            site->policy_file =
                lx_arena_strdup(&ld->g->arena, ar.source[0] == '@' ? ar.source + 1 : ar.source);
            site->policy_line = ar.linedefined;
        }
    }
    lua_pop(L, 1);

    site->etag = (unsigned)get_bool(ld, idx, "etag", site->etag);
    site->last_modified = (unsigned)get_bool(ld, idx, "last_modified", site->last_modified);
    site->gzip_static = (unsigned)get_bool(ld, idx, "gzip_static", site->gzip_static);
    site->dir_listing = (unsigned)get_bool(ld, idx, "dir_listing", site->dir_listing);
    site->test_handler = (unsigned)get_bool(ld, idx, "test_handler", site->test_handler);
    site->status = (unsigned)get_bool(ld, idx, "status", site->status);
    /* follow_symlinks = true | false | "owner"; a location inherits its
     * vhost's. The default (the zero value, set by calloc) is "owner", as
     * nginx's disable_symlinks if_not_owner: a link is followed only when it
     * and its target have one owner. That keeps links an operator or a site
     * owner makes inside their own files working, and stops a link to a file
     * of someone else (www/pw -> /etc/passwd, made by a site owner who is not
     * root; or one tenant's link into another's tree under vhost_dir). */
    lua_getfield(L, idx, "follow_symlinks");
    if (lua_type(L, -1) == LUA_TBOOLEAN) {
        site->follow_symlinks = lua_toboolean(L, -1) ? LX_SYMLINKS_FOLLOW : LX_SYMLINKS_REFUSE;
        site->follow_symlinks_set = 1;
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        site->follow_symlinks = LX_SYMLINKS_OWNER; /* the schema admits "owner" only */
        site->follow_symlinks_set = 1;
    }
    lua_pop(L, 1);
    site->cache_control = get_str(ld, idx, "cache_control", site->cache_control);
    int r = read_site_proxy(ld, idx, site);
    if (r < 0) return r;

    /* Headers are pre-built once here so a response copies one string. */
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (site->cache_control)
        r = add_header(ld, &buf, &len, &cap, "Cache-Control", site->cache_control);
    lua_getfield(L, idx, "headers");
    int own = lua_istable(L, -1);
    if (!own && site->headers_len) {
        /* Inherited: keep the parent's lines after our Cache-Control, minus
         * the parent's own Cache-Control line, which we just replaced. */
        const char *h = site->headers;
        size_t hl = site->headers_len;
        if (strncmp(h, "Cache-Control: ", 15) == 0) {
            const char *eol = strstr(h, "\r\n");
            hl -= (size_t)(eol + 2 - h);
            h = eol + 2;
        }
        if (r == 0 && hl && (buf = realloc(buf, len + hl + 1)) != NULL) {
            memcpy(buf + len, h, hl);
            len += hl;
            buf[len] = '\0';
        }
    }
    for (size_t i = 1; r == 0 && own && i <= lua_objlen(L, -1); i++) {
        lua_rawgeti(L, -1, (int)i);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        const char *name = lua_tostring(L, -2), *value = lua_tostring(L, -1);
        r = name && value ? add_header(ld, &buf, &len, &cap, name, value)
                          : fail(ld, "headers: entries must be strings");
        lua_pop(L, 3);
    }
    lua_pop(L, 1);
    if (r == 0) {
        site->headers = len ? lx_arena_strndup(&ld->g->arena, buf, len) : "";
        site->headers_len = len;
    }
    free(buf);
    return r;
}

/* Reads an array of strings at t[key] into arena memory. */
static const char **get_strings(loader_t *ld, int idx, const char *key, size_t *n) {
    lua_State *L = ld->L;
    const char **v = NULL;
    *n = 0;
    lua_getfield(L, idx, key);
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

static int read_rule(loader_t *ld, int idx, int kind, const char *what, size_t pos, lx_rule_t *r) {
    locate(ld, idx);
    r->file = ld->file;
    r->line = ld->line;
    r->kind = kind;
    if (kind == LX_RULE_ALLOW || kind == LX_RULE_DENY) {
        const char *action = get_str(ld, idx, "action", "deny");
        r->kind = strcmp(action, "allow") == 0 ? LX_RULE_ALLOW : LX_RULE_DENY;
        r->status = (int)get_num(ld, idx, "status", 403);
        r->prefix = get_str(ld, idx, "prefix", NULL);
        r->prefix_len = r->prefix ? strlen(r->prefix) : 0;
        r->suffix = get_strings(ld, idx, "suffix", &r->nsuffix);
        if (r->nsuffix) {
            r->suffix_len = lx_arena_alloc(&ld->g->arena, r->nsuffix * sizeof(size_t));
            for (size_t i = 0; i < r->nsuffix; i++)
                r->suffix_len[i] = strlen(r->suffix[i]);
        }
        size_t nm;
        const char **methods = get_strings(ld, idx, "method", &nm);
        for (size_t i = 0; i < nm; i++) {
            r->methods |= lx_method_bit(methods[i]);
        }
        size_t nfrom;
        const char **from = get_strings(ld, idx, "from", &nfrom);
        if (nfrom) {
            lx_addr_t *first = lx_arena_alloc(&ld->g->arena, nfrom * sizeof(lx_addr_t));
            lx_addr_t *last = lx_arena_alloc(&ld->g->arena, nfrom * sizeof(lx_addr_t));
            for (size_t i = 0; i < nfrom; i++)
                if (lx_cidr_parse(from[i], &first[i], &last[i]) < 0)
                    return fail(ld, "%s %zu: invalid address \"%s\" in from", what, pos, from[i]);
            lx_cidrset_build(&r->from, first, last, nfrom);
            r->has_from = 1;
        }
    } else {
        r->target = get_str(ld, idx, "target", "/");
        r->status = (int)get_num(ld, idx, "status", 302);
    }
    r->regex = get_str(ld, idx, "regex", NULL);
    if (r->regex) {
        char err[300];
        r->re = lx_regex_compile(r->regex, err, sizeof(err));
        if (r->re == NULL)
            return fail(ld, "%s %zu: invalid regex \"%s\": %s", what, pos, r->regex, err);
    }
    if (r->target) {
        /* A $N the regex has no group for would expand to nothing at best;
         * refuse it here, where the operator sees it, not per request. */
        uint32_t groups = 0;
        if (r->re) pcre2_pattern_info(r->re, PCRE2_INFO_CAPTURECOUNT, &groups);
        int ref = lx_rule_max_ref(r->target);
        if (ref > (int)groups)
            return fail(ld,
                        "%s %zu: target \"%s\" uses $%d, but the regex \"%s\" has %u capture "
                        "group%s",
                        what, pos, r->target, ref, r->regex ? r->regex : "", groups,
                        groups == 1 ? "" : "s");
    }
    return 0;
}

/* Compiles the rule list at t[key]; *out stays NULL for an empty one. */
static int read_rules(loader_t *ld, int idx, const char *key, int kind, const char *what,
                      lx_ruleset_t **out) {
    lua_State *L = ld->L;
    lx_gen_t *g = ld->g;
    *out = NULL;
    lua_getfield(L, idx, key);
    size_t n = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    if (n == 0) {
        lua_pop(L, 1);
        return 0;
    }
    lx_ruleset_t *rs = lx_arena_calloc(&g->arena, sizeof(*rs));
    if (rs != NULL && g->nrulesets == g->rulesets_cap) {
        /* Doubling: one rule set per vhost, and a realloc per set was
         * quadratic (a tenth of a 10,000-vhost load). */
        size_t cap = g->rulesets_cap ? 2 * g->rulesets_cap : 16;
        lx_ruleset_t **all = realloc(g->rulesets, cap * sizeof(*all));
        if (all == NULL) {
            rs = NULL;
        } else {
            g->rulesets = all;
            g->rulesets_cap = cap;
        }
    }
    if (rs == NULL) {
        lua_pop(L, 1);
        return -ENOMEM;
    }
    g->rulesets[g->nrulesets++] = rs;
    rs->rules = lx_arena_calloc(&g->arena, n * sizeof(lx_rule_t));
    int r = 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        lua_rawgeti(L, -1, (int)i + 1);
        r = read_rule(ld, lua_gettop(L), kind, what, i + 1, &rs->rules[i]);
        rs->n = (uint32_t)i + 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (r == 0) r = lx_ruleset_index(rs);
    *out = rs;
    return r;
}

static int read_error_pages(loader_t *ld, int idx, lx_site_t *site) {
    lua_State *L = ld->L;
    lua_getfield(L, idx, "error_pages");
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        n++;
        lua_pop(L, 1);
    }
    int *status = lx_arena_alloc(&ld->g->arena, (n ? n : 1) * sizeof(int));
    const char **page = lx_arena_alloc(&ld->g->arena, (n ? n : 1) * sizeof(char *));
    int *line = lx_arena_alloc(&ld->g->arena, (n ? n : 1) * sizeof(int));
    if (status == NULL || page == NULL || line == NULL) {
        lua_pop(L, 1);
        return -ENOMEM;
    }
    lua_getfield(L, idx, "_error_page_lines");
    size_t i = 0;
    lua_pushnil(L);
    while (lua_next(L, -3)) {
        if (lua_type(L, -2) == LUA_TNUMBER && lua_type(L, -1) == LUA_TSTRING && i < n) {
            status[i] = (int)lua_tointeger(L, -2);
            line[i] = ld->line;
            if (lua_istable(L, -3)) {
                lua_pushvalue(L, -2);
                lua_rawget(L, -4);
                if (lua_isnumber(L, -1)) line[i] = (int)lua_tointeger(L, -1);
                lua_pop(L, 1);
            }
            page[i++] = lx_arena_strdup(&ld->g->arena, lua_tostring(L, -1));
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    if (i) {
        site->error_status = status;
        site->error_page = page;
        site->error_page_line = line;
        site->nerror_pages = i;
    }
    return 0;
}

static void add_warning(loader_t *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* No client address to test: an access rule with `from` asks for one, and
 * then which clients it denies cannot be told here. */
static lx_addr_t no_addr(void *ud) {
    *(int *)ud = 1;
    return (lx_addr_t){0, 0};
}

/* The deny rule of rs that keeps the page at path from some clients, or
 * NULL: the rule a GET of it meets first, or, when a `from` rule comes
 * before the verdict (it depends on the client), the list's first deny. */
static const lx_rule_t *page_deny(const lx_ruleset_t *rs, const char *path) {
    if (rs == NULL) return NULL;
    int asked = 0;
    lx_match_ctx_t m = {path, strlen(path), HTTP_GET, {0, 0}, NULL, 0, no_addr, &asked};
    m.md = pcre2_match_data_create(16, NULL);
    if (m.md == NULL) return NULL;
    int i = lx_ruleset_first(rs, &m);
    pcre2_match_data_free(m.md);
    if (i >= 0 && rs->rules[i].kind == LX_RULE_DENY) return &rs->rules[i];
    for (uint32_t j = 0; asked && j < rs->n; j++)
        if (rs->rules[j].kind == LX_RULE_DENY) return &rs->rules[j];
    return NULL;
}

/* Warns about each error page (of the vhost and of each location with its
 * own table) that lands in a location whose access rules or policy guard
 * it: those run for the page as for a request (request.c), and a client
 * they refuse gets the built-in page instead, which is right for a page
 * that must not leak and a surprise for one meant for everyone. */
static void check_error_pages(loader_t *ld, const lx_vhost_t *vh) {
    for (size_t j = 0; j <= vh->nlocations; j++) {
        const lx_site_t *s = j == 0 ? &vh->site : &vh->locations[j - 1].site;
        if (j > 0 && s->error_page == vh->site.error_page) continue; /* the vhost's, inherited */
        ld->file = j == 0 ? vh->file : vh->locations[j - 1].file;
        for (size_t i = 0; i < s->nerror_pages; i++) {
            const char *page = s->error_page[i];
            const lx_location_t *loc = lx_vhost_location(vh, page, strlen(page));
            const lx_site_t *to = loc ? &loc->site : &vh->site;
            char where[600];
            if (loc)
                snprintf(where, sizeof(where), "location \"%s\" (%s:%d)", loc->prefix, loc->file,
                         loc->line);
            else
                snprintf(where, sizeof(where), "vhost \"%s\" (%s:%d)", vh->name, vh->file,
                         vh->line);
            ld->line = s->error_page_line[i];
            const lx_rule_t *deny = page_deny(to->access, page);
            if (deny)
                add_warning(ld,
                            "vhost \"%s\": error_pages[%d] \"%s\" is served from %s, whose "
                            "access rule at %s:%d applies to it as to a request: a client it "
                            "denies gets the built-in %d page, not this one",
                            vh->name, s->error_status[i], page, where, deny->file, deny->line,
                            s->error_status[i]);
            if (to->policy)
                add_warning(ld,
                            "vhost \"%s\": error_pages[%d] \"%s\" is served from %s, whose "
                            "policy (%s:%d) runs for it as for a request (r.error_status set): "
                            "a client it refuses gets the built-in %d page, not this one",
                            vh->name, s->error_status[i], page, where,
                            to->policy_file ? to->policy_file : "?", to->policy_line,
                            s->error_status[i]);
        }
    }
}

static int read_locations(loader_t *ld, int idx, lx_vhost_t *vh) {
    lua_State *L = ld->L;
    lua_getfield(L, idx, "locations");
    size_t n = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    int r = 0;
    if (n) {
        vh->locations = lx_arena_calloc(&ld->g->arena, n * sizeof(lx_location_t));
        vh->location_trie = lx_trie_new();
        if (vh->locations == NULL || vh->location_trie == NULL) r = -ENOMEM;
    }
    for (size_t i = 0; r == 0 && i < n; i++) {
        lua_rawgeti(L, -1, (int)i + 1);
        int t = lua_gettop(L);
        lx_location_t *loc = &vh->locations[i];
        locate(ld, t);
        loc->file = ld->file;
        loc->line = ld->line;
        loc->prefix = get_str(ld, t, "prefix", "/");
        loc->len = strlen(loc->prefix);
        loc->site = vh->site; /* inherit, then override */
        r = read_site(ld, t, &loc->site);
        if (r == 0) r = read_error_pages(ld, t, &loc->site);
        lx_ruleset_t *access = NULL;
        if (r == 0) r = read_rules(ld, t, "access", LX_RULE_DENY, "access rule", &access);
        if (access) loc->site.access = access; /* a location's own list replaces the vhost's */
        if (r == 0) r = lx_trie_add(vh->location_trie, loc->prefix, loc->len, (uint32_t)i);
        vh->nlocations = i + 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return r;
}

/* An address as $upstream_addr shows it: "127.0.0.1:8081", "[::1]:8081"
 * (with "%scope" for a link-local one), "unix:/path". */
static void format_addr(const lx_upstream_server_t *s, char *buf, size_t len) {
    const struct sockaddr *sa = (const struct sockaddr *)&s->addr;
    if (sa->sa_family == AF_UNIX) {
        snprintf(buf, len, "unix:%s", ((const struct sockaddr_un *)sa)->sun_path);
        return;
    }
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (getnameinfo(sa, s->addrlen, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(buf, len, "?");
        return;
    }
    snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

typedef struct {
    lx_upstream_server_t *v; /* malloc'ed while the servers are resolved */
    size_t n, cap;
} server_vec_t;

/* Appends s unless an entry from `from` on has its address already: a name
 * that resolves to one address twice (two /etc/hosts lines) is one server. */
static int push_server(server_vec_t *vec, size_t from, const lx_upstream_server_t *s) {
    for (size_t i = from; i < vec->n; i++)
        if (vec->v[i].addrlen == s->addrlen && memcmp(&vec->v[i].addr, &s->addr, s->addrlen) == 0)
            return 0;
    if (vec->n == vec->cap) {
        size_t cap = vec->cap ? vec->cap * 2 : 8;
        lx_upstream_server_t *nv = realloc(vec->v, cap * sizeof(*nv));
        if (nv == NULL) return -ENOMEM;
        vec->v = nv;
        vec->cap = cap;
    }
    vec->v[vec->n] = *s;
    format_addr(s, vec->v[vec->n].addr_text, sizeof(vec->v[vec->n].addr_text));
    vec->n++;
    return 0;
}

/* The name a TLS server's certificate is checked for (and sent as SNI
 * unless it is an address). */
static void upstream_tls_name(loader_t *ld, const lx_upstream_t *u, const char *host,
                              lx_upstream_server_t *s) {
    const char *name = u->tls->name ? u->tls->name : host;
    struct in6_addr a;
    s->tls = u->tls;
    s->tls_name = lx_arena_strdup(&ld->g->arena, name);
    s->tls_name_ip = inet_pton(AF_INET, name, &a) == 1 || inet_pton(AF_INET6, name, &a) == 1;
    /* pool_id: net/tlsctx.c, which reads the CA file. */
}

/* One server of upstream u, the table at idx, into vec: one entry per
 * address it has. */
static int read_upstream_server(loader_t *ld, int idx, const lx_upstream_t *u, server_vec_t *vec) {
    lx_upstream_server_t s;
    memset(&s, 0, sizeof(s));
    locate(ld, idx);
    s.file = ld->file;
    s.line = ld->line;
    /* s.text may be cut short (a long host name); messages name it whole. */
    const char *text = get_str(ld, idx, "text", "");
    snprintf(s.text, sizeof(s.text), "%s", text);
    double w = get_num(ld, idx, "weight", 1);
    s.weight = w >= 1 && w <= 100 ? (uint32_t)w : 1;

    lua_getfield(ld->L, idx, "unix");
    const char *path = lua_tostring(ld->L, -1);
    if (path) {
        struct sockaddr_un *sun = (struct sockaddr_un *)&s.addr;
        size_t len = strlen(path);
        int r = 0;
        if (len >= sizeof(sun->sun_path)) {
            r = fail(ld,
                     "upstream \"%s\": server \"%s\": the socket path %s is %zu bytes long; a "
                     "Unix socket address holds at most %zu",
                     u->name, text, path, len, sizeof(sun->sun_path) - 1);
        } else {
            sun->sun_family = AF_UNIX;
            memcpy(sun->sun_path, path, len + 1);
            s.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
            r = push_server(vec, vec->n, &s);
        }
        lua_pop(ld->L, 1);
        return r;
    }
    lua_pop(ld->L, 1);

    lua_getfield(ld->L, idx, "host");
    const char *host = lua_tostring(ld->L, -1);
    int port = (int)get_num(ld, idx, "port", 0);
    int r = 0;
    if (u->tls && host) upstream_tls_name(ld, u, host, &s);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&s.addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&s.addr;
    if (host == NULL || port < 1 || port > 65535) {
        r = fail(ld, "upstream \"%s\": server \"%s\": not host:port", u->name, text);
    } else if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        s.addrlen = sizeof(*a4);
        r = push_server(vec, vec->n, &s);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        s.addrlen = sizeof(*a6);
        r = push_server(vec, vec->n, &s);
    } else {
        /* A name: resolved now, at every load (start, -t and each reload),
         * to every address it has. Config loads run in the main thread,
         * never on a serving loop, so the blocking getaddrinfo stalls no
         * request; a reload that waits on DNS only delays the new
         * generation, while the old one goes on serving. */
        struct addrinfo hints = {
            .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
        struct addrinfo *res = NULL;
        char portstr[8];
        snprintf(portstr, sizeof(portstr), "%d", port);
        int g = getaddrinfo(host, portstr, &hints, &res);
        if (g != 0) {
            r = fail(ld, "upstream \"%s\": server \"%s\": %s", u->name, text,
                     g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
        } else {
            size_t first = vec->n;
            for (struct addrinfo *ai = res; r == 0 && ai; ai = ai->ai_next) {
                if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
                    ai->ai_addrlen > sizeof(s.addr))
                    continue;
                memset(&s.addr, 0, sizeof(s.addr));
                memcpy(&s.addr, ai->ai_addr, ai->ai_addrlen);
                s.addrlen = ai->ai_addrlen;
                r = push_server(vec, first, &s);
            }
            if (r == 0 && vec->n == first)
                r = fail(ld, "upstream \"%s\": server \"%s\": no IPv4 or IPv6 address", u->name,
                         text);
            freeaddrinfo(res);
        }
    }
    lua_pop(ld->L, 1);
    return r;
}

/* upstream { tls = { verify, ca, name } }, as the schema gives it; the
 * CA file is read by lx_tls_gen_build. */
static int read_upstream_tls(loader_t *ld, int idx, lx_upstream_t *u) {
    lua_State *L = ld->L;
    lua_getfield(L, idx, "tls");
    if (lua_istable(L, -1)) {
        int t = lua_gettop(L);
        lx_upstream_tls_t *tls = lx_arena_calloc(&ld->g->arena, sizeof(*tls));
        if (tls == NULL) return -ENOMEM;
        tls->verify = get_bool(ld, t, "verify", 1);
        tls->ca = get_str(ld, t, "ca", NULL);
        tls->name = get_str(ld, t, "name", NULL);
        tls->file = get_str(ld, t, "_file", u->file);
        tls->line = (int)get_num(ld, t, "_line", u->line);
        u->tls = tls;
    }
    lua_pop(L, 1);
    return 0;
}

static int read_upstream(loader_t *ld, int idx, lx_upstream_t *u) {
    lua_State *L = ld->L;
    locate(ld, idx);
    u->file = ld->file;
    u->line = ld->line;
    u->name = get_str(ld, idx, "name", "");
    u->keepalive = (uint32_t)get_num(ld, idx, "keepalive", 32);
    u->keepalive_timeout = get_ms(ld, idx, "keepalive_timeout", 60);
    u->connect_timeout = get_ms(ld, idx, "connect_timeout", 5);
    u->read_timeout = get_ms(ld, idx, "read_timeout", 60);
    u->send_timeout = get_ms(ld, idx, "send_timeout", 60);
    u->max_fails = (uint32_t)get_num(ld, idx, "max_fails", 1);
    u->fail_timeout = get_ms(ld, idx, "fail_timeout", 10);
    u->max_header_bytes = (size_t)get_num(ld, idx, "max_header_bytes", 32768);

    server_vec_t vec = {0};
    int r = read_upstream_tls(ld, idx, u);
    lua_getfield(L, idx, "servers");
    size_t n = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        lua_rawgeti(L, -1, (int)i + 1);
        r = read_upstream_server(ld, lua_gettop(L), u, &vec);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    ld->file = u->file;
    ld->line = u->line;
    if (r == 0 && vec.n == 0) r = fail(ld, "upstream \"%s\": no server", u->name);
    if (r == 0) {
        u->servers = lx_arena_alloc(&ld->g->arena, vec.n * sizeof(*u->servers));
        if (u->servers == NULL) {
            r = -ENOMEM;
        } else {
            memcpy(u->servers, vec.v, vec.n * sizeof(*u->servers));
            u->nservers = vec.n;
        }
    }
    free(vec.v);
    return r;
}

/* The idle connections an address's pool keeps: the most that any
 * upstream naming the address asks for. Pools are keyed by address, so
 * two upstreams on one backend share one; each put's own keepalive would
 * have let a request through the smaller one trim the other's (t/187). */
static void pool_keepalives(lx_gen_t *g) {
    for (size_t i = 0; i < g->nupstreams; i++)
        for (size_t k = 0; k < g->upstreams[i].nservers; k++) {
            lx_upstream_server_t *s = &g->upstreams[i].servers[k];
            s->pool_keepalive = 0;
            for (size_t j = 0; j < g->nupstreams; j++)
                for (size_t m = 0; m < g->upstreams[j].nservers; m++) {
                    const lx_upstream_server_t *o = &g->upstreams[j].servers[m];
                    if (o->addrlen == s->addrlen && memcmp(&o->addr, &s->addr, s->addrlen) == 0 &&
                        g->upstreams[j].keepalive > s->pool_keepalive)
                        s->pool_keepalive = g->upstreams[j].keepalive;
                }
        }
}

static int read_upstreams(loader_t *ld, int idx) {
    lx_gen_t *g = ld->g;
    size_t n = lua_objlen(ld->L, idx);
    if (n == 0) return 0;
    g->upstreams = lx_arena_calloc(&g->arena, n * sizeof(*g->upstreams));
    if (g->upstreams == NULL) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(ld->L, idx, (int)i + 1);
        g->upstreams[i].index = (uint32_t)i;
        int r = read_upstream(ld, lua_gettop(ld->L), &g->upstreams[i]);
        lua_pop(ld->L, 1);
        if (r < 0) return r;
        g->nupstreams = i + 1;
    }
    pool_keepalives(g);
    return 0;
}

static int host_insert(loader_t *ld, const char *name, lx_vhost_t *vh) {
    lx_gen_t *g = ld->g;
    size_t len = strlen(name);
    uint64_t h = lx_hash(name, len, 0);
    for (size_t i = h & g->hosts_mask;; i = (i + 1) & g->hosts_mask) {
        lx_host_slot_t *s = &g->hosts[i];
        if (s->vhost == NULL) {
            s->name = name;
            s->len = len;
            s->vhost = vh;
            return 0;
        }
        if (s->len == len && memcmp(s->name, name, len) == 0)
            return fail(ld, "vhost \"%s\": name \"%s\" is already used by vhost \"%s\" (%s:%d)",
                        vh->name, *name == '.' ? name - 1 : name, s->vhost->name, s->vhost->file,
                        s->vhost->line);
    }
}

/* "*.example.org" is stored as ".example.org"; lookups try each suffix. */
static int add_name(loader_t *ld, const char *name, lx_vhost_t *vh) {
    char *lower = lx_arena_strdup(&ld->g->arena, name);
    for (char *p = lower; *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p |= 0x20;
    return host_insert(ld, lower[0] == '*' && lower[1] == '.' ? lower + 1 : lower, vh);
}

/* A vhost's access_log replaces the server's for its requests, as a
 * server-level access_log does the http-level one in nginx; false turns
 * logging off for it; without the key it logs where the server does. */
static int read_vhost_log(loader_t *ld, int t, lx_vhost_t *vh) {
    lua_State *L = ld->L;
    lx_server_conf_t *s = &ld->g->srv;
    lua_getfield(L, t, "access_log");
    int type = lua_type(L, -1);
    int r = 0;
    if (type == LUA_TNIL) {
        vh->access_log = s->access_log.path ? &s->access_log : NULL;
    } else if (type == LUA_TBOOLEAN) {
        vh->access_log = NULL; /* false: schema.lua turns true into a table */
    } else {
        lx_access_log_conf_t *c = lx_arena_calloc(&ld->g->arena, sizeof(*c));
        if (c == NULL) r = -ENOMEM;
        char what[300];
        snprintf(what, sizeof(what), "vhost \"%s\"", vh->name);
        if (r == 0)
            r = read_access_log(ld, lua_gettop(L), c, vh->file,
                                (int)get_num(ld, t, "_access_log_line", vh->line), what);
        vh->access_log = c;
    }
    lua_pop(L, 1);
    return r;
}

/* tls = { pairs = { { cert =, key = }, ... }, _file =, _line = }, as the
 * schema gives it; the files are read by lx_tls_gen_build. */
static int read_vhost_tls(loader_t *ld, int t, lx_vhost_t *vh) {
    lua_State *L = ld->L;
    lua_getfield(L, t, "tls");
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    int tt = lua_gettop(L);
    const char *file = ld->file;
    int line = ld->line;
    locate(ld, tt);
    vh->tls.file = ld->file;
    vh->tls.line = ld->line;
    ld->file = file; /* the vhost's errors after this name its own line */
    ld->line = line;
    lua_getfield(L, tt, "pairs");
    int n = (int)lua_objlen(L, -1);
    for (int i = 0; i < n && i < LX_TLS_PAIRS; i++) {
        lua_rawgeti(L, -1, i + 1);
        vh->tls.cert[i] = get_str(ld, lua_gettop(L), "cert", NULL);
        vh->tls.key[i] = get_str(ld, lua_gettop(L), "key", NULL);
        lua_pop(L, 1);
        if (vh->tls.cert[i] == NULL || vh->tls.key[i] == NULL)
            return fail(ld, "vhost \"%s\": tls: a certificate without its key", vh->name);
        vh->tls.npairs = i + 1;
    }
    lua_pop(L, 1);
    vh->tls.client_ca = get_str(ld, tt, "client_ca", NULL);
    const char *verify = get_str(ld, tt, "client_verify", "require");
    vh->tls.client_required = strcmp(verify, "require") == 0;
    lua_pop(L, 1);
    return 0;
}

static int read_vhosts(loader_t *ld, int idx) {
    lua_State *L = ld->L;
    lx_gen_t *g = ld->g;
    size_t n = lua_objlen(L, idx), names = 0;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, (int)i);
        lua_getfield(L, -1, "aliases");
        names += 1 + (lua_istable(L, -1) ? lua_objlen(L, -1) : 0);
        lua_pop(L, 2);
    }
    size_t slots = 16;
    if (n > 1023 * 1024) return fail(ld, "too many vhosts (%zu)", n);
    while (slots < names * 2)
        slots <<= 1;
    g->hosts = lx_arena_calloc(&g->arena, slots * sizeof(*g->hosts));
    g->hosts_mask = slots - 1;
    g->vhosts = lx_arena_calloc(&g->arena, (n ? n : 1) * sizeof(*g->vhosts));
    g->nvhosts = n;

    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, idx, (int)i + 1);
        int t = lua_gettop(L);
        lx_vhost_t *vh = &g->vhosts[i];
        locate(ld, t);
        vh->file = ld->file;
        vh->line = ld->line;
        vh->name = get_str(ld, t, "name", "");
        vh->is_default = get_bool(ld, t, "default", 0);
        vh->site.etag = vh->site.last_modified = vh->site.proxy_via = 1;
        int r = read_site(ld, t, &vh->site);
        if (r == 0) r = read_error_pages(ld, t, &vh->site);
        lx_ruleset_t *access = NULL;
        if (r == 0) r = read_rules(ld, t, "access", LX_RULE_DENY, "access rule", &access);
        vh->site.access = access;
        if (r == 0) r = read_rules(ld, t, "rewrite", LX_RULE_REWRITE, "rewrite", &vh->rewrite);
        if (r == 0) r = read_rules(ld, t, "redirect", LX_RULE_REDIRECT, "redirect", &vh->redirect);
        if (r == 0) r = read_locations(ld, t, vh);
        if (r == 0) check_error_pages(ld, vh);
        int ri_off = 0;
        if (r == 0) r = read_realip(ld, t, &vh->real_ip, &ri_off);
        if (r == 0 && vh->real_ip == NULL && !ri_off) vh->real_ip = g->srv.real_ip;
        locate(ld, t);
        if (r == 0) r = read_vhost_log(ld, t, vh);
        if (r == 0) r = read_vhost_tls(ld, t, vh);
        if (r == 0) r = add_name(ld, vh->name, vh);
        lua_getfield(L, t, "aliases");
        for (size_t j = 1; r == 0 && lua_istable(L, -1) && j <= lua_objlen(L, -1); j++) {
            lua_rawgeti(L, -1, (int)j);
            r = add_name(ld, lua_tostring(L, -1), vh);
            lua_pop(L, 1);
        }
        lua_pop(L, 2);
        if (r < 0) return r;
        if (vh->is_default) {
            if (g->default_vhost)
                return fail(ld,
                            "vhost \"%s\": default = true, but vhost \"%s\" (%s:%d) is "
                            "already the default",
                            vh->name, g->default_vhost->name, g->default_vhost->file,
                            g->default_vhost->line);
            g->default_vhost = vh;
        }
    }
    return 0;
}

/* Appends "file:line: message" to the generation's warnings. */
static void add_warning(loader_t *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_warning(loader_t *ld, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lx_gen_warn(ld->g, ld->file, ld->line, "%s", msg);
}

/* mime_types = "/etc/mime.types": read here, in the thread that loads the
 * config, at every load (a reload sees the file as it is then), never while
 * requests run. Its entries replace the built-in ones; mime { } comes after
 * and replaces both. */
static int read_mime_types(loader_t *ld) {
    const lx_server_conf_t *s = &ld->g->srv;
    lx_mime_file_stats_t st;
    ld->file = s->file;
    ld->line = s->mime_types_line;
    int r = lx_mime_load_file(ld->g->mime, s->mime_types, &st);
    if (r == -ENOMEM) return fail(ld, "server: mime_types: out of memory");
    if (r == LX_MIME_ENOTREG)
        return fail(ld, "server: mime_types: cannot read \"%s\": not a regular file",
                    s->mime_types);
    if (r == -EFBIG)
        return fail(ld, "server: mime_types: cannot read \"%s\": larger than %d bytes (16 MiB)",
                    s->mime_types, LX_MIME_FILE_MAX);
    if (r < 0)
        return fail(ld, "server: mime_types: cannot read \"%s\": %s", s->mime_types, strerror(-r));
    ld->g->srv.mime_types_exts = st.exts;
    if (st.skipped)
        add_warning(ld,
                    "mime_types: %zu line%s of %s skipped, not \"type/subtype ext ...\" (the first "
                    "is line %zu)",
                    st.skipped, st.skipped == 1 ? "" : "s", s->mime_types, st.first_skipped);
    if (st.exts == 0)
        add_warning(ld, "mime_types: %s names no extension; only the built-in types apply",
                    s->mime_types);
    return 0;
}

static int read_mime(loader_t *ld, int idx) {
    lua_State *L = ld->L;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
            const char *ext = lua_tostring(L, -2);
            if (lx_mime_add(ld->g->mime, ext, lua_tostring(L, -1)) < 0) {
                lua_pop(L, 2);
                return fail(ld, "mime: bad extension \"%s\" (it must start with a dot)", ext);
            }
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* Keeps desc.warnings for whoever loaded the config to show: -t prints
 * them, a running server logs them once its error log is open. */
static void read_warnings(loader_t *ld, int desc) {
    lua_State *L = ld->L;
    lua_getfield(L, desc, "warnings");
    size_t n = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    if (n) ld->g->warnings = lx_arena_alloc(&ld->g->arena, n * sizeof(char *));
    for (size_t i = 0; ld->g->warnings && i < n; i++) {
        lua_rawgeti(L, -1, (int)i + 1);
        const char *w = lua_tostring(L, -1);
        if (w) ld->g->warnings[ld->g->nwarnings++] = lx_arena_strdup(&ld->g->arena, w);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

static int convert(loader_t *ld, int desc) {
    lua_State *L = ld->L;
    int r = 0;
    ld->file = ld->g->file;
    ld->line = 0;
    read_warnings(ld, desc);
    lua_getfield(L, desc, "server");
    if (lua_istable(L, -1))
        r = read_server(ld, lua_gettop(L));
    else
        r = fail(ld, "no server {} block");
    lua_pop(L, 1);
    if (r == 0 && ld->g->srv.mime_types) r = read_mime_types(ld);
    if (r == 0) {
        lua_getfield(L, desc, "mime");
        if (lua_istable(L, -1)) r = read_mime(ld, lua_gettop(L));
        lua_pop(L, 1);
    }
    /* Upstreams before vhosts: a site's proxy and fallback point into them. */
    if (r == 0) {
        lua_getfield(L, desc, "upstreams");
        if (lua_istable(L, -1)) r = read_upstreams(ld, lua_gettop(L));
        lua_pop(L, 1);
    }
    if (r == 0) {
        lua_getfield(L, desc, "vhosts");
        if (lua_istable(L, -1)) r = read_vhosts(ld, lua_gettop(L));
        lua_pop(L, 1);
    }
    if (r == 0) {
        /* Hosts served from vhost_dir take the default vhost's settings (or
         * the defaults) with a per-host root. */
        lx_gen_t *g = ld->g;
        lx_vhost_t *m = &g->mass_vhost;
        if (g->default_vhost) {
            *m = *g->default_vhost;
            m->locations = NULL;
            m->nlocations = 0;
            m->location_trie = NULL;
        } else {
            static const char *const index[] = {"index.html"};
            m->site.index = (const char **)index;
            m->site.nindex = 1;
            m->site.etag = m->site.last_modified = m->site.proxy_via = 1;
            m->site.headers = "";
            m->access_log = g->srv.access_log.path ? &g->srv.access_log : NULL;
            m->real_ip = g->srv.real_ip;
        }
        /* Under vhost_dir each host's tree may belong to another tenant, and
         * "owner" is only as good as the owners on disk: a tarball unpacked
         * by root (a control panel, tar --same-owner) carries whatever uid
         * its author chose, a link to /etc/passwd owned by root included.
         * So no link is followed there unless the default vhost asks for
         * "owner" in so many words; true becomes "owner", never more. */
        if (!m->site.follow_symlinks_set)
            m->site.follow_symlinks = LX_SYMLINKS_REFUSE;
        else if (m->site.follow_symlinks == LX_SYMLINKS_FOLLOW)
            m->site.follow_symlinks = LX_SYMLINKS_OWNER;
        m->name = "(vhost_dir)";
        m->is_default = 0;
        m->site.id = next_site_id(ld);
    }
    return r;
}

static int l_no_ffi(lua_State *L) {
    return luaL_error(L, "the ffi module is not available in luxd configs");
}

/* host.glob(pattern): sorted matches, for include "conf.d/NAME.lua" globs. */
static int l_glob(lua_State *L) {
    const char *pattern = luaL_checkstring(L, 1);
    glob_t gl;
    int r = glob(pattern, 0, NULL, &gl);
    lua_newtable(L);
    if (r == 0) {
        for (size_t i = 0; i < gl.gl_pathc; i++) {
            lua_pushstring(L, gl.gl_pathv[i]);
            lua_rawseti(L, -2, (int)i + 1);
        }
    }
    if (r != GLOB_NOSPACE) globfree(&gl);
    return 1;
}

/* host.realpath(path): the file's canonical path, or nil. Include cycles
 * are found by it: a relative pattern with ".." or a symlinked directory
 * names the same file by a new path on every turn of a cycle. */
static int l_realpath(lua_State *L) {
    char *real = realpath(luaL_checkstring(L, 1), NULL);
    if (real == NULL) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushstring(L, real);
    free(real);
    return 1;
}

static void install_modules(lua_State *L) {
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "preload");
    for (const lx_lua_module_t *m = lx_lua_modules; m->name; m++) {
        if (luaL_loadbuffer(L, (const char *)m->code, m->size, m->name) == 0)
            lua_setfield(L, -2, m->name);
        else
            lua_pop(L, 1);
    }
    /* The FFI reaches any C function, blocking ones included: a config
     * (and so a policy) must not capture it. */
    lua_pushcfunction(L, l_no_ffi);
    lua_setfield(L, -2, "ffi");
    lua_pop(L, 1);
    lua_getfield(L, -1, "loaded");
    lua_pushnil(L);
    lua_setfield(L, -2, "ffi");
    lua_pop(L, 2);
}

int lx_config_run(lua_State *L, const char *path, const char *prefix, char *err, size_t errlen) {
    install_modules(L);
    /* require("luxd.config").load(path, host): Lua errors come back as
     * "file:line: message" strings, ready for the operator. */
    /* Only luxd-test has the test handler; schema.lua refuses its key
     * elsewhere. */
    lua_pushboolean(L, lx_config_test_handlers);
    lua_setglobal(L, "LUXD_TEST_HANDLERS");
    lua_getglobal(L, "require");
    lua_pushliteral(L, "luxd.config");
    int lua_failed = lua_pcall(L, 1, 1, 0);
    if (!lua_failed) {
        lua_getfield(L, -1, "load");
        lua_pushstring(L, path);
        lua_newtable(L);
        lua_pushstring(L, prefix);
        lua_setfield(L, -2, "prefix");
        lua_pushcfunction(L, l_glob);
        lua_setfield(L, -2, "glob");
        lua_pushcfunction(L, l_realpath);
        lua_setfield(L, -2, "realpath");
        lua_newtable(L); /* host.luxd: the API policies use */
        lx_shared_push(L);
        lua_setfield(L, -2, "shared");
        lx_addrset_push(L);
        lua_setfield(L, -2, "cidr");
        lua_setfield(L, -2, "luxd");
        lua_failed = lua_pcall(L, 2, 1, 0);
        lua_remove(L, -2); /* the module table */
    }
    if (lua_failed) {
        const char *msg = lua_tostring(L, -1);
        snprintf(err, errlen, "%s", msg ? msg : "config error");
        lua_pop(L, 1);
        return -EINVAL;
    }
    if (!lua_istable(L, -1)) {
        snprintf(err, errlen, "%s: the config loader returned no description", path);
        lua_pop(L, 1);
        return -EINVAL;
    }
    return 0;
}

/* The Lua heap kept from one load to the next (lheap.h), and the state of
 * the last load, which lx_config_done closes. Loads run on the main thread,
 * one at a time. */
static lx_lheap_t *heap;
static lua_State *last;

void lx_config_done(void) {
    if (last == NULL) return;
    void *ud;
    int ours = lua_getallocf(last, &ud) == lx_lheap_alloc;
    lua_close(last);
    last = NULL;
    if (ours) lx_lheap_reset(heap);
}

int lx_config_load(const char *path, const char *prefix, uint64_t id, lx_gen_t **out, char *err,
                   size_t errlen) {
    lx_gen_t *g = calloc(1, sizeof(*g));
    if (g == NULL) return -ENOMEM;
    lx_arena_init(&g->arena, 64 * 1024);
    g->id = id;
    g->refs = 1;
    g->file = lx_arena_strdup(&g->arena, path);
    g->mime = lx_mime_new();
    lx_config_done();
    if (heap == NULL) heap = lx_lheap_new();
    lua_State *L = heap ? lua_newstate(lx_lheap_alloc, heap) : NULL;
    /* A LuaJIT built without GC64 takes no allocator on x86-64. */
    if (L == NULL) L = luaL_newstate();
    if (L == NULL || g->mime == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        last = L;
        lx_config_done();
        lx_gen_unref(g);
        return -ENOMEM;
    }
    /* A config's heap is mostly what it describes, alive until the state
     * is closed: a collection once the heap has grown tenfold (not twofold)
     * since the last. A 10,000-vhost load spent a third of its time in the
     * collector at the default. */
    lua_gc(L, LUA_GCSETPAUSE, 1000);
    luaL_openlibs(L);
    install_modules(L);

    int r = lx_config_run(L, path, prefix, err, errlen);
    if (r == 0) {
        loader_t ld = {.L = L, .g = g, .err = err, .errlen = errlen};
        r = convert(&ld, lua_gettop(L));
    }
    if (r == 0) r = lx_tls_gen_build(g, err, errlen);
    last = L;
    if (r < 0) {
        /* A failed load's heap is not kept for the next: it may have grown
         * far past what a good config needs (a config that failed after
         * building much), and the running server would hold it until the
         * next good reload (a break review: 417 MB). */
        lx_config_done();
        lx_lheap_free(heap);
        heap = NULL;
        lx_gen_unref(g);
        return r;
    }
    /* The roots are checked by the caller (lx_config_check_roots), which
     * knows the user luxd serves as. */
    *out = g;
    return 0;
}
