/*
 * bench/netsim/job.h - one shardps job on the simulated cluster (netsim.h).
 *
 * The job runs role by role: `ip netns exec NS shardps-launch --node`, each
 * told its role by SHARDPS_ROLE/SHARDPS_RANK and the scheduler's address by
 * SHARDPS_SCHEDULER (deploy/launch_node.h), all output appended to one log.
 * It watches worker 0's progress lines to kill worker 1 and start it again
 * (it rejoins with its rank) at given fractions of the job. With mpirun set,
 * the workers are instead the ranks of one mpirun started in the
 * scheduler's namespace: its "rsh agent" (a script written beside the log)
 * starts each rank's daemon with `ip netns exec` in the namespace named by
 * the host, so each worker still lives in its own namespace, and MPI's TCP is
 * kept to the namespaces' links (eth0). With --trace FILE among the flags,
 * the roles' files (one launcher each) are merged into FILE after the job,
 * as one launcher of the whole job does. Used by `shardps-bench train --net`.
 */
#ifndef PS_NETSIM_JOB_H
#define PS_NETSIM_JOB_H

#include <stdint.h>

#include "bench/netsim/netsim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One job on the network. */
typedef struct {
    const char *launch;   /* shardps-launch */
    char *const *args;    /* its flags (no --node), NULL-terminated */
    int servers, workers; /* of this job (at most the network's) */
    const char *log_path; /* every role's output, appended */
    double timeout;       /* seconds of the roles' clock (dilated); then every role
                             is killed */
    int64_t max_steps;    /* the job's --max-steps (0: none), for its progress */
    double kill_at;       /* kill W1 when the job is this far (0..1); < 0: never */
    double rejoin_at; /* start W1 again this far (after its loss was seen); < 0: never */
    int colocated;    /* server i runs in worker i's namespace, on its link
                         (servers <= workers); else in its own */
    const char *mpirun; /* non-NULL: the workers are this mpirun's ranks (no kill
                           or rejoin); NULL: each started on its own */
} ps_netsim_job_t;

/* What happened. */
typedef struct {
    int status;         /* the scheduler's exit code, else the first other role's
                           that failed (the W1 killed on purpose excepted); 124 on
                           timeout, 130 when stopped by a signal (ps_netsim_stop) */
    double killed_at;   /* seconds of the roles' clock from the start when W1 was
                           killed; -1 never */
    double rejoined_at; /* when it was started again; -1 never */
    /* The links, measured on the namespaces' counters over the job (all 0
     * when they could not be read: counted 0): */
    int counted;
    double worker_tx, worker_rx; /* bytes a worker's link sent, received: mean of workers */
    double rest_tx, rest_rx;     /* the same, mean of the workers but worker 0 (which
                                    also evaluates); worker 0's with one worker */
    double link_max;             /* the most bytes one link of the job carried one way */
    uint64_t retrans, timeouts;  /* TCP retransmitted segments and retransmission
                                    timeouts, all the job's namespaces */
    double cpu_busy;             /* share of the machine's cores busy over the job */
    double line_busy;            /* the delay line's busiest thread's share of a core
                                    over the job; 0 without a delay line */
} ps_netsim_result_t;

/* Runs the job and waits for every role; with a delay line, says what it
 * did during the job (packets, bytes, its threads' CPU time) on stderr and in
 * the job's log. Returns 0 with *res filled, PS_EINVAL when the job has more
 * servers or workers than the network, or PS_EIO when a role could not be
 * started (the others are stopped). */
int ps_netsim_run(const ps_netsim_t *net, const ps_netsim_job_t *job,
                  ps_netsim_result_t *res);

#ifdef __cplusplus
}
#endif
#endif
