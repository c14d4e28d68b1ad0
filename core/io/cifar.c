/* cifar.c - CIFAR-10 binary batches. */
#include "io/cifar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checked.h"
#include "base/fsutil.h"

#define CIFAR_PIXELS (SR_CIFAR_RECORD - 1)

/* Records in a file, from its size (checked before anything is read). */
static int cifar_records(const char *path, int64_t *n)
{
    struct stat st;
    if (sr_fs_check_regular(path, "cifar"))
        return -1;
    if (stat(path, &st) != 0)
        return sr_fail("cifar %s: %s", path, strerror(errno));
    if (st.st_size == 0 || st.st_size % SR_CIFAR_RECORD != 0)
        return sr_fail("cifar %s: size %lld bytes is not a positive multiple of %d (1 label byte + "
                       "3072 pixel bytes per record; a CIFAR-10 batch is 30730000 bytes%s)",
                       path, (long long)st.st_size, SR_CIFAR_RECORD,
                       st.st_size % 3074 == 0 && st.st_size ? "; this looks like CIFAR-100, "
                                                              "which is not supported"
                                                            : "");
    *n = st.st_size / SR_CIFAR_RECORD;
    return 0;
}

int sr_cifar_load(const char *const *paths, int npaths, sr_u8images *images, int64_t **labels,
                  int64_t *n)
{
    if (npaths < 1)
        return sr_fail("cifar: no batch files given");
    int64_t total = 0, *counts = calloc((size_t)npaths, sizeof *counts);
    if (!counts)
        return sr_fail("cifar: out of memory");
    for (int i = 0; i < npaths; i++) {
        if (cifar_records(paths[i], &counts[i])) {
            free(counts);
            return -1;
        }
        if (counts[i] > SR_MAX_ELEMS - total) { /* (sparse files can claim any size) */
            free(counts);
            return sr_fail("cifar %s: more than 2^40 records in all", paths[i]);
        }
        total += counts[i];
    }
    int64_t px;
    if (SR_COUNT(&px, "cifar: pixels of all records", total, CIFAR_PIXELS)) {
        free(counts);
        return -1;
    }
    uint8_t *data = malloc((size_t)px);
    int64_t *lab = malloc(sizeof *lab * (size_t)total);
    int rc = -1;
    FILE *fp = NULL;
    if (!data || !lab) {
        sr_fail("cifar: out of memory for %lld images", (long long)total);
        goto done;
    }
    int64_t at = 0;
    for (int i = 0; i < npaths; i++) {
        fp = sr_fs_open_regular(paths[i], "cifar");
        if (!fp)
            goto done;
        setvbuf(fp, NULL, _IOFBF, 1 << 20);
        for (int64_t r = 0; r < counts[i]; r++, at++) {
            int c = fgetc(fp);
            if (c == EOF || fread(data + at * CIFAR_PIXELS, 1, CIFAR_PIXELS, fp) != CIFAR_PIXELS) {
                sr_fail("cifar %s: short read in record %lld (file changed while reading?)",
                        paths[i], (long long)r);
                goto done;
            }
            if (c > 9) {
                sr_fail("cifar %s: record %lld has label %d, expected 0..9 (not a CIFAR-10 batch?)",
                        paths[i], (long long)r, c);
                goto done;
            }
            lab[at] = c;
        }
        fclose(fp);
        fp = NULL;
    }
    sr_u8images_free(images);
    *images = (sr_u8images){total, 3, 32, 32, data};
    *labels = lab;
    *n = total;
    data = NULL;
    lab = NULL;
    rc = 0;
done:
    if (fp)
        fclose(fp);
    free(data);
    free(lab);
    free(counts);
    return rc;
}
