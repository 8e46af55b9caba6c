/* luxd -s: finding the running server and signalling it, without running
 * the config (see ctl.c and luxd(8)). */
#ifndef LX_CTL_H
#define LX_CTL_H

#include <stddef.h>

/* The signal `luxd -s NAME` sends (stop, quit, reopen, reload), or 0. */
int lx_ctl_signal_number(const char *name);

/* Finds `pid_file = "..."` in a config's text without running it: the
 * tokens of the Lua source are read (comments and strings skipped), and
 * every assignment to a name or field pid_file must give the same plain
 * string literal. Returns 1 with the value in out, 0 when the text assigns
 * no pid_file, -EINVAL when one is not a plain literal or the values differ
 * (*why says which), -ENOENT when it assigns none but includes a file
 * (which may: not read here), -ENAMETOOLONG. */
int lx_ctl_scan_pid_file(const char *text, size_t len, char *out, size_t outlen, const char **why);

/* Signals the server: its pid file is pid_opt (-p) when given, else the
 * literal pid_file of the config file conf, else def (the built-in
 * default; NULL or "" for none). conf_given: -c was on the command line.
 * For SIGHUP, waits for the server's verdict on the reload and prints it.
 * Returns the exit status. */
int lx_ctl_send(const char *conf, int conf_given, const char *pid_opt, const char *def, int sig);

#endif
