/* download.c - a file fetched over HTTP(S) with libcurl (download.h).
 *
 * The transfer is one curl easy handle per attempt.  Range, status and
 * sizes are handled here rather than by CURLOPT_RESUME_FROM, which fails
 * outright when a server ignores the range: we read each response's status
 * line, Content-Length and Content-Range in the header callback and decide
 * at the end of its headers whether to append (206 at our offset), start
 * over (200: the .part is truncated) or ignore the body (a redirect, an
 * error page).  The body is written with write(2) straight to the .part,
 * so whatever reached the file is a prefix of it when the process dies. */
#include "io/download.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fsutil.h"

#define OPT(f) offsetof(sr_download_opts, f)
const sr_opt_spec sr_download_specs[] = {
    {.name = "sha256", .type = SR_OPT_STR, .offset = OPT(sha256),
     .help = "expected SHA-256 (hex), whole or its first 8 or more digits"},
    {.name = "max_bytes", .type = SR_OPT_INT, .lo = 1, .hi = 1e15, .def = 8589934592.0, .offset = OPT(max_bytes),
     .def_text = "8 GiB", .help = "refuse a larger file"},
    {.name = "connect_timeout", .type = SR_OPT_INT, .lo = 1, .hi = 3600, .def = 30, .offset = OPT(connect_timeout),
     .help = "seconds to connect"},
    {.name = "stall_timeout", .type = SR_OPT_INT, .lo = 1, .hi = 86400, .def = 60, .offset = OPT(stall_timeout),
     .help = "seconds without a byte before giving up"},
    {.name = "max_redirects", .type = SR_OPT_INT, .lo = 0, .hi = 20, .def = 5, .offset = OPT(max_redirects),
     .help = "redirects followed"},
    {.name = "progress", .type = SR_OPT_INT, .lo = 0, .hi = 2, .def = 0, .offset = OPT(progress),
     .help = "0 none; 1 redrawn on a terminal, else a line every progress_every seconds (and a closing "
             "line after any); 2 as 1 with the closing line always"},
    {.name = "progress_every", .type = SR_OPT_NUM, .lo = 0, .hi = 86400, .def = 10, .offset = OPT(progress_every),
     .help = "seconds between progress lines when stderr is not a terminal (0: none; SRGEO_PROGRESS)"},
    {.name = NULL},
};
#undef OPT

void sr_download_defaults(sr_download_opts *o)
{
    memset(o, 0, sizeof *o);
    sr_opts_defaults(sr_download_specs, o);
}

int sr_sha256_matches(const char *hex, const char *want)
{
    size_t n = strlen(want);
    return n >= 8 && n <= 2 * SR_SHA256_LEN && strncasecmp(hex, want, n) == 0;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One attempt's state, shared by the callbacks. */
typedef struct xfer {
    const char *url, *name;
    int fd;
    int64_t offset;  /* bytes in the .part when the response's body starts */
    int64_t got;     /* body bytes written in this attempt */
    int64_t max;
    /* the current response (reset at each status line: redirects and
     * 100 Continue bring several) */
    long status;
    char reason[64];
    int64_t length;  /* Content-Length, -1 unknown */
    int64_t range_start, range_total; /* Content-Range, -1 unknown */
    int accept;      /* this response's body goes into the .part */
    int reset;       /* the .part was emptied: the server's range did not fit */
    int64_t total;   /* expected size of the whole file, -1 unknown */
    char err[600];   /* our own reason to abort (the callbacks return an error) */
    /* progress */
    int progress, tty;
    double every;    /* seconds between lines off a terminal; <= 0: none */
    double t0, last;
    int64_t start;   /* bytes in the .part when this call began */
    int shown;
} xfer;

static int64_t parse_i64(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return (end == s || errno || v < 0) ? -1 : (int64_t)v;
}

/* The end of a response's headers: decide what its body is. */
static int headers_done(xfer *x)
{
    if (x->status == 206) {
        if (x->range_start != x->offset) { /* not the bytes asked for: start over (transfer() retries once) */
            snprintf(x->err, sizeof x->err,
                     "download %s: asked for the bytes from %lld on, the server sent a range starting at %lld", x->url,
                     (long long)x->offset, (long long)x->range_start);
            x->reset = ftruncate(x->fd, 0) == 0;
            return -1;
        }
        x->total = x->range_total >= 0 ? x->range_total : x->length >= 0 ? x->offset + x->length : -1;
    } else if (x->status == 200) {
        if (x->offset > 0) { /* the server ignored the range: start over */
            if (ftruncate(x->fd, 0) != 0) {
                snprintf(x->err, sizeof x->err, "download %s: truncating the .part: %s", x->url, strerror(errno));
                return -1;
            }
            x->offset = 0;
        }
        x->total = x->length;
    } else {
        return 0; /* a redirect, an error page or a 416: the body is not the file */
    }
    if (x->total > x->max) {
        snprintf(x->err, sizeof x->err,
                 "download %s: the server announces %lld bytes, more than the limit of %lld (max_bytes); nothing "
                 "was written", x->url, (long long)x->total, (long long)x->max);
        return -1;
    }
    x->accept = 1;
    return 0;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    char line[512];
    size_t k = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, data, k);
    line[k] = 0;
    while (k > 0 && (line[k - 1] == '\r' || line[k - 1] == '\n'))
        line[--k] = 0;
    if (strncmp(line, "HTTP/", 5) == 0) {
        const char *sp = strchr(line, ' ');
        x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        const char *r = sp ? strchr(sp + 1, ' ') : NULL;
        snprintf(x->reason, sizeof x->reason, "%s", r ? r + 1 : "");
        x->length = x->range_start = x->range_total = -1;
        x->accept = 0;
    } else if (strncasecmp(line, "content-length:", 15) == 0) {
        x->length = parse_i64(line + 15 + strspn(line + 15, " \t"));
    } else if (strncasecmp(line, "content-range:", 14) == 0) {
        const char *v = line + 14 + strspn(line + 14, " \t");
        if (strncasecmp(v, "bytes ", 6) == 0) {
            v += 6;
            x->range_start = *v == '*' ? -1 : parse_i64(v);
            const char *slash = strchr(v, '/');
            x->range_total = slash && slash[1] != '*' ? parse_i64(slash + 1) : -1;
        }
    } else if (k == 0) {
        if (headers_done(x))
            return 0; /* curl aborts the transfer with CURLE_WRITE_ERROR */
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    if (!x->accept)
        return len; /* an error page or a redirect's body */
    if (x->offset + x->got + (int64_t)len > x->max) {
        snprintf(x->err, sizeof x->err, "download %s: the body grew past the limit of %lld bytes (max_bytes)", x->url,
                 (long long)x->max);
        return 0;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = write(x->fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            snprintf(x->err, sizeof x->err, "download %s: writing the .part: %s", x->url, strerror(errno));
            return 0;
        }
        done += (size_t)w;
    }
    x->got += (int64_t)len;
    return len;
}

static void show_progress(xfer *x, int final)
{
    double t = now();
    if (final && !x->tty && !x->shown && x->progress < 2)
        return; /* a short download off a terminal says nothing */
    if (!final && (x->tty ? t - x->last < 0.25 : x->every <= 0 || t - x->last < x->every))
        return;
    x->last = t;
    int64_t have = x->offset + x->got;
    double rate = (double)(have - x->start) / fmax(t - x->t0, 1e-3);
    char line[256];
    int k = snprintf(line, sizeof line, "srgeo: %s: %.1f", x->name, (double)have / 1e6);
    if (x->total > 0)
        k += snprintf(line + k, sizeof line - (size_t)k, " of %.1f MB (%d%%)", (double)x->total / 1e6,
                      (int)(100.0 * (double)have / (double)x->total));
    else
        k += snprintf(line + k, sizeof line - (size_t)k, " MB");
    k += snprintf(line + k, sizeof line - (size_t)k, ", %.1f MB/s", rate / 1e6);
    double left = x->total > 0 && rate > 0 ? (double)(x->total - have) / rate : -1;
    if (left >= 100 && !final)
        snprintf(line + k, sizeof line - (size_t)k, ", %d min %02d s left", (int)(left / 60), (int)left % 60);
    else if (left >= 0 && !final)
        snprintf(line + k, sizeof line - (size_t)k, ", %.0f s left", left);
    fprintf(stderr, x->tty ? "\r%s\033[K%s" : "%s\n%s", line, x->tty && final ? "\n" : "");
    fflush(stderr);
    x->shown = 1;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    xfer *x = ud;
    if (sr_interrupt_pending()) {
        snprintf(x->err, sizeof x->err, "interrupted");
        return 1;
    }
    if (x->progress && x->accept)
        show_progress(x, 0);
    return 0;
}

/* One request from x->offset on; the curl code (x->err set when our
 * callbacks aborted it). */
static CURLcode attempt(xfer *x, const sr_download_opts *o, char *cerr)
{
    CURL *c = curl_easy_init();
    if (!c)
        return CURLE_FAILED_INIT;
    char range[32];
    x->got = 0, x->status = 0, x->accept = 0, x->reset = 0, x->total = -1, x->err[0] = cerr[0] = 0;
    curl_easy_setopt(c, CURLOPT_URL, x->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "srgeo");
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    /* a proxy's "200 Connection established" is not the answer (it would
     * read as a server ignoring the range) */
    curl_easy_setopt(c, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)o->max_redirects);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)o->connect_timeout);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)o->stall_timeout);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    if (x->offset > 0) {
        snprintf(range, sizeof range, "%lld-", (long long)x->offset);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    return rc;
}

/* A failure worth resuming at once: the connection broke after bytes came. */
static int transient(CURLcode rc)
{
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_HTTP2_STREAM;
}

/* Transfer into the open .part (fd) until it holds the whole file. */
static int transfer(xfer *x, const sr_download_opts *o, const char *part)
{
    char cerr[CURL_ERROR_SIZE];
    int restarted = 0;
    for (int tries = 0;; tries++) {
        struct stat st;
        if (fstat(x->fd, &st) != 0)
            return sr_fail("download %s: %s: %s", x->url, part, strerror(errno));
        x->offset = (int64_t)st.st_size;
        CURLcode rc = attempt(x, o, cerr);
        if (x->err[0] && strcmp(x->err, "interrupted") == 0) {
            sr_interrupt_clear();
            return sr_fail("download %s: interrupted; the %lld bytes received are kept in %s (run again to resume)",
                           x->url, (long long)(x->offset + x->got), part);
        }
        if (x->reset && !restarted++)
            continue;
        if (x->err[0])
            return sr_fail("%s", x->err);
        int complete = x->total >= 0 && x->offset + x->got == x->total;
        if (rc == CURLE_OK && x->accept && (x->total < 0 || complete))
            return 0;
        if (rc == CURLE_OK && x->status == 416 && x->offset > 0) {
            if (x->range_total == x->offset)
                return 0; /* the .part already held the whole file */
            if (!restarted++ && ftruncate(x->fd, 0) == 0)
                continue; /* the .part is longer than the file: start over, once */
        }
        if (rc == CURLE_OK && !x->accept)
            return sr_fail("download %s: HTTP %ld%s%s", x->url, x->status, x->reason[0] ? " " : "", x->reason);
        if ((transient(rc) || rc == CURLE_OK) && x->got > 0 && tries < SR_DOWNLOAD_RETRIES) {
            if (x->progress)
                fprintf(stderr, "%ssrgeo: %s: the connection broke after %lld bytes; resuming\n", x->shown && x->tty ? "\n" : "",
                        x->name, (long long)(x->offset + x->got));
            continue;
        }
        char kept[4200] = "";
        if (x->offset + x->got > 0)
            snprintf(kept, sizeof kept, "; the %lld bytes received are kept in %s (run again to resume)",
                     (long long)(x->offset + x->got), part);
        if (rc == CURLE_OK)
            return sr_fail("download %s: the server sent %lld of %lld bytes%s", x->url,
                           (long long)(x->offset + x->got), (long long)x->total, kept);
        return sr_fail("download %s: %s%s%s", x->url, cerr[0] ? cerr : curl_easy_strerror(rc),
                       rc == CURLE_TOO_MANY_REDIRECTS ? " (max_redirects)"
                       : rc == CURLE_UNSUPPORTED_PROTOCOL ? " (only http and https are fetched)" : "", kept);
    }
}

/* 0; -1 when the file cannot be read (or Ctrl-C); -2 on a mismatch. */
static int check_digest(const char *url, const char *path, const char *want, char *hex, const char *after)
{
    if (sr_fs_sha256_file(path, "download", hex, NULL))
        return -1;
    if (want && !sr_sha256_matches(hex, want)) {
        sr_fail("download %s: sha256 mismatch: expected %s%s, got %s%s", url,
                strlen(want) < 2 * SR_SHA256_LEN ? "a digest starting " : "", want, hex, after);
        return -2;
    }
    return 0;
}

int sr_download(const char *url, const char *dest, const sr_download_opts *o, char hex[2 * SR_SHA256_LEN + 1])
{
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return sr_fail("download %s: only http:// and https:// URLs are fetched", url);
    if (o->sha256 && (strlen(o->sha256) < 8 || strlen(o->sha256) > 2 * SR_SHA256_LEN ||
                      strspn(o->sha256, "0123456789abcdefABCDEF") != strlen(o->sha256)))
        return sr_fail("download %s: sha256 must be 8 to 64 hex digits, got '%s'", url, o->sha256);
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return sr_fail("download %s: libcurl: %s", url, curl_easy_strerror(curl_init_rc));
    size_t n = strlen(dest);
    char *lock = malloc(n + 6), *part = malloc(n + 6);
    if (!lock || !part) {
        free(lock), free(part);
        return sr_fail("download %s: out of memory", url);
    }
    snprintf(lock, n + 6, "%s.lock", dest);
    snprintf(part, n + 6, "%s.part", dest);
    const char *name = strrchr(dest, '/') ? strrchr(dest, '/') + 1 : dest;
    int rc = -1, fd = -1;
    int lfd = sr_lock_file(lock, 0);
    if (lfd < 0 && errno == EWOULDBLOCK) {
        if (o->progress)
            fprintf(stderr, "srgeo: %s: another process is downloading it; waiting (%s)\n", name, lock);
        while ((lfd = sr_lock_file(lock, 0)) < 0 && errno == EWOULDBLOCK) {
            if (sr_interrupt_pending()) {
                sr_interrupt_clear();
                sr_fail("download %s: interrupted while waiting for another process (%s)", url, lock);
                goto out;
            }
            usleep(100 * 1000);
        }
    }
    if (lfd < 0)
        goto out;
    if (access(dest, F_OK) == 0) { /* finished by the process we waited for */
        rc = check_digest(url, dest, o->sha256, hex, "") ? -1 : 0;
        goto out;
    }
    fd = open(part, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        sr_fail("download %s: %s: %s", url, part, strerror(errno));
        goto out;
    }
    xfer x = {.url = url, .name = name, .fd = fd, .max = o->max_bytes, .progress = (int)o->progress,
              .every = o->progress_every, .tty = isatty(2)};
    struct stat st;
    x.start = fstat(fd, &st) == 0 ? (int64_t)st.st_size : 0;
    x.t0 = x.last = now();
    if (transfer(&x, o, part)) {
        if (fstat(fd, &st) == 0 && st.st_size == 0)
            unlink(part); /* nothing to resume: no empty .part left behind */
        goto out;
    }
    if (x.progress)
        show_progress(&x, 1);
    if (fsync(fd) != 0) {
        sr_fail("download %s: %s: %s", url, part, strerror(errno));
        goto out;
    }
    close(fd), fd = -1;
    /* complete and wrong: the .part goes too (resuming it would only repeat
     * the mismatch); one that could not be read (Ctrl-C) stays */
    int bad = check_digest(url, part, o->sha256, hex, "; the file was not kept");
    if (bad == -2)
        unlink(part);
    if (bad)
        goto out;
    if (rename(part, dest) != 0) {
        sr_fail("download %s: rename %s to %s: %s", url, part, dest, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (lfd >= 0)
        close(lfd);
    free(lock), free(part);
    return rc;
}
