/* download.h - one file fetched over HTTP(S) with libcurl into a local path,
 * for the weights cache (lua/srgeo/weights.lua):
 *
 *   sr_download_opts o;
 *   sr_download_defaults(&o);
 *   o.sha256 = "f37072fd";                     // expected digest or prefix
 *   char hex[65];
 *   if (sr_download(url, "/cache/resnet18-f37072fd.pth", &o, hex)) ... sr_errmsg()
 *
 * What it guarantees:
 *  - resumable: bytes go to DEST.part (written straight through, so a killed
 *    process leaves a prefix of the file); a later call asks for the rest
 *    with an HTTP Range request, and starts over when the server answers
 *    with the whole file (200) instead; a connection dropped mid-way is
 *    resumed at once, up to SR_DOWNLOAD_RETRIES times;
 *  - atomic: DEST appears only by rename of the complete .part after its
 *    SHA-256 matched (a mismatch removes the .part and fails naming both
 *    digests);
 *  - locked: an flock on DEST.lock, so two processes never write the same
 *    .part; the second waits (Ctrl-C stops the wait), then finds DEST and
 *    only checks it;
 *  - bounded: http and https only (redirects too), at most max_redirects
 *    of them, a connect timeout, a stall timeout (no byte for that long),
 *    and at most max_bytes (a larger Content-Length is refused before any
 *    byte is written, a body that grows past it is cut);
 *  - Ctrl-C (the core's interrupt flag) aborts the transfer within a
 *    second and keeps the .part for the next call;
 *  - progress on stderr (bytes, %, rate, time left) when asked: a line
 *    redrawn in place on a terminal, else a line every progress_every
 *    seconds (srgeo's SRGEO_PROGRESS convention), so a short download in a
 *    log says nothing and a long one says where it is.
 * The lock file is left in place: removing a file others may be waiting
 * on would race (as the unit cache's). */
#ifndef SR_DOWNLOAD_H
#define SR_DOWNLOAD_H

#include <stdint.h>

#include "base/opts.h"
#include "base/sha256.h"

#define SR_DOWNLOAD_RETRIES 3

typedef struct sr_download_opts {
    const char *sha256;    /* expected SHA-256 in hex, whole or a prefix of >= 8 digits; NULL: any */
    int64_t max_bytes;     /* refuse a larger file */
    int64_t connect_timeout; /* seconds */
    int64_t stall_timeout;   /* seconds without a byte before giving up */
    int64_t max_redirects;
    int64_t progress;      /* 0 none, 1 as described above, 2 with a closing line always */
    double progress_every; /* seconds between lines when stderr is not a terminal; 0: none */
} sr_download_opts;

/* The options as declared (sha256, max_bytes, connect_timeout,
 * stall_timeout, max_redirects, progress, progress_every), for
 * sr_opts_read. */
extern const sr_opt_spec sr_download_specs[];

void sr_download_defaults(sr_download_opts *o);

/* Fetch url into dest (see above).  hex gets the file's SHA-256.  When dest
 * already exists (another process finished it while this one waited for
 * the lock), it is only checked.  0, or -1 with the error set: "download
 * URL: ..." naming the status, the limit or the digests. */
int sr_download(const char *url, const char *dest, const sr_download_opts *o, char hex[2 * SR_SHA256_LEN + 1]);

/* Whether hex (any case) starts with the expected digest or prefix want. */
int sr_sha256_matches(const char *hex, const char *want);

#endif
