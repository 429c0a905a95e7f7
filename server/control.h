/*
 * server/control.h - what the scheduler tells a server beside the data:
 * failovers (MSG_FAILOVER: roll back to a checkpoint with the other
 * servers), the live workers (MSG_MEMBERS), a joining worker or a timed
 * checkpoint (MSG_JOIN_PREPARE, MSG_JOIN_STEP: a step agreed with every
 * server), and the server's own checkpoints and resume.
 *
 * The module owns the server's failover generation and its checkpoint state;
 * the loop (server/server.c) hands it each control message's body and calls
 * it when a push or a step was applied. Messages to the scheduler go out
 * through the caller's callbacks, as the consistency's do, so the module
 * needs no socket. It applies nothing itself: steps and rollbacks are the
 * consistency's (server/consistency.h), the shard's parts server/checkpoint.h's.
 *
 * Not thread-safe: one thread (the server's loop) makes every call, and the
 * callbacks run on it, inside the call.
 */
#ifndef PS_SERVER_CONTROL_H
#define PS_SERVER_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "proto/codec.h"
#include "server/consistency.h"
#include "server/rows.h"
#include "server/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What goes out, called back on the caller's thread inside the calls below. */
typedef struct {
    void *ctx; /* first argument of each callback */
    /* Send the scheduler a message of type with body (borrowed for the call). */
    void (*send)(void *ctx, ps_msg_type_t type, const ProtobufCMessage *body);
    /* A failover of generation was taken: what the server sends from now on
     * carries it. */
    void (*generation)(void *ctx, int64_t generation);
    /* The job cannot go on (the shard cannot be rolled back): tell the
     * scheduler why. */
    void (*abort)(void *ctx, const char *why);
    /* This server, a hot replica, takes its primary's rank over: what it
     * sends from now on comes from that rank. NULL: nothing (and for
     * reloaded below). */
    void (*promoted)(void *ctx, int rank);
    /* The store was reloaded from a checkpoint (a failover's rollback): a
     * hot replica must take a snapshot again. */
    void (*reloaded)(void *ctx);
} ps_control_ops_t;

typedef struct {
    ps_view_t *view;        /* borrowed, and written: a joiner's token (worker_tokens),
                               the servers' endpoints after a failover; must outlive it */
    int rank;               /* this server's */
    ps_store_t *store;      /* borrowed: checkpoints read it, failovers reload it */
    ps_consistency_t *cons; /* borrowed: its version, live workers, holds and rollback */
    const char *dir;        /* this server's copy of the checkpoint directory (its
                               --checkpoint-dir; borrowed), or NULL: the view's paths */
    ps_control_ops_t ops;
    ps_rows_t *rows;        /* borrowed: a job with embedding rows, the server's (its
                               hashes: the view's, for rank), checkpointed and reloaded
                               with the store; else NULL */
} ps_control_config_t;

typedef struct ps_control ps_control_t;

/* Control at the view's generation, with no checkpoint written. Returns 0 or
 * PS_ENOMEM. Caller owns *out; destroy with ps_control_destroy(). */
int ps_control_new(ps_control_t **out, const ps_control_config_t *cfg);

/* Frees; NULL-safe; sets *c to NULL. */
void ps_control_destroy(ps_control_t **c);

/*
 * Handles a control message of type with body (NULL when it did not come as
 * one frame), len bytes, unpacked and checked here (proto/codec.h). A bad
 * body is logged and dropped (a join step's
 * still ends the consistency's hold); a type that is not a control message
 * is ignored. Returns 0, or the PS_E* of a failover's rollback that failed:
 * ops.abort was called, the job cannot go on.
 */
int ps_control_handle(ps_control_t *c, ps_msg_type_t type, const void *body, size_t len);

/* A resumed job (view->resume_parts > 0): loads the shard, and the rows,
 * from the checkpoint's parts and sets the consistency's version. Returns 0,
 * or a PS_E* with "cannot resume: <why>" in err (also when the checkpoint's
 * rows are not of the job's layout). */
int ps_control_resume(ps_control_t *c, char *err, size_t errlen);

/* The answer to the scheduler's MSG_RESUME_CHECK, as it is sent: msg points
 * into the arrays beside it. */
typedef struct {
    Shardps__ResumeCheck msg;                        /* the body to send */
    ps_checkpoint_part_t found[PS_MAX_RESUME_CHECK]; /* each asked part, as found */
    Shardps__Checkpoint pb[PS_MAX_RESUME_CHECK];     /* found[], for the wire */
    Shardps__Checkpoint *ptrs[PS_MAX_RESUME_CHECK];  /* msg.parts */
} ps_control_resume_check_t;

/* MSG_RESUME_CHECK, before the view (so before ps_control_new): the size and
 * CRC-32 of each file the scheduler's q (codec-checked) asks about, as dir
 * (this server's copy of the checkpoint directory; NULL: q's) holds it,
 * size 0 when missing or unreadable, each logged; the scheduler resumes
 * only when every server found its part whole. *a borrows from q. */
void ps_control_resume_check(const Shardps__ResumeCheck *q, const char *dir,
                             ps_control_resume_check_t *a);

/* A spare that took over a lost server's keys (view->replaced) and loaded its
 * part: tells the scheduler the version it stands at (FAILOVER_READY). */
void ps_control_takeover(ps_control_t *c);

/* The consistency applied a step (its stepped callback): writes the shard's
 * checkpoint part when this version is one (a multiple of
 * --checkpoint-every, or the step a timed one was agreed at) and tells the
 * scheduler. A part that cannot be written is logged and skipped. */
void ps_control_stepped(ps_control_t *c);

/* A push was handed to the consistency: the first step applied after a
 * failover's rollback is reported (the scheduler's recovery time ends). */
void ps_control_pushed(ps_control_t *c);

/* Whether a data message of failover generation was sent before its worker
 * took the last failover (or after one this server has not seen): then it
 * is counted (ps_control_stale) and the reason is in why; the loop drops it
 * and the worker asks again. */
int ps_control_is_stale(ps_control_t *c, int64_t generation, char *why, size_t cap);

/* Data messages found stale so far. */
uint64_t ps_control_stale(const ps_control_t *c);

#ifdef __cplusplus
}
#endif
#endif
