/*
 * worker/ctr_job.c - a worker's side of a job with embedding rows: batches
 * in the order of their keys' hashes, rows pulled before and pushed after
 * each step, the held-out AUC (see ctr_job.h).
 */
#include "worker/ctr_job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auc.h"
#include "common/error.h"
#include "proto/range.h"
#include "worker/ctr_data.h"
#include "worker/models/embed.h"

struct ps_ctr_job {
    ps_model_t *m;         /* borrowed */
    int max_batch;         /* the model's */
    size_t dim;            /* floats per row */
    ps_ctr_set_t set;      /* the whole log */
    ps_ctr_view_t train;   /* its first rows */
    ps_ctr_view_t test;    /* its held-out tail */
    ps_embed_batch_t b;    /* the batch's lookups, by hash */
    uint64_t *hashes;      /* [max_batch*26] the batch's keys' hashes */
    uint64_t *keys;        /* [max_batch*26] b's distinct hashes' keys, in their order */
    float *num;            /* the model's batch buffers: numeric fields */
    uint8_t *label;        /* and labels */
    float *prob;           /* [test.n] evaluation's click probabilities */
    int n;                 /* samples of the batch built last */
};

int ps_ctr_job_new(ps_ctr_job_t **out, const char *path, ps_model_t *m, int max_batch,
                   char *err, size_t cap)
{
    *out = NULL;
    ps_ctr_job_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, cap, "out of memory");
        return PS_ENOMEM;
    }
    c->m = m;
    c->max_batch = max_batch;
    c->dim = (size_t)ps_model_embed_dim(m);
    int rc = ps_ctr_read(path, 0, PS_CTR_MAX_BAD, &c->set, err, cap);
    if (rc != 0) {
        ps_ctr_job_destroy(&c);
        return rc;
    }
    err[0] = '\0';
    ps_ctr_split(&c->set, PS_CTR_TEST_FRACTION, &c->train, &c->test);
    if (c->train.n == 0 || c->train.n > UINT32_MAX) {
        snprintf(err, cap, "%s: %zu training rows (expected 1 to %u)", path, c->train.n,
                 UINT32_MAX);
        ps_ctr_job_destroy(&c);
        return PS_EINVAL;
    }
    const size_t positions = (size_t)max_batch * PS_CTR_CAT;
    c->hashes = malloc(positions * sizeof *c->hashes);
    c->keys = malloc(positions * sizeof *c->keys);
    c->prob = malloc((c->test.n ? c->test.n : 1) * sizeof *c->prob);
    c->num = ps_model_batch_x(m);
    c->label = ps_model_batch_y(m);
    if (!c->hashes || !c->keys || !c->prob ||
        ps_embed_batch_init(&c->b, (int)positions, NULL) != 0) {
        snprintf(err, cap, "out of memory");
        ps_ctr_job_destroy(&c);
        return PS_ENOMEM;
    }
    *out = c;
    return 0;
}

void ps_ctr_job_destroy(ps_ctr_job_t **cp)
{
    ps_ctr_job_t *c = *cp;
    if (!c) {
        return;
    }
    ps_ctr_set_fini(&c->set);
    ps_embed_batch_fini(&c->b);
    free(c->hashes);
    free(c->keys);
    free(c->prob);
    free(c);
    *cp = NULL;
}

size_t ps_ctr_job_train_samples(const ps_ctr_job_t *c)
{
    return c->train.n;
}

/* Rows rows[i] of view v (i < n) into the batch: numeric fields, labels and
 * the keys' hashes, deduplicated (the distinct keys in c->keys). */
static int s_gather(ps_ctr_job_t *c, const ps_ctr_view_t *v, const uint32_t *rows, int n)
{
    if (n < 1 || n > c->max_batch) {
        return PS_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        const size_t r = rows ? rows[i] : (size_t)i;
        memcpy(c->num + (size_t)i * PS_CTR_NUM, v->num + r * PS_CTR_NUM,
               PS_CTR_NUM * sizeof *c->num);
        c->label[i] = v->label[r] != 0;
        const uint64_t *k = v->keys + r * PS_CTR_CAT;
        for (int f = 0; f < PS_CTR_CAT; f++) {
            c->hashes[(size_t)i * PS_CTR_CAT + f] = ps_range_row_hash(k[f]);
        }
    }
    const int U = ps_embed_batch_build(&c->b, c->hashes, n, PS_CTR_CAT);
    if (U < 0) {
        return U;
    }
    for (int u = 0; u < U; u++) {
        c->keys[u] = ps_range_row_unhash(c->b.keys[u]);
    }
    c->n = n;
    return 0;
}

int ps_ctr_job_batch(ps_ctr_job_t *c, const uint32_t *order, size_t first, int n)
{
    return s_gather(c, &c->train, order + first, n);
}

/* Waits for handle h of a rows request; the reason of a failure into err. */
static int s_wait(ps_kv_t *kv, int h, const char *what, char *err, size_t cap)
{
    const int rc = h < 0 ? h : ps_kv_wait(kv, h);
    if (rc != 0) {
        snprintf(err, cap, "%s failed: %s", what, ps_kv_error(kv));
    }
    return rc;
}

/* Pulls the batch's rows into the model at version >= min_version. */
static int s_pull_rows(ps_ctr_job_t *c, ps_kv_t *kv, int64_t min_version, char *err, size_t cap)
{
    const int h = ps_kv_rows_pull(kv, c->keys, (size_t)c->b.U, c->dim, ps_model_rows(c->m),
                                  min_version);
    return s_wait(kv, h, "pulling rows", err, cap);
}

int ps_ctr_job_step(ps_ctr_job_t *c, ps_kv_t *kv, int64_t t, int64_t pull_version,
                    float *loss, int *push, char *err, size_t cap)
{
    int rc = s_pull_rows(c, kv, pull_version, err, cap);
    if (rc != 0) {
        return rc;
    }
    rc = ps_model_train_step_ctr(c->m, &c->b, c->num, c->label, c->n, loss);
    if (rc != 0) {
        snprintf(err, cap, "training step failed: %s", ps_strerror(rc));
        return rc;
    }
    *push = ps_kv_rows_push(kv, c->keys, (size_t)c->b.U, c->dim, ps_model_row_grads(c->m), t);
    if (*push < 0) {
        snprintf(err, cap, "pushing rows failed: %s", ps_kv_error(kv));
        return *push;
    }
    return 0;
}

int ps_ctr_job_evaluate(ps_ctr_job_t *c, ps_kv_t *kv, double *auc, double *logloss,
                        char *err, size_t cap)
{
    const ps_ctr_view_t *v = &c->test;
    for (size_t first = 0; first < v->n; first += (size_t)c->max_batch) {
        const size_t left = v->n - first;
        const int n = left < (size_t)c->max_batch ? (int)left : c->max_batch;
        const ps_ctr_view_t part = {(size_t)n, v->num + first * PS_CTR_NUM,
                                    v->keys + first * PS_CTR_CAT, v->label + first};
        int rc = s_gather(c, &part, NULL, n);
        rc = rc ? rc : s_pull_rows(c, kv, 0, err, cap);
        if (rc == 0 && (rc = ps_model_predict_ctr(c->m, &c->b, c->num, n, c->prob + first))) {
            snprintf(err, cap, "evaluation failed: %s", ps_strerror(rc));
        }
        if (rc != 0) {
            return rc;
        }
    }
    *auc = ps_auc(c->prob, v->label, v->n);
    *logloss = ps_logloss(c->prob, v->label, v->n);
    return 0;
}
