/*
 * worker/ring.c - ring allreduce: reduce-scatter then all-gather, pipelined by
 * sub-chunk, over a PULL socket (from the left) and a PUSH socket (to the right);
 * and the allgather of variable-sized blocks on the same sockets.
 *
 * Ordering is what makes one thread enough: ZeroMQ keeps the left neighbour's
 * messages in the order it sent them, and it sends in the order it receives
 * (ring step major, sub-chunk minor), so the next expected message is always
 * known exactly and anything else is an error, not a reordering.
 *
 * Zero-copy: frames point into the caller's buffer. ZeroMQ's I/O thread calls
 * s_release once it has handed a frame's bytes to the kernel; the call returns
 * only when every frame is released, so the caller may overwrite the buffer
 * (the next backward pass) at once. Within a call, a region is overwritten
 * only in the all-gather, after the sum built from what we sent has come
 * back round the ring - so the peer had read those bytes long before.
 */
#include "worker/ring.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/trace.h"
#include "proto/codec.h"
#include "proto/msg.h"

/* How often a waiting member asks check() whether the job is still there. */
#define S_CHECK_SECONDS 0.05
/* How long ps_ring_destroy() waits for ZeroMQ to release frames still queued. */
#define S_RELEASE_WAIT_SECONDS 2.0

struct ps_ring {
    ps_sock_t *rx;           /* PULL, bound: messages from the left neighbour */
    ps_sock_t *tx;           /* PUSH, connected to the right neighbour */
    ps_ring_config_t cfg;    /* copied at connect; cfg.right points into right[] */
    char right[128];         /* the right neighbour's endpoint */
    int connected;           /* ps_ring_connect() succeeded */
    int broken;              /* a call failed: the sequence is lost */
    atomic_int inflight;     /* zero-copy frames ZeroMQ still holds */
    int efd;                 /* written by s_release when inflight drops to 0 */
    uint64_t sent, received; /* payload bytes */
    uint64_t dropped;        /* messages not from the left neighbour */
    double last_check;       /* ps_now() of the last check() call */
    char error[256];         /* why the last call failed */
};

/* ---- the schedule ----------------------------------------------------------- */

ps_range_t ps_ring_chunk(uint64_t n, int size, int c)
{
    uint64_t m = (uint64_t)size, base = n / m, extra = n % m, i = (uint64_t)c;
    ps_range_t r;
    r.begin = i * base + (i < extra ? i : extra);
    r.end = r.begin + base + (i < extra ? 1 : 0);
    return r;
}

static int s_mod(int a, int m)
{
    int r = a % m;
    return r < 0 ? r + m : r;
}

int ps_ring_send_chunk(int rank, int size, int g)
{
    return s_mod(rank - g, size);
}

int ps_ring_recv_chunk(int rank, int size, int g)
{
    return s_mod(rank - g - 1, size);
}

uint64_t ps_ring_num_subs(ps_range_t chunk, size_t sub)
{
    uint64_t len = ps_range_len(chunk);
    return (len + sub - 1) / sub;
}

ps_range_t ps_ring_sub(ps_range_t chunk, size_t sub, uint64_t j)
{
    ps_range_t r;
    r.begin = chunk.begin + j * sub;
    r.end = r.begin + sub < chunk.end ? r.begin + sub : chunk.end;
    return r;
}

/* ---- life cycle ----------------------------------------------------------- */

/* ZeroMQ's I/O thread (or ours, for a frame it never took): a frame is free. */
static void s_release(void *data, void *hint)
{
    (void)data;
    ps_ring_t *r = hint;
    if (atomic_fetch_sub(&r->inflight, 1) == 1) {
        uint64_t one = 1;
        ssize_t w = write(r->efd, &one, sizeof one);
        (void)w; /* a full counter is still readable: the waiter wakes */
    }
}

int ps_ring_new(ps_ctx_t *ctx, const char *bind, uint64_t max_floats, ps_ring_t **out,
                char *endpoint, size_t cap, char *err, size_t errlen)
{
    ps_ring_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    atomic_init(&r->inflight, 0);
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    char why[128] = "no eventfd";
    if (r->efd < 0 || ps_sock_new(ctx, PS_SOCK_PULL, &r->rx, why, sizeof why) != 0 ||
        ps_sock_new(ctx, PS_SOCK_PUSH, &r->tx, why, sizeof why) != 0) {
        snprintf(err, errlen, "cannot create the ring sockets: %s", why);
        ps_ring_destroy(&r);
        return PS_ENOMEM;
    }
    if (max_floats) { /* before the bind: ZeroMQ copies it into the listener */
        ps_sock_set_max_message(r->rx, (long long)(max_floats * sizeof(float)) + (64 << 10));
    }
    int rc = ps_sock_bind(r->rx, bind, endpoint, cap, why, sizeof why);
    if (rc != 0) {
        snprintf(err, errlen, "cannot bind the ring endpoint %s: %s", bind, why);
        ps_ring_destroy(&r);
        return rc;
    }
    *out = r;
    return 0;
}

int ps_ring_connect(ps_ring_t *r, const ps_ring_config_t *cfg, char *err, size_t errlen)
{
    if (cfg->size < 1 || cfg->size > PS_MAX_WORKERS || cfg->rank < 0 ||
        cfg->rank >= cfg->size || cfg->timeout < 0 || r->connected) {
        snprintf(err, errlen, "bad ring configuration: member %d of %d", cfg->rank,
                 cfg->size);
        return PS_EINVAL;
    }
    r->cfg = *cfg;
    if (!r->cfg.sub_floats) {
        r->cfg.sub_floats = PS_RING_SUB_FLOATS;
    }
    snprintf(r->right, sizeof r->right, "%s",
             cfg->size > 1 && cfg->right ? cfg->right : "");
    r->cfg.right = r->right;
    if (cfg->size > 1 && (!r->right[0] || ps_sock_set_peer_key(r->tx, cfg->right_key) != 0 ||
                          ps_sock_connect(r->tx, r->right) != 0)) {
        snprintf(err, errlen, "cannot connect to the right neighbour W%d at '%s'",
                 (cfg->rank + 1) % cfg->size, r->right);
        return PS_EINVAL;
    }
    r->connected = 1;
    return 0;
}

void ps_ring_destroy(ps_ring_t **rp)
{
    ps_ring_t *r = *rp;
    if (!r) {
        return;
    }
    /* Queued frames (only after a failure) are dropped, not delivered. */
    ps_sock_set_linger(r->tx, 0);
    ps_sock_set_linger(r->rx, 0);
    ps_sock_destroy(&r->tx);
    ps_sock_destroy(&r->rx);
    /* ZeroMQ releases dropped frames from its own threads: s_release must still
     * find r. If it does not finish in time, r is left allocated on purpose. */
    double until = ps_now() + S_RELEASE_WAIT_SECONDS;
    while (atomic_load(&r->inflight) > 0 && ps_now() < until) {
        ps_pollitem_t it = {.fd = r->efd};
        ps_poll(&it, 1, 10);
    }
    if (atomic_load(&r->inflight) > 0) {
        ps_log_warn("ring: %d frames still held by ZeroMQ; leaving them their memory",
                    atomic_load(&r->inflight));
        *rp = NULL;
        return;
    }
    if (r->efd >= 0) {
        close(r->efd);
    }
    free(r);
    *rp = NULL;
}

void ps_ring_bytes(const ps_ring_t *r, uint64_t *sent, uint64_t *received)
{
    *sent = r->sent;
    *received = r->received;
}

uint64_t ps_ring_dropped(const ps_ring_t *r)
{
    return r->dropped;
}

const char *ps_ring_error(const ps_ring_t *r)
{
    return r->error;
}

/* ---- one allreduce ---------------------------------------------------------- */

/* Records why the ring failed; returns rc. */
static int s_fail(ps_ring_t *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(ps_ring_t *r, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->broken = 1;
    return rc;
}

/* Asks the owner whether the job is still there, at most every S_CHECK_SECONDS. */
static int s_check(ps_ring_t *r, int force)
{
    double now = ps_now();
    if (!r->cfg.check || (!force && now - r->last_check < S_CHECK_SECONDS)) {
        return 0;
    }
    r->last_check = now;
    int rc = r->cfg.check(r->cfg.check_arg);
    return rc ? s_fail(r, rc < 0 ? rc : PS_ECLOSED,
                       "the job ended while the ring was waiting")
              : 0;
}

/* Sends frames[0..n) as ring data over [range) for ring step g, zero-copy:
 * s_release runs once per frame. */
static int s_send_frames(ps_ring_t *r, const ps_frame_t *f, int n, ps_range_t range,
                         int64_t step, int g)
{
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_WORKER, r->cfg.rank);
    h.key_begin = range.begin;
    h.key_end = range.end;
    h.step = step;
    h.ring_step = g;
    h.token = r->cfg.token;
    atomic_fetch_add(&r->inflight, n);
    int rc = ps_msg_send_zc(r->tx, NULL, h, f, n, s_release, r);
    if (rc != 0) {
        return s_fail(r, rc, "sending to the right neighbour W%d failed: %s",
                      (r->cfg.rank + 1) % r->cfg.size, ps_strerror(rc));
    }
    for (int k = 0; k < n; k++) {
        r->sent += f[k].len;
    }
    return 0;
}

/* Sends [range) of buf for ring step g, zero-copy. */
static int s_send(ps_ring_t *r, const float *buf, ps_range_t range, int64_t step, int g)
{
    ps_frame_t f = {buf + range.begin, ps_range_len(range) * sizeof(float)};
    return s_send_frames(r, &f, 1, range, step, g);
}

/* b[i] += a[i], a read in place from a received frame that may be unaligned. */
static void s_add(float *restrict b, const unsigned char *restrict a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, a + i * sizeof v, sizeof v);
        b[i] += v;
    }
}

/* The left neighbour's rank. */
static int s_left(const ps_ring_t *r)
{
    return (r->cfg.rank + r->cfg.size - 1) % r->cfg.size;
}

/*
 * Waits for the left neighbour's next ring data (of step `step`, ring step g,
 * for the messages of a timeout) and fills *m (the caller checks it against
 * what the sequence expects, and closes it). Others are dropped.
 */
static int s_recv(ps_ring_t *r, ps_msg_t *m, int64_t step, int g)
{
    const int left = s_left(r);
    double since = ps_now();
    for (;;) {
        int rc = s_check(r, 0);
        if (rc != 0) {
            return rc;
        }
        ps_pollitem_t it = {.sock = r->rx};
        int n = ps_poll(&it, 1, (long)(S_CHECK_SECONDS * 1000));
        if (n < 0) {
            return s_fail(r, n, "waiting for the left neighbour W%d: %s", left,
                          ps_strerror(n));
        }
        if (n <= 0) {
            if (r->cfg.timeout > 0 && ps_now() - since > r->cfg.timeout) {
                return s_fail(
                    r, PS_ETIMEDOUT,
                    "no ring data from the left neighbour W%d for %.0f s (step %lld, "
                    "ring step %d)",
                    left, r->cfg.timeout, (long long)step, g);
            }
            if ((rc = s_check(r, 1)) != 0) {
                return rc;
            }
            continue;
        }
        rc = ps_msg_recv(r->rx, 0, m);
        if (rc == PS_EPROTO) {
            r->dropped++;
            ps_log_warn("ring: dropped a malformed message: %s", m->why);
            continue;
        }
        if (rc != 0) {
            return s_fail(r, rc, "receiving from the left neighbour W%d: %s", left,
                          ps_strerror(rc));
        }
        const Shardps__Header *h = &m->hdr;
        /* Anyone may connect to our socket: only the left neighbour's
         * token makes ring data, so a stranger cannot break the ring. */
        if (h->type != PS_MSG_RING_DATA || h->role != PS_ROLE_WORKER || h->sender != left ||
            h->token != r->cfg.left_token) {
            r->dropped++;
            if ((r->dropped & (r->dropped - 1)) == 0) { /* 1st, 2nd, 4th ...: bounded log */
                ps_log_warn("ring: dropped a %s claiming %s%d (%llu dropped): W%d takes ring data "
                            "from W%d, with its token, only",
                            ps_codec_type_name(h->type), ps_codec_role_tag(h->role), h->sender,
                            (unsigned long long)r->dropped, r->cfg.rank, left);
            }
            ps_msg_close(m);
            continue;
        }
        return 0;
    }
}

/* The allreduce's next message: the left neighbour's ring data for (step, g)
 * over want, one frame of its floats. Fills *m (caller closes it). */
static int s_recv_sub(ps_ring_t *r, ps_msg_t *m, ps_range_t want, int64_t step, int g)
{
    int rc = s_recv(r, m, step, g);
    if (rc != 0) {
        return rc;
    }
    const Shardps__Header *h = &m->hdr;
    size_t len = 0;
    if (m->nframes == 1) {
        ps_msg_frame(m, 0, &len);
    }
    if (h->step != step || h->ring_step != g || h->key_begin != want.begin ||
        h->key_end != want.end || m->nframes != 1 || len != ps_range_len(want) * sizeof(float)) {
        rc = s_fail(r, PS_EPROTO,
                    "W%d broke the ring: sent step %lld ring step %d keys [%llu, %llu) "
                    "(%zu bytes), expected step %lld ring step %d keys [%llu, %llu)",
                    s_left(r), (long long)h->step, h->ring_step,
                    (unsigned long long)h->key_begin, (unsigned long long)h->key_end, len,
                    (long long)step, g, (unsigned long long)want.begin,
                    (unsigned long long)want.end);
        ps_msg_close(m);
        return rc;
    }
    r->received += len;
    return 0;
}

/* Waits until ZeroMQ has released every frame sent from the caller's buffer. */
static int s_drain_sends(ps_ring_t *r)
{
    double since = ps_now();
    while (atomic_load(&r->inflight) > 0) {
        ps_pollitem_t it = {.fd = r->efd};
        ps_poll(&it, 1, (long)(S_CHECK_SECONDS * 1000));
        uint64_t v;
        ssize_t got = read(r->efd, &v, sizeof v);
        (void)got;
        int rc = s_check(r, 0);
        if (rc != 0) {
            return rc;
        }
        if (r->cfg.timeout > 0 && ps_now() - since > r->cfg.timeout) {
            return s_fail(r, PS_ETIMEDOUT,
                          "the right neighbour W%d took nothing for %.0f s",
                          (r->cfg.rank + 1) % r->cfg.size, r->cfg.timeout);
        }
    }
    return 0;
}

/* Messages of a big vector grow so a chunk travels in about PS_RING_DEPTH of
 * them: enough to pipeline, few enough that per-message costs (ZeroMQ hand-offs
 * between threads) do not dominate. Small vectors keep cfg.sub_floats. Every
 * member computes the same size from the same n and configuration. */
enum { PS_RING_DEPTH = 4 };

static size_t s_sub_floats(const ps_ring_t *r, uint64_t n)
{
    uint64_t chunk = (n + (uint64_t)r->cfg.size - 1) / (uint64_t)r->cfg.size;
    uint64_t deep = (chunk + PS_RING_DEPTH - 1) / PS_RING_DEPTH;
    return deep > r->cfg.sub_floats ? (size_t)deep : r->cfg.sub_floats;
}

int ps_ring_allreduce(ps_ring_t *r, float *buf, uint64_t n, int64_t step)
{
    if (!r->connected || r->broken) {
        snprintf(r->error, sizeof r->error, "the ring is %s",
                 r->broken ? "broken by an earlier failure" : "not connected");
        return PS_ESTATE;
    }
    const int M = r->cfg.size, rank = r->cfg.rank, G = ps_ring_num_steps(M);
    const size_t sub = s_sub_floats(r, n);
    if (M == 1) {
        return 0;
    }
    /* Ring step 0: our own chunk, every sub-chunk at once. */
    ps_range_t first = ps_ring_chunk(n, M, ps_ring_send_chunk(rank, M, 0));
    int rc = 0;
    for (uint64_t j = 0, k = ps_ring_num_subs(first, sub); rc == 0 && j < k; j++) {
        rc = s_send(r, buf, ps_ring_sub(first, sub, j), step, 0);
    }
    /* Then each sub-chunk received at step g goes on at step g + 1. */
    for (int g = 0; rc == 0 && g < G; g++) {
        ps_trace_span_t span = ps_trace_span_begin(PS_TRACE_RING, step, g);
        ps_range_t chunk = ps_ring_chunk(n, M, ps_ring_recv_chunk(rank, M, g));
        for (uint64_t j = 0, k = ps_ring_num_subs(chunk, sub); rc == 0 && j < k; j++) {
            ps_range_t want = ps_ring_sub(chunk, sub, j);
            ps_msg_t m = {0};
            if ((rc = s_recv_sub(r, &m, want, step, g)) != 0) {
                break;
            }
            size_t len;
            const void *p = ps_msg_frame(&m, 0, &len);
            if (g < M - 1) {
                s_add(buf + want.begin, p, ps_range_len(want)); /* reduce-scatter */
            } else {
                memcpy(buf + want.begin, p, len); /* all-gather: the finished sum */
            }
            ps_msg_close(&m);
            if (g + 1 < G) {
                rc = s_send(r, buf, want, step, g + 1);
            }
        }
        ps_trace_span_end(&span);
    }
    /* After a failure frames may stay queued until ps_ring_destroy() drops them. */
    return rc ? rc : s_drain_sends(r);
}

/* ---- one allgather ---------------------------------------------------------- */

/* Sends block b (blocks[b]: its keys, then its rows) for ring step g. */
static int s_send_block(ps_ring_t *r, const ps_ring_block_t *blk, int b, size_t dim,
                        int64_t step, int g)
{
    const ps_frame_t f[2] = {{blk->keys, blk->n * sizeof *blk->keys},
                             {blk->rows, blk->n * dim * sizeof *blk->rows}};
    const ps_range_t which = {(uint64_t)b, (uint64_t)b + 1};
    return s_send_frames(r, f, 2, which, step, g);
}

/* The allgather's next message, block b of at most cap keys for (step, g),
 * copied into blk. */
static int s_recv_block(ps_ring_t *r, ps_ring_block_t *blk, int b, size_t dim, uint64_t cap,
                        int64_t step, int g)
{
    ps_msg_t m = {0};
    int rc = s_recv(r, &m, step, g);
    if (rc != 0) {
        return rc;
    }
    const Shardps__Header *h = &m.hdr;
    size_t klen = 0, vlen = 0;
    const void *keys = m.nframes == 2 ? ps_msg_frame(&m, 0, &klen) : NULL;
    const void *rows = m.nframes == 2 ? ps_msg_frame(&m, 1, &vlen) : NULL;
    const uint64_t n = klen / sizeof *blk->keys;
    if (h->step != step || h->ring_step != g || h->key_begin != (uint64_t)b ||
        h->key_end != (uint64_t)b + 1 || m.nframes != 2 || klen % sizeof *blk->keys ||
        n > cap || vlen != n * dim * sizeof *blk->rows) {
        rc = s_fail(r, PS_EPROTO,
                    "W%d broke the ring: sent step %lld ring step %d keys [%llu, %llu) in %d "
                    "frames (%zu + %zu bytes), expected step %lld ring step %d block %d of at "
                    "most %llu keys and their rows of %zu floats",
                    s_left(r), (long long)h->step, h->ring_step,
                    (unsigned long long)h->key_begin, (unsigned long long)h->key_end,
                    m.nframes, klen, vlen, (long long)step, g, b, (unsigned long long)cap, dim);
        ps_msg_close(&m);
        return rc;
    }
    if (n > 0) {
        memcpy(blk->keys, keys, klen);
        memcpy(blk->rows, rows, vlen);
    }
    blk->n = n;
    r->received += klen + vlen;
    ps_msg_close(&m);
    return 0;
}

int ps_ring_allgather(ps_ring_t *r, ps_ring_block_t *blocks, size_t dim, uint64_t cap,
                      int64_t step)
{
    if (!r->connected || r->broken) {
        snprintf(r->error, sizeof r->error, "the ring is %s",
                 r->broken ? "broken by an earlier failure" : "not connected");
        return PS_ESTATE;
    }
    const int M = r->cfg.size, rank = r->cfg.rank;
    if (blocks[rank].n > cap) {
        snprintf(r->error, sizeof r->error, "a block of %llu keys (at most %llu)",
                 (unsigned long long)blocks[rank].n, (unsigned long long)cap);
        return PS_EINVAL;
    }
    if (M == 1) {
        return 0;
    }
    /* Ring step g: block (rank - g) mod M out, (rank - g - 1) mod M in; the
     * block received at g is the one sent at g + 1. */
    int rc = s_send_block(r, &blocks[rank], rank, dim, step, 0);
    for (int g = 0; rc == 0 && g < M - 1; g++) {
        ps_trace_span_t span = ps_trace_span_begin(PS_TRACE_RING, step, g);
        const int b = ps_ring_recv_chunk(rank, M, g);
        rc = s_recv_block(r, &blocks[b], b, dim, cap, step, g);
        if (rc == 0 && g + 1 < M - 1) {
            rc = s_send_block(r, &blocks[b], b, dim, step, g + 1);
        }
        ps_trace_span_end(&span);
    }
    /* After a failure frames may stay queued until ps_ring_destroy() drops them. */
    return rc ? rc : s_drain_sends(r);
}
