/* What fuzz_http and fuzz_h2 share: a site on disk in a temporary folder
 * and a worker as lx_worker_start makes one, without its thread,
 * listeners, tick and wakeup: the harness's thread runs its loop. */
#ifndef LX_FUZZ_WORLD_H
#define LX_FUZZ_WORLD_H

#include <stddef.h>

#include "worker.h"

extern lx_worker_t W;

/* A temporary folder for the site, /tmp/luxd-fuzz-NAME-XXXXXX, removed at
 * exit; SIGPIPE ignored. Exits on failure. */
void world_dir(const char *name);
/* A file of the site, its folders made as needed. Exits on failure. */
void put_file(const char *rel, const char *data, size_t len);
void put_str(const char *rel, const char *s);
/* The config (Lua, DIR set to the folder) written as luxd.lua and loaded,
 * and the worker made. Exits on failure. */
void world_start(const char *config);
/* A reload as the loop sees one (worker.c adopt): a new generation from
 * the same file; the old one is retired while requests still run under it
 * and freed when the last ends, so anything that keeps pointing into it
 * after that reads freed memory, which ASan reports. */
void world_reload(void);
/* The harness's one connection, or NULL once it is closed. */
lx_conn_t *world_conn(void);

#endif
