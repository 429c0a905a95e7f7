/*
 * server/consistency_rows.c - embedding rows in the consistency modes: a
 * worker's rows push of a step, a message per piece of the server's rows
 * range, held with its dense parts; each piece applied once every worker's
 * share of it is in (sync, ssp) or at the step's end (sync:K/N), summed
 * over the step's workers in rank order; a replica's replay of its
 * primary's rows updates (see consistency.h).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/rowkey.h"
#include "kernels/optim.h"
#include "server/consistency.h"
#include "server/consistency_impl.h"

/* Index of slot k's piece q. */
static size_t s_piece(size_t k, int q)
{
    return k * PS_RANGE_ROW_PIECES + (size_t)q;
}

/* cfg.rows: sums the n rows pushes of c->rows_with and applies the sum
 * (ops.apply_rows, with last). A sum with no memory is logged and skipped
 * (its rows keep their values): the job goes on, as with a non-finite
 * update. */
static void s_sum_apply_rows(ps_consistency_t *c, int n, float lr, float scale, int64_t t,
                             int last)
{
    int64_t keys = ps_optim_sum_rows(c->rows_with, n, (size_t)c->cfg.job.embed_dim,
                                     &c->sum_keys, &c->sum_grads, &c->sum_cap);
    if (keys < 0) {
        ps_log_err("out of memory to sum the rows of step %lld: not applied", (long long)t);
        keys = 0;
    }
    if (keys > 0 && c->cfg.ops.apply_rows) {
        c->cfg.ops.apply_rows(c->cfg.ops.ctx, c->sum_keys, c->sum_grads, (uint64_t)keys, lr,
                              scale, t, last);
    }
}

/* Whether every worker of c->with pushed piece q of its rows of step t. */
static int s_piece_in(const ps_consistency_t *c, int64_t t, int q)
{
    for (int w = 0; w < c->workers; w++) {
        if (c->with[w] && !c->rows_got[s_piece(ps_consistency_slot(c, t, w), q)]) {
            return 0;
        }
    }
    return 1;
}

/* Piece q of step t's rows, applied: the pushes of the workers in c->with,
 * in rank order, weighted as their dense parts are. */
static void s_apply_piece(ps_consistency_t *c, int64_t t, int q, float lr, float scale)
{
    int n = 0;
    for (int w = 0; w < c->workers; w++) {
        if (c->with[w]) {
            const size_t k = ps_consistency_slot(c, t, w);
            c->rows_with[n] = c->rows[s_piece(k, q)];
            c->rows_with[n++].weight = ps_consistency_stale_weight(c, t - c->computed_on[k]);
        }
    }
    s_sum_apply_rows(c, n, lr, scale, t, 0);
    c->rows_done[q] = 1;
    c->rows_ndone++;
}

int ps_consistency_apply_pieces(ps_consistency_t *c, int64_t t, float lr, float scale)
{
    int applied = 0;
    for (int q = 0; c->cfg.rows && q < PS_RANGE_ROW_PIECES; q++) {
        if (!c->rows_done[q] && s_piece_in(c, t, q)) {
            s_apply_piece(c, t, q, lr, scale);
            applied++;
        }
    }
    return applied;
}

int ps_consistency_rows_end(ps_consistency_t *c, int64_t t, float lr, float scale)
{
    static const uint64_t no_key;
    static const float no_row;
    if (!c->cfg.rows) {
        return 1;
    }
    if (c->rows_ndone < PS_RANGE_ROW_PIECES) {
        return 0;
    }
    if (c->cfg.ops.apply_rows) {
        c->cfg.ops.apply_rows(c->cfg.ops.ctx, &no_key, &no_row, 0, lr, scale, t, 1);
    }
    return 1;
}

/* A rows push of a stepped mode, held in its slot. Returns 1 when r's
 * frame is held, 0, or a refusal. */
static int s_push_rows_stepped(ps_consistency_t *c, const ps_request_t *r, char *why,
                               size_t cap)
{
    const int admit = ps_consistency_admit_stepped(c, r, why, cap);
    if (admit != 1) {
        return admit;
    }
    const size_t k = ps_consistency_slot(c, r->step, r->worker), kq = s_piece(k, r->piece);
    if (c->rows_got[kq]) {
        snprintf(why, cap, "W%d pushed piece %d of the rows of step %lld twice", r->worker,
                 r->piece, (long long)r->step);
        return PS_ESTATE;
    }
    c->rows[kq] = (ps_rows_part_t){r->keys, r->data, r->nkeys, 1.0f};
    c->rows_frame[kq] = r->frame;
    c->rows_got[kq] = 1;
    ps_consistency_computed_on(c, k, r, c->covered[k] == 0 && c->rows_count[k] == 0);
    c->rows_count[k]++;
    c->stats.row_pushes++;
    c->stats.row_keys += r->nkeys;
    ps_consistency_ack(c, r);
    ps_consistency_try_apply(c);
    return 1;
}

/* A rows push of async: applied on arrival, weighted as a push is; the
 * version counts the dense pushes only. */
static int s_push_rows_async(ps_consistency_t *c, const ps_request_t *r)
{
    const int64_t tau = c->version - r->version;
    c->rows_with[0] = (ps_rows_part_t){r->keys, r->data, r->nkeys, 1.0f};
    s_sum_apply_rows(c, 1, ps_consistency_lr(c, c->version / c->workers),
                     ps_consistency_async_weight(c, tau), c->version, 1);
    c->stats.row_pushes++;
    c->stats.row_keys += r->nkeys;
    ps_consistency_ack(c, r);
    return 0;
}

int ps_consistency_push_rows(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    assert(r->worker >= 0 && r->worker < c->workers);
    int rc;
    if (!c->cfg.rows) {
        snprintf(why, cap, "this job has no embedding rows");
        rc = PS_ESTATE;
    } else if ((rc = ps_consistency_refuse_push(c, r, r->nkeys * (uint64_t)c->cfg.job.embed_dim, why,
                                   cap)) != 0) {
        /* rc says why */
    } else if (ps_job_is_stepped(&c->cfg.job)) {
        rc = s_push_rows_stepped(c, r, why, cap);
    } else {
        rc = s_push_rows_async(c, r);
    }
    if (rc == 1) { /* held: released when its step applies */
        return 0;
    }
    ps_consistency_release(c, r->frame);
    return rc;
}

int ps_consistency_replay_rows(ps_consistency_t *c, const uint64_t *keys, const float *grads,
                               uint64_t n, float lr, float scale, int64_t t, int last)
{
    const int stepped = ps_job_is_stepped(&c->cfg.job);
    if (!c->cfg.rows || !ps_store_initialized(c->store) || t != c->version ||
        (stepped && last && c->ndone != c->nchunks)) {
        return PS_ESTATE;
    }
    if (c->cfg.ops.apply_rows) {
        c->cfg.ops.apply_rows(c->cfg.ops.ctx, keys, grads, n, lr, scale, t, last);
    }
    if (stepped && !last && n > 0) { /* a piece applied: not pushed again after a takeover */
        const int q = ps_range_row_piece_of(c->cfg.row_range, ps_rowkey_hash(keys[0]));
        c->rows_ndone += !c->rows_done[q];
        c->rows_done[q] = 1;
    }
    if (stepped && last) {
        ps_consistency_end_step(c, t);
    }
    return 0;
}
