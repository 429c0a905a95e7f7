/*
 * scheduler/restart.h - the scheduler's own state, and bringing a job back
 * after the scheduler restarted.
 *
 * DIR/scheduler.state (DIR: the checkpoint directory):
 * "shardps-scheduler-state-1\n", the CRC-32 of the rest (4 bytes,
 * little-endian), a packed JoinSchedulerState (job id, cluster view with the
 * workers' tokens, lost workers, counters, newest complete checkpoint).
 * Written atomically after the view, each membership change, each complete
 * checkpoint and the end.
 *
 * shardps-scheduler --resume DIR reads it; the first node of that job that
 * registers again (its REGISTER carries the job's run id) puts the scheduler
 * in RECOVERING with the saved view; once every server and live worker is
 * back the job runs on. A missing, corrupt or other job's state is named and
 * not used: fresh nodes then resume from the newest checkpoint as ever.
 *
 * Owns its state (the saved job, the restart count); private to scheduler/;
 * one thread (the scheduler's loop).
 */
#ifndef PS_SCHEDULER_RESTART_H
#define PS_SCHEDULER_RESTART_H

#include <stdint.h>

#include "scheduler/scheduler_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No saved job, for the job of cfg (borrowed, outlives it). Returns 0 or
 * PS_ENOMEM. Caller owns *out; destroy with ps_restart_destroy(). */
int ps_restart_new(ps_restart_t **out, const ps_scheduler_config_t *cfg);

/* NULL-safe; sets *r to NULL. */
void ps_restart_destroy(ps_restart_t **r);

/* --resume DIR: reads DIR/scheduler.state of a job that did not finish, so
 * that its nodes, still running, may register again. Returns 1 when it holds
 * such a job (*run_id is then the job's, which it keeps, and *next_spare_id
 * where its spare ids ended), else 0 (logged when the file is corrupt or of
 * another job). */
int ps_restart_load(ps_restart_t *r, uint64_t *run_id, int *next_spare_id);

/* Writes DIR/scheduler.state from s (nothing without a checkpoint directory
 * or before the job has a model). A failed write is logged. */
void ps_restart_save(const ps_restart_t *r, ps_scheduler_t *s);

/* Scheduler restarts of this job so far. */
int ps_restart_count(const ps_restart_t *r);

#ifdef __cplusplus
}
#endif
#endif
