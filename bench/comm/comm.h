/*
 * bench/comm/comm.h - what the pieces of `shardps-bench comm` share: its sweep's
 * configuration (parsed in comm.c), one parameter-server-vs-ZeroMQ
 * configuration (comm_run.c), the ring-vs-MPI allreduce comparison
 * (allreduce.c) and the MPI reference it drives (allreduce_mpi.c); one
 * configuration is also crossover's CPU cost per round (train/crossover.c).
 * Not for the rest of train or compute.
 */
#ifndef PS_BENCH_COMM_H
#define PS_BENCH_COMM_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench/bench.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COMM_PROG "shardps-bench comm"

enum {
    COMM_MAX_SERVERS = 16, /* processes on one machine */
    COMM_MAX_INFLIGHT =
        16,              /* the client has 64 request slots: 2 per round, room to spare */
    COMM_MIN_ROUNDS = 3, /* per repetition, however long rounds take */
    COMM_MAX_REPS = 15,
    AR_MAX_MEMBERS = 64, /* --allreduce-workers bound */
};

#define COMM_POLL_LIMIT_S 60.0 /* no reply for this long: the run failed */

/* The sweep: what `shardps-bench comm` was asked to measure. */
typedef struct {
    const char *out;               /* output directory */
    long sizes[PS_BENCH_LIST_MAX]; /* payload bytes */
    int nsizes;
    long servers[PS_BENCH_LIST_MAX]; /* server counts */
    int nservers;
    long inflight[PS_BENCH_LIST_MAX]; /* rounds in flight */
    int ninflight;
    long ar_workers[PS_BENCH_LIST_MAX]; /* allreduce ranks; none = skip allreduce */
    int nar;
    long ar_sizes[PS_BENCH_LIST_MAX]; /* allreduce payload bytes */
    int nar_sizes;
    int ring_kib;       /* shardps ring: KiB per message (the worker's --ring-kib) */
    double seconds;     /* least timed seconds per repetition */
    int reps;           /* repetitions of each measurement */
    int mpi;            /* compare allreduce with MPI where installed */
    int secure;         /* baseline: a plain job beside a --secure one, not raw ZeroMQ */
    ps_bench_page_t *page; /* the results page, in `out` */
} ps_bench_comm_cfg_t;

/* What one parameter-server configuration measured. */
typedef struct {
    double ps;       /* shardps rounds/s (with --secure: the secure job's): median over
                        the repetitions */
    double base;     /* the baseline's rounds/s: raw ZeroMQ, or with --secure the plain
                        shardps job; median over the repetitions */
    double ratio;    /* median of the per-repetition ratios shardps/baseline (each pair
                        measured back to back, so it shares the machine's mood) */
    double ratio_lo; /* lowest per-repetition ratio */
    double ratio_hi; /* highest per-repetition ratio */
    double ps_cpu;   /* shardps CPU seconds per round (all its processes): median */
    double base_cpu; /* the baseline's CPU seconds per round (this process + its
                        processes): median */
    double ps_faults;   /* shardps minor page faults per round (all its processes,
                           this one included): median */
    double base_faults; /* the baseline's minor page faults per round: median */
    double cpu_ratio;   /* median of the per-repetition ratios of CPU per round,
                           shardps/baseline */
    double floor_ratio; /* (the baseline's CPU per round + s_floor_cpu's) over the
                           baseline's, median: the least cpu_ratio a parameter server
                           can have (meaningless with --secure) */
} ps_bench_comm_result_t;

/*
 * Runs one (servers S, payload bytes, in flight W) configuration from
 * scratch: its processes, both measurements, the tear-down (comm_run.c);
 * with cfg->secure a --secure job against a plain one.
 * Returns 0 with *res filled, or a negative PS_E* with why in err.
 */
int ps_bench_comm_run(const ps_bench_comm_cfg_t *cfg, int S, long bytes, int W,
                      ps_bench_comm_result_t *res, char *err, size_t errlen);

/* The allreduce comparison, its table and plot (allreduce.c). Returns 0, or 1
 * when something failed (said on stderr and in the table's notes). */
int ps_bench_allreduce(const ps_bench_comm_cfg_t *cfg);

/* ---- the MPI reference (allreduce_mpi.c) ------------------------------------ */

/* n ranks of shardps-bench-mpi under one mpirun, driven through FIFOs. */
typedef struct {
    int n;
    pid_t pid;               /* mpirun; 0 = none */
    char dir[PATH_MAX];      /* holds the FIFOs; "" = none */
    int cmd[AR_MAX_MEMBERS]; /* cmd-R, opened read-write (never blocks) */
    int reply;               /* reply, opened read-write */
} ps_bench_mpi_t;

/* Are mpirun and shardps-bench-mpi here? Fills the paths (cap bytes each), or
 * says why not in why and returns PS_ENOENT. */
int ps_bench_mpi_find(char *mpirun, char *helper, size_t cap, char *why, size_t whylen);

/* Starts `mpirun -np n shardps-bench-mpi DIR` (output in log) and waits until
 * MPI is up. Returns 0, or a negative PS_E* with why in err; stop it with
 * ps_bench_mpi_stop() either way. */
int ps_bench_mpi_start(ps_bench_mpi_t *m, const char *mpirun, const char *helper, int n,
                       const char *log, char *err, size_t errlen);

/* One chunk (side: the ps_bench_mpi_t): every rank times `iters` in-place
 * MPI_Allreduce of `floats` between barriers; *seconds is the slowest rank's. */
int ps_bench_mpi_chunk(void *side, uint64_t floats, long iters, char *err, size_t errlen,
                       double *seconds);

/* Ends the reference and removes its FIFOs. Safe on one that never started. */
void ps_bench_mpi_stop(ps_bench_mpi_t *m);

#ifdef __cplusplus
}
#endif
#endif
