/*
 * server/reply_pool.h - buffers for copies of pull replies, reused.
 *
 * Replies that a later update must not change under ZeroMQ's feet (every mode
 * but sync) go out as copies. The copies land in buffers of a fixed number of
 * keys allocated once: the transport's I/O thread hands each back (the send's
 * release callback) once its bytes left, so a reply costs one copy into warm
 * memory, not an allocation and fresh pages. When every shared buffer is out,
 * one more is allocated (and freed on its return).
 *
 * Each buffer counts against the peer it is sent to until the transport gives
 * it back: a peer that stops reading holds its buffers, and once it holds its
 * share (as many as the shared ones: 4 copies of the shard up to 64 MiB, at
 * least 4 buffers) it gets no more until some come back; the caller makes
 * its replies wait (server/reply.c), so a peer that does not read cannot make us
 * copy without end. Replies sent from values held in place (server/store.h,
 * no copy) count against the same share, and against one cap for all peers
 * (so the holder keeps enough spare buffers for its updates). Knows nothing
 * of sockets or consistency.
 */
#ifndef PS_SERVER_REPLY_POOL_H
#define PS_SERVER_REPLY_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_reply_pool ps_reply_pool_t;

/*
 * A pool for the replies of a shard of n keys to peers 0 .. peers-1, in
 * buffers of buf_keys floats: a few shared copies of the shard, at most 64
 * MiB. Pages are touched on first use only, so an idle pool costs no memory.
 * Returns 0 or PS_ENOMEM. Caller owns *out; destroy with
 * ps_reply_pool_destroy().
 */
int ps_reply_pool_new(ps_reply_pool_t **out, uint64_t n, uint64_t buf_keys, int peers);

/* Frees the pool; NULL-safe; sets *p to NULL. Only once every buffer is back
 * (after the transport that held them is shut down). */
void ps_reply_pool_destroy(ps_reply_pool_t **p);

/* A buffer of buf_keys floats for a reply to peer, or NULL when that peer
 * already holds its share (it is not reading), peer is out of range, or
 * memory is out. Caller owns it until ps_reply_pool_give(). Thread-safe. */
float *ps_reply_pool_take(ps_reply_pool_t *p, int peer);

/* Buffers peer holds now (sent, not yet given back), and replies sent from
 * held values (ps_reply_pool_hold). Thread-safe. */
int ps_reply_pool_held(ps_reply_pool_t *p, int peer);

/* Most replies sent from held values that may be out at once, all peers
 * together (as many as the shared buffers): the caller keeps that many
 * spare buffers beside its values so that an update always finds one. */
int ps_reply_pool_hold_cap(const ps_reply_pool_t *p);

/* Counts one reply to peer sent from held values (no buffer of the pool)
 * against peer's share and the pool's hold cap. Returns 0, or PS_ENOMEM when
 * peer holds its share or the cap is reached (the reply must wait), or peer
 * is out of range. Thread-safe. */
int ps_reply_pool_hold(ps_reply_pool_t *p, int peer);

/* That reply's bytes left: peer holds one less. Thread-safe. */
void ps_reply_pool_unhold(ps_reply_pool_t *p, int peer);

/* Gives buffer data (from ps_reply_pool_take(hint)) back. The shape of a
 * send's release callback (ps_msg_release_fn); thread-safe. */
void ps_reply_pool_give(void *data, void *hint);

#ifdef __cplusplus
}
#endif
#endif
