/*
 * scheduler/join.h - agreeing a future step with every server, and the two
 * things that need one: a worker joining a running job, and a checkpoint
 * every so many seconds (--checkpoint-every Ns).
 *
 * The agreement (protocol 4): the scheduler sends MSG_JOIN_PREPARE to every
 * server; each stops applying steps past the one in progress
 * (ps_consistency_hold) and answers its version V. The scheduler picks
 * J = max(V) + 1, a step no server has applied nor can apply while held,
 * and sends MSG_JOIN_STEP {J, the joining worker, checkpoint?}: the servers
 * make the worker live from version J, write checkpoint step-J when asked,
 * and go on. One agreement at a time; the pause is one round trip.
 *
 * A worker registering while the job runs takes a lost rank (its --rank R,
 * or the lowest lost one); once it reported its model, an agreement puts it
 * in at step J and it gets the view with start_step J and joining set: no
 * INIT, no start barrier, it pulls version J and takes its samples of step
 * J on. Private to scheduler/; one thread (the scheduler's loop).
 */
#ifndef PS_SCHEDULER_JOIN_H
#define PS_SCHEDULER_JOIN_H

#include "proto/codec.h"
#include "proto/msg.h"
#include "scheduler/scheduler_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A worker's REGISTER while the job runs: takes a lost rank, or is refused
 * with the reason. */
void ps_join_register(ps_scheduler_t *s, const ps_msg_t *m, const ps_register_t *reg);

/* A joining worker's MODEL_INFO: it may join once its model is the job's. */
void ps_join_model_info(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m);

/* A server's MSG_JOIN_STEP: its version during an agreement. */
void ps_join_answer(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m);

/* A joining worker fell silent before it joined: it is dropped, the job
 * goes on. */
void ps_join_drop(ps_scheduler_t *s, ps_node_t *n);

/*
 * The scheduler's own state, DIR/scheduler.state (DIR: the checkpoint
 * directory): "shardps-scheduler-state-1\n", the CRC-32 of the rest (4 bytes,
 * little-endian), a packed JoinSchedulerState (job id, cluster view, lost
 * workers, counters, newest complete checkpoint). Written atomically after
 * the view, each membership change, each complete checkpoint and the end.
 */
void ps_join_state_write(ps_scheduler_t *s);

/* --resume DIR: reads DIR/scheduler.state of a job that did not finish, so
 * that its nodes, still running, may register again (ps_join_rejoin). A
 * missing, corrupt or other job's state is logged and ignored: fresh nodes
 * then resume from the newest checkpoint as ever. */
void ps_join_state_load(ps_scheduler_t *s);

/* A REGISTER carrying a job id: a node that lost its scheduler. The first
 * one of the saved job starts bringing it back (PS_PHASE_RECOVERING); the same
 * node again (a lost answer) is answered again; anything else is refused. */
void ps_join_rejoin(ps_scheduler_t *s, const ps_msg_t *m, const ps_register_t *reg);

/* PS_PHASE_RECOVERING: once every server and live worker registered again the job
 * runs on (servers' holds released); after --wait the missing workers are
 * left out (--min-workers) or the job fails. */
void ps_join_recover_tick(ps_scheduler_t *s);

/*
 * Resuming a checkpoint of step `step` written by a job of old_workers with
 * new_workers (same batch b, same data of `samples`): the step of the new
 * job at the same data position. Step k of M workers has taken samples
 * [0, (k+1)*M*b) of its epoch's order, so the new job starts its epoch at
 * the first batch of M'*b not wholly seen: ceil(k*M/M') (the next epoch when
 * that is past its end). The learning-rate schedule and Adam's t go on from
 * that step.
 */
int64_t ps_join_map_step(int64_t step, int old_workers, int new_workers, int batch,
                         uint64_t samples);

/* Called every loop while the job runs: starts an agreement (a worker to
 * join, or a timed checkpoint due) and commits it once every server answered. */
void ps_join_tick(ps_scheduler_t *s);

#ifdef __cplusplus
}
#endif
#endif
