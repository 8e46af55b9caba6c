/* HTTP/1 request parsing callbacks (src/h1.c). */
#ifndef LX_H1_H
#define LX_H1_H

#include "llhttp.h"

/* llhttp's settings for a request parser whose data is its lx_conn_t.
 * Filled at compile time: every worker thread reads it, none writes it. */
extern const llhttp_settings_t lx_h1_settings;

#endif
