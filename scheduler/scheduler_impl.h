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
 * (agree, join, ckpt, restart, failover, preflight, observe): it reads the
 * core's state, changes it only through the functions below, and reaches
 * other modules only through their functions. The loop reaches each module
 * through one event interface, ps_sched_events_t. summary.c and observe.c
 * read the state. Only scheduler/ includes this header.
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
#include "scheduler/identity.h"
#include "scheduler/observe.h"
#include "scheduler/phase.h"
#include "scheduler/scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One node: a row of ps_scheduler_t.nodes, keyed by its ROUTER routing id.
 * Written by the core only (members.c has the changes other modules ask for). */
typedef struct {
    int used;             /* row holds a registered node */
    ps_role_t role;       /* server or worker */
    int rank;             /* rank within the role */
    ps_route_t route;     /* ROUTER routing id */
    char endpoint[128];   /* servers: advertised endpoint; allreduce workers: ring one */
    char addr[PS_ADDR_MAX]; /* the address its connection comes from ("" unknown) */
    uint32_t pid;         /* for log lines */
    char curve_key[PS_CURVE_KEY_LEN]; /* --secure: the public key it serves with */
    uint64_t token;       /* its secret (REGISTER_ACK); servers check workers' */
    int ready;            /* servers: bound for their shard (MSG_PEER_READY) */
    int follows;          /* a spare kept as a hot replica: 1 + the rank whose keys it
                             follows (scheduler/failover.c); 0: none */
    int in_step;          /* that replica holds the keys and follows every update */
    uint64_t replica_token; /* what its primary's messages to it carry */
    double last_seen;     /* ps_now() of its last message */
    int fd;               /* its connection's file descriptor (-1: unknown) */
    uint64_t num_params;  /* workers: P of their model (0 until reported) */
    uint64_t train_samples; /* workers: size of their training set */
    int in_barrier;       /* workers: arrived at the current barrier */
    int done;             /* workers: sent DONE */
    int lost;             /* workers: lost and left out of the job (--min-workers),
                             or joining and not live yet (scheduler/join.c) */
    Shardps__Done *stats; /* workers: their DONE report, kept for the summary;
                             NULL before it (owned: ps_members_clear() frees it) */
    int reported;         /* servers: sent their end-of-job report */
    Shardps__ServerReport *report; /* servers: that report; NULL before it (owned,
                                      as stats) */
} ps_node_t;

/* The modules, each in scheduler/<name>.c. */
typedef struct ps_failover ps_failover_t; /* spare servers, replacements */
typedef struct ps_agree ps_agree_t;       /* a step agreed with every server */
typedef struct ps_join ps_join_t;         /* workers joining a running job */
typedef struct ps_ckpt ps_ckpt_t;         /* checkpoints: manifests, timed ones, resume */
typedef struct ps_restart ps_restart_t;   /* the scheduler's own state, for a restart */
typedef struct ps_preflight ps_preflight_t; /* --preflight: the probes' results */

/* A node lost: silent for `silent` seconds, or its connection closed. */
typedef struct {
    double silent; /* seconds since its last message */
    int closed;    /* its connection closed (the router's monitor) */
    int fd;        /* closed: the connection's descriptor, else -1 */
} ps_loss_t;

typedef struct ps_scheduler ps_scheduler_t;

/*
 * The loop's four events, as one module takes them; NULL where it takes
 * none. self is the module's state. on_register, on_message and on_lost
 * return 1 when the module took the event (the loop offers it to no other
 * module), 0 when it is not the module's. The loop offers each event to the
 * modules in one fixed order (scheduler.c:s_modules).
 *
 * on_register: a REGISTER that decoded and passed the identity check.
 * on_message:  a message from node n; n is NULL when the connection is no
 *              node or claims another node (only failover's spares speak so).
 * on_lost:     node n is lost; n is NULL for a closed connection of no node.
 *              A loss by silence no module takes aborts the job.
 * on_tick:     every turn of the loop (at least every 100 ms).
 */
typedef struct {
    int (*on_register)(void *self, ps_scheduler_t *s, ps_msg_t *m,
                       const Shardps__Register *reg);
    int (*on_message)(void *self, ps_scheduler_t *s, ps_node_t *n, ps_msg_t *m);
    int (*on_lost)(void *self, ps_scheduler_t *s, ps_node_t *n, const ps_loss_t *loss);
    void (*on_tick)(void *self, ps_scheduler_t *s, double now);
} ps_sched_events_t;

/* Each module's events (in its .c); the core's two parts have no state of
 * their own beyond ps_scheduler_t. */
extern const ps_sched_events_t ps_restart_events, ps_failover_events, ps_join_events,
    ps_agree_events, ps_ckpt_events, ps_preflight_events, ps_members_events, ps_start_events;

enum { PS_SCHED_MODULES = 8 };

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
    ps_phase_t phase; /* changed only by ps_scheduler_phase_event() */
    ps_node_t *nodes; /* S + M rows: servers first */
    int nnodes;
    ps_view_t *view;  /* the cluster view (start.c builds it; a failover or a
                         restart changes it through start.c) */
    ps_identity_t id; /* the job's id, configuration hash and build */
    uint64_t run_id;  /* this run of the job, in every REGISTER_ACK */
    double t_start, t_view, t_end, last_beat, next_wait_log; /* ps_now() */
    char barrier[64]; /* name of the barrier being collected, "" if none */
    struct {
        char head[48], tail[128];
    } leaves[8];      /* membership lines of workers left out, waiting for the
                         step from server 0 (members.c); FIFO */
    int nleaves;
    char failure[256];
    int failure_usage; /* the failure is the flags' (ps_scheduler_fail_usage): exit 2 */
    char lost[16];    /* tag of the node lost to silence, "" if none */
    int diverged;     /* a node ended the job for a NaN or an infinity */
    int membership_changes; /* workers lost (or joined) while the job ran */
    ps_ratelog_t *drops; /* log lines of dropped messages, one per peer and reason */
    uint64_t refused; /* messages from a connection that is not the node it claims */
    uint64_t messages; /* messages received, every kind: its load grows with the nodes */
    uint64_t registrations_refused; /* nodes of another job or build */
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

/* Sends the cluster view to n as a message of type; a server's copy carries
 * the workers' tokens. Returns 0 or PS_ENOMEM (it does not encode). */
int ps_scheduler_send_view(ps_scheduler_t *s, const ps_node_t *n, ps_msg_type_t type);

/* Packs the restart state st with the view (its servers' copy, with the
 * workers' tokens; st->view is set to it while packing). Returns 0 or a
 * PS_E*; caller frees *body. */
int ps_scheduler_pack_state(ps_scheduler_t *s, Shardps__JoinSchedulerState *st,
                            uint8_t **body, size_t *len);

/* A node's token: 64 random bits from the kernel, never 0 (0 = no token).
 * Returns 0 or PS_EIO. */
int ps_scheduler_new_token(uint64_t *token);

/* Answers node n's registration: its rank, token, the job, the job's id and
 * configuration hash, this run's id. */
void ps_scheduler_send_ack(ps_scheduler_t *s, const ps_node_t *n);

/* The row of the node registered on route r, or NULL. */
ps_node_t *ps_scheduler_node_of(ps_scheduler_t *s, const ps_route_t *r);

/* Worker w's row. */
static inline ps_node_t *ps_scheduler_worker(const ps_scheduler_t *s, int w)
{
    return &s->nodes[s->cfg->servers + w];
}

/* ---- start.c: the view's changes other modules ask for ----------------- */

/* A restarted scheduler takes the saved job (view v, state st; now: ps_now()
 * when its first node came back): the view, the job's time, the lost workers
 * and their tokens, the membership count; the phase becomes RECOVERING. */
void ps_start_saved_job(ps_scheduler_t *s, const ps_view_t *v,
                        const Shardps__JoinSchedulerState *st, double now);

/* Sends every server the view (each binds for its shard: STARTING); the
 * job's checkpoint part must be in it (ps_ckpt_setup). */
void ps_start_servers(ps_scheduler_t *s);

/* A failover: server r is replaced by a spare serving with curve_key, and
 * the job rolls back to checkpoint `step` in dir, whose manifest lists
 * parts[0..nparts) (copied); a new generation. */
void ps_start_view_failover(ps_scheduler_t *s, int r, const char *curve_key, int64_t step,
                            const ps_checkpoint_part_t *parts, int nparts, const char *dir);

/* ---- members.c: a row's changes other modules ask for ------------------ */

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

/* Node n was heard from now. */
void ps_members_seen(ps_node_t *n);

/* Row n is free (its node is gone; a lost worker stays lost). */
void ps_members_forget(ps_node_t *n);

/* A joiner's model: its P and training set. */
void ps_members_model(ps_node_t *n, uint64_t num_params, uint64_t train_samples);

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

/* ---- helpers ------------------------------------------------------------ */

/* A node's tag for log lines and the summary: "S0", "W3". Returns buf. */
static inline const char *ps_node_tag(const ps_node_t *n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%d", ps_codec_role_tag(n->role), n->rank);
    return buf;
}

/* scheduler/observe.c, from the loop: answers MSG_STATUS (from any
 * connection: shardps-status registers nothing) with the cluster view, and
 * refreshes the scheduler's own gauges from its state. */
void ps_scheduler_status_reply(ps_scheduler_t *s, const ps_msg_t *m);
void ps_scheduler_observe_tick(ps_scheduler_t *s);

/* Once the job has ended (finished or failed): sends the final view, unasked
 * (request id 0), to the last few that asked for one, so that a
 * `shardps-status --watch` learns how the job ended though the scheduler is
 * gone before its next question. */
void ps_scheduler_status_final(ps_scheduler_t *s);

#ifdef __cplusplus
}
#endif
#endif
