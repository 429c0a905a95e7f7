/*
 * bench/train.c - shardps-bench train: the consistency modes against
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
 * It does not judge: a failed job is a row with its exit status, and the
 * sweep goes on.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/job.h"
#include "deploy/proc.h"

#define S_PROG "shardps-bench train"

enum {
    TRAIN_MAX_MODES = 16,
    TRAIN_MAX_EPOCHS = 200,
    TRAIN_SKIPPED = -1000, /* status of a run that was not started */
};

/* The token that expands to sync:(n-1)/n for n workers. */
#define TRAIN_BACKUP_AUTO "sync:k/n"

typedef struct {
    const char *out;                 /* output directory */
    const char *launch;              /* shardps-launch path */
    const char *model;               /* --model */
    const char *straggler;           /* --straggler R:F or NULL */
    int straggler_rank;              /* R, -1 without */
    long workers[PS_BENCH_LIST_MAX]; /* worker counts */
    int nworkers;
    char modes[TRAIN_MAX_MODES][32]; /* mode tokens, TRAIN_BACKUP_AUTO included */
    int nmodes;
    int epochs;         /* --epochs */
    int max_steps;      /* --max-steps, 0 = none */
    int servers;        /* --servers (parameter-server modes) */
    int threads;        /* --threads, 0 = not passed */
    int batch;          /* --batch, 0 = not passed */
    int seed;           /* --seed */
    double target;      /* test accuracy the time is measured to */
    double timeout;     /* per job, seconds */
    double load_before; /* 1-minute load average at the start */
} train_cfg_t;

typedef struct {
    const char *label; /* mode token: groups runs in tables and plots */
    char mode[32];     /* what --mode was given */
    int workers;
    int status;                      /* launcher exit status, TRAIN_SKIPPED, <0 no start */
    double sps;                      /* samples per second */
    double tta;                      /* seconds to the target accuracy; NAN = not reached */
    double acc;                      /* final test accuracy */
    double wall;                     /* job wall time from the cluster view, s */
    double bytes_per_step;           /* payload bytes pushed + pulled per worker step */
    double st_mean, st_p99, st_max;  /* staleness of applied gradients */
    double dropped;                  /* late pushes dropped */
    int nep;                         /* epochs evaluated */
    double ep_t[TRAIN_MAX_EPOCHS];   /* elapsed seconds at each evaluation */
    double ep_acc[TRAIN_MAX_EPOCHS]; /* test accuracy at each evaluation */
} train_run_t;

/* Does this build know --mode allreduce? Asked of the code, not assumed. */
static int s_have_allreduce(void)
{
    ps_job_t job;
    ps_job_defaults(&job);
    return ps_job_parse_mode("allreduce", &job) == 0;
}

/* The --mode text of token for n workers; "" when the mode does not apply. */
static void s_mode_for(const char *token, int n, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!strcmp(token, TRAIN_BACKUP_AUTO)) {
        if (n >= 2) {
            snprintf(buf, cap, "sync:%d/%d", n - 1, n);
        }
        return;
    }
    int k, m, used = 0;
    if (sscanf(token, "sync:%d/%d%n", &k, &m, &used) == 2 && !token[used] && m != n) {
        return; /* sync:K/N needs N = the number of workers */
    }
    if (!strcmp(token, "allreduce") && n < 2) {
        return;
    }
    snprintf(buf, cap, "%s", token);
}

/* Servers to start for a mode. Allreduce uses none; the hook for when the
 * launcher of that mode wants something else. */
static int s_servers_for(const train_cfg_t *cfg, const char *mode)
{
    return strcmp(mode, "allreduce") ? cfg->servers : 0;
}

/* A file-name-safe tag for a run: "sync_1-2_w2". */
static void s_tag(const train_run_t *r, char *buf, size_t cap)
{
    char m[32];
    snprintf(m, sizeof m, "%s", r->mode);
    for (char *p = m; *p; p++) {
        *p = *p == ':' ? '_' : *p == '/' ? '-' : *p;
    }
    snprintf(buf, cap, "%s_w%d", m, r->workers);
}

/* Reads worker 0's per-epoch lines from the launcher's log. */
static void s_parse_epochs(const char *log, train_run_t *r)
{
    static const char key[] = " W0 I epoch=";
    r->nep = 0;
    for (const char *p = strstr(log, key); p && r->nep < TRAIN_MAX_EPOCHS;
         p = strstr(p + 1, key)) {
        int e;
        double acc, loss, t;
        if (sscanf(p + strlen(" W0 I "),
                   "epoch=%d test_accuracy=%lf test_loss=%lf elapsed=%lfs", &e, &acc, &loss,
                   &t) == 4) {
            r->ep_t[r->nep] = t;
            r->ep_acc[r->nep] = acc;
            r->nep++;
        }
    }
}

/* Fills r from the summary JSON and the log. Returns 0 or PS_ENOENT. */
static int s_read_results(const char *json_path, const char *log_path, double target,
                          train_run_t *r)
{
    char *json = NULL, *log = NULL;
    if (ps_bench_read_file(json_path, &json) != 0) {
        return PS_ENOENT;
    }
    double pushed = 0, pulled = 0, steps[PS_BENCH_LIST_MAX * 8];
    int rc = 0;
    rc |= ps_bench_json_num(json, "samples_per_sec", &r->sps);
    rc |= ps_bench_json_num(json, "test_accuracy", &r->acc);
    rc |= ps_bench_json_num(json, "wall_seconds", &r->wall);
    rc |= ps_bench_json_num(json, "bytes_pushed", &pushed);
    rc |= ps_bench_json_num(json, "bytes_pulled", &pulled);
    rc |= ps_bench_json_num(json, "staleness.mean", &r->st_mean);
    rc |= ps_bench_json_num(json, "staleness.p99", &r->st_p99);
    rc |= ps_bench_json_num(json, "staleness.max", &r->st_max);
    rc |= ps_bench_json_num(json, "pushes_dropped", &r->dropped);
    int n = ps_bench_json_array(json, "worker_steps", steps,
                                (int)(sizeof steps / sizeof steps[0]));
    double total = 0;
    for (int i = 0; i < n; i++) {
        total += steps[i];
    }
    r->bytes_per_step = total > 0 ? (pushed + pulled) / total : NAN;
    free(json);
    if (ps_bench_read_file(log_path, &log) == 0) {
        s_parse_epochs(log, r);
    }
    free(log);
    r->tta = NAN;
    for (int i = 0; i < r->nep; i++) {
        if (r->ep_acc[i] >= target) {
            r->tta = r->ep_t[i];
            break;
        }
    }
    return rc ? PS_ENOENT : 0;
}

/* Runs one job through the launcher. */
static void s_run(const train_cfg_t *cfg, train_run_t *r)
{
    char tag[64], json[PATH_MAX], log[PATH_MAX], num[8][32];
    s_tag(r, tag, sizeof tag);
    snprintf(json, sizeof json, "%s/runs/%s.json", cfg->out, tag);
    snprintf(log, sizeof log, "%s/runs/%s.log", cfg->out, tag);
    remove(json);
    remove(log);
    char *argv[40];
    int a = 0;
    argv[a++] = (char *)cfg->launch;
    snprintf(num[0], sizeof num[0], "%d", s_servers_for(cfg, r->label));
    snprintf(num[1], sizeof num[1], "%d", r->workers);
    snprintf(num[2], sizeof num[2], "%d", cfg->epochs);
    snprintf(num[3], sizeof num[3], "%d", cfg->seed);
    snprintf(num[4], sizeof num[4], "%g", cfg->timeout);
    argv[a++] = "--servers";
    argv[a++] = num[0];
    argv[a++] = "--workers";
    argv[a++] = num[1];
    argv[a++] = "--model";
    argv[a++] = (char *)cfg->model;
    argv[a++] = "--mode";
    argv[a++] = r->mode;
    argv[a++] = "--epochs";
    argv[a++] = num[2];
    argv[a++] = "--seed";
    argv[a++] = num[3];
    argv[a++] = "--timeout";
    argv[a++] = num[4];
    argv[a++] = "--summary";
    argv[a++] = json;
    if (cfg->max_steps > 0) {
        snprintf(num[5], sizeof num[5], "%d", cfg->max_steps);
        argv[a++] = "--max-steps";
        argv[a++] = num[5];
    }
    if (cfg->threads > 0) {
        snprintf(num[6], sizeof num[6], "%d", cfg->threads);
        argv[a++] = "--threads";
        argv[a++] = num[6];
    }
    if (cfg->batch > 0) {
        snprintf(num[7], sizeof num[7], "%d", cfg->batch);
        argv[a++] = "--batch";
        argv[a++] = num[7];
    }
    if (cfg->straggler && cfg->straggler_rank < r->workers) {
        argv[a++] = "--straggler";
        argv[a++] = (char *)cfg->straggler;
    }
    argv[a] = NULL;
    r->status = ps_bench_run(argv, log);
    if (r->status == 0 && s_read_results(json, log, cfg->target, r) != 0) {
        r->status = PS_EPROTO; /* ran, but the summary is not what we expect */
    }
}

/* Cell text: "%.*f" of v, or "" when v is NAN. */
static const char *s_cell(char *buf, size_t cap, int prec, double v)
{
    if (isnan(v)) {
        buf[0] = '\0';
    } else {
        snprintf(buf, cap, "%.*f", prec, v);
    }
    return buf;
}

static void s_plots(const train_cfg_t *cfg, const train_run_t *runs, int nruns)
{
    /* Test accuracy against training time: one panel per worker count, one
     * y range for all, from just under the lowest accuracy above chance
     * (a diverged run stays below it, off the plot). */
    ps_bench_str_t gp = {0}, data = {0};
    int panels = cfg->nworkers;
    double lo = cfg->target;
    ps_bench_plot_header(&gp, cfg->out, "train_accuracy", 340 * panels, 340);
    for (int i = 0; i < nruns; i++) {
        if (runs[i].status == 0 && runs[i].nep > 0) {
            ps_bench_str_addf(&data, "$r%d << EOD\n", i);
            for (int e = 0; e < runs[i].nep; e++) {
                ps_bench_str_addf(&data, "%.2f %.4f\n", runs[i].ep_t[e], runs[i].ep_acc[e]);
                lo = runs[i].ep_acc[e] >= 0.5 && runs[i].ep_acc[e] < lo ? runs[i].ep_acc[e]
                                                                        : lo;
            }
            ps_bench_str_addf(&data, "EOD\n");
        }
    }
    ps_bench_str_addf(&gp,
                      "%sset xlabel 'training time (s)'\nset ylabel 'test accuracy'\n"
                      "set yrange [%.2f:*]\nset xrange [0:*]\nset key bottom right opaque\n"
                      "set multiplot layout 1,%d\n",
                      ps_bench_str_get(&data), floor(lo * 50) / 50 - 0.01, panels);
    for (int w = 0; w < cfg->nworkers; w++) {
        ps_bench_str_addf(&gp,
                          "set title '%ld worker%s'\nplot %.4f w l lc rgb 'gray50' dt 2 "
                          "t 'target %.2f'",
                          cfg->workers[w], cfg->workers[w] == 1 ? "" : "s", cfg->target,
                          cfg->target);
        for (int m = 0; m < cfg->nmodes; m++) {
            for (int i = 0; i < nruns; i++) {
                if (runs[i].label == cfg->modes[m] && runs[i].workers == cfg->workers[w] &&
                    runs[i].status == 0 && runs[i].nep > 0) {
                    ps_bench_str_addf(&gp, ", $r%d u 1:2 w lp lc %d pt 7 ps 0.6 t '%s'", i,
                                      m + 1, runs[i].mode);
                }
            }
        }
        ps_bench_str_addf(&gp, "\n");
    }
    ps_bench_str_addf(&gp, "unset multiplot\n");
    ps_bench_plot(cfg->out, "train_accuracy", ps_bench_str_get(&gp));
    ps_bench_str_fini(&gp);
    ps_bench_str_fini(&data);

    /* Samples per second against workers: one line per mode. */
    ps_bench_str_t plot = {0};
    ps_bench_plot_header(&gp, cfg->out, "train_throughput", 520, 360);
    ps_bench_str_addf(&gp,
                      "set xlabel 'workers'\nset ylabel 'samples/s'\nset yrange [0:*]\n"
                      "set xtics (");
    for (int w = 0; w < cfg->nworkers; w++) {
        ps_bench_str_addf(&gp, "%s%ld", w ? ", " : "", cfg->workers[w]);
    }
    ps_bench_str_addf(&gp, ")\n");
    for (int m = 0; m < cfg->nmodes; m++) {
        int points = 0;
        ps_bench_str_addf(&gp, "$m%d << EOD\n", m);
        for (int i = 0; i < nruns; i++) {
            if (runs[i].label == cfg->modes[m] && runs[i].status == 0) {
                ps_bench_str_addf(&gp, "%d %.1f\n", runs[i].workers, runs[i].sps);
                points++;
            }
        }
        ps_bench_str_addf(&gp, "EOD\n");
        if (points) {
            ps_bench_str_addf(&plot, "%s$m%d u 1:2 w lp lc %d pt 7 t '%s'",
                              plot.len ? ", " : "", m, m + 1, cfg->modes[m]);
        }
    }
    if (plot.len) {
        ps_bench_str_addf(&gp, "plot %s\n", ps_bench_str_get(&plot));
        ps_bench_plot(cfg->out, "train_throughput", ps_bench_str_get(&gp));
    }
    ps_bench_str_fini(&plot);
    ps_bench_str_fini(&gp);
}

static int s_sweep(const train_cfg_t *cfg)
{
    int cap = cfg->nmodes * cfg->nworkers, nruns = 0, failed = 0;
    train_run_t *runs = calloc((size_t)cap, sizeof *runs);
    if (!runs) {
        return 1;
    }
    for (int m = 0; m < cfg->nmodes; m++) {
        for (int w = 0; w < cfg->nworkers; w++) {
            train_run_t *r = &runs[nruns];
            r->label = cfg->modes[m];
            r->workers = (int)cfg->workers[w];
            s_mode_for(cfg->modes[m], r->workers, r->mode, sizeof r->mode);
            if (r->mode[0]) {
                nruns++;
            }
        }
    }
    ps_bench_table_t *t = NULL, *te = NULL;
    char title[128], headers[512];
    snprintf(title, sizeof title,
             "### Training: %s, every mode x workers (same seed, data order "
             "and flags)",
             cfg->model);
    snprintf(headers, sizeof headers,
             "mode,workers,status,samples/s,speed-up vs sync 1 worker,s to %.2f,final acc,"
             "wall s,payload bytes/step,staleness mean,staleness p99,staleness max,"
             "dropped pushes",
             cfg->target);
    if (ps_bench_table_new(cfg->out, "train", title,
                           "mode,workers,status,samples_per_sec,speedup,time_to_target_s,"
                           "final_accuracy,wall_seconds,bytes_per_step,staleness_mean,"
                           "staleness_p99,staleness_max,pushes_dropped",
                           headers, &t) != 0 ||
        ps_bench_table_new(cfg->out, "train_epochs", "### Test accuracy after each epoch",
                           "mode,workers,epoch,elapsed_s,test_accuracy", NULL, &te) != 0) {
        ps_bench_table_destroy(&t, 0);
        free(runs);
        return 1;
    }
    double base = NAN; /* sync, 1 worker */
    for (int i = 0; i < nruns; i++) {
        train_run_t *r = &runs[i];
        fprintf(stderr, S_PROG ": [%d/%d] --mode %s --workers %d ...\n", i + 1, nruns,
                r->mode, r->workers);
        double t0 = ps_now();
        s_run(cfg, r);
        char c[12][32], status[32];
        if (r->status == 0) {
            snprintf(status, sizeof status, "ok");
        } else if (r->status < 0) {
            snprintf(status, sizeof status, "failed: %s", ps_strerror(r->status));
        } else {
            snprintf(status, sizeof status, "failed: exit %d", r->status);
        }
        if (r->status != 0) {
            failed = 1;
            fprintf(stderr, S_PROG ":   %s (log: %s/runs/)\n", status, cfg->out);
            ps_bench_table_rowf(t, "%s,%d,%s,,,,,,,,,,", r->mode, r->workers, status);
            continue;
        }
        if (!strcmp(r->mode, "sync") && r->workers == 1) {
            base = r->sps;
        }
        char tta[48] = "not reached";
        if (!isnan(r->tta)) {
            snprintf(tta, sizeof tta, "%.1f s", r->tta);
        }
        fprintf(stderr,
                S_PROG ":   %.0f samples/s, accuracy %.4f, time to %.2f: %s (job %.1f s)\n",
                r->sps, r->acc, cfg->target, tta, ps_now() - t0);
        ps_bench_table_rowf(t, "%s,%d,%s,%.0f,%s,%s,%.4f,%.2f,%.0f,%.3f,%.0f,%.0f,%.0f",
                            r->mode, r->workers, status, r->sps,
                            s_cell(c[0], 32, 2, isnan(base) ? NAN : r->sps / base),
                            s_cell(c[1], 32, 1, r->tta), r->acc, r->wall, r->bytes_per_step,
                            r->st_mean, r->st_p99, r->st_max, r->dropped);
        for (int e = 0; e < r->nep; e++) {
            ps_bench_table_rowf(te, "%s,%d,%d,%.1f,%.4f", r->mode, r->workers, e + 1,
                                r->ep_t[e], r->ep_acc[e]);
        }
    }
    char strag[96] = "none";
    if (cfg->straggler) {
        snprintf(strag, sizeof strag, "%s (runs with more workers than its rank)",
                 cfg->straggler);
    }
    char extra[64] = "";
    if (cfg->threads > 0) {
        snprintf(extra, sizeof extra, " --threads %d", cfg->threads);
    }
    if (cfg->batch > 0) {
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --batch %d",
                 cfg->batch);
    }
    ps_bench_table_note(
        t,
        "Each row: `shardps-launch --servers %d --workers N --model %s --mode M "
        "--epochs %d --seed %d%s` (allreduce: `--servers 0`); max-steps %d; "
        "straggler %s. Samples/s and bytes from the scheduler's summary; "
        "payload bytes/step = bytes pushed + pulled per worker step; time to "
        "%.2f = worker 0's training time at the first evaluation reaching it "
        "(n/a: not reached); speed-up against the sync 1-worker row of this "
        "run. Logs and summaries: runs/ beside this file.",
        cfg->servers, cfg->model, cfg->epochs, cfg->seed, extra, cfg->max_steps, strag,
        cfg->target);
    char machine[256];
    ps_bench_machine(machine, sizeof machine, cfg->load_before);
    ps_bench_table_note(t, "Machine: %s.", machine);
    if (!s_have_allreduce()) {
        ps_bench_table_note(
            t, "allreduce: not in this build (`--mode allreduce` is rejected); "
               "rows appear once it is.");
    }
    ps_bench_table_destroy(&te, 0);
    ps_bench_table_destroy(&t, 1);
    s_plots(cfg, runs, nruns);
    free(runs);
    return failed;
}

/* Splits the --modes list; drops allreduce when this build lacks it. */
static int s_parse_modes(const char *text, train_cfg_t *cfg)
{
    cfg->nmodes = 0;
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, ",");
        char tok[32];
        if (n == 0 || n >= sizeof tok || cfg->nmodes == TRAIN_MAX_MODES) {
            return PS_EINVAL;
        }
        snprintf(tok, sizeof tok, "%.*s", (int)n, p);
        ps_job_t job;
        ps_job_defaults(&job);
        if (!strcmp(tok, "allreduce") && !s_have_allreduce()) {
            fprintf(stderr,
                    S_PROG ": --mode allreduce is not in this build; skipping it\n");
        } else if (strcmp(tok, TRAIN_BACKUP_AUTO) && ps_job_parse_mode(tok, &job) != 0) {
            return PS_EINVAL;
        } else {
            snprintf(cfg->modes[cfg->nmodes++], sizeof cfg->modes[0], "%s", tok);
        }
        p += n + (p[n] == ',');
    }
    return cfg->nmodes > 0 ? 0 : PS_EINVAL;
}

int ps_bench_train_main(int argc, char **argv)
{
    train_cfg_t cfg = {.out = "bench-out",
                       .model = "mlp",
                       .servers = 2,
                       .seed = 1,
                       .target = 0.85,
                       .timeout = 1800,
                       .straggler_rank = -1};
    int quick = 0;
    const char *workers = "1,2,4",
               *modes = "sync,async,ssp:2," TRAIN_BACKUP_AUTO ",allreduce";
    const char *launch = NULL;
    ps_flag_t flags[] = {
        {"quick", PS_FLAG_BOOL, &quick, NULL,
         "3 epochs per job (about 3 minutes on 2 cores)"},
        {"out", PS_FLAG_STR, &cfg.out, "DIR", "where the CSV, markdown and PNG files go"},
        {"model", PS_FLAG_STR, &cfg.model, "NAME", "mlp or cnn"},
        {"straggler", PS_FLAG_STR, &cfg.straggler, "R:F",
         "slow worker R down F times (runs with more than R workers)"},
        {"workers", PS_FLAG_STR, &workers, "LIST", "worker counts"},
        {"modes", PS_FLAG_STR, &modes, "LIST", "modes; sync:k/n means sync:(n-1)/n"},
        {"epochs", PS_FLAG_INT, &cfg.epochs, "N", "epochs per job (0 = 10; quick: 3)"},
        {"max-steps", PS_FLAG_INT, &cfg.max_steps, "N",
         "stop each job after N steps (0 = none)"},
        {"servers", PS_FLAG_INT, &cfg.servers, "N",
         "servers of the parameter-server modes"},
        {"threads", PS_FLAG_INT, &cfg.threads, "N",
         "BLAS threads per worker (0 = library default)"},
        {"batch", PS_FLAG_INT, &cfg.batch, "N",
         "samples per worker per step (0 = job default)"},
        {"seed", PS_FLAG_INT, &cfg.seed, "N", "seed of every job"},
        {"target", PS_FLAG_DOUBLE, &cfg.target, "ACC",
         "test accuracy the time is measured to"},
        {"timeout", PS_FLAG_DOUBLE, &cfg.timeout, "SECONDS", "per job"},
        {"launch", PS_FLAG_STR, &launch, "PATH",
         "shardps-launch (default: next to this program, ../deploy/, $PATH)"},
    };
    int rc = ps_config_parse(
        S_PROG,
        "Trains the same model with the same seed in every consistency mode "
        "and worker\ncount through shardps-launch. Writes train.csv/.md, "
        "train_epochs.csv/.md,\ntrain_accuracy.png and train_throughput.png "
        "into --out.",
        flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (cfg.epochs <= 0) {
        cfg.epochs = quick ? 3 : 10;
    }
    int n = ps_bench_parse_list(workers, cfg.workers, PS_BENCH_LIST_MAX);
    for (int i = 0; n > 0 && i < n; i++) {
        n = cfg.workers[i] >= 1 && cfg.workers[i] <= 64 ? n : PS_EINVAL;
    }
    if (n < 0) {
        fprintf(stderr, S_PROG ": error: --workers %s: expected a list of 1 to 64\n",
                workers);
        return 2;
    }
    cfg.nworkers = n;
    if (s_parse_modes(modes, &cfg) != 0) {
        fprintf(
            stderr,
            S_PROG
            ": error: --modes %s: expected sync, async, ssp:S, sync:K/N, " TRAIN_BACKUP_AUTO
            " or allreduce, comma-separated\n",
            modes);
        return 2;
    }
    ps_job_t job;
    ps_job_defaults(&job);
    if (cfg.straggler) {
        if (ps_job_parse_straggler(cfg.straggler, &job) != 0) {
            fprintf(stderr, S_PROG ": error: --straggler %s: expected RANK:FACTOR\n",
                    cfg.straggler);
            return 2;
        }
        cfg.straggler_rank = job.straggler_rank;
    }
    if (cfg.epochs > TRAIN_MAX_EPOCHS || cfg.max_steps < 0 || cfg.servers < 1 ||
        cfg.threads < 0 || cfg.batch < 0 || !(cfg.target > 0 && cfg.target <= 1) ||
        !(cfg.timeout > 0) || (strcmp(cfg.model, "mlp") && strcmp(cfg.model, "cnn"))) {
        fprintf(stderr,
                S_PROG ": error: expected --epochs 1..%d, --max-steps >= 0, --servers "
                       ">= 1, --threads/--batch >= 0, 0 < --target <= 1, --timeout > 0, "
                       "--model mlp|cnn\n",
                TRAIN_MAX_EPOCHS);
        return 2;
    }
    char path[PATH_MAX];
    int setup = ps_bench_launch_setup(S_PROG, &launch, path, sizeof path, cfg.out);
    if (setup != 0) {
        return setup;
    }
    cfg.launch = launch;
    cfg.load_before = ps_bench_loadavg();
    return s_sweep(&cfg) ? 1 : 0;
}
