/*
 * server/consistency_replica.c - the consistency state machine under hot
 * replicas (server/replica.h): a takeover's forgetting of the step under
 * way, a primary's cut, and a replica's restore from it and replay of the
 * primary's updates (see consistency.h).
 */
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "server/consistency_impl.h"

int ps_consistency_forget(ps_consistency_t *c)
{
    for (size_t k = 0; k < c->nslots; k++) {
        ps_consistency_release_parts(c, k);
    }
    ps_consistency_drop_pending(c); /* their askers ask again */
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
        done[c->nchunks + q] = c->rows_done[q];
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
    for (size_t q = 0; q < pieces; q++) {
        c->rows_done[q] = n && done[c->nchunks + q];
        c->rows_ndone += c->rows_done[q];
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
