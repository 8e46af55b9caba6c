/* Upstreams: their servers (addresses resolved here), TLS, pools. */
#include "loader.h"

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

    ld_getfield(ld, idx, "unix");
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

    ld_getfield(ld, idx, "host");
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
    ld_getfield(ld, idx, "tls");
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
    ld_getfield(ld, idx, "servers");
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

int ld_read_upstreams(loader_t *ld, int idx) {
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
