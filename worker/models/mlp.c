/*
 * worker/models/mlp.c - the MLP 784-H1-...-HL-10 with ReLU (torch.nn.Linear
 * layers fc1..fc(L+1)); by default H = 256,128 (--hidden changes it).
 *
 *   h1 = relu(x @ W1^T + b1)        x [N,784], W1 [H1,784]
 *   hi = relu(h(i-1) @ Wi^T + bi)   Wi [Hi,H(i-1)]
 *   z  = hL @ W(L+1)^T + b(L+1)     W(L+1) [10,HL]; loss = mean softmax cross-entropy
 * Backward reuses the buffers: dz overwrites z (done by the loss), each dhi
 * gets its own buffer and the ReLU gradient is applied in place. No dx for
 * the input. Activations live in one backend allocation sized for max_batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/job.h"
#include "worker/models/model_impl.h"

enum { S_IN = 784, S_OUT = 10 };

/* Widths of a model: w[0] = 784, w[1..L] the hidden layers, w[L+1] = 10. */
typedef struct {
    int L;                                /* hidden layers */
    int w[PS_MODEL_MAX_HIDDEN + 2];       /* layer widths */
    ps_tensor_def_t defs[2 * (PS_MODEL_MAX_HIDDEN + 1)]; /* fc1.weight, fc1.bias, ... */
    char names[2 * (PS_MODEL_MAX_HIDDEN + 1)][16];       /* their names */
} s_layout_t;

/* Views into one backend block of activations, each [max_batch, width]. */
typedef struct {
    float *block;                       /* the one allocation; owned */
    float *h[PS_MODEL_MAX_HIDDEN + 1];  /* h[1..L]: [N,Hi] post-ReLU */
    float *dh[PS_MODEL_MAX_HIDDEN + 1]; /* dh[1..L]: [N,Hi] */
    float *z;                           /* [N,10] logits, then their gradient */
} s_mlp_t;

/* Parses "H1,H2,..." (or "" for the default 256,128) into widths. */
static int s_parse(const char *hidden, int *L, int *w)
{
    const char *text = hidden && *hidden ? hidden : "256,128";
    return ps_job_parse_hidden(text, w + 1, L) == 0 ? 0 : PS_EINVAL;
}

static int s_layout(ps_model_t *m, const char *hidden)
{
    s_layout_t *lay = calloc(1, sizeof *lay);
    if (!lay) {
        return PS_ENOMEM;
    }
    m->layout = lay;
    if (s_parse(hidden, &lay->L, lay->w) != 0) {
        return PS_EINVAL;
    }
    lay->w[0] = S_IN;
    lay->w[lay->L + 1] = S_OUT;
    for (int i = 0; i <= lay->L; i++) {
        const int I = lay->w[i], O = lay->w[i + 1];
        ps_tensor_def_t *wt = &lay->defs[2 * i], *b = &lay->defs[2 * i + 1];
        snprintf(lay->names[2 * i], sizeof lay->names[0], "fc%d.weight", i + 1);
        snprintf(lay->names[2 * i + 1], sizeof lay->names[0], "fc%d.bias", i + 1);
        *wt = (ps_tensor_def_t){lay->names[2 * i], (size_t)O * I, I, 2, {O, I}};
        *b = (ps_tensor_def_t){lay->names[2 * i + 1], (size_t)O, I, 1, {O}};
    }
    m->defs = lay->defs;
    m->ntensors = 2 * ((size_t)lay->L + 1);
    return 0;
}

/* Writes the hidden widths of an MLP file ("" for the default) into buf:
 * fc1..fcN's weights chain 784 -> ... -> 10. Returns 0 or PS_EINVAL. */
static int s_hidden_of(const ps_safetensors_t *st, char *buf, size_t cap)
{
    return ps_model_fc_widths(st, S_IN, S_OUT, buf, cap);
}

static int s_setup(ps_model_t *m)
{
    const s_layout_t *lay = m->layout;
    s_mlp_t *a = calloc(1, sizeof(*a));
    if (!a) {
        return PS_ENOMEM;
    }
    m->impl = a;
    /* widths rounded up to 16 floats so every view stays 64-byte aligned */
    const size_t B = (size_t)m->max_batch;
    size_t total = (B * S_OUT + 15) & ~(size_t)15;
    for (int i = 1; i <= lay->L; i++) {
        total += 2 * ((B * (size_t)lay->w[i] + 15) & ~(size_t)15);
    }
    a->block = m->k->alloc(total * sizeof(float));
    if (!a->block) {
        return PS_ENOMEM;
    }
    float *at = a->block;
    for (int i = 1; i <= lay->L; i++) {
        const size_t span = (B * (size_t)lay->w[i] + 15) & ~(size_t)15;
        a->h[i] = at;
        a->dh[i] = at + span;
        at += 2 * span;
    }
    a->z = at;
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
    const s_layout_t *lay = m->layout;
    s_mlp_t *a = m->impl;
    const float *in = d_x;
    for (int i = 0; i <= lay->L; i++) {
        float *out = i < lay->L ? a->h[i + 1] : a->z;
        ps_model_params_needed(m, 2 * (size_t)i + 2);
        ps_model_linear_fwd(m, in, ps_model_dparam(m, 2 * (size_t)i),
                            ps_model_dparam(m, 2 * (size_t)i + 1), out, n, lay->w[i],
                            lay->w[i + 1], i < lay->L);
        in = out;
    }
    return a->z;
}

static void s_backward(ps_model_t *m, const float *d_x, float *d_dz, int n)
{
    const s_layout_t *lay = m->layout;
    s_mlp_t *a = m->impl;
    const ps_kernels_t *k = m->k;
    const float *dy = d_dz;
    for (int i = lay->L; i >= 0; i--) {
        const size_t t = 2 * (size_t)i;
        ps_model_linear_bwd(m, i > 0 ? a->h[i] : d_x, ps_model_dparam(m, t), dy,
                            i > 0 ? a->dh[i] : NULL, ps_model_dgrad(m, t),
                            ps_model_dgrad(m, t + 1), n, lay->w[i], lay->w[i + 1]);
        if (i > 0) {
            ps_model_grads_final(m, t);
            k->relu_bwd(m->ctx, a->h[i], a->dh[i], a->dh[i], (size_t)n * lay->w[i]);
            dy = a->dh[i];
        }
    }
}

const ps_model_arch_t ps_model_arch_mlp = {
    .name = "mlp",
    .layout = s_layout,
    .hidden_of = s_hidden_of,
    .setup = s_setup,
    .teardown = s_teardown,
    .forward = s_forward,
    .backward = s_backward,
};
