/* The process-wide TLS 1.2 session id cache (net/tickets.c, included
 * whole for its static functions): at exactly LX_SESSION_CACHE_MAX
 * sessions every one is found; one more and the oldest goes, the rest
 * stay; an id given again replaces its session; an expired session is
 * not resumed; a removed one is gone. */
#include "net/tickets.c"
#include "tap.h"

static const SSL_CIPHER *cipher;

static SSL_SESSION *made(uint32_t n, long age, long timeout) {
    SSL_SESSION *s = SSL_SESSION_new();
    static const unsigned char master[48] = {1};
    SSL_SESSION_set_cipher(s, cipher);
    SSL_SESSION_set1_master_key(s, master, sizeof(master));
    unsigned char id[32] = {0};
    memcpy(id, &n, sizeof(n));
    SSL_SESSION_set1_id(s, id, sizeof(id));
    SSL_SESSION_set_protocol_version(s, TLS1_2_VERSION);
    SSL_SESSION_set_time(s, (long)time(NULL) - age);
    SSL_SESSION_set_timeout(s, timeout);
    return s;
}

static int found(uint32_t n) {
    unsigned char id[32] = {0};
    memcpy(id, &n, sizeof(n));
    SSL_SESSION *s = cache_get(id, sizeof(id));
    SSL_SESSION_free(s);
    return s != NULL;
}

int main(void) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    SSL *ssl = SSL_new(ctx);
    cipher = SSL_CIPHER_find(ssl, (const unsigned char[]){0xc0, 0x2b}); /* ECDHE-ECDSA-AES128-GCM */
    ok(cipher != NULL, "a TLS 1.2 cipher for the sessions");
    for (uint32_t n = 0; n < LX_SESSION_CACHE_MAX; n++) {
        SSL_SESSION *s = made(n, 0, 3600);
        cache_put(s);
        SSL_SESSION_free(s);
    }
    uint32_t missing = 0;
    for (uint32_t n = 0; n < LX_SESSION_CACHE_MAX; n++)
        missing += !found(n);
    is_int(missing, 0, "%d sessions (the limit): every one is found", LX_SESSION_CACHE_MAX);
    SSL_SESSION *s = made(LX_SESSION_CACHE_MAX, 0, 3600);
    cache_put(s);
    SSL_SESSION_free(s);
    ok(!found(0), "one more: the oldest went");
    ok(found(1) && found(LX_SESSION_CACHE_MAX - 1) && found(LX_SESSION_CACHE_MAX),
       "the others and the newest are there");
    s = made(5, 7200, 3600);
    cache_put(s);
    SSL_SESSION_free(s);
    ok(!found(5), "an id given again with an expired session: replaced, and not resumed");
    s = made(6, 0, 3600);
    on_remove_session(NULL, s);
    SSL_SESSION_free(s);
    ok(!found(6), "a removed session is gone");
    ok(found(7), "its neighbours are not");
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return done_testing();
}
