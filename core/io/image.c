/* image.c - libvips image loading and saving (see image.h for the exact
 * semantics and why they were chosen). */
#ifdef SR_REAL

#else /* generic part */

#include "io/image.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <vips/vips.h>

#include "base/fsutil.h"
#include "base/threads.h"

static inline int sr_omp_thread(void) { return omp_get_thread_num(); }

#define SR_GENERIC_FILE "io/image.c"
#include "base/generic.h"

/* ---- libvips set-up and error text ---------------------------------- */

static pthread_once_t vips_once = PTHREAD_ONCE_INIT;
static int vips_ok;

/* The last libvips warning, kept for errors libvips raises without a
 * message (a PNG with a bad CRC fails with only a warning logged).  Warnings
 * come from libvips' worker threads, hence a lock rather than a
 * thread-local; under parallel loads it may name another file's warning,
 * which is why it is only ever shown as a hint. */
static GMutex warn_lock;
static char last_warning[256];

static void keep_log(const gchar *domain, GLogLevelFlags level, const gchar *msg, gpointer ud)
{
    (void)domain, (void)level, (void)ud;
    g_mutex_lock(&warn_lock);
    snprintf(last_warning, sizeof last_warning, "%s", msg ? msg : "");
    g_mutex_unlock(&warn_lock);
}

static void vips_start(void)
{
    if (VIPS_INIT("srgeo") != 0)
        return;
    /* Operations are keyed by their arguments; a buffer reused at the same
     * address, or a file rewritten in place, would hit a stale entry. */
    vips_cache_set_max(0);
    /* libvips also logs each failure as a GLib warning ("error in tile 0 x
     * 40"); the same text reaches the caller in our error message, so the
     * log lines would only clutter the REPL (the last one is kept as a hint
     * for silent failures).  SRGEO_VIPS_WARNINGS=1 prints them. */
    if (!getenv("SRGEO_VIPS_WARNINGS"))
        g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING, keep_log, NULL);
    vips_ok = 1;
}

int sr_vips_init(void)
{
    pthread_once(&vips_once, vips_start);
    if (!vips_ok)
        return sr_fail("image: libvips failed to initialise: %s", vips_error_buffer());
    return 0;
}

/* The libvips error buffer as one line (its messages end in newlines and
 * may hold several), then cleared so the next error starts fresh. */
static const char *vips_msg(char *buf, size_t n)
{
    snprintf(buf, n, "%s", vips_error_buffer());
    vips_error_clear();
    size_t len = strlen(buf);
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
        buf[--len] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ';';
    if (!*buf) {
        g_mutex_lock(&warn_lock);
        if (last_warning[0])
            snprintf(buf, n, "libvips gave no reason (last libvips warning: %s)", last_warning);
        else
            snprintf(buf, n, "libvips gave no reason");
        g_mutex_unlock(&warn_lock);
    }
    return buf;
}
#define VIPS_MSG() vips_msg((char[512]){0}, 512)

/* ---- reading files ------------------------------------------------------ */

/* Whole file into memory (freed with g_free after vips is done with it). */
static int read_file(const char *path, void **buf, size_t *len)
{
    struct stat st;
    FILE *fp = sr_fs_open_regular(path, "image");
    if (!fp)
        return -1;
    if (fstat(fileno(fp), &st) != 0) {
        int e = errno;
        fclose(fp);
        return sr_fail("image %s: %s", path, strerror(e));
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        fclose(fp);
        return sr_fail("image %s: empty file (not an image)", path);
    }
    void *b = g_try_malloc(n);
    if (!b) {
        fclose(fp);
        return sr_fail("image %s: out of memory reading %zu bytes", path, n);
    }
    size_t got = fread(b, 1, n, fp);
    int err = ferror(fp) ? errno : 0;
    fclose(fp);
    if (got != n) {
        g_free(b);
        return sr_fail("image %s: read %zu of %zu bytes%s%s", path, got, n, err ? ": " : "",
                       err ? strerror(err) : "");
    }
    *buf = b;
    *len = n;
    return 0;
}

/* Header-only open; the loader chosen by content, never by file name. */
static VipsImage *open_header(const char *path, void *buf, size_t len, VipsFailOn fail_on)
{
    const char *loader = vips_foreign_find_load_buffer(buf, len);
    if (!loader) {
        vips_error_clear();
        sr_fail("image %s: not an image, or a format libvips cannot read", path);
        return NULL;
    }
    VipsImage *im = vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                               "fail_on", fail_on, NULL);
    if (!im) {
        const char *nick = vips_nickname_find(g_type_from_name(loader));
        sr_fail("image %s: corrupt %s header: %s", path, nick ? nick : loader, VIPS_MSG());
    }
    return im;
}

/* The start of every reader here: libvips up, the whole file in memory
 * (*buf: g_free it after the images made from it are unreffed) and its
 * header open.  NULL on error, with nothing left to free. */
static VipsImage *open_file(const char *path, void **buf, size_t *len)
{
    if (sr_vips_init() || read_file(path, buf, len))
        return NULL;
    VipsImage *im = open_header(path, *buf, *len, VIPS_FAIL_ON_TRUNCATED);
    if (!im) {
        g_free(*buf);
        *buf = NULL;
    }
    return im;
}

/* ---- geometry: torchvision's Resize(int) and CenterCrop --------------- */

/* torchvision: the shorter side becomes `size`, the longer one
 * int(size * long / short).  In 64 bits: 65536 x 100000 / 1 once wrapped
 * an int, clamped to 1 and gave a mostly black crop without an error; a
 * side beyond libvips' int range is an error here. */
static int resized_dims(const char *path, int w, int h, int size, int *tw, int *th)
{
    int64_t a = size, b;
    if (w <= h)
        b = (int64_t)size * h / w;
    else
        b = (int64_t)size * w / h;
    if (b > INT32_MAX / 2)
        return sr_fail("image %s: resize=%d makes the %dx%d image %lld pixels long (too large)", path, size, w, h,
                       (long long)b);
    if (b < 1)
        b = 1;
    *tw = (int)(w <= h ? a : b);
    *th = (int)(w <= h ? b : a);
    return 0;
}

/* The pixel bound (image.h): what the decoder produces, the resized image
 * and the crop.  shrink: the factor libvips decodes at (1 but for JPEG). */
static int check_pixels(const char *path, const sr_image_opts *o, int w, int h, int shrink, int tw, int th)
{
    int64_t max = o && o->max_pixels > 0 ? o->max_pixels : SR_IMAGE_MAX_PIXELS;
    int64_t dw = (w + shrink - 1) / shrink, dh = (h + shrink - 1) / shrink;
    int64_t cw = o && o->crop_w > 0 ? o->crop_w : tw, ch = o && o->crop_h > 0 ? o->crop_h : th;
    const char *what = NULL;
    int64_t n = 0;
    if (dw * dh > max)
        what = "to decode", n = dw * dh;
    else if ((int64_t)tw * th > max)
        what = "after the resize", n = (int64_t)tw * th;
    else if (cw * ch > max)
        what = "in the crop", n = cw * ch;
    if (what)
        return sr_fail("image %s: %dx%d image, %lld pixels %s: more than max_pixels = %lld (raise max_pixels to "
                       "load it)", path, w, h, (long long)n, what, (long long)max);
    return 0;
}

/* The factor libvips' thumbnail decodes a JPEG at: the largest of 1, 2, 4,
 * 8 that leaves at least the target on both sides (other formats decode
 * at full size). */
static int load_shrink(VipsImage *hdr, const void *buf, size_t len, int w, int h, int tw, int th)
{
    const char *loader = vips_foreign_find_load_buffer(buf, len);
    if (!loader || !strstr(loader, "Jpeg") || vips_image_hasalpha(hdr))
        return 1;
    int s = 1;
    while (s < 8 && (int64_t)w >= (int64_t)tw * 2 * s && (int64_t)h >= (int64_t)th * 2 * s)
        s *= 2;
    return s;
}

/* Left/top offset of a crop of `crop` from `side`: int(round(d / 2)) with
 * Python's half-to-even rounding when crop <= side; when the image is
 * smaller, torchvision pads (crop - side) // 2 on the left/top first, which
 * is a negative offset here. */
static int crop_offset(int side, int crop)
{
    if (crop > side)
        return -((crop - side) / 2);
    int d = side - crop;
    int h = d / 2;
    if (d % 2 && h % 2) /* x.5 rounds to the even neighbour */
        h++;
    return h;
}

/* ---- the load pipeline -------------------------------------------------- */

typedef struct {
    void *px; /* HWC, uchar or ushort */
    int w, h, bands, is16, grey;
} raw_image;

/* Unref a stack of images at the end of the pipeline. */
typedef struct {
    VipsImage *im[12];
    int n;
} im_stack;
static VipsImage *keep(im_stack *s, VipsImage *im)
{
    if (im && s->n < 12)
        s->im[s->n++] = im;
    return im;
}
static void drop_all(im_stack *s)
{
    while (s->n)
        g_object_unref(s->im[--s->n]);
}

static int load_raw(const char *path, const sr_image_opts *o, raw_image *out)
{
    void *buf = NULL;
    size_t len = 0;
    im_stack st = {{0}, 0};
    VipsImage *hdr = keep(&st, open_file(path, &buf, &len));
    if (!hdr)
        return -1;
    int rc = -1;
    int swap = vips_image_get_orientation_swap(hdr);
    int w = swap ? hdr->Ysize : hdr->Xsize, h = swap ? hdr->Xsize : hdr->Ysize;
    int tw = w, th = h;
    if ((o->resize > 0 && resized_dims(path, w, h, o->resize, &tw, &th)) ||
        check_pixels(path, o, w, h, load_shrink(hdr, buf, len, w, h, tw, th), tw, th)) {
        drop_all(&st);
        g_free(buf);
        return -1;
    }

    VipsImage *im = NULL;
    if (!vips_image_hasalpha(hdr)) {
        /* The fast path: shrink-on-load straight from the buffer. */
        /* fail_on goes through option_string: libvips 8.14's own fail_on
         * argument of thumbnail_buffer does not reach the loader, and a
         * truncated JPEG would decode grey-filled with a warning. */
        if (vips_thumbnail_buffer(buf, len, &im, tw, "height", th, "size", VIPS_SIZE_FORCE,
                                  "option_string", "fail_on=truncated", NULL)) {
            sr_fail("image %s: %s", path, VIPS_MSG());
            goto done;
        }
        keep(&st, im);
    } else {
        /* Alpha is dropped *before* resampling (PIL's convert("RGB") comes
         * first in torchvision), so transparent pixels keep their colour
         * instead of being premultiplied away. */
        VipsImage *full = keep(&st, vips_image_new_from_buffer(buf, len, "", "fail_on",
                                                                VIPS_FAIL_ON_TRUNCATED, NULL));
        VipsImage *rot, *noalpha;
        /* random access (not hdr's sequential one): a 90° turn reads columns */
        if (!full || vips_autorot(full, &rot, NULL) ||
            (keep(&st, rot), vips_extract_band(rot, &noalpha, 0, "n", rot->Bands - 1, NULL))) {
            sr_fail("image %s: %s", path, VIPS_MSG());
            goto done;
        }
        keep(&st, noalpha);
        if (vips_thumbnail_image(noalpha, &im, tw, "height", th, "size", VIPS_SIZE_FORCE,
                                 "no_rotate", TRUE, NULL)) {
            sr_fail("image %s: %s", path, VIPS_MSG());
            goto done;
        }
        keep(&st, im);
    }

    VipsInterpretation in = vips_image_guess_interpretation(im);
    int grey = in == VIPS_INTERPRETATION_B_W || in == VIPS_INTERPRETATION_GREY16;
    int is16 = in == VIPS_INTERPRETATION_RGB16 || in == VIPS_INTERPRETATION_GREY16 ||
               (im->BandFmt == VIPS_FORMAT_USHORT && in != VIPS_INTERPRETATION_LABS);
    VipsInterpretation want = grey ? (is16 ? VIPS_INTERPRETATION_GREY16 : VIPS_INTERPRETATION_B_W)
                                   : (is16 ? VIPS_INTERPRETATION_RGB16 : VIPS_INTERPRETATION_sRGB);
    VipsImage *t;
    if (in != want) {
        if (vips_colourspace(im, &t, want, NULL)) {
            sr_fail("image %s: cannot convert to %s: %s", path, grey ? "grey" : "sRGB", VIPS_MSG());
            goto done;
        }
        im = keep(&st, t);
    }
    int nb = grey ? 1 : 3;
    if (im->Bands > nb) {
        if (vips_extract_band(im, &t, 0, "n", nb, NULL)) {
            sr_fail("image %s: %s", path, VIPS_MSG());
            goto done;
        }
        im = keep(&st, t);
    } else if (im->Bands < nb) {
        sr_fail("image %s: %d band(s) after conversion to sRGB, expected %d", path, im->Bands, nb);
        goto done;
    }
    VipsBandFormat fmt = is16 ? VIPS_FORMAT_USHORT : VIPS_FORMAT_UCHAR;
    if (im->BandFmt != fmt) {
        if (vips_cast(im, &t, fmt, NULL)) {
            sr_fail("image %s: %s", path, VIPS_MSG());
            goto done;
        }
        im = keep(&st, t);
    }
    int cw = o->crop_w > 0 ? o->crop_w : im->Xsize, ch = o->crop_h > 0 ? o->crop_h : im->Ysize;
    if (cw != im->Xsize || ch != im->Ysize) {
        /* embed = crop where the image is larger, black padding where it
         * is smaller, per axis, exactly like torchvision's center_crop. */
        if (vips_embed(im, &t, -crop_offset(im->Xsize, cw), -crop_offset(im->Ysize, ch), cw, ch,
                       NULL)) {
            sr_fail("image %s: %s", path, VIPS_MSG());
            goto done;
        }
        im = keep(&st, t);
    }
    size_t sz = 0;
    void *px = vips_image_write_to_memory(im, &sz); /* decoding happens here */
    if (!px) {
        sr_fail("image %s: %s", path, VIPS_MSG());
        goto done;
    }
    out->px = px;
    out->w = im->Xsize;
    out->h = im->Ysize;
    out->bands = nb;
    out->is16 = is16;
    out->grey = grey;
    rc = 0;
done:
    drop_all(&st);
    g_free(buf);
    return rc;
}

static int out_channels(const sr_image_opts *o, const raw_image *r)
{
    return o->channels > 0 ? o->channels : (r->grey ? 1 : 3);
}

/* HWC integers -> CHW reals in [0,1], converting grey <-> RGB: one body for
 * float (PX and the luma weights in float, as always) and double (every
 * step in double: the pixels a float64 profile starts from are v/255
 * exactly rounded, not float32's). */
#define RAW_TO_CHW(real)                                                                                 \
    {                                                                                                    \
        size_t hw = (size_t)r->w * r->h;                                                                 \
        /* divide, not multiply by a reciprocal: v/255 is the correctly                                  \
         * rounded value, the same one the IDX/CIFAR readers produce */                                  \
        real scale = r->is16 ? 65535 : 255;                                                              \
        const unsigned char *p8 = r->px;                                                                 \
        const unsigned short *p16 = r->px;                                                               \
        if (r->bands == C) {                                                                             \
            for (size_t i = 0; i < hw; i++)                                                              \
                for (int c = 0; c < C; c++)                                                              \
                    dst[c * hw + i] = PX(real, i * C + c) / scale;                                       \
        } else if (r->bands == 1) { /* grey -> RGB: replicate */                                         \
            for (size_t i = 0; i < hw; i++)                                                              \
                dst[i] = dst[hw + i] = dst[2 * hw + i] = PX(real, i) / scale;                            \
        } else { /* RGB -> luma, ITU-R 601 (PIL convert("L"), unrounded) */                               \
            for (size_t i = 0; i < hw; i++)                                                              \
                dst[i] = ((real)0.299 * PX(real, 3 * i) + (real)0.587 * PX(real, 3 * i + 1) +            \
                          (real)0.114 * PX(real, 3 * i + 2)) / scale;                                    \
        }                                                                                                \
    }
#define PX(real, i) (r->is16 ? (real)p16[i] : (real)p8[i])
static void raw_to_chw_f32(float *dst, const raw_image *r, int C) RAW_TO_CHW(float)
static void raw_to_chw_f64(double *dst, const raw_image *r, int C) RAW_TO_CHW(double)
#undef PX
#undef RAW_TO_CHW

/* Image i of a batch tensor t (float32 or float64). */
static void raw_to_tensor(sr_tensor *t, int64_t i, const raw_image *r, int C)
{
    size_t per = (size_t)C * r->h * r->w;
    if (t->dtype == SR_F64)
        raw_to_chw_f64(sr_f64(t) + i * per, r, C);
    else
        raw_to_chw_f32(sr_f32(t) + i * per, r, C);
}

static int check_opts(const sr_image_opts *o)
{
    if (o->channels != 0 && o->channels != 1 && o->channels != 3)
        return sr_fail("image: channels must be 1 or 3 (or 0 = as stored), got %d", o->channels);
    if (o->dtype != SR_F32 && o->dtype != SR_F64)
        return sr_fail("image: dtype must be float32 or float64");
    if (o->crop_w < 0 || o->crop_h < 0 || o->resize < 0 || o->crop_w > 65536 ||
        o->crop_h > 65536 || o->resize > 65536)
        return sr_fail("image: size %dx%d / resize %d out of range (0..65536)", o->crop_w, o->crop_h,
                       o->resize);
    return 0;
}

int sr_image_load(sr_tensor *out, const char *path, const sr_image_opts *o)
{
    sr_image_opts def = SR_IMAGE_OPTS_INIT;
    if (!o)
        o = &def;
    if (check_opts(o))
        return sr_fail_context("image %s", path);
    raw_image r;
    if (load_raw(path, o, &r))
        return -1;
    int C = out_channels(o, &r);
    sr_tensor t = SR_TENSOR_INIT;
    if (sr_tensor_alloc(&t, o->dtype, 4, (int64_t[]){1, C, r.h, r.w})) {
        g_free(r.px);
        return sr_fail_context("image %s", path);
    }
    raw_to_tensor(&t, 0, &r, C);
    g_free(r.px);
    sr_tensor_free(out);
    *out = t;
    return 0;
}

int sr_image_load_batch(sr_tensor *out, const char *const *paths, int64_t n, const sr_image_opts *o,
                        unsigned char *bad)
{
    sr_image_opts def = SR_IMAGE_OPTS_INIT;
    if (!o)
        o = &def;
    if (check_opts(o))
        return -1;
    if (n <= 0)
        return sr_fail("image batch: no paths given");
    if (sr_vips_init())
        return -1;
    raw_image *raw = calloc((size_t)n, sizeof *raw);
    char (*msg)[512] = calloc((size_t)n, sizeof *msg);
    if (!raw || !msg) {
        free(raw);
        free(msg);
        return sr_fail("image batch: out of memory for %lld images", (long long)n);
    }
    /* Each worker keeps its own message: the error buffer is per thread. */
    int nt = sr_threads_get();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (n > 1 && nt > 1)
    for (int64_t i = 0; i < n; i++) {
        if (load_raw(paths[i], o, &raw[i]) != 0) {
            snprintf(msg[i], sizeof msg[i], "%s", sr_errmsg());
            raw[i].px = NULL;
            if (!msg[i][0])
                snprintf(msg[i], sizeof msg[i], "image %s: failed", paths[i]);
        }
    }
    int rc = -1;
    int64_t first_ok = -1, first_bad = -1;
    for (int64_t i = 0; i < n; i++) {
        if (raw[i].px && first_ok < 0)
            first_ok = i;
        if (!raw[i].px && first_bad < 0)
            first_bad = i;
    }
    if (first_bad >= 0 && (!bad || first_ok < 0)) {
        sr_fail("%s", msg[first_bad]);
        goto done;
    }
    const raw_image *ref = &raw[first_ok];
    int C = out_channels(o, ref);
    for (int64_t i = 0; i < n; i++) {
        if (!raw[i].px)
            continue;
        if (raw[i].w != ref->w || raw[i].h != ref->h || out_channels(o, &raw[i]) != C) {
            sr_fail("image batch: %s is %dx%dx%d but %s is %dx%dx%d (give a crop size, or "
                    "channels, to batch images of different sizes)",
                    paths[i], out_channels(o, &raw[i]), raw[i].h, raw[i].w, paths[first_ok], C,
                    ref->h, ref->w);
            goto done;
        }
    }
    sr_tensor t = SR_TENSOR_INIT;
    if (sr_tensor_zeros(&t, o->dtype, 4, (int64_t[]){n, C, ref->h, ref->w})) {
        sr_fail_context("image batch");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        if (bad)
            bad[i] = raw[i].px == NULL;
        if (raw[i].px)
            raw_to_tensor(&t, i, &raw[i], C);
    }
    sr_tensor_free(out);
    *out = t;
    if (first_bad >= 0)
        sr_fail("%s", msg[first_bad]);
    rc = 0;
done:
    for (int64_t i = 0; i < n; i++)
        g_free(raw[i].px);
    free(raw);
    free(msg);
    return rc;
}

int sr_image_info_read(const char *path, sr_image_info *info)
{
    void *buf;
    size_t len;
    VipsImage *im = open_file(path, &buf, &len);
    if (!im)
        return -1;
    int swap = vips_image_get_orientation_swap(im);
    info->width = swap ? im->Ysize : im->Xsize;
    info->height = swap ? im->Xsize : im->Ysize;
    info->bands = im->Bands;
    info->has_alpha = vips_image_hasalpha(im);
    info->bits = (int)(8 * vips_format_sizeof(im->BandFmt));
    const char *ld = vips_foreign_find_load_buffer(buf, len);
    const char *nick = ld ? vips_nickname_find(g_type_from_name(ld)) : NULL;
    snprintf(info->loader, sizeof info->loader, "%s", nick ? nick : ld ? ld : "?");
    g_object_unref(im);
    g_free(buf);
    return 0;
}

int sr_image_check(const char *path)
{
    void *buf;
    size_t len;
    VipsImage *im = open_file(path, &buf, &len), *small = NULL;
    if (!im)
        return -1;
    int w = im->Xsize, h = im->Ysize;
    int rc = check_pixels(path, NULL, w, h, load_shrink(im, buf, len, w, h, 32, 32), 32, 32);
    if (rc) {
        g_object_unref(im);
        g_free(buf);
        return rc;
    }
    double avg;
    /* A thumbnail pulls the whole file through the decoder (a truncated or
     * corrupt body fails), but lets JPEG decode at 1/8 scale: several
     * times cheaper than a full-size decode. */
    if (vips_thumbnail_buffer(buf, len, &small, 32, "option_string", "fail_on=truncated", NULL) ||
        vips_avg(small, &avg, NULL))
        rc = sr_fail("image %s: %s", path, VIPS_MSG());
    if (small)
        g_object_unref(small);
    g_object_unref(im);
    g_free(buf);
    return rc;
}

/* ---- saving --------------------------------------------------------- */

int sr_image_save(const char *path, const sr_tensor *t, const sr_image_save_opts *o)
{
    sr_image_save_opts def = SR_IMAGE_SAVE_OPTS_INIT;
    if (!o)
        o = &def;
    int64_t C, H, W;
    if (t->ndim == 4 && t->shape[0] == 1) {
        C = t->shape[1], H = t->shape[2], W = t->shape[3];
    } else if (t->ndim == 3) {
        C = t->shape[0], H = t->shape[1], W = t->shape[2];
    } else if (t->ndim == 2) {
        C = 1, H = t->shape[0], W = t->shape[1];
    } else {
        return sr_fail("image save %s: tensor %s must be (1,C,H,W), (C,H,W) or (H,W)", path,
                       SR_SHAPE(t));
    }
    if (C < 1 || C > 4 || H < 1 || W < 1 || H > 65535 || W > 65535)
        return sr_fail("image save %s: tensor %s: need 1..4 channels and 1..65535 pixels a side",
                       path, SR_SHAPE(t));
    if (o->quality < 0 || o->quality > 100)
        return sr_fail("image save %s: quality %d out of 1..100", path, o->quality);
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash) || strlen(dot) > 8)
        return sr_fail("image save %s: no file suffix (.png, .jpg, ...) to choose the format", path);
    if (sr_vips_init())
        return -1;
    size_t hw = (size_t)H * W, n = hw * C;
    double lo = 0, scale = 1;
    if (o->rescale) {
        double mn = INFINITY, mx = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            double v = sr_get_flat(t, (int64_t)i);
            if (isfinite(v)) {
                mn = v < mn ? v : mn;
                mx = v > mx ? v : mx;
            }
        }
        lo = isfinite(mn) ? mn : 0;
        scale = (isfinite(mx) && mx > mn) ? 1.0 / (mx - mn) : 0;
    }
    unsigned char *px = malloc(n);
    if (!px)
        return sr_fail("image save %s: out of memory", path);
    const float *f = t->dtype == SR_F32 ? sr_f32(t) : NULL;
    const double *d = t->dtype == SR_F64 ? sr_f64(t) : NULL;
    for (int64_t c = 0; c < C; c++)
        for (size_t i = 0; i < hw; i++) {
            double v = f ? f[c * hw + i] : d[c * hw + i];
            v = (v - lo) * scale;
            v = v != v ? 0 : v < 0 ? 0 : v > 1 ? 1 : v; /* NaN -> 0 */
            px[i * C + c] = (unsigned char)lrint(v * 255.0);
        }
    int rc = -1;
    VipsImage *im = vips_image_new_from_memory(px, n, (int)W, (int)H, (int)C, VIPS_FORMAT_UCHAR);
    VipsImage *tagged = NULL;
    void *obuf = NULL;
    size_t olen = 0;
    char suffix[32];
    if (o->quality)
        snprintf(suffix, sizeof suffix, "%s[Q=%d]", dot, o->quality);
    else
        snprintf(suffix, sizeof suffix, "%s", dot);
    if (!im || vips_copy(im, &tagged, "interpretation",
                         C <= 2 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB, NULL)) {
        sr_fail("image save %s: %s", path, VIPS_MSG());
        goto done;
    }
    if (vips_image_write_to_buffer(tagged, suffix, &obuf, &olen, NULL)) {
        sr_fail("image save %s: cannot write this format: %s", path, VIPS_MSG());
        goto done;
    }
    sr_atomic_file af;
    if (sr_atomic_open(&af, path)) {
        sr_fail_context("image save");
        goto done;
    }
    if (fwrite(obuf, 1, olen, af.fp) != olen) {
        int e = errno;
        sr_atomic_abort(&af);
        sr_fail("image save %s: %s", path, strerror(e));
        goto done;
    }
    if (sr_atomic_commit(&af)) {
        sr_fail_context("image save");
        goto done;
    }
    rc = 0;
done:
    g_free(obuf);
    if (tagged)
        g_object_unref(tagged);
    if (im)
        g_object_unref(im);
    free(px);
    return rc;
}

#endif
