/*
 * worker/allreduce.c - the ring's side of a worker's training (see
 * allreduce.h).
 *
 * The same batches and the same optimizer code as the servers (ps_optim_step
 * with the schedule's lr of step t and scale 1/M, update count t + 1), applied
 * by every worker to the ring's sum, so the parameters stay bitwise identical
 * on every worker and match sync training up to the order in which the ring
 * adds the M gradients. The ring itself is worker/ring.c; with --overlap 1 a
 * thread of worker/overlap.c owns it during each step. With
 * --allreduce-backend mpi, MPI_Allreduce (worker/ring_mpi.c) sums instead,
 * after backward (no overlap), and the rest of the step is the same.
 *
 * A model with embedding rows (--model ctr) keeps them in every worker's
 * own table (worker/ring_rows.c): the step sums them with the dense
 * gradient (--ring-rows dense) or passes each worker's rows round the ring
 * after it (allgather), then steps them as a server would; its steps are
 * summed after backward (no overlap).
 */
#include "worker/allreduce.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "worker/overlap.h"
#include "worker/ring.h"
#include "worker/ring_mpi.h"
#include "worker/ring_rows.h"

struct ps_allreduce {
    ps_allreduce_flags_t f; /* --ring-kib, --allreduce-backend, --overlap */
    const ps_job_t *job;   /* its optimizer and schedule; borrowed */
    const ps_view_t *view; /* the ring's workers; borrowed, from start */
    ps_model_t *model;     /* borrowed */
    ps_kv_t *kv;           /* the job's status while the ring waits; borrowed, from start */
    int rank;              /* this worker's */
    ps_ring_t *ring;       /* this worker's place in the ring */
    ps_ring_mpi_t *mpi;    /* --allreduce-backend mpi: sums instead of the ring */
    ps_overlap_t *overlap; /* --overlap 1: the ring's thread */
    ps_ring_rows_t *rows;  /* --model ctr: every row, this worker's own */
    atomic_int stopping;   /* set before tearing down: the ring gives up waiting */
    ps_optim_t opt;        /* the job's optimizer, applied locally */
    float *state;          /* its state, ps_optim_state_floats() arrays of P */
    float *sums;           /* 2M floats for the start-up check (lives as long as the
                              ring: a failed ring may still hold its frames) */
    char *err;             /* where failures' reasons go; borrowed */
    size_t errlen;
};

/* The ring's question while it waits: is the job still there (and are we)? */
static int s_ring_check(void *arg)
{
    ps_allreduce_t *a = arg;
    if (atomic_load(&a->stopping)) {
        return PS_ECLOSED;
    }
    return ps_kv_status(a->kv);
}

/* The model's gradient-ready hook: hands the final buckets to the ring's thread. */
static void s_grads_ready(void *arg, size_t from)
{
    ps_overlap_ready(arg, from);
}

/* A ring failure's reason: the job's end when that was the cause. */
static int s_ring_failed(ps_allreduce_t *a, int rc, const char *what)
{
    snprintf(a->err, a->errlen, "%s failed: %s", what,
             rc == PS_ECLOSED && ps_kv_status(a->kv) ? ps_kv_error(a->kv)
             : a->mpi                                ? ps_ring_mpi_error(a->mpi)
                                                     : ps_ring_error(a->ring));
    return rc;
}

/* buf[0..n) summed over the workers, by the backend chosen at start-up. */
static int s_sum(ps_allreduce_t *a, float *buf, uint64_t n, int64_t step)
{
    return a->mpi ? ps_ring_mpi_allreduce(a->mpi, buf, n)
                  : ps_ring_allreduce(a->ring, buf, n, step);
}

/* allreduce, one step: sum the gradients over the ring, then apply the
 * optimizer exactly as a sync server would to the mean (scale 1/M); a
 * model's rows with them. */
int ps_allreduce_step(ps_allreduce_t *a, int64_t t)
{
    const uint64_t P = a->view->num_params;
    float *params = ps_model_params(a->model), *grads = ps_model_grads(a->model);
    uint64_t n = P;
    float *sum = a->rows ? ps_ring_rows_vector(a->rows, grads, &n) : grads;
    int rc = a->overlap ? ps_overlap_wait(a->overlap) : s_sum(a, sum, n, t);
    if (rc != 0) {
        return s_ring_failed(a, rc, "ring allreduce");
    }
    if (a->rows && (rc = ps_ring_rows_exchange(a->rows, a->ring, t)) != 0) {
        return s_ring_failed(a, rc, "passing the rows round the ring");
    }
    const float lr = ps_optim_lr(a->job, t, a->view->steps_per_epoch, a->view->total_steps);
    const float scale = 1.0f / (float)a->view->num_workers;
    ps_optim_step(&a->opt, lr, t + 1, params, a->state, P, sum, scale, P);
    if (a->rows) {
        ps_ring_rows_apply(a->rows, lr, scale);
    }
    return 0;
}

void ps_allreduce_begin(ps_allreduce_t *a, int64_t t)
{
    if (a->overlap) {
        ps_overlap_begin(a->overlap, t);
    }
}

void ps_allreduce_bytes(const ps_allreduce_t *a, uint64_t *sent, uint64_t *received)
{
    if (a->mpi) {
        ps_ring_mpi_bytes(a->mpi, sent, received);
    } else {
        ps_ring_bytes(a->ring, sent, received);
    }
}

int ps_allreduce_new(ps_ctx_t *ctx, const ps_allreduce_flags_t *f, const ps_job_t *job,
                     ps_model_t *model, ps_ctr_job_t *ctr, char *bound, size_t bound_cap,
                     char *err, size_t errlen, ps_allreduce_t **out)
{
    ps_allreduce_t *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    *out = a;
    *a = (ps_allreduce_t){.f = *f, .job = job, .model = model, .err = err, .errlen = errlen};
    atomic_init(&a->stopping, 0);
    const uint64_t P = ps_model_num_params(model);
    if (ctr) {
        int rc = ps_ring_rows_new(&a->rows, job, ctr, P, err, errlen);
        if (rc != 0) {
            return rc;
        }
        const ps_ctr_rows_t home = ps_ring_rows_home(a->rows);
        ps_ctr_job_set_rows(ctr, &home);
    }
    /* no ring message is longer than the model (or its rows): a longer frame is dropped */
    const uint64_t rows = a->rows ? ps_ring_rows_max_floats(a->rows) : 0;
    return ps_ring_new(ctx, f->bind, rows > P ? rows : P, &a->ring, bound, bound_cap, err,
                       errlen);
}

void ps_allreduce_stop(ps_allreduce_t *a)
{
    if (!a) {
        return;
    }
    atomic_store(&a->stopping, 1);
    ps_overlap_destroy(&a->overlap); /* before the ring it borrows */
    ps_ring_destroy(&a->ring);
    ps_ring_rows_destroy(&a->rows); /* after the ring that may hold its frames */
}

void ps_allreduce_destroy(ps_allreduce_t **ap, int failed)
{
    ps_allreduce_t *a = ap ? *ap : NULL;
    if (!a) {
        return;
    }
    ps_allreduce_stop(a);
    ps_ring_mpi_destroy(&a->mpi, failed);
    free(a->state);
    free(a->sums);
    free(a);
    *ap = NULL;
}

/* FNV-1a over the bytes of n floats. */
static uint32_t s_checksum(const float *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n * sizeof *p; i++) {
        h = (h ^ b[i]) * 16777619u;
    }
    return h;
}

/* With rows: the table's room for the ring's blocks, and what it costs. */
static int s_rows_start(ps_allreduce_t *a)
{
    const int M = a->view->num_workers;
    if (a->mpi && a->job->ring_rows == PS_RING_ROWS_ALLGATHER) {
        snprintf(a->err, a->errlen, "--allreduce-backend mpi sums vectors only: "
                 "--ring-rows allgather needs the ring (or --ring-rows dense)");
        return PS_EINVAL;
    }
    if (ps_ring_rows_start(a->rows, M, a->rank) != 0) {
        snprintf(a->err, a->errlen, "out of memory for the rows of %d workers", M);
        return PS_ENOMEM;
    }
    if (a->rank == 0) {
        ps_log_info("rows: %zu in every worker's table, %d floats each; --ring-rows %s",
                    ps_ring_rows_count(a->rows), a->job->embed_dim,
                    ps_job_ring_rows_name(a->job));
    }
    return 0;
}

/* Every worker holds the same parameters (and with rows, the tables' keys:
 * every worker must read the same click log). The check is itself an
 * allreduce, of 2M floats where worker r writes the two 16-bit halves of
 * its checksum at [2r, 2r+2) (exact in float32), so it also proves the ring
 * works end to end before the first step. */
static int s_check_params(ps_allreduce_t *a, size_t sub_floats)
{
    const int M = a->view->num_workers, rank = a->rank;
    const uint32_t mine = s_checksum(ps_model_params(a->model), a->view->num_params) ^
                          (a->rows ? ps_ring_rows_checksum(a->rows) : 0);
    float *sums = a->sums;
    sums[2 * rank] = (float)(mine >> 16);
    sums[2 * rank + 1] = (float)(mine & 0xffff);
    int rc = s_sum(a, sums, 2 * (uint64_t)M, -1);
    if (rc != 0) {
        return s_ring_failed(a, rc, "checking the initial parameters over the ring");
    }
    for (int i = 0; i < M && rc == 0; i++) {
        uint32_t theirs = ((uint32_t)sums[2 * i] << 16) | (uint32_t)sums[2 * i + 1];
        if (theirs != mine) {
            snprintf(a->err, a->errlen,
                     "W%d initialised different parameters (checksum %08x, ours %08x): "
                     "different builds or models%s?", i, theirs, mine,
                     a->rows ? ", or click logs" : "");
            rc = PS_ESTATE;
        }
    }
    if (rc == 0 && rank == 0 && a->mpi) {
        ps_log_info("MPI_Allreduce over %d ranks ready: initial parameters agree (checksum "
                    "%08x); no overlap", M, mine);
    } else if (rc == 0 && rank == 0) {
        ps_log_info("ring of %d workers ready: initial parameters agree (checksum %08x), "
                    "%zu KiB per message", M, mine, sub_floats * sizeof(float) / 1024);
    }
    return rc;
}

/* --overlap 1: plans the buckets from the model's tensors and starts the
 * thread that owns the ring from now on. */
static int s_overlap_start(ps_allreduce_t *a)
{
    if (a->rows) { /* the rows' sums need the whole backward: nothing to overlap with */
        if (a->rank == 0) {
            ps_log_info("overlap: off for a model with rows (summed after backward)");
        }
        return 0;
    }
    const size_t nt = ps_model_num_tensors(a->model);
    size_t offsets[64];
    ps_range_t buckets[PS_OVERLAP_MAX_BUCKETS];
    if (nt > sizeof offsets / sizeof offsets[0]) {
        snprintf(a->err, a->errlen, "overlap: model has too many tensors (%zu)", nt);
        return PS_EINVAL;
    }
    for (size_t i = 0; i < nt; i++) {
        offsets[i] = ps_model_tensor(a->model, i)->offset;
    }
    const uint64_t P = a->view->num_params;
    int nb = ps_overlap_plan(offsets, nt, P, 0, buckets, PS_OVERLAP_MAX_BUCKETS);
    int rc = nb < 0 ? nb
                    : ps_overlap_new(a->ring, ps_model_grads(a->model), P, buckets, nb,
                                     &a->overlap);
    if (rc != 0) {
        snprintf(a->err, a->errlen, "overlap: cannot start: %s", ps_strerror(rc));
        return rc;
    }
    ps_model_set_grad_ready(a->model, s_grads_ready, a->overlap);
    if (a->rank == 0) {
        ps_log_info("overlap: %d gradient buckets, the last [%llu, %llu) first", nb,
                    (unsigned long long)buckets[0].begin,
                    (unsigned long long)buckets[0].end);
    }
    return 0;
}

int ps_allreduce_start(ps_allreduce_t *a, const ps_view_t *view, ps_kv_t *kv, int rank,
                       uint64_t token)
{
    const int M = view->num_workers;
    a->view = view;
    a->kv = kv;
    a->rank = rank;
    ps_ring_config_t rc_cfg = {
        .rank = rank,
        .size = M,
        .right = view->workers[(rank + 1) % M].endpoint,
        .right_key = view->workers[(rank + 1) % M].curve_key,
        .token = token,
        .left_token = view->worker_tokens[(rank + M - 1) % M],
        .sub_floats = (size_t)a->f.ring_kib * 1024 / sizeof(float),
        .check = s_ring_check,
        .check_arg = a,
    };
    int rc = ps_ring_connect(a->ring, &rc_cfg, a->err, a->errlen);
    if (rc == 0 && a->f.mpi) {
        rc = ps_ring_mpi_new(M, &a->mpi, a->err, a->errlen);
    }
    if (rc != 0) {
        return rc;
    }
    if (ps_optim_from_job(a->job, &a->opt) != 0) {
        snprintf(a->err, a->errlen, "unknown optimizer '%s'", a->job->optimizer);
        return PS_EINVAL;
    }
    const uint64_t P = view->num_params;
    a->state = calloc(P * (size_t)(ps_optim_state_floats(&a->opt) + 1), sizeof(float));
    a->sums = calloc(2 * (size_t)M, sizeof(float));
    if (!a->state || !a->sums) {
        snprintf(a->err, a->errlen, "out of memory");
        return PS_ENOMEM;
    }
    if ((a->rows && (rc = s_rows_start(a)) != 0) ||
        (rc = s_check_params(a, rc_cfg.sub_floats)) != 0) {
        return rc;
    }
    return a->f.overlap && !a->mpi ? s_overlap_start(a) : 0;
}
