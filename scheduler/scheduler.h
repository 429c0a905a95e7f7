/*
 * scheduler/scheduler.h - membership, shard map, cluster view, barriers, liveness.
 *
 * The scheduler binds a ROUTER socket, waits for S servers and M workers to
 * register, cuts [0, P) into S byte-balanced ranges, broadcasts one cluster
 * view carrying the job configuration, runs the workers' barriers, watches
 * every node's heartbeats, and ends the job: SHUTDOWN to all when every worker
 * is done, or an abort naming the lost or failed peer. It holds no parameters.
 */
#ifndef PS_SCHEDULER_H
#define PS_SCHEDULER_H

#include "scheduler/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The exit status of a job that finished at chance (docs/usage.md). */
#define PS_EXIT_NO_PROGRESS 4

/* Runs a whole job. Returns the process exit status: 0 when the job finished,
 * PS_EXIT_NO_PROGRESS when it finished at chance (without --on-no-progress
 * warn), 1 when it was aborted (the reason is logged), 2 when --resume found
 * nothing to resume (every checkpoint refused), 128 + N when signal N
 * (SIGINT, SIGTERM, SIGHUP) stopped it. Each writes the summary. Blocks
 * until then. */
int ps_scheduler_run(const ps_scheduler_config_t *cfg);

/* Before the job: --resume DIR (without --resume-or-start) must name a
 * directory holding a checkpoint manifest that reads, or a saved job's
 * state, and the checkpoint it resumes from must have been written with
 * this job's flags but those --resume-override names; --checkpoint-dir
 * without --resume must hold no other job's checkpoint. Reads only DIR's
 * manifests; creates nothing. Returns 0, or PS_ENOENT / PS_EINVAL with a
 * one-line reason in why. */
int ps_scheduler_check_resume(const ps_scheduler_config_t *cfg, char *why, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
