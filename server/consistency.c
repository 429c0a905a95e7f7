/*
 * server/consistency.c - the consistency modes over a store.
 *
 * Everything is sized once at creation: the table of pushes held per step and
 * worker (consistency_held.c: their frames are read in place when the step
 * applies, no copy into a buffer of ours) and their rows pieces
 * (consistency_rows.c), one scratch range (a chunk of the step's sum; an
 * aligned copy of an async push) and the queue of pulls waiting for a newer
 * version (consistency_pull.c). Nothing is allocated per step.
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

/* The learning rate of step `step` (the job's schedule). */
static float s_lr(const ps_consistency_t *c, int64_t step)
{
    return ps_optim_lr(&c->cfg.job, step, c->cfg.steps_per_epoch, c->cfg.total_steps);
}

/* async, with --staleness-lr: a push's weight. A push of M workers was
 * computed on values about M-1 pushes old, so its 1/tau staleness weight
 * averages about 1/(M-1); (M-1)/M on top makes the M pushes that carry a
 * sync step's samples move the values about as far as that step. And
 * staleness adds momentum of its own (Mitliagkas et al. 2016), so the store
 * runs less and the rate makes up for it (cfg.async_rate).
 * docs/design/consistency.md. */
static float s_async_weight(const ps_consistency_t *c, int64_t tau)
{
    const float w = ps_held_stale_weight(c->held, tau) * s_mean(c, 1);
    if (!c->cfg.job.staleness_lr || c->workers < 2) {
        return w;
    }
    const float rate = c->cfg.async_rate > 0 ? c->cfg.async_rate : 1.0f;
    return w * rate * (float)(c->workers - 1) / (float)c->workers;
}

/* Index of slot (step t, worker w). */
static size_t s_slot(const ps_consistency_t *c, int64_t t, int w)
{
    return ps_held_slot(c->held, t, w);
}

/* Non-zero when live worker w has pushed every key of step t (and its
 * rows push, in a job with rows). */
static int s_complete(const ps_consistency_t *c, int64_t t, int w)
{
    const size_t k = s_slot(c, t, w);
    return c->live[w] && ps_held_covered(c->held, k) == c->n &&
           ps_pieces_complete(c->pieces, k);
}

/* Gives a frame back (ops.release); NULL-safe. */
static void s_release(ps_consistency_t *c, void *frame)
{
    if (frame && c->cfg.ops.release) {
        c->cfg.ops.release(c->cfg.ops.ctx, frame);
    }
}

void ps_consistency_release_parts(ps_consistency_t *c, size_t k)
{
    ps_held_release(c->held, k);
    ps_pieces_release(c->pieces, k);
}

/* Where the store stands, for the pulls. */
static ps_pulls_at_t s_at(const ps_consistency_t *c)
{
    return (ps_pulls_at_t){c->version, c->done, c->ndone, ps_pieces_done(c->pieces)};
}

/* Answers and forgets the waiting pulls the current version satisfies, and
 * sends the applied chunks of those waiting for the step being applied. */
static void s_answer_pulls(ps_consistency_t *c)
{
    const ps_pulls_at_t at = s_at(c);
    ps_pulls_answer(c->pulls, &at);
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
static void s_ack(ps_consistency_t *c, const ps_request_t *r)
{
    c->cfg.ops.ack(c->cfg.ops.ctx, r->asker, r->range, c->version);
}

/*
 * Step t's lone push, when it can be used as the step's gradient as it
 * is, with no pass at all: one complete worker (from first on), its push in
 * one aligned part, unweighted. Else NULL (ps_held_sum sums).
 */
static const float *s_lone_push(const ps_consistency_t *c, int64_t t, int first)
{
    for (int w = first + 1; w < c->workers; w++) {
        if (s_complete(c, t, w)) {
            return NULL;
        }
    }
    return ps_held_lone(c->held, t, first, 0, c->n);
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
    s_answer_pulls(c);
}

/* Blocks of keys of an update at step t that the store left undone (they
 * would have made a parameter non-finite): counted as refused non-finite
 * pushes, and logged at the 1st, 2nd, 4th ... so a flood of them cannot
 * flood the log. The job goes on with the blocks' values as they were. */
static void s_undone(ps_consistency_t *c, int blocks, int64_t t)
{
    if (blocks == 0) {
        return;
    }
    const uint64_t n = ++c->stats.nonfinite;
    if ((n & (n - 1)) == 0) {
        ps_log_warn("the update of step %lld would make parameters NaN or infinite in %d "
                    "block%s of keys: left as they were (%llu non-finite so far)",
                    (long long)t, blocks, blocks == 1 ? "" : "s", (unsigned long long)n);
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
            ps_hist_add(&c->stats.staleness, t - ps_held_version(c->held, k));
        } else if (ps_held_covered(c->held, k) || ps_pieces_count(c->pieces, k)) {
            c->stats.dropped++; /* a late worker's partial push: its step is over */
        }
        ps_consistency_release_parts(c, k);
    }
    c->step_since = ps_now();
    s_answer_pulls(c);
    s_live_joins(c);
    if (c->cfg.ops.stepped) {
        c->cfg.ops.stepped(c->cfg.ops.ctx, c->version);
    }
}

/* Chunk ch of step t's sum is in: every live worker pushed its keys. */
static int s_chunk_in(const ps_consistency_t *c, int64_t t, size_t ch, uint64_t len)
{
    for (int w = 0; w < c->workers; w++) {
        if (c->live[w] && ps_held_chunk_got(c->held, s_slot(c, t, w), ch) != len) {
            return 0;
        }
    }
    return 1;
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
            if (!c->ndone && !ps_pieces_ndone(c->pieces)) {
                c->with[w] = c->live[w];
            }
            c->with[w] &= c->live[w];
            first = first < 0 && c->with[w] ? w : first;
            count += c->with[w];
        }
        if (count == 0) {
            return;
        }
        const float lr = s_lr(c, t), scale = s_mean(c, count);
        int applied = 0;
        for (size_t ch = 0; ch < c->nchunks; ch++) {
            uint64_t off, len = ps_consistency_chunk_len(c, ch, &off);
            if (c->done[ch] || !s_chunk_in(c, t, ch, len)) {
                continue;
            }
            const float *lone = count == 1 ? ps_held_lone(c->held, t, first, off, len) : NULL;
            ps_range_t r = {c->shard.begin + off, c->shard.begin + off + len};
            const float *g = lone ? lone : ps_held_sum(c->held, t, c->with, first, off, len,
                                                       c->scratch);
            ps_consistency_store_step(c, r, g, lr, scale, t + 1, t);
            c->done[ch] = 1;
            c->ndone++;
            applied = 1;
        }
        applied |= ps_pieces_apply(c->pieces, c->held, t, c->with, lr, scale) > 0;
        if (c->ndone == c->nchunks && ps_pieces_end(c->pieces, t, lr, scale)) {
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
static void s_try_apply(ps_consistency_t *c)
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
        const float lr = s_lr(c, t), scale = s_mean(c, complete);
        c->version = t + 1; /* what the values sent below carry; Adam's t */
        for (uint64_t off = 0; off < c->n; off += PS_CONSISTENCY_REPLY_KEYS) {
            uint64_t len = c->n - off < PS_CONSISTENCY_REPLY_KEYS ? c->n - off
                                                                 : PS_CONSISTENCY_REPLY_KEYS;
            ps_range_t chunk = {c->shard.begin + off, c->shard.begin + off + len};
            const float *sum =
                lone ? lone + off : ps_held_sum(c->held, t, c->with, first, off, len, c->scratch);
            ps_consistency_store_step(c, chunk, sum, lr, scale, c->version, t);
        }
        ps_pieces_apply(c->pieces, c->held, t, c->with, lr, scale);
        ps_pieces_end(c->pieces, t, lr, scale);
        ps_consistency_end_step(c, t);
    }
}

/* The parts below the modes: the pushes held, their rows, the pulls. */
static int s_new_parts(ps_consistency_t *c)
{
    const ps_consistency_config_t *cfg = &c->cfg;
    const ps_held_config_t held = {.workers = c->workers,
                                   .window = c->window,
                                   .nslots = c->nslots,
                                   .n = c->n,
                                   .chunk = c->chunk,
                                   .nchunks = c->nchunks,
                                   .staleness_lr = cfg->job.staleness_lr,
                                   .ops = cfg->ops};
    const ps_pieces_config_t pieces = {.rows = cfg->rows,
                                       .workers = c->workers,
                                       .nslots = c->nslots,
                                       .embed_dim = (size_t)cfg->job.embed_dim,
                                       .ops = cfg->ops};
    const ps_pulls_config_t pulls = {
        .store = c->store,
        .chunk = c->chunk,
        .workers = c->workers,
        .first = ps_consistency_first_worker(cfg->rank, c->workers),
        .asker_size = cfg->asker_size,
        /* a round's pulls: up to one per push message (kv.c), and a few more */
        .cap = (PS_CONSISTENCY_MAX_PARTS / 2 + 8) * c->workers,
        .ops = cfg->ops,
        .answered = &c->stats.pulls};
    int rc = ps_held_new(&c->held, &held);
    rc = rc ? rc : ps_pieces_new(&c->pieces, &pieces);
    return rc ? rc : ps_pulls_new(&c->pulls, &pulls);
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
    c->live = malloc((size_t)c->workers);
    c->join_at = malloc((size_t)c->workers * sizeof *c->join_at);
    c->hold = INT64_MAX;
    c->scratch = calloc(c->n ? c->n : 1, sizeof(float));
    c->chunk = ps_job_chunk_keys(&cfg->job);
    c->chunk = c->chunk && c->chunk <= PS_CONSISTENCY_REPLY_KEYS ? c->chunk
                                                                  : PS_CONSISTENCY_REPLY_KEYS;
    c->nchunks = (size_t)((c->n + c->chunk - 1) / c->chunk);
    c->done = calloc(c->nchunks ? c->nchunks : 1, 1);
    c->with = calloc((size_t)c->workers, 1);
    if (!c->live || !c->join_at || !c->scratch || !c->done || !c->with ||
        s_new_parts(c) != 0) {
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
    ps_held_destroy(&c->held);
    ps_pieces_destroy(&c->pieces);
    ps_pulls_destroy(&c->pulls);
    free(c->live);
    free(c->join_at);
    free(c->done);
    free(c->with);
    free(c->scratch);
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
        s_try_apply(c);
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
    s_ack(c, r);
    s_answer_pulls(c);
    return 0;
}

/* Stepped modes: whether push r may count toward a step. Returns 1 (it
 * may), 0 (acked and dropped: late for a step already applied) or a
 * refusal. */
static int s_admit_stepped(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    if (r->step < c->version && c->cfg.resent) {
        /* Sent again after a takeover, for a step applied before it. */
        c->stats.resent++;
        s_ack(c, r);
        return 0;
    }
    if (r->step < c->version && c->cfg.job.mode == PS_MODE_BACKUP) {
        /* Late for a step already applied with k pushes: drop, but ack so the
         * worker moves on to the current step. */
        c->stats.dropped++;
        s_ack(c, r);
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

/* Stepped modes. Returns 1 when r's frame is held, 0, or a refusal. */
static int s_push_stepped(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    const int admit = s_admit_stepped(c, r, why, cap);
    if (admit != 1) {
        return admit;
    }
    size_t k = s_slot(c, r->step, r->worker);
    int rc = ps_held_add(c->held, k, r->range.begin - c->shard.begin,
                         r->range.end - c->shard.begin, r->data, r->frame);
    if (rc != 0) {
        return s_refuse(why, cap, rc,
                        rc == PS_ESTATE ? "W%d pushed keys of step %lld twice"
                                        : "W%d split step %lld into too many pushes",
                        r->worker, (long long)r->step);
    }
    ps_held_note_version(c->held, k, r->version,
                         ps_held_covered(c->held, k) == ps_range_len(r->range) &&
                             ps_pieces_count(c->pieces, k) == 0);
    c->stats.pushes++;
    s_ack(c, r);
    s_try_apply(c);
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
    ps_consistency_store_step(c, r->range, g, s_lr(c, c->version / c->workers),
                              s_async_weight(c, tau), c->version + 1, c->version);
    ps_hist_add(&c->stats.staleness, tau);
    c->stats.steps_fewer += c->nlive < c->workers;
    c->version++;
    c->stats.pushes++;
    s_ack(c, r);
    if (c->cfg.ops.stepped) { /* a checkpoint may read the store now */
        c->cfg.ops.stepped(c->cfg.ops.ctx, c->version);
    }
    return 0;
}

/* What refuses any push before its mode sees it: no parameters yet, a
 * worker not live, a NaN or an infinity among the n floats of data.
 * Returns 0 or a refusal. */
static int s_refuse_push(ps_consistency_t *c, const ps_request_t *r, uint64_t n, char *why,
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

/* A push's outcome rc: 1 when its frame is held (released when its step
 * applies: the push returns 0), else its frame goes back now. */
static int s_keep_or_release(ps_consistency_t *c, const ps_request_t *r, int rc)
{
    if (rc == 1) {
        return 0;
    }
    s_release(c, r->frame);
    return rc;
}

int ps_consistency_push(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    assert(r->worker >= 0 && r->worker < c->workers);
    assert(r->range.begin < r->range.end && ps_range_contains(c->shard, r->range));
    int rc;
    if ((rc = s_refuse_push(c, r, ps_range_len(r->range), why, cap)) != 0) {
        /* rc says why */
    } else if (ps_job_is_stepped(&c->cfg.job)) {
        rc = s_push_stepped(c, r, why, cap);
    } else {
        rc = s_push_async(c, r);
    }
    return s_keep_or_release(c, r, rc);
}

/* A rows push of a stepped mode, held in its slot. Returns 1 when r's
 * frame is held, 0, or a refusal. */
static int s_push_rows_stepped(ps_consistency_t *c, const ps_request_t *r, char *why,
                               size_t cap)
{
    const int admit = s_admit_stepped(c, r, why, cap);
    if (admit != 1) {
        return admit;
    }
    const size_t k = s_slot(c, r->step, r->worker);
    const int first = ps_held_covered(c->held, k) == 0 && ps_pieces_count(c->pieces, k) == 0;
    if (ps_pieces_hold(c->pieces, k, r) != 0) {
        return s_refuse(why, cap, PS_ESTATE, "W%d pushed piece %d of the rows of step %lld twice",
                        r->worker, r->piece, (long long)r->step);
    }
    ps_held_note_version(c->held, k, r->version, first);
    c->stats.row_pushes++;
    c->stats.row_keys += r->nkeys;
    s_ack(c, r);
    s_try_apply(c);
    return 1;
}

/* A rows push of async: applied on arrival, weighted as a push is; the
 * version counts the dense pushes only. */
static int s_push_rows_async(ps_consistency_t *c, const ps_request_t *r)
{
    const int64_t tau = c->version - r->version;
    ps_pieces_apply_now(c->pieces, r, s_lr(c, c->version / c->workers), s_async_weight(c, tau),
                        c->version);
    c->stats.row_pushes++;
    c->stats.row_keys += r->nkeys;
    s_ack(c, r);
    return 0;
}

int ps_consistency_push_rows(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    assert(r->worker >= 0 && r->worker < c->workers);
    int rc;
    if (!c->cfg.rows) {
        rc = s_refuse(why, cap, PS_ESTATE, "this job has no embedding rows");
    } else if ((rc = s_refuse_push(c, r, r->nkeys * (uint64_t)c->cfg.job.embed_dim, why,
                                   cap)) != 0) {
        /* rc says why */
    } else if (ps_job_is_stepped(&c->cfg.job)) {
        rc = s_push_rows_stepped(c, r, why, cap);
    } else {
        rc = s_push_rows_async(c, r);
    }
    return s_keep_or_release(c, r, rc);
}

int ps_consistency_pull(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    const ps_pulls_at_t at = s_at(c);
    return ps_pulls_pull(c->pulls, &at, r, why, cap);
}

int ps_consistency_pull_rows(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    const ps_pulls_at_t at = s_at(c);
    return ps_pulls_pull_rows(c->pulls, &at, r, why, cap);
}

void ps_consistency_send_applied(ps_consistency_t *c)
{
    if (c->applied_unsent) {
        c->applied_unsent = 0;
        s_answer_pulls(c);
    }
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
        s_try_apply(c);
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
    ps_pulls_drop(c->pulls); /* their askers roll back too and ask again */
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

