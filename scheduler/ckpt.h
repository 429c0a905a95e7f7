/*
 * scheduler/ckpt.h - the scheduler's side of checkpoints.
 *
 * Where servers write them (the view's checkpoint part), and on --resume
 * the newest complete one to start from, as the servers find their parts
 * (the scheduler reads only manifests: the parts may be on the servers'
 * own disks), its step mapped to the same data position when the worker
 * count changed (ps_join_map_step). While the job
 * runs: every server's MSG_CHECKPOINT says its part of step N is durable;
 * the manifest of N is written once every part is in (scheduler/manifest.h),
 * and N is the newest complete checkpoint (a failover rolls back to it).
 * With --checkpoint-every Ns a checkpoint is agreed with every server every
 * N seconds (scheduler/agree.h, the agreement's checkpoint flag).
 *
 * Owns its state (the manifest tracker, the newest step, the timer);
 * private to scheduler/; one thread (the scheduler's loop).
 */
#ifndef PS_SCHEDULER_CKPT_H
#define PS_SCHEDULER_CKPT_H

#include <stdint.h>

#include "scheduler/scheduler_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No checkpoint yet, for the job of cfg (borrowed, outlives it). Returns 0
 * or PS_ENOMEM. Caller owns *out; destroy with ps_ckpt_destroy(). */
int ps_ckpt_new(ps_ckpt_t **out, const ps_scheduler_config_t *cfg);

/* NULL-safe; sets *c to NULL. */
void ps_ckpt_destroy(ps_ckpt_t **c);

/* The view's checkpoint part (v: borrowed, the job's, its P set; samples:
 * the smallest worker's training set): where servers write checkpoints and,
 * on --resume, the one to start from. A resume first asks every server about
 * its parts of the candidate checkpoints (MSG_RESUME_CHECK); the newest one
 * every server found whole goes into the view, and the module then sends
 * the servers the view itself (ps_start_servers). No candidate fails the
 * job with exit status 2, unless --resume-or-start (a fresh start). Returns
 * 0 (the view is ready), 1 (the servers were asked: the module goes on), or
 * a PS_E* (the job failed; the reason is given). */
int ps_ckpt_setup(ps_ckpt_t *c, ps_scheduler_t *s, ps_view_t *v, uint64_t samples);

/* A restarted scheduler took the saved job (view v, borrowed; its newest
 * complete checkpoint `newest`, -1 none). Returns 0 or PS_ENOMEM. */
int ps_ckpt_saved_job(ps_ckpt_t *c, const ps_view_t *v, int64_t newest);

/* Whether the job writes checkpoints (a failover needs them). */
int ps_ckpt_enabled(const ps_ckpt_t *c);

/* The newest complete checkpoint's step, -1 when none. */
int64_t ps_ckpt_newest(const ps_ckpt_t *c);

/* The job runs from now (ps_now()): the next timed checkpoint is due
 * --checkpoint-every seconds later. */
void ps_ckpt_timer_start(ps_ckpt_t *c, double now);

#ifdef __cplusplus
}
#endif
#endif
