/* File-name extension to Content-Type. */
#ifndef LX_HTTP_MIME_H
#define LX_HTTP_MIME_H

#include <stddef.h>

/* An extension table: the built-in entries plus those a config adds. Built
 * once per config generation, then only read, from any thread. */
typedef struct lx_mime_s lx_mime_t;

/* A table holding the built-in types. Returns NULL on out-of-memory. */
lx_mime_t *lx_mime_new(void);

/* Adds or replaces an entry. `ext` includes the dot (".wasm"); matching is
 * case-insensitive. Both strings are copied. A text-like type (text/..., the
 * JavaScript, JSON and XML types, "+json" and "+xml" types) without parameters
 * gets "; charset=utf-8" appended, as the built-ins have; a type that has
 * parameters is stored as given. Returns 0, -EINVAL for an extension without a
 * leading dot, with nothing after it, or with a '/' or a second '.' (lookup
 * could never match it), or for an empty type or one with a control byte
 * (it goes into a header verbatim), or -ENOMEM. On error the table is
 * unchanged. Not thread-safe: call only while building the table. */
int lx_mime_add(lx_mime_t *m, const char *ext, const char *type);

/* The type for the last extension of `path` (the part after the last '.' of the
 * last segment: "file.tar.gz" gives the type of "gz"), or
 * "application/octet-stream" when there is none or it is unknown. A segment's
 * leading dot marks a hidden file, not an extension, so "/.bashrc" has none.
 * Text types carry "; charset=utf-8". Never returns NULL; the string lives as
 * long as the table. Safe to call from many threads at once. */
const char *lx_mime_lookup(const lx_mime_t *m, const char *path, size_t len);

void lx_mime_free(lx_mime_t *m);

#endif
