/*
 * server/intake.h - what comes in from workers before the consistency sees
 * it: the checks every data message must pass (sender, token, keys, steps,
 * payload), and the holders of the push frames the consistency keeps,
 * moved out of their messages (and decoded to fp32 for --wire / --compress).
 *
 * A check says what is wrong in one line and changes nothing; replying with
 * it is the loop's (server/server.c). It sends nothing and decides nothing
 * about steps (server/consistency.h). One thread (the server's loop) makes
 * every call.
 */
#ifndef PS_SERVER_INTAKE_H
#define PS_SERVER_INTAKE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/msg.h"
#include "proto/range.h"
#include "server/consistency.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    ps_range_t shard;        /* the server's keys */
    int workers;             /* senders are workers 0 .. workers-1 */
    const uint64_t *tokens;  /* borrowed: worker r's token at [r], read at each check (a
                                join changes them); valid until ps_intake_destroy() */
    uint32_t push_dtype;     /* what a push must carry: the wire dtype, sparse with top-k */
    int holders;             /* push frames held at once: the consistency's most
                                (ps_consistency_max_held) and the one in hand */
    ps_rowrange_t rows;      /* a job with embedding rows: the hashes of our row keys */
    int row_dim;             /* floats per row; 0: no rows (rows messages are refused) */
} ps_intake_config_t;

typedef struct ps_intake ps_intake_t;

/* An intake for cfg (copied). Returns 0 or PS_ENOMEM. Caller owns *out;
 * destroy with ps_intake_destroy(). */
int ps_intake_new(ps_intake_t **out, const ps_intake_config_t *cfg);

/* Frees the holders (their frames must be released already: destroy the
 * consistency first); NULL-safe; sets *in to NULL. */
void ps_intake_destroy(ps_intake_t **in);

/* Whether a request of type carries a push (a push, or a push-pull). */
int ps_intake_is_push(ps_msg_type_t type);

/* Whether a request of type is a rows message (MSG_ROWS_PUSH, _PULL). */
int ps_intake_is_rows(ps_msg_type_t type);

/*
 * Checks data message h (of nframes payload frames) from a worker. Returns
 * 0, or with a one-line reason in why: PS_ENOENT (not a worker of this job,
 * or a token that is not the claimed worker's: counted, ps_intake_forged),
 * PS_ERANGE (keys outside the shard, a step or version out of range, a
 * payload of the wrong dtype or length). A rows message's keys are checked
 * by ps_intake_hold, which reads its frame.
 */
int ps_intake_check(ps_intake_t *in, const Shardps__Header *h, int nframes, char *why, size_t cap);

/* Messages refused so far for a token that is not the claimed worker's. */
uint64_t ps_intake_forged(const ps_intake_t *in);

/*
 * Moves the gradient frame of checked push m into a free holder and points
 * req->data (the gradient as fp32: the frame itself, or decoded from the
 * job's --wire / --compress) and req->frame (the holder) at it. Returns 0,
 * or with a reason in why and nothing held: PS_ENOMEM (no memory to
 * decode), PS_ERANGE (sparse offsets out of order or range). Release the
 * holder with ps_intake_release().
 * A rows message (push or pull): its frame is held likewise, req->keys and
 * req->nkeys name its keys (req->data the push's gradient), after checking
 * that they are strictly ascending and this server's (else PS_ERANGE).
 */
int ps_intake_hold(ps_intake_t *in, ps_msg_t *m, ps_request_t *req, char *why, size_t cap);

/* Closes the frame of holder frame (a req->frame) and frees the holder:
 * the consistency's release callback. */
void ps_intake_release(ps_intake_t *in, void *frame);

/* Holders in use now. */
int ps_intake_held(const ps_intake_t *in);

#ifdef __cplusplus
}
#endif
#endif
