/* fsutil.h - atomic file writes: write to PATH.tmp.PID, fsync, rename over
 * PATH, so a crash never leaves a half-written result or checkpoint; the
 * temporaries a killed writer leaves are removed by sr_tmp_clean; advisory
 * locks on files (sr_lock_file); opening a file the user named for reading
 * without blocking on a FIFO (sr_fs_open_regular); a file's FNV-1a or
 * SHA-256 (sr_fs_hash_file, sr_fs_sha256_file). */
#ifndef SR_FSUTIL_H
#define SR_FSUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "base/sha256.h"

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

/* Open path for reading ("rb") when it is a regular file (links followed);
 * anything else fails at once with "WHAT: PATH is a FIFO, not a regular
 * file" (a directory, a device, a socket likewise), and NULL.  A plain
 * fopen of a FIFO blocks until a writer appears, forever when none does:
 * the open is O_NONBLOCK, the check is on the opened descriptor (no race
 * with a rename between a stat and the open), then the descriptor is made
 * blocking again for ordinary reads.  what: the reader's name for errors
 * ("npy", "safetensors", ...). */
FILE *sr_fs_open_regular(const char *path, const char *what);

/* FNV-1a 64 of a regular file's bytes (opened by sr_fs_open_regular): the
 * content identity of a weight file in the unit cache, not a
 * cryptographic hash.  *st (may be NULL) gets the opened file's status;
 * a file that changes while it is read (size, mtime or ctime) fails, as
 * does Ctrl-C.  0, or -1 with the error set. */
int sr_fs_hash_file(const char *path, const char *what, uint64_t *hash, struct stat *st);

/* SHA-256 of a regular file's bytes as 64 lower-case hex digits (the
 * weights cache checks downloads and cached files with it, lua/srgeo/
 * weights.lua); the same reading, status and failures as sr_fs_hash_file. */
int sr_fs_sha256_file(const char *path, const char *what, char hex[2 * SR_SHA256_LEN + 1], struct stat *st);

/* The same check by name, for paths handed to a library that opens them
 * itself: 0 for a regular file, else -1 with the same message (or the
 * stat error). */
int sr_fs_check_regular(const char *path, const char *what);

/* A user-named regular file (opened by sr_fs_open_regular) mapped
 * read-only: *map its bytes (NULL for an empty file, which maps nothing),
 * *size their count; the caller munmaps a non-NULL map.  0, or -1 with
 * "WHAT PATH: ..." set. */
int sr_fs_map_regular(const char *path, const char *what, const void **map, size_t *size);

#endif
