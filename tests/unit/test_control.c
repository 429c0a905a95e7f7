/*
 * tests/unit/test_control.c - a server's handling of the scheduler's control
 * messages, over a real store and consistency and no sockets: membership
 * changes the live workers and server 0 reports the step; a join's prepare
 * records the joiner's token and answers the held version, and a bad join
 * step still ends the hold; a timed checkpoint is written at the agreed
 * step; checkpoints every N steps are written once each; a failover rolls
 * the shard back to its checkpoint, stamps the new generation, answers
 * FAILOVER_READY, reports the first step after, and makes the old
 * generation's data messages stale; a stale, malformed or unloadable
 * failover changes nothing or aborts.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/log.h"
#include "proto/codec.h"
#include "server/consistency.h"
#include "server/checkpoint.h"
#include "server/control.h"
#include "server/store.h"
#include "tests/unit/testutil.h"

enum { S_N = 8, S_WORKERS = 2, S_MAX_SENT = 32 };

/* A message the control module sent the scheduler. */
typedef struct {
    ps_msg_type_t type;
    uint8_t body[4096];
    size_t len;
} s_sent_t;

/* A store of S_N keys, a sync consistency of S_WORKERS workers, a view and
 * the control over them, with a record of what it sent. */
typedef struct {
    ps_job_t job;
    ps_store_t *store;
    ps_consistency_t *cons;
    ps_view_t *view;
    ps_control_t *ctl;
    s_sent_t sent[S_MAX_SENT];
    int nsent;
    int64_t generation; /* the last ops.generation */
    int aborted;        /* ops.abort calls */
    char dir[64];       /* the checkpoint directory */
    char why[160];
} s_fix_t;

/* Records what was sent, packed as it would go on the wire. */
static void s_on_send(void *ctx, ps_msg_type_t type, const ProtobufCMessage *body)
{
    s_fix_t *f = ctx;
    ck_assert_int_lt(f->nsent, S_MAX_SENT);
    const size_t len = body ? protobuf_c_message_get_packed_size(body) : 0;
    ck_assert_uint_le(len, sizeof f->sent[0].body);
    f->sent[f->nsent] = (s_sent_t){.type = type, .len = len};
    if (body) {
        protobuf_c_message_pack(body, f->sent[f->nsent].body);
    }
    f->nsent++;
}

static void s_on_generation(void *ctx, int64_t generation)
{
    ((s_fix_t *)ctx)->generation = generation;
}

static void s_on_abort(void *ctx, const char *why)
{
    (void)why;
    ((s_fix_t *)ctx)->aborted++;
}

static void s_on_ack(void *ctx, const void *asker, ps_range_t range, int64_t version)
{
    (void)ctx, (void)asker, (void)range, (void)version;
}

static void s_on_reply(void *ctx, const void *asker, ps_range_t part, const float *values,
                       int64_t version)
{
    (void)ctx, (void)asker, (void)part, (void)values, (void)version;
}

static void s_on_stepped(void *ctx, int64_t version)
{
    (void)version;
    s_fix_t *f = ctx;
    if (f->ctl) {
        ps_control_stepped(f->ctl);
    }
}

/* A fixture for mode at rank 0, its store initialised; checkpoints every
 * `every` steps into a fresh directory. Free with s_free. */
static s_fix_t *s_new(ps_mode_t mode, int every)
{
    s_fix_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    ps_job_defaults(&f->job);
    f->job.mode = mode;
    f->job.lr = 0.5;
    f->job.momentum = 0;
    snprintf(f->dir, sizeof f->dir, "/tmp/sps-control-unit.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    f->view = calloc(1, sizeof *f->view);
    ck_assert_ptr_nonnull(f->view);
    f->view->num_servers = 1;
    f->view->num_workers = S_WORKERS;
    f->view->num_params = S_N;
    f->view->steps_per_epoch = 100;
    f->view->total_steps = 1000;
    f->view->servers[0] = (ps_server_info_t){.rank = 0, .endpoint = "tcp://127.0.0.1:1",
                                             .begin = 0, .end = S_N};
    f->view->job = f->job;
    f->view->checkpoint_every = every;
    snprintf(f->view->checkpoint_dir, sizeof f->view->checkpoint_dir, "%s", f->dir);
    const ps_range_t keys = {0, S_N};
    ck_assert_int_eq(ps_store_new(&f->store, keys, &f->job), 0);
    ps_consistency_config_t cc = {
        .job = f->job,
        .workers = S_WORKERS,
        .steps_per_epoch = 100,
        .total_steps = 1000,
        .report_missing = 5,
        .asker_size = sizeof(int),
        .ops = {f, s_on_ack, s_on_reply, NULL, s_on_stepped},
    };
    ck_assert_int_eq(ps_consistency_new(&f->cons, &cc, f->store), 0);
    const ps_control_config_t cfg = {f->view, 0, f->store, f->cons, NULL,
                                     {f, s_on_send, s_on_generation, s_on_abort}};
    ck_assert_int_eq(ps_control_new(&f->ctl, &cfg), 0);
    float v[S_N];
    ps_test_fill(v, S_N, -1, 1, 1);
    int asker = 0;
    ps_request_t r = {0, 0, 0, keys, v, NULL, &asker};
    ck_assert_int_eq(ps_consistency_init(f->cons, &r, f->why, sizeof f->why), 0);
    return f;
}

static void s_free(s_fix_t *f)
{
    ps_control_destroy(&f->ctl);
    ck_assert_ptr_null(f->ctl);
    ps_consistency_destroy(&f->cons);
    ps_store_destroy(&f->store);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    ck_assert_int_eq(system(cmd), 0);
    free(f->view);
    free(f);
}

/* Worker w pushes a gradient of every key for step; as the server's loop,
 * tells the control a push went in. Returns what the push returned. */
static int s_push(s_fix_t *f, int w, int64_t step)
{
    float g[S_N];
    ps_test_fill(g, S_N, -1, 1, 100 + (uint64_t)step * 7 + (uint64_t)w);
    ps_request_t r = {w, step, step, {0, S_N}, g, NULL, &w};
    int rc = ps_consistency_push(f->cons, &r, f->why, sizeof f->why);
    ps_control_pushed(f->ctl);
    return rc;
}

/* Both workers push step. */
static void s_step(s_fix_t *f, int64_t step)
{
    for (int w = 0; w < S_WORKERS; w++) {
        ck_assert_int_eq(s_push(f, w, step), 0);
    }
}

/* Hands the control message m of type, packed as it comes off the wire. */
static int s_handle(s_fix_t *f, ps_msg_type_t type, const ProtobufCMessage *m)
{
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack(m, &body, &len), 0);
    int rc = ps_control_handle(f->ctl, type, body, len);
    free(body);
    return rc;
}

/* MSG_MEMBERS of n workers, live[w] non-zero for each live one. */
static int s_members_msg(s_fix_t *f, const unsigned char *live, int n)
{
    int32_t ranks[PS_MAX_WORKERS];
    Shardps__Members m = SHARDPS__MEMBERS__INIT;
    m.num_workers = n;
    m.live = ranks;
    for (int w = 0; w < n; w++) {
        if (live[w]) {
            ranks[m.n_live++] = w;
        }
    }
    return s_handle(f, PS_MSG_MEMBERS, &m.base);
}

/* A JoinStep of the given values. */
static Shardps__JoinStep s_js(int64_t step, int worker, int checkpoint, uint64_t token)
{
    Shardps__JoinStep js = SHARDPS__JOIN_STEP__INIT;
    js.step = step;
    js.worker = worker;
    js.checkpoint = checkpoint != 0;
    js.token = token;
    return js;
}

static int s_join_msg(s_fix_t *f, ps_msg_type_t type, Shardps__JoinStep js)
{
    return s_handle(f, type, &js.base);
}

static int s_failover_msg(s_fix_t *f, const ps_view_t *v)
{
    ps_view_pb_t *pb = malloc(sizeof *pb);
    ck_assert_ptr_nonnull(pb);
    ck_assert_int_eq(ps_codec_view_to_pb(v, pb), 0);
    int rc = s_handle(f, PS_MSG_FAILOVER, &pb->pb.base);
    free(pb);
    return rc;
}

/* A sent body unpacked (checked) as a message of d into an arena of the
 * test's; valid until the next call. */
static const void *s_unpack(const s_sent_t *m, const ProtobufCMessageDescriptor *d)
{
    static _Alignas(PS_ARENA_ALIGN) unsigned char buf[1024];
    static ps_arena_t a;
    ps_arena_init(&a, buf, sizeof buf);
    const void *out = ps_codec_unpack(d, m->body, m->len, &a, NULL, 0);
    ck_assert_ptr_nonnull(out);
    return out;
}

/* The view of a failover of generation to checkpoint step (its parts in
 * DIR/step-<step>, one part). Free with free(). */
static ps_view_t *s_failover_view(const s_fix_t *f, int64_t generation, int64_t step)
{
    ps_view_t *v = calloc(1, sizeof *v);
    ck_assert_ptr_nonnull(v);
    *v = *f->view;
    snprintf(v->resume_dir, sizeof v->resume_dir, "%s/step-%lld", f->dir, (long long)step);
    v->resume_parts = 1;
    /* the manifest's entry: the part as written (size 0 when it never was) */
    ps_checkpoint_part_t want = {.step = step, .file = "server-0.safetensors", .end = S_N};
    ps_checkpoint_check(f->dir, &want, &v->resume_files[0]);
    v->start_step = step;
    v->generation = generation;
    return v;
}

/* The last message sent, of type. */
static const s_sent_t *s_last(const s_fix_t *f, ps_msg_type_t type)
{
    ck_assert_int_gt(f->nsent, 0);
    const s_sent_t *m = &f->sent[f->nsent - 1];
    ck_assert_int_eq(m->type, type);
    return m;
}

static Shardps__JoinStep s_last_join_step(const s_fix_t *f)
{
    const Shardps__JoinStep *js = s_unpack(s_last(f, PS_MSG_JOIN_STEP),
                                           &shardps__join_step__descriptor);
    return *js;
}

static Shardps__FailoverReady s_last_ready(const s_fix_t *f)
{
    const Shardps__FailoverReady *r = s_unpack(s_last(f, PS_MSG_FAILOVER_READY),
                                               &shardps__failover_ready__descriptor);
    return *r;
}

static int s_part_exists(const s_fix_t *f, int64_t step)
{
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s/step-%lld/server-0.safetensors", f->dir, (long long)step);
    return stat(path, &st) == 0;
}

START_TEST(members_set_the_live_workers_and_server_0_reports_the_step)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 0);
    s_step(f, 0);
    const unsigned char three[3] = {1, 1, 1}, none[S_WORKERS] = {0, 0}, w0[S_WORKERS] = {1, 0};
    /* a count that is not the view's, no body, nobody live: dropped */
    ck_assert_int_eq(s_members_msg(f, three, 3), 0);
    ck_assert_int_eq(ps_control_handle(f->ctl, PS_MSG_MEMBERS, NULL, 0), 0);
    ck_assert_int_eq(s_members_msg(f, none, S_WORKERS), 0);
    ck_assert_int_eq(f->nsent, 0);
    ck_assert_int_eq(s_push(f, 0, 1), 0); /* step 1 waits for W1 */
    ck_assert_int_eq(ps_consistency_version(f->cons), 1);
    ck_assert_int_eq(s_members_msg(f, w0, S_WORKERS), 0);
    ck_assert_int_eq(ps_consistency_version(f->cons), 2); /* W0 alone completes it */
    Shardps__JoinStep js = s_last_join_step(f);
    ck_assert_int_eq(js.members, 1);
    ck_assert_int_eq(js.step, 1); /* the version it took effect at */
    ck_assert_int_eq(js.worker, -1);
    ck_assert_int_eq(s_push(f, 1, 2), PS_ENOENT); /* W1 is no longer live */
    s_free(f);
}
END_TEST

START_TEST(join_prepare_records_the_token_and_answers_the_held_version)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 0);
    s_step(f, 0);
    ck_assert_int_eq(s_join_msg(f, PS_MSG_JOIN_PREPARE, s_js(0, 1, 0, 77)), 0);
    ck_assert_uint_eq(f->view->worker_tokens[1], 77);
    Shardps__JoinStep js = s_last_join_step(f);
    ck_assert_int_eq(js.step, 1);
    ck_assert_int_eq(js.worker, -1);
    /* held: step 1 applies, step 2 waits */
    s_step(f, 1);
    s_step(f, 2);
    ck_assert_int_eq(ps_consistency_version(f->cons), 2);
    /* a bad join step never leaves the server held */
    ck_assert_int_eq(ps_control_handle(f->ctl, PS_MSG_JOIN_STEP, "junk", 4), 0);
    ck_assert_int_eq(ps_consistency_version(f->cons), 3);
    s_free(f);
}
END_TEST

START_TEST(a_timed_checkpoint_is_written_at_the_agreed_step)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 0);
    s_step(f, 0);
    s_step(f, 1);
    ck_assert_int_eq(s_join_msg(f, PS_MSG_JOIN_PREPARE, s_js(0, -1, 0, 0)), 0);
    ck_assert_int_eq(s_last_join_step(f).step, 2);
    ck_assert(!s_part_exists(f, 2));
    ck_assert_int_eq(s_join_msg(f, PS_MSG_JOIN_STEP, s_js(2, -1, 1, 0)), 0);
    ck_assert(s_part_exists(f, 2));
    const s_sent_t *m = s_last(f, PS_MSG_CHECKPOINT);
    ps_checkpoint_part_t part;
    ck_assert_int_eq(
        ps_codec_part_from_pb(s_unpack(m, &shardps__checkpoint__descriptor), &part, NULL, 0), 0);
    ck_assert_int_eq(part.step, 2);
    ck_assert_uint_eq(part.begin, 0);
    ck_assert_uint_eq(part.end, S_N);
    s_free(f);
}
END_TEST

START_TEST(checkpoints_every_n_steps_are_written_once_each)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 2);
    for (int64_t t = 0; t < 5; t++) {
        s_step(f, t);
    }
    ck_assert(!s_part_exists(f, 1));
    ck_assert(s_part_exists(f, 2));
    ck_assert(!s_part_exists(f, 3));
    ck_assert(s_part_exists(f, 4));
    ck_assert_int_eq(f->nsent, 2);
    ps_control_stepped(f->ctl); /* at version 5: not due */
    ck_assert_int_eq(f->nsent, 2);
    s_free(f);
}
END_TEST

START_TEST(failover_rolls_back_to_the_checkpoint_and_makes_old_messages_stale)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 2);
    s_step(f, 0);
    s_step(f, 1);
    float at2[S_N];
    memcpy(at2, ps_store_values(f->store, 0), sizeof at2);
    s_step(f, 2);
    ck_assert_int_eq(ps_consistency_version(f->cons), 3);
    const int before = f->nsent;
    ps_view_t *v = s_failover_view(f, 0, 2); /* not newer than ours: ignored */
    ck_assert_int_eq(s_failover_msg(f, v), 0);
    v->generation = 1;
    v->num_servers = 2; /* not the job's: dropped */
    v->servers[1] = (ps_server_info_t){.rank = 1, .endpoint = "tcp://127.0.0.1:2",
                                       .begin = S_N, .end = S_N};
    ck_assert_int_eq(s_failover_msg(f, v), 0);
    ck_assert_int_eq(ps_control_handle(f->ctl, PS_MSG_FAILOVER, NULL, 0), 0);
    ck_assert_int_eq(f->nsent, before);
    ck_assert_int_eq(ps_consistency_version(f->cons), 3);
    v->num_servers = 1;
    ck_assert_int_eq(s_failover_msg(f, v), 0);
    ck_assert_int_eq(ps_consistency_version(f->cons), 2);
    ck_assert_mem_eq(ps_store_values(f->store, 0), at2, sizeof at2);
    ck_assert_int_eq(f->generation, 1);
    Shardps__FailoverReady r = s_last_ready(f);
    ck_assert_int_eq(r.generation, 1);
    ck_assert_int_eq(r.step, 2);
    ck_assert_int_eq(r.from_version, 3);
    ck_assert_int_eq(r.stepped, 0);
    /* data of generation 0 is stale now, and counted */
    ck_assert_int_eq(ps_control_is_stale(f->ctl, 1, f->why, sizeof f->why), 0);
    ck_assert_int_eq(ps_control_is_stale(f->ctl, 0, f->why, sizeof f->why), 1);
    ck_assert_uint_eq(ps_control_stale(f->ctl), 1);
    /* the first step after the rollback is reported, once */
    s_step(f, 2);
    r = s_last_ready(f);
    ck_assert_int_eq(r.stepped, 1);
    ck_assert_int_eq(r.step, 3);
    const int after = f->nsent;
    s_step(f, 3);
    ck_assert_int_eq(f->nsent, after + 1); /* step-4's checkpoint, no other ready */
    s_last(f, PS_MSG_CHECKPOINT);
    free(v);
    s_free(f);
}
END_TEST

START_TEST(a_failover_that_cannot_load_its_checkpoint_aborts)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 0);
    s_step(f, 0);
    ps_view_t *v = s_failover_view(f, 1, 1); /* step-1 was never written */
    ck_assert_int_ne(s_failover_msg(f, v), 0);
    ck_assert_int_eq(f->aborted, 1);
    ck_assert_int_eq(f->generation, 0);
    ck_assert_int_eq(f->nsent, 0);
    free(v);
    s_free(f);
}
END_TEST

START_TEST(async_failover_keeps_the_version_and_answers_at_once)
{
    s_fix_t *f = s_new(PS_MODE_ASYNC, 0);
    ck_assert_int_eq(s_push(f, 0, 0), 0);
    ck_assert_int_eq(s_push(f, 1, 0), 0);
    ck_assert_int_eq(ps_consistency_version(f->cons), 2);
    ps_view_t *v = s_failover_view(f, 1, 1); /* its parts are not read */
    v->replaced = 1;
    ck_assert_int_eq(s_failover_msg(f, v), 0);
    ck_assert_int_eq(ps_consistency_version(f->cons), 2);
    Shardps__FailoverReady r = s_last_ready(f);
    ck_assert_int_eq(r.step, 2);
    ck_assert_int_eq(r.from_version, 2);
    ck_assert_int_eq(r.stepped, 0);
    free(v);
    s_free(f);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("control");
    TCase *tc = tcase_create("control");
    tcase_add_test(tc, members_set_the_live_workers_and_server_0_reports_the_step);
    tcase_add_test(tc, join_prepare_records_the_token_and_answers_the_held_version);
    tcase_add_test(tc, a_timed_checkpoint_is_written_at_the_agreed_step);
    tcase_add_test(tc, checkpoints_every_n_steps_are_written_once_each);
    tcase_add_test(tc, failover_rolls_back_to_the_checkpoint_and_makes_old_messages_stale);
    tcase_add_test(tc, a_failover_that_cannot_load_its_checkpoint_aborts);
    tcase_add_test(tc, async_failover_keeps_the_version_and_answers_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    ps_log_set_level("err"); /* the dropped messages' warnings are expected */
    return ps_test_run(s_suite());
}
