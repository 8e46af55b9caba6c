/* Per-loop cache of open files (Tux style): small files kept in memory with
 * their response headers pre-built, large ones as an open fd for sendfile.
 * Entries are revalidated by stat at most once a second. A miss is loaded on
 * the libuv thread pool, so a cold disk never blocks the loop. */
#ifndef LX_FILECACHE_H
#define LX_FILECACHE_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <uv.h>

#include "../config/config.h"
#include "waiter.h"

typedef struct lx_filecache_s lx_filecache_t;

/* Files up to this size are held in memory: HTTP/2, which cannot use
 * sendfile, then copies a file's bytes once, into the socket, rather than
 * reading them too (100 KiB: 27% less CPU, alternating A/B rounds). The
 * cache's bound in bytes keeps the memory in check (filecache.c
 * CACHE_BYTES, per loop). */
#define LX_SMALL_FILE (256 * 1024)
/* Files in memory past this size keep their fd open too, and HTTP/1 sends
 * them from the page cache as a larger file (out.c: copied, or sendfile):
 * at 100 KiB with 50 connections, a write from memory took 38 us a request
 * where the copied path took 31 (three alternating rounds each). */
#define LX_MEM_FD_FROM (64 * 1024)

typedef struct lx_file_s {
    struct lx_file_s *hnext;    /**< hash chain */
    struct lx_file_s *lru_prev; /**< LRU list, most recent first */
    struct lx_file_s *lru_next;
    lx_filecache_t *cache;  /**< owner */
    int refs;               /**< cache's own plus one per queued use */
    uint64_t hash;          /**< of (site id, path) */
    uint32_t site_id;       /**< headers depend on the site */
    const lx_site_t *site;  /**< for building headers */
    lx_gen_t *gen;          /**< holds site's generation alive (a reference) */
    char *path;             /**< absolute file path (owned) */
    size_t path_len;        /**< strlen(path) */
    size_t root_len;        /**< bytes of path that are the document root */
    lx_symlinks_t symlinks; /**< the site's follow_symlinks, for the load */
    int err;                /**< 0, or -ENOENT, -EACCES, ...: negative entry */
    /* is_dir is written by the thread-pool load (load_work) while the loop
     * reads loading and sets stale on the same entry, so it is a memory
     * location of its own: as a bit field next to them, the load's
     * read-modify-write of the shared word could undo a concurrent
     * "stale = 1" from a reload (ThreadSanitizer reports the race). */
    unsigned char is_dir;   /**< a directory */
    unsigned char refused;  /**< err is a refusal, not open(2)'s: LX_FILE_REFUSED_* */
    unsigned char probe;    /**< LX_PROBE_*: how out.c asks the page cache (the loop's) */
    unsigned char no_cstat; /**< cachestat(2) refused for it (EPERM): out.c, loop */
    unsigned char mem_ok;   /**< the load may read it into memory (set before it) */
    unsigned char pinned;   /**< evicted with its body still sent: counted in the cache's pinned */
    unsigned loading : 1;   /**< a thread-pool load is in flight */
    unsigned stale : 1;     /**< removed from the hash; freed at last unref */
    int fd;                 /**< open file for large files, else -1 */
    uint64_t size;          /**< bytes */
    struct timespec mtime;  /**< modification time */
    dev_t dev;              /**< device, to notice replacement */
    ino_t ino;              /**< inode, to notice replacement */
    char *data;             /**< contents of a small file, or NULL */
    const char *ctype;      /**< Content-Type */
    char etag[48];          /**< quoted strong ETag, "" when off */
    char last_modified[32]; /**< HTTP date, "" when off */
    char *hdr;              /**< pre-built 200 headers (no status line, no Date) */
    size_t hdr_len;         /**< bytes in hdr */
    uint64_t checked;       /**< loop ms of the last stat */
    lx_waiter_t *waiters;   /**< waiting for the load, called when it is done */
    uv_work_t work;         /**< the thread-pool load */
} lx_file_t;

/* lx_file_t.probe: whether the page cache can be asked about the file. */
enum {
    LX_PROBE_NOWAIT = 0, /**< preadv2(RWF_NOWAIT) answers */
    LX_PROBE_NONE = 1,   /**< refused (overlayfs): its bytes go by the thread pool */
    LX_PROBE_RAM = 2,    /**< refused, but it lives in memory (tmpfs, ramfs): always cached */
};

enum {
    LX_FILE_REFUSED_LINK = 1, /**< follow_symlinks refused a link (or "..") on the way */
    LX_FILE_REFUSED_TYPE = 2, /**< not a regular file: devices, sockets, FIFOs */
};
/* Opens a file for the cache (and --explain) under the site's symlink
 * policy: the fd of a regular file or a directory, st filled; or a negative
 * errno (-EACCES for what is never served: devices, sockets, FIFOs). */
int lx_file_open(const char *path, size_t root_len, lx_symlinks_t symlinks, struct stat *st);

lx_filecache_t *lx_filecache_new(uv_loop_t *loop);
void lx_filecache_free(lx_filecache_t *fc);
/* Drops every entry. */
void lx_filecache_clear(lx_filecache_t *fc);
/* After a reload to gen: drops the entries of older generations, as gen's
 * sites replace theirs, except loads in flight, whose waiters look them up
 * again when they are done. Requests of an older generation still running
 * keep their own entries (the generation is part of the key) until the
 * worker calls lx_filecache_drop_gen for it. */
void lx_filecache_adopt(lx_filecache_t *fc, const lx_gen_t *gen);
/* Drops every entry of gen, once no request uses gen: an entry holds a
 * reference to its generation, so one left behind would keep it alive. */
void lx_filecache_drop_gen(lx_filecache_t *fc, const lx_gen_t *gen);

/* Looks up a path for a site; its first root_len bytes are the document root,
 * below which the site's follow_symlinks applies; gz: the path is the
 * gzip_static variant of the path without ".gz", served with its type and
 * Content-Encoding. Returns 0 with *out set (a
 * reference the caller must lx_file_unref) when the entry is ready (maybe a negative one: check
 * err), or -EAGAIN when it is being loaded: waiter's callback is called
 * when it is (the caller then looks the path up again). */
int lx_filecache_get(lx_filecache_t *fc, lx_gen_t *gen, const lx_site_t *site, const char *path,
                     size_t len, size_t root_len, int gz, lx_waiter_t *waiter, lx_file_t **out);

void lx_file_ref(lx_file_t *f);
void lx_file_unref(lx_file_t *f);

#endif
