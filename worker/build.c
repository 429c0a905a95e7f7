/*
 * worker/build.c - a worker's model, built once it has joined and knows the
 * job: the model on its backend (with --init-from's values), its data
 * (worker 0's test set, a click log), the training set on the device, and
 * in allreduce a ctr model's table of rows.
 */
#include "worker/worker_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/error.h"

/* On a device backend: the training set uploaded once, graph steps and the
 * TF32 choice. On the CPU --tf32 1 is an error and the rest does not apply. */
static int s_device_setup(ps_worker_t *w)
{
    const ps_worker_config_t *cfg = w->cfg;
    int rc = ps_model_set_tf32(w->model, cfg->tf32);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "--tf32 1: the %s backend has no TF32 mode",
                 w->kernels->name);
        return rc;
    }
    if (w->kernels->host_is_backend) {
        return 0;
    }
    float a, c;
    ps_data_norm(&a, &c);
    rc = ps_model_set_data(w->model, w->train.pixels, w->train.labels, w->train.n, a, c);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "cannot keep the training set on the %s device: %s",
                 w->kernels->name, ps_strerror(rc));
        return rc;
    }
    w->resident = 1;
    return ps_model_set_graph(w->model, cfg->graph);
}

/* A model with embedding rows: its click log, read now (the model's batch
 * buffers take its batches), the sample order's buffer, and in allreduce
 * the table of its rows. */
static int s_build_ctr(ps_worker_t *w, int max_batch)
{
    int rc = ps_ctr_job_new(&w->ctr, w->cfg->ctr_data, w->model, max_batch,
                            w->job.micro_batch, w->err, sizeof w->err);
    if (rc != 0) {
        return rc;
    }
    w->order = malloc(ps_ctr_job_train_samples(w->ctr) * sizeof *w->order);
    if (!w->order) {
        snprintf(w->err, sizeof w->err, "out of memory");
        return PS_ENOMEM;
    }
    return w->job.mode == PS_MODE_ALLREDUCE ? ps_allreduce_rows_new(w) : 0;
}

/* The job's model on the chosen backend (with --init-from's values), worker
 * 0's test set and the sample order's buffer. Returns 0 or an error with
 * w->err set. */
static int s_build_model(ps_worker_t *w)
{
    const ps_job_t *j = &w->job;
    /* evaluation runs in bigger chunks */
    int max_batch = j->batch > PS_JOB_EVAL_BATCH ? j->batch : PS_JOB_EVAL_BATCH;
    if (ps_job_has_rows(j) != (w->cfg->ctr_data != NULL)) {
        snprintf(w->err, sizeof w->err, w->cfg->ctr_data
                     ? "--ctr-data is for --model ctr; this job trains %s"
                     : "--model %s needs the click log: --ctr-data FILE",
                 j->model);
        return PS_EINVAL;
    }
    int rc = ps_job_has_rows(j) ? ps_model_new_ctr(j->hidden, j->embed_dim, w->kernels,
                                                   max_batch, &w->model)
                                : ps_model_new(j->model, j->hidden, w->kernels, max_batch,
                                               &w->model);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "cannot build model %s: %s", j->model, ps_strerror(rc));
        return rc;
    }
    if (ps_job_has_rows(j)) {
        return s_build_ctr(w, max_batch);
    }
    if (w->init) {
        char why[200];
        if ((rc = ps_model_load(w->model, w->init, why, sizeof why)) != 0) {
            snprintf(w->err, sizeof w->err, "--init-from %s: %s", w->cfg->init_from, why);
            return rc;
        }
    }
    if (w->rank == 0 &&
        (rc = ps_dataset_load(w->cfg->data_dir, 0, &w->test, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    if ((rc = s_device_setup(w)) != 0) {
        return rc;
    }
    w->order = malloc((size_t)w->train.n * sizeof *w->order);
    if (ps_job_micro_batches(j) > 1) {
        w->micro_sum = malloc(ps_model_num_params(w->model) * sizeof *w->micro_sum);
    }
    /* the step copies these in overlapped, and is done with them on return */
    w->x = ps_model_batch_x(w->model);
    w->y = ps_model_batch_y(w->model);
    if (!w->order || (ps_job_micro_batches(j) > 1 && !w->micro_sum)) {
        snprintf(w->err, sizeof w->err, "out of memory");
        return PS_ENOMEM;
    }
    return 0;
}

int ps_worker_build(ps_worker_t *w)
{
    /* reading a click log and building a ring's table take longer than the
     * scheduler's patience with a silent node: heartbeats go on meanwhile */
    if (ps_link_keepalive_start(w->link) != 0) {
        snprintf(w->err, sizeof w->err, "cannot start the heartbeat thread");
        return PS_ENOMEM;
    }
    int rc = s_build_model(w);
    const double slow = w->cfg->fault_slow_build;
    if (rc == 0 && slow > 0) {
        nanosleep(&(struct timespec){(time_t)slow, (long)((slow - (double)(time_t)slow) * 1e9)},
                  NULL);
    }
    char why[256];
    int lost = ps_link_keepalive_stop(w->link, why, sizeof why);
    if (rc == 0 && lost != 0) {
        snprintf(w->err, sizeof w->err, "%s", why);
    }
    return rc ? rc : lost;
}
