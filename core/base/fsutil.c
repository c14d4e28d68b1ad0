/* fsutil.c - atomic writes (temp + fsync + rename), locks, and opening the
 * files a user names without blocking on a FIFO. */
#include "base/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

/* The PID of a temporary's name NAME.tmp.PID, or 0 when it is not one. */
static long tmp_pid(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    if (!t || t == name)
        return 0;
    for (const char *next; (next = strstr(t + 1, ".tmp.")); t = next) /* the last ".tmp." */
        ;
    const char *d = t + 5;
    if (!*d || strspn(d, "0123456789") != strlen(d) || strlen(d) > 9)
        return 0;
    return strtol(d, NULL, 10);
}

/* Whether the writer pid of a file last modified at t (seconds since the
 * epoch) is gone: no such process, a zombie (killed, not yet reaped: a
 * container's init may take its time), or a process that started after t,
 * an earlier process's PID reused (PIDs wrap at 32768 by default, within
 * minutes on a busy machine).  Start = boot time (/proc/stat btime, whole
 * seconds, rounded down) + starttime ticks (/proc/PID/stat field 22), so it
 * errs towards "not after": a live writer's file is never taken. */
static int writer_gone(long pid, double t)
{
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0; /* alive (maybe another user's) and unreadable: keep */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || !p[1] || !p[2])
        return 0;
    if (p[2] == 'Z' || p[2] == 'X') /* field 3, the state */
        return 1;
    unsigned long long ticks = 0;
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (!p || sscanf(p + 1, "%llu", &ticks) != 1)
        return 0;
    f = fopen("/proc/stat", "r");
    unsigned long long btime = 0;
    while (f && fgets(buf, sizeof buf, f))
        if (sscanf(buf, "btime %llu", &btime) == 1)
            break;
    if (f)
        fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    return btime && hz > 0 && (double)btime + (double)ticks / (double)hz > t;
}

int sr_tmp_clean(const char *dir, int *removed)
{
    if (removed)
        *removed = 0;
    DIR *d = opendir(dir);
    if (!d)
        return sr_fail("clean %s: %s", dir, strerror(errno));
    struct dirent *e;
    char path[4200];
    while ((e = readdir(d)) != NULL) {
        long pid = tmp_pid(e->d_name);
        if (pid <= 0 || pid == (long)getpid())
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (!writer_gone(pid, (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec))
            continue;
        if (unlink(path) == 0 && removed)
            (*removed)++;
    }
    closedir(d);
    return 0;
}

/* "WHAT: PATH is a FIFO, not a regular file" (a directory, a device ...). */
static int refuse_kind(const char *path, const char *what, mode_t m)
{
    const char *k = S_ISDIR(m)    ? "a directory"
                    : S_ISFIFO(m) ? "a FIFO"
                    : S_ISCHR(m)  ? "a character device"
                    : S_ISBLK(m)  ? "a block device"
                    : S_ISSOCK(m) ? "a socket"
                                  : NULL;
    if (!k)
        return sr_fail("%s: %s is not a regular file", what, path);
    return sr_fail("%s: %s is %s, not a regular file", what, path, k);
}

FILE *sr_fs_open_regular(const char *path, const char *what)
{
    /* stat first: a device is never opened (opening some has effects); the
     * open itself does not wait for a FIFO's writer (O_NONBLOCK), and fstat
     * checks what was opened (the path may have changed in between). */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        refuse_kind(path, what, st.st_mode);
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        sr_fail("%s %s: %s", what, path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        sr_fail("%s %s: %s", what, path, strerror(e));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        refuse_kind(path, what, st.st_mode);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *fp = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "rb");
    if (!fp) {
        int e = errno;
        close(fd);
        sr_fail("%s %s: %s", what, path, strerror(e));
    }
    return fp;
}

static int same_file_state(const struct stat *a, const struct stat *b)
{
    return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
           a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Every byte of a user-named regular file through fn, in order; fails if
 * the file changes while it is read (size, mtime or ctime) or on Ctrl-C.
 * *out (may be NULL) gets the opened file's status. */
static int read_each(const char *path, const char *what, void (*fn)(void *ctx, const unsigned char *p, size_t n),
                     void *ctx, struct stat *out)
{
    FILE *fp = sr_fs_open_regular(path, what);
    if (!fp)
        return -1;
    struct stat before, after;
    unsigned char buf[1 << 16];
    int rc = fstat(fileno(fp), &before) != 0 ? sr_fail("%s %s: %s", what, path, strerror(errno)) : 0;
    size_t n;
    while (!rc && (n = fread(buf, 1, sizeof buf, fp)) > 0) {
        fn(ctx, buf, n);
        if (sr_interrupted())
            rc = -1;
    }
    if (!rc && ferror(fp))
        rc = sr_fail("%s %s: %s", what, path, strerror(errno));
    if (!rc && (fstat(fileno(fp), &after) != 0 || !same_file_state(&before, &after)))
        rc = sr_fail("%s %s: the file changed while it was read", what, path);
    fclose(fp);
    if (!rc && out)
        *out = after;
    return rc;
}

static void fnv1a(void *ctx, const unsigned char *p, size_t n)
{
    uint64_t h = *(uint64_t *)ctx;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    *(uint64_t *)ctx = h;
}

int sr_fs_hash_file(const char *path, const char *what, uint64_t *hash, struct stat *out)
{
    uint64_t h = 0xcbf29ce484222325ull;
    if (read_each(path, what, fnv1a, &h, out))
        return -1;
    *hash = h;
    return 0;
}

static void sha256_part(void *ctx, const unsigned char *p, size_t n) { sr_sha256_update(ctx, p, n); }

int sr_fs_sha256_file(const char *path, const char *what, char hex[2 * SR_SHA256_LEN + 1], struct stat *out)
{
    sr_sha256 s;
    sr_sha256_init(&s);
    if (read_each(path, what, sha256_part, &s, out))
        return -1;
    uint8_t d[SR_SHA256_LEN];
    sr_sha256_final(&s, d);
    sr_hex(d, SR_SHA256_LEN, hex);
    return 0;
}

int sr_fs_map_regular(const char *path, const char *what, const void **map, size_t *size)
{
    *map = NULL, *size = 0;
    FILE *fp = sr_fs_open_regular(path, what);
    if (!fp)
        return -1;
    struct stat st;
    int rc = fstat(fileno(fp), &st) != 0 ? sr_fail("%s %s: %s", what, path, strerror(errno)) : 0;
    if (!rc && st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fileno(fp), 0);
        if (m == MAP_FAILED)
            rc = sr_fail("%s %s: mmap: %s", what, path, strerror(errno));
        else
            *map = m, *size = (size_t)st.st_size;
    }
    fclose(fp); /* the mapping outlives the descriptor */
    return rc;
}

int sr_fs_check_regular(const char *path, const char *what)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return sr_fail("%s %s: %s", what, path, strerror(errno));
    return S_ISREG(st.st_mode) ? 0 : refuse_kind(path, what, st.st_mode);
}

int sr_lock_file(const char *path, int wait)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return sr_fail("lock %s: %s", path, strerror(errno));
    while (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
        if (errno == EINTR && wait && !sr_interrupt_pending())
            continue;
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            sr_fail("lock %s: held by another process", path);
        else
            sr_fail("lock %s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    return fd;
}
