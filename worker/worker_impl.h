/*
 * worker/worker_impl.h - the state of one worker, shared by the files of its
 * training loop: worker.c (start, the step loop, push and pull),
 * allreduce.c (the ring's side of a step), evaluate.c (evaluations and the
 * model file) and recover.c (after a failover).
 *
 * Not a public interface: only those four include it. Everything else
 * reaches a worker through worker/worker.h.
 */
#ifndef PS_WORKER_IMPL_H
#define PS_WORKER_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/ratelog.h"
#include "common/safetensors.h"
#include "kernels/kernels.h"
#include "kernels/optim.h"
#include "proto/link.h"
#include "worker/ctr_job.h"
#include "worker/data.h"
#include "worker/kv.h"
#include "worker/models/model.h"
#include "worker/observe.h"
#include "worker/overlap.h"
#include "worker/ring.h"
#include "worker/ring_mpi.h"
#include "worker/ring_rows.h"
#include "worker/worker.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most pushes of one step (layer by layer, then the rest). */
enum { PS_WORKER_MAX_PUSHES = 16 };

/* Test accuracy below this (twice chance on 10 classes) after steps with
 * non-finite values means they broke the model: the job has diverged. */
#define PS_WORKER_SANE_ACCURACY 0.2

typedef struct {
    const ps_worker_config_t *cfg;
    ps_ctx_t *ctx;
    ps_link_t *link;       /* until the KV client takes it */
    int rank;              /* this worker's rank */
    uint64_t token;        /* this worker's token (RegisterAck), for its ring data */
    ps_job_t job;
    ps_view_t *view;
    const ps_kernels_t *kernels;
    ps_model_t *model;
    ps_kv_t *kv;
    ps_ring_t *ring; /* allreduce: this worker's place in the ring */
    ps_ring_mpi_t *mpi; /* allreduce with --allreduce-backend mpi: sums instead of the ring */
    ps_overlap_t *overlap; /* allreduce with --overlap 1: the ring's thread */
    int layer_push;        /* sync, ssp with --overlap 1: push layers during backward */
    int64_t push_step;     /* the step being pushed layer by layer */
    uint64_t push_end;     /* keys [push_end, P) are pushed already */
    int push_h[PS_WORKER_MAX_PUSHES]; /* their handles */
    int npush;
    int push_rc;           /* the first refused push, or 0 */
    atomic_int stopping;   /* set before tearing down: the ring gives up waiting */
    ps_optim_t opt;  /* allreduce: the job's optimizer, applied locally */
    float *state;    /* allreduce: its state, ps_optim_state_floats() arrays of P */
    float *sums;     /* allreduce: 2M floats for the start-up check (lives as long
                        as the ring: a failed ring may still hold its frames) */
    ps_dataset_t train, test;
    ps_ctr_job_t *ctr; /* --model ctr: the click log and the batch's rows; else NULL */
    ps_ring_rows_t *rows; /* allreduce with --model ctr: every row, this worker's own */
    float *micro_sum;  /* --micro-batch: the sum of a step's micro-batch gradients (P) */
    uint32_t *order; /* this epoch's global sample order */
    int resident;    /* 1: the training set lives on the device (ps_model_set_data) */
    float *x;        /* batch images: the model's pinned buffer; borrowed */
    uint8_t *y;      /* batch labels: likewise */
    ps_safetensors_t *init; /* --init-from: the model file, read before joining */
    Shardps__Done done;  /* what we report at the end; its arrays are the two below */
    double accuracy[PS_MAX_EPOCHS];   /* done.test_accuracy: worker 0, after each epoch */
    double auc[PS_MAX_EPOCHS];        /* done.test_auc (--model ctr): likewise */
    double logloss[PS_MAX_EPOCHS];    /* done.test_logloss: likewise */
    uint64_t bytes[2][PS_BYTE_TYPES]; /* done.bytes_sent, bytes_received: by type */
    uint64_t nonfinite;      /* steps whose loss or gradient was not finite */
    ps_ratelog_t *nonfinite_log; /* their log lines, summarised */
    ps_worker_obs_t *obs;    /* metrics and the heartbeat's report */
    int left_out;            /* the job ended cleanly before it sent us a view */
    char err[256];
} ps_worker_t;

/* Seeds a new model: the --init-from file's values, else the seed's. */
void ps_worker_init_params(ps_worker_t *w);

/* Test accuracy of the current parameters after step `step` (counted from 0
 * over the job). epoch > 0: the end of that epoch, recorded in the summary;
 * epoch 0: an --eval-every point within an epoch, only logged. Returns 0,
 * PS_ENONFINITE (diverged) or PS_ENOMEM, with w->err set. (evaluate.c) */
int ps_worker_evaluate_at(ps_worker_t *w, int epoch, int64_t step, double t_train);

/* Worker 0 at the end: the trained model params to --save-model, with the
 * job in its metadata. Returns 0 or an error with w->err set. (evaluate.c) */
int ps_worker_save_model(ps_worker_t *w, const float *params);

/* Waits for request handle (or passes on a failed submission's PS_E*);
 * a failure sets w->err to "WHAT failed: why". (worker.c) */
int ps_worker_wait(ps_worker_t *w, int handle, const char *what);

/* The whole model to the servers (init: its values, worker 0 at the start)
 * or from them (a pull of min_version), one server's keys at a time,
 * starting at our rank's and going round: started together, the workers
 * each take a different server's keys, so that no link carries two of
 * these transfers at once (all at once, each server's link would carry
 * every worker's whole shard together, and its queue would overflow into
 * TCP retransmission timeouts). On failure the reason is in w->err.
 * (worker.c) */
int ps_worker_whole(ps_worker_t *w, int init, int64_t min_version, const char *what);

/* Step t's push of the gradients the model holds and pull of the next
 * parameters into params. Returns 0, PS_EAGAIN (a failover) or a failure
 * with w->err set. (worker.c) */
int ps_worker_push_pull(ps_worker_t *w, int64_t t, float *params);

/* A failover was taken (a request failed with PS_EAGAIN): rolls back to
 * the checkpoint, setting *t, or goes on at *t; pulls the parameters.
 * Returns 0, PS_EAGAIN (another failover) or a failure. (recover.c) */
int ps_worker_rollback(ps_worker_t *w, int64_t *t);

/* ps_worker_push_pull, sent again after each replica's takeover, with the
 * rows push of the step (a ctr job: its handle in *rows_push, -1 none).
 * (recover.c) */
int ps_worker_push_pull_again(ps_worker_t *w, int64_t t, float *params, int *rows_push);

/* Once joined: the job's model, its data and its device, with heartbeats
 * going out meanwhile. Returns 0 or an error with w->err set. (build.c) */
int ps_worker_build(ps_worker_t *w);

/* allreduce: joins the ring, initialises the parameters and checks over the
 * ring that every worker got the same ones. (allreduce.c) */
int ps_allreduce_start(ps_worker_t *w);

/* allreduce with --overlap 1: starts the thread that owns the ring from now on. */
int ps_allreduce_overlap_start(ps_worker_t *w);

/* allreduce, one step t: sums the gradients over the ring and applies the
 * optimizer to their mean (with rows: theirs too, ring_rows.h). Returns 0
 * or the ring's error with w->err set. */
int ps_allreduce_step(ps_worker_t *w, int64_t t);

/* allreduce with --model ctr, once its click log is read: the table of its
 * rows (w->rows), which the ctr job reads and trains from now on. Returns 0
 * or an error with w->err set. (allreduce.c) */
int ps_allreduce_rows_new(ps_worker_t *w);

/* allreduce: the floats of the longest ring frame (ps_ring_new's
 * max_floats): the model's, or its rows' when longer. */
uint64_t ps_allreduce_max_floats(const ps_worker_t *w);

#ifdef __cplusplus
}
#endif
#endif
