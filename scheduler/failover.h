/*
 * scheduler/failover.h - spare servers and the replacement of a lost one.
 *
 * A server that registers as a spare (Register.spare, or any server that
 * registers once the job runs) waits, heartbeating, outside the job. When a
 * server is lost and checkpoints are on, the scheduler promotes a spare to
 * the lost rank and rolls the whole job back to the newest complete
 * checkpoint N, in two phases under a new generation:
 *   1. the spare gets the VIEW (replaced = its rank + 1, resume from N) and
 *      loads its keys; every other server gets MSG_FAILOVER and reloads its
 *      own keys of N (a consistent cut needs every server at one step); each
 *      answers MSG_FAILOVER_READY;
 *   2. once all have, every live worker gets MSG_FAILOVER: it reconnects to
 *      the new endpoint and starts again at step N (data order of step N).
 * Data and DONEs of an older generation are dropped, so nothing sent before a
 * node rolled back counts after. The first step a server applies after the
 * rollback ends the recovery time (MSG_FAILOVER_READY, stepped).
 *
 * The module's state (the spares, the replacements and their figures, which
 * server answered the current failover) is changed by the socket-free
 * functions below, which tests/unit/test_failover.c calls; the loop reaches
 * the module through ps_failover_events, and the module reaches the core
 * only through its ops (scheduler/module.h): it asks the core to put a
 * spare or a replica in a lost server's row and to change the view, and
 * writes only its own rows, the spares'. Private to scheduler/. One thread.
 */
#ifndef PS_SCHEDULER_FAILOVER_H
#define PS_SCHEDULER_FAILOVER_H

#include <stdint.h>

#include "common/json.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "scheduler/agree.h"
#include "scheduler/ckpt.h"
#include "scheduler/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_failover ps_failover_t;

/* The loop's events (scheduler/module.h), self: the ps_failover_t. */
extern const ps_sched_events_t ps_failover_events;

/* Spares waiting at once, at most. */
enum { PS_FAILOVER_MAX_SPARES = 64 };

/* One lost server replaced: what the summary reports. */
typedef struct {
    int rank;           /* the server lost */
    int64_t generation; /* its failover */
    int64_t step;       /* the checkpoint everyone rolled back to */
    int64_t steps_lost; /* steps applied past it before the loss (max over servers) */
    int64_t base;       /* async: the spare's version (its checkpoint part's) */
    int64_t updates_lost; /* async: the others' highest version minus base */
    double t_declared;  /* ps_now() when it was declared lost */
    double detect_s;    /* last heard -> declared lost */
    double recover_s;   /* declared lost -> first step applied after; < 0 until then */
    int takeover;       /* its hot replica took the rank over: nothing rolled back */
} ps_failover_rep_t;

/* Spares waiting for a view (not kept as hot replicas). */
int ps_failover_cold_spares(const ps_failover_t *f);

/* The failover state of the job of ops (its servers: ops->cfg->servers),
 * which abandons agreement agree when it rolls the job back and replaces a
 * server only while ckpt writes checkpoints. ops, agree and ckpt are
 * borrowed and must outlive it. Returns 0 or PS_ENOMEM. Caller owns *out;
 * destroy with ps_failover_destroy(). */
int ps_failover_new(ps_failover_t **out, const ps_sched_ops_t *ops, ps_agree_t *agree,
                    const ps_ckpt_t *ckpt);

/* NULL-safe; sets *f to NULL. */
void ps_failover_destroy(ps_failover_t **f);

/* ---- spares ---- */

/* A spare registered on route (pid, fd, the key it serves with) at now: its
 * row (rank: its spare id, servers + k, never reused) in *out (borrowed,
 * valid until the next change of the spares). Returns 0, or PS_ESTATE with
 * the reason in *why when that route is a spare already or too many wait. */
int ps_failover_spare_add(ps_failover_t *f, const ps_route_t *route, uint32_t pid, int fd,
                          const char *curve_key, double now, const ps_node_t **out,
                          const char **why);

/* Spares waiting. */
int ps_failover_spares(const ps_failover_t *f);

/* A message on route from sender: 1 when it is a waiting spare's (it is
 * alive at now), else 0. */
int ps_failover_spare_seen(ps_failover_t *f, const ps_route_t *route, int sender, double now);

/* Spares silent for more than timeout seconds at now are forgotten (one
 * line each). Returns how many. */
int ps_failover_spares_expire(ps_failover_t *f, double now, double timeout);

/* The connection fd closed: a spare on it is forgotten. Returns 1 when one
 * was. */
int ps_failover_spare_closed(ps_failover_t *f, int fd);

/* Spare ids: where the ones given so far end (for the state file); and, in
 * a restarted scheduler, that its predecessor gave those below next_id:
 * such a spare registering again is taken back, once (failover.c), and new
 * ones are numbered from next_id on. Returns 0 or PS_ENOMEM. */
int ps_failover_next_id(const ps_failover_t *f);
int ps_failover_readmit_below(ps_failover_t *f, int next_id);

/* ---- replacements ---- */

/* Server r, declared lost at now after `silent` seconds, is replaced under
 * generation, everyone rolling back to checkpoint step (stepped: the job's
 * mode steps; async goes on). Opens its record; the servers' answers start
 * again. Returns 0 or PS_ENOMEM (nothing changed). */
int ps_failover_record(ps_failover_t *f, int r, int64_t generation, int64_t step, double now,
                       double silent, int stepped);

/* A waiting spare takes server r's place: its row into *spare, and
 * its spare id is remembered (its heartbeats sent before it learnt rank r).
 * Returns 0, or PS_ENOENT when none waits. */
int ps_failover_promote(ps_failover_t *f, int r, ps_node_t *spare);

/* The spare id of the spare that took server r's place, or -1. */
int ps_failover_promoted_id(const ps_failover_t *f, int r);

/* route was a replaced server's connection: a message on it is told to go. */
void ps_failover_retire(ps_failover_t *f, const ps_route_t *route);
int ps_failover_retired(const ps_failover_t *f, const ps_route_t *route);

/* Server `rank` answered the current failover (rd: of its generation; job
 * stepped: the job's mode steps) at now. Returns 1 when that answer made
 * every server stand at the checkpoint (phase 2: the workers roll back),
 * else 0. A stepped answer (the first step after the rollback) closes every
 * open record's recovery time instead, once. */
int ps_failover_ready(ps_failover_t *f, int rank, const Shardps__FailoverReady *rd, int stepped,
                      double now);

/* Every server answered a takeover made once training was over (no step
 * follows): that closes the open records' recovery time at now. */
void ps_failover_ended(ps_failover_t *f, double now);

/* The replacements so far, in order, into *reps (borrowed, valid until the
 * next replacement). Returns their count. */
int ps_failover_replacements(const ps_failover_t *f, const ps_failover_rep_t **reps);

/* ---- the scheduler's side ---- */

/* Sends a heartbeat or a SHUTDOWN (any other type: nothing) to every
 * waiting spare too, through ops->send: the core's send to every node calls
 * it. NULL-safe. */
void ps_failover_send_spares(ps_failover_t *f, ps_msg_type_t type,
                             const ProtobufCMessage *body);

/* Adds the summary's "server_replacements": [...], "replicas" {...} (per
 * server: ops->cfg->replicas) and "spares_left" fields to doc; f NULL: none
 * and zeros. Returns 0 or PS_ENOMEM. */
int ps_failover_json(json_t *doc, const ps_failover_t *f);

/* What the summary and the metrics count of failovers and replicas. */
typedef struct {
    int replacements;           /* lost servers replaced, takeovers included */
    int takeovers, rebuilds;    /* by hot replicas; new replicas in step after one */
    double rebuild_max_s, rebuild_mean_s;
    int64_t steps_rolled_back;  /* over every replacement */
} ps_failover_counts_t;

/* The counts so far (all 0 for NULL). */
ps_failover_counts_t ps_failover_counts(const ps_failover_t *f);

#ifdef __cplusplus
}
#endif
#endif
