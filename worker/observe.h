/*
 * worker/observe.h - what a worker shows of itself: its metrics (served on
 * --metrics-bind and sent to the scheduler with each heartbeat) and the
 * spans of its trace's steps. worker.c calls in once per step; the
 * heartbeat's report is made here, in whichever thread ticks the link.
 */
#ifndef PS_WORKER_OBSERVE_H
#define PS_WORKER_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/link.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_worker_obs ps_worker_obs_t;

/* Metrics, served on bind ("HOST:PORT") unless NULL. Caller owns the result;
 * destroy with ps_worker_obs_destroy(). Returns 0 or a PS_E* with a reason. */
int ps_worker_obs_new(const char *bind, ps_worker_obs_t **out, char *err, size_t errlen);
void ps_worker_obs_destroy(ps_worker_obs_t **o);

/* Registered as W<rank>: heartbeats on link carry the report from now on,
 * the trace is named. link is borrowed and must outlive the reports. */
void ps_worker_obs_attach(ps_worker_obs_t *o, ps_link_t *link, int rank);

/* Adds the bytes on the wire by message type of ctx (borrowed: it outlives
 * o's reports) to the metrics, updated at each report. Before attach. */
void ps_worker_obs_wire(ps_worker_obs_t *o, const ps_ctx_t *ctx);

/* One step done: the steps so far, its samples, its compute and wait
 * seconds, its loss, the payload bytes pushed and pulled so far. */
void ps_worker_obs_step(ps_worker_obs_t *o, int64_t steps, int samples, double compute,
                        double wait, double loss, uint64_t pushed, uint64_t pulled);

/* Worker 0 evaluated: epochs evaluated so far and the test accuracy. */
void ps_worker_obs_epoch(ps_worker_obs_t *o, int epochs, double accuracy);

#ifdef __cplusplus
}
#endif
#endif
