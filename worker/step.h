/*
 * worker/step.h - what one worker's step computes on, and the compute: the
 * job's model on its backend (with --init-from's values), its data (the
 * training set, worker 0's test set, or a click log), the epoch's sample
 * order and a step's batch, forward and backward, micro-batch by
 * micro-batch. It sends nothing itself: a ctr model's rows go through the
 * KV client it is handed (worker/ctr_job.h).
 *
 * Global sample order: all workers draw the same permutation per epoch from
 * the seed; at step k worker r of M takes samples [(k*M + r)*b, +b), so sync
 * training with M workers of batch b sees exactly the batches of one worker
 * with batch M*b (docs/design/models.md).
 */
#ifndef PS_WORKER_STEP_H
#define PS_WORKER_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "common/safetensors.h"
#include "kernels/kernels.h"
#include "worker/ctr_job.h"
#include "worker/data.h"
#include "worker/kv.h"
#include "worker/models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_step ps_step_t;

/* The worker's flags a step is built with. Plain data; the strings are
 * borrowed for ps_step_new(). */
typedef struct {
    const char *ctr_data;  /* --ctr-data: the click log; NULL: Fashion-MNIST */
    const char *data_dir;  /* Fashion-MNIST's directory (worker 0's test set) */
    const char *init_from; /* --init-from: its path, for errors (init is the file) */
    int tf32;              /* --tf32: TF32 GEMMs on a GPU */
    int graph;             /* --graph: a GPU step replays a recorded CUDA graph */
    int fuse_dense;        /* --fuse-dense: fused dense-layer GEMMs on a GPU */
    int conv_dnn;          /* --conv cudnn: convolutions through cuDNN on a GPU */
} ps_step_flags_t;

/* The job's model for a worker of rank on the backend, with f's data and
 * device choices; init (--init-from's file, borrowed) or NULL. Takes
 * ownership of *train's contents (the training set, loaded before joining;
 * unused by a ctr job) and zeroes it. job is borrowed and must outlive the
 * step. Caller owns the result; destroy with ps_step_destroy(). Returns 0 or
 * an error with the reason in err. */
int ps_step_new(const ps_step_flags_t *f, const ps_job_t *job, const ps_kernels_t *kernels,
                int rank, const ps_safetensors_t *init, ps_dataset_t *train, ps_step_t **out,
                char *err, size_t cap);
void ps_step_destroy(ps_step_t **s);

/* Borrowed; valid until ps_step_destroy(). */
ps_model_t *ps_step_model(ps_step_t *s);
ps_ctr_job_t *ps_step_ctr(ps_step_t *s);           /* NULL for an image model */
const ps_dataset_t *ps_step_test(const ps_step_t *s); /* worker 0's test set */

/* Samples of the training set. */
int ps_step_samples(const ps_step_t *s);

/* Seeds the model's parameters: init's values, else the job's seed's. */
void ps_step_init_params(ps_step_t *s, const ps_safetensors_t *init);

/* The sample order of epoch, the same on every worker. */
void ps_step_order(ps_step_t *s, int epoch);

/* The step's batch: b samples of the order from position first. */
void ps_step_batch(ps_step_t *s, int first, int b);

/* The step after the one computed, when the caller knows it: its batch is
 * b samples of the order from position first, its parameters those of
 * version. */
typedef struct {
    int first;
    int64_t version;
} ps_step_next_t;

/* Step t's compute on its batch of b: the loss into *loss and the gradient
 * into the model (a ctr model: its rows pulled first at pull_version
 * through kv, then, given next, the next batch's rows asked for;
 * ctr_job.h). Returns 0, PS_EAGAIN (a failover) or a failure with the
 * reason in err. */
int ps_step_compute(ps_step_t *s, ps_kv_t *kv, int64_t t, int64_t pull_version, int b,
                    const ps_step_next_t *next, float *loss, char *err, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
