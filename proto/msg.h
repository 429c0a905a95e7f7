/*
 * proto/msg.h - a message = one header frame + raw payload frames, over ZeroMQ.
 *
 * Sending: the header is packed on the stack; payload frames are handed to
 * ZeroMQ without a copy (zmq_msg_init_data) unless the caller asks for one.
 * Receiving: every frame of the multipart message is read; payload frames are
 * kept as zmq_msg_t and read in place. ps_msg_recv() checks the envelope
 * (frame count, header decode, protocol, payload length = header's); the
 * caller checks what needs context. Also the socket helpers (open, bind,
 * connect) so no other module sets ZeroMQ options.
 */
#ifndef PS_PROTO_MSG_H
#define PS_PROTO_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "proto/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { PS_MSG_MAX_FRAMES = 4, PS_ROUTE_MAX = 256 };

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

/* A received message. Initialise with {0}; release with ps_msg_close(). */
typedef struct {
    ps_route_t route;                  /* sender's routing id (ROUTER only) */
    char peer_addr[64];                /* sender's IP address (PS_RECV_PEER only) */
    ps_header_t hdr;                   /* decoded header */
    int nframes;                       /* payload frames held */
    zmq_msg_t frames[PS_MSG_MAX_FRAMES]; /* payloads, read in place */
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
int ps_msg_send(void *sock, const ps_route_t *route, ps_header_t h, const ps_frame_t *frames,
                int nframes, int flags);

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
int ps_msg_send_zc(void *sock, const ps_route_t *route, ps_header_t h,
                   const ps_frame_t *frames, int nframes, ps_msg_release_fn *release,
                   void *hint);

/*
 * Receives one whole multipart message (blocking unless the socket has data;
 * call after zmq_poll). flags: PS_RECV_*.
 * Returns 0 with *m filled; PS_EPROTO when the envelope is bad (all frames are
 * consumed; m->route and whatever decoded of m->hdr are kept, reason in
 * m->hdr.error) so the caller can reply or drop; PS_EAGAIN-like conditions as
 * PS_ETIMEDOUT; PS_ECLOSED when the context is terminated.
 */
int ps_msg_recv(void *sock, int flags, ps_msg_t *m);

/* Releases the payload frames; safe on a zeroed or closed message. */
void ps_msg_close(ps_msg_t *m);

/* Borrowed pointer to payload frame i and its size; valid until ps_msg_close(). */
const void *ps_msg_frame(const ps_msg_t *m, int i, size_t *len);

/*
 * Sends a control message: header of `type` with one payload frame body (copied).
 * body may be NULL for a header-only message.
 */
int ps_msg_send_ctrl(void *sock, const ps_route_t *route, ps_msg_type_t type, ps_role_t role,
                     int sender, const void *body, size_t len);

/* Replies PS_MSG_ERROR to req's sender with status and a printf-style reason. */
int ps_msg_reply_error(void *sock, const ps_msg_t *req, ps_role_t role, int sender,
                       int status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Fills a header with the fields every message has. */
void ps_msg_header(ps_header_t *h, ps_msg_type_t type, ps_role_t role, int sender);

/*
 * Opens a socket of ZeroMQ type (ZMQ_ROUTER, ZMQ_DEALER, ...) with the
 * project's options: bounded linger, send timeout, no message-count limit on
 * queues. Returns the socket or NULL (zmq errno kept).
 */
void *ps_transport_open(void *ctx, int type);

/* Binds; stores the resolved endpoint (wildcard port filled in) into actual.
 * Returns 0 or PS_EINVAL (bad endpoint) / PS_EIO (address in use, ...). */
int ps_transport_bind(void *sock, const char *endpoint, char *actual, size_t cap);

/* Connects. Returns 0 or PS_EINVAL (bad endpoint). */
int ps_transport_connect(void *sock, const char *endpoint);

/* After a failure: messages still queued (to a dead peer, most likely) are
 * given only this long once the socket is closed, so exiting stays prompt. */
#define PS_ABORT_LINGER_MS 200

/* Sets how long queued messages may delay closing the socket. NULL-safe. */
void ps_transport_set_linger(void *sock, int ms);

/* Closes a socket; NULL-safe; sets *sock to NULL. */
void ps_transport_close(void **sock);

#ifdef __cplusplus
}
#endif
#endif
