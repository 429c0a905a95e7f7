/*
 * worker/ctr_job.h - a worker's side of a job with embedding rows (--model
 * ctr): its click log (worker/ctr_data.h), each step's batch deduplicated
 * into the rows it pulls and pushes, and the held-out rows' AUC and log
 * loss.
 *
 * The batch's keys are deduplicated in the order of their hashes
 * (proto/range.h), so each server's rows are one run of them: a pull's
 * reply lands in place and a push is sent from the gradients as they are.
 * The dense parameters travel as for every model (worker/worker.c); this
 * module knows nothing of them. The rows are the servers', reached through
 * the KV client each call is given, unless ps_ctr_job_set_rows() names
 * another home for them (a ring worker's own table: worker/ring_rows.h).
 * One thread (the trainer) makes every call.
 */
#ifndef PS_WORKER_CTR_JOB_H
#define PS_WORKER_CTR_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "worker/kv.h"
#include "worker/models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_ctr_job ps_ctr_job_t;

/* Where a job's rows live, when not on the servers: what the job asks of
 * them. Called from the trainer thread. */
typedef struct {
    /* Reads the rows of keys[0..n) (distinct, ascending by hash) at version
     * >= min_version into out [n x dim]. Returns 0 or a failure with a
     * one-line reason in err. */
    int (*fetch)(void *arg, const uint64_t *keys, size_t n, float *out, int64_t min_version,
                 char *err, size_t cap);
    /* Takes step t's gradient grads [n x dim] of the rows of keys[0..n)
     * (both borrowed until the next ps_ctr_job_batch() or evaluation);
     * *push: a KV request to wait for after the dense push, or -1. Returns 0
     * or a failure with a one-line reason in err. */
    int (*push)(void *arg, const uint64_t *keys, size_t n, const float *grads, int64_t t,
                int *push, char *err, size_t cap);
    void *arg; /* passed to both; borrowed: must outlive the job's calls */
} ps_ctr_rows_t;

/* The tail of the click log held out for evaluation (the logs are in time
 * order: the last rows are the future). */
#define PS_CTR_TEST_FRACTION 0.1

/* Malformed lines of a click log skipped before the read gives up. */
#define PS_CTR_MAX_BAD 1000

/*
 * Reads the click log at path (worker/ctr_data.h) for model m (a ctr made
 * for batches of up to max_batch samples; borrowed: must outlive the job),
 * its last PS_CTR_TEST_FRACTION held out; micro_batch (--micro-batch; 0:
 * none): each step trains the batch's micro-batches of that many samples
 * one after another on the rows pulled once, and pushes the sums of their
 * gradients (dense and rows), summed in order as a server sums workers'.
 * Returns 0, or an error with a one-line reason in err: ps_ctr_read()'s,
 * PS_EINVAL (no training rows), PS_ENOMEM. Caller owns *out; destroy with
 * ps_ctr_job_destroy().
 */
int ps_ctr_job_new(ps_ctr_job_t **out, const char *path, ps_model_t *m, int max_batch,
                   int micro_batch, char *err, size_t cap);

/* Frees the job; NULL-safe; sets *c to NULL. */
void ps_ctr_job_destroy(ps_ctr_job_t **c);

/* From now on the job's rows are rows's (copied), not the servers': the
 * steps, the evaluations and the dump fetch and push through it, and the
 * KV client they are given is not used for rows. */
void ps_ctr_job_set_rows(ps_ctr_job_t *c, const ps_ctr_rows_t *rows);

/* Every distinct key of the click log (training and held-out rows), as its
 * hash (ps_rowkey_hash), ascending, into *hashes [*n] (malloc'd: caller
 * frees). Returns 0 or PS_ENOMEM. */
int ps_ctr_job_vocab(const ps_ctr_job_t *c, uint64_t **hashes, size_t *n);

/* Training rows (the log less its held-out tail). */
size_t ps_ctr_job_train_samples(const ps_ctr_job_t *c);

/* Gathers training rows order[first .. first + n) into the model's batch
 * buffers and deduplicates their keys (or takes them as the step before
 * gathered them ahead). Returns 0 or PS_EINVAL (n out of the model's
 * batch). */
int ps_ctr_job_batch(ps_ctr_job_t *c, const uint32_t *order, size_t first, int n);

/* The step after this one, when the caller knows it: its batch is training
 * rows order[first .. first + n), and its rows are pulled at version >=
 * version. */
typedef struct {
    const uint32_t *order;
    size_t first;
    int n;
    int64_t version;
} ps_ctr_next_t;

/*
 * The batch's step t: pulls its rows once every server is at version >=
 * pull_version (or fetches them from their other home; or takes those the
 * step before pulled ahead for it), trains (the dense gradient into
 * ps_model_grads(), the loss into *loss), then, given next, gathers the
 * next step's batch and sends the pull of its rows: the servers answer
 * each piece of their rows as soon as this step's push of it applies, so
 * the replies come down while the push still goes up.
 * ps_ctr_job_batch() with next's rows then takes that batch. The rows'
 * other home takes their gradient now; the servers' is ps_ctr_job_push().
 * Returns 0, PS_EAGAIN (a failover: the step is void) or a failure with a
 * one-line reason in err.
 */
int ps_ctr_job_step(ps_ctr_job_t *c, ps_kv_t *kv, int64_t t, int64_t pull_version,
                    const ps_ctr_next_t *next, float *loss, char *err, size_t cap);

/* With the rows on the servers: step t's rows gradient pushed, after the
 * dense push and pull went (worker/rounds.c), and again when a replica
 * took a server's keys over and the servers forgot the step under way. The
 * handle goes into *push (-1: none, the rows' other home took them).
 * Returns 0 or a failure with err set. */
int ps_ctr_job_push(ps_ctr_job_t *c, ps_kv_t *kv, int64_t t, int *push, char *err,
                    size_t cap);

/*
 * After the parameters of --dump-params: the rows of every key of the click
 * log (training and held-out rows, ps_ctr_job_vocab), as the servers (or
 * the rows' other home) hold them now, in the order of the keys' hashes,
 * each its key (uint64) then its row (dim float32), little-endian, into f.
 * What every worker and server count give the same bits of. Returns 0,
 * PS_EIO (a write failed; err empty) or a failure with a one-line reason in
 * err.
 */
int ps_ctr_job_dump_rows(ps_ctr_job_t *c, ps_kv_t *kv, FILE *f, char *err, size_t cap);

/* The held-out rows' AUC and mean log loss under the model's parameters
 * and the rows now (the servers', or those of their other home). Returns
 * 0, or a failure with a one-line reason in err (AUC is NaN when the
 * held-out rows hold one class only). */
int ps_ctr_job_evaluate(ps_ctr_job_t *c, ps_kv_t *kv, double *auc, double *logloss,
                        char *err, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
