/*
 * worker/ring_rows.c - a ring worker's table of embedding rows and the
 * ring's side of a step's rows (see ring_rows.h).
 *
 * Shapes: V rows in the table, D floats per row (--embed-dim), S state
 * arrays of the optimizer (0 to 2), P dense parameters, M workers, B keys
 * of a block at most (--batch x 26 fields).
 */
#include "worker/ring_rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/rowkey.h"
#include "kernels/optim.h"
#include "worker/ctr_data.h"

struct ps_ring_rows {
    ps_ring_rows_kind_t kind; /* the job's --ring-rows */
    ps_optim_t opt;           /* the job's optimizer */
    int S;                    /* its state arrays */
    size_t V, D;              /* rows, floats per row */
    uint64_t P;               /* dense parameters in front of the rows' gradient (dense) */
    uint64_t *hashes;         /* [V] the rows' keys' hashes, ascending */
    float *values;            /* [V x D] the rows */
    float *state;             /* [S x V x D] their optimizer state, array a at a x V x D */
    float *vec;               /* dense: [P + V x D] the dense gradient, then the rows' */
    int pushed;               /* dense: the step's rows are in vec */
    uint32_t checksum;        /* FNV-1a of the hashes */
    /* allgather */
    int M, rank;              /* workers, ours */
    uint64_t B;               /* keys of a block at most */
    ps_ring_block_t *blocks;  /* [M] the step's blocks; ours borrows the ctr job's */
    uint64_t *store_keys;     /* [M x B] the others' blocks' keys */
    float *store_rows;        /* [M x B x D] and rows */
    ps_rows_part_t *parts;    /* [M] the blocks, for ps_optim_sum_rows */
    uint64_t *sum_keys;       /* [M x B] the step's summed rows' keys, ascending by hash */
    float *sum_grads;         /* [M x B x D] and their sums */
    uint64_t sum_cap, nsum;   /* room, and the step's summed rows */
    uint64_t nonfinite;       /* row updates undone: not finite */
    uint64_t unknown;         /* keys of others' blocks missing from the table: dropped */
};

/* The row of hash h, or V when the table has none. */
static size_t s_find(const ps_ring_rows_t *r, uint64_t h)
{
    size_t lo = 0, hi = r->V;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (r->hashes[mid] < h) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < r->V && r->hashes[lo] == h ? lo : r->V;
}

int ps_ring_rows_new(ps_ring_rows_t **out, const ps_job_t *job, const ps_ctr_job_t *c,
                     uint64_t P, char *err, size_t cap)
{
    *out = NULL;
    ps_ring_rows_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, cap, "out of memory");
        return PS_ENOMEM;
    }
    if (ps_optim_from_job(job, &r->opt) != 0) {
        snprintf(err, cap, "unknown optimizer '%s'", job->optimizer);
        ps_ring_rows_destroy(&r);
        return PS_EINVAL;
    }
    r->kind = job->ring_rows;
    r->S = ps_optim_state_floats(&r->opt);
    r->D = (size_t)job->embed_dim;
    r->P = P;
    r->B = (uint64_t)job->batch * PS_CTR_CAT;
    if (ps_ctr_job_vocab(c, &r->hashes, &r->V) != 0) {
        snprintf(err, cap, "out of memory for the click log's keys");
        ps_ring_rows_destroy(&r);
        return PS_ENOMEM;
    }
    const size_t VD = r->V * r->D;
    r->values = malloc((VD ? VD : 1) * sizeof *r->values);
    r->state = calloc(VD * (size_t)r->S + 1, sizeof *r->state);
    if (r->kind == PS_RING_ROWS_DENSE) {
        r->vec = calloc(P + VD, sizeof *r->vec);
    }
    if (!r->values || !r->state || (r->kind == PS_RING_ROWS_DENSE && !r->vec)) {
        snprintf(err, cap, "out of memory for a table of %zu rows of %zu floats", r->V, r->D);
        ps_ring_rows_destroy(&r);
        return PS_ENOMEM;
    }
    const float bound = ps_job_row_bound(job);
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < r->V; i++) {
        ps_optim_row_init(job->seed, ps_rowkey_unhash(r->hashes[i]), r->D, bound,
                          r->values + i * r->D);
        for (int b = 0; b < 64; b += 8) {
            h = (h ^ (uint8_t)(r->hashes[i] >> b)) * 16777619u;
        }
    }
    r->checksum = h;
    *out = r;
    return 0;
}

void ps_ring_rows_destroy(ps_ring_rows_t **rp)
{
    ps_ring_rows_t *r = *rp;
    if (!r) {
        return;
    }
    if (r->nonfinite || r->unknown) {
        ps_log_warn("rows: %llu updates not finite (left undone), %llu keys of other workers "
                    "not in this worker's table (dropped)",
                    (unsigned long long)r->nonfinite, (unsigned long long)r->unknown);
    }
    free(r->hashes);
    free(r->values);
    free(r->state);
    free(r->vec);
    free(r->blocks);
    free(r->store_keys);
    free(r->store_rows);
    free(r->parts);
    free(r->sum_keys);
    free(r->sum_grads);
    free(r);
    *rp = NULL;
}

size_t ps_ring_rows_count(const ps_ring_rows_t *r)
{
    return r->V;
}

uint32_t ps_ring_rows_checksum(const ps_ring_rows_t *r)
{
    return r->checksum;
}

uint64_t ps_ring_rows_max_floats(const ps_ring_rows_t *r)
{
    if (r->kind == PS_RING_ROWS_DENSE) {
        return r->P + (uint64_t)r->V * r->D;
    }
    const uint64_t keys = r->B * sizeof(uint64_t) / sizeof(float); /* the keys' frame */
    return r->B * r->D > keys ? r->B * r->D : keys;
}

int ps_ring_rows_start(ps_ring_rows_t *r, int M, int rank)
{
    if (M < 1 || M > PS_OPTIM_MAX_PARTS || rank < 0 || rank >= M) {
        return PS_EINVAL;
    }
    r->M = M;
    r->rank = rank;
    if (r->kind != PS_RING_ROWS_ALLGATHER) {
        return 0;
    }
    const size_t mb = (size_t)M * r->B, mbd = mb * r->D;
    r->blocks = calloc((size_t)M, sizeof *r->blocks);
    r->parts = calloc((size_t)M, sizeof *r->parts);
    r->store_keys = malloc((mb ? mb : 1) * sizeof *r->store_keys);
    r->store_rows = malloc((mbd ? mbd : 1) * sizeof *r->store_rows);
    r->sum_keys = malloc((mb ? mb : 1) * sizeof *r->sum_keys);
    r->sum_grads = malloc((mbd ? mbd : 1) * sizeof *r->sum_grads);
    if (!r->blocks || !r->parts || !r->store_keys || !r->store_rows || !r->sum_keys ||
        !r->sum_grads) {
        return PS_ENOMEM;
    }
    r->sum_cap = mb; /* ps_optim_sum_rows never grows them: no allocation per step */
    for (int i = 0; i < M; i++) {
        r->blocks[i].keys = r->store_keys + (size_t)i * r->B;
        r->blocks[i].rows = r->store_rows + (size_t)i * r->B * r->D;
    }
    return 0;
}

/* ps_ctr_rows_t.fetch: rows copied out of the table. */
static int s_fetch(void *arg, const uint64_t *keys, size_t n, float *out, int64_t min_version,
                   char *err, size_t cap)
{
    (void)min_version; /* the table is always at the last step's end */
    const ps_ring_rows_t *r = arg;
    for (size_t u = 0; u < n; u++) {
        const size_t i = s_find(r, ps_rowkey_hash(keys[u]));
        if (i == r->V) {
            snprintf(err, cap, "row %llu is not in this worker's table (its click log's keys)",
                     (unsigned long long)keys[u]);
            return PS_EINVAL;
        }
        memcpy(out + u * r->D, r->values + i * r->D, r->D * sizeof *out);
    }
    return 0;
}

/* ps_ctr_rows_t.push: dense, the rows' gradients scattered into the zeroed
 * table's gradient; allgather, kept as our block (borrowed). */
static int s_push(void *arg, const uint64_t *keys, size_t n, const float *grads, int64_t t,
                  int *push, char *err, size_t cap)
{
    (void)t; /* the step's allreduce and exchange tag it */
    ps_ring_rows_t *r = arg;
    *push = -1;
    if (r->kind == PS_RING_ROWS_ALLGATHER && !r->blocks) {
        snprintf(err, cap, "rows pushed before the ring started");
        return PS_ESTATE;
    }
    if (r->kind == PS_RING_ROWS_ALLGATHER) {
        ps_ring_block_t *mine = &r->blocks[r->rank];
        mine->keys = (uint64_t *)keys; /* only read: sent and summed */
        mine->rows = (float *)grads;
        mine->n = n;
        return 0;
    }
    float *g = r->vec + r->P;
    memset(g, 0, r->V * r->D * sizeof *g);
    r->pushed = 1;
    for (size_t u = 0; u < n; u++) {
        const size_t i = s_find(r, ps_rowkey_hash(keys[u]));
        if (i == r->V) {
            snprintf(err, cap, "row %llu is not in this worker's table (its click log's keys)",
                     (unsigned long long)keys[u]);
            return PS_EINVAL;
        }
        memcpy(g + i * r->D, grads + u * r->D, r->D * sizeof *g);
    }
    return 0;
}

ps_ctr_rows_t ps_ring_rows_home(ps_ring_rows_t *r)
{
    ps_ctr_rows_t home = {s_fetch, s_push, r};
    return home;
}

float *ps_ring_rows_vector(ps_ring_rows_t *r, float *grads, uint64_t *n)
{
    if (r->kind != PS_RING_ROWS_DENSE) {
        *n = r->P;
        return grads;
    }
    if (!r->pushed) { /* a step without rows: none of the last step's sums stay */
        memset(r->vec + r->P, 0, r->V * r->D * sizeof *r->vec);
    }
    r->pushed = 0;
    memcpy(r->vec, grads, r->P * sizeof *r->vec);
    *n = r->P + (uint64_t)r->V * r->D;
    return r->vec;
}

int ps_ring_rows_exchange(ps_ring_rows_t *r, ps_ring_t *ring, int64_t step)
{
    r->nsum = 0;
    if (r->kind != PS_RING_ROWS_ALLGATHER) {
        return 0;
    }
    int rc = ps_ring_allgather(ring, r->blocks, r->D, r->B, step);
    if (rc != 0) {
        return rc;
    }
    for (int i = 0; i < r->M; i++) { /* rank order: every worker sums alike */
        r->parts[i] = (ps_rows_part_t){r->blocks[i].keys, r->blocks[i].rows, r->blocks[i].n,
                                       1.0f};
    }
    const int64_t n = ps_optim_sum_rows(r->parts, r->M, r->D, &r->sum_keys, &r->sum_grads,
                                        &r->sum_cap);
    if (n < 0) { /* cannot happen: the room is M blocks' */
        return (int)n;
    }
    r->nsum = (uint64_t)n;
    return 0;
}

/* Row i's step with gradient g (server/rows.c's s_apply): left undone when
 * a value or the state would stop being finite. */
static void s_apply(ps_ring_rows_t *r, size_t i, const float *g, float lr, float scale)
{
    const size_t D = r->D, stride = r->V * D;
    float *w = r->values + i * D, *state = r->state + i * D;
    r->nonfinite += !ps_optim_step_if_finite(&r->opt, lr, 1, w, state, stride, g, scale, D);
}

void ps_ring_rows_apply(ps_ring_rows_t *r, float lr, float scale)
{
    if (r->kind == PS_RING_ROWS_DENSE) {
        const float *g = r->vec + r->P;
        for (size_t i = 0; i < r->V; i++) {
            s_apply(r, i, g + i * r->D, lr, scale);
        }
        return;
    }
    for (uint64_t u = 0; u < r->nsum; u++) {
        const size_t i = s_find(r, ps_rowkey_hash(r->sum_keys[u]));
        if (i == r->V) { /* another worker's click log has keys ours lacks */
            r->unknown++;
            if ((r->unknown & (r->unknown - 1)) == 0) { /* 1st, 2nd, 4th ...: bounded log */
                ps_log_warn("rows: key %llu of another worker is not in this worker's table: "
                            "dropped (%llu so far)",
                            (unsigned long long)r->sum_keys[u],
                            (unsigned long long)r->unknown);
            }
            continue;
        }
        s_apply(r, i, r->sum_grads + u * r->D, lr, scale);
    }
}
