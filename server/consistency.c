/*
 * server/consistency.c - the consistency modes over a store.
 *
 * Everything is sized once at creation: the table of pushes held per step and
 * worker (their frames are read in place when the step applies, no copy into
 * a buffer of ours), one scratch range (a chunk of the step's sum; an aligned
 * copy of an async push) and the table of pulls waiting for a newer version.
 * Nothing is allocated per step.
 */
#include "server/consistency.h"
#include "server/consistency_impl.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"

static int s_refuse(char *why, size_t cap, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int s_refuse(char *why, size_t cap, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return status;
}

/* The scale of a step's sum of n workers' pushes: each is the sum of the
 * gradients of its micro-batches (--micro-batch), so 1 / all of those. */
static float s_mean(const ps_consistency_t *c, int n)
{
    return 1.0f / (float)(n * ps_job_micro_batches(&c->cfg.job));
}

float ps_consistency_lr(const ps_consistency_t *c, int64_t step)
{
    return ps_optim_lr(&c->cfg.job, step, c->cfg.steps_per_epoch, c->cfg.total_steps);
}

/*
 * Staleness-aware learning rate (Zhang, Gupta, Lian, Liu, "Staleness-aware
 * Async-SGD for Distributed Deep Learning", IJCAI 2016): a gradient applied
 * tau > 1 versions after the one it was computed on is weighted 1/tau, when the
 * job asks for it. Fresh gradients (tau <= 1, everything under sync) keep 1.
 */
float ps_consistency_stale_weight(const ps_consistency_t *c, int64_t tau)
{
    return (c->cfg.job.staleness_lr && tau > 1) ? 1.0f / (float)tau : 1.0f;
}

/* async, with --staleness-lr: a push's weight. A push of M workers was
 * computed on values about M-1 pushes old, so its 1/tau staleness weight
 * averages about 1/(M-1); (M-1)/M on top makes the M pushes that carry a
 * sync step's samples move the values about as far as that step. And
 * staleness adds momentum of its own (Mitliagkas et al. 2016), so the store
 * runs less and the rate makes up for it (cfg.async_rate).
 * docs/design/consistency.md. */
float ps_consistency_async_weight(const ps_consistency_t *c, int64_t tau)
{
    const float w = ps_consistency_stale_weight(c, tau) * s_mean(c, 1);
    if (!c->cfg.job.staleness_lr || c->workers < 2) {
        return w;
    }
    const float rate = c->cfg.async_rate > 0 ? c->cfg.async_rate : 1.0f;
    return w * rate * (float)(c->workers - 1) / (float)c->workers;
}

/* Index of slot (step t, worker w). */
static size_t s_slot(const ps_consistency_t *c, int64_t t, int w)
{
    return ps_consistency_slot(c, t, w);
}

/* Non-zero when live worker w has pushed every key of step t (and its
 * rows push, in a job with rows). */
static int s_complete(const ps_consistency_t *c, int64_t t, int w)
{
    const size_t k = s_slot(c, t, w);
    return c->live[w] && c->covered[k] == c->n && ps_consistency_rows_complete(c, k);
}

void ps_consistency_release(ps_consistency_t *c, void *frame)
{
    if (frame && c->cfg.ops.release) {
        c->cfg.ops.release(c->cfg.ops.ctx, frame);
    }
}

/* Releases the frames held in slot k and empties it. */
void ps_consistency_release_parts(ps_consistency_t *c, size_t k)
{
    ps_part_t *parts = c->parts + k * PS_CONSISTENCY_MAX_PARTS;
    for (int i = 0; i < c->nparts[k]; i++) {
        ps_consistency_release(c, parts[i].frame);
    }
    c->nparts[k] = 0;
    c->covered[k] = 0;
    memset(c->chunk_got + k * c->nchunks, 0, c->nchunks * sizeof *c->chunk_got);
    for (int q = 0; c->cfg.rows && q < PS_RANGE_ROW_PIECES; q++) {
        const size_t kq = k * PS_RANGE_ROW_PIECES + (size_t)q;
        ps_consistency_release(c, c->rows_frame[kq]);
        c->rows_frame[kq] = NULL;
        c->rows_got[kq] = 0;
    }
    if (c->cfg.rows) {
        c->rows_count[k] = 0;
    }
}

void ps_consistency_drop_pending(ps_consistency_t *c)
{
    for (int i = 0; i < c->npending; i++) {
        ps_consistency_release(c, c->pending[i].frame);
    }
    c->npending = 0;
}

/* Keys [off, off + len) (shard-relative) of chunk ch. */
uint64_t ps_consistency_chunk_len(const ps_consistency_t *c, size_t ch, uint64_t *off)
{
    *off = (uint64_t)ch * c->chunk;
    return c->n - *off < c->chunk ? c->n - *off : c->chunk;
}

/* Non-zero when the steps apply chunk by chunk (ps_job_chunked). */
int ps_consistency_chunked(const ps_consistency_t *c)
{
    return ps_job_chunked(&c->cfg.job);
}

/* Acks r at the current version. */
void ps_consistency_ack(ps_consistency_t *c, const ps_request_t *r)
{
    c->cfg.ops.ack(c->cfg.ops.ctx, r->asker, r->range, c->version);
}

/*
 * Step t's lone push, when it can be used as the step's gradient as it
 * is, with no pass at all: one complete worker (from first on), its push in
 * one aligned part, unweighted. Else NULL (s_sum_range sums).
 */
static const float *s_lone_push(const ps_consistency_t *c, int64_t t, int first)
{
    size_t k0 = s_slot(c, t, first);
    const ps_part_t *p0 = c->parts + k0 * PS_CONSISTENCY_MAX_PARTS;
    for (int w = first + 1; w < c->workers; w++) {
        if (s_complete(c, t, w)) {
            return NULL;
        }
    }
    const void *d0 = c->nparts[k0] == 1 ? p0->data : NULL;
    if (d0 && (uintptr_t)d0 % sizeof(float) == 0 &&
        ps_consistency_stale_weight(c, t - c->computed_on[k0]) == 1.0f) {
        return d0;
    }
    return NULL;
}

/*
 * The gradient sum of keys [off, off + len) (shard-relative) of step t,
 * into scratch[0, len): the pushes of every worker in c->with, in
 * worker-rank order from the first of them (`first`), each weighted by
 * ps_consistency_stale_weight(), read in place from the held parts. Summed one range (a
 * chunk) at a time just before its update, into the same scratch each time,
 * so the sum is still in cache when the optimizer reads it; per key the same
 * additions in the same order as a sum of the whole shard. Returns scratch.
 */
static const float *s_sum_range(ps_consistency_t *c, int64_t t, int first, uint64_t off,
                                uint64_t len)
{
    const uint64_t end = off + len;
    for (int w = first; w < c->workers; w++) {
        if (!c->with[w]) {
            continue;
        }
        size_t k = s_slot(c, t, w);
        const float weight = ps_consistency_stale_weight(c, t - c->computed_on[k]);
        const ps_part_t *parts = c->parts + k * PS_CONSISTENCY_MAX_PARTS;
        for (int i = 0; i < c->nparts[k]; i++) {
            uint64_t b = parts[i].begin > off ? parts[i].begin : off;
            uint64_t e = parts[i].end < end ? parts[i].end : end;
            if (b < e) {
                ps_optim_accumulate(c->scratch + (b - off),
                                    (const unsigned char *)parts[i].data +
                                        (b - parts[i].begin) * sizeof(float),
                                    weight, e - b, w == first);
            }
        }
    }
    return c->scratch;
}

/* Joining workers whose step has come are live from now on. */
static void s_live_joins(ps_consistency_t *c)
{
    for (int w = 0; w < c->workers; w++) {
        if (c->join_at[w] >= 0 && c->join_at[w] <= c->version) {
            c->join_at[w] = -1;
            c->live[w] = 1;
            c->nlive++;
        }
    }
}

/* No worker is live, only joiners from a later step J: steps before J have
 * no one to push them, so they are skipped (no update; their held pushes
 * are dropped; chunks the last worker's pushes applied stay) and the
 * version jumps to J, where the joiners are live. */
static void s_skip_to_joins(ps_consistency_t *c)
{
    int64_t J = INT64_MAX;
    for (int w = 0; w < c->workers; w++) {
        J = c->join_at[w] >= 0 && c->join_at[w] < J ? c->join_at[w] : J;
    }
    if (J == INT64_MAX || !ps_store_initialized(c->store)) {
        return;
    }
    for (int64_t t = c->version; t < J && t < c->version + c->window; t++) {
        for (int w = 0; w < c->workers; w++) {
            ps_consistency_release_parts(c, s_slot(c, t, w));
        }
    }
    ps_log_warn("no worker live before step %lld: steps %lld to %lld skipped", (long long)J,
                (long long)c->version, (long long)J - 1);
    c->stats.steps_fewer += J - c->version;
    ps_consistency_jump(c, J);
    s_live_joins(c);
    ps_consistency_answer_pulls(c);
}

/* Chunks of an update at step t that the store left undone (they would
 * have made a parameter non-finite): counted as refused non-finite pushes,
 * and logged at the 1st, 2nd, 4th ... so a flood of them cannot flood the
 * log. The job goes on with the chunks' values as they were. */
static void s_undone(ps_consistency_t *c, int chunks, int64_t t)
{
    if (chunks == 0) {
        return;
    }
    const uint64_t n = ++c->stats.nonfinite;
    if ((n & (n - 1)) == 0) {
        ps_log_warn("the update of step %lld would make parameters NaN or infinite in %d "
                    "chunk%s: left as they were (%llu non-finite so far)",
                    (long long)t, chunks, chunks == 1 ? "" : "s", (unsigned long long)n);
    }
}

/* Applies grad to keys r as the update that makes `version` (Adam's t)
 * of step t, telling ops.update first (a replica applies the same). */
void ps_consistency_store_step(ps_consistency_t *c, ps_range_t r, const float *grad, float lr,
                         float scale, int64_t version, int64_t t)
{
    if (c->cfg.ops.update) {
        c->cfg.ops.update(c->cfg.ops.ctx, r, grad, lr, scale, version);
    }
    s_undone(c, ps_store_step(c->store, r, grad, lr, scale, version), t);
}

/* Step t (= version) is applied whole: the version moves on, its held
 * pushes go, and the pulls it satisfies are answered. */
void ps_consistency_end_step(ps_consistency_t *c, int64_t t)
{
    ps_consistency_jump(c, t + 1);
    for (int w = 0; w < c->workers; w++) {
        size_t k = s_slot(c, t, w);
        if (s_complete(c, t, w)) {
            ps_hist_add(&c->stats.staleness, t - c->computed_on[k]);
        } else if (c->covered[k] || (c->cfg.rows && c->rows_count[k])) {
            c->stats.dropped++; /* a late worker's partial push: its step is over */
        }
        ps_consistency_release_parts(c, k);
    }
    c->step_since = ps_now();
    ps_consistency_answer_pulls(c);
    s_live_joins(c);
    if (c->cfg.ops.stepped) {
        c->cfg.ops.stepped(c->cfg.ops.ctx, c->version);
    }
}

/* Chunk ch of step t's sum is in: every live worker pushed its keys. */
static int s_chunk_in(const ps_consistency_t *c, int64_t t, size_t ch, uint64_t len)
{
    for (int w = 0; w < c->workers; w++) {
        if (c->live[w] && c->chunk_got[s_slot(c, t, w) * c->nchunks + ch] != len) {
            return 0;
        }
    }
    return 1;
}

/* The gradient of chunk [off, off + len) of step t when one worker's push
 * holds all of it, aligned and unweighted: used in place, with no pass. */
static const float *s_lone_chunk(const ps_consistency_t *c, int64_t t, int w, uint64_t off,
                                 uint64_t len)
{
    const size_t k = s_slot(c, t, w);
    const ps_part_t *parts = c->parts + k * PS_CONSISTENCY_MAX_PARTS;
    if (ps_consistency_stale_weight(c, t - c->computed_on[k]) != 1.0f) {
        return NULL;
    }
    for (int i = 0; i < c->nparts[k]; i++) {
        const unsigned char *d = parts[i].data;
        if (parts[i].begin <= off && off + len <= parts[i].end &&
            (uintptr_t)d % sizeof(float) == 0) {
            return (const float *)(d + (off - parts[i].begin) * sizeof(float));
        }
    }
    return NULL;
}

/*
 * sync and ssp: applies, of the step being collected (and the ones after it,
 * in order), each chunk that every live worker has pushed whole, as it comes
 * in, and sends the pulls its values. Per key the arithmetic is that of a
 * whole step: the live workers' gradients summed in worker-rank order, their
 * mean applied with the step's lr and Adam t. A step's chunks are summed
 * over the workers live at its first chunk; a worker lost in the middle of
 * a step leaves its other chunks to the others.
 */
static void s_try_apply_chunks(ps_consistency_t *c)
{
    while (c->version < c->hold && c->nlive > 0) {
        const int64_t t = c->version;
        int first = -1, count = 0;
        for (int w = 0; w < c->workers; w++) {
            if (!c->ndone && !c->rows_ndone) {
                c->with[w] = c->live[w];
            }
            c->with[w] &= c->live[w];
            first = first < 0 && c->with[w] ? w : first;
            count += c->with[w];
        }
        if (count == 0) {
            return;
        }
        const float lr = ps_consistency_lr(c, t), scale = s_mean(c, count);
        int applied = 0;
        for (size_t ch = 0; ch < c->nchunks; ch++) {
            uint64_t off, len = ps_consistency_chunk_len(c, ch, &off);
            if (c->done[ch] || !s_chunk_in(c, t, ch, len)) {
                continue;
            }
            const float *lone = count == 1 ? s_lone_chunk(c, t, first, off, len) : NULL;
            ps_range_t r = {c->shard.begin + off, c->shard.begin + off + len};
            const float *g = lone ? lone : s_sum_range(c, t, first, off, len);
            ps_consistency_store_step(c, r, g, lr, scale, t + 1, t);
            c->done[ch] = 1;
            c->ndone++;
            applied = 1;
        }
        applied |= ps_consistency_apply_pieces(c, t, lr, scale) > 0;
        if (c->ndone == c->nchunks && ps_consistency_rows_end(c, t, lr, scale)) {
            c->stats.steps_fewer += c->nlive < c->workers;
            ps_consistency_end_step(c, t);
            continue;
        }
        c->applied_unsent |= applied; /* sent by ps_consistency_send_applied */
        return;
    }
}

/*
 * Stepped modes: applies every step that has collected enough pushes, in
 * order. sync and ssp need every live worker (chunk by chunk, above);
 * sync:k/n needs k of them. The gradients are summed in worker-rank order,
 * so the result does not depend on arrival order.
 */
void ps_consistency_try_apply(ps_consistency_t *c)
{
    if (ps_consistency_chunked(c)) {
        s_try_apply_chunks(c);
        return;
    }
    const ps_job_t *j = &c->cfg.job;
    for (;;) {
        int need = j->mode == PS_MODE_BACKUP && j->backup_k < c->nlive ? j->backup_k : c->nlive;
        need = need < 1 ? 1 : need;
        if (c->version >= c->hold) {
            return;
        }
        int complete = 0, first = -1;
        for (int w = 0; w < c->workers; w++) {
            if (s_complete(c, c->version, w)) {
                complete++;
                first = first < 0 ? w : first;
            }
        }
        if (complete < need) {
            return;
        }
        const int64_t t = c->version;
        c->stats.steps_fewer += c->nlive < c->workers;
        for (int w = 0; w < c->workers; w++) {
            c->with[w] = (unsigned char)s_complete(c, t, w);
        }
        const float *lone = s_lone_push(c, t, first);
        const float lr = ps_consistency_lr(c, t), scale = s_mean(c, complete);
        c->version = t + 1; /* what the values sent below carry; Adam's t */
        for (uint64_t off = 0; off < c->n; off += PS_CONSISTENCY_REPLY_KEYS) {
            uint64_t len = c->n - off < PS_CONSISTENCY_REPLY_KEYS ? c->n - off
                                                                 : PS_CONSISTENCY_REPLY_KEYS;
            ps_range_t chunk = {c->shard.begin + off, c->shard.begin + off + len};
            const float *sum = lone ? lone + off : s_sum_range(c, t, first, off, len);
            ps_consistency_store_step(c, chunk, sum, lr, scale, c->version, t);
        }
        ps_consistency_apply_pieces(c, t, lr, scale);
        ps_consistency_rows_end(c, t, lr, scale);
        ps_consistency_end_step(c, t);
    }
}

int ps_consistency_new(ps_consistency_t **out, const ps_consistency_config_t *cfg,
                       ps_store_t *store)
{
    *out = NULL;
    if (cfg->workers < 1) {
        return PS_EINVAL;
    }
    ps_consistency_t *c = calloc(1, sizeof *c);
    if (!c) {
        return PS_ENOMEM;
    }
    c->cfg = *cfg;
    c->store = store;
    c->shard = ps_store_shard(store);
    c->n = ps_range_len(c->shard);
    c->workers = c->nlive = cfg->workers;
    /* With rows applied piece by piece, a worker may have every row and key
     * it asked for of step t + 1 while a piece it does not hold still waits
     * for another worker: its next push is held one step further on. */
    c->window = (cfg->job.mode == PS_MODE_SSP ? cfg->job.staleness + 1 : 1) +
                (cfg->rows && ps_job_chunked(&cfg->job));
    c->nslots = ps_job_is_stepped(&cfg->job) ? (size_t)c->window * (size_t)c->workers : 1;
    /* a round's pulls: up to one per push message (kv.c), and a few more */
    c->cap_pending = (PS_CONSISTENCY_MAX_PARTS / 2 + 8) * c->workers;
    c->asker_stride = (cfg->asker_size + 15) / 16 * 16;
    c->live = malloc((size_t)c->workers);
    c->join_at = malloc((size_t)c->workers * sizeof *c->join_at);
    c->hold = INT64_MAX;
    c->parts = calloc(c->nslots * PS_CONSISTENCY_MAX_PARTS, sizeof *c->parts);
    c->nparts = calloc(c->nslots, sizeof *c->nparts);
    c->covered = calloc(c->nslots, sizeof *c->covered);
    c->computed_on = calloc(c->nslots, sizeof *c->computed_on);
    c->scratch = calloc(c->n ? c->n : 1, sizeof(float));
    c->chunk = ps_job_chunk_keys(&cfg->job);
    c->chunk = c->chunk && c->chunk <= PS_CONSISTENCY_REPLY_KEYS ? c->chunk
                                                                  : PS_CONSISTENCY_REPLY_KEYS;
    c->nchunks = (size_t)((c->n + c->chunk - 1) / c->chunk);
    c->chunk_got = calloc(c->nslots * (c->nchunks ? c->nchunks : 1), sizeof *c->chunk_got);
    c->done = calloc(c->nchunks ? c->nchunks : 1, 1);
    c->with = calloc((size_t)c->workers, 1);
    c->pending = calloc((size_t)c->cap_pending, sizeof *c->pending);
    c->waiting = calloc((size_t)c->workers, sizeof *c->waiting);
    c->askers = calloc((size_t)c->cap_pending, c->asker_stride ? c->asker_stride : 1);
    if (cfg->rows) {
        const size_t pieces = c->nslots * PS_RANGE_ROW_PIECES;
        c->rows = calloc(pieces, sizeof *c->rows);
        c->rows_frame = calloc(pieces, sizeof *c->rows_frame);
        c->rows_got = calloc(pieces, 1);
        c->rows_count = calloc(c->nslots, sizeof *c->rows_count);
        c->rows_with = calloc((size_t)c->workers, sizeof *c->rows_with);
        if (!c->rows || !c->rows_frame || !c->rows_got || !c->rows_count || !c->rows_with) {
            ps_consistency_destroy(&c);
            return PS_ENOMEM;
        }
    }
    if (!c->live || !c->join_at || !c->parts || !c->nparts || !c->covered ||
        !c->computed_on || !c->scratch || !c->pending || !c->askers || !c->chunk_got ||
        !c->done || !c->with || !c->waiting) {
        ps_consistency_destroy(&c);
        return PS_ENOMEM;
    }
    memset(c->live, 1, (size_t)c->workers);
    for (int w = 0; w < c->workers; w++) {
        c->join_at[w] = -1;
    }
    ps_hist_init(&c->stats.staleness);
    c->step_since = ps_now();
    *out = c;
    return 0;
}

void ps_consistency_destroy(ps_consistency_t **cp)
{
    ps_consistency_t *c = *cp;
    if (!c) {
        return;
    }
    for (size_t k = 0; c->nparts && c->chunk_got &&
                       (!c->cfg.rows || (c->rows_got && c->rows_frame && c->rows_count)) &&
                       k < c->nslots; k++) {
        ps_consistency_release_parts(c, k);
    }
    if (c->pending) {
        ps_consistency_drop_pending(c);
    }
    free(c->rows);
    free(c->rows_frame);
    free(c->rows_got);
    free(c->rows_count);
    free(c->rows_with);
    free(c->sum_keys);
    free(c->sum_grads);
    free(c->live);
    free(c->join_at);
    free(c->parts);
    free(c->nparts);
    free(c->covered);
    free(c->computed_on);
    free(c->chunk_got);
    free(c->done);
    free(c->with);
    free(c->waiting);
    free(c->scratch);
    free(c->pending);
    free(c->askers);
    free(c);
    *cp = NULL;
}

int ps_consistency_set_workers(ps_consistency_t *c, const unsigned char *live)
{
    int nlive = 0;
    for (int w = 0; w < c->workers; w++) {
        nlive += live[w] != 0;
    }
    if (nlive == 0) {
        return PS_EINVAL;
    }
    nlive = 0;
    for (int w = 0; w < c->workers; w++) {
        /* a worker joining at a later step is not live before it */
        c->join_at[w] = live[w] ? c->join_at[w] : -1;
        c->live[w] = live[w] != 0 && c->join_at[w] < 0;
        nlive += c->live[w];
    }
    c->nlive = nlive;
    if (nlive == 0) {
        s_skip_to_joins(c);
    }
    if (ps_job_is_stepped(&c->cfg.job) && ps_store_initialized(c->store)) {
        ps_consistency_try_apply(c);
    }
    return 0;
}

int ps_consistency_init(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    assert(r->range.begin < r->range.end && ps_range_contains(c->shard, r->range));
    if (r->worker != 0) {
        return s_refuse(why, cap, PS_ESTATE, "only worker 0 initialises parameters");
    }
    const int was = ps_store_initialized(c->store);
    int rc = ps_store_init(c->store, r->range, r->data);
    if (rc < 0 && was) {
        return s_refuse(why, cap, rc, "parameters are already initialised");
    }
    if (rc < 0) {
        return s_refuse(why, cap, rc, "keys [%llu, %llu) overlap keys already initialised",
                        (unsigned long long)r->range.begin, (unsigned long long)r->range.end);
    }
    if (rc == 1) {
        c->step_since = ps_now();
    }
    ps_consistency_ack(c, r);
    ps_consistency_answer_pulls(c);
    return 0;
}

/* Holds the push of shard-relative keys [begin, end) in slot k; refuses
 * overlaps, so a worker's share of a step is complete exactly when every key
 * came once. */
static int s_add_part(ps_consistency_t *c, size_t k, uint64_t begin, uint64_t end,
                      const ps_request_t *r)
{
    ps_part_t *parts = c->parts + k * PS_CONSISTENCY_MAX_PARTS;
    if (c->nparts[k] == PS_CONSISTENCY_MAX_PARTS) {
        return PS_ENOMEM;
    }
    for (int i = 0; i < c->nparts[k]; i++) {
        if (begin < parts[i].end && parts[i].begin < end) {
            return PS_ESTATE;
        }
    }
    parts[c->nparts[k]++] = (ps_part_t){begin, end, r->data, r->frame};
    c->covered[k] += end - begin;
    for (uint64_t at = begin; at < end;) {
        const uint64_t ch = at / c->chunk, ce = (ch + 1) * c->chunk;
        const uint64_t e = end < ce ? end : ce;
        c->chunk_got[k * c->nchunks + ch] += (uint32_t)(e - at);
        at = e;
    }
    return 0;
}

/* Stepped modes: whether push r may count toward a step. Returns 1 (it
 * may), 0 (acked and dropped: late for a step already applied) or a
 * refusal. */
int ps_consistency_admit_stepped(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    if (r->step < c->version && c->cfg.resent) {
        /* Sent again after a takeover, for a step applied before it. */
        c->stats.resent++;
        ps_consistency_ack(c, r);
        return 0;
    }
    if (r->step < c->version && c->cfg.job.mode == PS_MODE_BACKUP) {
        /* Late for a step already applied with k pushes: drop, but ack so the
         * worker moves on to the current step. */
        c->stats.dropped++;
        ps_consistency_ack(c, r);
        return 0;
    }
    if (r->step < c->version || r->step >= c->version + c->window) {
        return s_refuse(why, cap, PS_ESTATE,
                        "push for step %lld, but steps %lld to %lld are being collected",
                        (long long)r->step, (long long)c->version,
                        (long long)(c->version + c->window - 1));
    }
    return 1;
}

/* The version slot k's gradients were computed on: the stalest of its
 * parts (first: r is the slot's first part). */
void ps_consistency_computed_on(ps_consistency_t *c, size_t k, const ps_request_t *r, int first)
{
    if (first || r->version < c->computed_on[k]) {
        c->computed_on[k] = r->version;
    }
}

/* Stepped modes. Returns 1 when r's frame is held, 0, or a refusal. */
static int s_push_stepped(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    const int admit = ps_consistency_admit_stepped(c, r, why, cap);
    if (admit != 1) {
        return admit;
    }
    size_t k = s_slot(c, r->step, r->worker);
    int rc = s_add_part(c, k, r->range.begin - c->shard.begin, r->range.end - c->shard.begin, r);
    if (rc != 0) {
        return s_refuse(why, cap, rc,
                        rc == PS_ESTATE ? "W%d pushed keys of step %lld twice"
                                        : "W%d split step %lld into too many pushes",
                        r->worker, (long long)r->step);
    }
    ps_consistency_computed_on(c, k, r,
                  c->covered[k] == ps_range_len(r->range) && !(c->cfg.rows && c->rows_count[k]));
    c->stats.pushes++;
    ps_consistency_ack(c, r);
    ps_consistency_try_apply(c);
    return 1;
}

/* async: apply on arrival, record how stale the gradient was. */
static int s_push_async(ps_consistency_t *c, const ps_request_t *r)
{
    const float *g = r->data;
    if ((uintptr_t)g % sizeof(float) != 0) {
        memcpy(c->scratch, r->data, ps_range_len(r->range) * sizeof(float));
        g = c->scratch;
    }
    const int64_t tau = c->version - r->version;
    /* N pushes make one step of the sync schedule. */
    ps_consistency_store_step(c, r->range, g, ps_consistency_lr(c, c->version / c->workers), ps_consistency_async_weight(c, tau),
                 c->version + 1, c->version);
    ps_hist_add(&c->stats.staleness, tau);
    c->stats.steps_fewer += c->nlive < c->workers;
    c->version++;
    c->stats.pushes++;
    ps_consistency_ack(c, r);
    if (c->cfg.ops.stepped) { /* a checkpoint may read the store now */
        c->cfg.ops.stepped(c->cfg.ops.ctx, c->version);
    }
    return 0;
}

/* What refuses any push before its mode sees it: no parameters yet, a
 * worker not live, a NaN or an infinity among the n floats of data.
 * Returns 0 or a refusal. */
int ps_consistency_refuse_push(ps_consistency_t *c, const ps_request_t *r, uint64_t n, char *why,
                         size_t cap)
{
    if (!ps_store_initialized(c->store)) {
        return s_refuse(why, cap, PS_ESTATE, "push before the parameters were initialised");
    }
    if (!c->live[r->worker]) {
        return s_refuse(why, cap, PS_ENOENT, "W%d is not a live worker", r->worker);
    }
    if (!ps_optim_finite(r->data, n)) {
        /* Checked on arrival, while the frame is still in cache: a refused
         * push never counts toward its step, so the worker may push again. */
        c->stats.nonfinite++;
        return s_refuse(why, cap, PS_ENONFINITE, "gradient holds NaN or infinity");
    }
    return 0;
}

int ps_consistency_push(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    assert(r->worker >= 0 && r->worker < c->workers);
    assert(r->range.begin < r->range.end && ps_range_contains(c->shard, r->range));
    int rc;
    if ((rc = ps_consistency_refuse_push(c, r, ps_range_len(r->range), why, cap)) != 0) {
        /* rc says why */
    } else if (ps_job_is_stepped(&c->cfg.job)) {
        rc = s_push_stepped(c, r, why, cap);
    } else {
        rc = s_push_async(c, r);
    }
    if (rc == 1) { /* held: released when its step applies */
        return 0;
    }
    ps_consistency_release(c, r->frame);
    return rc;
}

int64_t ps_consistency_hold(ps_consistency_t *c)
{
    c->hold = c->version + 1;
    return c->version;
}

int ps_consistency_join(ps_consistency_t *c, int worker, int64_t step)
{
    int rc = 0;
    if (worker >= 0) {
        if (worker >= c->workers || c->live[worker] || step < c->version) {
            rc = PS_ESTATE;
        } else {
            c->join_at[worker] = ps_job_is_stepped(&c->cfg.job) ? step : 0;
            s_live_joins(c);
        }
    }
    c->hold = INT64_MAX;
    if (ps_job_is_stepped(&c->cfg.job) && ps_store_initialized(c->store)) {
        ps_consistency_try_apply(c);
    }
    return rc;
}

int ps_consistency_resume(ps_consistency_t *c, int64_t version)
{
    if (!ps_store_initialized(c->store) || c->version != 0 || version < 0) {
        return PS_ESTATE;
    }
    c->version = version;
    return 0;
}

int ps_consistency_rollback(ps_consistency_t *c, int64_t version)
{
    if (!ps_store_initialized(c->store) || version < 0) {
        return PS_ESTATE;
    }
    for (size_t k = 0; k < c->nslots; k++) {
        ps_consistency_release_parts(c, k);
    }
    ps_consistency_drop_pending(c); /* their askers roll back too and ask again */
    ps_consistency_jump(c, version);
    c->step_since = ps_now();
    /* A step agreement under way is abandoned (the scheduler starts it
     * again), and a worker joining at a later step rolls back with the
     * others: it pushes from `version` on. */
    c->hold = INT64_MAX;
    for (int w = 0; w < c->workers; w++) {
        c->join_at[w] = c->join_at[w] >= 0 ? 0 : -1;
    }
    s_live_joins(c);
    return 0;
}

