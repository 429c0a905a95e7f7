/*
 * scheduler/join.h - a worker joining a running job.
 *
 * A worker registering while the job runs (sync, ssp, sync:K/N) takes a lost
 * rank (its --rank R, or the lowest lost one); once it reported its model,
 * a step J is agreed with every server (scheduler/agree.h) that puts it in
 * at step J, and it gets the view with start_step J and joining set: no
 * INIT, no start barrier, it pulls version J and takes its samples of step J
 * on. A joiner silent (or whose connection closed) before J is dropped and
 * the job goes on; after J it is a worker like any other.
 *
 * Owns its state (each rank's joining stage, the count of joins) and asks
 * the core through its ops for the joiner's row; private to scheduler/; one
 * thread (the scheduler's loop). ps_join_map_step is a pure
 * function, also used by a resume with another worker count.
 */
#ifndef PS_SCHEDULER_JOIN_H
#define PS_SCHEDULER_JOIN_H

#include <stdint.h>

#include "scheduler/agree.h"
#include "scheduler/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_join ps_join_t;

/* No joiner yet, for the job of ops, agreeing steps through agree (both
 * borrowed, outlive it). Returns 0 or PS_ENOMEM. Caller owns *out; destroy
 * with ps_join_destroy(). */
int ps_join_new(ps_join_t **out, const ps_sched_ops_t *ops, ps_agree_t *agree);

/* NULL-safe; sets *j to NULL. */
void ps_join_destroy(ps_join_t **j);

/* Workers that joined the running job so far. */
int ps_join_count(const ps_join_t *j);

/* A restarted scheduler took the saved job, in which `joined` workers had
 * joined. */
void ps_join_saved_job(ps_join_t *j, int joined);

/*
 * Resuming a checkpoint of step `step` written by a job of old_workers with
 * new_workers (same batch b, same data of `samples`): the step of the new
 * job at the same data position. Step k of M workers has taken samples
 * [0, (k+1)*M*b) of its epoch's order, so the new job starts its epoch at
 * the first batch of M'*b not wholly seen: ceil(k*M/M') (the next epoch when
 * that is past its end). The learning-rate schedule and Adam's t go on from
 * that step. A job of less than one step per epoch keeps `step`.
 */
int64_t ps_join_map_step(int64_t step, int old_workers, int new_workers, int batch,
                         uint64_t samples);

/* The loop's events: a joiner's registration, its model, its loss; the
 * agreement of its step. */
extern const ps_sched_events_t ps_join_events;

#ifdef __cplusplus
}
#endif
#endif
