/*
 * server/consistency_impl.h - private: the consistency state machine's
 * state, shared by the files of the one module: consistency.c (the modes),
 * consistency_pull.c (pulls), consistency_rows.c (embedding rows),
 * consistency_replica.c (a replica's replay) and consistency_report.c (what
 * it tells the server's loop and the end-of-job report). Only those
 * include it.
 */
#ifndef PS_SERVER_CONSISTENCY_IMPL_H
#define PS_SERVER_CONSISTENCY_IMPL_H

#include <string.h>

#include "server/consistency.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One push held for a step: its keys and its gradient, read in place. */
typedef struct {
    uint64_t begin, end; /* keys relative to the shard */
    const void *data;    /* the gradient, any alignment; valid until frame is released */
    void *frame;         /* the caller's handle on data */
} ps_part_t;

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

struct ps_consistency {
    ps_consistency_config_t cfg;
    ps_store_t *store;     /* borrowed */
    ps_range_t shard;      /* the store's keys */
    uint64_t n;            /* keys in the shard */
    int workers;           /* N */
    unsigned char *live;   /* N: non-zero for the workers steps wait for */
    int nlive;
    int64_t *join_at;      /* N: the version from which a joining worker is live; -1 none */
    int64_t hold;          /* stepped modes: no step >= hold is applied (ps_consistency_hold) */
    /* Stepped modes collect each step's pushes per worker before applying.
     * Step t lives in window slot t % window; slot (t, w) below means index
     * (t % window) * workers + w. */
    int window;            /* steps collected at once: s+1 under ssp:s, else 1 */
    size_t nslots;         /* window*workers (1 when not stepped) */
    ps_part_t *parts;      /* nslots*PS_CONSISTENCY_MAX_PARTS: the pushes held so far */
    int *nparts;           /* nslots */
    uint64_t *covered;     /* nslots: keys pushed so far */
    /* cfg.rows: a worker's rows push of a step comes as one message per
     * piece of the server's rows range (PS_RANGE_ROW_PIECES); slot k's
     * piece q is index k * PS_RANGE_ROW_PIECES + q. */
    ps_rows_part_t *rows;  /* nslots*pieces: each slot's rows push of each piece */
    void **rows_frame;     /* nslots*pieces: its frame; NULL = none held */
    unsigned char *rows_got; /* nslots*pieces: that piece's push came */
    int *rows_count;       /* nslots: pieces pushed so far */
    /* Sync and ssp apply a step's piece of rows once every worker of c->with
     * pushed it, and answer the next step's pulls of that piece at once. */
    unsigned char rows_done[PS_RANGE_ROW_PIECES]; /* applied for step `version` */
    int rows_ndone;        /* pieces of rows_done set */
    ps_rows_part_t *rows_with; /* workers: a step's rows pushes in rank order (scratch) */
    uint64_t *sum_keys;    /* a step's rows sum (ps_optim_sum_rows), grown as needed */
    float *sum_grads;
    uint64_t sum_cap;      /* keys they hold */
    int64_t *computed_on;  /* nslots: version the gradient was computed on */
    /* Sync and ssp apply the step being collected chunk by chunk (chunk
     * keys from the shard's start; the last may be shorter): a chunk every
     * live worker has pushed whole is applied at once, and the pulls get
     * its values, while the other chunks still come in. */
    uint64_t chunk;        /* keys per chunk */
    size_t nchunks;        /* chunks of the shard */
    uint32_t *chunk_got;   /* nslots*nchunks: keys of each chunk pushed so far */
    unsigned char *done;   /* nchunks: applied for step `version` (so at version + 1) */
    size_t ndone;          /* chunks of done set */
    int applied_unsent;    /* chunks applied since the waiting pulls were last sent theirs */
    unsigned char *with;   /* workers: who the chunks applied so far were summed from */
    int *waiting;          /* workers: scratch of ps_consistency_answer_pulls */
    float *scratch;        /* n: a chunk of a step's sum; an aligned copy of a push */
    int64_t version;       /* updates applied so far (also Adam's t) */
    ps_pending_t *pending; /* cap_pending */
    unsigned char *askers; /* cap_pending blobs of asker_stride bytes, pending's askers */
    size_t asker_stride;   /* asker_size rounded up to keep each blob aligned */
    int npending, cap_pending;
    double step_since;     /* when the step being collected started waiting */
    double missing_logged; /* when we last logged who it waits for */
    ps_consistency_stats_t stats;
};

/* Index of slot (step t, worker w). */
static inline size_t ps_consistency_slot(const ps_consistency_t *c, int64_t t, int w)
{
    return (size_t)(t % c->window) * (size_t)c->workers + (size_t)w;
}

/* The steps of consistency.c that consistency_replica.c shares. */

/* Releases the frames held in slot k and empties it. */
void ps_consistency_release_parts(ps_consistency_t *c, size_t k);

/* Keys [*off, *off + return) (shard-relative) of chunk ch. */
uint64_t ps_consistency_chunk_len(const ps_consistency_t *c, size_t ch, uint64_t *off);

/* Non-zero when the steps apply chunk by chunk (sync and ssp). */
int ps_consistency_chunked(const ps_consistency_t *c);

/* Applies grad to keys r as the update that makes `version` of step t,
 * telling ops.update first. */
void ps_consistency_store_step(ps_consistency_t *c, ps_range_t r, const float *grad, float lr,
                               float scale, int64_t version, int64_t t);

/* Answers and forgets the waiting pulls the current version satisfies, and
 * sends the applied chunks of those waiting for the step being applied,
 * keeping the others in order (consistency_pull.c). */
void ps_consistency_answer_pulls(ps_consistency_t *c);

/* The learning rate of step `step` (the job's schedule). */
float ps_consistency_lr(const ps_consistency_t *c, int64_t step);

/* A gradient's weight when applied tau versions after it was computed
 * (--staleness-lr), and an async push's (the same, times the async rate). */
float ps_consistency_stale_weight(const ps_consistency_t *c, int64_t tau);
float ps_consistency_async_weight(const ps_consistency_t *c, int64_t tau);

/* Gives a held frame back (ops.release); NULL-safe. */
void ps_consistency_release(ps_consistency_t *c, void *frame);

/* Acks r at the current version. */
void ps_consistency_ack(ps_consistency_t *c, const ps_request_t *r);

/* What refuses any push before its mode sees it (no parameters yet, a
 * worker not live, a non-finite value among the n floats of r->data):
 * 0 or a refusal with why. */
int ps_consistency_refuse_push(ps_consistency_t *c, const ps_request_t *r, uint64_t n, char *why,
                               size_t cap);

/* Stepped modes: 1 when push r may count toward a step, 0 when it was acked
 * and dropped (late), or a refusal with why. */
int ps_consistency_admit_stepped(ps_consistency_t *c, const ps_request_t *r, char *why,
                                 size_t cap);

/* Slot k's gradients were computed on the stalest version of its parts:
 * r's when it is the slot's first part, or staler. */
void ps_consistency_computed_on(ps_consistency_t *c, size_t k, const ps_request_t *r, int first);

/* Stepped modes: applies every step that has collected enough pushes. */
void ps_consistency_try_apply(ps_consistency_t *c);

/* cfg.rows (consistency_rows.c). Applies each piece of step t's rows that
 * every worker of c->with pushed and that is not applied yet: their pushes
 * summed in rank order (ops.apply_rows). Returns how many it applied. */
int ps_consistency_apply_pieces(ps_consistency_t *c, int64_t t, float lr, float scale);

/* Whether step t's rows are all applied (no rows: yes); if so, tells
 * ops.apply_rows the step's rows are over (a replica ends the step then). */
int ps_consistency_rows_end(ps_consistency_t *c, int64_t t, float lr, float scale);

/* Whether slot k holds every piece of its worker's rows push (no rows: yes). */
static inline int ps_consistency_rows_complete(const ps_consistency_t *c, size_t k)
{
    return !c->cfg.rows || c->rows_count[k] == PS_RANGE_ROW_PIECES;
}

/* Forgets every waiting pull, releasing the rows pulls' frames (their
 * askers ask again). */
void ps_consistency_drop_pending(ps_consistency_t *c);

/* Step t is applied whole: the version moves on, its pushes go, pulls are answered. */
void ps_consistency_end_step(ps_consistency_t *c, int64_t t);

/* Moves a stepped shard to `version` with no chunk of a step under way
 * applied: a step's end, a rollback, or steps skipped with no update (no
 * worker live for them: the step under way ends where it stands, the
 * chunks it applied stay applied). */
static inline void ps_consistency_jump(ps_consistency_t *c, int64_t version)
{
    c->version = version;
    memset(c->done, 0, c->nchunks);
    c->ndone = 0;
    memset(c->rows_done, 0, sizeof c->rows_done);
    c->rows_ndone = 0;
}

#ifdef __cplusplus
}
#endif
#endif
