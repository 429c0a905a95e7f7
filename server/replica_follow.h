/*
 * server/replica_follow.h - a hot replica's side (--replicas K): a server
 * started as a spare whose view names the rank it follows
 * (view.replica_of) takes that primary's snapshot and updates
 * (server/replica.h, the primary's side) on its workers' socket, checked
 * against the token the scheduler gave both, applies them to its store,
 * rows and consistency, and answers each batch with MSG_REPLICA_ACK. Once
 * the snapshot is whole it tells the scheduler (MSG_REPLICA): from then on
 * it may take the rank over. When another replica takes the rank over, the
 * scheduler gives this one a new token (MSG_REPLICA): it follows the new
 * primary from its snapshot, and the old one's messages are refused.
 *
 * It owns no socket: what it sends goes through ps_follow_ops_t. It does
 * not serve workers nor decide who follows whom (the scheduler does).
 * One thread (the server's loop) makes every call.
 */
#ifndef PS_SERVER_REPLICA_FOLLOW_H
#define PS_SERVER_REPLICA_FOLLOW_H

#include <stdint.h>

#include "proto/codec.h"
#include "proto/msg.h"
#include "server/consistency.h"
#include "server/rows.h"
#include "server/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_follow ps_follow_t;

/* What the replica's side may do outside itself; ctx is passed back. */
typedef struct {
    void *ctx;
    /* a message to the scheduler: MSG_REPLICA (in step), PEER_READY (a new
     * primary) */
    void (*send)(void *ctx, ps_msg_type_t type, const ProtobufCMessage *body);
    /* what the link tells a restarted scheduler (proto/link.h:
     * ps_link_set_replica; endpoint NULL: unchanged) */
    void (*register_as)(void *ctx, int follows, uint64_t token, const char *endpoint,
                        int in_step);
    /* MSG_REPLICA_ACK of every message up to id, on the workers' socket to
     * route */
    void (*ack)(void *ctx, const ps_route_t *route, uint64_t id);
    /* an error reply to m, with a one-line reason */
    void (*refuse)(void *ctx, const ps_msg_t *m, int status, const char *why);
} ps_follow_ops_t;

/* What it follows with. The pieces are borrowed and must outlive it. */
typedef struct {
    ps_view_t *view;        /* replica_of (0: a primary), replica_token (a new
                               primary's is written here) */
    ps_store_t *store;      /* the shard's values and optimizer state */
    ps_rows_t *rows;        /* a job with embedding rows: the table; else NULL */
    ps_consistency_t *cons; /* where the step stands */
    ps_follow_ops_t ops;
} ps_follow_config_t;

/* Returns 0 or PS_ENOMEM. Caller owns *out; destroy with ps_follow_destroy(). */
int ps_follow_new(ps_follow_t **out, const ps_follow_config_t *cfg);

/* Frees; NULL-safe; sets *f to NULL. */
void ps_follow_destroy(ps_follow_t **f);

/* The server listens at endpoint (borrowed; copied): a replica tells the
 * link (ops.register_as) and says it again for each new primary. */
void ps_follow_listening(ps_follow_t *f, const char *endpoint);

/*
 * m is a MSG_REPLICATE or MSG_REPLICA_SNAPSHOT that came on the workers'
 * socket. Checks it (sender, token, keys, frames) and applies it to the
 * store, rows and consistency; the last snapshot message sets where the
 * step stands and tells the scheduler (MSG_REPLICA). Applied, its ack is
 * owed (ps_follow_flush); refused, it is answered with an error
 * (ops.refuse), and one from our primary puts this replica out of step.
 */
void ps_follow_receive(ps_follow_t *f, const ps_msg_t *m);

/* After the messages in hand: one ack for all that were applied. Returns 0,
 * or PS_ESTATE when this replica refused its primary's message (it is not
 * the primary's copy now: the server ends). */
int ps_follow_flush(ps_follow_t *f);

/* MSG_REPLICA from the scheduler to a replica: another replica took the
 * rank over, and r->token is the new primary's. Follows it from its
 * snapshot and says so (PEER_READY, after which the scheduler names us to
 * it). */
void ps_follow_new_primary(ps_follow_t *f, const Shardps__Replica *r);

#ifdef __cplusplus
}
#endif
#endif
