/*
 * worker/kv.h - the worker's key-value client: push and pull by key range.
 *
 * A request over [begin, end) is split by the shard map into one message per
 * server that holds part of it; all parts are sent at once and the request
 * completes when every part is answered. push/pull/init return a handle at
 * once; ps_kv_wait(handle) blocks.
 *
 * Thread model (there is no background I/O thread): the client's sockets (one
 * DEALER per server and the link to the scheduler) and its state sit behind
 * one mutex, and whichever thread holds it does the I/O. The trainer sends a
 * request itself when it submits it, and while it waits in ps_kv_wait() it
 * polls the sockets and receives the replies straight into the caller's
 * buffers, so a reply wakes exactly the thread that needs it. While nobody
 * waits (the trainer computes), a ticker thread takes the mutex every 50 ms
 * to handle what arrived (replies, scheduler messages) and to send
 * heartbeats; it notices a lost scheduler or an aborted job, which fails
 * every waiter with PS_ECLOSED.
 *
 * Thread safety: all calls from one trainer thread, except ps_kv_status()
 * (any thread). Buffers passed to push and init are sent zero-copy: keep them
 * unchanged until ps_kv_wait() on that handle returns; pull writes into dst
 * until then.
 */
#ifndef PS_WORKER_KV_H
#define PS_WORKER_KV_H

#include <stddef.h>
#include <stdint.h>

#include "proto/codec.h"
#include "proto/link.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_kv ps_kv_t;

/*
 * Connects to every server of the view (none in allreduce mode) and starts
 * the ticker thread. ctx is borrowed (a replaced server's socket comes from
 * it) and must outlive the client. Takes ownership of *link and sets it to NULL (also on
 * failure). The view is copied. Returns 0 and the client in *out (caller owns
 * the result; destroy with ps_kv_destroy()), or PS_ENOMEM / PS_EINVAL with
 * err set.
 */
int ps_kv_new(ps_ctx_t *ctx, ps_link_t **link, const ps_view_t *view, ps_kv_t **out,
              char *err, size_t errlen);

/* Stops the ticker thread and closes the sockets; NULL-safe; sets *kv to NULL. */
void ps_kv_destroy(ps_kv_t **kv);

/* Sync and ssp cut pushes into chunk messages (docs/design/chunks.md),
 * except to a server on this host, which gets each push whole; on = 1 cuts
 * those too (testing the chunks' arithmetic on one host). Call before the
 * first request. */
void ps_kv_set_local_chunks(ps_kv_t *kv, int on);

/* The model's tensors, by their first keys (n of them, ascending, the first
 * 0): top-k selects per tensor, and sends small tensors whole (kv.c). Call
 * before the first push. Returns 0 or PS_ENOMEM. */
int ps_kv_set_tensors(ps_kv_t *kv, const uint64_t *starts, size_t n);

/* Pushes the gradient of keys [begin, end) computed at `step`. Returns a
 * handle >= 0, or PS_EINVAL (bad range), PS_ENOMEM (too many in flight),
 * PS_ECLOSED (the job is gone; ps_kv_error() says why). */
int ps_kv_push(ps_kv_t *kv, uint64_t begin, uint64_t end, const float *grad, int64_t step);

/* Pulls keys [begin, end) into dst once every server holding them is at
 * version >= min_version. Returns a handle or an error as ps_kv_push(). */
int ps_kv_pull(ps_kv_t *kv, uint64_t begin, uint64_t end, float *dst, int64_t min_version);

/* A round in one request per server: pushes grad, the gradient of keys
 * [begin, end), for step (as ps_kv_push), and pulls into dst (as ps_kv_pull
 * with min_version: async servers answer with this push applied) each
 * server's whole chunks of it: its keys from the first of its chunk
 * boundaries at or after begin to the first at or after end (its first and
 * last keys are boundaries too; kv_slots.h ps_kv_slots_pull_part). The keys
 * [0, P) in one call, or a model's layers pushed one call each (last layer
 * first, down to key 0), pull every key once, each call's as soon as its
 * chunks apply. dst is indexed from begin and must hold the keys pulled.
 * A server sent both as one message (on this host, or keys of one piece)
 * answers with the values only, its ack folded in: a round costs one
 * message each way; another gets the pull, then the push in pieces. Fails
 * as either would (a refused push: no pull from that server). grad and dst
 * must not overlap. Returns one handle or an error as ps_kv_push(). */
int ps_kv_push_pull(ps_kv_t *kv, uint64_t begin, uint64_t end, const float *grad, int64_t step,
                    float *dst, int64_t min_version);

/* Embedding rows (a job with rows, proto/shardps.proto's MSG_ROWS_*): keys
 * keys[0 .. n), ascending by hash (ps_rowkey_hash), each server's run of
 * them in one message. Pulls their rows, n x dim floats, into rows once
 * every server holding some is at version >= min_version. Returns a handle
 * or an error as ps_kv_push() (PS_EINVAL: no rows in this job, or another
 * dim). keys must stay unchanged until the wait. */
int ps_kv_rows_pull(ps_kv_t *kv, const uint64_t *keys, size_t n, size_t dim, float *rows,
                    int64_t min_version);

/* Pushes grads, the gradient of the rows of keys (as above), for step:
 * every server gets its run, an empty one included (its step waits for
 * it). Sent as a copy. Returns a handle or an error as ps_kv_rows_pull(). */
int ps_kv_rows_push(ps_kv_t *kv, const uint64_t *keys, size_t n, size_t dim, const float *grads,
                    int64_t step);

/* Sends the initial values of [begin, end) (worker 0, before step 0). */
int ps_kv_init(ps_kv_t *kv, uint64_t begin, uint64_t end, const float *values);

/* Waits for a handle, doing the client's I/O meanwhile. Returns 0, or the
 * failure (a server's PS_E* reply, or PS_ECLOSED when the job was aborted);
 * ps_kv_error() says why (each request keeps its own reason). */
int ps_kv_wait(ps_kv_t *kv, int handle);

/* Blocks until every worker entered the barrier `name`. Returns 0 or PS_ECLOSED. */
int ps_kv_barrier(ps_kv_t *kv, const char *name);

/* Sends the final report and blocks until the scheduler ends the job.
 * Returns 0 on a clean end, PS_ECLOSED otherwise. */
int ps_kv_finish(ps_kv_t *kv, const Shardps__Done *done);

/* Tells the scheduler this worker is failing (it aborts the job at once). */
void ps_kv_abort(ps_kv_t *kv, const char *reason);

/* The same with the PS_E* status the scheduler records (PS_ENONFINITE: the
 * job diverged); ps_kv_abort() sends PS_ECLOSED. */
void ps_kv_abort_with(ps_kv_t *kv, int status, const char *reason);

/* 0 while the job runs; PS_ECLOSED (or another PS_E*) once it is gone: the
 * scheduler was lost, aborted the job or ended it. Cheap; thread-safe; lets a
 * trainer blocked elsewhere (the allreduce ring) notice the end promptly. */
int ps_kv_status(ps_kv_t *kv);

/* The reason of the last failure a call on kv returned (or, if none did yet,
 * why the job is gone; "" while it runs). The ticker never changes it.
 * Borrowed, valid until the next call from the trainer thread. */
const char *ps_kv_error(ps_kv_t *kv);

/*
 * Failover: once the scheduler said a lost server was replaced (every server
 * rolled back to a checkpoint), every request in flight fails with PS_EAGAIN
 * and new ones are refused with it until the trainer calls this. Returns 1
 * with the step to start again from in *step (every handle the trainer held
 * is released: forget them; pull the parameters of version *step), or 0 when
 * no rollback is pending.
 */
int ps_kv_rollback(ps_kv_t *kv, int64_t *step);

/* Rollbacks done so far (ps_kv_rollback() calls that found one pending): a
 * handle from before one may be released or reused, so it is void. */
uint64_t ps_kv_rollbacks(ps_kv_t *kv);

/* Non-zero when the pending failover is a replica's takeover (--replicas):
 * nothing rolled back, the trainer sends what was in flight again (the
 * step's push and pull) and goes on; *step of ps_kv_rollback means nothing. */
int ps_kv_takeover_pending(ps_kv_t *kv);

/* The lowest version any server holding keys answered a pull with so far. */
int64_t ps_kv_version(ps_kv_t *kv);

/* Payload bytes pushed and pulled so far. */
void ps_kv_bytes(ps_kv_t *kv, uint64_t *pushed, uint64_t *pulled);

#ifdef __cplusplus
}
#endif
#endif
