/*
 * worker/preflight.h - a worker's preflight: before step 0, probe every
 * server (is it reachable from here, its round trip, a short bulk transfer)
 * and tell the scheduler, which prints the table and refuses to start on an
 * unreachable pair (shardps-scheduler --preflight).
 *
 * Runs between the cluster view and the KV client, on its own sockets (one
 * DEALER per server, closed after), keeping the link's heartbeats going. It
 * judges nothing: the scheduler decides. Timings are for operators' eyes,
 * never a pass/fail threshold.
 */
#ifndef PS_WORKER_PREFLIGHT_H
#define PS_WORKER_PREFLIGHT_H

#include <stddef.h>

#include "proto/codec.h"
#include "proto/link.h"
#include "proto/sock.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Probes every server of view (5 header-only round trips, then 32 messages of
 * 64 KiB sent at once and acknowledged) and sends the scheduler a
 * PREFLIGHT_RESULT. Returns 0 (unreachable pairs included: they are in the
 * result), or PS_ECLOSED / PS_ENOMEM with a reason in err when the link was
 * lost or the job aborted meanwhile. The link stays the caller's.
 */
int ps_preflight_run(ps_ctx_t *ctx, ps_link_t *link, const ps_view_t *view, int rank, char *err,
                     size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
