/*
 * server/consistency_rows.h - embedding rows in the stepped consistency
 * modes: a worker's rows push of a step comes as one message per piece of
 * the server's rows range (PS_RANGE_ROW_PIECES); each is held in its slot
 * (consistency_held.h's, a step and a worker) until the step applies that
 * piece: the pushes of the step's workers summed in rank order
 * (ps_optim_sum_rows), weighted as their dense parts, through
 * ops.apply_rows. Part of the consistency (server/consistency.h), below it:
 * it decides no step, it applies what it is told to.
 *
 * Made for a job without rows too: then it holds nothing, every slot is
 * complete and every step's rows end at once.
 *
 * Not thread-safe: the consistency's thread makes every call.
 */
#ifndef PS_SERVER_CONSISTENCY_ROWS_H
#define PS_SERVER_CONSISTENCY_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "server/consistency.h"
#include "server/consistency_held.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rows;                 /* non-zero: the job has embedding rows */
    int workers;              /* N */
    size_t nslots;            /* the held table's slots */
    size_t embed_dim;         /* floats per row */
    ps_consistency_ops_t ops; /* apply_rows, release */
} ps_pieces_config_t;

typedef struct ps_pieces ps_pieces_t;

/* Nothing held, no piece applied. Returns 0 or PS_ENOMEM. Caller owns
 * *out; destroy with ps_pieces_destroy(). */
int ps_pieces_new(ps_pieces_t **out, const ps_pieces_config_t *cfg);

/* Releases every held frame (ops.release) and frees; NULL-safe; sets *p to NULL. */
void ps_pieces_destroy(ps_pieces_t **p);

/* Holds r's rows push (r->keys, r->nkeys, gradient r->data) as piece
 * r->piece of slot k. Takes ownership of r->frame on success. Returns 0 or
 * PS_ESTATE (that piece of the slot is held already). */
int ps_pieces_hold(ps_pieces_t *p, size_t k, const ps_request_t *r);

/* Pieces slot k holds. */
int ps_pieces_count(const ps_pieces_t *p, size_t k);

/* Whether slot k holds every piece of its worker's rows push (no rows: yes). */
int ps_pieces_complete(const ps_pieces_t *p, size_t k);

/* Releases slot k's frames and empties it. */
void ps_pieces_release(ps_pieces_t *p, size_t k);

/* Applies each piece of step t's rows that every worker of with[0 .. N)
 * pushed and that is not applied yet: their pushes (slots of h) summed in
 * rank order, each weighted by ps_held_weight(), times scale, at lr.
 * Returns how many it applied. */
int ps_pieces_apply(ps_pieces_t *p, const ps_held_t *h, int64_t t, const unsigned char *with,
                    float lr, float scale);

/* Whether step t's rows are all applied (no rows: yes); if so, tells
 * ops.apply_rows the step's rows are over (last = 1, no keys). */
int ps_pieces_end(ps_pieces_t *p, int64_t t, float lr, float scale);

/* async: applies r's rows push on arrival, weighted by scale, as step t's
 * last (ops.apply_rows). */
void ps_pieces_apply_now(ps_pieces_t *p, const ps_request_t *r, float lr, float scale,
                         int64_t t);

/* Piece q of the step being applied is applied (by a replica's primary, or
 * restored from its cut). */
void ps_pieces_mark(ps_pieces_t *p, int q);

/* A new step begins: no piece of it is applied. */
void ps_pieces_restart(ps_pieces_t *p);

/* The pieces of the step being applied applied already: PS_RANGE_ROW_PIECES
 * flags (borrowed; valid until ps_pieces_destroy), and their number. */
const unsigned char *ps_pieces_done(const ps_pieces_t *p);
int ps_pieces_ndone(const ps_pieces_t *p);

#ifdef __cplusplus
}
#endif
#endif
