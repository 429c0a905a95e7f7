/*
 * server/store.c - the shard's buffers: parameters (chunk by chunk, each in
 * its home in one flat array or in a spare while replies hold an older
 * version), optimizer state (its arrays n floats apart, always in place),
 * and until initialised a bitmap of the keys set.
 */
#include "server/store.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"

/* A buffer of one chunk's values: its home in w, or a spare. state counts
 * the replies holding it, plus PS_STORE_CURRENT while it holds its chunk's
 * current values; 0 = free. Only the store's thread sets CURRENT or adds a
 * hold (on a current buffer), so a free buffer stays free until it takes it;
 * a release (any thread) only subtracts. */
typedef struct {
    float *data;
    atomic_uint state;
} ps_store_buf_t;

#define PS_STORE_CURRENT (1u << 31)

struct ps_store {
    ps_range_t shard;  /* our keys */
    uint64_t n;        /* keys in the shard */
    float *w;          /* every chunk's home: n floats */
    float *spare_mem;  /* nspares buffers of chunk_keys floats */
    uint64_t chunk_keys; /* min(PS_STORE_CHUNK_KEYS, n): floats per spare */
    uint64_t nchunks;
    int nspares;
    ps_store_buf_t *bufs; /* nchunks homes, then nspares spares */
    ps_store_buf_t **cur; /* nchunks: the buffer holding each chunk's values */
    float *state;      /* optimizer state: state_floats arrays of n */
    ps_optim_t opt;
    uint64_t *init_bits; /* bit k: key shard.begin+k initialised; NULL once all are */
    uint64_t init_left;  /* keys not initialised yet */
};

/* (Re)builds the buffer table for the homes and n spares; every chunk at home. */
static int s_tables(ps_store_t *s, int nspares, float *spare_mem)
{
    ps_store_buf_t *bufs = calloc(s->nchunks + (size_t)nspares, sizeof *bufs);
    ps_store_buf_t **cur = calloc(s->nchunks ? s->nchunks : 1, sizeof *cur);
    if (!bufs || !cur) {
        free(bufs);
        free(cur);
        return PS_ENOMEM;
    }
    for (uint64_t c = 0; c < s->nchunks; c++) {
        bufs[c].data = s->w + c * PS_STORE_CHUNK_KEYS;
        atomic_init(&bufs[c].state, PS_STORE_CURRENT);
        cur[c] = &bufs[c];
    }
    for (int i = 0; i < nspares; i++) {
        bufs[s->nchunks + (size_t)i].data = spare_mem + (size_t)i * s->chunk_keys;
        atomic_init(&bufs[s->nchunks + (size_t)i].state, 0);
    }
    free(s->bufs);
    free(s->cur);
    free(s->spare_mem);
    s->bufs = bufs;
    s->cur = cur;
    s->spare_mem = spare_mem;
    s->nspares = nspares;
    return 0;
}

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
    s->chunk_keys = s->n < PS_STORE_CHUNK_KEYS ? s->n : PS_STORE_CHUNK_KEYS;
    s->nchunks = (s->n + PS_STORE_CHUNK_KEYS - 1) / PS_STORE_CHUNK_KEYS;
    s->w = calloc(n, sizeof(float));
    s->state = calloc(n * (size_t)(ps_optim_state_floats(&s->opt) + 1), sizeof(float));
    s->init_left = s->n;
    s->init_bits = s->n ? calloc((s->n + 63) / 64, sizeof *s->init_bits) : NULL;
    if (!s->w || !s->state || (s->n && !s->init_bits) || s_tables(s, 0, NULL) != 0) {
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
    free(s->spare_mem);
    free(s->bufs);
    free(s->cur);
    free(s->state);
    free(s->init_bits);
    free(s);
    *sp = NULL;
}

ps_range_t ps_store_shard(const ps_store_t *s)
{
    return s->shard;
}

/* The chunk of shard-relative key k, and k's place in its buffer. */
static uint64_t s_chunk(uint64_t k)
{
    return k / PS_STORE_CHUNK_KEYS;
}

static float *s_at(const ps_store_t *s, uint64_t k)
{
    return s->cur[s_chunk(k)]->data + k % PS_STORE_CHUNK_KEYS;
}

/* Copies len values between src and the store's keys from shard-relative
 * off (to_store) or the other way, chunk by chunk. */
static void s_copy(const ps_store_t *s, uint64_t off, float *ext, uint64_t len, int to_store)
{
    for (uint64_t k = off; k < off + len;) {
        uint64_t end = (s_chunk(k) + 1) * PS_STORE_CHUNK_KEYS;
        uint64_t m = (end < off + len ? end : off + len) - k;
        if (to_store) {
            memcpy(s_at(s, k), ext + (k - off), m * sizeof(float));
        } else {
            memcpy(ext + (k - off), s_at(s, k), m * sizeof(float));
        }
        k += m;
    }
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
    s_copy(s, off, (float *)values, len, 1); /* memcpy: any alignment */
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
    return s_at(s, key - s->shard.begin);
}

void ps_store_read(const ps_store_t *s, ps_range_t r, float *dst)
{
    s_copy(s, r.begin - s->shard.begin, dst, ps_range_len(r), 0);
}

const float *ps_store_flat(const ps_store_t *s)
{
    for (uint64_t c = 0; c < s->nchunks; c++) {
        if (s->cur[c] != &s->bufs[c]) {
            return NULL;
        }
    }
    return s->w;
}

int ps_store_reserve(ps_store_t *s, int n, int warm)
{
    float *mem = n > 0 ? malloc((size_t)n * s->chunk_keys * sizeof(float)) : NULL;
    if (n > 0 && !mem) {
        return PS_ENOMEM;
    }
    if (s_tables(s, n, mem) != 0) {
        free(mem);
        return PS_ENOMEM;
    }
    /* Spares are taken lowest first (s_free_buffer): the first `warm` ones
     * are the ones a steady state of holds uses. */
    warm = warm < n ? warm : n;
    if (warm > 0) {
        memset(mem, 0, (size_t)warm * s->chunk_keys * sizeof(float));
    }
    return 0;
}

const float *ps_store_hold(ps_store_t *s, ps_range_t part)
{
    const uint64_t k = part.begin - s->shard.begin;
    atomic_fetch_add(&s->cur[s_chunk(k)]->state, 1);
    return s_at(s, k);
}

void ps_store_release(void *data, void *hint)
{
    ps_store_t *s = hint;
    const float *p = data;
    ps_store_buf_t *b;
    if (p >= s->w && p < s->w + s->n) {
        b = &s->bufs[(uint64_t)(p - s->w) / PS_STORE_CHUNK_KEYS];
    } else {
        b = &s->bufs[s->nchunks + (uint64_t)(p - s->spare_mem) / s->chunk_keys];
    }
    atomic_fetch_sub(&b->state, 1);
}

/* A free buffer for chunk c's next values: its home when no reply holds it,
 * else the first free spare (the first ones, so the same few stay warm and
 * the others are never touched); NULL when none is. */
static ps_store_buf_t *s_free_buffer(ps_store_t *s, uint64_t c)
{
    if (atomic_load(&s->bufs[c].state) == 0) {
        return &s->bufs[c];
    }
    for (int i = 0; i < s->nspares; i++) {
        ps_store_buf_t *b = &s->bufs[s->nchunks + (size_t)i];
        if (atomic_load(&b->state) == 0) {
            return b;
        }
    }
    return NULL;
}

int ps_store_state_arrays(const ps_store_t *s)
{
    return ps_optim_state_floats(&s->opt);
}

float *ps_store_state(ps_store_t *s, int i)
{
    return s->state + (size_t)i * s->n;
}

/* Keys a block of an update: its check and its update both read it from
 * the core's cache (16 KiB). */
#define S_BLOCK_KEYS 4096

/* Writes the updated values of keys [k, k + m) into vo from vi (the same
 * array in place), block by block: each block checked first
 * (ps_optim_step_ok), then updated while it is in cache. A block whose
 * update would make a value or its state non-finite is left as it was
 * (copied over when vo is another buffer). Returns the blocks so left. */
static int s_step_blocks(ps_store_t *s, float *vo, const float *vi, uint64_t k, uint64_t m,
                         const float *grad, float lr, float scale, int64_t t)
{
    int left = 0;
    for (uint64_t j = 0; j < m; j += S_BLOCK_KEYS) {
        const uint64_t len = m - j < S_BLOCK_KEYS ? m - j : S_BLOCK_KEYS;
        float *state = s->state + k + j;
        if (!ps_optim_step_ok(&s->opt, lr, t, vi + j, state, s->n, grad + j, scale, len)) {
            if (vo != vi) {
                memcpy(vo + j, vi + j, len * sizeof(float));
            }
            left++;
        } else if (vo == vi) {
            ps_optim_step(&s->opt, lr, t, vo + j, state, s->n, grad + j, scale, len);
        } else {
            ps_optim_step_from(&s->opt, lr, t, vo + j, vi + j, state, s->n, grad + j, scale,
                               len);
        }
    }
    return left;
}

/*
 * Chunk by chunk: in place when no reply holds the chunk; otherwise the
 * optimizer reads the held values and writes the new ones into a free
 * buffer (the rest of the chunk copied over when the update covers only
 * part of it), which becomes the chunk's values; the held buffer is free
 * once its last reply lets it go. A block whose update would make a value
 * non-finite (finite gradients can overflow) keeps its values and state.
 */
int ps_store_step(ps_store_t *s, ps_range_t r, const float *grad, float lr, float scale,
                  int64_t t)
{
    const uint64_t off = r.begin - s->shard.begin, end = off + ps_range_len(r);
    int left = 0;
    for (uint64_t k = off; k < end;) {
        const uint64_t c = s_chunk(k), cb = c * PS_STORE_CHUNK_KEYS;
        const uint64_t ce = cb + PS_STORE_CHUNK_KEYS < s->n ? cb + PS_STORE_CHUNK_KEYS : s->n;
        const uint64_t e = end < ce ? end : ce;
        ps_store_buf_t *b = s->cur[c], *nb = NULL;
        float *v = b->data + (k - cb);
        if (atomic_load(&b->state) != PS_STORE_CURRENT && (nb = s_free_buffer(s, c))) {
            memcpy(nb->data, b->data, (k - cb) * sizeof(float));
            memcpy(nb->data + (e - cb), b->data + (e - cb), (ce - e) * sizeof(float));
            left += s_step_blocks(s, nb->data + (k - cb), v, k, e - k, grad + (k - off), lr,
                                  scale, t);
            atomic_store(&nb->state, PS_STORE_CURRENT);
            s->cur[c] = nb;
            atomic_fetch_sub(&b->state, PS_STORE_CURRENT);
        } else {
            left += s_step_blocks(s, v, v, k, e - k, grad + (k - off), lr, scale, t);
        }
        k = e;
    }
    return left;
}
