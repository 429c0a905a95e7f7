/*
 * server/store.h - one server's shard: its parameters, the optimizer's state
 * beside them, and which keys the initial values have reached.
 *
 * Plain memory and arithmetic: no sockets, no consistency rules (which step
 * applies when is server/consistency.h's), no clock. Keys are global; the
 * shard is [begin, end) of the flat parameter vector. Not thread-safe: one
 * thread makes every call.
 */
#ifndef PS_SERVER_STORE_H
#define PS_SERVER_STORE_H

#include <stdint.h>

#include "common/job.h"
#include "proto/range.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_store ps_store_t;

/*
 * A store for the keys of shard, parameters zero until initialised, with the
 * optimizer job->optimizer. Returns 0, PS_EINVAL (unknown optimizer) or
 * PS_ENOMEM. Caller owns *out; destroy with ps_store_destroy().
 */
int ps_store_new(ps_store_t **out, ps_range_t shard, const ps_job_t *job);

/* Frees the store; NULL-safe; sets *s to NULL. */
void ps_store_destroy(ps_store_t **s);

/* The shard's keys. */
ps_range_t ps_store_shard(const ps_store_t *s);

/*
 * Sets the initial values of keys r (inside the shard) from values
 * (ps_range_len(r) floats, any alignment; copied). Each key is initialised
 * exactly once: when every key has been, the store is initialised and the
 * optimizer state zeroed. Returns 0, 1 when this call completed the
 * initialisation, PS_ESTATE when any key of r already was (nothing changes),
 * PS_ERANGE when r is empty or outside the shard.
 */
int ps_store_init(ps_store_t *s, ps_range_t r, const void *values);

/* Makes every key uninitialised again, to be set anew by ps_store_init()
 * (failover: the shard is reloaded from a checkpoint). The buffers stay
 * where they are (replies in flight may still read them). Returns 0 or
 * PS_ENOMEM (nothing changes). */
int ps_store_reset(ps_store_t *s);

/* Non-zero once every key is initialised (at once for an empty shard). */
int ps_store_initialized(const ps_store_t *s);

/* The values of key `key` of the shard and the ones after it, to the
 * shard's end. Borrowed; valid until the next update or ps_store_destroy(). */
const float *ps_store_values(const ps_store_t *s, uint64_t key);

/* Arrays of optimizer state (0, 1 or 2), and array i of them: n floats, key
 * shard.begin first. Borrowed; valid until ps_store_destroy(). Writable for
 * loading a checkpoint, after the parameters completed the initialisation
 * (which zeroes the state). */
int ps_store_state_arrays(const ps_store_t *s);
float *ps_store_state(ps_store_t *s, int i);

/*
 * One optimizer update (kernels/optim.h, ps_optim_step) of keys r (inside the
 * shard) with gradient grad*scale at learning rate lr; grad holds
 * ps_range_len(r) floats, the first for key r.begin. t is the 1-based count of
 * updates applied so far including this one (Adam's bias correction): an
 * update cut into ranges passes the same t for each.
 */
void ps_store_step(ps_store_t *s, ps_range_t r, const float *grad, float lr, float scale,
                   int64_t t);

#ifdef __cplusplus
}
#endif
#endif
