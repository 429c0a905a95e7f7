/*
 * tests/unit/test_link.c - the node's link to the scheduler against a real
 * scheduler-side ROUTER socket (inproc, same context; no mock of ZeroMQ):
 * joining, the typed events of ps_link_handle(), liveness kept by the link
 * (heartbeats keep it alive, silence past peer_timeout is PS_LINK_LOST), and
 * the bound of ps_msg_drain(). Every ZeroMQ context is made inside a test,
 * after Check has forked.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/job.h"
#include "proto/codec.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/sock.h"
#include "tests/unit/testutil.h"

#define S_EP "inproc://test-link"
#define S_RUN_ID 0x77ull

/* The scheduler's side: its ROUTER and the node's routing id. */
typedef struct {
    ps_ctx_t *ctx;
    ps_sock_t *router;
    ps_route_t node;   /* the joined node's routing id */
    int answer;        /* what the helper thread answers REGISTER with: */
    int got_register;  /* set by the helper: a REGISTER arrived */
} s_sched_t;

enum { S_ACK, S_REFUSE, S_SILENT };

static void s_sched_open(s_sched_t *s, int answer)
{
    char err[128];
    memset(s, 0, sizeof *s);
    s->answer = answer;
    ck_assert_int_eq(ps_ctx_new(&s->ctx), 0);
    ck_assert_int_eq(ps_sock_new(s->ctx, PS_SOCK_ROUTER, &s->router, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_bind(s->router, S_EP, NULL, 0, err, sizeof err), 0);
    ps_sock_set_recv_timeout(s->router, 5000); /* a broken test fails, never hangs */
}

static void s_sched_close(s_sched_t *s)
{
    ps_sock_destroy(&s->router);
    ps_ctx_destroy(&s->ctx);
}

/* The helper thread: receives the REGISTER and answers it (rank 3). It owns
 * the router until joined. */
static void *s_answer_register(void *arg)
{
    s_sched_t *s = arg;
    ps_msg_t m = {0};
    if (ps_msg_recv(s->router, PS_RECV_ROUTER, &m) != 0 || m.hdr.type != PS_MSG_REGISTER) {
        ps_msg_close(&m);
        return NULL;
    }
    s->got_register = 1;
    s->node = m.route;
    if (s->answer == S_ACK) {
        ps_job_t job;
        ps_job_defaults(&job);
        job.batch = 17;
        ps_job_pb_t jpb;
        ps_codec_job_to_pb(&job, &jpb);
        Shardps__RegisterAck ack = SHARDPS__REGISTER_ACK__INIT;
        ack.rank = 3;
        ack.token = 42;
        ack.run_id = S_RUN_ID;
        ack.job = &jpb.pb;
        ps_msg_send_ctrl(s->router, &m.route, PS_MSG_REGISTER_ACK, PS_ROLE_SCHEDULER, 0,
                         &ack.base);
    } else if (s->answer == S_REFUSE) {
        ps_msg_reply_error(s->router, &m, PS_ROLE_SCHEDULER, 0, PS_ESTATE, "rank taken");
    }
    ps_msg_close(&m);
    return NULL;
}

/* Joins a link to s (answered as s->answer says). Returns join's code. */
static int s_join(s_sched_t *s, ps_link_t **l, double connect_timeout, double peer_timeout,
                  ps_job_t *job, char *err, size_t errlen)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, s_answer_register, s), 0);
    int rc = ps_link_join(l, s->ctx, S_EP, PS_ROLE_WORKER, -1, NULL, NULL, connect_timeout,
                          peer_timeout, job, err, errlen);
    pthread_join(t, NULL);
    return rc;
}

/* A scheduler that acks, and a link joined to it with peer_timeout. */
static ps_link_t *s_joined(s_sched_t *s, double peer_timeout, ps_job_t *job)
{
    char err[256] = "";
    ps_link_t *l = NULL;
    s_sched_open(s, S_ACK);
    ck_assert_int_eq(s_join(s, &l, 5.0, peer_timeout, job, err, sizeof err), 0);
    return l;
}

/* Sends a control message of type from the scheduler to the node. */
static void s_send(s_sched_t *s, ps_msg_type_t type, const ProtobufCMessage *body)
{
    ck_assert_int_eq(ps_msg_send_ctrl(s->router, &s->node, type, PS_ROLE_SCHEDULER, 0, body), 0);
}

static void s_send_shutdown(s_sched_t *s, int status, const char *reason)
{
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.status = status;
    sd.reason = (char *)reason;
    s_send(s, PS_MSG_SHUTDOWN, &sd.base);
}

static void s_sleep(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Receives one message on the node's side (waits up to 2 s) and handles it. */
static ps_link_event_t s_next_event(ps_link_t *l, ps_msg_type_t *type, char *err,
                                    size_t errlen)
{
    ps_pollitem_t it = {.sock = ps_link_sock(l)};
    ck_assert_int_eq(ps_poll(&it, 1, 2000), 1);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(ps_link_sock(l), 0, &m), 0);
    ps_link_event_t ev = ps_link_handle(l, &m, err, errlen);
    *type = m.hdr.type;
    ps_msg_close(&m);
    return ev;
}

START_TEST(link_join_gets_rank_and_job)
{
    s_sched_t s;
    ps_job_t job;
    ps_link_t *l = s_joined(&s, 5.0, &job);
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(ps_link_rank(l), 3);
    ck_assert_uint_eq(ps_link_token(l), 42);
    ck_assert_int_eq(job.batch, 17);
    /* one clock on both sides: the offset is within the round trip, and set
     * (0 exactly would mean the answer carried no clock) */
    ck_assert(ps_link_clock_offset(l) != 0 && fabs(ps_link_clock_offset(l)) < 1.0);
    ps_link_destroy(&l);
    ck_assert_ptr_null(l);
    ps_link_destroy(&l); /* NULL-safe */
    s_sched_close(&s);
}
END_TEST

START_TEST(link_join_refused_or_unanswered)
{
    s_sched_t s;
    s_sched_open(&s, S_REFUSE);
    ps_link_t *l = NULL;
    ps_job_t job;
    char err[256] = "";
    ck_assert_int_eq(s_join(&s, &l, 5.0, 5.0, &job, err, sizeof err), PS_ESTATE);
    ck_assert_ptr_null(l);
    ck_assert_ptr_nonnull(strstr(err, "rank taken"));
    s.answer = S_SILENT;
    double t0 = ps_now();
    ck_assert_int_eq(s_join(&s, &l, 0.3, 5.0, &job, err, sizeof err), PS_ETIMEDOUT);
    ck_assert(ps_now() - t0 < 3.0);
    ck_assert(s.got_register);
    ck_assert_ptr_null(l);
    ck_assert_ptr_nonnull(strstr(err, "no answer"));
    ck_assert_int_eq(ps_link_join(&l, s.ctx, "nonsense", PS_ROLE_WORKER, -1, NULL, NULL, 1.0, 1.0,
                                  &job, err, sizeof err),
                     PS_EINVAL);
    s_sched_close(&s);
}
END_TEST

START_TEST(link_handle_types_every_event)
{
    s_sched_t s;
    ps_job_t job;
    char err[256] = "";
    ps_link_t *l = s_joined(&s, 5.0, &job);
    ps_msg_type_t type;

    s_send(&s, PS_MSG_HEARTBEAT, NULL);
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_ALIVE);

    Shardps__Barrier b = SHARDPS__BARRIER__INIT;
    b.name = (char *)"init";
    s_send(&s, PS_MSG_BARRIER_DONE, &b.base);
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_MESSAGE);
    ck_assert_int_eq(type, PS_MSG_BARRIER_DONE);

    /* REGISTER's type is 1: still a message, not confused with an event */
    s_send(&s, PS_MSG_REGISTER, NULL);
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_MESSAGE);
    ck_assert_int_eq(type, PS_MSG_REGISTER);

    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_ERROR, PS_ROLE_SCHEDULER, 0);
    h.status = PS_EPROTO;
    h.error = (char *)"bad barrier";
    ck_assert_int_eq(ps_msg_send(s.router, &s.node, h, NULL, 0, 0), 0);
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "bad barrier"));

    s_send_shutdown(&s, PS_ECLOSED, "W1 was lost");
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_ABORTED);
    ck_assert_ptr_nonnull(strstr(err, "W1 was lost"));

    s_send_shutdown(&s, 0, "job finished");
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_SHUTDOWN);

    ps_link_destroy(&l);
    s_sched_close(&s);
}
END_TEST

/* ps_msg_drain's handler: counts heartbeats handled by the link. */
static int s_count_alive(void *arg, ps_msg_t *m, int rc)
{
    void **a = arg;
    char err[128];
    if (rc == 0 && ps_link_handle(a[0], m, err, sizeof err) == PS_LINK_ALIVE) {
        (*(int *)a[1])++;
    }
    return 0;
}

START_TEST(link_heartbeats_keep_it_alive)
{
    s_sched_t s;
    s_sched_open(&s, S_ACK);
    ps_link_t *l = NULL;
    ps_job_t job;
    char err[256] = "";
    const double peer_timeout = 0.5;
    ck_assert_int_eq(s_join(&s, &l, 5.0, peer_timeout, &job, err, sizeof err), 0);
    int alive = 0, beats_from_node = 0;
    void *arg[2] = {l, &alive};
    /* 1.6 s, three times the timeout: the scheduler beats every 0.1 s */
    for (double t0 = ps_now(); ps_now() - t0 < 1.6;) {
        s_send(&s, PS_MSG_HEARTBEAT, NULL);
        s_sleep(0.1);
        ck_assert_int_ge(ps_msg_drain(ps_link_sock(l), 0, 64, s_count_alive, arg), 0);
        ck_assert_int_eq(ps_link_tick(l, err, sizeof err), PS_LINK_ALIVE);
        while (ps_sock_has_input(s.router)) {
            ps_msg_t m = {0};
            ck_assert_int_eq(ps_msg_recv(s.router, PS_RECV_ROUTER, &m), 0);
            beats_from_node += m.hdr.type == PS_MSG_HEARTBEAT;
            ps_msg_close(&m);
        }
    }
    ck_assert_int_ge(alive, 8);
    /* the node beats every PS_HEARTBEAT_SECONDS (0.5 s) */
    ck_assert_int_ge(beats_from_node, 1);
    ck_assert_int_le(beats_from_node, 4);
    ps_link_destroy(&l);
    s_sched_close(&s);
}
END_TEST

static void s_report(void *arg, Shardps__MetricsReport *r, ps_text_t *text)
{
    r->step = *(int *)arg;
    ps_text_printf(text, "x_total %d\n", *(int *)arg);
}

START_TEST(link_heartbeats_carry_the_report)
{
    s_sched_t s;
    ps_job_t job;
    ps_link_t *l = s_joined(&s, 5.0, &job);
    int step = 42;
    ps_link_set_report(l, s_report, &step);
    ps_link_report_now(l);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(s.router, PS_RECV_ROUTER, &m), 0);
    ck_assert_int_eq(m.hdr.type, PS_MSG_HEARTBEAT);
    ck_assert_int_eq(m.nframes, 1);
    const Shardps__MetricsReport *r = ps_msg_unpack_body(&m, &shardps__metrics_report__descriptor);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->step, 42);
    ck_assert(r->test_accuracy == -1);
    ck_assert_str_eq(r->text, "x_total 42\n");
    ps_msg_close(&m);
    ps_link_destroy(&l);
    s_sched_close(&s);
}
END_TEST

START_TEST(link_silence_past_peer_timeout_is_lost)
{
    s_sched_t s;
    ps_job_t job;
    char err[256] = "";
    ps_link_t *l = s_joined(&s, 0.5, &job);
    ck_assert_int_eq(ps_link_tick(l, err, sizeof err), PS_LINK_ALIVE);
    s_sleep(0.35);
    /* any message counts as a sign of life, not only heartbeats */
    s_send(&s, PS_MSG_BARRIER_DONE, NULL);
    ps_msg_type_t type;
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_MESSAGE);
    s_sleep(0.3); /* 0.65 s after joining, 0.3 s after the message */
    ck_assert_int_eq(ps_link_tick(l, err, sizeof err), PS_LINK_ALIVE);
    s_sleep(0.3);
    err[0] = '\0';
    ck_assert_int_eq(ps_link_tick(l, err, sizeof err), PS_LINK_LOST);
    ck_assert_ptr_nonnull(strstr(err, "lost the scheduler"));
    ps_link_destroy(&l);
    s_sched_close(&s);
}
END_TEST

/* The scheduler's side: the next message that is not a heartbeat. */
static void s_recv_skipping_heartbeats(s_sched_t *s, ps_msg_t *m)
{
    do {
        ps_msg_close(m);
        ck_assert_int_eq(ps_msg_recv(s->router, PS_RECV_ROUTER, m), 0);
    } while (m->hdr.type == PS_MSG_HEARTBEAT);
}

START_TEST(link_with_a_grace_goes_on_and_registers_again)
{
    s_sched_t s;
    ps_job_t job;
    char err[256] = "";
    ps_link_t *l = s_joined(&s, 0.3, &job);
    ps_link_set_grace(l, 1.0);
    const uint8_t done[] = {0x08, 0x2a}; /* Done{steps: 42}, packed */
    Shardps__Done d = SHARDPS__DONE__INIT;
    d.steps = 42;
    ck_assert_int_eq(ps_link_send(l, PS_MSG_DONE, &d.base), 0);
    ps_msg_t m = {0};
    s_recv_skipping_heartbeats(&s, &m);
    ck_assert_int_eq(m.hdr.type, PS_MSG_DONE);
    s_sleep(0.35);
    /* silent: the node goes on and registers again, as the same node of the job */
    ck_assert_int_eq(ps_link_tick(l, err, sizeof err), PS_LINK_ALIVE);
    s_recv_skipping_heartbeats(&s, &m);
    ck_assert_int_eq(m.hdr.type, PS_MSG_REGISTER);
    const Shardps__Register *reg = ps_msg_unpack_body(&m, &shardps__register__descriptor);
    ck_assert_ptr_nonnull(reg);
    ck_assert_int_eq(reg->rank, 3);
    ck_assert_uint_eq(reg->run_id, S_RUN_ID);
    s.node = m.route;
    /* an error meanwhile is not the end; the answer is */
    ps_msg_reply_error(s.router, &m, PS_ROLE_SCHEDULER, 0, PS_ESTATE, "register first");
    ps_msg_type_t type;
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_ALIVE);
    ps_job_pb_t jpb;
    ps_codec_job_to_pb(&job, &jpb);
    Shardps__RegisterAck again = SHARDPS__REGISTER_ACK__INIT;
    again.rank = 3;
    again.run_id = S_RUN_ID;
    again.job = &jpb.pb;
    s_send(&s, PS_MSG_REGISTER_ACK, &again.base);
    ck_assert_int_eq(s_next_event(l, &type, err, sizeof err), PS_LINK_ALIVE);
    /* back: its DONE goes again, heartbeats follow */
    s_recv_skipping_heartbeats(&s, &m);
    ck_assert_int_eq(m.hdr.type, PS_MSG_DONE);
    size_t n;
    ck_assert_mem_eq(ps_msg_frame(&m, 0, &n), done, sizeof done);
    ck_assert_uint_eq(n, sizeof done);
    ps_msg_close(&m);
    ck_assert_int_eq(ps_link_tick(l, err, sizeof err), PS_LINK_ALIVE);
    /* silent for longer than the grace: lost */
    s_sleep(0.35);
    ck_assert_int_eq(ps_link_tick(l, err, sizeof err), PS_LINK_ALIVE);
    s_sleep(1.1);
    ck_assert_int_eq(ps_link_tick(l, err, sizeof err), PS_LINK_LOST);
    ck_assert_ptr_nonnull(strstr(err, "did not come back within 1 s"));
    ps_link_destroy(&l);
    s_sched_close(&s);
}
END_TEST

/* ps_msg_drain's handler: counts, and stops at the message whose request id
 * is *stop_at. */
static int s_count(void *arg, ps_msg_t *m, int rc)
{
    uint64_t *a = arg;
    ck_assert_int_eq(rc, 0);
    a[0]++;
    return m->hdr.request_id == a[1];
}

START_TEST(drain_stops_at_its_bound_and_when_asked)
{
    s_sched_t s;
    ps_job_t job;
    ps_link_t *l = s_joined(&s, 5.0, &job);
    for (uint64_t i = 0; i < 10; i++) {
        Shardps__Header h;
        ps_msg_header(&h, PS_MSG_HEARTBEAT, PS_ROLE_SCHEDULER, 0);
        h.request_id = 100 + i;
        ck_assert_int_eq(ps_msg_send(s.router, &s.node, h, NULL, 0, 0), 0);
    }
    ps_pollitem_t it = {.sock = ps_link_sock(l)};
    ck_assert_int_eq(ps_poll(&it, 1, 2000), 1);
    ck_assert(it.ready);
    s_sleep(0.05); /* inproc: all ten are queued by now */
    uint64_t a[2] = {0, 0};
    ck_assert_int_eq(ps_msg_drain(it.sock, 0, 4, s_count, a), 4);
    ck_assert_uint_eq(a[0], 4);
    a[1] = 105; /* the handler stops the drain at the sixth message */
    ck_assert_int_eq(ps_msg_drain(it.sock, 0, 100, s_count, a), 2);
    a[1] = 0;
    ck_assert_int_eq(ps_msg_drain(it.sock, 0, 100, s_count, a), 4);
    ck_assert_uint_eq(a[0], 10);
    ck_assert_int_eq(ps_msg_drain(it.sock, 0, 100, s_count, a), 0);
    ps_link_destroy(&l);
    s_sched_close(&s);
}
END_TEST

START_TEST(poll_sees_an_fd_and_times_out)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    ps_pollitem_t it = {.fd = fds[0]};
    ck_assert_int_eq(ps_poll(&it, 1, 10), 0);
    ck_assert(!it.ready);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    ck_assert_int_eq(ps_poll(&it, 1, 1000), 1);
    ck_assert(it.ready);
    ck_assert_int_eq(ps_poll(&it, PS_POLL_MAX + 1, 0), PS_EINVAL);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("link");
    TCase *tc = tcase_create("link");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, link_join_gets_rank_and_job);
    tcase_add_test(tc, link_join_refused_or_unanswered);
    tcase_add_test(tc, link_handle_types_every_event);
    tcase_add_test(tc, link_heartbeats_keep_it_alive);
    tcase_add_test(tc, link_heartbeats_carry_the_report);
    tcase_add_test(tc, link_silence_past_peer_timeout_is_lost);
    tcase_add_test(tc, link_with_a_grace_goes_on_and_registers_again);
    tcase_add_test(tc, drain_stops_at_its_bound_and_when_asked);
    tcase_add_test(tc, poll_sees_an_fd_and_times_out);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
