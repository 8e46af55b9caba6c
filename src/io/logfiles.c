#include "logfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../log.h"

typedef struct {
    char *path; /* NULL: a free slot */
    int fd;
    int refs;
} slot_t;

/* The table grows and frees slots under the lock; loops never read it
 * (they have the fd in their generation's lx_access_log_conf_t). */
static slot_t *slots;
static int nslots;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int lx_logfiles_acquire(const char *path, int *fd) {
    pthread_mutex_lock(&lock);
    int free_slot = -1, r;
    for (int i = 0; i < nslots; i++) {
        if (slots[i].path == NULL) {
            if (free_slot < 0) free_slot = i;
        } else if (strcmp(slots[i].path, path) == 0) {
            slots[i].refs++;
            *fd = slots[i].fd;
            pthread_mutex_unlock(&lock);
            return i;
        }
    }
    if (free_slot < 0) {
        slot_t *n = realloc(slots, (size_t)(nslots + 1) * sizeof(*n));
        if (n == NULL) {
            pthread_mutex_unlock(&lock);
            return -ENOMEM;
        }
        slots = n;
        free_slot = nslots++;
        slots[free_slot].path = NULL;
    }
    char *copy = strdup(path);
    /* stdout and stderr are used as luxd got them: under systemd they are
     * the journal's socket, which open("/dev/stdout") cannot open. */
    int f = copy ? lx_log_std_fd(path) : -ENOMEM;
    if (copy && f < 0) f = lx_log_open_file(path);
    if (f < 0) {
        free(copy);
        r = f;
    } else {
        slots[free_slot] = (slot_t){copy, f, 1};
        *fd = f;
        r = free_slot;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

void lx_logfiles_release(int slot) {
    pthread_mutex_lock(&lock);
    if (slot >= 0 && slot < nslots && slots[slot].path && --slots[slot].refs == 0) {
        if (slots[slot].fd > 2) close(slots[slot].fd);
        free(slots[slot].path);
        slots[slot].path = NULL;
    }
    pthread_mutex_unlock(&lock);
}

void lx_logfiles_reopen(void (*report)(const char *path, int err)) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nslots; i++) {
        if (slots[i].path == NULL || slots[i].fd <= 2) continue; /* stdout, stderr */
        int fd = lx_log_open_file(slots[i].path);
        if (fd < 0) {
            report(slots[i].path, fd);
            continue;
        }
        /* dup3 swaps the file behind the slot's fd atomically: a loop
         * writing at this moment writes to the old file or the new one. */
        dup3(fd, slots[i].fd, O_CLOEXEC); /* as dup2, keeping close-on-exec (t/180) */
        close(fd);
    }
    pthread_mutex_unlock(&lock);
}
