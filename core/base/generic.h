/* generic.h - compile one kernel body for both real types.
 *
 * A kernel file is written once, over `real`, and includes itself through
 * this header; the typed part is guarded by `#ifdef SR_REAL`:
 *
 *     #ifdef SR_REAL
 *     static void SR_FN(relu_fwd)(real *y, const real *x, size_t n) { ... }
 *     #else
 *     #include "tensor/tensor.h"
 *     #define SR_GENERIC_FILE "nn/act.c"
 *     #include "base/generic.h"
 *     int sr_relu_forward(...) { ... SR_DISPATCH(t->dtype, relu_fwd, args...) }
 *     #endif
 *
 * SR_FN(name) expands to name_f32 / name_f64, and the BLAS entry points to
 * their s/d variants, so there is one body per concept and no per-type
 * macro maze beyond these few names.
 */
#ifndef SR_GENERIC_FILE
#error "define SR_GENERIC_FILE before including generic.h"
#endif

#define SR_REAL 1
#define real float
#define SR_FN(name) name##_f32
#define SR_REAL_EPS 1.1920929e-07f
#define SR_GEMM cblas_sgemm
#define SR_GEMV cblas_sgemv
#define SR_AXPY cblas_saxpy
#define SR_DOT cblas_sdot
#define SR_SQRT sqrtf
#define SR_EXP expf
#define SR_LOG logf
#define SR_ERF erff
#define SR_TANH tanhf
#define SR_FABS fabsf
#include SR_GENERIC_FILE
#undef real
#undef SR_FN
#undef SR_REAL_EPS
#undef SR_GEMM
#undef SR_GEMV
#undef SR_AXPY
#undef SR_DOT
#undef SR_SQRT
#undef SR_EXP
#undef SR_LOG
#undef SR_ERF
#undef SR_TANH
#undef SR_FABS

#define real double
#define SR_FN(name) name##_f64
#define SR_REAL_EPS 2.220446049250313e-16
#define SR_GEMM cblas_dgemm
#define SR_GEMV cblas_dgemv
#define SR_AXPY cblas_daxpy
#define SR_DOT cblas_ddot
#define SR_SQRT sqrt
#define SR_EXP exp
#define SR_LOG log
#define SR_ERF erf
#define SR_TANH tanh
#define SR_FABS fabs
#include SR_GENERIC_FILE
#undef real
#undef SR_FN
#undef SR_REAL_EPS
#undef SR_GEMM
#undef SR_GEMV
#undef SR_AXPY
#undef SR_DOT
#undef SR_SQRT
#undef SR_EXP
#undef SR_LOG
#undef SR_ERF
#undef SR_TANH
#undef SR_FABS
#undef SR_REAL
#undef SR_GENERIC_FILE

/* Call name_f32 or name_f64 according to a dtype. */
#ifndef SR_DISPATCH
#define SR_DISPATCH(dtype, name, ...)                                      \
    do {                                                                   \
        if ((dtype) == SR_F64) name##_f64(__VA_ARGS__);                    \
        else name##_f32(__VA_ARGS__);                                      \
    } while (0)
#define SR_DISPATCH_RET(dtype, name, ...)                                  \
    ((dtype) == SR_F64 ? name##_f64(__VA_ARGS__) : name##_f32(__VA_ARGS__))
#endif
