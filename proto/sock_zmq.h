/*
 * proto/sock_zmq.h - private to proto/: what sock.c and msg.c share about
 * ZeroMQ. A ps_sock_t holds the ZeroMQ socket and a ps_ctx_t the ZeroMQ
 * context, each with the job's keys under --secure (incomplete types
 * outside); zmq_errno() is translated in one place; curve.c lends sock.c its
 * keys and its ZAP thread. Nothing outside proto/ includes it.
 */
#ifndef PS_PROTO_SOCK_ZMQ_H
#define PS_PROTO_SOCK_ZMQ_H

#include <stdatomic.h>
#include <stdint.h>
#include <zmq.h>

#include "proto/curve.h"
#include "proto/sock.h"

/* Bytes by message type (ps_ctx_bytes): [0] sent, [1] received. */
typedef struct {
    _Atomic uint64_t n[2][PS_CTX_BYTE_TYPES];
} ps_ctx_bytes_t;

struct ps_ctx {
    void *z;          /* the ZeroMQ context */
    ps_curve_t *keys; /* --secure: the job's keys and the ZAP thread; else NULL */
    ps_ctx_bytes_t bytes; /* what its sockets sent and received */
};

struct ps_sock {
    void *z;                         /* the ZeroMQ socket */
    ps_curve_t *keys;                /* its context's keys (--secure), or NULL; borrowed */
    char peer_key[PS_CURVE_KEY_LEN]; /* the key the next connect expects; "" = the job's */
    ps_ctx_bytes_t *bytes;           /* its context's counts; borrowed; NULL = not counted */
    int mismatches;                  /* a monitor's: handshakes of a --secure peer */
};

/* Counts a message of `type` and `len` bytes sent (dir 0) or received (1). */
static inline void ps_sock_count(ps_sock_t *s, int dir, int type, uint64_t len)
{
    if (s->bytes) {
        atomic_fetch_add_explicit(&s->bytes->n[dir][type >= 0 && type < PS_CTX_BYTE_TYPES ? type : 0],
                                  len, memory_order_relaxed);
    }
}

/* The ZeroMQ socket of s. */
static inline void *ps_zs(ps_sock_t *s)
{
    return s->z;
}

/* curve.c: binds the ZAP handler on zctx and starts its thread (before any
 * secure bind of zctx). Returns 0 or PS_EIO with a reason in err. */
int ps_curve_zap_start(ps_curve_t *c, void *zctx, char *err, size_t errlen);

/* curve.c: counts and logs handshakes of the bound socket zsock (of the
 * context c serves) that fail before the key check, from the ZAP thread.
 * Returns 0, or PS_ENOMEM (too many bound sockets) / PS_EIO. */
int ps_curve_watch(ps_curve_t *c, void *zsock);

/* curve.c: the Z85 secret key of this process's keypair, and the job's
 * public key (the scheduler's, which connects expect by default). */
const char *ps_curve_secret(const ps_curve_t *c);
const char *ps_curve_job_key(const ps_curve_t *c);

/* sock.c: a PAIR socket of zctx that receives zsock's monitor events of the
 * kinds in events (ZMQ_EVENT_*), over an inproc endpoint named after tag and
 * zsock; linger 0. Returns it (the caller closes it with zmq_close()), or
 * NULL with zmq_errno() set. */
void *ps_zmq_monitor(void *zctx, void *zsock, int events, const char *tag);

/* zmq_errno() as a PS_E*: EAGAIN and EINTR -> PS_ETIMEDOUT, ETERM ->
 * PS_ECLOSED, EINVAL -> PS_EINVAL, anything else PS_EIO. */
int ps_zmq_error(void);

#endif
