/* Runs the Lua config and turns its description into a generation.
 *
 * The DSL (lua/luxd/config.lua) does the user-facing validation and returns a
 * plain table with defaults filled in; this file runs it and assembles the
 * generation, and load_server.c, load_upstream.c, load_vhost.c and
 * load_site.c read that table's parts into C structs and check what only C
 * can (addresses, header bytes). Every error names the file and line the
 * description recorded. */
#include "loader.h"

int lx_config_test_handlers;

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
        r = ld_read_server(ld, lua_gettop(L));
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
        if (lua_istable(L, -1)) r = ld_read_upstreams(ld, lua_gettop(L));
        lua_pop(L, 1);
    }
    if (r == 0) {
        lua_getfield(L, desc, "vhost_defaults");
        r = ld_read_site_defaults(ld, lua_gettop(L));
        lua_pop(L, 1);
    }
    if (r == 0) {
        lua_getfield(L, desc, "vhosts");
        if (lua_istable(L, -1)) r = ld_read_vhosts(ld, lua_gettop(L));
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
            m->site = ld->site_defaults;
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
        m->site.id = ld_next_site_id(ld);
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

/* host.where(known, level): the file and current line of the innermost
 * frame from `level` up (levels as debug.getinfo counts them) that runs a
 * chunk named "@NAME" with known[NAME] set, or nothing. luxd.config asks
 * it for every vhost, location and rule; debug.getinfo made a table per
 * frame asked. */
static int l_where(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    int level = (int)luaL_checkinteger(L, 2);
    lua_Debug ar;
    for (int l = level; l <= 250 && lua_getstack(L, l, &ar); l++) {
        if (!lua_getinfo(L, "Sl", &ar) || ar.source == NULL || ar.source[0] != '@') continue;
        lua_pushstring(L, ar.source + 1);
        lua_pushvalue(L, -1);
        lua_rawget(L, 1);
        int known = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (known) {
            lua_pushinteger(L, ar.currentline);
            return 2;
        }
        lua_pop(L, 1);
    }
    return 0;
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
    /* Only luxd-test has the test handler; schema_site.lua refuses its key
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
        lua_pushcfunction(L, l_where);
        lua_setfield(L, -2, "where");
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
