/*
 * worker/ring.h - ring allreduce over ZeroMQ: the workers of an allreduce job
 * sum a flat float32 vector without servers.
 *
 * M workers form a ring in rank order: each receives from its left neighbour
 * (rank - 1) on a socket it binds, and sends to its right neighbour (rank + 1)
 * on a socket that connects to the right neighbour's endpoint. The vector of n
 * floats is cut into M contiguous chunks (sizes differ by at most one float;
 * n need not divide by M, and chunks may be empty when n < M). Reduce-scatter
 * (ring steps 0..M-2) then all-gather (ring steps M-1..2M-3): at ring step g a
 * worker sends chunk (rank - g) mod M and receives chunk (rank - g - 1) mod M,
 * which it adds in (reduce-scatter) or stores (all-gather); the chunk it
 * receives at step g is the one it sends at step g + 1. Each chunk travels in
 * sub-chunks of at most max(sub_floats, ceil(n/M)/4) floats (big vectors travel
 * in bigger messages, still about four per chunk), and the ring is pipelined at that
 * granularity: sub-chunk j is forwarded for step g + 1 as soon as it arrived
 * and was added for step g. After the call every worker holds bitwise the same
 * sums (each chunk is summed once, by one chain of additions, then copied).
 *
 * Messages are one shardps header (type ring-data, sender rank, training step,
 * ring step, key range = the sub-chunk) plus the floats, sent zero-copy from
 * the caller's buffer and read in place on receipt. Every received message is
 * checked: the left neighbour's (its rank and its token, which the
 * scheduler gave it and us in the view), of this step, ring step and range,
 * of the right length. Anything else from the left neighbour breaks the ring
 * (PS_EPROTO); messages from anyone else, or without its token, are dropped
 * and counted (a stranger that reaches the socket cannot break the ring).
 *
 * ps_ring_allgather() passes variable-sized blocks of keyed rows round the
 * same ring (a worker's embedding rows of a step), with the same checks.
 *
 * It does not know about models, optimizers or the scheduler: the caller
 * passes a check function that says when the job is gone, so a lost neighbour
 * (the scheduler aborts the job) never leaves the ring waiting.
 *
 * Thread safety: one ring belongs to one thread (it owns both sockets).
 */
#ifndef PS_WORKER_RING_H
#define PS_WORKER_RING_H

#include <stddef.h>
#include <stdint.h>

#include "proto/range.h"
#include "proto/sock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_ring ps_ring_t;

/* Returns 0 to keep waiting, or a negative PS_E* to give up (the job is gone).
 * Called from the ring's thread while it waits. */
typedef int ps_ring_check_fn(void *arg);

/* Default pipelining granularity: 32768 floats = 128 KiB per message. */
enum { PS_RING_SUB_FLOATS = 32768 };

typedef struct {
    int rank;          /* this member's place in the ring, 0..size-1 */
    int size;          /* M, members in the ring (1..PS_MAX_WORKERS) */
    const char *right; /* endpoint of member (rank + 1) % size; unused when size == 1 */
    const char *right_key; /* --secure: its Z85 public key (from the view); NULL on a plain context */
    uint64_t token;      /* ours (RegisterAck): every message we send carries it */
    uint64_t left_token; /* the left neighbour's (the view): ring data without it is dropped */
    size_t sub_floats; /* floats per message (>= 1); 0 = PS_RING_SUB_FLOATS */
    ps_ring_check_fn *check; /* polled while waiting; NULL = never */
    void *check_arg;         /* passed to check */
    double timeout; /* seconds without an expected message before PS_ETIMEDOUT; 0 = none */
} ps_ring_config_t;

/*
 * Creates a ring member and binds its receiving socket to bind (e.g.
 * tcp://0.0.0.0:*); the bound endpoint (wildcard port resolved) goes into
 * endpoint. max_floats: the longest vector the ring will sum, or the
 * longest frame of an allgather's blocks in floats' worth of bytes,
 * whichever is more (0 = no limit); a frame longer than that plus 64 KiB is
 * dropped at its header, unread.
 * Returns 0 and the member in *out (caller owns the result; destroy with
 * ps_ring_destroy()), or PS_EINVAL (bad endpoint) / PS_EIO (cannot bind) /
 * PS_ENOMEM, with a one-line reason in err.
 */
int ps_ring_new(ps_ctx_t *ctx, const char *bind, uint64_t max_floats, ps_ring_t **out,
                char *endpoint, size_t cap, char *err, size_t errlen);

/* Joins the ring: connects to the right neighbour. cfg is copied (cfg->right
 * too). Returns 0, or PS_EINVAL (bad config or endpoint) with err set. */
int ps_ring_connect(ps_ring_t *r, const ps_ring_config_t *cfg, char *err, size_t errlen);

/*
 * Replaces buf[0..n) with the sum over the ring of every member's buf. Every
 * member must call it with the same n and step, in the same order. step tags
 * the messages (a training step; any value, negative included). buf is sent
 * zero-copy: it must not be touched until the call returns; on success
 * ZeroMQ has released it by then. Returns 0, or PS_ECLOSED (check said the job
 * is gone), PS_ETIMEDOUT (cfg timeout), PS_EPROTO (the left neighbour broke
 * the sequence), PS_ESTATE (not connected, or broken earlier), PS_EIO;
 * ps_ring_error() says why. After a failure the ring is unusable, and buf must
 * stay allocated until ps_ring_destroy() has returned (frames may be queued).
 */
int ps_ring_allreduce(ps_ring_t *r, float *buf, uint64_t n, int64_t step);

/* One member's block of a ring allgather (ps_ring_allgather): n keys and
 * their n rows of dim floats, in storage for cap keys and cap rows. */
typedef struct {
    uint64_t *keys; /* [cap] the keys; the ring copies them and reads nothing else */
    float *rows;    /* [cap x dim] their rows */
    uint64_t n;     /* keys in the block, 0 .. cap */
} ps_ring_block_t;

/*
 * Ring allgather of variable-sized blocks: on entry blocks[rank] holds this
 * member's n keys and rows (only read); on return every other blocks[i]
 * holds member i's, copied into its storage (room for cap keys and cap x dim
 * floats each). M - 1 ring steps, the all-gather half of
 * ps_ring_allreduce's schedule: at ring step g a member sends block
 * ps_ring_send_chunk(rank, M, g) and receives block ps_ring_recv_chunk(rank,
 * M, g), which it sends on at step g + 1. A block is one ring-data message
 * of two frames, its keys (n x 8 bytes, as they lie in memory) and its rows
 * (n x dim x 4), whose key range [i, i + 1) names the block. Messages are
 * checked as ps_ring_allreduce's are (sender, token, step, ring step, the
 * block), and the frames' lengths against dim and cap. Every member must
 * call it with the same dim, cap and step, at the same point of the
 * sequence of ring calls. The blocks are sent zero-copy: none may be
 * touched until the call returns (after a failure, until ps_ring_destroy()
 * has returned). Returns as ps_ring_allreduce, with PS_EINVAL for a block of
 * this member of more than cap keys.
 */
int ps_ring_allgather(ps_ring_t *r, ps_ring_block_t *blocks, size_t dim, uint64_t cap,
                      int64_t step);

/* Payload bytes sent to and received from the neighbours so far. */
void ps_ring_bytes(const ps_ring_t *r, uint64_t *sent, uint64_t *received);

/* Messages dropped because they did not come from the left neighbour. */
uint64_t ps_ring_dropped(const ps_ring_t *r);

/* The reason of the last failure; borrowed, valid until the next call. */
const char *ps_ring_error(const ps_ring_t *r);

/* Closes the sockets and frees the member; NULL-safe; sets *r to NULL. Call it
 * before ps_ctx_destroy() on the context the ring was created with. */
void ps_ring_destroy(ps_ring_t **r);

/* ---- the schedule (pure functions; the unit tests check them) ------------ */

/* Ring steps of one allreduce: 2 (M - 1). */
static inline int ps_ring_num_steps(int size)
{
    return size > 1 ? 2 * (size - 1) : 0;
}

/* Chunk c of [0, n) cut into size chunks (as ps_range_split: the first n % size
 * chunks hold one float more). */
ps_range_t ps_ring_chunk(uint64_t n, int size, int c);

/* The chunk member rank sends at ring step g: (rank - g) mod size. */
int ps_ring_send_chunk(int rank, int size, int g);

/* The chunk member rank receives at ring step g: (rank - g - 1) mod size. */
int ps_ring_recv_chunk(int rank, int size, int g);

/* Sub-chunks of at most sub floats in chunk: ceil(len / sub) (0 for an empty chunk). */
uint64_t ps_ring_num_subs(ps_range_t chunk, size_t sub);

/* Sub-chunk j of chunk: [begin + j*sub, min(begin + (j+1)*sub, end)). */
ps_range_t ps_ring_sub(ps_range_t chunk, size_t sub, uint64_t j);

#ifdef __cplusplus
}
#endif
#endif
