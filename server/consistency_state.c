/*
 * server/consistency_state.c - the consistency state machine as the
 * server's other parts read and set it outside the workers' requests: what
 * it tells the loop (who a step waits for, pulls waiting, its version) and
 * the end-of-job report (its stats); and under hot replicas
 * (server/replica.h) a takeover's forgetting of the step under way, a
 * primary's cut and members, and a replica's restore from them and replay
 * of the primary's updates (see consistency.h).
 */
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rowkey.h"
#include "server/consistency_impl.h"

void ps_consistency_tick(ps_consistency_t *c)
{
    double now = ps_now(), waited = now - c->step_since, every = c->cfg.report_missing;
    if (!ps_job_is_stepped(&c->cfg.job) || !ps_store_initialized(c->store) || c->n == 0 ||
        waited < every || now - c->missing_logged < every) {
        return;
    }
    char who[256] = "";
    size_t at = 0;
    int any = 0, more = 0;
    for (int w = 0; w < c->workers; w++) {
        uint64_t got = ps_held_covered(c->held, ps_held_slot(c->held, c->version, w));
        any |= got != 0;
        if (c->live[w] && got != c->n) {
            char one[64];
            snprintf(one, sizeof one, " W%d (%llu of %llu keys)", w, (unsigned long long)got,
                     (unsigned long long)c->n);
            at += ps_log_list_add(who, sizeof who, at, one, &more);
        }
    }
    ps_log_list_end(who, sizeof who, at, more);
    if (any) { /* someone pushed and waits on the others */
        ps_log_warn("step %lld of keys [%llu, %llu) has waited %.1f s for:%s",
                    (long long)c->version, (unsigned long long)c->shard.begin,
                    (unsigned long long)c->shard.end, waited, who);
        c->missing_logged = now;
    }
}

int ps_consistency_missing(const ps_consistency_t *c, int *ranks, int cap, double *waited)
{
    *waited = 0;
    if (!ps_job_is_stepped(&c->cfg.job) || !ps_store_initialized(c->store) || c->n == 0) {
        return 0;
    }
    int any = 0, n = 0;
    for (int w = 0; w < c->workers; w++) {
        any |= ps_held_covered(c->held, ps_held_slot(c->held, c->version, w)) != 0;
    }
    for (int w = 0; any && w < c->workers; w++) {
        if (c->live[w] &&
            ps_held_covered(c->held, ps_held_slot(c->held, c->version, w)) != c->n) {
            if (n < cap) {
                ranks[n] = w;
            }
            n++;
        }
    }
    *waited = n ? ps_now() - c->step_since : 0;
    return n;
}

int ps_consistency_pending_pulls(const ps_consistency_t *c)
{
    return ps_pulls_waiting(c->pulls);
}

int ps_consistency_max_held(const ps_consistency_t *c)
{
    /* with rows: each slot's rows push, and the rows pulls that wait */
    return (int)c->nslots * PS_CONSISTENCY_MAX_PARTS +
           (c->cfg.rows ? (int)c->nslots + ps_pulls_cap(c->pulls) : 0);
}

int64_t ps_consistency_version(const ps_consistency_t *c)
{
    return c->version;
}

const ps_consistency_stats_t *ps_consistency_stats(const ps_consistency_t *c)
{
    return &c->stats;
}

int ps_consistency_forget(ps_consistency_t *c)
{
    for (size_t k = 0; k < c->nslots; k++) {
        ps_consistency_release_parts(c, k);
    }
    ps_pulls_drop(c->pulls); /* their askers ask again */
    c->step_since = ps_now();
    return 0;
}

size_t ps_consistency_cut(const ps_consistency_t *c, int64_t *version, unsigned char *done,
                          size_t cap)
{
    *version = c->version;
    const size_t pieces = c->cfg.rows ? PS_RANGE_ROW_PIECES : 0;
    for (size_t ch = 0; done && ch < c->nchunks && ch < cap; ch++) {
        done[ch] = c->ndone && c->done[ch];
    }
    for (size_t q = 0; done && q < pieces && c->nchunks + q < cap; q++) {
        done[c->nchunks + q] = ps_pieces_done(c->pieces)[q];
    }
    return ps_consistency_chunked(c) ? c->nchunks + pieces : 0;
}

int ps_consistency_restore(ps_consistency_t *c, int64_t version, const unsigned char *done,
                           size_t n)
{
    const size_t pieces = c->cfg.rows ? PS_RANGE_ROW_PIECES : 0;
    if (!ps_store_initialized(c->store) || version < 0 || (n && n != c->nchunks + pieces)) {
        return PS_ESTATE;
    }
    ps_consistency_jump(c, version);
    for (size_t ch = 0; ch < c->nchunks; ch++) {
        c->done[ch] = n && done[ch];
        c->ndone += c->done[ch];
    }
    for (size_t q = 0; n && q < pieces; q++) {
        if (done[c->nchunks + q]) {
            ps_pieces_mark(c->pieces, (int)q);
        }
    }
    memcpy(c->with, c->live, (size_t)c->workers);
    return 0;
}

/* Stepped modes: the primary skipped the steps from the replica's version
 * to `version` with no update (no worker was live, only joiners from a
 * later step: consistency.c:s_skip_to_joins), ending the step under way
 * where it stood; the replica, which applied the same chunks of it, does
 * too. */
static void s_skip_to(ps_consistency_t *c, int64_t version)
{
    if (ps_job_is_stepped(&c->cfg.job) && version > c->version) {
        ps_consistency_jump(c, version);
    }
}

int ps_consistency_replay(ps_consistency_t *c, ps_range_t r, const float *grad, float lr,
                          float scale, int64_t version)
{
    if (!ps_store_initialized(c->store)) {
        return PS_ESTATE;
    }
    if (!ps_job_is_stepped(&c->cfg.job)) {
        if (version != c->version + 1) {
            return PS_ESTATE;
        }
        ps_consistency_store_step(c, r, grad, lr, scale, version, c->version);
        c->version = version;
        return 0;
    }
    s_skip_to(c, version - 1);
    const uint64_t off = r.begin - c->shard.begin;
    const size_t ch = (size_t)(off / c->chunk);
    uint64_t coff, clen = ps_consistency_chunk_len(c, ch, &coff);
    if (!ps_consistency_chunked(c) || version != c->version + 1 || coff != off ||
        clen != ps_range_len(r) || c->done[ch]) {
        return PS_ESTATE;
    }
    ps_consistency_store_step(c, r, grad, lr, scale, version, c->version);
    c->done[ch] = 1;
    if (++c->ndone == c->nchunks && !c->cfg.rows) { /* else the rows, last, end it */
        ps_consistency_end_step(c, c->version);
    }
    return 0;
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
        ps_pieces_mark(c->pieces, ps_range_row_piece_of(c->cfg.row_range,
                                                        ps_rowkey_hash(keys[0])));
    }
    if (stepped && last) {
        ps_consistency_end_step(c, t);
    }
    return 0;
}

int ps_consistency_members(const ps_consistency_t *c, unsigned char *live, int64_t *join_at)
{
    memcpy(live, c->live, (size_t)c->workers);
    memcpy(join_at, c->join_at, (size_t)c->workers * sizeof *join_at);
    return c->workers;
}

int ps_consistency_set_members(ps_consistency_t *c, const unsigned char *live,
                               const int64_t *join_at, int n, int64_t version)
{
    int any = 0;
    for (int w = 0; w < n && n == c->workers; w++) {
        any |= live[w] || join_at[w] >= 0;
    }
    if (!any) {
        return PS_EINVAL;
    }
    c->nlive = 0;
    for (int w = 0; w < n; w++) {
        c->live[w] = live[w] != 0;
        c->join_at[w] = join_at[w] < 0 ? -1 : join_at[w];
        c->nlive += c->live[w];
    }
    s_skip_to(c, version);
    return 0;
}
