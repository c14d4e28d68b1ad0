/* blur.h - Gaussian blur of image planes (the evaluation sets' blurred
 * copies, the profile engine's low-pass directions, srgeo.image.blur).
 * Errors name the op users call, image.blur. */
#ifndef SR_BLUR_H
#define SR_BLUR_H

#include "tensor/tensor.h"

/* Gaussian blur over the last two dims of t (any leading dims: (N,C,H,W),
 * (C,H,W), (H,W)), separable, reflect padding (torch's "reflect": the edge
 * pixel is not repeated; mirrored again for kernels wider than the image),
 * weights exp(-x²/2σ²) on x = -k..k normalised to sum 1: torchvision's
 * GaussianBlur(kernel_size=2k+1, sigma).  ksize = 0 picks 2*ceil(3σ)+1.
 * sigma = 0 is a copy.  out gets t's dtype and shape (out may be t). */
int sr_blur(sr_tensor *out, const sr_tensor *t, double sigma, int ksize);

/* The 1-D kernel used above (ksize odd, weights into k[ksize]). */
int sr_blur_kernel(double *k, int ksize, double sigma);
int sr_blur_ksize(double sigma);

#endif
