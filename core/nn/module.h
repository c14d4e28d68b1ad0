/* module.h - encoder module trees: leaves (layers) and containers.
 *
 * A module computes y = f(x) on a batch.  It runs three ways, wholly in C:
 *
 *   forward   m->out = f(x)
 *   jvp       stacked forward-mode AD.  The input holds run->n primal rows
 *             followed by run->n * run->k tangent rows, tangent j of primal i
 *             at row n + i*k + j ("input-major").  The output has the same
 *             layout: rows [0,n) are f(x), the rest J(x)·v.  Linear layers run
 *             the whole stack through one GEMM (bias only on the primal rows),
 *             so k tangents cost about (1+k)/k forwards each.
 *   backward  given dL/dy for the last forward (run with run->save), writes
 *             dL/dx into m->gin and, when run->param_grads, *accumulates*
 *             dL/dθ into each trainable parameter's grad.
 *
 * Buffers: a module owns its output (m->out) and input-gradient (m->gin)
 * tensors, lent by the pass's pool (sr_module_output, sr_module_grad_input).
 * Containers give a child's buffers back once its consumer has read them:
 * outputs during forward (what backward needs is held by the consumers'
 * m->saved references, not by m->out), gradients during backward, and
 * sr_module_backward returns m->saved.  So a training step holds the saved
 * activations plus a few live gradients, and afterwards only the root's
 * output and input gradient.  Whoever wants to keep a result takes a
 * reference (sr_tensor_share): a referenced buffer never goes to a pool.
 *
 * Names: a child is stored with its name in the parent ("conv1", "0").  An
 * empty name is transparent: the child's parameters and children appear
 * directly under the parent's path.  This is how a torchvision BasicBlock
 * (conv1, bn1, conv2, bn2, downsample with a non-sequential dataflow) gets
 * torchvision's state_dict keys: block = sequential{ ""=residual{ ""=body,
 * "downsample"=shortcut }, "relu"=relu }.
 */
#ifndef SR_MODULE_H
#define SR_MODULE_H

#include "base/opts.h"
#include "base/rng.h"
#include "kernels/epilogue.h"
#include "kernels/kink.h"
#include "tensor/tensor.h"

typedef struct sr_module sr_module;

typedef struct sr_param {
    char *name;       /* local name: "weight", "running_mean", "cls_token" */
    sr_tensor value;
    sr_tensor grad;   /* allocated (zeroed) on first accumulation */
    int trainable;    /* 0 for buffers such as BatchNorm running statistics */
    int role;         /* SR_ROLE_*: what a learned constant is (an importer's finding) */
} sr_param;

/* The role of a trainable constant an importer found in a file (the ONNX
 * importer's operands of Mul / Add / Concat / PRelu), for drawing it anew
 * (srgeo.models.twin, core/README.md "Random twins"): a norm's or an
 * affine block's scale or shift, a position embedding, a class token, a
 * PReLU slope.  A layer's own parameters (conv, linear, norm weights and
 * biases) have none: their layer's reset and their name and shape say
 * what they are. */
enum { SR_ROLE_NONE, SR_ROLE_SCALE, SR_ROLE_SHIFT, SR_ROLE_EMBEDDING, SR_ROLE_TOKEN, SR_ROLE_SLOPE };
/* "scale", "shift", "embedding", "token", "slope" ("" for SR_ROLE_NONE). */
const char *sr_param_role_name(int role);

/* Per-call state threaded through a tree. */
/* A sum over the processes of a data-parallel run: buf (n values of dt)
 * is replaced, in place, by its sum over every process, the same bits on
 * all of them; 0 or -1 + message.  The core never sees MPI: core/lua/mpi.c
 * supplies one under mpirun, for synchronised BatchNorm statistics
 * (sr_run.sync) and the trainer's gradient sums (core/train/train.h). */
typedef struct sr_sum_hook {
    int (*sum)(void *buf, int64_t n, sr_dtype dt, void *ctx);
    void *ctx;
    /* Optional, the same sum without waiting (MPI_Iallreduce): start
     * begins summing buf in place (nobody touches buf until wait returns),
     * progress lets the started sums advance (Open MPI moves a nonblocking
     * collective only inside an MPI call), wait completes every started
     * sum.  Every process starts the same sums in the same order.  NULL:
     * the trainer calls sum. */
    int (*start)(void *buf, int64_t n, sr_dtype dt, void *ctx);
    int (*progress)(void *ctx);
    int (*wait)(void *ctx);
} sr_sum_hook;

typedef struct sr_run {
    int64_t n, k;        /* jvp: primal rows and tangents per primal */
    /* jvp: the rule at kinks and ties (kernels/kink.h).  0: PyTorch's
     * subgradient (ReLU's mask x > 0, the first maximum); 1: the one-sided
     * directional derivative of each tangent row, exact everywhere for
     * piecewise-linear maps (the profile engine's rule). */
    int directional;
    /* jvp with directional: when not NULL, run->n counts (one per primal
     * row), added to by every layer that meets a tie or a singular point. */
    sr_kinks *kinks;
    int save;            /* forward: keep what backward needs */
    int param_grads;     /* backward: accumulate parameter gradients */
    /* Taps: outputs of these modules are recorded (as shared views, stacked
     * for jvp).  When stop_after_taps, the pass ends once all are recorded. */
    int ntaps;
    const sr_module *const *taps;
    sr_tensor *tap_out;  /* ntaps slots, filled by sr_run_record */
    int ntaps_done;
    int stop_after_taps;
    int stopped;         /* set when the pass ended early at the last tap */
    /* ReLU layers keep their input (stacked, for jvp) in m->saved, for the
     * activation-pattern metrics (core/stats/metrics.c). */
    int record_relu;
    /* Spare buffers for the pass: the pool of the module the pass started
     * from, set by sr_module_forward / _jvp / _backward for the duration of
     * that call (leave it NULL).  A pass without run->save returns each
     * activation to it once consumed. */
    sr_pool *pool;
    /* Run without a pool: nothing is lent, whatever is given back is freed
     * (a reference for the pooling, and use-after-give-back becomes a
     * use-after-free that the sanitizers see). */
    int unpooled;
    /* Run every layer on its own: no inference fusion in sequentials (a
     * reference for the fusion, which is bit-identical anyway). */
    int unfused;
    int nfused;          /* out: layer groups the pass ran fused */
    /* The layers flagged SR_MOD_BF16 round their float32 inputs
     * and weights to bfloat16 before their products (kernels/bf16.h): an
     * emulation of bf16 inputs with float32 accumulation, to measure its
     * error (the profile's emulate_bf16), no faster than float32. */
    int bf16;
    /* Residual -> relu in a fused forward: the sum's other branch, handed
     * to the body's sequential, which adds it and clips in its last
     * conv -> batchnorm map and sets addend_used. */
    const sr_tensor *addend;
    int addend_used;
    /* Data-parallel training: a train-mode batchnorm2d normalises with the
     * statistics of the whole batch, its shards summed over the processes
     * by sync (NULL: this process's rows alone). */
    const sr_sum_hook *sync;
    /* Backward with param_grads: called by sr_module_backward (_n) once a
     * module's backward has returned, when the gradients of its parameters
     * and its subtree's are final for the pass, so a data-parallel trainer
     * starts summing them while backward goes on (core/train/dp.c). */
    int (*grads_final)(const sr_module *m, void *ctx);
    void *grads_ctx;
    /* Set by the first forward of a pass with save, once it has checked
     * that no module is used twice (sr_module_check_single_use). */
    int single_use_checked;
} sr_run;

/* A run with nothing set: a plain forward or backward, no taps. */
#define SR_RUN_INIT {.n = 0}

typedef struct sr_module_ops {
    /* "conv2d", "sequential", ...: for messages and listings only.  Nothing
     * decides by it: what a container or a statistic needs to know about a
     * layer it asks through the properties and hooks below, so a new layer
     * is added in its own file and the registry, nowhere else. */
    const char *kind;
    int (*forward)(sr_module *m, const sr_tensor *x, sr_run *run);
    int (*jvp)(sr_module *m, const sr_tensor *xv, sr_run *run);
    int (*backward)(sr_module *m, const sr_tensor *gy, sr_run *run);
    /* Re-initialise parameters (PyTorch's default init); NULL if none. */
    void (*reset)(sr_module *m, sr_rng *rng);
    /* Free impl-owned resources (saved tensors, workspaces); may be NULL. */
    void (*free_impl)(sr_module *m);
    /* One-line description of the configuration, e.g. "3->16, k3 s1 p1". */
    void (*describe)(const sr_module *m, char *buf, size_t n);

    /* --- properties (optional) ------------------------------------------ */
    /* 1 when the map is affine in the module's current mode (conv2d,
     * linear, batchnorm2d in eval, pooling by averages, reshapes); NULL:
     * never.  sr_module_affine_always serves layers that always are. */
    int (*is_affine)(const sr_module *m);
    unsigned flags; /* SR_MOD_* below */

    /* --- inference fusion (optional; containers.c) ------------------------
     * A sequential runs a layer with run_mapped followed by layers with fold
     * as one op: the folded maps are applied to the first layer's output
     * while each block is still in cache, bit-identical to running them one
     * by one (kernels/epilogue.h). */
    /* Absorb this layer's map, applied after e's, into e: 1 if it can (a
     * batchnorm2d in eval mode folds its per-channel affine map into an e
     * without one; a relu sets e->relu), 0 otherwise (e unchanged).  The
     * arrays e then points to stay valid until m next runs or is freed. */
    int (*fold)(sr_module *m, sr_epilogue *e);
    /* Whether run_mapped can apply e in a forward (jvp = 0) or a stacked
     * JVP (jvp = 1). */
    int (*maps)(const sr_module *m, const sr_epilogue *e, int jvp);
    /* The forward or stacked JVP with e applied to the output as it is
     * written (called through sr_module_run_mapped, which checks the input). */
    int (*run_mapped)(sr_module *m, const sr_tensor *x, int jvp, const sr_epilogue *e, sr_run *run);

    /* --- several inputs (optional; graph nodes, nn/graph.c) ----------------
     * A module reading nin tensors (a sum, a product, a concatenation) runs
     * through these instead of forward / jvp / backward, called by
     * sr_module_forward_n & co. with every input of the same dtype and, in a
     * JVP, of the stacked layout.  arity: how many inputs this module takes
     * (NULL: 1; -1: any number from 1).  backward_n writes dL/dx_i into
     * gin[i] (lent by the pass's pool), for the inputs of the last forward
     * run with run->save; the module keeps what it needs in its impl and
     * gives it back to the pool there. */
    int (*arity)(const sr_module *m);
    int (*forward_n)(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run);
    int (*jvp_n)(sr_module *m, int nin, const sr_tensor *const *xv, sr_run *run);
    int (*backward_n)(sr_module *m, const sr_tensor *gy, int nin, sr_tensor *gin, sr_run *run);

    /* --- a shared affine prefix (optional; containers; the profile engine) -
     * affine_prefix: how many leading children are affine layers through
     * which alone the input reaches the rest, all but the last child at
     * most: a sequential's first affine children; a graph's first nodes
     * when they are affine and no later node reads the input or a value
     * before the last of them.  On them the model is rest(A(x) + L(u)) for
     * an input x + u.  forward_from: the forward of children [first, n) on
     * x, which stands for child first − 1's output (called through
     * sr_module_forward_from, which checks first and runs the pass). */
    int (*affine_prefix)(const sr_module *m);
    int (*forward_from)(sr_module *m, int first, const sr_tensor *x, sr_run *run);
} sr_module_ops;

/* sr_module_ops.flags */
enum {
    /* ReLU: piecewise linear with a kink at 0 in each element.  Under
     * run->record_relu it keeps its input (stacked in a jvp) in m->saved,
     * whose signs the activation-pattern metrics read (stats/metrics.c). */
    SR_MOD_RELU = 1u << 0,
    /* A container whose map is its children's maps composed and summed
     * (sequential, residual): piecewise linear when theirs are. */
    SR_MOD_COMBINES = 1u << 1,
    /* With two inputs, their sum y = x0 + x1 and nothing else: a graph may
     * run it inside the output map of the layer that produces one input,
     * the other as the map's addend (sr_epilogue.add), as a residual's sum
     * is run in its body's last map. */
    SR_MOD_SUM = 1u << 2,
    /* Its forward multiplies activations by weights or by each other (a
     * convolution, a GEMM). */
    SR_MOD_PRODUCTS = 1u << 3,
    /* ... and under run->bf16 rounds their float32 factors to bfloat16
     * first; a module with SR_MOD_PRODUCTS but not this one ignores
     * run->bf16, and emulate_bf16 refuses its model. */
    SR_MOD_BF16 = 1u << 4,
};

typedef struct sr_child {
    char *name;
    sr_module *m;
} sr_child;

struct sr_module {
    const sr_module_ops *ops;
    long refcount;
    int training;              /* BatchNorm batch statistics etc. */
    sr_dtype dtype;            /* dtype of parameters; inputs must match */
    int nparams;
    sr_param *params;
    int nchildren;
    sr_child *children;
    sr_tensor out;             /* last output (stacked for jvp) */
    sr_tensor gin;             /* last input gradient */
    sr_tensor saved;           /* input saved by forward for backward */
    void *impl;                /* layer-specific config and state */
    /* Tap names of a whole model (root only): "features" -> "flatten", and
     * the tap used when a caller names none (NULL: the full output). */
    int naliases;
    char **alias_names, **alias_paths;
    char *default_tap;
    /* Containers: child index where the last pass stopped at a tap (-1:
     * ran to the end), so backward starts from the tap, not the output. */
    int stop_at;
    /* Shape and dtype of the last output, kept when a pass has returned the
     * buffer to the pool (m:summary and backward's checks read them). */
    int out_ndim;
    int64_t out_shape[SR_MAXDIM];
    sr_dtype out_dtype;
    /* Spare buffers of passes started at this module (see sr_run.pool). */
    sr_pool pool;
};

/* --- construction ------------------------------------------------------ */
/* New module with refcount 1 and a zeroed impl of impl_size bytes. */
sr_module *sr_module_new(const sr_module_ops *ops, size_t impl_size);
void sr_module_retain(sr_module *m);
void sr_module_release(sr_module *m);
/* Add a parameter (allocated, zeroed, float32); returns it or NULL. */
sr_param *sr_module_add_param(sr_module *m, const char *name, int ndim, const int64_t *shape,
                              int trainable);
/* Add a child (takes a new reference). */
int sr_module_add_child(sr_module *m, const char *name, sr_module *child);
/* p's gradient buffer for backward to accumulate into, allocated and
 * zeroed on first use; NULL with the error set when out of memory. */
void *sr_param_grad(sr_module *m, sr_param *p);
/* Direct parameter of this module by local name, or NULL. */
sr_param *sr_module_local_param(const sr_module *m, const char *name);

/* --- running ----------------------------------------------------------- */
/* Check input dtype matches the module's parameters (op named in error). */
int sr_module_check_dtype(const sr_module *m, const sr_tensor *x);
/* Public entry points: check dtype, interrupt flag, run the op, record taps. */
int sr_module_forward(sr_module *m, const sr_tensor *x, sr_run *run);
int sr_module_jvp(sr_module *m, const sr_tensor *xv, sr_run *run);
/* The stacked layout sr_module_jvp expects: xv has run->n·(1 + run->k)
 * rows, run->k >= 1. */
int sr_run_check_stacked(const sr_module *m, const sr_tensor *xv, const sr_run *run);
int sr_module_backward(sr_module *m, const sr_tensor *gy, sr_run *run);
/* The inputs m takes (its arity hook; 1 without one; -1: any number). */
int sr_module_arity(const sr_module *m);
/* The same for nin inputs: the _n hooks, or with nin = 1 the plain ones
 * (backward then shares m->gin into gin[0]).  Every input is checked as
 * sr_module_forward / _jvp check theirs. */
int sr_module_forward_n(sr_module *m, int nin, const sr_tensor *const *x, sr_run *run);
int sr_module_jvp_n(sr_module *m, int nin, const sr_tensor *const *xv, sr_run *run);
int sr_module_backward_n(sr_module *m, const sr_tensor *gy, int nin, sr_tensor *gin, sr_run *run);
/* m's forward (jvp = 0) or stacked JVP with the output map e, through its
 * run_mapped hook, after sr_module_forward's / sr_module_jvp's checks (the
 * caller asked m->ops->maps first).  Taps are recorded by the caller. */
int sr_module_run_mapped(sr_module *m, const sr_tensor *x, int jvp, const sr_epilogue *e, sr_run *run);
/* After forward or jvp: keep the output's shape and dtype (the buffer may go
 * back to a pool) and record taps. */
void sr_module_ran(sr_module *m, sr_run *run);
/* One tap for a pass that stops there: run records taps[0]'s output in
 * *out (taps[0] NULL: no tap, the pass runs to the end). */
void sr_run_tap(sr_run *run, const sr_module *const *taps, sr_tensor *out);
/* Make m->out a dtype/shape buffer for this pass: m's own when it can serve,
 * else one lent from the pass's pool, else fresh (sr_tensor_ensure). */
int sr_module_output(sr_module *m, sr_run *run, sr_dtype dtype, int ndim, const int64_t *shape);
int sr_module_output_like(sr_module *m, sr_run *run, const sr_tensor *like);
/* The same for m->gin in backward. */
int sr_module_grad_input(sr_module *m, sr_run *run, sr_dtype dtype, int ndim, const int64_t *shape);
int sr_module_grad_input_like(sr_module *m, sr_run *run, const sr_tensor *like);
/* A pass's start and end around an op run outside sr_module_forward /
 * _jvp (sr_module_forward_from): begin returns whether this call
 * started the pass (and lent it m's pool), end takes the pool back. */
int sr_run_begin(sr_module *m, sr_run *run);
void sr_run_end(sr_run *run, int root);
/* Called by containers after each child: records taps, sets run->stopped. */
void sr_run_record(sr_run *run, const sr_module *child);
/* Whether m is one of the run's taps (a fused group ends there). */
int sr_run_tapped(const sr_run *run, const sr_module *m);
/* Release the tap outputs held by run (not the array itself). */
void sr_run_clear(sr_run *run);

/* --- tree utilities ---------------------------------------------------- */
void sr_module_set_training(sr_module *m, int training);
/* Convert all parameters to dtype and drop cached buffers. */
int sr_module_to_dtype(sr_module *m, sr_dtype dtype);
void sr_module_reset(sr_module *m, sr_rng *rng);
void sr_module_zero_grad(sr_module *m);
/* Drop cached activations, saved inputs and gradients (frees memory). */
void sr_module_clear_buffers(sr_module *m);

/* Elements in m's own trainable parameters (with recurse, in its whole
 * subtree's); *ntensors (may be NULL) gets how many parameters hold them. */
int64_t sr_module_count_params(const sr_module *m, int recurse, int *ntensors);
/* Visit every parameter with its dotted path ("layer1.0.conv1.weight"). */
typedef int (*sr_param_visitor)(const char *path, sr_param *p, sr_module *owner, void *ud);
int sr_module_walk_params(sr_module *m, sr_param_visitor fn, void *ud);
/* The same, visiting each distinct parameter once, under its first path: a
 * module used twice in a tree (modules are refcounted; sequential{l, relu,
 * l}, two graph nodes of one module) lists its parameters under each path
 * in the walk above, as a state_dict does, but is trained once.
 * *repeats (may be NULL): the visits skipped.  Parameters are told apart
 * by their sr_param (no two share a value tensor's storage). */
int sr_module_walk_params_once(sr_module *m, sr_param_visitor fn, void *ud, int *repeats);
/* Visit every module with its dotted path ("" for the root). */
typedef int (*sr_module_visitor)(const char *path, sr_module *m, int depth, void *ud);
int sr_module_walk(sr_module *m, sr_module_visitor fn, void *ud);
/* Fail, naming both places, when a module appears twice in m's tree: a
 * pass that saves for backward cannot run through it (backward needs each
 * use's saved input, and a module keeps one).  Forward with run->save
 * checks this once per pass. */
int sr_module_check_single_use(sr_module *m);
/* Lookup by dotted path; NULL (with error set) if absent. */
sr_param *sr_module_find_param(sr_module *m, const char *path);
/* Module at a dotted path or at one of the root's aliases; "" is the root. */
sr_module *sr_module_find(sr_module *m, const char *path);
/* Define alias name -> path (replacing an existing one); path must exist. */
int sr_module_set_alias(sr_module *m, const char *name, const char *path);
/* n aliases names[i] -> paths[i] at once: one walk of the tree for all of
 * them (set one by one, each would walk it).  Stops at the first path that
 * does not exist, the aliases before it set. */
int sr_module_set_aliases(sr_module *m, int n, const char *const *names, const char *const *paths);
/* Set the default tap (an alias or path; NULL or "" for the full output). */
int sr_module_set_default_tap(sr_module *m, const char *tap);

/* --- properties --------------------------------------------------------- */
/* The is_affine hook of layers that are affine in every mode. */
int sr_module_affine_always(const sr_module *m);
/* A module whose map is affine in its current mode (its is_affine hook). */
int sr_module_is_affine(const sr_module *m);

/* --- containers (containers.c) ----------------------------------------- */
/* Give m's output back to the pass's pool once its consumers have read it,
 * and its subtree's (a container's children's): called by containers on
 * each child's output.  Buffers someone still references stay with them. */
void sr_module_drop_outputs(sr_module *m, sr_run *run);
/* Sequential: children run in order. */
sr_module *sr_sequential_new(void);
/* Forward of m's children [first, n) on x, which stands for child
 * first − 1's output: a caller that has that output another way (the
 * profile engine's shared affine prefix) runs only the rest.  For modules
 * with a forward_from hook (sequential, graph) and 0 < first < n. */
int sr_module_forward_from(sr_module *m, int first, const sr_tensor *x, sr_run *run);
/* How many leading children of m are an affine prefix (the affine_prefix
 * hook; 0 for modules without one): on them the model is A(x) + L(u) for
 * an input x + u, and sr_module_forward_from runs the rest. */
int sr_module_affine_prefix(const sr_module *m);
/* Residual: y = body(x) + (shortcut ? shortcut(x) : x).  Children are added
 * as "body" role first, then the optional shortcut; names are free. */
sr_module *sr_residual_new(void);
/* Identity (also dropout and stochastic depth at eval). */
sr_module *sr_identity_new(void);

/* --- graph (graph.c) --------------------------------------------------- */
/* A DAG of named nodes: value 0 is the graph's input, value i + 1 the
 * output of node i, and a node reads values that exist when it is added
 * (so nodes run in the order added).  Returns the new node's value id, or
 * -1: name must be unique and neither empty nor "input", nin must fit the
 * child's arity (sr_module_arity). */
sr_module *sr_graph_new(void);
int sr_graph_add(sr_module *g, const char *name, sr_module *child, int nin, const int *inputs);
/* The value the graph returns (default: the last node's). */
int sr_graph_set_output(sr_module *g, int value);
/* The value of node name (0 for "input" or ""), or -1 with the error set. */
int sr_graph_value(const sr_module *g, const char *name);

/* --- layer registry (layers.c) ----------------------------------------- */
/* Every leaf layer is built from options, e.g. conv2d{in_channels=3, ...};
 * the Lua binding srgeo.nn.NAME{...} looks the name up here. */
typedef sr_module *(*sr_layer_ctor)(const sr_opts *o);
typedef struct sr_layer_def {
    const char *name;
    sr_layer_ctor create;
    const char *help; /* options with defaults, one line */
} sr_layer_def;
extern const sr_layer_def sr_layers[]; /* terminated by {NULL} */
const sr_layer_def *sr_layer_lookup(const char *name);

/* Row of the primal that tangent row t (0-based within the tangent block)
 * belongs to, for input-major stacking. */
static inline int64_t sr_tangent_primal(const sr_run *run, int64_t t) { return t / run->k; }

#endif
