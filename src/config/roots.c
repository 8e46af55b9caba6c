/* The start-up check of document roots: a root that does not exist, is not
 * a directory, or that the user luxd serves as cannot search (or list,
 * with dir_listing) is worth a warning at -t, at start and at each reload,
 * not only a 404 or 403 per request. The user is the one luxd serves as,
 * which the caller names: at start and -t `user` when luxd is root (it
 * drops root for it; not root, luxd ignores `user`), on a reload the user
 * the running server dropped root for (a new `user` needs a restart), else
 * whoever runs luxd; permissions are judged
 * from the mode bits against its uid, group and supplementary groups (as
 * the kernel does, owner class first), so that a check run as root says
 * what that user will meet. ACLs are not read. */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

/* Past this many, one line says how many more there were: a config that
 * generates ten thousand vhosts over a missing mount must not bury the
 * rest of the log. */
#define MAX_ROOT_WARNINGS 20

typedef struct {
    lx_gen_t *g;
    char name[64]; /* "user \"www-data\"" or the like, for messages */
    uid_t uid;
    gid_t gid;
    gid_t groups[256];
    int ngroups;
    size_t warned, more;
} who_t;

static void warn(who_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(who_t *w, const char *fmt, ...) {
    if (w->warned >= MAX_ROOT_WARNINGS) {
        w->more++;
        return;
    }
    char msg[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lx_gen_t *g = w->g;
    const char **n = lx_arena_alloc(&g->arena, (g->nwarnings + 1) * sizeof(*n));
    const char *copy = lx_arena_strdup(&g->arena, msg);
    if (n == NULL || copy == NULL) return;
    if (g->nwarnings) memcpy(n, g->warnings, g->nwarnings * sizeof(*n));
    n[g->nwarnings++] = copy;
    g->warnings = n;
    w->warned++;
}

static int in_group(const who_t *w, gid_t gid) {
    if (gid == w->gid) return 1;
    for (int i = 0; i < w->ngroups; i++)
        if (w->groups[i] == gid) return 1;
    return 0;
}

/* Whether w may do `bit` (4 read, 1 search) on st. */
static int may(const who_t *w, const struct stat *st, int bit) {
    if (w->uid == 0) return 1; /* root's DAC override covers read and search */
    if (st->st_uid == w->uid) return (st->st_mode >> 6) & bit;
    if (in_group(w, st->st_gid)) return (st->st_mode >> 3) & bit;
    return st->st_mode & bit;
}

static void describe(const struct stat *st, char *out, size_t len) {
    struct passwd *pw = getpwuid(st->st_uid);
    struct group *gr = getgrgid(st->st_gid);
    char u[32], gname[32];
    snprintf(u, sizeof(u), "%ld", (long)st->st_uid);
    snprintf(gname, sizeof(gname), "%ld", (long)st->st_gid);
    snprintf(out, len, "mode %04o, owner %s, group %s", (unsigned)(st->st_mode & 07777),
             pw ? pw->pw_name : u, gr ? gr->gr_name : gname);
}

/* Checks one root; 1 when it drew no warning. */
static int check_one(who_t *w, const lx_site_t *s, const char *where) {
    const char *root = s->root;
    char real[PATH_MAX];
    if (realpath(root, real) == NULL) {
        int e = errno;
        if (e == ENOENT)
            warn(w, "%s:%d: %s: root %s does not exist; its files will be answered 404",
                 s->root_file, s->root_line, where, root);
        else if (e == ENOTDIR)
            warn(w, "%s:%d: %s: root %s is not a directory (a part of the path is a file)",
                 s->root_file, s->root_line, where, root);
        else if (e != EACCES)
            warn(w, "%s:%d: %s: root %s: %s", s->root_file, s->root_line, where, root, strerror(e));
        if (e != EACCES) return 0;
        /* luxd itself cannot resolve it (-t run by a user): walk it as written. */
        snprintf(real, sizeof(real), "%s", root);
    }
    struct stat st;
    if (stat(real, &st) == 0 && !S_ISDIR(st.st_mode)) {
        warn(w, "%s:%d: %s: root %s is not a directory", s->root_file, s->root_line, where, root);
        return 0;
    }
    /* Search permission on every directory on the way, the root included. */
    char prefix[PATH_MAX], mode[160];
    size_t len = strlen(real);
    for (size_t i = 0; i <= len; i++) {
        /* "/", then "/srv", "/srv/www", ...: each directory a lookup passes. */
        if (i > 0 && i < len && real[i] != '/') continue;
        if (i == 0 && real[0] != '/') continue;
        size_t n = i == 0 ? 1 : i;
        memcpy(prefix, real, n);
        prefix[n] = '\0';
        if (stat(prefix, &st) < 0) {
            warn(w, "%s:%d: %s: root %s cannot be checked: %s: %s", s->root_file, s->root_line,
                 where, root, prefix, strerror(errno));
            return 0;
        }
        if (!may(w, &st, 1)) {
            describe(&st, mode, sizeof(mode));
            warn(w,
                 "%s:%d: %s: root %s cannot be searched by %s: no search (x) permission on %s "
                 "(%s)",
                 s->root_file, s->root_line, where, root, w->name, prefix, mode);
            return 0;
        }
    }
    if (stat(real, &st) == 0 && !may(w, &st, 4)) {
        describe(&st, mode, sizeof(mode));
        if (s->dir_listing) {
            warn(w,
                 "%s:%d: %s: root %s cannot be read by %s, and dir_listing is on: no read (r) "
                 "permission (%s)",
                 s->root_file, s->root_line, where, root, w->name, mode);
            return 0;
        }
    }
    return 1;
}

/* The roots already found clean in this check, with their dir_listing bit:
 * ten thousand vhosts generated in a loop mostly share a root or a few,
 * and a realpath and a stat per directory on the way for each was a fifth
 * of a 10,000-vhost load. Only clean verdicts are kept: a root with a
 * problem is named for each vhost that has it (up to MAX_ROOT_WARNINGS). */
typedef struct {
    const char **root; /* open addressing; NULL: free */
    uint8_t *listing;
    size_t mask;
} clean_t;

static size_t clean_slot(const clean_t *c, const lx_site_t *s) {
    size_t i = (size_t)lx_hash(s->root, strlen(s->root), (uint64_t)s->dir_listing) & c->mask;
    while (c->root[i] &&
           (c->listing[i] != (uint8_t)s->dir_listing || strcmp(c->root[i], s->root) != 0))
        i = (i + 1) & c->mask;
    return i;
}

/* check_one, skipped for a root already found clean. The cache is only an
 * economy: without memory for it (mask 0 and no table) every root is
 * checked. */
static void check_root(who_t *w, clean_t *c, const lx_site_t *s, const char *where) {
    size_t i = 0;
    if (c->root) {
        i = clean_slot(c, s);
        if (c->root[i]) return;
    }
    if (check_one(w, s, where) && c->root) {
        c->root[i] = s->root;
        c->listing[i] = (uint8_t)s->dir_listing;
    }
}

void lx_config_check_roots(lx_gen_t *g, const char *user) {
    who_t w = {.g = g};
    if (user) {
        struct passwd *pw = getpwnam(user);
        if (pw == NULL) {
            warn(&w, "%s:%d: user \"%s\" does not exist here; luxd will not start with it",
                 g->srv.file, g->srv.line, user);
            return;
        }
        snprintf(w.name, sizeof(w.name), "user \"%s\"", user);
        w.uid = pw->pw_uid;
        w.gid = pw->pw_gid;
        w.ngroups = (int)LX_ARRAY_SIZE(w.groups);
        if (getgrouplist(user, pw->pw_gid, w.groups, &w.ngroups) < 0)
            w.ngroups = (int)LX_ARRAY_SIZE(w.groups); /* the first 256 */
    } else {
        w.uid = geteuid();
        w.gid = getegid();
        w.ngroups = getgroups((int)LX_ARRAY_SIZE(w.groups), w.groups);
        if (w.ngroups < 0) w.ngroups = 0;
        struct passwd *pw = getpwuid(w.uid);
        if (pw)
            snprintf(w.name, sizeof(w.name), "user \"%s\"", pw->pw_name);
        else
            snprintf(w.name, sizeof(w.name), "uid %ld", (long)w.uid);
    }
    /* At most one entry per root checked: the table stays under half full. */
    size_t want = 2 * (g->nvhosts + 1), cap = 16;
    for (size_t i = 0; i < g->nvhosts; i++)
        want += 2 * g->vhosts[i].nlocations;
    while (cap < want)
        cap *= 2;
    clean_t clean = {
        .root = calloc(cap, sizeof(char *)), .listing = calloc(cap, 1), .mask = cap - 1};
    if (clean.root == NULL || clean.listing == NULL) {
        free(clean.root);
        free(clean.listing);
        clean = (clean_t){0};
    }
    char where[600];
    for (size_t i = 0; i < g->nvhosts; i++) {
        const lx_vhost_t *vh = &g->vhosts[i];
        snprintf(where, sizeof(where), "vhost \"%s\"", vh->name);
        if (vh->site.root) check_root(&w, &clean, &vh->site, where);
        for (size_t j = 0; j < vh->nlocations; j++) {
            const lx_site_t *s = &vh->locations[j].site;
            /* One word on a root a location only inherits. */
            if (s->root == NULL || s->root == vh->site.root) continue;
            snprintf(where, sizeof(where), "vhost \"%s\" location \"%s\"", vh->name,
                     vh->locations[j].prefix);
            check_root(&w, &clean, s, where);
        }
    }
    if (g->srv.vhost_dir) {
        lx_site_t s = {
            .root = g->srv.vhost_dir, .root_file = g->srv.file, .root_line = g->srv.line};
        check_one(&w, &s, "server vhost_dir");
    }
    free(clean.root);
    free(clean.listing);
    if (w.more) {
        w.warned = 0;
        size_t more = w.more;
        warn(&w, "... and %zu more warnings about roots", more);
    }
}
