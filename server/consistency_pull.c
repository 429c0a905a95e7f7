/*
 * server/consistency_pull.c - the consistency's pulls (see
 * consistency_pull.h). A worker's pulls of keys for one version
 * are answered in the order they came: its client takes each server's
 * parts in key order, and a round may ask for its keys in several pulls,
 * each behind the pushes of its keys (worker/kv.c), so a later pull whose
 * chunks applied first waits for the earlier one. (Pulls for another
 * version, such as those a killed worker left, hold up nothing.) A rows
 * pull names its piece, so it waits for nothing but its piece's rows: in
 * sync and ssp, those of the step being applied once its piece is.
 * Between workers, each server takes them in turns from its own rank's.
 */
#include "server/consistency_pull.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* A pull waiting for a newer version; its asker is kept beside, in askers. */
typedef struct {
    ps_range_t range;    /* what */
    int64_t min_version; /* answered once version >= this */
    int worker;          /* who asked */
    const void *keys;    /* a rows pull: its keys, held in frame; NULL for a range */
    uint64_t nkeys;
    void *frame;
    int piece;           /* a rows pull: the piece of the rows range its keys lie in */
} ps_pending_t;

struct ps_pulls {
    ps_pulls_config_t cfg;
    ps_range_t shard;      /* the store's keys */
    ps_pending_t *pending; /* cfg.cap */
    unsigned char *askers; /* cfg.cap blobs of asker_stride bytes, pending's askers */
    size_t asker_stride;   /* asker_size rounded up to keep each blob aligned */
    int npending;
    int *waiting;          /* workers: scratch of ps_pulls_answer */
};

int ps_pulls_new(ps_pulls_t **out, const ps_pulls_config_t *cfg)
{
    *out = NULL;
    ps_pulls_t *p = calloc(1, sizeof *p);
    if (!p) {
        return PS_ENOMEM;
    }
    p->cfg = *cfg;
    p->shard = ps_store_shard(cfg->store);
    p->asker_stride = (cfg->asker_size + 15) / 16 * 16;
    p->pending = calloc((size_t)cfg->cap, sizeof *p->pending);
    p->askers = calloc((size_t)cfg->cap, p->asker_stride ? p->asker_stride : 1);
    p->waiting = calloc((size_t)cfg->workers, sizeof *p->waiting);
    if (!p->pending || !p->askers || !p->waiting) {
        ps_pulls_destroy(&p);
        return PS_ENOMEM;
    }
    *out = p;
    return 0;
}

void ps_pulls_destroy(ps_pulls_t **pp)
{
    ps_pulls_t *p = *pp;
    if (!p) {
        return;
    }
    if (p->pending) {
        ps_pulls_drop(p);
    }
    free(p->pending);
    free(p->askers);
    free(p->waiting);
    free(p);
    *pp = NULL;
}

/* Gives a frame back (ops.release); NULL-safe. */
static void s_release(ps_pulls_t *p, void *frame)
{
    if (frame && p->cfg.ops.release) {
        p->cfg.ops.release(p->cfg.ops.ctx, frame);
    }
}

void ps_pulls_drop(ps_pulls_t *p)
{
    for (int i = 0; i < p->npending; i++) {
        s_release(p, p->pending[i].frame);
    }
    p->npending = 0;
}

int ps_pulls_waiting(const ps_pulls_t *p)
{
    return p->npending;
}

int ps_pulls_cap(const ps_pulls_t *p)
{
    return p->cfg.cap;
}

/* The version of shard-relative key `key`'s values. */
static int64_t s_key_version(const ps_pulls_t *p, const ps_pulls_at_t *at, uint64_t key)
{
    return at->version + (at->ndone && at->done[key / p->cfg.chunk]);
}

/* Sends keys part, at version, to asker. */
static void s_send(ps_pulls_t *p, const void *asker, ps_range_t part, int64_t version)
{
    p->cfg.ops.reply(p->cfg.ops.ctx, asker, part, ps_store_values(p->cfg.store, part.begin),
                     version);
}

static const void *s_asker(const ps_pulls_t *p, int i)
{
    return p->askers + (size_t)i * p->asker_stride;
}

/* Sends every key of range to asker, in one reply (the server frames it). */
static void s_answer(ps_pulls_t *p, const void *asker, ps_range_t range, int64_t version)
{
    (*p->cfg.answered)++;
    s_send(p, asker, range, version);
}

/* A pull for version + 1 while the step applies chunk by chunk: sends the
 * keys from range->begin on as far as their chunks are applied, in key order
 * (the worker takes each server's parts in key order, so its first layers
 * come first), and moves range->begin past them. Returns non-zero when
 * nothing is left. */
static int s_answer_applied(ps_pulls_t *p, const ps_pulls_at_t *at, const void *asker,
                            ps_range_t *range)
{
    const uint64_t base = p->shard.begin, chunk = p->cfg.chunk;
    ps_range_t part = {range->begin, range->begin};
    while (part.end < range->end && s_key_version(p, at, part.end - base) > at->version) {
        const uint64_t next = (part.end - base) / chunk * chunk + chunk;
        part.end = base + next < range->end ? base + next : range->end;
    }
    if (part.end == part.begin) {
        return 0;
    }
    s_send(p, asker, part, at->version + 1);
    range->begin = part.end;
    *p->cfg.answered += range->begin == range->end;
    return range->begin == range->end;
}

/* Answers what it can of pull range for min_version: non-zero when all of it. */
static int s_try_answer(ps_pulls_t *p, const ps_pulls_at_t *at, const void *asker,
                        ps_range_t *range, int64_t min_version)
{
    const int ready = ps_store_initialized(p->cfg.store);
    if (ready && at->version >= min_version) {
        s_answer(p, asker, *range, at->version);
        return 1;
    }
    return ready && at->ndone && min_version == at->version + 1 &&
           s_answer_applied(p, at, asker, range);
}

/* Whether a rows pull of piece `piece` for min_version can be answered,
 * and at which version: the version's, or the next one's once the step
 * being applied has applied that piece of its rows. */
static int s_rows_ready(const ps_pulls_t *p, const ps_pulls_at_t *at, int64_t min_version,
                        int piece, int64_t *version)
{
    *version = at->version;
    if (!ps_store_initialized(p->cfg.store)) {
        return 0;
    }
    if (at->version >= min_version) {
        return 1;
    }
    *version = min_version;
    return min_version == at->version + 1 && at->rows_done[piece];
}

/* A rows pull whose rows are there: answered, its keys' frame let go. */
static void s_answer_rows(ps_pulls_t *p, const void *asker, const void *keys, uint64_t nkeys,
                          void *frame, int64_t version)
{
    (*p->cfg.answered)++;
    if (p->cfg.ops.reply_rows) {
        p->cfg.ops.reply_rows(p->cfg.ops.ctx, asker, keys, nkeys, version);
    }
    s_release(p, frame);
}

/* Answers waiting pull q (its asker at i) when it can: non-zero when all
 * of it is answered. */
static int s_try_pending(ps_pulls_t *p, const ps_pulls_at_t *at, int i, ps_pending_t *q)
{
    if (!q->keys) {
        return s_try_answer(p, at, s_asker(p, i), &q->range, q->min_version);
    }
    int64_t version;
    if (!s_rows_ready(p, at, q->min_version, q->piece, &version)) {
        return 0;
    }
    s_answer_rows(p, s_asker(p, i), q->keys, q->nkeys, q->frame, version);
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

/* Forgets the answered pulls (worker -1), keeping the others in order. */
static void s_compact(ps_pulls_t *p)
{
    int kept = 0;
    for (int i = 0; i < p->npending; i++) {
        if (p->pending[i].worker < 0) {
            continue;
        }
        if (kept != i) {
            p->pending[kept] = p->pending[i];
            memcpy(p->askers + (size_t)kept * p->asker_stride, s_asker(p, i), p->asker_stride);
        }
        kept++;
    }
    p->npending = kept;
}

void ps_pulls_answer(ps_pulls_t *p, const ps_pulls_at_t *at)
{
    const int n = p->cfg.workers;
    memset(p->waiting, 0, (size_t)n * sizeof *p->waiting);
    int answered = 0;
    for (int k = 0; k < n; k++) {
        const int w = (p->cfg.first + k) % n;
        for (int i = 0; i < p->npending; i++) {
            ps_pending_t *q = &p->pending[i];
            if (q->worker != w) {
                continue;
            }
            if ((q->keys || !(p->waiting[w] && s_waits(p->pending, i, w, q->min_version))) &&
                s_try_pending(p, at, i, q)) {
                q->worker = -1; /* answered: forgotten below */
                answered++;
            } else {
                p->waiting[w]++; /* kept: its later pulls for this version wait */
            }
        }
    }
    if (answered) {
        s_compact(p);
    }
}

/* Keeps pull q (asked by asker) until its version comes. Returns 0 or
 * PS_ENOMEM (too many waiting) with a reason in why. */
static int s_wait(ps_pulls_t *p, const ps_pending_t *q, const void *asker, char *why,
                  size_t cap)
{
    if (p->npending == p->cfg.cap) {
        snprintf(why, cap, "too many pulls waiting (%d)", p->cfg.cap);
        return PS_ENOMEM;
    }
    p->pending[p->npending] = *q;
    memcpy(p->askers + (size_t)p->npending * p->asker_stride, asker, p->cfg.asker_size);
    p->npending++;
    return 0;
}

int ps_pulls_pull(ps_pulls_t *p, const ps_pulls_at_t *at, const ps_request_t *r, char *why,
                  size_t cap)
{
    if (r->worker < 0 || r->worker >= p->cfg.workers) {
        snprintf(why, cap, "W%d is not a worker of this job", r->worker);
        return PS_ENOENT;
    }
    /* behind an earlier pull of this worker's for this version */
    const int behind = s_waits(p->pending, p->npending, r->worker, r->step);
    ps_range_t left = r->range; /* what the chunks applied so far do not answer */
    if (!behind && s_try_answer(p, at, r->asker, &left, r->step)) {
        return 0;
    }
    return s_wait(p, &(ps_pending_t){left, r->step, r->worker, NULL, 0, NULL, 0}, r->asker,
                  why, cap);
}

int ps_pulls_pull_rows(ps_pulls_t *p, const ps_pulls_at_t *at, const ps_request_t *r,
                       char *why, size_t cap)
{
    if (r->worker < 0 || r->worker >= p->cfg.workers || !r->keys || !r->nkeys) {
        /* a waiting pull with no keys would be taken for a range's */
        snprintf(why, cap, r->nkeys ? "W%d is not a worker of this job" : "a rows pull of no keys",
                 r->worker);
        s_release(p, r->frame);
        return PS_ENOENT;
    }
    int64_t version;
    if (s_rows_ready(p, at, r->step, r->piece, &version)) {
        s_answer_rows(p, r->asker, r->keys, r->nkeys, r->frame, version);
        return 0;
    }
    const int rc = s_wait(p, &(ps_pending_t){{0, 0}, r->step, r->worker, r->keys, r->nkeys,
                                             r->frame, r->piece}, r->asker, why, cap);
    if (rc != 0) {
        s_release(p, r->frame);
    }
    return rc;
}
