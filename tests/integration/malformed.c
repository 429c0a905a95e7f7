/*
 * tests/integration/malformed.c - a hostile client against a live server.
 * usage: sps-malformed SCHEDULER_ENDPOINT NUM_PARAMS
 *        sps-malformed --inject SERVER_ENDPOINT
 *        sps-malformed --forge SCHEDULER_ENDPOINT SERVERS WORKERS SECONDS
 *
 * --forge: for SECONDS, from a stranger's connection, sends the scheduler
 * failure (SHUTDOWN), REPORT, DONE, BARRIER, MODEL_INFO, CHECKPOINT and
 * HEARTBEAT messages naming each server and worker in turn, with bodies a
 * real node's would abort the job for; prints how many it sent. The job must
 * go on as if nothing was sent.
 *
 * --inject: pushes NaN gradients posing as worker 1 for step 0 of a live
 * sync job until the server refuses them as non-finite (PS_ENONFINITE; it
 * answers PS_ESTATE until worker 0 has initialised the parameters), then
 * exits 0. The job must go on as if nothing was sent.
 *
 * Joins the job as worker rank 1 (worker 0 has initialised the parameters and
 * waits at the start barrier for us), records the server's whole shard, then
 * sends one malformed message per case and checks the server answers each
 * with MSG_ERROR and the expected PS_E* status (for an envelope that does not
 * decode, an error reply or nothing within 1 s), and nothing else. At the end
 * the shard must be bitwise unchanged at the same version. Prints "cases=N"
 * and "repeats=K" (the script expects N - K "rejected" lines in the server's
 * log: K cases repeat an earlier case's reason, which is counted, not logged
 * again), then floods the scheduler and the server with 100,000 messages
 * each from a stranger (the script checks the logs stay short), and exits 0 on
 * pass, 1 with a reason on stderr otherwise. Heartbeats the scheduler in
 * every wait so the job is not aborted under it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "proto/codec.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"

/* The hostile client's state. */
typedef struct {
    ps_ctx_t *ctx;
    ps_link_t *link;  /* to the scheduler, heartbeated while we wait */
    ps_view_t *view;  /* the cluster view */
    ps_sock_t *srv;   /* DEALER to server 0 */
    ps_range_t shard; /* server 0's keys */
    int cases;        /* malformed messages sent */
    int repeats;      /* of them, cases whose reason an earlier case had */
    uint64_t next_id; /* request ids, unique per message */
} s_client_t;

static void s_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void s_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* ps_msg_drain's handler for the scheduler's messages. */
static int s_on_sched(void *arg, ps_msg_t *m, int rc)
{
    char err[256];
    if (rc != 0) {
        return 0;
    }
    ps_link_event_t ev = ps_link_handle(arg, m, err, sizeof err);
    if (ev == PS_LINK_SHUTDOWN || ev == PS_LINK_ABORTED) {
        s_die("the scheduler ended the job during the test: %s",
              ev == PS_LINK_SHUTDOWN ? "shutdown" : err);
    }
    return 0;
}

/* Answers the scheduler and sends our heartbeat when due. */
static void s_keepalive(s_client_t *c)
{
    char err[256];
    ps_msg_drain(ps_link_sock(c->link), 0, 64, s_on_sched, c->link);
    if (ps_link_tick(c->link, err, sizeof err) == PS_LINK_LOST) {
        s_die("%s", err);
    }
}

/* Waits up to timeout s for one message from the server. Returns 1 with *m
 * filled, 0 on timeout. A message that fails ps_msg_recv is a failure: every
 * reply the server sends must itself be well-formed. */
static int s_wait_reply(s_client_t *c, ps_msg_t *m, double timeout, const char *what)
{
    double deadline = ps_now() + timeout;
    while (ps_now() < deadline) {
        s_keepalive(c);
        ps_pollitem_t it = {.sock = c->srv};
        if (ps_poll(&it, 1, 100) <= 0) {
            continue;
        }
        int rc = ps_msg_recv(c->srv, 0, m);
        if (rc != 0) {
            s_die("%s: the server's answer does not decode: %s (%s)", what, ps_strerror(rc),
                  m->hdr.error);
        }
        return 1;
    }
    return 0;
}

/* Sends a raw multipart message: header bytes, then frames. */
static void s_send_raw(s_client_t *c, const void *hdr, size_t hlen, const void *const *data,
                       const size_t *sizes, int n)
{
    const void *parts[PS_MSG_MAX_FRAMES + 2] = {hdr};
    size_t lens[PS_MSG_MAX_FRAMES + 2] = {hlen};
    if (n > PS_MSG_MAX_FRAMES + 1) {
        s_die("too many frames for a case");
    }
    for (int i = 0; i < n; i++) {
        parts[1 + i] = data[i];
        lens[1 + i] = sizes[i];
    }
    int rc = ps_sock_send_raw(c->srv, parts, lens, 1 + n);
    if (rc != 0) {
        s_die("send: %s", ps_strerror(rc));
    }
}

/* Packs h (as is: payload_len and dtype are not fixed up) and sends it with
 * n frames. */
static void s_send_header(s_client_t *c, const ps_header_t *h, const void *const *data,
                          const size_t *sizes, int n)
{
    uint8_t buf[PS_HEADER_MAX];
    int hlen = ps_codec_pack_header(h, buf, sizeof buf);
    if (hlen < 0) {
        s_die("cannot pack a header: %s", ps_strerror(hlen));
    }
    s_send_raw(c, buf, (size_t)hlen, data, sizes, n);
}

/* A header from worker 1 of type t for [begin, end) with a fresh request id. */
static ps_header_t s_header(s_client_t *c, ps_msg_type_t t, uint64_t begin, uint64_t end)
{
    ps_header_t h;
    ps_msg_header(&h, t, PS_ROLE_WORKER, ps_link_rank(c->link));
    h.request_id = ++c->next_id;
    h.begin = begin;
    h.end = end;
    h.step = 0; /* the step the server is collecting: only the defect is wrong */
    return h;
}

/* The same with a float32 payload of payload_len bytes announced. */
static ps_header_t s_f32_header(s_client_t *c, ps_msg_type_t t, uint64_t begin,
                                uint64_t end, uint64_t payload_len)
{
    ps_header_t h = s_header(c, t, begin, end);
    h.dtype = PS_DTYPE_F32;
    h.payload_len = payload_len;
    return h;
}

/* Checks the answer to case `name`: MSG_ERROR with `status`, for request id
 * (when the header was readable), and nothing else. silent_ok: the envelope
 * could not be decoded, so silence is an acceptable answer too. */
static void s_expect(s_client_t *c, const char *name, int status, const ps_header_t *sent,
                     int silent_ok)
{
    c->cases++;
    ps_msg_t m = {0};
    if (!s_wait_reply(c, &m, silent_ok ? 1.0 : 5.0, name)) {
        if (silent_ok) {
            printf("case %-34s dropped without a reply\n", name);
            return;
        }
        s_die("%s: no reply within 5 s", name);
    }
    if (m.hdr.type != PS_MSG_ERROR) {
        s_die("%s: got %s, want error", name, ps_codec_type_name(m.hdr.type));
    }
    if (m.hdr.status != status) {
        s_die("%s: status %d (%s), want %d (%s); reason: %s", name, m.hdr.status,
              ps_strerror(m.hdr.status), status, ps_strerror(status), m.hdr.error);
    }
    if (m.hdr.role != PS_ROLE_SERVER || m.hdr.sender != c->view->servers[0].rank) {
        s_die("%s: the error comes from %s%d", name, ps_codec_role_tag(m.hdr.role),
              m.hdr.sender);
    }
    if (sent && m.hdr.request_id != sent->request_id) {
        s_die("%s: reply to request %llu, want %llu", name,
              (unsigned long long)m.hdr.request_id, (unsigned long long)sent->request_id);
    }
    if (m.nframes != 0 || !m.hdr.error[0]) {
        s_die("%s: an error reply must carry a reason and no payload", name);
    }
    printf("case %-34s %s: %s\n", name, ps_strerror(status), m.hdr.error);
    ps_msg_close(&m);
}

/* Huge values: applied by mistake, they would show in the final pull. */
static const float s_poison[32] = {1e30f, -1e30f, 1e30f, -1e30f, 1e30f, -1e30f,
                                   1e30f, -1e30f, 1e30f, -1e30f, 1e30f, -1e30f};

/* Case `name`: sends h with one frame of frame_bytes poison bytes (0: no
 * frame) and checks the answer is MSG_ERROR with `status` (s_expect). */
static void s_case(s_client_t *c, const char *name, int status, const ps_header_t *h,
                   size_t frame_bytes)
{
    const void *data[1] = {s_poison};
    s_send_header(c, h, data, &frame_bytes, frame_bytes ? 1 : 0);
    s_expect(c, name, status, h, 0);
}

/* Pulls the whole shard at version >= 0 into out. The server answers in parts,
 * in key order; they must tile the shard. Returns the served version. */
static int64_t s_pull_shard(s_client_t *c, float *out, const char *what)
{
    ps_header_t h = s_header(c, PS_MSG_PULL, c->shard.begin, c->shard.end);
    if (ps_msg_send(c->srv, NULL, h, NULL, 0, 0) != 0) {
        s_die("%s: cannot send the pull", what);
    }
    int64_t version = -1;
    for (uint64_t next = c->shard.begin; next < c->shard.end;) {
        ps_msg_t m = {0};
        if (!s_wait_reply(c, &m, 120.0, what)) {
            s_die("%s: no pull reply within 120 s (was the shard ever initialised?)", what);
        }
        size_t len = 0;
        const void *p = m.nframes == 1 ? ps_msg_frame(&m, 0, &len) : NULL;
        if (m.hdr.type != PS_MSG_PULL_REPLY || m.hdr.request_id != h.request_id ||
            m.hdr.begin != next || m.hdr.end <= next || m.hdr.end > c->shard.end || !p ||
            len != (m.hdr.end - m.hdr.begin) * sizeof(float) ||
            (version >= 0 && m.hdr.version != version)) {
            s_die("%s: bad pull reply: %s for request %llu, [%llu, %llu), %zu bytes (%s)", what,
                  ps_codec_type_name(m.hdr.type), (unsigned long long)m.hdr.request_id,
                  (unsigned long long)m.hdr.begin, (unsigned long long)m.hdr.end, len,
                  m.hdr.error);
        }
        memcpy(out + (next - c->shard.begin), p, len);
        version = m.hdr.version;
        next = m.hdr.end;
        ps_msg_close(&m);
    }
    return version;
}

/* Every malformed message, one case each. */
static void s_run_cases(s_client_t *c)
{
    const uint64_t b = c->shard.begin, e = c->shard.end;
    const void *pp[8] = {s_poison, s_poison, s_poison, s_poison,
                         s_poison, s_poison, s_poison, s_poison};
    size_t sz[8];
    ps_header_t h;

    /* Envelopes that do not decode. */
    {
        h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
        h.request_id = UINT64_MAX - 1; /* a 10-byte varint in the middle */
        uint8_t buf[PS_HEADER_MAX];
        int n = ps_codec_pack_header(&h, buf, sizeof buf);
        sz[0] = 16;
        s_send_raw(c, buf, (size_t)n / 2, pp, sz, 1);
        s_expect(c, "truncated header", PS_EPROTO, NULL, 1);
    }
    {
        static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0x13, 0x37};
        s_send_raw(c, garbage, sizeof garbage, NULL, NULL, 0);
        s_expect(c, "garbage bytes", PS_EPROTO, NULL, 1);
        const char text[] = "GET / HTTP/1.1\r\nHost: shardps\r\n\r\n";
        sz[0] = 16;
        s_send_raw(c, text, sizeof text - 1, pp, sz, 1);
        s_expect(c, "garbage text with a frame", PS_EPROTO, NULL, 1);
        s_send_raw(c, "", 0, NULL, NULL, 0);
        s_expect(c, "empty header frame", PS_EPROTO, NULL, 1);
    }

    /* Headers that decode but are refused by the codec. */
    h = s_header(c, PS_MSG_PULL, b, b + 4);
    h.type = (ps_msg_type_t)99;
    s_case(c, "unknown type 99", PS_EPROTO, &h, 0);

    h = s_header(c, PS_MSG_PULL, b, b + 4);
    h.protocol = PS_PROTOCOL_VERSION + 1;
    s_case(c, "wrong protocol version", PS_EPROTO, &h, 0);

    h = s_header(c, PS_MSG_PULL, b, b + 4);
    h.role = (ps_role_t)7;
    s_case(c, "unknown role 7", PS_EPROTO, &h, 0);

    h = s_f32_header(c, PS_MSG_PUSH, b + 8, b + 4, 16);
    s_case(c, "push with begin > end", PS_EPROTO, &h, 16);

    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    h.dtype = PS_DTYPE_NONE;
    s_case(c, "push of dtype none", PS_EPROTO, &h, 16);

    /* Envelopes that ps_msg_recv refuses. */
    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    s_case(c, "payload shorter than header", PS_EPROTO, &h, 12);

    h = s_f32_header(c, PS_MSG_PUSH, b, b + 20, 5 * 16);
    for (int i = 0; i < 5; i++) {
        sz[i] = 16;
    }
    s_send_header(c, &h, pp, sz, 5); /* PS_MSG_MAX_FRAMES + 1 */
    s_expect(c, "too many frames", PS_EPROTO, &h, 0);

    /* Well-formed envelopes the server refuses in context. */
    h = s_header(c, PS_MSG_HEARTBEAT, 0, 0);
    s_case(c, "heartbeat to a server", PS_EPROTO, &h, 0);

    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 12);
    s_case(c, "payload is not (end-begin)*4", PS_ERANGE, &h, 12);

    h = s_f32_header(c, PS_MSG_PUSH, e - 2, e + 2, 16);
    s_case(c, "push past the shard end", PS_ERANGE, &h, 16);

    h = s_header(c, PS_MSG_PULL, e, e + 4);
    s_case(c, "pull past the shard end", PS_ERANGE, &h, 0);

    h = s_header(c, PS_MSG_PULL, b + 4, b + 4);
    s_case(c, "pull of an empty range", PS_ERANGE, &h, 0);

    h = s_header(c, PS_MSG_PULL, b, b + 4);
    h.sender = 7;
    s_case(c, "unknown sender W7 of 2", PS_ENOENT, &h, 0);

    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    h.sender = -1;
    s_case(c, "push from W-1", PS_ENOENT, &h, 16);

    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    h.role = PS_ROLE_SERVER;
    h.sender = 0;
    s_case(c, "push from a server", PS_ENOENT, &h, 16);

    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    h.step = 5;
    s_case(c, "push for a wrong step", PS_ESTATE, &h, 16);

    h = s_f32_header(c, PS_MSG_INIT, b, b + 4, 16);
    s_case(c, "init from W1", PS_ESTATE, &h, 16);

    h = s_f32_header(c, PS_MSG_INIT, b, b + 4, 16);
    h.sender = 0; /* posing as worker 0 after initialisation */
    s_case(c, "second init posing as W0", PS_ESTATE, &h, 16);

    h = s_f32_header(c, PS_MSG_PULL, b, b + 4, 16);
    s_case(c, "pull with a payload", PS_ERANGE, &h, 16);

    /* Integers from the network at their extremes: refused before any
     * arithmetic (the UBSan build reports any signed overflow). */
    const int64_t extremes[] = {INT64_MIN, INT64_MAX};
    for (int i = 0; i < 2; i++) {
        char name[64];
        h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
        h.version = extremes[i];
        snprintf(name, sizeof name, "push computed on version %s", i ? "MAX" : "MIN");
        s_case(c, name, PS_ERANGE, &h, 16);
        h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
        h.step = extremes[i];
        snprintf(name, sizeof name, "push for step INT64_%s", i ? "MAX" : "MIN");
        s_case(c, name, PS_ERANGE, &h, 16);
        h = s_header(c, PS_MSG_PULL, b, b + 4);
        h.step = extremes[i];
        snprintf(name, sizeof name, "pull for version INT64_%s", i ? "MAX" : "MIN");
        s_case(c, name, PS_ERANGE, &h, 0);
    }

    /* Non-finite gradients for the step being collected: refused, never
     * held (a NaN would otherwise poison every parameter it touches). */
    float bad[4] = {1.0f, NAN, 2.0f, 3.0f};
    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    pp[0] = bad;
    sz[0] = 16;
    s_send_header(c, &h, pp, sz, 1);
    s_expect(c, "push of a NaN", PS_ENONFINITE, &h, 0);
    bad[1] = INFINITY;
    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    s_send_header(c, &h, pp, sz, 1);
    s_expect(c, "push of an infinity", PS_ENONFINITE, &h, 0);
    c->repeats++; /* same reason as the NaN */
}

/* Sends n heartbeats to the scheduler and n pulls from an unknown worker to
 * the server from a stranger's sockets, as fast as they go; the answers are
 * read and dropped. */
static void s_flood(s_client_t *c, const char *sched, int n)
{
    char err[256];
    ps_sock_t *to[2];
    const char *eps[2] = {sched, c->view->servers[0].endpoint};
    for (int k = 0; k < 2; k++) {
        if (ps_sock_new(c->ctx, PS_SOCK_DEALER, &to[k], err, sizeof err) != 0 ||
            ps_sock_connect(to[k], eps[k]) != 0) {
            s_die("flood: cannot connect to %s", eps[k]);
        }
    }
    ps_header_t hb, pull = s_header(c, PS_MSG_PULL, c->shard.begin, c->shard.begin + 4);
    ps_msg_header(&hb, PS_MSG_HEARTBEAT, PS_ROLE_WORKER, 5);
    pull.sender = 9;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            if (ps_msg_send(to[k], NULL, k ? pull : hb, NULL, 0, 0) != 0) {
                s_die("flood: send failed");
            }
            ps_pollitem_t it = {.sock = to[k]};
            while (ps_poll(&it, 1, 0) > 0 && it.ready) {
                ps_msg_t m = {0};
                if (ps_msg_recv(to[k], 0, &m) == 0) {
                    ps_msg_close(&m);
                }
            }
        }
        if (i % 1000 == 0) {
            s_keepalive(c);
        }
    }
    for (int k = 0; k < 2; k++) {
        ps_sock_set_linger(to[k], 1000);
        ps_sock_destroy(&to[k]);
    }
    printf("flooded the scheduler and the server with %d messages each\n", n);
}

/* --inject: see the header. */
static int s_inject(const char *server)
{
    ps_ctx_t *ctx;
    ps_sock_t *s;
    char err[256];
    if (ps_ctx_new(&ctx) != 0 || ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err) != 0 ||
        ps_sock_connect(s, server) != 0) {
        s_die("cannot connect to %s", server);
    }
    const float nan4[4] = {NAN, NAN, NAN, NAN};
    for (int tries = 0; tries < 3000; tries++) {
        ps_header_t h;
        ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
        h.request_id = (uint64_t)tries + 1;
        h.begin = 0;
        h.end = 4;
        h.dtype = PS_DTYPE_F32;
        h.payload_len = sizeof nan4;
        ps_frame_t f = {nan4, sizeof nan4};
        if (ps_msg_send(s, NULL, h, &f, 1, PS_SEND_COPY) != 0) {
            s_die("inject: send failed");
        }
        ps_pollitem_t it = {.sock = s};
        ps_msg_t m = {0};
        /* the server answers once it has its view: after every worker loaded
         * its data, which a loaded machine may take a while to do */
        if (ps_poll(&it, 1, 30000) <= 0 || ps_msg_recv(s, 0, &m) != 0) {
            s_die("inject: no answer from the server");
        }
        int status = m.hdr.type == PS_MSG_ERROR ? m.hdr.status : 0;
        ps_msg_close(&m);
        if (status == PS_ENONFINITE) {
            printf("NaN push for W1 step 0 refused: %s (after %d tries)\n", ps_strerror(status),
                   tries + 1);
            ps_sock_destroy(&s);
            ps_ctx_destroy(&ctx);
            return 0;
        }
        if (status != PS_ESTATE) {
            s_die("inject: the NaN push got %s, want a refusal as not finite",
                  status ? ps_strerror(status) : "accepted");
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    s_die("inject: the parameters were never initialised");
}

/* --forge: see the header. */
static int s_forge(const char *sched, int servers, int workers, double seconds)
{
    ps_ctx_t *ctx;
    ps_sock_t *s;
    char err[256];
    if (ps_ctx_new(&ctx) != 0 || ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err) != 0 ||
        ps_sock_connect(s, sched) != 0) {
        s_die("cannot connect to %s", sched);
    }
    uint8_t *fail;
    size_t fail_len;
    if (ps_codec_pack_shutdown(PS_EIO, "forged failure", &fail, &fail_len) != 0) {
        s_die("out of memory");
    }
    static const ps_msg_type_t types[] = {PS_MSG_SHUTDOWN, PS_MSG_REPORT, PS_MSG_DONE,
                                          PS_MSG_BARRIER, PS_MSG_MODEL_INFO,
                                          PS_MSG_CHECKPOINT, PS_MSG_HEARTBEAT};
    long sent = 0;
    double end = ps_now() + seconds;
    while (ps_now() < end) {
        for (int node = 0; node < servers + workers; node++) {
            int is_server = node < servers;
            for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
                int shut = types[k] == PS_MSG_SHUTDOWN;
                if (ps_msg_send_ctrl(s, NULL, types[k],
                                     is_server ? PS_ROLE_SERVER : PS_ROLE_WORKER,
                                     is_server ? node : node - servers, shut ? (const void *)fail : "x",
                                     shut ? fail_len : 1) != 0) {
                    s_die("forge: send failed");
                }
                sent++;
            }
        }
        ps_pollitem_t it = {.sock = s};
        while (ps_poll(&it, 1, 0) > 0 && it.ready) {
            ps_msg_t m = {0};
            if (ps_msg_recv(s, 0, &m) == 0 && m.hdr.type != PS_MSG_ERROR) {
                s_die("forge: answered with %s", ps_codec_type_name(m.hdr.type));
            }
            ps_msg_close(&m);
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    printf("forged %ld messages naming %d servers and %d workers\n", sent, servers, workers);
    free(fail);
    ps_sock_set_linger(s, 0);
    ps_sock_destroy(&s);
    ps_ctx_destroy(&ctx);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && !strcmp(argv[1], "--forge")) {
        return s_forge(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
    }
    if (argc == 3 && !strcmp(argv[1], "--inject")) {
        return s_inject(argv[2]);
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s SCHEDULER_ENDPOINT NUM_PARAMS | --inject SERVER\n", argv[0]);
        return 2;
    }
    ps_log_set_role("T", 1);
    s_client_t c = {0};
    uint64_t P = strtoull(argv[2], NULL, 10);
    char err[256];
    ps_job_t job;
    c.view = calloc(1, sizeof *c.view);
    if (ps_ctx_new(&c.ctx) != 0 || !c.view) {
        s_die("out of memory");
    }
    int rc = ps_link_join(&c.link, c.ctx, argv[1], PS_ROLE_WORKER, 1, NULL, 30.0, 30.0, &job,
                          err, sizeof err);
    if (rc != 0) {
        s_die("join: %s", err);
    }
    ps_model_info_t info = {.num_params = P, .train_samples = 60000};
    if ((rc = ps_link_wait_view(c.link, &info, c.view, err, sizeof err)) != 0) {
        s_die("view: %s", err);
    }
    if (ps_link_rank(c.link) != 1 || c.view->num_workers != 2 || c.view->num_servers < 1 ||
        c.view->num_params != P || c.view->job.mode != PS_MODE_SYNC) {
        s_die("unexpected job: rank %d, %d workers, %d servers, P=%llu, mode %s", ps_link_rank(c.link),
              c.view->num_workers, c.view->num_servers,
              (unsigned long long)c.view->num_params, c.view->job.mode == PS_MODE_SYNC ? "sync" : "other");
    }
    c.shard.begin = c.view->servers[0].begin;
    c.shard.end = c.view->servers[0].end;
    if (ps_range_len(c.shard) < 64) {
        s_die("server 0's shard is too small for the cases");
    }
    if (ps_sock_new(c.ctx, PS_SOCK_DEALER, &c.srv, err, sizeof err) != 0 ||
        ps_sock_connect(c.srv, c.view->servers[0].endpoint) != 0) {
        s_die("cannot connect to %s", c.view->servers[0].endpoint);
    }
    size_t n = ps_range_len(c.shard);
    float *before = malloc(n * sizeof(float)), *after = malloc(n * sizeof(float));
    if (!before || !after) {
        s_die("out of memory");
    }
    int64_t v0 = s_pull_shard(&c, before, "initial pull");
    printf("shard [%llu, %llu) at version %lld\n", (unsigned long long)c.shard.begin,
           (unsigned long long)c.shard.end, (long long)v0);

    s_run_cases(&c);

    int64_t v1 = s_pull_shard(&c, after, "final pull");
    if (v1 != v0) {
        s_die("the version moved from %lld to %lld", (long long)v0, (long long)v1);
    }
    if (memcmp(before, after, n * sizeof(float)) != 0) {
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) {
            diff += memcmp(&before[i], &after[i], sizeof(float)) != 0;
        }
        s_die("%zu parameters changed", diff);
    }
    /* nothing left over: every case got exactly one answer */
    ps_msg_t m = {0};
    if (s_wait_reply(&c, &m, 0.3, "stray check")) {
        s_die("an extra %s arrived for request %llu", ps_codec_type_name(m.hdr.type),
              (unsigned long long)m.hdr.request_id);
    }
    printf("parameters unchanged after %d malformed messages\ncases=%d\nrepeats=%d\n", c.cases,
           c.cases, c.repeats);
    s_flood(&c, argv[1], 100000);
    free(before);
    free(after);
    ps_sock_destroy(&c.srv);
    ps_link_destroy(&c.link);
    ps_ctx_destroy(&c.ctx);
    free(c.view);
    return 0;
}
