/* luxd -t --explain: what the config would do with one request, told step by
 * step with the file:line of each piece of config that decides.
 *
 * The decisions are not made again here: request.c's routing (vhost, path,
 * redirect, rewrite, location, access) is one function compiled twice, for
 * the request path with no trace (the compiler drops every trace branch)
 * and for lx_route_explain with one, which it fills as it goes. */
#ifndef LX_EXPLAIN_H
#define LX_EXPLAIN_H

#include <stdio.h>

#include "core/trace.h"

/* luxd -t -c FILE --explain 'METHOD URL': prints what g would do with the
 * request to out. headers: "Name: value" lines; from: the client's address
 * as text (NULL: 127.0.0.1). Returns 0 when it explained, 2 with a message
 * on stderr when the request cannot be parsed. */
int lx_explain(lx_gen_t *g, const char *request, const char *const *headers, size_t nheaders,
               const char *from, FILE *out);

#endif
