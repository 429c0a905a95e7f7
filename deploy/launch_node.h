/*
 * deploy/launch_node.h - `shardps-launch --node`: one process of a job that a
 * cluster manager (Slurm, mpirun, Kubernetes) started, the same command on
 * every task; its role, rank and the scheduler's address come from the
 * manager's environment (the contract is docs/cluster.md).
 *
 * Tasks of one job step (Slurm's SLURM_PROCID/SLURM_NTASKS, Open MPI's
 * OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE) are numbered globally: task 0
 * is the scheduler, tasks 1..S the servers, the rest the workers, in task
 * order. Where each role is its own set of pods (Kubernetes), SHARDPS_ROLE
 * names the role and JOB_COMPLETION_INDEX (an indexed Job) or SHARDPS_RANK
 * the rank. The process then becomes that role (exec): the manager sees and
 * signals the role itself. This module reads the environment and execs; it
 * starts no other process.
 */
#ifndef PS_DEPLOY_LAUNCH_NODE_H
#define PS_DEPLOY_LAUNCH_NODE_H

#include "deploy/launch_flags.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Called by ps_launch_flags_parse() with --node, before the node counts are
 * checked: finds this task's role and rank, the worker count when the
 * manager gives a task count and --workers was not given, the scheduler's
 * address and, unless --job-id says otherwise, a job id every task agrees on
 * (never a random one: each task would draw its own). Returns 0, or PS_EINVAL
 * after one "shardps-launch: error: ..." line naming what is missing.
 */
int ps_launch_node_resolve(ps_launch_flags_t *F);

/* Becomes the role (execv of its binary with its command line). Returns only
 * on failure, with the exit status (1), after one line saying why. */
int ps_launch_node_exec(const ps_launch_flags_t *F);

#ifdef __cplusplus
}
#endif
#endif
