/* The access log files of the running server: one open file per path,
 * shared by every generation and every loop that logs there. Each file has
 * a slot whose fd never changes while the slot is held, so a reopen swaps
 * the file under every user at once (dup2) and no loop takes a lock to
 * write. Slots are held by generations (lx_gen_t log_slots): a path that
 * one reload drops stays open while requests of the older generation still
 * log there, and is closed when the last generation naming it is freed. */
#ifndef LX_LOGFILES_H
#define LX_LOGFILES_H

/* Opens path for appending, or shares the slot already open on it, and
 * takes a reference. "stdout" and "stderr" (or /dev/stdout, /dev/stderr)
 * are fds 1 and 2 themselves, never closed or reopened. Returns the slot (0..) with *fd set, or a
 * negative errno. Main thread only. */
int lx_logfiles_acquire(const char *path, int *fd);
/* Gives back a reference; the last one closes the file. Any thread (a
 * generation may be freed on a loop's thread). */
void lx_logfiles_release(int slot);
/* Opens every path but stdout and stderr again (logrotate moved the files), keeping the old file
 * where the new one cannot be opened: report(path, err) is called for each
 * of those. Main thread only. */
void lx_logfiles_reopen(void (*report)(const char *path, int err));

#endif
