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

#ifdef __cplusplus
}
#endif
#endif
