/* fsutil.h - atomic file writes: write to PATH.tmp.PID, fsync, rename over
 * PATH, so a crash never leaves a half-written result or checkpoint; the
 * temporaries a killed writer leaves are removed by sr_tmp_clean; advisory
 * locks on files (sr_lock_file); files opened for reading only when they
 * are regular files (sr_fs_open_regular). */
#ifndef SR_FSUTIL_H
#define SR_FSUTIL_H

#include <stdio.h>

typedef struct sr_atomic_file {
    FILE *fp;
    char path[4096];
    char tmp[4120];
} sr_atomic_file;

int sr_atomic_open(sr_atomic_file *f, const char *path);
/* Flush, fsync, close and rename; on any write error the temp file is
 * removed and the old PATH is untouched. */
int sr_atomic_commit(sr_atomic_file *f);
void sr_atomic_abort(sr_atomic_file *f);

/* Remove the temporaries of dead writers in dir: regular files named
 * NAME.tmp.PID (this file's writers and lua/srgeo/util.lua's) whose process
 * PID no longer exists, is a zombie, or started after the file was last
 * written (the PID was reused); a live writer's, even another user's, are
 * kept.
 * *removed (may be NULL) gets the count; 0, or -1 when dir cannot be read. */
int sr_tmp_clean(const char *dir, int *removed);

/* An advisory lock (flock) on path, created if absent: exclusive, without
 * waiting (wait = 0: -1 with errno EWOULDBLOCK when another process holds
 * it) or waiting for it.  Returns the descriptor holding the lock (close it,
 * or exit, to release), or -1 with the error set. */
int sr_lock_file(const char *path, int wait);

/* path opened for reading ("rb") when it is a regular file (symlinks
 * followed); a FIFO, directory, device or socket is refused without
 * blocking (a FIFO without a writer would block fopen forever).  NULL with
 * "WHAT PATH: ..." (cannot open: the reason; is a FIFO, not a regular file). */
FILE *sr_fs_open_regular(const char *path, const char *what);

#endif
