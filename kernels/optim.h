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

#ifdef __cplusplus
}
#endif
#endif
