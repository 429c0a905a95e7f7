/*
 * scheduler/scheduler_impl.h - private: the scheduler's state, shared by
 * scheduler.c (the event loop that changes it) and summary.c (which reads it
 * once at the end to write the job summary). Only scheduler/ includes this
 * header.
 */
#ifndef PS_SCHEDULER_IMPL_H
#define PS_SCHEDULER_IMPL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/ratelog.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "proto/sock.h"
#include "scheduler/identity.h"
#include "scheduler/manifest.h"
#include "scheduler/observe.h"
#include "scheduler/phase.h"
#include "scheduler/scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One node: a row of ps_scheduler_t.nodes, keyed by its ROUTER routing id. */
typedef struct {
    int used;             /* row holds a registered node */
    ps_role_t role;       /* server or worker */
    int rank;             /* rank within the role */
    ps_route_t route;     /* ROUTER routing id */
    char endpoint[128];   /* servers: advertised endpoint; allreduce workers: ring one */
    uint32_t pid;         /* for log lines */
    char curve_key[PS_CURVE_KEY_LEN]; /* --secure: the public key it serves with */
    uint64_t token;       /* its secret (REGISTER_ACK); servers check workers' */
    int ready;            /* servers: bound for their shard (MSG_PEER_READY) */
    double last_seen;     /* ps_now() of its last message */
    int fd;               /* its connection's file descriptor (-1: unknown) */
    uint64_t num_params;  /* workers: P of their model (0 until reported) */
    uint64_t train_samples; /* workers: size of their training set */
    int in_barrier;       /* workers: arrived at the current barrier */
    int done;             /* workers: sent DONE */
    int lost;             /* workers: lost and left out of the job (--min-workers) */
    int joining;          /* workers joining a running job: 1 registered, 2 model
                             reported (scheduler/join.c); lost until they join */
    ps_done_t stats;      /* workers: their DONE report */
    int reported;         /* servers: sent their end-of-job report */
    ps_server_report_t report; /* servers: that report */
    ps_preflight_pair_t *preflight; /* workers, --preflight: one per server, or NULL
                                       until the result came; owned */
} ps_node_t;

/* Spares and replacements of lost servers: scheduler/failover.c. */
typedef struct ps_failover ps_failover_t;

/* A step agreed with every server: scheduler/agree.c. */
typedef struct ps_agree ps_agree_t;

/* The scheduler's whole state, one per ps_scheduler_run. */
typedef struct {
    const ps_scheduler_config_t *cfg;
    ps_ctx_t *ctx;
    ps_sock_t *router;
    char endpoint[128];
    ps_phase_t phase; /* changed only by ps_scheduler_phase_event() */
    ps_node_t *nodes; /* S + M rows: servers first */
    int nnodes;
    ps_view_t *view;
    char barrier[64]; /* name of the barrier being collected, "" if none */
    double t_start, t_view, t_end, last_beat;
    char failure[256];
    char lost[16]; /* tag of the node lost to silence, "" if none */
    ps_manifest_t *manifest; /* checkpointing: which parts are durable */
    int diverged;  /* a node ended the job for a NaN or an infinity */
    ps_ratelog_t *drops; /* log lines of dropped messages, one per peer and reason */
    int membership_changes; /* workers lost (or joined) while the job ran */
    uint64_t refused; /* messages from a connection that is not the node it claims */
    uint64_t messages; /* messages received, every kind: its load grows with the nodes */
    ps_identity_t id; /* the job's id, configuration hash and build */
    uint64_t registrations_refused; /* nodes of another job or build */
    double next_wait_log; /* ps_now() of the next "still waiting for" line */
    int preflight_state; /* --preflight: 0 waiting for results, 1 passed, -1 failed */
    ps_sched_obs_t *obs; /* the nodes' reports, the metrics endpoint (observe.c) */
    ps_failover_t *failover; /* spare servers, replacements (scheduler/failover.c) */
    ps_sock_t *monitor;   /* the router's closed connections; NULL if unavailable */
    uint64_t run_id;  /* this run of the job, in every REGISTER_ACK */
    ps_agree_t *agree; /* the step being agreed with the servers (scheduler/agree.c) */
    double last_checkpoint; /* ps_now() of the last timed checkpoint's agreement */
    int joins;        /* workers that joined while the job ran */
    struct {
        char head[48], tail[128];
    } leaves[8];      /* membership lines of workers left out, waiting for the
                         step from server 0 (ps_join_answer); FIFO */
    int nleaves;
    ps_view_t *saved; /* --resume DIR: the view of DIR/scheduler.state, whose
                         nodes may register again (scheduler/join.c); or NULL */
    ps_sched_state_t saved_state; /* the rest of that state */
    int restarts;     /* scheduler restarts of this job */
    double t_recover; /* ps_now() when the first node registered again */
    int64_t checkpoint; /* the newest complete checkpoint's step, -1 none */
} ps_scheduler_t;

/* scheduler/observe.c, from the loop: answers MSG_STATUS (from any
 * connection: shardps-status registers nothing) with the cluster view, and
 * refreshes the scheduler's own gauges from its state. */
void ps_scheduler_status_reply(ps_scheduler_t *s, const ps_msg_t *m);
void ps_scheduler_observe_tick(ps_scheduler_t *s);

/* "tcp://0.0.0.0:5000" (or a "*" host) from a node on 10.0.0.2 becomes
 * "tcp://10.0.0.2:5000": a server (or an allreduce worker) bound to every
 * interface advertises the address the scheduler sees it at. */
static inline void ps_fix_endpoint(char *ep, size_t cap, const char *peer)
{
    const char *wild[] = {"tcp://0.0.0.0:", "tcp://*:"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(wild[i]);
        if (peer[0] && !strncmp(ep, wild[i], n)) {
            char port[32];
            snprintf(port, sizeof port, "%s", ep + n);
            snprintf(ep, cap, "tcp://%s:%s", peer, port);
            return;
        }
    }
}

/* Logs the membership line of a worker left out, head + " at step N" +
 * tail, once server 0 says the step (or at once without it when too many
 * wait) (scheduler/join.c). */
void ps_join_leave_line(ps_scheduler_t *s, const char *head, const char *tail);

/* Logs the lines still waiting, without their step (the job ended). */
void ps_join_leave_flush(ps_scheduler_t *s);

/* Leaves silent worker n out when --min-workers allows (scheduler.c).
 * Returns 1 when it was left out (or the job failed), 0 when it cannot be. */
int ps_scheduler_leave(ps_scheduler_t *s, ps_node_t *n, double silent);

/* The only way the phase changes: the table's transition for ev
 * (scheduler/phase.h). Returns 0, or PS_ESTATE when the table has none
 * (logged: a bug of ours; the phase stays) (scheduler.c). */
int ps_scheduler_phase_event(ps_scheduler_t *s, ps_phase_event_t ev);

/* Aborts the job for reason (scheduler.c): every node is told, the summary
 * is written. */
void ps_scheduler_fail(ps_scheduler_t *s, const char *reason);

/* Sends a control message (body of len bytes, or none) to every server of
 * the job (scheduler.c). */
void ps_scheduler_send_servers(ps_scheduler_t *s, ps_msg_type_t type, const void *body,
                               size_t len);

/* A node's token: 64 random bits from the kernel, never 0 (0 = no token).
 * Returns 0 or PS_EIO (scheduler.c). */
int ps_scheduler_new_token(uint64_t *token);

/* Answers node n's registration: its rank, token, the job, the job's id and
 * configuration hash, this run's id (scheduler.c). */
void ps_scheduler_send_ack(ps_scheduler_t *s, const ps_node_t *n);

/* A node's tag for log lines and the summary: "S0", "W3". Returns buf. */
static inline const char *ps_node_tag(const ps_node_t *n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%d", ps_codec_role_tag(n->role), n->rank);
    return buf;
}

#ifdef __cplusplus
}
#endif
#endif
