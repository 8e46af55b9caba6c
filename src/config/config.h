/* The compiled configuration: one immutable, refcounted generation built from
 * the Lua description. Runtime code reads only these structs; nothing here
 * holds a lua_State (doc/design.md: config parsing apart from runtime). */
#ifndef LX_CONFIG_H
#define LX_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "../arena.h"
#include "../dispatch/rules.h"
#include "../lx.h"
#include "../http/mime.h"

/* follow_symlinks: which symbolic links below a document root are followed
 * when a file is opened (nginx's disable_symlinks). The default is OWNER for
 * named vhosts and REFUSE for vhost_dir hosts: see ld_read_site (load_site.c)
 * and the vhost_dir part of convert (load.c) for why. */
typedef enum {
    LX_SYMLINKS_OWNER = 0, /**< "owner": when the link and its target have one owner */
    LX_SYMLINKS_FOLLOW,    /**< true: every link */
    LX_SYMLINKS_REFUSE,    /**< false: none; a path through a link is 403 */
} lx_symlinks_t;

/* upstream { tls = ... }: its servers are spoken to over TLS. */
typedef struct {
    int verify;       /**< their certificates are checked (the default) */
    const char *ca;   /**< against these CAs, PEM, or NULL: the system's */
    const char *name; /**< the name checked and sent (SNI), or NULL: each server's host */
    void *ctx;        /**< the client SSL_CTX (net/tlsctx.c), built at load */
    const char *file; /**< where tls is written */
    int line;
} lx_upstream_tls_t;

/* One server of an upstream. A name that resolves to several addresses is
 * one entry per address (nginx does the same), all with the weight given. */
typedef struct {
    char text[128];      /**< as written ("app.internal:8080", "unix:/run/app.sock") */
    char addr_text[120]; /**< the address, for $upstream_addr ("127.0.0.1:8081", "[::1]:80",
                            "unix:/p"); holds "unix:" and the longest sun_path */
    struct sockaddr_storage addr; /**< AF_INET, AF_INET6 or AF_UNIX */
    socklen_t addrlen;            /**< length of addr */
    uint32_t weight;              /**< share of round robin, 1.. (default 1) */
    uint32_t stat_slot;           /**< its counters (stats.h, LX_ST_PEER), by addr_text */
    uint32_t pool_keepalive;      /**< idle connections its address's pool keeps: the most of
                                       the upstreams naming the address */
    const lx_upstream_tls_t *tls; /**< its upstream's TLS, or NULL: plain */
    const char *tls_name;         /**< the name its certificate is checked for and SNI */
    int tls_name_ip;              /**< tls_name is an IP address: checked, not sent */
    uint64_t pool_id; /**< what besides the address a pooled connection must match: 0 plain,
                         else a digest of the TLS settings */
    const char *file; /**< where it was written */
    int line;
} lx_upstream_server_t;

/* upstream "name" { ... }: servers a request is handed to, and how. */
typedef struct lx_upstream_s {
    const char *name;              /**< as written */
    uint32_t index;                /**< in g->upstreams */
    uint32_t stat_slot;            /**< its counters (stats.h, LX_ST_UPSTREAM), by name */
    lx_upstream_server_t *servers; /**< resolved at load, in the order written */
    size_t nservers;               /**< entries in servers (>= 1) */
    uint32_t keepalive;            /**< idle connections kept per loop and server; 0: none */
    uint32_t keepalive_timeout;    /**< ms an idle connection is kept */
    uint32_t connect_timeout;      /**< ms for connect(2) */
    uint32_t read_timeout;         /**< ms between two reads of the response */
    uint32_t send_timeout;         /**< ms between two writes of the request */
    uint32_t max_fails;      /**< failures within fail_timeout that mark a server down; 0: never */
    uint32_t fail_timeout;   /**< ms: the window for max_fails, and how long a server stays down */
    size_t max_header_bytes; /**< response status line plus headers */
    lx_upstream_tls_t *tls;  /**< over TLS, or NULL */
    const char *file;        /**< where it was declared */
    int line;
} lx_upstream_t;

/* Serving settings of a vhost or of one of its locations. A location starts as
 * a copy of its vhost's site and overrides the keys it names. */
typedef struct lx_site_s {
    const char *root;      /**< absolute document root, no trailing slash; NULL: none */
    size_t root_len;       /**< strlen(root) */
    const char *root_file; /**< where root is set, for the start-up check */
    int root_line;
    const char **index; /**< index file names tried for a path ending in '/' */
    size_t nindex;      /**< entries in index */
    /* try_files: entries but the last are tried as files ("/" at the end:
     * a directory); the last is a path to send the request to, unless
     * try_status is set ("=404"). ntry_files 0: off. */
    const char **try_files;
    size_t ntry_files;
    int try_status;
    const char *cache_control;     /**< Cache-Control value, or NULL */
    const char *headers;           /**< pre-built "Name: value\r\n" lines added to every response */
    size_t headers_len;            /**< bytes in headers */
    unsigned etag : 1;             /**< send ETag and honour If-None-Match */
    unsigned last_modified : 1;    /**< send Last-Modified and honour If-Modified-Since */
    unsigned gzip_static : 1;      /**< serve FILE.gz to clients that accept gzip */
    unsigned dir_listing : 1;      /**< list directories that have no index file */
    lx_symlinks_t follow_symlinks; /**< links below the root that are followed */
    unsigned follow_symlinks_set : 1; /**< follow_symlinks was set: vhost_dir defaults differ */
    uint32_t id;                      /**< unique within a generation; part of the file cache key */
    const lx_ruleset_t *access;       /**< access rules, or NULL */
    const int *error_status;          /**< statuses that have an error page */
    const char **error_page;          /**< the page (a path in the site) for each */
    const int *error_page_line;       /**< where each entry is written (in the block's file) */
    uint32_t policy;                  /**< policy slot (1..), 0: none */
    const char *policy_file;          /**< where the policy function was written, or NULL */
    int policy_line;                  /**< the line its definition starts on */
    size_t nerror_pages;              /**< entries in both */
    unsigned test_handler : 1;        /**< test_handler = true (luxd-test only) */
    unsigned status : 1;              /**< status = true: answers with the counters */
    const lx_upstream_t *proxy;       /**< proxy = "name": every request goes there, or NULL */
    const lx_upstream_t *fallback;    /**< fallback = "name": what no file answers, or NULL */
    const char *proxy_host;           /**< Host sent to the upstream; NULL: the client's */
    const lx_header_t *proxy_headers; /**< proxy_headers: set (or, value "", remove) these */
    size_t nproxy_headers;            /**< entries in proxy_headers */
    unsigned proxy_via : 1;           /**< send "Via: 1.1 luxd" to the upstream (default on) */
    unsigned proxy_underscores : 1;   /**< send request fields whose name has a '_' (default off) */
    /* The handlers that answer, in order: filled by handlers/chain.c when
     * the generation is made, so config/ never names a handler. */
    const struct lx_handler_s *chain[8];
    uint8_t nchain;   /**< entries in chain */
    uint64_t methods; /**< the methods the chain serves (request.h LX_METHOD), for Allow */
} lx_site_t;

/* location "/prefix/" { ... }: the longest matching prefix wins. */
typedef struct {
    const char *prefix; /**< starts with '/' */
    size_t len;         /**< strlen(prefix) */
    lx_site_t site;     /**< the vhost's settings with this location's overrides */
    const char *file;   /**< where it was written */
    int line;
} lx_location_t;

/* real_ip = { from = { ... }, header = "X-Forwarded-For" }: the proxies
 * whose word on the client's address is taken (conn.c lx_req_addr). */
typedef struct {
    lx_cidrset_t from;  /**< the trusted proxies */
    const char *header; /**< lower-case field name, or NULL: none (the PROXY protocol only) */
    size_t header_len;  /**< strlen(header) */
    unsigned xff : 1;   /**< the header is X-Forwarded-For: a list, walked from the right */
    const char *file;   /**< where real_ip was written */
    int line;
} lx_realip_t;

/* A vhost's certificates (tls = { ... }): up to two pairs of PEM files,
 * an ECDSA and an RSA one, read into an SSL_CTX at every load
 * (net/tlsctx.c). */
#define LX_TLS_PAIRS 2
typedef struct {
    const char *cert[LX_TLS_PAIRS]; /**< the certificate, its chain after it */
    const char *key[LX_TLS_PAIRS];  /**< its private key */
    int npairs;                     /**< pairs given; 0: no tls on this vhost */
    const char *client_ca;          /**< CAs of client certificates, or NULL: none asked */
    int client_required;            /**< client_verify = "require" (else "optional") */
    const char *file;               /**< where tls = { } is written */
    int line;
    void *ctx;             /**< its SSL_CTX (one reference), built by lx_tls_gen_build */
    unsigned char sid[32]; /**< its session id context (net/tlsctx.c session_context) */
    unsigned sid_len;
} lx_vhost_tls_t;

typedef struct lx_vhost_s {
    const char *name;           /**< lower-case primary name */
    int is_default;             /**< serves requests whose Host matches no vhost */
    lx_site_t site;             /**< the vhost's own settings */
    const char *file;           /**< config file that declared it */
    int line;                   /**< line of the declaration */
    lx_ruleset_t *redirect;     /**< answered with Location, or NULL */
    lx_ruleset_t *rewrite;      /**< internal rewrites, or NULL */
    lx_location_t *locations;   /**< in declaration order */
    size_t nlocations;          /**< entries in locations */
    lx_trie_t *location_trie;   /**< location index by prefix, or NULL */
    const lx_realip_t *real_ip; /**< its own, the server's, or NULL (none, or real_ip = false) */
    uint32_t stat_slot;         /**< its counters (stats.h, LX_ST_VHOST), by name */
    /* Where its requests are logged: its own access_log, the server's (no
     * access_log key), or NULL (access_log = false, or none at all). */
    struct lx_access_log_conf_s *access_log;
    lx_vhost_tls_t tls; /**< its certificates, or npairs 0 */
} lx_vhost_t;

typedef struct {
    char text[80];                /**< as written in the config, for messages */
    struct sockaddr_storage addr; /**< resolved numeric address */
    socklen_t addrlen;            /**< length of addr */
    int proxy_protocol;           /**< connections begin with a PROXY protocol header */
    int tls;                      /**< connections speak TLS (net/tls.c) */
    int http2;                    /**< and HTTP/2: by ALPN with tls, else by prior knowledge */
    const char *file;             /**< where it was written */
    int line;
} lx_listen_t;

/* What a $name of an access-log template stands for (io/accesslog.c
 * prints each; lua/luxd/schema_server.lua has the same list for -t's errors). */
typedef enum {
    LX_LV_TEXT, /**< not a variable: literal bytes */
    LX_LV_REMOTE_ADDR,
    LX_LV_TIME_LOCAL,
    LX_LV_TIME_ISO8601,
    LX_LV_MSEC,
    LX_LV_REQUEST,
    LX_LV_REQUEST_METHOD,
    LX_LV_REQUEST_URI,
    LX_LV_URI,
    LX_LV_ARGS,
    LX_LV_SERVER_PROTOCOL,
    LX_LV_STATUS,
    LX_LV_BODY_BYTES_SENT,
    LX_LV_BYTES_SENT,
    LX_LV_REQUEST_TIME,
    LX_LV_REQUEST_ID,
    LX_LV_HOST,
    LX_LV_HTTP_KNOWN, /**< $http_NAME of a header the parser keeps in r->known */
    LX_LV_HTTP,       /**< $http_NAME of any other header */
    LX_LV_UPSTREAM_ADDR,
    LX_LV_UPSTREAM_STATUS,
    LX_LV_UPSTREAM_RESPONSE_TIME,
    LX_LV_REALIP_REMOTE_ADDR, /**< the connection's peer, before real_ip (nginx's name) */
    LX_LV_TLS_PROTOCOL,       /**< $tls_protocol .. $tls_session_reused: in the order of */
    LX_LV_TLS_CIPHER,         /**< lx_tls_field_t (net/transport.h) */
    LX_LV_TLS_SNI,
    LX_LV_TLS_SESSION_REUSED,
    LX_LV_TLS_CLIENT_SUBJECT,
    LX_LV_TLS_CLIENT_FINGERPRINT,
} lx_logvar_t;

/* One piece of a compiled template: literal bytes or a variable. */
typedef struct {
    uint8_t var;      /**< lx_logvar_t */
    uint8_t known;    /**< LX_LV_HTTP_KNOWN: the index in r->known */
    uint32_t len;     /**< bytes in text */
    const char *text; /**< LX_LV_TEXT: the bytes; LX_LV_HTTP: the header name, lower case */
} lx_log_piece_t;

typedef struct lx_access_log_conf_s {
    const char *path;             /**< absolute path of the access log */
    const char *format;           /**< as written: "combined", "common", "json" or a template */
    const lx_log_piece_t *pieces; /**< the format compiled at load (lx_access_log_compile) */
    size_t npieces;               /**< entries in pieces */
    unsigned json : 1;            /**< values escaped for JSON strings (format "json",
                                     escape = "json") */
    unsigned uses_time : 1;       /**< a piece needs the time now ($request_time, $msec) */
    const char *file;             /**< where the access_log key is written, for messages */
    int line;
    /* Set by the server before the generation is handed to the loops (a
     * generation that is only checked, -t, has none): */
    int slot; /**< the open file's slot (io/logfiles.c), -1: none */
    int fd;   /**< that slot's fd, shared by every user of the path */
} lx_access_log_conf_t;

/* server { tls = { ... } }: what every TLS listener and vhost shares. */
typedef struct {
    const char *ticket_key_file; /**< keys sealing session tickets, or NULL: the process's */
    int ticket_key_file_line;
    int min_version, max_version; /**< TLS versions as on the wire (0x0303 is 1.2) */
    const char *ciphers;          /**< TLS 1.2 cipher list, or NULL: Mozilla intermediate */
    int ciphers_line;
    uint32_t handshake_timeout; /**< ms from accept to the end of the handshake */
    const char *file;           /**< where tls = { } is written (NULL: not written) */
    int line;
} lx_server_tls_t;

typedef struct {
    lx_listen_t *listen;             /**< addresses to listen on */
    size_t nlisten;                  /**< entries in listen */
    int workers;                     /**< event loops; resolved from "auto" */
    const char *user;                /**< drop privileges to this user, or NULL */
    const char *pid_file;            /**< or NULL */
    const char *error_log;           /**< path or "stderr" */
    int error_log_level;             /**< LX_LOG_* */
    lx_access_log_conf_t access_log; /**< path NULL: off */
    size_t access_log_buffer;        /**< bytes buffered per loop before a write */
    int access_log_unbuffered;       /**< write each line at once (access_log_buffer = 0) */
    const char *request_id_header;   /**< response header carrying $request_id, or NULL */
    size_t request_id_header_len;    /**< its length; 0: none */
    uint32_t keepalive_timeout;      /**< ms; 0 disables keep-alive */
    uint32_t keepalive_requests;     /**< requests per connection */
    uint32_t header_timeout;         /**< ms for the whole request header */
    uint32_t body_timeout;           /**< ms between two reads of a body */
    uint32_t send_timeout;           /**< ms between two writes of a response */
    uint32_t drain_timeout;          /**< ms a graceful stop waits for requests */
    size_t max_header_bytes;         /**< request line plus headers */
    uint64_t max_body_bytes;         /**< request body */
    uint32_t max_connections;        /**< per server, split across loops */
    const char *file;                /**< where server {} was written */
    int line;                        /**< (line 0: no server block) */
    int error_log_line;              /**< line of the error_log key */
    int access_log_line;             /**< line of the access_log key */
    int tcp_nodelay;                 /**< TCP_NODELAY on accepted sockets */
    int defer_accept;                /**< TCP_DEFER_ACCEPT on listeners */
    int backlog;                     /**< listen(2) backlog */
    uint64_t policy_budget;          /**< Lua instructions per policy call */
    size_t policy_memory;            /**< Lua bytes per loop for policies */
    const char *mime_types;          /**< mime_types file read at load, or NULL */
    int mime_types_line;             /**< line of the mime_types key */
    size_t mime_types_exts;          /**< extensions it gave (for -T) */
    const char *vhost_dir;           /**< mass hosting root, or NULL */
    size_t vhost_dir_len;            /**< strlen(vhost_dir) */
    const lx_realip_t *real_ip;      /**< real_ip, or NULL; trusts PROXY protocol headers too */
    lx_server_tls_t tls;             /**< server-wide TLS settings */
} lx_server_conf_t;

/* One slot of the host-name hash. */
typedef struct {
    const char *name;  /**< lower-case name, or ".suffix" for "*.suffix" */
    size_t len;        /**< strlen(name) */
    lx_vhost_t *vhost; /**< NULL: empty slot */
} lx_host_slot_t;

typedef struct lx_gen_s {
    uint64_t id;                      /**< generation number, 1 for the first; never reused */
    int refs;                         /**< atomic: loops and requests holding it */
    lx_arena_t arena;                 /**< owns everything below */
    const char *file;                 /**< main config file */
    lx_server_conf_t srv;             /**< server {} */
    lx_mime_t *mime;                  /**< built-in table plus mime {} */
    lx_vhost_t *vhosts;               /**< in declaration order */
    size_t nvhosts;                   /**< entries in vhosts */
    lx_host_slot_t *hosts;            /**< exact names and wildcard suffixes */
    size_t hosts_mask;                /**< slots - 1 (a power of two) */
    lx_vhost_t *default_vhost;        /**< or NULL */
    lx_vhost_t mass_vhost;            /**< settings for vhost_dir hosts */
    uint32_t npolicies;               /**< policy slots in use */
    struct lx_policy_vm_s **vms;      /**< one Lua state per loop running the policies */
    int nvms;                         /**< entries in vms */
    const char **warnings;            /**< "file:line: ..." the loader let pass but reports */
    size_t nwarnings;                 /**< entries in warnings */
    lx_upstream_t *upstreams;         /**< in declaration order */
    size_t nupstreams;                /**< entries in upstreams */
    void *proxy;                      /**< the proxy handler's per-loop health and rotation */
    void (*fini)(struct lx_gen_s *g); /**< what the handlers built for it, freed last */
    lx_ruleset_t **rulesets;          /**< every rule set, to free them */
    size_t nrulesets;                 /**< entries in rulesets */
    size_t rulesets_cap;              /**< room in rulesets (grows by doubling) */
    /* Access log files this generation holds open (io/logfiles.c slots),
     * given back when it is freed: the server sets both. */
    int *log_slots;
    size_t nlog_slots;
    void (*release_logs)(struct lx_gen_s *g);
    int stats_live; /**< published: counted in lx_stats_server.gens_alive */
    /* The SSL_CTX every TLS connection starts on (no certificate: its
     * ClientHello callback moves it to a vhost's), or NULL when no listener
     * speaks TLS (net/tlsctx.c). */
    void *tls_base;
    /* The keys of srv.tls.ticket_key_file, or NULL (net/tickets.h). */
    struct lx_ticket_keys_s *ticket_keys;
} lx_gen_t;

/* Adds "file:line: message" to g's warnings. */
void lx_gen_warn(lx_gen_t *g, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Set when the binary has the test handler (luxd-test): the key
 * test_handler is accepted then. */
extern int lx_config_test_handlers;

/* Runs the config file in a fresh Lua state and compiles it. On success
 * returns 0 and a generation with one reference; on failure returns a negative
 * errno and writes "file:line: what is wrong" into err. `prefix` is the
 * directory relative paths are resolved against. */
int lx_config_load(const char *path, const char *prefix, uint64_t id, lx_gen_t **out, char *err,
                   size_t errlen);

/* Closes the Lua state of the last lx_config_load. A reload calls it once
 * its generation is published (a 10,000-vhost state takes some 40 ms to
 * close); `luxd -t` never does, its exit is enough. The next load calls it
 * first. */
void lx_config_done(void);

/* Runs the config file in L (a fresh state with the standard libraries) and
 * leaves the description on the stack. Returns 0, or -EINVAL with err set. */
struct lua_State;
int lx_config_run(struct lua_State *L, const char *path, const char *prefix, char *err,
                  size_t errlen);

/* Adds warnings to g about document roots that do not exist, are not
 * directories, or that the user luxd serves as cannot search (roots.c):
 * `user` by name, or NULL for the process's own euid and groups. Which one
 * is the caller's to know: lx_config_load cannot tell a reload (the running
 * user stays) from a start (`user` applies only when luxd is root). */
void lx_config_check_roots(lx_gen_t *g, const char *user);

void lx_gen_ref(lx_gen_t *g);
void lx_gen_unref(lx_gen_t *g);

/* Starts compiling g's rule sets' regex prefilters (prefilter.c) in a
 * child process, for nloops loops; loops use each as it is published. A
 * compile for an older generation is dropped, unless g has its set too;
 * sets compiled before are not compiled again. Nothing to compile without
 * the engine or such sets. */
void lx_gen_prefilter_start(lx_gen_t *g, int nloops);
/* A stop begins: kills the compile in progress, if any, and starts no
 * other; never waits. */
void lx_gen_prefilter_cancel(void);
/* The same, then waits for the thread to end (at the end of a stop). */
void lx_gen_prefilter_stop(void);
/* `luxd --prefilter-compiler PARENT_PID GENERATION`: the child, serving
 * compiles on fds 0 and 1 until they end. Its exit status. */
int lx_prefilter_child_main(const char *parent);

/* The vhost named by a Host value (port already stripped, any case): exact
 * names first, then wildcards, longest suffix first; NULL when none. */
lx_vhost_t *lx_gen_match_vhost(const lx_gen_t *g, const char *host, size_t len);
/* The same, and *slot is the name that matched (".suffix" for a wildcard). */
lx_vhost_t *lx_gen_match_vhost_slot(const lx_gen_t *g, const char *host, size_t len,
                                    const lx_host_slot_t **slot);
/* The same, falling back to the default vhost (which may be NULL). */
lx_vhost_t *lx_gen_find_vhost(const lx_gen_t *g, const char *host, size_t len);

/* The location of vh whose prefix is the longest match of path, or NULL. */
const lx_location_t *lx_vhost_location(const lx_vhost_t *vh, const char *path, size_t len);

/* The upstream named name, or NULL. */
const lx_upstream_t *lx_gen_upstream(const lx_gen_t *g, const char *name, size_t len);

/* Prints what rule r tests and does ("deny prefix=/admin/ status=403"),
 * without its file:line and newline (luxd -T, --explain). */
void lx_rule_describe(const lx_rule_t *r, FILE *out);

/* Prints the compiled tables (luxd -T). */
void lx_gen_dump(const lx_gen_t *g, FILE *out);

#endif
