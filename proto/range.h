/*
 * proto/range.h - key ranges over the flat parameter vector, and the shard map.
 *
 * A key is an element offset into the model's flat float32 vector of length P;
 * a range is a half-open [begin, end). The shard map cuts [0, P) into S
 * contiguous ranges balanced by bytes (sizes differ by at most one element),
 * independent of tensor boundaries. Plain functions on plain data.
 */
#ifndef PS_PROTO_RANGE_H
#define PS_PROTO_RANGE_H

#include <stddef.h>
#include <stdint.h>

#include "common/rowkey.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t begin; /* first key */
    uint64_t end;   /* one past the last key */
} ps_range_t;

static inline uint64_t ps_range_len(ps_range_t r)
{
    return r.end - r.begin;
}

/* Non-zero when inner lies entirely inside outer. */
static inline int ps_range_contains(ps_range_t outer, ps_range_t inner)
{
    return inner.begin >= outer.begin && inner.end <= outer.end && inner.begin <= inner.end;
}

/* Intersection of a and b; returns its length (0 when they do not overlap). */
uint64_t ps_range_intersect(ps_range_t a, ps_range_t b, ps_range_t *out);

/* Cuts [0, p) into s contiguous ranges; the first p % s get one extra key, so no
 * range holds more than ceil(p/s) keys. out has s entries. Returns 0 or PS_EINVAL (s < 1). */
int ps_range_split(uint64_t p, int s, ps_range_t *out);

/* Index of the shard holding key (shards tile [0, P) in order), or -1. O(log s). */
int ps_range_find(const ps_range_t *shards, int s, uint64_t key);

/* ---- embedding rows: keys of any 64-bit value, sharded by their hash ---- */

/* A range of hashed row keys, [first, last] inclusive (the hashed space is
 * all of [0, 2^64), which a half-open range cannot end). */
typedef struct {
    uint64_t first; /* lowest hash held */
    uint64_t last;  /* highest hash held */
} ps_rowrange_t;

/* Cuts the hashed space into s ranges of equal width (within one), in
 * order: out has s entries. Returns 0 or PS_EINVAL (s < 1). */
int ps_range_split_rows(int s, ps_rowrange_t *out);

/* Non-zero when rows (s entries) tile the hashed space in order. */
int ps_range_rows_tile(const ps_rowrange_t *rows, int s);

/* Index of the range of rows (s entries tiling the hashed space in order)
 * holding key's hash, or -1. O(log s). */
int ps_range_find_row(const ps_rowrange_t *rows, int s, uint64_t key);

/* A server's rows range is cut into PS_RANGE_ROW_PIECES pieces of equal
 * width (within one), the unit in which a step's rows apply and answer:
 * a worker sends a piece's keys in a message of their own, so a server
 * applies a piece as soon as every worker's share of it is in, and the
 * next step's rows of that piece go down while later pieces still go up
 * (docs/design/rows.md). */
#define PS_RANGE_ROW_PIECES 8

/* Piece q of r: its hashes, [first, last] inclusive. */
ps_rowrange_t ps_range_row_piece(ps_rowrange_t r, int q);

/* The piece of r holding hash h (a hash outside r: the nearest piece). */
int ps_range_row_piece_of(ps_rowrange_t r, uint64_t h);

#ifdef __cplusplus
}
#endif
#endif
