/*
 * bench/train/train.c - shardps-bench train: the consistency modes against
 * each other on real training runs.
 *
 * For each mode (sync, async, ssp:2, sync:k/n with k = n-1, allreduce where
 * this build has it) and each worker count, one job through shardps-launch
 * (found next to this program or in ../deploy/), all with the same model,
 * seed, data order and flags; only --mode and --workers change. From each job
 * it keeps the scheduler's summary JSON and the launcher's log, and reads:
 * samples/s, final test accuracy, wall time, payload bytes per worker step,
 * staleness and dropped pushes from the summary; the time to a target test
 * accuracy from worker 0's per-epoch lines ("epoch=E test_accuracy=A ...
 * elapsed=Xs", X counted from the first step). Speed-ups are against the
 * 1-worker sync run of the same sweep.
 *
 * --model ctr trains the click-through model on a click log the bench
 * generates (or --ctr-data), the parameter-server modes beside the ring's
 * two ways of moving embedding rows (allreduce:dense, allreduce:allgather),
 * and reports the test AUC in place of the accuracy and each design's bytes
 * per worker link beside its theory (train_ctr.c).
 *
 * This file parses the flags, makes the simulated cluster with --net
 * (bench/netsim/) and starts the sweep (train_sweep.c, each job by
 * train_job.c), the ctr sweep (train_ctr.c), the join runs (train_join.c)
 * or the seeds (train_seeds.c), on the results page OUT/train.md (--model
 * ctr: train_ctr.md, --join: train_join.md, --seeds: train_seeds.md).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/train/train.h"
#include "common/config.h"
#include "common/error.h"
#include "common/job.h"
#include "deploy/proc.h"
#include "worker/ring_mpi.h"

/* The flags that only choose, before the configuration is built. */
typedef struct {
    int quick, join, repeat, seeds;
    const char *scenarios, *workers, *modes, *launch;
    int argc; /* the subcommand's own, for the results page */
    char **argv;
} train_args_t;

/* Adds the colocated twin of every parameter-server mode token, after the
 * dedicated ones (or instead, without dedicated in --placement). Returns 0
 * or PS_EINVAL (an unknown placement, too many modes). */
static int s_placements(const char *text, train_cfg_t *cfg)
{
    char tok[2][PS_BENCH_WORD_MAX];
    const int n = ps_bench_split_words(text, tok, 2);
    int dedicated = 0, colocated = 0;
    for (int i = 0; i < n; i++) {
        dedicated |= !strcmp(tok[i], "dedicated");
        colocated |= !strcmp(tok[i], "colocated");
    }
    if (n < 1 || dedicated + colocated != n) {
        return PS_EINVAL;
    }
    const int had = cfg->nmodes;
    for (int m = 0; colocated && m < had; m++) {
        if (ps_bench_train_serverless(cfg->modes[m])) {
            continue;
        }
        if (cfg->nmodes == TRAIN_MAX_MODES ||
            strlen(cfg->modes[m]) + sizeof TRAIN_COLOCATED > PS_BENCH_WORD_MAX) {
            return PS_EINVAL;
        }
        snprintf(cfg->modes[cfg->nmodes++], PS_BENCH_WORD_MAX, "%s" TRAIN_COLOCATED,
                 cfg->modes[m]);
    }
    if (!dedicated) { /* the colocated twins and allreduce only */
        int k = 0;
        for (int m = 0; m < cfg->nmodes; m++) {
            if (m >= had || ps_bench_train_serverless(cfg->modes[m])) {
                memmove(cfg->modes[k++], cfg->modes[m], PS_BENCH_WORD_MAX);
            }
        }
        cfg->nmodes = k;
    }
    return 0;
}

/* Whether a mode token fits the model: the ring of a model with embedding
 * rows is one of TRAIN_RING_ROWS's, and only its. */
static int s_mode_fits(const char *token, const char *model)
{
    const char *rows = ps_bench_train_ring_rows(token);
    if (strcmp(model, "ctr") != 0) {
        return rows == NULL;
    }
    if (rows) {
        return !strcmp(rows, "dense") || !strcmp(rows, "allgather");
    }
    return strcmp(token, "allreduce") && strcmp(token, TRAIN_MPI);
}

/* Splits the --modes list; drops allreduce when this build lacks it. */
static int s_parse_modes(const char *text, train_cfg_t *cfg)
{
    char tok[TRAIN_MAX_MODES][PS_BENCH_WORD_MAX];
    const int n = ps_bench_split_words(text, tok, TRAIN_MAX_MODES);
    cfg->nmodes = 0;
    for (int i = 0; i < n; i++) {
        ps_job_t job;
        ps_job_defaults(&job);
        if (!s_mode_fits(tok[i], cfg->model)) {
            return PS_EINVAL;
        } else if (ps_bench_train_serverless(tok[i]) && !ps_bench_train_have_allreduce()) {
            fprintf(stderr,
                    TRAIN_PROG ": --mode allreduce is not in this build; skipping %s\n", tok[i]);
        } else if (strcmp(tok[i], TRAIN_BACKUP_AUTO) && strcmp(tok[i], TRAIN_MPI) &&
                   !ps_bench_train_ring_rows(tok[i]) &&
                   ps_job_parse_mode(tok[i], &job) != 0) {
            return PS_EINVAL;
        } else {
            memcpy(cfg->modes[cfg->nmodes++], tok[i], sizeof tok[i]);
        }
    }
    return cfg->nmodes > 0 ? 0 : PS_EINVAL;
}

/* The mpi rows: kept when they can run (--net, a build with MPI, mpirun
 * found: its path into cfg->mpirun), else left out with one line saying
 * why. Returns 0, or PS_EINVAL when no mode is left. */
static int s_mpi_rows(train_cfg_t *cfg)
{
    char why[160] = "";
    int k = 0;
    for (int m = 0; m < cfg->nmodes; m++) {
        if (strcmp(cfg->modes[m], TRAIN_MPI) != 0) {
            memmove(cfg->modes[k++], cfg->modes[m], PS_BENCH_WORD_MAX);
        } else if (!cfg->net_spec) {
            snprintf(why, sizeof why, "it runs only on the simulated cluster (--net)");
        } else if (!ps_ring_mpi_built()) {
            snprintf(why, sizeof why, "this build has no MPI (libopenmpi-dev, then meson "
                                      "setup --reconfigure)");
        } else if (ps_proc_find_exe("mpirun", NULL, cfg->mpirun, sizeof cfg->mpirun) != 0) {
            snprintf(why, sizeof why, "no mpirun (Debian: openmpi-bin)");
        } else {
            memmove(cfg->modes[k++], cfg->modes[m], PS_BENCH_WORD_MAX);
        }
    }
    if (why[0]) {
        cfg->mpirun[0] = '\0';
        printf("shardps-bench train: mode mpi skipped: %s\n", why);
        fprintf(stderr, TRAIN_PROG ": mode mpi skipped: %s\n", why);
    }
    cfg->nmodes = k;
    return k > 0 ? 0 : PS_EINVAL;
}

/* --scenarios: the list, or plain (straggler when --straggler is given). */
static int s_parse_scenarios(const char *text, train_cfg_t *cfg)
{
    cfg->nscen = 0;
    if (!text) {
        cfg->scen[cfg->nscen++] = cfg->straggler ? SCEN_STRAGGLER : SCEN_PLAIN;
        return 0;
    }
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < TRAIN_MAX_SCEN; i++) {
            if (strlen(ps_bench_train_scenarios[i]) == n &&
                !strncmp(p, ps_bench_train_scenarios[i], n)) {
                found = i;
            }
        }
        if (found < 0 || cfg->nscen == TRAIN_MAX_SCEN) {
            return PS_EINVAL;
        }
        cfg->scen[cfg->nscen++] = found;
        p += n + (p[n] == ',');
    }
    return cfg->nscen ? 0 : PS_EINVAL;
}

static int s_has_scenario(const train_cfg_t *cfg, int scen)
{
    for (int i = 0; i < cfg->nscen; i++) {
        if (cfg->scen[i] == scen) {
            return 1;
        }
    }
    return 0;
}

/* Splits --job-flags into cfg->job_flags, words of *copy (caller frees it).
 * Returns 0 or PS_EINVAL. */
static int s_split_job_flags(train_cfg_t *cfg, char **copy)
{
    *copy = cfg->job_flags_text ? strdup(cfg->job_flags_text) : NULL;
    int n = 0;
    for (char *p = *copy ? strtok(*copy, " ") : NULL; p; p = strtok(NULL, " ")) {
        if (n == TRAIN_MAX_JOB_FLAGS) {
            fprintf(stderr, TRAIN_PROG ": error: --job-flags: at most %d words\n",
                    TRAIN_MAX_JOB_FLAGS);
            return PS_EINVAL;
        }
        cfg->job_flags[n++] = p;
    }
    cfg->job_flags[n] = NULL;
    return 0;
}

/* The flags whose defaults depend on the model (and --quick). */
static void s_defaults(train_cfg_t *cfg, train_args_t *a)
{
    const int ctr = !strcmp(cfg->model, "ctr");
    if (cfg->epochs <= 0) {
        cfg->epochs = ctr ? 1 : a->quick ? 3 : 10;
    }
    if (cfg->target == 0) {
        cfg->target = ctr ? 0.65 : strcmp(cfg->model, "cnn") ? 0.85 : 0.88;
    }
    if (!a->modes) {
        a->modes = ctr ? "sync," TRAIN_RING_ROWS "dense," TRAIN_RING_ROWS "allgather"
                       : "sync,async,ssp:2," TRAIN_BACKUP_AUTO ",allreduce";
    }
    if (!a->workers) {
        a->workers = ctr ? "2,4" : "1,2,4";
    }
    if (ctr && cfg->eval_every == 0) {
        cfg->eval_every = 200;
    }
}

/* --workers, --modes and --placement into cfg's lists. Returns 0, or
 * PS_EINVAL after one line on stderr. */
static int s_check_lists(train_cfg_t *cfg, const train_args_t *a)
{
    int n = ps_bench_parse_list(a->workers, cfg->workers, PS_BENCH_LIST_MAX);
    for (int i = 0; n > 0 && i < n; i++) {
        n = cfg->workers[i] >= 1 && cfg->workers[i] <= 64 ? n : PS_EINVAL;
    }
    if (n < 0) {
        fprintf(stderr, TRAIN_PROG ": error: --workers %s: expected a list of 1 to 64\n",
                a->workers);
        return PS_EINVAL;
    }
    cfg->nworkers = n;
    if (s_parse_modes(a->modes, cfg) != 0) {
        fprintf(
            stderr,
            TRAIN_PROG
            ": error: --modes %s: expected sync, async, ssp:S, sync:K/N, " TRAIN_BACKUP_AUTO
            ", allreduce or " TRAIN_MPI
            ", comma-separated (--model ctr: the ring as " TRAIN_RING_ROWS
            "dense or " TRAIN_RING_ROWS "allgather, without " TRAIN_MPI ")\n",
            a->modes);
        return PS_EINVAL;
    }
    if (s_placements(cfg->placements, cfg) != 0) {
        fprintf(stderr, TRAIN_PROG ": error: --placement %s: expected dedicated, colocated "
                "or both, comma-separated (and at most %d modes in all)\n",
                cfg->placements, TRAIN_MAX_MODES);
        return PS_EINVAL;
    }
    if (s_mpi_rows(cfg) != 0) {
        fprintf(stderr, TRAIN_PROG ": error: --modes %s: no mode left to run\n", a->modes);
        return PS_EINVAL;
    }
    return 0;
}

/* --straggler, the numbers' bounds, and the flags only ctr takes. Returns 0,
 * or PS_EINVAL after one line on stderr. */
static int s_check_values(train_cfg_t *cfg, const train_args_t *a)
{
    const int ctr = !strcmp(cfg->model, "ctr");
    ps_job_t job;
    ps_job_defaults(&job);
    if (!cfg->straggler && a->scenarios && strstr(a->scenarios, "straggler")) {
        cfg->straggler = "1:3";
    }
    if (cfg->straggler) {
        if (ps_job_parse_straggler(cfg->straggler, &job) != 0) {
            fprintf(stderr, TRAIN_PROG ": error: --straggler %s: expected RANK:FACTOR\n",
                    cfg->straggler);
            return PS_EINVAL;
        }
        cfg->straggler_rank = job.straggler_rank;
    }
    if (cfg->epochs > TRAIN_MAX_JOB_EPOCHS || cfg->max_steps < 0 || cfg->servers < 1 ||
        cfg->threads < 0 || cfg->batch < 0 || !(cfg->target > 0 && cfg->target <= 1) ||
        !(cfg->timeout > 0) ||
        (strcmp(cfg->model, "mlp") && strcmp(cfg->model, "cnn") && !ctr)) {
        fprintf(stderr,
                TRAIN_PROG
                ": error: expected --epochs 1..%d, --max-steps >= 0, --servers "
                ">= 1, --threads/--batch >= 0, 0 < --target <= 1, --timeout > 0, "
                "--model mlp|cnn|ctr\n",
                TRAIN_MAX_JOB_EPOCHS);
        return PS_EINVAL;
    }
    if (ctr && (cfg->ctr_rows < 1 || !(cfg->ctr_scale >= 0 && cfg->ctr_scale <= 1) ||
                cfg->ring_steps < 0 || a->join)) {
        fprintf(stderr,
                TRAIN_PROG ": error: --model ctr: expected --ctr-rows >= 1, "
                           "0 <= --ctr-scale <= 1, --ring-steps >= 0, and no --join\n");
        return PS_EINVAL;
    }
    if (!ctr && (cfg->ctr_data || cfg->ctr_scale != 0 || cfg->ring_steps != 0)) {
        fprintf(stderr, TRAIN_PROG
                ": error: --ctr-data, --ctr-scale and --ring-steps are for --model ctr\n");
        return PS_EINVAL;
    }
    return 0;
}

/* --scenarios, --net and what the runs need of them: --join, --repeat,
 * --seeds. Returns 0, or PS_EINVAL after one line on stderr. */
static int s_check_runs(train_cfg_t *cfg, const train_args_t *a)
{
    if (s_parse_scenarios(a->scenarios, cfg) != 0) {
        fprintf(stderr,
                TRAIN_PROG ": error: --scenarios %s: expected plain, straggler, kill, "
                           "comma-separated\n",
                a->scenarios);
        return PS_EINVAL;
    }
    char err[256] = "";
    int needs_net = a->join || s_has_scenario(cfg, SCEN_KILL);
    if (cfg->net_spec && ps_netsim_parse(cfg->net_spec, err, sizeof err) != 0) {
        /* err says why */
    } else if (needs_net && !cfg->net_spec) {
        snprintf(err, sizeof err, "--join and --scenarios kill need --net");
    } else if (!(cfg->dilate >= 1 && cfg->dilate <= PS_NETSIM_MAX_DILATE) ||
               (cfg->dilate > 1 && !cfg->net_spec)) {
        snprintf(err, sizeof err, "--dilate %g: expected 1 to %d, with --net", cfg->dilate,
                 PS_NETSIM_MAX_DILATE);
    } else if (cfg->eval_every < 0 || a->repeat < 1 || a->repeat > 64 || a->seeds < 1 ||
               a->seeds > 1000) {
        snprintf(err, sizeof err, "expected --eval-every >= 0, --repeat 1..64, --seeds 1..1000");
    } else if (a->seeds > 1 && (a->join || cfg->nscen != 1 || cfg->scen[0] != SCEN_PLAIN)) {
        snprintf(err, sizeof err, "--seeds runs the plain scenario, without --join");
    }
    if (err[0]) {
        fprintf(stderr, TRAIN_PROG ": error: %s\n", err);
        return PS_EINVAL;
    }
    return 0;
}

/* Checks the flags and completes cfg from them. Returns 0, or PS_EINVAL
 * after one line on stderr. */
static int s_check(train_cfg_t *cfg, train_args_t *a)
{
    s_defaults(cfg, a);
    if (s_check_lists(cfg, a) != 0 || s_check_values(cfg, a) != 0 ||
        s_check_runs(cfg, a) != 0) {
        return PS_EINVAL;
    }
    return 0;
}

/* The sweep or the join runs, on the simulated cluster with --net. Returns
 * the exit status: 0, 1 (a job failed, or the network could not be made or
 * removed), 130 when stopped by a signal; 0 with one line saying why when
 * the network cannot be made here. */
static int s_run(train_cfg_t *cfg, const train_args_t *a)
{
    if (cfg->net_spec) {
        long most = 1;
        for (int i = 0; i < cfg->nworkers; i++) {
            most = cfg->workers[i] > most ? cfg->workers[i] : most;
        }
        int rc =
            ps_bench_train_net_new(cfg, TRAIN_PROG, cfg->servers, a->join ? 2 : (int)most);
        if (rc != 0) {
            return rc == PS_ENOTSUP ? 0 : 1;
        }
    }
    int failed = 0;
    const int ctr = !strcmp(cfg->model, "ctr");
    const char *page = a->join        ? "train_join"
                       : a->seeds > 1 ? "train_seeds"
                       : ctr          ? "train_ctr"
                                      : "train";
    if (ps_bench_page_new(cfg->out, page, a->argc, a->argv, &cfg->page) != 0) {
        failed = 1;
    } else {
        failed = a->join        ? ps_bench_train_join(cfg, a->repeat)
                 : a->seeds > 1 ? ps_bench_train_seeds(cfg, a->seeds)
                 : ctr          ? ps_bench_train_ctr(cfg)
                                : ps_bench_train_sweep(cfg);
        ps_bench_page_destroy(&cfg->page);
    }
    failed |= ps_bench_train_net_destroy(cfg, TRAIN_PROG);
    if (ps_netsim_stop) {
        fprintf(stderr, TRAIN_PROG ": stopped by signal %d\n", (int)ps_netsim_stop);
        return 130;
    }
    return failed ? 1 : 0;
}

/* The flag list: parses argv into cfg and a. Returns ps_config_parse_argv's
 * code (0; > 0: --help was answered; < 0: a usage error, said). */
static int s_flags(train_cfg_t *cfg, train_args_t *a, int argc, char **argv)
{
    ps_flag_t flags[] = {
        {"quick", PS_FLAG_BOOL, &a->quick, NULL, "3 epochs per job"},
        {"out", PS_FLAG_STR, &cfg->out, "DIR", "where the results page, CSVs and PNGs go"},
        {"model", PS_FLAG_STR, &cfg->model, "NAME",
         "mlp, cnn or ctr (the click-through model: its embedding rows on the servers; "
         "the page train_ctr.md)"},
        {"straggler", PS_FLAG_STR, &cfg->straggler, "R:F",
         "slow worker R down F times (runs with more than R workers)"},
        {"workers", PS_FLAG_STR, &a->workers, "LIST",
         "worker counts (default 1,2,4; ctr: 2,4)"},
        {"modes", PS_FLAG_STR, &a->modes, "LIST",
         "modes; sync:k/n means sync:(n-1)/n; mpi (with --net): allreduce summed by "
         "MPI_Allreduce under mpirun; ctr: allreduce:dense and allreduce:allgather, the "
         "ring "
         "with --ring-rows dense|allgather (default sync,async,ssp:2,sync:k/n,allreduce; "
         "ctr: sync,allreduce:dense,allreduce:allgather)"},
        {"epochs", PS_FLAG_INT, &cfg->epochs, "N",
         "epochs per job (0 = 10; quick: 3; ctr: 1)"},
        {"max-steps", PS_FLAG_INT, &cfg->max_steps, "N",
         "stop each job after N steps (0 = none)"},
        {"servers", PS_FLAG_INT, &cfg->servers, "N",
         "servers of the parameter-server modes (colocated: one per worker)"},
        {"placement", PS_FLAG_STR, &cfg->placements, "LIST",
         "dedicated (servers in namespaces of their own, with --net), colocated (server i "
         "in worker i's namespace and link), or both: each parameter-server mode runs in "
         "each"},
        {"threads", PS_FLAG_INT, &cfg->threads, "N",
         "BLAS threads per worker (0 = library default)"},
        {"batch", PS_FLAG_INT, &cfg->batch, "N",
         "samples per worker per step (0 = job default)"},
        {"seed", PS_FLAG_INT, &cfg->seed, "N", "seed of every job"},
        {"target", PS_FLAG_DOUBLE, &cfg->target, "ACC",
         "test accuracy the time is measured to, the test AUC for ctr (0 = mlp 0.85, cnn "
         "0.88, ctr 0.65)"},
        {"ctr-rows", PS_FLAG_INT, &cfg->ctr_rows, "N",
         "ctr: samples of the click log the bench generates into OUT/runs/ with "
         "shardps-datagen ctr (its last tenth held out)"},
        {"ctr-scale", PS_FLAG_DOUBLE, &cfg->ctr_scale, "F",
         "ctr: the generator's --scale, Criteo's cardinalities times F (0 = its default, "
         "1/16; more rows and a larger F make a larger embedding table)"},
        {"ring-steps", PS_FLAG_INT, &cfg->ring_steps, "N",
         "ctr: the ring's jobs stop after N steps (0 = --max-steps): their speed is "
         "measured on N steps, and their time to the target AUC projected from the "
         "parameter server's samples to it (the same arithmetic)"},
        {"ctr-data", PS_FLAG_STR, &cfg->ctr_data, "FILE",
         "ctr: train on this click log (Criteo layout, plain or gzip) instead of "
         "generating one"},
        {"timeout", PS_FLAG_DOUBLE, &cfg->timeout, "SECONDS", "per job"},
        {"net", PS_FLAG_STR, &cfg->net_spec, "RATE[,DELAY][,mtu=BYTES][,queue=BYTES]",
         "simulated cluster: each role in its own network namespace, its link shaped to "
         "RATE each way (tc tbf; 100mbit, 1gbit, 10gbit) and DELAY one way between roles "
         "(0.2ms, 20ms: our delay line, a TUN device in the hub), packets of at most BYTES "
         "(1280 to 65000, the default; 1500, 9000 as real links), each link end queueing "
         "BYTES (default: 50 ms of its rate); needs root"},
        {"dilate", PS_FLAG_DOUBLE, &cfg->dilate, "F",
         "with --net: time dilation, so that these cores keep up with fast links: the "
         "links shaped to RATE / F, DELAY and the queues F times longer, the roles' "
         "clocks F times slower and each worker's compute padded to match; times and "
         "rates reported in undilated units (docs/benchmarks.md)"},
        {"scenarios", PS_FLAG_STR, &a->scenarios, "LIST",
         "plain, straggler (--straggler, default 1:3), kill (worker 1 killed a third into "
         "the "
         "job, --min-workers 1; needs --net); default plain, or straggler with "
         "--straggler"},
        {"eval-every", PS_FLAG_INT, &cfg->eval_every, "STEPS",
         "worker 0 also evaluates every STEPS steps (finer time to accuracy; 0 = epoch "
         "ends; ctr: 200)"},
        {"job-flags", PS_FLAG_STR, &cfg->job_flags_text, "FLAGS",
         "more flags for every job, space-separated (e.g. '--wire bf16')"},
        {"join", PS_FLAG_BOOL, &a->join, NULL,
         "instead of the sweep: sync, 2 workers, worker 1 killed at 1/3 and back at 2/3 "
         "(needs --net); steps/s in each phase, on the page train_join.md"},
        {"repeat", PS_FLAG_INT, &a->repeat, "N", "--join runs"},
        {"seeds", PS_FLAG_INT, &a->seeds, "N",
         "instead of the sweep: every mode x workers with seeds --seed .. --seed + N - 1; "
         "final accuracy's mean, spread and runs not ok, against sync, on the page "
         "train_seeds.md"},
        {"launch", PS_FLAG_STR, &a->launch, "PATH",
         "shardps-launch (default: next to this program, ../deploy/, $PATH)"},
    };
    return ps_config_parse_argv(
        TRAIN_PROG,
        "Trains the same model with the same seed in every consistency mode "
        "and worker\ncount through shardps-launch. Writes the results page train.md, "
        "train.csv,\ntrain_epochs.csv, train_accuracy.png and train_throughput.png "
        "into --out\n(--model ctr: train_ctr.md, train_ctr.csv, train_ctr_vs.csv, "
        "train_ctr_epochs.csv,\ntrain_ctr_bytes.png, train_ctr_auc.png and "
        "train_ctr_throughput.png).",
        flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
}

int ps_bench_train_main(int argc, char **argv)
{
    train_cfg_t cfg = {.out = "bench-out",
                       .model = "mlp",
                       .servers = 2,
                       .placements = "dedicated",
                       .seed = 1,
                       .target = 0, /* by model: mlp 0.85, cnn 0.88, ctr 0.65 (AUC) */
                       .timeout = 1800,
                       .dilate = 1,
                       .straggler_rank = -1,
                       .ctr_rows = 200000};
    train_args_t a = {.repeat = 3, .seeds = 1, .argc = argc, .argv = argv};
    int rc = s_flags(&cfg, &a, argc, argv);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    char *flags_copy = NULL, path[PATH_MAX];
    if (s_check(&cfg, &a) != 0 || s_split_job_flags(&cfg, &flags_copy) != 0) {
        free(flags_copy);
        return 2;
    }
    rc = ps_bench_launch_setup(TRAIN_PROG, &a.launch, path, sizeof path, cfg.out);
    if (rc == 0) {
        cfg.launch = a.launch;
        if (!strcmp(cfg.model, "ctr") && ps_bench_train_ctr_modes(&cfg) != 0) {
            fprintf(stderr, TRAIN_PROG ": error: --modes %s: no mode left to run\n",
                    a.modes);
            rc = 2;
        } else {
            rc = s_run(&cfg, &a);
        }
    }
    free(flags_copy);
    return rc;
}
