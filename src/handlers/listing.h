#ifndef LX_LISTING_H
#define LX_LISTING_H

#include "handler.h"

/* Answers with an HTML index of `dir` (a file system path ending in '/').
 * The first call queues the read on the thread pool and returns LX_ASYNC; the
 * handler's next run, on resume, gets LX_DONE with the page queued. */
lx_rc_t lx_listing(lx_req_t *r, const char *dir, size_t len);

#endif
