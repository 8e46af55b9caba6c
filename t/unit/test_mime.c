/* Unit tests for the extension table (src/http/mime.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/mime.h"
#include "tap.h"

#define OCTET "application/octet-stream"
#define UTF8  "; charset=utf-8"

/* Looks `path` up from a heap copy of exactly its length, so ASan sees a read
 * past the end. */
static const char *look(const lx_mime_t *m, const char *path) {
    size_t len = strlen(path);
    char *buf = malloc(len ? len : 1);
    const char *type;

    memcpy(buf, path, len);
    type = lx_mime_lookup(m, buf, len);
    free(buf);
    return type;
}

static void t(const lx_mime_t *m, const char *path, const char *exp) {
    is_str(look(m, path), exp, "%s -> %s", path, exp);
}

int main(void) {
    static const struct {
        const char *ext, *type;
    } want[] = {
        {"html", "text/html" UTF8},
        {"htm", "text/html" UTF8},
        {"css", "text/css" UTF8},
        {"js", "application/javascript" UTF8},
        {"mjs", "application/javascript" UTF8},
        {"json", "application/json" UTF8},
        {"txt", "text/plain" UTF8},
        {"xml", "application/xml" UTF8},
        {"svg", "image/svg+xml" UTF8},
        {"png", "image/png"},
        {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},
        {"gif", "image/gif"},
        {"webp", "image/webp"},
        {"avif", "image/avif"},
        {"ico", "image/x-icon"},
        {"woff", "font/woff"},
        {"woff2", "font/woff2"},
        {"ttf", "font/ttf"},
        {"otf", "font/otf"},
        {"pdf", "application/pdf"},
        {"zip", "application/zip"},
        {"gz", "application/gzip"},
        {"tar", "application/x-tar"},
        {"mp4", "video/mp4"},
        {"webm", "video/webm"},
        {"mp3", "audio/mpeg"},
        {"ogg", "audio/ogg"},
        {"wav", "audio/wav"},
        {"wasm", "application/wasm"},
        {"csv", "text/csv" UTF8},
        {"md", "text/markdown" UTF8},
        {"map", "application/json" UTF8},
    };
    lx_mime_t *m, *m2;
    char path[64];
    size_t i;
    int rc;

    m = lx_mime_new();
    ok(m != NULL, "lx_mime_new");
    if (m == NULL) return done_testing();

    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        snprintf(path, sizeof(path), "/dir/file.%s", want[i].ext);
        t(m, path, want[i].type);
    }

    /* Matching is case-insensitive. */
    t(m, "/INDEX.HTML", "text/html" UTF8);
    t(m, "/photo.JPG", "image/jpeg");
    t(m, "/photo.JpEg", "image/jpeg");
    t(m, "/Font.WOFF2", "font/woff2");

    /* No extension, unknown extensions, and hidden files. */
    t(m, "/README", OCTET);
    t(m, "/", OCTET);
    t(m, "", OCTET);
    t(m, "/dir/", OCTET);
    t(m, "/file.", OCTET);
    t(m, "/file.unknownext", OCTET);
    t(m, "/file.htmlx", OCTET);
    t(m, "/file.htm_", OCTET);
    t(m, "/file.h", OCTET);
    t(m, "/.bashrc", OCTET);
    t(m, "/dir/.htaccess", OCTET);
    t(m, ".bashrc", OCTET);
    t(m, "/.html", OCTET);
    t(m, "/.config.json", "application/json" UTF8);
    t(m, "/..json", "application/json" UTF8);

    /* Only the last extension of the last segment counts. */
    t(m, "/file.tar.gz", "application/gzip");
    t(m, "/index.html.gz", "application/gzip");
    t(m, "/a.min.js", "application/javascript" UTF8);
    t(m, "/site.css/README", OCTET);
    t(m, "/site.css/", OCTET);
    t(m, "/v1.2/data", OCTET);
    t(m, "/v1.2/data.csv", "text/csv" UTF8);
    t(m, "style.css", "text/css" UTF8);
    t(m, "/caf\xc3\xa9.txt", "text/plain" UTF8);
    t(m, "/file.t\xc3\xa9xt", OCTET);

    /* Only `len` bytes are read. */
    is_str(lx_mime_lookup(m, "/a.css.png", 6), "text/css" UTF8, "len shorter than the string");
    is_str(lx_mime_lookup(m, "/a.html", 0), OCTET, "len 0");

    /* Adding. */
    is_int(lx_mime_add(m, ".foo", "application/x-foo"), 0, "add .foo");
    t(m, "/x.foo", "application/x-foo");
    t(m, "/x.FOO", "application/x-foo");
    is_int(lx_mime_add(m, ".BAR", "application/x-bar"), 0, "add .BAR (upper case)");
    t(m, "/x.bar", "application/x-bar");
    t(m, "/x.Bar", "application/x-bar");

    /* Replacing a built-in, in another case, and replacing an addition. */
    is_int(lx_mime_add(m, ".JS", "text/javascript"), 0, "replace .js with .JS");
    t(m, "/app.js", "text/javascript" UTF8);
    t(m, "/app.mjs", "application/javascript" UTF8);
    is_int(lx_mime_add(m, ".png", "image/x-custom"), 0, "replace .png");
    t(m, "/a.png", "image/x-custom");
    is_int(lx_mime_add(m, ".foo", "application/x-foo2"), 0, "replace .foo again");
    t(m, "/x.foo", "application/x-foo2");

    /* The charset rule applies to added types; explicit parameters are kept. */
    is_int(lx_mime_add(m, ".tmpl", "text/x-template"), 0, "add a text type");
    t(m, "/a.tmpl", "text/x-template" UTF8);
    is_int(lx_mime_add(m, ".lat", "text/plain; charset=iso-8859-1"), 0,
           "add a text type with its own charset");
    t(m, "/a.lat", "text/plain; charset=iso-8859-1");
    is_int(lx_mime_add(m, ".geo", "application/geo+json"), 0, "add a +json type");
    t(m, "/a.geo", "application/geo+json" UTF8);
    is_int(lx_mime_add(m, ".kml", "application/vnd.google-earth.kml+xml"), 0, "add a +xml type");
    t(m, "/a.kml", "application/vnd.google-earth.kml+xml" UTF8);
    is_int(lx_mime_add(m, ".jsonx", "application/jsonx"), 0, "add application/jsonx");
    t(m, "/a.jsonx", "application/jsonx");

    /* Rejected additions change nothing. */
    is_int(lx_mime_add(m, "html", "text/x"), -EINVAL, "extension without a dot");
    is_int(lx_mime_add(m, ".", "text/x"), -EINVAL, "empty extension");
    is_int(lx_mime_add(m, "", "text/x"), -EINVAL, "empty string");
    is_int(lx_mime_add(m, ".a/b", "text/x"), -EINVAL, "extension with a slash");
    is_int(lx_mime_add(m, ".tar.gz", "text/x"), -EINVAL, "extension with a second dot");
    is_int(lx_mime_add(m, ".html", ""), -EINVAL, "empty type");
    is_int(lx_mime_add(m, ".html", "text/html\r\nX-Evil: 1"), -EINVAL, "type with CR LF");
    is_int(lx_mime_add(m, ".html", "text/html\x7f"), -EINVAL, "type with DEL");
    t(m, "/index.html", "text/html" UTF8);

    /* Many additions grow the table; every entry survives the growth. */
    rc = 0;
    for (i = 0; i < 2000; i++) {
        char ext[32], type[64];
        snprintf(ext, sizeof(ext), ".e%zu", i);
        snprintf(type, sizeof(type), "application/x-e%zu", i);
        rc |= lx_mime_add(m, ext, type);
    }
    is_int(rc, 0, "2000 additions");
    {
        int all = 1;
        for (i = 0; i < 2000; i++) {
            char p[32], type[64];
            snprintf(p, sizeof(p), "/f.E%zu", i);
            snprintf(type, sizeof(type), "application/x-e%zu", i);
            if (strcmp(look(m, p), type) != 0) all = 0;
        }
        ok(all, "all 2000 additions found after growth");
    }
    t(m, "/x.foo", "application/x-foo2");
    t(m, "/a.png", "image/x-custom");
    t(m, "/index.html", "text/html" UTF8);
    t(m, "/file.nothere", OCTET);

    /* Tables are independent of each other. */
    m2 = lx_mime_new();
    ok(m2 != NULL, "a second table");
    if (m2 != NULL) {
        t(m2, "/app.js", "application/javascript" UTF8);
        t(m2, "/x.foo", OCTET);
        lx_mime_free(m2);
    }

    lx_mime_free(m);
    lx_mime_free(NULL);
    ok(1, "lx_mime_free(NULL) is a no-op");

    /* mime_types files (lx_mime_load_file). */
    {
        char mpath[] = "/tmp/luxd-mime-XXXXXX";
        int fd = mkstemp(mpath);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        ok(f != NULL, "a temporary mime.types");
        if (f == NULL) return done_testing();
        fputs("# comment line\n"
              "\n"
              "text/x-readme\treadme  READ # a comment after the extensions\n"
              "image/png png PNGX\n"          /* replaces nothing: same type */
              "application/x-override html\n" /* replaces a built-in */
              "text/x-later html\n"           /* the file's first line keeps html */
              "application/only-type\n"       /* no extensions: nothing */
              "application/x-tar gpkg.tar tarx\n"
              "notatype ext\n"                        /* malformed: no slash */
              "text/bad ok b;ad\n"                    /* malformed: ';' */
              "application/x-params; charset=x ext\n" /* malformed: ';' in the type */
              "  text/indented   ind\r\n",
              f);
        /* At the limit and one past: LX_MIME_LINE_MAX bytes before the newline. */
        char line[LX_MIME_LINE_MAX + 2];
        const char *head = "text/x-long aaa ";
        memset(line, 'b', sizeof(line));
        memcpy(line, head, strlen(head));
        line[LX_MIME_LINE_MAX] = '\0';
        line[LX_MIME_LINE_MAX - 4] = ' ';
        memcpy(line + LX_MIME_LINE_MAX - 3, "lim", 3);
        fprintf(f, "%s\n", line); /* exactly the limit: used */
        line[0] = 'T';
        memcpy(line + LX_MIME_LINE_MAX - 3, "lix", 3);
        line[LX_MIME_LINE_MAX] = 'x';
        line[LX_MIME_LINE_MAX + 1] = '\0';
        memcpy(line, "text/x-past aaa ", 16);
        fprintf(f, "%s\n", line); /* one byte over: skipped */
        fputs("text/x-after after\n", f);
        fclose(f);

        lx_mime_t *fm = lx_mime_new();
        lx_mime_file_stats_t st;
        is_int(lx_mime_load_file(fm, mpath, &st), 0, "the file loads");
        t(fm, "/x.readme", "text/x-readme" UTF8);
        t(fm, "/a.read", "text/x-readme" UTF8);
        t(fm, "/x.html", "application/x-override");
        t(fm, "/x.pngx", "image/png");
        t(fm, "/x.tarx", "application/x-tar");
        t(fm, "/x.tar", "application/x-tar");
        t(fm, "/x.ind", "text/indented" UTF8);
        t(fm, "/x.ext", OCTET);
        t(fm, "/x.ok", OCTET);
        t(fm, "/x.css", "text/css" UTF8); /* the built-in table is the fallback */
        t(fm, "/x.lim", "text/x-long" UTF8);
        t(fm, "/x.lix", OCTET);
        t(fm, "/x.after", "text/x-after" UTF8);
        is_int((long long)st.skipped, 4, "four lines skipped");
        is_int((long long)st.first_skipped, 9, "the first of them is line 9");
        is_int((long long)st.types, 8, "eight lines name extensions (text/x-later among them)");
        /* A later mime { } entry still replaces what the file gave. */
        is_int(lx_mime_add(fm, ".html", "text/html"), 0, "mime {} after the file");
        t(fm, "/x.html", "text/html" UTF8);
        lx_mime_free(fm);
        unlink(mpath);
        fm = lx_mime_new();
        is_int(lx_mime_load_file(fm, mpath, &st), -ENOENT, "a missing file: -ENOENT");
        is_int(lx_mime_load_file(fm, "/tmp", &st), -EISDIR, "a directory: -EISDIR");
        is_int(lx_mime_load_file(fm, "/dev/zero", &st), LX_MIME_ENOTREG,
               "a device: LX_MIME_ENOTREG, not read for ever");
        /* A NUL byte: that line is skipped, the next one is read. */
        memcpy(mpath + sizeof(mpath) - 7, "XXXXXX", 6);
        fd = mkstemp(mpath);
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
        ok(f != NULL, "a second temporary mime.types");
        if (f == NULL) return done_testing();
        fwrite("text/x-nul nul\0junk\ntext/x-next nxt\n", 1, 36, f);
        fclose(f);
        is_int(lx_mime_load_file(fm, mpath, &st), 0, "a file with a NUL byte loads");
        t(fm, "/x.nul", OCTET);
        t(fm, "/x.nxt", "text/x-next" UTF8);
        is_int((long long)st.skipped, 1, "one line skipped");
        is_int((long long)st.first_skipped, 1, "line 1");
        /* The size: LX_MIME_FILE_MAX bytes, and one more. */
        is_int(truncate(mpath, LX_MIME_FILE_MAX), 0, "grown to the limit (zeros: one NUL line)");
        is_int(lx_mime_load_file(fm, mpath, &st), 0, "a file of LX_MIME_FILE_MAX bytes loads");
        is_int(truncate(mpath, LX_MIME_FILE_MAX + 1), 0, "one byte more");
        is_int(lx_mime_load_file(fm, mpath, &st), -EFBIG, "past LX_MIME_FILE_MAX: -EFBIG");
        unlink(mpath);
        lx_mime_free(fm);
    }
    ok(1, "lx_mime_free(NULL) is a no-op");

    return done_testing();
}
