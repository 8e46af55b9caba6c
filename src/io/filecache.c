#include "filecache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../http/date.h"
#include "../log.h"
#include "../lx.h"
#include "../stats.h"
#include "open_beneath.h"

/* Bounds per loop: memory for small-file bodies, entries, and open fds. */
#define CACHE_BYTES   (64u * 1024 * 1024)
#define CACHE_ENTRIES 16384u
#define CACHE_FDS     1024u
/* How long a stat result (positive or negative) is trusted. */
#define REVALIDATE_MS 1000

struct lx_filecache_s {
    uv_loop_t *loop;
    lx_file_t **buckets;
    size_t nbuckets; /* a power of two */
    size_t n;        /* entries in the hash */
    size_t bytes;    /* small-file bodies held */
    size_t pinned;   /* bodies outside the cache that responses still send (evicted) */
    size_t reserved; /* LX_SMALL_FILE for each load in flight that may read into memory */
    size_t fds;      /* large-file fds held */
    lx_file_t *lru_head, *lru_tail;
};

lx_filecache_t *lx_filecache_new(uv_loop_t *loop) {
    lx_filecache_t *fc = calloc(1, sizeof(*fc));
    if (fc == NULL) return NULL;
    fc->loop = loop;
    fc->nbuckets = 1024;
    fc->buckets = calloc(fc->nbuckets, sizeof(*fc->buckets));
    if (fc->buckets == NULL) {
        free(fc);
        return NULL;
    }
    return fc;
}

static void file_free(lx_file_t *f) {
    if (f->pinned) f->cache->pinned -= f->size;
    lx_gen_unref(f->gen);
    if (f->fd >= 0) close(f->fd);
    free(f->data);
    free(f->hdr);
    free(f->path);
    free(f);
}

void lx_file_ref(lx_file_t *f) {
    f->refs++;
}

void lx_file_unref(lx_file_t *f) {
    if (--f->refs == 0) file_free(f);
}

static void lru_unlink(lx_filecache_t *fc, lx_file_t *f) {
    if (f->lru_prev)
        f->lru_prev->lru_next = f->lru_next;
    else
        fc->lru_head = f->lru_next;
    if (f->lru_next)
        f->lru_next->lru_prev = f->lru_prev;
    else
        fc->lru_tail = f->lru_prev;
    f->lru_prev = f->lru_next = NULL;
}

static void lru_push(lx_filecache_t *fc, lx_file_t *f) {
    f->lru_prev = NULL;
    f->lru_next = fc->lru_head;
    if (fc->lru_head) fc->lru_head->lru_prev = f;
    fc->lru_head = f;
    if (fc->lru_tail == NULL) fc->lru_tail = f;
}

/* Takes f out of the cache; it lives on while queued responses use it. */
static void evict(lx_filecache_t *fc, lx_file_t *f) {
    lx_file_t **pp = &fc->buckets[f->hash & (fc->nbuckets - 1)];
    while (*pp != f)
        pp = &(*pp)->hnext;
    *pp = f->hnext;
    lru_unlink(fc, f);
    fc->n--;
    if (!f->loading) { /* a loading entry's fields belong to the pool thread */
        if (f->data) fc->bytes -= f->size;
        if (f->data && f->refs > 1) { /* a response still sends it */
            fc->pinned += f->size;
            f->pinned = 1;
        }
        if (f->fd >= 0) fc->fds--;
    }
    f->stale = 1;
    lx_file_unref(f);
}

void lx_filecache_clear(lx_filecache_t *fc) {
    lx_file_t *f = fc->lru_head;
    while (f) {
        lx_file_t *next = f->lru_next;
        evict(fc, f); /* a load in flight finishes for its waiters only */
        f = next;
    }
}

void lx_filecache_adopt(lx_filecache_t *fc, const lx_gen_t *gen) {
    lx_file_t *f = fc->lru_head;
    while (f) {
        lx_file_t *next = f->lru_next;
        /* A load in flight has waiters of the old generation, which look the
         * path up again when it is done: it stays where they find it, and
         * lx_filecache_drop_gen removes it when they are gone. */
        if (f->gen != gen && !f->loading) evict(fc, f);
        f = next;
    }
}

void lx_filecache_drop_gen(lx_filecache_t *fc, const lx_gen_t *gen) {
    lx_file_t *f = fc->lru_head;
    while (f) {
        lx_file_t *next = f->lru_next;
        if (f->gen == gen) evict(fc, f);
        f = next;
    }
}

void lx_filecache_free(lx_filecache_t *fc) {
    if (fc == NULL) return;
    lx_filecache_clear(fc);
    free(fc->buckets);
    free(fc);
}

static void trim(lx_filecache_t *fc) {
    lx_file_t *f = fc->lru_tail;
    while (f && (fc->bytes > CACHE_BYTES || fc->n > CACHE_ENTRIES || fc->fds > CACHE_FDS)) {
        lx_file_t *prev = f->lru_prev;
        if (!f->loading) evict(fc, f);
        f = prev;
    }
}

/* Whether a file may be read into memory by its load: the bodies the cache
 * holds, those responses still send of entries it evicted (stalled
 * clients: each holds its file) and the loads in flight (LX_SMALL_FILE
 * each, their size not known yet) stay within CACHE_BYTES, entries no
 * response uses evicted for it, least recently used first. Else the file
 * is opened, not read, and what a response reads of it is bounded by the
 * protocol's read-ahead. */
static int mem_room(lx_filecache_t *fc) {
    lx_file_t *f = fc->lru_tail;
    while (f && fc->bytes + fc->pinned + fc->reserved + LX_SMALL_FILE > CACHE_BYTES) {
        lx_file_t *prev = f->lru_prev;
        if (!f->loading && f->data && f->refs == 1) evict(fc, f);
        f = prev;
    }
    return fc->bytes + fc->pinned + fc->reserved + LX_SMALL_FILE <= CACHE_BYTES;
}

static void grow(lx_filecache_t *fc) {
    size_t nb = fc->nbuckets * 2;
    lx_file_t **b = calloc(nb, sizeof(*b));
    if (b == NULL) return; /* longer chains, still correct */
    for (size_t i = 0; i < fc->nbuckets; i++) {
        lx_file_t *f = fc->buckets[i];
        while (f) {
            lx_file_t *next = f->hnext;
            f->hnext = b[f->hash & (nb - 1)];
            b[f->hash & (nb - 1)] = f;
            f = next;
        }
    }
    free(fc->buckets);
    fc->buckets = b;
    fc->nbuckets = nb;
}

/* Builds the 200 response headers once, so a hit copies one string. */
static void build_headers(lx_file_t *f) {
    const lx_site_t *s = f->site;
    int gz = (f->site_id & 1) != 0;
    size_t plen = f->path_len - (gz ? 3 : 0);
    f->ctype = lx_mime_lookup(f->gen->mime, f->path, plen);
    f->etag[0] = f->last_modified[0] = '\0';
    /* A gzip_static variant is another representation of the same path:
     * its tag says so, as two strong tags must differ where the bytes do.
     * gzip -k keeps the file's mtime, so the time alone does not tell the
     * two apart, and an If-Range or If-Match could otherwise take the
     * one's tag for the other's when their sizes happen to be equal. */
    if (s->etag)
        snprintf(f->etag, sizeof(f->etag), "\"%" PRIx64 "-%" PRIx64 "%s\"",
                 (uint64_t)f->mtime.tv_sec * 1000000000u + (uint64_t)f->mtime.tv_nsec, f->size,
                 gz ? "-gz" : "");
    if (s->last_modified) lx_http_date(f->mtime.tv_sec, f->last_modified);
    /* Sized by a first formatting pass rather than by an estimate, so the
     * length used below is always what was written. */
    const char *enc = gz ? "Content-Encoding: gzip\r\n" : "";
    const char *vary = s->gzip_static ? "Vary: Accept-Encoding\r\n" : "";
    /* No Content-Length: the serializer writes the framing (response.c). */
#define HDR_FMT "Content-Type: %s\r\n%s%s%s%s%s%s%s%s%s"
#define HDR_ARGS                                                                                   \
    f->ctype, f->last_modified[0] ? "Last-Modified: " : "", f->last_modified,                      \
        f->last_modified[0] ? "\r\n" : "", f->etag[0] ? "ETag: " : "", f->etag,                    \
        f->etag[0] ? "\r\n" : "", "Accept-Ranges: bytes\r\n", enc, vary
    int n = snprintf(NULL, 0, HDR_FMT, HDR_ARGS);
    f->hdr = n < 0 ? NULL : malloc((size_t)n + s->headers_len + 1);
    if (f->hdr == NULL || snprintf(f->hdr, (size_t)n + 1, HDR_FMT, HDR_ARGS) != n) {
        free(f->hdr);
        f->hdr = NULL;
        f->err = -ENOMEM;
        return;
    }
#undef HDR_FMT
#undef HDR_ARGS
    memcpy(f->hdr + n, s->headers, s->headers_len);
    f->hdr_len = (size_t)n + s->headers_len;
}

/* Whether this thread's last lx_file_open refused a file for its type: the
 * error log says that rather than "Permission denied". */
static __thread int refused_type;

int lx_file_open(const char *path, size_t root_len, lx_symlinks_t symlinks, struct stat *st) {
    refused_type = 0;
    int fd = lx_open_beneath(path, root_len, symlinks);
    if (fd < 0) return fd;
    if (fstat(fd, st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
        close(fd);
        refused_type = 1;
        return -EACCES; /* devices, sockets and FIFOs are never served */
    }
    return fd;
}

/* Runs on the thread pool: everything that may touch the disk. */
static void load_work(uv_work_t *w) {
    lx_file_t *f = container_of(w, lx_file_t, work);
    /* The symlink policy is applied here, once per cache fill: a hit never
     * pays for it, and the revalidating stat notices a path that changed
     * (its inode does), which sends it through here again. */
    struct stat st;
    int fd = lx_file_open(f->path, f->root_len, f->symlinks, &st);
    if (fd < 0) {
        f->err = fd;
        if (lx_open_beneath_refused()) f->refused = LX_FILE_REFUSED_LINK;
        if (refused_type) f->refused = LX_FILE_REFUSED_TYPE;
        return;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->mtime = st.st_mtim;
    f->size = (uint64_t)st.st_size;
    if (S_ISDIR(st.st_mode)) {
        f->is_dir = 1;
        close(fd);
        return;
    }
    if (f->size > LX_SMALL_FILE || !f->mem_ok) {
        f->fd = fd;
        return;
    }
    f->data = malloc(f->size ? f->size : 1);
    size_t got = 0;
    while (f->data && got < f->size) {
        ssize_t n = pread(fd, f->data + got, f->size - got, (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (f->data == NULL)
        f->err = -ENOMEM;
    else if (got < f->size)
        f->err = -EIO; /* shrank while we read: the next stat reloads it */
    if (f->err == 0 && f->size > LX_MEM_FD_FROM)
        f->fd = fd; /* HTTP/1's (filecache.h) */
    else
        close(fd);
}

static void load_done(uv_work_t *w, int status) {
    lx_file_t *f = container_of(w, lx_file_t, work);
    lx_filecache_t *fc = f->cache;
    LX_ST_DEC(&lx_stats_of(fc->loop)->io_jobs);
    f->loading = 0;
    if (status == UV_ECANCELED) f->err = -ECANCELED;
    if (f->err == 0 && !f->is_dir) build_headers(f);
    if (!f->stale) {
        if (f->data && f->err == 0) fc->bytes += f->size;
        if (f->fd >= 0) fc->fds++;
        f->checked = uv_now(fc->loop);
    }
    if (f->err && f->data) {
        free(f->data);
        f->data = NULL;
    }
    if (f->mem_ok) fc->reserved -= LX_SMALL_FILE;
    if (f->stale && f->data) { /* evicted while it loaded: its waiters send it */
        fc->pinned += f->size;
        f->pinned = 1;
    }
    /* Resume waiters after the state is final; each may queue f. */
    lx_waiter_t *wt = f->waiters;
    f->waiters = NULL;
    while (wt) {
        lx_waiter_t *next = wt->next;
        wt->cb(wt, 0);
        wt = next;
    }
    if (!f->stale) trim(fc);
    lx_file_unref(f); /* the load's reference */
}

/* Stat says whether the entry still describes what is on disk. Done on the
 * loop: the inode was touched within the last seconds, so it is in the dentry
 * and inode caches and stat does not wait on the disk. */
static int still_valid(const lx_file_t *f) {
    struct stat st;
    if (stat(f->path, &st) < 0) return f->err == -errno;
    if (f->err) return 0;
    if (f->is_dir) return S_ISDIR(st.st_mode);
    return S_ISREG(st.st_mode) && st.st_ino == f->ino && st.st_dev == f->dev &&
           (uint64_t)st.st_size == f->size && st.st_mtim.tv_sec == f->mtime.tv_sec &&
           st.st_mtim.tv_nsec == f->mtime.tv_nsec;
}

static int add_waiter(lx_file_t *f, lx_waiter_t *w) {
    w->next = f->waiters;
    f->waiters = w;
    return -EAGAIN;
}

int lx_filecache_get(lx_filecache_t *fc, lx_gen_t *gen, const lx_site_t *site, const char *path,
                     size_t len, size_t root_len, int gz, lx_waiter_t *waiter, lx_file_t **out) {
    uint32_t site_id = site->id * 2 + (uint32_t)gz;
    uint64_t h = lx_hash(path, len, site_id);
    lx_file_t *f = fc->buckets[h & (fc->nbuckets - 1)];
    /* Site ids are unique within a generation only, and an entry's headers
     * are its generation's, so the generation is part of the key: a request
     * that started before a reload and looks a path up after it (resumed
     * after a load, or trying an index file or an error page) shares nothing
     * with the new generation's requests. Comparing the pointer is enough, as
     * every entry holds a reference to its own generation. */
    while (f && !(f->hash == h && f->site_id == site_id && f->gen == gen && f->path_len == len &&
                  memcmp(f->path, path, len) == 0))
        f = f->hnext;
    lx_stats_t *st = lx_stats_of(fc->loop);
    if (f) {
        if (f->loading) {
            LX_ST_INC(&st->cache_hits); /* its load is under way: no second one */
            return add_waiter(f, waiter);
        }
        uint64_t now = uv_now(fc->loop);
        if (now - f->checked < REVALIDATE_MS || still_valid(f)) {
            LX_ST_INC(&st->cache_hits);
            if (now - f->checked >= REVALIDATE_MS) f->checked = now;
            if (fc->lru_head != f) {
                lru_unlink(fc, f);
                lru_push(fc, f);
            }
            f->refs++;
            *out = f;
            return 0;
        }
        evict(fc, f);
    }
    LX_ST_INC(&st->cache_misses);

    f = calloc(1, sizeof(*f));
    if (f == NULL || (f->path = malloc(len + 1)) == NULL) {
        free(f);
        return -ENOMEM;
    }
    memcpy(f->path, path, len);
    f->path[len] = '\0';
    f->path_len = len;
    f->root_len = root_len;
    f->symlinks = site->follow_symlinks;
    f->cache = fc;
    f->site = site;
    f->gen = gen;
    lx_gen_ref(gen); /* a load in flight across a reload still reads site */
    f->site_id = site_id;
    f->hash = h;
    f->fd = -1;
    f->refs = 2; /* the cache's and the load's */
    f->loading = 1;
    f->mem_ok = mem_room(fc);
    if (f->mem_ok) fc->reserved += LX_SMALL_FILE;
    if (fc->n >= fc->nbuckets) grow(fc);
    lx_file_t **b = &fc->buckets[h & (fc->nbuckets - 1)];
    f->hnext = *b;
    *b = f;
    fc->n++;
    lru_push(fc, f);
    int r = uv_queue_work(fc->loop, &f->work, load_work, load_done);
    if (r == 0) {
        LX_ST_INC(&st->io_jobs);
        LX_ST_INC(&st->io_jobs_total);
    }
    if (r < 0) {
        if (f->mem_ok) fc->reserved -= LX_SMALL_FILE;
        f->loading = 0;
        f->err = r;
        f->refs--;
        f->checked = uv_now(fc->loop);
        f->refs++;
        *out = f;
        return 0;
    }
    return add_waiter(f, waiter);
}
