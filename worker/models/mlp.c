/*
 * worker/models/mlp.c - the MLP 784-H1-...-HL-10 with ReLU (torch.nn.Linear
 * layers fc1..fc(L+1)); by default H = 256,128 (--hidden changes it).
 *
 *   h1 = relu(x @ W1^T + b1)        x [N,784], W1 [H1,784]
 *   hi = relu(h(i-1) @ Wi^T + bi)   Wi [Hi,H(i-1)]
 *   z  = hL @ W(L+1)^T + b(L+1)     W(L+1) [10,HL]; loss = mean softmax cross-entropy
 * The layers are fc.c's: backward reuses the buffers (dz overwrites z, done
 * by the loss; each dhi gets its own buffer, the ReLU gradient applied in
 * place), no dx for the input, activations in one backend allocation sized
 * for max_batch.
 */
#include "worker/models/model_impl.h"

enum { S_IN = 784, S_OUT = 10 };

static int s_layout(ps_model_t *m, const char *hidden)
{
    return ps_model_fc_layout(m, hidden, S_IN, S_OUT);
}

/* Writes the hidden widths of an MLP file ("" for the default) into buf:
 * fc1..fcN's weights chain 784 -> ... -> 10. Returns 0 or PS_EINVAL. */
static int s_hidden_of(const ps_safetensors_t *st, char *buf, size_t cap)
{
    return ps_model_fc_widths(st, S_IN, S_OUT, buf, cap);
}

static int s_setup(ps_model_t *m)
{
    return ps_model_fc_setup(m, sizeof(ps_model_fc_acts_t), 0, NULL);
}

static float *s_forward(ps_model_t *m, const float *d_x, int n)
{
    return ps_model_fc_forward(m, 0, d_x, n);
}

static void s_backward(ps_model_t *m, const float *d_x, float *d_dz, int n)
{
    const ps_model_fc_t *fc = m->layout;
    const float *dy = ps_model_fc_backward(m, d_dz, n);
    ps_model_linear_bwd(m, d_x, ps_model_dparam(m, 0), dy, NULL, ps_model_dgrad(m, 0),
                        ps_model_dgrad(m, 1), n, fc->w[0], fc->w[1], NULL);
}

const ps_model_arch_t ps_model_arch_mlp = {
    .name = "mlp",
    .layout = s_layout,
    .hidden_of = s_hidden_of,
    .setup = s_setup,
    .teardown = ps_model_fc_teardown,
    .forward = s_forward,
    .backward = s_backward,
};
