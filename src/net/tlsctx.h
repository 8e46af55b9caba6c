/* The certificates of a generation: an SSL_CTX per vhost with tls = { },
 * made when the generation is built (at -t, start and every reload) and
 * freed with it; connections hold the one they started on. */
#ifndef LX_NET_TLSCTX_H
#define LX_NET_TLSCTX_H

#include <stddef.h>
#include <stdio.h>

#include "config/config.h"

/* Reads and checks every vhost's certificates into an SSL_CTX, and makes
 * g->tls_base when a listener speaks TLS; on the loading thread. 0, or a
 * negative errno with "file:line: what is wrong" in err. Expired or not
 * yet valid certificates are warnings. */
int lx_tls_gen_build(lx_gen_t *g, char *err, size_t errlen);
/* Lets go of what lx_tls_gen_build made (connections keep theirs). */
void lx_tls_gen_free(lx_gen_t *g);
/* -T: a vhost's certificates, a line each. */
void lx_tls_dump(const lx_vhost_tls_t *t, FILE *out, const char *indent);
/* The certificates a server name gets under g: its vhost's, else those of
 * the nearest wildcard vhost above it with some, else the default
 * vhost's; NULL when none has any (the handshake is refused). */
void *lx_tls_pick(const lx_gen_t *g, const char *name, size_t len);
/* Whether a request over TLS for vh (Host host) came over a connection
 * whose handshake was not made for the certificates and client
 * certificate policy host gets now (RFC 9110 15.5.20, 421): the session
 * id context it negotiated (sid: net/transport.h lx_tls_sid_ctx) is not
 * the one of the vhost host gets, and vh has certificates of its own or
 * that vhost asks for a client certificate. The context digests the
 * vhost's name and client certificate policy, so a reload that adds
 * client_ca to a vhost refuses its open keep-alive connections (a break
 * review: they went on without a certificate), while one that swaps only
 * the certificate does not. */
int lx_tls_misdirected(const lx_gen_t *g, const lx_vhost_t *vh, const char *host, size_t hlen,
                       const unsigned char *sid, unsigned sid_len);

#endif
