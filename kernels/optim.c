/* kernels/optim.c - optimizer updates; plain loops the compiler vectorises. */
#include "kernels/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/rowkey.h"

/*
 * The per-push loops (finite check, sum of pushes, update) are built twice on
 * x86-64, for AVX2 and for the baseline (SSE2), and the CPU picks one when
 * the program loads (GCC's target_clones, an ifunc). The same C, so the same
 * arithmetic element for element: the vector width changes how many elements
 * one instruction does, not what is computed (no FMA: kernels/meson.build
 * builds with -ffp-contract=off, and AVX2 does not imply FMA).
 */
#if defined(__x86_64__) && defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define PS_OPTIM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PS_OPTIM_CLONES
#endif

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

PS_OPTIM_CLONES int ps_optim_finite(const void *g, size_t n)
{
    const unsigned char *p = g;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + i * sizeof u, sizeof u);
        bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u); /* exponent all ones */
    }
    return !bad;
}

PS_OPTIM_CLONES void ps_optim_accumulate(float *restrict acc, const void *restrict g,
                                         float c, size_t n, int first)
{
    const unsigned char *p = g;
    if (first) {
        for (size_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, p + i * sizeof v, sizeof v);
            acc[i] = c * v;
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, p + i * sizeof v, sizeof v);
        acc[i] = acc[i] + c * v;
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

void ps_optim_row_init(uint64_t seed, uint64_t key, size_t dim, float bound, float *out)
{
    const uint64_t gamma = 0x9e3779b97f4a7c15ull; /* splitmix64's increment */
    if (bound == 0.0f) {
        for (size_t i = 0; i < dim; i++) {
            out[i] = 0.0f;
        }
        return;
    }
    /* a splitmix64 stream per (seed, key), element i its (i+1)-th output */
    const uint64_t base = ps_rowkey_mix(ps_rowkey_mix(seed + gamma) ^ key);
    for (size_t i = 0; i < dim; i++) {
        uint64_t v = ps_rowkey_mix(base + (uint64_t)(i + 1) * gamma);
        /* top 24 bits as -2^23 .. 2^23-1: u * 2^-23 in [-1, 1) exactly, and
         * times bound it cannot round up to bound */
        int32_t u = (int32_t)(v >> 40) - (1 << 23);
        out[i] = (float)u * 0x1p-23f * bound;
    }
}

int64_t ps_optim_sum_rows(const ps_rows_part_t *parts, int n, size_t dim, uint64_t **keys,
                                float **grads, uint64_t *cap)
{
    uint64_t total = 0, at[PS_OPTIM_MAX_PARTS] = {0}, out = 0;
    if (n > PS_OPTIM_MAX_PARTS) {
        return PS_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        total += parts[i].nkeys;
    }
    if (total > *cap) {
        uint64_t *k = realloc(*keys, total * sizeof *k);
        *keys = k ? k : *keys;
        float *g = k ? realloc(*grads, total * dim * sizeof *g) : NULL;
        *grads = g ? g : *grads;
        if (!g) {
            return PS_ENOMEM;
        }
        *cap = total;
    }
    for (;;) {
        uint64_t key = 0, next;
        int any = 0;
        for (int i = 0; i < n; i++) { /* the key of least hash not yet summed */
            if (at[i] < parts[i].nkeys) {
                memcpy(&next, (const uint64_t *)parts[i].keys + at[i], sizeof next);
                key = !any || ps_rowkey_hash(next) < ps_rowkey_hash(key) ? next : key;
                any = 1;
            }
        }
        if (!any) {
            return (int64_t)out;
        }
        int first = 1;
        for (int i = 0; i < n; i++) {
            if (at[i] < parts[i].nkeys &&
                (memcpy(&next, (const uint64_t *)parts[i].keys + at[i], sizeof next),
                 next == key)) {
                ps_optim_accumulate(*grads + out * dim,
                                    (const float *)parts[i].grads + at[i] * dim,
                                    parts[i].weight, dim, first);
                first = 0;
                at[i]++;
            }
        }
        (*keys)[out++] = key;
    }
}

int ps_optim_from_job(const ps_job_t *job, ps_optim_t *o)
{
    static const char *names[] = {"sgd", "nesterov", "adam", "adagrad", "ftrl"};
    memset(o, 0, sizeof *o);
    o->kind = (ps_optim_kind_t)-1;
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        if (!strcmp(job->optimizer, names[i])) {
            o->kind = (ps_optim_kind_t)i;
        }
    }
    if ((int)o->kind < 0) {
        return PS_EINVAL;
    }
    o->momentum = (float)job->momentum;
    o->weight_decay = (float)job->weight_decay;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = o->kind == PS_OPT_ADAGRAD ? 1e-10f : 1e-8f;
    o->l1 = (float)job->l1;
    o->l2 = (float)job->l2;
    o->beta = 1.0f;
    return 0;
}

int ps_optim_state_floats(const ps_optim_t *o)
{
    switch (o->kind) {
    case PS_OPT_SGD: return o->momentum > 0 ? 1 : 0;
    case PS_OPT_NESTEROV: return 1;
    case PS_OPT_ADAM: return 2;
    case PS_OPT_ADAGRAD: return 1;
    case PS_OPT_FTRL: return 2;
    }
    return 0;
}

/* 1 when x is an infinity or a NaN (its exponent all ones), else 0: an OR
 * of these over a loop vectorises where isfinite would not. */
static inline __attribute__((always_inline)) uint32_t s_nonfinite(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7f800000u) == 0x7f800000u;
}

/*
 * The updates of n parameters read from wi and written to wo, which are
 * either the same array (in place) or disjoint ones (a copy-on-write of
 * values still being sent), a function per optimizer. Always inlined into
 * the callers below, so each gets its own loops, vectorised without runtime
 * alias checks: wo == wi is a dependence of distance 0, and restrict covers
 * the rest. The arithmetic is the same either way, element for element.
 * With dry set (a constant in each caller) nothing is written: the loops
 * only compute the new values and state and return nonzero when one would
 * not be finite; otherwise the return is unused and compiled away.
 */
#define PS_OPTIM_LOOP static inline __attribute__((always_inline)) uint32_t

/* sgd, with momentum or without, and nesterov, which looks ahead along the
 * new velocity: one loop each, as the kind is the same for every key. */
PS_OPTIM_LOOP s_sgd(const ps_optim_t *o, float lr, float *wo, const float *wi,
                    float *restrict v, const float *restrict grad, float scale, size_t n,
                    const int dry)
{
    const float wd = o->weight_decay, mu = o->momentum;
    const int nesterov = o->kind == PS_OPT_NESTEROV;
    uint32_t bad = 0;
    if (mu == 0.0f && !nesterov) {
        for (size_t i = 0; i < n; i++) {
            const float w = wi[i] - lr * (grad[i] * scale + wd * wi[i]);
            bad |= s_nonfinite(w);
            if (!dry) {
                wo[i] = w;
            }
        }
        return bad;
    }
    for (size_t i = 0; i < n; i++) {
        const float g = grad[i] * scale + wd * wi[i];
        const float vi = mu * v[i] + g, w = wi[i] - lr * (nesterov ? g + mu * vi : vi);
        bad |= s_nonfinite(vi) | s_nonfinite(w);
        if (!dry) {
            v[i] = vi;
            wo[i] = w;
        }
    }
    return bad;
}

PS_OPTIM_LOOP s_adam(const ps_optim_t *o, float lr, int64_t t, float *wo, const float *wi,
                     float *restrict m, float *restrict v, const float *restrict grad,
                     float scale, size_t n, const int dry)
{
    const float wd = o->weight_decay, b1 = o->beta1, b2 = o->beta2, eps = o->eps;
    const float c1 = 1.0f / (float)(1.0 - pow(b1, (double)t));
    const float c2 = 1.0f / (float)(1.0 - pow(b2, (double)t));
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const float g = grad[i] * scale + wd * wi[i];
        const float mi = b1 * m[i] + (1.0f - b1) * g;
        const float vi = b2 * v[i] + (1.0f - b2) * g * g;
        const float w = wi[i] - lr * (mi * c1) / (sqrtf(vi * c2) + eps);
        bad |= s_nonfinite(mi) | s_nonfinite(vi) | s_nonfinite(w);
        if (!dry) {
            m[i] = mi;
            v[i] = vi;
            wo[i] = w;
        }
    }
    return bad;
}

PS_OPTIM_LOOP s_adagrad(const ps_optim_t *o, float lr, float *wo, const float *wi,
                        float *restrict s, const float *restrict grad, float scale, size_t n,
                        const int dry)
{
    const float wd = o->weight_decay;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const float g = grad[i] * scale + wd * wi[i];
        const float si = s[i] + g * g, w = wi[i] - lr * g / (sqrtf(si) + o->eps);
        bad |= s_nonfinite(si) | s_nonfinite(w);
        if (!dry) {
            s[i] = si;
            wo[i] = w;
        }
    }
    return bad;
}

/* The weights are kept, so sigma's w is the stored one, and the new w is
 * the closed form of the proximal step from the updated z and n. */
PS_OPTIM_LOOP s_ftrl(const ps_optim_t *o, float lr, float *wo, const float *wi,
                     float *restrict z, float *restrict nsq, const float *restrict grad,
                     float scale, size_t n, const int dry)
{
    const float wd = o->weight_decay, l1 = o->l1, l2 = o->l2, beta = o->beta;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        /* no gradient yet: z is the one whose closed form is the weight we
         * have (an MLP's initialisation, a row's initial value), not 0,
         * which would zero them all at once */
        const float z0 = nsq[i] == 0.0f ? -(wi[i] * (beta / lr + l2) + copysignf(l1, wi[i]))
                                        : z[i];
        const float g = grad[i] * scale + wd * wi[i];
        const float n1 = nsq[i] + g * g, root = sqrtf(n1);
        const float sigma = (root - sqrtf(nsq[i])) / lr;
        const float zi = z0 + (g - sigma * wi[i]);
        const float w = -(zi - copysignf(l1, zi)) / ((beta + root) / lr + l2);
        const float wn = fabsf(zi) <= l1 ? 0.0f : w;
        bad |= s_nonfinite(zi) | s_nonfinite(n1) | s_nonfinite(wn);
        if (!dry) {
            z[i] = zi;
            nsq[i] = n1;
            wo[i] = wn;
        }
    }
    return bad;
}

PS_OPTIM_LOOP s_step(const ps_optim_t *o, float lr, int64_t t, float *wo, const float *wi,
                     float *restrict state, size_t stride, const float *restrict grad,
                     float scale, size_t n, const int dry)
{
    switch (o->kind) {
    case PS_OPT_SGD:
    case PS_OPT_NESTEROV: return s_sgd(o, lr, wo, wi, state, grad, scale, n, dry);
    case PS_OPT_ADAM:
        return s_adam(o, lr, t, wo, wi, state, state + stride, grad, scale, n, dry);
    case PS_OPT_ADAGRAD: return s_adagrad(o, lr, wo, wi, state, grad, scale, n, dry);
    case PS_OPT_FTRL: return s_ftrl(o, lr, wo, wi, state, state + stride, grad, scale, n, dry);
    }
    return 0;
}

PS_OPTIM_CLONES void ps_optim_step(const ps_optim_t *o, float lr, int64_t t,
                                   float *restrict w, float *restrict state, size_t stride,
                                   const float *restrict grad, float scale, size_t n)
{
    s_step(o, lr, t, w, w, state, stride, grad, scale, n, 0);
}

PS_OPTIM_CLONES void ps_optim_step_from(const ps_optim_t *o, float lr, int64_t t,
                                        float *restrict wo, const float *restrict wi,
                                        float *restrict state, size_t stride,
                                        const float *restrict grad, float scale, size_t n)
{
    s_step(o, lr, t, wo, wi, state, stride, grad, scale, n, 0);
}

PS_OPTIM_CLONES int ps_optim_step_ok(const ps_optim_t *o, float lr, int64_t t, const float *w,
                                     const float *state, size_t stride,
                                     const float *restrict grad, float scale, size_t n)
{
    /* dry: neither w nor state is written, so the casts write nothing */
    return !s_step(o, lr, t, (float *)w, w, (float *)state, stride, grad, scale, n, 1);
}

int ps_optim_step_if_finite(const ps_optim_t *o, float lr, int64_t t, float *w, float *state,
                            size_t stride, const float *grad, float scale, size_t n)
{
    if (!ps_optim_step_ok(o, lr, t, w, state, stride, grad, scale, n)) {
        return 0;
    }
    ps_optim_step(o, lr, t, w, state, stride, grad, scale, n);
    return 1;
}
