/*
 * server/observe.h - what a server shows of itself: its metrics (served on
 * --metrics-bind and sent to the scheduler with each heartbeat), and its
 * totals at the end of the job. server.c counts each message and
 * server/reply.c each reply here; the rest is read from the other modules
 * at each heartbeat, in the server's own thread.
 */
#ifndef PS_SERVER_OBSERVE_H
#define PS_SERVER_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/metrics.h"
#include "proto/codec.h"
#include "proto/sock.h"
#include "server/consistency.h"
#include "server/rows.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_server_obs ps_server_obs_t;

/* Metrics, served on bind ("HOST:PORT") unless NULL. Caller owns the result;
 * destroy with ps_server_obs_destroy(). Returns 0 or a PS_E* with a reason. */
int ps_server_obs_new(const char *bind, ps_server_obs_t **out, char *err, size_t errlen);
void ps_server_obs_destroy(ps_server_obs_t **o);

/* The view is known: series per worker (0 .. workers-1) from now on. */
void ps_server_obs_setup(ps_server_obs_t *o, int workers);

/* Adds the bytes on the wire by message type of ctx (borrowed: it outlives
 * o's renders) to the metrics, updated at each render. */
void ps_server_obs_wire(ps_server_obs_t *o, const ps_ctx_t *ctx);

/* A message from worker w (-1: unknown sender) of type (PS_MSG_*) with bytes
 * of payload; a reply of bytes to worker w. NULL-safe. */
void ps_server_obs_message(ps_server_obs_t *o, int w, int type, uint64_t bytes);
void ps_server_obs_reply(ps_server_obs_t *o, int w, uint64_t bytes);

/* A push completed a step: the seconds its sum and update took. */
void ps_server_obs_apply(ps_server_obs_t *o, double seconds);

/* What the heartbeat and the end of the job read from the server besides
 * the counters above. */
typedef struct {
    const ps_consistency_stats_t *stats; /* borrowed for the call */
    int64_t version;
    uint64_t rejected;     /* messages refused */
    int held;              /* pushes held for an incomplete step */
    int pending_pulls;     /* pulls waiting for a newer version */
    uint64_t forged;       /* of the refused: a token not the claimed worker's */
    uint64_t unread_refused; /* pull replies refused: the worker held its share unread */
    uint64_t stale;        /* data messages dropped for an old failover generation */
    uint64_t replicated;   /* --replicas: updates sent to our replica */
    uint64_t replica_bytes; /* their payload bytes, snapshots included */
    uint64_t replica_snapshots; /* whole shards sent to a replica */
    const ps_rows_stats_t *rows; /* a job with embedding rows: the table's; else NULL */
    uint64_t rows_bytes;   /* the table's memory */
} ps_server_snapshot_t;

/* Updates the gauges from snap and appends the exposition to text. */
void ps_server_obs_render(ps_server_obs_t *o, const ps_server_snapshot_t *snap,
                          ps_text_t *text);

/* The end of the job: fills r, the telemetry the scheduler asks for
 * (MSG_REPORT), from snap and ctx's byte counts, copied into bytes (r
 * borrows from snap's stats and bytes: send it before either changes). */
void ps_server_obs_report(const ps_server_snapshot_t *snap, const ps_ctx_t *ctx,
                          Shardps__ServerReport *r, uint64_t bytes[2][PS_BYTE_TYPES]);

/* Logs snap's totals: the server's last line. */
void ps_server_obs_log_totals(const ps_server_snapshot_t *snap);

#ifdef __cplusplus
}
#endif
#endif
