/* Session resumption that outlives a generation: the keys that seal TLS
 * session tickets and the cache of TLS 1.2 session ids live here, in the
 * process, shared by every loop, so that a reload (which makes new
 * SSL_CTXs) resumes what the old generation handed out. A session is
 * still only resumed under the vhost that made it: OpenSSL checks its
 * session id context (net/tlsctx.c) whichever way it comes back.
 *
 * Ticket keys are the process's own, made at random and rotated every
 * LX_TICKET_PERIOD seconds (current, next, previous), or read from the
 * operator's ticket_key_file, which several servers behind one balancer
 * share so that each resumes the others' tickets. */
#ifndef LX_NET_TICKETS_H
#define LX_NET_TICKETS_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

/* How long a session may be resumed, and how long the process's own key
 * seals tickets before the next one takes over (it opens them for as long
 * again). */
#define LX_TICKET_PERIOD 3600
/* One key of a ticket_key_file: 16 bytes of name, 32 of HMAC-SHA256 key,
 * 32 of AES-256 key (the layout of nginx's ssl_session_ticket_key). */
#define LX_TICKET_KEY_BYTES 80
#define LX_TICKET_KEYS_MAX  8
/* TLS 1.2 sessions the process-wide id cache holds; the oldest go first. */
#define LX_SESSION_CACHE_MAX 20000

typedef struct lx_ticket_keys_s lx_ticket_keys_t;

/* Reads a ticket_key_file: 1 to LX_TICKET_KEYS_MAX keys of 80 bytes, the
 * first sealing new tickets, all of them opening. 0 with *out, or a
 * negative errno with the reason (no file:line) in why. */
int lx_ticket_keys_read(const char *path, lx_ticket_keys_t **out, char *why, size_t whylen);
/* Lets go of a reference to keys (NULL is fine); the last one wipes and
 * frees them. */
void lx_ticket_keys_free(lx_ticket_keys_t *keys);

/* Makes ctx resume sessions through the process: tickets sealed with keys
 * (NULL: the process's own rotating keys; ctx takes a reference, given
 * back when it is freed), TLS 1.2 session ids in the shared cache, both
 * good for LX_TICKET_PERIOD seconds. 0 or -ENOMEM. */
int lx_tls_resumption(SSL_CTX *ctx, lx_ticket_keys_t *keys);

/* The rotation of the process's own keys at time now (seconds), for the
 * unit test: which of current (0), next (1) and previous (2) the key
 * named name is, or -1; name NULL: the current key's name is copied to
 * out. */
int lx_ticket_ring_find(int64_t now, const unsigned char *name, unsigned char out[16]);

#endif
