/* check.h - the helpers the C tests share: layers built from string
 * options, seeded random tensors and parameters, a scratch folder, generic
 * derivative checks for any module (float64) and the PyTorch fixture runner.
 *
 * check_module runs, for a float64 module and input x:
 *  - JVP vs central differences: for k random tangents v,
 *      rel = ||Jv - (f(x+hv) - f(x-hv))/2h|| / ||fd||
 *  - the adjoint identity <w, Jv> = <J^T w, v> with backward (input grads);
 *  - parameter gradients vs central differences of L(θ) = <w, f(x; θ)>
 *    along a random parameter direction (trainable parameters only).
 * It returns the worst errors so tests can assert on them. */
#ifndef SR_CHECK_H
#define SR_CHECK_H

#include "nn/module.h"
#include "tensor/tensor_ops.h"

typedef struct check_result {
    double jvp_fd;      /* worst relative error of the JVP vs finite differences */
    double adjoint;     /* worst relative violation of <w,Jv> = <J^T w, v> */
    double param_fd;    /* relative error of parameter grads vs finite differences */
    double primal;      /* max |jvp primal rows - forward| */
} check_result;

/* k tangents; h is the finite-difference step (1e-6 is a good default for
 * smooth layers; pass a smaller one near kinks). Returns 0 or -1 (error). */
int check_module(sr_module *m, const sr_tensor *x, int k, double h, uint64_t seed,
                 check_result *res);

/* A layer from its constructor with string options
 * ((const char *[]){"in_features", "3", NULL}); op names it in messages.
 * NULL on error. */
sr_module *check_make(sr_layer_ctor ctor, const char *op, const char *const *kv);
/* MAKE(sr_relu_create, "relu", NULL), MAKE(sr_linear_create, "linear",
 * "in_features", "3", "out_features", "2"). */
#define MAKE(ctor, op, ...) check_make(ctor, op, (const char *[]){__VA_ARGS__, NULL})
/* The same, converted to float64 (NULL if either step fails). */
sr_module *check_make_f64(sr_layer_ctor ctor, const char *op, const char *const *kv);
#define MAKE_F64(ctor, op, ...) check_make_f64(ctor, op, (const char *[]){__VA_ARGS__, NULL})

/* A layer from the registry by name with string options; NULL on error. */
sr_module *check_layer(const char *name, const char *const *kv);

/* Re-initialise m's parameters from a generator seeded with seed, so a
 * test's layer does not depend on what ran before; passes NULL through. */
sr_module *check_reset(sr_module *m, uint64_t seed);

/* A sequential of the n parts, children "0" .. "n-1", taking one
 * reference of each part per place (a part used twice: retain it once
 * more), re-initialised from seed and converted to dt; NULL (releasing
 * what it holds) if a part is NULL or a step fails. */
sr_module *check_sequential(sr_module *const *parts, int n, uint64_t seed, sr_dtype dt);

/* Every parameter and buffer of the tree N(0, std) (not the init values,
 * which leave biases at zero and would hide bias bugs). */
void check_fill_params(sr_module *m, uint64_t seed, double std);

/* Random tensors: float64 normal (for inputs), normal in dtype dt, uniform
 * in [lo, hi) in dtype dt.  0 or -1 (allocation). */
int check_randn(sr_tensor *t, int ndim, const int64_t *shape, uint64_t seed);
int check_randn_dt(sr_tensor *t, sr_dtype dt, int ndim, const int64_t *shape, uint64_t seed);
int check_randu_dt(sr_tensor *t, sr_dtype dt, int ndim, const int64_t *shape, double lo, double hi,
                   uint64_t seed);

/* Runs m at 1 and at 2 threads and fails (-1 with a message) unless every
 * result agrees bit for bit: the forward output of x, the input gradient of
 * backward(gy) (gy NULL: the output itself is the cotangent), every
 * parameter gradient (zeroed first), and, when xv is given, the stacked JVP
 * of xv with n primals and k tangents each.  The thread count is restored. */
int check_threads_agree(sr_module *m, const sr_tensor *x, const sr_tensor *gy, const sr_tensor *xv, int64_t n,
                        int64_t k);

/* path of `name` in this process's scratch folder (created on first use
 * under /tmp, one per process since several runs may share a machine;
 * removed at exit).  The result lives until eight more calls. */
const char *check_scratch(const char *name);

/* max |a-b| / max(|b|_inf, tiny) */
double check_rel_diff(const sr_tensor *a, const sr_tensor *b);

/* --- PyTorch fixtures ---------------------------------------------------
 * check_torch runs one module against references written by
 * tests/fixtures/gen_*.py: forward (and, in train mode, the running
 * statistics after that one forward), the stacked JVP [x; v] -> [y; Jv], and
 * backward with input and parameter gradients.  Files are
 * DIR<case>_<what>[_f32|_f64].npy with what = x, y, v, <jv>, gy, gx,
 * <param_prefix><param>, <grad_prefix><param>. */
typedef struct torch_files {
    const char *dir;          /* "tests/fixtures/conv/" */
    int converted;            /* files carry no dtype suffix and are converted to the run dtype */
    const char *jv;           /* name of the tangent output ("jv", "jvp") */
    const char *param_prefix; /* "p_" or "" */
    const char *grad_prefix;  /* "g_", "grad_" */
} torch_files;

typedef struct torch_case {
    const char *name;
    sr_layer_ctor create;
    const char *op;
    const char *kv[20];     /* options, NULL-terminated */
    const char *params[6];  /* dotted paths loaded from the fixture, NULL-terminated */
    const char *grads[6];   /* trainable ones compared; empty: all of params */
    int k;                  /* tangents per input (v holds n*k rows); 0: v is (N,K,...) */
    int training;           /* train mode; also checks running_mean/var and num_batches_tracked */
    int exact_params;       /* the module has no parameters besides params */
} torch_case;

/* One case in one dtype; *worst gets the largest relative error over every
 * compared tensor. Returns 0 or -1 (error, shape mismatch). */
int check_torch(const torch_files *f, const torch_case *c, sr_dtype dt, double *worst);

/* Every case; fails (-1) on the first error or worst error above tol
 * (SRGEO_TEST_VERBOSE prints each case's worst error). */
int check_torch_cases(const torch_files *f, const torch_case *cases, size_t n, sr_dtype dt, double tol);

#endif
