/*
 * worker/ctr_job.c - a worker's side of a job with embedding rows: batches
 * in the order of their keys' hashes, rows pulled before and pushed after
 * each step (from and to the servers, or the rows' other home), the
 * held-out AUC (see ctr_job.h).
 */
#include "worker/ctr_job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auc.h"
#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "common/rowkey.h"
#include "worker/ctr_data.h"
#include "worker/models/embed.h"

/* A batch gathered from the click log: its samples' fields, and its keys
 * deduplicated by hash. */
typedef struct {
    ps_embed_batch_t b;    /* the batch's lookups, by hash */
    uint64_t *hashes;      /* [max_batch*26] the batch's keys' hashes */
    uint64_t *keys;        /* [max_batch*26] b's distinct hashes' keys, in their order */
    float *num;            /* numeric fields */
    uint8_t *label;        /* labels */
    int n;                 /* samples; 0: none gathered */
} s_batch_t;

struct ps_ctr_job {
    ps_model_t *m;         /* borrowed */
    int max_batch;         /* the model's */
    size_t dim;            /* floats per row */
    ps_ctr_set_t set;      /* the whole log */
    ps_ctr_view_t train;   /* its first rows */
    ps_ctr_view_t test;    /* its held-out tail */
    s_batch_t cur;         /* the batch of the step (num, label: the model's buffers) */
    int micro;             /* --micro-batch: samples per micro-batch (the batch: one) */
    ps_embed_batch_t mb;   /* micro-batches: one's lookups */
    float *rows;           /* micro-batches: [cap x dim] the batch's rows as pulled */
    float *sum;            /* and their gradients' sum over the micro-batches */
    unsigned char *seen;   /* [cap] whether a row of the batch has a gradient yet */
    float *dense;          /* [P] the dense gradients' sum over the micro-batches */
    float *prob;           /* [test.n] evaluation's click probabilities */
    size_t eval_span;      /* held-out samples whose rows evaluation pulls at once */
    uint64_t *eval_hashes; /* [eval_span*26] their distinct hashes, ascending */
    uint64_t *eval_keys;   /* and keys */
    float *eval_rows;      /* and rows */
    ps_ctr_rows_t home;    /* the rows' home when not the servers (fetch NULL: servers) */
    /* The next step's batch, gathered, and the pull of its rows sent before
     * this step's push (ps_ctr_next_t): the servers answer each piece of it
     * as soon as this step's rows of that piece are applied. */
    s_batch_t ahead;       /* that batch (ahead.n 0: none) */
    const uint32_t *ahead_order; /* which rows of the log: ahead_order[ahead_first ..] */
    size_t ahead_first;
    float *early_rows;     /* [cap x dim] its rows, as pulled */
    int early;             /* the pull's handle; -1: none */
    int early_is_cur;      /* the pull is the current batch's (it was ahead) */
    ps_kv_t *early_kv;     /* the client it went to */
    uint64_t early_rollbacks; /* ps_kv_rollbacks() when it went: a rollback voids it */
};

/* The buffers of a batch of up to max_batch samples; num and label the
 * caller's, or (NULL) its own. Returns 0 or PS_ENOMEM. */
static int s_batch_init(s_batch_t *x, int max_batch, float *num, uint8_t *label)
{
    const size_t positions = (size_t)max_batch * PS_CTR_CAT;
    x->hashes = malloc(positions * sizeof *x->hashes);
    x->keys = malloc(positions * sizeof *x->keys);
    x->num = num ? num : malloc((size_t)max_batch * PS_CTR_NUM * sizeof *x->num);
    x->label = label ? label : malloc((size_t)max_batch);
    return x->hashes && x->keys && x->num && x->label &&
                   ps_embed_batch_init(&x->b, (int)positions, NULL) == 0
               ? 0
               : PS_ENOMEM;
}

static void s_batch_fini(s_batch_t *x, int own_fields)
{
    ps_embed_batch_fini(&x->b);
    free(x->hashes);
    free(x->keys);
    if (own_fields) {
        free(x->num);
        free(x->label);
    }
}

int ps_ctr_job_new(ps_ctr_job_t **out, const char *path, ps_model_t *m, int max_batch,
                   int micro_batch, char *err, size_t cap)
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
    if (c->set.bad > 0) {
        ps_log_warn("%s: %llu malformed lines skipped (the first: %s)", path,
                    (unsigned long long)c->set.bad, err);
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
    c->prob = malloc((c->test.n ? c->test.n : 1) * sizeof *c->prob);
    c->early_rows = malloc(positions * c->dim * sizeof *c->early_rows);
    c->early = -1;
    c->micro = micro_batch;
    if (micro_batch > 0) {
        c->rows = malloc(positions * c->dim * sizeof *c->rows);
        c->sum = malloc(positions * c->dim * sizeof *c->sum);
        c->seen = malloc(positions);
        c->dense = malloc(ps_model_num_params(m) * sizeof *c->dense);
    }
    if (!c->prob || !c->early_rows ||
        s_batch_init(&c->cur, max_batch, ps_model_batch_x(m), ps_model_batch_y(m)) != 0 ||
        s_batch_init(&c->ahead, max_batch, NULL, NULL) != 0 ||
        (micro_batch > 0 && (!c->rows || !c->sum || !c->seen || !c->dense ||
                             ps_embed_batch_init(&c->mb, (int)positions, NULL) != 0))) {
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
    s_batch_fini(&c->cur, 0);
    s_batch_fini(&c->ahead, 1);
    ps_embed_batch_fini(&c->mb);
    free(c->rows);
    free(c->sum);
    free(c->seen);
    free(c->dense);
    free(c->early_rows);
    free(c->prob);
    free(c->eval_hashes);
    free(c->eval_keys);
    free(c->eval_rows);
    free(c);
    *cp = NULL;
}

size_t ps_ctr_job_train_samples(const ps_ctr_job_t *c)
{
    return c->train.n;
}

/* Rows rows[i] of view v (i < n) into batch x: numeric fields, labels and
 * the keys' hashes, deduplicated (the distinct keys in x->keys). */
static int s_gather(ps_ctr_job_t *c, s_batch_t *x, const ps_ctr_view_t *v,
                    const uint32_t *rows, int n)
{
    if (n < 1 || n > c->max_batch) {
        return PS_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        const size_t r = rows ? rows[i] : (size_t)i;
        memcpy(x->num + (size_t)i * PS_CTR_NUM, v->num + r * PS_CTR_NUM,
               PS_CTR_NUM * sizeof *x->num);
        x->label[i] = v->label[r] != 0;
        const uint64_t *k = v->keys + r * PS_CTR_CAT;
        for (int f = 0; f < PS_CTR_CAT; f++) {
            x->hashes[(size_t)i * PS_CTR_CAT + f] = ps_rowkey_hash(k[f]);
        }
    }
    const int U = ps_embed_batch_build(&x->b, x->hashes, n, PS_CTR_CAT);
    if (U < 0) {
        return U;
    }
    for (int u = 0; u < U; u++) {
        x->keys[u] = ps_rowkey_unhash(x->b.keys[u]);
    }
    x->n = n;
    return 0;
}

/* The batch gathered ahead becomes the current one: its lookups swapped
 * in, its fields copied into the model's buffers. */
static void s_take_ahead(ps_ctr_job_t *c)
{
    s_batch_t *x = &c->cur, *a = &c->ahead;
    const ps_embed_batch_t b = x->b;
    uint64_t *hashes = x->hashes, *keys = x->keys;
    x->b = a->b;
    x->hashes = a->hashes;
    x->keys = a->keys;
    a->b = b;
    a->hashes = hashes;
    a->keys = keys;
    memcpy(x->num, a->num, (size_t)a->n * PS_CTR_NUM * sizeof *x->num);
    memcpy(x->label, a->label, (size_t)a->n);
    x->n = a->n;
    a->n = 0;
}

/* Waits for the early pull and forgets it: 0 with its rows in early_rows,
 * its failure (reason in err), or PS_EAGAIN when there is none or a
 * rollback voided its handle. */
static int s_early_wait(ps_ctr_job_t *c, char *err, size_t cap)
{
    const int h = c->early;
    c->early = -1;
    c->early_is_cur = 0;
    if (h < 0 || ps_kv_rollbacks(c->early_kv) != c->early_rollbacks) {
        return PS_EAGAIN;
    }
    const int rc = ps_kv_wait(c->early_kv, h);
    if (rc != 0) {
        snprintf(err, cap, "pulling rows failed: %s", ps_kv_error(c->early_kv));
    }
    return rc;
}

int ps_ctr_job_batch(ps_ctr_job_t *c, const uint32_t *order, size_t first, int n)
{
    if (c->ahead.n == n && c->ahead_order == order && c->ahead_first == first) {
        s_take_ahead(c);
        c->early_is_cur = c->early >= 0;
        return 0;
    }
    c->ahead.n = 0;
    if (c->early >= 0) { /* another batch came: its pull is not needed */
        char why[160];
        s_early_wait(c, why, sizeof why);
    }
    return s_gather(c, &c->cur, &c->train, order + first, n);
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

/* The rows of keys[0..n) at version >= min_version into out: pulled from
 * the servers, or fetched from the rows' other home. A replica's takeover
 * meanwhile rolls nothing back, and no other request is in flight: the
 * pull goes again. */
static int s_fetch(ps_ctr_job_t *c, ps_kv_t *kv, const uint64_t *keys, size_t n, float *out,
                   int64_t min_version, char *err, size_t cap)
{
    if (c->home.fetch) {
        return c->home.fetch(c->home.arg, keys, n, out, min_version, err, cap);
    }
    int rc;
    int64_t step;
    while ((rc = s_wait(kv, ps_kv_rows_pull(kv, keys, n, c->dim, out, min_version),
                        "pulling rows", err, cap)) == PS_EAGAIN &&
           ps_kv_takeover_pending(kv)) {
        ps_kv_rollback(kv, &step);
    }
    return rc;
}

/* The gradient grads of the batch's rows for step t: pushed to the servers
 * (the request's handle into *push) or handed to the rows' other home. */
static int s_push(ps_ctr_job_t *c, ps_kv_t *kv, const float *grads, int64_t t, int *push,
                  char *err, size_t cap)
{
    const size_t U = (size_t)c->cur.b.U;
    if (c->home.push) {
        return c->home.push(c->home.arg, c->cur.keys, U, grads, t, push, err, cap);
    }
    *push = ps_kv_rows_push(kv, c->cur.keys, U, c->dim, grads, t);
    if (*push < 0) {
        snprintf(err, cap, "pushing rows failed: %s", ps_kv_error(kv));
        return *push;
    }
    return 0;
}

/* The current batch's rows at version >= min_version into out: from the
 * pull sent while the step before pushed, or pulled now (also when that
 * pull was voided or failed by a replica's takeover). */
static int s_batch_rows(ps_ctr_job_t *c, ps_kv_t *kv, float *out, int64_t min_version,
                        char *err, size_t cap)
{
    const size_t U = (size_t)c->cur.b.U;
    if (c->early_is_cur) {
        const int rc = s_early_wait(c, err, cap);
        if (rc == 0) {
            memcpy(out, c->early_rows, U * c->dim * sizeof *out);
            return 0;
        }
        if (rc != PS_EAGAIN) {
            return rc;
        }
        err[0] = '\0';
    }
    return s_fetch(c, kv, c->cur.keys, U, out, min_version, err, cap);
}

/* The next step's batch gathered and the pull of its rows sent, before
 * this step's push, so the servers answer it piece by piece as the push
 * applies. Nothing when there is no next step to gather or the rows are
 * not the servers'; a pull that cannot go is left to the next step. */
static void s_pull_ahead(ps_ctr_job_t *c, ps_kv_t *kv, const ps_ctr_next_t *next)
{
    if (!next || c->home.fetch || c->early >= 0 ||
        s_gather(c, &c->ahead, &c->train, next->order + next->first, next->n) != 0) {
        return;
    }
    c->ahead_order = next->order;
    c->ahead_first = next->first;
    c->early_kv = kv;
    c->early_rollbacks = ps_kv_rollbacks(kv);
    c->early = ps_kv_rows_pull(kv, c->ahead.keys, (size_t)c->ahead.b.U, c->dim, c->early_rows,
                               next->version);
    c->early = c->early < 0 ? -1 : c->early;
}

/* The index of hash h in hashes[0..n) (ascending; h is among them). */
static size_t s_index_of(const uint64_t *hashes, size_t n, uint64_t h)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (hashes[mid] <= h) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* The batch's row of hash h: its index in the batch's distinct hashes. */
static size_t s_row_of(const ps_ctr_job_t *c, uint64_t h)
{
    return s_index_of(c->cur.b.keys, (size_t)c->cur.b.U, h);
}

/* Micro-batch j of the batch (its rows in c->rows): its lookups, its rows
 * into the model, its step; its row gradients summed into c->sum in order,
 * as a server sums workers' pushes (the first one copied). */
static int s_micro_step(ps_ctr_job_t *c, int j, float *loss, char *err, size_t cap)
{
    const int n = c->micro;
    const size_t at = (size_t)j * n, dim = c->dim;
    const int U = ps_embed_batch_build(&c->mb, c->cur.hashes + at * PS_CTR_CAT, n, PS_CTR_CAT);
    float *rows = ps_model_rows(c->m), *grads = ps_model_row_grads(c->m);
    for (int u = 0; u < U; u++) {
        memcpy(rows + (size_t)u * dim, c->rows + s_row_of(c, c->mb.keys[u]) * dim,
               dim * sizeof *rows);
    }
    int rc = ps_model_train_step_ctr(c->m, &c->mb, c->cur.num + at * PS_CTR_NUM,
                                     c->cur.label + at, n, loss);
    if (rc != 0) {
        snprintf(err, cap, "training step failed: %s", ps_strerror(rc));
        return rc;
    }
    for (int u = 0; u < U; u++) {
        const size_t r = s_row_of(c, c->mb.keys[u]);
        ps_optim_accumulate(c->sum + r * dim, grads + (size_t)u * dim, 1.0f, dim, !c->seen[r]);
        c->seen[r] = 1;
    }
    return 0;
}

/* The batch's step in micro-batches (--micro-batch): its rows pulled once,
 * each micro-batch's step on them, the sums of their gradients (rows into
 * c->sum, dense into the model's gradient). */
static int s_micro_steps(ps_ctr_job_t *c, ps_kv_t *kv, int64_t pull_version, float *loss,
                         char *err, size_t cap)
{
    int rc = s_batch_rows(c, kv, c->rows, pull_version, err, cap);
    if (rc != 0) {
        return rc;
    }
    const int k = c->cur.n / c->micro;
    const size_t P = ps_model_num_params(c->m);
    float *grads = ps_model_grads(c->m), sum = 0;
    memset(c->seen, 0, (size_t)c->cur.b.U);
    for (int j = 0; j < k && rc == 0; j++) {
        float l = 0;
        rc = s_micro_step(c, j, &l, err, cap);
        ps_optim_accumulate(c->dense, grads, 1.0f, P, j == 0);
        sum += l;
    }
    if (rc != 0) {
        return rc;
    }
    memcpy(grads, c->dense, P * sizeof *grads);
    *loss = sum / (float)k;
    return 0;
}

/* The batch's step in one: its rows into the model, forward and backward. */
static int s_whole_step(ps_ctr_job_t *c, ps_kv_t *kv, int64_t pull_version, float *loss,
                        char *err, size_t cap)
{
    int rc = s_batch_rows(c, kv, ps_model_rows(c->m), pull_version, err, cap);
    if (rc != 0) {
        return rc;
    }
    rc = ps_model_train_step_ctr(c->m, &c->cur.b, c->cur.num, c->cur.label, c->cur.n, loss);
    if (rc != 0) {
        snprintf(err, cap, "training step failed: %s", ps_strerror(rc));
    }
    return rc;
}

/* The rows gradient the step pushes: the micro-batches' sum, or the model's. */
static const float *s_row_grads(const ps_ctr_job_t *c)
{
    return c->micro > 0 && c->micro < c->cur.n ? c->sum : ps_model_row_grads(c->m);
}

int ps_ctr_job_step(ps_ctr_job_t *c, ps_kv_t *kv, int64_t t, int64_t pull_version,
                    const ps_ctr_next_t *next, float *loss, char *err, size_t cap)
{
    int push; /* the rows' other home takes them now and gives no handle */
    const int rc = c->micro > 0 && c->micro < c->cur.n
                       ? s_micro_steps(c, kv, pull_version, loss, err, cap)
                       : s_whole_step(c, kv, pull_version, loss, err, cap);
    if (rc != 0) {
        return rc;
    }
    s_pull_ahead(c, kv, next);
    return c->home.push ? s_push(c, kv, s_row_grads(c), t, &push, err, cap) : 0;
}

int ps_ctr_job_push(ps_ctr_job_t *c, ps_kv_t *kv, int64_t t, int *push, char *err, size_t cap)
{
    *push = -1;
    return c->home.push ? 0 : s_push(c, kv, s_row_grads(c), t, push, err, cap);
}

/* Ascending, for qsort. */
static int s_cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The hashes of keys[0..n) into h, ascending, each once. Returns how many. */
static size_t s_distinct_hashes(const uint64_t *keys, size_t n, uint64_t *h)
{
    for (size_t i = 0; i < n; i++) {
        h[i] = ps_rowkey_hash(keys[i]);
    }
    qsort(h, n, sizeof *h, s_cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || h[i] != h[u - 1]) {
            h[u++] = h[i];
        }
    }
    return u;
}

int ps_ctr_job_vocab(const ps_ctr_job_t *c, uint64_t **hashes, size_t *n)
{
    const size_t all = c->set.n * PS_CTR_CAT;
    uint64_t *h = malloc((all ? all : 1) * sizeof *h);
    *hashes = NULL;
    *n = 0;
    if (!h) {
        return PS_ENOMEM;
    }
    *hashes = h;
    *n = s_distinct_hashes(c->set.keys, all, h);
    return 0;
}

void ps_ctr_job_set_rows(ps_ctr_job_t *c, const ps_ctr_rows_t *rows)
{
    c->home = *rows;
}

int ps_ctr_job_dump_rows(ps_ctr_job_t *c, ps_kv_t *kv, FILE *f, char *err, size_t cap)
{
    const size_t chunk = (size_t)c->cur.b.cap;
    uint64_t *h = NULL;
    size_t n = 0;
    float *rows = malloc(chunk * c->dim * sizeof *rows);
    if (!rows || ps_ctr_job_vocab(c, &h, &n) != 0) {
        free(rows);
        snprintf(err, cap, "out of memory for the rows of --dump-params");
        return PS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) { /* the hashes back to keys, in their order */
        h[i] = ps_rowkey_unhash(h[i]);
    }
    int rc = 0;
    for (size_t at = 0; at < n && rc == 0; at += chunk) {
        const size_t m = n - at < chunk ? n - at : chunk;
        rc = s_fetch(c, kv, h + at, m, rows, 0, err, cap);
        for (size_t i = 0; i < m && rc == 0; i++) {
            if (fwrite(h + at + i, sizeof *h, 1, f) != 1 ||
                fwrite(rows + i * c->dim, sizeof *rows, c->dim, f) != c->dim) {
                rc = PS_EIO;
            }
        }
    }
    free(h);
    free(rows);
    return rc;
}

/* Evaluation's buffers, made at its first call (worker 0 alone evaluates):
 * a span of held-out samples whose distinct rows are pulled once, about
 * 32 MiB of rows and at least a batch. Returns 0 or PS_ENOMEM. */
static int s_eval_buffers(ps_ctr_job_t *c)
{
    if (c->eval_rows) {
        return 0;
    }
    const size_t per = (size_t)c->max_batch * PS_CTR_CAT;
    const size_t batches = ((size_t)32 << 20) / (per * c->dim * sizeof(float));
    c->eval_span = (size_t)c->max_batch * (batches ? batches : 1);
    const size_t positions = c->eval_span * PS_CTR_CAT;
    c->eval_hashes = malloc(positions * sizeof *c->eval_hashes);
    c->eval_keys = malloc(positions * sizeof *c->eval_keys);
    c->eval_rows = malloc(positions * c->dim * sizeof *c->eval_rows);
    return c->eval_hashes && c->eval_keys && c->eval_rows ? 0 : PS_ENOMEM;
}

/* The rows of the distinct keys of held-out samples [from, from + m), as the
 * servers (or the rows' other home) hold them, into c->eval_rows in the
 * order of their hashes (c->eval_hashes, *n of them), pulled a step's keys
 * at a time: each row once, not once per batch. */
static int s_eval_rows(ps_ctr_job_t *c, ps_kv_t *kv, size_t from, size_t m, size_t *n,
                       char *err, size_t cap)
{
    *n = s_distinct_hashes(c->test.keys + from * PS_CTR_CAT, m * PS_CTR_CAT, c->eval_hashes);
    for (size_t i = 0; i < *n; i++) {
        c->eval_keys[i] = ps_rowkey_unhash(c->eval_hashes[i]);
    }
    const size_t chunk = (size_t)c->cur.b.cap;
    int rc = 0;
    for (size_t at = 0; at < *n && rc == 0; at += chunk) {
        const size_t k = *n - at < chunk ? *n - at : chunk;
        rc = s_fetch(c, kv, c->eval_keys + at, k, c->eval_rows + at * c->dim, 0, err, cap);
    }
    return rc;
}

/* The current batch's rows into the model, from the span's rows (hashes[0..n)
 * ascending, each row at its index). */
static void s_eval_batch_rows(ps_ctr_job_t *c, size_t n)
{
    float *rows = ps_model_rows(c->m);
    for (int u = 0; u < c->cur.b.U; u++) { /* the batch's keys are the span's: found */
        const size_t at = s_index_of(c->eval_hashes, n, c->cur.b.keys[u]);
        memcpy(rows + (size_t)u * c->dim, c->eval_rows + at * c->dim, c->dim * sizeof *rows);
    }
}

/* Predicts held-out samples [first, first + n) into c->prob, their rows
 * from the span's (n_rows of them). */
static int s_eval_batch(ps_ctr_job_t *c, size_t first, int n, size_t n_rows, char *err,
                        size_t cap)
{
    const ps_ctr_view_t *v = &c->test;
    const ps_ctr_view_t part = {(size_t)n, v->num + first * PS_CTR_NUM,
                                v->keys + first * PS_CTR_CAT, v->label + first};
    int rc = s_gather(c, &c->cur, &part, NULL, n);
    if (rc == 0) {
        s_eval_batch_rows(c, n_rows);
        rc = ps_model_predict_ctr(c->m, &c->cur.b, c->cur.num, n, c->prob + first);
    }
    if (rc != 0) {
        snprintf(err, cap, "evaluation failed: %s", ps_strerror(rc));
    }
    return rc;
}

int ps_ctr_job_evaluate(ps_ctr_job_t *c, ps_kv_t *kv, double *auc, double *logloss,
                        char *err, size_t cap)
{
    const ps_ctr_view_t *v = &c->test;
    if (s_eval_buffers(c) != 0) {
        snprintf(err, cap, "out of memory to evaluate");
        return PS_ENOMEM;
    }
    for (size_t from = 0; from < v->n; from += c->eval_span) {
        const size_t m = v->n - from < c->eval_span ? v->n - from : c->eval_span;
        size_t n_rows;
        int rc = s_eval_rows(c, kv, from, m, &n_rows, err, cap);
        for (size_t first = from; first < from + m && rc == 0; first += (size_t)c->max_batch) {
            const size_t left = from + m - first;
            const int n = left < (size_t)c->max_batch ? (int)left : c->max_batch;
            rc = s_eval_batch(c, first, n, n_rows, err, cap);
        }
        if (rc != 0) {
            return rc;
        }
    }
    *auc = ps_auc(c->prob, v->label, v->n);
    *logloss = ps_logloss(c->prob, v->label, v->n);
    return 0;
}
