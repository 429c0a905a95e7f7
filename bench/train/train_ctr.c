/*
 * bench/train/train_ctr.c - `shardps-bench train --model ctr`: where the
 * parameter server wins. The click-through model keeps its embedding table
 * on the servers and moves only the rows a batch touches (docs/design/
 * rows.md); the ring moves either the whole table's gradient (allreduce:
 * dense, over a vocabulary of every key in the data) or each worker's
 * (keys, rows) to every other (allreduce:allgather).
 *
 * The click log comes first: generated into OUT/runs/ with shardps-datagen
 * (or --ctr-data), and read once here for what the theory needs: its
 * distinct keys (the table's rows, the dense ring's vocabulary) and the
 * distinct keys of a batch. Then every mode x workers x scenario runs as in
 * the sweep (train_job.c), and each row gives samples/s, the time to the
 * target test AUC, the bytes per worker link per step (the links' counters
 * with --net, the summary's otherwise) beside its design's theory, and
 * whether the machine's cores were the bound. A last table puts the
 * parameter server beside each ring variant per worker count.
 *
 * It does not judge: a failed or refused job is a row with its status, and
 * the sweep goes on. The ring rows run where shardps-launch has
 * --ring-rows; elsewhere they are left out with one line saying why.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/train/train.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/job.h"
#include "common/json.h"
#include "deploy/proc.h"
#include "kernels/kernels.h"
#include "worker/ctr_data.h"
#include "worker/ctr_job.h"
#include "worker/models/model.h"

/* A run whose busiest link was busy this share of its step (--net) was
 * bound by the links, whatever else was busy. */
#define CTR_LINK_BOUND 0.8

/* The designs whose bytes the theory gives. */
enum { CTR_PS, CTR_PS_COLOCATED, CTR_DENSE, CTR_ALLGATHER, CTR_NDESIGNS };


/* What a ctr run measured beyond train_run_t. */
typedef struct {
    double logloss;       /* final test log loss */
    double keys;          /* distinct keys per worker step (rows.keys_per_worker_step);
                             NAN when the summary has none (no servers) */
    double rows;          /* rows the servers hold at the end; NAN none */
    double sent, recv;    /* bytes per step a worker's link sent, received */
    double compute_share; /* the workers' compute seconds over their training seconds */
} ctr_run_t;

/* ---- theory --------------------------------------------------------------- */

/* Bytes per worker link per step, each way, of design for M workers with U
 * distinct keys per worker step: a row is 4d bytes, 4d + 8 with its key. */
static double s_theory(const ctr_data_t *d, int design, double M, double U)
{
    const double row = 4.0 * d->dim + 8, mlp = 4 * d->mlp, ring = 2 * (M - 1) / M;
    const double ps = U * row + mlp;
    switch (design) {
    case CTR_PS:
        return ps;
    case CTR_PS_COLOCATED:
        return ring * ps;
    case CTR_DENSE:
        return ring * (d->vocab * 4.0 * d->dim + mlp);
    default:
        return (M - 1) * U * row + ring * mlp;
    }
}

/* The design of a mode token. */
static int s_design(const char *label)
{
    const char *rows = ps_bench_train_ring_rows(label);
    return rows ? (!strcmp(rows, "dense") ? CTR_DENSE : CTR_ALLGATHER)
           : ps_bench_train_colocated(label) ? CTR_PS_COLOCATED
                                             : CTR_PS;
}

/* ---- one run ------------------------------------------------------------ */

/* Fills c from the run's summary: the AUC's log loss, the rows, the
 * workers' bytes (without --net: every message type a worker sent and
 * received per its steps, the mean of the workers but worker 0, which also
 * evaluates) and their compute share. */
static void s_read_ctr(const train_cfg_t *cfg, const train_run_t *r, ctr_run_t *c)
{
    char tag[80], path[PATH_MAX];
    ps_bench_train_tag(r, tag, sizeof tag);
    snprintf(path, sizeof path, "%s/runs/%s.json", cfg->out, tag);
    c->logloss = c->keys = c->rows = c->sent = c->recv = c->compute_share = NAN;
    json_t *doc = NULL;
    if (ps_json_read_file(path, PS_BENCH_JSON_MAX, &doc, NULL, 0) != 0) {
        return;
    }
    const json_t *rows = json_object_get(doc, "rows");
    if (json_is_number(json_object_get(doc, "test_logloss"))) {
        c->logloss = json_number_value(json_object_get(doc, "test_logloss"));
    }
    if (rows && json_number_value(json_object_get(rows, "keys_per_worker_step")) > 0) {
        c->keys = json_number_value(json_object_get(rows, "keys_per_worker_step"));
        c->rows = json_number_value(json_object_get(rows, "total"));
    }
    const double train =
        ps_bench_json_sum(json_object_get(doc, "worker_train_seconds"), NULL);
    if (train > 0) {
        c->compute_share =
            ps_bench_json_sum(json_object_get(doc, "worker_compute_seconds"), NULL) / train;
    }
    if (cfg->net) {
        c->sent = r->link_tx_rest;
        c->recv = r->link_rx_rest;
    } else {
        const json_t *w = json_object_get(json_object_get(doc, "bytes_by_type"), "workers"),
                     *steps = json_object_get(doc, "worker_steps");
        const size_t n = json_array_size(w);
        double sent = 0, recv = 0;
        int k = 0;
        for (size_t i = n > 1 ? 1 : 0; i < n && i < json_array_size(steps); i++) {
            const double st = json_number_value(json_array_get(steps, i));
            const json_t *wi = json_array_get(w, i);
            if (st > 0) {
                sent += ps_bench_json_sum(json_object_get(wi, "sent"), NULL) / st;
                recv += ps_bench_json_sum(json_object_get(wi, "received"), NULL) / st;
                k++;
            }
        }
        c->sent = k ? sent / k : NAN;
        c->recv = k ? recv / k : NAN;
    }
    json_decref(doc);
}

/* Cell text: "%.*f" of v, or "" (n/a) when v is NAN. */
static const char *s_cell(char *buf, size_t cap, int prec, double v)
{
    if (isnan(v) || isinf(v)) {
        buf[0] = '\0';
    } else {
        snprintf(buf, cap, "%.*f", prec, v);
    }
    return buf;
}

/* The status cell of a run. Exit 2 is the launcher's or a role's refusal
 * of the job's flags. */
static void s_status(const train_run_t *r, char *buf, size_t cap)
{
    if (r->status == 0) {
        snprintf(buf, cap, "ok");
    } else if (r->status == 2) {
        snprintf(buf, cap, "refused: exit 2");
    } else if (r->status < 0) {
        snprintf(buf, cap, "failed: %s", ps_strerror(r->status));
    } else {
        snprintf(buf, cap, "failed: exit %d", r->status);
    }
}

/* The theory's U for a run: its own summary's, else the data's estimate. */
static double s_keys(const ctr_data_t *d, const ctr_run_t *c)
{
    return isnan(c->keys) ? d->keys_est : c->keys;
}

/* What bound run r, its link efficiency eff (NAN without --net): "link",
 * else "CPU" (the machine's cores busy TRAIN_CPU_BOUND or more), else with
 * --net "delay line" (TRAIN_LINE_BOUND) or "wait" (neither the links nor
 * the cores full: round trips and the ends of the steps), without it "not
 * CPU". Static text. */
static const char *s_bound(const train_cfg_t *cfg, const train_run_t *r, double eff)
{
    if (cfg->net && eff >= CTR_LINK_BOUND) {
        return "link";
    }
    if (!cfg->net || r->cpu_busy >= TRAIN_CPU_BOUND) {
        return ps_bench_train_bound(cfg, r);
    }
    return r->line_busy >= TRAIN_LINE_BOUND ? "delay line" : "wait";
}

/* Runs r and writes its rows. Returns 0, or 1 when the job failed. */
static int s_one(const train_cfg_t *cfg, const ctr_data_t *d, train_run_t *r, ctr_run_t *c,
                 ps_bench_table_t *t, ps_bench_table_t *te)
{
    const char *scen = ps_bench_train_scenarios[r->scen];
    const double t0 = ps_now();
    r->load = ps_bench_loadavg();
    ps_bench_train_job(cfg, r, -1, 0);
    char status[48], cl[16][32];
    s_status(r, status, sizeof status);
    if (r->status != 0) {
        fprintf(stderr, TRAIN_PROG ":   %s (log: %s/runs/)\n", status, cfg->out);
        ps_bench_table_rowf(t, "%s,%d,%s,%s,,,,,,,,,,,,,,,,,,,,,%.1f", r->name, r->workers,
                            scen, status, r->load);
        return 1;
    }
    s_read_ctr(cfg, r, c);
    const double M = r->workers, U = s_keys(d, c);
    /* without --net a worker's own messages are measured: a colocated
     * server's share of its link shows only on the links */
    const int design = s_design(r->label);
    const double theory =
        s_theory(d, design == CTR_PS_COLOCATED && !cfg->net ? CTR_PS : design, M, U);
    const double share = r->job_cpu / (r->job_wall * (double)sysconf(_SC_NPROCESSORS_ONLN));
    const double rate = cfg->net ? ps_netsim_rate(cfg->net) : 0;
    const double step_ms = r->sps > 0 ? M * ps_bench_train_batch(cfg) / r->sps * 1e3 : NAN;
    const double link_ms = rate > 0 ? r->link_max * 8 / rate * 1e3 : NAN;
    char tta[48] = "not reached";
    if (!isnan(r->tta)) {
        snprintf(tta, sizeof tta, "%.1f s", r->tta);
    }
    fprintf(stderr,
            TRAIN_PROG ":   %.0f samples/s, AUC %.4f, time to %.2f: %s, %.3f MB/step sent "
                       "(theory %.3f), cores busy %.0f %% (job %.1f s)\n",
            r->sps, r->acc, cfg->target, tta, c->sent / 1e6, theory / 1e6,
            r->cpu_busy * 100, ps_now() - t0);
    ps_bench_table_rowf(
        t,
        "%s,%d,%s,%s,%.0f,%s,%s,%.4f,%s,%s,%s,%s,%s,%s,%.3f,"
        "%s,%s,%s,%s,%s,%s,%s,%s,%s,%.1f",
        r->name, r->workers, scen, status, r->sps, s_cell(cl[0], 32, 1, r->tta),
        s_cell(cl[1], 32, 0, r->sta), r->acc, s_cell(cl[2], 32, 4, c->logloss),
        s_cell(cl[3], 32, 1, c->keys), s_cell(cl[4], 32, 0, c->rows),
        s_cell(cl[5], 32, 3, c->sent / 1e6), s_cell(cl[6], 32, 3, c->recv / 1e6),
        cfg->net ? "links" : "summary", theory / 1e6,
        s_cell(cl[7], 32, 2, (c->sent + c->recv) / 2 / theory),
        s_cell(cl[12], 32, 3, r->link_max / 1e6), s_cell(cl[13], 32, 1, link_ms),
        s_cell(cl[14], 32, 1, step_ms), s_cell(cl[15], 32, 2, link_ms / step_ms),
        s_cell(cl[8], 32, 2, r->cpu_busy), s_cell(cl[9], 32, 2, share),
        s_cell(cl[10], 32, 2, c->compute_share), s_bound(cfg, r, link_ms / step_ms),
        r->load);
    for (int e = 0; e < r->nep; e++) {
        ps_bench_table_rowf(te, "%s,%d,%s,%d,%.2f,%s,%.4f", r->name, r->workers, scen,
                            e + 1, r->ep_t[e], s_cell(cl[11], 32, 0, r->ep_step[e]),
                            r->ep_acc[e]);
    }
    return 0;
}

/* ---- the tables ------------------------------------------------------------ */

static int s_tables(const train_cfg_t *cfg, ps_bench_table_t **t, ps_bench_table_t **te)
{
    char title[320], headers[640];
    snprintf(title, sizeof title,
             "### Training the click-through model: every mode x workers (same seed, data "
             "order and flags)%s%s",
             cfg->net ? ", simulated network: " : "",
             cfg->net ? ps_netsim_note(cfg->net) : "");
    snprintf(headers, sizeof headers,
             "mode,workers,scenario,status,samples/s,s to AUC %.2f,samples to AUC %.2f,"
             "final AUC,final log loss,keys/worker step,rows on servers,sent MB/step,"
             "received MB/step,measured on,theory MB/step each way,measured/theory,"
             "busiest link MB/step,link-bound ms/step,measured ms/step,link efficiency,"
             "cores busy,job CPU/cores,worker compute share,bound,load at start",
             cfg->target, cfg->target);
    if (ps_bench_table_new(cfg->page, "train_ctr", title,
                           "mode,workers,scenario,status,samples_per_sec,time_to_target_s,"
                           "samples_to_target,final_auc,final_logloss,keys_per_worker_step,"
                           "server_rows,sent_mb,received_mb,measured_on,theory_mb,"
                           "measured_vs_theory,link_max_mb,bound_ms,step_ms,efficiency,"
                           "cores_busy,job_cpu_share,compute_share,bound,load_1min",
                           headers, t) != 0 ||
        ps_bench_table_new(cfg->page, "train_ctr_epochs",
                           "### Test AUC at each evaluation (epoch ends and --eval-every)",
                           "mode,workers,scenario,eval,elapsed_s,step,test_auc", NULL,
                           te) != 0) {
        ps_bench_table_destroy(t, 0);
        return 1;
    }
    return 0;
}

/* The run of mode token label with M workers in the first scenario, ok, or NULL. */
static const train_run_t *s_find(const train_run_t *runs, int nruns, const char *label,
                                 int M, int scen)
{
    for (int i = 0; label && i < nruns; i++) {
        if (!strcmp(runs[i].label, label) && runs[i].workers == M && runs[i].scen == scen &&
            runs[i].status == 0) {
            return &runs[i];
        }
    }
    return NULL;
}

/* The first mode token of a design, or NULL. The parameter server's
 * reference is its first dedicated mode, else its first colocated one. */
static const char *s_token(const train_cfg_t *cfg, int design)
{
    for (int m = 0; m < cfg->nmodes; m++) {
        if (s_design(cfg->modes[m]) == design) {
            return cfg->modes[m];
        }
    }
    return design == CTR_PS ? s_token(cfg, CTR_PS_COLOCATED) : NULL;
}

/* The theory's U for M workers: the parameter server's run's, else the
 * data's estimate. */
static double s_keys_at(const train_cfg_t *cfg, const ctr_data_t *d,
                        const train_run_t *runs, const ctr_run_t *ctr, int nruns, int M)
{
    const train_run_t *rp = s_find(runs, nruns, s_token(cfg, CTR_PS), M, cfg->scen[0]);
    return rp ? s_keys(d, &ctr[rp - runs]) : d->keys_est;
}

/* A ring run's seconds to the target: its own, or with --ring-steps (it
 * stopped early) the parameter server's samples to it at the ring's
 * samples/s: the ring's arithmetic is sync's. NAN: n/a. */
static double s_ring_tta(const train_cfg_t *cfg, const train_run_t *ring, const train_run_t *ps)
{
    if (!ring) {
        return NAN;
    }
    if (cfg->ring_steps <= 0) {
        return ring->tta;
    }
    return ps && ring->sps > 0 ? ps->sta / ring->sps : NAN;
}

/* The versus table's row for M workers: each design's theory, and what the
 * runs of the first scenario measured. */
static void s_versus_row(const train_cfg_t *cfg, const ctr_data_t *d,
                         const train_run_t *runs, const ctr_run_t *ctr, int nruns, int M,
                         ps_bench_table_t *t)
{
    const char *ps = s_token(cfg, CTR_PS), *dense = s_token(cfg, CTR_DENSE),
               *ag = s_token(cfg, CTR_ALLGATHER);
    const int scen = cfg->scen[0];
    const train_run_t *rp = s_find(runs, nruns, ps, M, scen),
                      *rd = s_find(runs, nruns, dense, M, scen),
                      *ra = s_find(runs, nruns, ag, M, scen);
    const ctr_run_t *cp = rp ? &ctr[rp - runs] : NULL, *cd = rd ? &ctr[rd - runs] : NULL,
                    *ca = ra ? &ctr[ra - runs] : NULL;
    const double U = s_keys_at(cfg, d, runs, ctr, nruns, M);
    double th[CTR_NDESIGNS];
    for (int k = 0; k < CTR_NDESIGNS; k++) {
        th[k] = s_theory(d, k, M, U);
    }
    const double mp = cp ? (cp->sent + cp->recv) / 2 : NAN,
                 md = cd ? (cd->sent + cd->recv) / 2 : NAN,
                 ma = ca ? (ca->sent + ca->recv) / 2 : NAN;
    const double sp = rp ? rp->sps : NAN, sd = rd ? rd->sps : NAN, sa = ra ? ra->sps : NAN;
    if (M < 2) { /* no ring of one worker */
        th[CTR_DENSE] = th[CTR_ALLGATHER] = NAN;
    }
    char c[20][32];
    ps_bench_table_rowf(
        t, "%d,%s,%.1f,%.3f,%.3f,%.3f,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s",
        M, ps ? ps : "", U, th[CTR_PS] / 1e6, th[CTR_PS] * M / cfg->servers / 1e6,
        th[CTR_PS_COLOCATED] / 1e6, s_cell(c[13], 32, 3, th[CTR_DENSE] / 1e6),
        s_cell(c[14], 32, 3, th[CTR_ALLGATHER] / 1e6),
        s_cell(c[15], 32, 1, th[CTR_DENSE] / th[CTR_PS]),
        s_cell(c[16], 32, 1, th[CTR_ALLGATHER] / th[CTR_PS]), s_cell(c[0], 32, 3, mp / 1e6),
        s_cell(c[1], 32, 3, md / 1e6), s_cell(c[2], 32, 3, ma / 1e6),
        s_cell(c[3], 32, 1, md / mp), s_cell(c[4], 32, 1, ma / mp), s_cell(c[5], 32, 0, sp),
        s_cell(c[6], 32, 0, sd), s_cell(c[7], 32, 0, sa), s_cell(c[8], 32, 2, sp / sd),
        s_cell(c[9], 32, 2, sp / sa), s_cell(c[10], 32, 1, rp ? rp->tta : NAN),
        s_cell(c[11], 32, 1, s_ring_tta(cfg, rd, rp)),
        s_cell(c[12], 32, 1, s_ring_tta(cfg, ra, rp)));
}

/* How the versus table's theory and measurements are read. */
static void s_versus_notes(const train_cfg_t *cfg, const ctr_data_t *d, ps_bench_table_t *t)
{
    ps_bench_table_note(
        t,
        "Theory, bytes per worker link per step each way, for M workers, U distinct keys "
        "per worker step (keys/worker step: the parameter server row's summary, "
        "`rows.keys_per_worker_step`; without that row, the mean over %d random batches "
        "of the data, %.1f), rows of d = %d floats (4d bytes, 4d + 8 with the key), "
        "V = %.0f rows in the table (every key of the data: the dense ring's vocabulary) "
        "and P = %.0f parameters of the MLP: parameter server U(4d + 8) + 4P, flat in M "
        "(a push carries keys and rows, a pull its keys one way and the rows back, so "
        "this is the mean of the two ways; the MLP's push and pull beside it), and a "
        "dedicated server's link M/S times that with S = %d servers (each carries 1/S of "
        "every worker's; at M > S it is busier than a worker's link); "
        "colocated, server i on worker i's link, 2(M-1)/M times that (its own share "
        "to the other servers and its server's share of the other workers); dense ring "
        "2(M-1)/M x (4dV + 4P); allgather (M-1) x U(4d + 8) (each worker's keys and rows "
        "to every other) + 2(M-1)/M x 4P (the MLP's allreduce). The bytes ratios are the "
        "ring variant's over the parameter server's (above 1: the parameter server "
        "moves less), the samples/s ratios the parameter server's over the ring "
        "variant's (above 1: the parameter server is faster). Measured: the mean of a "
        "worker link's sent and received bytes per step, as in the table above; n/a "
        "where the run is missing, failed or was refused.",
        CTR_KEY_BATCHES, d->keys_est, d->dim, d->vocab, d->mlp, cfg->servers);
    if (cfg->ring_steps > 0) {
        ps_bench_table_note(
            t,
            "The ring's jobs ran %d steps (`--ring-steps`): their samples/s is measured "
            "over those, and their s to AUC %.2f is projected, not measured: the "
            "parameter server's samples to it (its sync run's) over the ring's samples/s. "
            "The ring variants compute the sums sync does (up to the order of the terms), "
            "so they need the same samples.",
            cfg->ring_steps, cfg->target);
    }
}

/* The parameter server beside each ring variant, one row per worker count
 * (the first scenario). */
static void s_versus(const train_cfg_t *cfg, const ctr_data_t *d, const train_run_t *runs,
                     const ctr_run_t *ctr, int nruns)
{
    ps_bench_table_t *t = NULL;
    char headers[768];
    snprintf(headers, sizeof headers,
             "workers,PS mode,keys/worker step,PS MB/step (theory),"
             "PS server link MB/step (theory),PS colocated MB/step (theory),"
             "dense ring MB/step (theory),allgather MB/step (theory),"
             "dense/PS bytes (theory),allgather/PS bytes (theory),PS MB/step (measured),"
             "dense ring MB/step (measured),allgather MB/step (measured),"
             "dense/PS bytes (measured),allgather/PS bytes (measured),PS samples/s,"
             "dense samples/s,allgather samples/s,PS/dense samples/s,"
             "PS/allgather samples/s,PS s to AUC %.2f,dense s to AUC %.2f,"
             "allgather s to AUC %.2f",
             cfg->target, cfg->target, cfg->target);
    if (ps_bench_table_new(
            cfg->page, "train_ctr_vs",
            "### Where the parameter server wins: bytes per worker link per step, "
            "each way, and speed, the parameter server against each ring variant",
            "workers,ps_mode,keys_per_worker_step,theory_ps_mb,theory_ps_server_mb,"
            "theory_ps_colocated_mb,theory_dense_mb,theory_allgather_mb,"
            "theory_dense_vs_ps,theory_allgather_vs_ps,measured_ps_mb,measured_dense_mb,"
            "measured_allgather_mb,measured_dense_vs_ps,measured_allgather_vs_ps,"
            "ps_samples_per_sec,dense_samples_per_sec,"
            "allgather_samples_per_sec,ps_vs_dense_speed,ps_vs_allgather_speed,"
            "ps_time_to_target_s,dense_time_to_target_s,allgather_time_to_target_s",
            headers, &t) != 0) {
        return;
    }
    for (int w = 0; w < cfg->nworkers; w++) {
        s_versus_row(cfg, d, runs, ctr, nruns, (int)cfg->workers[w], t);
    }
    s_versus_notes(cfg, d, t);
    ps_bench_table_destroy(&t, 1);
}

/* What every row ran: the data, the model and the job's flags. */
static void s_notes_runs(const train_cfg_t *cfg, const ctr_data_t *d, ps_bench_table_t *t)
{
    char extra[512] = "", gen[160] = "";
    ps_bench_train_extra_flags(cfg, extra, sizeof extra);
    if (d->generated) {
        char scale[48] = "";
        if (cfg->ctr_scale > 0) {
            snprintf(scale, sizeof scale, " --scale %g", cfg->ctr_scale);
        }
        snprintf(gen, sizeof gen, "`shardps-datagen ctr --rows %d --seed %d%s`, ",
                 cfg->ctr_rows, cfg->seed, scale);
    }
    char planted[64] = "";
    if (!isnan(d->planted_auc)) {
        snprintf(planted, sizeof planted, "; the planted model's own AUC %.4f",
                 d->planted_auc);
    }
    ps_bench_table_note(
        t,
        "Data: %s%.0f samples (the last tenth held out for the AUC), %.0f distinct keys "
        "(the rows of the whole table)%s. Model: the MLP's %.0f parameters, rows of %d "
        "floats.",
        gen, d->samples, d->vocab, planted, d->mlp, d->dim);
    ps_bench_table_note(
        t,
        "Each row: `shardps-launch --servers %d --workers N --model ctr --ctr-data FILE "
        "--mode M --epochs %d --seed %d%s`; max-steps %d; colocated rows: `--placement "
        "colocated` and as many servers as workers; allreduce:dense and "
        "allreduce:allgather: `--servers 0 --mode allreduce --ring-rows "
        "dense|allgather`. Samples/s, the AUC and the log loss from the scheduler's "
        "summary; s to AUC %.2f = worker 0's training time at the first evaluation "
        "reaching it (n/a: not reached); samples to it = worker 0's step there x "
        "workers x batch. Keys/worker step and rows on servers: the summary's `rows` "
        "(n/a without servers). Refused: the job's flags were refused (exit 2). Logs "
        "and summaries: runs/ beside this page.",
        cfg->servers, cfg->epochs, cfg->seed, extra, cfg->max_steps, cfg->target);
}

/* How the bytes, the bound and the compute share are read. */
static void s_notes_figures(const train_cfg_t *cfg, ps_bench_table_t *t)
{
    ps_bench_table_note(
        t,
        "Sent and received MB/step: bytes per step of a worker's link, the mean of the "
        "workers but worker 0, which also evaluates (worker 0 alone with 1 worker). %s "
        "Theory MB/step: the row's design, as in the last table; measured/theory = the "
        "mean of sent and received over it.",
        cfg->net
            ? "Measured on the links: each worker namespace's eth0 byte counters "
              "(headers included) before and after the job, per worker 0's steps "
              "(start-up and the initial values included). A colocated worker's link "
              "also carries its server's share of worker 0's evaluations (the rows of "
              "the held-out samples, each --eval-every steps), which the theory leaves "
              "out."
            : "From the summary: every message a worker sent and received "
              "(`bytes_by_type.workers`, payload and headers of our messages, not TCP's), "
              "over its own steps. These are the worker's own messages, so a colocated "
              "row's theory here is the parameter server's: its server's share of the "
              "same link shows only on the links (--net).");
    ps_bench_table_note(
        t,
        "Bound: %s Cores busy is the share of this machine's cores not idle over the job "
        "(/proc/stat, every process, the job's start-up and data loading included); at "
        "%.0f %% or more the row says CPU: the cores, not the links, were the bound, and "
        "its time says nothing about the network. %s Job CPU/cores: the job's own "
        "processes' CPU seconds (getrusage of the bench's children) over the job's wall "
        "time x %ld cores (the rest of the busy share is other work on the machine). "
        "Worker compute share: the workers' compute seconds over their training seconds "
        "(the summary's worker_compute_seconds and worker_train_seconds; the rest is "
        "waiting for pulls, pushes and the ring).",
        cfg->net ? "busiest link MB/step is the most bytes any link of the job (workers, "
                   "servers, scheduler) carried one way per step (with servers, worker 0's "
                   "link also carries the rows its evaluations pull, and is often the "
                   "busiest); link-bound ms/step those bytes at the link rate; measured "
                   "ms/step = workers x batch / samples/s; link efficiency = link-bound / "
                   "measured. At 80 % or more the row says `link`: the links were the "
                   "bound."
                 : "without --net there are no links (n/a).",
        TRAIN_CPU_BOUND * 100,
        cfg->net ? "Otherwise `delay line` where the delay line's busiest thread was busy "
                   "80 % of a core or more, else `wait`: neither the links nor the cores "
                   "were full (round trips, the ends of each step's pipeline)."
                 : "Otherwise `not CPU`.",
        sysconf(_SC_NPROCESSORS_ONLN));
    if (cfg->ctr_skipped[0]) {
        ps_bench_table_note(t, "Ring rows left out: %s.", cfg->ctr_skipped);
    }
}

/* What every row ran and how its figures are read, under the runs' table. */
static void s_notes(const train_cfg_t *cfg, const ctr_data_t *d, ps_bench_table_t *t)
{
    s_notes_runs(cfg, d, t);
    s_notes_figures(cfg, t);
}

/* Bytes per worker link per step against workers: each design's theory
 * (dashed) and each mode's measured mean of the two ways (points), on a log
 * scale: train_ctr_bytes.png. */
static void s_plot_bytes(const train_cfg_t *cfg, const ctr_data_t *d,
                         const train_run_t *runs, const ctr_run_t *ctr, int nruns)
{
    static const char *const names[CTR_NDESIGNS] = {"parameter server", "PS colocated",
                                                    "dense ring", "allgather"};
    ps_bench_str_t gp = {0}, plot = {0};
    ps_bench_plot_header(&gp, cfg->page, "train_ctr_bytes", 720, 380);
    ps_bench_str_addf(&gp,
                      "set xlabel 'workers'\nset ylabel 'MB per worker link per step'\n"
                      "set logscale y\nset key outside right\nset xtics (");
    for (int w = 0; w < cfg->nworkers; w++) {
        ps_bench_str_addf(&gp, "%s%ld", w ? ", " : "", cfg->workers[w]);
    }
    ps_bench_str_addf(&gp, ")\n");
    for (int k = 0; k < CTR_NDESIGNS; k++) {
        /* without --net a colocated worker's own messages are the PS's */
        if (!s_token(cfg, k) || (k == CTR_PS_COLOCATED && !cfg->net)) {
            continue;
        }
        ps_bench_str_addf(&gp, "$t%d << EOD\n", k);
        for (int w = 0; w < cfg->nworkers; w++) {
            const int M = (int)cfg->workers[w];
            const double mb =
                s_theory(d, k, M, s_keys_at(cfg, d, runs, ctr, nruns, M)) / 1e6;
            if (mb > 0) { /* a ring or colocated servers of one worker move nothing */
                ps_bench_str_addf(&gp, "%d %.6f\n", M, mb);
            }
        }
        ps_bench_str_addf(&gp, "EOD\n");
        ps_bench_str_addf(&plot, "%s$t%d u 1:2 w l lc %d dt 2 t 'theory: %s'",
                          plot.len ? ", " : "", k, k + 1, names[k]);
    }
    for (int m = 0; m < cfg->nmodes; m++) {
        int points = 0;
        ps_bench_str_addf(&gp, "$m%d << EOD\n", m);
        for (int i = 0; i < nruns; i++) {
            const double mb = (ctr[i].sent + ctr[i].recv) / 2 / 1e6;
            if (runs[i].label == cfg->modes[m] && runs[i].status == 0 &&
                runs[i].scen == cfg->scen[0] && mb > 0) {
                ps_bench_str_addf(&gp, "%d %.6f\n", runs[i].workers, mb);
                points++;
            }
        }
        ps_bench_str_addf(&gp, "EOD\n");
        if (points) {
            ps_bench_str_addf(&plot, "%s$m%d u 1:2 w p lc %d pt %d ps 1.2 t '%s'",
                              plot.len ? ", " : "", m, s_design(cfg->modes[m]) + 1,
                              5 + 2 * (m % 4), cfg->modes[m]);
        }
    }
    if (plot.len) {
        ps_bench_str_addf(&gp, "plot %s\n", ps_bench_str_get(&plot));
        ps_bench_plot(cfg->page, "train_ctr_bytes", ps_bench_str_get(&gp));
    }
    ps_bench_str_fini(&plot);
    ps_bench_str_fini(&gp);
}

/* ---- the ring rows and the sweep ---------------------------------------------- */

int ps_bench_train_ctr_modes(train_cfg_t *cfg)
{
    char log[PATH_MAX], *text = NULL;
    snprintf(log, sizeof log, "%s/runs/launch_help.txt", cfg->out);
    remove(log);
    char *argv[] = {(char *)cfg->launch, "--help", NULL};
    const int ok = ps_bench_run(argv, log) == 0 && ps_bench_read_file(log, &text) == 0 &&
                   strstr(text, "--ring-rows ") != NULL;
    free(text);
    remove(log);
    int k = 0;
    for (int m = 0; m < cfg->nmodes; m++) {
        if (ok || !ps_bench_train_ring_rows(cfg->modes[m])) {
            memmove(cfg->modes[k++], cfg->modes[m], PS_BENCH_WORD_MAX);
        } else {
            snprintf(cfg->ctr_skipped, sizeof cfg->ctr_skipped,
                     "this shardps-launch has no --ring-rows");
            printf(TRAIN_PROG ": mode %s skipped: %s\n", cfg->modes[m], cfg->ctr_skipped);
            fprintf(stderr, TRAIN_PROG ": mode %s skipped: %s\n", cfg->modes[m],
                    cfg->ctr_skipped);
        }
    }
    cfg->nmodes = k;
    return k > 0 ? 0 : PS_EINVAL;
}

int ps_bench_train_ctr(train_cfg_t *cfg)
{
    ctr_data_t *d = calloc(1, sizeof *d);
    const int cap = cfg->nscen * cfg->nmodes * cfg->nworkers;
    train_run_t *runs = calloc((size_t)cap, sizeof *runs);
    ctr_run_t *ctr = calloc((size_t)cap, sizeof *ctr);
    ps_bench_table_t *t = NULL, *te = NULL;
    const char *given = cfg->ctr_data;
    int failed = 1;
    if (!d || !runs || !ctr || ps_bench_train_ctr_data(cfg, d) != 0 || s_tables(cfg, &t, &te) != 0) {
        goto fail;
    }
    fprintf(stderr,
            TRAIN_PROG ": click log %s: %.0f samples, %.0f distinct keys, about %.0f in a "
                       "batch of %d; MLP of %.0f parameters, rows of %d floats\n",
            d->path, d->samples, d->vocab, d->keys_est, ps_bench_train_batch(cfg), d->mlp,
            d->dim);
    cfg->ctr_data = d->path;
    const int nruns = ps_bench_train_plan(cfg, runs);
    failed = 0;
    for (int i = 0; i < nruns && !ps_netsim_stop; i++) {
        train_run_t *r = &runs[i];
        fprintf(stderr,
                TRAIN_PROG ": [%d/%d] --model ctr --mode %s --workers %d (%s) ...\n", i + 1,
                nruns, r->name, r->workers, ps_bench_train_scenarios[r->scen]);
        failed |= s_one(cfg, d, r, &ctr[i], t, te);
    }
    s_notes(cfg, d, t);
    ps_bench_table_destroy(&te, 0);
    ps_bench_table_destroy(&t, 1);
    s_versus(cfg, d, runs, ctr, nruns);
    s_plot_bytes(cfg, d, runs, ctr, nruns);
    ps_bench_train_plots(cfg, runs, nruns, "test AUC", "train_ctr_auc",
                         "train_ctr_throughput");
fail:
    ps_bench_table_destroy(&te, 0);
    ps_bench_table_destroy(&t, 0);
    cfg->ctr_data = given;
    free(ctr);
    free(runs);
    free(d);
    return failed;
}
