/*
 * server/consistency_impl.h - private: the consistency state machine's
 * state, shared by consistency.c (the modes) and consistency_replica.c
 * (what hot replicas need of it, and what it reports). Only those two
 * include it; the parts below them own their state: the pushes held
 * (consistency_held.h), their rows (consistency_rows.h) and the waiting
 * pulls (consistency_pull.h).
 */
#ifndef PS_SERVER_CONSISTENCY_IMPL_H
#define PS_SERVER_CONSISTENCY_IMPL_H

#include <string.h>

#include "server/consistency.h"
#include "server/consistency_held.h"
#include "server/consistency_pull.h"
#include "server/consistency_rows.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    /* Stepped modes collect each step's pushes per worker before applying,
     * steps version .. version + window - 1 at once (window: s+1 under
     * ssp:s, else 1). */
    int window;
    size_t nslots;         /* window*workers (1 when not stepped) */
    ps_held_t *held;       /* the dense pushes held per step and worker */
    ps_pieces_t *pieces;   /* their rows pushes, and the pieces of a step applied */
    ps_pulls_t *pulls;     /* the pulls waiting for a newer version */
    /* Sync and ssp apply the step being collected chunk by chunk (chunk
     * keys from the shard's start; the last may be shorter): a chunk every
     * live worker has pushed whole is applied at once, and the pulls get
     * its values, while the other chunks still come in. */
    uint64_t chunk;        /* keys per chunk */
    size_t nchunks;        /* chunks of the shard */
    unsigned char *done;   /* nchunks: applied for step `version` (so at version + 1) */
    size_t ndone;          /* chunks of done set */
    int applied_unsent;    /* chunks applied since the waiting pulls were last sent theirs */
    unsigned char *with;   /* workers: who the chunks applied so far were summed from */
    float *scratch;        /* n: a chunk of a step's sum; an aligned copy of a push */
    int64_t version;       /* updates applied so far (also Adam's t) */
    double step_since;     /* when the step being collected started waiting */
    double missing_logged; /* when we last logged who it waits for */
    ps_consistency_stats_t stats;
};

/* The steps of consistency.c that consistency_replica.c shares. */

/* Releases the frames held in slot k (dense and rows) and empties it. */
void ps_consistency_release_parts(ps_consistency_t *c, size_t k);

/* Keys [*off, *off + return) (shard-relative) of chunk ch. */
uint64_t ps_consistency_chunk_len(const ps_consistency_t *c, size_t ch, uint64_t *off);

/* Non-zero when the steps apply chunk by chunk (sync and ssp). */
int ps_consistency_chunked(const ps_consistency_t *c);

/* Applies grad to keys r as the update that makes `version` of step t,
 * telling ops.update first. */
void ps_consistency_store_step(ps_consistency_t *c, ps_range_t r, const float *grad, float lr,
                               float scale, int64_t version, int64_t t);

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
    ps_pieces_restart(c->pieces);
}

#ifdef __cplusplus
}
#endif
#endif
