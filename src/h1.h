/* HTTP/1 request parsing callbacks (src/h1.c). */
#ifndef LX_H1_H
#define LX_H1_H

#include <stddef.h>

#include "llhttp.h"

/* llhttp's settings for a request parser whose data is its lx_conn_t.
 * Filled at compile time: every worker thread reads it, none writes it. */
extern const llhttp_settings_t lx_h1_settings;

/* Which of the headers the request path consults (LX_H_*) a field name
 * is, in any case, or -1 (for --explain, which has no connection). */
int lx_h1_known_header(const char *name, size_t len);

#endif
