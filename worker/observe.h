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

/* Worker 0's progress line: the epoch's step and mean loss, the samples per
 * second of the whole job since the last line, and the time left at that
 * rate; every `period` seconds, at each epoch's end and at the last step.
 * Counted toward the job's last step: under --max-steps below an epoch,
 * "epoch=1/1 step=12/20", not the epoch's full length. Plain data. */
typedef struct {
    double period;           /* seconds between lines (--progress) */
    int64_t steps_per_epoch; /* the view's */
    int64_t total;           /* the job's steps */
    double samples_per_step; /* over all workers */
    double last;             /* when the last line was logged */
    int64_t last_steps;      /* steps done then */
} ps_worker_progress_t;

/* A progress line that starts counting now. */
ps_worker_progress_t ps_worker_progress_start(double period, int64_t steps_per_epoch,
                                              int64_t total, double samples_per_step);

/* After `steps` steps, now at step t of epoch (0-based) with mean_loss:
 * logs the line when one is due. */
void ps_worker_progress_log(ps_worker_progress_t *p, int epoch, int64_t t, double mean_loss,
                            int64_t steps);

#ifdef __cplusplus
}
#endif
#endif
