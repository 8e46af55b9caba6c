/* Opening a file below a document root under a symbolic-link policy
 * (follow_symlinks), the way nginx's disable_symlinks does. Runs on the
 * thread pool, when the file cache fills an entry; never per request. */
#ifndef LX_OPEN_BENEATH_H
#define LX_OPEN_BENEATH_H

#include <stddef.h>

#include "../config/config.h"

/* Opens path for reading (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC). The
 * first root_len bytes of path are the document root, which is trusted as
 * it is (it may itself be or contain a link: the operator chose it); the
 * policy applies to every component after it:
 *
 *   LX_SYMLINKS_FOLLOW  every link is followed (a plain open(2));
 *   LX_SYMLINKS_REFUSE  a link anywhere below the root refuses the path;
 *   LX_SYMLINKS_OWNER   a link is followed only when the link and the object
 *                       it resolves to have the same owner (uid).
 *
 * Returns the fd, or a negative errno: -EACCES when the policy refuses the
 * path (the caller answers 403), otherwise what open(2) would say. Except
 * with LX_SYMLINKS_FOLLOW, a ".." component after the root is refused with
 * -EACCES too, wherever it would lead: the root is the boundary.
 *
 * Race-safety: every component is opened relative to the fd of the one
 * before it, never by name from the root again, so a directory swapped for a
 * link after it was checked cannot redirect the rest of the walk. With
 * LX_SYMLINKS_REFUSE, openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH) does the
 * whole walk in the kernel when it is there (Linux 5.6); the walk below is
 * the fallback. With LX_SYMLINKS_OWNER the owner compared against the link's
 * is the owner of the object actually opened (fstat on the fd), so swapping
 * the target after the check cannot get a file of another owner served. */
int lx_open_beneath(const char *path, size_t root_len, lx_symlinks_t mode);

/* Whether the last failure of lx_open_beneath on this thread was the
 * policy's refusal (its -EACCES), not an error of open(2): for the error
 * log's word on it. */
int lx_open_beneath_refused(void);

/* For the unit tests: on, the walk is used even where openat2 exists, so
 * both ways are tested on one kernel. */
void lx_open_beneath_force_walk(int on);

#endif
