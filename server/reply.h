/*
 * server/reply.h - the server's answers to workers: acks, and pull replies
 * sent without a copy from the store's values (or encoded for --wire
 * fp16/bf16), each worker's share of replies in flight, and the parts that
 * wait while a worker holds its share.
 *
 * A pull's answer goes in messages of up to PS_MSG_MAX_FRAMES store chunks, a
 * frame per chunk. Outside sync each frame counts against its worker's share
 * (server/reply_pool.h) until ZeroMQ has sent it; past the share a part
 * waits, behind that worker's other waiting parts (a pull's parts arrive in
 * key order), and goes out from ps_reply_flush() with the values then
 * current; once as many wait as the worker can have requests in flight, the
 * part is refused with an error reply (a worker that stopped reading).
 *
 * Refusals of bad requests go out here too (ps_reply_error), with their
 * count and a rate-limited log line. It decides nothing about when to
 * answer (server/consistency.h does) nor what is wrong with a request
 * (server/intake.h does). One thread (the server's loop) makes every call; the
 * release of sent frames runs on ZeroMQ's I/O thread and touches only the
 * thread-safe store and pool.
 */
#ifndef PS_SERVER_REPLY_H
#define PS_SERVER_REPLY_H

#include <stdint.h>

#include "common/ratelog.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "server/observe.h"
#include "server/rows.h"
#include "server/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Who a reply goes to: the consistency's asker (ps_request_t.asker), copied
 * while a pull waits. Plain data. */
typedef struct {
    ps_route_t route;     /* the worker's routing id on the server's ROUTER */
    uint64_t request_id;  /* echoed in the reply */
    ps_msg_type_t type;   /* of the request: init, push, pull or push-pull */
    int worker;           /* its rank (its token checked) */
    int64_t step;         /* of the request, for the trace */
    uint32_t piece;       /* a rows pull's piece, echoed in its reply */
} ps_reply_to_t;

typedef struct {
    ps_range_t shard;          /* the server's keys */
    int workers;               /* replies go to workers 0 .. workers-1 */
    int rank;                  /* the server's, in every reply's header */
    int counted;               /* replies count against their worker's share: every
                                  mode but sync (where a worker pulls once a step) */
    uint32_t dtype;            /* of pull replies (--wire): PS_DTYPE_F32 sends the
                                  store's values in place, others an encoded copy */
    ps_store_t *store;         /* borrowed: the values sent; must outlive the reply */
    ps_ratelog_t *rejections;  /* borrowed: the log line of a refused part */
    ps_server_obs_t *obs;      /* borrowed: each reply's bytes; NULL: not counted */
    uint64_t chunk;            /* keys of the consistency's chunks: a pull may be
                                  answered in a part per chunk (0: per store chunk) */
} ps_reply_config_t;

typedef struct ps_reply ps_reply_t;

/* Chunk pushes of all workers together that a server lets be in flight
 * toward it (its credits, in each PUSH_ACK): about what a link's queue holds
 * (half a MiB: 40 ms at 100 Mbit/s), so pushes from many workers at once do
 * not overflow it, and enough to keep the link busy. */
enum { PS_REPLY_CREDIT_BYTES = 512 * 1024 };

/* Requests one worker may have in flight (its client's slots, PS_KV_SLOTS):
 * as many pulls' worth of its parts may wait before one is refused. */
enum { PS_REPLY_REQUESTS_IN_FLIGHT = 64 };

/* Store chunks a pull of the whole of shard is answered from (the frames of
 * its reply, in messages of up to PS_MSG_MAX_FRAMES). */
uint64_t ps_reply_parts(ps_range_t shard);

/*
 * Replies for cfg (copied). Nothing can be sent before ps_reply_set_sock().
 * Returns 0 or PS_ENOMEM. Caller owns *out; destroy with ps_reply_destroy().
 */
int ps_reply_new(ps_reply_t **out, const ps_reply_config_t *cfg);

/* Frees; NULL-safe; sets *r to NULL. Only once ZeroMQ has given every sent
 * frame back (after the context that sent them is destroyed). */
void ps_reply_destroy(ps_reply_t **r);

/* Sends through sock (the server's ROUTER): borrowed; valid until it is
 * destroyed, after which nothing may be sent. */
void ps_reply_set_sock(ps_reply_t *r, ps_sock_t *sock);

/* Most replies sent from held values that may be out at once, all workers
 * together: the store keeps that many spare buffers (ps_store_reserve). */
int ps_reply_hold_cap(const ps_reply_t *r);

/* Acknowledges to's init or push for keys at version (INIT_ACK, PUSH_ACK;
 * a push-pull's push is acked by its pull's reply: nothing is sent). A
 * failed send is logged. */
void ps_reply_ack(ps_reply_t *r, const ps_reply_to_t *to, ps_range_t keys, int64_t version);

/* Answers to's pull with the store's keys at version: sent now, or waiting
 * for the worker's share, or refused with an error reply (see above). */
void ps_reply_pull(ps_reply_t *r, const ps_reply_to_t *to, ps_range_t keys, int64_t version);

/* Sends to a rows pull the rows of keys[0 .. n) (any alignment) as table
 * holds them, at version: MSG_ROWS, one frame read into the reply's own
 * buffer (grown as needed) and copied out; with no memory for it, an error
 * reply. */
void ps_reply_rows(ps_reply_t *r, const ps_reply_to_t *to, const ps_rows_t *table,
                   const void *keys, uint64_t n, int64_t version);

/* Sends the waiting parts whose workers have buffers back, stamped version
 * (the store's current one: newer than was due, which every mode that waits
 * accepts). Call from the loop. Returns how many went. */
int ps_reply_flush(ps_reply_t *r, int64_t version);

/* Hot replicas: a pull reply due while need > open waits (sent by
 * ps_reply_flush once open reaches the need of its time): no value leaves
 * before the replicas hold the update that made it. The caller counts the
 * updates sent to the replicas (need) and those they acknowledged (open). */
void ps_reply_gate(ps_reply_t *r, uint64_t need, uint64_t open);

/* Parts waiting, all workers together (the loop polls sooner while some do). */
int ps_reply_waiting(const ps_reply_t *r);

/* Refuses request req (from any peer) with status and a reason made of fmt:
 * an error reply, counted (ps_reply_errors) and logged at most once per
 * sender and reason (cfg.rejections). Returns status. */
int ps_reply_error(ps_reply_t *r, const ps_msg_t *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Requests refused so far with ps_reply_error(). */
uint64_t ps_reply_errors(const ps_reply_t *r);

/* Parts refused so far because their worker held its share unread. */
uint64_t ps_reply_refused(const ps_reply_t *r);

#ifdef __cplusplus
}
#endif
#endif
