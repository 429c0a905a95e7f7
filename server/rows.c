/*
 * server/rows.c - one server's embedding rows (see rows.h).
 *
 * Three parts, sized for millions of rows:
 *   - the index: open addressing with linear probing over a power-of-two
 *     array of 4-byte slots, each the row's index + 1 (0 = empty, so no key
 *     value is reserved); a probe compares the row's key. At load 0.7 at
 *     most, it costs 6 to 8 bytes a row. Grown at load 0.7, rebuilt from
 *     the rows' keys after the old one is freed (the peak is one index, not
 *     two); rows never move. Lookups of a batch prefetch in two stages: the
 *     slot of a key S_AHEAD places ahead, then the key, values and state of
 *     the row that slot names, half as far ahead;
 *   - the rows: slabs of 2^slab_shift rows, each one allocation of the
 *     rows' keys, then their values (row after row), then each state array
 *     (row after row, array after array, so a row's second array is one
 *     slab's worth of floats after its first: ps_optim_step's stride).
 *     Growth adds a slab; nothing is copied;
 *   - the sightings of keys without a row (min_count > 1): a second
 *     linear-probing table of (key, count), count 0 = empty, entries
 *     removed by backward shift when their key gets a row.
 */
#include "server/rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/rowkey.h"

/* Rows per slab at most, and a slab's bytes at most (a wide row gets
 * fewer rows per slab, never below S_SLAB_MIN_ROWS). */
#define S_SLAB_MAX_ROWS ((size_t)1 << 16)
#define S_SLAB_MIN_ROWS ((size_t)1 << 8)
#define S_SLAB_MAX_BYTES ((size_t)16 << 20)

/* Slots of a table when it is first needed. */
#define S_MIN_SLOTS ((size_t)16)

/* pending-table position meaning "none" */
#define S_NONE SIZE_MAX

struct ps_rows {
    ps_rows_config_t cfg;
    int nstate;           /* state arrays per row */
    uint64_t cap;         /* rows at most: max_rows, or PS_ROWS_MAX */
    size_t dim;           /* cfg.dim */
    /* index */
    uint32_t *slots;      /* nslots: row index + 1; 0 = empty */
    size_t nslots;        /* 0 or 1 << slot_bits */
    unsigned slot_bits;   /* log2 of nslots once there are slots */
    /* rows */
    unsigned slab_shift;  /* rows per slab: 1 << slab_shift */
    size_t slab_bytes;    /* bytes of one slab */
    unsigned char **slabs; /* nslabs slabs (slabs_cap pointers allocated) */
    size_t nslabs, slabs_cap;
    uint64_t nrows;       /* rows; row i lives in slab i >> slab_shift */
    /* sightings of keys without a row */
    uint64_t *pkeys;      /* npslots keys */
    uint32_t *pcounts;    /* npslots counts; 0 = empty slot */
    size_t npslots;       /* 0 or 1 << pslot_bits */
    unsigned pslot_bits;  /* log2 of npslots once there are slots */
    size_t npending;      /* occupied pending slots */
    ps_rows_stats_t st;   /* counters (rows and pending filled in on reading) */
};

/*
 * A key's home slot in a table of 2^bits slots: the top bits of its hash.
 */
static inline size_t s_home(uint64_t h, unsigned bits)
{
    return (size_t)(h >> (64 - bits));
}

static inline size_t s_slab_rows(const ps_rows_t *t)
{
    return (size_t)1 << t->slab_shift;
}

static inline unsigned char *s_slab(const ps_rows_t *t, uint64_t idx)
{
    return t->slabs[idx >> t->slab_shift];
}

static inline size_t s_in_slab(const ps_rows_t *t, uint64_t idx)
{
    return (size_t)(idx & (s_slab_rows(t) - 1));
}

static inline uint64_t *s_key(const ps_rows_t *t, uint64_t idx)
{
    return (uint64_t *)(void *)s_slab(t, idx) + s_in_slab(t, idx);
}

static inline float *s_values(const ps_rows_t *t, uint64_t idx)
{
    unsigned char *slab = s_slab(t, idx);
    float *values = (float *)(void *)(slab + s_slab_rows(t) * sizeof(uint64_t));
    return values + s_in_slab(t, idx) * t->dim;
}

/* Floats from one state array of a row to the next (and from the values
 * to the first). */
static inline size_t s_stride(const ps_rows_t *t)
{
    return s_slab_rows(t) * t->dim;
}

static inline float *s_state(const ps_rows_t *t, uint64_t idx)
{
    return s_values(t, idx) + s_stride(t);
}

/* Keys ahead whose slot a batch prefetches (and half as far ahead, the
 * row the slot names): a lookup in a large table is a few cache (and TLB)
 * misses, and a few of them in flight at once cost about one. */
#define S_AHEAD 16

/* Starts loading the slot where the lookup of key `ahead` begins. Always
 * inlined: GCC takes a function that only prefetches for one without
 * effects and drops its calls. */
static inline __attribute__((always_inline)) void s_prefetch(const ps_rows_t *t,
                                                             uint64_t ahead)
{
    if (t->nslots) {
        __builtin_prefetch(&t->slots[s_home(ps_rowkey_mix(ahead), t->slot_bits)]);
    }
}

/* Starts loading the key, the values and the state of the row in the home
 * slot of key `ahead` (its slot loaded by s_prefetch): the row of that key
 * unless another key's row took its home. */
static inline __attribute__((always_inline)) void s_prefetch_row(const ps_rows_t *t,
                                                                 uint64_t ahead)
{
    if (t->nslots) {
        const uint32_t r = t->slots[s_home(ps_rowkey_mix(ahead), t->slot_bits)];
        if (r) {
            const float *v = s_values(t, r - 1);
            __builtin_prefetch(s_key(t, r - 1));
            __builtin_prefetch(v);
            for (int a = 0; a < t->nstate; a++) {
                __builtin_prefetch(v + (size_t)(1 + a) * s_stride(t));
            }
        }
    }
}

/* Both prefetch stages for a batch's lookup of keys[i]. */
static inline __attribute__((always_inline)) void s_prefetch_ahead(const ps_rows_t *t,
                                                                   const uint64_t *keys,
                                                                   size_t i, size_t n)
{
    if (i + S_AHEAD < n) {
        s_prefetch(t, keys[i + S_AHEAD]);
    }
    if (i + S_AHEAD / 2 < n) {
        s_prefetch_row(t, keys[i + S_AHEAD / 2]);
    }
}

/* The row index + 1 of key (h its hash), or 0 when it has no row. */
static uint64_t s_find(const ps_rows_t *t, uint64_t key, uint64_t h)
{
    if (t->nslots == 0) {
        return 0;
    }
    const size_t mask = t->nslots - 1;
    for (size_t i = s_home(h, t->slot_bits);; i = (i + 1) & mask) {
        const uint32_t r = t->slots[i];
        if (r == 0 || *s_key(t, r - 1) == key) {
            return r;
        }
    }
}

/* Puts row idx, whose key's home is `home`, into slots (2^bits, one free). */
static void s_slot_put(uint32_t *slots, unsigned bits, size_t home, uint64_t idx)
{
    const size_t mask = ((size_t)1 << bits) - 1;
    size_t i = home;
    while (slots[i] != 0) {
        i = (i + 1) & mask;
    }
    slots[i] = (uint32_t)(idx + 1);
}

/* Bits of a table's size for n entries at load 0.7 at most: have, or more
 * (at least S_MIN_SLOTS slots). */
static unsigned s_bits_for(unsigned have, uint64_t n)
{
    unsigned b = have;
    while (((size_t)1 << b) < S_MIN_SLOTS || n * 10 > ((uint64_t)1 << b) * 7) {
        b++;
    }
    return b;
}

/* Fills a cleared index of 2^bits slots with every row, from the rows'
 * keys (read in row order, from the slabs). */
static void s_index_fill(ps_rows_t *t, uint32_t *slots, unsigned bits)
{
    for (uint64_t idx = 0; idx < t->nrows; idx++) {
        s_slot_put(slots, bits, s_home(ps_rowkey_mix(*s_key(t, idx)), bits), idx);
    }
}

/*
 * Makes the index hold n rows. The old index is freed before the new one
 * is made, and the new one filled from the rows' keys: the two are never
 * held at once, so the table's peak memory is its size, not its size and
 * the old index's. Returns 0, or PS_ENOMEM with the index rebuilt at its
 * old size in the memory just freed (when even that fails, the process
 * cannot go on without losing rows: it stops with one line saying so).
 */
static int s_index_reserve(ps_rows_t *t, uint64_t n)
{
    unsigned bits = s_bits_for(t->slot_bits, n);
    if (t->slots && bits == t->slot_bits) {
        return 0;
    }
    const unsigned old = t->slot_bits;
    free(t->slots);
    t->slots = calloc((size_t)1 << bits, sizeof *t->slots);
    int rc = 0;
    if (!t->slots) {
        rc = PS_ENOMEM;
        bits = old;
        t->slots = t->nslots ? calloc((size_t)1 << bits, sizeof *t->slots) : NULL;
        if (t->nslots && !t->slots) {
            ps_log_err("rows: out of memory rebuilding the index of %llu rows",
                       (unsigned long long)t->nrows);
            abort();
        }
        if (!t->slots) {
            return rc; /* there was no index and there are no rows */
        }
    }
    t->nslots = (size_t)1 << bits;
    t->slot_bits = bits;
    s_index_fill(t, t->slots, bits);
    return rc;
}

/* Makes room for one more row: its slab and its slot. Returns 0 or
 * PS_ENOMEM (nothing changes that a caller sees). */
static int s_row_reserve(ps_rows_t *t)
{
    if (t->nrows == (uint64_t)t->nslabs << t->slab_shift) {
        if (t->nslabs == t->slabs_cap) {
            size_t cap = t->slabs_cap ? 2 * t->slabs_cap : 4;
            unsigned char **slabs = realloc(t->slabs, cap * sizeof *slabs);
            if (!slabs) {
                return PS_ENOMEM;
            }
            t->slabs = slabs;
            t->slabs_cap = cap;
        }
        unsigned char *slab = malloc(t->slab_bytes);
        if (!slab) {
            return PS_ENOMEM;
        }
        t->slabs[t->nslabs++] = slab;
    }
    return s_index_reserve(t, t->nrows + 1);
}

/* Adds a row for key (hash h) after s_row_reserve(); its values and state
 * are the caller's to fill. Returns its index. */
static uint64_t s_row_add(ps_rows_t *t, uint64_t key, uint64_t h)
{
    const uint64_t idx = t->nrows++;
    *s_key(t, idx) = key;
    s_slot_put(t->slots, t->slot_bits, s_home(h, t->slot_bits), idx);
    return idx;
}

/* The pending slot of key (hash h), or S_NONE. */
static size_t s_pending_find(const ps_rows_t *t, uint64_t key, uint64_t h)
{
    if (t->npslots == 0) {
        return S_NONE;
    }
    const size_t mask = t->npslots - 1;
    for (size_t i = s_home(h, t->pslot_bits);; i = (i + 1) & mask) {
        if (t->pcounts[i] == 0) {
            return S_NONE;
        }
        if (t->pkeys[i] == key) {
            return i;
        }
    }
}

/* Puts (key, count) into the pending table, which has a free slot and
 * does not hold key. */
static void s_pending_put(ps_rows_t *t, uint64_t key, uint64_t h, uint32_t count)
{
    const size_t mask = t->npslots - 1;
    size_t i = s_home(h, t->pslot_bits);
    while (t->pcounts[i] != 0) {
        i = (i + 1) & mask;
    }
    t->pkeys[i] = key;
    t->pcounts[i] = count;
    t->npending++;
}

/* Makes the pending table hold n keys. Returns 0 or PS_ENOMEM (as it was). */
static int s_pending_reserve(ps_rows_t *t, uint64_t n)
{
    const unsigned bits = s_bits_for(t->pslot_bits, n);
    if (t->pkeys && bits == t->pslot_bits) {
        return 0;
    }
    const size_t want = (size_t)1 << bits;
    uint64_t *keys = malloc(want * sizeof *keys);
    uint32_t *counts = calloc(want, sizeof *counts);
    if (!keys || !counts) {
        free(keys);
        free(counts);
        return PS_ENOMEM;
    }
    uint64_t *okeys = t->pkeys;
    uint32_t *ocounts = t->pcounts;
    const size_t old = t->npslots;
    t->pkeys = keys;
    t->pcounts = counts;
    t->npslots = want;
    t->pslot_bits = bits;
    t->npending = 0;
    for (size_t i = 0; i < old; i++) {
        if (ocounts[i] != 0) {
            s_pending_put(t, okeys[i], ps_rowkey_mix(okeys[i]), ocounts[i]);
        }
    }
    free(okeys);
    free(ocounts);
    return 0;
}

/* Empties pending slot i. Linear probing's deletion by backward shift: each
 * later entry of the run whose home is not cyclically in (i, j] moves into
 * the hole, so every key stays reachable from its home with no tombstones. */
static void s_pending_remove(ps_rows_t *t, size_t i)
{
    const size_t mask = t->npslots - 1;
    t->npending--;
    for (;;) {
        t->pcounts[i] = 0;
        size_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            if (t->pcounts[j] == 0) {
                return;
            }
            const size_t k = s_home(ps_rowkey_mix(t->pkeys[j]), t->pslot_bits);
            const int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!stays) {
                break;
            }
        }
        t->pkeys[i] = t->pkeys[j];
        t->pcounts[i] = t->pcounts[j];
        i = j;
    }
}

/* Frees every row and sighting: the table as ps_rows_new() made it. */
static void s_clear(ps_rows_t *t)
{
    for (size_t i = 0; i < t->nslabs; i++) {
        free(t->slabs[i]);
    }
    free(t->slabs);
    free(t->slots);
    free(t->pkeys);
    free(t->pcounts);
    t->slabs = NULL;
    t->nslabs = t->slabs_cap = 0;
    t->slots = NULL;
    t->nslots = 0;
    t->slot_bits = 0;
    t->nrows = 0;
    t->pkeys = NULL;
    t->pcounts = NULL;
    t->npslots = t->npending = 0;
    t->pslot_bits = 0;
}

int ps_rows_new(ps_rows_t **out, const ps_rows_config_t *cfg)
{
    *out = NULL;
    const ps_optim_kind_t k = cfg->optim.kind;
    if (cfg->dim < 1 || cfg->dim > PS_JOB_MAX_EMBED_DIM ||
        !(cfg->init_bound >= 0.0f && isfinite(cfg->init_bound)) ||
        (k != PS_OPT_SGD && k != PS_OPT_ADAGRAD && k != PS_OPT_FTRL)) {
        return PS_EINVAL;
    }
    ps_rows_t *t = calloc(1, sizeof *t);
    if (!t) {
        return PS_ENOMEM;
    }
    t->cfg = *cfg;
    t->dim = cfg->dim;
    t->nstate = ps_optim_state_floats(&cfg->optim);
    t->cap = cfg->max_rows == 0 || cfg->max_rows > PS_ROWS_MAX ? PS_ROWS_MAX
                                                                : cfg->max_rows;
    const size_t row_bytes =
        sizeof(uint64_t) + (size_t)(1 + t->nstate) * t->dim * sizeof(float);
    size_t rows = S_SLAB_MAX_ROWS;
    while (rows > S_SLAB_MIN_ROWS && rows * row_bytes > S_SLAB_MAX_BYTES) {
        rows /= 2;
    }
    while (((size_t)1 << t->slab_shift) < rows) {
        t->slab_shift++;
    }
    t->slab_bytes = rows * row_bytes;
    *out = t;
    return 0;
}

void ps_rows_destroy(ps_rows_t **t)
{
    if (!t || !*t) {
        return;
    }
    s_clear(*t);
    free(*t);
    *t = NULL;
}

void ps_rows_clear(ps_rows_t *t)
{
    s_clear(t);
}

size_t ps_rows_dim(const ps_rows_t *t)
{
    return t->dim;
}

int ps_rows_state_floats(const ps_rows_t *t)
{
    return t->nstate;
}

void ps_rows_read(const ps_rows_t *t, const uint64_t *keys, size_t n, float *out)
{
    const size_t d = t->dim;
    for (size_t i = 0; i < n; i++) {
        s_prefetch_ahead(t, keys, i, n);
        const uint64_t r = s_find(t, keys[i], ps_rowkey_mix(keys[i]));
        float *o = out + i * d;
        if (r) {
            memcpy(o, s_values(t, r - 1), d * sizeof *o);
        } else if (t->cfg.min_count > 1) {
            memset(o, 0, d * sizeof *o);
        } else {
            ps_optim_row_init(t->cfg.seed, keys[i], d, t->cfg.init_bound, o);
        }
    }
}

/* One optimizer step of row idx; left undone when a value or the state
 * would stop being finite (finite gradients can overflow too). */
static void s_apply(ps_rows_t *t, uint64_t idx, const float *g, float lr, float scale)
{
    const size_t d = t->dim, stride = s_stride(t);
    float *w = s_values(t, idx), *state = s_state(t, idx);
    if (ps_optim_step_if_finite(&t->cfg.optim, lr, 1, w, state, stride, g, scale, d)) {
        t->st.updates++;
    } else {
        t->st.nonfinite++;
    }
}

int ps_rows_update(ps_rows_t *t, const uint64_t *keys, size_t n, const float *grad,
                   float lr, float scale)
{
    const size_t d = t->dim, stride = s_stride(t);
    int refused = 0;
    for (size_t i = 0; i < n; i++) {
        s_prefetch_ahead(t, keys, i, n);
        const uint64_t key = keys[i], h = ps_rowkey_mix(key);
        uint64_t r = s_find(t, key, h);
        if (!r) {
            if (t->nrows >= t->cap) {
                t->st.refused++;
                refused++;
                continue;
            }
            size_t p = S_NONE;
            if (t->cfg.min_count > 1) {
                p = s_pending_find(t, key, h);
                const uint32_t seen = p == S_NONE ? 0 : t->pcounts[p];
                if (seen + 1 < t->cfg.min_count) {
                    if (p != S_NONE) {
                        t->pcounts[p]++;
                    } else if (s_pending_reserve(t, t->npending + 1) != 0) {
                        return PS_ENOMEM;
                    } else {
                        s_pending_put(t, key, h, 1);
                    }
                    t->st.filtered++;
                    continue;
                }
            }
            if (s_row_reserve(t) != 0) {
                return PS_ENOMEM;
            }
            if (p != S_NONE) {
                s_pending_remove(t, p);
            }
            const uint64_t idx = s_row_add(t, key, h);
            ps_optim_row_init(t->cfg.seed, key, d, t->cfg.init_bound, s_values(t, idx));
            for (int a = 0; a < t->nstate; a++) {
                memset(s_state(t, idx) + a * stride, 0, d * sizeof(float));
            }
            t->st.created++;
            r = idx + 1;
        }
        s_apply(t, r - 1, grad + i * d, lr, scale);
    }
    return refused;
}

void ps_rows_stats(const ps_rows_t *t, ps_rows_stats_t *out)
{
    *out = t->st;
    out->rows = t->nrows;
    out->pending = t->npending;
}

size_t ps_rows_bytes(const ps_rows_t *t)
{
    return sizeof *t + (size_t)(1 + t->nstate) * t->dim * sizeof(float) +
           t->nslots * sizeof *t->slots + t->slabs_cap * sizeof *t->slabs +
           t->nslabs * t->slab_bytes + t->npslots * (sizeof *t->pkeys + sizeof *t->pcounts);
}

size_t ps_rows_count(const ps_rows_t *t)
{
    return (size_t)t->nrows;
}

size_t ps_rows_pending_count(const ps_rows_t *t)
{
    return t->npending;
}

static int s_cmp_key(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void ps_rows_export_keys(const ps_rows_t *t, uint64_t *keys)
{
    const size_t n = (size_t)t->nrows;
    for (size_t r = 0; r < n; r++) {
        keys[r] = *s_key(t, r);
    }
    /* sorted in the caller's array: no memory of our own */
    if (n > 1) {
        qsort(keys, n, sizeof *keys, s_cmp_key);
    }
}

void ps_rows_export_part(const ps_rows_t *t, const uint64_t *keys, size_t n, float *values,
                         float *state)
{
    const size_t d = t->dim, stride = s_stride(t);
    for (size_t i = 0; i < n; i++) {
        const uint64_t idx = s_find(t, keys[i], ps_rowkey_mix(keys[i])) - 1;
        memcpy(values + i * d, s_values(t, idx), d * sizeof *values);
        for (int a = 0; a < t->nstate; a++) {
            memcpy(state + ((size_t)a * n + i) * d, s_state(t, idx) + a * stride,
                   d * sizeof *state);
        }
    }
}

void ps_rows_export(const ps_rows_t *t, uint64_t *keys, float *values, float *state)
{
    ps_rows_export_keys(t, keys);
    ps_rows_export_part(t, keys, (size_t)t->nrows, values, state);
}

void ps_rows_pending_export(const ps_rows_t *t, uint64_t *keys, uint32_t *counts)
{
    size_t n = 0;
    for (size_t i = 0; i < t->npslots; i++) {
        if (t->pcounts[i] != 0) {
            keys[n++] = t->pkeys[i];
        }
    }
    if (n > 1) {
        qsort(keys, n, sizeof *keys, s_cmp_key);
    }
    for (size_t i = 0; i < n; i++) {
        counts[i] = t->pcounts[s_pending_find(t, keys[i], ps_rowkey_mix(keys[i]))];
    }
}

/* Non-zero when keys[0..n) is strictly ascending. */
static int s_ascending(const uint64_t *keys, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if (keys[i] <= keys[i - 1]) {
            return 0;
        }
    }
    return 1;
}

/* ps_rows_import_part()'s checks of its arguments, before anything changes:
 * each part ascending, no pending key with a row of the part, and no key
 * the table has already. */
static int s_import_check(const ps_rows_t *t, size_t n, const uint64_t *keys,
                          const float *values, const float *state, size_t np,
                          const uint64_t *pkeys, const uint32_t *pcounts)
{
    if (n > t->cap - t->nrows || !s_ascending(keys, n) || !s_ascending(pkeys, np)) {
        return PS_EINVAL;
    }
    for (size_t i = 0, j = 0; i < np; i++) {
        if (pcounts[i] == 0 || pcounts[i] >= t->cfg.min_count) {
            return PS_EINVAL;
        }
        while (j < n && keys[j] < pkeys[i]) {
            j++;
        }
        if (j < n && keys[j] == pkeys[i]) {
            return PS_EINVAL;
        }
    }
    for (size_t i = 0; i < n + np; i++) {
        const uint64_t key = i < n ? keys[i] : pkeys[i - n], h = ps_rowkey_mix(key);
        if (s_find(t, key, h) || s_pending_find(t, key, h) != S_NONE) {
            return PS_EINVAL;
        }
    }
    if (!ps_optim_finite(values, n * t->dim) ||
        !ps_optim_finite(state, n * t->dim * (size_t)t->nstate)) {
        return PS_ENONFINITE;
    }
    return 0;
}

int ps_rows_import_part(ps_rows_t *t, size_t n, const uint64_t *keys, const float *values,
                        const float *state, size_t np, const uint64_t *pkeys,
                        const uint32_t *pcounts)
{
    int rc = s_import_check(t, n, keys, values, state, np, pkeys, pcounts);
    if (rc != 0) {
        return rc;
    }
    const size_t d = t->dim, stride = s_stride(t);
    if (s_index_reserve(t, t->nrows + n) != 0 ||
        (np > 0 && s_pending_reserve(t, t->npending + np) != 0)) {
        return PS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (s_row_reserve(t) != 0) {
            return PS_ENOMEM;
        }
        const uint64_t idx = s_row_add(t, keys[i], ps_rowkey_mix(keys[i]));
        memcpy(s_values(t, idx), values + i * d, d * sizeof *values);
        for (int a = 0; a < t->nstate; a++) {
            memcpy(s_state(t, idx) + a * stride, state + ((size_t)a * n + i) * d,
                   d * sizeof *state);
        }
    }
    for (size_t i = 0; i < np; i++) {
        s_pending_put(t, pkeys[i], ps_rowkey_mix(pkeys[i]), pcounts[i]);
    }
    return 0;
}

int ps_rows_import(ps_rows_t *t, size_t n, const uint64_t *keys, const float *values,
                   const float *state, size_t np, const uint64_t *pkeys,
                   const uint32_t *pcounts)
{
    if (t->nrows != 0 || t->npending != 0) {
        return PS_ESTATE;
    }
    const int rc = ps_rows_import_part(t, n, keys, values, state, np, pkeys, pcounts);
    if (rc == PS_ENOMEM) {
        s_clear(t);
    }
    return rc;
}

void ps_rows_set_stats(ps_rows_t *t, const ps_rows_stats_t *st)
{
    t->st = *st;
    t->st.rows = t->st.pending = 0; /* filled in on reading */
}
