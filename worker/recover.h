/*
 * worker/recover.h - what a worker does after a failover (worker/kv.h,
 * ps_kv_rollback): roll back to the checkpoint every server went back to,
 * or go on where it was (async, or a replica's takeover)
 * (docs/design/failover.md, docs/design/replicas.md).
 */
#ifndef PS_WORKER_RECOVER_H
#define PS_WORKER_RECOVER_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "worker/evaluate.h"
#include "worker/kv.h"
#include "worker/rounds.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a recovery uses; each borrowed. Plain data. */
typedef struct {
    const ps_job_t *job;   /* its mode */
    const ps_view_t *view; /* steps per epoch, the job's steps */
    int rank;              /* worker 0 evaluates */
    ps_kv_t *kv;           /* the rollback pending in it */
    ps_rounds_t *rounds;   /* pulls the parameters */
    ps_evals_t *evals;     /* worker 0's record of evaluations */
    char *err;             /* where a failure's reason goes */
    size_t errlen;
} ps_recover_t;

/* A failover was taken (a request failed with PS_EAGAIN): rolls back to
 * the checkpoint, setting *t, or goes on at *t; pulls the parameters.
 * Returns 0, PS_EAGAIN (another failover) or a failure. */
int ps_recover(const ps_recover_t *r, int64_t *t);

#ifdef __cplusplus
}
#endif
#endif
