/*
 * scheduler/observe.h - the job seen from outside while it runs: the
 * scheduler's metrics and every node's (the reports that come with their
 * heartbeats), served as one Prometheus exposition on --metrics-bind with a
 * node="W0" label per node's series, and the cluster view shardps-status asks
 * for (MSG_STATUS).
 *
 * The event loop stores each report here (ps_sched_obs_heartbeat) and answers
 * status requests from its own state; the HTTP server's thread renders under
 * this module's lock, so it never reads the loop's state directly.
 */
#ifndef PS_SCHEDULER_OBSERVE_H
#define PS_SCHEDULER_OBSERVE_H

#include <stddef.h>

#include "proto/msg.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_sched_obs ps_sched_obs_t;

/* For nnodes nodes (servers, then workers), served on bind unless NULL.
 * Caller owns the result; destroy with ps_sched_obs_destroy(). Returns 0 or
 * a PS_E* with a one-line reason. */
int ps_sched_obs_new(const char *bind, int nnodes, ps_sched_obs_t **out, char *err,
                     size_t errlen);
void ps_sched_obs_destroy(ps_sched_obs_t **o);

/* Node i's heartbeat carried report r (borrowed: copied); tag names it
 * ("W0"). */
void ps_sched_obs_heartbeat(ps_sched_obs_t *o, int i, const char *tag,
                            const Shardps__MetricsReport *r);

/* A message of type arrived (counted by type). */
void ps_sched_obs_message(ps_sched_obs_t *o, int type);

/* The job ended (before its summary is written): a scrape from now on has
 * the final values. */
void ps_sched_obs_mark_end(ps_sched_obs_t *o);

/* After the job: serves until one scrape since ps_sched_obs_mark_end took the
 * final values, at most seconds (0: returns at once). */
void ps_sched_obs_hold(ps_sched_obs_t *o, double seconds);

#ifdef __cplusplus
}
#endif
#endif
