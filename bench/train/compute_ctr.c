/*
 * bench/train/compute_ctr.c - `shardps-bench compute --model ctr`: one
 * worker's step of the click model alone, its rows in a server's table in
 * this process rather than across the network.
 *
 * A step is the worker's (worker/ctr_job.c, ps_ctr_job_step): the batch's
 * samples gathered and their keys hashed and deduplicated, the rows of its
 * distinct keys read from the table, forward and backward, the rows'
 * gradient handed to the table, which applies Adagrad to those rows as a
 * server does (server/rows.c, ps_rows_update); then Adagrad on the dense
 * part on the host (ps_optim_step), as a server applies it to its key
 * ranges. That is the step of bench/torch/train.py --model ctr: gather,
 * forward and backward, Adagrad on the batch's rows (a sparse gradient) and
 * on the MLP. No messages, no consistency, no clock: what a worker and a
 * server compute per step, and nothing else. The profiled pass adds the
 * table's read to the gather and its update to the update.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/train/compute.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/job.h"
#include "deploy/proc.h"
#include "kernels/optim.h"
#include "kernels/threads.h"
#include "server/rows.h"
#include "worker/ctr_job.h"
#include "worker/data.h"

enum { S_SEED = 1 }; /* the parameters', the rows' and the sample order's */

/* The loop's state. */
typedef struct {
    const compute_cfg_t *cfg;
    ps_model_t *m;       /* the ctr model */
    ps_ctr_job_t *job;   /* its click log and batches */
    ps_rows_t *rows;     /* the rows, a server's table */
    ps_optim_t opt;      /* Adagrad, the rows' and the dense part's */
    float *state;        /* [P] the dense part's Adagrad sums */
    uint32_t *order;     /* [per_epoch x batch] the training rows' order */
    long per_epoch;      /* whole batches in the training rows */
    long next;           /* the next step's index */
    int timing;          /* the table's calls timed into fetch and push */
    double fetch, push;  /* seconds in the table's read and update */
} s_loop_t;

/* ps_ctr_rows_t.fetch: the table's rows (its initial values for keys it
 * has not made yet). */
static int s_fetch(void *arg, const uint64_t *keys, size_t n, float *out, int64_t min_version,
                   char *err, size_t cap)
{
    (void)min_version, (void)err, (void)cap;
    s_loop_t *L = arg;
    const double t = L->timing ? ps_now() : 0;
    ps_rows_read(L->rows, keys, n, out);
    L->fetch += L->timing ? ps_now() - t : 0;
    return 0;
}

/* ps_ctr_rows_t.push: the step's Adagrad on the rows, as one worker's sync
 * step on a server (scale 1). */
static int s_push(void *arg, const uint64_t *keys, size_t n, const float *grads, int64_t t,
                  int *push, char *err, size_t cap)
{
    (void)t;
    s_loop_t *L = arg;
    const double t0 = L->timing ? ps_now() : 0;
    const int rc = ps_rows_update(L->rows, keys, n, grads, (float)L->cfg->lr, 1.0f);
    L->push += L->timing ? ps_now() - t0 : 0;
    *push = -1;
    if (rc < 0) {
        snprintf(err, cap, "the rows' update: %s", ps_strerror(rc));
        return rc;
    }
    return 0;
}

/* One step (a compute_step_fn on an s_loop_t). */
static int s_step(void *arg, float *loss, double *t)
{
    s_loop_t *L = arg;
    const int b = L->cfg->batch;
    const long step = L->next++;
    char err[256];
    L->timing = t != NULL;
    int rc = ps_ctr_job_batch(L->job, L->order, (size_t)(step % L->per_epoch) * b, b);
    if (t) {
        t[0] = ps_now();
    }
    rc = rc ? rc : ps_ctr_job_step(L->job, NULL, step, 0, NULL, loss, err, sizeof err);
    if (t) {
        t[1] = ps_now();
    }
    const size_t P = ps_model_num_params(L->m);
    ps_optim_step(&L->opt, (float)L->cfg->lr, step + 1, ps_model_params(L->m), L->state, P,
                  ps_model_grads(L->m), 1.0f, P);
    if (t) {
        t[2] = ps_now();
    }
    return rc;
}

/* The model, its click log, the table and the order. Returns 0 or an error
 * after one line on stderr. */
static int s_open(const compute_cfg_t *cfg, const ps_kernels_t *k, s_loop_t *L)
{
    char err[512];
    ps_job_t job;
    ps_job_defaults(&job);
    snprintf(job.optimizer, sizeof job.optimizer, "adagrad");
    job.embed_dim = PS_MODEL_CTR_EMBED_DIM;
    int rc = ps_model_new_ctr(NULL, job.embed_dim, k, cfg->batch, &L->m);
    if (rc != 0) {
        fprintf(stderr, COMPUTE_PROG ": error: model ctr on %s: %s\n", k->name,
                ps_strerror(rc));
        return rc;
    }
    ps_model_init_params(L->m, S_SEED);
    rc = ps_ctr_job_new(&L->job, cfg->data, L->m, cfg->batch, 0, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, COMPUTE_PROG ": error: %s\n", err);
        return rc;
    }
    const size_t n = ps_ctr_job_train_samples(L->job);
    if (n < (size_t)cfg->batch || n > INT_MAX) {
        fprintf(stderr, COMPUTE_PROG ": error: --batch %d: the click log has %zu training rows\n",
                cfg->batch, n);
        return PS_EINVAL;
    }
    ps_optim_from_job(&job, &L->opt);
    const ps_rows_config_t rows = {.dim = (size_t)job.embed_dim, .optim = L->opt,
                                   .seed = S_SEED, .init_bound = ps_job_row_bound(&job)};
    const size_t P = ps_model_num_params(L->m);
    L->state = calloc(P, sizeof *L->state);
    L->order = malloc(n * sizeof *L->order);
    if (!L->state || !L->order || ps_rows_new(&L->rows, &rows) != 0) {
        fprintf(stderr, COMPUTE_PROG ": error: out of memory\n");
        return PS_ENOMEM;
    }
    ps_data_order(S_SEED, 0, L->order, (int)n);
    L->per_epoch = (long)(n / (size_t)cfg->batch);
    const ps_ctr_rows_t home = {s_fetch, s_push, L};
    ps_ctr_job_set_rows(L->job, &home);
    return 0;
}

int ps_bench_compute_ctr(const compute_cfg_t *cfg, const ps_kernels_t *k,
                         compute_result_t *res)
{
    s_loop_t L = {.cfg = cfg};
    int rc = s_open(cfg, k, &L);
    if (rc == 0) {
        res->backend = k->name;
        res->blas_threads = ps_kernels_threads();
        fprintf(stderr, COMPUTE_PROG ": ctr on %s, %d threads, batch %d: %d + %d steps + %d "
                "profiled, %zu training rows\n", k->name, res->blas_threads, cfg->batch,
                cfg->warmup, cfg->steps, cfg->profile_steps, ps_ctr_job_train_samples(L.job));
        rc = ps_bench_compute_measure(cfg, L.m, s_step, &L, res);
        if (rc != 0) {
            fprintf(stderr, COMPUTE_PROG ": error: training step: %s\n", ps_strerror(rc));
        }
        const double n = cfg->profile_steps > 0 ? cfg->profile_steps : NAN;
        res->gather += L.fetch / n;
        res->update += L.push / n;
    }
    ps_rows_destroy(&L.rows);
    free(L.order);
    free(L.state);
    ps_ctr_job_destroy(&L.job);
    ps_model_destroy(&L.m);
    return rc;
}

int ps_bench_compute_ctr_data(const compute_cfg_t *cfg, char *path, size_t cap)
{
    char dir[] = "/tmp/sps-compute-ctr.XXXXXX", gen[PATH_MAX], log[PATH_MAX], rows[24];
    if (ps_proc_find_exe("shardps-datagen", "deploy", gen, sizeof gen) != 0) {
        fprintf(stderr, COMPUTE_PROG ": error: cannot find shardps-datagen (looked next to "
                                     "this program, in ../deploy/ and on $PATH)\n");
        return 1;
    }
    if (!mkdtemp(dir)) {
        fprintf(stderr, COMPUTE_PROG ": error: cannot make a directory in /tmp\n");
        return 1;
    }
    snprintf(path, cap, "%s/clicks.tsv", dir);
    snprintf(log, sizeof log, "%s/datagen.log", dir);
    snprintf(rows, sizeof rows, "%d", cfg->ctr_rows);
    char *argv[] = {gen, "ctr", "--rows", rows, "--seed", "1", "--out", path, NULL};
    fprintf(stderr, COMPUTE_PROG ": generating %d samples into %s ...\n", cfg->ctr_rows, path);
    const int rc = ps_bench_run(argv, log);
    if (rc != 0) {
        fprintf(stderr, COMPUTE_PROG ": error: shardps-datagen ctr exited %d (log: %s)\n", rc,
                log);
        return 1;
    }
    unlink(log);
    return 0;
}

void ps_bench_compute_ctr_data_remove(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    unlink(path);
    if (slash) {
        *slash = '\0';
        rmdir(dir);
    }
}
