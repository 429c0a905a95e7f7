/*
 * tests/unit/test_codec.c - the wire: proto/codec (the checks of the header
 * and of every control body over protobuf-c's generated structs, the view
 * and the job at the edge) and proto/msg (header + payload frames and
 * bodies over a real ZeroMQ pair).
 *
 * Round trips check every field; each malformed input is refused with
 * exactly PS_EPROTO (or NULL and a reason). Some inputs protobuf-c would
 * never produce from our structs (too many epochs, a missing job) are
 * written byte by byte. The msg tests use an inproc ROUTER/DEALER pair whose
 * context is created inside the test function, after Check has forked.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/text.h"
#include "common/job.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "tests/unit/testutil.h"

/* ---- helpers ------------------------------------------------------------ */

/* Every test decodes into this arena, reset by the helpers that fill it. */
static _Alignas(PS_ARENA_ALIGN) unsigned char s_buf[4096];
static ps_arena_t s_arena;

/* The arena, emptied. */
static ps_arena_t *s_fresh(void)
{
    if (s_arena.buf != s_buf) {
        ps_arena_init(&s_arena, s_buf, sizeof s_buf);
    }
    ps_arena_reset(&s_arena);
    return &s_arena;
}

/* A header with every field set to a distinctive value. */
static Shardps__Header s_full_header(void)
{
    Shardps__Header h = SHARDPS__HEADER__INIT;
    h.protocol = PS_PROTOCOL_VERSION;
    h.type = PS_MSG_PUSH;
    h.role = PS_ROLE_WORKER;
    h.sender = 3;
    h.request_id = 0x123456789abcdef0ull;
    h.key_begin = 1ull << 40;
    h.key_end = (1ull << 40) + 1000;
    h.step = -7;
    h.version = 1ll << 50;
    h.dtype = PS_DTYPE_F32;
    h.payload_len = 4000;
    h.status = PS_ERANGE;
    h.error = (char *)"key range [a, b) is not inside this server's shard";
    h.ring_step = 5;
    h.token = 0xfedcba9876543210ull;
    h.clock = 12345.678901234;
    h.pull_version = (1ll << 50) + 3;
    return h;
}

/* Packs h; fails the test if packing fails. */
static int s_pack(const Shardps__Header *h, uint8_t *buf, size_t cap)
{
    int n = ps_codec_pack_header(h, buf, cap);
    ck_assert_int_gt(n, 0);
    return n;
}

/* Unpacks a header into the fresh arena; the reason goes to why. */
static int s_unpack(const void *data, size_t len, Shardps__Header *out, char *why, size_t cap)
{
    why[0] = '\0';
    return ps_codec_unpack_header(data, len, s_fresh(), out, why, cap);
}

/* Packs h and expects unpacking to fail with PS_EPROTO and a reason. */
static void s_expect_rejected(const Shardps__Header *h, const char *what)
{
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(h, buf, sizeof buf);
    Shardps__Header out;
    char why[PS_ERROR_MAX];
    int rc = s_unpack(buf, (size_t)n, &out, why, sizeof why);
    ck_assert_msg(rc == PS_EPROTO, "%s: got %d, want PS_EPROTO", what, rc);
    ck_assert_msg(why[0] != '\0', "%s: no reason given", what);
}

/* Packs m and unpacks it again as its own type, checked, into the fresh
 * arena. Returns the copy, or NULL (reason in why) when refused. */
static void *s_trip(const ProtobufCMessage *m, char *why, size_t cap)
{
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(ps_codec_pack(m, &buf, &len), 0);
    void *out = ps_codec_unpack(m->descriptor, buf, len, s_fresh(), why, cap);
    free(buf);
    return out;
}

/* Unpacks raw bytes as a message of d (checked) into the fresh arena. */
static void *s_raw(const ProtobufCMessageDescriptor *d, const void *data, size_t len)
{
    return ps_codec_unpack(d, data, len, s_fresh(), NULL, 0);
}

/* Fills buf (cap bytes) with a string of cap - 1 c's. */
static void s_fill(char *buf, size_t cap, char c)
{
    memset(buf, c, cap - 1);
    buf[cap - 1] = '\0';
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

/* Packs v (PS_EINVAL when it does not convert); the caller frees *out. */
static int s_view_pack(const ps_view_t *v, uint8_t **out, size_t *len)
{
    ps_view_pb_t *pb = malloc(sizeof *pb);
    ck_assert_ptr_nonnull(pb);
    int rc = ps_codec_view_to_pb(v, pb);
    if (rc == 0) {
        ck_assert_int_eq(ps_codec_pack(&pb->pb.base, out, len), 0);
    }
    free(pb);
    return rc;
}

/* Unpacks a ClusterView (checked) into an arena of its own and converts it
 * into out. */
static int s_view_unpack(const void *data, size_t len, ps_view_t *out)
{
    PS_ARENA_ON_STACK(a, 2048);
    const Shardps__ClusterView *m =
        ps_codec_unpack(&shardps__cluster_view__descriptor, data, len, a, NULL, 0);
    int rc = m ? ps_codec_view_from_pb(m, out, NULL, 0) : PS_EPROTO;
    ps_arena_fini(a);
    return rc;
}

/* Packs v and unpacks it into a fresh view. Returns the unpack status. */
static int s_view_trip(const ps_view_t *v, ps_view_t *out)
{
    uint8_t *body;
    size_t len;
    ck_assert_int_eq(s_view_pack(v, &body, &len), 0);
    int rc = s_view_unpack(body, len, out);
    free(body);
    return rc;
}

/* Bytes protobuf-c cannot decode: a varint longer than ten bytes. */
static const uint8_t s_garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/* ---- header ------------------------------------------------------------- */

START_TEST(header_round_trips_every_field)
{
    Shardps__Header h = s_full_header(), out;
    uint8_t buf[PS_HEADER_MAX];
    char why[PS_ERROR_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    memset(&out, 0xa5, sizeof out);
    ck_assert_int_eq(s_unpack(buf, (size_t)n, &out, why, sizeof why), 0);
    ck_assert_str_eq(why, "");
    ck_assert_uint_eq(out.protocol, PS_PROTOCOL_VERSION);
    ck_assert_int_eq(out.type, h.type);
    ck_assert_int_eq(out.role, h.role);
    ck_assert_int_eq(out.sender, h.sender);
    ck_assert_uint_eq(out.request_id, h.request_id);
    ck_assert_uint_eq(out.key_begin, h.key_begin);
    ck_assert_uint_eq(out.key_end, h.key_end);
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
            Shardps__Header h, out;
            char why[PS_ERROR_MAX];
            ps_msg_header(&h, (ps_msg_type_t)t, (ps_role_t)r, r == PS_ROLE_SCHEDULER ? 0 : 5);
            uint8_t buf[PS_HEADER_MAX];
            int n = s_pack(&h, buf, sizeof buf);
            ck_assert_int_eq(s_unpack(buf, (size_t)n, &out, why, sizeof why), 0);
            ck_assert_int_eq(out.type, t);
            ck_assert_int_eq(out.role, r);
            ck_assert_str_eq(out.error, "");
        }
    }
}
END_TEST

START_TEST(header_pack_reports_a_small_buffer)
{
    Shardps__Header h = s_full_header();
    uint8_t buf[8];
    ck_assert_int_eq(ps_codec_pack_header(&h, buf, sizeof buf), PS_EINVAL);
}
END_TEST

START_TEST(header_rejects_garbage_and_empty)
{
    Shardps__Header out;
    char why[PS_ERROR_MAX];
    ck_assert_int_eq(s_unpack(s_garbage, sizeof s_garbage, &out, why, sizeof why), PS_EPROTO);
    ck_assert_str_ne(why, "");
    ck_assert_int_eq(out.type, PS_MSG_NONE); /* all defaults: nothing decoded */
    const char text[] = "hello, shardps! this is not a header";
    ck_assert_int_eq(s_unpack(text, sizeof text - 1, &out, why, sizeof why), PS_EPROTO);
    /* zero bytes decode to all defaults: protocol 0 */
    ck_assert_int_eq(s_unpack(text, 0, &out, why, sizeof why), PS_EPROTO);
}
END_TEST

START_TEST(header_rejects_truncation)
{
    /* The error text is the last field and over half the header, so every cut
     * below lands inside it: a length-delimited field shorter than it says. */
    Shardps__Header h = s_full_header(), out;
    char error[PS_ERROR_MAX], why[PS_ERROR_MAX];
    s_fill(error, sizeof error, 'x');
    h.error = error;
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(s_unpack(buf, (size_t)n / 2, &out, why, sizeof why), PS_EPROTO);
    ck_assert_int_eq(s_unpack(buf, (size_t)n - 1, &out, why, sizeof why), PS_EPROTO);
    /* a cut inside the first varint */
    h = s_full_header();
    h.protocol = 300; /* two-byte varint */
    n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(s_unpack(buf, 2, &out, why, sizeof why), PS_EPROTO);
}
END_TEST

START_TEST(header_reads_an_overlong_error_text_as_empty)
{
    Shardps__Header h = s_full_header(), out;
    char error[PS_ERROR_MAX + 1], why[PS_ERROR_MAX];
    s_fill(error, sizeof error, 'y');
    h.error = error;
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(s_unpack(buf, (size_t)n, &out, why, sizeof why), 0);
    ck_assert_str_eq(out.error, "");
    error[PS_ERROR_MAX - 1] = '\0'; /* the longest kept */
    n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(s_unpack(buf, (size_t)n, &out, why, sizeof why), 0);
    ck_assert_uint_eq(strlen(out.error), PS_ERROR_MAX - 1);
}
END_TEST

START_TEST(header_rejects_wrong_protocol_but_keeps_what_it_read)
{
    const uint32_t bad[] = {0, PS_PROTOCOL_VERSION + 1, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Shardps__Header h = s_full_header(), out;
        char why[PS_ERROR_MAX];
        h.protocol = bad[i];
        uint8_t buf[PS_HEADER_MAX];
        int n = s_pack(&h, buf, sizeof buf);
        ck_assert_int_eq(s_unpack(buf, (size_t)n, &out, why, sizeof why), PS_EPROTO);
        ck_assert_ptr_nonnull(strstr(why, "protocol"));
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
        Shardps__Header h = s_full_header();
        h.type = (ps_msg_type_t)bad[i];
        s_expect_rejected(&h, "unknown type");
    }
}
END_TEST

START_TEST(header_rejects_unknown_role)
{
    const int bad[] = {PS_ROLE_NONE, PS_ROLE_WORKER + 1, 7, -3};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Shardps__Header h = s_full_header();
        h.role = (ps_role_t)bad[i];
        s_expect_rejected(&h, "unknown role");
    }
}
END_TEST

START_TEST(header_rejects_reversed_range)
{
    Shardps__Header h = s_full_header();
    h.key_begin = 100;
    h.key_end = 99;
    s_expect_rejected(&h, "reversed range");
    /* an empty range is well-formed here; servers refuse it in context */
    h.key_end = 100;
    uint8_t buf[PS_HEADER_MAX];
    Shardps__Header out;
    char why[PS_ERROR_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(s_unpack(buf, (size_t)n, &out, why, sizeof why), 0);
}
END_TEST

START_TEST(header_rejects_non_f32_payload)
{
    Shardps__Header h = s_full_header();
    h.dtype = PS_DTYPE_NONE;
    s_expect_rejected(&h, "dtype none with payload");
    h.dtype = (Shardps__DType)(PS_DTYPE_MAX + 1);
    s_expect_rejected(&h, "unknown dtype with payload");
    h.dtype = PS_DTYPE_BF16;
    h.nnz = 3;
    s_expect_rejected(&h, "nnz on a dense payload");
    h.dtype = (Shardps__DType)77;
    s_expect_rejected(&h, "dtype 77 with payload");
}
END_TEST

START_TEST(header_push_pull_is_a_type_and_rejects_negative_pull_version)
{
    Shardps__Header h = s_full_header(), out;
    char why[PS_ERROR_MAX];
    h.type = PS_MSG_PUSH_PULL;
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(s_unpack(buf, (size_t)n, &out, why, sizeof why), 0);
    ck_assert_int_eq(out.type, PS_MSG_PUSH_PULL);
    ck_assert_str_eq(ps_codec_type_name(PS_MSG_PUSH_PULL), "push-pull");
    h.pull_version = -1;
    s_expect_rejected(&h, "negative pull version");
}
END_TEST

START_TEST(header_rejects_sparse_keys)
{
    Shardps__Header h = s_full_header(), out;
    char why[PS_ERROR_MAX];
    uint8_t buf[PS_HEADER_MAX];
    size_t n = (size_t)s_pack(&h, buf, sizeof buf - 8);
    /* field 8 (keys), packed: tag, length, one key; protobuf merges the two parts */
    buf[n++] = (8 << 3) | 2;
    buf[n++] = 1;
    buf[n++] = 5;
    ck_assert_int_eq(s_unpack(buf, n, &out, why, sizeof why), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "sparse"));
}
END_TEST

START_TEST(header_rejects_a_negative_ring_step)
{
    Shardps__Header h = s_full_header(), out;
    char why[PS_ERROR_MAX];
    h.type = PS_MSG_RING_DATA;
    h.ring_step = -1;
    uint8_t buf[PS_HEADER_MAX];
    int n = s_pack(&h, buf, sizeof buf);
    ck_assert_int_eq(s_unpack(buf, (size_t)n, &out, why, sizeof why), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "ring step"));
}
END_TEST

/* ---- control bodies ----------------------------------------------------- */

START_TEST(register_round_trips)
{
    Shardps__Register r = SHARDPS__REGISTER__INIT;
    r.role = PS_ROLE_SERVER;
    r.rank = 2;
    r.pid = 4242;
    r.endpoint = (char *)"tcp://10.0.0.2:41001";
    const Shardps__Register *out = s_trip(&r.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->role, PS_ROLE_SERVER);
    ck_assert_int_eq(out->rank, 2);
    ck_assert_uint_eq(out->pid, 4242);
    ck_assert_str_eq(out->endpoint, r.endpoint);
    /* a worker asking for any rank, no endpoint */
    Shardps__Register w = SHARDPS__REGISTER__INIT;
    w.role = PS_ROLE_WORKER;
    w.rank = -1;
    w.pid = 1;
    out = s_trip(&w.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->role, PS_ROLE_WORKER);
    ck_assert_int_eq(out->rank, -1);
    ck_assert_str_eq(out->endpoint, "");
}
END_TEST

START_TEST(register_rejects_other_roles_long_strings_and_garbage)
{
    const int bad[] = {PS_ROLE_NONE, PS_ROLE_SCHEDULER, 9};
    char why[PS_ERROR_MAX];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Shardps__Register r = SHARDPS__REGISTER__INIT;
        r.role = (ps_role_t)bad[i];
        ck_assert_ptr_null(s_trip(&r.base, why, sizeof why));
        ck_assert_ptr_nonnull(strstr(why, "role"));
    }
    char endpoint[PS_ENDPOINT_MAX + 1];
    s_fill(endpoint, sizeof endpoint, 'e');
    Shardps__Register r = SHARDPS__REGISTER__INIT;
    r.role = PS_ROLE_SERVER;
    r.endpoint = endpoint;
    ck_assert_ptr_null(s_trip(&r.base, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "endpoint"));
    endpoint[PS_ENDPOINT_MAX - 1] = '\0'; /* the longest that fits */
    ck_assert_ptr_nonnull(s_trip(&r.base, why, sizeof why));
    ck_assert_ptr_null(s_raw(&shardps__register__descriptor, s_garbage, sizeof s_garbage));
}
END_TEST

/* A RegisterAck of rank and token carrying job (borrowed from jpb). */
static Shardps__RegisterAck s_ack(int rank, uint64_t token, const ps_job_t *job,
                                  ps_job_pb_t *jpb)
{
    Shardps__RegisterAck a = SHARDPS__REGISTER_ACK__INIT;
    a.rank = rank;
    a.token = token;
    ps_codec_job_to_pb(job, jpb);
    a.job = &jpb->pb;
    return a;
}

START_TEST(register_ack_round_trips_the_job)
{
    ps_job_pb_t jpb;
    ps_job_t job = s_job(), got;
    Shardps__RegisterAck a = s_ack(7, UINT64_MAX - 5, &job, &jpb);
    a.job_id = (char *)"slurm-42.0";
    a.job_hash = (char *)"0123456789abcdef";
    a.run_id = 0x1234567890abcdefull;
    const Shardps__RegisterAck *out = s_trip(&a.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->rank, 7);
    ck_assert_uint_eq(out->run_id, 0x1234567890abcdefull);
    ck_assert_uint_eq(out->token, UINT64_MAX - 5);
    ck_assert_int_eq(ps_codec_job_from_pb(out->job, &got, NULL, 0), 0);
    s_assert_job_eq(&got, &job);
    ck_assert_str_eq(out->job_id, "slurm-42.0");
    ck_assert_str_eq(out->job_hash, "0123456789abcdef");
    /* the defaults too (sync, mlp) */
    ps_job_defaults(&job);
    a = s_ack(0, 1, &job, &jpb);
    out = s_trip(&a.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->rank, 0);
    ck_assert_uint_eq(out->token, 1);
    ck_assert_int_eq(ps_codec_job_from_pb(out->job, &got, NULL, 0), 0);
    s_assert_job_eq(&got, &job);
}
END_TEST

START_TEST(register_ack_rejects_a_bad_or_missing_job)
{
    ps_job_pb_t jpb;
    ps_job_t job = s_job();
    char why[PS_ERROR_MAX];
    snprintf(job.model, sizeof job.model, "resnet");
    Shardps__RegisterAck a = s_ack(1, 0, &job, &jpb);
    ck_assert_ptr_null(s_trip(&a.base, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "job"));
    job = s_job();
    job.lr = -1.0;
    a = s_ack(1, 0, &job, &jpb);
    ck_assert_ptr_null(s_trip(&a.base, why, sizeof why));
    /* RegisterAck{rank: 3} with no job at all */
    const uint8_t no_job[] = {(1 << 3) | 0, 3};
    ck_assert_ptr_null(s_raw(&shardps__register_ack__descriptor, no_job, sizeof no_job));
    ck_assert_ptr_null(s_raw(&shardps__register_ack__descriptor, s_garbage, sizeof s_garbage));
}
END_TEST

START_TEST(register_carries_the_job_identity_and_build)
{
    char build[PS_BUILD_MAX];
    ps_codec_build_id(build, sizeof build);
    ck_assert_ptr_nonnull(strstr(build, " protocol 9"));
    Shardps__Register r = SHARDPS__REGISTER__INIT;
    r.role = PS_ROLE_WORKER;
    r.rank = 1;
    r.job_id = (char *)"job-a";
    r.job_hash = (char *)"fedcba9876543210";
    r.build = build;
    const Shardps__Register *out = s_trip(&r.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_str_eq(out->job_id, "job-a");
    ck_assert_str_eq(out->job_hash, "fedcba9876543210");
    ck_assert_str_eq(out->build, build);
}
END_TEST

START_TEST(preflight_round_trips_and_bounds_the_pairs)
{
    enum { N = PS_MAX_SERVERS + 1 };
    static Shardps__PreflightPair pairs[N];
    static Shardps__PreflightPair *ptrs[N];
    const Shardps__PreflightPair in[3] = {
        {PROTOBUF_C_MESSAGE_INIT(&shardps__preflight_pair__descriptor), 0, 1, 0.25, 812.5},
        {PROTOBUF_C_MESSAGE_INIT(&shardps__preflight_pair__descriptor), 1, 0, 0, 0},
        {PROTOBUF_C_MESSAGE_INIT(&shardps__preflight_pair__descriptor), 2, 1, 1.5, 3.0}};
    for (int i = 0; i < N; i++) {
        pairs[i] = in[i % 3];
        ptrs[i] = &pairs[i];
    }
    Shardps__PreflightResult m = SHARDPS__PREFLIGHT_RESULT__INIT;
    m.n_pairs = 3;
    m.pairs = ptrs;
    const Shardps__PreflightResult *out = s_trip(&m.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_uint_eq(out->n_pairs, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(out->pairs[i]->server, in[i].server);
        ck_assert_int_eq(out->pairs[i]->reached, in[i].reached);
        ck_assert_double_eq(out->pairs[i]->rtt_ms, in[i].rtt_ms);
        ck_assert_double_eq(out->pairs[i]->mbytes_per_s, in[i].mbytes_per_s);
    }
    /* one pair per server at most: more is refused where it arrives */
    m.n_pairs = PS_MAX_SERVERS;
    ck_assert_ptr_nonnull(s_trip(&m.base, NULL, 0));
    m.n_pairs = N;
    ck_assert_ptr_null(s_trip(&m.base, NULL, 0));
    ck_assert_ptr_null(
        s_raw(&shardps__preflight_result__descriptor, s_garbage, sizeof s_garbage));
}
END_TEST

START_TEST(model_info_round_trips)
{
    const uint64_t ps[] = {1, 235146, 1ull << 40};
    const char *eps[] = {"", "tcp://10.0.0.3:41002", "tcp://[::1]:5"};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        Shardps__ModelInfo in = SHARDPS__MODEL_INFO__INIT;
        in.num_params = ps[i];
        in.train_samples = 60000 + i;
        in.endpoint = (char *)eps[i];
        const Shardps__ModelInfo *out = s_trip(&in.base, NULL, 0);
        ck_assert_ptr_nonnull(out);
        ck_assert_uint_eq(out->num_params, ps[i]);
        ck_assert_uint_eq(out->train_samples, 60000 + i);
        ck_assert_str_eq(out->endpoint, eps[i]);
    }
    ck_assert_ptr_null(s_raw(&shardps__model_info__descriptor, s_garbage, sizeof s_garbage));
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
    ck_assert_int_eq(s_view_pack(v, &body, &len), 0);
    uint8_t *all = malloc(len + n);
    ck_assert_ptr_nonnull(all);
    memcpy(all, body, len);
    memcpy(all + len, extra, n);
    int rc = s_view_unpack(all, len + n, out);
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
    /* our converter refuses what the check would */
    v->num_servers = 1;
    ck_assert_int_eq(s_view_pack(v, &body, &len), PS_EINVAL);
    v->num_servers = 0;
    v->workers[1].endpoint[0] = '\0';
    ck_assert_int_eq(s_view_pack(v, &body, &len), PS_EINVAL);
    snprintf(v->workers[1].endpoint, sizeof v->workers[1].endpoint, "tcp://10.0.1.3:42001");
    v->workers[2].rank = 1;
    ck_assert_int_eq(s_view_pack(v, &body, &len), PS_EINVAL);
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
    /* no servers: our converter refuses, and a hand-made body is rejected */
    uint8_t *body;
    size_t len;
    v->num_servers = 0;
    ck_assert_int_eq(s_view_pack(v, &body, &len), PS_EINVAL);
    const uint8_t no_servers[] = {(1 << 3) | 0, 5, (2 << 3) | 0, 1};
    ck_assert_int_eq(s_view_unpack(no_servers, sizeof no_servers, out), PS_EPROTO);
    ck_assert_int_eq(s_view_unpack(s_garbage, sizeof s_garbage, out), PS_EPROTO);
    free(v);
    free(out);
}
END_TEST

START_TEST(barrier_round_trips)
{
    Shardps__Barrier b = SHARDPS__BARRIER__INIT;
    b.name = (char *)"init";
    const Shardps__Barrier *out = s_trip(&b.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_str_eq(out->name, "init");
    /* a name longer than a barrier's may be */
    char name[PS_BARRIER_NAME_MAX + 1];
    s_fill(name, sizeof name, 'n');
    b.name = name;
    ck_assert_ptr_null(s_trip(&b.base, NULL, 0));
    b.name = (char *)"";
    out = s_trip(&b.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_str_eq(out->name, "");
    ck_assert_ptr_null(s_raw(&shardps__barrier__descriptor, s_garbage, sizeof s_garbage));
}
END_TEST

START_TEST(shutdown_round_trips)
{
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.status = PS_ECLOSED;
    sd.reason = (char *)"W1 lost: silent for 5.0 s";
    const Shardps__Shutdown *out = s_trip(&sd.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->status, PS_ECLOSED);
    ck_assert_str_eq(out->reason, "W1 lost: silent for 5.0 s");
    sd.status = 0;
    sd.reason = (char *)"";
    out = s_trip(&sd.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->status, 0);
    ck_assert_str_eq(out->reason, "");
    ck_assert_ptr_null(s_raw(&shardps__shutdown__descriptor, s_garbage, sizeof s_garbage));
}
END_TEST

START_TEST(done_round_trips)
{
    static double accuracy[PS_MAX_EPOCHS];
    Shardps__Done d = SHARDPS__DONE__INIT;
    d.steps = 938;
    d.samples = 938 * 64;
    d.bytes_pushed = 1ull << 33;
    d.bytes_pulled = (1ull << 33) + 12;
    d.train_seconds = 12.5;
    d.compute_seconds = 7.25;
    d.wait_seconds = 3.125;
    d.n_test_accuracy = 3;
    d.test_accuracy = accuracy;
    accuracy[0] = 0.81;
    accuracy[1] = 0.84;
    accuracy[2] = 0.8625;
    d.final_loss = 0.3771;
    const Shardps__Done *out = s_trip(&d.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->steps, d.steps);
    ck_assert_int_eq(out->samples, d.samples);
    ck_assert_uint_eq(out->bytes_pushed, d.bytes_pushed);
    ck_assert_uint_eq(out->bytes_pulled, d.bytes_pulled);
    ck_assert(out->train_seconds == d.train_seconds);
    ck_assert(out->compute_seconds == d.compute_seconds);
    ck_assert(out->wait_seconds == d.wait_seconds);
    ck_assert_uint_eq(out->n_test_accuracy, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert(out->test_accuracy[i] == accuracy[i]);
    }
    ck_assert(out->final_loss == d.final_loss);
    /* the most epochs a report may hold (past the arena: from malloc) */
    d.n_test_accuracy = PS_MAX_EPOCHS;
    accuracy[PS_MAX_EPOCHS - 1] = 0.5;
    out = s_trip(&d.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_uint_eq(out->n_test_accuracy, PS_MAX_EPOCHS);
    ck_assert(out->test_accuracy[PS_MAX_EPOCHS - 1] == 0.5);
    ps_arena_fini(&s_arena);
}
END_TEST

START_TEST(done_rejects_too_many_epochs_and_byte_types)
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
    ck_assert_ptr_null(s_raw(&shardps__done__descriptor, buf, at));
    ck_assert_ptr_null(s_raw(&shardps__done__descriptor, s_garbage, sizeof s_garbage));
    free(buf);
    /* a count for more message types than there are */
    static uint64_t counts[PS_BYTE_TYPES + 1];
    Shardps__Done d = SHARDPS__DONE__INIT;
    d.n_bytes_sent = PS_BYTE_TYPES;
    d.bytes_sent = counts;
    ck_assert_ptr_nonnull(s_trip(&d.base, NULL, 0));
    d.n_bytes_received = PS_BYTE_TYPES + 1;
    d.bytes_received = counts;
    ck_assert_ptr_null(s_trip(&d.base, NULL, 0));
    ps_arena_fini(&s_arena);
}
END_TEST

START_TEST(failover_fields_round_trip)
{
    Shardps__Header h, out;
    char why[PS_ERROR_MAX];
    ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
    h.generation = 7;
    uint8_t hb[PS_HEADER_MAX];
    int n = ps_codec_pack_header(&h, hb, sizeof hb);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(s_unpack(hb, (size_t)n, &out, why, sizeof why), 0);
    ck_assert_int_eq(out.generation, 7);
    Shardps__Register reg = SHARDPS__REGISTER__INIT;
    reg.role = PS_ROLE_SERVER;
    reg.rank = -1;
    reg.spare = 1;
    const Shardps__Register *rout = s_trip(&reg.base, NULL, 0);
    ck_assert_ptr_nonnull(rout);
    ck_assert_int_eq(rout->spare, 1);
    Shardps__FailoverReady rd = SHARDPS__FAILOVER_READY__INIT;
    rd.generation = 3;
    rd.step = 100;
    rd.from_version = 134;
    rd.stepped = 1;
    const Shardps__FailoverReady *rdo = s_trip(&rd.base, NULL, 0);
    ck_assert_ptr_nonnull(rdo);
    ck_assert_int_eq(rdo->generation, 3);
    ck_assert_int_eq(rdo->step, 100);
    ck_assert_int_eq(rdo->from_version, 134);
    ck_assert_int_eq(rdo->stepped, 1);
    rd.from_version = -1;
    ck_assert_ptr_null(s_trip(&rd.base, NULL, 0));
    ck_assert_str_eq(ps_codec_type_name(PS_MSG_FAILOVER_READY), "failover-ready");
    ps_view_t *v = s_view(3), *vo = calloc(1, sizeof *vo);
    v->generation = 5;
    v->replaced = 3; /* S2 */
    ck_assert_int_eq(s_view_trip(v, vo), 0);
    ck_assert_int_eq(vo->generation, 5);
    ck_assert_int_eq(vo->replaced, 3);
    v->replaced = 4; /* no S3 in a view of 3 servers */
    uint8_t *vb;
    size_t len;
    ck_assert_int_eq(s_view_pack(v, &vb, &len), PS_EINVAL);
    free(v);
    free(vo);
}
END_TEST

/* Members of n workers with the given live ranks. */
static Shardps__Members s_members(int n, int32_t *live, size_t nlive)
{
    Shardps__Members m = SHARDPS__MEMBERS__INIT;
    m.num_workers = n;
    m.n_live = nlive;
    m.live = live;
    return m;
}

START_TEST(members_round_trip)
{
    int32_t live[] = {0, 2, 3};
    Shardps__Members m = s_members(4, live, 3);
    const Shardps__Members *out = s_trip(&m.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->num_workers, 4);
    ck_assert_uint_eq(out->n_live, 3);
    ck_assert_mem_eq(out->live, live, sizeof live);
    /* worker counts outside [1, PS_MAX_WORKERS] */
    m = s_members(0, live, 1);
    ck_assert_ptr_null(s_trip(&m.base, NULL, 0));
    m = s_members(PS_MAX_WORKERS + 1, live, 1);
    ck_assert_ptr_null(s_trip(&m.base, NULL, 0));
}
END_TEST

START_TEST(metrics_report_and_status_round_trip)
{
    int32_t waiting[] = {1, 3};
    Shardps__MetricsReport r = SHARDPS__METRICS_REPORT__INIT;
    r.step = 42;
    r.samples = 4096;
    r.loss = 0.5;
    r.test_accuracy = -1;
    r.epoch = 2;
    r.n_waiting_for = 2;
    r.waiting_for = waiting;
    r.waited_seconds = 1.25;
    r.bytes_pushed = 7;
    r.bytes_pulled = 9;
    r.text = (char *)"a_total 1\n";
    const Shardps__MetricsReport *out = s_trip(&r.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->step, 42);
    ck_assert_uint_eq(out->n_waiting_for, 2);
    ck_assert_int_eq(out->waiting_for[1], 3);
    ck_assert(out->waited_seconds == 1.25 && out->test_accuracy == -1);
    ck_assert_str_eq(out->text, "a_total 1\n");
    Shardps__StatusNode n0 = SHARDPS__STATUS_NODE__INIT, n1 = SHARDPS__STATUS_NODE__INIT;
    Shardps__MetricsReport r0 = r;
    r0.text = (char *)"";
    n0.role = PS_ROLE_SERVER;
    n0.key_end = 10;
    n0.state = (char *)"running";
    n0.report = &r0;
    n1.role = PS_ROLE_WORKER;
    n1.rank = 1;
    n1.state = (char *)"done";
    n1.steps_per_second = 3.5;
    Shardps__StatusNode *nodes[] = {&n0, &n1};
    Shardps__StatusReply st = SHARDPS__STATUS_REPLY__INIT;
    st.phase = (char *)"running";
    st.model = (char *)"mlp";
    st.mode = (char *)"sync";
    st.total_steps = 100;
    st.num_params = 10;
    st.n_nodes = 2;
    st.nodes = nodes;
    const Shardps__StatusReply *got = s_trip(&st.base, NULL, 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(got->n_nodes, 2);
    ck_assert_str_eq(got->phase, "running");
    ck_assert_int_eq(got->nodes[0]->key_end, 10);
    ck_assert_int_eq(got->nodes[0]->report->waiting_for[0], 1);
    ck_assert_str_eq(got->nodes[0]->report->text, "");
    ck_assert_str_eq(got->nodes[1]->state, "done");
    ck_assert(got->nodes[1]->steps_per_second == 3.5);
    /* a phase longer than a status word */
    st.phase = (char *)"waiting-for-ever";
    ck_assert_ptr_null(s_trip(&st.base, NULL, 0));
    /* MetricsReport{waiting_for: 33 ranks}: more than a report may list */
    uint8_t many[2 + 33];
    many[0] = 0x32; /* field 6, length-delimited (packed) */
    many[1] = 33;
    memset(many + 2, 1, 33);
    ck_assert_ptr_null(s_raw(&shardps__metrics_report__descriptor, many, sizeof many));
}
END_TEST

START_TEST(members_rejects_bad_ranks_and_no_live_worker)
{
    const ProtobufCMessageDescriptor *d = &shardps__members__descriptor;
    /* Members{num_workers: 2, live: [5]}, packed */
    const uint8_t out_of_range[] = {0x08, 0x02, 0x12, 0x01, 0x05};
    ck_assert_ptr_null(s_raw(d, out_of_range, sizeof out_of_range));
    /* Members{num_workers: 2}: nobody live */
    const uint8_t none[] = {0x08, 0x02};
    ck_assert_ptr_null(s_raw(d, none, sizeof none));
    /* Members{num_workers: 0, live: [0]} */
    const uint8_t zero[] = {0x12, 0x01, 0x00};
    ck_assert_ptr_null(s_raw(d, zero, sizeof zero));
    ck_assert_ptr_null(s_raw(d, s_garbage, sizeof s_garbage));
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
    Shardps__PeerReady p = SHARDPS__PEER_READY__INIT;
    p.endpoint = (char *)"tcp://10.0.0.2:41001";
    const Shardps__PeerReady *out = s_trip(&p.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_str_eq(out->endpoint, "tcp://10.0.0.2:41001");
    char endpoint[PS_ENDPOINT_MAX + 1];
    s_fill(endpoint, sizeof endpoint, 'e');
    p.endpoint = endpoint;
    ck_assert_ptr_null(s_trip(&p.base, NULL, 0));
    p.endpoint = (char *)"";
    ck_assert_ptr_null(s_trip(&p.base, NULL, 0));
    ck_assert_ptr_null(s_raw(&shardps__peer_ready__descriptor, s_garbage, sizeof s_garbage));
}
END_TEST

/* A JoinStep of the given values. */
static Shardps__JoinStep s_join(int64_t step, int worker)
{
    Shardps__JoinStep j = SHARDPS__JOIN_STEP__INIT;
    j.step = step;
    j.worker = worker;
    return j;
}

START_TEST(join_step_round_trips_and_refuses_bad_values)
{
    Shardps__JoinStep j = s_join(12345, 3);
    j.checkpoint = 1;
    j.members = 1;
    j.token = 0xabcdef0123456789ull;
    const Shardps__JoinStep *out = s_trip(&j.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->step, 12345);
    ck_assert_int_eq(out->worker, 3);
    ck_assert_int_eq(out->checkpoint, 1);
    ck_assert_int_eq(out->members, 1);
    ck_assert_uint_eq(out->token, 0xabcdef0123456789ull);
    const Shardps__JoinStep bad[] = {s_join(-1, -1), s_join(PS_JOIN_MAX_STEP + 1, -1),
                                     s_join(1, -2), s_join(1, PS_MAX_WORKERS)};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_ptr_null(s_trip(&bad[i].base, NULL, 0));
    }
    ck_assert_ptr_null(s_raw(&shardps__join_step__descriptor, s_garbage, sizeof s_garbage));
    ck_assert_str_eq(ps_codec_type_name(PS_MSG_JOIN_STEP), "join-step");
}
END_TEST

START_TEST(scheduler_state_round_trips_with_its_view)
{
    ps_view_t *v = s_view(3), *out = calloc(1, sizeof *out);
    uint8_t *view;
    size_t vlen;
    ck_assert_int_eq(s_view_pack(v, &view, &vlen), 0);
    int32_t lost[] = {1};
    Shardps__JoinSchedulerState st = SHARDPS__JOIN_SCHEDULER_STATE__INIT;
    st.run_id = 0xfeedull;
    st.view.data = view;
    st.view.len = vlen;
    st.n_lost = 1;
    st.lost = lost;
    st.membership_changes = 3;
    st.workers_joined = 1;
    st.restarts = 2;
    st.checkpoint = 450;
    st.seconds = 12.5;
    const Shardps__JoinSchedulerState *got = s_trip(&st.base, NULL, 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(got->run_id, 0xfeedull);
    ck_assert_int_eq(got->membership_changes, 3);
    ck_assert_int_eq(got->workers_joined, 1);
    ck_assert_int_eq(got->restarts, 2);
    ck_assert_int_eq(got->checkpoint, 450);
    ck_assert_double_eq(got->seconds, 12.5);
    ck_assert_uint_eq(got->n_lost, 1);
    ck_assert_int_eq(got->lost[0], 1);
    ck_assert_int_eq(s_view_unpack(got->view.data, got->view.len, out), 0);
    ck_assert_int_eq(out->num_servers, 3);
    ck_assert_uint_eq(out->num_params, v->num_params);
    /* a lost rank outside the view's workers, and a view that does not decode */
    lost[0] = v->num_workers;
    ck_assert_ptr_null(s_trip(&st.base, NULL, 0));
    lost[0] = 1;
    st.view.len = vlen / 2;
    ck_assert_ptr_null(s_trip(&st.base, NULL, 0));
    ck_assert_ptr_null(
        s_raw(&shardps__join_scheduler_state__descriptor, s_garbage, sizeof s_garbage));
    free(view);
    free(out);
    free(v);
}
END_TEST

START_TEST(report_round_trips_steps_with_fewer_workers)
{
    static uint64_t staleness[PS_HIST_BUCKETS];
    Shardps__ServerReport r = SHARDPS__SERVER_REPORT__INIT;
    r.n_staleness = PS_HIST_BUCKETS;
    r.staleness = staleness;
    r.version = 1404;
    r.steps_fewer_workers = 1193;
    r.cpu_seconds = 12.5;
    const Shardps__ServerReport *out = s_trip(&r.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(out->version, 1404);
    ck_assert_int_eq(out->steps_fewer_workers, 1193);
    ck_assert(out->cpu_seconds == 12.5);
    /* a histogram of another size */
    r.n_staleness = PS_HIST_BUCKETS - 1;
    ck_assert_ptr_null(s_trip(&r.base, NULL, 0));
}
END_TEST

START_TEST(checkpoint_round_trips_and_refuses_bad_parts)
{
    Shardps__Checkpoint c = SHARDPS__CHECKPOINT__INIT;
    c.step = 50;
    c.file = (char *)"server-1.safetensors";
    c.size = 4096;
    c.crc32 = 0xdeadbeef;
    c.key_begin = 10;
    c.key_end = 20;
    c.version = 100;
    const Shardps__Checkpoint *out = s_trip(&c.base, NULL, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_str_eq(out->file, "server-1.safetensors");
    ck_assert_uint_eq(out->crc32, 0xdeadbeef);
    ck_assert_int_eq(out->version, 100);
    c.file = (char *)"../server-1.safetensors";
    ck_assert_ptr_null(s_trip(&c.base, NULL, 0));
    c.file = (char *)"";
    ck_assert_ptr_null(s_trip(&c.base, NULL, 0));
    c.file = (char *)"server-1.safetensors";
    c.step = 0;
    ck_assert_ptr_null(s_trip(&c.base, NULL, 0));
    c.step = 50;
    c.key_end = 9;
    ck_assert_ptr_null(s_trip(&c.base, NULL, 0));
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
    Shardps__Header h;
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
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_RING_DATA, PS_ROLE_WORKER, 2);
    h.key_end = 305;
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
        Shardps__Header h;
        ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
        h.request_id = 77 + (uint64_t)copy;
        h.key_begin = 10;
        h.key_end = 10 + N0 + N1;
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
        ck_assert_uint_eq(m.hdr.key_begin, 10);
        ck_assert_uint_eq(m.hdr.key_end, 10 + N0 + N1);
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
        Shardps__Header rh;
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
    Shardps__Header h;
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
    /* control message helpers: a body packed into the one frame, unpacked
     * into the message's arena */
    Shardps__Barrier bar = SHARDPS__BARRIER__INIT;
    bar.name = (char *)"init";
    ck_assert_int_eq(
        ps_msg_send_ctrl(p.dealer, NULL, PS_MSG_BARRIER, PS_ROLE_WORKER, 1, &bar.base), 0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), 0);
    ck_assert_int_eq(m.hdr.type, PS_MSG_BARRIER);
    ck_assert_int_eq(m.nframes, 1);
    const Shardps__Barrier *got = ps_msg_unpack_body(&m, &shardps__barrier__descriptor);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got->name, "init");
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
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
    h.request_id = 5;
    h.key_begin = 0;
    h.key_end = 8;
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
    ck_assert_ptr_nonnull(strstr(m.why, "payload"));
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
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_PUSH, PS_ROLE_WORKER, 1);
    h.request_id = 6;
    h.key_end = PS_MSG_MAX_FRAMES + 3;
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
    ck_assert_ptr_nonnull(strstr(m.why, "frames"));
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
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_PULL, PS_ROLE_WORKER, 1);
    h.protocol = PS_PROTOCOL_VERSION + 1;
    int n = s_pack(&h, buf, sizeof buf);
    s_send_raw(p.dealer, buf, (size_t)n, NULL, 0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    s_expect_stream_ok(&p, 302);
    /* an error reply to a rejected message decodes at the client */
    ps_msg_header(&h, PS_MSG_PULL, PS_ROLE_WORKER, 1);
    h.request_id = 303;
    h.key_begin = 9;
    h.key_end = 3; /* reversed */
    n = s_pack(&h, buf, sizeof buf);
    s_send_raw(p.dealer, buf, (size_t)n, NULL, 0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), PS_EPROTO);
    ck_assert_int_eq(ps_msg_reply_error(p.router, &m, PS_ROLE_SERVER, 0, PS_EPROTO,
                                        "malformed: %s", m.why),
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

START_TEST(msg_bodies_of_any_size_and_their_refusals)
{
    s_pair_t p;
    s_pair_open(&p);
    /* a view of many servers: bigger than the stack's pack buffer and the
     * message's arena, so both fall back to malloc */
    ps_view_t *v = s_view(PS_MAX_SERVERS), *out = calloc(1, sizeof *out);
    ps_view_pb_t *pb = malloc(sizeof *pb);
    ck_assert(out && pb);
    ck_assert_int_eq(ps_codec_view_to_pb(v, pb), 0);
    ck_assert_uint_gt(protobuf_c_message_get_packed_size(&pb->pb.base), PS_MSG_ARENA * 4);
    ps_sock_t *pull; /* a PULL socket cannot send: refused, nothing leaks */
    char err[128];
    ck_assert_int_eq(ps_sock_new(p.ctx, PS_SOCK_PULL, &pull, err, sizeof err), 0);
    ck_assert_int_ne(
        ps_msg_send_ctrl(pull, NULL, PS_MSG_VIEW, PS_ROLE_SCHEDULER, 0, &pb->pb.base), 0);
    ps_sock_destroy(&pull);
    ck_assert_int_eq(
        ps_msg_send_ctrl(p.dealer, NULL, PS_MSG_VIEW, PS_ROLE_SCHEDULER, 0, &pb->pb.base), 0);
    ps_msg_t m = {0};
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), 0);
    const Shardps__ClusterView *cv = ps_msg_unpack_body(&m, &shardps__cluster_view__descriptor);
    ck_assert_ptr_nonnull(cv);
    ck_assert_uint_eq(cv->n_servers, PS_MAX_SERVERS);
    ck_assert_ptr_nonnull(m.arena.big);
    ck_assert_int_eq(ps_codec_view_from_pb(cv, out, NULL, 0), 0);
    ck_assert_str_eq(out->servers[PS_MAX_SERVERS - 1].endpoint,
                     v->servers[PS_MAX_SERVERS - 1].endpoint);
    /* the wrong type for the frame: refused with a reason */
    ck_assert_ptr_null(ps_msg_unpack_body(&m, &shardps__members__descriptor));
    ck_assert_str_ne(m.why, "");
    ps_msg_close(&m);
    ck_assert_ptr_null(m.arena.big);
    /* no body at all */
    ck_assert_int_eq(ps_msg_send_ctrl(p.dealer, NULL, PS_MSG_BARRIER, PS_ROLE_WORKER, 1, NULL),
                     0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), 0);
    ck_assert_ptr_null(ps_msg_unpack_body(&m, &shardps__barrier__descriptor));
    ck_assert_ptr_nonnull(strstr(m.why, "0 payload frames"));
    ps_msg_close(&m);
    /* the header of a registration carries the sender's clock */
    ck_assert_int_eq(ps_msg_send_ctrl(p.dealer, NULL, PS_MSG_REGISTER, PS_ROLE_WORKER, 1, NULL),
                     0);
    ck_assert_int_eq(ps_msg_recv(p.router, PS_RECV_ROUTER, &m), 0);
    ck_assert(m.hdr.clock > 0);
    ps_msg_close(&m);
    free(pb);
    free(out);
    free(v);
    s_pair_close(&p);
}
END_TEST

/* A reason that quotes bytes as they came, or is cut inside a character,
 * leaves as valid UTF-8: bad bytes become '?', good characters stay. */
START_TEST(header_error_is_sent_as_utf8)
{
    char t[] = "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 bad \xff \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 cut \xe2\x82";
    ck_assert_uint_eq(ps_text_utf8_fix(t), 12);
    ck_assert_str_eq(t, "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 bad ? ?? ??? ???? cut ??");
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_ERROR, PS_ROLE_SCHEDULER, 0);
    char raw[] = "build 'x\xff\xfey'";
    h.error = raw;
    uint8_t buf[PS_HEADER_MAX];
    int len = ps_codec_pack_header(&h, buf, sizeof buf);
    ck_assert_int_gt(len, 0);
    ck_assert_str_eq(raw, "build 'x\xff\xfey'"); /* the caller's string is left alone */
    ps_arena_t a;
    uint8_t abuf[1024];
    ps_arena_init(&a, abuf, sizeof abuf);
    Shardps__Header out;
    char why[128];
    ck_assert_int_eq(ps_codec_unpack_header(buf, (size_t)len, &a, &out, why, sizeof why), 0);
    ck_assert_str_eq(out.error, "build 'x??y'");
    ps_arena_fini(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codec");
    TCase *th = tcase_create("header");
    tcase_add_test(th, header_error_is_sent_as_utf8);
    tcase_add_test(th, header_round_trips_every_field);
    tcase_add_test(th, header_round_trips_every_type_and_role);
    tcase_add_test(th, header_pack_reports_a_small_buffer);
    tcase_add_test(th, header_rejects_garbage_and_empty);
    tcase_add_test(th, header_rejects_truncation);
    tcase_add_test(th, header_reads_an_overlong_error_text_as_empty);
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
    tcase_add_test(tb, register_rejects_other_roles_long_strings_and_garbage);
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
    tcase_add_test(tb, done_rejects_too_many_epochs_and_byte_types);
    tcase_add_test(tb, view_round_trips_worker_tokens_only_when_set);
    tcase_add_test(tb, peer_ready_round_trips_and_needs_an_endpoint);
    tcase_add_test(tb, members_round_trip);
    tcase_add_test(tb, metrics_report_and_status_round_trip);
    tcase_add_test(tb, failover_fields_round_trip);
    tcase_add_test(tb, members_rejects_bad_ranks_and_no_live_worker);
    tcase_add_test(tb, report_round_trips_steps_with_fewer_workers);
    tcase_add_test(tb, join_step_round_trips_and_refuses_bad_values);
    tcase_add_test(tb, scheduler_state_round_trips_with_its_view);
    tcase_add_test(tb, checkpoint_round_trips_and_refuses_bad_parts);
    suite_add_tcase(s, tb);
    TCase *tm = tcase_create("msg");
    tcase_add_test(tm, msg_round_trips_payload_frames);
    tcase_add_test(tm, msg_send_zc_releases_every_frame_once);
    tcase_add_test(tm, msg_rejects_payload_length_mismatch);
    tcase_add_test(tm, msg_rejects_too_many_frames);
    tcase_add_test(tm, msg_rejects_a_bad_header_and_drains_its_frames);
    tcase_add_test(tm, msg_recv_times_out_without_a_message);
    tcase_add_test(tm, msg_bodies_of_any_size_and_their_refusals);
    tcase_set_timeout(tm, 30);
    suite_add_tcase(s, tm);
    return ps_test_run(s);
}
