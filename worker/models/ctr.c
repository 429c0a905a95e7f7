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
 * row. Activations live in one backend allocation sized for max_batch; fc2
 * on are fc.c's layers.
 */
#include "common/error.h"
#include "worker/models/model_impl.h"

enum { S_F = PS_MODEL_CTR_FIELDS, S_C = PS_MODEL_CTR_NUMERIC, S_OUT = 1 };

/* The activations: fc.c's, and the gathered rows before them. */
typedef struct {
    ps_model_fc_acts_t fc; /* h[1..L], dh[1..L], z [N,1]; first, as fc.c has it */
    float *xe;             /* [N,F*E] gathered rows, then their gradient */
} s_ctr_t;

static int s_layout(ps_model_t *m, const char *hidden)
{
    return ps_model_fc_layout(m, hidden, S_F * m->embed_dim + S_C, S_OUT);
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

static int s_setup(ps_model_t *m)
{
    float *xe;
    int rc = ps_model_fc_setup(m, sizeof(s_ctr_t), ps_model_fc_span(m, S_F * m->embed_dim), &xe);
    if (rc == 0) {
        ((s_ctr_t *)m->impl)->xe = xe;
    }
    return rc;
}

/* d_num [n,C]: the numeric inputs; the rows come from m->d_rows by m->e_idx. */
static float *s_forward(ps_model_t *m, const float *d_num, int n)
{
    const ps_model_fc_t *fc = m->layout;
    const ps_kernels_t *k = m->k;
    s_ctr_t *a = m->impl;
    const int E = m->embed_dim, FE = S_F * E, D = fc->w[0], H1 = fc->w[1];
    k->embed_gather(m->ctx, m->d_rows, E, m->e_idx, n, S_F, a->xe, FE);
    ps_model_params_needed(m, 2);
    const float *w1 = ps_model_dparam(m, 0);
    /* h1 = relu(xe @ W1[:, :FE]^T + num @ W1[:, FE:]^T + b1): two GEMMs, so
     * by the separate ops (no mask: fc2's backward takes relu_bwd) */
    k->sgemm(m->ctx, 0, 1, n, H1, FE, 1.0f, a->xe, FE, w1, D, 0.0f, a->fc.h[1], H1);
    k->sgemm(m->ctx, 0, 1, n, H1, S_C, 1.0f, d_num, S_C, w1 + FE, D, 1.0f, a->fc.h[1], H1);
    k->bias_relu(m->ctx, a->fc.h[1], ps_model_dparam(m, 1), n, H1);
    return ps_model_fc_forward(m, 1, a->fc.h[1], n);
}

static void s_backward(ps_model_t *m, const float *d_num, float *d_dz, int n)
{
    const ps_model_fc_t *fc = m->layout;
    const ps_kernels_t *k = m->k;
    s_ctr_t *a = m->impl;
    const int E = m->embed_dim, FE = S_F * E, D = fc->w[0], H1 = fc->w[1];
    const float *dy = ps_model_fc_backward(m, d_dz, n);
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
    .teardown = ps_model_fc_teardown,
    .forward = s_forward,
    .backward = s_backward,
};
