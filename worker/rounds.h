/*
 * worker/rounds.h - a worker's rounds with the servers (every mode but
 * allreduce): the whole model sent (worker 0's INIT) or pulled, a step's
 * push of its gradient and pull of the next parameters, the layers pushed
 * during backward (--overlap 1), the faults injected before a step's push
 * (worker/faults.h), and a step's push and pull sent again after a
 * replica's takeover. It owns the layer pushes' state; the KV client, the
 * model and the rest are borrowed (docs/design/push.md).
 */
#ifndef PS_WORKER_ROUNDS_H
#define PS_WORKER_ROUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "worker/ctr_job.h"
#include "worker/kv.h"
#include "worker/models/model.h"
#include "worker/nonfinite.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_rounds ps_rounds_t;

/* What the rounds use; each borrowed and outliving them. Plain data. */
typedef struct {
    int overlap;                    /* --overlap 1: push layers during backward */
    int64_t fault_nan_push;         /* --fault-nan-push's step; -1 = never */
    int64_t fault_huge_push;        /* --fault-huge-push's step; -1 = never */
    const ps_job_t *job;            /* its mode */
    const ps_view_t *view;          /* the servers and their keys */
    int rank;                       /* this worker's */
    ps_kv_t *kv;                    /* the KV client */
    ps_model_t *model;              /* its params and grads */
    ps_ctr_job_t *ctr;              /* a model with rows, else NULL */
    ps_nonfinite_t *nonfinite;      /* a gradient's non-finite values */
    char *err;                      /* where a failure's reason goes */
    size_t errlen;
} ps_rounds_config_t;

/* With overlap in a chunked mode of one micro-batch, the model's
 * gradient-ready hook pushes its layers during backward. Caller owns the
 * result; destroy with ps_rounds_destroy(). Returns 0 or PS_ENOMEM. */
int ps_rounds_new(const ps_rounds_config_t *c, ps_rounds_t **out);
void ps_rounds_destroy(ps_rounds_t **r);

/* The version a pull after pushing step t must wait for in job's mode. */
int64_t ps_rounds_pull_version(const ps_job_t *job, int64_t t);

/* Waits for request handle (or passes on a failed submission's PS_E*); a
 * failure sets err to "WHAT failed: why". */
int ps_rounds_wait(ps_rounds_t *r, int handle, const char *what);

/* The whole model to the servers (init: its values, worker 0 at the start)
 * or from them (a pull of min_version), one server's keys at a time,
 * starting at our rank's and going round: started together, the workers
 * each take a different server's keys, so that no link carries two of
 * these transfers at once (all at once, each server's link would carry
 * every worker's whole shard together, and its queue would overflow into
 * TCP retransmission timeouts). On failure the reason is in err. */
int ps_rounds_whole(ps_rounds_t *r, int init, int64_t min_version, const char *what);

/* Before step t's compute: nothing of it pushed yet, and the faults due at
 * t injected. Returns 0 or a fault's failure. */
int ps_rounds_begin(ps_rounds_t *r, int64_t t);

/* Keys [0, end) of step t's gradient are not pushed yet. */
uint64_t ps_rounds_unpushed(const ps_rounds_t *r);

/* After step t's compute: its push and the pull of the next parameters
 * (a model with rows: then its rows push, ctr_job.h), sent again for as
 * long as lost servers' replicas take their ranks over meanwhile, and
 * waited for. Returns 0, PS_EAGAIN (a failover: the step is void) or a
 * failure. */
int ps_rounds_end(ps_rounds_t *r, int64_t t);

#ifdef __cplusplus
}
#endif
#endif
