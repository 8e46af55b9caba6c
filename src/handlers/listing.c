/* Directory listings (dir_listing = true), built on the thread pool because
 * reading a directory may wait on the disk. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../stats.h"
#include "../worker.h"
#include "../buf.h"
#include "handler.h"
#include "../http/date.h"
#include "../io/open_beneath.h"

typedef struct {
    uv_work_t work;
    lx_req_t *r;
    char *dir;              /* file system path, ends in '/' */
    size_t root_len;        /* bytes of dir that are the document root */
    lx_symlinks_t symlinks; /* the site's follow_symlinks */
    char *title;            /* decoded URL path */
    char *html;             /* result, or NULL on error */
    size_t len;
    int err;
} job_t;

static void put_html(lx_buf_t *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': lx_buf_put(b, "&lt;", 4); break;
        case '>': lx_buf_put(b, "&gt;", 4); break;
        case '&': lx_buf_put(b, "&amp;", 5); break;
        case '"': lx_buf_put(b, "&quot;", 6); break;
        case '\'': lx_buf_put(b, "&#39;", 5); break;
        default: lx_buf_put(b, s, 1);
        }
    }
}

/* Percent-encodes everything but unreserved characters, so a file named
 * "a?b" or "#x" links to itself. */
static void put_url(lx_buf_t *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~", c)) {
            lx_buf_put(b, s, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            lx_buf_put(b, e, 3);
        }
    }
}

static int by_name(const void *a, const void *b) {
    return strcoll(*(char *const *)a, *(char *const *)b);
}

/* The directory is opened under the site's follow_symlinks, as the file
 * cache opens files, and read through that fd: a path component swapped for
 * a link after the cache checked it cannot get another directory listed.
 * Entries are stat'ed relative to it, without following links unless every
 * link is followed, so a link's target does not lend the page its size. */
static void job_work(uv_work_t *w) {
    job_t *j = container_of(w, job_t, work);
    int fd = lx_open_beneath(j->dir, j->root_len, j->symlinks);
    if (fd < 0) {
        j->err = fd;
        return;
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        j->err = -errno;
        close(fd);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue; /* hidden files stay hidden, as in nginx */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof(*names));
            if (nn == NULL) break;
            names = nn;
        }
        if ((names[n] = strdup(de->d_name)) == NULL) break;
        n++;
    }
    if (names) qsort(names, n, sizeof(*names), by_name);
    int stat_flags = j->symlinks == LX_SYMLINKS_FOLLOW ? 0 : AT_SYMLINK_NOFOLLOW;
    lx_buf_t b = {0};
    LX_BUF_PUTS(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
    put_html(&b, j->title);
    LX_BUF_PUTS(&b, "</title></head>\n<body><h1>Index of ");
    put_html(&b, j->title);
    LX_BUF_PUTS(&b, "</h1><hr><pre>\n<a href=\"../\">../</a>\n");
    for (size_t i = 0; i < n; i++) {
        const char *name = names[i];
        struct stat st;
        if (fstatat(dirfd(d), name, &st, stat_flags) == 0) {
            int dir = S_ISDIR(st.st_mode);
            char date[LX_HTTP_DATE_LEN + 1], size[32] = "-";
            lx_http_date(st.st_mtime, date);
            if (!dir && !S_ISLNK(st.st_mode))
                snprintf(size, sizeof(size), "%lld", (long long)st.st_size);
            LX_BUF_PUTS(&b, "<a href=\"");
            put_url(&b, name);
            lx_buf_put(&b, dir ? "/\">" : "\">", dir ? 3 : 2);
            put_html(&b, name);
            lx_buf_put(&b, dir ? "/</a>  " : "</a>  ", dir ? 7 : 6);
            lx_buf_put(&b, date, strlen(date));
            LX_BUF_PUTS(&b, "  ");
            lx_buf_put(&b, size, strlen(size));
            LX_BUF_PUTS(&b, "\n");
        }
        free(names[i]);
    }
    free(names);
    closedir(d);
    LX_BUF_PUTS(&b, "</pre><hr></body></html>\n");
    if (b.oom) {
        free(b.p);
        j->err = -ENOMEM;
        return;
    }
    j->html = b.p;
    j->len = b.len;
}

static void job_free(job_t *j) {
    free(j->html);
    free(j->dir);
    free(j->title);
    free(j);
}

static void job_done(uv_work_t *w, int status) {
    job_t *j = container_of(w, job_t, work);
    lx_req_t *r = j->r;
    LX_ST_DEC(&r->w->stats->io_jobs);
    if (status < 0 && j->err == 0) j->err = status;
    if (r->aborted) {
        job_free(j); /* nobody will read it */
        lx_req_release(r);
        return;
    }
    r->handler_data = j; /* the handler's next run takes it */
    lx_req_wake(r, 0);
}

int lx_listing_takes(const lx_req_t *r) {
    return r->dir_unindexed && r->decoded_len && r->decoded[r->decoded_len - 1] == '/' &&
           r->site->dir_listing && r->root && !r->error_status;
}

static int listing_handle(lx_req_t *r) {
    job_t *j = r->handler_data;
    if (!lx_listing_takes(r)) return LX_DECLINED;
    if (j != NULL) {
        /* Second run, after the thread pool built the page. */
        r->handler_data = NULL;
        int err = j->err;
        if (err == 0) {
            lx_resp_init(r, 200);
            r->resp.length = (int64_t)j->len;
            lx_resp_header(r, "Content-Type: text/html; charset=utf-8\r\n", 40);
            lx_resp_header(r, r->site->headers, r->site->headers_len);
            lx_resp_send_headers(r);
            lx_resp_body_copy(r, j->html, j->len);
        }
        job_free(j);
        if (err) return err == -ENOENT || err == -ENOTDIR ? 404 : err == -EACCES ? 403 : 500;
        return LX_DONE;
    }
    j = calloc(1, sizeof(*j));
    if (j) {
        j->root_len = r->root_len;
        j->symlinks = r->site->follow_symlinks;
    }
    size_t n = r->root_len + r->decoded_len;
    if (j == NULL || (j->dir = malloc(n + 1)) == NULL ||
        (j->title = strndup(r->decoded, r->decoded_len)) == NULL) {
        if (j) free(j->dir);
        free(j);
        return 500;
    }
    memcpy(j->dir, r->root, r->root_len);
    memcpy(j->dir + r->root_len, r->decoded, r->decoded_len);
    j->dir[n] = '\0';
    j->r = r;
    if (uv_queue_work(&r->w->loop, &j->work, job_work, job_done) < 0) {
        free(j->dir);
        free(j->title);
        free(j);
        return 500;
    }
    LX_ST_INC(&r->w->stats->io_jobs);
    LX_ST_INC(&r->w->stats->io_jobs_total);
    lx_req_hold(r);
    return LX_ASYNC;
}

const lx_handler_t lx_listing_handler = {
    .name = "listing",
    .handle = listing_handle,
    .methods = LX_METHODS_GET_HEAD,
};
