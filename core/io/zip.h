/* zip.h - a validated, read-only zip archive reader (the container of
 * torch.save files, PyTorch >= 1.6).
 *
 * The file is mmapped and the central directory read and checked before any
 * entry is: the end record found within the last 64 KiB + 22 bytes; every
 * central entry, name and extra field inside the directory; every local
 * header inside the file, before the directory, agreeing with its central
 * entry's name; every entry's data inside [0, directory) and no two entries'
 * spans [local header, data end) overlapping; names without NUL bytes,
 * backslashes, a leading '/', or a '..' or empty component (path traversal),
 * at most SR_ZIP_MAX_NAME bytes, none twice; at most SR_ZIP_MAX_ENTRIES
 * entries.  Encrypted entries, methods other than stored (0) and deflate (8),
 * multi-disk archives and zip64 (0xFFFFFFFF sizes or offsets, more than
 * 65535 entries) are refused with a message naming the field.
 *
 * Reading an entry checks its CRC-32.  A deflated entry is inflated into a
 * buffer of its declared size, never past it: the declared size may be at
 * most SR_ZIP_MAX_RATIO times the compressed size plus 64 KiB (zip bombs;
 * zip32 sizes cap it at 4 GiB), and the stream must end exactly there. */
#ifndef SR_ZIP_H
#define SR_ZIP_H

#include <stddef.h>
#include <stdint.h>

#define SR_ZIP_MAX_ENTRIES 65535
#define SR_ZIP_MAX_NAME 1024
#define SR_ZIP_MAX_RATIO 1032u          /* deflate's own best ratio is ~1032:1 */

typedef struct sr_zip_entry {
    char *name;
    uint64_t header;   /* offset of the local header */
    uint64_t data;     /* offset of the (compressed) data */
    uint64_t csize, usize;
    uint32_t crc;
    int method;        /* 0 stored, 8 deflate */
} sr_zip_entry;

typedef struct sr_zip {
    char *path;
    const unsigned char *map;
    size_t size;
    int mapped;
    int n;
    sr_zip_entry *entries;   /* in central-directory order */
    sr_zip_entry **by_name;  /* sorted by name (sr_zip_find) */
} sr_zip;

/* Open and validate.  Closes z on failure (sr_zip_close is then a no-op). */
int sr_zip_open(sr_zip *z, const char *path);
/* Validate an in-memory archive (not copied; must outlive z). */
int sr_zip_open_memory(sr_zip *z, const void *buf, size_t size, const char *label);
void sr_zip_close(sr_zip *z);
/* Whether the bytes start like a zip archive (a local header). */
int sr_zip_sniff(const void *buf, size_t size);

const sr_zip_entry *sr_zip_find(const sr_zip *z, const char *name);
/* The entry's bytes, CRC checked: *data points into the map for a stored
 * entry (*owned = NULL) or to a malloc'd buffer the caller frees (*owned). */
int sr_zip_read(const sr_zip *z, const sr_zip_entry *e, const unsigned char **data, void **owned);

#endif
