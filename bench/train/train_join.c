/*
 * bench/train/train_join.c - `shardps-bench train --join`: a worker leaves
 * and joins again. A sync job of 2 workers with --min-workers 1 on the
 * simulated cluster; worker 1 killed a third into it and started again (it
 * rejoins with its rank) at two thirds, --repeat times. The job's steps/s,
 * worker-steps/s and samples/s in the three phases (2 workers, W0 alone, W1
 * back), per run and their medians, on the results page train_join.md.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/train/train.h"
#include "common/error.h"
#include "common/log.h"

/* The time of a log line (up to its newline) in seconds, or -1. */
static double s_stamp(const char *line)
{
    return ps_log_line_time(line, strcspn(line, "\n"));
}

/*
 * The job's steps per second in the three phases of a join run, from worker
 * 0's progress lines ("<time> W0 I epoch=E/N step=S/SPE ..."): before
 * the loss of W1, W0 alone (after the step the loss took effect at) and
 * after W1 joined (after its join step), each the slope between the first
 * and the last line of the phase. lost and joined: the steps of the
 * scheduler's membership lines. Returns 0, or PS_ENOENT when a phase has
 * fewer than two lines or a membership line is missing.
 */
static int s_join_phases(const char *log, double rate[3], long long *lost,
                         long long *joined)
{
    const char *p = strstr(log, "membership: lost W1"),
               *q = strstr(log, "membership: W1 (pid");
    if (!p || !q || !(p = strstr(p, " at step ")) || !(q = strstr(q, " joins at step ")) ||
        sscanf(p, " at step %lld", lost) != 1 ||
        sscanf(q, " joins at step %lld", joined) != 1) {
        return PS_ENOENT;
    }
    double t_first[3] = {0}, t_last[3] = {0}, s_first[3] = {0}, s_last[3] = {0};
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
        if (t < 0 ||
            sscanf(l + strlen(key), "%d/%d step=%lld/%lld", &e, &ne, &st, &spe) != 4) {
            continue;
        }
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

/* Live workers in each phase: both, W0 alone, W1 back. */
static const int s_live[3] = {2, 1, 2};

/* Join run k of repeat: the job, its phases' job steps/s into rate[] and its
 * row. Returns 0, or 1 when it failed (its row and stderr say so). */
static int s_join_run(const train_cfg_t *cfg, int k, int repeat, ps_bench_table_t *t,
                      double rate[3])
{
    const int b = ps_bench_train_batch(cfg);
    train_run_t *r = calloc(1, sizeof *r);
    if (!r) {
        return 1;
    }
    r->label = "sync";
    snprintf(r->mode, sizeof r->mode, "sync");
    r->workers = 2;
    r->scen = SCEN_KILL;
    fprintf(stderr, TRAIN_PROG ": join run %d/%d ...\n", k, repeat);
    ps_bench_train_job(cfg, r, TRAIN_REJOIN_AT, k);
    char log_path[PATH_MAX], *log = NULL, tag[80];
    ps_bench_train_tag(r, tag, sizeof tag);
    snprintf(log_path, sizeof log_path, "%s/runs/%s_%d.log", cfg->out, tag, k);
    long long lost = 0, joined = 0;
    int ok = r->status == 0 && ps_bench_read_file(log_path, &log) == 0 &&
             s_join_phases(log, rate, &lost, &joined) == 0;
    free(log);
    for (int i = 0; ok && i < 3; i++) {
        rate[i] *= cfg->dilate; /* the log's stamps are real time: undilated units */
    }
    if (!ok) {
        ps_bench_table_rowf(t, "%d,%s,,,,,,,,,,,,", k,
                            r->status ? "failed" : "no join seen in the log");
        fprintf(stderr, TRAIN_PROG ":   failed (status %d; log: %s)\n", r->status,
                log_path);
        free(r);
        return 1;
    }
    fprintf(stderr,
            TRAIN_PROG ":   job steps/s %.1f (2 workers), %.1f (W0 alone), %.1f (W1 back); "
                       "samples/s %.0f, %.0f, %.0f\n",
            rate[0], rate[1], rate[2], rate[0] * 2 * b, rate[1] * b, rate[2] * 2 * b);
    ps_bench_table_rowf(t,
                        "%d,ok,%lld,%lld,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.0f,%.0f,%.0f,%.4f",
                        k, lost, joined, rate[0], rate[1], rate[2], rate[0] * s_live[0],
                        rate[1] * s_live[1], rate[2] * s_live[2], rate[0] * s_live[0] * b,
                        rate[1] * s_live[1] * b, rate[2] * s_live[2] * b, r->acc);
    free(r);
    return 0;
}

int ps_bench_train_join(const train_cfg_t *cfg, int repeat)
{
    ps_bench_table_t *t = NULL;
    char title[256];
    snprintf(title, sizeof title,
             "### A worker leaves and joins again: sync %s, 2 workers, --min-workers 1, "
             "simulated network: %s",
             cfg->model, ps_netsim_note(cfg->net));
    if (ps_bench_table_new(
            cfg->page, "train_join", title,
            "run,status,lost_at_step,joined_at_step,steps_per_s_2w,steps_per_s_w0_alone,"
            "steps_per_s_rejoined,worker_steps_per_s_2w,worker_steps_per_s_w0_alone,"
            "worker_steps_per_s_rejoined,samples_per_s_2w,samples_per_s_w0_alone,"
            "samples_per_s_rejoined,final_accuracy",
            "run,status,W1 lost at step,W1 joined at step,job steps/s: 2 workers,W0 alone,"
            "W1 back,worker-steps/s: 2 workers,W0 alone,W1 back,samples/s: 2 workers,W0 "
            "alone,"
            "W1 back,final acc",
            &t) != 0) {
        return 1;
    }
    const int b = ps_bench_train_batch(cfg);
    double med[3][64];
    int nmed = 0, failed = 0;
    for (int k = 1; k <= repeat && !ps_netsim_stop; k++) {
        double rate[3];
        if (s_join_run(cfg, k, repeat, t, rate) != 0) {
            failed = 1;
        } else if (nmed < 64) {
            for (int i = 0; i < 3; i++) {
                med[i][nmed] = rate[i];
            }
            nmed++;
        }
    }
    if (nmed > 0) {
        double m[3];
        for (int i = 0; i < 3; i++) {
            m[i] = ps_bench_median(med[i], nmed);
        }
        ps_bench_table_rowf(
            t, "median of %d,,,,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.0f,%.0f,%.0f,", nmed, m[0],
            m[1], m[2], m[0] * s_live[0], m[1] * s_live[1], m[2] * s_live[2],
            m[0] * s_live[0] * b, m[1] * s_live[1] * b, m[2] * s_live[2] * b);
    }
    ps_bench_table_note(t,
                        "Each run: `shardps-launch --node` per role in its namespace, "
                        "`--servers %d --workers 2 "
                        "--model %s --mode sync --min-workers 1 --epochs %d --seed %d`; W1 "
                        "is killed (SIGKILL) a "
                        "third into the job and started again, with its rank, at two "
                        "thirds once the scheduler "
                        "has logged its loss; it joins at a step boundary. Job steps/s: "
                        "the slope of worker 0's "
                        "progress lines (every 0.25 s) within each phase (W0 alone: after "
                        "the step the loss took "
                        "effect at, so without the detection; W1 back: after its join "
                        "step). A sync step is one "
                        "batch of %d from every live worker: worker-steps/s = job steps/s "
                        "x live workers (2, 1, "
                        "2), samples/s = worker-steps/s x %d. The restarted W1 loads the "
                        "data set while W0 trains "
                        "alone, on the same cores.",
                        cfg->servers, cfg->model, cfg->epochs, cfg->seed, b, b);
    ps_bench_table_destroy(&t, 1);
    return failed;
}
