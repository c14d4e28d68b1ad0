/* fsutil.h - atomic file writes: write to PATH.tmp.PID, fsync, rename over
 * PATH, so a crash never leaves a half-written result or checkpoint. */
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

#endif
