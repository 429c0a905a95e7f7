/*
 * bench/train/train_ctr_data.c - the click log of `shardps-bench train
 * --model ctr` and what the theory needs of it and of the model: generated
 * with shardps-datagen (or --ctr-data), its distinct keys (the table's
 * rows, the dense ring's vocabulary), a batch's distinct keys, and the
 * MLP's parameters (see train_ctr.c).
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/train/train.h"
#include "common/error.h"
#include "common/job.h"
#include "deploy/proc.h"
#include "kernels/kernels.h"
#include "worker/ctr_data.h"
#include "worker/ctr_job.h"
#include "worker/models/model.h"

/* The value of --NAME in --job-flags ("--NAME V" or "--NAME=V"), or NULL. */
static const char *s_job_flag(const train_cfg_t *cfg, const char *name)
{
    const size_t n = strlen(name);
    for (int i = 0; cfg->job_flags[i]; i++) {
        const char *w = cfg->job_flags[i];
        if (strncmp(w, "--", 2) || strncmp(w + 2, name, n)) {
            continue;
        }
        if (w[2 + n] == '=') {
            return w + 3 + n;
        }
        if (!w[2 + n] && cfg->job_flags[i + 1]) {
            return cfg->job_flags[i + 1];
        }
    }
    return NULL;
}

static int s_cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Distinct values of v[0..n), sorted in place. */
static size_t s_distinct(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, s_cmp_u64);
    size_t d = 0;
    for (size_t i = 0; i < n; i++) {
        d += i == 0 || v[i] != v[i - 1];
    }
    return d;
}

/* splitmix64: the random batches' sample indices, from the seed. */
static uint64_t s_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Writes the click log with shardps-datagen into OUT/runs/ctr_clicks.txt
 * (its output in ctr_datagen.log, whose planted_auc= it keeps). Returns 0,
 * or 1 after one line on stderr. */
static int s_generate(const train_cfg_t *cfg, ctr_data_t *d)
{
    char gen[PATH_MAX], rows[24], seed[24], scale[32], log[PATH_MAX], *text = NULL;
    if (ps_proc_find_exe("shardps-datagen", "deploy", gen, sizeof gen) != 0) {
        fprintf(stderr, TRAIN_PROG ": error: cannot find shardps-datagen (looked next to "
                                   "this program, in ../deploy/ and on $PATH)\n");
        return 1;
    }
    snprintf(d->path, sizeof d->path, "%s/runs/ctr_clicks.txt", cfg->out);
    snprintf(log, sizeof log, "%s/runs/ctr_datagen.log", cfg->out);
    snprintf(rows, sizeof rows, "%d", cfg->ctr_rows);
    snprintf(seed, sizeof seed, "%d", cfg->seed);
    snprintf(scale, sizeof scale, "%g", cfg->ctr_scale);
    char *argv[] = {gen,     "ctr",    "--rows",
                    rows,    "--seed", seed,
                    "--out", d->path,  cfg->ctr_scale > 0 ? "--scale" : NULL,
                    scale,   NULL};
    remove(log);
    fprintf(stderr, TRAIN_PROG ": generating %d samples into %s ...\n", cfg->ctr_rows,
            d->path);
    const int rc = ps_bench_run(argv, log);
    if (rc != 0) {
        fprintf(stderr, TRAIN_PROG ": error: shardps-datagen ctr exited %d (log: %s)\n", rc,
                log);
        return 1;
    }
    const char *p;
    if (ps_bench_read_file(log, &text) == 0 && (p = strstr(text, "planted_auc=")) != NULL) {
        d->planted_auc = strtod(p + strlen("planted_auc="), NULL);
    }
    free(text);
    d->generated = 1;
    return 0;
}

/* The dense part's parameters: the ctr model of the jobs' --hidden and
 * --embed-dim, made once on the CPU. Returns 0 or 1 after a line. */
static int s_mlp(ctr_data_t *d)
{
    ps_model_t *m = NULL;
    if (ps_model_new_ctr(d->hidden, d->dim, &ps_kernels_cpu, 1, &m) != 0) {
        fprintf(stderr, TRAIN_PROG ": error: no ctr model of --hidden %s --embed-dim %d\n",
                d->hidden ? d->hidden : "(default)", d->dim);
        return 1;
    }
    d->mlp = (double)ps_model_num_params(m);
    ps_model_destroy(&m);
    return 0;
}

/* The click log (generated unless --ctr-data), read once: its distinct
 * keys and those of a batch. Returns 0 or 1 after a line on stderr. */
int ps_bench_train_ctr_data(const train_cfg_t *cfg, ctr_data_t *d)
{
    const char *dim = s_job_flag(cfg, "embed-dim");
    d->dim = dim ? atoi(dim) : PS_JOB_EMBED_DIM_DEFAULT;
    d->hidden = s_job_flag(cfg, "hidden");
    d->planted_auc = NAN;
    if (s_mlp(d) != 0) {
        return 1;
    }
    if (cfg->ctr_data) {
        snprintf(d->path, sizeof d->path, "%s", cfg->ctr_data);
    } else if (s_generate(cfg, d) != 0) {
        return 1;
    }
    char abs[PATH_MAX], why[512] = "";
    if (!realpath(d->path, abs)) {
        fprintf(stderr, TRAIN_PROG ": error: no click log %s\n", d->path);
        return 1;
    }
    snprintf(d->path, sizeof d->path, "%s", abs);
    ps_ctr_set_t set;
    if (ps_ctr_read(d->path, 0, PS_CTR_MAX_BAD, &set, why, sizeof why) != 0) {
        fprintf(stderr, TRAIN_PROG ": error: %s\n", why);
        return 1;
    }
    ps_ctr_view_t train, test;
    ps_ctr_split(&set, PS_CTR_TEST_FRACTION, &train, &test);
    const size_t b = (size_t)ps_bench_train_batch(cfg), k = (size_t)PS_CTR_CAT * b;
    uint64_t *keys = train.n > 0 ? malloc(k * sizeof *keys) : NULL;
    const int sampled = keys != NULL;
    double sum = 0;
    uint64_t x = (uint64_t)cfg->seed;
    for (int i = 0; keys && i < CTR_KEY_BATCHES; i++) {
        for (size_t s = 0; s < b; s++) {
            memcpy(keys + s * PS_CTR_CAT, train.keys + (s_next(&x) % train.n) * PS_CTR_CAT,
                   PS_CTR_CAT * sizeof *keys);
        }
        sum += (double)s_distinct(keys, k);
    }
    free(keys);
    d->keys_est = sampled ? sum / CTR_KEY_BATCHES : NAN;
    d->samples = (double)set.n;
    d->vocab = (double)s_distinct(set.keys, set.n * PS_CTR_CAT);
    ps_ctr_set_fini(&set);
    return 0;
}

