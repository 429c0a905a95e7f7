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
 * It does not judge: a failed job is a row with its exit status, and the
 * sweep goes on.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/netsim/job.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/job.h"
#include "deploy/proc.h"

#define S_PROG "shardps-bench train"

enum {
    TRAIN_MAX_MODES = 16,
    TRAIN_MAX_EPOCHS = 2000, /* evaluations: epoch ends and --eval-every points */
    TRAIN_MAX_JOB_EPOCHS = 200,
    TRAIN_SKIPPED = -1000, /* status of a run that was not started */
    TRAIN_MAX_SCEN = 3,
    TRAIN_MAX_JOB_FLAGS = 16,
};

/* What happens to a job besides training: nothing, a straggler, or worker 1
 * killed at a third of the job (--min-workers 1; needs --net). */
static const char *const s_scenario_names[TRAIN_MAX_SCEN] = {"plain", "straggler", "kill"};
enum { SCEN_PLAIN, SCEN_STRAGGLER, SCEN_KILL };

/* Where the kill and the restart of worker 1 happen, as fractions of the job. */
#define TRAIN_KILL_AT (1.0 / 3)
#define TRAIN_REJOIN_AT (2.0 / 3)

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
    char modes[TRAIN_MAX_MODES][PS_BENCH_WORD_MAX]; /* mode tokens, TRAIN_BACKUP_AUTO included */
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
    int scen[TRAIN_MAX_SCEN]; /* SCEN_* to run */
    int nscen;
    int eval_every;     /* the workers' --eval-every, 0 = not passed */
    char *job_flags[TRAIN_MAX_JOB_FLAGS + 1]; /* --job-flags, split; NULL-terminated */
    const char *job_flags_text;
    const char *net_spec;  /* --net RATE[,DELAY] or NULL */
    ps_netsim_t *net;   /* the simulated network, when --net */
    char uptime[128];      /* `uptime`'s load line at the start */
} train_cfg_t;

typedef struct {
    const char *label; /* mode token: groups runs in tables and plots */
    char mode[32];     /* what --mode was given */
    int workers;
    int scen;          /* SCEN_* */
    int status;                      /* launcher exit status, TRAIN_SKIPPED, <0 no start */
    double sps;                      /* samples per second */
    double tta;                      /* seconds to the target accuracy; NAN = not reached */
    double sta;                      /* samples to it (worker 0's step x workers x batch) */
    double killed_at;                /* seconds into the job W1 was killed; -1 never */
    double load;                     /* 1-minute load average when the job started */
    double acc;                      /* final test accuracy */
    double wall;                     /* job wall time from the cluster view, s */
    double bytes_per_step;           /* payload bytes pushed + pulled per worker step */
    double st_mean, st_p99, st_max;  /* staleness of applied gradients */
    double dropped;                  /* late pushes dropped */
    int nep;                         /* epochs evaluated */
    double ep_t[TRAIN_MAX_EPOCHS];   /* elapsed seconds at each evaluation */
    double ep_acc[TRAIN_MAX_EPOCHS]; /* test accuracy at each evaluation */
    double ep_step[TRAIN_MAX_EPOCHS]; /* worker 0's step at each evaluation; NAN unknown */
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
    snprintf(buf, cap, "%s_w%d%s%s", m, r->workers, r->scen ? "_" : "",
             r->scen ? s_scenario_names[r->scen] : "");
}

/* Reads worker 0's evaluations from the log, in order: the epoch ends
 * ("W0 I epoch=E test_accuracy=A test_loss=L elapsed=Xs step=T") and the
 * --eval-every points ("W0 I eval step=T test_accuracy=A test_loss=L
 * elapsed=Xs"). */
static void s_parse_epochs(const char *log, train_run_t *r)
{
    static const char key[] = " W0 I ";
    r->nep = 0;
    for (const char *p = strstr(log, key); p && r->nep < TRAIN_MAX_EPOCHS;
         p = strstr(p + 1, key)) {
        const char *q = p + strlen(key);
        int e;
        double acc, loss, t, step;
        long long st;
        int n = sscanf(q, "epoch=%d test_accuracy=%lf test_loss=%lf elapsed=%lfs step=%lld", &e,
                       &acc, &loss, &t, &st);
        if (n >= 4) {
            step = n == 5 ? (double)st : NAN;
        } else if (sscanf(q, "eval step=%lld test_accuracy=%lf test_loss=%lf elapsed=%lfs", &st,
                          &acc, &loss, &t) == 4) {
            step = (double)st;
        } else {
            continue;
        }
        r->ep_t[r->nep] = t;
        r->ep_acc[r->nep] = acc;
        r->ep_step[r->nep] = step;
        r->nep++;
    }
}

/* Fills r from the summary JSON and the log. Returns 0 or PS_ENOENT. */
static int s_read_results(const char *json_path, const char *log_path, double target,
                          int batch, train_run_t *r)
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
    r->tta = r->sta = NAN;
    for (int i = 0; i < r->nep; i++) {
        if (r->ep_acc[i] >= target) {
            r->tta = r->ep_t[i];
            r->sta = r->ep_step[i] * r->workers * batch;
            break;
        }
    }
    return rc ? PS_ENOENT : 0;
}

/* The job's batch: --batch, or the job default. */
static int s_batch(const train_cfg_t *cfg)
{
    ps_job_t job;
    ps_job_defaults(&job);
    return cfg->batch > 0 ? cfg->batch : job.batch;
}

/* Runs one job: through the launcher, or with --net role by role in the
 * network's namespaces (rejoin_at >= 0: W1 is started again then). */
static void s_run(const train_cfg_t *cfg, train_run_t *r, double rejoin_at, int repeat)
{
    char tag[80], json[PATH_MAX], log[PATH_MAX], num[12][48];
    s_tag(r, tag, sizeof tag);
    if (repeat > 0) {
        snprintf(tag + strlen(tag), sizeof tag - strlen(tag), "_%d", repeat);
    }
    snprintf(json, sizeof json, "%s/runs/%s.json", cfg->out, tag);
    snprintf(log, sizeof log, "%s/runs/%s.log", cfg->out, tag);
    remove(json);
    remove(log);
    char *argv[64 + TRAIN_MAX_JOB_FLAGS];
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
    if (!cfg->net) { /* with --net the bench keeps the time itself */
        argv[a++] = "--timeout";
        argv[a++] = num[4];
    }
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
    if (cfg->eval_every > 0) {
        snprintf(num[8], sizeof num[8], "%d", cfg->eval_every);
        argv[a++] = "--eval-every";
        argv[a++] = num[8];
    }
    if (r->scen == SCEN_STRAGGLER && cfg->straggler && cfg->straggler_rank < r->workers) {
        argv[a++] = "--straggler";
        argv[a++] = (char *)cfg->straggler;
    }
    if (r->scen == SCEN_KILL) {
        argv[a++] = "--min-workers";
        argv[a++] = "1";
    }
    if (cfg->net) {
        /* progress lines often enough to place the kill; one job id for all */
        snprintf(num[9], sizeof num[9], "bench-%d-%s", (int)getpid(), tag);
        for (char *p = num[9]; *p; p++) {
            *p = *p == '.' ? '-' : *p;
        }
        argv[a++] = "--progress";
        argv[a++] = "0.25";
        argv[a++] = "--job-id";
        argv[a++] = num[9];
    }
    for (int i = 0; cfg->job_flags[i]; i++) {
        argv[a++] = cfg->job_flags[i];
    }
    argv[a] = NULL;
    r->killed_at = -1;
    if (cfg->net) {
        ps_netsim_job_t job = {.launch = cfg->launch,
                                  .args = argv + 1,
                                  .servers = s_servers_for(cfg, r->label),
                                  .workers = r->workers,
                                  .log_path = log,
                                  .timeout = cfg->timeout,
                                  .max_steps = cfg->max_steps,
                                  .kill_at = r->scen == SCEN_KILL ? TRAIN_KILL_AT : -1,
                                  .rejoin_at = rejoin_at};
        ps_netsim_result_t res;
        int rc = ps_netsim_run(cfg->net, &job, &res);
        r->status = rc ? rc : res.status;
        r->killed_at = res.killed_at;
    } else {
        r->status = ps_bench_run(argv, log);
    }
    if (r->status == 0 &&
        s_read_results(json, log, cfg->target, s_batch(cfg), r) != 0) {
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
    int panels = cfg->nworkers * cfg->nscen;
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
    for (int p = 0; p < panels; p++) {
        const int w = p % cfg->nworkers, sc = cfg->scen[p / cfg->nworkers];
        char what[96] = "";
        if (sc == SCEN_STRAGGLER) {
            snprintf(what, sizeof what, ", straggler %s", cfg->straggler);
        } else if (sc == SCEN_KILL) {
            snprintf(what, sizeof what, ", W1 killed at 1/3");
        }
        ps_bench_str_addf(&gp,
                          "set title '%ld worker%s%s'\nplot %.4f w l lc rgb 'gray50' dt 2 "
                          "t 'target %.2f'",
                          cfg->workers[w], cfg->workers[w] == 1 ? "" : "s", what, cfg->target,
                          cfg->target);
        for (int m = 0; m < cfg->nmodes; m++) {
            for (int i = 0; i < nruns; i++) {
                if (runs[i].label == cfg->modes[m] && runs[i].workers == cfg->workers[w] &&
                    runs[i].scen == sc && runs[i].status == 0 && runs[i].nep > 0) {
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
            if (runs[i].label == cfg->modes[m] && runs[i].status == 0 &&
                runs[i].scen == cfg->scen[0]) {
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
    int cap = cfg->nscen * cfg->nmodes * cfg->nworkers, nruns = 0, failed = 0;
    train_run_t *runs = calloc((size_t)cap, sizeof *runs);
    if (!runs) {
        return 1;
    }
    /* Scenario by scenario, and within one the modes alternate per worker
     * count, so the load others put on the machine falls on every mode. */
    for (int sc = 0; sc < cfg->nscen; sc++) {
        for (int w = 0; w < cfg->nworkers; w++) {
            for (int m = 0; m < cfg->nmodes; m++) {
                train_run_t *r = &runs[nruns];
                r->label = cfg->modes[m];
                r->workers = (int)cfg->workers[w];
                r->scen = cfg->scen[sc];
                s_mode_for(cfg->modes[m], r->workers, r->mode, sizeof r->mode);
                /* a lost worker cannot be left out of a ring; a kill needs 2 */
                if (r->scen == SCEN_KILL && (!strcmp(r->mode, "allreduce") || r->workers < 2)) {
                    r->mode[0] = '\0';
                }
                if (r->mode[0]) {
                    nruns++;
                }
            }
        }
    }
    ps_bench_table_t *t = NULL, *te = NULL;
    char title[256], headers[512];
    snprintf(title, sizeof title,
             "### Training: %s, every mode x workers (same seed, data order "
             "and flags)%s%s",
             cfg->model, cfg->net ? ", simulated network: " : "",
             cfg->net ? ps_netsim_note(cfg->net) : "");
    snprintf(headers, sizeof headers,
             "mode,workers,scenario,status,samples/s,speed-up vs sync 1 worker,s to %.2f,"
             "samples to %.2f,final acc,wall s,payload bytes/step,staleness mean,"
             "staleness p99,staleness max,dropped pushes,load at start",
             cfg->target, cfg->target);
    if (ps_bench_table_new(cfg->out, "train", title,
                           "mode,workers,scenario,status,samples_per_sec,speedup,"
                           "time_to_target_s,samples_to_target,final_accuracy,wall_seconds,"
                           "bytes_per_step,staleness_mean,staleness_p99,staleness_max,"
                           "pushes_dropped,load_1min",
                           headers, &t) != 0 ||
        ps_bench_table_new(cfg->out, "train_epochs",
                           "### Test accuracy at each evaluation (epoch ends and --eval-every)",
                           "mode,workers,scenario,eval,elapsed_s,step,test_accuracy", NULL,
                           &te) != 0) {
        ps_bench_table_destroy(&t, 0);
        free(runs);
        return 1;
    }
    double base = NAN; /* sync, 1 worker */
    for (int i = 0; i < nruns; i++) {
        train_run_t *r = &runs[i];
        const char *scen = s_scenario_names[r->scen];
        if (ps_netsim_stop) {
            break;
        }
        fprintf(stderr, S_PROG ": [%d/%d] --mode %s --workers %d (%s) ...\n", i + 1, nruns,
                r->mode, r->workers, scen);
        double t0 = ps_now();
        r->load = ps_bench_loadavg();
        s_run(cfg, r, -1, 0);
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
            ps_bench_table_rowf(t, "%s,%d,%s,%s,,,,,,,,,,,,%.1f", r->mode, r->workers, scen,
                                status, r->load);
            continue;
        }
        if (!strcmp(r->mode, "sync") && r->workers == 1 && r->scen == SCEN_PLAIN) {
            base = r->sps;
        }
        char tta[48] = "not reached";
        if (!isnan(r->tta)) {
            snprintf(tta, sizeof tta, "%.1f s", r->tta);
        }
        fprintf(stderr,
                S_PROG ":   %.0f samples/s, accuracy %.4f, time to %.2f: %s (job %.1f s)\n",
                r->sps, r->acc, cfg->target, tta, ps_now() - t0);
        ps_bench_table_rowf(
            t, "%s,%d,%s,%s,%.0f,%s,%s,%s,%.4f,%.2f,%.0f,%.3f,%.0f,%.0f,%.0f,%.1f", r->mode,
            r->workers, scen, status, r->sps,
            s_cell(c[0], 32, 2, isnan(base) ? NAN : r->sps / base), s_cell(c[1], 32, 1, r->tta),
            s_cell(c[2], 32, 0, r->sta), r->acc, r->wall, r->bytes_per_step, r->st_mean,
            r->st_p99, r->st_max, r->dropped, r->load);
        for (int e = 0; e < r->nep; e++) {
            ps_bench_table_rowf(te, "%s,%d,%s,%d,%.2f,%s,%.4f", r->mode, r->workers, scen, e + 1,
                                r->ep_t[e], s_cell(c[3], 32, 0, r->ep_step[e]), r->ep_acc[e]);
        }
    }
    char strag[96] = "none";
    if (cfg->straggler) {
        snprintf(strag, sizeof strag, "%s (scenario straggler, runs with more workers than its rank)",
                 cfg->straggler);
    }
    char extra[512] = "";
    if (cfg->threads > 0) {
        snprintf(extra, sizeof extra, " --threads %d", cfg->threads);
    }
    if (cfg->batch > 0) {
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --batch %d",
                 cfg->batch);
    }
    if (cfg->eval_every > 0) {
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --eval-every %d",
                 cfg->eval_every);
    }
    if (cfg->job_flags_text) {
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " %s",
                 cfg->job_flags_text);
    }
    ps_bench_table_note(
        t,
        "Each row: `shardps-launch --servers %d --workers N --model %s --mode M "
        "--epochs %d --seed %d%s` (allreduce: `--servers 0`); max-steps %d; "
        "straggler %s. Samples/s and bytes from the scheduler's summary; "
        "payload bytes/step = bytes pushed + pulled per worker step; time to "
        "%.2f = worker 0's training time at the first evaluation reaching it "
        "(n/a: not reached); speed-up against the sync 1-worker row of this "
        "run. Samples to %.2f = worker 0's step at that evaluation x workers x batch "
        "(exact in sync and allreduce; in async and ssp the workers' steps differ; after a "
        "kill it counts the lost worker's batches too). Scenario kill: worker 1 is killed "
        "(SIGKILL) a third into the job, with `--min-workers 1` (not for allreduce). "
        "Logs and summaries: runs/ beside this file.",
        cfg->servers, cfg->model, cfg->epochs, cfg->seed, extra, cfg->max_steps, strag,
        cfg->target, cfg->target);
    if (cfg->net) {
        ps_bench_table_note(t,
                            "Network: every role (scheduler, each server, each worker) in its "
                            "own network namespace with its own veth link to a hub that routes "
                            "between the links; %s. "
                            "The roles share this machine's cores: the network is simulated, "
                            "the compute is not.",
                            ps_netsim_note(cfg->net));
    }
    char machine[256];
    ps_bench_machine(machine, sizeof machine, cfg->load_before);
    ps_bench_table_note(t, "Machine: %s; `uptime` at the start: %s.", machine, cfg->uptime);
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

/* Seconds since midnight of a log line's "HH:MM:SS.mmm" stamp, or -1. */
static double s_stamp(const char *line)
{
    int h, m;
    double sec;
    return sscanf(line, "%2d:%2d:%lf", &h, &m, &sec) == 3 ? h * 3600 + m * 60 + sec : -1;
}

/*
 * The job's steps per second in the three phases of a join run, from worker
 * 0's progress lines ("HH:MM:SS.mmm W0 I epoch=E/N step=S/SPE ..."): before
 * the loss of W1, W0 alone (after the step the loss took effect at) and
 * after W1 joined (after its join step), each the slope between the first
 * and the last line of the phase. lost and joined: the steps of the
 * scheduler's membership lines. Returns 0, or PS_ENOENT when a phase has
 * fewer than two lines or a membership line is missing.
 */
static int s_join_phases(const char *log, double rate[3], long long *lost, long long *joined)
{
    const char *p = strstr(log, "membership: lost W1"), *q = strstr(log, "membership: W1 (pid");
    if (!p || !q || !(p = strstr(p, " at step ")) || !(q = strstr(q, " joins at step ")) ||
        sscanf(p, " at step %lld", lost) != 1 || sscanf(q, " joins at step %lld", joined) != 1) {
        return PS_ENOENT;
    }
    double t_first[3] = {0}, t_last[3] = {0}, s_first[3] = {0}, s_last[3] = {0}, day = 0,
           prev = -1;
    int n[3] = {0};
    static const char key[] = " W0 I epoch=";
    for (const char *l = strstr(log, key); l; l = strstr(l + 1, key)) {
        const char *bol = l;
        while (bol > log && bol[-1] != '\n') {
            bol--;
        }
        int e, ne;
        long long st, spe;
        double t = s_stamp(bol);
        if (t < 0 || sscanf(l + strlen(key), "%d/%d step=%lld/%lld", &e, &ne, &st, &spe) != 4) {
            continue;
        }
        day += prev >= 0 && t + day < prev ? 86400 : 0; /* past midnight */
        t += day;
        prev = t;
        long long g = (long long)(e - 1) * spe + st;
        int ph = g < *lost ? 0 : g <= *joined ? (g > *lost ? 1 : -1) : 2;
        if (ph < 0) {
            continue;
        }
        if (n[ph]++ == 0) {
            t_first[ph] = t;
            s_first[ph] = (double)g;
        }
        t_last[ph] = t;
        s_last[ph] = (double)g;
    }
    for (int i = 0; i < 3; i++) {
        if (n[i] < 2 || !(t_last[i] > t_first[i])) {
            return PS_ENOENT;
        }
        rate[i] = (s_last[i] - s_first[i]) / (t_last[i] - t_first[i]);
    }
    return 0;
}

/*
 * The join demonstration: a sync job of 2 workers with --min-workers 1;
 * worker 1 killed a third into it and started again (it rejoins with its
 * rank) at two thirds, --repeat times. The job's steps/s, worker-steps/s and
 * samples/s in the three phases, per run and their medians.
 */
static int s_join(const train_cfg_t *cfg, int repeat)
{
    ps_bench_table_t *t = NULL;
    char title[256];
    snprintf(title, sizeof title,
             "### A worker leaves and joins again: sync %s, 2 workers, --min-workers 1, "
             "simulated network: %s",
             cfg->model, ps_netsim_note(cfg->net));
    if (ps_bench_table_new(
            cfg->out, "train_join", title,
            "run,status,lost_at_step,joined_at_step,steps_per_s_2w,steps_per_s_w0_alone,"
            "steps_per_s_rejoined,worker_steps_per_s_2w,worker_steps_per_s_w0_alone,"
            "worker_steps_per_s_rejoined,samples_per_s_2w,samples_per_s_w0_alone,"
            "samples_per_s_rejoined,final_accuracy",
            "run,status,W1 lost at step,W1 joined at step,job steps/s: 2 workers,W0 alone,"
            "W1 back,worker-steps/s: 2 workers,W0 alone,W1 back,samples/s: 2 workers,W0 alone,"
            "W1 back,final acc",
            &t) != 0) {
        return 1;
    }
    const int b = s_batch(cfg), live[3] = {2, 1, 2};
    double med[3][64];
    int nmed = 0, failed = 0;
    for (int k = 1; k <= repeat && !ps_netsim_stop; k++) {
        train_run_t *r = calloc(1, sizeof *r);
        if (!r) {
            failed = 1;
            break;
        }
        r->label = "sync";
        snprintf(r->mode, sizeof r->mode, "sync");
        r->workers = 2;
        r->scen = SCEN_KILL;
        fprintf(stderr, S_PROG ": join run %d/%d ...\n", k, repeat);
        s_run(cfg, r, TRAIN_REJOIN_AT, k);
        char log_path[PATH_MAX], *log = NULL, tag[80];
        s_tag(r, tag, sizeof tag);
        snprintf(log_path, sizeof log_path, "%s/runs/%s_%d.log", cfg->out, tag, k);
        double rate[3];
        long long lost = 0, joined = 0;
        int ok = r->status == 0 && ps_bench_read_file(log_path, &log) == 0 &&
                 s_join_phases(log, rate, &lost, &joined) == 0;
        free(log);
        if (!ok) {
            failed = 1;
            ps_bench_table_rowf(t, "%d,%s,,,,,,,,,,,,", k,
                                r->status ? "failed" : "no join seen in the log");
            fprintf(stderr, S_PROG ":   failed (status %d; log: %s)\n", r->status, log_path);
            free(r);
            continue;
        }
        if (nmed < 64) {
            for (int i = 0; i < 3; i++) {
                med[i][nmed] = rate[i];
            }
            nmed++;
        }
        fprintf(stderr,
                S_PROG ":   job steps/s %.1f (2 workers), %.1f (W0 alone), %.1f (W1 back); "
                       "samples/s %.0f, %.0f, %.0f\n",
                rate[0], rate[1], rate[2], rate[0] * 2 * b, rate[1] * b, rate[2] * 2 * b);
        ps_bench_table_rowf(t, "%d,ok,%lld,%lld,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.0f,%.0f,%.0f,%.4f",
                            k, lost, joined, rate[0], rate[1], rate[2], rate[0] * live[0],
                            rate[1] * live[1], rate[2] * live[2], rate[0] * live[0] * b,
                            rate[1] * live[1] * b, rate[2] * live[2] * b, r->acc);
        free(r);
    }
    if (nmed > 0) {
        double m[3];
        for (int i = 0; i < 3; i++) {
            m[i] = ps_bench_median(med[i], nmed);
        }
        ps_bench_table_rowf(t, "median of %d,,,,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.0f,%.0f,%.0f,",
                            nmed, m[0], m[1], m[2], m[0] * live[0], m[1] * live[1],
                            m[2] * live[2], m[0] * live[0] * b, m[1] * live[1] * b,
                            m[2] * live[2] * b);
    }
    ps_bench_table_note(
        t,
        "Each run: `shardps-launch --node` per role in its namespace, `--servers %d --workers 2 "
        "--model %s --mode sync --min-workers 1 --epochs %d --seed %d`; W1 is killed (SIGKILL) a "
        "third into the job and started again, with its rank, at two thirds once the scheduler "
        "has logged its loss; it joins at a step boundary. Job steps/s: the slope of worker 0's "
        "progress lines (every 0.25 s) within each phase (W0 alone: after the step the loss took "
        "effect at, so without the detection; W1 back: after its join step). A sync step is one "
        "batch of %d from every live worker: worker-steps/s = job steps/s x live workers (2, 1, "
        "2), samples/s = worker-steps/s x %d. The restarted W1 loads the data set while W0 trains "
        "alone, on the same cores.",
        cfg->servers, cfg->model, cfg->epochs, cfg->seed, b, b);
    char machine[256];
    ps_bench_machine(machine, sizeof machine, cfg->load_before);
    ps_bench_table_note(t, "Machine: %s; `uptime` at the start: %s.", machine, cfg->uptime);
    ps_bench_table_destroy(&t, 1);
    return failed;
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
        if (!strcmp(tok[i], "allreduce") && !s_have_allreduce()) {
            fprintf(stderr,
                    S_PROG ": --mode allreduce is not in this build; skipping it\n");
        } else if (strcmp(tok[i], TRAIN_BACKUP_AUTO) && ps_job_parse_mode(tok[i], &job) != 0) {
            return PS_EINVAL;
        } else {
            memcpy(cfg->modes[cfg->nmodes++], tok[i], sizeof tok[i]);
        }
    }
    return cfg->nmodes > 0 ? 0 : PS_EINVAL;
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
            if (strlen(s_scenario_names[i]) == n && !strncmp(p, s_scenario_names[i], n)) {
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

/* `uptime`'s load line ("up 5:18, 0 users, load average: 0.09, 0.81, 1.93"),
 * from /proc: what else ran on the machine. */
static void s_uptime(char *buf, size_t cap)
{
    char *text = NULL;
    double up = 0, l1 = 0, l5 = 0, l15 = 0;
    if (ps_bench_read_file("/proc/uptime", &text) == 0) {
        sscanf(text, "%lf", &up);
    }
    free(text);
    text = NULL;
    if (ps_bench_read_file("/proc/loadavg", &text) == 0) {
        sscanf(text, "%lf %lf %lf", &l1, &l5, &l15);
    }
    free(text);
    snprintf(buf, cap, "up %d:%02d, load average: %.2f, %.2f, %.2f", (int)(up / 3600),
             (int)(up / 60) % 60, l1, l5, l15);
}

int ps_bench_train_main(int argc, char **argv)
{
    train_cfg_t cfg = {.out = "bench-out",
                       .model = "mlp",
                       .servers = 2,
                       .seed = 1,
                       .target = 0, /* by model: mlp 0.85, cnn 0.88 */
                       .timeout = 1800,
                       .straggler_rank = -1};
    int quick = 0, join = 0, repeat = 3;
    const char *scenarios = NULL;
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
         "test accuracy the time is measured to (0 = mlp 0.85, cnn 0.88)"},
        {"timeout", PS_FLAG_DOUBLE, &cfg.timeout, "SECONDS", "per job"},
        {"net", PS_FLAG_STR, &cfg.net_spec, "RATE[,DELAY]",
         "simulated cluster: each role in its own network namespace, its link shaped to RATE "
         "each way (tc tbf; 100mbit, 1gbit, 10gbit) and DELAY one way between roles (0.2ms, "
         "20ms: our delay line, a TUN device in the hub); needs root"},
        {"scenarios", PS_FLAG_STR, &scenarios, "LIST",
         "plain, straggler (--straggler, default 1:3), kill (worker 1 killed a third into the "
         "job, --min-workers 1; needs --net); default plain, or straggler with --straggler"},
        {"eval-every", PS_FLAG_INT, &cfg.eval_every, "STEPS",
         "worker 0 also evaluates every STEPS steps (finer time to accuracy; 0 = epoch ends)"},
        {"job-flags", PS_FLAG_STR, &cfg.job_flags_text, "FLAGS",
         "more flags for every job, space-separated (e.g. '--wire bf16')"},
        {"join", PS_FLAG_BOOL, &join, NULL,
         "instead of the sweep: sync, 2 workers, worker 1 killed at 1/3 and back at 2/3 "
         "(needs --net); steps/s in each phase"},
        {"repeat", PS_FLAG_INT, &repeat, "N", "--join runs"},
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
    if (cfg.target == 0) {
        cfg.target = strcmp(cfg.model, "cnn") ? 0.85 : 0.88;
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
    if (!cfg.straggler && scenarios && strstr(scenarios, "straggler")) {
        cfg.straggler = "1:3";
    }
    if (cfg.straggler) {
        if (ps_job_parse_straggler(cfg.straggler, &job) != 0) {
            fprintf(stderr, S_PROG ": error: --straggler %s: expected RANK:FACTOR\n",
                    cfg.straggler);
            return 2;
        }
        cfg.straggler_rank = job.straggler_rank;
    }
    if (cfg.epochs > TRAIN_MAX_JOB_EPOCHS || cfg.max_steps < 0 || cfg.servers < 1 ||
        cfg.threads < 0 || cfg.batch < 0 || !(cfg.target > 0 && cfg.target <= 1) ||
        !(cfg.timeout > 0) || (strcmp(cfg.model, "mlp") && strcmp(cfg.model, "cnn"))) {
        fprintf(stderr,
                S_PROG ": error: expected --epochs 1..%d, --max-steps >= 0, --servers "
                       ">= 1, --threads/--batch >= 0, 0 < --target <= 1, --timeout > 0, "
                       "--model mlp|cnn\n",
                TRAIN_MAX_JOB_EPOCHS);
        return 2;
    }
    if (s_parse_scenarios(scenarios, &cfg) != 0) {
        fprintf(stderr, S_PROG ": error: --scenarios %s: expected plain, straggler, kill, "
                        "comma-separated\n", scenarios);
        return 2;
    }
    char *flags_copy = cfg.job_flags_text ? strdup(cfg.job_flags_text) : NULL;
    int nflags = 0;
    for (char *p = flags_copy ? strtok(flags_copy, " ") : NULL; p; p = strtok(NULL, " ")) {
        if (nflags == TRAIN_MAX_JOB_FLAGS) {
            fprintf(stderr, S_PROG ": error: --job-flags: at most %d words\n",
                    TRAIN_MAX_JOB_FLAGS);
            free(flags_copy);
            return 2;
        }
        cfg.job_flags[nflags++] = p;
    }
    cfg.job_flags[nflags] = NULL;
    char err[256] = "";
    int needs_net = join || s_has_scenario(&cfg, SCEN_KILL);
    if (cfg.net_spec && ps_netsim_parse(cfg.net_spec, err, sizeof err) != 0) {
        /* err says why */
    } else if (needs_net && !cfg.net_spec) {
        snprintf(err, sizeof err, "--join and --scenarios kill need --net");
    } else if (cfg.eval_every < 0 || repeat < 1 || repeat > 64) {
        snprintf(err, sizeof err, "expected --eval-every >= 0, --repeat 1..64");
    }
    if (err[0]) {
        fprintf(stderr, S_PROG ": error: %s\n", err);
        free(flags_copy);
        return 2;
    }
    char path[PATH_MAX];
    int setup = ps_bench_launch_setup(S_PROG, &launch, path, sizeof path, cfg.out);
    if (setup != 0) {
        free(flags_copy);
        return setup;
    }
    cfg.launch = launch;
    cfg.load_before = ps_bench_loadavg();
    s_uptime(cfg.uptime, sizeof cfg.uptime);
    int rc2 = 0;
    if (cfg.net_spec) {
        long most = 1;
        for (int i = 0; i < cfg.nworkers; i++) {
            most = cfg.workers[i] > most ? cfg.workers[i] : most;
        }
        char log[PATH_MAX];
        snprintf(log, sizeof log, "%s/runs/net.log", cfg.out);
        remove(log);
        ps_netsim_catch_signals();
        int rc = ps_netsim_new(cfg.net_spec, cfg.servers, join ? 2 : (int)most, log,
                                     &cfg.net, err, sizeof err);
        if (rc == PS_ENOTSUP) {
            printf("shardps-bench train --net %s: skipped: %s\n", cfg.net_spec, err);
            fprintf(stderr, S_PROG ": --net skipped: %s\n", err);
            free(flags_copy);
            return 0;
        } else if (rc != 0) {
            fprintf(stderr, S_PROG ": error: %s\n", err);
            free(flags_copy);
            return 1;
        }
        fprintf(stderr, S_PROG ": simulated network %s: %s\n", ps_netsim_prefix(cfg.net),
                ps_netsim_note(cfg.net));
    }
    rc2 = join ? s_join(&cfg, repeat) : s_sweep(&cfg);
    if (cfg.net) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%s", ps_netsim_prefix(cfg.net));
        int left = ps_netsim_destroy(&cfg.net);
        if (left) {
            fprintf(stderr, S_PROG ": %d network namespaces %s* could not be removed\n", left,
                    prefix);
            rc2 = 1;
        } else {
            fprintf(stderr, S_PROG ": simulated network %s removed\n", prefix);
        }
    }
    free(flags_copy);
    if (ps_netsim_stop) {
        fprintf(stderr, S_PROG ": stopped by signal %d\n", (int)ps_netsim_stop);
        return 130;
    }
    return rc2 ? 1 : 0;
}
