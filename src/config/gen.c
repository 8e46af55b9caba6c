/* Generation lifetime, host lookup and the -T dump. */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>

void lx_gen_ref(lx_gen_t *g) {
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
}

void lx_gen_unref(lx_gen_t *g) {
    if (g == NULL || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    lx_mime_free(g->mime);
    lx_arena_free(&g->arena);
    free(g);
}

static const lx_host_slot_t *host_get(const lx_gen_t *g, const char *name, size_t len) {
    uint64_t h = lx_hash(name, len, 0);
    for (size_t i = h & g->hosts_mask;; i = (i + 1) & g->hosts_mask) {
        const lx_host_slot_t *s = &g->hosts[i];
        if (s->vhost == NULL)
            return NULL;
        if (s->len == len && memcmp(s->name, name, len) == 0)
            return s;
    }
}

lx_vhost_t *lx_gen_find_vhost(const lx_gen_t *g, const char *host, size_t len) {
    char lower[256];
    if (len > 0 && host[len - 1] == '.')
        len--; /* "example.com." names the same host */
    if (len == 0 || len >= sizeof(lower) || g->hosts == NULL)
        return g->default_vhost;
    for (size_t i = 0; i < len; i++) {
        char c = host[i];
        lower[i] = (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
    }
    const lx_host_slot_t *s = host_get(g, lower, len);
    if (s != NULL)
        return s->vhost;
    /* Wildcards: the longest suffix first, so "*.a.example" beats "*.example". */
    for (size_t i = 1; i < len; i++) {
        if (lower[i] == '.' && (s = host_get(g, lower + i, len - i)) != NULL)
            return s->vhost;
    }
    return g->default_vhost;
}

static void dump_site(const lx_site_t *s, FILE *out, const char *indent) {
    fprintf(out, "%sroot %s\n", indent, s->root ? s->root : "(none)");
    fprintf(out, "%sindex", indent);
    for (size_t i = 0; i < s->nindex; i++)
        fprintf(out, " %s", s->index[i]);
    fprintf(out, "\n%setag %s, last_modified %s, gzip_static %s, dir_listing %s\n", indent,
            s->etag ? "on" : "off", s->last_modified ? "on" : "off",
            s->gzip_static ? "on" : "off", s->dir_listing ? "on" : "off");
    if (s->headers_len) {
        fprintf(out, "%sheaders:\n", indent);
        const char *p = s->headers, *end = s->headers + s->headers_len;
        while (p < end) {
            const char *eol = strstr(p, "\r\n");
            fprintf(out, "%s  %.*s\n", indent, (int)(eol - p), p);
            p = eol + 2;
        }
    }
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
    }
}
