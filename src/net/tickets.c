/* Session tickets and the session id cache, outside generations
 * (tickets.h). Both are reached from every loop thread, under a mutex
 * each: a ticket is sealed or opened once per handshake, a cache entry
 * made or looked up once per TLS 1.2 handshake, so the locks are taken a
 * few times per connection, never per request. */
#include "net/tickets.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    unsigned char name[16], hmac[32], aes[32];
} tkey_t;
_Static_assert(sizeof(tkey_t) == LX_TICKET_KEY_BYTES, "a key file's layout");

/* Held by the generation that read them and by each SSL_CTX it made: a
 * handshake that began before a reload finishes on its old context after
 * the generation is gone, and seals its ticket with these (a break
 * review: freed with the generation, they were zeros by then). */
struct lx_ticket_keys_s {
    int refs; /**< atomic */
    size_t n;
    tkey_t k[LX_TICKET_KEYS_MAX];
};

/* The process's own keys: current seals, next and previous open (next so
 * that a clock step forward finds its tickets' key already made). They
 * are never written anywhere: a restart forgets them, as it should. */
static struct {
    pthread_mutex_t mu;
    tkey_t k[3];   /* current, next, previous */
    int64_t since; /* when current began to seal; 0: none made yet */
} ring = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int key_ex = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Fetched once: OpenSSL 3.0 looks a cipher named by EVP_aes_256_cbc() up
 * again, under read locks the loops contend for, at every ticket
 * (openssl#23388). */
static EVP_CIPHER *aes;

/* An SSL_CTX is freed (its last connection ended): its reference goes. */
static void keys_of_ctx_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                             void *argp) {
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    lx_ticket_keys_free(ptr);
}

static void init_once(void) {
    key_ex = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, keys_of_ctx_free);
    aes = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
}

static int fresh(tkey_t *k) {
    return RAND_bytes((unsigned char *)k, sizeof(*k)) == 1 ? 0 : -EIO;
}

/* Moves the ring on to now: a period later, next seals and previous is
 * what current was; after two periods (or a clock gone backwards) every
 * key is new, since nothing sealed then may be opened any more. */
static int ring_advance(int64_t now) {
    /* A clock a little behind (another thread's reading of it, or a small
     * step back) is the same period; a large step back, a new ring. */
    if (ring.since && now < ring.since && ring.since - now < LX_TICKET_PERIOD) return 0;
    if (ring.since == 0 || now < ring.since || now - ring.since >= 2 * LX_TICKET_PERIOD) {
        for (int i = 0; i < 3; i++)
            if (fresh(&ring.k[i]) < 0) return -EIO;
        ring.since = now;
        return 0;
    }
    while (now - ring.since >= LX_TICKET_PERIOD) {
        ring.k[2] = ring.k[0];
        ring.k[0] = ring.k[1];
        if (fresh(&ring.k[1]) < 0) return -EIO;
        ring.since += LX_TICKET_PERIOD;
    }
    return 0;
}

static int find(const tkey_t *keys, size_t n, const unsigned char *name) {
    for (size_t i = 0; i < n; i++)
        if (CRYPTO_memcmp(keys[i].name, name, sizeof(keys[i].name)) == 0) return (int)i;
    return -1;
}

/* The key to seal with (name NULL) or the one named name, copied to *out:
 * its index, or -1. now < 0: the time is read under the lock, so that the
 * threads' readings of it come in order. */
static int ring_key(int64_t now, const unsigned char *name, tkey_t *out) {
    pthread_mutex_lock(&ring.mu);
    if (now < 0) now = (int64_t)time(NULL);
    int i = ring_advance(now) < 0 ? -1 : name ? find(ring.k, 3, name) : 0;
    if (i >= 0) *out = ring.k[i];
    pthread_mutex_unlock(&ring.mu);
    return i;
}

int lx_ticket_ring_find(int64_t now, const unsigned char *name, unsigned char out[16]) {
    tkey_t k;
    int i = ring_key(now, name, &k);
    if (i >= 0 && out) memcpy(out, k.name, sizeof(k.name));
    OPENSSL_cleanse(&k, sizeof(k));
    return i;
}

/* OpenSSL's ticket callback (SSL_CTX_set_tlsext_ticket_key_evp_cb): seal
 * (enc 1) with the first key, or open with the key the ticket names:
 * 1 when that is the sealing key, 2 when it is another (the client gets a
 * new ticket), 0 when none has that name (a full handshake). */
static int on_ticket(SSL *ssl, unsigned char name[16], unsigned char iv[EVP_MAX_IV_LENGTH],
                     EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int enc) {
    const lx_ticket_keys_t *file = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), key_ex);
    tkey_t k;
    int i;
    if (file) {
        i = enc ? 0 : find(file->k, file->n, name);
        if (i >= 0) k = file->k[i];
    } else {
        i = ring_key(-1, enc ? NULL : name, &k);
    }
    if (i < 0) return enc ? -1 : 0;
    int ok = 1;
    if (enc) {
        memcpy(name, k.name, sizeof(k.name));
        ok = RAND_bytes(iv, 16) == 1 &&
             EVP_EncryptInit_ex(cipher, aes ? aes : EVP_aes_256_cbc(), NULL, k.aes, iv) == 1;
    } else {
        ok = EVP_DecryptInit_ex(cipher, aes ? aes : EVP_aes_256_cbc(), NULL, k.aes, iv) == 1;
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k.hmac, sizeof(k.hmac)),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    ok = ok && EVP_MAC_CTX_set_params(mac, params) == 1;
    OPENSSL_cleanse(&k, sizeof(k));
    if (!ok) return -1;
    return enc || i == 0 ? 1 : 2;
}

int lx_ticket_keys_read(const char *path, lx_ticket_keys_t **out, char *why, size_t whylen) {
    /* Without blocking, and a regular file only: a FIFO would stall the
     * load (a break review). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        int e = fd < 0 ? errno : EINVAL;
        if (fd >= 0) close(fd);
        snprintf(why, whylen, "%s", e == EINVAL ? "not a regular file" : strerror(e));
        return -e;
    }
    lx_ticket_keys_t *keys = calloc(1, sizeof(*keys));
    unsigned char buf[LX_TICKET_KEY_BYTES * LX_TICKET_KEYS_MAX + 1];
    size_t len = 0;
    ssize_t n = 0;
    while (keys && len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
        len += (size_t)n;
    int e = n < 0 ? errno : 0;
    close(fd);
    int r = 0;
    if (keys == NULL) {
        snprintf(why, whylen, "out of memory");
        r = -ENOMEM;
    } else if (e) {
        snprintf(why, whylen, "%s", strerror(e));
        r = -e;
    } else if (len == 0 || len % LX_TICKET_KEY_BYTES || len > sizeof(buf) - 1) {
        snprintf(why, whylen,
                 "%s%zu bytes: a ticket key file holds 1 to %d keys of %d random bytes each, the "
                 "first sealing new tickets (make one with: openssl rand %d > FILE)",
                 len > sizeof(buf) - 1 ? "more than " : "", len > sizeof(buf) - 1 ? len - 1 : len,
                 LX_TICKET_KEYS_MAX, LX_TICKET_KEY_BYTES, LX_TICKET_KEY_BYTES);
        r = -EINVAL;
    } else {
        keys->refs = 1;
        keys->n = len / LX_TICKET_KEY_BYTES;
        memcpy(keys->k, buf, len);
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    if (r < 0) {
        lx_ticket_keys_free(keys);
        return r;
    }
    *out = keys;
    return 0;
}

void lx_ticket_keys_free(lx_ticket_keys_t *keys) {
    if (keys == NULL || __atomic_sub_fetch(&keys->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    OPENSSL_cleanse(keys, sizeof(*keys));
    free(keys);
}

/* ---- the session id cache ---------------------------------------------- */

/* Sessions in a ring of slots, the oldest overwritten first, found by a
 * hash of their id through chains of slot numbers. A session is kept
 * serialised (i2d_SSL_SESSION), so that the cache owns plain bytes that no
 * SSL_CTX or generation holds a reference into. */
#define CACHE_BUCKETS 32768 /* a power of two, above LX_SESSION_CACHE_MAX */

typedef struct {
    unsigned char id[SSL_MAX_SSL_SESSION_ID_LENGTH];
    unsigned idlen;  /* 0: the slot is free */
    int64_t expires; /* time() after which it is not resumed */
    unsigned char *der;
    int derlen;
    int32_t next; /* the next slot in its bucket's chain, or -1 */
} sess_t;

static struct {
    pthread_mutex_t mu;
    sess_t *slot;   /* LX_SESSION_CACHE_MAX, made at the first session */
    int32_t *head;  /* CACHE_BUCKETS chain heads */
    uint32_t clock; /* the slot written next */
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint32_t bucket(const unsigned char *id, unsigned len) {
    uint32_t h = 2166136261u; /* FNV-1a: ids are random already */
    for (unsigned i = 0; i < len; i++)
        h = (h ^ id[i]) * 16777619u;
    return h & (CACHE_BUCKETS - 1);
}

/* The slot holding id, and the link that points to it. */
static int32_t *link_of(const unsigned char *id, unsigned len) {
    int32_t *l = &cache.head[bucket(id, len)];
    while (*l >= 0) {
        sess_t *s = &cache.slot[*l];
        if (s->idlen == len && memcmp(s->id, id, len) == 0) return l;
        l = &s->next;
    }
    return NULL;
}

static void drop(int32_t *link) {
    sess_t *s = &cache.slot[*link];
    *link = s->next;
    OPENSSL_clear_free(s->der, (size_t)s->derlen);
    s->der = NULL;
    s->idlen = 0;
}

static int cache_ready(void) {
    if (cache.slot) return 1;
    cache.slot = calloc(LX_SESSION_CACHE_MAX, sizeof(*cache.slot));
    cache.head = malloc(CACHE_BUCKETS * sizeof(*cache.head));
    if (cache.slot == NULL || cache.head == NULL) {
        free(cache.slot);
        free(cache.head);
        cache.slot = NULL;
        cache.head = NULL;
        return 0;
    }
    memset(cache.head, 0xff, CACHE_BUCKETS * sizeof(*cache.head)); /* -1 */
    return 1;
}

/* Keeps sess (a copy of its bytes), the oldest of a full cache going. */
static void cache_put(SSL_SESSION *sess) {
    unsigned idlen;
    const unsigned char *id = SSL_SESSION_get_id(sess, &idlen);
    int derlen = i2d_SSL_SESSION(sess, NULL);
    unsigned char *der = derlen > 0 ? OPENSSL_malloc((size_t)derlen) : NULL;
    unsigned char *p = der;
    if (idlen == 0 || der == NULL || i2d_SSL_SESSION(sess, &p) != derlen) {
        OPENSSL_free(der);
        return;
    }
    pthread_mutex_lock(&cache.mu);
    if (cache_ready()) {
        int32_t *l = link_of(id, idlen);
        if (l) drop(l);
        int32_t i = (int32_t)(cache.clock++ % LX_SESSION_CACHE_MAX);
        sess_t *s = &cache.slot[i];
        if (s->idlen) drop(link_of(s->id, s->idlen));
        memcpy(s->id, id, idlen);
        s->idlen = idlen;
        s->expires = (int64_t)SSL_SESSION_get_time(sess) + SSL_SESSION_get_timeout(sess);
        s->der = der;
        s->derlen = derlen;
        int32_t *h = &cache.head[bucket(id, idlen)];
        s->next = *h;
        *h = i;
        der = NULL;
    }
    pthread_mutex_unlock(&cache.mu);
    OPENSSL_free(der);
}

/* The session of id, unexpired, as a new SSL_SESSION, or NULL. */
static SSL_SESSION *cache_get(const unsigned char *id, int len) {
    if (len <= 0 || len > SSL_MAX_SSL_SESSION_ID_LENGTH) return NULL;
    SSL_SESSION *sess = NULL;
    pthread_mutex_lock(&cache.mu);
    int32_t *l = cache.slot ? link_of(id, (unsigned)len) : NULL;
    if (l) {
        sess_t *s = &cache.slot[*l];
        const unsigned char *p = s->der;
        if (s->expires > (int64_t)time(NULL)) sess = d2i_SSL_SESSION(NULL, &p, s->derlen);
        if (sess == NULL) drop(l);
    }
    pthread_mutex_unlock(&cache.mu);
    return sess;
}

static int on_new_session(SSL *ssl, SSL_SESSION *sess) {
    /* TLS 1.3 resumes by tickets only: its sessions are not looked up. */
    if (SSL_version(ssl) < TLS1_3_VERSION) cache_put(sess);
    return 0; /* no reference of sess kept */
}

static SSL_SESSION *on_get_session(SSL *ssl, const unsigned char *id, int len, int *copy) {
    (void)ssl;
    *copy = 0; /* the session returned is OpenSSL's to free */
    return cache_get(id, len);
}

static void on_remove_session(SSL_CTX *ctx, SSL_SESSION *sess) {
    (void)ctx;
    unsigned idlen;
    const unsigned char *id = SSL_SESSION_get_id(sess, &idlen);
    pthread_mutex_lock(&cache.mu);
    int32_t *l = cache.slot && idlen ? link_of(id, idlen) : NULL;
    if (l) drop(l);
    pthread_mutex_unlock(&cache.mu);
}

int lx_tls_resumption(SSL_CTX *ctx, lx_ticket_keys_t *keys) {
    pthread_once(&once, init_once);
    if (key_ex < 0) return -ENOMEM;
    if (keys) __atomic_add_fetch(&keys->refs, 1, __ATOMIC_RELAXED);
    if (!SSL_CTX_set_ex_data(ctx, key_ex, keys)) {
        lx_ticket_keys_free(keys);
        return -ENOMEM;
    }
    SSL_CTX_set_timeout(ctx, LX_TICKET_PERIOD);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, on_ticket);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL |
                                            SSL_SESS_CACHE_NO_AUTO_CLEAR);
    SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    SSL_CTX_sess_set_get_cb(ctx, on_get_session);
    SSL_CTX_sess_set_remove_cb(ctx, on_remove_session);
    return 0;
}
