/*
 * worker/models/model_file.c - a model's parameters as a safetensors file.
 *
 * The tensors are written under their PyTorch state_dict names and shapes
 * (our flat layout is PyTorch's, tensor by tensor), so torch loads the file
 * into the reference nn.Module as is. Reading accepts only a file with
 * exactly the model's tensors: a partial or foreign file is an error, never
 * a silently half-initialised model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "worker/models/model_impl.h"

int ps_model_save(const ps_model_t *m, const float *params, const char *path,
                  const char *const *meta, int n_meta, char *why, size_t why_cap)
{
    const size_t n = m->ntensors;
    ps_safetensors_tensor_t t[2 * (PS_MODEL_MAX_HIDDEN + 1)];
    const char *kv[2 * 16];
    if (n > sizeof t / sizeof t[0] || n_meta < 0 || n_meta > 15) {
        snprintf(why, why_cap, "%s: too many tensors or metadata pairs", path);
        return PS_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        const ps_tensor_info_t *ti = &m->tensors[i];
        t[i] = (ps_safetensors_tensor_t){.name = ti->name, .ndim = ti->ndim,
                                         .data = params + ti->offset};
        for (int d = 0; d < ti->ndim; d++) {
            t[i].shape[d] = ti->shape[d];
        }
    }
    kv[0] = "model";
    kv[1] = m->arch->name;
    for (int i = 0; i < 2 * n_meta; i++) {
        kv[2 + i] = meta[i];
    }
    return ps_safetensors_write(path, t, (int)n, kv, n_meta + 1, why, why_cap);
}

/* Whether st holds exactly m's tensor names; with shapes too when strict. */
static int s_matches(const ps_model_t *m, const ps_safetensors_t *st, int strict, char *why,
                     size_t why_cap)
{
    const ps_model_arch_t *arch = m->arch;
    for (size_t i = 0; i < m->ntensors; i++) {
        const ps_tensor_def_t *d = &m->defs[i];
        const ps_safetensors_tensor_t *t = ps_safetensors_find(st, d->name);
        if (!t) {
            snprintf(why, why_cap, "has no tensor %s (model %s)", d->name, arch->name);
            return 0;
        }
        int same = t->ndim == d->ndim;
        for (int k = 0; same && k < d->ndim; k++) {
            same = t->shape[k] == d->shape[k];
        }
        if (strict && !same) {
            snprintf(why, why_cap, "tensor %s has another shape than model %s's", d->name,
                     arch->name);
            return 0;
        }
    }
    if ((size_t)ps_safetensors_count(st) != m->ntensors) {
        snprintf(why, why_cap, "has %d tensors, model %s has %zu", ps_safetensors_count(st),
                 arch->name, m->ntensors);
        return 0;
    }
    return 1;
}

int ps_model_load(ps_model_t *m, const ps_safetensors_t *st, char *why, size_t why_cap)
{
    char reason[200];
    if (!s_matches(m, st, 1, reason, sizeof reason)) {
        snprintf(why, why_cap, "the file %s", reason);
        return PS_EINVAL;
    }
    for (size_t i = 0; i < m->ntensors; i++) {
        const ps_tensor_info_t *ti = &m->tensors[i];
        memcpy(m->params + ti->offset, ps_safetensors_find(st, ti->name)->data,
               ti->count * sizeof(float));
    }
    return 0;
}

const char *ps_model_name_of(const ps_safetensors_t *st, char *hidden, size_t cap)
{
    char reason[200];
    const ps_model_arch_t *a;
    for (size_t i = 0; (a = ps_model_arch_at(i)) != NULL; i++) {
        /* only the layout is needed: a model without its buffers */
        ps_model_t m = {.arch = a};
        hidden[0] = '\0';
        if (a->hidden_of && a->hidden_of(st, hidden, cap) != 0) {
            continue;
        }
        const int rc = a->layout ? a->layout(&m, hidden) : 0;
        if (!a->layout) {
            m.defs = a->tensors;
            m.ntensors = a->ntensors;
        }
        const int same = rc == 0 && s_matches(&m, st, 0, reason, sizeof reason);
        free(m.layout);
        if (same) {
            return a->name;
        }
    }
    hidden[0] = '\0';
    return NULL;
}

int ps_model_embed_dim_of(const ps_safetensors_t *st)
{
    char hidden[64];
    const ps_safetensors_tensor_t *t = ps_safetensors_find(st, "fc1.weight");
    if (!t || ps_model_arch_ctr.hidden_of(st, hidden, sizeof hidden) != 0) {
        return 0;
    }
    /* hidden_of checked that the width is 26*E + 13 */
    return (int)((t->shape[1] - PS_MODEL_CTR_NUMERIC) / PS_MODEL_CTR_FIELDS);
}
