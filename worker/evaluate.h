/*
 * worker/evaluate.h - the trained model: worker 0's evaluations during
 * training and their record (each epoch's, for the job's summary), the
 * model file it writes at the end (--save-model), and --evaluate of a
 * model file with no cluster (worker.h).
 */
#ifndef PS_WORKER_EVALUATE_H
#define PS_WORKER_EVALUATE_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "proto/codec.h"
#include "worker/ctr_job.h"
#include "worker/data.h"
#include "worker/kv.h"
#include "worker/models/model.h"
#include "worker/nonfinite.h"
#include "worker/observe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Test accuracy below this (twice chance on 10 classes) after steps with
 * non-finite values means they broke the model: the job has diverged. */
#define PS_EVALS_SANE_ACCURACY 0.2

/* What an evaluation reads (borrowed: each outlives the record's use) and
 * the record of each epoch's. Plain data, set by the worker as it builds. */
typedef struct {
    ps_model_t *model;                  /* the model under training */
    const ps_dataset_t *test;           /* an image model's test set */
    ps_ctr_job_t *ctr;                  /* a model with rows: its held-out rows; else NULL */
    ps_kv_t *kv;                        /* the servers holding those rows */
    const ps_nonfinite_t *nonfinite;    /* the steps skipped so far */
    ps_worker_obs_t *obs;               /* metrics: each epoch's accuracy */
    double accuracy[PS_MAX_EPOCHS];     /* test accuracy at each epoch's end */
    double auc[PS_MAX_EPOCHS];          /* a model with rows: test AUC, likewise */
    double logloss[PS_MAX_EPOCHS];      /* and its test log loss */
    size_t n_accuracy;                  /* entries of accuracy */
    size_t n_auc;                       /* entries of auc and of logloss */
} ps_evals_t;

/* Test accuracy (with rows: AUC and log loss) of the model's parameters
 * after step `step` (counted from 0 over the job). epoch > 0: the end of
 * that epoch, recorded; epoch 0: an --eval-every point within an epoch,
 * only logged. Returns 0, PS_ENONFINITE (diverged) or another failure, the
 * reason in err. Not thread-safe. */
int ps_evals_at(ps_evals_t *e, int epoch, int64_t step, double t_train, char *err, size_t cap);

/* Epochs recorded so far. */
size_t ps_evals_epochs(const ps_evals_t *e);

/* A rollback: the records of epochs after the first `epochs` are forgotten. */
void ps_evals_forget(ps_evals_t *e, size_t epochs);

/* The record into the job's final report (its arrays point into e). */
void ps_evals_report(ps_evals_t *e, Shardps__Done *done);

/* The trained model's params to path (safetensors), with the job, its
 * steps and the last test accuracy in its metadata. Returns 0 or a failure
 * with the reason in err. */
int ps_evals_save(const ps_evals_t *e, const ps_job_t *job, int64_t steps, const float *params,
                  const char *path, char *err, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
