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
 * N seconds (scheduler/agree.h, the agreement's checkpoint flag), the first
 * N seconds after the job runs.
 *
 * A module (scheduler/module.h): owns its state (the manifest tracker, the
 * newest step, the resume's choice, the timer), reaches the core only
 * through its ops and never writes the core's view except where the core
 * asks (ps_ckpt_view). Private to scheduler/; one thread (the scheduler's
 * loop).
 */
#ifndef PS_SCHEDULER_CKPT_H
#define PS_SCHEDULER_CKPT_H

#include <stdint.h>

#include "common/json.h"
#include "scheduler/agree.h"
#include "scheduler/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_ckpt ps_ckpt_t;

/* The module's events: servers' MSG_CHECKPOINT and MSG_RESUME_CHECK, and
 * the timed checkpoints on ticks. */
extern const ps_sched_events_t ps_ckpt_events;

/* No checkpoint yet, for the job of ops->cfg. ops and agree are borrowed
 * and must outlive it (the timed checkpoints' agreements go through agree).
 * Returns 0 or PS_ENOMEM. Caller owns *out; destroy with ps_ckpt_destroy(). */
int ps_ckpt_new(ps_ckpt_t **out, const ps_sched_ops_t *ops, ps_agree_t *agree);

/* NULL-safe; sets *c to NULL. */
void ps_ckpt_destroy(ps_ckpt_t **c);

/* The core filled the view's job part (ops->view: its P; samples: the
 * smallest worker's training set). Without --resume the view's checkpoint
 * part is ready: 0. With it, every server is first asked about its parts of
 * the candidate checkpoints (MSG_RESUME_CHECK): 1; the newest one every
 * server finds whole is the choice, and the module then asks the core to
 * send the servers the view (ops->start_servers, where the core calls
 * ps_ckpt_view). No candidate fails the job with exit status 2 (ops->fail,
 * usage), unless --resume-or-start: a fresh start, 0. Returns 0, 1, or a
 * PS_E* when the job failed (the reason is given through ops->fail). */
int ps_ckpt_setup(ps_ckpt_t *c, uint64_t samples);

/* Writes v's checkpoint part (v: the core's view, borrowed; it must outlive
 * c): checkpoint_dir and checkpoint_every when the job writes checkpoints
 * (the manifest tracker is made over v then), and the resume's choice
 * (start_step, resume_step, resume_parts, resume_files, resume_dir) once
 * one was made. Each part is written once, the first call that knows it:
 * later calls leave v as it is (a failover's rollback changes the resume
 * part since), so the core may call it before every view it sends the
 * servers. Returns 0 or PS_ENOMEM (nothing tracked: call again). */
int ps_ckpt_view(ps_ckpt_t *c, ps_view_t *v);

/* A restarted scheduler took the saved job (view v, borrowed: the core's,
 * it must outlive c; its newest complete checkpoint `newest`, -1 none).
 * Returns 0 or PS_ENOMEM. */
int ps_ckpt_saved_job(ps_ckpt_t *c, const ps_view_t *v, int64_t newest);

/* The job's id, recorded with its configuration in every manifest it
 * writes (scheduler/manifest.h); call before the first. job_id is copied. */
void ps_ckpt_set_job(ps_ckpt_t *c, const char *job_id);

/* The summary's "resume": {"from": "DIR/step-N", "step": N, "job_id": the
 * checkpoint's job (null: not recorded), "changed": "--lr '0.05' -> '0.5'"
 * or null}, or null when the job did not resume. New reference; NULL when
 * memory ran out. */
json_t *ps_ckpt_json(const ps_ckpt_t *c);

/* Whether the job writes checkpoints (a failover needs them). */
int ps_ckpt_enabled(const ps_ckpt_t *c);

/* The newest complete checkpoint's step, -1 when none. */
int64_t ps_ckpt_newest(const ps_ckpt_t *c);

#ifdef __cplusplus
}
#endif
#endif
