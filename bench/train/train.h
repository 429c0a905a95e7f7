/*
 * bench/train/train.h - what the pieces of `shardps-bench train` share: its
 * configuration (flags parsed in train.c), one run's figures, one job
 * (train_job.c), the sweep of modes x workers (train_sweep.c), the
 * click-through sweep (train_ctr.c) and the join demonstration
 * (train_join.c), and `shardps-bench crossover` (crossover.c), which runs
 * the same jobs. Not for the other subcommands.
 */
#ifndef PS_BENCH_TRAIN_H
#define PS_BENCH_TRAIN_H

#include <limits.h>
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

/* The mode tokens of the ring for --model ctr: "allreduce:dense" and
 * "allreduce:allgather" run `--mode allreduce --ring-rows dense|allgather`. */
#define TRAIN_RING_ROWS "allreduce:"

/* A run whose machine's cores were this busy over the job is reported as
 * CPU-bound: the cores, not the links, were the bound. One whose delay line
 * had a thread this busy, as bound by the simulator's delay line (its
 * packets wait for the thread, not only the delay). ps_bench_train_bound. */
#define TRAIN_CPU_BOUND 0.9
#define TRAIN_LINE_BOUND 0.8

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
    const char *net_spec;  /* --net RATE[,DELAY][,mtu=BYTES][,queue=BYTES] or NULL */
    double dilate;         /* --dilate F: the network and the roles' clocks (1: not) */
    ps_netsim_t *net;      /* the simulated network, when --net */
    char mpirun[4096];     /* the mpirun that runs the mpi rows ("" without them) */
    ps_bench_page_t *page; /* the results page, in out */
    /* --model ctr */
    const char *ctr_data;  /* the click log every job reads (--ctr-data, or the one the
                              bench generates into OUT/runs/); absolute once set */
    int ctr_rows;          /* --ctr-rows: samples to generate */
    double ctr_scale;      /* --ctr-scale: the generator's --scale; 0 = its default */
    char ctr_skipped[128]; /* why the ring rows were left out; "" when they run */
    int ring_steps;        /* --ring-steps: the ring's jobs' --max-steps (0: --max-steps);
                              their time to the target is projected */
} train_cfg_t;

/* The job flags every run of cfg gets beyond the sweep's own (--threads,
 * --batch, --eval-every, --job-flags), as " --flag value" text for a
 * table's note, into buf[cap]. */
void ps_bench_train_extra_flags(const train_cfg_t *cfg, char *buf, size_t cap);

/* The --max-steps of run r's job: the ring's own with --ring-steps. */
int ps_bench_train_max_steps(const train_cfg_t *cfg, const char *label);

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
    double link_tx_rest, link_rx_rest; /* the same, the workers but worker 0 (which
                                          also evaluates); worker 0's alone */
    double link_max;                  /* bytes per step of the busiest link, one way */
    double retrans, timeouts;         /* TCP retransmissions and timeouts in the job */
    double cpu_busy;                  /* the cores' busy share over the job (/proc/stat) */
    double job_cpu;                   /* CPU seconds of the job's processes (all roles) */
    double job_wall;                  /* seconds the bench waited for the job */
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

/* Non-zero for the modes without servers: allreduce, TRAIN_MPI and the
 * TRAIN_RING_ROWS tokens. */
int ps_bench_train_serverless(const char *token);

/* A TRAIN_RING_ROWS token's --ring-rows value ("dense", "allgather"), or
 * NULL for any other token. Borrowed; points into token. */
const char *ps_bench_train_ring_rows(const char *token);

/* Does this build know --mode allreduce? Asked of the code, not assumed. */
int ps_bench_train_have_allreduce(void);

/* The job's batch: --batch, or the job default. */
int ps_bench_train_batch(const train_cfg_t *cfg);

/* Cell text into buf[cap]: "%.*f" of v, or "" (n/a) when v is NAN.
 * Returns buf. */
const char *ps_bench_train_cell(char *buf, size_t cap, int prec, double v);

/* Run r's status cell: "ok", "failed: exit N" or "failed: WHY". */
void ps_bench_train_status(const train_run_t *r, char *buf, size_t cap);

/* A file-name-safe tag for a run: "sync_1-2_w2". */
void ps_bench_train_tag(const train_run_t *r, char *buf, size_t cap);

/* Runs one job (r's label, mode, workers and scenario) and fills r's
 * figures and status: through the launcher, or with --net role by role in
 * the network's namespaces (rejoin_at >= 0: W1 is started again then). Its
 * summary and log are OUT/runs/TAG[_repeat].json and .log (repeat > 0). */
void ps_bench_train_job(const train_cfg_t *cfg, train_run_t *r, double rejoin_at,
                        int repeat);

/* --net: makes cfg->net from cfg->net_spec and cfg->dilate, room for servers
 * and workers roles, its set-up log OUT/runs/net.log (cfg->out), with a line
 * on stderr naming prog. Returns 0; PS_ENOTSUP when no network can be made
 * here (said on stdout and stderr); or PS_EIO after one line on stderr. */
int ps_bench_train_net_new(train_cfg_t *cfg, const char *prog, int servers, int workers);

/* Removes cfg->net, if any, with a line on stderr. Returns 0, or 1 when
 * namespaces were left (said). */
int ps_bench_train_net_destroy(train_cfg_t *cfg, const char *prog);

/* Run r's theory: MB (1e6 bytes) of fp32 on a worker's link each way per
 * step, the model once with dedicated servers, 2(M-1)/M times for the ring
 * and a colocated server's worker. */
double ps_bench_train_theory_mb(const train_run_t *r);

/* Run r's link-bound ms per step (its busiest link's bytes one way at the
 * link rate) and its measured ms per step (M x batch / samples/s); NAN
 * where unknown. */
void ps_bench_train_step_ms(const train_cfg_t *cfg, const train_run_t *r, double *bound,
                            double *step);

/* --net: the links table (train_links.c): created beside the runs' table,
 * a row per run, its notes before it is destroyed. */
int ps_bench_train_links_new(const train_cfg_t *cfg, ps_bench_table_t **t);
void ps_bench_train_links_row(const train_cfg_t *cfg, ps_bench_table_t *t,
                              const train_run_t *r);
void ps_bench_train_links_notes(ps_bench_table_t *t);

/* What bound run r: "CPU" (its cores_busy at TRAIN_CPU_BOUND or more),
 * else with --net "delay line" (TRAIN_LINE_BOUND) or "link", without it
 * "not CPU" (bare loopback has no link to be the bound); "" when the CPU
 * was not measured. Static text. */
const char *ps_bench_train_bound(const train_cfg_t *cfg, const train_run_t *r);

/* The runs of the sweep in order into runs (room for nscen x nmodes x
 * nworkers), each with its label, mode, name, workers and scenario; the
 * modes that do not apply to a worker count or a scenario are left out.
 * Returns the count. */
int ps_bench_train_plan(const train_cfg_t *cfg, train_run_t *runs);

/* The plots of a sweep's ok runs: the test metric (accuracy, or the AUC for
 * ctr; its name in metric) against training time, a panel per worker count
 * (PAGE_DIR/METRIC_PNG), and samples/s against workers per mode
 * (PAGE_DIR/THROUGHPUT_PNG). Each is left out where gnuplot is missing. */
void ps_bench_train_plots(const train_cfg_t *cfg, const train_run_t *runs, int nruns,
                          const char *metric, const char *metric_png,
                          const char *throughput_png);

/* Every mode x workers x scenario, their tables and plots. Returns 0, or 1
 * when a job failed. */
int ps_bench_train_sweep(const train_cfg_t *cfg);

/* --model ctr: the click log (generated into OUT/runs/ unless --ctr-data
 * names one), then every mode x workers x scenario on the page
 * train_ctr.md: samples/s, time to the target AUC, bytes per worker link
 * per step measured beside each design's theory, what bound each run
 * (train_ctr.c). Returns 0, or 1 when the data could not be made or a job
 * failed. */
int ps_bench_train_ctr(train_cfg_t *cfg);

/* --model ctr: keeps the ring's mode tokens where the launcher has
 * --ring-rows, else leaves them out with one line on stdout and stderr (the
 * reason in cfg->ctr_skipped). Returns 0, or PS_EINVAL when no mode is left. */
int ps_bench_train_ctr_modes(train_cfg_t *cfg);

/* --seeds N: every mode x workers with N seeds in turn, and the table of
 * their final accuracies, or a ctr model's AUCs on one click log
 * (train_seeds.c). Returns 0, or 1 when the data could not be made or a job
 * failed to run (a diverged job is counted, not a failure). */
int ps_bench_train_seeds(train_cfg_t *cfg, int seeds);

/* --join: the leave-and-join runs and their table. Returns 0 or 1. */
int ps_bench_train_join(const train_cfg_t *cfg, int repeat);

/* Random batches the distinct keys of a batch are averaged over. */
enum { CTR_KEY_BATCHES = 256 };

/* The click log and the model, as the theory needs them. */
typedef struct {
    char path[PATH_MAX]; /* the click log every job reads (absolute) */
    int generated;       /* the bench wrote it */
    double samples;      /* lines read */
    double vocab;        /* V: distinct keys in the whole file, held-out tail included */
    double keys_est;     /* distinct keys of a batch of B training samples, mean of
                            CTR_KEY_BATCHES random ones */
    double planted_auc;  /* the generator's planted model's own test AUC; NAN unknown */
    double mlp;          /* P: the dense part's parameters (the MLP) */
    int dim;             /* d: floats per row (--embed-dim in --job-flags, or 16) */
    const char *hidden;  /* --hidden in --job-flags, or NULL: the default */
} ctr_data_t;

/* The click log of a ctr sweep (generated into OUT/runs/, or --ctr-data)
 * and the model's figures, into *d. Returns 0, or 1 after a one-line
 * error. (train_ctr_data.c) */
int ps_bench_train_ctr_data(const train_cfg_t *cfg, ctr_data_t *d);

#ifdef __cplusplus
}
#endif
#endif
