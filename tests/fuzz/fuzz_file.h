/* fuzz_file.h - the input of a fuzz target whose reader takes a path (as the
 * loaders users call do): the bytes written to a file in /dev/shm (tmpfs:
 * no disk traffic), named by the target and the process.  Returns the path
 * (static; unlink it when done) or NULL. */
#ifndef SR_FUZZ_FILE_H
#define SR_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static const char *fuzz_file(const char *tag, const uint8_t *data, size_t size)
{
    static char path[96];
    snprintf(path, sizeof path, "/dev/shm/srgeo-fuzz-%s-%d", tag, (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return NULL;
    fwrite(data, 1, size, f);
    fclose(f);
    return path;
}

#endif
