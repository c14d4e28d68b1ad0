/* check.c - the helpers the C tests share (layers, random tensors, a
 * scratch folder), finite-difference and adjoint checks, and the PyTorch
 * fixture runner. */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/threads.h"
#include "io/npy.h"

sr_module *check_make(sr_layer_ctor ctor, const char *op, const char *const *kv)
{
    sr_opts o;
    sr_opts_kv_data d;
    sr_opts_kv(&o, &d, op, kv);
    return ctor(&o);
}

sr_module *check_make_f64(sr_layer_ctor ctor, const char *op, const char *const *kv)
{
    sr_module *m = check_make(ctor, op, kv);
    if (m && sr_module_to_dtype(m, SR_F64)) {
        sr_module_release(m);
        return NULL;
    }
    return m;
}

sr_module *check_layer(const char *name, const char *const *kv)
{
    const sr_layer_def *def = sr_layer_lookup(name);
    return def ? check_make(def->create, name, kv) : NULL;
}

sr_module *check_reset(sr_module *m, uint64_t seed)
{
    if (m) {
        sr_rng r;
        sr_rng_seed(&r, seed);
        sr_module_reset(m, &r);
    }
    return m;
}

sr_module *check_sequential(sr_module *const *parts, int n, uint64_t seed, sr_dtype dt)
{
    sr_module *seq = sr_sequential_new();
    int ok = seq != NULL;
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        ok = ok && parts[i] && sr_module_add_child(seq, name, parts[i]) == 0;
        sr_module_release(parts[i]);
    }
    if (ok && (!check_reset(seq, seed) || (dt == SR_F64 && sr_module_to_dtype(seq, SR_F64) != 0)))
        ok = 0;
    if (!ok) {
        sr_module_release(seq);
        return NULL;
    }
    return seq;
}

typedef struct {
    sr_rng rng;
    double std;
} fill_state;

static int fill_param_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    fill_state *s = ud;
    sr_tensor_fill_normal(&p->value, &s->rng, 0, s->std);
    return 0;
}

void check_fill_params(sr_module *m, uint64_t seed, double std)
{
    fill_state s = {.std = std};
    sr_rng_seed(&s.rng, seed);
    sr_module_walk_params(m, fill_param_cb, &s);
}

int check_randn_dt(sr_tensor *t, sr_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    sr_rng r;
    sr_rng_seed(&r, seed);
    if (sr_tensor_alloc(t, dt, ndim, shape))
        return -1;
    sr_tensor_fill_normal(t, &r, 0, 1);
    return 0;
}

int check_randn(sr_tensor *t, int ndim, const int64_t *shape, uint64_t seed)
{
    return check_randn_dt(t, SR_F64, ndim, shape, seed);
}

int check_randu_dt(sr_tensor *t, sr_dtype dt, int ndim, const int64_t *shape, double lo, double hi,
                   uint64_t seed)
{
    sr_rng r;
    sr_rng_seed(&r, seed);
    if (sr_tensor_alloc(t, dt, ndim, shape))
        return -1;
    sr_tensor_fill_uniform(t, &r, lo, hi);
    return 0;
}

static char scratch_dir[64];

const char *check_scratch(const char *name)
{
    static char path[8][256];
    static int k;
    if (!scratch_dir[0]) {
        snprintf(scratch_dir, sizeof scratch_dir, "/tmp/srgeo-test-%d", (int)getpid());
        mkdir(scratch_dir, 0755);
    }
    k = (k + 1) % 8;
    snprintf(path[k], sizeof path[k], "%s/%s", scratch_dir, name);
    return path[k];
}

__attribute__((destructor)) static void remove_scratch(void)
{
    if (!scratch_dir[0])
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", scratch_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "tests: could not remove the scratch directory %s\n", scratch_dir);
}

double check_rel_diff(const sr_tensor *a, const sr_tensor *b)
{
    int64_t n = sr_numel(a);
    double md = 0, mb = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(sr_get_flat(a, i) - sr_get_flat(b, i));
        double v = fabs(sr_get_flat(b, i));
        if (d > md || isnan(d))
            md = isnan(d) ? INFINITY : d;
        if (v > mb)
            mb = v;
    }
    return md / (mb > 1e-300 ? mb : 1e-300);
}

static double dot(const sr_tensor *a, const sr_tensor *b)
{
    double s = 0;
    int64_t n = sr_numel(a);
    for (int64_t i = 0; i < n; i++)
        s += sr_get_flat(a, i) * sr_get_flat(b, i);
    return s;
}

/* f(x) into out (a copy, so later calls cannot overwrite it). */
static int eval(sr_module *m, const sr_tensor *x, sr_tensor *out)
{
    sr_run run = SR_RUN_INIT;
    if (sr_module_forward(m, x, &run))
        return -1;
    return sr_tensor_copy(out, &m->out);
}

typedef struct {
    sr_rng *rng;
    double num;   /* <grad, delta> accumulated */
    int apply;    /* 0: draw delta & accumulate; +1/-1: shift params by ±h*delta */
    double h;
    sr_tensor *deltas;
    int i;
} param_state;

static int param_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    param_state *s = ud;
    if (!p->trainable)
        return 0;
    sr_tensor *d = &s->deltas[s->i++];
    int64_t n = sr_numel(&p->value);
    if (s->apply == 0) {
        if (sr_tensor_alloc(d, SR_F64, p->value.ndim, p->value.shape))
            return -1;
        sr_tensor_fill_normal(d, s->rng, 0, 1);
        if (p->grad.storage)
            s->num += dot(&p->grad, d);
    } else {
        for (int64_t j = 0; j < n; j++)
            sr_set_flat(&p->value, j, sr_get_flat(&p->value, j) + s->apply * s->h * sr_get_flat(d, j));
    }
    return 0;
}

int check_module(sr_module *m, const sr_tensor *x, int k, double h, uint64_t seed,
                 check_result *res)
{
    int rc = -1;
    sr_rng rng;
    sr_rng_seed(&rng, seed);
    memset(res, 0, sizeof *res);
    sr_tensor y0 = SR_TENSOR_INIT, stack = SR_TENSOR_INIT, jv = SR_TENSOR_INIT, xp = SR_TENSOR_INIT,
              xm = SR_TENSOR_INIT, fp = SR_TENSOR_INIT, fm = SR_TENSOR_INIT, w = SR_TENSOR_INIT,
              gx = SR_TENSOR_INIT, row = SR_TENSOR_INIT, vrow = SR_TENSOR_INIT;
    sr_tensor *deltas = NULL;
    int64_t n = x->shape[0], rs = sr_rowsize(x);
    if (x->dtype != SR_F64 || m->dtype != SR_F64)
        return sr_fail("check_module: needs float64 module and input");
    if (eval(m, x, &y0))
        goto done;
    int64_t ys = sr_rowsize(&y0);

    /* Stacked [x; v] with random tangents. */
    int64_t sshape[SR_MAXDIM];
    memcpy(sshape, x->shape, sizeof sshape);
    sshape[0] = n * (1 + k);
    if (sr_tensor_alloc(&stack, SR_F64, x->ndim, sshape))
        goto done;
    memcpy(sr_f64(&stack), sr_f64(x), (size_t)(n * rs) * sizeof(double));
    for (int64_t i = n * rs; i < sr_numel(&stack); i++)
        sr_f64(&stack)[i] = sr_rng_normal(&rng);
    sr_run run = SR_RUN_INIT;
    run.n = n;
    run.k = k;
    if (sr_module_jvp(m, &stack, &run) || sr_tensor_copy(&jv, &m->out))
        goto done;
    if (jv.shape[0] != n * (1 + k) || sr_rowsize(&jv) != ys) {
        sr_fail("check_module: jvp output %s, forward %s", SR_SHAPE(&jv), SR_SHAPE(&y0));
        goto done;
    }
    for (int64_t i = 0; i < n * ys; i++) {
        double d = fabs(sr_f64(&jv)[i] - sr_f64(&y0)[i]);
        if (d > res->primal)
            res->primal = d;
    }

    /* Finite differences per tangent: perturb every primal row i by its
     * tangent (i, j) at once (rows are independent for per-sample layers,
     * and for batch-coupled ones the stacked tangent is the joint one). */
    if (sr_tensor_copy(&xp, x) || sr_tensor_copy(&xm, x))
        goto done;
    for (int j = 0; j < k; j++) {
        for (int64_t i = 0; i < n; i++) {
            const double *v = sr_f64(&stack) + (n + i * k + j) * rs;
            for (int64_t e = 0; e < rs; e++) {
                sr_f64(&xp)[i * rs + e] = sr_f64(x)[i * rs + e] + h * v[e];
                sr_f64(&xm)[i * rs + e] = sr_f64(x)[i * rs + e] - h * v[e];
            }
        }
        if (eval(m, &xp, &fp) || eval(m, &xm, &fm))
            goto done;
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            const double *jvr = sr_f64(&jv) + (n + i * k + j) * ys;
            for (int64_t e = 0; e < ys; e++) {
                double fd = (sr_f64(&fp)[i * ys + e] - sr_f64(&fm)[i * ys + e]) / (2 * h);
                num += (jvr[e] - fd) * (jvr[e] - fd);
                den += fd * fd;
            }
        }
        double rel = sqrt(num) / (sqrt(den) > 1e-300 ? sqrt(den) : 1e-300);
        if (rel > res->jvp_fd || isnan(rel))
            res->jvp_fd = isnan(rel) ? INFINITY : rel;
    }

    /* Adjoint: one w per output, backward gives J^T w; compare with each
     * tangent j: sum_i <w_i, J v_ij> = sum_i <(J^T w)_i, v_ij>. */
    if (check_randn(&w, y0.ndim, y0.shape, seed + 1))
        goto done;
    sr_module_zero_grad(m);
    run = (sr_run)SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    if (sr_module_forward(m, x, &run) || sr_module_backward(m, &w, &run) ||
        sr_tensor_copy(&gx, &m->gin))
        goto done;
    if (!sr_same_shape(&gx, x)) {
        sr_fail("check_module: input gradient %s, input %s", SR_SHAPE(&gx), SR_SHAPE(x));
        goto done;
    }
    for (int j = 0; j < k; j++) {
        double lhs = 0, rhs = 0, scale = 0;
        for (int64_t i = 0; i < n; i++) {
            const double *jvr = sr_f64(&jv) + (n + i * k + j) * ys;
            const double *v = sr_f64(&stack) + (n + i * k + j) * rs;
            for (int64_t e = 0; e < ys; e++) {
                lhs += sr_f64(&w)[i * ys + e] * jvr[e];
                scale += fabs(sr_f64(&w)[i * ys + e] * jvr[e]);
            }
            for (int64_t e = 0; e < rs; e++)
                rhs += sr_f64(&gx)[i * rs + e] * v[e];
        }
        double rel = fabs(lhs - rhs) / (scale > 1e-300 ? scale : 1e-300);
        if (rel > res->adjoint || isnan(rel))
            res->adjoint = isnan(rel) ? INFINITY : rel;
    }

    /* Parameter gradients vs FD of L(θ) = <w, f(x;θ)> along random δθ. */
    int np;
    sr_module_count_params(m, 1, &np);
    if (np) {
        deltas = calloc((size_t)np, sizeof *deltas);
        param_state ps = {&rng, 0, 0, h, deltas, 0};
        if (!deltas || sr_module_walk_params(m, param_cb, &ps))
            goto done;
        double analytic = ps.num;
        ps.apply = 1; ps.i = 0;
        sr_module_walk_params(m, param_cb, &ps);
        if (eval(m, x, &fp))
            goto done;
        ps.apply = -2; ps.i = 0;
        sr_module_walk_params(m, param_cb, &ps);
        if (eval(m, x, &fm))
            goto done;
        ps.apply = 1; ps.i = 0;
        sr_module_walk_params(m, param_cb, &ps); /* restore */
        double fd = (dot(&w, &fp) - dot(&w, &fm)) / (2 * h);
        double scale = fabs(fd) > fabs(analytic) ? fabs(fd) : fabs(analytic);
        res->param_fd = fabs(fd - analytic) / (scale > 1e-300 ? scale : 1e-300);
        if (isnan(res->param_fd))
            res->param_fd = INFINITY;
    }
    rc = 0;
done:
    if (deltas) {
        for (int i = 0; i < np; i++)
            sr_tensor_free(&deltas[i]);
        free(deltas);
    }
    sr_tensor *all[] = {&y0, &stack, &jv, &xp, &xm, &fp, &fm, &w, &gx, &row, &vrow};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sr_tensor_free(all[i]);
    return rc;
}

/* What one thread count computed, for check_threads_agree. */
typedef struct {
    sr_tensor out, gin, jv;
    sr_tensor *grads; /* one per trainable parameter in walk order; empty where it has no gradient */
    int i;            /* the walk's position */
} thread_run;

static int keep_grad_cb(const char *path, sr_param *p, sr_module *owner, void *ud)
{
    (void)path;
    (void)owner;
    thread_run *r = ud;
    if (!p->trainable)
        return 0;
    sr_tensor *g = &r->grads[r->i++];
    return p->grad.storage ? sr_tensor_copy(g, &p->grad) : 0;
}

static int run_threads(sr_module *m, int threads, const sr_tensor *x, const sr_tensor *gy, const sr_tensor *xv,
                       int64_t n, int64_t k, thread_run *r)
{
    sr_threads_set(threads);
    sr_module_zero_grad(m);
    sr_run run = SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    if (sr_module_forward(m, x, &run) || sr_tensor_copy(&r->out, &m->out) ||
        sr_module_backward(m, gy ? gy : &r->out, &run) || sr_tensor_copy(&r->gin, &m->gin) ||
        sr_module_walk_params(m, keep_grad_cb, r))
        return -1;
    if (!xv)
        return 0;
    sr_run jr = SR_RUN_INIT;
    jr.n = n;
    jr.k = k;
    return sr_module_jvp(m, xv, &jr) || sr_tensor_copy(&r->jv, &m->out) ? -1 : 0;
}

static int same_bits(const sr_tensor *a, const sr_tensor *b)
{
    if (!a->storage || !b->storage)
        return !a->storage == !b->storage;
    return a->dtype == b->dtype && sr_same_shape(a, b) &&
           memcmp(sr_data(a), sr_data(b), (size_t)sr_numel(a) * sr_dtype_size(a->dtype)) == 0;
}

int check_threads_agree(sr_module *m, const sr_tensor *x, const sr_tensor *gy, const sr_tensor *xv, int64_t n,
                        int64_t k)
{
    int np, rc = -1, before = sr_threads_get();
    sr_module_count_params(m, 1, &np);
    thread_run r[2] = {{SR_TENSOR_INIT, SR_TENSOR_INIT, SR_TENSOR_INIT, NULL, 0},
                       {SR_TENSOR_INIT, SR_TENSOR_INIT, SR_TENSOR_INIT, NULL, 0}};
    for (int t = 0; t < 2; t++)
        r[t].grads = calloc((size_t)np + 1, sizeof *r[t].grads);
    if (!r[0].grads || !r[1].grads) {
        sr_fail("check_threads_agree: out of memory");
        goto done;
    }
    if (run_threads(m, 1, x, gy, xv, n, k, &r[0]) || run_threads(m, 2, x, gy, xv, n, k, &r[1]))
        goto done;
    const char *what[3] = {"output", "input gradient", "JVP"};
    const sr_tensor *one[3] = {&r[0].out, &r[0].gin, &r[0].jv}, *two[3] = {&r[1].out, &r[1].gin, &r[1].jv};
    for (int i = 0; i < 3; i++)
        if (!same_bits(one[i], two[i])) {
            sr_fail("%s: the %s differs between 1 and 2 threads", m->ops->kind, what[i]);
            goto done;
        }
    for (int i = 0; i < np; i++)
        if (!same_bits(&r[0].grads[i], &r[1].grads[i])) {
            sr_fail("%s: the gradient of trainable parameter %d differs between 1 and 2 threads", m->ops->kind, i);
            goto done;
        }
    rc = 0;
done:
    sr_threads_set(before);
    for (int t = 0; t < 2; t++) {
        sr_tensor_free(&r[t].out);
        sr_tensor_free(&r[t].gin);
        sr_tensor_free(&r[t].jv);
        for (int i = 0; r[t].grads && i < np; i++)
            sr_tensor_free(&r[t].grads[i]);
        free(r[t].grads);
    }
    return rc;
}

static int torch_load(sr_tensor *t, const torch_files *f, const char *c, const char *what, sr_dtype dt)
{
    char path[256];
    if (f->converted) {
        snprintf(path, sizeof path, "%s%s_%s.npy", f->dir, c, what);
        return sr_npy_load(t, path) || sr_tensor_convert(t, t, dt);
    }
    snprintf(path, sizeof path, "%s%s_%s_%s.npy", f->dir, c, what, dt == SR_F64 ? "f64" : "f32");
    return sr_npy_load(t, path);
}

/* Shape-checked relative error folded into *worst. */
static int torch_cmp(const torch_case *c, const sr_tensor *got, const sr_tensor *want, const char *what,
                     double *worst)
{
    if (!sr_same_shape(got, want))
        return sr_fail("%s %s: shape %s, torch %s", c->name, what, SR_SHAPE(got), SR_SHAPE(want));
    double e = check_rel_diff(got, want);
    if (e > *worst)
        *worst = e;
    return 0;
}

int check_torch(const torch_files *f, const torch_case *c, sr_dtype dt, double *worst)
{
    int rc = -1;
    sr_tensor x = SR_TENSOR_INIT, y = SR_TENSOR_INIT, v = SR_TENSOR_INIT, jv = SR_TENSOR_INIT,
              gy = SR_TENSOR_INIT, gx = SR_TENSOR_INIT, stack = SR_TENSOR_INIT, t = SR_TENSOR_INIT,
              view = SR_TENSOR_INIT;
    sr_opts o;
    sr_opts_kv_data d;
    sr_opts_kv(&o, &d, c->op, c->kv);
    sr_module *m = c->create(&o);
    *worst = 0;
    if (!m) {
        sr_fail("%s: create: %s", c->name, sr_errmsg());
        goto done;
    }
    if (sr_module_to_dtype(m, dt))
        goto done;
    sr_module_set_training(m, c->training);
    if (torch_load(&x, f, c->name, "x", dt) || torch_load(&y, f, c->name, "y", dt) ||
        torch_load(&v, f, c->name, "v", dt) || torch_load(&jv, f, c->name, f->jv, dt) ||
        torch_load(&gy, f, c->name, "gy", dt) || torch_load(&gx, f, c->name, "gx", dt))
        goto done;
    if (x.dtype != dt) {
        sr_fail("%s: fixture x is %s", c->name, sr_dtype_name(x.dtype));
        goto done;
    }
    int np = 0;
    for (; c->params[np]; np++) {
        char what[64];
        snprintf(what, sizeof what, "%s%s", f->param_prefix, c->params[np]);
        sr_param *p = sr_module_find_param(m, c->params[np]);
        if (!p) {
            sr_fail("%s: no parameter %s", c->name, c->params[np]);
            goto done;
        }
        if (torch_load(&t, f, c->name, what, dt))
            goto done;
        if (!sr_same_shape(&t, &p->value)) {
            sr_fail("%s: parameter %s is %s, fixture %s", c->name, c->params[np], SR_SHAPE(&p->value),
                    SR_SHAPE(&t));
            goto done;
        }
        if (sr_tensor_assign(&p->value, &t))
            goto done;
    }
    /* a parameter the fixture does not set would keep its random init */
    if (c->exact_params && np != m->nparams) {
        sr_fail("%s: module has %d params, fixture %d", c->name, m->nparams, np);
        goto done;
    }

    /* forward; in train mode it also moves the running statistics once */
    sr_run run = SR_RUN_INIT;
    if (sr_module_forward(m, &x, &run) || torch_cmp(c, &m->out, &y, "forward", worst))
        goto done;
    if (c->training) {
        if (torch_load(&t, f, c->name, "rm1", dt) ||
            torch_cmp(c, &sr_module_local_param(m, "running_mean")->value, &t, "running_mean", worst) ||
            torch_load(&t, f, c->name, "rv1", dt) ||
            torch_cmp(c, &sr_module_local_param(m, "running_var")->value, &t, "running_var", worst))
            goto done;
        if (sr_get_flat(&sr_module_local_param(m, "num_batches_tracked")->value, 0) != 1) {
            sr_fail("%s: num_batches_tracked is not 1", c->name);
            goto done;
        }
    }

    /* jvp: stack [x; v] with v already input-major, (N,K,...) or (N*K,...) */
    int64_t n = x.shape[0], k = c->k ? c->k : v.shape[1], shape[SR_MAXDIM];
    if (sr_numel(&v) != k * sr_numel(&x)) {
        sr_fail("%s: v %s is not %d tangents of x %s", c->name, SR_SHAPE(&v), (int)k, SR_SHAPE(&x));
        goto done;
    }
    memcpy(shape, x.shape, sizeof shape);
    shape[0] = n * (1 + k);
    if (sr_tensor_alloc(&stack, dt, x.ndim, shape))
        goto done;
    size_t es = sr_dtype_size(dt);
    memcpy(sr_data(&stack), sr_data(&x), (size_t)sr_numel(&x) * es);
    memcpy((char *)sr_data(&stack) + (size_t)sr_numel(&x) * es, sr_data(&v), (size_t)sr_numel(&v) * es);
    run = (sr_run)SR_RUN_INIT;
    run.n = n;
    run.k = k;
    if (sr_module_jvp(m, &stack, &run) || sr_tensor_narrow(&view, &m->out, 0, n) ||
        torch_cmp(c, &view, &y, "jvp primal", worst))
        goto done;
    /* torch's jv may be (N,K,...); ours is (N*K,...) in the same order */
    int64_t js[SR_MAXDIM];
    js[0] = n * k;
    for (int i = 1; i < y.ndim; i++)
        js[i] = y.shape[i];
    if (sr_numel(&jv) != n * k * sr_rowsize(&y)) {
        sr_fail("%s: %s %s, y %s", c->name, f->jv, SR_SHAPE(&jv), SR_SHAPE(&y));
        goto done;
    }
    if (sr_tensor_reshape(&t, &jv, y.ndim, js) || sr_tensor_narrow(&view, &m->out, n, n * k) ||
        torch_cmp(c, &view, &t, "jvp tangents", worst))
        goto done;

    /* backward with parameter grads */
    sr_module_zero_grad(m);
    run = (sr_run)SR_RUN_INIT;
    run.save = 1;
    run.param_grads = 1;
    if (sr_module_forward(m, &x, &run) || sr_module_backward(m, &gy, &run) ||
        torch_cmp(c, &m->gin, &gx, "input grad", worst))
        goto done;
    const char *const *grads = c->grads[0] ? c->grads : c->params;
    for (int i = 0; grads[i]; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s%s", f->grad_prefix, grads[i]);
        sr_param *p = sr_module_find_param(m, grads[i]);
        if (!p || !p->grad.storage) {
            sr_fail("%s: no gradient for %s", c->name, grads[i]);
            goto done;
        }
        if (torch_load(&t, f, c->name, what, dt) || torch_cmp(c, &p->grad, &t, what, worst))
            goto done;
    }
    rc = 0;
done:;
    sr_tensor *all[] = {&x, &y, &v, &jv, &gy, &gx, &stack, &t, &view};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sr_tensor_free(all[i]);
    sr_module_release(m);
    return rc;
}

int check_torch_cases(const torch_files *f, const torch_case *cases, size_t n, sr_dtype dt, double tol)
{
    int verbose = getenv("SRGEO_TEST_VERBOSE") != NULL;
    for (size_t i = 0; i < n; i++) {
        double e;
        if (check_torch(f, &cases[i], dt, &e))
            return -1;
        if (verbose)
            printf("  %-22s %s worst rel %.3g\n", cases[i].name, sr_dtype_name(dt), e);
        if (!(e <= tol))
            return sr_fail("%s %s: rel %g > %g", cases[i].name, sr_dtype_name(dt), e, tol);
    }
    return 0;
}
