/*
 * worker/faults.h - faults a worker injects on request, for the tests of
 * what servers do with bad pushes (--fault-nan-push, --fault-huge-push):
 * extra pushes under the worker's own token, before its real one.
 */
#ifndef PS_WORKER_FAULTS_H
#define PS_WORKER_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "worker/kv.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * At step t, the faults due then: --fault-huge-push (at huge_step) sends
 * five finite pushes of 3e38 to keys [0, 4), which the servers must accept
 * (and undo the updates that overflow); --fault-nan-push (at nan_step) a
 * NaN push, which they must refuse as not finite. Returns 0 (none due, or
 * each answered as it must be), or PS_ESTATE with the reason in err.
 */
int ps_fault_push(ps_kv_t *kv, int64_t huge_step, int64_t nan_step, int64_t t, char *err,
                  size_t cap);

#ifdef __cplusplus
}
#endif
#endif
