/*
 * scheduler/module.h - what a scheduler module sees of the scheduler: node
 * rows to read, the loop's four events, and one ops table of what it may
 * do (send, ask the core to change a row or the view, fail the job, save
 * the restart state).
 *
 * The core owns the node table (members.c), the cluster view (start.c) and
 * the phase (scheduler.c), and is their one writer: a module reads them
 * through ops and asks for every change. A module owns only its opaque
 * state, gets the ops at ps_<module>_new, and knows no socket, so
 * tests/unit drives its handlers with a fake core (tests/unit/sched_fake.h).
 * The node table and the start reach the loop through these ops too.
 * One thread: the scheduler's loop.
 */
#ifndef PS_SCHEDULER_MODULE_H
#define PS_SCHEDULER_MODULE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "proto/addr.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "scheduler/phase.h"
#include "scheduler/scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One node: a row of the core's node table, keyed by its ROUTER routing id.
 * Modules read rows (const) and ask the core for changes; a module's own
 * rows (failover's spares) are the module's to write. */
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
                             NULL before it (owned by the core) */
    int reported;         /* servers: sent their end-of-job report */
    Shardps__ServerReport *report; /* servers: that report; NULL before it (owned,
                                      as stats) */
} ps_node_t;

/* A node's tag for log lines and the summary: "S0", "W3". Returns buf. */
static inline const char *ps_node_tag(const ps_node_t *n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%d", ps_codec_role_tag(n->role), n->rank);
    return buf;
}

/* A node lost: silent for `silent` seconds, or its connection closed. */
typedef struct {
    double silent; /* seconds since its last message */
    int closed;    /* its connection closed (the router's monitor) */
    int fd;        /* closed: the connection's descriptor, else -1 */
} ps_loss_t;

/* The core's own figures, read by modules and the read-outs. */
typedef struct {
    ps_phase_t phase;       /* the job's (scheduler/phase.h) */
    uint64_t run_id;        /* this run of the job, in every REGISTER_ACK */
    double t_start, t_view, t_end; /* ps_now(): the loop's start, the view sent to
                                      the workers, every worker done (0: not yet) */
    int membership_changes; /* workers lost (or joined) while the job ran */
    int diverged;           /* a node ended the job for a NaN or an infinity */
    char failure[512];      /* why the job failed, "" if it did not */
    char lost[16];          /* tag of the node lost to silence, "" if none */
    uint64_t refused;       /* messages from a connection that is not the node it claims */
    uint64_t messages;      /* messages received, every kind */
    uint64_t registrations_refused; /* nodes of another job or build */
} ps_sched_facts_t;

/*
 * What a module may do, each entry called with core as its first argument.
 * Rows are named by a row pointer the module read (its role and rank say
 * which); the core writes its own copy. Nothing here blocks.
 */
typedef struct {
    void *core;
    const ps_scheduler_config_t *cfg; /* the flags (borrowed, outlive the job) */

    /* reading */
    const ps_sched_facts_t *(*facts)(void *core);
    const ps_view_t *(*view)(void *core);
    const ps_node_t *(*node)(void *core, ps_role_t role, int rank); /* NULL: no such rank */
    const ps_node_t *(*node_of)(void *core, const ps_route_t *route); /* registered, or NULL */
    int (*live)(void *core); /* workers not lost */
    /* The live workers as a Members message into m (initialised by the
     * caller), their ranks in live (PS_MAX_WORKERS entries; borrowed by m). */
    void (*live_set)(void *core, Shardps__Members *m, int32_t *live);

    /* sending */
    void (*send)(void *core, const ps_route_t *to, ps_msg_type_t type,
                 const ProtobufCMessage *body);
    void (*reply_error)(void *core, const ps_msg_t *m, int status, const char *why);
    void (*send_servers)(void *core, ps_msg_type_t type, const ProtobufCMessage *body);
    /* To every registered node, and to the spares waiting (failover's). */
    void (*send_all)(void *core, ps_msg_type_t type, const ProtobufCMessage *body);
    /* The view (v; NULL: the job's own) to n; a server's copy gets the
     * workers' tokens. Returns 0 or PS_ENOMEM (it does not encode). */
    int (*send_view)(void *core, const ps_node_t *n, ps_msg_type_t type, const ps_view_t *v);
    /* Answers n's registration: rank, token, the job and its identity. */
    void (*send_ack)(void *core, const ps_node_t *n);
    /* A reply to request_id (0: unasked) on route. Returns 0 or a PS_E*. */
    int (*answer)(void *core, const ps_route_t *to, ps_msg_type_t type, uint64_t request_id,
                  const ProtobufCMessage *body);

    /* the job */
    void (*abort_job)(void *core, int usage, const char *why); /* usage: exit status 2 */
    void (*phase_event)(void *core, ps_phase_event_t ev);
    void (*save_state)(void *core); /* the restart state (scheduler/restart.h) */
    int (*new_token)(void *core, uint64_t *token); /* never 0; 0 or PS_EIO */

    /* rows the core changes when asked */
    /* m's sender registers as reg in the row of (reg->role, rank), with a
     * new token; lost: not live yet (a joiner). 0 or PS_EIO (untouched). */
    int (*admit)(void *core, const ps_msg_t *m, const Shardps__Register *reg, int rank,
                 int lost);
    /* The saved job's node reg is m's sender again (a restarted scheduler). */
    void (*readmit)(void *core, const ps_msg_t *m, const Shardps__Register *reg);
    void (*seen)(void *core, const ps_node_t *n);   /* heard from now */
    void (*forget)(void *core, const ps_node_t *n); /* the row is free */
    void (*model)(void *core, const ps_node_t *n, uint64_t num_params,
                  uint64_t train_samples);        /* a joiner's model */
    int (*joined)(void *core, const ps_node_t *n); /* live from now: the live count */
    /* Leaves worker n out when --min-workers allows (why: its loss). 1 when
     * it was (or the job failed), 0 when it cannot be. */
    int (*leave)(void *core, const ps_node_t *n, const char *why);
    void (*unreported)(void *core, const ps_node_t *n); /* lost after training: no report */
    void (*rollback)(void *core);       /* workers finish again after a failover */
    void (*barrier_check)(void *core);  /* the preflight passed: a barrier may go */
    /* The endpoint row `own` (the module's own row, which it writes) announced,
     * as its peers must reach it (peer: the address m came from, "" = own's). */
    void (*fix_endpoint)(void *core, ps_node_t *own, const char *announced, const char *peer);

    /* the view the core changes when asked */
    /* A restarted scheduler takes the saved job (view v, state st) at now. */
    void (*saved_job)(void *core, const ps_view_t *v, const Shardps__JoinSchedulerState *st,
                      double now);
    /* Server r's row is served by spare from now, rolling back to checkpoint
     * step in dir of parts[0..nparts): a new generation. */
    void (*replace)(void *core, int r, const ps_node_t *spare, int64_t step,
                    const ps_checkpoint_part_t *parts, int nparts, const char *dir);
    /* Server r's row is served by its in-step replica (bound already): a new
     * generation, nothing rolled back. */
    void (*take_over)(void *core, int r, const ps_node_t *replica);
    /* The view's checkpoint part is settled: the servers get the view. */
    void (*start_servers)(void *core);
} ps_sched_ops_t;

/* ops->fail with a printf format. */
static inline void ps_sched_fail(const ps_sched_ops_t *ops, int usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void ps_sched_fail(const ps_sched_ops_t *ops, int usage, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    ops->abort_job(ops->core, usage, why);
}

/* ops->reply_error with a printf format. */
static inline void ps_sched_refuse(const ps_sched_ops_t *ops, const ps_msg_t *m, int status,
                                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static inline void ps_sched_refuse(const ps_sched_ops_t *ops, const ps_msg_t *m, int status,
                                   const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    ops->reply_error(ops->core, m, status, why);
}

/* The phase, as ops->facts says it. */
static inline ps_phase_t ps_sched_phase(const ps_sched_ops_t *ops)
{
    return ops->facts(ops->core)->phase;
}

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
    int (*on_register)(void *self, ps_msg_t *m, const Shardps__Register *reg);
    int (*on_message)(void *self, const ps_node_t *n, ps_msg_t *m);
    int (*on_lost)(void *self, const ps_node_t *n, const ps_loss_t *loss);
    void (*on_tick)(void *self, double now);
} ps_sched_events_t;

#ifdef __cplusplus
}
#endif
#endif
