/* worker/kv_encode.c - pushes in the wire dtype, or top-k with error
 * feedback (see kv_encode.h). */
#include "worker/kv_encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "proto/wire.h"

struct ps_kv_encode {
    uint32_t dtype;      /* dense wire dtype of pushes */
    double topk;         /* fraction of each push part sent; 0 = dense */
    uint64_t num_params; /* P */
    unsigned char *enc;  /* the encoded part: the widest server range x 8 bytes */
    float *residual;     /* top-k: P, per key what earlier pushes did not send */
    float *velocity;     /* top-k with SGD momentum: P, per key (ps_wire_worker_momentum) */
    float momentum;      /* its factor; 0 = the servers run momentum */
    float *scratch;      /* top-k: the widest server range, for the selection */
    uint64_t *cuts;      /* top-k: the model's tensor starts, then P */
    size_t ncuts;
};

int ps_kv_encode_new(const ps_job_t *job, uint64_t num_params, uint64_t widest,
                     ps_kv_encode_t **out, char *err, size_t errlen)
{
    *out = NULL;
    const uint32_t dtype = ps_wire_dtype(job);
    if (dtype == PS_DTYPE_F32 && job->topk <= 0) {
        return 0;
    }
    if (job->topk > 0 && widest > UINT32_MAX) { /* sparse offsets are uint32 */
        snprintf(err, errlen, "--compress topk needs shards under 2^32 keys: use more servers");
        return PS_EINVAL;
    }
    ps_kv_encode_t *e = calloc(1, sizeof *e);
    if (!e) {
        return PS_ENOMEM;
    }
    e->dtype = dtype;
    e->topk = job->topk;
    e->num_params = num_params;
    int ok = (e->enc = malloc(widest * 8 + 8)) != NULL;
    if (e->topk > 0) {
        e->residual = calloc(num_params + 1, sizeof *e->residual);
        e->scratch = malloc((widest + 1) * sizeof *e->scratch);
        ok = ok && e->residual && e->scratch;
        if (ps_wire_worker_momentum(job)) {
            e->momentum = (float)job->momentum;
            e->velocity = calloc(num_params + 1, sizeof *e->velocity);
            ok = ok && e->velocity;
        }
    }
    if (!ok) {
        ps_kv_encode_destroy(&e);
        return PS_ENOMEM;
    }
    *out = e;
    return 0;
}

void ps_kv_encode_destroy(ps_kv_encode_t **ep)
{
    ps_kv_encode_t *e = *ep;
    if (e) {
        free(e->enc);
        free(e->residual);
        free(e->velocity);
        free(e->scratch);
        free(e->cuts);
        free(e);
        *ep = NULL;
    }
}

int ps_kv_encode_topk(const ps_kv_encode_t *e)
{
    return e && e->topk > 0;
}

int ps_kv_encode_set_tensors(ps_kv_encode_t *e, const uint64_t *starts, size_t n)
{
    uint64_t *cuts = malloc((n + 1) * sizeof *cuts);
    if (!cuts) {
        return PS_ENOMEM;
    }
    memcpy(cuts, starts, n * sizeof *cuts);
    cuts[n] = e->num_params;
    free(e->cuts);
    e->cuts = cuts;
    e->ncuts = n + 1;
    return 0;
}

void ps_kv_encode_reset(ps_kv_encode_t *e)
{
    if (e->residual) {
        memset(e->residual, 0, e->num_params * sizeof *e->residual);
    }
    if (e->velocity) {
        memset(e->velocity, 0, e->num_params * sizeof *e->velocity);
    }
}

/* Entries a top-k push sends of the piece [b, e) of a tensor of `count`
 * keys: all of a tensor within one step's budget of the model (ceil(R P)),
 * else ceil(R (e - b)). Top-k would starve small tensors of large gradients
 * (biases, the output layer: Deep Gradient Compression sends them whole). */
static uint64_t s_topk_entries(const ps_kv_encode_t *e, uint64_t b, uint64_t end, uint64_t count)
{
    return count <= ps_wire_topk_count(e->topk, e->num_params)
               ? end - b : ps_wire_topk_count(e->topk, end - b);
}

/* Top-k of the push part with error feedback in acc (its residual), one
 * selection per tensor piece (so a tensor's share does not depend on how the
 * pushes are cut, by layer or whole). Writes the sparse payload of dtype to
 * e->enc (all the offsets, then all the values); returns its entries. */
static uint64_t s_topk_part(ps_kv_encode_t *e, uint32_t dtype, float *acc, ps_range_t part)
{
    static const uint64_t whole[2] = {0, UINT64_MAX}; /* no tensors given: one piece */
    const uint64_t *cuts = e->cuts ? e->cuts : whole;
    const size_t ncuts = e->cuts ? e->ncuts : 2;
    const uint32_t dense = ps_wire_dense_of(dtype);
    uint64_t nnz = 0, at = 0;
    for (int pass = 0; pass < 2; pass++) { /* count, then write after nnz offsets */
        unsigned char *vals = e->enc + nnz * sizeof(uint32_t);
        for (size_t t = 0; t + 1 < ncuts; t++) {
            ps_range_t piece;
            if (!ps_range_intersect(part, (ps_range_t){cuts[t], cuts[t + 1]}, &piece)) {
                continue;
            }
            const uint64_t k = s_topk_entries(e, piece.begin, piece.end, cuts[t + 1] - cuts[t]);
            if (pass == 0) {
                nnz += k;
            } else {
                const uint64_t off = piece.begin - part.begin;
                at += ps_wire_topk_select(dense, (uint32_t *)e->enc + at,
                                          vals + at * ps_wire_value_size(dense), (uint32_t)off,
                                          acc + off, ps_range_len(piece), k, e->scratch);
            }
        }
    }
    return nnz;
}

void ps_kv_encode_push(ps_kv_encode_t *e, Shardps__Header *h, ps_frame_t *f, ps_range_t part)
{
    const float *grad = f->data;
    const size_t n = ps_range_len(part);
    if (e->topk > 0) {
        float *acc = e->residual + part.begin;
        /* with momentum correction the velocity waits, not the gradient */
        float *u = e->velocity ? e->velocity + part.begin : NULL;
        for (size_t i = 0; i < n; i++) {
            acc[i] += u ? (u[i] = e->momentum * u[i] + grad[i]) : grad[i];
        }
        h->dtype = ps_wire_sparse_of(e->dtype);
        h->nnz = s_topk_part(e, h->dtype, acc, part);
        f->len = ps_wire_payload_len(h->dtype, n, h->nnz);
    } else {
        h->dtype = e->dtype;
        ps_wire_encode(e->dtype, e->enc, grad, n);
        f->len = ps_wire_payload_len(e->dtype, n, 0);
    }
    f->data = e->enc;
}
