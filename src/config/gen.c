/* Generation lifetime, host lookup and the -T dump. */
#include "config.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hash.h"
#include "../log.h"
#include "../net/tlsctx.h"
#include "llhttp.h"

void lx_gen_ref(lx_gen_t *g) {
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
}

void lx_gen_unref(lx_gen_t *g) {
    if (g == NULL || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    lx_mime_free(g->mime);
    if (g->fini) g->fini(g);
    if (g->release_logs) g->release_logs(g);
    for (size_t i = 0; i < g->nrulesets; i++)
        lx_ruleset_free(g->rulesets[i]);
    free(g->rulesets);
    for (size_t i = 0; i < g->nvhosts; i++)
        lx_trie_free(g->vhosts[i].location_trie);
    lx_tls_gen_free(g);
    lx_arena_free(&g->arena);
    free(g);
}

void lx_gen_warn(lx_gen_t *g, const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    int n = snprintf(msg, sizeof(msg), "%s:%d: ", file ? file : "?", line);
    if (n < 0 || (size_t)n >= sizeof(msg)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
    const char **w = lx_arena_alloc(&g->arena, (g->nwarnings + 1) * sizeof(char *));
    if (w == NULL) return;
    if (g->nwarnings) memcpy(w, g->warnings, g->nwarnings * sizeof(char *));
    w[g->nwarnings] = lx_arena_strdup(&g->arena, msg);
    if (w[g->nwarnings] == NULL) return;
    g->warnings = w;
    g->nwarnings++;
}

static const lx_host_slot_t *host_get(const lx_gen_t *g, const char *name, size_t len) {
    uint64_t h = lx_hash(name, len, 0);
    for (size_t i = h & g->hosts_mask;; i = (i + 1) & g->hosts_mask) {
        const lx_host_slot_t *s = &g->hosts[i];
        if (s->vhost == NULL) return NULL;
        if (s->len == len && memcmp(s->name, name, len) == 0) return s;
    }
}

/* One lookup for the request path and for --explain, which also wants the
 * name that matched; inlined into both, so the request path's copy, with
 * slot NULL, stores nothing. */
static inline __attribute__((always_inline)) lx_vhost_t *
match_vhost(const lx_gen_t *g, const char *host, size_t len, const lx_host_slot_t **slot) {
    char lower[256];
    if (len > 0 && host[len - 1] == '.') len--; /* "example.com." names the same host */
    if (len == 0 || len >= sizeof(lower) || g->hosts == NULL) return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = host[i];
        lower[i] = (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
    }
    const lx_host_slot_t *s = host_get(g, lower, len);
    if (s == NULL) {
        /* Wildcards: the longest suffix first, so "*.a.example" beats "*.example". */
        for (size_t i = 1; i < len && s == NULL; i++)
            if (lower[i] == '.') s = host_get(g, lower + i, len - i);
        if (s == NULL) return NULL;
    }
    if (slot) *slot = s;
    return s->vhost;
}

lx_vhost_t *lx_gen_match_vhost(const lx_gen_t *g, const char *host, size_t len) {
    return match_vhost(g, host, len, NULL);
}

lx_vhost_t *lx_gen_match_vhost_slot(const lx_gen_t *g, const char *host, size_t len,
                                    const lx_host_slot_t **slot) {
    return match_vhost(g, host, len, slot);
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

/* One address of a set: IPv4 (mapped into ::ffff:0:0/96) as a.b.c.d. */
static void print_addr(const lx_addr_t *a, FILE *out) {
    unsigned char b[16];
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(a->hi >> (56 - 8 * i));
        b[8 + i] = (unsigned char)(a->lo >> (56 - 8 * i));
    }
    char text[INET6_ADDRSTRLEN];
    int v4 = a->hi == 0 && (a->lo >> 32) == 0xffff;
    if (inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? b + 12 : b, text, sizeof(text)))
        fprintf(out, "%s", text);
}

/* The ranges of a set as the config writes them: "10.0.0.0/8", or
 * "first-last" for a merged range that is no single prefix. */
static void print_cidrset(const lx_cidrset_t *set, FILE *out) {
    for (size_t i = 0; i < set->n; i++) {
        const lx_addr_t *f = &set->first[i], *l = &set->last[i];
        fprintf(out, "%s", i ? "," : "");
        print_addr(f, out);
        /* The prefix length whose host bits are all that differ between
         * the two ends (f's all 0, l's all 1), if the range is one. */
        uint64_t dhi = f->hi ^ l->hi, dlo = f->lo ^ l->lo;
        int host = 0;
        while (host < 128 && (host < 64 ? (dlo >> host) & 1 : (dhi >> (host - 64)) & 1))
            host++;
        uint64_t mhi = host > 64 ? (host == 128 ? ~0ULL : (1ULL << (host - 64)) - 1) : 0;
        uint64_t mlo = host >= 64 ? ~0ULL : (1ULL << host) - 1;
        int prefix = dhi == mhi && dlo == mlo && (f->hi & mhi) == 0 && (f->lo & mlo) == 0;
        int bits = 128 - host;
        int v4 = f->hi == 0 && (f->lo >> 32) == 0xffff;
        if (prefix && bits < 128 && (!v4 || bits >= 96)) {
            fprintf(out, "/%d", v4 ? bits - 96 : bits);
        } else if (f->hi != l->hi || f->lo != l->lo) {
            fprintf(out, "-");
            print_addr(l, out);
        }
    }
}

static const char *const kind_names[] = {"allow", "deny", "rewrite", "redirect"};

void lx_rule_describe(const lx_rule_t *r, FILE *out) {
    fprintf(out, "%s", kind_names[r->kind]);
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
    if (r->has_from) {
        fprintf(out, " from=");
        print_cidrset(&r->from, out);
    }
    if (!r->prefix && !r->nsuffix && !r->regex && !r->methods && !r->has_from &&
        (r->kind == LX_RULE_ALLOW || r->kind == LX_RULE_DENY))
        fprintf(out, " all");
    if (r->target) fprintf(out, " -> %s", r->target);
    if (r->kind == LX_RULE_DENY || r->kind == LX_RULE_REDIRECT)
        fprintf(out, " status=%d", r->status);
}

static void dump_rules(const char *title, const lx_ruleset_t *rs, FILE *out, const char *indent) {
    if (rs == NULL) return;
    if (rs->linear)
        fprintf(out, "%s%s (%u rules, tested in order)\n", indent, title, rs->n);
    else if (rs->nfree)
        /* -T compiles no prefilter: the server does, off its loops. */
        fprintf(out,
                "%s%s (%u rules; indexed: %zu by prefix, %zu by suffix; %u always tested; %u "
                "regexes for the prefilter, compiled when served)\n",
                indent, title, rs->n, lx_trie_keys(rs->by_prefix), lx_trie_keys(rs->by_suffix),
                rs->nalways, rs->nfree);
    else
        fprintf(out, "%s%s (%u rules; indexed: %zu by prefix, %zu by suffix; %u always tested)\n",
                indent, title, rs->n, lx_trie_keys(rs->by_prefix), lx_trie_keys(rs->by_suffix),
                rs->nalways);
    for (uint32_t i = 0; i < rs->n; i++) {
        const lx_rule_t *r = &rs->rules[i];
        fprintf(out, "%s  %u. ", indent, i + 1);
        lx_rule_describe(r, out);
        fprintf(out, "  (%s:%d)\n", r->file, r->line);
    }
}

/* "/var/log/a.log (combined, 9 pieces)", or "off". */
static void dump_access_log(const lx_access_log_conf_t *a, FILE *out) {
    if (a == NULL || a->path == NULL) {
        fprintf(out, "off");
        return;
    }
    fprintf(out, "%s (%s%s, %zu pieces)", a->path, a->format ? a->format : "-",
            a->json ? "; JSON escaping" : "", a->npieces);
}

static void dump_site(const lx_site_t *s, FILE *out, const char *indent) {
    fprintf(out, "%sroot %s\n", indent, s->root ? s->root : "(none)");
    fprintf(out, "%sindex", indent);
    for (size_t i = 0; i < s->nindex; i++)
        fprintf(out, " %s", s->index[i]);
    if (s->ntry_files) {
        fprintf(out, "\n%stry_files", indent);
        for (size_t i = 0; i < s->ntry_files; i++)
            fprintf(out, " %s", s->try_files[i]);
    }
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
    if (s->policy)
        fprintf(out, "%spolicy (%s:%d)\n", indent, s->policy_file ? s->policy_file : "?",
                s->policy_line);
    if (s->test_handler) fprintf(out, "%stest_handler on\n", indent);
    if (s->status) fprintf(out, "%sstatus on (answers with the counters)\n", indent);
    if (s->proxy) fprintf(out, "%sproxy %s\n", indent, s->proxy->name);
    if (s->fallback) fprintf(out, "%sfallback %s\n", indent, s->fallback->name);
    /* What a request handed to an upstream carries (also one a policy
     * hands over); shown where it can matter or was set. */
    if (s->proxy || s->fallback || s->proxy_host || s->nproxy_headers || !s->proxy_via)
        fprintf(out, "%sproxy_host %s, proxy_via %s\n", indent,
                s->proxy_host ? s->proxy_host : "(the client's Host)", s->proxy_via ? "on" : "off");
    if (s->proxy_underscores)
        fprintf(out, "%sproxy_underscores on (request fields named with \"_\" go upstream)\n",
                indent);
    if (s->nproxy_headers) fprintf(out, "%sproxy_headers:\n", indent);
    for (size_t i = 0; i < s->nproxy_headers; i++) {
        const lx_header_t *h = &s->proxy_headers[i];
        if (h->value.len)
            fprintf(out, "%s  %.*s: %.*s\n", indent, (int)h->name.len, h->name.p, (int)h->value.len,
                    h->value.p);
        else
            fprintf(out, "%s  %.*s (removed)\n", indent, (int)h->name.len, h->name.p);
    }
}

/* Where upstream u is named: the vhosts whose proxy or fallback it is, and
 * the locations that set it (not those that only inherit it). */
static void dump_upstream_users(const lx_gen_t *g, const lx_upstream_t *u, FILE *out) {
    size_t n = 0;
    fprintf(out, "  used by:");
    for (size_t i = 0; i < g->nvhosts; i++) {
        const lx_vhost_t *v = &g->vhosts[i];
        const lx_site_t *vs = &v->site;
        if (vs->proxy == u) fprintf(out, "%s vhost %s (proxy)", n++ ? "," : "", v->name);
        if (vs->fallback == u) fprintf(out, "%s vhost %s (fallback)", n++ ? "," : "", v->name);
        for (size_t j = 0; j < v->nlocations; j++) {
            const lx_location_t *l = &v->locations[j];
            if (l->site.proxy == u && vs->proxy != u)
                fprintf(out, "%s vhost %s location %s (proxy)", n++ ? "," : "", v->name, l->prefix);
            if (l->site.fallback == u && vs->fallback != u)
                fprintf(out, "%s vhost %s location %s (fallback)", n++ ? "," : "", v->name,
                        l->prefix);
        }
    }
    if (n == 0) fprintf(out, " no proxy or fallback (a policy may: r:proxy(\"%s\"))", u->name);
    fprintf(out, "\n");
}

static void dump_upstreams(const lx_gen_t *g, FILE *out) {
    for (size_t i = 0; i < g->nupstreams; i++) {
        const lx_upstream_t *u = &g->upstreams[i];
        fprintf(out, "upstream %s  (%s:%d)\n", u->name, u->file, u->line);
        for (size_t j = 0; j < u->nservers; j++) {
            const lx_upstream_server_t *sv = &u->servers[j];
            fprintf(out, "  server %s weight %u  (\"%s\", %s:%d)\n", sv->addr_text, sv->weight,
                    sv->text, sv->file, sv->line);
            if (u->tls && u->tls->verify)
                fprintf(out, "    tls: certificate checked for %s against %s%s\n", sv->tls_name,
                        u->tls->ca ? u->tls->ca : "the system's CAs",
                        sv->tls_name_ip ? " (no SNI: an address)" : ", sent as SNI");
            else if (u->tls)
                fprintf(out, "    tls: certificate not checked (verify = false), SNI %s\n",
                        sv->tls_name_ip ? "none" : sv->tls_name);
        }
        fprintf(out,
                "  keepalive %u, keepalive_timeout %ums\n"
                "  connect_timeout %ums, read_timeout %ums, send_timeout %ums\n"
                "  max_fails %u, fail_timeout %ums, max_header_bytes %zu\n",
                u->keepalive, u->keepalive_timeout, u->connect_timeout, u->read_timeout,
                u->send_timeout, u->max_fails, u->fail_timeout, u->max_header_bytes);
        dump_upstream_users(g, u, out);
    }
}

static void dump_realip(const lx_realip_t *ri, FILE *out, const char *ind) {
    fprintf(out, "%sreal_ip from ", ind);
    print_cidrset(&ri->from, out);
    fprintf(out, ", header %s  (%s:%d)\n", ri->header ? ri->header : "(none: PROXY protocol only)",
            ri->file, ri->line);
}

void lx_gen_dump(const lx_gen_t *g, FILE *out) {
    const lx_server_conf_t *s = &g->srv;
    fprintf(out, "# luxd compiled configuration, generation %llu, from %s\n",
            (unsigned long long)g->id, g->file);
    fprintf(out, "server\n");
    for (size_t i = 0; i < s->nlisten; i++)
        fprintf(out, "  listen %s%s%s%s\n", s->listen[i].text,
                s->listen[i].proxy_protocol ? " proxy_protocol" : "",
                s->listen[i].tls ? " tls" : "", s->listen[i].http2 ? " http2" : "");
    if (s->real_ip) dump_realip(s->real_ip, out, "  ");
    fprintf(out, "  workers %d\n", s->workers);
    if (s->user) fprintf(out, "  user %s\n", s->user);
    fprintf(out, "  pid_file %s\n", s->pid_file ? s->pid_file : "(none)");
    fprintf(out, "  error_log %s, error_log_level %s\n  access_log ", s->error_log,
            lx_log_level_name(s->error_log_level));
    dump_access_log(&s->access_log, out);
    if (s->access_log_unbuffered)
        fprintf(out, "\n  access_log_buffer 0 (each line written at once)\n");
    else
        fprintf(out, "\n  access_log_buffer %zu\n", s->access_log_buffer);
    if (s->request_id_header) fprintf(out, "  request_id_header %s\n", s->request_id_header);
    fprintf(out,
            "  keepalive_timeout %ums, keepalive_requests %u\n"
            "  header_timeout %ums, body_timeout %ums, send_timeout %ums\n"
            "  max_header_bytes %zu, max_body_bytes %llu, max_connections %u\n"
            "  tcp_nodelay %s, defer_accept %s, backlog %d\n"
            "  drain_timeout %ums\n"
            "  policy_budget %llu instructions, policy_memory %zu bytes\n",
            s->keepalive_timeout, s->keepalive_requests, s->header_timeout, s->body_timeout,
            s->send_timeout, s->max_header_bytes, (unsigned long long)s->max_body_bytes,
            s->max_connections, s->tcp_nodelay ? "on" : "off", s->defer_accept ? "on" : "off",
            s->backlog, s->drain_timeout, (unsigned long long)s->policy_budget, s->policy_memory);
    if (s->mime_types)
        fprintf(out, "  mime_types %s (%zu extensions)\n", s->mime_types, s->mime_types_exts);
    if (s->tls.file || g->tls_base)
        fprintf(out,
                "  tls protocols TLSv1.%d-TLSv1.%d, ciphers %s, handshake_timeout %ums\n"
                "  tls ticket keys %s%s\n",
                s->tls.min_version - 0x0301, s->tls.max_version - 0x0301,
                s->tls.ciphers ? s->tls.ciphers : "(Mozilla intermediate)",
                s->tls.handshake_timeout,
                s->tls.ticket_key_file ? "from " : "the process's own, rotated hourly",
                s->tls.ticket_key_file ? s->tls.ticket_key_file : "");
    dump_upstreams(g, out);
    /* The fingerprint shows the process's hash key is its own (it differs
     * from run to run) without revealing it. */
    fprintf(out, "hosts (%zu slots, hash key fingerprint %016llx)\n", g->hosts_mask + 1,
            (unsigned long long)lx_hash_fingerprint());
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
        /* Its own access log, or none where the server has one; the
         * server's is not repeated. */
        if (v->access_log != &s->access_log &&
            (v->access_log != NULL || s->access_log.path != NULL)) {
            fprintf(out, "  access_log ");
            dump_access_log(v->access_log, out);
            fprintf(out, "\n");
        }
        if (v->tls.npairs) lx_tls_dump(&v->tls, out, "  ");
        if (v->real_ip && v->real_ip != s->real_ip) dump_realip(v->real_ip, out, "  ");
        if (v->real_ip == NULL && s->real_ip) fprintf(out, "  real_ip off\n");
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
