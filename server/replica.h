/*
 * server/replica.h - hot replicas (--replicas K): a primary keeps K
 * replicas of its keys in step with every update it applies, so that one of
 * them can take its rank over with nothing rolled back.
 *
 * The primary's side: the scheduler names each replica (MSG_REPLICA, up to
 * PS_MAX_REPLICAS); the primary connects to it, sends it a snapshot of the
 * store (values, optimizer state, the embedding rows with their pending
 * keys and counters, where the step being collected stands) before its
 * next update, then every update as the consistency is about to apply it
 * (ps_consistency_ops_t.update and .apply_rows: the same gradient, learning
 * rate, scale and version, so the replica's ps_store_step and
 * ps_rows_update give the same bits). Updates are
 * numbered; each replica acknowledges them in order, and no pull reply
 * leaves before every replica holds the updates applied when it was due
 * (ps_reply_gate).
 *
 * The replica's side is server/replica_follow.h: it applies what arrives
 * and answers each batch with MSG_REPLICA_ACK.
 *
 * One thread (the server's loop) makes every call.
 */
#ifndef PS_SERVER_REPLICA_H
#define PS_SERVER_REPLICA_H

#include <stdint.h>

#include "proto/codec.h"
#include "proto/msg.h"
#include "proto/sock.h"
#include "server/consistency.h"
#include "server/reply.h"
#include "server/rows.h"
#include "server/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_replica ps_replica_t;

/* Totals for the report. */
typedef struct {
    uint64_t updates;   /* updates sent to replicas */
    uint64_t snapshots; /* snapshots sent (one per replica attached) */
    uint64_t bytes;     /* payload bytes of both */
} ps_replica_stats_t;

/* A primary's side, with no replica yet: the pieces are borrowed and must
 * outlive it (rows: a job with embedding rows, the table; else NULL). Returns 0 or PS_ENOMEM. Caller owns *out. */
int ps_replica_new(ps_replica_t **out, ps_ctx_t *ctx, ps_store_t *store, ps_rows_t *rows,
                   ps_consistency_t *cons, ps_reply_t *reply, int rank);

/* Frees; NULL-safe; sets *r to NULL. */
void ps_replica_destroy(ps_replica_t **r);

/* MSG_REPLICA from the scheduler: our replicas are those of m->keep (any
 * other is dropped, and replies waiting only for it go), and with an
 * endpoint, replica m->rank listens at m->endpoint (its snapshot goes
 * before the next update; up to PS_MAX_REPLICAS). Returns 0, or a PS_E*
 * with the reason in why (that replica is not kept). */
int ps_replica_attach(ps_replica_t *r, const Shardps__Replica *m, char *why, size_t cap);

/* The primary's store was reloaded (a rollback): each replica gets a whole
 * snapshot again before the next update. */
void ps_replica_resync(ps_replica_t *r);

/* ps_consistency_ops_t.update, before we apply it: the update goes to the
 * replicas at once (the gradient is copied out), after the snapshot, if one
 * is due, so they apply it while we do; replies due from now on wait for
 * their acknowledgements. */
void ps_replica_update(ps_replica_t *r, ps_range_t range, const float *grad, float lr,
                       float scale, int64_t version);

/* ps_consistency_ops_t.apply_rows, before we apply it: as ps_replica_update,
 * the rows update of step t (async: at version t) in messages of a frame
 * each under the replica's frame limit; the last message of a call with
 * last set says so (a stepped replica ends the step after it). */
void ps_replica_update_rows(ps_replica_t *r, const uint64_t *keys, const float *grads,
                            uint64_t n, float lr, float scale, int64_t t, int last);

/* Sends the live workers and joiners to the replicas, if they changed since
 * they were last sent (call once the requests in hand are handled). */
void ps_replica_flush(ps_replica_t *r);

/* The sockets to the replicas, for the loop's poll, into socks[0..max):
 * returns how many (0: none; r may be NULL). */
int ps_replica_socks(const ps_replica_t *r, ps_sock_t **socks, int max);

/* Reads the replicas' acknowledgements and opens the reply gate as far as
 * every one of them has. */
void ps_replica_drain(ps_replica_t *r);

ps_replica_stats_t ps_replica_stats(const ps_replica_t *r);

#ifdef __cplusplus
}
#endif
#endif
