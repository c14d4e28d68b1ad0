/* image.h - images through libvips: load to raw [0,1] float tensors, save
 * tensors as PNG/JPEG/....  No Lua here.
 *
 * Loading follows torchvision's Resize(resize) + CenterCrop(size) on the
 * geometry (target sizes and crop offsets are computed exactly as
 * torchvision computes them), with libvips doing the resampling:
 *
 *   1. The file is read into memory (so a missing or unreadable file is an
 *      errno message naming it, and libvips never sees a path it could
 *      misparse as "file.jpg[options]").
 *   2. Resize: the shorter side becomes `resize`, the longer one
 *      floor(resize * long / short) (torchvision's int() truncation), via
 *      vips_thumbnail_buffer(size=VIPS_SIZE_FORCE).  That is libvips'
 *      shrink-on-load path: JPEG/WebP decode directly at 1/2, 1/4, 1/8 scale
 *      where that still leaves more pixels than the target, then a Lanczos-3
 *      reduce in sRGB space (vips_thumbnail's defaults; EXIF orientation is
 *      applied, an embedded ICC profile is converted to sRGB).  torchvision
 *      on PIL uses an antialiased bilinear filter instead, so pixels differ
 *      from PIL by the filter difference (a few /255 on sharp edges); pixels
 *      match `vips thumbnail --size force` exactly.
 *   3. Centre crop (or zero padding where the image is smaller than the
 *      crop, like torchvision's center_crop): offset
 *      round_half_even((side - crop) / 2), Python's int(round(x)).
 *   4. Colour: images with colour are converted to sRGB (CMYK, Lab, ... via
 *      vips_colourspace); greyscale ones stay grey.  Alpha is dropped, not
 *      composited, as PIL's convert("RGB") does in torchvision's
 *      ImageFolder loader.  16-bit images keep their precision (/65535).
 *   5. Channels: 3 replicates a grey image; 1 turns colour into ITU-R 601
 *      luma 0.299 R + 0.587 G + 0.114 B (PIL's convert("L"), which
 *      torchvision's Grayscale uses); 0 keeps what the file has.
 *
 * Truncated files are errors (libvips fail_on=truncated), not grey-filled
 * images.  Every error names the file and carries libvips' message.
 * libvips is initialised once, lazily and thread-safely; its operation cache
 * is switched off so a file rewritten between two loads is read afresh.
 */
#ifndef SR_IMAGE_H
#define SR_IMAGE_H

#include <stdint.h>

#include "tensor/tensor.h"

typedef struct sr_image_opts {
    int crop_h, crop_w; /* centre crop; 0 = no crop */
    int resize;         /* shorter side after resizing; 0 = keep the native size */
    int channels;       /* 1, 3, or 0 = as stored (1 for grey files, else 3) */
    int64_t max_pixels; /* decode bound (0: SR_IMAGE_MAX_PIXELS), see below */
    sr_dtype dtype;     /* of the result: float32, or float64 (each pixel v/255 rounded once, in double) */
} sr_image_opts;

/* The default: Resize(256) + CenterCrop(224), RGB (torchvision's ImageNet eval), float32. */
#define SR_IMAGE_OPTS_INIT {224, 224, 256, 3, 0, SR_F32}

/* Decode bombs.  A 69-byte PNG may declare 100000 x 100000 pixels; decoding
 * it took minutes and 9.6 GB.  So before anything is decoded, the header's
 * size is checked: the pixels the decoder will produce (the header's, or
 * fewer where libvips shrinks on load: JPEG at 1/2, 1/4, 1/8 of each side
 * when the resize target allows), the resized image and the crop must each
 * be at most max_pixels, else the load fails naming the sizes and the
 * option.  100 MP (a 10000 x 10000 photo) by default. */
#define SR_IMAGE_MAX_PIXELS ((int64_t)100000000)

/* Initialise libvips (idempotent, thread-safe).  Called by every function
 * here; exposed for tests and benchmarks that call libvips directly. */
int sr_vips_init(void);

/* Load one image into out: (1, C, H, W) in [0, 1], of o->dtype. */
int sr_image_load(sr_tensor *out, const char *path, const sr_image_opts *o);

/* Load n images into one (n, C, H, W) batch of o->dtype, in parallel over
 * images (sr_threads_get() threads).  Every image must come out the same
 * size (give a crop, or use files of one size); the first failure, in path
 * order, is the error.  If bad != NULL, failures do not stop the batch:
 * bad[i] is set to 1 and image i left zero, and the call succeeds (bad[] are
 * 0 otherwise); the message of the first failure is still in sr_errmsg(). */
int sr_image_load_batch(sr_tensor *out, const char *const *paths, int64_t n, const sr_image_opts *o,
                        unsigned char *bad);

/* Header only (cheap: no pixels are decoded): size after EXIF orientation,
 * bands (incl. alpha), whether it has alpha, and the loader name
 * ("jpegload_buffer", ...). */
typedef struct sr_image_info {
    int width, height, bands, has_alpha, bits;
    char loader[64];
} sr_image_info;
int sr_image_info_read(const char *path, sr_image_info *info);

/* Decode fully and discard (a truncated or corrupt body fails here, where a
 * header read would pass); images beyond SR_IMAGE_MAX_PIXELS are refused
 * undecoded, as a load would refuse them. */
int sr_image_check(const char *path);

typedef struct sr_image_save_opts {
    int rescale; /* min-max rescale to [0, 1] first (a constant image becomes 0) */
    int quality; /* JPEG/WebP quality 1..100; 0 = libvips default (75) */
} sr_image_save_opts;
#define SR_IMAGE_SAVE_OPTS_INIT {0, 0}

/* Save (1, C, H, W) or (C, H, W) with C = 1 or 3 (or 2/4 with alpha),
 * float32/float64 in [0, 1] (clamped, rounded to 8 bits), as the format
 * its suffix names (.png .jpg .jpeg .webp .tif .tiff .pgm .ppm ...).  The
 * file is written atomically. */
int sr_image_save(const char *path, const sr_tensor *t, const sr_image_save_opts *o);

#endif
