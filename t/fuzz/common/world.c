/* t/fuzz/common/world.h: linked into every harness (the Makefile's
 * FUZZ_COMMON); only fuzz_http and fuzz_h2 call it. */
#include "world.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "h1/conn.h"
#include "handlers/handler.h"
#include "io/filecache.h"
#include "log.h"

/* LuaJIT keeps the policy states' objects behind tagged values, which
 * LeakSanitizer cannot follow: what the policy allocator (policy.c vm_alloc)
 * holds would be reported as leaked at exit although the states are alive. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
    return "leak:vm_alloc\nleak:libluajit-5.1.so\n";
}

lx_worker_t W;
static char dir[64], cfg_file[128];
static const char *who = "fuzz";
static uint64_t gen_id = 1;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_dir(void) {
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void world_dir(const char *name) {
    signal(SIGPIPE, SIG_IGN);
    who = name;
    snprintf(dir, sizeof(dir), "/tmp/luxd-%s-XXXXXX", name);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    atexit(rm_dir);
}

void put_file(const char *rel, const char *data, size_t len) {
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    for (char *s = strchr(path + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(path, 0755);
        *s = '/';
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
        perror(path);
        exit(1);
    }
    close(fd);
}

void put_str(const char *rel, const char *s) {
    put_file(rel, s, strlen(s));
}

static lx_gen_t *load(uint64_t id) {
    lx_gen_t *g;
    char err[2048];
    if (lx_config_load(cfg_file, dir, id, &g, err, sizeof(err)) < 0 ||
        lx_handlers_gen_init(g, cfg_file, dir, 1, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: config: %s\n", who, err);
        exit(1);
    }
    return g;
}

void world_start(const char *config) {
    size_t n = strlen(config) + 128;
    char *cfg = malloc(n);
    if (cfg == NULL) abort();
    snprintf(cfg, n, "local DIR = '%s'\n%s", dir, config);
    snprintf(cfg_file, sizeof(cfg_file), "%s/luxd.lua", dir);
    put_str("luxd.lua", cfg);
    free(cfg);
    lx_gen_t *g = load(1);
    lx_log_open(g->srv.error_log, g->srv.error_log_level);
    uv_loop_init(&W.loop);
    W.index = 0;
    W.gen = g;
    W.max_conns = 1000;
    /* Access log buffers are made per file on first use (accesslog.c). */
    W.alog_cap = g->srv.access_log_buffer ? g->srv.access_log_buffer : 512;
    W.cache = lx_filecache_new(&W.loop);
    W.match_data = pcre2_match_data_create(10, NULL);
    W.listeners = calloc(1, sizeof(*W.listeners));
    W.listening = 1;
    uv_mutex_init(&W.mailbox_lock);
    if (lx_worker_init_conns(&W) < 0) abort();
    lx_worker_set_time(&W, time(NULL));
}

void world_reload(void) {
    lx_gen_t *g = load(++gen_id);
    if (W.gen_users > 0) {
        W.retired = realloc(W.retired, (W.nretired + 1) * sizeof(*W.retired));
        W.retired[W.nretired++] = (lx_retired_t){W.gen, W.gen_users, uv_now(&W.loop)};
    } else {
        lx_gen_unref(W.gen);
    }
    W.gen = g;
    W.gen_users = 0;
    lx_filecache_clear(W.cache);
}

static void found(lx_conn_t *c, void *arg) {
    *(lx_conn_t **)arg = c;
}

lx_conn_t *world_conn(void) {
    lx_conn_t *c = NULL;
    lx_conn_each(&W, found, &c);
    return c;
}
