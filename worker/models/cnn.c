/*
 * worker/models/cnn.c - the CNN of docs/design/models.md (torch.nn.Conv2d/Linear):
 *
 *   c1 = relu(conv1(x))    x [N,1,28,28], conv1.weight [32,1,5,5], pad 2 -> [N,32,28,28]
 *   p1 = maxpool2(c1)      [N,32,14,14]
 *   c2 = relu(conv2(p1))   conv2.weight [64,32,5,5], pad 2 -> [N,64,14,14]
 *   p2 = maxpool2(c2)      [N,64,7,7] = [N,3136] (NCHW flatten, as x.reshape)
 *   h  = relu(p2 @ fc1.weight^T + fc1.bias)   fc1.weight [128,3136]
 *   z  = h @ fc2.weight^T + fc2.bias          fc2.weight [10,128]
 * Each conv-relu-pool is one fused op (conv2d_pool_fwd/bwd): c1 and c2 are
 * never stored, since the backward needs only p1, p2 and the pooling winners.
 * Bias and ReLU are fused into the linear layers (on a GPU with their
 * gradients into the GEMMs: ps_model_linear_fwd). No dx for the input.
 * Activations live in one backend allocation sized for max_batch.
 */
#include <stdlib.h>

#include "common/error.h"
#include "worker/models/model_impl.h"

enum {
    S_C1 = 32,             /* conv1 output channels */
    S_C2 = 64,             /* conv2 output channels */
    S_K = 5,               /* kernel size */
    S_PAD = 2,             /* padding (keeps H, W) */
    S_FLAT = S_C2 * 7 * 7, /* 3136 */
    S_HID = 128,           /* fc1 outputs */
    S_OUT = 10,            /* classes */
    S_P1 = S_C1 * 14 * 14, /* p1 per sample */
};

static const ps_tensor_def_t s_tensors[] = {
    {"conv1.weight", (size_t)S_C1 * 1 * S_K * S_K, 1 * S_K * S_K, 4, {S_C1, 1, S_K, S_K}},
    {"conv1.bias", S_C1, 1 * S_K * S_K, 1, {S_C1}},
    {"conv2.weight", (size_t)S_C2 * S_C1 * S_K * S_K, S_C1 * S_K * S_K, 4, {S_C2, S_C1, S_K, S_K}},
    {"conv2.bias", S_C2, S_C1 * S_K * S_K, 1, {S_C2}},
    {"fc1.weight", (size_t)S_HID * S_FLAT, S_FLAT, 2, {S_HID, S_FLAT}},
    {"fc1.bias", S_HID, S_FLAT, 1, {S_HID}},
    {"fc2.weight", (size_t)S_OUT * S_HID, S_HID, 2, {S_OUT, S_HID}},
    {"fc2.bias", S_OUT, S_HID, 1, {S_OUT}},
};

typedef struct {
    float *block;                 /* the one float allocation; owned */
    uint8_t *args;                /* pooling winners: arg1 then arg2; owned */
    void *ws1, *ws2;              /* each convolution's workspace (the backward
                                     reads what its forward left there); owned */
    float *p1, *dp1;              /* [N,32,14,14] */
    float *p2, *dp2;              /* [N,64,7,7] = [N,3136] */
    float *h, *dh;                /* [N,128] */
    float *z;                     /* [N,10] logits, then their gradient */
    uint8_t *arg1;                /* [N,32,14,14] */
    uint8_t *arg2;                /* [N,64,7,7] */
    ps_conv_shape_t conv1, conv2; /* geometry; N set per call */
    ps_model_mask_t hmask;        /* h's ReLU mask (fused dense layers) */
    void *masks;                  /* its block; owned */
} s_cnn_t;

/* Returns *p and advances it by n floats: carves views out of the block. */
static float *s_take(float **p, size_t n)
{
    float *v = *p;
    *p += n;
    return v;
}

static int s_setup(ps_model_t *m)
{
    const ps_kernels_t *k = m->k;
    s_cnn_t *a = calloc(1, sizeof(*a));
    if (!a) {
        return PS_ENOMEM;
    }
    m->impl = a;
    const size_t B = (size_t)m->max_batch;
    a->conv1 = (ps_conv_shape_t){
        .N = m->max_batch, .C = 1, .H = 28, .W = 28, .O = S_C1, .K = S_K, .pad = S_PAD};
    a->conv2 = (ps_conv_shape_t){
        .N = m->max_batch, .C = S_C1, .H = 14, .W = 14, .O = S_C2, .K = S_K, .pad = S_PAD};
    /* every per-sample width is a multiple of 16 floats, so views stay aligned */
    const size_t per = 2 * (S_P1 + S_FLAT + S_HID) + 16;
    a->block = k->alloc(B * per * sizeof(float));
    a->args = k->alloc(B * (S_P1 + S_FLAT));
    a->ws1 = k->alloc(k->conv2d_workspace(&a->conv1));
    a->ws2 = k->alloc(k->conv2d_workspace(&a->conv2));
    if (!a->block || !a->args || !a->ws1 || !a->ws2) {
        return PS_ENOMEM;
    }
    float *p = a->block;
    a->p1 = s_take(&p, B * S_P1);
    a->dp1 = s_take(&p, B * S_P1);
    a->p2 = s_take(&p, B * S_FLAT);
    a->dp2 = s_take(&p, B * S_FLAT);
    a->h = s_take(&p, B * S_HID);
    a->dh = s_take(&p, B * S_HID);
    a->z = p;
    a->arg1 = a->args;
    a->arg2 = a->args + B * S_P1;
    const int hid = S_HID;
    return ps_model_masks_setup(m, &a->hmask, &hid, 1, &a->masks);
}

static void s_teardown(ps_model_t *m)
{
    s_cnn_t *a = m->impl;
    if (!a) {
        return;
    }
    m->k->free(a->block);
    m->k->free(a->args);
    m->k->free(a->ws1);
    m->k->free(a->ws2);
    m->k->free(a->masks);
    free(a);
    m->impl = NULL;
}

static float *s_forward(ps_model_t *m, const float *d_x, int n)
{
    s_cnn_t *a = m->impl;
    const ps_kernels_t *k = m->k;
    a->conv1.N = n;
    a->conv2.N = n;
    ps_model_params_needed(m, 2);
    k->conv2d_pool_fwd(m->ctx, &a->conv1, d_x, ps_model_dparam(m, 0), ps_model_dparam(m, 1),
                       a->p1, a->arg1, a->ws1);
    ps_model_params_needed(m, 4);
    k->conv2d_pool_fwd(m->ctx, &a->conv2, a->p1, ps_model_dparam(m, 2),
                       ps_model_dparam(m, 3), a->p2, a->arg2, a->ws2);
    ps_model_params_needed(m, 6);
    ps_model_linear_fwd(m, a->p2, ps_model_dparam(m, 4), ps_model_dparam(m, 5), a->h, n,
                        S_FLAT, S_HID, &a->hmask);
    ps_model_params_needed(m, 8);
    ps_model_linear_fwd(m, a->h, ps_model_dparam(m, 6), ps_model_dparam(m, 7), a->z, n,
                        S_HID, S_OUT, NULL);
    return a->z;
}

static void s_backward(ps_model_t *m, const float *d_x, float *d_dz, int n)
{
    s_cnn_t *a = m->impl;
    const ps_kernels_t *k = m->k;
    ps_model_linear_bwd(m, a->h, ps_model_dparam(m, 6), d_dz, a->dh, ps_model_dgrad(m, 6),
                        ps_model_dgrad(m, 7), n, S_HID, S_OUT, &a->hmask);
    ps_model_grads_final(m, 6);
    /* p2's ReLU gradient is conv2d_pool_bwd's (through the pooling) */
    ps_model_linear_bwd(m, a->p2, ps_model_dparam(m, 4), a->dh, a->dp2,
                        ps_model_dgrad(m, 4), ps_model_dgrad(m, 5), n, S_FLAT, S_HID, NULL);
    ps_model_grads_final(m, 4);
    k->conv2d_pool_bwd(m->ctx, &a->conv2, a->p1, ps_model_dparam(m, 2), a->dp2, a->arg2,
                       a->p2, a->dp1, ps_model_dgrad(m, 2), ps_model_dgrad(m, 3), a->ws2);
    ps_model_grads_final(m, 2);
    k->conv2d_pool_bwd(m->ctx, &a->conv1, d_x, ps_model_dparam(m, 0), a->dp1, a->arg1,
                       a->p1, NULL, ps_model_dgrad(m, 0), ps_model_dgrad(m, 1), a->ws1);
}

const ps_model_arch_t ps_model_arch_cnn = {
    .name = "cnn",
    .ntensors = sizeof(s_tensors) / sizeof(s_tensors[0]),
    .tensors = s_tensors,
    .setup = s_setup,
    .teardown = s_teardown,
    .forward = s_forward,
    .backward = s_backward,
};
