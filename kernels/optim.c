/* kernels/optim.c - optimizer updates; plain loops the compiler vectorises. */
#include "kernels/optim.h"

#include <math.h>

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

float ps_optim_lr(const ps_job_t *job, int64_t t, int64_t steps_per_epoch, int64_t total_steps)
{
    const ps_lr_schedule_t *s = &job->schedule;
    double lr = job->lr;
    if (t < 0) {
        t = 0;
    }
    if (s->warmup_steps > 0 && t < s->warmup_steps) {
        return (float)(lr * (double)(t + 1) / (double)s->warmup_steps);
    }
    switch (s->kind) {
    case PS_LR_COSINE:
        if (total_steps > 0) {
            double f = (double)(t < total_steps ? t : total_steps) / (double)total_steps;
            lr *= 0.5 * (1.0 + cos(M_PI * f));
        }
        break;
    case PS_LR_STEP:
        if (steps_per_epoch > 0 && s->every > 0) {
            lr *= pow(s->gamma, (double)(t / (steps_per_epoch * s->every)));
        }
        break;
    default:
        break;
    }
    return (float)lr;
}
