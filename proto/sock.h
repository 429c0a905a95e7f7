/*
 * proto/sock.h - the transport: a context, sockets, a poll and one drain loop.
 *
 * With proto/msg.h, the door to ZeroMQ for the rest of the tree: the roles
 * open, bind, connect, poll and drain sockets through these calls and never
 * name a zmq_ function or type (only the bench's raw-ZeroMQ baseline takes
 * the socket underneath, ps_sock_handle). Inside proto/, sock.c, msg.c and
 * curve.c call ZeroMQ, sharing sock_zmq.h; ZeroMQ's errors are translated
 * there into PS_E* with a one-line reason. Messages themselves (header + payload frames)
 * are proto/msg.h. This layer does not know message types, peers or liveness
 * (that is proto/link.h).
 *
 * Thread safety: a context may be shared by every thread; a socket belongs to
 * one thread at a time (it may be handed over under a lock).
 */
#ifndef PS_PROTO_SOCK_H
#define PS_PROTO_SOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_ctx ps_ctx_t;
typedef struct ps_sock ps_sock_t;
typedef struct ps_curve ps_curve_t; /* a job's keys: proto/curve.h */

/* Socket kinds: ROUTER (servers and the scheduler bind one), DEALER (a node's
 * connection to one of them), PUSH and PULL (the allreduce ring). */
typedef enum { PS_SOCK_ROUTER, PS_SOCK_DEALER, PS_SOCK_PUSH, PS_SOCK_PULL } ps_sock_type_t;

/* Creates a context (ZeroMQ's I/O threads). Returns 0 and *out (caller owns
 * the result; destroy with ps_ctx_destroy()), or PS_ENOMEM. Never before
 * Check forks in a test: create it inside the test. */
int ps_ctx_new(ps_ctx_t **out);

/* Closes the context: waits until every socket of it is closed and their
 * queued messages sent or their linger spent. NULL-safe; sets *ctx to NULL. */
void ps_ctx_destroy(ps_ctx_t **ctx);

/* Gives ctx n I/O threads (ZeroMQ's default is one), each moving the bytes
 * of the connections given to it; call before the context's first socket.
 * Returns 0 or PS_EINVAL. */
int ps_ctx_set_io_threads(ps_ctx_t *ctx, int n);

/*
 * --secure: every TCP socket of ctx made from now on speaks CurveZMQ with the
 * keys' keypair. A bind serves with it and admits only the peers the keys
 * allow (a ZAP handler thread of the context, bound at
 * inproc://zeromq.zap.01); a connect expects the job's key (the scheduler),
 * or the key given by ps_sock_set_peer_key(). Call before making the
 * context's sockets. Takes ownership of *keys and sets it to NULL (also on
 * failure). Returns 0, or PS_EIO / PS_ESTATE (already secure) with a reason
 * in err.
 */
int ps_ctx_secure(ps_ctx_t *ctx, ps_curve_t **keys, char *err, size_t errlen);

/* The Z85 public key ctx's bound sockets serve with; "" when not secure.
 * Borrowed; valid until ps_ctx_destroy(). */
const char *ps_ctx_public_key(const ps_ctx_t *ctx);

/* Connections ctx's ZAP handler refused so far (0 when not secure).
 * Thread-safe. */
uint64_t ps_ctx_refused(const ps_ctx_t *ctx);

/* Message types ps_ctx_bytes tells apart (a type beyond counts as 0). */
enum { PS_CTX_BYTE_TYPES = 64 };

/* Bytes ctx's sockets sent (sent[t]) and received (received[t]) so far by
 * message type t: the header frame and the payload frames, as on the wire
 * minus ZeroMQ's own framing and routing ids. Arrays of PS_CTX_BYTE_TYPES;
 * thread-safe (relaxed atomics: each count is exact once the sockets rest). */
void ps_ctx_bytes(const ps_ctx_t *ctx, uint64_t *sent, uint64_t *received);

/*
 * Opens a socket with the project's options: bounded linger, a send timeout
 * (a peer that stops reading must not hang us), no message-count limit on
 * queues. Returns 0 and *out (caller owns the result; destroy with
 * ps_sock_destroy()), or PS_ENOMEM / PS_ECLOSED / PS_EIO with a reason in err.
 */
int ps_sock_new(ps_ctx_t *ctx, ps_sock_type_t type, ps_sock_t **out, char *err,
                size_t errlen);

/* Closes a socket (queued messages get the linger); NULL-safe; sets *s to NULL. */
void ps_sock_destroy(ps_sock_t **s);

/* Binds; stores the resolved endpoint (wildcard port filled in) into actual
 * when not NULL. Returns 0, or PS_EINVAL (bad endpoint) / PS_EIO (address in
 * use, ...) with a reason in err. */
int ps_sock_bind(ps_sock_t *s, const char *endpoint, char *actual, size_t cap, char *err,
                 size_t errlen);

/* Connects (the connection itself is made in the background). Returns 0 or
 * PS_EINVAL (bad endpoint). */
int ps_sock_connect(ps_sock_t *s, const char *endpoint);

/* On a secure context: the Z85 public key the peer of the next
 * ps_sock_connect() must prove it holds (a server's or a ring neighbour's,
 * from the cluster view); without one a connect expects the job's key.
 * Returns 0, or PS_EINVAL (not a Z85 key; "" or NULL is one only on a plain
 * context, where this does nothing). */
int ps_sock_set_peer_key(ps_sock_t *s, const char *key);

/* After a failure: messages still queued (to a dead peer, most likely) are
 * given only this long once the socket is closed, so exiting stays prompt. */
#define PS_ABORT_LINGER_MS 200

/* Sets how long queued messages may delay closing the socket. NULL-safe. */
void ps_sock_set_linger(ps_sock_t *s, int ms);

/* The connections s makes or accepts from now on go to I/O thread i of its
 * context (see ps_ctx_set_io_threads), not to the least busy one. */
void ps_sock_set_io_thread(ps_sock_t *s, int i);

/* Largest message frame a peer may send (ZeroMQ drops the connection on a
 * bigger one before allocating it); -1: no limit. Like every option it holds
 * for connections accepted by later binds and made by later connects, not
 * for those already open: set it before ps_sock_bind(). */
void ps_sock_set_max_message(ps_sock_t *s, long long bytes);

/* Most messages queued per connection to send and received (0: no limit,
 * the default). A full send queue on a ROUTER drops what more is sent to
 * that peer; a full receive queue stops reading its connection until we
 * catch up (nothing is lost). For bound sockets whose peers have a known
 * number of messages in flight; set it before ps_sock_bind(). */
void ps_sock_set_queue_limit(ps_sock_t *s, int send, int recv);

/* Receive timeout in ms for a blocking receive (-1: none, the default). For
 * tests that must not hang; the roles poll instead. */
void ps_sock_set_recv_timeout(ps_sock_t *s, int ms);

/* 1 when a message is waiting to be received, else 0. The socket's owning
 * thread only. */
int ps_sock_has_input(ps_sock_t *s);

/* Sends n frames exactly as given, copied, as one multipart message: for tools
 * and tests that craft what ps_msg_send() would refuse to. Returns 0 or a
 * PS_E* as ps_msg_send(). */
int ps_sock_send_raw(ps_sock_t *s, const void *const *data, const size_t *sizes, int n);

/* One thing to wait on: a socket, or (sock NULL) a file descriptor such as
 * an eventfd. */
typedef struct {
    ps_sock_t *sock; /* polled for input; NULL to poll fd */
    int fd;          /* polled for input when sock is NULL */
    int ready;       /* out: input is waiting */
} ps_pollitem_t;

/* Most items one ps_poll() takes: a worker's link and PS_MAX_SERVERS servers
 * fit, with room to spare. */
enum { PS_POLL_MAX = 260 };

/* Waits up to timeout_ms of the job's clock (-1: forever; common/clock.h)
 * until one item has input; fills each item's ready. Returns how many are
 * ready (0 on timeout or an interrupting signal), or PS_EINVAL (n out of
 * range) / PS_ECLOSED (context closed) / PS_EIO. */
int ps_poll(ps_pollitem_t *items, int n, long timeout_ms);

/*
 * Watches s for closed connections: returns 0 and *out, a socket to poll
 * (caller owns the result; destroy it with ps_sock_destroy() before s), or
 * PS_EIO with a reason in err; PS_EINVAL under --secure, where the socket's
 * one monitor counts refused handshakes (curve.c). Each closed connection of s then makes one
 * event there; ps_sock_disconnected() reads it.
 */
int ps_sock_monitor_disconnects(ps_ctx_t *ctx, ps_sock_t *s, ps_sock_t **out, char *err,
                                size_t errlen);

/* Reads one event of a ps_sock_monitor_disconnects() socket without
 * blocking. Returns 1 with the closed connection's file descriptor in *fd
 * (the one ps_msg_t.peer_fd named while it was open), 0 when none waits.
 * A handshake that failed because the peer is --secure (CurveZMQ) and this
 * socket is not, or that the peer broke off, is logged as a warning (the
 * 1st, 10th, 100th...). */
int ps_sock_disconnected(ps_sock_t *mon, int *fd);

/* What a connecting socket's monitor has seen (ps_sock_watch_connect). */
typedef struct {
    int retries;    /* TCP connects that failed and were retried */
    int connected;  /* TCP connections made */
    int handshakes; /* ZeroMQ handshakes done */
    int refused;    /* ZeroMQ handshakes failed (another protocol, wrong keys) */
    int mismatch;   /* of those: the peer has another mechanism (one side --secure) */
    int auth;       /* of those: the peer refused our key (another job's keys) */
    int closed;     /* connections closed after they were made */
} ps_connect_seen_t;

/* Watches s's connection attempts, so that a peer that never answers can be
 * told from one never reached: call before ps_sock_connect(). Returns 0 and
 * *out (end it with ps_sock_watch_end()), or PS_EIO (*out NULL). */
int ps_sock_watch_connect(ps_ctx_t *ctx, ps_sock_t *s, ps_sock_t **out);

/* Stops watching s and destroys *mon (NULL: nothing). */
void ps_sock_watch_end(ps_sock_t *s, ps_sock_t **mon);

/* Adds what mon saw since the last call to *seen (mon NULL: nothing). */
void ps_sock_connect_seen(ps_sock_t *mon, ps_connect_seen_t *seen);

/* *seen in a few words ("no TCP connection (3 attempts failed)", "connected
 * (ZeroMQ handshake done)", ...) in buf; returns buf. */
const char *ps_connect_seen_str(const ps_connect_seen_t *seen, char *buf, size_t cap);

/* The ZeroMQ socket underneath, for a benchmark that measures raw ZeroMQ
 * with the project's socket options beside shardps; the roles never use it. */
void *ps_sock_handle(ps_sock_t *s);

#ifdef __cplusplus
}
#endif
#endif
