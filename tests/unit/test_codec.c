/*
 * tests/unit/test_codec.c - the wire: proto/codec (header and control bodies)
 * and proto/msg (header + payload frames over a real ZeroMQ pair).
 *
 * Round trips check every field; each malformed input is rejected with
 * exactly PS_EPROTO. Some inputs protobuf-c would never produce from our
 * structs (too many epochs, a missing job) are written byte by byte. The msg
 * tests use an inproc ROUTER/DEALER pair whose context is created inside the
 * test function, after Check has forked.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/job.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "tests/unit/testutil.h"

/* ---- helpers ------------------------------------------------------------ */

/* A header with every field set to a distinctive value. */
static ps_header_t s_full_header(void)
{
    ps_header_t h;
    memset(&h, 0, sizeof h);
    h.protocol = PS_PROTOCOL_VERSION;
    h.type = PS_MSG_PUSH;
    h.role = PS_ROLE_WORKER;
    h.sender = 3;
    h.request_id = 0x123456789abcdef0ull;
    h.begin = 1ull << 40;
    h.end = (1ull << 40) + 1000;
    h.step = -7;
    h.version = 1ll << 50;
    h.dtype = PS_DTYPE_F32;
    h.payload_len = 4000;
    h.status = PS_ERANGE;
    snprintf(h.error, sizeof h.error, "key range [a, b) is not inside this server's shard");
    h.ring_step = 5;
    h.token = 0xfedcba9876543210ull;
    h.clock = 12345.678901234;
    h.pull_version = (1ll << 50) + 3;
    return h;
}

/* Packs h; fails the test if packing fails. */
static int s_pack(const ps_header_t *h, uint8_t *buf, size_t cap)
{
    int n = ps_codec_pack_header(h, buf, cap);
    ck_assert_int_gt(n, 0);
    return n;
}

/* Packs h and expects unpacking to fail with PS_EPROTO and a reason. */
static void s_expect_rejected(const ps_header_t *h, const char *what)
{
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(h, buf, sizeof buf);
    ps_header_t out;
    int rc = ps_codec_unpack_header(buf, (size_t)n, &out);
    ck_assert_msg(rc == PS_EPROTO, "%s: got %d, want PS_EPROTO", what, rc);
    ck_assert_msg(out.error[0] != '\0', "%s: no reason given", what);
}

/* Appends a protobuf varint. Returns the bytes written. */
static size_t s_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static ps_job_t s_job(void)
{
    ps_job_t j;
    ps_job_defaults(&j);
    snprintf(j.model, sizeof j.model, "cnn");
    j.mode = PS_MODE_ASYNC;
    j.lr = 0.0125;
    j.momentum = 0.5;
    j.weight_decay = 1e-4;
    j.batch = 32;
    j.epochs = 3;
    j.max_steps = 1234567890123ll;
    j.seed = 0xfeedfacecafebeefull;
    snprintf(j.optimizer, sizeof j.optimizer, "adam");
    j.schedule.kind = PS_LR_STEP;
    j.schedule.every = 2;
    j.schedule.gamma = 0.5;
    j.schedule.warmup_steps = 100;
    return j;
}

static void s_assert_job_eq(const ps_job_t *a, const ps_job_t *b)
{
    ck_assert_str_eq(a->model, b->model);
    ck_assert_int_eq(a->mode, b->mode);
    ck_assert_str_eq(a->optimizer, b->optimizer);
    ck_assert(a->lr == b->lr);
    ck_assert(a->momentum == b->momentum);
    ck_assert(a->weight_decay == b->weight_decay);
    ck_assert_int_eq(a->batch, b->batch);
    ck_assert_int_eq(a->epochs, b->epochs);
    ck_assert_int_eq(a->max_steps, b->max_steps);
    ck_assert_uint_eq(a->seed, b->seed);
    ck_assert_int_eq(a->schedule.kind, b->schedule.kind);
    ck_assert_int_eq(a->schedule.every, b->schedule.every);
    ck_assert(a->schedule.gamma == b->schedule.gamma);
    ck_assert_int_eq(a->schedule.warmup_steps, b->schedule.warmup_steps);
}

/* A view of P = 235146 (the MLP) over s servers, tiled by ps_range_split. */
static ps_view_t *s_view(int s)
{
    ps_view_t *v = calloc(1, sizeof *v);
    ck_assert_ptr_nonnull(v);
    v->num_params = 235146;
    v->num_workers = 4;
    v->num_servers = s;
    v->steps_per_epoch = 234;
    v->total_steps = 2340;
    v->job = s_job();
    ps_range_t r[PS_MAX_SERVERS];
    ck_assert_int_eq(ps_range_split(v->num_params, s, r), 0);
    for (int i = 0; i < s; i++) {
        v->servers[i].rank = i;
        snprintf(v->servers[i].endpoint, sizeof v->servers[i].endpoint,
                 "tcp://10.0.0.%d:%d", i + 2, 41000 + i);
        v->servers[i].begin = r[i].begin;
        v->servers[i].end = r[i].end;
    }
    return v;
}

/* Packs v and unpacks it into a fresh view. Returns the unpack status. */
static int s_view_trip(const ps_view_t *v, ps_view_t *out)
{
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_view(v, &body, &len), 0);
    int rc = ps_codec_unpack_view(body, len, out);
    free(body);
    return rc;
}

/* Bytes protobuf-c cannot decode: a varint longer than ten bytes. */
static const uint8_t s_garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/* ---- header ------------------------------------------------------------- */

START_TEST(header_round_trips_every_field)
{
    ps_header_t h = s_full_header(), out;
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    memset(&out, 0xa5, sizeof out);
    ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)n, &out), 0);
    ck_assert_uint_eq(out.protocol, PS_PROTOCOL_VERSION);
    ck_assert_int_eq(out.type, h.type);
    ck_assert_int_eq(out.role, h.role);
    ck_assert_int_eq(out.sender, h.sender);
    ck_assert_uint_eq(out.request_id, h.request_id);
    ck_assert_uint_eq(out.begin, h.begin);
    ck_assert_uint_eq(out.end, h.end);
    ck_assert_int_eq(out.step, h.step);
    ck_assert_int_eq(out.version, h.version);
    ck_assert_uint_eq(out.dtype, h.dtype);
    ck_assert_uint_eq(out.payload_len, h.payload_len);
    ck_assert_int_eq(out.status, h.status);
    ck_assert_str_eq(out.error, h.error);
    ck_assert_int_eq(out.ring_step, h.ring_step);
    ck_assert_uint_eq(out.token, h.token);
    ck_assert(out.clock == h.clock);
    ck_assert_int_eq(out.pull_version, h.pull_version);
}
END_TEST

START_TEST(header_round_trips_every_type_and_role)
{
    for (int t = PS_MSG_REGISTER; t <= PS_MSG_TYPE_MAX; t++) {
        for (int r = PS_ROLE_SCHEDULER; r <= PS_ROLE_WORKER; r++) {
            ps_header_t h, out;
            ps_msg_header(&h, (ps_msg_type_t)t, (ps_role_t)r, r == PS_ROLE_SCHEDULER ? 0 : 5);
            uint8_t buf[PS_HEADER_MAX];
            int n = s_pack(&h, buf, sizeof buf);
            ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)n, &out), 0);
            ck_assert_int_eq(out.type, t);
            ck_assert_int_eq(out.role, r);
            ck_assert_str_eq(out.error, "");
        }
    }
}
END_TEST

START_TEST(header_pack_reports_a_small_buffer)
{
    ps_header_t h = s_full_header();
    uint8_t buf[8];
    ck_assert_int_eq(ps_codec_pack_header(&h, buf, sizeof buf), PS_EINVAL);
}
END_TEST

START_TEST(header_rejects_garbage_and_empty)
{
    ps_header_t out;
    ck_assert_int_eq(ps_codec_unpack_header(s_garbage, sizeof s_garbage, &out), PS_EPROTO);
    ck_assert_str_ne(out.error, "");
    const char text[] = "hello, shardps! this is not a header";
    ck_assert_int_eq(ps_codec_unpack_header(text, sizeof text - 1, &out), PS_EPROTO);
    /* zero bytes decode to all defaults: protocol 0 */
    ck_assert_int_eq(ps_codec_unpack_header(text, 0, &out), PS_EPROTO);
}
END_TEST

START_TEST(header_rejects_truncation)
{
    /* The error text is the last field and over half the header, so every cut
     * below lands inside it: a length-delimited field shorter than it says. */
    ps_header_t h = s_full_header(), out;
    memset(h.error, 'x', sizeof h.error - 1);
    h.error[sizeof h.error - 1] = '\0';
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)n / 2, &out), PS_EPROTO);
    ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)n - 1, &out), PS_EPROTO);
    /* a cut inside the first varint */
    h = s_full_header();
    h.protocol = 300; /* two-byte varint */
    n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(ps_codec_unpack_header(buf, 2, &out), PS_EPROTO);
}
END_TEST

START_TEST(header_rejects_wrong_protocol_but_keeps_what_it_read)
{
    const uint32_t bad[] = {0, PS_PROTOCOL_VERSION + 1, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_header_t h = s_full_header(), out;
        h.protocol = bad[i];
        uint8_t buf[PS_HEADER_MAX];
        int n = s_pack(&h, buf, sizeof buf);
        ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)n, &out), PS_EPROTO);
        ck_assert_ptr_nonnull(strstr(out.error, "protocol"));
        /* enough is left to address an error reply */
        ck_assert_uint_eq(out.request_id, h.request_id);
        ck_assert_int_eq(out.sender, h.sender);
    }
}
END_TEST

START_TEST(header_rejects_unknown_type)
{
    const int bad[] = {PS_MSG_NONE, PS_MSG_TYPE_MAX + 1, 99, -1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_header_t h = s_full_header();
        h.type = (ps_msg_type_t)bad[i];
        s_expect_rejected(&h, "unknown type");
    }
}
END_TEST

START_TEST(header_rejects_unknown_role)
{
    const int bad[] = {PS_ROLE_NONE, PS_ROLE_WORKER + 1, 7, -3};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_header_t h = s_full_header();
        h.role = (ps_role_t)bad[i];
        s_expect_rejected(&h, "unknown role");
    }
}
END_TEST

START_TEST(header_rejects_reversed_range)
{
    ps_header_t h = s_full_header();
    h.begin = 100;
    h.end = 99;
    s_expect_rejected(&h, "reversed range");
    /* an empty range is well-formed here; servers refuse it in context */
    h.end = 100;
    uint8_t buf[PS_HEADER_MAX];
    ps_header_t out;
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)n, &out), 0);
}
END_TEST

START_TEST(header_rejects_non_f32_payload)
{
    ps_header_t h = s_full_header();
    h.dtype = PS_DTYPE_NONE;
    s_expect_rejected(&h, "dtype none with payload");
    h.dtype = PS_DTYPE_MAX + 1;
    s_expect_rejected(&h, "unknown dtype with payload");
    h.dtype = PS_DTYPE_BF16;
    h.nnz = 3;
    s_expect_rejected(&h, "nnz on a dense payload");
    h.dtype = 77;
    s_expect_rejected(&h, "dtype 77 with payload");
}
END_TEST

START_TEST(header_push_pull_is_a_type_and_rejects_negative_pull_version)
{
    ps_header_t h = s_full_header(), out;
    h.type = PS_MSG_PUSH_PULL;
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)n, &out), 0);
    ck_assert_int_eq(out.type, PS_MSG_PUSH_PULL);
    ck_assert_str_eq(ps_codec_type_name(PS_MSG_PUSH_PULL), "push-pull");
    h.pull_version = -1;
    s_expect_rejected(&h, "negative pull version");
}
END_TEST

START_TEST(header_rejects_sparse_keys)
{
    ps_header_t h = s_full_header(), out;
    uint8_t buf[PS_HEADER_MAX];
    size_t n = (size_t)s_pack(&h, buf, sizeof buf - 8);
    /* field 8 (keys), packed: tag, length, one key; protobuf merges the two parts */
    buf[n++] = (8 << 3) | 2;
    buf[n++] = 1;
    buf[n++] = 5;
    ck_assert_int_eq(ps_codec_unpack_header(buf, n, &out), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(out.error, "sparse"));
}
END_TEST

START_TEST(header_rejects_a_negative_ring_step)
{
    ps_header_t h = s_full_header(), out;
    h.type = PS_MSG_RING_DATA;
    h.ring_step = -1;
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)n, &out), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(out.error, "ring step"));
}
END_TEST

/* ---- control bodies ----------------------------------------------------- */

START_TEST(register_round_trips)
{
    ps_register_t r = {.role = PS_ROLE_SERVER, .rank = 2, .pid = 4242}, out;
    snprintf(r.endpoint, sizeof r.endpoint, "tcp://10.0.0.2:41001");
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_register(&r, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_register(body, len, &out), 0);
    free(body);
    ck_assert_int_eq(out.role, PS_ROLE_SERVER);
    ck_assert_int_eq(out.rank, 2);
    ck_assert_uint_eq(out.pid, 4242);
    ck_assert_str_eq(out.endpoint, r.endpoint);
    /* a worker asking for any rank, no endpoint */
    ps_register_t w = {.role = PS_ROLE_WORKER, .rank = -1, .pid = 1};
    ck_assert_int_eq(ps_codec_pack_register(&w, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_register(body, len, &out), 0);
    free(body);
    ck_assert_int_eq(out.role, PS_ROLE_WORKER);
    ck_assert_int_eq(out.rank, -1);
    ck_assert_str_eq(out.endpoint, "");
}
END_TEST

START_TEST(register_rejects_other_roles_and_garbage)
{
    const ps_role_t bad[] = {PS_ROLE_NONE, PS_ROLE_SCHEDULER, (ps_role_t)9};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_register_t r = {.role = bad[i], .rank = 0}, out;
        uint8_t *body;
        size_t len;
        ck_assert_int_eq(ps_codec_pack_register(&r, &body, &len), 0);
        ck_assert_int_eq(ps_codec_unpack_register(body, len, &out), PS_EPROTO);
        free(body);
    }
    ps_register_t out;
    ck_assert_int_eq(ps_codec_unpack_register(s_garbage, sizeof s_garbage, &out), PS_EPROTO);
}
END_TEST

START_TEST(register_ack_round_trips_the_job)
{
    ps_register_ack_t a = {.rank = 7, .token = UINT64_MAX - 5, .job = s_job(),
                           .job_id = "slurm-42.0", .job_hash = "0123456789abcdef",
                           .run_id = 0x1234567890abcdefull},
                      got;
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_register_ack(&a, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_register_ack(body, len, &got), 0);
    free(body);
    ck_assert_int_eq(got.rank, 7);
    ck_assert_uint_eq(got.run_id, 0x1234567890abcdefull);
    ck_assert_uint_eq(got.token, UINT64_MAX - 5);
    s_assert_job_eq(&got.job, &a.job);
    ck_assert_str_eq(got.job_id, "slurm-42.0");
    ck_assert_str_eq(got.job_hash, "0123456789abcdef");
    /* the defaults too (sync, mlp) */
    a = (ps_register_ack_t){.rank = 0, .token = 1};
    ps_job_defaults(&a.job);
    ck_assert_int_eq(ps_codec_pack_register_ack(&a, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_register_ack(body, len, &got), 0);
    free(body);
    ck_assert_int_eq(got.rank, 0);
    ck_assert_uint_eq(got.token, 1);
    s_assert_job_eq(&got.job, &a.job);
}
END_TEST

START_TEST(register_ack_rejects_a_bad_or_missing_job)
{
    ps_register_ack_t a = {.rank = 1, .job = s_job()}, got;
    uint8_t *body;
    size_t len;
    snprintf(a.job.model, sizeof a.job.model, "resnet");
    ck_assert_int_eq(ps_codec_pack_register_ack(&a, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_register_ack(body, len, &got), PS_EPROTO);
    free(body);
    a.job = s_job();
    a.job.lr = -1.0;
    ck_assert_int_eq(ps_codec_pack_register_ack(&a, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_register_ack(body, len, &got), PS_EPROTO);
    free(body);
    /* RegisterAck{rank: 3} with no job at all */
    const uint8_t no_job[] = {(1 << 3) | 0, 3};
    ck_assert_int_eq(ps_codec_unpack_register_ack(no_job, sizeof no_job, &got), PS_EPROTO);
    ck_assert_int_eq(ps_codec_unpack_register_ack(s_garbage, sizeof s_garbage, &got),
                     PS_EPROTO);
}
END_TEST

START_TEST(register_carries_the_job_identity_and_build)
{
    ps_register_t r = {.role = PS_ROLE_WORKER, .rank = 1, .job_id = "job-a",
                       .job_hash = "fedcba9876543210"},
                  out;
    ps_codec_build_id(r.build, sizeof r.build);
    ck_assert_ptr_nonnull(strstr(r.build, " protocol 6"));
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_register(&r, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_register(body, len, &out), 0);
    free(body);
    ck_assert_str_eq(out.job_id, "job-a");
    ck_assert_str_eq(out.job_hash, "fedcba9876543210");
    ck_assert_str_eq(out.build, r.build);
}
END_TEST

START_TEST(preflight_round_trips_and_bounds_the_pairs)
{
    ps_preflight_pair_t in[3] = {{0, 1, 0.25, 812.5}, {1, 0, 0, 0}, {2, 1, 1.5, 3.0}},
                        out[PS_MAX_SERVERS];
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_preflight(in, 3, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_preflight(body, len, out), 3);
    free(body);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(out[i].server, in[i].server);
        ck_assert_int_eq(out[i].reached, in[i].reached);
        ck_assert_double_eq(out[i].rtt_ms, in[i].rtt_ms);
        ck_assert_double_eq(out[i].mbytes_per_s, in[i].mbytes_per_s);
    }
    ck_assert_int_eq(ps_codec_pack_preflight(in, PS_MAX_SERVERS + 1, &body, &len), PS_EINVAL);
    ck_assert_int_eq(ps_codec_unpack_preflight(s_garbage, sizeof s_garbage, out), PS_EPROTO);
}
END_TEST

START_TEST(model_info_round_trips)
{
    const uint64_t ps[] = {1, 235146, 1ull << 40};
    const char *eps[] = {"", "tcp://10.0.0.3:41002", "tcp://[::1]:5"};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        uint8_t *body;
        size_t len;
        ps_model_info_t in = {.num_params = ps[i], .train_samples = 60000 + i}, out;
        snprintf(in.endpoint, sizeof in.endpoint, "%s", eps[i]);
        ck_assert_int_eq(ps_codec_pack_model_info(&in, &body, &len), 0);
        ck_assert_int_eq(ps_codec_unpack_model_info(body, len, &out), 0);
        free(body);
        ck_assert_uint_eq(out.num_params, ps[i]);
        ck_assert_uint_eq(out.train_samples, 60000 + i);
        ck_assert_str_eq(out.endpoint, eps[i]);
    }
    ps_model_info_t out;
    ck_assert_int_eq(ps_codec_unpack_model_info(s_garbage, sizeof s_garbage, &out),
                     PS_EPROTO);
}
END_TEST

START_TEST(view_round_trips_with_several_servers)
{
    const int ss[] = {1, 3, 7};
    ps_view_t *out = calloc(1, sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (size_t k = 0; k < sizeof ss / sizeof ss[0]; k++) {
        ps_view_t *v = s_view(ss[k]);
        v->joining = (int)k % 2;
        v->resume_step = 100 + (int64_t)k;
        ck_assert_int_eq(s_view_trip(v, out), 0);
        ck_assert_int_eq(out->joining, v->joining);
        ck_assert_int_eq(out->resume_step, v->resume_step);
        ck_assert_uint_eq(out->num_params, v->num_params);
        ck_assert_int_eq(out->num_workers, v->num_workers);
        ck_assert_int_eq(out->num_servers, v->num_servers);
        ck_assert_int_eq(out->steps_per_epoch, v->steps_per_epoch);
        ck_assert_int_eq(out->total_steps, v->total_steps);
        for (int i = 0; i < v->num_servers; i++) {
            ck_assert_int_eq(out->servers[i].rank, i);
            ck_assert_str_eq(out->servers[i].endpoint, v->servers[i].endpoint);
            ck_assert_uint_eq(out->servers[i].begin, v->servers[i].begin);
            ck_assert_uint_eq(out->servers[i].end, v->servers[i].end);
        }
        s_assert_job_eq(&out->job, &v->job);
        free(v);
    }
    free(out);
}
END_TEST

/* An allreduce view: no servers, m workers with endpoints. */
static ps_view_t *s_ring_view(int m)
{
    ps_view_t *v = s_view(1);
    v->num_servers = 0;
    v->num_workers = m;
    v->job.mode = PS_MODE_ALLREDUCE;
    for (int i = 0; i < m; i++) {
        v->workers[i].rank = i;
        snprintf(v->workers[i].endpoint, sizeof v->workers[i].endpoint,
                 "tcp://10.0.1.%d:%d", i + 2, 42000 + i);
    }
    return v;
}

START_TEST(view_round_trips_in_allreduce_mode)
{
    ps_view_t *out = calloc(1, sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (int m = 1; m <= 5; m += 2) {
        ps_view_t *v = s_ring_view(m);
        ck_assert_int_eq(s_view_trip(v, out), 0);
        ck_assert_int_eq(out->num_servers, 0);
        ck_assert_int_eq(out->num_workers, m);
        ck_assert_int_eq(out->job.mode, PS_MODE_ALLREDUCE);
        ck_assert_uint_eq(out->num_params, v->num_params);
        for (int i = 0; i < m; i++) {
            ck_assert_int_eq(out->workers[i].rank, i);
            ck_assert_str_eq(out->workers[i].endpoint, v->workers[i].endpoint);
        }
        free(v);
    }
    /* other modes carry no worker list, whatever the struct holds */
    ps_view_t *v = s_view(2);
    snprintf(v->workers[0].endpoint, sizeof v->workers[0].endpoint, "tcp://10.0.1.2:1");
    ck_assert_int_eq(s_view_trip(v, out), 0);
    ck_assert_str_eq(out->workers[0].endpoint, "");
    free(v);
    free(out);
}
END_TEST

/* Packs v (which must pack), appends extra bytes (protobuf merges appended
 * fields), unpacks. Returns the unpack status. */
static int s_view_trip_plus(const ps_view_t *v, const uint8_t *extra, size_t n,
                            ps_view_t *out)
{
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_view(v, &body, &len), 0);
    uint8_t *all = malloc(len + n);
    ck_assert_ptr_nonnull(all);
    memcpy(all, body, len);
    memcpy(all + len, extra, n);
    int rc = ps_codec_unpack_view(all, len + n, out);
    free(all);
    free(body);
    return rc;
}

START_TEST(view_rejects_servers_in_allreduce_and_workers_elsewhere)
{
    ps_view_t *out = calloc(1, sizeof *out), *v = s_ring_view(3);
    ck_assert_ptr_nonnull(out);
    uint8_t *body;
    size_t len;
    /* our packer refuses what the decoder would */
    v->num_servers = 1;
    ck_assert_int_eq(ps_codec_pack_view(v, &body, &len), PS_EINVAL);
    v->num_servers = 0;
    v->workers[1].endpoint[0] = '\0';
    ck_assert_int_eq(ps_codec_pack_view(v, &body, &len), PS_EINVAL);
    snprintf(v->workers[1].endpoint, sizeof v->workers[1].endpoint, "tcp://10.0.1.3:42001");
    v->workers[2].rank = 1;
    ck_assert_int_eq(ps_codec_pack_view(v, &body, &len), PS_EINVAL);
    v->workers[2].rank = 2;
    /* a server appended: field 3, ServerInfo {endpoint "e", key_end P} */
    uint8_t server[32];
    size_t n = 0;
    server[n++] = (3 << 3) | 2;
    size_t at = n++;
    server[n++] = (2 << 3) | 2;
    server[n++] = 1;
    server[n++] = 'e';
    server[n++] = (4 << 3) | 0;
    n += s_varint(server + n, v->num_params);
    server[at] = (uint8_t)(n - at - 1);
    ck_assert_int_eq(s_view_trip_plus(v, server, n, out), PS_EPROTO);
    /* a fourth worker appended, or one missing (num_workers edited) */
    const uint8_t w3[] = {(7 << 3) | 2, 5, (1 << 3) | 0, 3, (2 << 3) | 2, 1, 'e'};
    ck_assert_int_eq(s_view_trip_plus(v, w3, sizeof w3, out), PS_EPROTO);
    v->num_workers = 2;
    ck_assert_int_eq(s_view_trip(v, out), 0);
    /* field 2 (num_workers) appended again: the last value wins */
    const uint8_t more[] = {(2 << 3) | 0, 3};
    ck_assert_int_eq(s_view_trip_plus(v, more, sizeof more, out), PS_EPROTO);
    free(v);
    /* a worker list in a mode with servers */
    v = s_view(2);
    const uint8_t w0[] = {(7 << 3) | 2, 3, (2 << 3) | 2, 1, 'e'};
    ck_assert_int_eq(s_view_trip_plus(v, w0, sizeof w0, out), PS_EPROTO);
    free(v);
    free(out);
}
END_TEST

START_TEST(view_rejects_ranges_that_do_not_tile)
{
    ps_view_t *out = calloc(1, sizeof *out), *v = s_view(3);
    ck_assert_ptr_nonnull(out);
    /* a gap between S0 and S1 */
    v->servers[1].begin += 1;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    /* an overlap */
    v->servers[1].begin -= 2;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    v->servers[1].begin += 1;
    ck_assert_int_eq(s_view_trip(v, out), 0);
    /* a reversed range that still chains */
    uint64_t b = v->servers[1].begin;
    v->servers[1].end = b - 1;
    v->servers[2].begin = b - 1;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    free(v);
    /* not starting at 0 */
    v = s_view(3);
    v->servers[0].begin = 1;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    /* ending short of, or past, P */
    v->servers[0].begin = 0;
    v->num_params += 1;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    v->num_params -= 2;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    free(v);
    free(out);
}
END_TEST

START_TEST(view_rejects_servers_out_of_rank_order)
{
    ps_view_t *out = calloc(1, sizeof *out), *v = s_view(3);
    ck_assert_ptr_nonnull(out);
    /* ranges tile, but the first range belongs to S1 */
    v->servers[0].rank = 1;
    v->servers[1].rank = 0;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    /* ranks swapped along with their ranges: ranges out of key order */
    ps_server_info_t t = v->servers[0];
    v->servers[0] = v->servers[1];
    v->servers[1] = t;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    free(v);
    free(out);
}
END_TEST

START_TEST(view_rejects_bad_counts_and_a_bad_job)
{
    ps_view_t *out = calloc(1, sizeof *out), *v = s_view(2);
    ck_assert_ptr_nonnull(out);
    v->num_workers = 0;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    v->num_workers = PS_MAX_WORKERS + 1;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    v->num_workers = 2;
    v->job.batch = 0;
    ck_assert_int_eq(s_view_trip(v, out), PS_EPROTO);
    v->job = s_job();
    /* no servers: our packer refuses, and a hand-made body is rejected */
    uint8_t *body;
    size_t len;
    v->num_servers = 0;
    ck_assert_int_eq(ps_codec_pack_view(v, &body, &len), PS_EINVAL);
    const uint8_t no_servers[] = {(1 << 3) | 0, 5, (2 << 3) | 0, 1};
    ck_assert_int_eq(ps_codec_unpack_view(no_servers, sizeof no_servers, out), PS_EPROTO);
    ck_assert_int_eq(ps_codec_unpack_view(s_garbage, sizeof s_garbage, out), PS_EPROTO);
    free(v);
    free(out);
}
END_TEST

START_TEST(barrier_round_trips)
{
    uint8_t *body;
    size_t len;
    char name[64];
    ck_assert_int_eq(ps_codec_pack_barrier("init", &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_barrier(body, len, name, sizeof name), 0);
    ck_assert_str_eq(name, "init");
    /* a name that does not fit the caller's buffer */
    ck_assert_int_eq(ps_codec_unpack_barrier(body, len, name, 4), PS_EPROTO);
    free(body);
    ck_assert_int_eq(ps_codec_pack_barrier("", &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_barrier(body, len, name, sizeof name), 0);
    ck_assert_str_eq(name, "");
    free(body);
    ck_assert_int_eq(ps_codec_unpack_barrier(s_garbage, sizeof s_garbage, name, sizeof name),
                     PS_EPROTO);
}
END_TEST

START_TEST(shutdown_round_trips)
{
    uint8_t *body;
    size_t len;
    int status = 1;
    char reason[160];
    ck_assert_int_eq(ps_codec_pack_shutdown(PS_ECLOSED, "W1 lost: silent for 5.0 s", &body,
                                            &len),
                     0);
    ck_assert_int_eq(ps_codec_unpack_shutdown(body, len, &status, reason, sizeof reason), 0);
    free(body);
    ck_assert_int_eq(status, PS_ECLOSED);
    ck_assert_str_eq(reason, "W1 lost: silent for 5.0 s");
    ck_assert_int_eq(ps_codec_pack_shutdown(0, "", &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_shutdown(body, len, &status, reason, sizeof reason), 0);
    free(body);
    ck_assert_int_eq(status, 0);
    ck_assert_str_eq(reason, "");
    ck_assert_int_eq(
        ps_codec_unpack_shutdown(s_garbage, sizeof s_garbage, &status, reason, sizeof reason),
        PS_EPROTO);
}
END_TEST

START_TEST(done_round_trips)
{
    ps_done_t *d = calloc(1, sizeof *d), *out = calloc(1, sizeof *out);
    ck_assert(d && out);
    d->steps = 938;
    d->samples = 938 * 64;
    d->bytes_pushed = 1ull << 33;
    d->bytes_pulled = (1ull << 33) + 12;
    d->train_seconds = 12.5;
    d->compute_seconds = 7.25;
    d->wait_seconds = 3.125;
    d->num_epochs_evaluated = 3;
    d->test_accuracy[0] = 0.81;
    d->test_accuracy[1] = 0.84;
    d->test_accuracy[2] = 0.8625;
    d->final_loss = 0.3771;
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_done(d, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_done(body, len, out), 0);
    free(body);
    ck_assert_int_eq(out->steps, d->steps);
    ck_assert_int_eq(out->samples, d->samples);
    ck_assert_uint_eq(out->bytes_pushed, d->bytes_pushed);
    ck_assert_uint_eq(out->bytes_pulled, d->bytes_pulled);
    ck_assert(out->train_seconds == d->train_seconds);
    ck_assert(out->compute_seconds == d->compute_seconds);
    ck_assert(out->wait_seconds == d->wait_seconds);
    ck_assert_int_eq(out->num_epochs_evaluated, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert(out->test_accuracy[i] == d->test_accuracy[i]);
    }
    ck_assert(out->final_loss == d->final_loss);
    /* the most epochs a report may hold */
    d->num_epochs_evaluated = PS_MAX_EPOCHS;
    d->test_accuracy[PS_MAX_EPOCHS - 1] = 0.5;
    ck_assert_int_eq(ps_codec_pack_done(d, &body, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_done(body, len, out), 0);
    free(body);
    ck_assert_int_eq(out->num_epochs_evaluated, PS_MAX_EPOCHS);
    ck_assert(out->test_accuracy[PS_MAX_EPOCHS - 1] == 0.5);
    free(d);
    free(out);
}
END_TEST

START_TEST(done_rejects_too_many_epochs)
{
    /* Done{steps: 1, test_accuracy: [PS_MAX_EPOCHS + 1 doubles]}, packed */
    const size_t n = PS_MAX_EPOCHS + 1;
    uint8_t *buf = calloc(1, 16 + n * sizeof(double));
    ck_assert_ptr_nonnull(buf);
    size_t at = 0;
    buf[at++] = (1 << 3) | 0;
    buf[at++] = 1;
    buf[at++] = (8 << 3) | 2;
    at += s_varint(buf + at, n * sizeof(double));
    at += n * sizeof(double); /* zeros: 0.0 */
    ps_done_t *out = calloc(1, sizeof *out);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(ps_codec_unpack_done(buf, at, out), PS_EPROTO);
    ck_assert_int_eq(ps_codec_unpack_done(s_garbage, sizeof s_garbage, out), PS_EPROTO);
    free(out);
    free(buf);
}
END_TEST

START_TEST(failover_fields_round_trip)
{
    ps_header_t h, out;
    ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
    h.generation = 7;
    uint8_t hb[PS_HEADER_MAX];
    int n = ps_codec_pack_header(&h, hb, sizeof hb);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(ps_codec_unpack_header(hb, (size_t)n, &out), 0);
    ck_assert_int_eq(out.generation, 7);
    ps_register_t reg = {.role = PS_ROLE_SERVER, .rank = -1, .spare = 1}, rout;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_register(&reg, &buf, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_register(buf, len, &rout), 0);
    ck_assert_int_eq(rout.spare, 1);
    free(buf);
    ps_failover_ready_t rd = {3, 100, 134, 1}, rdo;
    ck_assert_int_eq(ps_codec_pack_failover_ready(&rd, &buf, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_failover_ready(buf, len, &rdo), 0);
    ck_assert_int_eq(rdo.generation, 3);
    ck_assert_int_eq(rdo.step, 100);
    ck_assert_int_eq(rdo.from_version, 134);
    ck_assert_int_eq(rdo.stepped, 1);
    free(buf);
    ck_assert_str_eq(ps_codec_type_name(PS_MSG_FAILOVER_READY), "failover-ready");
    ps_view_t *v = s_view(3), *vo = calloc(1, sizeof *vo);
    v->generation = 5;
    v->replaced = 3; /* S2 */
    ck_assert_int_eq(s_view_trip(v, vo), 0);
    ck_assert_int_eq(vo->generation, 5);
    ck_assert_int_eq(vo->replaced, 3);
    v->replaced = 4; /* no S3 in a view of 3 servers */
    uint8_t *vb;
    ck_assert_int_eq(ps_codec_pack_view(v, &vb, &len), PS_EINVAL);
    free(v);
    free(vo);
}
END_TEST

START_TEST(members_round_trip)
{
    unsigned char live[PS_MAX_WORKERS] = {1, 0, 1, 1}, out[PS_MAX_WORKERS];
    uint8_t *buf;
    size_t len;
    int n = 0;
    ck_assert_int_eq(ps_codec_pack_members(live, 4, &buf, &len), 0);
    memset(out, 7, sizeof out);
    ck_assert_int_eq(ps_codec_unpack_members(buf, len, out, &n), 0);
    ck_assert_int_eq(n, 4);
    ck_assert_mem_eq(out, live, 4);
    free(buf);
    ck_assert_int_eq(ps_codec_pack_members(live, 0, &buf, &len), PS_EINVAL);
    ck_assert_int_eq(ps_codec_pack_members(live, PS_MAX_WORKERS + 1, &buf, &len), PS_EINVAL);
}
END_TEST

START_TEST(metrics_report_and_status_round_trip)
{
    ps_metrics_report_t r = {.step = 42, .samples = 4096, .loss = 0.5, .test_accuracy = -1,
                             .epoch = 2, .nwaiting = 2, .waiting_for = {1, 3},
                             .waited_seconds = 1.25, .bytes_pushed = 7, .bytes_pulled = 9,
                             .text = "a_total 1\n"};
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_metrics(&r, &buf, &len), 0);
    ps_metrics_report_t out;
    ck_assert_int_eq(ps_codec_unpack_metrics(buf, len, &out), 0);
    free(buf);
    ck_assert_int_eq(out.step, 42);
    ck_assert_int_eq(out.nwaiting, 2);
    ck_assert_int_eq(out.waiting_for[1], 3);
    ck_assert(out.waited_seconds == 1.25 && out.test_accuracy == -1);
    ck_assert_str_eq(out.text, "a_total 1\n");
    free(out.text);
    ps_status_node_t nodes[2] = {{.role = PS_ROLE_SERVER, .rank = 0, .begin = 0, .end = 10,
                                  .state = "running", .report = r},
                                 {.role = PS_ROLE_WORKER, .rank = 1, .state = "done",
                                  .steps_per_second = 3.5}};
    nodes[0].report.text = NULL;
    ps_status_t st = {.phase = "running", .model = "mlp", .mode = "sync", .total_steps = 100,
                      .num_params = 10, .nnodes = 2, .nodes = nodes};
    ck_assert_int_eq(ps_codec_pack_status(&st, &buf, &len), 0);
    ps_status_t got;
    ck_assert_int_eq(ps_codec_unpack_status(buf, len, &got), 0);
    free(buf);
    ck_assert_int_eq(got.nnodes, 2);
    ck_assert_str_eq(got.phase, "running");
    ck_assert_int_eq(got.nodes[0].end, 10);
    ck_assert_int_eq(got.nodes[0].report.waiting_for[0], 1);
    ck_assert_ptr_null(got.nodes[0].report.text);
    ck_assert_str_eq(got.nodes[1].state, "done");
    ck_assert(got.nodes[1].steps_per_second == 3.5);
    ps_codec_status_fini(&got);
    ck_assert_ptr_null(got.nodes);
    /* MetricsReport{waiting_for: 33 ranks}: more than a report may list */
    uint8_t many[2 + 33];
    many[0] = 0x32; /* field 6, length-delimited (packed) */
    many[1] = 33;
    memset(many + 2, 1, 33);
    ck_assert_int_eq(ps_codec_unpack_metrics(many, sizeof many, &out), PS_EPROTO);
}
END_TEST

START_TEST(members_rejects_bad_ranks_and_no_live_worker)
{
    unsigned char live[PS_MAX_WORKERS] = {0};
    int n;
    /* Members{num_workers: 2, live: [5]}, packed */
    const uint8_t out_of_range[] = {0x08, 0x02, 0x12, 0x01, 0x05};
    ck_assert_int_eq(ps_codec_unpack_members(out_of_range, sizeof out_of_range, live, &n),
                     PS_EPROTO);
    /* Members{num_workers: 2}: nobody live */
    const uint8_t none[] = {0x08, 0x02};
    ck_assert_int_eq(ps_codec_unpack_members(none, sizeof none, live, &n), PS_EPROTO);
    /* Members{num_workers: 0, live: [0]} */
    const uint8_t zero[] = {0x12, 0x01, 0x00};
    ck_assert_int_eq(ps_codec_unpack_members(zero, sizeof zero, live, &n), PS_EPROTO);
    ck_assert_int_eq(ps_codec_unpack_members(s_garbage, sizeof s_garbage, live, &n), PS_EPROTO);
}
END_TEST

/* The servers' copy of the view carries each worker's token; the workers'
 * copy (all zero) none; a count other than the worker count is refused. */
START_TEST(view_round_trips_worker_tokens_only_when_set)
{
    ps_view_t *out = calloc(1, sizeof *out), *v = s_view(2);
    ck_assert_ptr_nonnull(out);
    for (int w = 0; w < v->num_workers; w++) {
        v->worker_tokens[w] = 0x1000u + (uint64_t)w;
    }
    ck_assert_int_eq(s_view_trip(v, out), 0);
    for (int w = 0; w < v->num_workers; w++) {
        ck_assert_uint_eq(out->worker_tokens[w], 0x1000u + (uint64_t)w);
    }
    memset(v->worker_tokens, 0, sizeof v->worker_tokens);
    ck_assert_int_eq(s_view_trip(v, out), 0);
    for (int w = 0; w < PS_MAX_WORKERS; w++) {
        ck_assert_uint_eq(out->worker_tokens[w], 0);
    }
    /* one token too many: ClusterView field 13 (fixed64) appended */
    const uint8_t extra[] = {(13 << 3) | 1, 1, 0, 0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(s_view_trip_plus(v, extra, sizeof extra, out), PS_EPROTO);
    free(v);
    free(out);
}
END_TEST

START_TEST(peer_ready_round_trips_and_needs_an_endpoint)
{
    uint8_t *buf;
    size_t len;
    char ep[128];
    ck_assert_int_eq(ps_codec_pack_peer_ready("tcp://10.0.0.2:41001", &buf, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_peer_ready(buf, len, ep, sizeof ep), 0);
    ck_assert_str_eq(ep, "tcp://10.0.0.2:41001");
    ck_assert_int_eq(ps_codec_unpack_peer_ready(buf, len, ep, 8), PS_EPROTO);
    free(buf);
    ck_assert_int_eq(ps_codec_pack_peer_ready("", &buf, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_peer_ready(buf, len, ep, sizeof ep), PS_EPROTO);
    free(buf);
    ck_assert_int_eq(ps_codec_unpack_peer_ready(s_garbage, sizeof s_garbage, ep, sizeof ep),
                     PS_EPROTO);
}
END_TEST

START_TEST(join_step_round_trips_and_refuses_bad_values)
{
    ps_join_step_t j = {.step = 12345, .worker = 3, .checkpoint = 1, .members = 1,
                       .token = 0xabcdef0123456789ull},
                   out;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_join_step(&j, &buf, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_join_step(buf, len, &out), 0);
    ck_assert_int_eq(out.step, 12345);
    ck_assert_int_eq(out.worker, 3);
    ck_assert_int_eq(out.checkpoint, 1);
    ck_assert_int_eq(out.members, 1);
    ck_assert_uint_eq(out.token, 0xabcdef0123456789ull);
    free(buf);
    const ps_join_step_t bad[] = {{-1, -1, 0, 0, 0}, {PS_JOIN_MAX_STEP + 1, -1, 0, 0, 0},
                                  {1, -2, 0, 0, 0}, {1, PS_MAX_WORKERS, 0, 0, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(ps_codec_pack_join_step(&bad[i], &buf, &len), 0);
        ck_assert_int_eq(ps_codec_unpack_join_step(buf, len, &out), PS_EPROTO);
        free(buf);
    }
    ck_assert_int_eq(ps_codec_unpack_join_step(s_garbage, sizeof s_garbage, &out), PS_EPROTO);
    ck_assert_str_eq(ps_codec_type_name(PS_MSG_JOIN_STEP), "join-step");
}
END_TEST

START_TEST(scheduler_state_round_trips_with_its_view)
{
    ps_view_t *v = s_view(3), *out = calloc(1, sizeof *out);
    ps_sched_state_t st = {.run_id = 0xfeedull, .membership_changes = 3, .workers_joined = 1,
                           .restarts = 2, .checkpoint = 450, .seconds = 12.5, .finished = 0},
                     got;
    st.lost[1] = 1;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_sched_state(&st, v, &buf, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_sched_state(buf, len, &got, out), 0);
    ck_assert_uint_eq(got.run_id, 0xfeedull);
    ck_assert_int_eq(got.membership_changes, 3);
    ck_assert_int_eq(got.workers_joined, 1);
    ck_assert_int_eq(got.restarts, 2);
    ck_assert_int_eq(got.checkpoint, 450);
    ck_assert_double_eq(got.seconds, 12.5);
    ck_assert_int_eq(got.lost[0], 0);
    ck_assert_int_eq(got.lost[1], 1);
    ck_assert_int_eq(out->num_servers, 3);
    ck_assert_uint_eq(out->num_params, v->num_params);
    free(buf);
    ck_assert_int_eq(ps_codec_unpack_sched_state(s_garbage, sizeof s_garbage, &got, out),
                     PS_EPROTO);
    free(out);
    free(v);
}
END_TEST

START_TEST(report_round_trips_steps_with_fewer_workers)
{
    ps_server_report_t r, out;
    memset(&r, 0, sizeof r);
    ps_hist_init(&r.staleness);
    r.version = 1404;
    r.steps_fewer_workers = 1193;
    r.cpu_seconds = 12.5;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_report(&r, &buf, &len), 0);
    ck_assert_int_eq(ps_codec_unpack_report(buf, len, &out), 0);
    ck_assert_int_eq(out.version, 1404);
    ck_assert_int_eq(out.steps_fewer_workers, 1193);
    ck_assert(out.cpu_seconds == 12.5);
    free(buf);
}
END_TEST

/* ---- msg over a real ZeroMQ pair ---------------------------------------- */

typedef struct {
    ps_ctx_t *ctx;
    ps_sock_t *router; /* the "server" side */
    ps_sock_t *dealer; /* the "client" side */
} s_pair_t;

static void s_pair_open(s_pair_t *p)
{
    char err[128];
    ck_assert_int_eq(ps_ctx_new(&p->ctx), 0);
    ck_assert_int_eq(ps_sock_new(p->ctx, PS_SOCK_ROUTER, &p->router, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_new(p->ctx, PS_SOCK_DEALER, &p->dealer, err, sizeof err), 0);
    /* a broken test fails instead of hanging */
    ps_sock_set_recv_timeout(p->router, 5000);
    ps_sock_set_recv_timeout(p->dealer, 5000);
    ck_assert_int_eq(
        ps_sock_bind(p->router, "inproc://test-codec", NULL, 0, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_connect(p->dealer, "inproc://test-codec"), 0);
}

static void s_pair_close(s_pair_t *p)
{
    ps_sock_destroy(&p->dealer);
    ps_sock_destroy(&p->router);
    ps_ctx_destroy(&p->ctx);
}

/* Sends a well-formed pull from the dealer and checks the router gets it
 * intact: the stream is still in step after a rejected message. */
static void s_expect_stream_ok(s_pair_t *p, uint64_t id)
{
    ps_header_t h;
    ps_msg_header(&h, PS_MSG_PULL, PS_ROLE_WORKER, 1);
    h.request_id = id;
    ck_assert_int_eq(ps_msg_send(p->dealer, NULL, h, NULL, 0, 0), 0);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(p->router, PS_RECV_ROUTER, &m), 0);
    ck_assert_int_eq(m.hdr.type, PS_MSG_PULL);
    ck_assert_uint_eq(m.hdr.request_id, id);
    ck_assert_int_eq(m.nframes, 0);
    ps_msg_close(&m);
}

/* Sends a raw multipart message: header bytes then frames of the given sizes. */
static void s_send_raw(ps_sock_t *sock, const void *hdr, size_t hlen, const size_t *sizes,
                       int n)
{
    static const uint8_t zeros[64];
    const void *parts[PS_MSG_MAX_FRAMES + 8] = {hdr};
    size_t lens[PS_MSG_MAX_FRAMES + 8] = {hlen};
    ck_assert_int_lt(n, PS_MSG_MAX_FRAMES + 8);
    for (int i = 0; i < n; i++) {
        ck_assert_uint_le(sizes[i], sizeof zeros);
        parts[1 + i] = zeros;
        lens[1 + i] = sizes[i];
    }
    ck_assert_int_eq(ps_sock_send_raw(sock, parts, lens, 1 + n), 0);
}

/* Counts releases of zero-copy frames (called from ZeroMQ's threads). */
static void s_count_release(void *data, void *hint)
{
    (void)data;
    atomic_fetch_add((atomic_int *)hint, 1);
}

static int s_released(atomic_int *count)
{
    return atomic_load(count);
}

START_TEST(msg_send_zc_releases_every_frame_once)
{
    s_pair_t p;
    s_pair_open(&p);
    static float a[300], b[5];
    a[7] = 7.5f;
    atomic_int count = 0;
    ps_header_t h;
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_WORKER, 2);
    h.end = 305;
    h.ring_step = 3;
    ps_frame_t f[2] = {{a, sizeof a}, {b, sizeof b}};
    ck_assert_int_eq(ps_msg_send_zc(p.dealer, NULL, h, f, 2, s_count_release, &count), 0);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), 0);
    ck_assert_int_eq(m.hdr.ring_step, 3);
    size_t len;
    const float *r = ps_msg_frame(&m, 0, &len);
    ck_assert_uint_eq(len, sizeof a);
    ck_assert(r[7] == 7.5f);
    ps_msg_close(&m);
    /* inproc hands the frames over as they are: free once the reader closed them */
    for (int i = 0; i < 1000 && s_released(&count) < 2; i++) {
        ps_poll(NULL, 0, 1);
    }
    ck_assert_int_eq(s_released(&count), 2);
    /* a send that fails (a PULL socket cannot send) releases them before returning */
    ps_sock_t *pull;
    char err[128];
    ck_assert_int_eq(ps_sock_new(p.ctx, PS_SOCK_PULL, &pull, err, sizeof err), 0);
    count = 0;
    ck_assert_int_ne(ps_msg_send_zc(pull, NULL, h, f, 2, s_count_release, &count), 0);
    ck_assert_int_eq(s_released(&count), 2);
    ps_sock_destroy(&pull);
    s_pair_close(&p);
}
END_TEST

START_TEST(msg_round_trips_payload_frames)
{
    s_pair_t p;
    s_pair_open(&p);
    enum { N0 = 1000, N1 = 37 };
    float *a = malloc(N0 * sizeof(float)), *b = malloc(N1 * sizeof(float));
    ck_assert(a && b);
    for (int i = 0; i < N0; i++) {
        a[i] = (float)i * 0.5f - 3.0f;
    }
    for (int i = 0; i < N1; i++) {
        b[i] = -(float)i;
    }
    for (int copy = 0; copy <= 1; copy++) {
        ps_header_t h;
        ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
        h.request_id = 77 + (uint64_t)copy;
        h.begin = 10;
        h.end = 10 + N0 + N1;
        h.step = 4;
        h.version = 3;
        h.payload_len = 12345; /* ps_msg_send sets it from the frames */
        ps_frame_t f[2] = {{a, N0 * sizeof(float)}, {b, N1 * sizeof(float)}};
        ck_assert_int_eq(ps_msg_send(p.dealer, NULL, h, f, 2, copy ? PS_SEND_COPY : 0), 0);
        float a0 = a[0];
        if (copy) {
            a[0] = 1e30f; /* allowed right after a copying send */
        }
        ps_msg_t m = {0};
        ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), 0);
        ck_assert_uint_gt(m.route.len, 0);
        ck_assert_int_eq(m.hdr.type, PS_MSG_PUSH);
        ck_assert_uint_eq(m.hdr.request_id, h.request_id);
        ck_assert_uint_eq(m.hdr.begin, 10);
        ck_assert_uint_eq(m.hdr.end, 10 + N0 + N1);
        ck_assert_int_eq(m.hdr.step, 4);
        ck_assert_int_eq(m.hdr.version, 3);
        ck_assert_uint_eq(m.hdr.dtype, PS_DTYPE_F32);
        ck_assert_uint_eq(m.hdr.payload_len, (N0 + N1) * sizeof(float));
        ck_assert_int_eq(m.nframes, 2);
        size_t len0, len1;
        const float *r0 = ps_msg_frame(&m, 0, &len0);
        const float *r1 = ps_msg_frame(&m, 1, &len1);
        ck_assert_uint_eq(len0, N0 * sizeof(float));
        ck_assert_uint_eq(len1, N1 * sizeof(float));
        ck_assert(r0[0] == a0);
        ck_assert_int_eq(memcmp(r0 + 1, a + 1, (N0 - 1) * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(r1, b, N1 * sizeof(float)), 0);
        if (!copy) {
            /* inproc hands the very buffer over: nothing was copied */
            ck_assert_ptr_eq(r0, a);
        } else {
            ck_assert_ptr_ne(r0, a);
            a[0] = a0;
        }
        /* reply along the route, header only, then one frame */
        ps_header_t rh;
        ps_msg_header(&rh, PS_MSG_PULL_REPLY, PS_ROLE_SERVER, 0);
        rh.request_id = m.hdr.request_id;
        rh.version = 9;
        ps_frame_t rf = {b, N1 * sizeof(float)};
        ck_assert_int_eq(ps_msg_send(p.router, &m.route, rh, &rf, 1, PS_SEND_COPY), 0);
        ps_msg_close(&m);
        ps_msg_close(&m); /* idempotent */
        ps_msg_t r = {0};
        ck_assert_int_eq(ps_msg_recv(p.dealer, 0, &r), 0);
        ck_assert_uint_eq(r.route.len, 0);
        ck_assert_int_eq(r.hdr.type, PS_MSG_PULL_REPLY);
        ck_assert_int_eq(r.hdr.role, PS_ROLE_SERVER);
        ck_assert_uint_eq(r.hdr.request_id, h.request_id);
        ck_assert_int_eq(r.hdr.version, 9);
        ck_assert_int_eq(r.nframes, 1);
        const float *rr = ps_msg_frame(&r, 0, &len1);
        ck_assert_uint_eq(len1, N1 * sizeof(float));
        ck_assert_int_eq(memcmp(rr, b, len1), 0);
        ps_msg_close(&r);
    }
    /* the most frames a message may carry */
    ps_header_t h;
    ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 0);
    ps_frame_t f[PS_MSG_MAX_FRAMES];
    for (int i = 0; i < PS_MSG_MAX_FRAMES; i++) {
        f[i].data = b + i;
        f[i].len = sizeof(float);
    }
    ck_assert_int_eq(ps_msg_send(p.dealer, NULL, h, f, PS_MSG_MAX_FRAMES, 0), 0);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), 0);
    ck_assert_int_eq(m.nframes, PS_MSG_MAX_FRAMES);
    ps_msg_close(&m);
    /* control message helper */
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(ps_codec_pack_barrier("init", &body, &len), 0);
    ck_assert_int_eq(
        ps_msg_send_ctrl(p.dealer, NULL, PS_MSG_BARRIER, PS_ROLE_WORKER, 1, body, len), 0);
    free(body);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), 0);
    ck_assert_int_eq(m.hdr.type, PS_MSG_BARRIER);
    ck_assert_int_eq(m.nframes, 1);
    char name[16];
    const void *pb = ps_msg_frame(&m, 0, &len);
    ck_assert_int_eq(ps_codec_unpack_barrier(pb, len, name, sizeof name), 0);
    ck_assert_str_eq(name, "init");
    ps_msg_close(&m);
    free(a);
    free(b);
    s_pair_close(&p);
}
END_TEST

START_TEST(msg_rejects_payload_length_mismatch)
{
    s_pair_t p;
    s_pair_open(&p);
    uint8_t buf[PS_HEADER_MAX];
    ps_header_t h;
    ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
    h.request_id = 5;
    h.begin = 0;
    h.end = 8;
    h.dtype = PS_DTYPE_F32;
    h.payload_len = 32;
    int n = s_pack(&h, buf, sizeof buf);
    /* header says 32, frame has 28 */
    size_t short_frame = 28;
    s_send_raw(p.dealer, buf, (size_t)n, &short_frame, 1);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    ck_assert_int_eq(m.nframes, 0);
    ck_assert_uint_gt(m.route.len, 0); /* the caller can still reply */
    ck_assert_uint_eq(m.hdr.request_id, 5);
    ck_assert_ptr_nonnull(strstr(m.hdr.error, "payload"));
    ps_msg_close(&m);
    s_expect_stream_ok(&p, 100);
    /* header says 32, two frames hold 36 */
    size_t two[2] = {32, 4};
    s_send_raw(p.dealer, buf, (size_t)n, two, 2);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    ck_assert_int_eq(m.nframes, 0);
    s_expect_stream_ok(&p, 101);
    /* header says 32, no frame at all */
    s_send_raw(p.dealer, buf, (size_t)n, NULL, 0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    s_expect_stream_ok(&p, 102);
    s_pair_close(&p);
}
END_TEST

START_TEST(msg_rejects_too_many_frames)
{
    s_pair_t p;
    s_pair_open(&p);
    uint8_t buf[PS_HEADER_MAX];
    ps_header_t h;
    ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
    h.request_id = 6;
    h.end = PS_MSG_MAX_FRAMES + 3;
    h.dtype = PS_DTYPE_F32;
    h.payload_len = (PS_MSG_MAX_FRAMES + 3) * 4; /* consistent with the frames */
    int n = s_pack(&h, buf, sizeof buf);
    size_t sizes[PS_MSG_MAX_FRAMES + 3];
    for (int i = 0; i < PS_MSG_MAX_FRAMES + 3; i++) {
        sizes[i] = 4;
    }
    s_send_raw(p.dealer, buf, (size_t)n, sizes, PS_MSG_MAX_FRAMES + 3);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    ck_assert_int_eq(m.nframes, 0);
    ck_assert_uint_gt(m.route.len, 0);
    ck_assert_ptr_nonnull(strstr(m.hdr.error, "frames"));
    ps_msg_close(&m);
    /* every remaining frame was consumed: the next message is whole */
    s_expect_stream_ok(&p, 200);
    s_pair_close(&p);
}
END_TEST

START_TEST(msg_rejects_a_bad_header_and_drains_its_frames)
{
    s_pair_t p;
    s_pair_open(&p);
    size_t sizes[2] = {4, 8};
    ps_msg_t m = {0};
    /* garbage header with frames behind it */
    s_send_raw(p.dealer, s_garbage, sizeof s_garbage, sizes, 2);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    ck_assert_int_eq(m.nframes, 0);
    ck_assert_uint_gt(m.route.len, 0);
    s_expect_stream_ok(&p, 300);
    /* an empty header frame */
    s_send_raw(p.dealer, "", 0, NULL, 0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    s_expect_stream_ok(&p, 301);
    /* wrong protocol version */
    uint8_t buf[PS_HEADER_MAX];
    ps_header_t h;
    ps_msg_header(&h, PS_MSG_PULL, PS_ROLE_WORKER, 1);
    h.protocol = PS_PROTOCOL_VERSION + 1;
    int n = s_pack(&h, buf, sizeof buf);
    s_send_raw(p.dealer, buf, (size_t)n, NULL, 0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    s_expect_stream_ok(&p, 302);
    /* an error reply to a rejected message decodes at the client */
    ps_msg_header(&h, PS_MSG_PULL, PS_ROLE_WORKER, 1);
    h.request_id = 303;
    h.begin = 9;
    h.end = 3; /* reversed */
    n = s_pack(&h, buf, sizeof buf);
    s_send_raw(p.dealer, buf, (size_t)n, NULL, 0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    ck_assert_int_eq(ps_msg_reply_error(p.router, &m, PS_ROLE_SERVER, 0, PS_EPROTO,
                                        "malformed: %s", m.hdr.error),
                     0);
    ps_msg_t r = {0};
    ck_assert_int_eq(ps_msg_recv(p.dealer, 0, &r), 0);
    ck_assert_int_eq(r.hdr.type, PS_MSG_ERROR);
    ck_assert_int_eq(r.hdr.status, PS_EPROTO);
    ck_assert_uint_eq(r.hdr.request_id, 303);
    ck_assert_ptr_nonnull(strstr(r.hdr.error, "malformed"));
    ps_msg_close(&r);
    s_pair_close(&p);
}
END_TEST

START_TEST(msg_recv_times_out_without_a_message)
{
    s_pair_t p;
    s_pair_open(&p);
    ps_sock_set_recv_timeout(p.router, 10);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_ETIMEDOUT);
    s_pair_close(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codec");
    TCase *th = tcase_create("header");
    tcase_add_test(th, header_round_trips_every_field);
    tcase_add_test(th, header_round_trips_every_type_and_role);
    tcase_add_test(th, header_pack_reports_a_small_buffer);
    tcase_add_test(th, header_rejects_garbage_and_empty);
    tcase_add_test(th, header_rejects_truncation);
    tcase_add_test(th, header_rejects_wrong_protocol_but_keeps_what_it_read);
    tcase_add_test(th, header_rejects_unknown_type);
    tcase_add_test(th, header_rejects_unknown_role);
    tcase_add_test(th, header_rejects_reversed_range);
    tcase_add_test(th, header_rejects_non_f32_payload);
    tcase_add_test(th, header_push_pull_is_a_type_and_rejects_negative_pull_version);
    tcase_add_test(th, header_rejects_sparse_keys);
    tcase_add_test(th, header_rejects_a_negative_ring_step);
    suite_add_tcase(s, th);
    TCase *tb = tcase_create("bodies");
    tcase_add_test(tb, register_round_trips);
    tcase_add_test(tb, register_rejects_other_roles_and_garbage);
    tcase_add_test(tb, register_ack_round_trips_the_job);
    tcase_add_test(tb, register_ack_rejects_a_bad_or_missing_job);
    tcase_add_test(tb, register_carries_the_job_identity_and_build);
    tcase_add_test(tb, preflight_round_trips_and_bounds_the_pairs);
    tcase_add_test(tb, model_info_round_trips);
    tcase_add_test(tb, view_round_trips_with_several_servers);
    tcase_add_test(tb, view_round_trips_in_allreduce_mode);
    tcase_add_test(tb, view_rejects_servers_in_allreduce_and_workers_elsewhere);
    tcase_add_test(tb, view_rejects_ranges_that_do_not_tile);
    tcase_add_test(tb, view_rejects_servers_out_of_rank_order);
    tcase_add_test(tb, view_rejects_bad_counts_and_a_bad_job);
    tcase_add_test(tb, barrier_round_trips);
    tcase_add_test(tb, shutdown_round_trips);
    tcase_add_test(tb, done_round_trips);
    tcase_add_test(tb, done_rejects_too_many_epochs);
    tcase_add_test(tb, view_round_trips_worker_tokens_only_when_set);
    tcase_add_test(tb, peer_ready_round_trips_and_needs_an_endpoint);
    tcase_add_test(tb, members_round_trip);
    tcase_add_test(tb, metrics_report_and_status_round_trip);
    tcase_add_test(tb, failover_fields_round_trip);
    tcase_add_test(tb, members_rejects_bad_ranks_and_no_live_worker);
    tcase_add_test(tb, report_round_trips_steps_with_fewer_workers);
    tcase_add_test(tb, join_step_round_trips_and_refuses_bad_values);
    tcase_add_test(tb, scheduler_state_round_trips_with_its_view);
    suite_add_tcase(s, tb);
    TCase *tm = tcase_create("msg");
    tcase_add_test(tm, msg_round_trips_payload_frames);
    tcase_add_test(tm, msg_send_zc_releases_every_frame_once);
    tcase_add_test(tm, msg_rejects_payload_length_mismatch);
    tcase_add_test(tm, msg_rejects_too_many_frames);
    tcase_add_test(tm, msg_rejects_a_bad_header_and_drains_its_frames);
    tcase_add_test(tm, msg_recv_times_out_without_a_message);
    tcase_set_timeout(tm, 30);
    suite_add_tcase(s, tm);
    return ps_test_run(s);
}
