/*
 * worker/kv_lanes.h - the KV client's data messages to each server, paced by
 * the server's credits and by the link's measured pace.
 *
 * A server grants each worker keys of chunk pushes in flight (the credits in
 * its PUSH_ACK headers, in chunks), so that all the workers pushing into it
 * at once never queue more than its link holds (no incast). Per server a
 * lane: the pushes sent and not yet acked, the window, and a FIFO of the
 * messages waiting behind a full window (pushes, and whatever was sent after
 * them, kept in order). Only pushes count against the window (dense, and
 * embedding rows weighed in the same unit); a message
 * with nothing waiting ahead of it and room in the window goes at once.
 *
 * The window is also paced by what the lane measures: its least round trip
 * and the rate its acks come at while pushes wait (this worker's share of
 * the server's link). It keeps that rate's round trip plus the acks'
 * jitter in flight (how much later than its round trip and the pushes
 * ahead of it a push is answered: a decaying most, up to
 * PS_KV_QUEUE_SECONDS or PS_KV_QUEUE_CREDIT of a credit's time on a slow
 * link), and one message more (a push goes while what flies
 * is under it: with whole messages under it, a window of less than two
 * would measure the pace of one message a round trip and keep it). So a
 * link's queue stays as short as the acks' timing lets it (replies and
 * acks behind it are not held up, and a round's last pushes wait behind
 * no more than that), and the server's grant is never passed. The same
 * rates, summed (ps_kv_lanes_rate), size the push messages (kv_slots.h).
 * A server on this host (ps_kv_lanes_set_local: loopback, or colocated)
 * has no link between us: its lane keeps the whole grant and counts in
 * no rate, so acks that come slowly because the cores are busy are never
 * taken for a slow link.
 *
 * It does not send: worker/kv.c asks it whether a message may go now
 * (ps_kv_lanes_admit), queues the others and sends what
 * ps_kv_lanes_next gives back as acks come. Thread safety: none; kv.c calls
 * it under its mutex. Times are seconds of one clock (ps_now).
 */
#ifndef PS_WORKER_KV_LANES_H
#define PS_WORKER_KV_LANES_H

#include <stdint.h>

#include "proto/msg.h"
#include "proto/range.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A message waiting in a lane: which request, its id then, what and which
 * keys, and what it weighs against the window. */
typedef struct {
    int idx;             /* the request's slot */
    uint64_t id;         /* its request id when queued (a recycled slot has another) */
    ps_msg_type_t type;  /* PS_MSG_PUSH, _PULL, _PUSH_PULL, _INIT or _ROWS_PUSH */
    ps_range_t part;     /* keys (a rows push: none) */
    uint64_t keys;       /* a push's weight: its keys, or a rows push's floats
                            (rows and keys, ps_kv_lanes_row_weight) */
    int piece;           /* a rows push: the piece of the server's rows */
} ps_kv_out_t;

/* Whether a message of type counts against a lane's window: the pushes,
 * dense and rows. */
static inline int ps_kv_lanes_is_push(ps_msg_type_t type)
{
    return type == PS_MSG_PUSH || type == PS_MSG_ROWS_PUSH;
}

/* What a rows push of nnz keys with rows of dim floats weighs, in the
 * dense pushes' unit (4 bytes): its rows and its 8-byte keys. */
static inline uint64_t ps_kv_lanes_row_weight(uint64_t nnz, uint64_t dim)
{
    return nnz * (dim + 2);
}

typedef struct ps_kv_lanes ps_kv_lanes_t;

/* The most queueing a lane's window allows at the server's link beyond a
 * round trip, where acks come late (busy cores), or that share of a
 * credit's time at the lane's rate where that is longer (slow links); the
 * weight of each new ack in the measured pace and jitter. */
#define PS_KV_QUEUE_SECONDS 0.004
#define PS_KV_QUEUE_CREDIT 0.4
#define PS_KV_PACE_DECAY 0.125

/* Lanes for n servers, each holding up to cap waiting messages, each with a
 * window of one push until the server grants more. Returns 0 and *out (caller owns
 * it; destroy with ps_kv_lanes_destroy()), PS_EINVAL or PS_ENOMEM. */
int ps_kv_lanes_new(int n, int cap, ps_kv_lanes_t **out);

/* Frees the lanes; NULL-safe; sets *l to NULL. */
void ps_kv_lanes_destroy(ps_kv_lanes_t **l);

/* Keys of one credit: the servers' chunk; 0 (the default): a credit is a
 * push, and the window is not paced (pushes whole, not in chunks). */
void ps_kv_lanes_set_unit(ps_kv_lanes_t *l, uint64_t keys);

/* Whether the windows are paced (a unit is set). */
int ps_kv_lanes_paced(const ps_kv_lanes_t *l);

/* Whether a message of type (a push: of weight keys) to server i may go now:
 * nothing waits in its lane and, for a push, it fits the window (then it is
 * in flight from now). A full lane admits too: the window is a bound on what
 * queues, never a reason to fail. Returns 1 (send it) or 0 (queue it with
 * ps_kv_lanes_queue). */
int ps_kv_lanes_admit(ps_kv_lanes_t *l, int i, ps_msg_type_t type, uint64_t keys, double now);

/* Queues o behind server i's waiting messages. */
void ps_kv_lanes_queue(ps_kv_lanes_t *l, int i, const ps_kv_out_t *o);

/* The oldest push to server i in flight was answered (acked or refused)
 * now; credits > 0: the chunks the server grants from now on. */
void ps_kv_lanes_answered(ps_kv_lanes_t *l, int i, uint32_t credits, double now);

/* The next message of server i's lane that may go now, into *o (a push is
 * in flight from now). Returns 1, or 0 when none may. */
int ps_kv_lanes_next(ps_kv_lanes_t *l, int i, ps_kv_out_t *o, double now);

/* The message o that ps_kv_lanes_next just gave for server i was not sent
 * after all (its request is over). */
void ps_kv_lanes_unsend(ps_kv_lanes_t *l, int i, const ps_kv_out_t *o);

/* Forgets every waiting message and push in flight (a failover: the
 * requests fail, the sockets are new); windows and paces stay. */
void ps_kv_lanes_reset(ps_kv_lanes_t *l);

/* Pushes in flight to server i, and its window (keys; pushes where a
 * credit is a push). */
int ps_kv_lanes_inflight(const ps_kv_lanes_t *l, int i);
uint64_t ps_kv_lanes_window(const ps_kv_lanes_t *l, int i);

/* Server i is on this host (1) or not (0, the default). */
void ps_kv_lanes_set_local(ps_kv_lanes_t *l, int i, int local);
int ps_kv_lanes_local(const ps_kv_lanes_t *l, int i);

/* Keys a second the lanes to other hosts' servers are acked at while pushes
 * wait, their paces summed: the worker's link; 0 while one of them has not
 * been measured, or when there is none. */
double ps_kv_lanes_rate(const ps_kv_lanes_t *l);

#ifdef __cplusplus
}
#endif
#endif
