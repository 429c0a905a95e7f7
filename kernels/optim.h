/*
 * kernels/optim.h - optimizer updates on flat float32 ranges.
 *
 * Used by servers on their key ranges and, later, by workers that update
 * locally (allreduce mode), so both apply exactly the same arithmetic.
 * The state buffers live beside the parameters they belong to.
 */
#ifndef PS_KERNELS_OPTIM_H
#define PS_KERNELS_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float lr;           /* learning rate */
    float momentum;     /* 0 = plain SGD */
    float weight_decay; /* L2: g += weight_decay * w */
} ps_optim_sgd_t;

/*
 * SGD with momentum, PyTorch's formulation (torch.optim.SGD, dampening 0):
 *   g = grad*scale + wd*w;  v = mu*v + g;  w -= lr*v    (v unused when mu == 0)
 * w, v, grad: n floats. scale multiplies the incoming gradient (1/M for a
 * sum of M pushes). Thread-safe on disjoint ranges.
 */
void ps_optim_sgd_step(const ps_optim_sgd_t *o, float *w, float *v, const float *grad,
                       float scale, size_t n);

/* Non-zero when all n floats at g (any alignment) are finite: no NaN, no
 * infinity. One branch-free read of the bytes that the compiler vectorises;
 * run it on a gradient while it is still in cache. */
int ps_optim_finite(const void *g, size_t n);

/* acc[0..n) = c * g (first != 0) or acc[i] + c * g (else), g n floats at any
 * alignment (read in place from a frame): a server's weighted sum of the
 * pushes of a step, one push at a time. */
void ps_optim_accumulate(float *acc, const void *g, float c, size_t n, int first);

/* One list of row gradients: a worker's rows push of a step, or a batch's
 * micro-batch. */
typedef struct {
    const void *keys;  /* nkeys little-endian uint64, strictly ascending by hash (checked) */
    const void *grads; /* nkeys rows of the job's embed_dim floats, any alignment */
    uint64_t nkeys;
    float weight;      /* its staleness weight (1 for a fresh push) */
} ps_rows_part_t;

/* Most lists ps_optim_sum_rows sums at once (the most workers). */
enum { PS_OPTIM_MAX_PARTS = 256 };

/*
 * The sum of rows pushes parts[0 .. n) in their order: per key, acc = w0*g0
 * then acc += w*g for each later part that names it (ps_optim_accumulate's
 * arithmetic, as the dense parts are summed), into keys (the union of the
 * parts' keys, ascending by hash) and grads (dim floats per key), grown as needed
 * (*cap keys; *keys and *grads malloc'd, caller owns them). Returns the
 * number of keys, or PS_ENOMEM (PS_EINVAL past PS_OPTIM_MAX_PARTS parts).
 */
int64_t ps_optim_sum_rows(const ps_rows_part_t *parts, int n, size_t dim, uint64_t **keys,
                                float **grads, uint64_t *cap);

/* The server-side optimizers (job->optimizer). */
typedef enum {
    PS_OPT_SGD = 0,      /* SGD, with momentum when momentum > 0 */
    PS_OPT_NESTEROV = 1, /* SGD with Nesterov momentum */
    PS_OPT_ADAM = 2,     /* Adam */
    PS_OPT_ADAGRAD = 3,  /* AdaGrad */
    PS_OPT_FTRL = 4,     /* FTRL-Proximal */
} ps_optim_kind_t;

typedef struct {
    ps_optim_kind_t kind; /* which update */
    float momentum;       /* SGD / Nesterov */
    float weight_decay;   /* L2: g += weight_decay * w (PyTorch's weight_decay) */
    float beta1, beta2;   /* Adam's moment decays (0.9, 0.999) */
    float eps;            /* Adam 1e-8, AdaGrad 1e-10 (PyTorch's defaults) */
    float l1, l2;         /* FTRL's L1 and L2 strengths (lambda1, lambda2), >= 0 */
    float beta;           /* FTRL's per-coordinate rate offset (1.0) */
} ps_optim_t;

/* Fills o from the job (job->optimizer names the kind). Returns 0 or PS_EINVAL. */
int ps_optim_from_job(const ps_job_t *job, ps_optim_t *o);

/* Floats of optimizer state per parameter: 0 (plain SGD), 1 (momentum,
 * AdaGrad's sum of squares) or 2 (Adam's first and second moments, FTRL's
 * z and n). */
int ps_optim_state_floats(const ps_optim_t *o);

/*
 * One update of n parameters w with gradient grad*scale at learning rate lr.
 * t is the 1-based count of updates applied so far including this one (Adam's
 * bias correction). state: the optimizer state of these parameters; when there
 * are two state arrays the second starts stride floats after the first (so a
 * sub-range of a larger buffer can be updated). Zeroed state = fresh optimizer.
 * Formulas as torch.optim documents them (dampening 0, no amsgrad, no lr decay):
 *   all:       g = grad*scale + wd*w
 *   sgd:       v = mu*v + g;  w -= lr*v            (w -= lr*g when mu = 0)
 *   nesterov:  v = mu*v + g;  w -= lr*(g + mu*v)
 *   adam:      m = b1*m + (1-b1)*g;  s = b2*s + (1-b2)*g^2;
 *              w -= lr * (m / (1-b1^t)) / (sqrt(s / (1-b2^t)) + eps)   (Kingma & Ba 2015)
 *   adagrad:   s += g^2;  w -= lr * g / (sqrt(s) + eps)                (Duchi et al. 2011)
 *   ftrl:      sigma = (sqrt(n + g^2) - sqrt(n)) / lr;  z += g - sigma*w;  n += g^2;
 *              w = |z| <= l1 ? 0 : -(z - sign(z)*l1) / ((beta + sqrt(n)) / lr + l2)
 *              (FTRL-Proximal, McMahan et al. 2013, Algorithm 1, alpha = lr; z is the
 *              first state array, n the second); while n = 0, z starts as the value
 *              whose closed form is the current w, -(w*(beta/lr + l2) + sign(w)*l1),
 *              so a weight starts where it was initialised, not at 0
 * Thread-safe on disjoint ranges.
 */
void ps_optim_step(const ps_optim_t *o, float lr, int64_t t, float *w, float *state,
                   size_t stride, const float *grad, float scale, size_t n);

/* As ps_optim_step(), reading the parameters from wi and writing them to wo
 * (n floats each, disjoint): bitwise the values ps_optim_step() leaves in
 * wi. One pass, so an update that must not touch values still being sent
 * costs no copy. Thread-safe on disjoint ranges. */
void ps_optim_step_from(const ps_optim_t *o, float lr, int64_t t, float *wo,
                        const float *wi, float *state, size_t stride, const float *grad,
                        float scale, size_t n);

/* 1 when ps_optim_step() with the same arguments would leave every value
 * and every state float finite, else 0 (finite gradients can overflow);
 * writes nothing. The step's own loops, computing without storing, so a
 * caller that checks first has nothing to undo. Thread-safe. */
int ps_optim_step_ok(const ps_optim_t *o, float lr, int64_t t, const float *w,
                     const float *state, size_t stride, const float *grad, float scale,
                     size_t n);

/* ps_optim_step() when ps_optim_step_ok() says it stays finite: returns 1
 * when applied, 0 when w and state are left as they were. */
int ps_optim_step_if_finite(const ps_optim_t *o, float lr, int64_t t, float *w, float *state,
                            size_t stride, const float *grad, float scale, size_t n);

/*
 * The initial values of embedding row `key` of a job seeded with seed: dim
 * floats into out, uniform in [-bound, bound) (all +0 when bound is 0).
 * out[i] depends on (seed, key, i) alone (a counter-based hash, splitmix64;
 * its top 24 bits make the float), so every node computes the same bits
 * for the same key, whatever else it has computed. Thread-safe.
 */
void ps_optim_row_init(uint64_t seed, uint64_t key, size_t dim, float bound, float *out);

/*
 * The learning rate at global step t (0-based) of a job with steps_per_epoch
 * and total_steps, per job->schedule:
 *   warm-up (t < W):  lr * (t + 1) / W, then
 *   constant:         lr
 *   cosine:           lr * (1 + cos(pi * t / T)) / 2   (SGDR, Loshchilov & Hutter 2017, no restarts)
 *   step:             lr * gamma^floor(t / (every * steps_per_epoch))
 */
float ps_optim_lr(const ps_job_t *job, int64_t t, int64_t steps_per_epoch, int64_t total_steps);

#ifdef __cplusplus
}
#endif
#endif
