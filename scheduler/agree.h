/*
 * scheduler/agree.h - agreeing a future step with every server.
 *
 * The scheduler sends MSG_JOIN_PREPARE to every server; each stops applying
 * steps past the one in progress (ps_consistency_hold) and answers its
 * version V. The scheduler picks J = max(V) + 1, a step no server has
 * applied nor can apply while held, and sends MSG_JOIN_STEP {J, the joining
 * worker, checkpoint?}: the servers make the worker live from version J,
 * write checkpoint step-J when asked, and go on. One agreement at a time;
 * the pause is one round trip. Two modules use it: joins (scheduler/join.h)
 * and timed checkpoints (scheduler/ckpt.h), each starting and committing its
 * own. A failover's rollback ends the servers' holds and abandons it.
 *
 * Owns only the agreement's state; sends through its ops (scheduler/module.h).
 * Private to scheduler/; one thread (the scheduler's loop).
 */
#ifndef PS_SCHEDULER_AGREE_H
#define PS_SCHEDULER_AGREE_H

#include <stdint.h>

#include "scheduler/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_agree ps_agree_t;

/* No agreement under way, for the job of ops (borrowed, outlive it).
 * Returns 0 or PS_ENOMEM. Caller owns *out; destroy with ps_agree_destroy(). */
int ps_agree_new(ps_agree_t **out, const ps_sched_ops_t *ops);

/* NULL-safe; sets *a to NULL. */
void ps_agree_destroy(ps_agree_t **a);

/* Whether an agreement is under way. */
int ps_agree_active(const ps_agree_t *a);

/* The one under way: the worker it makes live (-1: none), and whether it is
 * a timed checkpoint's. */
int ps_agree_worker(const ps_agree_t *a);
int ps_agree_checkpoint(const ps_agree_t *a);

/* Starts one: every server gets MSG_JOIN_PREPARE {worker, token} (the
 * joiner's token goes with the hold: every server knows it before the joiner
 * gets its view). Returns 0, or PS_ESTATE when one is under way. */
int ps_agree_start(ps_agree_t *a, int worker, uint64_t token, int checkpoint);

/* Server `rank` answered `version`. Returns 0, or PS_ESTATE when no agreement
 * is under way, the rank is not a server's or it answered already. */
int ps_agree_answer(ps_agree_t *a, int rank, int64_t version);

/* 1 when every server answered (then *step = J = max(V) + 1), else 0. */
int ps_agree_ready(const ps_agree_t *a, int64_t *step);

/* Ends the one under way at step: every server gets MSG_JOIN_STEP {step,
 * worker (-1: none), token, the agreement's checkpoint}. */
void ps_agree_commit(ps_agree_t *a, int64_t step, int worker, uint64_t token);

/* A failover's rollback ended the servers' holds: the agreement is dropped
 * (its user starts it again). Returns 1 when one was under way. */
int ps_agree_abandon(ps_agree_t *a);

/* A restarted scheduler got every node back: MSG_JOIN_STEP {0, no worker}
 * to every server ends any agreement the old scheduler left open. */
void ps_agree_release(ps_agree_t *a);

/* The loop's events: servers' answers (MSG_JOIN_STEP). */
extern const ps_sched_events_t ps_agree_events;

#ifdef __cplusplus
}
#endif
#endif
