/*
 * scheduler/members.h - part of the scheduler's core: the node table and
 * the running job's members.
 *
 * It owns the rows (one per server and worker, servers first) and makes
 * every change of a row a module asks for (a registration admitted, a node
 * back after a scheduler restart, a spare in a replaced server's row, a
 * joiner live). The running job: barriers, a silent worker left out under
 * --min-workers (MSG_MEMBERS to every node; its one log line once server 0
 * says at which step), DONEs and the servers' reports, and the end.
 *
 * It reaches the rest of the scheduler only through the ops of
 * scheduler/module.h (send, fail the job, the phase, the restart state, the
 * view) and the two modules it is given; the loop offers it events through
 * ps_members_events. The core's other parts write the fields of their own
 * concern through the rows these functions return (the loop: last_seen,
 * used; start.c: the model, ready, endpoints). One thread: the scheduler's
 * loop.
 */
#ifndef PS_SCHEDULER_MEMBERS_H
#define PS_SCHEDULER_MEMBERS_H

#include <stdint.h>

#include "scheduler/module.h"
#include "scheduler/observe.h"
#include "scheduler/preflight.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_members ps_members_t;

/* Its events; their self is the ps_members_t. */
extern const ps_sched_events_t ps_members_events;

/* A table of ops->cfg's servers and workers, every row unused. ops,
 * preflight and obs are borrowed and outlive it; facts is the loop's, of
 * which it writes t_end, membership_changes and diverged (never the phase).
 * Returns 0 or PS_ENOMEM. Caller owns *out; destroy with
 * ps_members_destroy(). */
int ps_members_new(ps_members_t **out, const ps_sched_ops_t *ops, ps_sched_facts_t *facts,
                   ps_preflight_t *preflight, ps_sched_obs_t *obs);

/* Frees the table and what its rows keep (DONE reports, server reports);
 * NULL-safe, sets *mb_p to NULL. */
void ps_members_destroy(ps_members_t **mb_p);

/* ---- the rows (borrowed; valid until ps_members_destroy) ---------------- */

/* Rows: servers + workers. */
int ps_members_count(const ps_members_t *mb);

/* Row i of [0, ps_members_count): the servers', then the workers'. */
ps_node_t *ps_members_at(ps_members_t *mb, int i);

/* The row of (role, rank), or NULL when the job has no such rank. */
ps_node_t *ps_members_row(ps_members_t *mb, ps_role_t role, int rank);

/* Worker w's row (w in [0, workers)). */
ps_node_t *ps_members_worker(ps_members_t *mb, int w);

/* The row of the node registered on route r, or NULL. */
ps_node_t *ps_members_node_of(ps_members_t *mb, const ps_route_t *r);

/* Live workers (not lost). */
int ps_members_live(const ps_members_t *mb);

/* The live workers as a Members message into m (initialised by the caller),
 * their ranks in live (PS_MAX_WORKERS entries; borrowed by m). */
void ps_members_live_set(const ps_members_t *mb, Shardps__Members *m, int32_t *live);

/* ---- the rows' changes --------------------------------------------------- */

/* A node's token: 64 random bits from the kernel, never 0 (0 = no token).
 * Returns 0 or PS_EIO. */
int ps_members_new_token(uint64_t *token);

/* Fills row n for m's sender registering as reg (rank: its rank), with a
 * new token; lost: not live yet (a joiner). Returns 0, or PS_EIO when no
 * token can be drawn (the row is untouched). */
int ps_members_admit(ps_node_t *n, const ps_msg_t *m, const Shardps__Register *reg, int rank,
                     int lost);

/* Row n is m's sender again (a restarted scheduler: the same node, with its
 * token, on a new connection); a server's endpoint is the view's. */
void ps_members_readmit(ps_members_t *mb, ps_node_t *n, const ps_msg_t *m,
                        const Shardps__Register *reg);

/* A saved job's workers (a restarted scheduler): their tokens (tokens[w],
 * which the servers hold) and the lost ones (lost[0..nlost), each a worker
 * of the job). */
void ps_members_saved_job(ps_members_t *mb, const uint64_t *tokens, const int32_t *lost,
                          size_t nlost);

/* Row n (a server) is served by spare from now on: its connection, key and
 * pid; not bound and not reported yet. */
void ps_members_swap_in(ps_node_t *n, const ps_node_t *spare);

/* Joiner n is live from now on (a membership change). Returns the live
 * workers. */
int ps_members_joined(ps_members_t *mb, ps_node_t *n);

/* A server lost after training ended: its report is missing, the job ends
 * without it. */
void ps_members_unreported(ps_node_t *n);

/* A failover's rollback: workers finish again (their DONEs before it are of
 * an older generation). */
void ps_members_rollback(ps_members_t *mb);

/* Leaves silent (or closed: why) worker n out when --min-workers allows.
 * Returns 1 when it was left out (or the job failed), 0 when it cannot be. */
int ps_members_leave(ps_members_t *mb, ps_node_t *n, const char *why);

/* The job ended: logs the membership lines still waiting for their step. */
void ps_members_leave_flush(ps_members_t *mb);

/* Passes the current barrier once every live worker is in it (and the
 * preflight passed). */
void ps_members_barrier_check(ps_members_t *mb);

/* The endpoint n announced (announced, which may be n->endpoint itself) into
 * n->endpoint, as its peers must reach it: proto/addr.h's ps_addr_fix with
 * the address n's message came from (peer; "" = n's at registration) and,
 * for a node on this host, our address toward the other hosts (--advertise,
 * else the local end of our route to a node seen on another host). */
void ps_members_fix_endpoint(ps_members_t *mb, ps_node_t *n, const char *announced,
                             const char *peer);

#ifdef __cplusplus
}
#endif
#endif
