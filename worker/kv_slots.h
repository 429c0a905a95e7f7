/*
 * worker/kv_slots.h - the KV client's requests in flight, without sockets.
 *
 * A table of PS_KV_SLOTS requests. Each request id carries its slot index
 * (low 8 bits) and the slot's generation, bumped at every reuse, so a late
 * reply to a recycled slot is recognised and dropped. A data request over
 * [begin, end) expects one answer per server holding part of it (push, init)
 * or every key of the range (pull); a pull's replies from one server must
 * come in key order, each key once (a server answers in one message of one
 * frame per store chunk, or in several when the range is wider than a
 * message's frames), and are copied into the caller's buffer as they arrive. The
 * first failure completes the request at once, with its status and a
 * one-line reason kept in the slot itself.
 *
 * It does not send or receive: worker/kv.c reads a slot to build the
 * messages and feeds the headers and payloads it receives to
 * ps_kv_slots_on_reply(). Thread safety: none; kv.c calls it under its mutex.
 */
#ifndef PS_WORKER_KV_SLOTS_H
#define PS_WORKER_KV_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "proto/codec.h"
#include "proto/msg.h"
#include "proto/range.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Requests in flight at once (at most 256: the index is 8 bits of the id). */
enum { PS_KV_SLOTS = 64 };

typedef enum { PS_KV_FREE, PS_KV_SENT, PS_KV_DONE } ps_kv_state_t;

/* Data requests go to the servers; the others to the scheduler. */
typedef enum {
    PS_KV_PUSH,
    PS_KV_PULL,
    PS_KV_PUSH_PULL, /* a push and a pull of its keys and more, answered as a pull */
    PS_KV_INIT,
    PS_KV_ROWS_PULL, /* embedding rows by key: one MSG_ROWS_PULL per server holding some */
    PS_KV_ROWS_PUSH, /* their gradient: one MSG_ROWS_PUSH to every server */
    PS_KV_BARRIER,
    PS_KV_FINISH,
    PS_KV_ABORT,
} ps_kv_req_t;

/* One request. Read-only outside kv_slots.c. */
typedef struct {
    ps_kv_state_t state;
    ps_kv_req_t type;
    uint32_t gen;      /* bumped at every reuse (24 bits); part of the request id */
    ps_range_t range;  /* keys asked for */
    float *buf;        /* push/init/push-pull: source; pull: destination (borrowed) */
    float *dst;        /* push-pull: destination (borrowed) */
    uint64_t piece;    /* push: keys per push message (a multiple of the chunk,
                          cut from each server's first key; 0: one per server) */
    const uint64_t *keys; /* rows: the keys, ascending by hash (borrowed); range is
                             [0, their number) */
    size_t dim;        /* rows: floats per row */
    int64_t step;      /* push, push-pull: step; pull: min version */
    int64_t pull_version; /* push-pull: the pull's min version */
    uint64_t left;     /* push/init: acks still missing; pull: keys still missing;
                          push-pull: keys and the acks of its separate pushes;
                          scheduler requests: 1 until answered */
    int status;        /* 0 or the first failure (PS_E*) */
    char error[256];   /* why it failed; "" while status is 0 */
} ps_kv_slot_t;

typedef struct ps_kv_slots ps_kv_slots_t;

/* A table for the servers' key ranges servers[0..n) (n = 0: scheduler
 * requests only); the ranges are copied. Returns 0 and *out (caller owns the
 * result; destroy with ps_kv_slots_destroy()) or PS_ENOMEM / PS_EINVAL. */
int ps_kv_slots_new(const ps_range_t *servers, int n, ps_kv_slots_t **out);

/* Frees the table; NULL-safe; sets *t to NULL. */
void ps_kv_slots_destroy(ps_kv_slots_t **t);

/*
 * Takes a free slot for a request and marks it sent, expecting its answers:
 * data requests one per server holding part of range (a push: one per chunk
 * message, ps_kv_slots_set_chunk; a pull: every key),
 * scheduler requests one. A data request that touches no server is done at
 * once. buf is borrowed until the slot is released. Returns the slot index
 * (the handle), or PS_ENOMEM when every slot is in use.
 */
int ps_kv_slots_open(ps_kv_slots_t *t, ps_kv_req_t type, ps_range_t range, float *buf,
                     int64_t step);

/*
 * As ps_kv_slots_open() for a push-pull: push grad of keys range for step,
 * and pull each server's whole chunks of it into dst (indexed from
 * range.begin) once at version >= pull_version (grad, dst borrowed):
 * ps_kv_slots_pull_part. A server sent one message for both answers it as
 * a pull (its ack folded in); one sent its push in pieces acks each piece
 * (ps_kv_slots_plan says which).
 */
int ps_kv_slots_open_push_pull(ps_kv_slots_t *t, ps_range_t range, float *grad, int64_t step,
                               float *dst, int64_t pull_version);

/* The keys the data request at idx pulls from server i (maybe none): a
 * pull's of its range; a push-pull's from the first of the server's chunk
 * boundaries at or after range.begin to the first at or after range.end
 * (its first and last keys are boundaries too). A server applies a chunk
 * once every key of it is in, so a push-pull of a layer's keys pulls the
 * chunks that the layer completes, those it shares with the layer pushed
 * next included, and none that waits for a later push: it is answered as
 * soon as its chunks apply, and the push-pulls of a round's layers pull
 * every key once (docs/design/push.md). */
ps_range_t ps_kv_slots_pull_part(const ps_kv_slots_t *t, int idx, int i);

/* The servers' embedding rows (n of them, as at ps_kv_slots_new; copied),
 * for the rows requests. */
void ps_kv_slots_set_rows(ps_kv_slots_t *t, const ps_rowrange_t *rows);

/*
 * As ps_kv_slots_open() for rows: type PS_KV_ROWS_PULL (rows of keys into
 * buf, n x dim floats, once at version >= step) or PS_KV_ROWS_PUSH (the
 * gradient buf of keys, for step). keys[0 .. n) ascending by hash: those
 * in each piece of each server's rows (proto/range.h) are one run of them
 * (ps_kv_slots_row_part). A pull expects an answer for each piece holding
 * some, a push for every piece of every server. keys and buf borrowed
 * until the slot is released.
 */
int ps_kv_slots_open_rows(ps_kv_slots_t *t, ps_kv_req_t type, const uint64_t *keys, size_t n,
                          size_t dim, float *buf, int64_t step);

/* The run [*begin, *end) of the rows request at idx's keys in piece q of
 * server i's rows (maybe empty). */
void ps_kv_slots_row_part(const ps_kv_slots_t *t, int idx, int i, int q, uint64_t *begin,
                          uint64_t *end);

/*
 * The payload of the rows request at idx to piece q of server i, its run of
 * *nnz keys:
 * a pull's keys (the caller's array itself), or a push's keys then their
 * rows, gathered into the table's buffer (valid until the next call: send
 * it as a copy). Returns 0, or PS_ENOMEM (the request fails with it).
 */
int ps_kv_slots_rows_frame(ps_kv_slots_t *t, int idx, int i, int q, ps_frame_t *f,
                           uint64_t *nnz);

/* Pushes go in messages of at most `keys` keys, cut at multiples of keys
 * from each server's first key (the chunks the servers apply one by one),
 * at most `most` messages per server and push (0: no bound): a wider shard
 * gets chunks of a multiple of keys, so a step's share fits the server's
 * parts. keys 0 (the default): one message per server. Set before any
 * request. */
void ps_kv_slots_set_chunk(ps_kv_slots_t *t, uint64_t keys, uint64_t most);

/* Push messages carry about PS_KV_PIECE_SECONDS of the worker's link, in
 * whole chunks, from one chunk to PS_KV_LINK_PIECE_KEYS (32 KiB of fp32) or
 * a server's mean shard over PS_KV_SHARD_PIECES, or one chunk if that is
 * more: a server answers nothing of a chunk before every worker's message
 * of it is in, and the workers' messages reach it one after another, so its
 * pipeline fills (and drains) in about as many messages' time as there are
 * workers: small messages keep that a small part of a round, and a shard
 * in that many messages keeps it a sixteenth where there are as many
 * servers as workers. (Acks also come slowly where many roles share few cores:
 * at 2 ms the pieces stay whole down to a pace of 16 MB/s, and a 100 Mbit/s
 * link's are one 16 KiB chunk.) With no pace measured yet they are up to
 * PS_KV_PIECE_KEYS (64 KiB). A server on this host gets its pushes whole
 * (ps_kv_slots_set_whole): no link between us to fill, the cores are the
 * bound, and every message costs them. */
#define PS_KV_PIECE_SECONDS 0.002
enum { PS_KV_PIECE_KEYS = 16384, PS_KV_LINK_PIECE_KEYS = 8192, PS_KV_SHARD_PIECES = 16 };

/* Requests opened from now on push in messages sized for a link of `rate`
 * keys a second (0: not measured, the largest); nothing without a chunk. */
void ps_kv_slots_set_pace(ps_kv_slots_t *t, double rate);

/* Server i's pushes go whole (1: one message per push, whatever the
 * chunk, as where no link paces them: a server on this host) or in pieces
 * (0, the default). Set while no request is in flight (at a connect). */
void ps_kv_slots_set_whole(ps_kv_slots_t *t, int i, int whole);

/* Where the push message of the request at idx to server i that starts at
 * key `at` ends: the next boundary of its pieces (none for a server whose
 * pushes go whole), or end. */
uint64_t ps_kv_slots_piece_end(const ps_kv_slots_t *t, int idx, int i, uint64_t at,
                               uint64_t end);

/* What the push-pull at idx sends server i: its keys pushed, *push, and
 * pulled, *pull (ps_kv_slots_pull_part). PS_KV_PUSH_PULL: one message of
 * both (the same keys, one push message); PS_KV_PUSH: the push in its
 * pieces, then a pull of *pull unless empty; PS_KV_PULL: none of its keys
 * (both empty). What worker/kv.c sends. */
ps_kv_req_t ps_kv_slots_plan(const ps_kv_slots_t *t, int idx, int i, ps_range_t *push,
                             ps_range_t *pull);

/* The slot at idx (0 <= idx < PS_KV_SLOTS); borrowed, valid as the table. */
const ps_kv_slot_t *ps_kv_slots_get(const ps_kv_slots_t *t, int idx);

/* The request id that the messages of slot idx carry. */
uint64_t ps_kv_slots_id(const ps_kv_slots_t *t, int idx);

/* Completes a sent slot at once with status (0, or a PS_E* and a reason in
 * why) unless it failed already. No effect on a slot that is not sent. */
void ps_kv_slots_complete(ps_kv_slots_t *t, int idx, int status, const char *why);

/* Completes every sent scheduler request of type (its answer arrived). */
void ps_kv_slots_complete_type(ps_kv_slots_t *t, ps_kv_req_t type);

/*
 * Handles a reply from server i: h its header, frames its nframes payload
 * frames (a pull reply's values of [h->key_begin, h->key_end), consecutive, each a
 * whole number of values; nframes 0 for an ack). An ERROR completes the
 * request with the server's status; a pull reply in key order (to a pull or
 * a push-pull: its push's ack) is copied into the request's destination and
 * *pulled (when not NULL) gets its bytes; an ack counts. A rows reply
 * (MSG_ROWS) must carry the server's run of the keys, whose rows it copies
 * into their place. Anything that does
 * not match the request fails it with PS_EPROTO.
 * Returns 0, or PS_ENOENT when the reply belongs to no request in flight (a
 * late reply to a recycled slot, another sender): drop it, nothing changed.
 */
int ps_kv_slots_on_reply(ps_kv_slots_t *t, int i, const Shardps__Header *h, const ps_frame_t *frames,
                         int nframes, uint64_t *pulled);

/* Frees a slot (done, or given up) for reuse. */
void ps_kv_slots_release(ps_kv_slots_t *t, int idx);

#ifdef __cplusplus
}
#endif
#endif
