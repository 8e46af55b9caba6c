/* File-name extension to Content-Type.
 *
 * The table is an open-addressing hash with linear probing, keyed by the
 * lower-cased extension without its dot. It is kept at most half full, so a
 * lookup touches one or two slots on average, and it is never shrunk or
 * deleted from, so no tombstones are needed. Built-in entries point at static
 * strings; entries a config adds own heap copies, which a flag per slot
 * records so that lx_mime_free knows what to free.
 *
 * Nothing in lx_mime_lookup writes to the table, so once a generation has
 * finished building it, every loop thread may read it without locks. */
#include "http/mime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_TYPE "application/octet-stream"
#define CHARSET      "; charset=utf-8"

/* The first capacity holds the built-ins at a load well under one half, so a
 * few config additions do not grow it. Must be a power of two. */
#define INITIAL_CAP 256

typedef struct {
    const char *ext;    /**< lower-case extension without the dot; NULL if the slot is free */
    const char *type;   /**< the Content-Type value, parameters included */
    size_t ext_len;     /**< strlen(ext), so probing compares lengths first */
    uint32_t hash;      /**< hash of ext, kept so growing need not rehash strings */
    uint8_t ext_owned;  /**< ext was allocated by lx_mime_add */
    uint8_t type_owned; /**< type was allocated by lx_mime_add */
    uint8_t from_file;  /**< set by lx_mime_load_file: a later line of the file keeps it */
} mime_slot_t;

struct lx_mime_s {
    mime_slot_t *slots; /**< `cap` slots */
    size_t cap;         /**< a power of two */
    size_t count;       /**< slots in use */
};

/* The built-in types, close to what nginx's mime.types and the IANA registry
 * give. Text-like types carry their charset here already; types added later
 * get it from add_charset() by the same rule. */
static const struct {
    const char *ext;
    const char *type;
} builtin[] = {
    /* Documents and code. */
    {"html", "text/html" CHARSET},
    {"htm", "text/html" CHARSET},
    {"shtml", "text/html" CHARSET},
    {"xhtml", "application/xhtml+xml" CHARSET},
    {"css", "text/css" CHARSET},
    {"js", "application/javascript" CHARSET},
    {"mjs", "application/javascript" CHARSET},
    {"json", "application/json" CHARSET},
    {"map", "application/json" CHARSET},
    {"jsonld", "application/ld+json" CHARSET},
    {"webmanifest", "application/manifest+json" CHARSET},
    {"xml", "application/xml" CHARSET},
    {"xsl", "application/xml" CHARSET},
    {"rss", "application/rss+xml" CHARSET},
    {"atom", "application/atom+xml" CHARSET},
    {"txt", "text/plain" CHARSET},
    {"text", "text/plain" CHARSET},
    {"log", "text/plain" CHARSET},
    {"csv", "text/csv" CHARSET},
    {"tsv", "text/tab-separated-values" CHARSET},
    {"md", "text/markdown" CHARSET},
    {"markdown", "text/markdown" CHARSET},
    {"ics", "text/calendar" CHARSET},
    {"vtt", "text/vtt" CHARSET},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"rtf", "application/rtf"},

    /* Images. */
    {"png", "image/png"},
    {"apng", "image/apng"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"jfif", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"svg", "image/svg+xml" CHARSET},
    {"ico", "image/x-icon"},
    {"bmp", "image/bmp"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"jxl", "image/jxl"},

    /* Fonts. */
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"eot", "application/vnd.ms-fontobject"},

    /* Archives. */
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tgz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"bz2", "application/x-bzip2"},
    {"xz", "application/x-xz"},
    {"zst", "application/zstd"},
    {"7z", "application/x-7z-compressed"},

    /* Audio and video. */
    {"mp4", "video/mp4"},
    {"m4v", "video/mp4"},
    {"webm", "video/webm"},
    {"ogv", "video/ogg"},
    {"mov", "video/quicktime"},
    {"mkv", "video/x-matroska"},
    {"avi", "video/x-msvideo"},
    {"ts", "video/mp2t"},
    {"m3u8", "application/vnd.apple.mpegurl"},
    {"mpd", "application/dash+xml" CHARSET},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"oga", "audio/ogg"},
    {"opus", "audio/ogg"},
    {"wav", "audio/wav"},
    {"flac", "audio/flac"},
    {"m4a", "audio/mp4"},
    {"aac", "audio/aac"},
    {"mid", "audio/midi"},
    {"midi", "audio/midi"},
};

static char ascii_lower(char c) {
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* FNV-1a over the lower-cased bytes: short keys, no need for anything
 * stronger, since the keys come from the config and the built-ins, not from
 * clients; a client's extension is only ever looked up. */
static uint32_t ext_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    size_t i;

    for (i = 0; i < n; i++) {
        h ^= (unsigned char)ascii_lower(s[i]);
        h *= 16777619u;
    }
    return h;
}

/* Compares a stored lower-case extension with one in any case. */
static int ext_equal(const mime_slot_t *slot, const char *s, size_t n, uint32_t h) {
    size_t i;

    if (slot->hash != h || slot->ext_len != n) return 0;
    for (i = 0; i < n; i++)
        if (slot->ext[i] != ascii_lower(s[i])) return 0;
    return 1;
}

/* The slot that holds `s`, or the free slot where it belongs. The table is
 * never full, so the probe ends. */
static mime_slot_t *find_slot(mime_slot_t *slots, size_t cap, const char *s, size_t n, uint32_t h) {
    size_t mask = cap - 1, i = h & mask;

    while (slots[i].ext != NULL && !ext_equal(&slots[i], s, n, h))
        i = (i + 1) & mask;
    return &slots[i];
}

static void free_slot(mime_slot_t *slot) {
    if (slot->ext_owned) free((char *)slot->ext);
    if (slot->type_owned) free((char *)slot->type);
}

/* Doubles the table once it would be more than half full. */
static int grow_if_needed(lx_mime_t *m) {
    mime_slot_t *slots;
    size_t cap, i;

    if ((m->count + 1) * 2 <= m->cap) return 0;
    cap = m->cap * 2;
    slots = calloc(cap, sizeof(*slots));
    if (slots == NULL) return -ENOMEM;
    for (i = 0; i < m->cap; i++) {
        mime_slot_t *old = &m->slots[i];
        if (old->ext != NULL) *find_slot(slots, cap, old->ext, old->ext_len, old->hash) = *old;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

/* Stores ext -> type, replacing an existing entry. `ext` must already be
 * lower case. On success the table owns what the flags say it owns. */
static int insert(lx_mime_t *m, const char *ext, size_t n, const char *type, int ext_owned,
                  int type_owned, int from_file) {
    uint32_t h = ext_hash(ext, n);
    mime_slot_t *slot;
    int err;

    slot = find_slot(m->slots, m->cap, ext, n, h);
    if (slot->ext != NULL) {
        /* Replacing keeps the slot's key and drops the new copy of it. */
        if (slot->type_owned) free((char *)slot->type);
        slot->type = type;
        slot->type_owned = (uint8_t)type_owned;
        slot->from_file = (uint8_t)from_file;
        if (ext_owned) free((char *)ext);
        return 0;
    }

    err = grow_if_needed(m);
    if (err) return err;
    slot = find_slot(m->slots, m->cap, ext, n, h);
    slot->ext = ext;
    slot->ext_len = n;
    slot->hash = h;
    slot->type = type;
    slot->ext_owned = (uint8_t)ext_owned;
    slot->type_owned = (uint8_t)type_owned;
    slot->from_file = (uint8_t)from_file;
    m->count++;
    return 0;
}

lx_mime_t *lx_mime_new(void) {
    lx_mime_t *m;
    size_t i;

    m = calloc(1, sizeof(*m));
    if (m == NULL) return NULL;
    m->cap = INITIAL_CAP;
    m->slots = calloc(m->cap, sizeof(*m->slots));
    if (m->slots == NULL) {
        free(m);
        return NULL;
    }
    for (i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++) {
        if (insert(m, builtin[i].ext, strlen(builtin[i].ext), builtin[i].type, 0, 0, 0) != 0) {
            lx_mime_free(m);
            return NULL;
        }
    }
    return m;
}

static int has_prefix(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix), i;

    if (n < k) return 0;
    for (i = 0; i < k; i++)
        if (ascii_lower(s[i]) != prefix[i]) return 0;
    return 1;
}

static int has_suffix(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && has_prefix(s + n - k, k, suffix);
}

/* Whether a type is text that browsers should decode as UTF-8: any "text/" type, the
 * JavaScript, JSON and XML types, and the structured-syntax "+json" and
 * "+xml" types (SVG, RSS, Atom and the like). A type that already has
 * parameters is left alone, so a config can ask for another charset. */
static int wants_charset(const char *type) {
    size_t n = strlen(type);

    if (strchr(type, ';') != NULL) return 0;
    return has_prefix(type, n, "text/") ||
           (n == 22 && has_prefix(type, n, "application/javascript")) ||
           (n == 16 && has_prefix(type, n, "application/json")) ||
           (n == 15 && has_prefix(type, n, "application/xml")) || has_suffix(type, n, "+json") ||
           has_suffix(type, n, "+xml");
}

/* Adds ext (n bytes, no dot) -> type, with the charset rule; the type has
 * been checked. from_file: an entry of a mime.types file, which does not
 * replace one the file gave before. */
static int add_entry(lx_mime_t *m, const char *ext, size_t n, const char *type, int from_file) {
    size_t tn = strlen(type), i;
    char *k, *v;
    int err;

    if (from_file) {
        char low[LX_MIME_LINE_MAX + 1];
        if (n < sizeof(low)) {
            for (i = 0; i < n; i++)
                low[i] = ascii_lower(ext[i]);
            const mime_slot_t *old = find_slot(m->slots, m->cap, low, n, ext_hash(low, n));
            if (old->ext != NULL && old->from_file) return 0; /* the first line wins */
        }
    }
    k = malloc(n + 1);
    if (k == NULL) return -ENOMEM;
    for (i = 0; i < n; i++)
        k[i] = ascii_lower(ext[i]);
    k[n] = '\0';

    if (wants_charset(type)) {
        v = malloc(tn + sizeof(CHARSET));
        if (v != NULL) {
            memcpy(v, type, tn);
            memcpy(v + tn, CHARSET, sizeof(CHARSET));
        }
    } else {
        v = malloc(tn + 1);
        if (v != NULL) memcpy(v, type, tn + 1);
    }
    if (v == NULL) {
        free(k);
        return -ENOMEM;
    }

    err = insert(m, k, n, v, 1, 1, from_file);
    if (err) {
        free(k);
        free(v);
    }
    return err;
}

int lx_mime_add(lx_mime_t *m, const char *ext, const char *type) {
    size_t n, tn, i;

    if (ext == NULL || ext[0] != '.' || type == NULL) return -EINVAL;
    ext++;
    n = strlen(ext);

    /* Lookup only ever sees what follows the last dot of the last segment, so
     * a key that is empty or holds a '.' or '/' could never match: refusing
     * it tells the config author at load time instead of silently never. */
    if (n == 0 || strchr(ext, '.') != NULL || strchr(ext, '/') != NULL) return -EINVAL;

    /* The type goes into a response header verbatim, so a control byte (a CR
     * or LF above all) would let a config split the response. */
    tn = strlen(type);
    if (tn == 0) return -EINVAL;
    for (i = 0; i < tn; i++) {
        unsigned char c = (unsigned char)type[i];
        if (c < 0x20 || c == 0x7f) return -EINVAL;
    }
    return add_entry(m, ext, n, type, 0);
}

/* RFC 9110 tchar: what a type's halves and an extension are made of. */
static int is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* "type/subtype": two runs of tchar around one slash. */
static int is_media_type(const char *p, size_t n) {
    const char *slash = memchr(p, '/', n);
    if (slash == NULL || slash == p || slash == p + n - 1) return 0;
    for (size_t i = 0; i < n; i++)
        if (p + i != slash && !is_tchar((unsigned char)p[i])) return 0;
    return 1;
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* One line of a mime.types file: 1 when used or blank, 0 when malformed,
 * or a negative errno. */
static int load_line(lx_mime_t *m, char *line, size_t len, lx_mime_file_stats_t *st) {
    char *p = line, *end = line + len;
    char *words[2];
    size_t wlen[2];
    int nwords = 0;
    /* The type. */
    while (p < end && is_space(*p))
        p++;
    if (p == end || *p == '#') return 1;
    words[0] = p;
    while (p < end && !is_space(*p))
        p++;
    wlen[0] = (size_t)(p - words[0]);
    if (!is_media_type(words[0], wlen[0])) return 0;
    char type[LX_MIME_LINE_MAX + 1];
    memcpy(type, words[0], wlen[0]);
    type[wlen[0]] = '\0';
    /* Every extension is checked before any is added: a malformed line
     * adds nothing. */
    for (int pass = 0; pass < 2; pass++) {
        char *q = p;
        for (;;) {
            while (q < end && is_space(*q))
                q++;
            if (q == end || *q == '#') break;
            words[1] = q;
            while (q < end && !is_space(*q))
                q++;
            wlen[1] = (size_t)(q - words[1]);
            if (pass == 0) {
                for (size_t i = 0; i < wlen[1]; i++)
                    if (!is_tchar((unsigned char)words[1][i])) return 0;
                continue;
            }
            nwords++;
            /* "gpkg.tar": lookups see only what follows the last dot, so
             * such a name can never match; it is passed over. */
            if (memchr(words[1], '.', wlen[1]) != NULL) continue;
            int r = add_entry(m, words[1], wlen[1], type, 1);
            if (r < 0) return r;
            st->exts++;
        }
    }
    if (nwords) st->types++;
    return 1;
}

/* Opens `path` for lx_mime_load_file: only a regular file of at most
 * LX_MIME_FILE_MAX bytes. O_NONBLOCK keeps open() of a FIFO without a writer
 * from blocking the loader, and fstat() then refuses it, a device such as
 * /dev/zero (read for ever) or a directory before a byte is read. */
static int open_types_file(const char *path, FILE **out) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat sb;
    int err = 0;
    if (fstat(fd, &sb) != 0)
        err = -errno;
    else if (S_ISDIR(sb.st_mode))
        err = -EISDIR;
    else if (!S_ISREG(sb.st_mode))
        err = LX_MIME_ENOTREG;
    else if (sb.st_size > LX_MIME_FILE_MAX)
        err = -EFBIG;
    if (err == 0 && (*out = fdopen(fd, "r")) == NULL) err = -errno;
    if (err) close(fd);
    return err;
}

int lx_mime_load_file(lx_mime_t *m, const char *path, lx_mime_file_stats_t *st) {
    memset(st, 0, sizeof(*st));
    FILE *f = NULL;
    int err = open_types_file(path, &f);
    if (err) return err;
    /* getline() gives each line's real length, NUL bytes and all, so a NUL
     * cannot make a line look unfinished and take the next one with it. */
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    uint64_t total = 0;
    ssize_t got;
    errno = 0;
    while ((got = getline(&line, &cap, f)) != -1) {
        size_t len = (size_t)got;
        /* fstat() saw the size at the open; a file that grows while it is
         * read is held to the same bound. */
        total += len;
        if (total > LX_MIME_FILE_MAX) {
            err = -EFBIG;
            break;
        }
        lineno++;
        if (len > 0 && line[len - 1] == '\n') len--;
        int good;
        if (len > LX_MIME_LINE_MAX || memchr(line, '\0', len) != NULL) {
            good = 0; /* too long, or a NUL byte: not a text line */
        } else {
            good = load_line(m, line, len, st);
            if (good < 0) {
                err = good;
                break;
            }
        }
        if (!good && st->skipped++ == 0) st->first_skipped = lineno;
    }
    if (err == 0 && ferror(f)) err = -(errno ? errno : EIO);
    free(line);
    fclose(f);
    return err;
}

const char *lx_mime_lookup(const lx_mime_t *m, const char *path, size_t len) {
    const mime_slot_t *slot;
    size_t i, seg = 0, dot = 0;
    int have_dot = 0;

    /* One backwards scan finds the last dot of the last segment. */
    for (i = len; i > 0; i--) {
        char c = path[i - 1];
        if (c == '/') {
            seg = i;
            break;
        }
        if (c == '.' && !have_dot) {
            dot = i - 1;
            have_dot = 1;
        }
    }

    /* A segment's leading dot marks a hidden file, not an extension:
     * ".bashrc" has none, while ".config.json" has "json". */
    if (!have_dot || dot == seg || dot + 1 == len) return DEFAULT_TYPE;

    slot = find_slot(m->slots, m->cap, path + dot + 1, len - dot - 1,
                     ext_hash(path + dot + 1, len - dot - 1));
    return slot->ext != NULL ? slot->type : DEFAULT_TYPE;
}

void lx_mime_free(lx_mime_t *m) {
    size_t i;

    if (m == NULL) return;
    for (i = 0; i < m->cap; i++)
        if (m->slots[i].ext != NULL) free_slot(&m->slots[i]);
    free(m->slots);
    free(m);
}
