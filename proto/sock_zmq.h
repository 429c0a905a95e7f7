/*
 * proto/sock_zmq.h - private to proto/: what sock.c and msg.c share about
 * ZeroMQ. A ps_sock_t is the ZeroMQ socket itself and a ps_ctx_t the ZeroMQ
 * context (incomplete types outside, so the wrapper costs nothing), and
 * zmq_errno() is translated in one place. Nothing outside proto/ includes it.
 */
#ifndef PS_PROTO_SOCK_ZMQ_H
#define PS_PROTO_SOCK_ZMQ_H

#include <zmq.h>

#include "proto/sock.h"

/* The ZeroMQ socket of s. */
static inline void *ps_zs(ps_sock_t *s)
{
    return (void *)s;
}

/* zmq_errno() as a PS_E*: EAGAIN and EINTR -> PS_ETIMEDOUT, ETERM ->
 * PS_ECLOSED, EINVAL -> PS_EINVAL, anything else PS_EIO. */
int ps_zmq_error(void);

#endif
