/* What a vhost, a location and vhost_dir share: a site (root, index,
 * headers, rules, error pages, proxy), and the locations of a vhost. */
#include "loader.h"

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
    size_t nl = strlen(name), vl = strlen(value), need = nl + vl + 4;
    if (*len + need + 1 > *cap) {
        size_t ncap = (*cap + need) * 2;
        char *nb = realloc(*buf, ncap);
        if (nb == NULL) return -ENOMEM;
        *buf = nb;
        *cap = ncap;
    }
    /* Copied, not printed: sprintf was a twentieth of a 10,000-vhost load. */
    char *p = *buf + *len;
    memcpy(p, name, nl);
    memcpy(p + nl, ": ", 2);
    memcpy(p + nl + 2, value, vl);
    memcpy(p + nl + 2 + vl, "\r\n", 3); /* and the NUL */
    *len += need;
    return 0;
}

/* proxy = / fallback = at idx: nil keeps what the site has (a location
 * inherits its vhost's), false clears it, a name points into g->upstreams,
 * which ld_read_upstreams filled before any vhost is read. */
static int get_upstream_ref(loader_t *ld, int idx, const char *key, const lx_upstream_t **out) {
    ld_getfield(ld, idx, key);
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
    ld_getfield(ld, idx, "proxy_host");
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
    ld_getfield(ld, idx, "proxy_headers");
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
uint32_t ld_next_site_id(loader_t *ld) {
    return ++ld->site_ids;
}

/* desc.vhost_defaults at idx: what a vhost serves with when its config
 * says nothing, read once per load, as a vhost's own keys are read over it
 * (luxd.config keeps one table of them, not a copy in every vhost). */
int ld_read_site_defaults(loader_t *ld, int idx) {
    if (!lua_istable(ld->L, idx)) return fail(ld, "the description has no vhost defaults");
    memset(&ld->site_defaults, 0, sizeof(ld->site_defaults));
    return ld_read_site(ld, idx, &ld->site_defaults);
}

int ld_read_site(loader_t *ld, int idx, lx_site_t *site) {
    lua_State *L = ld->L;
    site->id = ld_next_site_id(ld);
    ld_getfield(ld, idx, "root");
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

    ld_getfield(ld, idx, "index");
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
    ld_getfield(ld, idx, "try_files");
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

    ld_getfield(ld, idx, "policy");
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
    ld_getfield(ld, idx, "follow_symlinks");
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
    ld_getfield(ld, idx, "headers");
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
int ld_read_rules(loader_t *ld, int idx, const char *key, int kind, const char *what,
                  lx_ruleset_t **out) {
    lua_State *L = ld->L;
    lx_gen_t *g = ld->g;
    *out = NULL;
    ld_getfield(ld, idx, key);
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

int ld_read_error_pages(loader_t *ld, int idx, lx_site_t *site) {
    lua_State *L = ld->L;
    ld_getfield(ld, idx, "error_pages");
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
    ld_getfield(ld, idx, "_error_page_lines");
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
    lx_match_ctx_t m = {path, strlen(path), HTTP_GET, {0, 0}, NULL, 0, no_addr, &asked, NULL};
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
void ld_check_error_pages(loader_t *ld, const lx_vhost_t *vh) {
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

int ld_read_locations(loader_t *ld, int idx, lx_vhost_t *vh) {
    lua_State *L = ld->L;
    ld_getfield(ld, idx, "locations");
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
        r = ld_read_site(ld, t, &loc->site);
        if (r == 0) r = ld_read_error_pages(ld, t, &loc->site);
        lx_ruleset_t *access = NULL;
        if (r == 0) r = ld_read_rules(ld, t, "access", LX_RULE_DENY, "access rule", &access);
        if (access) loc->site.access = access; /* a location's own list replaces the vhost's */
        if (r == 0) r = lx_trie_add(vh->location_trie, loc->prefix, loc->len, (uint32_t)i);
        vh->nlocations = i + 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return r;
}
