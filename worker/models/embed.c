/*
 * worker/models/embed.c - a batch's embedding lookups, deduplicated by an
 * LSD radix sort of (key, position) pairs.
 *
 * A first read finds the bits in which the keys differ at all; each pass
 * takes the S_BITS bits from the lowest such bit its predecessors left, so
 * bits that are the same in every key (the zeros between a field tag and a
 * 32-bit value, say) cost no pass: Criteo's keys, (field + 1) << 40 | value,
 * sort in 4 passes, not 6. A second read counts the digits of every pass at
 * once. Each pass is a stable scatter, so positions stay ascending within a
 * key, and the passes ping-pong between the output buffers (keys, order)
 * and the scratch (tmp_keys, tmp_pos), starting on the side that makes the
 * last one land in the output. A final scan compacts the sorted keys in
 * place into the distinct ones and writes idx and offsets. 11-bit digits
 * (2048 counters a pass) keep the counters and the scatter's write fronts
 * in the L1/L2 caches at batch sizes.
 */
#include "worker/models/embed.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"

enum {
    S_BITS = 11,                             /* bits per digit */
    S_RADIX = 1 << S_BITS,                   /* counters per pass */
    S_PASSES = (64 + S_BITS - 1) / S_BITS,   /* passes over 64-bit keys */
};

static void *s_alloc(const ps_kernels_t *k, size_t bytes)
{
    if (k) {
        return k->host_alloc(bytes);
    }
    const size_t rounded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}

static void s_free(const ps_kernels_t *k, void *p)
{
    if (k) {
        k->host_free(p);
    } else {
        free(p);
    }
}

int ps_embed_batch_init(ps_embed_batch_t *b, int cap, const ps_kernels_t *k)
{
    memset(b, 0, sizeof(*b));
    if (cap < 1) {
        return PS_EINVAL;
    }
    const size_t c = (size_t)cap;
    b->k = k;
    b->keys = s_alloc(k, c * sizeof(uint64_t));
    b->idx = s_alloc(k, c * sizeof(uint32_t));
    b->offsets = s_alloc(k, (c + 1) * sizeof(uint32_t));
    b->order = s_alloc(k, c * sizeof(uint32_t));
    b->tmp_keys = malloc(c * sizeof(uint64_t));
    b->tmp_pos = malloc(c * sizeof(uint32_t));
    b->hist = malloc((size_t)S_PASSES * S_RADIX * sizeof(uint32_t));
    if (!b->keys || !b->idx || !b->offsets || !b->order || !b->tmp_keys || !b->tmp_pos ||
        !b->hist) {
        ps_embed_batch_fini(b);
        return PS_ENOMEM;
    }
    b->cap = cap;
    b->offsets[0] = 0;
    return 0;
}

void ps_embed_batch_fini(ps_embed_batch_t *b)
{
    if (!b) {
        return;
    }
    s_free(b->k, b->keys);
    s_free(b->k, b->idx);
    s_free(b->k, b->offsets);
    s_free(b->k, b->order);
    free(b->tmp_keys);
    free(b->tmp_pos);
    free(b->hist);
    memset(b, 0, sizeof(*b));
}

/* One stable scatter by the digit at `shift`: (sk, sp) -> (dk, dp); sp NULL
 * means the positions 0..N-1. at[] holds the digit counts and is turned
 * into each digit's next slot. */
static void s_pass(const uint64_t *restrict sk, const uint32_t *restrict sp,
                   uint64_t *restrict dk, uint32_t *restrict dp, uint32_t N, int shift,
                   uint32_t *restrict at)
{
    uint32_t sum = 0;
    for (int d = 0; d < S_RADIX; d++) {
        const uint32_t c = at[d];
        at[d] = sum;
        sum += c;
    }
    if (!sp) {
        for (uint32_t r = 0; r < N; r++) {
            const uint64_t key = sk[r];
            const uint32_t slot = at[(key >> shift) & (S_RADIX - 1)]++;
            dk[slot] = key;
            dp[slot] = r;
        }
        return;
    }
    for (uint32_t r = 0; r < N; r++) {
        const uint64_t key = sk[r];
        const uint32_t slot = at[(key >> shift) & (S_RADIX - 1)]++;
        dk[slot] = key;
        dp[slot] = sp[r];
    }
}

int ps_embed_batch_build(ps_embed_batch_t *b, const uint64_t *keys, int n, int F)
{
    if (n < 0 || F < 0 || (int64_t)n * F > b->cap || (!keys && (int64_t)n * F > 0)) {
        return PS_EINVAL;
    }
    const uint32_t N = (uint32_t)n * (uint32_t)F;
    b->n = n;
    b->F = F;
    b->U = 0;
    b->offsets[0] = 0;
    if (N == 0) {
        return 0;
    }
    /* the bits in which keys differ; each pass starts at the lowest such
     * bit its predecessors left, so bits equal in every key cost nothing */
    uint64_t vary = 0;
    for (uint32_t r = 0; r < N; r++) {
        vary |= keys[r] ^ keys[0];
    }
    int shift[S_PASSES], np = 0;
    for (int at = 0; at < 64 && (vary >> at) != 0; at += S_BITS) {
        at += __builtin_ctzll(vary >> at);
        shift[np++] = at;
    }
    /* every pass's digit counts in one read */
    uint32_t *h = b->hist;
    memset(h, 0, (size_t)np * S_RADIX * sizeof(uint32_t));
    for (uint32_t r = 0; r < N; r++) {
        const uint64_t key = keys[r];
        for (int p = 0; p < np; p++) {
            h[p * S_RADIX + ((key >> shift[p]) & (S_RADIX - 1))]++;
        }
    }
    /* the last pass must write (keys, order): start on that side when the
     * count is odd */
    uint64_t *ok = b->keys, *tk = b->tmp_keys;
    uint32_t *op = b->order, *tp = b->tmp_pos;
    const uint64_t *sk = keys;
    const uint32_t *sp = NULL;
    for (int p = 0; p < np; p++) {
        const int to_out = (np - p) % 2 == 1;
        uint64_t *dk = to_out ? ok : tk;
        uint32_t *dp = to_out ? op : tp;
        s_pass(sk, sp, dk, dp, N, shift[p], h + p * S_RADIX);
        sk = dk;
        sp = dp;
    }
    if (np == 0) { /* one key throughout: already sorted */
        memcpy(ok, keys, N * sizeof(uint64_t));
        for (uint32_t r = 0; r < N; r++) {
            op[r] = r;
        }
    }
    /* compact in place: distinct key u lands at u <= r, already read */
    uint32_t U = 0;
    uint64_t prev = 0;
    for (uint32_t r = 0; r < N; r++) {
        const uint64_t key = ok[r];
        if (r == 0 || key != prev) {
            b->offsets[U] = r;
            ok[U++] = key;
            prev = key;
        }
        b->idx[op[r]] = U - 1;
    }
    b->offsets[U] = N;
    b->U = (int)U;
    return (int)U;
}
