/*
 * server/consistency_held.c - the dense pushes held per step and worker
 * (see consistency_held.h). Sized once at creation; the frames are read
 * in place when their step applies, never copied.
 */
#include "server/consistency_held.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/optim.h"

/* One push held for a step: its keys and its gradient, read in place. */
typedef struct {
    uint64_t begin, end; /* keys relative to the shard */
    const void *data;    /* the gradient, any alignment; valid until frame is released */
    void *frame;         /* the caller's handle on data */
} ps_part_t;

struct ps_held {
    ps_held_config_t cfg;
    ps_part_t *parts;     /* nslots*PS_CONSISTENCY_MAX_PARTS: the pushes held so far */
    int *nparts;          /* nslots */
    uint64_t *covered;    /* nslots: keys pushed so far */
    int64_t *computed_on; /* nslots: version the gradient was computed on */
    uint32_t *chunk_got;  /* nslots*nchunks: keys of each chunk pushed so far */
};

int ps_held_new(ps_held_t **out, const ps_held_config_t *cfg)
{
    *out = NULL;
    ps_held_t *h = calloc(1, sizeof *h);
    if (!h) {
        return PS_ENOMEM;
    }
    h->cfg = *cfg;
    h->parts = calloc(cfg->nslots * PS_CONSISTENCY_MAX_PARTS, sizeof *h->parts);
    h->nparts = calloc(cfg->nslots, sizeof *h->nparts);
    h->covered = calloc(cfg->nslots, sizeof *h->covered);
    h->computed_on = calloc(cfg->nslots, sizeof *h->computed_on);
    h->chunk_got = calloc(cfg->nslots * (cfg->nchunks ? cfg->nchunks : 1), sizeof *h->chunk_got);
    if (!h->parts || !h->nparts || !h->covered || !h->computed_on || !h->chunk_got) {
        ps_held_destroy(&h);
        return PS_ENOMEM;
    }
    *out = h;
    return 0;
}

void ps_held_destroy(ps_held_t **hp)
{
    ps_held_t *h = *hp;
    if (!h) {
        return;
    }
    for (size_t k = 0; h->nparts && h->chunk_got && k < h->cfg.nslots; k++) {
        ps_held_release(h, k);
    }
    free(h->parts);
    free(h->nparts);
    free(h->covered);
    free(h->computed_on);
    free(h->chunk_got);
    free(h);
    *hp = NULL;
}

size_t ps_held_slot(const ps_held_t *h, int64_t t, int w)
{
    return (size_t)(t % h->cfg.window) * (size_t)h->cfg.workers + (size_t)w;
}

int ps_held_add(ps_held_t *h, size_t k, uint64_t begin, uint64_t end, const void *data,
                void *frame)
{
    ps_part_t *parts = h->parts + k * PS_CONSISTENCY_MAX_PARTS;
    if (h->nparts[k] == PS_CONSISTENCY_MAX_PARTS) {
        return PS_ENOMEM;
    }
    for (int i = 0; i < h->nparts[k]; i++) {
        if (begin < parts[i].end && parts[i].begin < end) {
            return PS_ESTATE;
        }
    }
    parts[h->nparts[k]++] = (ps_part_t){begin, end, data, frame};
    h->covered[k] += end - begin;
    for (uint64_t at = begin; at < end;) {
        const uint64_t ch = at / h->cfg.chunk, ce = (ch + 1) * h->cfg.chunk;
        const uint64_t e = end < ce ? end : ce;
        h->chunk_got[k * h->cfg.nchunks + ch] += (uint32_t)(e - at);
        at = e;
    }
    return 0;
}

void ps_held_release(ps_held_t *h, size_t k)
{
    const ps_part_t *parts = h->parts + k * PS_CONSISTENCY_MAX_PARTS;
    for (int i = 0; i < h->nparts[k]; i++) {
        if (parts[i].frame && h->cfg.ops.release) {
            h->cfg.ops.release(h->cfg.ops.ctx, parts[i].frame);
        }
    }
    h->nparts[k] = 0;
    h->covered[k] = 0;
    memset(h->chunk_got + k * h->cfg.nchunks, 0, h->cfg.nchunks * sizeof *h->chunk_got);
}

uint64_t ps_held_covered(const ps_held_t *h, size_t k)
{
    return h->covered[k];
}

uint64_t ps_held_chunk_got(const ps_held_t *h, size_t k, size_t ch)
{
    return h->chunk_got[k * h->cfg.nchunks + ch];
}

void ps_held_note_version(ps_held_t *h, size_t k, int64_t version, int first)
{
    if (first || version < h->computed_on[k]) {
        h->computed_on[k] = version;
    }
}

int64_t ps_held_version(const ps_held_t *h, size_t k)
{
    return h->computed_on[k];
}

/* Fresh gradients (tau <= 1, everything under sync) keep 1. */
float ps_held_stale_weight(const ps_held_t *h, int64_t tau)
{
    return (h->cfg.staleness_lr && tau > 1) ? 1.0f / (float)tau : 1.0f;
}

float ps_held_weight(const ps_held_t *h, int64_t t, size_t k)
{
    return ps_held_stale_weight(h, t - h->computed_on[k]);
}

const float *ps_held_lone(const ps_held_t *h, int64_t t, int w, uint64_t off, uint64_t len)
{
    const size_t k = ps_held_slot(h, t, w);
    const ps_part_t *parts = h->parts + k * PS_CONSISTENCY_MAX_PARTS;
    if (ps_held_weight(h, t, k) != 1.0f) {
        return NULL;
    }
    for (int i = 0; i < h->nparts[k]; i++) {
        const unsigned char *d = parts[i].data;
        if (parts[i].begin <= off && off + len <= parts[i].end &&
            (uintptr_t)d % sizeof(float) == 0) {
            return (const float *)(d + (off - parts[i].begin) * sizeof(float));
        }
    }
    return NULL;
}

/* Summed one range (a chunk) at a time just before its update, into the
 * same scratch each time, so the sum is still in cache when the optimizer
 * reads it; per key the same additions in the same order as a sum of the
 * whole shard. */
const float *ps_held_sum(const ps_held_t *h, int64_t t, const unsigned char *with, int first,
                         uint64_t off, uint64_t len, float *out)
{
    const uint64_t end = off + len;
    for (int w = first; w < h->cfg.workers; w++) {
        if (!with[w]) {
            continue;
        }
        const size_t k = ps_held_slot(h, t, w);
        const float weight = ps_held_weight(h, t, k);
        const ps_part_t *parts = h->parts + k * PS_CONSISTENCY_MAX_PARTS;
        for (int i = 0; i < h->nparts[k]; i++) {
            uint64_t b = parts[i].begin > off ? parts[i].begin : off;
            uint64_t e = parts[i].end < end ? parts[i].end : end;
            if (b < e) {
                ps_optim_accumulate(out + (b - off),
                                    (const unsigned char *)parts[i].data +
                                        (b - parts[i].begin) * sizeof(float),
                                    weight, e - b, w == first);
            }
        }
    }
    return out;
}
