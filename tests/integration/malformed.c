/*
 * tests/integration/malformed.c - a hostile client against a live server.
 * usage: sps-malformed SCHEDULER_ENDPOINT NUM_PARAMS
 *        sps-malformed --forge SCHEDULER_ENDPOINT SERVERS WORKERS SECONDS
 *        sps-malformed --stranger KEYS SCHEDULER_ENDPOINT SERVER_ENDPOINT SERVER_KEY ROUNDS
 *        sps-malformed --connflood KEYS SOCKETS SECONDS ENDPOINT...
 *
 * --stranger (a --secure job): ROUNDS times, tries to register with the
 * scheduler as a worker, then from a new connection pushes a huge gradient to
 * the server posing as worker 0 and pulls its first keys. KEYS is a key
 * directory (another job's, or one that holds this job's public keys beside
 * another job's worker keypair), or - for none (plain ZeroMQ); SERVER_KEY the
 * server's Z85 public key the connection expects, or -. Every attempt must go
 * unanswered (no registration answer in 1 s, no reply from the server in
 * 1 s): exits 0 after printing what was refused, 3 when anything was
 * answered (the control: a plain job answers a stranger), 1 on other
 * failures.
 *
 * --connflood: opens SOCKETS DEALER sockets (KEYS as above), each connected
 * to every ENDPOINT with a message queued, holds them for SECONDS (ZeroMQ
 * reconnects each refused one every 100 ms, so the peers see a handshake
 * storm), then closes them; prints how many. A secure job must not notice.
 *        sps-malformed --claim SERVER_ENDPOINT WORKERS ROUNDS
 *        sps-malformed --no-read SCHEDULER_ENDPOINT NUM_PARAMS PULLS DIR
 *        sps-malformed --rows SCHEDULER_ENDPOINT NUM_PARAMS CASES
 *
 * --forge: for SECONDS, from a stranger's connection, sends the scheduler
 * failure (SHUTDOWN), REPORT, DONE, BARRIER, MODEL_INFO, CHECKPOINT and
 * HEARTBEAT messages naming each server and worker in turn, with bodies a
 * real node's would abort the job for; prints how many it sent. The job must
 * go on as if nothing was sent.
 *
 * --rows (a sync --model ctr job of 2 workers and 2 or more servers): joins
 * as worker 1 once worker 0 initialised the parameters, records server 0's
 * shard and the rows of its first 8 keys by hash, then with CASES 1 sends it
 * one malformed rows message per case (keys out of hash order, repeated or
 * another server's; payloads that do not match nnz or the rows' width; nnz
 * past the protocol's bound; a key range or keys in the header; a forged
 * token, an unknown sender, a wrong step, a NaN, a version past 2^53; a
 * server's own MSG_ROWS; a piece past the last, keys of another piece),
 * each to be answered MSG_ERROR with its PS_E* and nothing else; the shard
 * and the rows must be bitwise unchanged. Prints "cases=N" and "repeats=K"
 * as the dense cases do (CASES 0: none; the control). Then plays worker 1
 * to the job's end: at each step a zero gradient of every server's shard
 * and a rows push of no keys to each piece, and DONE, so
 * worker 0's parameters are those of a job without the cases.
 *
 * --claim: ROUNDS times, 20 ms apart, from a stranger's connection, sends a
 * server pulls, pushes and inits of keys [0, 4) (the pushes and inits carry
 * huge values) claiming each worker in turn, with no token and with a
 * made-up one; each must be answered PS_ENOENT with no data. Prints how many
 * were refused. The job must go on as if nothing was sent.
 *
 * --no-read: joins the job as a worker (any rank) in async mode, passes the
 * start barrier, waits for DIR/go, then sends server 0 PULLS pulls of its
 * whole shard with its own token and never reads an answer (its socket
 * takes one message and then stops reading the connection); prints "sent
 * N pulls", waits for DIR/end, then reads what the server sent until it is
 * quiet for 1 s: every answer must decode, be a whole-shard reply or a
 * PS_ESTATE refusal, and no request may be answered twice (what went past
 * the server's queue for us was dropped); prints "read R replies and E
 * refusals". Then, as a worker that is slow to read: sends 60 more pulls,
 * reads nothing for 1 s (the replies past our share of buffers wait at the
 * server), and reads again: all 60 must be replies; prints "later: R
 * replies, E refusals". Then sends its DONE and heartbeats until the job
 * ends. The server must stay bounded and the job finish.
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
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "proto/codec.h"
#include "proto/curve.h"
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

/* Waits up to timeout s for one message from the server at sock. Returns 1
 * with *m filled, 0 on timeout. A message that fails ps_msg_recv is a
 * failure: every reply the server sends must itself be well-formed. */
static int s_wait_on(s_client_t *c, ps_sock_t *sock, ps_msg_t *m, double timeout,
                     const char *what)
{
    double deadline = ps_now() + timeout;
    while (ps_now() < deadline) {
        s_keepalive(c);
        ps_pollitem_t it = {.sock = sock};
        if (ps_poll(&it, 1, 100) <= 0) {
            continue;
        }
        int rc = ps_msg_recv(sock, 0, m);
        if (rc != 0) {
            s_die("%s: the server's answer does not decode: %s (%s)", what, ps_strerror(rc),
                  m->why);
        }
        return 1;
    }
    return 0;
}

/* As s_wait_on(), from server 0. */
static int s_wait_reply(s_client_t *c, ps_msg_t *m, double timeout, const char *what)
{
    return s_wait_on(c, c->srv, m, timeout, what);
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
static void s_send_header(s_client_t *c, const Shardps__Header *h, const void *const *data,
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
static Shardps__Header s_header(s_client_t *c, ps_msg_type_t t, uint64_t begin, uint64_t end)
{
    Shardps__Header h;
    ps_msg_header(&h, t, PS_ROLE_WORKER, ps_link_rank(c->link));
    h.token = ps_link_token(c->link);
    h.request_id = ++c->next_id;
    h.key_begin = begin;
    h.key_end = end;
    h.step = 0; /* the step the server is collecting: only the defect is wrong */
    return h;
}

/* The same with a float32 payload of payload_len bytes announced. */
static Shardps__Header s_f32_header(s_client_t *c, ps_msg_type_t t, uint64_t begin,
                                uint64_t end, uint64_t payload_len)
{
    Shardps__Header h = s_header(c, t, begin, end);
    h.dtype = PS_DTYPE_F32;
    h.payload_len = payload_len;
    return h;
}

/* Checks the answer to case `name`: MSG_ERROR with `status`, for request id
 * (when the header was readable), and nothing else. silent_ok: the envelope
 * could not be decoded, so silence is an acceptable answer too. */
static void s_expect(s_client_t *c, const char *name, int status, const Shardps__Header *sent,
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
static void s_case(s_client_t *c, const char *name, int status, const Shardps__Header *h,
                   size_t frame_bytes)
{
    const void *data[1] = {s_poison};
    s_send_header(c, h, data, &frame_bytes, frame_bytes ? 1 : 0);
    s_expect(c, name, status, h, 0);
}

/* Pulls the whole shard at version >= 0 into out. The server answers in
 * messages of a frame per store chunk, in key order; they must tile the
 * shard. Returns the served version. */
static int64_t s_pull_shard(s_client_t *c, float *out, const char *what)
{
    Shardps__Header h = s_header(c, PS_MSG_PULL, c->shard.begin, c->shard.end);
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
        for (int i = 0; i < m.nframes; i++) {
            size_t n;
            ps_msg_frame(&m, i, &n);
            len += n;
        }
        if (m.hdr.type != PS_MSG_PULL_REPLY || m.hdr.request_id != h.request_id ||
            m.hdr.key_begin != next || m.hdr.key_end <= next || m.hdr.key_end > c->shard.end ||
            !m.nframes || len != (m.hdr.key_end - m.hdr.key_begin) * sizeof(float) ||
            (version >= 0 && m.hdr.version != version)) {
            s_die("%s: bad pull reply: %s for request %llu, [%llu, %llu), %zu bytes (%s)", what,
                  ps_codec_type_name(m.hdr.type), (unsigned long long)m.hdr.request_id,
                  (unsigned long long)m.hdr.key_begin, (unsigned long long)m.hdr.key_end, len,
                  m.hdr.error);
        }
        for (int i = 0, at = 0; i < m.nframes; i++) {
            size_t n;
            const void *p = ps_msg_frame(&m, i, &n);
            memcpy((char *)(out + (next - c->shard.begin)) + at, p, n);
            at += (int)n;
        }
        version = m.hdr.version;
        next = m.hdr.key_end;
        ps_msg_close(&m);
    }
    return version;
}

/* Every malformed message, one case each. */
static void s_run_cases(s_client_t *c)
{
    const uint64_t b = c->shard.begin, e = c->shard.end;
    const void *pp[PS_MSG_MAX_FRAMES + 1];
    size_t sz[PS_MSG_MAX_FRAMES + 1];
    for (int i = 0; i < PS_MSG_MAX_FRAMES + 1; i++) {
        pp[i] = s_poison;
    }
    Shardps__Header h;

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

    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    h.nnz = 2;
    s_case(c, "push with nnz on a dense payload", PS_EPROTO, &h, 16);

    /* --wire: this job's pushes are fp32; a bf16 one is refused, not misread */
    h = s_f32_header(c, PS_MSG_PUSH, b, b + 8, 16);
    h.dtype = PS_DTYPE_BF16;
    s_case(c, "push in bf16 to an fp32 job", PS_ERANGE, &h, 16);

    /* Envelopes that ps_msg_recv refuses. */
    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4, 16);
    s_case(c, "payload shorter than header", PS_EPROTO, &h, 12);

    h = s_f32_header(c, PS_MSG_PUSH, b, b + 4 * (PS_MSG_MAX_FRAMES + 1),
                     (PS_MSG_MAX_FRAMES + 1) * 16);
    for (int i = 0; i < PS_MSG_MAX_FRAMES + 1; i++) {
        sz[i] = 16;
    }
    s_send_header(c, &h, pp, sz, PS_MSG_MAX_FRAMES + 1);
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
    h.sender = 0; /* posing as worker 0, with our own token */
    s_case(c, "init posing as W0", PS_ENOENT, &h, 16);

    h = s_f32_header(c, PS_MSG_PULL, b, b + 4, 16);
    s_case(c, "pull with a payload", PS_ERANGE, &h, 16);

    /* Embedding rows (protocol 8) to a job without them: two keys, and a
     * push's two rows of poison, refused before any key is read. */
    h = s_f32_header(c, PS_MSG_ROWS_PULL, 0, 0, 16);
    h.nnz = 2;
    s_case(c, "rows pull to a job without rows", PS_ERANGE, &h, 16);
    h = s_f32_header(c, PS_MSG_ROWS_PUSH, 0, 0, 24);
    h.nnz = 2;
    s_case(c, "rows push to a job without rows", PS_ERANGE, &h, 24);

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

    /* A push-pull (protocol 6) is refused as its push would be, and then no
     * pull is asked: one error, nothing else, the shard unchanged. */
    h = s_f32_header(c, PS_MSG_PUSH_PULL, b, b + 4, 16);
    h.pull_version = INT64_MIN;
    s_case(c, "push-pull with a negative pull version", PS_EPROTO, &h, 16);
    h = s_f32_header(c, PS_MSG_PUSH_PULL, b, b + 4, 16);
    h.pull_version = INT64_MAX;
    s_case(c, "push-pull for pull version INT64_MAX", PS_ERANGE, &h, 16);
    h = s_f32_header(c, PS_MSG_PUSH_PULL, e - 2, e + 2, 16);
    s_case(c, "push-pull past the shard end", PS_ERANGE, &h, 16);
    h = s_header(c, PS_MSG_PUSH_PULL, b, b + 4);
    s_case(c, "push-pull without its gradient", PS_ERANGE, &h, 0);
    h = s_f32_header(c, PS_MSG_PUSH_PULL, b, b + 8, 16);
    h.dtype = PS_DTYPE_BF16;
    s_case(c, "push-pull in bf16 to an fp32 job", PS_ERANGE, &h, 16);
    h = s_f32_header(c, PS_MSG_PUSH_PULL, b, b + 4, 16);
    h.step = 5;
    s_case(c, "push-pull for a wrong step", PS_ESTATE, &h, 16);

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
    h = s_f32_header(c, PS_MSG_PUSH_PULL, b, b + 4, 16);
    s_send_header(c, &h, pp, sz, 1);
    s_expect(c, "push-pull of an infinity", PS_ENONFINITE, &h, 0);
}

/* Case `name` of a --compress topk job: a sparse fp32 push of [b, b + n)
 * with nnz entries announced and the offsets idx[0..k) (values 0.5, or NaN
 * with nan) actually sent. */
static void s_sparse_case(s_client_t *c, const char *name, int status, uint64_t n,
                          uint64_t nnz, const uint32_t *idx, int k, int nan)
{
    unsigned char payload[64 * 8];
    for (int j = 0; j < k; j++) {
        float v = nan && j == 1 ? NAN : 0.5f;
        memcpy(payload + 4 * (size_t)j, &idx[j], 4);
        memcpy(payload + 4 * (size_t)k + 4 * (size_t)j, &v, 4);
    }
    Shardps__Header h = s_header(c, PS_MSG_PUSH, c->shard.begin, c->shard.begin + n);
    h.dtype = PS_DTYPE_SPARSE_F32;
    h.nnz = nnz;
    h.payload_len = (uint64_t)k * 8;
    const void *data[1] = {payload};
    size_t len = (size_t)k * 8;
    s_send_header(c, &h, data, &len, 1);
    s_expect(c, name, status, &h, 0);
}

/* The malformed pushes of a --compress topk:R job (--wire fp32): sparse
 * offsets out of range, unsorted or repeated, counts that do not match the
 * bytes or exceed the keys, the wrong dtype, a NaN value. */
static void s_run_sparse_cases(s_client_t *c)
{
    const uint32_t ok[3] = {1, 5, 9}, outside[3] = {1, 5, 16}, unsorted[3] = {5, 1, 9},
                   repeated[3] = {1, 4, 4};
    s_sparse_case(c, "sparse offset past the range", PS_ERANGE, 16, 3, outside, 3, 0);
    s_sparse_case(c, "sparse offsets not ascending", PS_ERANGE, 16, 3, unsorted, 3, 0);
    s_sparse_case(c, "sparse offset repeated", PS_ERANGE, 16, 3, repeated, 3, 0);
    s_sparse_case(c, "sparse nnz 3 with 2 entries' bytes", PS_ERANGE, 16, 3, ok, 2, 0);
    s_sparse_case(c, "sparse nnz 20 over 16 keys", PS_ERANGE, 16, 20, ok, 3, 0);
    s_sparse_case(c, "sparse push with no entries", PS_ERANGE, 16, 0, ok, 0, 0);
    s_sparse_case(c, "sparse push of a NaN", PS_ENONFINITE, 16, 3, ok, 3, 1);
    Shardps__Header h = s_f32_header(c, PS_MSG_PUSH, c->shard.begin, c->shard.begin + 4, 16);
    s_case(c, "dense push to a top-k job", PS_ERANGE, &h, 16);
    h = s_f32_header(c, PS_MSG_PUSH, c->shard.begin, c->shard.begin + 16, 18);
    h.dtype = PS_DTYPE_SPARSE_BF16;
    h.nnz = 3;
    s_case(c, "sparse bf16 push to an fp32 job", PS_ERANGE, &h, 18);
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
    Shardps__Header hb, pull = s_header(c, PS_MSG_PULL, c->shard.begin, c->shard.begin + 4);
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

/* A random token: what a stranger might guess. */
static uint64_t s_guess(void)
{
    return ((uint64_t)rand() << 40) ^ ((uint64_t)rand() << 20) ^ (uint64_t)rand() ^ 1;
}

/* --claim: see the header. */
static int s_claim(const char *server, int workers, int rounds)
{
    ps_ctx_t *ctx;
    ps_sock_t *s;
    char err[256];
    if (ps_ctx_new(&ctx) != 0 || ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err) != 0 ||
        ps_sock_connect(s, server) != 0) {
        s_die("cannot connect to %s", server);
    }
    srand((unsigned)time(NULL));
    static const ps_msg_type_t types[] = {PS_MSG_PULL, PS_MSG_PUSH, PS_MSG_INIT};
    long refused = 0;
    uint64_t id = 0;
    for (int round = 0; round < rounds; round++) {
        for (int w = 0; w < workers; w++) {
            for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
                for (int guess = 0; guess < 2; guess++) {
                    Shardps__Header h;
                    ps_msg_header(&h, types[k], PS_ROLE_WORKER, w);
                    h.token = guess ? s_guess() : 0;
                    h.request_id = ++id;
                    h.key_begin = 0;
                    h.key_end = 4;
                    int data = types[k] != PS_MSG_PULL;
                    h.dtype = data ? PS_DTYPE_F32 : PS_DTYPE_NONE;
                    h.payload_len = data ? 16 : 0;
                    ps_frame_t f = {s_poison, 16};
                    if (ps_msg_send(s, NULL, h, &f, data, PS_SEND_COPY) != 0) {
                        s_die("claim: send failed");
                    }
                    ps_pollitem_t it = {.sock = s};
                    ps_msg_t m = {0};
                    if (ps_poll(&it, 1, 5000) <= 0 || ps_msg_recv(s, 0, &m) != 0) {
                        s_die("claim: no answer from the server");
                    }
                    if (m.hdr.type != PS_MSG_ERROR || m.hdr.status != PS_ENOENT ||
                        m.nframes != 0 || m.hdr.request_id != id) {
                        s_die("claim: a %s claiming W%d (%s) got %s %s (%s)",
                              ps_codec_type_name(types[k]), w, guess ? "a guessed token" : "no token",
                              ps_codec_type_name(m.hdr.type), ps_strerror(m.hdr.status),
                              m.hdr.error);
                    }
                    ps_msg_close(&m);
                    refused++;
                }
            }
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    printf("refused %ld requests claiming W0..W%d\n", refused, workers - 1);
    ps_sock_set_linger(s, 0);
    ps_sock_destroy(&s);
    ps_ctx_destroy(&ctx);
    return 0;
}

/* Heartbeats the scheduler until file exists (or, with file NULL, until the
 * job ends: returns then). */
static void s_idle_until(ps_link_t *link, const char *file)
{
    char err[256];
    for (;;) {
        if (file && access(file, F_OK) == 0) {
            return;
        }
        ps_pollitem_t it = {.sock = ps_link_sock(link)};
        if (ps_poll(&it, 1, 50) > 0) {
            ps_msg_t m = {0};
            if (ps_msg_recv(ps_link_sock(link), 0, &m) == 0) {
                ps_link_event_t ev = ps_link_handle(link, &m, err, sizeof err);
                if (ev == PS_LINK_SHUTDOWN && !file) {
                    ps_msg_close(&m);
                    return;
                }
                if (ev == PS_LINK_SHUTDOWN || ev == PS_LINK_ABORTED) {
                    s_die("the job ended early: %s", ev == PS_LINK_ABORTED ? err : "shutdown");
                }
            }
            ps_msg_close(&m);
        }
        if (ps_link_tick(link, err, sizeof err) == PS_LINK_LOST) {
            s_die("%s", err);
        }
    }
}

/* Sends pulls of server 0's whole shard, ids first .. first + n - 1. */
static void s_send_pulls(ps_link_t *link, ps_sock_t *s, const ps_view_t *view, int first, int n)
{
    for (int i = first; i < first + n; i++) {
        Shardps__Header h;
        ps_msg_header(&h, PS_MSG_PULL, PS_ROLE_WORKER, ps_link_rank(link));
        h.token = ps_link_token(link);
        h.request_id = (uint64_t)i;
        h.key_begin = view->servers[0].begin;
        h.key_end = view->servers[0].end;
        if (ps_msg_send(s, NULL, h, NULL, 0, 0) != 0) {
            s_die("no-read: send %d failed", i);
        }
    }
}

/* --no-read: reads the answers to the pulls of ids first .. first + n - 1
 * until the server is quiet for 1 s; counts replies and refusals. */
static void s_read_answers(ps_link_t *link, ps_sock_t *s, const ps_view_t *view, int first,
                           int n, int *replies, int *refusals)
{
    unsigned char *seen = calloc((size_t)n, 1);
    *replies = *refusals = 0;
    char err[256];
    if (!seen) {
        s_die("out of memory");
    }
    for (double quiet_since = ps_now(); ps_now() - quiet_since < 1.0;) {
        if (ps_link_tick(link, err, sizeof err) == PS_LINK_LOST) {
            s_die("%s", err);
        }
        ps_msg_drain(ps_link_sock(link), 0, 64, s_on_sched, link);
        ps_pollitem_t it = {.sock = s};
        if (ps_poll(&it, 1, 50) <= 0) {
            continue;
        }
        ps_msg_t m = {0};
        if (ps_msg_recv(s, 0, &m) != 0) {
            s_die("no-read: an answer does not decode: %s", m.why);
        }
        quiet_since = ps_now();
        uint64_t id = m.hdr.request_id;
        size_t len = 0;
        const void *p = m.nframes == 1 ? ps_msg_frame(&m, 0, &len) : NULL;
        int reply = m.hdr.type == PS_MSG_PULL_REPLY && p && m.hdr.key_begin == view->servers[0].begin &&
                    m.hdr.key_end == view->servers[0].end &&
                    len == (m.hdr.key_end - m.hdr.key_begin) * sizeof(float);
        int refusal = m.hdr.type == PS_MSG_ERROR && m.hdr.status == PS_ESTATE && !p;
        int known = id >= (uint64_t)first && id < (uint64_t)first + (uint64_t)n;
        if (!known || seen[id - (uint64_t)first] || !(reply || refusal)) {
            s_die("no-read: a bad answer: %s for request %llu%s (%s)",
                  ps_codec_type_name(m.hdr.type), (unsigned long long)id,
                  known ? ", answered before" : "", m.hdr.error);
        }
        seen[id - (uint64_t)first] = 1;
        *replies += reply;
        *refusals += refusal;
        ps_msg_close(&m);
    }
    free(seen);
}

/* --no-read: see the header. */
static int s_no_read(const char *sched, uint64_t P, int pulls, const char *dir)
{
    ps_ctx_t *ctx;
    ps_link_t *link;
    ps_sock_t *s;
    char err[256], go[512], end[512];
    ps_job_t job;
    ps_view_t *view = calloc(1, sizeof *view);
    snprintf(go, sizeof go, "%s/go", dir);
    snprintf(end, sizeof end, "%s/end", dir);
    if (!view || ps_ctx_new(&ctx) != 0) {
        s_die("out of memory");
    }
    if (ps_link_join(&link, ctx, sched, PS_ROLE_WORKER, -1, NULL, NULL, 30.0, 30.0, &job, err,
                     sizeof err) != 0) {
        s_die("join: %s", err);
    }
    Shardps__ModelInfo info = SHARDPS__MODEL_INFO__INIT;
    info.num_params = P;
    info.train_samples = 60000;
    if (ps_link_wait_view(link, &info, view, err, sizeof err) != 0) {
        s_die("view: %s", err);
    }
    if (view->job.mode != PS_MODE_ASYNC || view->num_servers < 1) {
        s_die("expected an async job with servers");
    }
    Shardps__Barrier init = SHARDPS__BARRIER__INIT;
    init.name = (char *)"init";
    if (ps_link_send(link, PS_MSG_BARRIER, &init.base) != 0) {
        s_die("cannot enter the start barrier");
    }
    for (int passed = 0; !passed;) {
        ps_pollitem_t it = {.sock = ps_link_sock(link)};
        if (ps_poll(&it, 1, 100) > 0) {
            ps_msg_t m = {0};
            if (ps_msg_recv(ps_link_sock(link), 0, &m) == 0 &&
                ps_link_handle(link, &m, err, sizeof err) == PS_LINK_MESSAGE) {
                passed = m.hdr.type == PS_MSG_BARRIER_DONE;
            }
            ps_msg_close(&m);
        }
        if (ps_link_tick(link, err, sizeof err) == PS_LINK_LOST) {
            s_die("%s", err);
        }
    }
    printf("W%d ready\n", ps_link_rank(link));
    s_idle_until(link, go);
    if (ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err) != 0) {
        s_die("%s", err);
    }
    ps_sock_set_queue_limit(s, 0, 1); /* takes one answer, then leaves the rest unread */
    if (ps_sock_connect(s, view->servers[0].endpoint) != 0) {
        s_die("cannot connect to %s", view->servers[0].endpoint);
    }
    s_send_pulls(link, s, view, 1, pulls);
    printf("sent %d pulls\n", pulls);
    s_idle_until(link, end);
    int replies, refusals;
    s_read_answers(link, s, view, 1, pulls, &replies, &refusals);
    printf("read %d replies and %d refusals\n", replies, refusals);
    enum { LATER = 60 };
    s_send_pulls(link, s, view, pulls + 1, LATER);
    for (double t0 = ps_now(); ps_now() - t0 < 1.0;) {
        ps_msg_drain(ps_link_sock(link), 0, 64, s_on_sched, link);
        if (ps_link_tick(link, err, sizeof err) == PS_LINK_LOST) {
            s_die("%s", err);
        }
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    s_read_answers(link, s, view, pulls + 1, LATER, &replies, &refusals);
    printf("later: %d replies, %d refusals\n", replies, refusals);
    Shardps__Done done = SHARDPS__DONE__INIT;
    if (ps_link_send(link, PS_MSG_DONE, &done.base) != 0) {
        s_die("cannot send DONE");
    }
    s_idle_until(link, NULL);
    printf("the job ended\n");
    ps_sock_set_linger(s, 0);
    ps_sock_destroy(&s);
    ps_link_destroy(&link);
    ps_ctx_destroy(&ctx);
    free(view);
    return 0;
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
    Shardps__Shutdown fail = SHARDPS__SHUTDOWN__INIT;
    fail.status = PS_EIO;
    fail.reason = (char *)"forged failure";
    const ps_frame_t junk = {"x", 1}; /* any other type: a body that does not decode */
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
                Shardps__Header h;
                ps_msg_header(&h, types[k], is_server ? PS_ROLE_SERVER : PS_ROLE_WORKER,
                              is_server ? node : node - servers);
                if ((shut ? ps_msg_send_body(s, NULL, h, &fail.base)
                          : ps_msg_send(s, NULL, h, &junk, 1, PS_SEND_COPY)) != 0) {
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
    ps_sock_set_linger(s, 0);
    ps_sock_destroy(&s);
    ps_ctx_destroy(&ctx);
    return 0;
}

/* A context with the keys of dir ("-": none, plain ZeroMQ). */
static ps_ctx_t *s_stranger_ctx(const char *dir)
{
    ps_ctx_t *ctx;
    char err[512];
    if (ps_ctx_new(&ctx) != 0) {
        s_die("out of memory");
    }
    if (strcmp(dir, "-") != 0 &&
        ps_curve_secure_ctx(ctx, 1, dir, PS_ROLE_WORKER, err, sizeof err) != 0) {
        s_die("keys: %s", err);
    }
    return ctx;
}

/* --stranger: see the header. */
static int s_stranger(const char *dir, const char *sched, const char *server, const char *key,
                      int rounds)
{
    ps_ctx_t *ctx = s_stranger_ctx(dir);
    char err[512];
    int answered = 0;
    for (int r = 0; r < rounds && !answered; r++) {
        ps_link_t *link = NULL;
        ps_job_t job;
        int rc = ps_link_join(&link, ctx, sched, PS_ROLE_WORKER, -1, NULL, NULL, 1.0, 5.0, &job, err,
                              sizeof err);
        if (rc != PS_ETIMEDOUT && rc != PS_ECLOSED) { /* no answer, or no handshake */
            fprintf(stderr, "the scheduler answered a stranger's registration: %s\n",
                    rc == 0 ? "registered" : err);
            answered = 1;
        }
        ps_link_destroy(&link);
        ps_sock_t *s;
        if (ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err) != 0 ||
            (strcmp(key, "-") && ps_sock_set_peer_key(s, key) != 0) ||
            ps_sock_connect(s, server) != 0) {
            s_die("cannot connect to %s", server);
        }
        static const float huge[4] = {1e30f, 1e30f, 1e30f, 1e30f};
        Shardps__Header h;
        ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 0);
        h.request_id = 1;
        h.key_begin = 0;
        h.key_end = 4;
        h.dtype = PS_DTYPE_F32;
        h.payload_len = sizeof huge;
        ps_frame_t f = {huge, sizeof huge};
        ps_msg_send(s, NULL, h, &f, 1, PS_SEND_COPY);
        h.type = PS_MSG_PULL;
        h.request_id = 2;
        h.payload_len = 0;
        ps_msg_send(s, NULL, h, NULL, 0, 0);
        ps_pollitem_t it = {.sock = s};
        if (ps_poll(&it, 1, 1000) > 0) {
            ps_msg_t m = {0};
            if (ps_msg_recv(s, 0, &m) == 0) {
                fprintf(stderr, "the server answered a stranger's push or pull with %s\n",
                        ps_codec_type_name(m.hdr.type));
                ps_msg_close(&m);
            }
            answered = 1;
        }
        ps_sock_set_linger(s, 0);
        ps_sock_destroy(&s);
    }
    ps_ctx_destroy(&ctx);
    if (answered) {
        return 3;
    }
    printf("stranger (%s): %d registrations, %d pushes and %d pulls, none answered\n",
           strcmp(dir, "-") ? dir : "no keys", rounds, rounds, rounds);
    return 0;
}

/* --connflood: see the header. */
static int s_connflood(const char *dir, int n, double seconds, char **eps, int neps)
{
    ps_ctx_t *ctx = s_stranger_ctx(dir);
    ps_sock_t **socks = calloc((size_t)n, sizeof *socks);
    char err[512];
    if (!socks) {
        s_die("out of memory");
    }
    Shardps__Header hb;
    ps_msg_header(&hb, PS_MSG_HEARTBEAT, PS_ROLE_WORKER, 0);
    for (int i = 0; i < n; i++) {
        if (ps_sock_new(ctx, PS_SOCK_DEALER, &socks[i], err, sizeof err) != 0) {
            s_die("socket %d: %s", i, err);
        }
        for (int k = 0; k < neps; k++) {
            if (ps_sock_connect(socks[i], eps[k]) != 0) {
                s_die("cannot connect to %s", eps[k]);
            }
        }
        ps_sock_set_linger(socks[i], 0);
        ps_msg_send(socks[i], NULL, hb, NULL, 0, 0);
    }
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    for (int i = 0; i < n; i++) {
        ps_sock_destroy(&socks[i]);
    }
    free(socks);
    ps_ctx_destroy(&ctx);
    printf("held %d sockets (%s) to %d endpoints for %.1f s\n", n,
           strcmp(dir, "-") ? dir : "no keys", neps, seconds);
    return 0;
}

/* ---- embedding rows: --rows, against the servers of a --model ctr job ---- */

/* The key whose hash is server s's first row hash + i: ascending i gives
 * keys in ascending order of hash. */
static uint64_t s_row_key(const s_client_t *c, int s, uint64_t i)
{
    return ps_rowkey_unhash(c->view->servers[s].rows.first + i);
}

/* Bytes of a rows payload of nk keys and nrows rows of `dim` floats. */
static size_t s_rows_len(size_t nk, size_t nrows, size_t dim)
{
    return nk * sizeof(uint64_t) + nrows * dim * sizeof(float);
}

/* A rows message of type t from us, fp32, naming nnz keys (no key range),
 * with payload_len bytes announced. */
static Shardps__Header s_rows_header(s_client_t *c, ps_msg_type_t t, uint64_t nnz,
                                     uint64_t payload_len)
{
    Shardps__Header h = s_header(c, t, 0, 0);
    h.dtype = PS_DTYPE_F32;
    h.nnz = nnz;
    h.payload_len = payload_len;
    return h;
}

/* Case `name`: sends h with one frame of the keys keys[0..nk) followed by
 * nrows rows of `dim` floats of value v (no frame when that is 0 bytes), and
 * checks the answer is MSG_ERROR with `status` (s_expect). */
static void s_rows_case(s_client_t *c, const char *name, int status, const Shardps__Header *h,
                        const uint64_t *keys, size_t nk, size_t nrows, size_t dim, float v)
{
    static unsigned char buf[1 << 16];
    size_t len = s_rows_len(nk, nrows, dim);
    if (len > sizeof buf) {
        s_die("%s: a payload of %zu bytes is too big for the case", name, len);
    }
    memcpy(buf, keys, nk * sizeof *keys);
    for (size_t i = 0; i < nrows * dim; i++) {
        memcpy(buf + nk * sizeof *keys + i * sizeof v, &v, sizeof v);
    }
    const void *data[1] = {buf};
    s_send_header(c, h, data, &len, len ? 1 : 0);
    s_expect(c, name, status, h, 0);
}

/* Pulls the rows of keys[0..n) (server 0's, in order of hash) at version >=
 * 0 into out (n x dim floats). Returns the served version. */
static int64_t s_pull_rows(s_client_t *c, const uint64_t *keys, size_t n, size_t dim,
                           float *out, const char *what)
{
    Shardps__Header h = s_rows_header(c, PS_MSG_ROWS_PULL, n, 0);
    const ps_frame_t f = {keys, n * sizeof *keys};
    if (ps_msg_send(c->srv, NULL, h, &f, 1, PS_SEND_COPY) != 0) {
        s_die("%s: cannot send the rows pull", what);
    }
    ps_msg_t m = {0};
    if (!s_wait_reply(c, &m, 60.0, what)) {
        s_die("%s: no answer to the rows pull within 60 s", what);
    }
    size_t len = 0;
    const void *p = m.nframes == 1 ? ps_msg_frame(&m, 0, &len) : NULL;
    if (m.hdr.type != PS_MSG_ROWS || m.hdr.request_id != h.request_id || m.hdr.nnz != n || !p ||
        len != n * dim * sizeof(float)) {
        s_die("%s: bad rows reply: %s for request %llu, nnz %llu, %zu bytes (%s)", what,
              ps_codec_type_name(m.hdr.type), (unsigned long long)m.hdr.request_id,
              (unsigned long long)m.hdr.nnz, len, m.hdr.error);
    }
    memcpy(out, p, len);
    const int64_t version = m.hdr.version;
    ps_msg_close(&m);
    return version;
}

/* The malformed rows messages, one case each, to server 0 of a job whose
 * rows have dim floats: keys out of hash order, repeated, another server's;
 * payloads that do not match nnz and dim; nnz past the protocol's bound; a
 * key range; keys in the header; a forged token, an unknown sender; a wrong
 * step, a NaN, a version past 2^53. */
static void s_run_rows_cases(s_client_t *c, size_t D)
{
    const uint64_t ok[3] = {s_row_key(c, 0, 1), s_row_key(c, 0, 2), s_row_key(c, 0, 3)};
    const uint64_t unsorted[3] = {ok[1], ok[0], ok[2]}, repeated[3] = {ok[0], ok[1], ok[1]};
    const uint64_t outside[2] = {ok[0], s_row_key(c, 1, 0)}; /* in hash order */
    const size_t keys3 = s_rows_len(3, 0, D), push3 = s_rows_len(3, 3, D);
    const int PULL = PS_MSG_ROWS_PULL, PUSH = PS_MSG_ROWS_PUSH;
    Shardps__Header h;

    /* The keys, checked with the frame. */
    h = s_rows_header(c, PULL, 3, keys3);
    s_rows_case(c, "rows pull of keys out of hash order", PS_ERANGE, &h, unsorted, 3, 0, D, 0);
    h = s_rows_header(c, PUSH, 3, push3);
    s_rows_case(c, "rows push of keys out of hash order", PS_ERANGE, &h, unsorted, 3, 3, D, 1e30f);
    h = s_rows_header(c, PULL, 3, keys3);
    s_rows_case(c, "rows pull of a repeated key", PS_ERANGE, &h, repeated, 3, 0, D, 0);
    h = s_rows_header(c, PUSH, 3, push3);
    s_rows_case(c, "rows push of a repeated key", PS_ERANGE, &h, repeated, 3, 3, D, 1e30f);
    h = s_rows_header(c, PULL, 2, s_rows_len(2, 0, D));
    s_rows_case(c, "rows pull of another server's key", PS_ERANGE, &h, outside, 2, 0, D, 0);
    h = s_rows_header(c, PUSH, 2, s_rows_len(2, 2, D));
    s_rows_case(c, "rows push of another server's key", PS_ERANGE, &h, outside, 2, 2, D, 1e30f);

    /* Payloads that do not match nnz (and the rows' width). */
    h = s_rows_header(c, PULL, 4, keys3);
    s_rows_case(c, "rows pull of nnz 4 with 3 keys' bytes", PS_ERANGE, &h, ok, 3, 0, D, 0);
    h = s_rows_header(c, PUSH, 3, keys3);
    s_rows_case(c, "rows push of keys without rows", PS_ERANGE, &h, ok, 3, 0, D, 0);
    h = s_rows_header(c, PUSH, 3, s_rows_len(3, 3, D + 1));
    s_rows_case(c, "rows push of rows of embed_dim + 1", PS_ERANGE, &h, ok, 3, 3, D + 1, 1e30f);
    h = s_rows_header(c, PULL, 3, push3);
    s_rows_case(c, "rows pull with rows", PS_ERANGE, &h, ok, 3, 3, D, 1e30f);
    h = s_rows_header(c, PUSH, 0, sizeof(uint64_t));
    s_rows_case(c, "rows push of nnz 0 with a frame", PS_ERANGE, &h, ok, 1, 0, D, 0);
    h = s_rows_header(c, PULL, 0, 0);
    h.step = 1; /* a version to come: it would wait */
    s_send_header(c, &h, NULL, NULL, 0);
    s_expect(c, "rows pull of no keys", PS_ERANGE, &h, 0);
    h = s_rows_header(c, PUSH, 3, push3);
    s_send_header(c, &h, (const void *const[]){s_poison}, (size_t[]){keys3}, 1);
    s_expect(c, "rows push shorter than its header", PS_EPROTO, &h, 0);

    /* nnz past the protocol's bound, and a dtype other than fp32: the codec. */
    h = s_rows_header(c, PUSH, (uint64_t)PS_MAX_ROWS_MSG + 1, push3);
    s_rows_case(c, "rows push of nnz 2^20 + 1", PS_EPROTO, &h, ok, 3, 3, D, 1e30f);
    h = s_rows_header(c, PULL, UINT64_MAX, keys3);
    s_rows_case(c, "rows pull of nnz 2^64 - 1", PS_EPROTO, &h, ok, 3, 0, D, 0);
    h = s_rows_header(c, PUSH, 3, push3);
    h.dtype = PS_DTYPE_BF16;
    s_rows_case(c, "rows push in bf16", PS_EPROTO, &h, ok, 3, 3, D, 1e30f);

    /* A key range, and keys in the header, instead of the frame's keys. */
    h = s_rows_header(c, PULL, 3, keys3);
    h.key_begin = c->shard.begin;
    h.key_end = c->shard.begin + 4;
    s_rows_case(c, "rows pull with key_begin, key_end", PS_ERANGE, &h, ok, 3, 0, D, 0);
    h = s_rows_header(c, PUSH, 3, push3);
    h.key_end = 4;
    s_rows_case(c, "rows push with key_end", PS_ERANGE, &h, ok, 3, 3, D, 1e30f);
    h = s_rows_header(c, PULL, 3, keys3);
    h.n_keys = 3;
    h.keys = (uint64_t *)ok;
    s_rows_case(c, "rows pull with keys in the header", PS_EPROTO, &h, ok, 3, 0, D, 0);

    /* Who sends, and when. */
    h = s_rows_header(c, PUSH, 3, push3);
    h.token ^= 1;
    s_rows_case(c, "rows push with a forged token", PS_ENOENT, &h, ok, 3, 3, D, 1e30f);
    h = s_rows_header(c, PULL, 3, keys3);
    h.token = 0;
    s_rows_case(c, "rows pull with no token", PS_ENOENT, &h, ok, 3, 0, D, 0);
    h = s_rows_header(c, PUSH, 3, push3);
    h.sender = 7;
    s_rows_case(c, "rows push from W7 of 2", PS_ENOENT, &h, ok, 3, 3, D, 1e30f);
    h = s_rows_header(c, PUSH, 3, push3);
    h.step = 5;
    s_rows_case(c, "rows push for a wrong step", PS_ESTATE, &h, ok, 3, 3, D, 1e30f);
    h = s_rows_header(c, PUSH, 3, push3);
    s_rows_case(c, "rows push of a NaN", PS_ENONFINITE, &h, ok, 3, 3, D, NAN);
    h = s_rows_header(c, PULL, 3, keys3);
    h.step = INT64_MAX;
    s_rows_case(c, "rows pull for version INT64_MAX", PS_ERANGE, &h, ok, 3, 0, D, 0);
    h = s_rows_header(c, PS_MSG_ROWS, 3, s_rows_len(0, 3, D));
    s_rows_case(c, "rows reply to a server", PS_EPROTO, &h, ok, 0, 3, D, 1e30f);

    /* Pieces (protocol 9): past the last, and keys of another piece. */
    h = s_rows_header(c, PUSH, 3, push3);
    h.piece = PS_RANGE_ROW_PIECES;
    s_rows_case(c, "rows push of a piece past the last", PS_ERANGE, &h, ok, 3, 3, D, 1e30f);
    h = s_rows_header(c, PULL, 3, keys3);
    h.piece = UINT32_MAX;
    s_rows_case(c, "rows pull of piece 2^32 - 1", PS_ERANGE, &h, ok, 3, 0, D, 0);
    h = s_rows_header(c, PUSH, 3, push3);
    h.piece = 1;
    s_rows_case(c, "rows push naming piece 1 with keys of piece 0", PS_ERANGE, &h, ok, 3, 3, D,
                1e30f);
}

/* Waits for the start barrier's end, answering the scheduler. */
static void s_barrier(s_client_t *c, const char *name)
{
    char err[256];
    Shardps__Barrier b = SHARDPS__BARRIER__INIT;
    b.name = (char *)name;
    if (ps_link_send(c->link, PS_MSG_BARRIER, &b.base) != 0) {
        s_die("cannot enter barrier %s", name);
    }
    for (double deadline = ps_now() + 120.0;;) {
        if (ps_now() > deadline) {
            s_die("barrier %s did not end within 120 s", name);
        }
        ps_pollitem_t it = {.sock = ps_link_sock(c->link)};
        if (ps_poll(&it, 1, 100) > 0) {
            ps_msg_t m = {0};
            int done = 0;
            if (ps_msg_recv(ps_link_sock(c->link), 0, &m) == 0) {
                ps_link_event_t ev = ps_link_handle(c->link, &m, err, sizeof err);
                if (ev == PS_LINK_SHUTDOWN || ev == PS_LINK_ABORTED) {
                    s_die("the job ended in barrier %s: %s", name,
                          ev == PS_LINK_ABORTED ? err : "shutdown");
                }
                done = ev == PS_LINK_MESSAGE && m.hdr.type == PS_MSG_BARRIER_DONE;
            }
            ps_msg_close(&m);
            if (done) {
                return;
            }
        }
        if (ps_link_tick(c->link, err, sizeof err) == PS_LINK_LOST) {
            s_die("%s", err);
        }
    }
}

/* Plays worker 1 of a sync job with rows to its end: the start barrier,
 * then at each step, to every server, a rows push of no keys, a zero
 * gradient of its whole shard and a rows pull of one of its keys that waits
 * for the step's end (a dense pull may be answered as soon as its chunk is
 * applied, before the step's rows are), each answered so and nothing else;
 * then DONE. Returns once the job ended. */
static void s_play_steps(s_client_t *c, ps_sock_t **socks)
{
    const int S = c->view->num_servers;
    uint64_t most = 0;
    for (int s = 0; s < S; s++) {
        uint64_t n = c->view->servers[s].end - c->view->servers[s].begin;
        most = n > most ? n : most;
    }
    float *zeros = calloc(most, sizeof *zeros);
    if (!zeros) {
        s_die("out of memory");
    }
    s_barrier(c, "init");
    const int64_t first = c->view->start_step, last = c->view->total_steps;
    enum { PUSHES = PS_RANGE_ROW_PIECES + 1, ASKED = PUSHES + 1 };
    for (int64_t t = first; t < last; t++) {
        uint64_t ids[PS_MAX_SERVERS][ASKED];
        for (int s = 0; s < S; s++) {
            const ps_server_info_t *sv = &c->view->servers[s];
            for (int q = 0; q < PS_RANGE_ROW_PIECES; q++) { /* an empty push of each piece */
                Shardps__Header rows = s_rows_header(c, PS_MSG_ROWS_PUSH, 0, 0);
                rows.step = rows.version = t;
                rows.piece = (uint32_t)q;
                if (ps_msg_send(socks[s], NULL, rows, NULL, 0, 0) != 0) {
                    s_die("step %lld: cannot send to S%d", (long long)t, s);
                }
                ids[s][q] = rows.request_id;
            }
            Shardps__Header push = s_f32_header(c, PS_MSG_PUSH, sv->begin, sv->end, 0);
            const uint64_t key = s_row_key(c, s, 0); /* piece 0's */
            Shardps__Header pull = s_rows_header(c, PS_MSG_ROWS_PULL, 1, sizeof key);
            push.step = push.version = t;
            pull.step = t + 1;
            const ps_frame_t f = {zeros, (sv->end - sv->begin) * sizeof *zeros};
            const ps_frame_t k = {&key, sizeof key};
            if (ps_msg_send(socks[s], NULL, push, &f, 1, PS_SEND_COPY) != 0 ||
                ps_msg_send(socks[s], NULL, pull, &k, 1, PS_SEND_COPY) != 0) {
                s_die("step %lld: cannot send to S%d", (long long)t, s);
            }
            ids[s][PUSHES - 1] = push.request_id;
            ids[s][PUSHES] = pull.request_id;
        }
        for (int s = 0; s < S; s++) {
            for (int k = 0; k < ASKED; k++) {
                ps_msg_t m = {0};
                if (!s_wait_on(c, socks[s], &m, 60.0, "step")) {
                    s_die("step %lld: S%d did not answer within 60 s", (long long)t, s);
                }
                int want = k < PUSHES ? PS_MSG_PUSH_ACK : PS_MSG_ROWS;
                if ((int)m.hdr.type != want || m.hdr.request_id != ids[s][k] ||
                    (k == PUSHES && m.hdr.version < t + 1)) {
                    s_die("step %lld: S%d answered %s for request %llu at version %lld, want "
                          "%s for %llu (%s)", (long long)t, s, ps_codec_type_name(m.hdr.type),
                          (unsigned long long)m.hdr.request_id, (long long)m.hdr.version,
                          ps_codec_type_name(want), (unsigned long long)ids[s][k],
                          m.hdr.error);
                }
                ps_msg_close(&m);
            }
        }
    }
    free(zeros);
    Shardps__Done done = SHARDPS__DONE__INIT;
    done.steps = last - first;
    if (ps_link_send(c->link, PS_MSG_DONE, &done.base) != 0) {
        s_die("cannot send DONE");
    }
    s_idle_until(c->link, NULL);
    printf("played W%d through steps %lld to %lld; the job ended\n", ps_link_rank(c->link),
           (long long)first, (long long)last - 1);
}

/* --rows: see the header. */
static int s_rows_job(const char *sched, uint64_t P, int cases)
{
    s_client_t c = {0};
    char err[256];
    ps_job_t job;
    ps_sock_t *socks[PS_MAX_SERVERS] = {0};
    c.view = calloc(1, sizeof *c.view);
    if (ps_ctx_new(&c.ctx) != 0 || !c.view) {
        s_die("out of memory");
    }
    if (ps_link_join(&c.link, c.ctx, sched, PS_ROLE_WORKER, 1, NULL, NULL, 30.0, 30.0, &job, err,
                     sizeof err) != 0) {
        s_die("join: %s", err);
    }
    Shardps__ModelInfo info = SHARDPS__MODEL_INFO__INIT;
    info.num_params = P;
    info.train_samples = 1000;
    if (ps_link_wait_view(c.link, &info, c.view, err, sizeof err) != 0) {
        s_die("view: %s", err);
    }
    const ps_view_t *v = c.view;
    const size_t D = (size_t)v->job.embed_dim;
    if (ps_link_rank(c.link) != 1 || v->num_workers != 2 || v->num_servers < 2 ||
        v->num_params != P || v->job.mode != PS_MODE_SYNC || !ps_job_has_rows(&v->job) ||
        v->servers[0].rows.last >= v->servers[1].rows.first) {
        s_die("unexpected job: rank %d, %d workers, %d servers, P=%llu, embed_dim %zu",
              ps_link_rank(c.link), v->num_workers, v->num_servers,
              (unsigned long long)v->num_params, D);
    }
    for (int s = 0; s < v->num_servers; s++) {
        if (ps_sock_new(c.ctx, PS_SOCK_DEALER, &socks[s], err, sizeof err) != 0 ||
            ps_sock_connect(socks[s], v->servers[s].endpoint) != 0) {
            s_die("cannot connect to %s", v->servers[s].endpoint);
        }
    }
    c.srv = socks[0];
    c.shard = (ps_range_t){v->servers[0].begin, v->servers[0].end};
    enum { K = 8 }; /* rows compared: server 0's first keys by hash, the cases' among them */
    uint64_t keys[K];
    for (int i = 0; i < K; i++) {
        keys[i] = s_row_key(&c, 0, (uint64_t)i);
    }
    const size_t n = ps_range_len(c.shard);
    float *before = malloc(n * sizeof(float)), *after = malloc(n * sizeof(float));
    float *rows0 = malloc(K * D * sizeof(float)), *rows1 = malloc(K * D * sizeof(float));
    if (!before || !after || !rows0 || !rows1) {
        s_die("out of memory");
    }
    const int64_t v0 = s_pull_shard(&c, before, "initial pull");
    s_pull_rows(&c, keys, K, D, rows0, "initial rows pull");
    if (cases) {
        s_run_rows_cases(&c, D);
    }
    const int64_t v1 = s_pull_shard(&c, after, "final pull");
    s_pull_rows(&c, keys, K, D, rows1, "final rows pull");
    if (v1 != v0 || memcmp(before, after, n * sizeof(float)) != 0 ||
        memcmp(rows0, rows1, K * D * sizeof(float)) != 0) {
        s_die("S0 changed: version %lld to %lld, shard %s, rows %s", (long long)v0,
              (long long)v1, memcmp(before, after, n * sizeof(float)) ? "changed" : "same",
              memcmp(rows0, rows1, K * D * sizeof(float)) ? "changed" : "same");
    }
    ps_msg_t m = {0};
    if (s_wait_reply(&c, &m, 0.3, "stray check")) {
        s_die("an extra %s arrived for request %llu", ps_codec_type_name(m.hdr.type),
              (unsigned long long)m.hdr.request_id);
    }
    printf("S0's shard and %d rows unchanged after %d malformed rows messages\n"
           "cases=%d\nrepeats=%d\n", K, c.cases, c.cases, c.repeats);
    s_play_steps(&c, socks);
    free(before);
    free(after);
    free(rows0);
    free(rows1);
    for (int s = 0; s < v->num_servers; s++) {
        ps_sock_set_linger(socks[s], 0);
        ps_sock_destroy(&socks[s]);
    }
    ps_link_destroy(&c.link);
    ps_ctx_destroy(&c.ctx);
    free(c.view);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 7 && !strcmp(argv[1], "--stranger")) {
        return s_stranger(argv[2], argv[3], argv[4], argv[5], atoi(argv[6]));
    }
    if (argc >= 6 && !strcmp(argv[1], "--connflood")) {
        return s_connflood(argv[2], atoi(argv[3]), atof(argv[4]), argv + 5, argc - 5);
    }
    if (argc == 6 && !strcmp(argv[1], "--forge")) {
        return s_forge(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
    }
    if (argc == 5 && !strcmp(argv[1], "--claim")) {
        return s_claim(argv[2], atoi(argv[3]), atoi(argv[4]));
    }
    if (argc == 6 && !strcmp(argv[1], "--no-read")) {
        return s_no_read(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]), argv[5]);
    }
    if (argc == 5 && !strcmp(argv[1], "--rows")) {
        return s_rows_job(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]));
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s SCHEDULER_ENDPOINT NUM_PARAMS | --forge SCHEDULER SERVERS "
                "WORKERS SECONDS | --claim SERVER WORKERS ROUNDS | --no-read SCHEDULER "
                "NUM_PARAMS PULLS DIR | --rows SCHEDULER NUM_PARAMS CASES\n", argv[0]);
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
    int rc = ps_link_join(&c.link, c.ctx, argv[1], PS_ROLE_WORKER, 1, NULL, NULL, 30.0, 30.0, &job,
                          err, sizeof err);
    if (rc != 0) {
        s_die("join: %s", err);
    }
    Shardps__ModelInfo info = SHARDPS__MODEL_INFO__INIT;
    info.num_params = P;
    info.train_samples = 60000;
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

    const int sparse = c.view->job.topk > 0; /* --compress topk: the sparse cases */
    if (sparse) {
        s_run_sparse_cases(&c);
    } else {
        s_run_cases(&c);
    }

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
    if (!sparse) {
        s_flood(&c, argv[1], 100000);
    }
    free(before);
    free(after);
    ps_sock_destroy(&c.srv);
    ps_link_destroy(&c.link);
    ps_ctx_destroy(&c.ctx);
    free(c.view);
    return 0;
}
