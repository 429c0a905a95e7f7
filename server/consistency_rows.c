/*
 * server/consistency_rows.c - embedding rows in the consistency modes: a
 * worker's rows push of a step, held with its dense parts and applied with
 * them, summed over the same workers in the same order; a replica's replay
 * of its primary's rows updates (see consistency.h).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "server/consistency.h"
#include "server/consistency_impl.h"

/* cfg.rows: sums the n rows pushes of c->rows_with and applies the sum. A
 * sum with no memory is logged and skipped (the step's rows keep their
 * values): the job goes on, as with a non-finite update. A stepped step
 * applies its sum even of no key: a replica ends the step on it. */
static void s_sum_apply_rows(ps_consistency_t *c, int n, float lr, float scale, int64_t t)
{
    int64_t keys = ps_optim_sum_rows(c->rows_with, n, (size_t)c->cfg.job.embed_dim,
                                     &c->sum_keys, &c->sum_grads, &c->sum_cap);
    if (keys < 0) {
        ps_log_err("out of memory to sum the rows of step %lld: not applied", (long long)t);
        keys = 0;
    }
    if ((keys > 0 || ps_job_is_stepped(&c->cfg.job)) && c->cfg.ops.apply_rows) {
        c->cfg.ops.apply_rows(c->cfg.ops.ctx, c->sum_keys, c->sum_grads, (uint64_t)keys, lr,
                              scale, t);
    }
}

/* cfg.rows: whether every worker of c->with pushed its rows of step t. */
int ps_consistency_rows_in(const ps_consistency_t *c, int64_t t)
{
    for (int w = 0; c->cfg.rows && w < c->workers; w++) {
        if (c->with[w] && !c->rows_got[ps_consistency_slot(c, t, w)]) {
            return 0;
        }
    }
    return 1;
}

/* cfg.rows: applies the rows pushes of step t of the workers in c->with,
 * in rank order, weighted as their dense parts are. */
void ps_consistency_apply_rows(ps_consistency_t *c, int64_t t, float lr, float scale)
{
    if (!c->cfg.rows) {
        return;
    }
    int n = 0;
    for (int w = 0; w < c->workers; w++) {
        if (c->with[w]) {
            const size_t k = ps_consistency_slot(c, t, w);
            c->rows_with[n] = c->rows[k];
            c->rows_with[n++].weight = ps_consistency_stale_weight(c, t - c->computed_on[k]);
        }
    }
    s_sum_apply_rows(c, n, lr, scale, t);
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
    const size_t k = ps_consistency_slot(c, r->step, r->worker);
    if (c->rows_got[k]) {
        snprintf(why, cap, "W%d pushed the rows of step %lld twice", r->worker,
                 (long long)r->step);
        return PS_ESTATE;
    }
    c->rows[k] = (ps_rows_part_t){r->keys, r->data, r->nkeys, 1.0f};
    c->rows_frame[k] = r->frame;
    c->rows_got[k] = 1;
    ps_consistency_computed_on(c, k, r, c->covered[k] == 0);
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
    s_sum_apply_rows(c, 1, ps_consistency_lr(c, c->version / c->workers), ps_consistency_async_weight(c, tau),
                     c->version);
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
        (stepped && c->ndone != c->nchunks)) {
        return PS_ESTATE;
    }
    if (c->cfg.ops.apply_rows) {
        c->cfg.ops.apply_rows(c->cfg.ops.ctx, keys, grads, n, lr, scale, t);
    }
    if (stepped && last) {
        ps_consistency_end_step(c, t);
    }
    return 0;
}
