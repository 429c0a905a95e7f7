/*
 * server/consistency_pull.h - the consistency's pulls: answered at once
 * when the version they need is there, chunk by chunk while the step they
 * need applies, else kept in a queue until it comes. Part of the
 * consistency (server/consistency.h), below it: the consistency says where
 * the store stands (ps_pulls_at_t) and this sends what that answers
 * through its ops; it applies nothing and holds no pushes.
 *
 * Not thread-safe: the consistency's thread makes every call.
 */
#ifndef PS_SERVER_CONSISTENCY_PULL_H
#define PS_SERVER_CONSISTENCY_PULL_H

#include <stddef.h>
#include <stdint.h>

#include "server/consistency.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    ps_store_t *store;        /* borrowed: the values sent; must outlive the queue */
    uint64_t chunk;           /* keys per chunk of a step's update */
    int workers;              /* N */
    int first;                /* the worker whose pulls are answered first
                                 (ps_consistency_first_worker) */
    size_t asker_size;        /* bytes of a request's asker, copied while it waits */
    int cap;                  /* most pulls waiting at once */
    ps_consistency_ops_t ops; /* reply, reply_rows, release */
    uint64_t *answered;       /* counts each pull answered (the consistency's stats);
                                 borrowed, valid for the queue's life */
} ps_pulls_config_t;

/* Where the store stands, as the consistency tells it. Borrowed for the call. */
typedef struct {
    int64_t version;                /* updates applied */
    const unsigned char *done;      /* chunks of step `version` applied already (so at
                                       version + 1); ndone of them set */
    size_t ndone;
    const unsigned char *rows_done; /* PS_RANGE_ROW_PIECES: the pieces of its rows
                                       applied already */
} ps_pulls_at_t;

typedef struct ps_pulls ps_pulls_t;

/* An empty queue for cfg. Returns 0 or PS_ENOMEM. Caller owns *out;
 * destroy with ps_pulls_destroy(). */
int ps_pulls_new(ps_pulls_t **out, const ps_pulls_config_t *cfg);

/* Forgets every waiting pull (ps_pulls_drop) and frees; NULL-safe; sets *p to NULL. */
void ps_pulls_destroy(ps_pulls_t **p);

/* A pull of r->range at version >= r->step: answered now as far as `at`
 * allows, else kept. Returns 0 or PS_ENOENT (not a worker), PS_ENOMEM (too
 * many waiting) with a reason in why. */
int ps_pulls_pull(ps_pulls_t *p, const ps_pulls_at_t *at, const ps_request_t *r, char *why,
                  size_t cap);

/* A rows pull of r->keys in piece r->piece at version >= r->step, as
 * ps_consistency_pull_rows() takes it (r->frame released once answered or
 * refused). */
int ps_pulls_pull_rows(ps_pulls_t *p, const ps_pulls_at_t *at, const ps_request_t *r,
                       char *why, size_t cap);

/* Answers and forgets the waiting pulls `at` satisfies, and sends the
 * applied chunks to those waiting for the step being applied, keeping the
 * others in order: a worker's pulls of keys for one version in the order
 * they came, the workers in turns from cfg.first. */
void ps_pulls_answer(ps_pulls_t *p, const ps_pulls_at_t *at);

/* Forgets every waiting pull, releasing the rows pulls' frames. */
void ps_pulls_drop(ps_pulls_t *p);

/* Pulls waiting. */
int ps_pulls_waiting(const ps_pulls_t *p);

/* Most pulls that may wait (cfg.cap). */
int ps_pulls_cap(const ps_pulls_t *p);

#ifdef __cplusplus
}
#endif
#endif
