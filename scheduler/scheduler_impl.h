/*
 * scheduler/scheduler_impl.h - private: the scheduler's core state, the
 * event interface its modules provide, and the core's functions they call.
 *
 * The core is three files over one ps_scheduler_t: scheduler.c (setup, the
 * event loop, liveness, the phase, aborting), start.c (registration up to the
 * running job: the shard map and the cluster view) and members.c (the node
 * table's rows and the running job: barriers, workers left out, DONE and
 * reports, the end). Only they write the core's fields and a node's row.
 *
 * Every other concern is a module that owns its state behind an opaque type
 * (agree, join, ckpt, restart, failover, preflight, observe, summary): it
 * sees scheduler/module.h only, reads the core's state and asks for every
 * change through the ops table the core gives it (ops.c), and reaches other
 * modules only through their functions. The loop reaches each module through
 * one event interface, ps_sched_events_t. Only the core's files include
 * this header.
 */
#ifndef PS_SCHEDULER_IMPL_H
#define PS_SCHEDULER_IMPL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/ratelog.h"
#include "proto/addr.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "proto/sock.h"
#include "scheduler/agree.h"
#include "scheduler/ckpt.h"
#include "scheduler/failover.h"
#include "scheduler/identity.h"
#include "scheduler/join.h"
#include "scheduler/module.h"
#include "scheduler/observe.h"
#include "scheduler/phase.h"
#include "scheduler/preflight.h"
#include "scheduler/restart.h"
#include "scheduler/scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The core's two event parts (start.c, members.c): their self is the
 * scheduler. */
extern const ps_sched_events_t ps_members_events, ps_start_events;

enum { PS_SCHED_MODULES = 8 };

typedef struct ps_scheduler ps_scheduler_t;

/* The scheduler's whole state, one per ps_scheduler_run. */
struct ps_scheduler {
    /* the core's (scheduler.c, start.c, members.c) */
    const ps_scheduler_config_t *cfg;
    ps_ctx_t *ctx;
    ps_sock_t *router;
    ps_sock_t *monitor; /* the router's closed connections; NULL if unavailable */
    char endpoint[128];
    char outward[PS_ADDR_MAX]; /* our address toward the job's other hosts; "" while
                                  none is known (members.c: ps_members_fix_endpoint) */
    ps_sched_facts_t facts; /* the phase (changed only by ps_scheduler_phase_event()),
                               run id, times and counters: what modules read */
    ps_node_t *nodes; /* S + M rows: servers first */
    int nnodes;
    ps_view_t *view;  /* the cluster view (start.c builds it; a failover or a
                         restart changes it through start.c) */
    ps_identity_t id; /* the job's id, configuration hash and build */
    double last_beat, next_wait_log; /* ps_now() */
    char barrier[64]; /* name of the barrier being collected, "" if none */
    struct {
        char head[48], tail[128];
    } leaves[8];      /* membership lines of workers left out, waiting for the
                         step from server 0 (members.c); FIFO */
    int nleaves;
    int failure_usage; /* the failure is the flags' (ps_scheduler_fail_usage): exit 2 */
    char no_progress[256]; /* a finished job at chance: why (exit PS_EXIT_NO_PROGRESS) */
    ps_ratelog_t *drops; /* log lines of dropped messages, one per peer and reason */
    ps_sched_ops_t ops;  /* what the modules may do (ops.c) */
    /* the modules' (opaque; each changes only its own) */
    ps_sched_obs_t *obs;
    ps_failover_t *failover;
    ps_agree_t *agree;
    ps_join_t *join;
    ps_ckpt_t *ckpt;
    ps_restart_t *restart;
    ps_preflight_t *preflight;
    struct {
        const ps_sched_events_t *ev;
        void *self;
    } mods[PS_SCHED_MODULES]; /* in the order events are offered */
};

/* ---- scheduler.c: the loop's services ---------------------------------- */

/* The only way the phase changes: the table's transition for ev
 * (scheduler/phase.h). Returns 0, or PS_ESTATE when the table has none
 * (logged: a bug of ours; the phase stays). */
int ps_scheduler_phase_event(ps_scheduler_t *s, ps_phase_event_t ev);

/* Aborts the job: every node is told why (a SHUTDOWN), the summary and the
 * restart state are written, the loop ends with status 1. */
void ps_scheduler_fail(ps_scheduler_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* As ps_scheduler_fail, for a job the flags asked for in vain (--resume
 * with nothing to resume): the loop ends with status 2. */
void ps_scheduler_fail_usage(ps_scheduler_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sends a control message (body, or NULL for none) to every registered node
 * (and heartbeats and SHUTDOWNs to waiting spares), or to every server. */
void ps_scheduler_send_all(ps_scheduler_t *s, ps_msg_type_t type,
                           const ProtobufCMessage *body);
void ps_scheduler_send_servers(ps_scheduler_t *s, ps_msg_type_t type,
                               const ProtobufCMessage *body);

/* Sends the view (v; NULL: the job's) to n as a message of type; a server's
 * copy carries the workers' tokens, an allreduce worker's its left
 * neighbour's. Returns 0 or PS_ENOMEM (it does not encode). */
int ps_scheduler_send_view(ps_scheduler_t *s, const ps_node_t *n, ps_msg_type_t type,
                           const ps_view_t *v);

/* Writes the restart state (scheduler/restart.h): the view with the
 * workers' tokens, the lost workers, the counters, and what the modules
 * keep of the job (joins, newest checkpoint, spare ids, restarts). Nothing
 * without a checkpoint directory or before the job has a model. */
void ps_scheduler_save_state(ps_scheduler_t *s);

/* A node's token: 64 random bits from the kernel, never 0 (0 = no token).
 * Returns 0 or PS_EIO. */
int ps_scheduler_new_token(uint64_t *token);

/* Answers node n's registration: its rank, token, the job, the job's id and
 * configuration hash, this run's id. */
void ps_scheduler_send_ack(ps_scheduler_t *s, const ps_node_t *n);

/* The row of the node registered on route r, or NULL. */
ps_node_t *ps_scheduler_node_of(ps_scheduler_t *s, const ps_route_t *r);

/* The row of (role, rank), or NULL when the job has no such rank. */
ps_node_t *ps_scheduler_row(const ps_scheduler_t *s, ps_role_t role, int rank);

/* Worker w's row. */
static inline ps_node_t *ps_scheduler_worker(const ps_scheduler_t *s, int w)
{
    return &s->nodes[s->cfg->servers + w];
}

/* ---- ops.c: the modules' ops ---------------------------------------------- */

/* s->ops: every entry a call of the core's function below on s. */
void ps_scheduler_ops_init(ps_scheduler_t *s);

/* ---- start.c: the view's changes --------------------------------------- */

/* A restarted scheduler takes the saved job (view v, state st; now: ps_now()
 * when its first node came back): the view, the job's time, the lost workers
 * and their tokens, the membership count, and the joins and the newest
 * checkpoint of join and ckpt; the phase becomes RECOVERING. */
void ps_start_saved_job(ps_scheduler_t *s, const ps_view_t *v,
                        const Shardps__JoinSchedulerState *st, double now);

/* Sends every server the view, with its checkpoint part (ps_ckpt_view):
 * each binds for its shard (STARTING). */
void ps_start_servers(ps_scheduler_t *s);

/* A failover: server r's row is served by spare, and the job rolls back to
 * checkpoint `step` in dir, whose manifest lists parts[0..nparts) (copied);
 * a new generation. */
void ps_start_replace(ps_scheduler_t *s, int r, const ps_node_t *spare, int64_t step,
                      const ps_checkpoint_part_t *parts, int nparts, const char *dir);

/* A takeover: server r's row is served by its in-step replica, bound at its
 * endpoint already; a new generation, nothing rolled back. */
void ps_start_take_over(ps_scheduler_t *s, int r, const ps_node_t *replica);

/* ---- members.c: the rows' changes -------------------------------------- */

/* Fills row n for m's sender registering as reg (rank: its rank), with a
 * new token; lost: not live yet (a joiner). Returns 0, or PS_EIO when no
 * token can be drawn (the row is untouched). */
int ps_members_admit(ps_node_t *n, const ps_msg_t *m, const Shardps__Register *reg, int rank,
                     int lost);

/* Row n is m's sender again (a restarted scheduler: the same node, with its
 * token, on a new connection). */
void ps_members_readmit(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m,
                        const Shardps__Register *reg);

/* Frees what row n keeps of its node's end (stats, report). */
void ps_members_clear(ps_node_t *n);

/* The live workers as a Members message into m (initialised by the caller),
 * their ranks in live (PS_MAX_WORKERS entries; borrowed by m). */
void ps_members_live_set(const ps_scheduler_t *s, Shardps__Members *m, int32_t *live);

/* Row n (a server) is served by spare from now on: its connection, key and
 * pid; not bound and not reported yet. */
void ps_members_swap_in(ps_node_t *n, const ps_node_t *spare);

/* Joiner n is live from now on (a membership change). Returns the live
 * workers. */
int ps_members_joined(ps_scheduler_t *s, ps_node_t *n);

/* A server lost after training ended: its report is missing, the job ends
 * without it. */
void ps_members_unreported(ps_node_t *n);

/* A failover's rollback: workers finish again (their DONEs before it are of
 * an older generation). */
void ps_members_rollback(ps_scheduler_t *s);

/* Leaves silent (or closed: why) worker n out when --min-workers allows.
 * Returns 1 when it was left out (or the job failed), 0 when it cannot be. */
int ps_members_leave(ps_scheduler_t *s, ps_node_t *n, const char *why);

/* The job ended: logs the membership lines still waiting for their step. */
void ps_members_leave_flush(ps_scheduler_t *s);

/* Passes the current barrier once every live worker is in it (and the
 * preflight passed). */
void ps_members_barrier_check(ps_scheduler_t *s);

/* The endpoint n announced (announced, which may be n->endpoint itself) into
 * n->endpoint, as its peers must reach it: proto/addr.h's ps_addr_fix with
 * the address n's message came from (peer; "" = n's at registration) and,
 * for a node on this host, our address toward the other hosts (--advertise,
 * else the local end of our route to a node seen on another host). */
void ps_members_fix_endpoint(ps_scheduler_t *s, ps_node_t *n, const char *announced,
                             const char *peer);

/* Live workers (not lost). */
int ps_members_live(const ps_scheduler_t *s);

#ifdef __cplusplus
}
#endif
#endif
