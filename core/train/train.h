/* train.h - what a training step needs beyond the module tree: the loss,
 * the optimisers, and the adversarial / local-linearity objectives (the
 * loop itself is configured in lua/srgeo/train.lua). */
#ifndef SR_TRAIN_H
#define SR_TRAIN_H

#include "base/opts.h"
#include "nn/module.h"

/* Mean softmax cross-entropy of logits (N, K) against integer labels in
 * [0, K).  Writes the loss, the number of correct top-1 predictions, and
 * (if grad != NULL) dL/dlogits (N, K) for the mean loss.  Labels out of
 * range: an error naming the row. */
int sr_cross_entropy(const sr_tensor *logits, const int64_t *labels, double *loss, int64_t *correct,
                     sr_tensor *grad);

/* The general form: L = Σ_i w_i ℓ_i with per-row weights w (NULL: 1/N, the
 * mean).  Optional outputs: losses[i] = ℓ_i, pred[i] = argmax row i (first
 * maximum), grad = dL/dlogits. */
int sr_cross_entropy_ex(const sr_tensor *logits, const int64_t *labels, const double *w, double *loss,
                        int64_t *correct, double *losses, int64_t *pred, sr_tensor *grad);

/* Top-1 predictions of (N, K) logits into pred[N]. */
int sr_argmax_rows(const sr_tensor *logits, int64_t *pred);

/* One pass of a training step on a batch in the model's current mode:
 * forward (saving), weighted cross-entropy on the full output, backward
 * (accumulating parameter gradients when param_grads).  dL/dx is left in
 * m->gin.  losses (N, may be NULL) gets ℓ_i; *loss the weighted sum. */
int sr_ce_pass(sr_module *m, const sr_tensor *x, const int64_t *labels, const double *w, int param_grads,
               double *loss, int64_t *correct, double *losses);

typedef enum { SR_OPT_SGD = 0, SR_OPT_ADAMW = 1 } sr_opt_kind;

typedef struct sr_optim {
    sr_opt_kind kind;
    double lr, momentum, weight_decay, beta1, beta2, eps;
    int nesterov;
    int64_t step;          /* updates taken (AdamW bias correction) */
    int nstate;
    sr_tensor *state1;     /* SGD: momentum buffer; AdamW: first moment */
    sr_tensor *state2;     /* AdamW: second moment */
} sr_optim;

/* opts: momentum=0.9, nesterov=false, weight_decay=5e-4 (SGD, coupled as in
 * torch.optim.SGD), or AdamW (beta1=0.9, beta2=0.999, eps=1e-8, decoupled
 * weight_decay as torch.optim.AdamW).  The options and their ranges are
 * declared once, in sr_sgd_specs / sr_adamw_specs (base/opts.h), which
 * give the defaults here and the checks of sr_optim_read. */
extern const sr_opt_spec sr_sgd_specs[], sr_adamw_specs[];
int sr_optim_init(sr_optim *o, sr_opt_kind kind);
/* sr_optim_init, then the options from src (unknown keys, types, ranges:
 * "OP: lr must be a number >= 0, got -1"; nesterov needs momentum > 0). */
int sr_optim_read(sr_optim *o, sr_opt_kind kind, const sr_opts *src);
void sr_optim_free(sr_optim *o);
/* One update of every trainable parameter of m with its grad (params
 * without a grad are skipped), with learning rate o->lr. */
int sr_optim_step(sr_optim *o, sr_module *m);
/* Visit optimiser state tensors with a name ("state1.layer1.0.conv1.weight")
 * so checkpoints can save and restore them (resume = identical run). */
typedef int (*sr_state_visitor)(const char *name, sr_tensor *t, void *ud);
int sr_optim_walk_state(sr_optim *o, sr_module *m, sr_state_visitor fn, void *ud);

/* --- data-parallel training ---------------------------------------------
 * A batch of `rows` rows in all is cut into contiguous shards, one per
 * process (core/lua/mpi.c supplies the sums under mpirun); every process
 * calls sr_train_step on its shard with the same model and optimiser. */
typedef struct sr_data_parallel {
    const sr_sum_hook *sum; /* sums over the processes; NULL: this process alone */
    int64_t rows;           /* rows of the whole batch (0: the shard is the batch) */
    int nproc;              /* processes (the mean of the buffers) */
    int sync_bn;            /* train-mode batchnorm2d normalises over the whole batch */
    int64_t bucket;         /* gradient values per sum; 0: SR_GRAD_BUCKET */
    int overlap;            /* start each bucket's sum as soon as backward has finished its gradients
                             * (when sum->start is given), instead of all after backward: the same bits */
    double *sum_seconds;    /* out (may be NULL): the step's seconds in the gradient sums' calls (packing,
                             * starting, progress during backward, then waiting): the time they add */
} sr_data_parallel;

/* 2^20 values (4 MB of float32) per sum: past the latency-bound sizes.
 * The packed buckets of a step are in flight together (a second copy of
 * the small gradients, lent by the model's pool). */
#define SR_GRAD_BUCKET (1 << 20)

/* One step: forward (saving) in the model's mode, L = Σ_i ℓ_i / rows over
 * the whole batch (the shard's share: *loss), backward, and with o the
 * parameter gradients summed over the processes, the buffers (BatchNorm
 * running statistics) replaced by their mean over the processes unless
 * sync_bn made them equal, the update, zero_grad.  dp NULL: one process.
 * dL/dx is left in m->gin. */
int sr_train_step(sr_module *m, sr_optim *o, const sr_tensor *x, const int64_t *labels, const sr_data_parallel *dp,
                  double *loss, int64_t *correct);
/* Sum every trainable parameter's gradient over the processes, in reverse
 * parameter order (as backward finishes them), packed into buckets of at
 * most `bucket` values; a gradient of `bucket` values or more is summed
 * alone, in place (parameters without a gradient are skipped, as on every
 * process). */
int sr_grads_sum(sr_module *m, const sr_sum_hook *h, int64_t bucket);

/* The same sums, overlapped with a backward or not (core/train/dp.c).
 * With run NULL, new plans the sums of the gradients there are (call it
 * after backward).  With a run it plans them only when it can before
 * backward: h->start is given and every trainable parameter already has a
 * gradient, so the plan is the one made after backward would be (else
 * *s = NULL); it sets run->grads_final, which starts each bucket's sum
 * once its gradients are final and every earlier bucket has started, and
 * lets the started sums progress.  finish starts the rest, waits, unpacks,
 * frees, and gives the seconds spent in all these calls (seconds may be
 * NULL); after a failed backward, abandon frees what no sum still writes. */
typedef struct sr_grad_sync sr_grad_sync;
int sr_grad_sync_new(sr_grad_sync **s, sr_module *m, const sr_sum_hook *h, int64_t bucket, sr_run *run);
int sr_grad_sync_final(const sr_module *m, void *ctx);
int sr_grad_sync_finish(sr_grad_sync *s, double *seconds);
void sr_grad_sync_abandon(sr_grad_sync *s);
/* Replace every buffer by its mean over nproc processes (summed in double). */
int sr_buffers_mean(sr_module *m, const sr_sum_hook *h, int nproc);

/* Copies of a module's buffers (non-trainable parameters: BatchNorm running
 * statistics), so extra train-mode passes can be undone. */
typedef struct sr_buffers {
    int n;
    sr_tensor *t;
} sr_buffers;
int sr_buffers_save(sr_buffers *b, sr_module *m);
int sr_buffers_restore(const sr_buffers *b, sr_module *m);
void sr_buffers_free(sr_buffers *b);

/* --- adversarial training (Madry et al. 2018; robustness library) ------ */

typedef enum { SR_NORM_LINF = 0, SR_NORM_L2 = 2 } sr_norm;

typedef struct sr_pgd_opts {
    sr_norm norm;
    double eps, step_size;   /* radius and step, in raw pixel units */
    int64_t steps;
    int random_start;        /* L∞: uniform in the cube; L2: on the sphere */
    int use_best;            /* return each row's highest-loss iterate */
    double lo, hi;           /* clip x_adv to [lo, hi]; lo > hi: no clip */
    int eval_mode;           /* attack with the model in eval mode */
    uint64_t seed;
    int64_t first_row;       /* x's first row in the whole batch (a data-parallel shard): random
                              * starts are drawn per row of the whole batch, so shards agree with it */
} sr_pgd_opts;

/* Defaults: L2, eps 0.5, 7 steps, step 2.5 eps / steps, random start, final
 * iterate, clip [0, 1], eval mode, seed 0: sr_pgd_specs, the declaration
 * of every option (norm, eps, steps, step_size, random_start, use_best,
 * clip, eval_mode, seed, row_offset), read by sr_pgd_opts_read. */
extern const sr_opt_spec sr_pgd_specs[];
void sr_pgd_defaults(sr_pgd_opts *o);
int sr_pgd_opts_read(const sr_opts *src, sr_pgd_opts *o);

/* x_adv = PGD ascent on the cross-entropy around x (N, ...): per row,
 * step along sign(g) (L∞) or g/‖g‖ (L2), project back to the ε-ball
 * around x, clip.  The model's mode is set as asked for the attack and
 * restored; no parameter gradients are touched.  *loss / *correct (may be
 * NULL) are the mean loss and top-1 hits at the returned x_adv. */
int sr_pgd_attack(sr_module *m, const sr_tensor *x, const int64_t *labels, const sr_pgd_opts *o, sr_tensor *xadv,
                  double *loss, int64_t *correct);

/* --- local linearity regularisation (Qin et al. 2019) ------------------ */
/*
 * Per image: g(δ) = |ℓ(x+δ) − ℓ(x) − δᵀ∇ₓℓ(x)|, γ = max_{δ∈B(ε)} g(δ)
 * (found by `steps` projected ascent steps, like PGD), δ_LL its argmax; the
 * training loss is  ℓ(x) + λ g(δ_LL) + μ |δ_LLᵀ∇ₓℓ(x)|.
 *
 * The θ-gradient of the δᵀ∇ₓℓ(x) terms needs second derivatives (double
 * backprop), which srgeo's reverse mode does not provide.  We use the
 * first-order (central finite-difference) identity
 *     ∇_θ[δᵀ∇ₓℓ(x)] ≈ (∇_θ ℓ(x + tδ) − ∇_θ ℓ(x − tδ)) / (2t)
 * with t = fd (default 0.1): exact for a network that is piecewise linear
 * in x when x ± tδ stay in x's activation region, O(t²) otherwise.  δ_LL is
 * held fixed in the outer gradient (as in Qin et al.), and the signs of the
 * two absolute values come from the inner maximisation.  The outer passes
 * run in the model's mode (train: BatchNorm batch statistics); only the
 * clean pass updates BatchNorm running statistics.
 */
typedef struct sr_llr_opts {
    sr_norm norm;
    double eps, step_size;
    int64_t steps;
    int random_start;
    double lambda, mu, fd;
    double lo, hi;
    int eval_mode;           /* inner maximisation in eval mode */
    uint64_t seed;
} sr_llr_opts;

/* Defaults: L∞, eps 8/255, 3 steps, step 2.5 eps / steps, random start,
 * λ 4, μ 3 (Qin et al.'s CIFAR-10 setting), fd 0.1, clip [0, 1], eval:
 * declared in sr_llr_specs, read by sr_llr_opts_read. */
extern const sr_opt_spec sr_llr_specs[];
void sr_llr_defaults(sr_llr_opts *o);
int sr_llr_opts_read(const sr_opts *src, sr_llr_opts *o);

typedef struct sr_llr_result {
    double loss;     /* ce + λ γ + μ align (batch means) */
    double ce;       /* clean cross-entropy of the outer (training-mode) pass */
    double gamma;    /* mean linearity gap g(δ_LL) */
    double align;    /* mean |δ_LLᵀ∇ₓℓ(x)| */
    int64_t correct; /* clean top-1 hits */
} sr_llr_result;

/* The inner maximisation: delta (like x) = δ_LL; gap[i] = signed
 * ℓ_i(x+δ) − ℓ_i(x) − δᵢᵀ∇ℓ_i(x), dir[i] = δᵢᵀ∇ℓ_i(x) (arrays of N). */
int sr_llr_inner(sr_module *m, const sr_tensor *x, const int64_t *labels, const sr_llr_opts *o, sr_tensor *delta,
                 double *gap, double *dir);
/* Accumulate the θ-gradient of Σ_i [ℓ_i(x) + λ s_i(ℓ_i(x+δ) − ℓ_i(x) − D_i) + μ q_i D_i] / N
 * with D_i the finite-difference directional derivative, s = sign(gap),
 * q = sign(dir).  res gets the outer values. */
int sr_llr_outer(sr_module *m, const sr_tensor *x, const int64_t *labels, const sr_llr_opts *o,
                 const sr_tensor *delta, const double *gap, const double *dir, sr_llr_result *res);
/* A full step: inner, outer, optimiser update, zero_grad.  With o == NULL
 * only the inner maximisation runs (measuring γ: res->gamma, res->align). */
int sr_llr_step(sr_module *m, sr_optim *opt, const sr_tensor *x, const int64_t *labels, const sr_llr_opts *o,
                sr_llr_result *res);

/* --- the training loop's options ---------------------------------------- */
/*
 * The loop itself is Lua (lua/srgeo/train.lua); its options are declared
 * here with the rest of the trainer's, so srgeo.train, scripts/train.lua
 * and the help all read one table: sr_train_specs over sr_train_opts (the
 * optimiser's own options are those of sr_sgd_specs / sr_adamw_specs, the
 * objectives' those of sr_pgd_specs, sr_gaussian_specs, sr_llr_specs).
 */
typedef struct sr_train_opts {
    int64_t epochs, steps, batch, warmup, seed, per_decade, eval_train, eval_test, eval_batch, eval_every,
        log_every, stop_at, threads;
    double gamma, blur;
    int optimizer, schedule, labels, data_kind, objective, keep_optim;
    int blur_test, resume, drop_last, epoch_checkpoints, sync_bn, overlap;
    int64_t bucket;
} sr_train_opts;
extern const sr_opt_spec sr_train_specs[];

/* The Gaussian-noise objective's options: x + sigma N(0, 1), clipped. */
typedef struct sr_gaussian_opts {
    double sigma;
    int clip;
} sr_gaussian_opts;
extern const sr_opt_spec sr_gaussian_specs[];

#endif
