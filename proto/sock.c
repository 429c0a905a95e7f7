/*
 * proto/sock.c - contexts, sockets, polling and socket monitors over libzmq.
 * Together with msg.c and curve.c the only file that calls ZeroMQ; its errors
 * become PS_E* here. Under --secure it sets CurveZMQ's options on each bind
 * and connect.
 */
#include "proto/sock_zmq.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

/* Blocking sends give up after this long: a peer that stops reading must not
 * hang us; liveness is decided by heartbeats, not here. */
#define PS_SEND_TIMEOUT_MS 10000
#define PS_LINGER_MS 2000

int ps_zmq_error(void)
{
    switch (zmq_errno()) {
    case EAGAIN: return PS_ETIMEDOUT;
    case ETERM: return PS_ECLOSED;
    case EINTR: return PS_ETIMEDOUT;
    case EINVAL: return PS_EINVAL;
    default: return PS_EIO;
    }
}

/* Fills err with ZeroMQ's reason for the last failure and returns its PS_E*. */
static int s_fail(char *err, size_t errlen)
{
    int rc = ps_zmq_error();
    if (err && errlen) {
        snprintf(err, errlen, "%s", zmq_strerror(zmq_errno()));
    }
    return rc;
}

int ps_ctx_new(ps_ctx_t **out)
{
    ps_ctx_t *c = calloc(1, sizeof *c);
    if (c && !(c->z = zmq_ctx_new())) {
        free(c);
        c = NULL;
    }
    *out = c;
    return c ? 0 : PS_ENOMEM;
}

void ps_ctx_destroy(ps_ctx_t **ctx)
{
    if (*ctx) {
        ps_curve_destroy(&(*ctx)->keys); /* stops the ZAP thread, which closes its socket */
        zmq_ctx_term((*ctx)->z);
        free(*ctx);
        *ctx = NULL;
    }
}

int ps_ctx_set_io_threads(ps_ctx_t *ctx, int n)
{
    return zmq_ctx_set(ctx->z, ZMQ_IO_THREADS, n) == 0 ? 0 : PS_EINVAL;
}

int ps_ctx_secure(ps_ctx_t *ctx, ps_curve_t **keys, char *err, size_t errlen)
{
    if (ctx->keys) {
        ps_curve_destroy(keys);
        snprintf(err, errlen, "the context is already secure");
        return PS_ESTATE;
    }
    int rc = ps_curve_zap_start(*keys, ctx->z, err, errlen);
    if (rc != 0) {
        ps_curve_destroy(keys);
        return rc;
    }
    ctx->keys = *keys;
    *keys = NULL;
    return 0;
}

const char *ps_ctx_public_key(const ps_ctx_t *ctx)
{
    return ctx->keys ? ps_curve_public(ctx->keys) : "";
}

uint64_t ps_ctx_refused(const ps_ctx_t *ctx)
{
    return ctx && ctx->keys ? ps_curve_refused(ctx->keys) : 0;
}

void ps_ctx_bytes(const ps_ctx_t *ctx, uint64_t *sent, uint64_t *received)
{
    for (int t = 0; t < PS_CTX_BYTE_TYPES; t++) {
        sent[t] = atomic_load_explicit(&ctx->bytes.n[0][t], memory_order_relaxed);
        received[t] = atomic_load_explicit(&ctx->bytes.n[1][t], memory_order_relaxed);
    }
}

int ps_sock_new(ps_ctx_t *ctx, ps_sock_type_t type, ps_sock_t **out, char *err,
                size_t errlen)
{
    static const int zmq_type[] = {
        [PS_SOCK_ROUTER] = ZMQ_ROUTER, [PS_SOCK_DEALER] = ZMQ_DEALER,
        [PS_SOCK_PUSH] = ZMQ_PUSH, [PS_SOCK_PULL] = ZMQ_PULL};
    *out = NULL;
    ps_sock_t *ps = calloc(1, sizeof *ps);
    if (!ps) {
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    void *s = zmq_socket(ctx->z, zmq_type[type]);
    if (!s) {
        free(ps);
        return s_fail(err, errlen);
    }
    ps->z = s;
    ps->keys = ctx->keys;
    ps->bytes = &ctx->bytes;
    *out = ps;
    /* times on the job's clock (common/clock.h), as every wait here */
    int linger = (int)ps_real_ms(PS_LINGER_MS);
    int sndtimeo = (int)ps_real_ms(PS_SEND_TIMEOUT_MS), hwm = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo);
    /* Queues are bounded by the protocol (a worker has few requests in flight),
     * not by ZeroMQ's message count, which would drop or block silently. */
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    return 0;
}

void ps_sock_destroy(ps_sock_t **s)
{
    if (*s) {
        zmq_close(ps_zs(*s));
        free(*s);
        *s = NULL;
    }
}

/* CurveZMQ is for the network: inproc pipes stay inside the process. */
static int s_secure(const ps_sock_t *s, const char *endpoint)
{
    return s->keys && strncmp(endpoint, "inproc://", 9) != 0;
}

int ps_sock_bind(ps_sock_t *s, const char *endpoint, char *actual, size_t cap, char *err,
                 size_t errlen)
{
    int on = 1;
    if (s_secure(s, endpoint) &&
        (zmq_setsockopt(ps_zs(s), ZMQ_CURVE_SERVER, &on, sizeof on) != 0 ||
         zmq_setsockopt(ps_zs(s), ZMQ_CURVE_SECRETKEY, ps_curve_secret(s->keys),
                        PS_CURVE_KEY_LEN) != 0 ||
         ps_curve_watch(s->keys, ps_zs(s)) != 0)) {
        return s_fail(err, errlen);
    }
    if (zmq_bind(ps_zs(s), endpoint) != 0) {
        int e = zmq_errno();
        if (e == EINVAL || e == EPROTONOSUPPORT || e == ENODEV) {
            snprintf(err, errlen, "bad endpoint (expected tcp://HOST:PORT)");
            return PS_EINVAL;
        }
        s_fail(err, errlen);
        return PS_EIO;
    }
    size_t len = cap;
    if (actual && zmq_getsockopt(ps_zs(s), ZMQ_LAST_ENDPOINT, actual, &len) != 0) {
        snprintf(actual, cap, "%s", endpoint);
    }
    return 0;
}

int ps_sock_connect(ps_sock_t *s, const char *endpoint)
{
    if (s_secure(s, endpoint)) {
        const char *peer = s->peer_key[0] ? s->peer_key : ps_curve_job_key(s->keys);
        if (zmq_setsockopt(ps_zs(s), ZMQ_CURVE_SERVERKEY, peer, PS_CURVE_KEY_LEN) != 0 ||
            zmq_setsockopt(ps_zs(s), ZMQ_CURVE_PUBLICKEY, ps_curve_public(s->keys),
                           PS_CURVE_KEY_LEN) != 0 ||
            zmq_setsockopt(ps_zs(s), ZMQ_CURVE_SECRETKEY, ps_curve_secret(s->keys),
                           PS_CURVE_KEY_LEN) != 0) {
            return PS_EINVAL;
        }
    }
    return zmq_connect(ps_zs(s), endpoint) == 0 ? 0 : PS_EINVAL;
}

int ps_sock_set_peer_key(ps_sock_t *s, const char *key)
{
    if (!s->keys) {
        return 0;
    }
    uint8_t bin[32];
    if (!key || strlen(key) != PS_CURVE_KEY_LEN - 1 || !zmq_z85_decode(bin, key)) {
        return PS_EINVAL;
    }
    memcpy(s->peer_key, key, PS_CURVE_KEY_LEN);
    return 0;
}

void ps_sock_set_linger(ps_sock_t *s, int ms)
{
    if (s) {
        ms = (int)ps_real_ms(ms);
        zmq_setsockopt(ps_zs(s), ZMQ_LINGER, &ms, sizeof ms);
    }
}

void ps_sock_set_io_thread(ps_sock_t *s, int i)
{
    uint64_t mask = 1ull << i;
    zmq_setsockopt(ps_zs(s), ZMQ_AFFINITY, &mask, sizeof mask);
}

void ps_sock_set_max_message(ps_sock_t *s, long long bytes)
{
    int64_t v = bytes;
    zmq_setsockopt(ps_zs(s), ZMQ_MAXMSGSIZE, &v, sizeof v);
}

void ps_sock_set_queue_limit(ps_sock_t *s, int send, int recv)
{
    zmq_setsockopt(ps_zs(s), ZMQ_SNDHWM, &send, sizeof send);
    zmq_setsockopt(ps_zs(s), ZMQ_RCVHWM, &recv, sizeof recv);
}

void ps_sock_set_recv_timeout(ps_sock_t *s, int ms)
{
    ms = (int)ps_real_ms(ms);
    zmq_setsockopt(ps_zs(s), ZMQ_RCVTIMEO, &ms, sizeof ms);
}

int ps_sock_has_input(ps_sock_t *s)
{
    int ev = 0;
    size_t len = sizeof ev;
    return zmq_getsockopt(ps_zs(s), ZMQ_EVENTS, &ev, &len) == 0 && (ev & ZMQ_POLLIN);
}

int ps_sock_send_raw(ps_sock_t *s, const void *const *data, const size_t *sizes, int n)
{
    for (int i = 0; i < n; i++) {
        if (zmq_send(ps_zs(s), data[i], sizes[i], i + 1 < n ? ZMQ_SNDMORE : 0) < 0) {
            return ps_zmq_error();
        }
    }
    return 0;
}

void *ps_sock_handle(ps_sock_t *s)
{
    return ps_zs(s);
}

void *ps_zmq_monitor(void *zctx, void *zsock, int events, const char *tag)
{
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://ps-%s-%p", tag, zsock);
    void *mon = NULL;
    if (zmq_socket_monitor(zsock, ep, events) != 0 || !(mon = zmq_socket(zctx, ZMQ_PAIR)) ||
        zmq_connect(mon, ep) != 0) {
        int e = zmq_errno();
        if (mon) {
            zmq_close(mon);
        }
        errno = e;
        return NULL;
    }
    int linger = 0;
    zmq_setsockopt(mon, ZMQ_LINGER, &linger, sizeof linger);
    return mon;
}

/* A socket of ours reading s's monitor for events; NULL (errno set) when
 * either cannot be made. */
static ps_sock_t *s_monitor(ps_ctx_t *ctx, ps_sock_t *s, int events, const char *tag)
{
    ps_sock_t *mon = calloc(1, sizeof *mon);
    if (mon && !(mon->z = ps_zmq_monitor(ctx->z, ps_zs(s), events, tag))) {
        int e = errno;
        free(mon);
        errno = e;
        mon = NULL;
    }
    return mon;
}

int ps_sock_monitor_disconnects(ps_ctx_t *ctx, ps_sock_t *s, ps_sock_t **out, char *err,
                                size_t errlen)
{
    *out = NULL;
    if (s->keys) {
        /* A socket has one monitor, and under --secure it counts the
         * handshakes refused before the key check (curve.c). */
        snprintf(err, errlen, "the socket's monitor counts refused handshakes under --secure");
        return PS_EINVAL;
    }
    errno = 0;
    if (!(*out = s_monitor(ctx, s,
                           ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                           "monitor"))) {
        if (errno == ENOMEM) {
            snprintf(err, errlen, "out of memory");
            return PS_ENOMEM;
        }
        return s_fail(err, errlen);
    }
    return 0;
}

/* Reads one monitor event without blocking: 1 with its type and value (an
 * event is two frames: 16-bit type and 32-bit value, then the endpoint), 0
 * when none waits. */
static int s_event(void *mon, uint16_t *event, uint32_t *value)
{
    zmq_msg_t ev, addr;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return 0;
    }
    int more = zmq_msg_more(&ev);
    *event = 0;
    *value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(event, zmq_msg_data(&ev), 2);
        memcpy(value, (const char *)zmq_msg_data(&ev) + 2, 4);
    }
    zmq_msg_close(&ev);
    while (more) {
        zmq_msg_init(&addr);
        more = zmq_msg_recv(&addr, mon, 0) >= 0 && zmq_msg_more(&addr);
        zmq_msg_close(&addr);
    }
    return 1;
}

int ps_sock_disconnected(ps_sock_t *mon, int *fd)
{
    uint16_t event;
    uint32_t value;
    while (s_event(ps_zs(mon), &event, &value)) {
        if (event == ZMQ_EVENT_DISCONNECTED) {
            *fd = (int)value;
            return 1;
        }
        /* A plain socket: a --secure peer's handshake fails on the mechanism,
         * or breaks off when the peer saw it first. Its retries come ten a
         * second; the 1st, 10th, 100th... are told. */
        const int mismatch = event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                             value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
        if (!mismatch && event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            continue;
        }
        int k = ++mon->mismatches;
        while (k >= 10 && k % 10 == 0) {
            k /= 10;
        }
        if (k == 1) {
            ps_log_warn("%s (%d so far): start every role of a job with the same --secure",
                        mismatch
                            ? "a peer speaks CurveZMQ (started with --secure) and this "
                              "job does not: its handshake failed"
                            : "a peer broke off its ZeroMQ handshake: one started with "
                              "--secure, which this job is not?",
                        mon->mismatches);
        }
    }
    return 0;
}

int ps_sock_watch_connect(ps_ctx_t *ctx, ps_sock_t *s, ps_sock_t **out)
{
    *out = s_monitor(ctx, s,
                     ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED |
                         ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                         ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                         ZMQ_EVENT_DISCONNECTED,
                     "connect");
    return *out ? 0 : PS_EIO;
}

void ps_sock_watch_end(ps_sock_t *s, ps_sock_t **mon)
{
    if (*mon) {
        zmq_socket_monitor(ps_zs(s), NULL, 0); /* no event waits on a closed reader */
        ps_sock_destroy(mon);
    }
}

void ps_sock_connect_seen(ps_sock_t *mon, ps_connect_seen_t *seen)
{
    uint16_t event;
    uint32_t value;
    while (mon && s_event(ps_zs(mon), &event, &value)) {
        seen->retries += event == ZMQ_EVENT_CONNECT_RETRIED;
        seen->connected += event == ZMQ_EVENT_CONNECTED;
        seen->handshakes += event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
        seen->refused += event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
                         event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                         event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
        seen->closed += event == ZMQ_EVENT_DISCONNECTED;
        seen->mismatch += event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                          value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
        seen->auth += event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    }
}

const char *ps_connect_seen_str(const ps_connect_seen_t *seen, char *buf, size_t cap)
{
    if (seen->handshakes) {
        snprintf(buf, cap, "connected (ZeroMQ handshake done)");
    } else if (seen->refused) {
        snprintf(buf, cap, "connected, but %d ZeroMQ handshake%s failed", seen->refused,
                 seen->refused == 1 ? "" : "s");
    } else if (seen->connected) {
        snprintf(buf, cap, "connected over TCP, ZeroMQ handshake not done");
    } else if (seen->retries) {
        snprintf(buf, cap, "no TCP connection (%d attempt%s failed)", seen->retries,
                 seen->retries == 1 ? "" : "s");
    } else { /* no answer to the SYNs: a dropped packet, a full listen queue */
        snprintf(buf, cap, "no TCP connection (the first attempt still waits)");
    }
    size_t at = strlen(buf);
    if (seen->closed && !seen->refused && at < cap) { /* a failed handshake closes too */
        snprintf(buf + at, cap - at, "; %d connection%s closed", seen->closed,
                 seen->closed == 1 ? "" : "s");
    }
    return buf;
}

int ps_poll(ps_pollitem_t *items, int n, long timeout_ms)
{
    if (n < 0 || n > PS_POLL_MAX) {
        return PS_EINVAL;
    }
    zmq_pollitem_t it[PS_POLL_MAX];
    for (int i = 0; i < n; i++) {
        it[i] = (zmq_pollitem_t){items[i].sock ? ps_zs(items[i].sock) : NULL, items[i].fd,
                                 ZMQ_POLLIN, 0};
    }
    int got = zmq_poll(it, n, ps_real_ms(timeout_ms));
    if (got < 0 && zmq_errno() != EINTR) {
        return ps_zmq_error();
    }
    for (int i = 0; i < n; i++) {
        items[i].ready = got > 0 && (it[i].revents & ZMQ_POLLIN);
    }
    return got < 0 ? 0 : got;
}
