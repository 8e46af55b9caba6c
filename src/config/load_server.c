/* The server table: listeners, logs, real_ip, TLS settings, limits. */
#include "loader.h"

static int parse_listen(loader_t *ld, int idx, lx_listen_t *l) {
    locate(ld, idx);
    l->file = ld->file;
    l->line = ld->line;
    const char *host = get_str(ld, idx, "host", "");
    int port = (int)get_num(ld, idx, "port", 0);
    l->proxy_protocol = get_bool(ld, idx, "proxy_protocol", 0);
    l->tls = get_bool(ld, idx, "tls", 0);
    l->http2 = get_bool(ld, idx, "http2", 0);
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
int ld_read_access_log(loader_t *ld, int idx, lx_access_log_conf_t *c, const char *file, int line,
                       const char *what) {
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

/* real_ip at t[key] (a table, false, or absent) into *out: NULL when absent
 * or false, *off set for false. */
int ld_read_realip(loader_t *ld, int idx, const lx_realip_t **out, int *off) {
    lua_State *L = ld->L;
    *out = NULL;
    if (off) *off = 0;
    ld_getfield(ld, idx, "real_ip");
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
    ld_getfield(ld, idx, "tls");
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
    ld_getfield(ld, tt, "protocols");
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

int ld_read_server(loader_t *ld, int idx) {
    lua_State *L = ld->L;
    lx_server_conf_t *s = &ld->g->srv;
    locate(ld, idx);
    s->file = ld->file;
    s->line = ld->line;
    ld_getfield(ld, idx, "listen");
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

    ld_getfield(ld, idx, "_lines");
    if (lua_istable(L, -1)) {
        s->error_log_line = (int)get_num(ld, lua_gettop(L), "error_log", s->line);
        s->access_log_line = (int)get_num(ld, lua_gettop(L), "access_log", s->line);
        s->mime_types_line = (int)get_num(ld, lua_gettop(L), "mime_types", s->line);
    } else {
        s->error_log_line = s->access_log_line = s->mime_types_line = s->line;
    }
    lua_pop(L, 1);
    ld_getfield(ld, idx, "access_log");
    int r = ld_read_access_log(ld, lua_gettop(L), &s->access_log, s->file, s->access_log_line,
                               "server");
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
    int rr = ld_read_realip(ld, idx, &s->real_ip, NULL);
    return rr < 0 ? rr : read_server_tls(ld, idx, &s->tls);
}
