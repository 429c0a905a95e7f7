/*
 * scheduler/start.h - part of the scheduler's core: a job from the first
 * registration to RUNNING, and the cluster view, which it owns.
 *
 * Servers and workers register and get their rank and token; once every
 * worker reported its model, [0, P) is cut into one byte-balanced range per
 * server and the servers get the cluster view (STARTING); once each is bound
 * for its shard (PEER_READY) the workers get it too, with the servers'
 * endpoints (RUNNING). In allreduce mode there are no servers: the workers
 * get the view with the ring at once. The view changes later only here: a
 * failover's rollback or takeover, or a restarted scheduler taking a saved
 * job. Each node's copy of the view carries the tokens it may see.
 *
 * It reaches the rest of the scheduler through the ops of scheduler/module.h
 * (send, fail the job, the phase, the restart state), the node table it is
 * given (scheduler/members.h) and the modules it asks for the view's
 * checkpoint part (ckpt) and a saved job's joins (join); the loop offers it
 * events through ps_start_events. One thread: the scheduler's loop.
 */
#ifndef PS_SCHEDULER_START_H
#define PS_SCHEDULER_START_H

#include <stddef.h>
#include <stdint.h>

#include "scheduler/ckpt.h"
#include "scheduler/join.h"
#include "scheduler/members.h"
#include "scheduler/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_start ps_start_t;

/* Its events; their self is the ps_start_t. */
extern const ps_sched_events_t ps_start_events;

/* The start of a job, with an empty view. ops, members, ckpt and join are
 * borrowed and outlive it; facts is the loop's, of which it writes t_view
 * and membership_changes (never the phase). Returns 0 or PS_ENOMEM. Caller
 * owns *out; destroy with ps_start_destroy(). */
int ps_start_new(ps_start_t **out, const ps_sched_ops_t *ops, ps_sched_facts_t *facts,
                 ps_members_t *members, ps_ckpt_t *ckpt, ps_join_t *join);

/* NULL-safe; sets *st_p to NULL. */
void ps_start_destroy(ps_start_t **st_p);

/* The cluster view. Borrowed; valid until ps_start_destroy. */
const ps_view_t *ps_start_view(const ps_start_t *st);

/* Sends the view (v; NULL: the job's) to n as a message of type; a server's
 * copy carries the workers' tokens, an allreduce worker's its left
 * neighbour's. Returns 0 or PS_ENOMEM (it does not encode). */
int ps_start_send_view(ps_start_t *st, const ps_node_t *n, ps_msg_type_t type,
                       const ps_view_t *v);

/* The restart state state packed with the view (every worker's token) into
 * *body (caller frees). Returns 0 or a PS_E*. */
int ps_start_pack_state(ps_start_t *st, Shardps__JoinSchedulerState *state, uint8_t **body,
                        size_t *len);

/* A restarted scheduler takes the saved job (view v, state; now: ps_now()
 * when its first node came back): the view, the job's time, the lost workers
 * and their tokens, the membership count, and the joins and the newest
 * checkpoint of join and ckpt; the phase becomes RECOVERING. */
void ps_start_saved_job(ps_start_t *st, const ps_view_t *v,
                        const Shardps__JoinSchedulerState *state, double now);

/* Sends every server the view, with its checkpoint part (ps_ckpt_view):
 * each binds for its shard (STARTING). */
void ps_start_servers(ps_start_t *st);

/* A failover: server r's row is served by spare, and the job rolls back to
 * checkpoint `step` in dir, whose manifest lists parts[0..nparts) (copied);
 * a new generation. */
void ps_start_replace(ps_start_t *st, int r, const ps_node_t *spare, int64_t step,
                      const ps_checkpoint_part_t *parts, int nparts, const char *dir);

/* A takeover: server r's row is served by its in-step replica, bound at its
 * endpoint already; a new generation, nothing rolled back. */
void ps_start_take_over(ps_start_t *st, int r, const ps_node_t *replica);

#ifdef __cplusplus
}
#endif
#endif
