/*
 * proto/msg.h - a message = one header frame + raw payload frames, over ZeroMQ.
 *
 * Sending: the header is packed on the stack; payload frames are handed to
 * ZeroMQ without a copy (zmq_msg_init_data) unless the caller asks for one.
 * Receiving: every frame of the multipart message is read; payload frames are
 * kept as ZeroMQ messages (ps_payload_t, opaque here) and read in place; a
 * receiver may take one out of the message to keep it past ps_msg_close()
 * (the server holds a push's gradient frame until its step is applied).
 * ps_msg_recv() checks the envelope (frame count, header decode, protocol,
 * payload length = header's); the caller checks what needs context.
 * ps_msg_drain() is the one receive loop every event loop uses.
 *
 * A control message carries one protobuf-c body in its one payload frame:
 * ps_msg_send_body() packs and sends it, ps_msg_unpack_body() unpacks and
 * checks it (proto/codec.h) into the message's own arena, the one the
 * header decoded into, so neither mallocs for a small message.
 */
#ifndef PS_PROTO_MSG_H
#define PS_PROTO_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "common/metrics.h"
#include "proto/arena.h"
#include "proto/codec.h"
#include "proto/sock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Payload frames one message may carry: a pull reply sends one per store
 * chunk (1 MiB), so up to 32 MiB of a shard go out as one message. */
enum { PS_MSG_MAX_FRAMES = 32, PS_ROUTE_MAX = 256 };

/* Largest step or version a message may carry (2^53): checked on receipt,
 * before any arithmetic, so no value from the network can overflow. */
#define PS_MSG_MAX_STEP ((int64_t)1 << 53)

/* A payload frame to send. */
typedef struct {
    const void *data; /* borrowed; with zero-copy it must stay valid and unchanged
                         until the peer has received it (see ps_msg_send) */
    size_t len;       /* bytes */
} ps_frame_t;

/* A ROUTER peer's routing id, copied out of the envelope. */
typedef struct {
    uint8_t id[PS_ROUTE_MAX]; /* routing id bytes */
    size_t len;               /* 0 on DEALER sockets */
} ps_route_t;

/* A received payload frame, read in place; no socket needed to read or
 * release it. Opaque (ZeroMQ's message underneath). Zero-initialise before
 * use; release with ps_payload_close(). */
typedef struct {
    _Alignas(8) unsigned char opaque[64]; /* ZeroMQ's message */
    int held;                             /* 1 while it holds a frame */
} ps_payload_t;

/* Bytes of the arena inside each message: a header and a small body fit. */
enum { PS_MSG_ARENA = 1024 };

/* A received message. Initialise with {0}; release with ps_msg_close(). Not
 * to be copied once received: hdr's strings point into its own arena. */
typedef struct {
    ps_route_t route;                     /* sender's routing id (ROUTER only) */
    char peer_addr[64];                   /* sender's IP address (PS_RECV_PEER only) */
    int peer_fd;                          /* its connection's file descriptor, -1 if
                                             unknown (PS_RECV_PEER only) */
    Shardps__Header hdr;                  /* decoded header; its strings live in arena */
    char why[PS_ERROR_MAX];               /* why ps_msg_recv() or ps_msg_unpack_body()
                                             refused it; "" otherwise */
    int nframes;                          /* payload frames held */
    ps_payload_t frames[PS_MSG_MAX_FRAMES]; /* payloads, read in place */
    ps_arena_t arena;                     /* the header and the body unpack here */
    _Alignas(PS_ARENA_ALIGN) unsigned char arena_buf[PS_MSG_ARENA];
} ps_msg_t;

/* Receive flags. */
enum {
    PS_RECV_ROUTER = 1, /* the socket is a ROUTER: the first frame is the route */
    PS_RECV_PEER = 2,   /* also fill peer_addr from the connection's metadata */
};

/* Send flags. */
enum {
    PS_SEND_COPY = 1, /* copy payloads (the buffer may change right after the call) */
};

/*
 * Sends [route][header][frames...]. Sets h->payload_len from the frames (the
 * header is taken by value for that). Without PS_SEND_COPY, frame data is sent
 * zero-copy: the caller keeps it valid and unchanged until it knows the peer
 * received it (e.g. the peer's ack arrived). Returns 0, PS_ETIMEDOUT (send
 * timeout: peer not accepting), PS_ECLOSED (context terminated), PS_EIO.
 * Not thread-safe: the socket's owning thread only.
 */
int ps_msg_send(ps_sock_t *sock, const ps_route_t *route, Shardps__Header h,
                const ps_frame_t *frames, int nframes, int flags);

/* Called once per zero-copy frame when ZeroMQ no longer needs its data, from
 * ZeroMQ's I/O thread (or from the sending thread when the send failed): it
 * must be thread-safe and must not call ZeroMQ. data is the frame's data. */
typedef void ps_msg_release_fn(void *data, void *hint);

/*
 * As ps_msg_send() without PS_SEND_COPY, but tells the caller when each frame's
 * buffer is free again: release(frame.data, hint) is called exactly once per
 * frame, whatever the outcome (for frames never handed to ZeroMQ, before this
 * returns). Lets a sender reuse a buffer as soon as the bytes left this
 * process, without waiting for an application-level ack. Returns as
 * ps_msg_send(). Not thread-safe: the socket's owning thread only.
 */
int ps_msg_send_zc(ps_sock_t *sock, const ps_route_t *route, Shardps__Header h,
                   const ps_frame_t *frames, int nframes, ps_msg_release_fn *release,
                   void *hint);

/*
 * Receives one whole multipart message (blocking unless the socket has data;
 * call after ps_poll, or use ps_msg_drain). flags: PS_RECV_*.
 * Returns 0 with *m filled; PS_EPROTO when the envelope is bad (all frames are
 * consumed; m->route and whatever decoded of m->hdr are kept, reason in
 * m->why) so the caller can reply or drop; PS_EAGAIN-like conditions as
 * PS_ETIMEDOUT; PS_ECLOSED when the context is terminated. A message
 * received into m before must have been closed.
 */
int ps_msg_recv(ps_sock_t *sock, int flags, ps_msg_t *m);

/* m (zeroed or closed) as if received on route: header *h (copied; its
 * strings borrowed) and body packed into its one payload frame (NULL: no
 * frame). No socket: a module's handlers are tested with it. Returns 0 or
 * PS_ENOMEM. Release with ps_msg_close(). */
int ps_msg_make(ps_msg_t *m, const ps_route_t *route, const Shardps__Header *h,
                const ProtobufCMessage *body);

/* Releases the payload frames and what was unpacked into the message's
 * arena; safe on a zeroed or closed message. */
void ps_msg_close(ps_msg_t *m);

/* Borrowed pointer to payload frame i and its size; valid until ps_msg_close(). */
const void *ps_msg_frame(const ps_msg_t *m, int i, size_t *len);

/*
 * Sends h with body packed into its one payload frame (NULL body: the header
 * alone). The pack goes into a stack buffer when it fits, so a small body
 * mallocs nothing. Returns 0, PS_ENOMEM, or a PS_E* as ps_msg_send(). Not
 * thread-safe: the socket's owning thread only.
 */
int ps_msg_send_body(ps_sock_t *sock, const ps_route_t *route, Shardps__Header h,
                     const ProtobufCMessage *body);

/*
 * As ps_msg_send_body() with a header of `type` from role and sender (and,
 * for REGISTER and REGISTER_ACK, the sender's clock).
 */
int ps_msg_send_ctrl(ps_sock_t *sock, const ps_route_t *route, ps_msg_type_t type,
                     ps_role_t role, int sender, const ProtobufCMessage *body);

/*
 * Unpacks m's one payload frame as a message of descriptor d into m's arena
 * and checks it (ps_codec_unpack()). Returns it (cast to d's struct;
 * borrowed: valid until ps_msg_close(m)), or NULL when m has not exactly one
 * payload frame or its body does not decode or fails its check, with the
 * reason in m->why. Thread-safe on distinct messages.
 */
void *ps_msg_unpack_body(ps_msg_t *m, const ProtobufCMessageDescriptor *d);

/* Replies PS_MSG_ERROR to req's sender with status and a printf-style reason. */
int ps_msg_reply_error(ps_sock_t *sock, const ps_msg_t *req, ps_role_t role, int sender,
                       int status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Fills a header with the fields every message has; the rest are defaults. */
void ps_msg_header(Shardps__Header *h, ps_msg_type_t type, ps_role_t role, int sender);

/*
 * Moves payload frame i (< m->nframes) out of m into *out, so it outlives
 * ps_msg_close(m); frame i of m is left empty. *out must not hold a frame.
 * Caller owns *out; release with ps_payload_close(). Thread-safe on distinct
 * messages.
 */
void ps_msg_take_payload(ps_msg_t *m, int i, ps_payload_t *out);

/* Borrowed pointer to a held payload's bytes (not necessarily float-aligned)
 * and their count; valid until ps_payload_close(). */
const void *ps_payload_data(const ps_payload_t *p, size_t *len);

/* Releases the frame; safe on a zeroed or closed payload. Any thread. */
void ps_payload_close(ps_payload_t *p);

/*
 * Called by ps_msg_drain() once per received message: rc is 0 for a good
 * message, PS_EPROTO for one whose envelope ps_msg_recv() refused (m->route
 * and the reason in m->why are kept, so the handler can reply or log).
 * m is closed after the handler returns; take a payload to keep it. Returns
 * 0 to go on, non-zero to stop draining after this message.
 */
typedef int ps_msg_handler_fn(void *arg, ps_msg_t *m, int rc);

/*
 * The one drain loop: while sock has input, receives a whole message (flags:
 * PS_RECV_*) and hands it to fn, at most max messages, so the caller's other
 * duties (liveness, other sockets) keep their turn. Returns how many were
 * handled, or a negative PS_E* when receiving failed (PS_ECLOSED: the context
 * is closing). Not thread-safe: the socket's owning thread only.
 */
int ps_msg_drain(ps_sock_t *sock, int flags, int max, ps_msg_handler_fn *fn, void *arg);

/* A role's bytes on the wire by message type in its metrics registry:
 * shardps_<role>_wire_bytes_total{dir="sent|received",type="..."} for the
 * data types (push, push_ack, pull, pull_reply, init, ring_data, push_pull) and
 * "other" (every other type), read from the context's counts
 * (ps_ctx_bytes) at each update. */
enum { PS_MSG_BYTES_SERIES = 8 };
typedef struct {
    ps_metric_t *series[2][PS_MSG_BYTES_SERIES]; /* [0] sent, [1] received */
    const ps_ctx_t *ctx;                         /* borrowed; NULL: nothing to update */
} ps_msg_bytes_metrics_t;

/* Registers the series in reg for role ("worker", "server") and ctx
 * (borrowed: it must outlive the updates). */
void ps_msg_bytes_metrics_init(ps_msg_bytes_metrics_t *b, ps_metrics_t *reg, const char *role,
                               const ps_ctx_t *ctx);

/* Sets the series from the context's counts; no-op before init. Thread-safe
 * as the registry's metrics are. */
void ps_msg_bytes_metrics_update(const ps_msg_bytes_metrics_t *b);

#ifdef __cplusplus
}
#endif
#endif
