/*
 * worker/models/ctr.c - the click-through-rate model: embedding rows of the
 * 26 categorical fields beside the 13 numeric ones, an MLP with ReLU and one
 * logit (torch.nn.Linear layers fc1..fc(L+1)); by default H = 256,128
 * (--hidden changes it), E = 16 (--embed-dim).
 *
 *   x  = [e_1 .. e_F, num]                  e_f [N,E] rows, num [N,C]; x [N,D]
 *   h1 = relu(x @ W1^T + b1)                D = F*E + C, W1 [H1,D]
 *   hi = relu(h(i-1) @ Wi^T + bi)           Wi [Hi,H(i-1)]
 *   z  = hL @ W(L+1)^T + b(L+1)             W(L+1) [1,HL]; loss = mean logistic loss
 *   drow_u = sum over positions j of row u of dx[j/F, (j%F)*E ..]  (kernels.h embed_grad)
 *
 * Dimension letters: N batch, F fields (26), E floats per row, C numeric
 * inputs (13), D input width, U the batch's distinct rows. Only the MLP is
 * in the flat parameter vector; the rows are the model's per-step buffers
 * (m->d_rows, m->e_*: model_new.c allocates them, model.c stages each
 * step's), pulled by the caller. x is never built whole: the
 * rows are gathered into xe [N, F*E] and the first layer is two GEMMs over
 * the column blocks of W1 (W1[:, :F*E] with xe, W1[:, F*E:] with num, both
 * with W1's row stride), so the numeric features go straight from their
 * batch buffer and no input gradient is formed for them. The gradient of xe
 * overwrites xe (no longer needed by then) before embed_grad sums it per
 * row. Activations live in one backend allocation sized for max_batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/job.h"
#include "worker/models/model_impl.h"

enum { S_F = PS_MODEL_CTR_FIELDS, S_C = PS_MODEL_CTR_NUMERIC, S_OUT = 1 };

/* Widths of a model: w[0] = D, w[1..L] the hidden layers, w[L+1] = 1. */
typedef struct {
    int L;                                               /* hidden layers */
    int E;                                               /* floats per row */
    int w[PS_MODEL_MAX_HIDDEN + 2];                      /* layer widths */
    ps_tensor_def_t defs[2 * (PS_MODEL_MAX_HIDDEN + 1)]; /* fc1.weight, fc1.bias, ... */
    char names[2 * (PS_MODEL_MAX_HIDDEN + 1)][16];       /* their names */
} s_layout_t;

/* Views into one backend block of activations, each [max_batch, width]. */
typedef struct {
    float *block;                       /* the one allocation; owned */
    float *xe;                          /* [N,F*E] gathered rows, then their gradient */
    float *h[PS_MODEL_MAX_HIDDEN + 1];  /* h[1..L]: [N,Hi] post-ReLU */
    float *dh[PS_MODEL_MAX_HIDDEN + 1]; /* dh[1..L]: [N,Hi] */
    float *z;                           /* [N,1] logits, then their gradient */
} s_ctr_t;

static int s_layout(ps_model_t *m, const char *hidden)
{
    s_layout_t *lay = calloc(1, sizeof *lay);
    if (!lay) {
        return PS_ENOMEM;
    }
    m->layout = lay;
    const char *text = hidden && *hidden ? hidden : "256,128";
    if (ps_job_parse_hidden(text, lay->w + 1, &lay->L) != 0) {
        return PS_EINVAL;
    }
    lay->E = m->embed_dim ? m->embed_dim : PS_MODEL_CTR_EMBED_DIM;
    lay->w[0] = S_F * lay->E + S_C;
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

/* E of a ctr file: fc1.weight is [H1, 26*E + 13]; 0 when it is not. */
static int s_embed_of(const ps_safetensors_t *st)
{
    const ps_safetensors_tensor_t *t = ps_safetensors_find(st, "fc1.weight");
    if (!t || t->ndim != 2 || t->shape[1] <= S_C || (t->shape[1] - S_C) % S_F != 0) {
        return 0;
    }
    const int64_t E = (t->shape[1] - S_C) / S_F;
    return E <= PS_MODEL_MAX_EMBED_DIM ? (int)E : 0;
}

/* Writes the hidden widths of a ctr file ("" for the default) into buf:
 * fc1..fcN's weights chain 26*E + 13 -> ... -> 1. Returns 0 or PS_EINVAL. */
static int s_hidden_of(const ps_safetensors_t *st, char *buf, size_t cap)
{
    const int E = s_embed_of(st);
    return E ? ps_model_fc_widths(st, S_F * E + S_C, S_OUT, buf, cap) : PS_EINVAL;
}

/* Floats of a [max_batch, width] view, rounded up to 16 so every view stays
 * 64-byte aligned. */
static size_t s_span(const ps_model_t *m, int width)
{
    return ((size_t)m->max_batch * (size_t)width + 15) & ~(size_t)15;
}

static int s_setup(ps_model_t *m)
{
    const s_layout_t *lay = m->layout;
    s_ctr_t *a = calloc(1, sizeof(*a));
    if (!a) {
        return PS_ENOMEM;
    }
    m->impl = a;
    size_t total = s_span(m, S_F * lay->E) + s_span(m, S_OUT);
    for (int i = 1; i <= lay->L; i++) {
        total += 2 * s_span(m, lay->w[i]);
    }
    a->block = m->k->alloc(total * sizeof(float));
    if (!a->block) {
        return PS_ENOMEM;
    }
    float *at = a->block;
    a->xe = at;
    at += s_span(m, S_F * lay->E);
    for (int i = 1; i <= lay->L; i++) {
        a->h[i] = at;
        a->dh[i] = at + s_span(m, lay->w[i]);
        at += 2 * s_span(m, lay->w[i]);
    }
    a->z = at;
    return 0;
}

static void s_teardown(ps_model_t *m)
{
    s_ctr_t *a = m->impl;
    if (!a) {
        return;
    }
    m->k->free(a->block);
    free(a);
    m->impl = NULL;
}

/* d_num [n,C]: the numeric inputs; the rows come from m->d_rows by m->e_idx. */
static float *s_forward(ps_model_t *m, const float *d_num, int n)
{
    const s_layout_t *lay = m->layout;
    const ps_kernels_t *k = m->k;
    s_ctr_t *a = m->impl;
    const int E = lay->E, FE = S_F * E, D = lay->w[0], H1 = lay->w[1];
    k->embed_gather(m->ctx, m->d_rows, E, m->e_idx, n, S_F, a->xe, FE);
    ps_model_params_needed(m, 2);
    const float *w1 = ps_model_dparam(m, 0);
    /* h1 = relu(xe @ W1[:, :FE]^T + num @ W1[:, FE:]^T + b1) */
    k->sgemm(m->ctx, 0, 1, n, H1, FE, 1.0f, a->xe, FE, w1, D, 0.0f, a->h[1], H1);
    k->sgemm(m->ctx, 0, 1, n, H1, S_C, 1.0f, d_num, S_C, w1 + FE, D, 1.0f, a->h[1], H1);
    k->bias_relu(m->ctx, a->h[1], ps_model_dparam(m, 1), n, H1);
    for (int i = 1; i <= lay->L; i++) {
        float *out = i < lay->L ? a->h[i + 1] : a->z;
        ps_model_params_needed(m, 2 * (size_t)i + 2);
        ps_model_linear_fwd(m, a->h[i], ps_model_dparam(m, 2 * (size_t)i),
                            ps_model_dparam(m, 2 * (size_t)i + 1), out, n, lay->w[i],
                            lay->w[i + 1], i < lay->L);
    }
    return a->z;
}

static void s_backward(ps_model_t *m, const float *d_num, float *d_dz, int n)
{
    const s_layout_t *lay = m->layout;
    const ps_kernels_t *k = m->k;
    s_ctr_t *a = m->impl;
    const int E = lay->E, FE = S_F * E, D = lay->w[0], H1 = lay->w[1];
    const float *dy = d_dz;
    for (int i = lay->L; i >= 1; i--) {
        const size_t t = 2 * (size_t)i;
        ps_model_linear_bwd(m, a->h[i], ps_model_dparam(m, t), dy, a->dh[i],
                            ps_model_dgrad(m, t), ps_model_dgrad(m, t + 1), n, lay->w[i],
                            lay->w[i + 1]);
        ps_model_grads_final(m, t);
        k->relu_bwd(m->ctx, a->h[i], a->dh[i], a->dh[i], (size_t)n * lay->w[i]);
        dy = a->dh[i];
    }
    /* fc1 by column blocks: dW1[:, :FE] = dy^T @ xe, dW1[:, FE:] = dy^T @ num */
    const float *w1 = ps_model_dparam(m, 0);
    float *dw1 = ps_model_dgrad(m, 0);
    k->sgemm(m->ctx, 1, 0, H1, FE, n, 1.0f, dy, H1, a->xe, FE, 0.0f, dw1, D);
    k->sgemm(m->ctx, 1, 0, H1, S_C, n, 1.0f, dy, H1, d_num, S_C, 0.0f, dw1 + FE, D);
    k->bias_grad(m->ctx, dy, ps_model_dgrad(m, 1), n, H1);
    ps_model_grads_final(m, 0);
    /* dxe = dy @ W1[:, :FE], into xe (read for the last time above) */
    k->sgemm(m->ctx, 0, 0, n, FE, H1, 1.0f, dy, H1, w1, D, 0.0f, a->xe, FE);
    k->embed_grad(m->ctx, a->xe, FE, E, S_F, m->e_offsets, m->e_order, m->e_U,
                  m->d_row_grads);
}

const ps_model_arch_t ps_model_arch_ctr = {
    .name = "ctr",
    .fields = S_F,
    .numeric = S_C,
    .layout = s_layout,
    .hidden_of = s_hidden_of,
    .setup = s_setup,
    .teardown = s_teardown,
    .forward = s_forward,
    .backward = s_backward,
};
