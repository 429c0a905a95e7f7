/*
 * worker/allreduce.h - the ring's side of a worker's training (--mode
 * allreduce): the ring (or MPI_Allreduce) and a model's table of rows, the
 * start-up check that every worker holds the same parameters, and a step's
 * sum over the ring with the job's optimizer applied locally. It owns the
 * ring, its thread, the optimizer's state and the rows' table; the model,
 * the KV client (the job's status) and the rest are borrowed.
 */
#ifndef PS_WORKER_ALLREDUCE_H
#define PS_WORKER_ALLREDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "proto/sock.h"
#include "worker/ctr_job.h"
#include "worker/kv.h"
#include "worker/models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_allreduce ps_allreduce_t;

/* The worker's flags the ring's side runs with. Plain data, copied. */
typedef struct {
    const char *bind; /* where the left neighbour connects; borrowed for ps_allreduce_new() */
    int ring_kib;     /* KiB per ring message */
    int mpi;          /* 1: sum with MPI_Allreduce instead of the ring */
    int overlap;      /* 1: the ring's thread sums buckets during backward */
} ps_allreduce_flags_t;

/* The ring's socket, bound at f->bind (its endpoint into bound), sized
 * for the model or its rows; with ctr (borrowed, or NULL) its table of rows,
 * which the ctr job reads and trains from now on. job and model are
 * borrowed and outlive the result, as err (where failures' reasons go).
 * Caller owns the result; destroy with ps_allreduce_stop() then
 * ps_allreduce_destroy(). Returns 0 or an error with the reason in err. */
int ps_allreduce_new(ps_ctx_t *ctx, const ps_allreduce_flags_t *f, const ps_job_t *job,
                     ps_model_t *model, ps_ctr_job_t *ctr, char *bound, size_t bound_cap,
                     char *err, size_t errlen, ps_allreduce_t **out);

/* Once the view is known: joins the ring as rank (token: ours, for the
 * ring's data), kv's status telling it while it waits whether the job is
 * still there, and checks over it that every worker holds the same
 * parameters (the model's, seeded already); with --overlap 1 starts the
 * thread that owns the ring from now on. Returns 0 or an error. */
int ps_allreduce_start(ps_allreduce_t *a, const ps_view_t *view, ps_kv_t *kv, int rank,
                       uint64_t token);

/* Before step t's compute: the ring's thread starts summing as backward
 * hands it buckets (--overlap 1). */
void ps_allreduce_begin(ps_allreduce_t *a, int64_t t);

/* Step t: sums the gradients over the ring and applies the optimizer to
 * their mean (with rows: theirs too, ring_rows.h). Returns 0 or the ring's
 * error. */
int ps_allreduce_step(ps_allreduce_t *a, int64_t t);

/* Payload bytes sent and received on the ring so far. */
void ps_allreduce_bytes(const ps_allreduce_t *a, uint64_t *sent, uint64_t *received);

/* Before tearing down the KV client: the ring gives up waiting, its thread,
 * the ring and the rows' table go. */
void ps_allreduce_stop(ps_allreduce_t *a);

/* The rest, once the scheduler was told how the job ended (failed: it
 * failed here). NULL-safe; nulls the pointer. */
void ps_allreduce_destroy(ps_allreduce_t **a, int failed);

#ifdef __cplusplus
}
#endif
#endif
