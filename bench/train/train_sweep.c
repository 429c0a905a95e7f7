/*
 * bench/train/train_sweep.c - the sweep of `shardps-bench train`: every mode
 * x worker count x scenario, one job each (train_job.c), in an order that
 * spreads the machine's other load over the modes; the runs' table, their
 * evaluations' table and the plots, on the results page.
 *
 * It does not judge: a failed job is a row with its exit status, and the
 * sweep goes on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/train/train.h"
#include "common/clock.h"
#include "common/error.h"

void ps_bench_train_mode_for(const char *token, int n, char *buf, size_t cap)
{
    char plain[PS_BENCH_WORD_MAX];
    snprintf(plain, sizeof plain, "%s", token);
    if (ps_bench_train_colocated(plain)) {
        plain[strlen(plain) - strlen(TRAIN_COLOCATED)] = '\0';
    }
    token = plain;
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
    if (ps_bench_train_serverless(token) && n < 2) {
        return;
    }
    snprintf(buf, cap, "%s",
             strcmp(token, TRAIN_MPI) && !ps_bench_train_ring_rows(token) ? token
                                                                          : "allreduce");
}

const char *ps_bench_train_cell(char *buf, size_t cap, int prec, double v)
{
    if (isnan(v)) {
        buf[0] = '\0';
    } else {
        snprintf(buf, cap, "%.*f", prec, v);
    }
    return buf;
}

void ps_bench_train_status(const train_run_t *r, char *buf, size_t cap)
{
    if (r->status == 0) {
        snprintf(buf, cap, "ok");
    } else if (r->status < 0) {
        snprintf(buf, cap, "failed: %s", ps_strerror(r->status));
    } else {
        snprintf(buf, cap, "failed: exit %d", r->status);
    }
}

/* The test metric against training time: one panel per worker count, one
 * y range for all, from just under the lowest value above chance (a
 * diverged run stays below it, off the plot). */
static void s_plot_metric(const train_cfg_t *cfg, const train_run_t *runs, int nruns,
                          const char *metric, const char *png)
{
    ps_bench_str_t gp = {0}, data = {0};
    int panels = cfg->nworkers * cfg->nscen;
    double lo = cfg->target;
    ps_bench_plot_header(&gp, cfg->page, png, 340 * panels, 340);
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
                      "%sset xlabel 'training time (s)'\nset ylabel '%s'\n"
                      "set yrange [%.2f:*]\nset xrange [0:*]\nset key bottom right opaque\n"
                      "set multiplot layout 1,%d\n",
                      ps_bench_str_get(&data), metric, floor(lo * 50) / 50 - 0.01, panels);
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
                          cfg->workers[w], cfg->workers[w] == 1 ? "" : "s", what,
                          cfg->target, cfg->target);
        for (int m = 0; m < cfg->nmodes; m++) {
            for (int i = 0; i < nruns; i++) {
                if (runs[i].label == cfg->modes[m] && runs[i].workers == cfg->workers[w] &&
                    runs[i].scen == sc && runs[i].status == 0 && runs[i].nep > 0) {
                    ps_bench_str_addf(&gp, ", $r%d u 1:2 w lp lc %d pt 7 ps 0.6 t '%s'", i,
                                      m + 1, runs[i].name);
                }
            }
        }
        ps_bench_str_addf(&gp, "\n");
    }
    ps_bench_str_addf(&gp, "unset multiplot\n");
    ps_bench_plot(cfg->page, png, ps_bench_str_get(&gp));
    ps_bench_str_fini(&gp);
    ps_bench_str_fini(&data);
}

/* Samples per second against workers: one line per mode. */
static void s_plot_throughput(const train_cfg_t *cfg, const train_run_t *runs, int nruns,
                              const char *png)
{
    ps_bench_str_t gp = {0}, plot = {0};
    ps_bench_plot_header(&gp, cfg->page, png, 520, 360);
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
        ps_bench_plot(cfg->page, png, ps_bench_str_get(&gp));
    }
    ps_bench_str_fini(&plot);
    ps_bench_str_fini(&gp);
}

void ps_bench_train_plots(const train_cfg_t *cfg, const train_run_t *runs, int nruns,
                          const char *metric, const char *metric_png,
                          const char *throughput_png)
{
    s_plot_metric(cfg, runs, nruns, metric, metric_png);
    s_plot_throughput(cfg, runs, nruns, throughput_png);
}

/* Scenario by scenario, and within one the modes alternate per worker
 * count, so the load others put on the machine falls on every mode. */
int ps_bench_train_plan(const train_cfg_t *cfg, train_run_t *runs)
{
    int nruns = 0;
    for (int sc = 0; sc < cfg->nscen; sc++) {
        for (int w = 0; w < cfg->nworkers; w++) {
            for (int m = 0; m < cfg->nmodes; m++) {
                train_run_t *r = &runs[nruns];
                r->label = cfg->modes[m];
                r->workers = (int)cfg->workers[w];
                r->scen = cfg->scen[sc];
                ps_bench_train_mode_for(cfg->modes[m], r->workers, r->mode, sizeof r->mode);
                snprintf(r->name, sizeof r->name, "%s%s",
                         !strcmp(r->label, TRAIN_MPI)         ? TRAIN_MPI
                         : ps_bench_train_ring_rows(r->label) ? r->label
                                                              : r->mode,
                         ps_bench_train_colocated(r->label) ? " colocated" : "");
                /* a lost worker cannot be left out of a ring; a kill needs 2 */
                if (r->scen == SCEN_KILL &&
                    (!strcmp(r->mode, "allreduce") || r->workers < 2)) {
                    r->mode[0] = '\0';
                }
                if (r->mode[0]) {
                    nruns++;
                }
            }
        }
    }
    return nruns;
}

/* The two tables: one row per run, one per evaluation. */
static int s_tables(const train_cfg_t *cfg, ps_bench_table_t **t, ps_bench_table_t **te)
{
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
    if (ps_bench_table_new(cfg->page, "train", title,
                           "mode,workers,scenario,status,samples_per_sec,speedup,"
                           "time_to_target_s,samples_to_target,final_accuracy,wall_seconds,"
                           "bytes_per_step,staleness_mean,staleness_p99,staleness_max,"
                           "pushes_dropped,load_1min",
                           headers, t) != 0 ||
        ps_bench_table_new(
            cfg->page, "train_epochs",
            "### Test accuracy at each evaluation (epoch ends and --eval-every)",
            "mode,workers,scenario,eval,elapsed_s,step,test_accuracy", NULL, te) != 0) {
        ps_bench_table_destroy(t, 0);
        return 1;
    }
    return 0;
}

/* Runs r and writes its rows; base: the sync 1-worker samples/s so far (NAN
 * before), updated when r is that run. Returns 0, or 1 when the job failed. */
static int s_one(const train_cfg_t *cfg, train_run_t *r, double *base, ps_bench_table_t *t,
                 ps_bench_table_t *te)
{
    const char *scen = ps_bench_train_scenarios[r->scen];
    double t0 = ps_now();
    r->load = ps_bench_loadavg();
    ps_bench_train_job(cfg, r, -1, 0);
    char c[4][32], status[32];
    ps_bench_train_status(r, status, sizeof status);
    if (r->status != 0) {
        fprintf(stderr, TRAIN_PROG ":   %s (log: %s/runs/)\n", status, cfg->out);
        ps_bench_table_rowf(t, "%s,%d,%s,%s,,,,,,,,,,,,%.1f", r->name, r->workers, scen,
                            status, r->load);
        return 1;
    }
    if (!strcmp(r->mode, "sync") && r->workers == 1 && r->scen == SCEN_PLAIN) {
        *base = r->sps;
    }
    char tta[48] = "not reached";
    if (!isnan(r->tta)) {
        snprintf(tta, sizeof tta, "%.1f s", r->tta);
    }
    fprintf(stderr,
            TRAIN_PROG ":   %.0f samples/s, accuracy %.4f, time to %.2f: %s (job %.1f s)\n",
            r->sps, r->acc, cfg->target, tta, ps_now() - t0);
    ps_bench_table_rowf(
        t, "%s,%d,%s,%s,%.0f,%s,%s,%s,%.4f,%.2f,%.0f,%.3f,%.0f,%.0f,%.0f,%.1f", r->name,
        r->workers, scen, status, r->sps,
        ps_bench_train_cell(c[0], 32, 2, isnan(*base) ? NAN : r->sps / *base),
        ps_bench_train_cell(c[1], 32, 1, r->tta), ps_bench_train_cell(c[2], 32, 0, r->sta),
        r->acc, r->wall, r->bytes_per_step, r->st_mean, r->st_p99, r->st_max, r->dropped,
        r->load);
    for (int e = 0; e < r->nep; e++) {
        ps_bench_table_rowf(te, "%s,%d,%s,%d,%.2f,%s,%.4f", r->name, r->workers, scen,
                            e + 1, r->ep_t[e],
                            ps_bench_train_cell(c[3], 32, 0, r->ep_step[e]), r->ep_acc[e]);
    }
    return 0;
}

/* What every row ran and how its figures are read, under the table. */
static void s_notes(const train_cfg_t *cfg, ps_bench_table_t *t)
{
    char strag[96] = "none";
    if (cfg->straggler) {
        snprintf(strag, sizeof strag,
                 "%s (scenario straggler, runs with more workers than its rank)",
                 cfg->straggler);
    }
    char extra[512] = "";
    ps_bench_train_extra_flags(cfg, extra, sizeof extra);
    ps_bench_table_note(
        t,
        "Each row: `shardps-launch --servers %d --workers N --model %s --mode M "
        "--epochs %d --seed %d%s` (allreduce: `--servers 0`; colocated rows: `--placement colocated` and as many servers as workers); max-steps %d; "
        "straggler %s. Samples/s and bytes from the scheduler's summary; "
        "payload bytes/step = bytes pushed + pulled per worker step; time to "
        "%.2f = worker 0's training time at the first evaluation reaching it "
        "(n/a: not reached); speed-up against the sync 1-worker row of this "
        "run. Samples to %.2f = worker 0's step at that evaluation x workers x batch "
        "(exact in sync and allreduce; in async and ssp the workers' steps differ; after a "
        "kill it counts the lost worker's batches too). Scenario kill: worker 1 is killed "
        "(SIGKILL) a third into the job, with `--min-workers 1` (not for allreduce). "
        "Logs and summaries: runs/ beside this page.",
        cfg->servers, cfg->model, cfg->epochs, cfg->seed, extra, cfg->max_steps, strag,
        cfg->target, cfg->target);
    if (cfg->net) {
        ps_bench_table_note(
            t,
            "Network: every role (scheduler, each server, each worker) in its "
            "own network namespace with its own veth link to a hub that routes "
            "between the links; %s. "
            "The roles share this machine's cores: the network is simulated, "
            "the compute is not.",
            ps_netsim_note(cfg->net));
    }
    if (cfg->mpirun[0]) {
        ps_bench_table_note(
            t, "mpi: `--mode allreduce --allreduce-backend mpi`: the sum is MPI_Allreduce "
               "(Open MPI, `%s`), the workers the ranks of one mpirun started in the "
               "scheduler's namespace, each rank in its own worker's namespace (an rsh agent "
               "that runs `ip netns exec`), MPI's TCP kept to the links (`--mca btl "
               "tcp,self --mca btl_tcp_if_include eth0`), idle ranks yielding the CPU "
               "(`mpi_yield_when_idle`). One MPI_Allreduce after backward (no overlap); MPI "
               "adds in its own order, so its parameters are not bitwise the ring's. Its "
               "payload bytes/step is the vector handed to MPI each way, not what MPI sent: "
               "the links table measures that. No kill scenario (MPI has no fault tolerance).",
            cfg->mpirun);
    }
    if (!ps_bench_train_have_allreduce()) {
        ps_bench_table_note(
            t, "allreduce: not in this build (`--mode allreduce` is rejected); "
               "rows appear once it is.");
    }
}

int ps_bench_train_sweep(const train_cfg_t *cfg)
{
    int cap = cfg->nscen * cfg->nmodes * cfg->nworkers, failed = 0;
    train_run_t *runs = calloc((size_t)cap, sizeof *runs);
    ps_bench_table_t *t = NULL, *te = NULL, *tl = NULL;
    if (!runs || s_tables(cfg, &t, &te) != 0 ||
        (cfg->net && ps_bench_train_links_new(cfg, &tl) != 0)) {
        ps_bench_table_destroy(&te, 0);
        ps_bench_table_destroy(&t, 0);
        free(runs);
        return 1;
    }
    const int nruns = ps_bench_train_plan(cfg, runs);
    double base = NAN; /* sync, 1 worker */
    for (int i = 0; i < nruns && !ps_netsim_stop; i++) {
        train_run_t *r = &runs[i];
        fprintf(stderr, TRAIN_PROG ": [%d/%d] --mode %s --workers %d (%s) ...\n", i + 1,
                nruns, r->name, r->workers, ps_bench_train_scenarios[r->scen]);
        const int bad = s_one(cfg, r, &base, t, te);
        if (tl && !bad) {
            ps_bench_train_links_row(cfg, tl, r);
        }
        failed |= bad;
    }
    s_notes(cfg, t);
    ps_bench_table_destroy(&te, 0);
    ps_bench_table_destroy(&t, 1);
    if (tl) {
        ps_bench_train_links_notes(tl);
        ps_bench_table_destroy(&tl, 1);
    }
    ps_bench_train_plots(cfg, runs, nruns, "test accuracy", "train_accuracy",
                         "train_throughput");
    free(runs);
    return failed;
}
