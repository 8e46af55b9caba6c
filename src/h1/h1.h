/* HTTP/1 request parsing callbacks (src/h1/h1.c). */
#ifndef LX_H1_H
#define LX_H1_H

#include <stddef.h>

#include "llhttp.h"

/* llhttp's settings for a request parser whose data is its lx_conn_t.
 * Filled at compile time: every worker thread reads it, none writes it. */
extern const llhttp_settings_t lx_h1_settings;

/* Sets up a request parser as luxd parses requests (the server, --explain
 * and the fuzz harness): llhttp_init, and the lenient flags luxd wants. */
void lx_h1_parser_init(llhttp_t *p, const llhttp_settings_t *settings);

/* After llhttp refused a request line's method (HPE_INVALID_METHOD, or
 * HPE_INVALID_CONSTANT at "HTTP/" for another protocol's method): the
 * status for the len bytes from the start of the request. 501 for
 * method SP target SP "HTTP/1." DIGIT CRLF whose method is a token llhttp
 * has no HTTP method for (RFC 9110 9.1), 505 for such a line of another
 * major version, 414 for such a line longer than max (max_header_bytes),
 * 400 for anything else (RFC 9112 3), and 0 while the line is not whole
 * and could still be such a line. */
int lx_h1_line_status(const char *p, size_t len, size_t max);

/* Whether the n bytes at p, which a buffer of cap bytes holds, begin with
 * an HTTP/1 request line: one ending in " HTTP/1." DIGIT (after the empty
 * lines RFC 9112 2.2 lets come first). 1 yes, -1 no, 0 when the line is
 * not whole yet; a full buffer without a line end is left to HTTP/1 (1),
 * which answers it. */
int lx_h1_line_is_http1(const char *p, size_t n, size_t cap);

#endif
