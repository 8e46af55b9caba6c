/* The access log: one line per request, at the end of its response, into
 * the loop's buffer, written out when it fills, once a second, or at once
 * when access_log_buffer = 0. */
#ifndef LX_ACCESSLOG_H
#define LX_ACCESSLOG_H

#include "core/request.h"
#include "../worker.h"

/* Compiles c->format ("combined", "common", "json" or a template of
 * $variables) into c->pieces, in memory from a (the generation's arena).
 * Returns 0, or -EINVAL with what is wrong in err (no file or line), or
 * -ENOMEM. */
int lx_access_log_compile(lx_arena_t *a, lx_access_log_conf_t *c, char *err, size_t errlen);

/* Logs r to al (lx_access_log_of). */
void lx_access_log(lx_worker_t *w, lx_req_t *r, const lx_access_log_conf_t *al);
/* Writes out every file's buffered lines. */
void lx_access_log_flush(lx_worker_t *w);
/* The log a request goes to, or NULL when it is not logged. */
const lx_access_log_conf_t *lx_access_log_of(const lx_req_t *r);

#endif
