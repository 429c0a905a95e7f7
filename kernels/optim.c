/* kernels/optim.c - optimizer updates; plain loops the compiler vectorises. */
#include "kernels/optim.h"

void ps_optim_sgd_step(const ps_optim_sgd_t *o, float *restrict w, float *restrict v,
                       const float *restrict grad, float scale, size_t n)
{
    const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
    if (mu == 0.0f) {
        for (size_t i = 0; i < n; i++) {
            w[i] -= lr * (grad[i] * scale + wd * w[i]);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * scale + wd * w[i];
        v[i] = mu * v[i] + g;
        w[i] -= lr * v[i];
    }
}
