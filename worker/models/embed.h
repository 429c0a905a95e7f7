/*
 * worker/models/embed.h - a batch's embedding lookups, deduplicated.
 *
 * A batch of n samples with F categorical fields each looks up n*F rows by
 * 64-bit key; many repeat. ps_embed_batch_build() sorts the (key, position)
 * pairs with an LSD radix sort and gives the U distinct keys in ascending
 * order (the rows to pull, and to push gradients for), the row of each
 * position (for the forward gather), and the positions of each row as CSR
 * (for the gradient, a per-row sum in a fixed order: kernels.h embed_grad).
 * Positions are j = i*F + f (sample i, field f). It runs every step on the
 * worker's critical path, so it only touches its own buffers, sized once.
 * It knows nothing of servers, models or devices beyond where its buffers
 * come from.
 */
#ifndef PS_WORKER_EMBED_H
#define PS_WORKER_EMBED_H

#include <stdint.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A batch's lookups after ps_embed_batch_build(). Read the first five arrays
 * after a build; the rest is the sort's scratch. Buffers owned (init/fini). */
typedef struct ps_embed_batch {
    int cap;           /* positions the buffers hold (n*F at most) */
    int n;             /* samples of the last build */
    int F;             /* fields per sample of the last build */
    int U;             /* distinct keys of the last build */
    uint64_t *keys;    /* [cap] keys[0..U): the distinct keys, ascending */
    uint32_t *idx;     /* [cap] idx[j]: the row (index into keys) of position j */
    uint32_t *offsets; /* [cap+1] offsets[0..U]: row u's positions are
                          order[offsets[u] .. offsets[u+1]) */
    uint32_t *order;   /* [cap] the n*F positions grouped by row, ascending within one */
    uint64_t *tmp_keys;          /* [cap] the sort's other key buffer */
    uint32_t *tmp_pos;           /* [cap] the sort's other position buffer */
    uint32_t *hist;              /* the sort's digit counts, all passes */
    const ps_kernels_t *k;       /* whose host_alloc made the buffers; NULL: malloc */
} ps_embed_batch_t;

/*
 * Sizes b for batches of up to cap positions (max batch * F). With k not
 * NULL the buffers come from k->host_alloc (pinned on a GPU backend, so the
 * model's copies of idx, offsets and order to the device go straight from
 * them), else from an aligned malloc. Returns 0, PS_EINVAL (cap < 1) or
 * PS_ENOMEM (b is then empty; fini is safe). Release with
 * ps_embed_batch_fini().
 */
int ps_embed_batch_init(ps_embed_batch_t *b, int cap, const ps_kernels_t *k);

/* Frees b's buffers and zeroes it; safe on a zeroed or failed b. */
void ps_embed_batch_fini(ps_embed_batch_t *b);

/*
 * Deduplicates keys[n*F] (keys[i*F + f] = sample i's key of field f) into
 * b: U = the distinct keys in b->keys, ascending; b->idx, b->offsets,
 * b->order as above. Returns U (>= 0; 0 when n*F is 0), or PS_EINVAL (n or
 * F < 0, n*F > b->cap, keys NULL with n*F > 0; b is then unchanged). Never
 * allocates. Not thread-safe on one b.
 */
int ps_embed_batch_build(ps_embed_batch_t *b, const uint64_t *keys, int n, int F);

#ifdef __cplusplus
}
#endif
#endif
