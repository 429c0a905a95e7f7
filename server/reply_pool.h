/*
 * server/reply_pool.h - buffers for copies of pull replies, reused.
 *
 * Replies that a later update must not change under ZeroMQ's feet (every mode
 * but sync) go out as copies. The copies land in buffers of a fixed number of
 * keys allocated once: the transport's I/O thread hands each back (the send's
 * release callback) once its bytes left, so a reply costs one copy into warm
 * memory, not an allocation and fresh pages. When every buffer is out, the
 * caller lets the transport copy. Knows nothing of sockets or consistency.
 */
#ifndef PS_SERVER_REPLY_POOL_H
#define PS_SERVER_REPLY_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_reply_pool ps_reply_pool_t;

/*
 * A pool for the replies of a shard of n keys, in buffers of buf_keys floats:
 * a few copies of the shard, at most 64 MiB. Pages are touched on first use
 * only, so an idle pool costs no memory. Returns 0 or PS_ENOMEM. Caller owns
 * *out; destroy with ps_reply_pool_destroy().
 */
int ps_reply_pool_new(ps_reply_pool_t **out, uint64_t n, uint64_t buf_keys);

/* Frees the pool; NULL-safe; sets *p to NULL. Only once every buffer is back
 * (after the transport that held them is shut down). */
void ps_reply_pool_destroy(ps_reply_pool_t **p);

/* A free buffer of buf_keys floats, or NULL when all are out. Caller owns it
 * until ps_reply_pool_give(). Thread-safe. */
float *ps_reply_pool_take(ps_reply_pool_t *p);

/* Gives buffer data (from ps_reply_pool_take(hint)) back. The shape of a
 * send's release callback (ps_msg_release_fn); thread-safe. */
void ps_reply_pool_give(void *data, void *hint);

#ifdef __cplusplus
}
#endif
#endif
