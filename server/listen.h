/*
 * server/listen.h - the server's socket for workers: the bind checked at
 * start, then the real bind once the shard is known, with the limits that
 * shard allows (largest frame, messages queued per peer).
 *
 * Only socket options and the bind; what comes in is checked by
 * server/intake.h, what goes out is server/reply.h's, and telling the
 * scheduler where is the loop's (server/server.c).
 */
#ifndef PS_SERVER_LISTEN_H
#define PS_SERVER_LISTEN_H

#include <stddef.h>
#include <stdint.h>

#include "proto/range.h"
#include "proto/sock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The server's context moves bytes on two I/O threads: the workers'
 * connections on the first, its replicas' on the second (server/replica.c),
 * so that replication does not queue behind the workers' pushes and pulls. */
enum { PS_LISTEN_IO_THREAD = 0, PS_REPLICA_IO_THREAD = 1, PS_SERVER_IO_THREADS = 2 };

/* Checks at start that bind can be bound (a bad endpoint, a port in use, an
 * address not ours), so the error comes before joining: binds it on a
 * scratch socket of ctx and closes it. Returns 0 or a PS_E* with a reason in
 * err. */
int ps_listen_check(ps_ctx_t *ctx, const char *bind, char *err, size_t errlen);

/*
 * A ROUTER of ctx bound at bind for shard, whose pushes carry push_dtype:
 * ZeroMQ drops a frame bigger than the largest legitimate one (a push of the
 * whole shard, or a rows message of rows_frame bytes, ps_job_rows_frame_max)
 * at its header, before allocating it, and queues as many messages per peer
 * as its requests in flight can be answered with; its connections are on
 * PS_LISTEN_IO_THREAD. The endpoint bound goes in bound. The port of
 * ps_listen_check() may take a moment to be free again: retried for 2 s.
 * Returns 0, or a PS_E* with "cannot bind ..." in err. Caller owns *out;
 * destroy with ps_sock_destroy().
 */
int ps_listen_open(ps_ctx_t *ctx, const char *bind, ps_range_t shard, uint32_t push_dtype,
                   uint64_t rows_frame, ps_sock_t **out, char *bound, size_t cap, char *err,
                   size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
