/* The out.c tests run on the plain transport (net/transport.h): its TLS
 * calls are never made there, but are linked; these say so if one were. */
#include <stdlib.h>

#include "net/transport.h"

int lx_tls_read_start(lx_tp_t *tp, uv_alloc_cb alloc, uv_read_cb read) {
    (void)tp, (void)alloc, (void)read;
    abort();
}
void lx_tls_read_stop(lx_tp_t *tp) {
    (void)tp;
    abort();
}
ssize_t lx_tls_try_write(lx_tp_t *tp, const uv_buf_t *bufs, unsigned n) {
    (void)tp, (void)bufs, (void)n;
    abort();
}
int lx_tls_write(lx_tp_t *tp, uv_write_t *req, const uv_buf_t *bufs, unsigned n, uv_write_cb cb) {
    (void)tp, (void)req, (void)bufs, (void)n, (void)cb;
    abort();
}
int lx_tls_shutdown(lx_tp_t *tp, uv_shutdown_t *req, uv_shutdown_cb cb) {
    (void)tp, (void)req, (void)cb;
    abort();
}
void lx_tls_close(lx_tp_t *tp, uv_close_cb cb) {
    (void)tp, (void)cb;
    abort();
}
