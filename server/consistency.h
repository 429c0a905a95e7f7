/*
 * server/consistency.h - when pushes are applied and pulls answered: the
 * consistency modes as a state machine, with no sockets and no messages.
 *
 * Requests go in (init, push, pull: the worker, its step, the version its
 * gradient was computed on, the keys, the gradient bytes); what to send comes
 * out through the caller's callbacks (ack, a part of a pull's answer, a
 * gradient no longer read) and refusals as a PS_E* with a reason. Updates are
 * applied to the borrowed store (server/store.h).
 *
 * sync:     pushes for step t are held per worker; when every live worker has
 *           pushed every key of the shard for t, they are summed in
 *           worker-rank order (so runs are bitwise reproducible whatever the
 *           arrival order), the mean is applied once, the version becomes
 *           t+1, and pulls waiting for version >= t+1 are answered once the
 *           update is done.
 * ssp:s     as sync, but steps version .. version+s are collected at once.
 * sync:k/n: a step applies once k live workers pushed all of it (their mean);
 *           later pushes for an applied step are acked and dropped (counted),
 *           a partial one held when the step applies is dropped too.
 * async:    each push is applied on arrival (version += 1); its staleness
 *           (version applied at - version computed on) is recorded and, with
 *           staleness_lr, weights the gradient by 1/staleness.
 * A worker's share of a step may come in parts (layer by layer), at most
 * PS_CONSISTENCY_MAX_PARTS, none overlapping another.
 *
 * Embedding rows (cfg.rows): a worker's share of a step on this server is
 * also one rows push (its keys here and their gradient, possibly none),
 * held with the step's other parts and applied when the step applies,
 * through ops.apply_rows, summed over the same workers in the same order
 * with the same weights (ps_optim_sum_rows), at the same lr and scale; a
 * rows pull waits for its version as a pull does and is answered through
 * ops.reply_rows. Async applies a rows push on arrival.
 *
 * Not thread-safe: one thread (the server's loop) makes every call, and the
 * callbacks run on it, inside the call.
 */
#ifndef PS_SERVER_CONSISTENCY_H
#define PS_SERVER_CONSISTENCY_H

#include <stddef.h>
#include <stdint.h>

#include "common/hist.h"
#include "common/job.h"
#include "proto/range.h"
#include "kernels/optim.h"
#include "server/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most separate pushes that may make up one worker's share of a step (one per
 * chunk, and per tensor when gradients are pushed layer by layer: a worker
 * sends at most 128 chunk messages per push request). */
enum { PS_CONSISTENCY_MAX_PARTS = 256 };

/* Keys per chunk of a step's update (and per buffer of a reply's copy): the
 * store's chunks. A pull is answered with one reply call for its whole range
 * after the update, not a part per chunk as the update reaches it: the
 * server sends it as one message of a frame per chunk (ZeroMQ sends a
 * multipart message only once all of it is queued, so a message per chunk
 * was what let the update overlap the transport), and each message costs
 * wake-ups on both sides: on 2 cores a 1 MiB pull in one message ran
 * 2,100-2,400 rounds/s against 1,700-1,900 in four. */
enum { PS_CONSISTENCY_REPLY_KEYS = PS_STORE_CHUNK_KEYS };


/* What comes out, called back on the caller's thread inside the calls below. */
typedef struct {
    void *ctx; /* first argument of each callback */
    /* Acknowledge the init or push of `asker` for keys `range`; version: the
     * version now (a stepped push is acked before its step may apply, an
     * async push after its update). */
    void (*ack)(void *ctx, const void *asker, ps_range_t range, int64_t version);
    /* Send keys `part` of the pull of `asker` at `version`: values (borrowed
     * for the call) are those of its first key's store chunk, the others are
     * read from the store (server/store.h). The consistency sends a pull's
     * whole range in one call; a caller may split it into messages. */
    void (*reply)(void *ctx, const void *asker, ps_range_t part, const float *values,
                  int64_t version);
    /* A push's frame (ps_request_t.frame) is no longer read. NULL: nothing to do. */
    void (*release)(void *ctx, void *frame);
    /* A step (async: a push) was applied, the store is at version (stepped
     * modes: the cut after step version-1): a checkpoint may read it now.
     * NULL: nothing. */
    void (*stepped)(void *ctx, int64_t version);
    /* An update is about to be applied: ps_store_step(store, range, grad,
     * lr, scale, version) follows (a hot replica applies the same with
     * ps_consistency_replay). NULL: nothing. */
    void (*update)(void *ctx, ps_range_t range, const float *grad, float lr, float scale,
                   int64_t version);
    /* cfg.rows: apply the rows gradient of step t: keys[0 .. n) ascending by hash,
     * grads n rows of the job's embed_dim floats (the sum over the step's
     * rows pushes, in worker-rank order, each weighted as its push), times
     * scale, at lr. Async: one push, on arrival. Both arrays borrowed for
     * the call, aligned. A stepped step's rows come a piece of the rows
     * range at a time (last = 0), as each piece's pushes are in, then once
     * with n = 0 and last = 1 when the step's dense chunks and rows are all
     * applied (a replica ends the step on that). Async: last = 1. */
    void (*apply_rows)(void *ctx, const uint64_t *keys, const float *grads, uint64_t n,
                       float lr, float scale, int64_t t, int last);
    /* cfg.rows: send asker the rows of keys[0 .. nkeys) (any alignment) at
     * version. */
    void (*reply_rows)(void *ctx, const void *asker, const void *keys, uint64_t nkeys,
                       int64_t version);
} ps_consistency_ops_t;

typedef struct {
    ps_job_t job;            /* mode, staleness, backup_k, staleness_lr, lr schedule */
    int workers;             /* N: ranks 0..N-1, all live at first */
    int rank;                /* the server's: waiting pulls are answered a worker at a
                                time from worker rank % N on */
    int64_t steps_per_epoch; /* for the lr schedule */
    int64_t total_steps;     /* for the lr schedule */
    double report_missing;   /* seconds a step waits before ps_consistency_tick logs who for */
    size_t asker_size;       /* bytes of a request's asker (copied while its pull waits) */
    int resent;              /* workers may push a step again after a takeover (hot
                                replicas): a push of a step already applied is acked
                                and dropped (stats.resent) */
    float async_rate;        /* async: the rate's factor for the lowered momentum the store
                                runs (ps_job_async_momentum); 0 is taken as 1 */
    int rows;                /* non-zero: the shard has embedding rows, and a worker's
                                share of each step includes a rows push of each piece of
                                row_range */
    ps_rowrange_t row_range; /* rows: the hashes this server holds (its pieces: proto/range.h) */
    ps_consistency_ops_t ops;
} ps_consistency_config_t;

/* One request. The caller has checked that worker is in 0..N-1, that range is
 * non-empty and inside the shard, and that data holds its keys. */
typedef struct {
    int worker;        /* sender's rank */
    int64_t step;      /* push: the step it belongs to; pull: the least version wanted */
    int64_t version;   /* push: the version its gradient was computed on */
    ps_range_t range;  /* keys (global) */
    const void *data;  /* init, push: ps_range_len(range) floats, any alignment;
                          borrowed: init for the call, push until frame is released */
    void *frame;       /* push, rows pull: the caller's handle on data (and keys), given
                          to ops.release */
    const void *asker; /* who asked: asker_size bytes handed to ops.ack / ops.reply;
                          borrowed for the call, copied while a pull waits */
    const void *keys;  /* rows push and pull: nkeys uint64, strictly ascending by hash, this
                          server's (the caller checked); borrowed until frame is
                          released. A rows push's data: their gradient */
    uint64_t nkeys;
    int piece;         /* rows push and pull: the piece of the server's rows range its keys
                          lie in (proto/range.h), 0 .. PS_RANGE_ROW_PIECES - 1 */
} ps_request_t;

/* Telemetry, reported at the end of the job. */
typedef struct {
    uint64_t pushes;     /* pushes accepted */
    uint64_t row_pushes; /* rows pushes accepted */
    uint64_t row_keys;   /* the keys they named */
    uint64_t pulls;      /* pulls answered */
    uint64_t dropped;    /* sync:k/n: late pushes dropped */
    uint64_t nonfinite;  /* pushes refused for a NaN or an infinity */
    ps_hist_t staleness; /* versions between computing and applying each gradient */
    int64_t steps_fewer; /* steps (async: pushes) applied with fewer live workers than N */
    uint64_t resent;     /* pushes of a step applied before a takeover, acked and dropped */
} ps_consistency_stats_t;

typedef struct ps_consistency ps_consistency_t;

/* The worker a server of rank (-1: a spare) answers first of workers, the
 * others after it in turn: when a chunk applies on every server at about
 * the same time, each server's replies start down a different worker's
 * link, not all down the same one while the others idle. */
static inline int ps_consistency_first_worker(int rank, int workers)
{
    return rank > 0 ? rank % workers : 0;
}

/*
 * A state machine at version 0 for the mode of cfg->job over store (borrowed;
 * must outlive it). Returns 0 or PS_ENOMEM (or PS_EINVAL for workers < 1).
 * Caller owns *out; destroy with ps_consistency_destroy().
 */
int ps_consistency_new(ps_consistency_t **out, const ps_consistency_config_t *cfg,
                       ps_store_t *store);

/* Releases every held frame (ops.release) and frees; NULL-safe; sets *c to NULL. */
void ps_consistency_destroy(ps_consistency_t **c);

/*
 * Sets which workers are live: live[w] non-zero for each of the N ranks (a
 * worker joining at a later step stays out until it; one not in live no
 * longer joins; when only such joiners remain, the steps before the first
 * one's are skipped: no update, the version jumps there). Steps need the
 * live workers only (sync:k/n: k of them, or all when fewer
 * are live); the held pushes of the others are dropped when their step
 * applies, and their new pushes refused. A step the change completes applies
 * now. Returns 0 or PS_EINVAL (no worker live).
 */
int ps_consistency_set_workers(ps_consistency_t *c, const unsigned char *live);

/*
 * Agreeing a future step with the other servers (a worker joins, a timed
 * checkpoint): from now on no step past the one being collected is applied
 * (version stops at most one above what this returns) until
 * ps_consistency_join(). Returns the version now. Each server answers its
 * version V; the scheduler picks J = max(V) + 1, a step none has applied.
 */
int64_t ps_consistency_hold(ps_consistency_t *c);

/*
 * Ends the hold; worker (-1: none), not live now, is live from version step
 * on (stepped modes; async: at once): steps before it complete without it,
 * step and later ones wait for its pushes. Steps the hold stopped apply now.
 * Returns 0, or PS_ESTATE (worker live already, or step already passed: the
 * hold is ended all the same).
 */
int ps_consistency_join(ps_consistency_t *c, int worker, int64_t step);

/* Initial values from worker 0, copied into the store; when the shard is
 * complete, waiting pulls are answered. Returns 0 (acked) or PS_ESTATE with
 * a reason in why. */
int ps_consistency_init(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap);

/*
 * A push of gradient r->data for r->step (stepped modes) or now (async).
 * Takes ownership of r->frame whatever it returns: ops.release(frame) comes
 * once, when the step applies or is abandoned, or before return. Returns 0
 * (acked, or a late sync:k/n push acked and dropped) or, with a reason in
 * why: PS_ESTATE (before initialisation, a step outside the ones being
 * collected, keys pushed twice for a step), PS_ENOMEM (too many parts),
 * PS_ENOENT (the worker is not live), PS_ENONFINITE (a NaN or an infinity in
 * the gradient: never counts toward a step, stats.nonfinite counts it).
 */
int ps_consistency_push(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap);

/* A pull of r->range at version >= r->step: answered now if the store is
 * initialised and at that version, else when it gets there. Returns 0 or
 * PS_ENOMEM (too many pulls waiting) with a reason in why. */
int ps_consistency_pull(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap);


/* cfg.rows: a rows push (r->keys, r->nkeys, gradient r->data) of r->step, as
 * ps_consistency_push() takes a push (the same ownership of r->frame and
 * the same refusals, and PS_ESTATE for a second rows push of a step). */
int ps_consistency_push_rows(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap);

/* cfg.rows: a rows pull of r->keys at version >= r->step, answered through
 * ops.reply_rows now or when the version comes; r->frame (holding the keys)
 * is released once answered or forgotten. Returns 0, or with a reason in why
 * (r->frame released): PS_ENOMEM (too many pulls waiting), PS_ENOENT (not a
 * worker, or no keys). */
int ps_consistency_pull_rows(ps_consistency_t *c, const ps_request_t *r, char *why, size_t cap);

/* Sends the waiting pulls the chunks applied since the last call (sync and
 * ssp, chunked rounds). The server calls it at the end of each turn of its
 * loop: chunks applied together go in one part, and a part per chunk only
 * when the chunks come one at a time (a slow link, where it keeps both
 * directions busy). */
void ps_consistency_send_applied(ps_consistency_t *c);

/* Call now and then: logs which live workers a step has waited on for
 * cfg->report_missing seconds (at most once per that period). */
void ps_consistency_tick(ps_consistency_t *c);

/* Who the step being collected waits for (stepped modes, once some worker
 * pushed to it): the live workers whose push of it is incomplete, the first
 * cap of them in ranks, in rank order; *waited: seconds since the step
 * began collecting. Returns their number (0: nobody is waited for). */
int ps_consistency_missing(const ps_consistency_t *c, int *ranks, int cap, double *waited);

/* Pulls waiting for a newer version (the server's queue). */
int ps_consistency_pending_pulls(const ps_consistency_t *c);

/* Most push frames held at once (ops.release not yet called): a caller that
 * keeps frames in a table of its own sizes it to this, plus the push in hand. */
int ps_consistency_max_held(const ps_consistency_t *c);

/* Resuming from a checkpoint of version `version` (the store was loaded and
 * is initialised): the version, the update count and the lr schedule's step
 * continue from there. Call before any push. Returns 0 or PS_ESTATE (store
 * not initialised, or a step was already applied). */
int ps_consistency_resume(ps_consistency_t *c, int64_t version);

/* Failover (a lost server was replaced; the store was reset and reloaded
 * from checkpoint `version`): every held push is released and every waiting
 * pull forgotten unanswered (their workers roll back and ask again), and the
 * version becomes `version`. The live workers stay, and a worker joining at
 * a later step is live now (it rolls back with them); a hold
 * (ps_consistency_hold) ends. Returns 0 or PS_ESTATE (store not
 * initialised). */
int ps_consistency_rollback(ps_consistency_t *c, int64_t version);

/* Updates applied so far. */
int64_t ps_consistency_version(const ps_consistency_t *c);

/* Borrowed; valid until ps_consistency_destroy(). */
const ps_consistency_stats_t *ps_consistency_stats(const ps_consistency_t *c);

/*
 * Hot replicas. A takeover or a failover without rollback: every held push
 * and waiting pull is forgotten (the workers send the step again), the
 * store, the version and the chunks already applied stay. Returns 0.
 */
int ps_consistency_forget(ps_consistency_t *c);

/* Where the store stands: *version, and (sync) in done[0 .. cap) which
 * chunks of step *version are applied already, then (rows) which pieces of
 * its rows. Returns the chunks of the shard plus the pieces (0 outside sync
 * and ssp: no chunk is ever half a step). */
size_t ps_consistency_cut(const ps_consistency_t *c, int64_t *version, unsigned char *done,
                          size_t cap);

/* A replica's store was filled from its primary's cut: the version and the
 * chunks and pieces done (n of them, or 0) continue from there. Returns 0
 * or PS_ESTATE (store not initialised, n not the shard's chunks and pieces). */
int ps_consistency_restore(ps_consistency_t *c, int64_t version, const unsigned char *done,
                           size_t n);

/* The live workers (live[w] non-zero) and the version each joining worker
 * is live from (join_at[w], -1: none), into arrays of N. Returns N. */
int ps_consistency_members(const ps_consistency_t *c, unsigned char *live, int64_t *join_at);

/* A replica takes its primary's live workers and joiners (as
 * ps_consistency_members gives them; n of each) and its version then (a
 * replica behind it at a step boundary goes there: the primary skipped
 * steps no worker was live for). Returns 0 or PS_EINVAL (n is not N, or no
 * worker live nor joining). */
int ps_consistency_set_members(ps_consistency_t *c, const unsigned char *live,
                               const int64_t *join_at, int n, int64_t version);

/* A replica applies its primary's update (ops.update's arguments): the same
 * store step, and the version and chunks move as the primary's did (at a
 * step boundary, over steps the primary skipped). Returns 0 or PS_ESTATE
 * (not the next update: out of order, or a chunk twice). */
int ps_consistency_replay(ps_consistency_t *c, ps_range_t range, const float *grad, float lr,
                          float scale, int64_t version);

/* cfg.rows: a replica applies its primary's rows update of step t (async:
 * at version t), ops.apply_rows's arguments, through ops.apply_rows. In the
 * stepped modes a piece's update (keys in one piece of cfg.row_range) marks
 * the piece applied, and the step's last update (last non-zero, after the
 * dense chunks) ends the step. Returns 0 or PS_ESTATE (no rows, or not
 * where the primary's update was). */
int ps_consistency_replay_rows(ps_consistency_t *c, const uint64_t *keys, const float *grads,
                               uint64_t n, float lr, float scale, int64_t t, int last);

#ifdef __cplusplus
}
#endif
#endif
