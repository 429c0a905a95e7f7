/*
 * scheduler/preflight.h - private: the scheduler's side of --preflight.
 *
 * With --preflight the view asks every worker to probe every server before
 * step 0 (worker/preflight.h). Each worker's PREFLIGHT_RESULT is kept here;
 * once all are in, the table is logged (one line per pair: round trip, MB/s)
 * and an unreachable pair fails the job before step 0, naming it. The init
 * barrier is held until then (scheduler.c). Only scheduler/ includes this.
 */
#ifndef PS_SCHEDULER_PREFLIGHT_H
#define PS_SCHEDULER_PREFLIGHT_H

#include <stddef.h>

#include "common/json.h"
#include "scheduler/scheduler_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records worker n's result (message m). Returns 0, or PS_EPROTO for a result
 * that does not decode or does not cover every server. */
int ps_preflight_on_result(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m);

/* Whether the preflight is over: 0 while results are missing (1 when none
 * was asked for); once every live worker's result is in, logs the table and
 * returns 1 when every pair reached, else PS_EIO with "preflight: W1 cannot
 * reach S0 at ..." (every such pair) in why. Call until it is non-zero. */
int ps_preflight_check(ps_scheduler_t *s, char *why, size_t cap);

/* The summary's "preflight" field: [{worker, server, reached, rtt_ms,
 * mbytes_per_s}, ...], empty without --preflight. A new reference, or NULL
 * when out of memory. */
json_t *ps_preflight_json(const ps_scheduler_t *s);

#ifdef __cplusplus
}
#endif
#endif
