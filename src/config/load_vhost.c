/* Vhosts: names into the Host table, logs, certificates, sites. */
#include "loader.h"

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
    ld_getfield(ld, t, "access_log");
    int type = lua_type(L, -1);
    int r = 0;
    if (type == LUA_TNIL) {
        vh->access_log = s->access_log.path ? &s->access_log : NULL;
    } else if (type == LUA_TBOOLEAN) {
        vh->access_log = NULL; /* false: schema_server.lua turns true into a table */
    } else {
        lx_access_log_conf_t *c = lx_arena_calloc(&ld->g->arena, sizeof(*c));
        if (c == NULL) r = -ENOMEM;
        char what[300];
        snprintf(what, sizeof(what), "vhost \"%s\"", vh->name);
        if (r == 0)
            r = ld_read_access_log(ld, lua_gettop(L), c, vh->file,
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
    ld_getfield(ld, t, "tls");
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
    ld_getfield(ld, tt, "pairs");
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

int ld_read_vhosts(loader_t *ld, int idx) {
    lua_State *L = ld->L;
    lx_gen_t *g = ld->g;
    size_t n = lua_objlen(L, idx), names = 0;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, (int)i);
        ld_getfield(ld, -1, "aliases");
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
        /* A vhost's description holds only what its config gave. */
        vh->site = ld->site_defaults;
        int r = ld_read_site(ld, t, &vh->site);
        if (r == 0) r = ld_read_error_pages(ld, t, &vh->site);
        lx_ruleset_t *access = NULL;
        if (r == 0) r = ld_read_rules(ld, t, "access", LX_RULE_DENY, "access rule", &access);
        vh->site.access = access;
        if (r == 0) r = ld_read_rules(ld, t, "rewrite", LX_RULE_REWRITE, "rewrite", &vh->rewrite);
        if (r == 0)
            r = ld_read_rules(ld, t, "redirect", LX_RULE_REDIRECT, "redirect", &vh->redirect);
        if (r == 0) r = ld_read_locations(ld, t, vh);
        if (r == 0) ld_check_error_pages(ld, vh);
        int ri_off = 0;
        if (r == 0) r = ld_read_realip(ld, t, &vh->real_ip, &ri_off);
        if (r == 0 && vh->real_ip == NULL && !ri_off) vh->real_ip = g->srv.real_ip;
        locate(ld, t);
        if (r == 0) r = read_vhost_log(ld, t, vh);
        if (r == 0) r = read_vhost_tls(ld, t, vh);
        if (r == 0) r = add_name(ld, vh->name, vh);
        ld_getfield(ld, t, "aliases");
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
