/*
 * worker/overlap.h - allreduce overlapped with backward: a communication
 * thread sums the gradient vector over the ring bucket by bucket, as the
 * trainer reports buckets final (PyTorch DDP's gradient buckets).
 *
 * The flat gradient vector is cut at tensor boundaries into buckets, planned
 * from the end (backward finishes the last layers first). Each step the
 * trainer calls ps_overlap_begin(), reports as backward goes that keys
 * [from, n) are final (ps_overlap_ready), then ps_overlap_wait() for the sums.
 * The thread allreduces the buckets in a fixed order, last bucket first, each
 * one ps_ring_allreduce() of its sub-range tagged step * nbuckets + bucket, so
 * every worker runs the same sequence and messages never mix. Each element is
 * still summed by one chain of additions and copied, so the workers stay
 * bitwise identical.
 *
 * It does not own the ring, pick the buckets' sizes for a network, or stop a
 * ring that waits: the ring's check function must say when to give up (the
 * caller makes it fail before ps_overlap_destroy() on an aborted step).
 */
#ifndef PS_WORKER_OVERLAP_H
#define PS_WORKER_OVERLAP_H

#include <stddef.h>
#include <stdint.h>

#include "proto/range.h"
#include "worker/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_overlap ps_overlap_t;

/* Most buckets a plan holds; the earliest bucket takes the rest. */
enum { PS_OVERLAP_MAX_BUCKETS = 16 };

/* Default bucket size: a bucket closes once it holds this many floats (64 KiB). */
enum { PS_OVERLAP_BUCKET_FLOATS = 16384 };

/*
 * Plans the buckets of a vector of n floats made of ntensors tensors starting
 * at offsets[0] = 0 < offsets[1] < ... (in vector order). Walking from the last
 * tensor back, a bucket closes once it holds >= cap floats (cap 0 = default),
 * so buckets end at tensor boundaries. Writes them into out[], out[0] = the
 * last bucket (the first to be reduced), and returns how many (1..max; the
 * earliest bucket absorbs what is left when max is reached), or PS_EINVAL
 * (n == 0, ntensors == 0, max < 1, offsets not increasing from 0 below n).
 */
int ps_overlap_plan(const size_t *offsets, size_t ntensors, uint64_t n, size_t cap,
                    ps_range_t *out, int max);

/*
 * Starts the communication thread for buf[0..n) cut into buckets[0..nb)
 * (copied; a plan from ps_overlap_plan). From here until ps_overlap_destroy()
 * the ring belongs to that thread, except between a ps_overlap_wait() that
 * returned and the next ps_overlap_begin(), when the caller may read it
 * (ps_ring_error, ps_ring_bytes); the mutex hand-over orders the accesses.
 * ring and buf are borrowed; they must outlive the overlap. Returns 0 and *out
 * (caller owns the result; destroy with ps_overlap_destroy()), PS_EINVAL,
 * PS_ENOMEM.
 */
int ps_overlap_new(ps_ring_t *ring, float *buf, uint64_t n, const ps_range_t *buckets,
                   int nb, ps_overlap_t **out);

/* Starts step `step` (>= 0): no key is final yet. Trainer thread. */
void ps_overlap_begin(ps_overlap_t *o, int64_t step);

/* Keys [from, n) of buf are final for this step (the trainer will not write
 * them again until the next begin). Thread-safe; cheap; from only decreases
 * within a step (a larger from is ignored). */
void ps_overlap_ready(ps_overlap_t *o, uint64_t from);

/*
 * Marks every key final and waits until every bucket was summed. Returns 0,
 * or the first failing bucket's ps_ring_allreduce() error (PS_ECLOSED,
 * PS_ETIMEDOUT, PS_EPROTO, ...; ps_ring_error() says why); after a failure
 * the ring is unusable and later steps fail with the same error.
 */
int ps_overlap_wait(ps_overlap_t *o);

/* Stops the thread and frees; NULL-safe; sets *o to NULL. If a bucket is in
 * flight, returns once the ring gives up (its check function must fail). */
void ps_overlap_destroy(ps_overlap_t **o);

#ifdef __cplusplus
}
#endif
#endif
