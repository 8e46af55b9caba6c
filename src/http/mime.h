/* File-name extension to Content-Type. */
#ifndef LX_HTTP_MIME_H
#define LX_HTTP_MIME_H

#include <errno.h>
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

/* mime_types = "/etc/mime.types": lines of "type/subtype ext1 ext2 ...",
 * the format of Debian's media-types (and Apache's): blank lines and words
 * from one starting with '#' on are ignored, a type without extensions adds
 * nothing. An entry of the file replaces a built-in one; within the file the
 * first line that names an extension keeps it; an extension with a dot in
 * it ("gpkg.tar") is passed over, as no lookup could match it. Types get the
 * charset of lx_mime_add. A line that is not of that form (no '/' in its
 * first word, a byte no media type or extension has, a NUL byte, or longer
 * than LX_MIME_LINE_MAX bytes before its newline) is skipped whole and
 * counted. Only a regular file of at most LX_MIME_FILE_MAX bytes is read:
 * returns 0, -EISDIR for a directory, LX_MIME_ENOTREG for anything else that
 * is not a regular file (a FIFO, a device: never opened for blocking or read
 * for ever), -EFBIG past the size, or a negative errno when the file cannot
 * be opened or read (-ENOMEM: out of memory). Not thread-safe: while
 * building. */
#define LX_MIME_LINE_MAX 4096
/* 16 MiB: Debian's mime.types is about 60 KiB; the bound keeps a wrong path
 * to a huge file from stalling every load that reads it. */
#define LX_MIME_FILE_MAX (16 * 1024 * 1024)
#define LX_MIME_ENOTREG  (-ENODEV)
typedef struct {
    size_t types;         /**< lines that gave a type at least one extension */
    size_t exts;          /**< extensions added */
    size_t skipped;       /**< malformed lines skipped */
    size_t first_skipped; /**< the line number of the first of them, or 0 */
} lx_mime_file_stats_t;
int lx_mime_load_file(lx_mime_t *m, const char *path, lx_mime_file_stats_t *st);

/* The type for the last extension of `path` (the part after the last '.' of the
 * last segment: "file.tar.gz" gives the type of "gz"), or
 * "application/octet-stream" when there is none or it is unknown. A segment's
 * leading dot marks a hidden file, not an extension, so "/.bashrc" has none.
 * Text types carry "; charset=utf-8". Never returns NULL; the string lives as
 * long as the table. Safe to call from many threads at once. */
const char *lx_mime_lookup(const lx_mime_t *m, const char *path, size_t len);

void lx_mime_free(lx_mime_t *m);

#endif
