/*
 * worker/models/fc.c - the stack of fully connected layers fc1..fc(L+1)
 * with ReLU between them that the mlp and the ctr model share: its tensors
 * (torch.nn.Linear's names and shapes), its activations in one backend
 * block, the layers' forward and backward, and the widths a model file's
 * tensors chain through.
 *
 *   hi = relu(h(i-1) @ Wi^T + bi)   h0 = the input [N,w0], Wi [wi,w(i-1)]
 *   z  = hL @ W(L+1)^T + b(L+1)     z [N,w(L+1)]: the logits
 *
 * What comes before fc1's output (the mlp's plain input, the ctr's gathered
 * rows and its split first layer) stays the architecture's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/job.h"
#include "worker/models/model_impl.h"

int ps_model_fc_layout(ps_model_t *m, const char *hidden, int in, int out)
{
    ps_model_fc_t *fc = calloc(1, sizeof *fc);
    if (!fc) {
        return PS_ENOMEM;
    }
    m->layout = fc;
    const char *text = hidden && *hidden ? hidden : "256,128";
    if (ps_job_parse_hidden(text, fc->w + 1, &fc->L) != 0) {
        return PS_EINVAL;
    }
    fc->w[0] = in;
    fc->w[fc->L + 1] = out;
    for (int i = 0; i <= fc->L; i++) {
        const int I = fc->w[i], O = fc->w[i + 1];
        ps_tensor_def_t *wt = &fc->defs[2 * i], *b = &fc->defs[2 * i + 1];
        snprintf(fc->names[2 * i], sizeof fc->names[0], "fc%d.weight", i + 1);
        snprintf(fc->names[2 * i + 1], sizeof fc->names[0], "fc%d.bias", i + 1);
        *wt = (ps_tensor_def_t){fc->names[2 * i], (size_t)O * I, I, 2, {O, I}};
        *b = (ps_tensor_def_t){fc->names[2 * i + 1], (size_t)O, I, 1, {O}};
    }
    m->defs = fc->defs;
    m->ntensors = 2 * ((size_t)fc->L + 1);
    return 0;
}

size_t ps_model_fc_span(const ps_model_t *m, int width)
{
    return ((size_t)m->max_batch * (size_t)width + 15) & ~(size_t)15;
}

int ps_model_fc_setup(ps_model_t *m, size_t impl_size, size_t front, float **front_p)
{
    const ps_model_fc_t *fc = m->layout;
    ps_model_fc_acts_t *a = calloc(1, impl_size);
    if (!a) {
        return PS_ENOMEM;
    }
    m->impl = a;
    size_t total = front + ps_model_fc_span(m, fc->w[fc->L + 1]);
    for (int i = 1; i <= fc->L; i++) {
        total += 2 * ps_model_fc_span(m, fc->w[i]);
    }
    a->block = m->k->alloc(total * sizeof(float));
    if (!a->block) {
        return PS_ENOMEM;
    }
    float *at = a->block + front;
    if (front_p) {
        *front_p = a->block;
    }
    for (int i = 1; i <= fc->L; i++) {
        const size_t span = ps_model_fc_span(m, fc->w[i]);
        a->h[i] = at;
        a->dh[i] = at + span;
        at += 2 * span;
    }
    a->z = at;
    return ps_model_masks_setup(m, a->mask + 1, fc->w + 1, fc->L, &a->masks);
}

void ps_model_fc_teardown(ps_model_t *m)
{
    ps_model_fc_acts_t *a = m->impl;
    if (!a) {
        return;
    }
    m->k->free(a->block);
    m->k->free(a->masks);
    free(a);
    m->impl = NULL;
}

float *ps_model_fc_forward(ps_model_t *m, int first, const float *in, int n)
{
    const ps_model_fc_t *fc = m->layout;
    ps_model_fc_acts_t *a = m->impl;
    for (int i = first; i <= fc->L; i++) {
        float *out = i < fc->L ? a->h[i + 1] : a->z;
        ps_model_params_needed(m, 2 * (size_t)i + 2);
        ps_model_linear_fwd(m, in, ps_model_dparam(m, 2 * (size_t)i),
                            ps_model_dparam(m, 2 * (size_t)i + 1), out, n, fc->w[i],
                            fc->w[i + 1], i < fc->L ? &a->mask[i + 1] : NULL);
        in = out;
    }
    return a->z;
}

const float *ps_model_fc_backward(ps_model_t *m, const float *d_dz, int n)
{
    const ps_model_fc_t *fc = m->layout;
    const ps_model_fc_acts_t *a = m->impl;
    const float *dy = d_dz;
    for (int i = fc->L; i >= 1; i--) {
        const size_t t = 2 * (size_t)i;
        ps_model_linear_bwd(m, a->h[i], ps_model_dparam(m, t), dy, a->dh[i],
                            ps_model_dgrad(m, t), ps_model_dgrad(m, t + 1), n, fc->w[i],
                            fc->w[i + 1], &a->mask[i]);
        ps_model_grads_final(m, t);
        dy = a->dh[i];
    }
    return dy;
}

int ps_model_fc_widths(const ps_safetensors_t *st, int in, int out, char *buf, size_t cap)
{
    int n = 0, prev = in;
    char text[PS_JOB_HIDDEN_TEXT] = "";
    for (int i = 1; i <= PS_MODEL_MAX_HIDDEN + 1; i++) {
        char name[32];
        snprintf(name, sizeof name, "fc%d.weight", i);
        const ps_safetensors_tensor_t *t = ps_safetensors_find(st, name);
        if (!t) {
            break;
        }
        if (t->ndim != 2 || t->shape[1] != prev) {
            return PS_EINVAL;
        }
        prev = (int)t->shape[0];
        n = i;
        size_t at = strlen(text);
        snprintf(text + at, sizeof text - at, "%s%d", at ? "," : "", prev);
    }
    if (n < 2 || prev != out) {
        return PS_EINVAL;
    }
    char *last = strrchr(text, ',');
    *last = '\0'; /* the output layer's width is not a hidden one */
    snprintf(buf, cap, "%s", strcmp(text, "256,128") ? text : "");
    return 0;
}
