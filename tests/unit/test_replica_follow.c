/*
 * tests/unit/test_replica_follow.c - a hot replica's side, over a real
 * store and consistency, its messages sent through a real inproc socket
 * and its callbacks recorded: a primary's snapshot then its updates give
 * the replica the primary's values bit for bit and its version, the
 * scheduler hears once that it is in step, and each drain's messages get
 * one ack of the last; a stranger's message or a wrong token is refused
 * with PS_ENOENT and changes nothing; a message of the primary's that does
 * not fit (an update twice) puts the replica out of step (PS_ESTATE); a
 * new primary's token
 * is followed from its snapshot (PEER_READY with our endpoint) and the old
 * primary's messages are refused from then on; a primary follows no one.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "proto/msg.h"
#include "proto/sock.h"
#include "server/consistency.h"
#include "server/replica_follow.h"
#include "server/store.h"
#include "tests/unit/testutil.h"

enum { S_N = 8, S_WORKERS = 2, S_MAX_UPDATES = 16, S_TOKEN = 7, S_MAX_SENT = 8 };

/* An update the primary's consistency was about to apply. */
typedef struct {
    ps_range_t range;
    float grad[S_N];
    float lr, scale;
    int64_t version;
} s_update_t;

/* A primary (rank 0: store, consistency) and its replica (store,
 * consistency, view, follower), an inproc PUSH/PULL pair between them, and
 * a record of the follower's callbacks. */
typedef struct {
    ps_job_t job;
    ps_store_t *pstore, *rstore;
    ps_consistency_t *pcons, *rcons;
    ps_view_t view;
    ps_follow_t *follow;
    ps_ctx_t *ctx;
    ps_sock_t *tx, *rx;
    uint64_t next_id;               /* the primary's message numbers */
    s_update_t updates[S_MAX_UPDATES];
    int nupdates;
    ps_msg_type_t sent[S_MAX_SENT]; /* ops.send's types */
    int64_t in_step_version;        /* the MSG_REPLICA's version */
    char peer_endpoint[64];         /* the PEER_READY's endpoint */
    int nsent;
    int follows, in_step;           /* the last ops.register_as */
    uint64_t token;
    char endpoint[64];
    uint64_t acks[S_MAX_UPDATES];   /* ops.ack's ids */
    int nacks;
    int refused, status;            /* ops.refuse calls, the last one's status */
    int worker_acks;               /* the primary's acks to its workers */
    char why[160];
} s_fix_t;

/* The primary acked an init or a push (no test pulls: no reply op). */
static void s_on_worker_ack(void *ctx, const void *asker, ps_range_t range, int64_t version)
{
    (void)asker, (void)range, (void)version;
    ((s_fix_t *)ctx)->worker_acks++;
}

/* The primary's ops.update: kept, to be sent as MSG_REPLICATE. */
static void s_on_update(void *ctx, ps_range_t range, const float *grad, float lr, float scale,
                        int64_t version)
{
    s_fix_t *f = ctx;
    ck_assert_int_lt(f->nupdates, S_MAX_UPDATES);
    s_update_t *u = &f->updates[f->nupdates++];
    *u = (s_update_t){.range = range, .lr = lr, .scale = scale, .version = version};
    memcpy(u->grad, grad, ps_range_len(range) * sizeof *grad);
}

static void s_send(void *ctx, ps_msg_type_t type, const ProtobufCMessage *body)
{
    s_fix_t *f = ctx;
    ck_assert_int_lt(f->nsent, S_MAX_SENT);
    f->sent[f->nsent++] = type;
    if (type == PS_MSG_REPLICA) {
        f->in_step_version = ((const Shardps__Replica *)body)->version;
    } else if (type == PS_MSG_PEER_READY) {
        snprintf(f->peer_endpoint, sizeof f->peer_endpoint, "%s",
                 ((const Shardps__PeerReady *)body)->endpoint);
    }
}

static void s_register_as(void *ctx, int follows, uint64_t token, const char *endpoint,
                          int in_step)
{
    s_fix_t *f = ctx;
    f->follows = follows;
    f->token = token;
    f->in_step = in_step;
    if (endpoint) {
        snprintf(f->endpoint, sizeof f->endpoint, "%s", endpoint);
    }
}

static void s_ack(void *ctx, const ps_route_t *route, uint64_t id)
{
    (void)route;
    s_fix_t *f = ctx;
    ck_assert_int_lt(f->nacks, S_MAX_UPDATES);
    f->acks[f->nacks++] = id;
}

static void s_refuse(void *ctx, const ps_msg_t *m, int status, const char *why)
{
    (void)m;
    s_fix_t *f = ctx;
    f->refused++;
    f->status = status;
    snprintf(f->why, sizeof f->why, "%s", why);
}

/* A consistency over store; primary: its updates are kept (the replica's
 * own, as it replays them, are not sent anywhere). */
static ps_consistency_t *s_cons(s_fix_t *f, ps_store_t *store, int primary)
{
    ps_consistency_t *c = NULL;
    const ps_consistency_config_t cc = {
        .job = f->job,
        .workers = S_WORKERS,
        .steps_per_epoch = 100,
        .total_steps = 1000,
        .asker_size = sizeof(int),
        .ops = {f, s_on_worker_ack, NULL, NULL, NULL, primary ? s_on_update : NULL},
    };
    ck_assert_int_eq(ps_consistency_new(&c, &cc, store), 0);
    return c;
}

/* A sync SGD job with momentum (one state array); replica_of: the view's
 * (1: the replica of rank 0; 0: a primary). Free with s_free. */
static s_fix_t *s_new(int replica_of)
{
    s_fix_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    ps_job_defaults(&f->job);
    f->job.mode = PS_MODE_SYNC;
    f->job.lr = 0.5;
    f->job.momentum = 0.9;
    const ps_range_t keys = {0, S_N};
    ck_assert_int_eq(ps_store_new(&f->pstore, keys, &f->job), 0);
    ck_assert_int_eq(ps_store_new(&f->rstore, keys, &f->job), 0);
    f->pcons = s_cons(f, f->pstore, 1);
    f->rcons = s_cons(f, f->rstore, 0);
    float v[S_N];
    ps_test_fill(v, S_N, -1, 1, 1);
    int asker = 0;
    ps_request_t r = {0, 0, 0, keys, v, NULL, &asker};
    ck_assert_int_eq(ps_consistency_init(f->pcons, &r, f->why, sizeof f->why), 0);
    f->view.replica_of = replica_of;
    f->view.replica_token = S_TOKEN;
    const ps_follow_config_t cfg = {&f->view, f->rstore, NULL, f->rcons,
                                    {f, s_send, s_register_as, s_ack, s_refuse}};
    ck_assert_int_eq(ps_follow_new(&f->follow, &cfg), 0);
    char err[128];
    ck_assert_int_eq(ps_ctx_new(&f->ctx), 0);
    ck_assert_int_eq(ps_sock_new(f->ctx, PS_SOCK_PULL, &f->rx, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_bind(f->rx, "inproc://test-follow", NULL, 0, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_new(f->ctx, PS_SOCK_PUSH, &f->tx, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_connect(f->tx, "inproc://test-follow"), 0);
    return f;
}

static void s_free(s_fix_t *f)
{
    ps_follow_destroy(&f->follow);
    ck_assert_ptr_null(f->follow);
    ps_sock_destroy(&f->tx);
    ps_sock_destroy(&f->rx);
    ps_ctx_destroy(&f->ctx);
    ps_consistency_destroy(&f->pcons);
    ps_consistency_destroy(&f->rcons);
    ps_store_destroy(&f->pstore);
    ps_store_destroy(&f->rstore);
    free(f);
}

/* Sends body and data (NULL: no data frame) as a message of type from
 * sender with token, received as the server's loop would and handed to the
 * follower. */
static void s_deliver(s_fix_t *f, ps_msg_type_t type, int sender, uint64_t token,
                      ps_range_t keys, const ProtobufCMessage *body, const void *data,
                      size_t len)
{
    uint8_t *b;
    size_t blen;
    ck_assert_int_eq(ps_codec_pack(body, &b, &blen), 0);
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, sender);
    h.request_id = ++f->next_id;
    h.key_begin = keys.begin;
    h.key_end = keys.end;
    h.token = token;
    ps_frame_t fr[2] = {{b, blen}, {data, len}};
    ck_assert_int_eq(ps_msg_send(f->tx, NULL, h, fr, data ? 2 : 1, PS_SEND_COPY), 0);
    free(b);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(f->rx, 0, &m), 0);
    ps_follow_receive(f->follow, &m);
    ps_msg_close(&m);
}

/* The primary's snapshot, from rank 0 with token: each array, then the cut. */
static void s_snapshot(s_fix_t *f, uint64_t token)
{
    const int arrays = 1 + ps_store_state_arrays(f->pstore);
    int64_t version;
    unsigned char done[8] = {0};
    const size_t nchunks = ps_consistency_cut(f->pcons, &version, done, sizeof done);
    for (int a = 0; a < arrays; a++) {
        Shardps__ReplicaSnapshot sn = SHARDPS__REPLICA_SNAPSHOT__INIT;
        sn.array = a;
        sn.last = a == arrays - 1;
        sn.version = version;
        sn.done = sn.last ? (ProtobufCBinaryData){nchunks, done} : (ProtobufCBinaryData){0};
        const float *src = a ? ps_store_state(f->pstore, a - 1) : ps_store_values(f->pstore, 0);
        s_deliver(f, PS_MSG_REPLICA_SNAPSHOT, 0, token, (ps_range_t){0, S_N}, &sn.base, src,
                  S_N * sizeof(float));
    }
}

/* The primary's updates kept since the last call, one MSG_REPLICATE each. */
static void s_replicate(s_fix_t *f, int first)
{
    for (int i = first; i < f->nupdates; i++) {
        const s_update_t *u = &f->updates[i];
        Shardps__ReplicaStep st = SHARDPS__REPLICA_STEP__INIT;
        st.key_begin = u->range.begin;
        st.key_end = u->range.end;
        st.version = u->version;
        st.lr = u->lr;
        st.scale = u->scale;
        Shardps__ReplicaStep *steps[1] = {&st};
        Shardps__ReplicaUpdate up = SHARDPS__REPLICA_UPDATE__INIT;
        up.n_steps = 1;
        up.steps = steps;
        s_deliver(f, PS_MSG_REPLICATE, 0, S_TOKEN, u->range, &up.base, u->grad,
                  ps_range_len(u->range) * sizeof(float));
    }
}

/* Both workers push step to the primary. */
static void s_step(s_fix_t *f, int64_t step)
{
    for (int w = 0; w < S_WORKERS; w++) {
        float g[S_N];
        ps_test_fill(g, S_N, -1, 1, 100 + (uint64_t)step * 7 + (uint64_t)w);
        ps_request_t r = {w, step, step, {0, S_N}, g, NULL, &w};
        ck_assert_int_eq(ps_consistency_push(f->pcons, &r, f->why, sizeof f->why), 0);
    }
}

START_TEST(snapshot_then_updates_give_the_primary_s_bits)
{
    s_fix_t *f = s_new(1);
    s_step(f, 0); /* before the replica: in its snapshot */
    s_snapshot(f, S_TOKEN);
    ck_assert_int_eq(f->refused, 0);
    ck_assert_int_eq(f->nsent, 1);
    ck_assert_int_eq(f->sent[0], PS_MSG_REPLICA);
    ck_assert_int_eq(f->in_step_version, ps_consistency_version(f->pcons));
    ck_assert_int_eq(f->follows, 1);
    ck_assert_int_eq(f->in_step, 1);
    ck_assert_uint_eq(f->token, S_TOKEN);
    ck_assert_int_eq(ps_follow_flush(f->follow), 0);
    ck_assert_int_eq(f->nacks, 1); /* one ack for the drain: its last message */
    ck_assert_uint_eq(f->acks[0], f->next_id);
    ck_assert_int_eq(ps_follow_flush(f->follow), 0);
    ck_assert_int_eq(f->nacks, 1); /* nothing owed */
    for (int64_t t = 1; t <= 3; t++) {
        const int first = f->nupdates;
        s_step(f, t);
        s_replicate(f, first);
        ck_assert_int_eq(ps_follow_flush(f->follow), 0);
        ck_assert_uint_eq(f->acks[f->nacks - 1], f->next_id);
    }
    ck_assert_int_eq(f->worker_acks, 1 + 4 * S_WORKERS); /* the init, each push */
    ck_assert_int_eq(f->refused, 0);
    ck_assert_int_eq(f->nsent, 1); /* in step once */
    ck_assert_int_eq(ps_consistency_version(f->rcons), ps_consistency_version(f->pcons));
    ck_assert_mem_eq(ps_store_values(f->rstore, 0), ps_store_values(f->pstore, 0),
                     S_N * sizeof(float));
    ck_assert_mem_eq(ps_store_state(f->rstore, 0), ps_store_state(f->pstore, 0),
                     S_N * sizeof(float));
    s_free(f);
}
END_TEST

START_TEST(strangers_are_refused_and_a_bad_primary_message_ends_it)
{
    s_fix_t *f = s_new(1);
    s_snapshot(f, S_TOKEN + 1); /* a wrong token */
    ck_assert_int_eq(f->status, PS_ENOENT);
    const int refused = f->refused;
    ck_assert_int_gt(refused, 0);
    s_snapshot(f, S_TOKEN);
    Shardps__ReplicaSnapshot sn = SHARDPS__REPLICA_SNAPSHOT__INIT;
    float v[S_N] = {0};
    s_deliver(f, PS_MSG_REPLICA_SNAPSHOT, 2, S_TOKEN, (ps_range_t){0, S_N}, &sn.base, v,
              sizeof v); /* another server */
    ck_assert_int_eq(f->refused, refused + 1);
    ck_assert_int_eq(f->status, PS_ENOENT);
    ck_assert_int_eq(ps_follow_flush(f->follow), 0); /* strangers end nothing */
    ck_assert_int_eq(f->nacks, 1);
    ck_assert_mem_eq(ps_store_values(f->rstore, 0), ps_store_values(f->pstore, 0), sizeof v);
    /* the primary's update twice: out of step */
    s_step(f, 0);
    s_replicate(f, 0);
    ck_assert_int_eq(f->refused, refused + 1);
    ck_assert_int_eq(ps_follow_flush(f->follow), 0);
    s_replicate(f, 0);
    ck_assert_int_eq(f->refused, refused + 2);
    ck_assert_int_eq(f->status, PS_ESTATE);
    ck_assert_msg(strstr(f->why, "out of order"), "reason '%s'", f->why);
    ck_assert_int_eq(ps_follow_flush(f->follow), PS_ESTATE);
    s_free(f);
}
END_TEST

START_TEST(a_new_primary_is_followed_from_its_snapshot)
{
    s_fix_t *f = s_new(1);
    ps_follow_listening(f->follow, "tcp://127.0.0.1:5555");
    ck_assert_str_eq(f->endpoint, "tcp://127.0.0.1:5555");
    ck_assert_int_eq(f->follows, 1);
    ck_assert_int_eq(f->in_step, 0);
    s_snapshot(f, S_TOKEN);
    Shardps__Replica r = SHARDPS__REPLICA__INIT;
    r.token = S_TOKEN + 10;
    ps_follow_new_primary(f->follow, &r); /* before the drain's end: its ack is dropped */
    ck_assert_uint_eq(f->view.replica_token, S_TOKEN + 10);
    ck_assert_uint_eq(f->token, S_TOKEN + 10);
    ck_assert_int_eq(f->in_step, 0);
    ck_assert_int_eq(f->sent[f->nsent - 1], PS_MSG_PEER_READY);
    ck_assert_str_eq(f->peer_endpoint, "tcp://127.0.0.1:5555");
    ck_assert_int_eq(ps_follow_flush(f->follow), 0);
    ck_assert_int_eq(f->nacks, 0);
    s_step(f, 0);
    s_replicate(f, 0); /* the old primary's token */
    ck_assert_int_eq(f->status, PS_ENOENT);
    ck_assert_int_eq(ps_follow_flush(f->follow), 0);
    f->refused = 0;
    s_snapshot(f, S_TOKEN + 10);
    ck_assert_int_eq(f->refused, 0);
    ck_assert_int_eq(f->in_step, 1);
    s_free(f);
}
END_TEST

START_TEST(a_primary_follows_no_one)
{
    s_fix_t *f = s_new(0);
    ps_follow_listening(f->follow, "tcp://127.0.0.1:5555");
    ck_assert_int_eq(f->follows, 0); /* not registered as a replica */
    s_snapshot(f, S_TOKEN);
    ck_assert_int_eq(f->status, PS_ENOENT);
    ck_assert_int_eq(ps_follow_flush(f->follow), 0);
    ck_assert_int_eq(f->nacks, 0);
    ck_assert_int_eq(f->nsent, 0);
    s_free(f);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("replica_follow");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, snapshot_then_updates_give_the_primary_s_bits);
    tcase_add_test(tc, strangers_are_refused_and_a_bad_primary_message_ends_it);
    tcase_add_test(tc, a_new_primary_is_followed_from_its_snapshot);
    tcase_add_test(tc, a_primary_follows_no_one);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
