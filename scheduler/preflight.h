/*
 * scheduler/preflight.h - private: the scheduler's side of --preflight.
 *
 * With --preflight the view asks every worker to probe every server before
 * step 0 (worker/preflight.h). Each worker's PREFLIGHT_RESULT is kept here;
 * once all are in, the table is logged (one line per pair: round trip, MB/s)
 * and an unreachable pair fails the job before step 0, naming it. The init
 * barrier is held until then (members.c). Owns the results; reaches the core
 * through its ops; only scheduler/ includes this; one thread (the scheduler's
 * loop).
 */
#ifndef PS_SCHEDULER_PREFLIGHT_H
#define PS_SCHEDULER_PREFLIGHT_H

#include <stddef.h>

#include "common/json.h"
#include "scheduler/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_preflight ps_preflight_t;

/* No result yet, for the job of ops (borrowed, outlive it). Returns 0 or
 * PS_ENOMEM. Caller owns *out; destroy with ps_preflight_destroy(). */
int ps_preflight_new(ps_preflight_t **out, const ps_sched_ops_t *ops);

/* NULL-safe; sets *p to NULL. */
void ps_preflight_destroy(ps_preflight_t **p);

/* A result came (or a worker left): once every live worker's result is in,
 * logs the table and gives the verdict: a pass lets a waiting barrier go,
 * an unreachable pair fails the job ("preflight: W1 cannot reach S0 at
 * ...", every such pair). Nothing once it was given. */
void ps_preflight_progress(ps_preflight_t *p);

/* Whether the preflight passed (the barriers wait until it has). */
int ps_preflight_passed(const ps_preflight_t *p);

/* The summary's "preflight" field: [{worker, server, reached, rtt_ms,
 * mbytes_per_s}, ...], empty without --preflight. A new reference, or NULL
 * when out of memory. */
json_t *ps_preflight_json(const ps_preflight_t *p);

/* The loop's events: the workers' results. */
extern const ps_sched_events_t ps_preflight_events;

#ifdef __cplusplus
}
#endif
#endif
