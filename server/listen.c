/*
 * server/listen.c - the workers' ROUTER: checked at start, bound for the
 * shard with its limits (see listen.h).
 */
#include "server/listen.h"

#include <stdio.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "proto/wire.h"
#include "server/reply.h"

/* Room above the shard's bytes in the largest frame a worker may send (the
 * header frame is under PS_HEADER_MAX). */
#define PS_LISTEN_FRAME_HEADROOM (64 << 10)
/* Messages queued to one peer at least: a worker has at most
 * PS_REPLY_REQUESTS_IN_FLIGHT requests in flight, a pull answered in
 * messages of up to PS_MSG_MAX_FRAMES chunks (server/reply.h); beyond what
 * the shard allows, messages to that peer are dropped, which only a peer
 * that stopped reading can meet. */
#define PS_LISTEN_QUEUE_MIN 1000

int ps_listen_check(ps_ctx_t *ctx, const char *bind, char *err, size_t errlen)
{
    ps_sock_t *probe = NULL;
    int rc = ps_sock_new(ctx, PS_SOCK_ROUTER, &probe, err, errlen);
    if (rc == 0) {
        ps_sock_set_max_message(probe, 0); /* takes nothing while it is open */
        rc = ps_sock_bind(probe, bind, NULL, 0, err, errlen);
        ps_sock_set_linger(probe, 0);
    }
    ps_sock_destroy(&probe);
    return rc;
}

/* The limits must be set before the bind: ZeroMQ copies a socket's options
 * into its listener then. */
int ps_listen_open(ps_ctx_t *ctx, const char *bind, ps_range_t shard, uint32_t push_dtype,
                   uint64_t rows_frame, ps_sock_t **out, char *bound, size_t cap, char *err, size_t errlen)
{
    char why[128] = "";
    /* a top-k push of every key (topk:1) is 4 + 4 bytes a key */
    const uint64_t n = ps_range_len(shard);
    uint64_t longest = ps_wire_payload_len(push_dtype, n, n);
    longest = longest > n * sizeof(float) ? longest : n * sizeof(float);
    longest = longest > rows_frame ? longest : rows_frame;
    const long long max_frame = (long long)longest + PS_LISTEN_FRAME_HEADROOM;
    const uint64_t queue = PS_REPLY_REQUESTS_IN_FLIGHT * (ps_reply_parts(shard) + 1) * 2;
    int rc = ps_sock_new(ctx, PS_SOCK_ROUTER, out, why, sizeof why);
    if (rc == 0) {
        ps_sock_set_io_thread(*out, PS_LISTEN_IO_THREAD);
        ps_sock_set_max_message(*out, max_frame);
        const int q = queue > PS_LISTEN_QUEUE_MIN ? (int)queue : PS_LISTEN_QUEUE_MIN;
        ps_sock_set_queue_limit(*out, q, q);
        const double deadline = ps_now() + 2.0;
        while ((rc = ps_sock_bind(*out, bind, bound, cap, why, sizeof why)) == PS_EIO &&
               ps_now() < deadline) {
            ps_sleep(0.05);
        }
    }
    if (rc != 0) {
        snprintf(err, errlen, "cannot bind %s: %s", bind, why);
        return rc;
    }
    ps_log_info("listening on %s (frames up to %lld bytes)", bound, max_frame);
    return 0;
}
