/*
 * worker/ring_rows.h - a ctr job's embedding rows under --mode allreduce:
 * every worker's own table of the rows of its click log, and the ring's
 * side of a step's rows (docs/design/rows.md, "The ring's variants").
 *
 * The table holds every distinct key of the click log (ps_ctr_job_vocab),
 * in the order of their hashes (the servers' order), each row starting at
 * ps_optim_row_init(seed, key, dim, ps_job_row_bound(job)) (the bits a
 * server would make) with zeroed optimizer state. The ctr job reads rows
 * from it and hands it the step's row gradients through ps_ring_rows_home()
 * (ctr_job.h). A step's rows then travel as job->ring_rows says:
 *  - dense: the batch's row gradients are scattered into a zeroed gradient
 *    of the whole table [V x dim], which sits behind the dense gradient [P]
 *    in one vector that the step's allreduce sums; then every row takes
 *    the optimizer's step, with a gradient or not (Horovod's
 *    sparse_as_dense).
 *  - allgather: each worker's block of the step (its keys and their rows)
 *    goes round the ring (ps_ring_allgather); the M blocks are summed in
 *    rank order (ps_optim_sum_rows, weights 1), and those rows only take
 *    the optimizer's step. The dense gradient is allreduced as for every
 *    model.
 * A row's step is a server's (server/rows.c): ps_optim_step with the step's
 * lr and scale, a row whose update is not finite keeping its values. Every
 * worker applies the same sums in the same order, so the tables stay
 * bitwise identical.
 *
 * It does not sum the dense vector (worker/allreduce.c does, by the ring or
 * MPI) or step the dense parameters, and knows nothing of the scheduler.
 * One thread (the trainer) makes every call.
 */
#ifndef PS_WORKER_RING_ROWS_H
#define PS_WORKER_RING_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "worker/ctr_job.h"
#include "worker/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_ring_rows ps_ring_rows_t;

/*
 * The table of ctr job c's click log for job (its embed_dim, seed,
 * optimizer, ring_rows and batch), whose model has P dense parameters.
 * Returns 0, or PS_ENOMEM / PS_EINVAL (an optimizer without rows) with a
 * one-line reason in err. c is read only during the call. Caller owns *out;
 * destroy with ps_ring_rows_destroy().
 */
int ps_ring_rows_new(ps_ring_rows_t **out, const ps_job_t *job, const ps_ctr_job_t *c,
                     uint64_t P, char *err, size_t cap);

/* Frees the table; NULL-safe; sets *r to NULL. After ps_ring_destroy() of
 * a ring that may still hold frames sent from it. */
void ps_ring_rows_destroy(ps_ring_rows_t **r);

/* Rows in the table (V). */
size_t ps_ring_rows_count(const ps_ring_rows_t *r);

/* FNV-1a of the table's keys: workers whose click logs differ differ here
 * (the ring's start-up check). */
uint32_t ps_ring_rows_checksum(const ps_ring_rows_t *r);

/* The ctr job's home for its rows (ps_ctr_job_set_rows): this table. Its
 * fetch copies rows out (any version); its push keeps the step's
 * gradient for ps_ring_rows_vector() / ps_ring_rows_exchange() (no KV
 * request: *push is -1). A key outside the table is PS_EINVAL. Borrows r. */
ps_ctr_rows_t ps_ring_rows_home(ps_ring_rows_t *r);

/* Floats of the longest ring frame a step of this table sends: dense, the
 * summed vector (P + V x dim); allgather, a block's rows. For
 * ps_ring_new()'s max_floats. */
uint64_t ps_ring_rows_max_floats(const ps_ring_rows_t *r);

/* Before the first step: room for the blocks of M workers (allgather) and
 * this worker's rank. Returns 0, PS_EINVAL (M out of 1 ..
 * PS_OPTIM_MAX_PARTS) or PS_ENOMEM. */
int ps_ring_rows_start(ps_ring_rows_t *r, int M, int rank);

/* The vector the step's allreduce sums, into which grads[0..P) is copied
 * or which is grads itself: dense, the dense gradient followed by the
 * table's gradient (*n = P + V x dim; borrowed, valid until the next call);
 * allgather, grads (*n = P). */
float *ps_ring_rows_vector(ps_ring_rows_t *r, float *grads, uint64_t *n);

/* allgather: passes the step's blocks round ring (tagged step) and sums
 * them in rank order; dense: nothing. Returns 0 or ps_ring_allgather()'s
 * error (ps_ring_error() says why). */
int ps_ring_rows_exchange(ps_ring_rows_t *r, ps_ring_t *ring, int64_t step);

/* After the sums: the optimizer's step with lr and scale (1/M) on every row
 * (dense) or on the step's summed rows (allgather). */
void ps_ring_rows_apply(ps_ring_rows_t *r, float lr, float scale);

#ifdef __cplusplus
}
#endif
#endif
