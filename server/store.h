/*
 * server/store.h - one server's shard: its parameters, the optimizer's state
 * beside them, and which keys the initial values have reached.
 *
 * Plain memory and arithmetic: no sockets, no consistency rules (which step
 * applies when is server/consistency.h's), no clock. Keys are global; the
 * shard is [begin, end) of the flat parameter vector, its values kept in
 * chunks of PS_STORE_CHUNK_KEYS keys.
 *
 * Replies are sent from the values themselves, without a copy: a reply holds
 * its chunk's values (ps_store_hold) until the transport has sent them
 * (ps_store_release). An update of a chunk that replies still hold is
 * written, in the same pass as the optimizer's, into a spare buffer
 * (ps_store_reserve), which becomes the chunk's values; the held version
 * stays unchanged until its last reply lets it go (copy on write). So a
 * version is read by as many replies as want it, and an update costs what
 * it costs in place.
 *
 * Not thread-safe: one thread makes every call, but ps_store_release (any
 * thread, e.g. the transport's I/O thread).
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

/* Keys per chunk: a reply part never crosses a chunk (2^18 keys, 1 MiB). */
enum { PS_STORE_CHUNK_KEYS = 1 << 18 };

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

/* The values of key `key` of the shard and the ones after it, to the end
 * of its chunk (PS_STORE_CHUNK_KEYS). Borrowed; valid until the next update
 * or ps_store_destroy(). */
const float *ps_store_values(const ps_store_t *s, uint64_t key);

/* Copies the values of keys r (inside the shard) into dst, whichever
 * buffers hold them. */
void ps_store_read(const ps_store_t *s, ps_range_t r, float *dst);

/* The values of the whole shard as one array when every chunk is in its
 * home (no update went to a spare), else NULL (use ps_store_read). Borrowed;
 * valid until the next update. */
const float *ps_store_flat(const ps_store_t *s);

/*
 * Allocates n spare chunk buffers for updates of chunks held by replies.
 * With the number of chunks plus the most holds the caller allows at once,
 * an update always finds one. The first `warm` of them (the ones taken
 * first) are touched now, so that an update writing into one costs no page
 * faults later; the others cost memory only once an update writes into
 * one. Call once, before any hold. Returns 0 or PS_ENOMEM.
 */
int ps_store_reserve(ps_store_t *s, int n, int warm);

/*
 * The values of keys `part` (inside one chunk), held unchanged until
 * ps_store_release() of the pointer returned: an update of the chunk
 * meanwhile goes to a spare (ps_store_reserve); with no spare free it goes in
 * place (the caller then knows by its protocol that nobody reads them:
 * sync). Borrowed until that release.
 */
const float *ps_store_hold(ps_store_t *s, ps_range_t part);

/* Lets values from ps_store_hold() go (data: the pointer it returned). Any
 * thread; the shape of a send's release callback (ps_msg_release_fn, hint:
 * the store). */
void ps_store_release(void *data, void *hint);

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
 * update cut into ranges passes the same t for each. A block of 4096 keys
 * whose update would make a value or its state NaN or infinite is left as
 * it was. Returns the number of blocks so left (0 when the whole update
 * applied).
 */
int ps_store_step(ps_store_t *s, ps_range_t r, const float *grad, float lr, float scale,
                   int64_t t);

#ifdef __cplusplus
}
#endif
#endif
