/* A generation's certificates (tlsctx.h). Each vhost with tls = { } gets
 * an SSL_CTX of its own: its certificates, and a session id context made
 * from its name, so that a session it issued is never resumed under
 * another vhost. Every TLS connection starts on the generation's base
 * context, which has no certificate: its ClientHello callback (net/tls.c)
 * moves the connection to the context the server name picks. */
#include "net/tlsctx.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/tickets.h"
#include "net/tls.h"

/* Mozilla's "intermediate" configuration: TLS 1.2 and 1.3; for 1.2 these
 * ciphers (forward secret, AEAD), for 1.3 OpenSSL's three suites in
 * Mozilla's order (OpenSSL's own puts AES-256 first: a third more CPU per
 * byte than AES-128, for no protection a 128-bit key lacks; BoringSSL
 * and Go order them so too); X25519, P-256 and P-384. */
#define CIPHERS_12                                                                                 \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                                   \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                                   \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"                                   \
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"
#define SUITES_13 "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define GROUPS    "X25519:P-256:P-384"

/* OpenSSL's reason for the last failure, and its queue emptied: the first
 * error queued is the cause ("no start line"), the last the caller that
 * passed it on ("PEM lib"). */
static const char *ssl_reason(void) {
    unsigned long e = ERR_peek_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : "unknown error";
}

/* A server SSL_CTX with the server's TLS settings; NULL with the reason
 * in err (the cipher list is the one setting that can be wrong). */
static SSL_CTX *ctx_new(const lx_gen_t *g, char *err, size_t errlen) {
    const lx_server_tls_t *st = &g->srv.tls;
    SSL_CTX *c = SSL_CTX_new(TLS_server_method());
    if (c == NULL || !SSL_CTX_set_min_proto_version(c, st->min_version) ||
        !SSL_CTX_set_max_proto_version(c, st->max_version) ||
        !SSL_CTX_set1_groups_list(c, GROUPS) || !SSL_CTX_set_ciphersuites(c, SUITES_13)) {
        snprintf(err, errlen, "%s:%d: tls: %s", st->file ? st->file : g->file, st->line,
                 ssl_reason());
        SSL_CTX_free(c);
        return NULL;
    }
    if (!SSL_CTX_set_cipher_list(c, st->ciphers ? st->ciphers : CIPHERS_12)) {
        ERR_clear_error();
        snprintf(err, errlen, "%s:%d: server tls ciphers \"%s\": %s", st->file, st->ciphers_line,
                 st->ciphers,
                 strncmp(st->ciphers, "TLS_", 4) == 0
                     ? "those are TLS 1.3 suites: ciphers is the TLS 1.2 list (TLS 1.3 offers "
                       "its three suites, all of them AEAD)"
                     : "OpenSSL knows no cipher of that list (see openssl-ciphers(1): names "
                       "such as ECDHE-ECDSA-AES128-GCM-SHA256, joined by :)");
        SSL_CTX_free(c);
        return NULL;
    }
    /* No renegotiation at all (a client's is refused by OpenSSL 3 unless
     * SSL_OP_ALLOW_CLIENT_RENEGOTIATION), no compression (CRIME). The
     * server's order of ciphers (ECDHE before DHE, which a client such as
     * IE 11 prefers; testssl rates a client's choice HIGH), with ChaCha20
     * first for a client that puts it first (no AES in hardware). */
    SSL_CTX_set_options(c, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
    SSL_CTX_set_dh_auto(c, 1); /* the DHE-RSA ciphers */
    /* No SSL_MODE_RELEASE_BUFFERS: it frees and allocates both record
     * buffers (34 KiB) for every request of a busy connection (3% of the
     * CPU of a 1 KiB keep-alive request). The transport lets go of them
     * when a handshake waits for the client, and when a connection rests
     * between requests (lx_tls_rest). */
    SSL_CTX_set_max_early_data(c, 0); /* no 0-RTT: replayable requests */
    lx_tls_ctx_hooks(c);
    if (lx_tls_resumption(c, g->ticket_keys) < 0) {
        snprintf(err, errlen, "%s:%d: tls: out of memory", g->file, 0);
        SSL_CTX_free(c);
        return NULL;
    }
    return c;
}

/* 0 when path is a regular file luxd can read, else a negative errno
 * (-EINVAL: not a regular file). Opened without blocking: a FIFO named
 * by mistake would stall -t, and a reload for good (a break review). */
static int regular_file(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat sb;
    int r = fstat(fd, &sb) < 0 ? -errno : S_ISREG(sb.st_mode) ? 0 : -EINVAL;
    close(fd);
    return r;
}

/* Whether path can be opened for reading, with the reason in err when not:
 * OpenSSL's own message for a missing file says less. */
static int readable(const char *path, const char *what, const lx_vhost_t *vh, char *err,
                    size_t errlen) {
    int e = -regular_file(path);
    if (e == 0) return 1;
    snprintf(err, errlen, "%s:%d: vhost \"%s\": tls %s \"%s\": %s%s", vh->tls.file, vh->tls.line,
             vh->name, what, path, e == EINVAL ? "not a regular file" : strerror(e),
             e == EACCES ? " (luxd reads certificates and keys as the user it runs as at a "
                           "reload: see luxd(8), \"TLS keys\")"
                         : "");
    return 0;
}

/* A key with a passphrase is refused, never asked for: OpenSSL's default
 * prompts on the terminal, which would stall -t and a reload. */
static int no_passphrase(char *buf, int size, int rwflag, void *u) {
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

/* Whether a PEM file holds an encrypted private key. */
static int encrypted_key(const char *path) {
    FILE *f = fopen(path, "r");
    char line[256];
    int enc = 0;
    while (f && !enc && fgets(line, sizeof(line), f))
        enc = strstr(line, "ENCRYPTED") != NULL;
    if (f) fclose(f);
    return enc;
}

static int key_type(X509 *x) {
    EVP_PKEY *k = x ? X509_get0_pubkey(x) : NULL;
    return k ? EVP_PKEY_get_base_id(k) : 0;
}

/* Validity is a warning, not an error: an operator who reloads to fix
 * something else must not lose the site over a certificate that clients
 * will judge for themselves. */
static void check_dates(lx_gen_t *g, const lx_vhost_t *vh, int i, X509 *x) {
    if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
        lx_gen_warn(g, vh->tls.file, vh->tls.line,
                    "vhost \"%s\": tls cert \"%s\" has expired: clients will refuse it", vh->name,
                    vh->tls.cert[i]);
    else if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0)
        lx_gen_warn(g, vh->tls.file, vh->tls.line,
                    "vhost \"%s\": tls cert \"%s\" is not valid yet: clients will refuse it",
                    vh->name, vh->tls.cert[i]);
}

/* Adds the bytes of the file at path to md; 0 when it cannot be read. */
static int digest_file(EVP_MD_CTX *md, const char *path) {
    FILE *f = fopen(path, "rb");
    char buf[4096];
    size_t n;
    int ok = f != NULL;
    while (ok && (n = fread(buf, 1, sizeof(buf), f)) > 0)
        ok = EVP_DigestUpdate(md, buf, n);
    if (f) fclose(f);
    return ok;
}

/* Loads the CA certificates of the PEM file at path into c's store (and
 * names them to clients when names is set); 0, or -EINVAL when the file
 * holds no certificate. */
static int load_cas(SSL_CTX *c, const char *path, int names) {
    STACK_OF(X509_NAME) *list = SSL_load_client_CA_file(path);
    if (list == NULL || sk_X509_NAME_num(list) == 0 ||
        SSL_CTX_load_verify_locations(c, path, NULL) != 1) {
        sk_X509_NAME_pop_free(list, X509_NAME_free);
        ERR_clear_error();
        return -EINVAL;
    }
    if (names)
        SSL_CTX_set_client_CA_list(c, list);
    else
        sk_X509_NAME_pop_free(list, X509_NAME_free);
    return 0;
}

#define NO_CA "no CA certificate in it (PEM, one or more -----BEGIN CERTIFICATE----- blocks)"

/* client_ca: the CAs whose certificates a client must (or may) show,
 * named to the client in the CertificateRequest. */
static int client_certs(const lx_vhost_t *vh, SSL_CTX *c, char *err, size_t errlen) {
    const char *ca = vh->tls.client_ca;
    if (!readable(ca, "client_ca", vh, err, errlen)) return -EINVAL;
    if (load_cas(c, ca, 1) < 0) {
        snprintf(err, errlen, "%s:%d: vhost \"%s\": tls client_ca \"%s\": " NO_CA, vh->tls.file,
                 vh->tls.line, vh->name, ca);
        return -EINVAL;
    }
    SSL_CTX_set_verify(
        c, SSL_VERIFY_PEER | (vh->tls.client_required ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
    return 0;
}

/* The session id context: a digest of the vhost's name and of its client
 * certificate policy (the mode, the CA file's bytes), so that a session is
 * resumed only under the vhost that made it, and not after a reload that
 * changed whom it accepts (a session carries its client's verification). */
static int session_context(lx_vhost_t *vh, SSL_CTX *c, char *err, size_t errlen) {
    unsigned char sid[EVP_MAX_MD_SIZE];
    unsigned int sidlen = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) &&
             EVP_DigestUpdate(md, vh->name, strlen(vh->name) + 1);
    if (ok && vh->tls.client_ca)
        ok = EVP_DigestUpdate(md, vh->tls.client_required ? "R" : "O", 1) &&
             digest_file(md, vh->tls.client_ca);
    ok = ok && EVP_DigestFinal_ex(md, sid, &sidlen) && sidlen <= SSL_MAX_SID_CTX_LENGTH &&
         sidlen <= sizeof(vh->tls.sid) && SSL_CTX_set_session_id_context(c, sid, sidlen);
    if (ok) {
        memcpy(vh->tls.sid, sid, sidlen);
        vh->tls.sid_len = sidlen;
    }
    EVP_MD_CTX_free(md);
    if (!ok) {
        snprintf(err, errlen, "%s:%d: vhost \"%s\": tls: %s", vh->tls.file, vh->tls.line, vh->name,
                 ssl_reason());
        return -ENOMEM;
    }
    return 0;
}

/* Whether a TLS 1.2 cipher of c can be used with a key of one of types
 * (an ECDSA cipher for an EC or EdDSA key, an RSA one for RSA). */
static int cipher_for(SSL_CTX *c, const int *types, int ntypes) {
    STACK_OF(SSL_CIPHER) *cs = SSL_CTX_get_ciphers(c);
    for (int i = 0; cs && i < sk_SSL_CIPHER_num(cs); i++) {
        const SSL_CIPHER *ci = sk_SSL_CIPHER_value(cs, i);
        int auth = SSL_CIPHER_get_auth_nid(ci);
        if (auth == NID_auth_any) continue; /* a TLS 1.3 suite */
        for (int k = 0; k < ntypes; k++) {
            int rsa = types[k] == EVP_PKEY_RSA || types[k] == EVP_PKEY_RSA_PSS;
            if (rsa ? auth == NID_auth_rsa : auth == NID_auth_ecdsa) return 1;
        }
    }
    return 0;
}

static int vhost_ctx(lx_gen_t *g, lx_vhost_t *vh, char *err, size_t errlen) {
    SSL_CTX *c = ctx_new(g, err, errlen);
    if (c == NULL) return -EINVAL;
    vh->tls.ctx = c; /* freed with the generation, whatever happens next */
    SSL_CTX_set_default_passwd_cb(c, no_passphrase);
    int types[LX_TLS_PAIRS] = {0};
    for (int i = 0; i < vh->tls.npairs; i++) {
        const char *cert = vh->tls.cert[i], *key = vh->tls.key[i];
        if (!readable(cert, "cert", vh, err, errlen) || !readable(key, "key", vh, err, errlen))
            return -EINVAL;
        if (SSL_CTX_use_certificate_chain_file(c, cert) != 1) {
            snprintf(err, errlen, "%s:%d: vhost \"%s\": tls cert \"%s\": %s", vh->tls.file,
                     vh->tls.line, vh->name, cert, ssl_reason());
            return -EINVAL;
        }
        X509 *x = SSL_CTX_get0_certificate(c);
        types[i] = key_type(x);
        if (i > 0 && types[i] == types[0]) {
            snprintf(err, errlen,
                     "%s:%d: vhost \"%s\": tls certs \"%s\" and \"%s\" have keys of the same "
                     "type: two certificates are one ECDSA and one RSA",
                     vh->tls.file, vh->tls.line, vh->name, vh->tls.cert[0], cert);
            return -EINVAL;
        }
        /* OpenSSL checks the key against the certificate as it loads it:
         * a mismatch fails here, or in the check after. */
        ERR_clear_error();
        if (SSL_CTX_use_PrivateKey_file(c, key, SSL_FILETYPE_PEM) != 1 &&
            ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
            const char *why = ssl_reason();
            if (encrypted_key(key))
                why = "the key is encrypted with a passphrase, which luxd does not ask for; "
                      "write it unencrypted (openssl pkey -in KEY -out NEW), readable by root "
                      "and luxd's user only";
            snprintf(err, errlen, "%s:%d: vhost \"%s\": tls key \"%s\": %s", vh->tls.file,
                     vh->tls.line, vh->name, key, why);
            return -EINVAL;
        }
        if (ERR_peek_last_error() || SSL_CTX_check_private_key(c) != 1) {
            ERR_clear_error();
            snprintf(err, errlen,
                     "%s:%d: vhost \"%s\": tls key \"%s\" does not belong to cert \"%s\"",
                     vh->tls.file, vh->tls.line, vh->name, key, cert);
            return -EINVAL;
        }
        check_dates(g, vh, i, x);
    }
    if (g->srv.tls.max_version < TLS1_3_VERSION && !cipher_for(c, types, vh->tls.npairs)) {
        snprintf(err, errlen,
                 "%s:%d: vhost \"%s\": tls: no cipher of server tls ciphers can be used with its "
                 "%s certificate%s, and TLS 1.3 is not offered: every handshake would fail",
                 vh->tls.file, vh->tls.line, vh->name,
                 types[0] == EVP_PKEY_RSA || types[0] == EVP_PKEY_RSA_PSS ? "RSA" : "ECDSA",
                 vh->tls.npairs > 1 ? "s" : "");
        return -EINVAL;
    }
    int r = vh->tls.client_ca ? client_certs(vh, c, err, errlen) : 0;
    return r < 0 ? r : session_context(vh, c, err, errlen);
}

/* What a pooled connection must share with the server of a new request
 * besides its address (upstream/upconn.c): a digest of the name checked,
 * whether it is checked, and the CA file's bytes. Pools outlive
 * generations, with their idle connections and the session they offer,
 * which OpenSSL resumes without checking the certificate again: a reload
 * that changes any of these must not find the old pool (a break review). */
static void pool_ids(lx_upstream_t *u) {
    const lx_upstream_tls_t *t = u->tls;
    for (size_t i = 0; i < u->nservers; i++) {
        lx_upstream_server_t *s = &u->servers[i];
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        uint64_t id = 0;
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        if (c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) &&
            EVP_DigestUpdate(c, s->tls_name, strlen(s->tls_name) + 1) &&
            EVP_DigestUpdate(c, t->verify ? "v" : "-", 1) && (!t->ca || digest_file(c, t->ca)) &&
            EVP_DigestFinal_ex(c, md, &mdlen) && mdlen >= sizeof(id))
            memcpy(&id, md, sizeof(id));
        EVP_MD_CTX_free(c);
        s->pool_id = id | 1; /* 0 is plain */
    }
}

/* upstream { tls = ... }: the client context its connections share. The
 * system's CAs unless ca names others; TLS 1.2 at least; sessions are
 * kept per pool (upstream/upconn.c) through the new-session hook. */
static int upstream_ctx(lx_upstream_t *u, char *err, size_t errlen) {
    lx_upstream_tls_t *t = u->tls;
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    if (c == NULL || !SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION)) {
        SSL_CTX_free(c);
        snprintf(err, errlen, "%s:%d: upstream \"%s\": tls: %s", t->file, t->line, u->name,
                 ssl_reason());
        return -ENOMEM;
    }
    t->ctx = c; /* freed with the generation */
    SSL_CTX_set_options(c, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(c, alpn, sizeof(alpn) - 1);
    lx_tls_client_ctx_hooks(c);
    if (t->verify) {
        SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
        int e = t->ca ? -regular_file(t->ca) : 0;
        if (e) {
            snprintf(err, errlen, "%s:%d: upstream \"%s\": tls ca \"%s\": %s", t->file, t->line,
                     u->name, t->ca, e == EINVAL ? "not a regular file" : strerror(e));
            return -EINVAL;
        }
        if (t->ca && load_cas(c, t->ca, 0) < 0) {
            snprintf(err, errlen, "%s:%d: upstream \"%s\": tls ca \"%s\": " NO_CA, t->file, t->line,
                     u->name, t->ca);
            return -EINVAL;
        }
        if (t->ca == NULL && SSL_CTX_set_default_verify_paths(c) != 1) ERR_clear_error();
    }
    pool_ids(u);
    return 0;
}

/* server { tls = { ticket_key_file = ... } }: the keys, read as the
 * certificates are, at every load. */
static int read_ticket_keys(lx_gen_t *g, char *err, size_t errlen) {
    const lx_server_tls_t *st = &g->srv.tls;
    char why[512];
    int r = lx_ticket_keys_read(st->ticket_key_file, &g->ticket_keys, why, sizeof(why));
    if (r < 0) {
        snprintf(err, errlen, "%s:%d: server tls ticket_key_file \"%s\": %s%s", st->file,
                 st->ticket_key_file_line, st->ticket_key_file, why,
                 r == -EACCES ? " (luxd reads it as the user it runs as at a reload: see "
                                "luxd(8), \"TLS keys\")"
                              : "");
        return r;
    }
    struct stat sb;
    if (stat(st->ticket_key_file, &sb) == 0 && (sb.st_mode & S_IROTH))
        lx_gen_warn(g, st->file, st->ticket_key_file_line,
                    "server tls ticket_key_file \"%s\" is readable by everyone: whoever reads "
                    "it can decrypt recorded sessions (chmod o-r)",
                    st->ticket_key_file);
    return 0;
}

/* Whether the user (uid, its groups) may read path by its mode bits: the
 * file readable, each directory above it searchable (ACLs aside). */
static int user_may_read(const char *path, uid_t uid, const gid_t *groups, int ngroups) {
    char p[4096];
    snprintf(p, sizeof(p), "%s", path);
    for (int file = 1;; file = 0) {
        struct stat sb;
        if (stat(p, &sb) < 0) return 1; /* a missing one is reported elsewhere */
        int in_group = 0;
        for (int i = 0; i < ngroups && !in_group; i++)
            in_group = groups[i] == sb.st_gid;
        mode_t need = file ? 4 : 1; /* r for the file, x for a directory */
        mode_t bits = sb.st_uid == uid ? sb.st_mode >> 6 : in_group ? sb.st_mode >> 3 : sb.st_mode;
        if ((bits & need) == 0) return 0;
        char *slash = strrchr(p, '/');
        if (slash == NULL || slash == p) return 1;
        *slash = '\0';
    }
}

/* Started as root with a user to become: the files a reload will read as
 * that user and it may not. They load now and fail at the next reload
 * (which keeps the old generation serving): warned of here, at -t too. */
static void warn_unreadable(lx_gen_t *g) {
    const char *user = g->srv.user;
    if (user == NULL || geteuid() != 0) return;
    struct passwd *pw = getpwnam(user);
    if (pw == NULL) return; /* the start says so */
    gid_t groups[256];
    int n = 256;
    if (getgrouplist(user, pw->pw_gid, groups, &n) < 0) n = 0;
    const char *why = "is not readable by user \"%s\": it loads now, as root, and every reload "
                      "(as %s) will fail; see luxd(8), \"TLS keys\"";
    char msg[512];
    snprintf(msg, sizeof(msg), why, user, user);
    for (size_t i = 0; i < g->nvhosts; i++) {
        const lx_vhost_tls_t *t = &g->vhosts[i].tls;
        const char *files[2 * LX_TLS_PAIRS + 1];
        int nf = 0;
        for (int k = 0; k < t->npairs; k++) {
            files[nf++] = t->cert[k];
            files[nf++] = t->key[k];
        }
        if (t->client_ca) files[nf++] = t->client_ca;
        for (int k = 0; k < nf; k++)
            if (!user_may_read(files[k], pw->pw_uid, groups, n))
                lx_gen_warn(g, t->file, t->line, "vhost \"%s\": tls file \"%s\" %s",
                            g->vhosts[i].name, files[k], msg);
    }
    const lx_server_tls_t *st = &g->srv.tls;
    if (st->ticket_key_file && !user_may_read(st->ticket_key_file, pw->pw_uid, groups, n))
        lx_gen_warn(g, st->file, st->ticket_key_file_line, "server tls ticket_key_file \"%s\" %s",
                    st->ticket_key_file, msg);
}

int lx_tls_gen_build(lx_gen_t *g, char *err, size_t errlen) {
    const lx_listen_t *tls_listen = NULL;
    for (size_t i = 0; i < g->srv.nlisten && tls_listen == NULL; i++)
        if (g->srv.listen[i].tls) tls_listen = &g->srv.listen[i];
    const lx_server_tls_t *st = &g->srv.tls;
    if (st->file && tls_listen == NULL)
        lx_gen_warn(g, st->file, st->line,
                    "server tls is set, but no listen entry has tls = true: it is not used");
    if (st->ticket_key_file) {
        int r = read_ticket_keys(g, err, errlen);
        if (r < 0) return r;
    }
    /* The base context, first: it checks the server's settings once. */
    if ((tls_listen || st->file) && (g->tls_base = ctx_new(g, err, errlen)) == NULL) return -EINVAL;
    const lx_vhost_t *with = NULL;
    for (size_t i = 0; i < g->nvhosts; i++) {
        lx_vhost_t *vh = &g->vhosts[i];
        if (vh->tls.npairs == 0) continue;
        int r = vhost_ctx(g, vh, err, errlen);
        if (r < 0) return r;
        if (with == NULL) with = vh;
        if (tls_listen == NULL)
            lx_gen_warn(g, vh->tls.file, vh->tls.line,
                        "vhost \"%s\": tls is set, but no listen entry has tls = true: the "
                        "certificate is not used",
                        vh->name);
    }
    for (size_t i = 0; i < g->nupstreams; i++) {
        int r = g->upstreams[i].tls ? upstream_ctx(&g->upstreams[i], err, errlen) : 0;
        if (r < 0) return r;
    }
    if (tls_listen == NULL) return 0;
    if (with == NULL) {
        snprintf(err, errlen,
                 "%s:%d: listen %s: tls = true, but no vhost has a certificate (tls = { cert = "
                 "..., key = ... })",
                 tls_listen->file, tls_listen->line, tls_listen->text);
        return -EINVAL;
    }
    warn_unreadable(g);
    const lx_vhost_t *dv = g->default_vhost;
    if (dv && dv->tls.npairs == 0)
        lx_gen_warn(g, dv->file, dv->line,
                    "vhost \"%s\" is the default but has no certificate: a TLS client that "
                    "sends no server name, or a name no vhost with a certificate has, is refused "
                    "(as nginx's ssl_reject_handshake); give it tls = { cert, key } to serve them",
                    dv->name);
    if (g->srv.vhost_dir)
        lx_gen_warn(g, g->srv.file, g->srv.line,
                    "vhost_dir: its hosts have no certificates of their own: over TLS they get "
                    "the default vhost's");
    return 0;
}

void lx_tls_gen_free(lx_gen_t *g) {
    for (size_t i = 0; i < g->nvhosts; i++)
        SSL_CTX_free(g->vhosts[i].tls.ctx);
    SSL_CTX_free(g->tls_base);
    lx_ticket_keys_free(g->ticket_keys);
    for (size_t i = 0; i < g->nupstreams; i++)
        if (g->upstreams[i].tls) SSL_CTX_free(g->upstreams[i].tls->ctx);
}

void lx_tls_dump(const lx_vhost_tls_t *t, FILE *out, const char *indent) {
    for (int i = 0; i < t->npairs; i++)
        fprintf(out, "%stls cert %s key %s  (%s:%d)\n", indent, t->cert[i], t->key[i], t->file,
                t->line);
    if (t->client_ca)
        fprintf(out, "%stls client certificates %s, signed by %s\n", indent,
                t->client_required ? "required" : "optional", t->client_ca);
}

/* The vhost whose certificates a server name gets (lx_tls_pick), or NULL. */
static const lx_vhost_t *pick_vhost(const lx_gen_t *g, const char *name, size_t len) {
    const lx_vhost_t *vh = name ? lx_gen_match_vhost(g, name, len) : NULL;
    /* A vhost without certificates of its own is covered by the wildcard
     * above it that has some ("www.a.test" by "*.a.test"), as a client
     * checking the name would accept, before the default vhost's. */
    for (size_t i = 1; vh && vh->tls.ctx == NULL && i < len; i++)
        if (name[i] == '.') vh = lx_gen_match_vhost(g, name + i, len - i);
    if (vh == NULL || vh->tls.ctx == NULL) vh = g->default_vhost;
    return vh && vh->tls.ctx ? vh : NULL;
}

int lx_tls_misdirected(const lx_gen_t *g, const lx_vhost_t *vh, const char *host, size_t hlen,
                       const unsigned char *sid, unsigned sid_len) {
    const lx_vhost_t *want = pick_vhost(g, host, hlen);
    if (want == NULL ||
        (sid_len == want->tls.sid_len && sid && memcmp(sid, want->tls.sid, sid_len) == 0))
        return 0;
    return vh->tls.ctx != NULL || want->tls.client_ca != NULL;
}

void *lx_tls_pick(const lx_gen_t *g, const char *name, size_t len) {
    const lx_vhost_t *vh = pick_vhost(g, name, len);
    return vh ? vh->tls.ctx : NULL;
}
