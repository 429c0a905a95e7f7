/*
 * server/consistency_held.h - the dense pushes a stepped consistency holds
 * until their step applies: per slot (a step of the window and a worker),
 * its parts read in place from their frames, the keys and chunks they
 * cover and the version they were computed on; and the step's gradient of
 * a range summed from them. Part of the consistency (server/consistency.h),
 * below it: it knows no modes, no live workers and no pulls.
 *
 * Not thread-safe: the consistency's thread makes every call.
 */
#ifndef PS_SERVER_CONSISTENCY_HELD_H
#define PS_SERVER_CONSISTENCY_HELD_H

#include <stddef.h>
#include <stdint.h>

#include "server/consistency.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int workers;              /* N */
    int window;               /* steps held at once */
    size_t nslots;            /* window * N (1 when not stepped) */
    uint64_t n;               /* keys in the shard */
    uint64_t chunk;           /* keys per chunk (the last may be shorter) */
    size_t nchunks;           /* chunks of the shard */
    int staleness_lr;         /* weight a gradient 1/tau when tau > 1 versions stale */
    ps_consistency_ops_t ops; /* release: a frame no longer read */
} ps_held_config_t;

typedef struct ps_held ps_held_t;

/* An empty table for cfg. Returns 0 or PS_ENOMEM. Caller owns *out;
 * destroy with ps_held_destroy(). */
int ps_held_new(ps_held_t **out, const ps_held_config_t *cfg);

/* Releases every held frame (ops.release) and frees; NULL-safe; sets *h to NULL. */
void ps_held_destroy(ps_held_t **h);

/* Index of slot (step t, worker w): (t % window) * N + w. */
size_t ps_held_slot(const ps_held_t *h, int64_t t, int w);

/* Holds the push of shard-relative keys [begin, end) (data: their floats,
 * any alignment, read in place until frame is released) in slot k.
 * Takes ownership of frame on success. Returns 0, PS_ESTATE (keys of the
 * slot already held: a worker's share is complete exactly when each key
 * came once) or PS_ENOMEM (PS_CONSISTENCY_MAX_PARTS held already). */
int ps_held_add(ps_held_t *h, size_t k, uint64_t begin, uint64_t end, const void *data,
                void *frame);

/* Releases slot k's frames and empties it. */
void ps_held_release(ps_held_t *h, size_t k);

/* Keys slot k holds. */
uint64_t ps_held_covered(const ps_held_t *h, size_t k);

/* Keys of chunk ch that slot k holds. */
uint64_t ps_held_chunk_got(const ps_held_t *h, size_t k, size_t ch);

/* Slot k's gradients were computed on the stalest version of its pushes:
 * version when first (its first push) or staler. */
void ps_held_note_version(ps_held_t *h, size_t k, int64_t version, int first);

/* The version slot k's gradients were computed on. */
int64_t ps_held_version(const ps_held_t *h, size_t k);

/* The weight of slot k's gradients in step t (staleness-aware lr: Zhang,
 * Gupta, Lian, Liu, IJCAI 2016): 1/tau for tau = t - their version > 1
 * when the job asks for it, else 1. */
float ps_held_weight(const ps_held_t *h, int64_t t, size_t k);

/* A gradient's weight tau versions after it was computed (as above). */
float ps_held_stale_weight(const ps_held_t *h, int64_t tau);

/* Keys [off, off + len) of worker w's push of step t, usable in place as
 * the step's gradient: in one aligned part, unweighted. Else NULL.
 * Borrowed; valid until the slot is released. */
const float *ps_held_lone(const ps_held_t *h, int64_t t, int w, uint64_t off, uint64_t len);

/* The gradient sum of keys [off, off + len) of step t into out[0, len):
 * the pushes of each worker w >= first with with[w] set, in rank order,
 * each weighted by ps_held_weight(), read in place. Returns out. */
const float *ps_held_sum(const ps_held_t *h, int64_t t, const unsigned char *with, int first,
                         uint64_t off, uint64_t len, float *out);

#ifdef __cplusplus
}
#endif
#endif
