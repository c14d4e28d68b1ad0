/* fsutil.c - atomic writes (temp + fsync + rename). */
#include "base/fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

int sr_atomic_open(sr_atomic_file *f, const char *path)
{
    f->fp = NULL;
    if (!*path)
        return sr_fail("write: empty file name");
    if (strlen(path) >= sizeof f->path)
        return sr_fail("write %s: path too long", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%ld", path, (long)getpid());
    f->fp = fopen(f->tmp, "wb");
    if (!f->fp)
        return sr_fail("write %s: %s", path, strerror(errno));
    return 0;
}

void sr_atomic_abort(sr_atomic_file *f)
{
    if (f->fp)
        fclose(f->fp);
    f->fp = NULL;
    unlink(f->tmp);
}

int sr_atomic_commit(sr_atomic_file *f)
{
    int bad = ferror(f->fp) || fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0;
    int err = errno;
    if (fclose(f->fp) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    f->fp = NULL;
    if (bad) {
        unlink(f->tmp);
        return sr_fail("write %s: %s", f->path, strerror(err));
    }
    if (rename(f->tmp, f->path) != 0) {
        err = errno;
        unlink(f->tmp);
        return sr_fail("write %s: rename failed: %s", f->path, strerror(err));
    }
    return 0;
}
