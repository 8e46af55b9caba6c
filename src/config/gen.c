/* Generation lifetime, host lookup and the -T dump. */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "llhttp.h"

void lx_gen_ref(lx_gen_t *g) {
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
}

void lx_gen_unref(lx_gen_t *g) {
    if (g == NULL || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    lx_mime_free(g->mime);
    if (g->fini) g->fini(g);
    for (size_t i = 0; i < g->nrulesets; i++)
        lx_ruleset_free(g->rulesets[i]);
    free(g->rulesets);
    for (size_t i = 0; i < g->nvhosts; i++)
        lx_trie_free(g->vhosts[i].location_trie);
    lx_arena_free(&g->arena);
    free(g);
}

static const lx_host_slot_t *host_get(const lx_gen_t *g, const char *name, size_t len) {
    uint64_t h = lx_hash(name, len, 0);
    for (size_t i = h & g->hosts_mask;; i = (i + 1) & g->hosts_mask) {
        const lx_host_slot_t *s = &g->hosts[i];
        if (s->vhost == NULL) return NULL;
        if (s->len == len && memcmp(s->name, name, len) == 0) return s;
    }
}

lx_vhost_t *lx_gen_match_vhost(const lx_gen_t *g, const char *host, size_t len) {
    char lower[256];
    if (len > 0 && host[len - 1] == '.') len--; /* "example.com." names the same host */
    if (len == 0 || len >= sizeof(lower) || g->hosts == NULL) return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = host[i];
        lower[i] = (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
    }
    const lx_host_slot_t *s = host_get(g, lower, len);
    if (s != NULL) return s->vhost;
    /* Wildcards: the longest suffix first, so "*.a.example" beats "*.example". */
    for (size_t i = 1; i < len; i++) {
        if (lower[i] == '.' && (s = host_get(g, lower + i, len - i)) != NULL) return s->vhost;
    }
    return NULL;
}

lx_vhost_t *lx_gen_find_vhost(const lx_gen_t *g, const char *host, size_t len) {
    lx_vhost_t *vh = lx_gen_match_vhost(g, host, len);
    return vh ? vh : g->default_vhost;
}

static int deepest(void *ud, const uint32_t *ids, uint32_t n, size_t depth) {
    (void)depth;
    *(int64_t *)ud = ids[n - 1];
    return 0;
}

const lx_location_t *lx_vhost_location(const lx_vhost_t *vh, const char *path, size_t len) {
    if (vh->location_trie == NULL) return NULL;
    int64_t id = -1;
    lx_trie_walk(vh->location_trie, path, len, 0, deepest, &id);
    return id < 0 ? NULL : &vh->locations[id];
}

static const char *const kind_names[] = {"allow", "deny", "rewrite", "redirect"};

static void dump_rules(const char *title, const lx_ruleset_t *rs, FILE *out, const char *indent) {
    if (rs == NULL) return;
    fprintf(out, "%s%s (%u rules; indexed: %zu by prefix, %zu by suffix; %u always tested)\n",
            indent, title, rs->n, lx_trie_keys(rs->by_prefix), lx_trie_keys(rs->by_suffix),
            rs->nalways);
    for (uint32_t i = 0; i < rs->n; i++) {
        const lx_rule_t *r = &rs->rules[i];
        fprintf(out, "%s  %u. %s", indent, i + 1, kind_names[r->kind]);
        if (r->prefix) fprintf(out, " prefix=%s", r->prefix);
        for (size_t j = 0; j < r->nsuffix; j++)
            fprintf(out, "%s%s", j ? "," : " suffix=", r->suffix[j]);
        if (r->regex) fprintf(out, " regex=%s", r->regex);
        if (r->methods) {
            fprintf(out, " method=");
            for (int m = 0; m < 63; m++)
                if (r->methods & (1ULL << m))
                    fprintf(out, "%s ", llhttp_method_name((llhttp_method_t)m));
        }
        if (r->has_from) fprintf(out, " from=(%zu ranges)", r->from.n);
        if (r->target) fprintf(out, " -> %s", r->target);
        if (r->kind == LX_RULE_DENY || r->kind == LX_RULE_REDIRECT)
            fprintf(out, " status=%d", r->status);
        fprintf(out, "  (%s:%d)\n", r->file, r->line);
    }
}

static void dump_site(const lx_site_t *s, FILE *out, const char *indent) {
    fprintf(out, "%sroot %s\n", indent, s->root ? s->root : "(none)");
    fprintf(out, "%sindex", indent);
    for (size_t i = 0; i < s->nindex; i++)
        fprintf(out, " %s", s->index[i]);
    fprintf(out, "\n%setag %s, last_modified %s, gzip_static %s, dir_listing %s\n", indent,
            s->etag ? "on" : "off", s->last_modified ? "on" : "off", s->gzip_static ? "on" : "off",
            s->dir_listing ? "on" : "off");
    fprintf(out, "%sfollow_symlinks %s\n", indent,
            s->follow_symlinks == LX_SYMLINKS_FOLLOW   ? "true"
            : s->follow_symlinks == LX_SYMLINKS_REFUSE ? "false"
                                                       : "owner");
    if (s->headers_len) {
        fprintf(out, "%sheaders:\n", indent);
        const char *p = s->headers, *end = s->headers + s->headers_len;
        while (p < end) {
            const char *eol = strstr(p, "\r\n");
            fprintf(out, "%s  %.*s\n", indent, (int)(eol - p), p);
            p = eol + 2;
        }
    }
    for (size_t i = 0; i < s->nerror_pages; i++)
        fprintf(out, "%serror_page %d -> %s\n", indent, s->error_status[i], s->error_page[i]);
    dump_rules("access", s->access, out, indent);
}

void lx_gen_dump(const lx_gen_t *g, FILE *out) {
    const lx_server_conf_t *s = &g->srv;
    fprintf(out, "# luxd compiled configuration, generation %llu, from %s\n",
            (unsigned long long)g->id, g->file);
    fprintf(out, "server\n");
    for (size_t i = 0; i < s->nlisten; i++)
        fprintf(out, "  listen %s\n", s->listen[i].text);
    fprintf(out, "  workers %d\n  error_log %s\n  access_log %s (%s)\n", s->workers, s->error_log,
            s->access_log.path ? s->access_log.path : "off",
            s->access_log.format ? s->access_log.format : "-");
    fprintf(out,
            "  keepalive_timeout %ums, keepalive_requests %u\n"
            "  header_timeout %ums, body_timeout %ums, send_timeout %ums\n"
            "  max_header_bytes %zu, max_body_bytes %llu, max_connections %u\n"
            "  tcp_nodelay %s, defer_accept %s\n",
            s->keepalive_timeout, s->keepalive_requests, s->header_timeout, s->body_timeout,
            s->send_timeout, s->max_header_bytes, (unsigned long long)s->max_body_bytes,
            s->max_connections, s->tcp_nodelay ? "on" : "off", s->defer_accept ? "on" : "off");
    fprintf(out, "hosts (%zu slots)\n", g->hosts_mask + 1);
    for (size_t i = 0; g->hosts && i <= g->hosts_mask; i++) {
        const lx_host_slot_t *h = &g->hosts[i];
        if (h->vhost)
            fprintf(out, "  %s%s -> %s\n", h->name[0] == '.' ? "*" : "", h->name, h->vhost->name);
    }
    fprintf(out, "  (no match) -> %s\n", g->default_vhost ? g->default_vhost->name : "400/404");
    for (size_t i = 0; i < g->nvhosts; i++) {
        const lx_vhost_t *v = &g->vhosts[i];
        fprintf(out, "vhost %s%s  (%s:%d)\n", v->name, v->is_default ? " [default]" : "", v->file,
                v->line);
        dump_site(&v->site, out, "  ");
        dump_rules("redirect", v->redirect, out, "  ");
        dump_rules("rewrite", v->rewrite, out, "  ");
        for (size_t j = 0; j < v->nlocations; j++) {
            fprintf(out, "  location %s  (%s:%d)\n", v->locations[j].prefix, v->locations[j].file,
                    v->locations[j].line);
            dump_site(&v->locations[j].site, out, "    ");
        }
    }
    if (s->vhost_dir)
        fprintf(out, "vhost_dir %s: any other plain host name -> %s/HOST/\n", s->vhost_dir,
                s->vhost_dir);
}

const lx_upstream_t *lx_gen_upstream(const lx_gen_t *g, const char *name, size_t len) {
    for (size_t i = 0; i < g->nupstreams; i++)
        if (strlen(g->upstreams[i].name) == len && memcmp(g->upstreams[i].name, name, len) == 0)
            return &g->upstreams[i];
    return NULL;
}
