/*
 * server/consistency_pull.c - pulls: answered at once when the version they
 * need is there, chunk by chunk while the step they need applies, else when
 * it comes (see consistency.h). A worker's pulls of keys for one version
 * are answered in the order they came: its client takes each server's
 * parts in key order, and a round may ask for its keys in several pulls,
 * each behind the pushes of its keys (worker/kv.c), so a later pull whose
 * chunks applied first waits for the earlier one. (Pulls for another
 * version, such as those a killed worker left, hold up nothing.) A rows
 * pull names its piece, so it waits for nothing but its piece's rows: in
 * sync and ssp, those of the step being applied once its piece is.
 * Between workers, each server takes them in turns from its own rank's.
 */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "server/consistency.h"
#include "server/consistency_impl.h"

/* The version of shard-relative key `key`'s values. */
static int64_t s_key_version(const ps_consistency_t *c, uint64_t key)
{
    return c->version + (c->ndone && c->done[key / c->chunk]);
}

/* Sends keys part, at version, to asker. */
static void s_send(ps_consistency_t *c, const void *asker, ps_range_t part, int64_t version)
{
    c->cfg.ops.reply(c->cfg.ops.ctx, asker, part, ps_store_values(c->store, part.begin),
                     version);
}

static const void *s_asker(const ps_consistency_t *c, int i)
{
    return c->askers + (size_t)i * c->asker_stride;
}

/* Sends every key of range to asker, in one reply (the server frames it). */
static void s_answer(ps_consistency_t *c, const void *asker, ps_range_t range)
{
    c->stats.pulls++;
    s_send(c, asker, range, c->version);
}

/* A pull for version + 1 while the step applies chunk by chunk: sends the
 * keys from range->begin on as far as their chunks are applied, in key order
 * (the worker takes each server's parts in key order, so its first layers
 * come first), and moves range->begin past them. Returns non-zero when
 * nothing is left. */
static int s_answer_applied(ps_consistency_t *c, const void *asker, ps_range_t *range)
{
    ps_range_t part = {range->begin, range->begin};
    while (part.end < range->end && s_key_version(c, part.end - c->shard.begin) > c->version) {
        const uint64_t next = (part.end - c->shard.begin) / c->chunk * c->chunk + c->chunk;
        part.end = c->shard.begin + next < range->end ? c->shard.begin + next : range->end;
    }
    if (part.end == part.begin) {
        return 0;
    }
    s_send(c, asker, part, c->version + 1);
    range->begin = part.end;
    c->stats.pulls += range->begin == range->end;
    return range->begin == range->end;
}

/* Answers what it can of pull range for min_version: non-zero when all of it. */
static int s_try_answer(ps_consistency_t *c, const void *asker, ps_range_t *range,
                        int64_t min_version)
{
    const int ready = ps_store_initialized(c->store);
    if (ready && c->version >= min_version) {
        s_answer(c, asker, *range);
        return 1;
    }
    return ready && c->ndone && min_version == c->version + 1 &&
           s_answer_applied(c, asker, range);
}

/* Whether a rows pull of piece `piece` for min_version can be answered,
 * and at which version: the version's, or the next one's once the step
 * being applied has applied that piece of its rows. */
static int s_rows_ready(const ps_consistency_t *c, int64_t min_version, int piece,
                        int64_t *version)
{
    *version = c->version;
    if (!ps_store_initialized(c->store)) {
        return 0;
    }
    if (c->version >= min_version) {
        return 1;
    }
    *version = min_version;
    return min_version == c->version + 1 && c->rows_done[piece];
}

/* A rows pull whose rows are there: answered, its keys' frame let go. */
static void s_answer_rows(ps_consistency_t *c, const void *asker, const void *keys,
                          uint64_t nkeys, void *frame, int64_t version)
{
    c->stats.pulls++;
    if (c->cfg.ops.reply_rows) {
        c->cfg.ops.reply_rows(c->cfg.ops.ctx, asker, keys, nkeys, version);
    }
    if (frame && c->cfg.ops.release) {
        c->cfg.ops.release(c->cfg.ops.ctx, frame);
    }
}

/* Answers waiting pull p (its asker at i) when it can: non-zero when all
 * of it is answered. */
static int s_try_pending(ps_consistency_t *c, int i, ps_pending_t *p)
{
    if (!p->keys) {
        return s_try_answer(c, s_asker(c, i), &p->range, p->min_version);
    }
    int64_t version;
    if (!s_rows_ready(c, p->min_version, p->piece, &version)) {
        return 0;
    }
    s_answer_rows(c, s_asker(c, i), p->keys, p->nkeys, p->frame, version);
    return 1;
}

/* Whether one of pending[0..n) is worker w's pull of keys for min_version. */
static int s_waits(const ps_pending_t *pending, int n, int w, int64_t min_version)
{
    for (int i = n - 1; i >= 0; i--) {
        if (pending[i].worker == w && pending[i].min_version == min_version &&
            !pending[i].keys) {
            return 1;
        }
    }
    return 0;
}

void ps_consistency_answer_pulls(ps_consistency_t *c)
{
    const int first = ps_consistency_first_worker(c->cfg.rank, c->workers);
    memset(c->waiting, 0, (size_t)c->workers * sizeof *c->waiting);
    int answered = 0;
    for (int k = 0; k < c->workers; k++) {
        const int w = (first + k) % c->workers;
        for (int i = 0; i < c->npending; i++) {
            ps_pending_t *p = &c->pending[i];
            if (p->worker != w) {
                continue;
            }
            if ((p->keys || !(c->waiting[w] && s_waits(c->pending, i, w, p->min_version))) &&
                s_try_pending(c, i, p)) {
                p->worker = -1; /* answered: forgotten below */
                answered++;
            } else {
                c->waiting[w]++; /* kept: its later pulls for this version wait */
            }
        }
    }
    if (answered == 0) {
        return;
    }
    int kept = 0;
    for (int i = 0; i < c->npending; i++) {
        if (c->pending[i].worker < 0) {
            continue;
        }
        if (kept != i) {
            c->pending[kept] = c->pending[i];
            memcpy(c->askers + (size_t)kept * c->asker_stride, s_asker(c, i), c->asker_stride);
        }
        kept++;
    }
    c->npending = kept;
}

void ps_consistency_send_applied(ps_consistency_t *c)
{
    if (c->applied_unsent) {
        c->applied_unsent = 0;
        ps_consistency_answer_pulls(c);
    }
}

/* Keeps pull p (asked by asker) until its version comes. Returns 0 or
 * PS_ENOMEM (too many waiting) with a reason in why. */
static int s_wait(ps_consistency_t *c, const ps_pending_t *p, const void *asker, char *why,
                  size_t cap)
{
    if (c->npending == c->cap_pending) {
        snprintf(why, cap, "too many pulls waiting (%d)", c->cap_pending);
        return PS_ENOMEM;
    }
    c->pending[c->npending] = *p;
    memcpy(c->askers + (size_t)c->npending * c->asker_stride, asker, c->cfg.asker_size);
    c->npending++;
    return 0;
}

int ps_consistency_pull(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    if (r->worker < 0 || r->worker >= c->workers) {
        snprintf(why, cap, "W%d is not a worker of this job", r->worker);
        return PS_ENOENT;
    }
    /* behind an earlier pull of this worker's for this version */
    const int behind = s_waits(c->pending, c->npending, r->worker, r->step);
    ps_range_t left = r->range; /* what the chunks applied so far do not answer */
    if (!behind && s_try_answer(c, r->asker, &left, r->step)) {
        return 0;
    }
    return s_wait(c, &(ps_pending_t){left, r->step, r->worker, NULL, 0, NULL, 0}, r->asker,
                  why, cap);
}

int ps_consistency_pull_rows(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap)
{
    if (r->worker < 0 || r->worker >= c->workers || !r->keys || !r->nkeys) {
        /* a waiting pull with no keys would be taken for a range's */
        snprintf(why, cap, r->nkeys ? "W%d is not a worker of this job" : "a rows pull of no keys",
                 r->worker);
        if (r->frame && c->cfg.ops.release) {
            c->cfg.ops.release(c->cfg.ops.ctx, r->frame);
        }
        return PS_ENOENT;
    }
    int64_t version;
    if (s_rows_ready(c, r->step, r->piece, &version)) {
        s_answer_rows(c, r->asker, r->keys, r->nkeys, r->frame, version);
        return 0;
    }
    const int rc = s_wait(c, &(ps_pending_t){{0, 0}, r->step, r->worker, r->keys, r->nkeys,
                                             r->frame, r->piece}, r->asker, why, cap);
    if (rc != 0 && r->frame && c->cfg.ops.release) {
        c->cfg.ops.release(c->cfg.ops.ctx, r->frame);
    }
    return rc;
}
