/*
 * proto/wire.h - what a tensor payload looks like on the wire: fp32, fp16 or
 * bf16 values, dense or sparse (top-k), and the conversions to and from the
 * fp32 everything else computes in.
 *
 * The header's dtype says what a payload is (PS_DTYPE_*, codec.h). Dense:
 * n values of the range. Sparse: nnz (the header's nnz) uint32 offsets from
 * the range's first key, strictly ascending, then nnz values; a key not
 * listed has a zero gradient. Rounding to fp16/bf16 is round-to-nearest-even;
 * NaN stays NaN (quiet), infinities stay infinite, an fp32 beyond fp16's
 * range becomes an infinity (so the server refuses it as non-finite).
 * Plain loops over flat buffers the compiler vectorises; payloads are read
 * through memcpy (a received frame need not be aligned). No state, no
 * allocation: callers pass the buffers. Thread-safe.
 */
#ifndef PS_PROTO_WIRE_H
#define PS_PROTO_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "proto/codec.h"
#include "proto/range.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One value of fp32 -> fp16 / bf16 and back (round-to-nearest-even). */
uint16_t ps_wire_f32_to_f16(float f);
float ps_wire_f16_to_f32(uint16_t h);
uint16_t ps_wire_f32_to_bf16(float f);
float ps_wire_bf16_to_f32(uint16_t h);

/* The dense dtype of a job's --wire (PS_DTYPE_F32, _F16, _BF16). */
uint32_t ps_wire_dtype(const ps_job_t *job);

/* Bytes of one value of dtype (a sparse dtype: of its values), 0 if unknown. */
size_t ps_wire_value_size(uint32_t dtype);

/* Non-zero for the sparse dtypes. */
int ps_wire_is_sparse(uint32_t dtype);

/* The sparse dtype whose values are of the dense dtype (and back). */
uint32_t ps_wire_sparse_of(uint32_t dense);
uint32_t ps_wire_dense_of(uint32_t dtype);

/* Bytes of a payload of dtype over n keys with nnz sparse entries (dense:
 * nnz ignored); 0 for an unknown dtype. */
uint64_t ps_wire_payload_len(uint32_t dtype, uint64_t n, uint64_t nnz);

/* n fp32 values into dense dtype at dst (ps_wire_payload_len bytes). */
void ps_wire_encode(uint32_t dtype, void *dst, const float *src, size_t n);

/* n values of dense dtype at src (any alignment) into fp32. */
void ps_wire_decode(uint32_t dtype, float *dst, const void *src, size_t n);

/* Entries kept by top-k with ratio r over n keys: ceil(r * n), at least 1
 * (0 for n = 0). */
uint64_t ps_wire_topk_count(double ratio, uint64_t n);

/*
 * Top-k with error feedback: acc[0..n) is the gradient plus what earlier
 * pushes did not send. Picks the k entries of largest magnitude (a NaN
 * counts as largest, so it is sent and refused; ties go to the lower key),
 * writes the sparse payload of dtype (PS_DTYPE_SPARSE_*) to dst (k offsets,
 * then k values) and leaves in acc what the server will not see: unsent
 * entries as they were, a sent one its rounding error. k is clamped to n;
 * scratch holds n floats. Returns the payload bytes.
 */
size_t ps_wire_topk_encode(uint32_t dtype, void *dst, float *acc, size_t n, size_t k,
                           float *scratch);

/*
 * The selection of ps_wire_topk_encode for one piece of a payload: the k
 * (clamped to n) entries of acc[0..n) of largest magnitude go to idx[0..k)
 * as offsets base + i, ascending, and their values of dense dtype to
 * vals[0..k); acc keeps what is not sent (as ps_wire_topk_encode). With k = n
 * every entry goes (no selection). Returns k.
 */
size_t ps_wire_topk_select(uint32_t dense, uint32_t *idx, void *vals, uint32_t base,
                           float *acc, size_t n, size_t k, float *scratch);

/*
 * Decodes a payload of dtype over n keys into dst[0..n) (fp32): dense, or
 * sparse with nnz entries (every other key 0). Checks before writing: a known
 * dtype, len = the dtype's bytes for (n, nnz), nnz <= n, offsets strictly
 * ascending and < n. Returns 0, or PS_ERANGE with a one-line reason in why
 * (dst untouched).
 */
int ps_wire_decode_payload(uint32_t dtype, float *dst, size_t n, const void *payload,
                           size_t len, uint64_t nnz, char *why, size_t whylen);

/*
 * Checks a rows message's keys (MSG_ROWS_*): nnz little-endian uint64 at
 * keys (any alignment) whose hashes (ps_rowkey_hash) are strictly
 * ascending (so the keys are unique), each inside held (the piece of a
 * server's rows the message went to; NULL: any). Returns 0, or PS_ERANGE with a one-line reason naming the
 * first bad key in why.
 */
int ps_wire_check_row_keys(const void *keys, uint64_t nnz, const ps_rowrange_t *held,
                           char *why, size_t whylen);

/* Non-zero when a top-k job's SGD momentum runs on the workers (momentum
 * correction, Lin et al., "Deep Gradient Compression", ICLR 2018): each
 * worker accumulates the velocity u = m u + g per key and sends top-k of
 * the accumulated velocity, and the servers apply plain SGD (momentum 0), so
 * a key's momentum keeps building while its gradient waits on the worker.
 * Dense (topk:1) it is exactly momentum SGD. Not for nesterov or adam. */
int ps_wire_worker_momentum(const ps_job_t *job);

/* Names for logs and summaries: "fp32", "fp16", "bf16", "topk-fp32"... */
const char *ps_wire_dtype_name(uint32_t dtype);

#ifdef __cplusplus
}
#endif
#endif
