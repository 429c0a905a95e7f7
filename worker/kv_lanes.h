/*
 * worker/kv_lanes.h - the KV client's data messages to each server, paced by
 * the server's credits.
 *
 * A server grants each worker a window of chunk pushes in flight (the
 * credits in its PUSH_ACK headers), so that all the workers pushing into it
 * at once never queue more than its link holds (no incast). Per server a
 * lane: the pushes sent and not yet acked, the window, and a FIFO of the
 * messages waiting behind a full window (pushes, and whatever was sent after
 * them, kept in order). Only pushes count against the window; a message
 * with nothing waiting ahead of it and a free credit goes at once.
 *
 * It does not send: worker/kv.c asks it whether a message may go now
 * (ps_kv_lanes_admit), queues the others and sends what
 * ps_kv_lanes_next gives back as acks come. Thread safety: none; kv.c calls
 * it under its mutex.
 */
#ifndef PS_WORKER_KV_LANES_H
#define PS_WORKER_KV_LANES_H

#include <stdint.h>

#include "proto/msg.h"
#include "proto/range.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A message waiting in a lane: which request, its id then, what and which keys. */
typedef struct {
    int idx;             /* the request's slot */
    uint64_t id;         /* its request id when queued (a recycled slot has another) */
    ps_msg_type_t type;  /* PS_MSG_PUSH, _PULL, _PUSH_PULL or _INIT */
    ps_range_t part;     /* keys */
} ps_kv_out_t;

typedef struct ps_kv_lanes ps_kv_lanes_t;

/* Lanes for n servers, each holding up to cap waiting messages, each with a
 * window of 1 until the server grants more. Returns 0 and *out (caller owns
 * it; destroy with ps_kv_lanes_destroy()), PS_EINVAL or PS_ENOMEM. */
int ps_kv_lanes_new(int n, int cap, ps_kv_lanes_t **out);

/* Frees the lanes; NULL-safe; sets *l to NULL. */
void ps_kv_lanes_destroy(ps_kv_lanes_t **l);

/* Whether a message of type to server i may go now: nothing waits in its
 * lane and, for a push, a credit is free (then taken). A full lane admits
 * too: the window is a bound on what queues, never a reason to fail.
 * Returns 1 (send it) or 0 (queue it with ps_kv_lanes_queue). */
int ps_kv_lanes_admit(ps_kv_lanes_t *l, int i, ps_msg_type_t type);

/* Queues o behind server i's waiting messages. */
void ps_kv_lanes_queue(ps_kv_lanes_t *l, int i, const ps_kv_out_t *o);

/* A push to server i was answered (acked or refused); credits > 0: the
 * window the server grants from now on. */
void ps_kv_lanes_answered(ps_kv_lanes_t *l, int i, uint32_t credits);

/* The next message of server i's lane that may go now, into *o (a push
 * takes a credit). Returns 1, or 0 when none may. */
int ps_kv_lanes_next(ps_kv_lanes_t *l, int i, ps_kv_out_t *o);

/* Forgets every waiting message and push in flight (a failover: the
 * requests fail, the sockets are new); windows stay. */
void ps_kv_lanes_reset(ps_kv_lanes_t *l);

/* Pushes in flight to server i, and its window. */
int ps_kv_lanes_inflight(const ps_kv_lanes_t *l, int i);
int ps_kv_lanes_window(const ps_kv_lanes_t *l, int i);

#ifdef __cplusplus
}
#endif
#endif
