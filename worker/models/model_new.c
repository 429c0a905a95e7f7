/*
 * worker/models/model_new.c - building a model: the architectures by name,
 * the tensor table of a layout, every buffer a model holds (flat parameters
 * and gradients, the batch and its indices, an embedding model's rows, their
 * gradients and room for a step's lookups: pinned on the host, with backend
 * copies on a device), their release, the accessors that lend them, and the
 * initial parameters.
 *
 * All of it is allocated once, in ps_model_new(), sized for max_batch; the
 * steps that use the buffers, and the two things they allocate later (the
 * resident training set, a recorded step), are model.c's. The architectures'
 * own activations are theirs (arch->setup, arch->teardown).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/job.h"
#include "worker/models/model_impl.h"
#include "worker/rng.h"

static const ps_model_arch_t *const s_archs[] = {
    &ps_model_arch_mlp,
    &ps_model_arch_cnn,
    &ps_model_arch_ctr,
};

const ps_model_arch_t *ps_model_arch_at(size_t i)
{
    return i < sizeof(s_archs) / sizeof(s_archs[0]) ? s_archs[i] : NULL;
}

static const ps_model_arch_t *s_find_arch(const char *name)
{
    if (!name) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(s_archs) / sizeof(s_archs[0]); i++) {
        if (strcmp(s_archs[i]->name, name) == 0) {
            return s_archs[i];
        }
    }
    return NULL;
}

/* m's tensor layout: the architecture's fixed one, or the one it makes for
 * the hidden widths. */
static int s_layout(ps_model_t *m, const char *hidden)
{
    const ps_model_arch_t *arch = m->arch;
    if (arch->layout) {
        return arch->layout(m, hidden ? hidden : "");
    }
    if (hidden && hidden[0]) {
        return PS_EINVAL;
    }
    m->defs = arch->tensors;
    m->ntensors = arch->ntensors;
    return 0;
}

/* The embedding rows' buffers and room for a step's lookups (m->embed_dim
 * set). 0 or PS_ENOMEM. */
static int s_rows_alloc(ps_model_t *m)
{
    const ps_kernels_t *k = m->k;
    m->max_rows = m->max_batch * m->arch->fields;
    const size_t bytes = (size_t)m->max_rows * m->embed_dim * sizeof(float);
    m->rows = k->host_alloc(bytes);
    m->row_grads = k->host_alloc(bytes);
    if (!m->rows || !m->row_grads) {
        return PS_ENOMEM;
    }
    memset(m->rows, 0, bytes);
    memset(m->row_grads, 0, bytes);
    if (k->host_is_backend) {
        m->d_rows = m->rows;
        m->d_row_grads = m->row_grads;
        return 0;
    }
    m->d_rows = k->alloc(bytes);
    m->d_row_grads = k->alloc(bytes);
    m->d_csr = k->alloc((3 * (size_t)m->max_rows + 1) * sizeof(uint32_t));
    return m->d_rows && m->d_row_grads && m->d_csr ? 0 : PS_ENOMEM;
}

/* ps_model_new() with embed_dim for a model with rows (0: its default). */
static int s_new(const ps_model_arch_t *arch, const char *hidden, int embed_dim,
                 const ps_kernels_t *k, int max_batch, ps_model_t **out)
{
    int rc = PS_ENOMEM;
    *out = NULL;
    if (!arch || !k || max_batch < 1) {
        return PS_EINVAL;
    }
    ps_model_t *m = calloc(1, sizeof(*m));
    if (!m) {
        return PS_ENOMEM;
    }
    m->arch = arch;
    m->k = k;
    m->max_batch = max_batch;
    m->fused = 1;
    m->embed_dim = arch->fields ? (embed_dim ? embed_dim : PS_MODEL_CTR_EMBED_DIM) : 0;
    rc = k->ctx_new(&m->ctx);
    rc = rc ? rc : s_layout(m, hidden);
    if (rc) {
        goto fail;
    }
    rc = PS_ENOMEM;
    m->tensors = calloc(m->ntensors, sizeof(*m->tensors));
    m->out_from = calloc(m->ntensors, sizeof(*m->out_from));
    m->graph_out_from = calloc(m->ntensors, sizeof(*m->graph_out_from));
    if (!m->tensors || !m->out_from || !m->graph_out_from) {
        goto fail;
    }
    for (size_t i = 0; i < m->ntensors; i++) {
        m->tensors[i].name = m->defs[i].name;
        m->tensors[i].offset = m->P;
        m->tensors[i].count = m->defs[i].count;
        m->tensors[i].ndim = m->defs[i].ndim;
        m->tensors[i].shape = m->defs[i].shape;
        m->P += m->defs[i].count;
    }
    const size_t pbytes = m->P * sizeof(float);
    m->params = k->host_alloc(pbytes);
    m->grads = k->host_alloc(pbytes);
    m->x = k->host_alloc((size_t)max_batch * ps_model_in_floats(m) * sizeof(float));
    m->y = k->host_alloc((size_t)max_batch);
    m->idx = k->host_alloc((size_t)max_batch * sizeof(uint32_t));
    if (!m->params || !m->grads || !m->x || !m->y || !m->idx) {
        goto fail;
    }
    memset(m->params, 0, pbytes);
    memset(m->grads, 0, pbytes);
    if (k->host_is_backend) {
        m->d_params = m->params;
        m->d_grads = m->grads;
        m->d_idx = m->idx;
    } else {
        m->d_params = k->alloc(pbytes);
        m->d_grads = k->alloc(pbytes);
        m->d_x = k->alloc((size_t)max_batch * ps_model_in_floats(m) * sizeof(float));
        m->d_y = k->alloc((size_t)max_batch);
        m->d_idx = k->alloc((size_t)max_batch * sizeof(uint32_t));
        if (!m->d_params || !m->d_grads || !m->d_x || !m->d_y || !m->d_idx) {
            goto fail;
        }
        k->zero(m->ctx, m->d_grads, pbytes);
    }
    if (arch->fields && s_rows_alloc(m) != 0) {
        goto fail;
    }
    rc = arch->setup(m);
    if (rc) {
        goto fail;
    }
    *out = m;
    return 0;
fail:
    ps_model_destroy(&m);
    return rc;
}

int ps_model_new(const char *name, const char *hidden, const ps_kernels_t *k, int max_batch,
                 ps_model_t **out)
{
    return s_new(s_find_arch(name), hidden, 0, k, max_batch, out);
}

int ps_model_new_ctr(const char *hidden, int embed_dim, const ps_kernels_t *k,
                     int max_batch, ps_model_t **out)
{
    if (embed_dim < 1 || embed_dim > PS_MODEL_MAX_EMBED_DIM) {
        *out = NULL;
        return PS_EINVAL;
    }
    return s_new(&ps_model_arch_ctr, hidden, embed_dim, k, max_batch, out);
}

void ps_model_destroy(ps_model_t **mp)
{
    if (!mp || !*mp) {
        return;
    }
    ps_model_t *m = *mp;
    const ps_kernels_t *k = m->k;
    k->graph_destroy(&m->graph);
    if (m->arch && m->defs) {
        m->arch->teardown(m);
    }
    if (!k->host_is_backend) {
        k->free(m->d_params);
        k->free(m->d_grads);
        k->free(m->d_x);
        k->free(m->d_y);
        k->free(m->d_idx);
        k->free(m->d_rows);
        k->free(m->d_row_grads);
        k->free(m->d_csr);
    }
    k->host_free(m->rows);
    k->host_free(m->row_grads);
    k->free(m->d_pixels);
    k->free(m->d_labels);
    k->host_free(m->idx);
    free(m->graph_out_from);
    k->host_free(m->params);
    k->host_free(m->grads);
    k->host_free(m->x);
    k->host_free(m->y);
    free(m->tensors);
    free(m->out_from);
    free(m->layout);
    k->ctx_destroy(&m->ctx);
    free(m);
    *mp = NULL;
}

size_t ps_model_num_params(const ps_model_t *m)
{
    return m->P;
}

size_t ps_model_num_tensors(const ps_model_t *m)
{
    return m->ntensors;
}

const ps_tensor_info_t *ps_model_tensor(const ps_model_t *m, size_t i)
{
    return i < m->ntensors ? &m->tensors[i] : NULL;
}

float *ps_model_params(ps_model_t *m)
{
    return m->params;
}

float *ps_model_grads(ps_model_t *m)
{
    return m->grads;
}

float *ps_model_batch_x(ps_model_t *m)
{
    return m->x;
}

uint8_t *ps_model_batch_y(ps_model_t *m)
{
    return m->y;
}

uint32_t *ps_model_batch_idx(ps_model_t *m)
{
    return m->idx;
}

int ps_model_embed_dim(const ps_model_t *m)
{
    return m->embed_dim;
}

float *ps_model_rows(ps_model_t *m)
{
    return m->rows;
}

float *ps_model_row_grads(ps_model_t *m)
{
    return m->row_grads;
}

/* torch.nn.Linear/Conv2d reset_parameters(): kaiming_uniform_(a=sqrt(5)) gives
 * weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and biases use the same bound.
 * Each tensor draws from its own stream (seed, tensor index). */
void ps_model_init_params(ps_model_t *m, uint64_t seed)
{
    for (size_t i = 0; i < m->ntensors; i++) {
        const ps_tensor_def_t *t = &m->defs[i];
        const double bound = 1.0 / sqrt((double)t->fan_in);
        float *p = m->params + m->tensors[i].offset;
        ps_rng_t r;
        ps_rng_init(&r, seed, 0x1A17000ULL + i);
        for (size_t j = 0; j < t->count; j++) {
            p[j] = (float)((2.0 * ps_rng_double(&r) - 1.0) * bound);
        }
    }
}
