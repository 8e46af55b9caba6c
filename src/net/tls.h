/* TLS: the transport of a connection on a `tls = true` listener (net/tls.c)
 * and the generation's certificates (net/tlsctx.c). */
#ifndef LX_NET_TLS_H
#define LX_NET_TLS_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

#include "net/transport.h"

/* The certificates a ClientHello's server name gets (name NULL: none was
 * sent): a vhost's SSL_CTX, or NULL to refuse the handshake. The layer
 * above answers (conn.c, from the generation's host table). */
typedef SSL_CTX *(*lx_tls_pick_fn)(void *arg, const char *name, size_t len);

/* Called once the handshake is done, before the first plain text is
 * handed up (the protocol's header timeout starts then). */
typedef void (*lx_tls_ready_fn)(lx_tp_t *tp);

/* Puts a TLS session over tp's socket, as the server: SSL_new(base), whose
 * ClientHello callback (lx_tls_ctx_hooks) asks pick (with arg). A client
 * that sends more than 64 KiB before its handshake is done is cut off.
 * 0 or -ENOMEM. */
int lx_tls_new(lx_tp_t *tp, SSL_CTX *base, lx_tls_pick_fn pick, lx_tls_ready_fn ready, void *arg);

/* A session luxd may resume as a client (an SSL_SESSION, one reference,
 * now the hook's: free it with lx_tls_session_free). */
typedef void (*lx_tls_session_fn)(lx_tp_t *tp, void *session);

/* Puts a TLS session over tp's socket, as the client: ctx's settings,
 * name sent as SNI (unless name_ip) and checked against the server's
 * certificate when ctx verifies, session (or NULL) offered for
 * resumption. ready is told when the handshake is done; on_session of
 * each session the server hands out. 0 or a negative errno (tp->tls is
 * set even then: close through the transport). */
int lx_tls_client(lx_tp_t *tp, SSL_CTX *ctx, const char *name, int name_ip, void *session,
                  lx_tls_ready_fn ready, lx_tls_session_fn on_session);
/* Sends the ClientHello, once the socket is connected. Reading must be
 * started for the handshake to go on; a failure is then a read error, and
 * lx_tls_why says what it was. 0 or a negative errno. */
int lx_tls_handshake(lx_tp_t *tp);
/* Why tp's handshake failed, for a log line, written into buf. */
const char *lx_tls_why(const lx_tp_t *tp, char *buf, size_t len);
/* The hooks a client SSL_CTX needs (the new-session callback). */
void lx_tls_client_ctx_hooks(SSL_CTX *ctx);
void lx_tls_session_free(void *session);

/* Installs what every server SSL_CTX of luxd needs from the transport: the
 * ClientHello callback that picks the certificates by server name, and
 * ALPN. */
void lx_tls_ctx_hooks(SSL_CTX *ctx);

/* The server name of a ClientHello's server_name extension (RFC 6066 3):
 * the host_name entry of ext[0, len). 1 with *name, *nlen set; 0 when
 * there is none; -1 when the extension is malformed. */
int lx_tls_sni_parse(const unsigned char *ext, size_t len, const char **name, size_t *nlen);

/* Reads the length a ClientHello announces from the first bytes of a
 * TLS stream, fed as they come (cut anywhere, its header cut across
 * records of any size): record headers (a handshake record is 22) and the
 * first four bytes of their payload, the message's type and length. Start
 * zeroed. Returns the length once known, -1 while more bytes are needed,
 * -2 when the stream is not a handshake or its first message is no
 * ClientHello (1); bytes after the length is known are not looked at. */
typedef struct {
    unsigned char rec_head[5]; /**< the record header being read */
    unsigned char msg_head[4]; /**< the first message's header */
    uint8_t rec_got, msg_got;  /**< bytes of each read so far (msg_got 4: done) */
    uint16_t rec_left;         /**< payload bytes left in the record being read */
} lx_tls_hello_scan_t;
int lx_tls_hello_scan(lx_tls_hello_scan_t *h, const char *p, size_t n);

/* The ALPN protocol to choose from a client's list (RFC 7301 wire form):
 * "h2" when offered and h2 is set (the server's preference, as nginx's),
 * else "http/1.1" when offered. 1 with *out, *outlen pointing into list; 0
 * when the list offers nothing luxd speaks; -1 when it is malformed. */
int lx_tls_alpn_choose(const unsigned char *list, size_t len, const unsigned char **out,
                       unsigned char *outlen, int h2);
/* A server connection's listener speaks HTTP/2: ALPN may choose h2. */
void lx_tls_offer_h2(lx_tp_t *tp);
/* Whether the handshake's ALPN chose h2. */
int lx_tls_alpn_h2(const lx_tp_t *tp);

#endif
