/*
 * scheduler/scheduler_impl.h - private to the loop (scheduler.c) and the
 * modules' ops table (ops.c): the scheduler's state, and the loop's services
 * that the ops hand on.
 *
 * The core is three parts: the loop (scheduler.c: setup, the event loop,
 * liveness, the phase, aborting, the restart state, sending), the node table
 * and the running job's members (members.c) and the job's start and its
 * cluster view (start.c). Only they write a node's row and the view. The
 * node table and the start each own their state behind an opaque type and,
 * like every module, ask the loop for the rest through the ops.
 *
 * Every other concern is a module that owns its state behind an opaque type
 * (agree, join, ckpt, restart, failover, preflight, observe, summary): it
 * sees scheduler/module.h only, reads the core's state and asks for every
 * change through the ops table the core gives it (ops.c), and reaches other
 * modules only through their functions. The loop reaches each module through
 * one event interface, ps_sched_events_t.
 */
#ifndef PS_SCHEDULER_IMPL_H
#define PS_SCHEDULER_IMPL_H

#include <stdint.h>

#include "common/ratelog.h"
#include "proto/msg.h"
#include "proto/sock.h"
#include "scheduler/agree.h"
#include "scheduler/ckpt.h"
#include "scheduler/failover.h"
#include "scheduler/identity.h"
#include "scheduler/join.h"
#include "scheduler/members.h"
#include "scheduler/module.h"
#include "scheduler/observe.h"
#include "scheduler/phase.h"
#include "scheduler/preflight.h"
#include "scheduler/restart.h"
#include "scheduler/scheduler.h"
#include "scheduler/start.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { PS_SCHED_MODULES = 8 };

typedef struct ps_scheduler ps_scheduler_t;

/* The scheduler's whole state, one per ps_scheduler_run. */
struct ps_scheduler {
    /* the loop's (scheduler.c) */
    const ps_scheduler_config_t *cfg;
    ps_ctx_t *ctx;
    ps_sock_t *router;
    ps_sock_t *monitor; /* the router's closed connections; NULL if unavailable */
    char endpoint[128];
    ps_sched_facts_t facts; /* the phase (changed only by ps_scheduler_phase_event()),
                               run id, times and counters: what modules read */
    ps_identity_t id; /* the job's id, configuration hash and build */
    double last_beat; /* ps_now() */
    int failure_usage; /* the failure is the flags' (ps_scheduler_fail_usage): exit 2 */
    char no_progress[256]; /* a finished job at chance: why (exit PS_EXIT_NO_PROGRESS) */
    ps_ratelog_t *drops; /* log lines of dropped messages, one per peer and reason */
    ps_sched_ops_t ops;  /* what the modules may do (ops.c) */
    /* the core's other parts (opaque) */
    ps_members_t *members; /* the node table (members.c) */
    ps_start_t *start;     /* the job's start and the cluster view (start.c) */
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

/* Writes the restart state (scheduler/restart.h): the view with the
 * workers' tokens, the lost workers, the counters, and what the modules
 * keep of the job (joins, newest checkpoint, spare ids, restarts). Nothing
 * without a checkpoint directory or before the job has a model. */
void ps_scheduler_save_state(ps_scheduler_t *s);

/* Answers node n's registration: its rank, token, the job, the job's id and
 * configuration hash, this run's id. */
void ps_scheduler_send_ack(ps_scheduler_t *s, const ps_node_t *n);

/* ---- ops.c: the modules' ops ---------------------------------------------- */

/* s->ops: every entry a call of the loop's services above, of the node
 * table's (members.h) or of the start's (start.h) on s's. */
void ps_scheduler_ops_init(ps_scheduler_t *s);

#ifdef __cplusplus
}
#endif
#endif
