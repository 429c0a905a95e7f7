/*
 * bench/train/train_seeds.c - `shardps-bench train --seeds N`: how a mode's
 * final accuracy spreads over seeds, and how far it stands from sync's. Every
 * mode x workers trains with seeds --seed, --seed + 1, ... (nothing else
 * changes); the seeds go round the modes in turn, so the load others put on
 * the machine falls on every mode. One row per mode x workers: runs, how many
 * did not end ok (diverged or failed), the mean, least and most final test
 * accuracy (--model ctr: test AUC) of the others, and the mean's points
 * below sync's mean at the same workers. --model ctr trains on one click log
 * for every seed, generated first (train_ctr_data.c), whose planted model's
 * AUC the page notes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/train/train.h"
#include "common/error.h"

/* One mode x workers over the seeds. */
typedef struct {
    char name[48];
    char mode[32];
    int runs, bad, failed; /* bad: not ok (diverged or failed); failed: did not run */
    double sum, min, max;
} seeds_row_t;

static void s_add(seeds_row_t *row, const train_run_t *r)
{
    row->runs++;
    if (r->status != 0) {
        row->bad++;
        row->failed += r->status < 0;
        return;
    }
    row->sum += r->acc;
    row->min = row->runs - row->bad == 1 || r->acc < row->min ? r->acc : row->min;
    row->max = row->runs - row->bad == 1 || r->acc > row->max ? r->acc : row->max;
}

static double s_mean(const seeds_row_t *row)
{
    const int ok = row->runs - row->bad;
    return ok > 0 ? row->sum / ok : NAN;
}

/* The rows of one worker count: every seed of every mode, in turn. */
static int s_workers(const train_cfg_t *cfg, int workers, int seeds, ps_bench_table_t *t)
{
    seeds_row_t rows[TRAIN_MAX_MODES] = {0};
    for (int m = 0; m < cfg->nmodes; m++) {
        ps_bench_train_mode_for(cfg->modes[m], workers, rows[m].mode, sizeof rows[m].mode);
        snprintf(rows[m].name, sizeof rows[m].name, "%s", cfg->modes[m]);
    }
    for (int k = 0; k < seeds && !ps_netsim_stop; k++) {
        train_cfg_t c = *cfg;
        c.seed = cfg->seed + k;
        for (int m = 0; m < cfg->nmodes && !ps_netsim_stop; m++) {
            if (!rows[m].mode[0]) {
                continue;
            }
            train_run_t r = {.label = cfg->modes[m], .workers = workers, .scen = SCEN_PLAIN};
            snprintf(r.mode, sizeof r.mode, "%s", rows[m].mode);
            snprintf(r.name, sizeof r.name, "%s", rows[m].name);
            ps_bench_train_job(&c, &r, -1, c.seed);
            s_add(&rows[m], &r);
            fprintf(stderr, TRAIN_PROG ": --mode %s --workers %d --seed %d: %s %.4f\n",
                    r.mode, workers, c.seed, r.status ? "not ok" : "ok", r.acc);
        }
    }
    double sync = NAN;
    for (int m = 0; m < cfg->nmodes; m++) {
        sync = !strcmp(rows[m].mode, "sync") ? s_mean(&rows[m]) : sync;
    }
    int failed = 0;
    for (int m = 0; m < cfg->nmodes; m++) {
        const seeds_row_t *row = &rows[m];
        if (!row->runs) {
            continue;
        }
        const double mean = s_mean(row);
        char gap[32] = "";
        if (!isnan(sync) && !isnan(mean)) {
            snprintf(gap, sizeof gap, "%.2f", (sync - mean) * 100);
        }
        ps_bench_table_rowf(t, "%s,%d,%d,%d,%.4f,%.4f,%.4f,%s", row->mode, workers, row->runs,
                            row->bad, mean, row->min, row->max, gap);
        failed |= row->failed > 0;
    }
    return failed;
}

int ps_bench_train_seeds(train_cfg_t *cfg, int seeds)
{
    const int ctr = !strcmp(cfg->model, "ctr");
    const char *what = ctr ? "test AUC" : "test accuracy";
    ctr_data_t *d = ctr ? calloc(1, sizeof *d) : NULL;
    const char *given = cfg->ctr_data;
    if (ctr && (!d || ps_bench_train_ctr_data(cfg, d) != 0)) {
        free(d);
        return 1;
    }
    if (ctr) {
        cfg->ctr_data = d->path;
    }
    char title[256];
    snprintf(title, sizeof title, "### Final %s over seeds %d-%d: %s, every mode x workers",
             what, cfg->seed, cfg->seed + seeds - 1, cfg->model);
    ps_bench_table_t *t = NULL;
    if (ps_bench_table_new(cfg->page, "train_seeds", title,
                           "mode,workers,runs,not_ok,mean_accuracy,min_accuracy,"
                           "max_accuracy,points_below_sync",
                           ctr ? "mode,workers,runs,not ok,mean AUC,min AUC,max AUC,"
                                 "points below sync"
                               : "mode,workers,runs,not ok,mean acc,min acc,max acc,"
                                 "points below sync",
                           &t) != 0) {
        cfg->ctr_data = given;
        free(d);
        return 1;
    }
    int failed = 0;
    for (int w = 0; w < cfg->nworkers && !ps_netsim_stop; w++) {
        failed |= s_workers(cfg, (int)cfg->workers[w], seeds, t);
    }
    char extra[96] = "";
    if (cfg->batch > 0) {
        snprintf(extra, sizeof extra, " --batch %d", cfg->batch);
    }
    if (cfg->max_steps > 0) {
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --max-steps %d",
                 cfg->max_steps);
    }
    ps_bench_table_note(
        t,
        "Each run: `shardps-launch --servers %d --workers N --model %s --mode M --epochs %d "
        "--seed S%s%s%s`, S from %d to %d; nothing else set, so the rest are the job's "
        "defaults. Not ok: the job ended diverged or failed; the figures are the "
        "others' final %s. Points below sync: (sync's mean - this mean) x 100 at the same "
        "workers. Logs and summaries: runs/ beside this page.",
        cfg->servers, cfg->model, cfg->epochs, extra, cfg->job_flags_text ? " " : "",
        cfg->job_flags_text ? cfg->job_flags_text : "", cfg->seed, cfg->seed + seeds - 1,
        what);
    if (ctr) {
        char planted[64] = "unknown";
        if (!isnan(d->planted_auc)) {
            snprintf(planted, sizeof planted, "%.4f", d->planted_auc);
        }
        ps_bench_table_note(t,
                            "Data: `--ctr-data %s` on every run: %.0f samples (the last "
                            "tenth held out), %.0f distinct keys; the planted model's own "
                            "test AUC %s (`shardps-datagen ctr`'s planted_auc).",
                            d->path, d->samples, d->vocab, planted);
    }
    ps_bench_table_destroy(&t, 1);
    cfg->ctr_data = given;
    free(d);
    return failed;
}
