/* The running server as the main thread sees it: the current generation,
 * the listening sockets of every loop, the log files, and reload. */
#ifndef LX_SERVER_H
#define LX_SERVER_H

#include <uv.h>

#include "config/config.h"

/* Binds (or adopts from LISTEN_FDS) the listeners, opens the logs, drops
 * privileges, writes the pid file and starts the worker loops. `exited` is
 * signalled as loops end. Returns 0, or a negative errno after logging why. */
int lx_server_start(const char *file, const char *prefix, lx_gen_t *gen, uv_async_t *exited);

/* Runs the config again and, only if every step works, hands the new
 * generation to the loops. A failure changes nothing and logs why. */
int lx_server_reload(void);

/* Reopens the error and access logs (logrotate). */
void lx_server_reopen(void);

void lx_server_stop(int how);
/* All loops have ended (checked from the exited callback). */
int lx_server_all_exited(void);
/* Joins the loops, removes the pid file, frees everything. */
void lx_server_cleanup(void);

/* sd_notify: a datagram to $NOTIFY_SOCKET, when set. */
void lx_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Where `luxd -s reload` reads the outcome of a reload: pid_file.reload. */
int lx_reload_status_path(const char *pid_file, char *out, size_t len);

#endif
