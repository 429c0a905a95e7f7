/*
 * bench/train/crossover.c - shardps-bench crossover: where the parameter
 * server beats the ring, one table per link setting.
 *
 * For each link setting (--links: a --net spec and its --dilate) and each
 * worker count N it runs the MLP three times on the simulated cluster, as
 * `train --net` runs a job (train_job.c): sync with N servers of their own,
 * sync with server i in worker i's namespace, and the ring. Beside each
 * row: the link-bound rate of the busiest link's measured bytes and the
 * theory's bytes (train_links.c), and the loopback CPU cost of one round of
 * the model's bytes over the same N servers, measured as `shardps-bench
 * comm` does (comm_run.c), with the rounds per second that cost allows
 * these cores: the CPU cost of a message is not dilated, so it bounds a
 * dilated run sooner than real links of the same rate. It writes the page
 * OUT/crossover.md; it does not judge a figure.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/comm/comm.h"
#include "bench/train/train.h"
#include "common/config.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"

#define S_PROG "shardps-bench crossover"

enum { S_MAX_LINKS = 8, S_SPEC_MAX = 128, S_DESIGNS = 3 };

/* The three designs of a worker count, in the order they run and show. */
static const char *const s_labels[S_DESIGNS] = {"sync", "sync" TRAIN_COLOCATED,
                                                "allreduce"};
static const char *const s_names[S_DESIGNS] = {"PS dedicated", "PS colocated", "ring"};

/* One link setting of --links. */
typedef struct {
    char spec[S_SPEC_MAX]; /* the --net spec: RATE[,DELAY][,mtu=...][,queue=...] */
    double dilate;         /* its --dilate (1: none) */
    char tag[S_SPEC_MAX];  /* file-name-safe: "1gbit_0.2ms_dilate40" */
} s_link_t;

/* What crossover was asked to run. */
typedef struct {
    train_cfg_t train;        /* the jobs' settings; net, out per link setting */
    ps_bench_comm_cfg_t comm; /* the loopback rounds' repetitions */
    const char *out;          /* --out */
    s_link_t links[S_MAX_LINKS];
    int nlinks;
    double cores; /* this machine's cores, the CPU bound's */
} s_cfg_t;

/* Parses one setting "RATE[,DELAY][,mtu=BYTES][,queue=BYTES][,dilate=F]" into
 * l. Returns 0, or PS_EINVAL with why in err. */
static int s_parse_link(const char *text, s_link_t *l, char *err, size_t errlen)
{
    char buf[S_SPEC_MAX], *save = NULL;
    if (snprintf(buf, sizeof buf, "%s", text) >= (int)sizeof buf) {
        snprintf(err, errlen, "'%s' is too long", text);
        return PS_EINVAL;
    }
    l->spec[0] = '\0';
    l->dilate = 1;
    for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        char *end;
        if (!strncmp(w, "dilate=", 7)) {
            l->dilate = strtod(w + 7, &end);
            if (end == w + 7 || *end ||
                !(l->dilate >= 1 && l->dilate <= PS_NETSIM_MAX_DILATE)) {
                snprintf(err, errlen, "'%s': expected dilate=F, F from 1 to %d", text,
                         PS_NETSIM_MAX_DILATE);
                return PS_EINVAL;
            }
            continue;
        }
        const size_t n = strlen(l->spec), k = strlen(w);
        if (n + k + 2 <= sizeof l->spec) { /* fits: buf is no longer than spec */
            l->spec[n] = ',';
            memcpy(l->spec + n + (n > 0), w, k + 1);
        }
    }
    char why[200] = "";
    if (ps_netsim_parse(l->spec, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s", why);
        return PS_EINVAL;
    }
    memcpy(l->tag, l->spec, sizeof l->tag); /* as long as spec */
    for (char *p = l->tag; *p; p++) {
        *p = *p == ',' || *p == '=' ? '_' : *p;
    }
    if (l->dilate > 1) {
        snprintf(l->tag + strlen(l->tag), sizeof l->tag - strlen(l->tag), "_dilate%g",
                 l->dilate);
    }
    return 0;
}

/* --links, ';'-separated, into cfg. Returns 0, or 2 after one line. */
static int s_parse_links(s_cfg_t *cfg, const char *text)
{
    char buf[S_MAX_LINKS * S_SPEC_MAX], *save = NULL, err[320] = "";
    snprintf(buf, sizeof buf, "%s", text);
    for (char *s = strtok_r(buf, ";", &save); s && !err[0];
         s = strtok_r(NULL, ";", &save)) {
        if (cfg->nlinks == S_MAX_LINKS) {
            snprintf(err, sizeof err, "at most %d settings, ';'-separated", S_MAX_LINKS);
        } else {
            s_parse_link(s, &cfg->links[cfg->nlinks++], err, sizeof err);
        }
    }
    if (!err[0] && cfg->nlinks == 0) {
        snprintf(err, sizeof err,
                 "expected RATE[,DELAY][,mtu=BYTES][,queue=BYTES][,dilate=F], ';'-separated");
    }
    if (err[0]) {
        fprintf(stderr, S_PROG ": error: --links %s: %s\n", text, err);
        return 2;
    }
    return 0;
}

/* The table of link setting l, its CSV crossover_TAG.csv. */
static int s_table_new(const s_cfg_t *cfg, const s_link_t *l, ps_bench_table_t **t)
{
    char name[S_SPEC_MAX + 16], title[1024], dilate[48] = "";
    snprintf(name, sizeof name, "crossover_%s", l->tag);
    if (l->dilate > 1) {
        snprintf(dilate, sizeof dilate, " --dilate %g", l->dilate);
    }
    snprintf(title, sizeof title, "### --net %s%s: %s", l->spec, dilate,
             ps_netsim_note(cfg->train.net));
    return ps_bench_table_new(
        cfg->train.page, name, title,
        "workers,design,servers,status,samples_per_sec,bound_samples_per_sec,efficiency,"
        "bound,ps_vs_ring,ps_vs_ring_bound,link_mb,theory_mb,cpu_busy,comm_cpu_ms,"
        "cpu_bound_rounds,rounds_per_sec",
        "workers,design,servers,status,samples/s,link-bound samples/s,link efficiency,"
        "bound,PS/ring samples/s,PS/ring link-bound,sent MB/step (measured),"
        "MB/step (theory),CPU busy,loopback CPU ms/round,CPU-bound rounds/s,rounds/s",
        t);
}

/* The link-bound samples/s of run r (NAN when unknown). */
static double s_bound_sps(const s_cfg_t *cfg, const train_run_t *r)
{
    double bound, step;
    ps_bench_train_step_ms(&cfg->train, r, &bound, &step);
    return r->status == 0 && bound > 0 ? r->sps * step / bound : NAN;
}

/* Run r's row; g: the ring's run of the same workers; cpu: the loopback CPU
 * seconds per round of its servers (NAN: none). */
static void s_row(const s_cfg_t *cfg, ps_bench_table_t *t, int d, const train_run_t *r,
                  const train_run_t *g, double cpu)
{
    char c[8][32], status[32];
    ps_bench_train_status(r, status, sizeof status);
    const int servers = d == S_DESIGNS - 1 ? 0 : r->workers;
    if (r->status != 0) {
        ps_bench_table_rowf(
            t, "%d,%s,%d,%s,,,,,,,,,,%s,%s,", r->workers, s_names[d], servers, status,
            ps_bench_train_cell(c[0], 32, 3, cpu * 1e3),
            ps_bench_train_cell(c[1], 32, 0, cfg->cores * cfg->train.dilate / cpu));
        return;
    }
    const double bsps = s_bound_sps(cfg, r), gb = s_bound_sps(cfg, g);
    const int ps = d < S_DESIGNS - 1 && g->status == 0;
    double bound, step;
    ps_bench_train_step_ms(&cfg->train, r, &bound, &step);
    ps_bench_table_rowf(
        t, "%d,%s,%d,%s,%.0f,%s,%.2f,%s,%s,%s,%.3f,%.3f,%.2f,%s,%s,%.0f", r->workers,
        s_names[d], servers, status, r->sps, ps_bench_train_cell(c[0], 32, 0, bsps),
        bound / step, ps_bench_train_bound(&cfg->train, r),
        ps_bench_train_cell(c[1], 32, 2, ps ? r->sps / g->sps : NAN),
        ps_bench_train_cell(c[2], 32, 2, ps ? bsps / gb : NAN), r->link_tx / 1e6,
        ps_bench_train_theory_mb(r), r->cpu_busy,
        ps_bench_train_cell(c[3], 32, 3, cpu * 1e3),
        ps_bench_train_cell(c[4], 32, 0, cfg->cores * cfg->train.dilate / cpu),
        r->sps / ps_bench_train_batch(&cfg->train));
}

/* The loopback CPU seconds per round of bytes over servers, or NAN after a
 * line on stderr. */
static double s_comm_cpu(const s_cfg_t *cfg, int servers, long bytes)
{
    ps_bench_comm_result_t res;
    char err[256] = "";
    int rc = ps_bench_comm_run(&cfg->comm, servers, bytes, 1, &res, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": loopback rounds, %d servers: failed: %s\n", servers,
                err[0] ? err : ps_strerror(rc));
        return NAN;
    }
    fprintf(stderr,
            S_PROG ": loopback rounds of %ld bytes, %d servers: %.3f CPU ms/round\n", bytes,
            servers, res.ps_cpu * 1e3);
    return res.ps_cpu;
}

/* The three designs at n workers, then their rows. Returns 0, or 1 when a
 * job failed. */
static int s_workers(s_cfg_t *cfg, int n, ps_bench_table_t *t)
{
    train_run_t *runs = calloc(S_DESIGNS, sizeof *runs);
    if (!runs) {
        return 1;
    }
    int failed = 0;
    double params = NAN;
    cfg->train.servers = n;
    for (int d = 0; d < S_DESIGNS && !ps_netsim_stop; d++) {
        train_run_t *r = &runs[d];
        r->label = s_labels[d];
        r->workers = n;
        ps_bench_train_mode_for(r->label, n, r->mode, sizeof r->mode);
        snprintf(r->name, sizeof r->name, "%s", s_names[d]);
        fprintf(stderr, S_PROG ": %s, %d workers: %s ...\n", cfg->train.net_spec, n,
                s_names[d]);
        ps_bench_train_job(&cfg->train, r, -1, 0);
        failed |= r->status != 0;
        params = r->status == 0 ? r->params : params;
    }
    const double cpu =
        isnan(params) || ps_netsim_stop ? NAN : s_comm_cpu(cfg, n, (long)params * 4);
    for (int d = 0; d < S_DESIGNS && !ps_netsim_stop; d++) {
        s_row(cfg, t, d, &runs[d], &runs[S_DESIGNS - 1], d < S_DESIGNS - 1 ? cpu : NAN);
    }
    free(runs);
    return failed | ps_netsim_stop;
}

/* What the rows ran and how they are read, under a table. */
static void s_notes(const s_cfg_t *cfg, ps_bench_table_t *t)
{
    char extra[512] = "";
    ps_bench_train_extra_flags(&cfg->train, extra, sizeof extra);
    ps_bench_table_note(
        t,
        "Each row: one job, `shardps-launch --model %s --workers N --mode sync|allreduce "
        "--epochs %d --max-steps %d --seed %d%s` role by role on the simulated cluster, as "
        "`shardps-bench train --net` runs it: PS dedicated with N servers in namespaces of "
        "their own, PS colocated with server i in worker i's namespace, the ring with "
        "none. Samples/s: the scheduler's summary. Link-bound samples/s: the rate at which "
        "the job's busiest link carries its measured bytes per step at the link rate; link "
        "efficiency = samples/s over it; bound: CPU when the cores were %.0f %% busy or "
        "more, delay line when its busiest thread was %.0f %% busy or more, else link. "
        "PS/ring: the row's over the ring's at the same workers. MB/step (theory): the "
        "model's fp32 bytes on a worker's link each way per step, once with dedicated "
        "servers, 2(M-1)/M times for the ring and a colocated server's worker. Loopback "
        "CPU ms/round: user + system CPU of every process for one push + pull of the "
        "model's bytes over the same N servers on loopback (`shardps-bench comm`'s shardps "
        "CPU ms/round), the median of %d repetitions (the ring has no servers: n/a); "
        "CPU-bound rounds/s: the rounds (one worker step each) this machine's %.0f cores "
        "allow at that cost, times the dilation (%gx), since the CPU cost of a message is "
        "not dilated. Rounds/s: the job's worker steps per second. Logs and summaries: "
        "%s/runs/.",
        cfg->train.model, cfg->train.epochs, cfg->train.max_steps, cfg->train.seed, extra,
        TRAIN_CPU_BOUND * 100, TRAIN_LINE_BOUND * 100, cfg->comm.reps, cfg->cores,
        cfg->train.dilate, cfg->train.out);
}

/* One link setting: its network, every worker count, its table. Returns 0,
 * or 1 when something failed (2: the network cannot be made here). */
static int s_link(s_cfg_t *cfg, const s_link_t *l)
{
    static char out[PATH_MAX];
    snprintf(out, sizeof out, "%s/%s", cfg->out, l->tag);
    char runs[PATH_MAX + 8];
    snprintf(runs, sizeof runs, "%s/runs", out);
    if (ps_file_mkdirs(runs) != 0) {
        fprintf(stderr, S_PROG ": error: cannot create %s: %s\n", runs, strerror(errno));
        return 1;
    }
    long most = 1;
    for (int i = 0; i < cfg->train.nworkers; i++) {
        most = cfg->train.workers[i] > most ? cfg->train.workers[i] : most;
    }
    cfg->train.out = out;
    cfg->train.net_spec = l->spec;
    cfg->train.dilate = l->dilate;
    int rc = ps_bench_train_net_new(&cfg->train, S_PROG, (int)most, (int)most);
    if (rc != 0) {
        return rc == PS_ENOTSUP ? 2 : 1;
    }
    ps_bench_table_t *t = NULL;
    int failed = s_table_new(cfg, l, &t) != 0;
    for (int i = 0; t && i < cfg->train.nworkers && !ps_netsim_stop; i++) {
        failed |= s_workers(cfg, (int)cfg->train.workers[i], t);
    }
    if (t) {
        s_notes(cfg, t);
        ps_bench_table_destroy(&t, 1);
    }
    return failed | ps_bench_train_net_destroy(&cfg->train, S_PROG);
}

/* The flags into cfg (train's defaults where crossover has no flag).
 * Returns 0, 1 when --help was answered, or 2 after one line. */
static int s_flags(s_cfg_t *cfg, int argc, char **argv)
{
    const char *links = "1gbit,0.2ms,dilate=40;10gbit,0.05ms,dilate=400",
               *workers = "2,4,8";
    const char *log_level = "warn";
    ps_flag_t flags[] = {
        {"links", PS_FLAG_STR, &links, "LIST",
         "link settings, ';'-separated, each "
         "RATE[,DELAY][,mtu=BYTES][,queue=BYTES][,dilate=F]: train's --net and --dilate"},
        {"workers", PS_FLAG_STR, &workers, "LIST", "worker counts"},
        {"max-steps", PS_FLAG_INT, &cfg->train.max_steps, "N", "steps of each job"},
        {"eval-every", PS_FLAG_INT, &cfg->train.eval_every, "STEPS",
         "worker 0 also evaluates every STEPS steps (0 = epoch ends)"},
        {"reps", PS_FLAG_INT, &cfg->comm.reps, "N",
         "repetitions of the loopback rounds, median reported"},
        {"timeout", PS_FLAG_DOUBLE, &cfg->train.timeout, "SECONDS", "per job"},
        {"out", PS_FLAG_STR, &cfg->out, "DIR",
         "where the page crossover.md, its CSVs and the runs' logs go"},
        {"launch", PS_FLAG_STR, &cfg->train.launch, "PATH",
         "shardps-launch (default: next to this program, ../deploy/, $PATH)"},
        {"log-level", PS_FLAG_STR, &log_level, "LEVEL",
         "of the loopback rounds' roles: err, warn, info, debug"},
    };
    int rc = ps_config_parse_argv(
        S_PROG,
        "For each link setting and worker count N, the MLP on the simulated cluster\n"
        "(root) with N dedicated servers, N colocated servers and the ring, beside each\n"
        "one's link-bound rate and the loopback CPU cost of a round. Writes the page\n"
        "crossover.md and one CSV per link setting, crossover_TAG.csv, into --out.",
        flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 1 : 2;
    }
    int n = ps_bench_parse_list(workers, cfg->train.workers, PS_BENCH_LIST_MAX);
    for (int i = 0; n > 0 && i < n; i++) {
        n = cfg->train.workers[i] >= 2 && cfg->train.workers[i] <= 64 ? n : PS_EINVAL;
    }
    cfg->train.nworkers = n;
    if (n < 0 || cfg->train.max_steps < 1 || cfg->train.eval_every < 0 ||
        cfg->comm.reps < 1 || cfg->comm.reps > COMM_MAX_REPS || !(cfg->train.timeout > 0)) {
        fprintf(stderr,
                S_PROG ": error: expected --workers a list of 2 to 64, --max-steps >= 1, "
                       "--eval-every >= 0, --reps 1..%d, --timeout > 0\n",
                COMM_MAX_REPS);
        return 2;
    }
    return s_parse_links(cfg, links) || ps_log_set_level_flag(S_PROG, log_level) ? 2 : 0;
}

int ps_bench_crossover_main(int argc, char **argv)
{
    s_cfg_t cfg = {.train = {.model = "mlp",
                             .epochs = 10,
                             .max_steps = 200,
                             .seed = 1,
                             .target = 0.85,
                             .timeout = 1800,
                             .dilate = 1,
                             .straggler_rank = -1,
                             .nscen = 1,
                             .scen = {SCEN_PLAIN}},
                   .comm = {.reps = 5, .seconds = 0.5},
                   .out = "bench-out"};
    int rc = s_flags(&cfg, argc, argv);
    if (rc != 0) {
        return rc == 1 ? 0 : 2;
    }
    char path[PATH_MAX];
    rc = ps_bench_launch_setup(S_PROG, &cfg.train.launch, path, sizeof path, cfg.out);
    if (rc != 0) {
        return rc;
    }
    ps_log_set_role("B", -1);
    cfg.cores = (double)sysconf(_SC_NPROCESSORS_ONLN);
    if (ps_bench_page_new(cfg.out, "crossover", argc, argv, &cfg.train.page) != 0) {
        return 1;
    }
    ps_bench_page_addf(cfg.train.page,
                       "One table per link setting: each worker count's parameter server "
                       "with dedicated and with colocated servers beside the ring, each "
                       "against its link-bound rate and the CPU cost of its rounds ([what "
                       "the columns mean](../benchmarks.md#crossover)).\n\n");
    int failed = 0;
    for (int i = 0; i < cfg.nlinks && !ps_netsim_stop; i++) {
        rc = s_link(&cfg, &cfg.links[i]);
        failed |= rc == 1;
        if (rc == 2) { /* no network here: said once, like train --net */
            break;
        }
    }
    ps_bench_page_destroy(&cfg.train.page);
    if (ps_netsim_stop) {
        fprintf(stderr, S_PROG ": stopped by signal %d\n", (int)ps_netsim_stop);
        return 130;
    }
    return failed;
}
