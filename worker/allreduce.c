/*
 * worker/allreduce.c - the ring's side of a worker's training loop (--mode
 * allreduce): joining the ring, the start-up check that every worker holds
 * the same parameters, and a step's sum over the ring with the optimizer
 * applied locally.
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
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/log.h"
#include "worker/worker_impl.h"

/* The ring's question while it waits: is the job still there (and are we)? */
static int s_ring_check(void *arg)
{
    ps_worker_t *w = arg;
    if (atomic_load(&w->stopping)) {
        return PS_ECLOSED;
    }
    return ps_kv_status(w->kv);
}

/* The model's gradient-ready hook: hands the final buckets to the ring's thread. */
static void s_grads_ready(void *arg, size_t from)
{
    ps_overlap_ready(arg, from);
}

/* A ring failure's reason: the job's end when that was the cause. */
static int s_ring_failed(ps_worker_t *w, int rc, const char *what)
{
    snprintf(w->err, sizeof w->err, "%s failed: %s", what,
             rc == PS_ECLOSED && ps_kv_status(w->kv) ? ps_kv_error(w->kv)
             : w->mpi                                ? ps_ring_mpi_error(w->mpi)
                                                     : ps_ring_error(w->ring));
    return rc;
}

/* buf[0..n) summed over the workers, by the backend chosen at start-up. */
static int s_sum(ps_worker_t *w, float *buf, uint64_t n, int64_t step)
{
    return w->mpi ? ps_ring_mpi_allreduce(w->mpi, buf, n)
                  : ps_ring_allreduce(w->ring, buf, n, step);
}

/* allreduce, one step: sum the gradients over the ring, then apply the
 * optimizer exactly as a sync server would to the mean (scale 1/M); a
 * model's rows with them. */
int ps_allreduce_step(ps_worker_t *w, int64_t t)
{
    const uint64_t P = w->view->num_params;
    float *params = ps_model_params(w->model), *grads = ps_model_grads(w->model);
    uint64_t n = P;
    float *sum = w->rows ? ps_ring_rows_vector(w->rows, grads, &n) : grads;
    int rc = w->overlap ? ps_overlap_wait(w->overlap) : s_sum(w, sum, n, t);
    if (rc != 0) {
        return s_ring_failed(w, rc, "ring allreduce");
    }
    if (w->rows && (rc = ps_ring_rows_exchange(w->rows, w->ring, t)) != 0) {
        return s_ring_failed(w, rc, "passing the rows round the ring");
    }
    const float lr = ps_optim_lr(&w->job, t, w->view->steps_per_epoch, w->view->total_steps);
    const float scale = 1.0f / (float)w->view->num_workers;
    ps_optim_step(&w->opt, lr, t + 1, params, w->state, P, sum, scale, P);
    if (w->rows) {
        ps_ring_rows_apply(w->rows, lr, scale);
    }
    return 0;
}

int ps_allreduce_rows_new(ps_worker_t *w)
{
    int rc = ps_ring_rows_new(&w->rows, &w->job, w->ctr, ps_model_num_params(w->model),
                              w->err, sizeof w->err);
    if (rc == 0) {
        const ps_ctr_rows_t home = ps_ring_rows_home(w->rows);
        ps_ctr_job_set_rows(w->ctr, &home);
    }
    return rc;
}

uint64_t ps_allreduce_max_floats(const ps_worker_t *w)
{
    const uint64_t P = ps_model_num_params(w->model);
    const uint64_t rows = w->rows ? ps_ring_rows_max_floats(w->rows) : 0;
    return rows > P ? rows : P;
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
static int s_rows_start(ps_worker_t *w)
{
    const int M = w->view->num_workers;
    if (w->mpi && w->job.ring_rows == PS_RING_ROWS_ALLGATHER) {
        snprintf(w->err, sizeof w->err, "--allreduce-backend mpi sums vectors only: "
                 "--ring-rows allgather needs the ring (or --ring-rows dense)");
        return PS_EINVAL;
    }
    if (ps_ring_rows_start(w->rows, M, w->rank) != 0) {
        snprintf(w->err, sizeof w->err, "out of memory for the rows of %d workers", M);
        return PS_ENOMEM;
    }
    if (w->rank == 0) {
        ps_log_info("rows: %zu in every worker's table, %d floats each; --ring-rows %s",
                    ps_ring_rows_count(w->rows), w->job.embed_dim,
                    ps_job_ring_rows_name(&w->job));
    }
    return 0;
}

/*
 * allreduce: joins the ring, initialises the parameters from the seed (the
 * same on every worker: ps_model_init_params is deterministic) and checks
 * that every worker got the same ones. The check is itself an allreduce, of
 * 2M floats where worker r writes the two 16-bit halves of its checksum at
 * [2r, 2r+2) (exact in float32), so it also proves the ring works end to end
 * before the first step.
 */
int ps_allreduce_start(ps_worker_t *w)
{
    const int M = w->view->num_workers, rank = w->rank;
    const uint64_t P = w->view->num_params;
    ps_ring_config_t rc_cfg = {
        .rank = rank,
        .size = M,
        .right = w->view->workers[(rank + 1) % M].endpoint,
        .right_key = w->view->workers[(rank + 1) % M].curve_key,
        .token = w->token,
        .left_token = w->view->worker_tokens[(rank + M - 1) % M],
        .sub_floats = (size_t)w->cfg->ring_kib * 1024 / sizeof(float),
        .check = s_ring_check,
        .check_arg = w,
    };
    int rc = ps_ring_connect(w->ring, &rc_cfg, w->err, sizeof w->err);
    if (rc == 0 && w->cfg->allreduce_mpi) {
        rc = ps_ring_mpi_new(M, &w->mpi, w->err, sizeof w->err);
    }
    if (rc != 0) {
        return rc;
    }
    if (ps_optim_from_job(&w->job, &w->opt) != 0) {
        snprintf(w->err, sizeof w->err, "unknown optimizer '%s'", w->job.optimizer);
        return PS_EINVAL;
    }
    w->state = calloc(P * (size_t)(ps_optim_state_floats(&w->opt) + 1), sizeof(float));
    float *sums = w->sums = calloc(2 * (size_t)M, sizeof(float));
    if (!w->state || !sums) {
        snprintf(w->err, sizeof w->err, "out of memory");
        return PS_ENOMEM;
    }
    if (w->rows && (rc = s_rows_start(w)) != 0) {
        return rc;
    }
    ps_worker_init_params(w);
    /* with rows, the tables' keys too: every worker must read the same click log */
    uint32_t mine = s_checksum(ps_model_params(w->model), P) ^
                    (w->rows ? ps_ring_rows_checksum(w->rows) : 0);
    sums[2 * rank] = (float)(mine >> 16);
    sums[2 * rank + 1] = (float)(mine & 0xffff);
    rc = s_sum(w, sums, 2 * (uint64_t)M, -1);
    if (rc != 0) {
        return s_ring_failed(w, rc, "checking the initial parameters over the ring");
    }
    for (int i = 0; i < M && rc == 0; i++) {
        uint32_t theirs = ((uint32_t)sums[2 * i] << 16) | (uint32_t)sums[2 * i + 1];
        if (theirs != mine) {
            snprintf(w->err, sizeof w->err,
                     "W%d initialised different parameters (checksum %08x, ours %08x): "
                     "different builds or models%s?", i, theirs, mine,
                     w->rows ? ", or click logs" : "");
            rc = PS_ESTATE;
        }
    }
    if (rc == 0 && rank == 0 && w->mpi) {
        ps_log_info("MPI_Allreduce over %d ranks ready: initial parameters agree (checksum "
                    "%08x); no overlap", M, mine);
    } else if (rc == 0 && rank == 0) {
        ps_log_info("ring of %d workers ready: initial parameters agree (checksum %08x), "
                    "%zu KiB per message", M, mine,
                    rc_cfg.sub_floats * sizeof(float) / 1024);
    }
    return rc;
}

/* allreduce with overlap: plans the buckets from the model's tensors and
 * starts the thread that owns the ring from now on. */
int ps_allreduce_overlap_start(ps_worker_t *w)
{
    if (w->rows) { /* the rows' sums need the whole backward: nothing to overlap with */
        if (w->rank == 0) {
            ps_log_info("overlap: off for a model with rows (summed after backward)");
        }
        return 0;
    }
    const size_t nt = ps_model_num_tensors(w->model);
    size_t offsets[64];
    ps_range_t buckets[PS_OVERLAP_MAX_BUCKETS];
    if (nt > sizeof offsets / sizeof offsets[0]) {
        snprintf(w->err, sizeof w->err, "overlap: model has too many tensors (%zu)", nt);
        return PS_EINVAL;
    }
    for (size_t i = 0; i < nt; i++) {
        offsets[i] = ps_model_tensor(w->model, i)->offset;
    }
    const uint64_t P = w->view->num_params;
    int nb = ps_overlap_plan(offsets, nt, P, 0, buckets, PS_OVERLAP_MAX_BUCKETS);
    int rc = nb < 0 ? nb
                    : ps_overlap_new(w->ring, ps_model_grads(w->model), P, buckets, nb,
                                     &w->overlap);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "overlap: cannot start: %s", ps_strerror(rc));
        return rc;
    }
    ps_model_set_grad_ready(w->model, s_grads_ready, w->overlap);
    if (w->rank == 0) {
        ps_log_info("overlap: %d gradient buckets, the last [%llu, %llu) first", nb,
                    (unsigned long long)buckets[0].begin,
                    (unsigned long long)buckets[0].end);
    }
    return 0;
}
