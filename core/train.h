/* train.h - what a training step needs beyond the module tree: the loss and
 * the optimisers (the loop itself is configured in lua/srgeo/train.lua). */
#ifndef SR_TRAIN_H
#define SR_TRAIN_H

#include "module.h"

/* Mean softmax cross-entropy of logits (N, K) against integer labels in
 * [0, K).  Writes the loss, the number of correct top-1 predictions, and
 * (if grad != NULL) dL/dlogits (N, K) for the mean loss.  Labels out of
 * range: an error naming the row. */
int sr_cross_entropy(const sr_tensor *logits, const int64_t *labels, double *loss, int64_t *correct,
                     sr_tensor *grad);

/* Top-1 predictions of (N, K) logits into pred[N]. */
int sr_argmax_rows(const sr_tensor *logits, int64_t *pred);

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
 * weight_decay as torch.optim.AdamW). */
int sr_optim_init(sr_optim *o, sr_opt_kind kind);
void sr_optim_free(sr_optim *o);
/* One update of every trainable parameter of m with its grad (params
 * without a grad are skipped), with learning rate o->lr. */
int sr_optim_step(sr_optim *o, sr_module *m);
/* Visit optimiser state tensors with a name ("state1.layer1.0.conv1.weight")
 * so checkpoints can save and restore them (resume = identical run). */
typedef int (*sr_state_visitor)(const char *name, sr_tensor *t, void *ud);
int sr_optim_walk_state(sr_optim *o, sr_module *m, sr_state_visitor fn, void *ud);

#endif
