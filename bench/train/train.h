/*
 * bench/train/train.h - what the pieces of `shardps-bench train` share: its
 * configuration (flags parsed in train.c), one run's figures, one job
 * (train_job.c), the sweep of modes x workers (train_sweep.c) and the join
 * demonstration (train_join.c). Not for the other subcommands.
 */
#ifndef PS_BENCH_TRAIN_H
#define PS_BENCH_TRAIN_H

#include <stddef.h>

#include "bench/bench.h"
#include "bench/netsim/netsim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRAIN_PROG "shardps-bench train"

enum {
    TRAIN_MAX_MODES = 16,
    TRAIN_MAX_EPOCHS = 2000, /* evaluations: epoch ends and --eval-every points */
    TRAIN_MAX_JOB_EPOCHS = 200,
    TRAIN_MAX_SCEN = 3,
    TRAIN_MAX_JOB_FLAGS = 16,
};

/* What happens to a job besides training: nothing, a straggler, or worker 1
 * killed at a third of the job (--min-workers 1; needs --net). Their names,
 * as --scenarios takes them, in ps_bench_train_scenarios. */
enum { SCEN_PLAIN, SCEN_STRAGGLER, SCEN_KILL };
extern const char *const ps_bench_train_scenarios[TRAIN_MAX_SCEN];

/* Where the kill and the restart of worker 1 happen, as fractions of the job. */
#define TRAIN_KILL_AT (1.0 / 3)
#define TRAIN_REJOIN_AT (2.0 / 3)

/* A mode token's suffix for the colocated placement: "sync@colocated" is
 * sync with server i in worker i's namespace, as many servers as workers. */
#define TRAIN_COLOCATED "@colocated"

/* The mode token of allreduce summed by MPI_Allreduce (--allreduce-backend
 * mpi), the workers under mpirun; only with --net. */
#define TRAIN_MPI "mpi"

/* The token that expands to sync:(n-1)/n for n workers. */
#define TRAIN_BACKUP_AUTO "sync:k/n"

/* What `shardps-bench train` was asked to run. */
typedef struct {
    const char *out;                 /* output directory */
    const char *placements;          /* --placement LIST: dedicated, colocated */
    const char *launch;              /* shardps-launch path */
    const char *model;               /* --model */
    const char *straggler;           /* --straggler R:F or NULL */
    int straggler_rank;              /* R, -1 without */
    long workers[PS_BENCH_LIST_MAX]; /* worker counts */
    int nworkers;
    char modes[TRAIN_MAX_MODES]
              [PS_BENCH_WORD_MAX]; /* mode tokens, TRAIN_BACKUP_AUTO included */
    int nmodes;
    int epochs;               /* --epochs */
    int max_steps;            /* --max-steps, 0 = none */
    int servers;              /* --servers (parameter-server modes) */
    int threads;              /* --threads, 0 = not passed */
    int batch;                /* --batch, 0 = not passed */
    int seed;                 /* --seed */
    double target;            /* test accuracy the time is measured to */
    double timeout;           /* per job, seconds */
    int scen[TRAIN_MAX_SCEN]; /* SCEN_* to run */
    int nscen;
    int eval_every; /* the workers' --eval-every, 0 = not passed */
    char *job_flags[TRAIN_MAX_JOB_FLAGS + 1]; /* --job-flags, split; NULL-terminated */
    const char *job_flags_text;
    const char *net_spec;  /* --net RATE[,DELAY][,mtu=BYTES] or NULL */
    ps_netsim_t *net;      /* the simulated network, when --net */
    char mpirun[4096];     /* the mpirun that runs the mpi rows ("" without them) */
    ps_bench_page_t *page; /* the results page, in out */
} train_cfg_t;

/* One job and what it measured. */
typedef struct {
    const char *label; /* mode token: groups runs in tables and plots */
    char mode[32];     /* what --mode was given */
    char name[48];     /* the rows' mode column: mode, "colocated" after it */
    int workers;
    int scen;              /* SCEN_* */
    int status;            /* launcher exit status, <0 a PS_E* (no start, no summary) */
    double sps;            /* samples per second */
    double tta;            /* seconds to the target accuracy; NAN = not reached */
    double sta;            /* samples to it (worker 0's step x workers x batch) */
    double killed_at;      /* seconds into the job W1 was killed; -1 never */
    double load;           /* 1-minute load average when the job started */
    double acc;            /* final test accuracy */
    double wall;           /* job wall time from the cluster view, s */
    double bytes_per_step; /* payload bytes pushed + pulled per worker step */
    double st_mean, st_p99, st_max;   /* staleness of applied gradients */
    double dropped;                   /* late pushes dropped */
    /* --net: the links, from the namespaces' counters (NAN when not read) */
    double params;                    /* the model's parameters (the summary's) */
    double steps;                     /* worker 0's steps (the summary's) */
    double link_tx, link_rx;          /* bytes per step a worker's link sent, received */
    double link_max;                  /* bytes per step of the busiest link, one way */
    double retrans, timeouts;         /* TCP retransmissions and timeouts in the job */
    double cpu_busy;                  /* the cores' busy share over the job */
    double line_busy;                 /* the delay line's busiest thread's, of a core */
    int nep;                          /* epochs evaluated */
    double ep_t[TRAIN_MAX_EPOCHS];    /* elapsed seconds at each evaluation */
    double ep_acc[TRAIN_MAX_EPOCHS];  /* test accuracy at each evaluation */
    double ep_step[TRAIN_MAX_EPOCHS]; /* worker 0's step at each evaluation; NAN unknown */
} train_run_t;

/* The --mode text of a mode token for n workers; "" when the mode does not
 * apply (sync:K/N with N not n, allreduce alone). */
void ps_bench_train_mode_for(const char *token, int n, char *buf, size_t cap);

/* Non-zero when a mode token asks for the colocated placement. */
int ps_bench_train_colocated(const char *token);

/* Non-zero for the modes without servers: allreduce, and TRAIN_MPI. */
int ps_bench_train_serverless(const char *token);

/* Does this build know --mode allreduce? Asked of the code, not assumed. */
int ps_bench_train_have_allreduce(void);

/* The job's batch: --batch, or the job default. */
int ps_bench_train_batch(const train_cfg_t *cfg);

/* A file-name-safe tag for a run: "sync_1-2_w2". */
void ps_bench_train_tag(const train_run_t *r, char *buf, size_t cap);

/* Runs one job (r's label, mode, workers and scenario) and fills r's
 * figures and status: through the launcher, or with --net role by role in
 * the network's namespaces (rejoin_at >= 0: W1 is started again then). Its
 * summary and log are OUT/runs/TAG[_repeat].json and .log (repeat > 0). */
void ps_bench_train_job(const train_cfg_t *cfg, train_run_t *r, double rejoin_at,
                        int repeat);

/* --net: the links table (train_links.c): created beside the runs' table,
 * a row per run, its notes before it is destroyed. */
int ps_bench_train_links_new(const train_cfg_t *cfg, ps_bench_table_t **t);
void ps_bench_train_links_row(const train_cfg_t *cfg, ps_bench_table_t *t,
                              const train_run_t *r);
void ps_bench_train_links_notes(ps_bench_table_t *t);

/* Every mode x workers x scenario, their tables and plots. Returns 0, or 1
 * when a job failed. */
int ps_bench_train_sweep(const train_cfg_t *cfg);

/* --seeds N: every mode x workers with N seeds in turn, and the table of
 * their final accuracies (train_seeds.c). Returns 0, or 1 when a job failed
 * to run (a diverged job is counted, not a failure). */
int ps_bench_train_seeds(const train_cfg_t *cfg, int seeds);

/* --join: the leave-and-join runs and their table. Returns 0 or 1. */
int ps_bench_train_join(const train_cfg_t *cfg, int repeat);

#ifdef __cplusplus
}
#endif
#endif
