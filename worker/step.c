/*
 * worker/step.c - a worker's model, its data and a step's compute on them
 * (see step.h): built once the job is known, on a device backend with the
 * training set uploaded once and the step recorded as a graph.
 */
#include "worker/step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/optim.h"

struct ps_step {
    const ps_job_t *job;  /* the job; borrowed */
    ps_model_t *model;    /* owned */
    ps_ctr_job_t *ctr;    /* --model ctr: the click log and the batch's rows; else NULL */
    ps_dataset_t train;   /* an image model's training set; owned */
    ps_dataset_t test;    /* worker 0's test set; owned */
    uint32_t *order;      /* this epoch's global sample order */
    float *micro_sum;     /* --micro-batch: the sum of a step's micro-batch gradients (P) */
    int resident;         /* 1: the training set lives on the device (ps_model_set_data) */
    float *x;             /* batch images: the model's pinned buffer; borrowed */
    uint8_t *y;           /* batch labels: likewise */
};

/* On a device backend: the training set uploaded once, graph steps and the
 * TF32, fused-dense and convolution choices. On the CPU --tf32 1 is an error
 * and the rest does not apply. */
static int s_device_setup(ps_step_t *s, const ps_step_flags_t *f,
                          const ps_kernels_t *kernels, char *err, size_t cap)
{
    ps_model_set_fused(s->model, f->fuse_dense);
    int rc = ps_model_set_tf32(s->model, f->tf32);
    if (rc != 0) {
        snprintf(err, cap, "--tf32 1: the %s backend has no TF32 mode", kernels->name);
        return rc;
    }
    if (kernels->host_is_backend) {
        return 0;
    }
    rc = ps_model_set_conv(s->model, f->conv_dnn);
    if (rc != 0) {
        snprintf(err, cap, "--conv cudnn: cuDNN cannot start on the %s device: %s",
                 kernels->name, ps_strerror(rc));
        return rc;
    }
    float a, c;
    ps_data_norm(&a, &c);
    rc = ps_model_set_data(s->model, s->train.pixels, s->train.labels, s->train.n, a, c);
    if (rc != 0) {
        snprintf(err, cap, "cannot keep the training set on the %s device: %s", kernels->name,
                 ps_strerror(rc));
        return rc;
    }
    s->resident = 1;
    return ps_model_set_graph(s->model, f->graph);
}

/* A model with embedding rows: its click log, read now (the model's batch
 * buffers take its batches), and the sample order's buffer. */
static int s_build_ctr(ps_step_t *s, const char *path, int max_batch, char *err, size_t cap)
{
    int rc = ps_ctr_job_new(&s->ctr, path, s->model, max_batch, s->job->micro_batch, err, cap);
    if (rc != 0) {
        return rc;
    }
    s->order = malloc(ps_ctr_job_train_samples(s->ctr) * sizeof *s->order);
    if (!s->order) {
        snprintf(err, cap, "out of memory");
        return PS_ENOMEM;
    }
    return 0;
}

/* An image model's data: --init-from's values, worker 0's test set, the
 * device, the sample order's and the micro-batches' buffers. */
static int s_build_images(ps_step_t *s, const ps_step_flags_t *f,
                          const ps_kernels_t *kernels, int rank, const ps_safetensors_t *init,
                          char *err, size_t cap)
{
    const ps_job_t *j = s->job;
    int rc;
    if (init) {
        char why[200];
        if ((rc = ps_model_load(s->model, init, why, sizeof why)) != 0) {
            snprintf(err, cap, "--init-from %s: %s", f->init_from, why);
            return rc;
        }
    }
    if (rank == 0 && (rc = ps_dataset_load(f->data_dir, 0, &s->test, err, cap)) != 0) {
        return rc;
    }
    if ((rc = s_device_setup(s, f, kernels, err, cap)) != 0) {
        return rc;
    }
    s->order = malloc((size_t)s->train.n * sizeof *s->order);
    if (ps_job_micro_batches(j) > 1) {
        s->micro_sum = malloc(ps_model_num_params(s->model) * sizeof *s->micro_sum);
    }
    /* the step copies these in overlapped, and is done with them on return */
    s->x = ps_model_batch_x(s->model);
    s->y = ps_model_batch_y(s->model);
    if (!s->order || (ps_job_micro_batches(j) > 1 && !s->micro_sum)) {
        snprintf(err, cap, "out of memory");
        return PS_ENOMEM;
    }
    return 0;
}

int ps_step_new(const ps_step_flags_t *f, const ps_job_t *job, const ps_kernels_t *kernels,
                int rank, const ps_safetensors_t *init, ps_dataset_t *train, ps_step_t **out,
                char *err, size_t cap)
{
    ps_step_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, cap, "out of memory");
        return PS_ENOMEM;
    }
    *out = s;
    s->job = job;
    s->train = *train;
    *train = (ps_dataset_t){0};
    /* evaluation runs in bigger chunks */
    int max_batch = job->batch > PS_JOB_EVAL_BATCH ? job->batch : PS_JOB_EVAL_BATCH;
    if (ps_job_has_rows(job) != (f->ctr_data != NULL)) {
        snprintf(err, cap, f->ctr_data ? "--ctr-data is for --model ctr; this job trains %s"
                                         : "--model %s needs the click log: --ctr-data FILE",
                 job->model);
        return PS_EINVAL;
    }
    int rc = ps_job_has_rows(job) ? ps_model_new_ctr(job->hidden, job->embed_dim, kernels,
                                                     max_batch, &s->model)
                                  : ps_model_new(job->model, job->hidden, kernels, max_batch,
                                                 &s->model);
    if (rc != 0) {
        snprintf(err, cap, "cannot build model %s: %s", job->model, ps_strerror(rc));
        return rc;
    }
    return ps_job_has_rows(job) ? s_build_ctr(s, f->ctr_data, max_batch, err, cap)
                                : s_build_images(s, f, kernels, rank, init, err, cap);
}

void ps_step_destroy(ps_step_t **sp)
{
    ps_step_t *s = sp ? *sp : NULL;
    if (!s) {
        return;
    }
    ps_ctr_job_destroy(&s->ctr); /* before the model it borrows */
    ps_model_destroy(&s->model);
    ps_dataset_fini(&s->train);
    ps_dataset_fini(&s->test);
    free(s->order);
    free(s->micro_sum);
    free(s);
    *sp = NULL;
}

ps_model_t *ps_step_model(ps_step_t *s)
{
    return s->model;
}

ps_ctr_job_t *ps_step_ctr(ps_step_t *s)
{
    return s->ctr;
}

const ps_dataset_t *ps_step_test(const ps_step_t *s)
{
    return &s->test;
}

int ps_step_samples(const ps_step_t *s)
{
    return s->ctr ? (int)ps_ctr_job_train_samples(s->ctr) : s->train.n;
}

void ps_step_init_params(ps_step_t *s, const ps_safetensors_t *init)
{
    if (init) {
        char why[200]; /* checked as the model was built */
        ps_model_load(s->model, init, why, sizeof why);
    } else {
        ps_model_init_params(s->model, s->job->seed);
    }
}

void ps_step_order(ps_step_t *s, int epoch)
{
    ps_data_order(s->job->seed, epoch, s->order, ps_step_samples(s));
}

/* A step's batch: its indices for the device-resident set, or its samples
 * gathered and normalised on the host. */
void ps_step_batch(ps_step_t *s, int first, int b)
{
    if (s->ctr) {
        ps_ctr_job_batch(s->ctr, s->order, (size_t)first, b); /* b fits: the model's */
    } else if (s->resident) {
        memcpy(ps_model_batch_idx(s->model), s->order + first, (size_t)b * sizeof *s->order);
    } else {
        ps_data_gather(&s->train, s->order, first, b, s->x, s->y);
    }
}

/* Micro-batch j of mb samples of the step's batch: the model's step on it. */
static int s_train_micro(ps_step_t *s, int j, int mb, float *loss)
{
    if (s->resident) {
        uint32_t *idx = ps_model_batch_idx(s->model); /* the slices before j are done */
        memmove(idx, idx + (size_t)j * mb, (size_t)mb * sizeof *idx);
        return ps_model_train_step_idx(s->model, mb, loss);
    }
    const size_t at = (size_t)j * mb;
    return ps_model_train_step(s->model, s->x + at * PS_MODEL_IN_H * PS_MODEL_IN_W, s->y + at,
                               mb, loss);
}

/* With --micro-batch, the batch's micro-batches one after another, their
 * gradients summed in order as a server sums workers' (the servers divide
 * by them all). */
int ps_step_compute(ps_step_t *s, ps_kv_t *kv, int64_t t, int64_t pull_version, int b,
                    const ps_step_next_t *next, float *loss, char *err, size_t cap)
{
    if (s->ctr) {
        const ps_ctr_next_t after = {s->order, next ? (size_t)next->first : 0, b,
                                     next ? next->version : 0};
        return ps_ctr_job_step(s->ctr, kv, t, pull_version, next ? &after : NULL, loss, err,
                               cap);
    }
    const int k = ps_job_micro_batches(s->job);
    const size_t P = ps_model_num_params(s->model);
    float *grads = ps_model_grads(s->model), sum = 0;
    for (int j = 0; j < k; j++) {
        float l;
        int rc = s_train_micro(s, j, b / k, &l);
        if (rc != 0) {
            snprintf(err, cap, "training step failed: %s", ps_strerror(rc));
            return rc;
        }
        if (k > 1) {
            ps_optim_accumulate(s->micro_sum, grads, 1.0f, P, j == 0);
        }
        sum += l;
    }
    if (k > 1) {
        memcpy(grads, s->micro_sum, P * sizeof *grads);
    }
    *loss = sum / (float)k;
    return 0;
}
