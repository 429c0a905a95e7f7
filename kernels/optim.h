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
