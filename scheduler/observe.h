/*
 * scheduler/observe.h - the job seen from outside while it runs: the
 * scheduler's metrics and every node's (the reports that come with their
 * heartbeats), served as one Prometheus exposition on --metrics-bind with a
 * node="W0" label per node's series, and the cluster view shardps-status asks
 * for (MSG_STATUS).
 *
 * The event loop stores each report here (ps_sched_obs_heartbeat) and the
 * status is answered from the core's rows, view and facts, read through the
 * ops of scheduler/module.h (and sent through them); the HTTP server's
 * thread renders only this module's own state, under its lock, so it never
 * reads the core. Only scheduler/ includes this header.
 */
#ifndef PS_SCHEDULER_OBSERVE_H
#define PS_SCHEDULER_OBSERVE_H

#include <stddef.h>

#include "common/text.h"
#include "proto/msg.h"
#include "scheduler/failover.h"
#include "scheduler/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_sched_obs ps_sched_obs_t;

/* For the core of ops (borrowed; valid until ps_sched_obs_destroy): its
 * ops->cfg servers + workers nodes, served on bind unless NULL. Reads only
 * ops->cfg here: the other ops are called from the loop's first turn on
 * (status and tick), so the core may be set up after this. Caller owns the
 * result; destroy with ps_sched_obs_destroy(). Returns 0, or PS_ENOMEM, or
 * PS_EINVAL / PS_EIO (a bad bind, or one in use) with a one-line reason. */
int ps_sched_obs_new(const ps_sched_ops_t *ops, const char *bind, ps_sched_obs_t **out,
                     char *err, size_t errlen);

/* Stops serving and frees *o; NULL-safe; sets *o to NULL. */
void ps_sched_obs_destroy(ps_sched_obs_t **o);

/* Node i's heartbeat carried report r (borrowed: copied); i: its row, servers
 * first (a server's rank, a worker's servers + rank); tag names it ("W0"). */
void ps_sched_obs_heartbeat(ps_sched_obs_t *o, int i, const char *tag,
                            const Shardps__MetricsReport *r);

/* A message of type arrived (counted by type). */
void ps_sched_obs_message(ps_sched_obs_t *o, int type);

/* The furthest step a worker's heartbeat reported, 0 before any. */
int64_t ps_sched_obs_last_step(ps_sched_obs_t *o);

/* The job ended (before its summary is written): a scrape from now on has
 * the final values. */
void ps_sched_obs_mark_end(ps_sched_obs_t *o);

/* After the job: serves until one scrape since ps_sched_obs_mark_end took the
 * final values, at most seconds (0: returns at once). */
void ps_sched_obs_hold(ps_sched_obs_t *o, double seconds);

/* Answers MSG_STATUS m (from any connection: shardps-status registers
 * nothing) with the cluster view: ops->answer with m's request id, or
 * ops->reply_error (PS_ENOMEM) when it cannot be built. The asker is
 * remembered for ps_sched_obs_status_final. */
void ps_sched_obs_status_reply(ps_sched_obs_t *o, const ps_msg_t *m);

/* Every turn of the loop: the scheduler's own gauges from the core's rows
 * and facts, and the failovers' counts c (ps_failover_counts). */
void ps_sched_obs_tick(ps_sched_obs_t *o, ps_failover_counts_t c);

/* Once the job has ended (finished or failed): sends the final view, unasked
 * (request id 0), to the last few that asked for one, so that a
 * `shardps-status --watch` learns how the job ended though the scheduler is
 * gone before its next question. NULL-safe (nothing asked yet). */
void ps_sched_obs_status_final(ps_sched_obs_t *o);

/* Appends what a scrape of bind gets (our series, then the nodes' merged)
 * to out. Called by the HTTP server's thread; from another only when o
 * serves on no bind (the tests). */
void ps_sched_obs_render(ps_sched_obs_t *o, ps_text_t *out);

#ifdef __cplusplus
}
#endif
#endif
