/*
 * worker/models/mlp.c - the MLP 784-256-128-10 with ReLU (torch.nn.Linear layers).
 *
 *   h1 = relu(x @ W1^T + b1)   x [N,784], W1 [256,784]
 *   h2 = relu(h1 @ W2^T + b2)  W2 [128,256]
 *   z  = h2 @ W3^T + b3        W3 [10,128]; loss = mean softmax cross-entropy
 * Backward reuses the buffers: dz overwrites z (done by the loss), dh2 and
 * dh1 get their own buffers and the ReLU gradient is applied in place. No dx
 * for the input. Activations live in one backend allocation sized for max_batch.
 */
#include <stdlib.h>

#include "common/error.h"
#include "worker/models/model_impl.h"

enum { S_IN = 784, S_H1 = 256, S_H2 = 128, S_OUT = 10 };

static const ps_tensor_def_t s_tensors[] = {
    {"fc1.weight", (size_t)S_H1 * S_IN, S_IN, 2, {S_H1, S_IN}},
    {"fc1.bias", S_H1, S_IN, 1, {S_H1}},
    {"fc2.weight", (size_t)S_H2 * S_H1, S_H1, 2, {S_H2, S_H1}},
    {"fc2.bias", S_H2, S_H1, 1, {S_H2}},
    {"fc3.weight", (size_t)S_OUT * S_H2, S_H2, 2, {S_OUT, S_H2}},
    {"fc3.bias", S_OUT, S_H2, 1, {S_OUT}},
};

/* Views into one backend block of activations, each [max_batch, width]. */
typedef struct {
    float *block; /* the one allocation; owned */
    float *h1;    /* [N,256] post-ReLU */
    float *h2;    /* [N,128] post-ReLU */
    float *z;     /* [N,10] logits, then their gradient */
    float *dh1;   /* [N,256] */
    float *dh2;   /* [N,128] */
} s_mlp_t;

static int s_setup(ps_model_t *m)
{
    s_mlp_t *a = calloc(1, sizeof(*a));
    if (!a) {
        return PS_ENOMEM;
    }
    m->impl = a;
    /* widths rounded up to 16 floats so every view stays 64-byte aligned */
    const size_t B = (size_t)m->max_batch;
    const size_t zw = (B * S_OUT + 15) & ~(size_t)15;
    a->block = m->k->alloc((B * (2 * S_H1 + 2 * S_H2) + zw) * sizeof(float));
    if (!a->block) {
        return PS_ENOMEM;
    }
    a->h1 = a->block;
    a->dh1 = a->h1 + B * S_H1;
    a->h2 = a->dh1 + B * S_H1;
    a->dh2 = a->h2 + B * S_H2;
    a->z = a->dh2 + B * S_H2;
    return 0;
}

static void s_teardown(ps_model_t *m)
{
    s_mlp_t *a = m->impl;
    if (!a) {
        return;
    }
    m->k->free(a->block);
    free(a);
    m->impl = NULL;
}

static float *s_forward(ps_model_t *m, const float *d_x, int n)
{
    s_mlp_t *a = m->impl;
    ps_model_params_needed(m, 2);
    ps_model_linear_fwd(m, d_x, ps_model_dparam(m, 0), ps_model_dparam(m, 1), a->h1, n,
                        S_IN, S_H1, 1);
    ps_model_params_needed(m, 4);
    ps_model_linear_fwd(m, a->h1, ps_model_dparam(m, 2), ps_model_dparam(m, 3), a->h2, n,
                        S_H1, S_H2, 1);
    ps_model_params_needed(m, 6);
    ps_model_linear_fwd(m, a->h2, ps_model_dparam(m, 4), ps_model_dparam(m, 5), a->z, n,
                        S_H2, S_OUT, 0);
    return a->z;
}

static void s_backward(ps_model_t *m, const float *d_x, float *d_dz, int n)
{
    s_mlp_t *a = m->impl;
    const ps_kernels_t *k = m->k;
    ps_model_linear_bwd(m, a->h2, ps_model_dparam(m, 4), d_dz, a->dh2, ps_model_dgrad(m, 4),
                        ps_model_dgrad(m, 5), n, S_H2, S_OUT);
    ps_model_grads_final(m, 4);
    k->relu_bwd(m->ctx, a->h2, a->dh2, a->dh2, (size_t)n * S_H2);
    ps_model_linear_bwd(m, a->h1, ps_model_dparam(m, 2), a->dh2, a->dh1,
                        ps_model_dgrad(m, 2), ps_model_dgrad(m, 3), n, S_H1, S_H2);
    ps_model_grads_final(m, 2);
    k->relu_bwd(m->ctx, a->h1, a->dh1, a->dh1, (size_t)n * S_H1);
    ps_model_linear_bwd(m, d_x, ps_model_dparam(m, 0), a->dh1, NULL, ps_model_dgrad(m, 0),
                        ps_model_dgrad(m, 1), n, S_IN, S_H1);
}

const ps_model_arch_t ps_model_arch_mlp = {
    .name = "mlp",
    .ntensors = sizeof(s_tensors) / sizeof(s_tensors[0]),
    .tensors = s_tensors,
    .setup = s_setup,
    .teardown = s_teardown,
    .forward = s_forward,
    .backward = s_backward,
};
