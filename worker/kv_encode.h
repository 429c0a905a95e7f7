/*
 * worker/kv_encode.h - a worker's pushes in the wire format (proto/wire.h):
 * the job's dtype (--wire), or top-k with error feedback (--compress topk:
 * per key what earlier pushes did not send waits in a residual; with SGD
 * momentum the worker runs the momentum, momentum correction). Thread
 * safety: none; worker/kv.c calls it under its mutex.
 */
#ifndef PS_WORKER_KV_ENCODE_H
#define PS_WORKER_KV_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "proto/msg.h"
#include "proto/range.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_kv_encode ps_kv_encode_t;

/* An encoder for pushes of a model of num_params keys whose widest server
 * range is widest keys. *out is NULL where the job pushes plain fp32 (sent
 * from the gradient itself, zero-copy). Returns 0, PS_EINVAL (top-k over a
 * shard of 2^32 keys or more: its offsets are 32-bit; err says so) or
 * PS_ENOMEM. */
int ps_kv_encode_new(const ps_job_t *job, uint64_t num_params, uint64_t widest,
                     ps_kv_encode_t **out, char *err, size_t errlen);
void ps_kv_encode_destroy(ps_kv_encode_t **ep);

/* Whether pushes are top-k (a cut per tensor piece, not per chunk). */
int ps_kv_encode_topk(const ps_kv_encode_t *e);

/* The model's tensors start at starts[0..n): top-k selects per tensor
 * piece. Returns 0 or PS_ENOMEM. */
int ps_kv_encode_set_tensors(ps_kv_encode_t *e, const uint64_t *starts, size_t n);

/* Forgets what earlier pushes left waiting (residual, velocity): the
 * servers rolled back to a checkpoint. */
void ps_kv_encode_reset(ps_kv_encode_t *e);

/* Encodes the push frame f of keys `part` (f->data: its fp32 gradient):
 * points f at the encoded payload (valid until the next call) and sets the
 * header's dtype and nnz. */
void ps_kv_encode_push(ps_kv_encode_t *e, Shardps__Header *h, ps_frame_t *f, ps_range_t part);

#ifdef __cplusplus
}
#endif

#endif
