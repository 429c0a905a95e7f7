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
 * A module (scheduler/module.h): owns its state (the saved job, the
 * restart count) and reaches the core only through its ops; the core packs
 * the state (each module gives its part) and this module writes the file.
 * Private to scheduler/; one thread (the scheduler's loop).
 */
#ifndef PS_SCHEDULER_RESTART_H
#define PS_SCHEDULER_RESTART_H

#include <stddef.h>
#include <stdint.h>

#include "scheduler/agree.h"
#include "scheduler/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_restart ps_restart_t;

/* The module's events: REGISTERs carrying a run id (the saved job's nodes
 * coming back), and the recovery's end on ticks. */
extern const ps_sched_events_t ps_restart_events;

/* No saved job, for the job of ops->cfg. ops and agree are borrowed and
 * must outlive it (a recovery releases the agreement the old scheduler left
 * open). Returns 0 or PS_ENOMEM. Caller owns *out; destroy with
 * ps_restart_destroy(). */
int ps_restart_new(ps_restart_t **out, const ps_sched_ops_t *ops, ps_agree_t *agree);

/* NULL-safe; sets *r to NULL. */
void ps_restart_destroy(ps_restart_t **r);

/* --resume DIR: reads DIR/scheduler.state of a job that did not finish, so
 * that its nodes, still running, may register again. Returns 1 when it holds
 * such a job (*run_id is then the job's, which it keeps, and *next_spare_id
 * where its spare ids ended), else 0 (logged when the file is corrupt or of
 * another job). */
int ps_restart_load(ps_restart_t *r, uint64_t *run_id, int *next_spare_id);

/* Writes DIR/scheduler.state (DIR: ops->cfg->checkpoint_dir; nothing when
 * there is none) from state[0..len), a packed JoinSchedulerState (the core
 * packs it, with its view's servers' copy; borrowed for the call): the
 * magic, its CRC-32 and it, atomically. A failed write is logged. */
void ps_restart_save(const ps_restart_t *r, const uint8_t *state, size_t len);

/* Scheduler restarts of this job so far. */
int ps_restart_count(const ps_restart_t *r);

#ifdef __cplusplus
}
#endif
#endif
