/*
 * tests/integration/intruder.c - a stranger who knows a job's build and job
 * id but not its secret, and a member who sends another role's message.
 * usage: sps-intruder --register SCHEDULER_ENDPOINT JOB_ID ROLE
 *        sps-intruder --report SCHEDULER_ENDPOINT JOB_ID SECRET_FILE
 *        sps-intruder --rebind SCHEDULER_ENDPOINT JOB_ID SECRET_FILE
 *        sps-intruder --ring RING_ENDPOINT SENDER
 *
 * --register: registers with this build and JOB_ID as ROLE (server0: server
 * rank 0; spare: a spare server; worker: any worker rank). To a challenge it
 * answers with a made-up proof. Exits 0 when refused (prints the reason,
 * which must name neither the build nor the job id: exit 4 when it does),
 * 3 when registered (REGISTER_ACK), 1 on other failures (no answer in 5 s).
 *
 * --report: registers as a worker with the job's secret (a real member),
 * then sends the scheduler a MSG_REPORT, which only servers send, and
 * waits 2 s: exits 0 when it is refused with an error and the job goes on,
 * 3 when the scheduler aborts the job over it.
 *
 * --rebind: a member (it holds the secret) that picks its own routing id,
 * gets a nonce, reconnects under the same id and answers that nonce on the
 * new connection, as a replay of another connection's answer would: exits
 * 0 when the answer is refused and the new connection's own nonce then
 * registers it, 3 when the old nonce registers it, 1 on other failures.
 *
 * --ring: sends one RING_DATA to RING_ENDPOINT claiming to be worker SENDER,
 * at a step no ring is at, with a made-up token; exits 0 once it is sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/secret.h"
#include "proto/codec.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/sock.h"

static int s_fail(const char *what)
{
    fprintf(stderr, "sps-intruder: %s\n", what);
    return 1;
}

/* Waits up to timeout s for one message on s into m: 1, or 0. */
static int s_wait(ps_sock_t *s, ps_msg_t *m, double timeout)
{
    ps_pollitem_t it = {.sock = s};
    return ps_poll(&it, 1, (long)(timeout * 1000)) > 0 && ps_msg_recv(s, 0, m) == 0;
}

/* Our REGISTER as role/rank/spare of job_id, with nonce and a proof made
 * with secret (NULL: a made-up one) when nonce is not NULL. */
static void s_register(ps_sock_t *s, int role, int rank, int spare, const char *job_id,
                       const ProtobufCBinaryData *nonce, const ps_secret_t *secret)
{
    char build[PS_BUILD_MAX];
    uint8_t proof[PS_HMAC_LEN];
    ps_codec_build_id(build, sizeof build);
    Shardps__Register r = SHARDPS__REGISTER__INIT;
    r.role = role;
    r.rank = rank;
    r.spare = spare;
    r.job_id = (char *)job_id;
    r.build = build;
    r.endpoint = (char *)"tcp://127.0.0.1:1";
    if (nonce) {
        ps_secret_t guess;
        ps_secret_new(&guess); /* not the job's: a guess */
        ps_secret_proof(secret ? secret : &guess, nonce->data, nonce->len, role, job_id, proof);
        r.nonce = *nonce;
        r.proof = (ProtobufCBinaryData){sizeof proof, proof};
    }
    ps_msg_send_ctrl(s, NULL, PS_MSG_REGISTER, role, rank, &r.base);
}

static int s_intrude(const char *sched, const char *job_id, const char *what)
{
    const int spare = !strcmp(what, "spare"), server = spare || !strcmp(what, "server0");
    const int role = server ? PS_ROLE_SERVER : PS_ROLE_WORKER;
    const int rank = spare ? -1 : server ? 0 : -1;
    ps_ctx_t *ctx;
    ps_sock_t *s;
    char err[256], build[PS_BUILD_MAX];
    if (ps_ctx_new(&ctx) != 0 || ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err) != 0 ||
        ps_sock_connect(s, sched) != 0) {
        return s_fail("cannot connect");
    }
    ps_codec_build_id(build, sizeof build);
    s_register(s, role, rank, spare, job_id, NULL, NULL);
    int rc = 1;
    for (int round = 0; round < 2; round++) {
        ps_msg_t m = {0};
        if (!s_wait(s, &m, 5.0)) {
            fprintf(stderr, "sps-intruder: no answer to %s\n", what);
            break;
        }
        if (m.hdr.type == PS_MSG_CHALLENGE) {
            const Shardps__Challenge *c = ps_msg_unpack_body(&m, &shardps__challenge__descriptor);
            if (c) {
                s_register(s, role, rank, spare, job_id, &c->nonce, NULL);
            }
            ps_msg_close(&m);
            continue;
        }
        if (m.hdr.type == PS_MSG_REGISTER_ACK) {
            printf("%s: registered\n", what);
            rc = 3;
        } else if (m.hdr.type == PS_MSG_ERROR) {
            printf("%s: refused: %s\n", what, m.hdr.error);
            rc = strstr(m.hdr.error, job_id) || strstr(m.hdr.error, build) ? 4 : 0;
        } else {
            printf("%s: answered %s\n", what, ps_codec_type_name(m.hdr.type));
        }
        ps_msg_close(&m);
        break;
    }
    ps_sock_set_linger(s, 0);
    ps_sock_destroy(&s);
    ps_ctx_destroy(&ctx);
    return rc;
}

static int s_report(const char *sched, const char *job_id, const char *secret_file)
{
    ps_ctx_t *ctx;
    ps_link_t *link = NULL;
    ps_job_t job;
    ps_secret_t secret;
    char err[512];
    if (ps_ctx_new(&ctx) != 0 || ps_link_read_secret(secret_file, &secret, err, sizeof err)) {
        return s_fail(err);
    }
    const ps_link_ident_t ident = {job_id, NULL, &secret};
    if (ps_link_join(&link, ctx, sched, PS_ROLE_WORKER, -1, NULL, &ident, 10.0, 30.0, &job, err,
                     sizeof err) != 0) {
        return s_fail(err);
    }
    Shardps__ServerReport r = SHARDPS__SERVER_REPORT__INIT;
    ps_link_send(link, PS_MSG_REPORT, &r.base);
    int rc = 1;
    for (double until = ps_now() + 2.0; ps_now() < until && rc == 1;) {
        ps_msg_t m = {0};
        if (!s_wait(ps_link_sock(link), &m, 0.2)) {
            continue;
        }
        if (m.hdr.type == PS_MSG_SHUTDOWN) {
            printf("report: the scheduler ended the job\n");
            rc = 3;
        } else if (m.hdr.type == PS_MSG_ERROR) {
            printf("report: refused: %s\n", m.hdr.error);
            rc = 0;
        }
        ps_msg_close(&m);
    }
    ps_link_destroy(&link);
    ps_ctx_destroy(&ctx);
    return rc == 1 ? s_fail("no answer to the report") : rc;
}

/* A DEALER connected to sched under the routing id rid, or NULL. */
static ps_sock_t *s_dealer(ps_ctx_t *ctx, const char *sched, const char *rid)
{
    ps_sock_t *s = NULL;
    char err[256];
    if (ps_sock_new(ctx, PS_SOCK_DEALER, &s, err, sizeof err) == 0 &&
        (zmq_setsockopt(ps_sock_handle(s), ZMQ_ROUTING_ID, rid, strlen(rid)) != 0 ||
         ps_sock_connect(s, sched) != 0)) {
        ps_sock_destroy(&s);
    }
    return s;
}

/* Registers as a worker on s without a proof; the challenge's nonce goes to
 * nonce (PS_NONCE_MAX bytes). Returns its length, 0 when none came in
 * timeout s. */
enum { PS_NONCE_MAX = 256 };
static size_t s_challenge(ps_sock_t *s, const char *job_id, uint8_t *nonce, double timeout)
{
    s_register(s, PS_ROLE_WORKER, -1, 0, job_id, NULL, NULL);
    ps_msg_t m = {0};
    size_t n = 0;
    if (s_wait(s, &m, timeout) && m.hdr.type == PS_MSG_CHALLENGE) {
        const Shardps__Challenge *c = ps_msg_unpack_body(&m, &shardps__challenge__descriptor);
        if (c && c->nonce.len <= PS_NONCE_MAX) {
            memcpy(nonce, c->nonce.data, c->nonce.len);
            n = c->nonce.len;
        }
    }
    ps_msg_close(&m);
    return n;
}

/* Answers nonce on s with the job's proof: the answer's type (0: none). */
static int s_answer(ps_sock_t *s, const char *job_id, const uint8_t *nonce, size_t len,
                    const ps_secret_t *secret, char *error, size_t cap)
{
    const ProtobufCBinaryData nb = {len, (uint8_t *)nonce};
    s_register(s, PS_ROLE_WORKER, -1, 0, job_id, &nb, secret);
    ps_msg_t m = {0};
    int type = s_wait(s, &m, 5.0) ? (int)m.hdr.type : 0;
    snprintf(error, cap, "%s", type == PS_MSG_ERROR ? m.hdr.error : "");
    ps_msg_close(&m);
    return type;
}

static int s_rebind(const char *sched, const char *job_id, const char *secret_file)
{
    ps_ctx_t *ctx;
    ps_secret_t secret;
    char err[512], rid[32];
    uint8_t old[PS_NONCE_MAX], fresh[PS_NONCE_MAX];
    if (ps_ctx_new(&ctx) != 0 || ps_link_read_secret(secret_file, &secret, err, sizeof err)) {
        return s_fail(err);
    }
    snprintf(rid, sizeof rid, "rebind-%d", (int)getpid());
    ps_sock_t *s = s_dealer(ctx, sched, rid);
    const size_t olen = s ? s_challenge(s, job_id, old, 5.0) : 0;
    ps_sock_set_linger(s, 0);
    ps_sock_destroy(&s);
    if (olen == 0) {
        return s_fail("no challenge on the first connection");
    }
    /* The same id on a new connection: the scheduler ignores it while the old
     * one is still in its table, so try again until it answers. */
    size_t flen = 0;
    for (int tries = 0; tries < 20 && flen == 0; tries++) {
        ps_sock_set_linger(s, 0);
        ps_sock_destroy(&s);
        s = s_dealer(ctx, sched, rid);
        flen = s ? s_challenge(s, job_id, fresh, 1.0) : 0;
    }
    int rc = 1;
    if (flen == 0) {
        s_fail("no challenge on the new connection under the same routing id");
    } else if (s_answer(s, job_id, old, olen, &secret, err, sizeof err) == PS_MSG_REGISTER_ACK) {
        printf("rebind: registered with the first connection's nonce\n");
        rc = 3;
    } else if (s_answer(s, job_id, fresh, flen, &secret, err + 256, 256) == PS_MSG_REGISTER_ACK) {
        printf("rebind: the first connection's nonce refused (%s); its own registered\n", err);
        rc = 0;
    } else {
        s_fail("the new connection's own nonce did not register it");
    }
    ps_sock_set_linger(s, 0);
    ps_sock_destroy(&s);
    ps_ctx_destroy(&ctx);
    return rc;
}

static int s_ring(const char *ep, int sender)
{
    ps_ctx_t *ctx;
    ps_sock_t *s;
    char err[256];
    if (ps_ctx_new(&ctx) != 0 || ps_sock_new(ctx, PS_SOCK_PUSH, &s, err, sizeof err) != 0 ||
        ps_sock_connect(s, ep) != 0) {
        return s_fail("cannot connect");
    }
    static const float one[4] = {1, 1, 1, 1};
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_WORKER, sender);
    h.step = 1 << 30;
    h.key_begin = 0;
    h.key_end = 4;
    h.token = 0x5eed;
    h.payload_len = sizeof one;
    ps_frame_t f = {one, sizeof one};
    int rc = ps_msg_send(s, NULL, h, &f, 1, PS_SEND_COPY);
    ps_sock_set_linger(s, 2000); /* delivered before we go */
    ps_sock_destroy(&s);
    ps_ctx_destroy(&ctx);
    printf("ring: sent a forged ring data claiming W%d\n", sender);
    return rc == 0 ? 0 : s_fail("send failed");
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--register")) {
        return s_intrude(argv[2], argv[3], argv[4]);
    }
    if (argc == 5 && !strcmp(argv[1], "--report")) {
        return s_report(argv[2], argv[3], argv[4]);
    }
    if (argc == 5 && !strcmp(argv[1], "--rebind")) {
        return s_rebind(argv[2], argv[3], argv[4]);
    }
    if (argc == 4 && !strcmp(argv[1], "--ring")) {
        return s_ring(argv[2], atoi(argv[3]));
    }
    fprintf(stderr, "usage: %s --register SCHED JOB_ID server0|spare|worker | --report SCHED "
                    "JOB_ID SECRET_FILE | --rebind SCHED JOB_ID SECRET_FILE | --ring RING_ENDPOINT "
                    "SENDER\n", argv[0]);
    return 2;
}
