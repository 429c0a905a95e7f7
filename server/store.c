/*
 * server/store.c - the shard's flat buffers: parameters, optimizer state (its
 * arrays n floats apart), and until initialised a bitmap of the keys set.
 */
#include "server/store.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"

struct ps_store {
    ps_range_t shard;  /* our keys */
    uint64_t n;        /* keys in the shard */
    float *w;          /* parameters, n */
    float *state;      /* optimizer state: state_floats arrays of n */
    ps_optim_t opt;
    uint64_t *init_bits; /* bit k: key shard.begin+k initialised; NULL once all are */
    uint64_t init_left;  /* keys not initialised yet */
};

int ps_store_new(ps_store_t **out, ps_range_t shard, const ps_job_t *job)
{
    *out = NULL;
    ps_store_t *s = calloc(1, sizeof *s);
    if (!s) {
        return PS_ENOMEM;
    }
    s->shard = shard;
    s->n = ps_range_len(shard);
    if (ps_optim_from_job(job, &s->opt) != 0) {
        free(s);
        return PS_EINVAL;
    }
    size_t n = s->n ? s->n : 1;
    s->w = calloc(n, sizeof(float));
    s->state = calloc(n * (size_t)(ps_optim_state_floats(&s->opt) + 1), sizeof(float));
    s->init_left = s->n;
    s->init_bits = s->n ? calloc((s->n + 63) / 64, sizeof *s->init_bits) : NULL;
    if (!s->w || !s->state || (s->n && !s->init_bits)) {
        ps_store_destroy(&s);
        return PS_ENOMEM;
    }
    *out = s;
    return 0;
}

void ps_store_destroy(ps_store_t **sp)
{
    ps_store_t *s = *sp;
    if (!s) {
        return;
    }
    free(s->w);
    free(s->state);
    free(s->init_bits);
    free(s);
    *sp = NULL;
}

ps_range_t ps_store_shard(const ps_store_t *s)
{
    return s->shard;
}

static int s_bit(const uint64_t *bits, uint64_t k)
{
    return (int)((bits[k / 64] >> (k % 64)) & 1u);
}

int ps_store_init(ps_store_t *s, ps_range_t r, const void *values)
{
    if (r.end <= r.begin || !ps_range_contains(s->shard, r)) {
        return PS_ERANGE;
    }
    if (!s->init_bits) {
        return PS_ESTATE;
    }
    const uint64_t off = r.begin - s->shard.begin, len = ps_range_len(r);
    for (uint64_t k = off; k < off + len; k++) {
        if (s_bit(s->init_bits, k)) {
            return PS_ESTATE;
        }
    }
    for (uint64_t k = off; k < off + len; k++) {
        s->init_bits[k / 64] |= (uint64_t)1 << (k % 64);
    }
    memcpy(s->w + off, values, len * sizeof(float));
    s->init_left -= len;
    if (s->init_left) {
        return 0;
    }
    free(s->init_bits);
    s->init_bits = NULL;
    memset(s->state, 0, s->n * (size_t)ps_optim_state_floats(&s->opt) * sizeof(float));
    ps_log_info("parameters initialised: keys [%llu, %llu)",
                (unsigned long long)s->shard.begin, (unsigned long long)s->shard.end);
    return 1;
}

int ps_store_reset(ps_store_t *s)
{
    if (!s->n) {
        return 0;
    }
    uint64_t *bits = calloc((s->n + 63) / 64, sizeof *bits);
    if (!bits) {
        return PS_ENOMEM;
    }
    free(s->init_bits);
    s->init_bits = bits;
    s->init_left = s->n;
    return 0;
}

int ps_store_initialized(const ps_store_t *s)
{
    return s->init_bits == NULL;
}

const float *ps_store_values(const ps_store_t *s, uint64_t key)
{
    return s->w + (key - s->shard.begin);
}

int ps_store_state_arrays(const ps_store_t *s)
{
    return ps_optim_state_floats(&s->opt);
}

float *ps_store_state(ps_store_t *s, int i)
{
    return s->state + (size_t)i * s->n;
}

void ps_store_step(ps_store_t *s, ps_range_t r, const float *grad, float lr, float scale,
                   int64_t t)
{
    const uint64_t off = r.begin - s->shard.begin;
    ps_optim_step(&s->opt, lr, t, s->w + off, s->state + off, s->n, grad, scale,
                  ps_range_len(r));
}
