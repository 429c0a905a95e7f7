/*
 * tests/unit/test_intake.c - the checks of workers' data messages and the
 * holders of push frames: a well-formed push, pull and init pass; an
 * unknown sender, a forged token (counted), keys outside the shard, steps
 * past 2^53, a payload of the wrong dtype, entries or length are each
 * refused with the exact PS_E* and a reason; a push received on a real
 * inproc socket is held in place (fp32) or decoded (fp16), given back on
 * release, and a bad sparse payload is refused with nothing held.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "proto/msg.h"
#include "proto/sock.h"
#include "proto/wire.h"
#include "server/intake.h"
#include "tests/unit/testutil.h"

enum { S_BEGIN = 100, S_END = 200, S_HOLDERS = 3 };

static const uint64_t s_tokens[2] = {11, 22};

static ps_intake_t *s_new(uint32_t push_dtype)
{
    ps_intake_t *in = NULL;
    const ps_intake_config_t cfg = {{S_BEGIN, S_END}, 2, s_tokens, push_dtype, S_HOLDERS};
    ck_assert_int_eq(ps_intake_new(&in, &cfg), 0);
    return in;
}

/* A well-formed request of type from worker w for keys [a, b), fp32. */
static Shardps__Header s_req(ps_msg_type_t type, int w, uint64_t a, uint64_t b)
{
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_WORKER, w);
    h.token = s_tokens[w];
    h.key_begin = a;
    h.key_end = b;
    if (type != PS_MSG_PULL) {
        h.dtype = PS_DTYPE_F32;
        h.payload_len = (b - a) * sizeof(float);
    }
    return h;
}

static int s_check(ps_intake_t *in, const Shardps__Header *h, int nframes, const char *want_why)
{
    char why[160] = "";
    int rc = ps_intake_check(in, h, nframes, why, sizeof why);
    if (want_why) {
        ck_assert_msg(strstr(why, want_why), "reason '%s' lacks '%s'", why, want_why);
    }
    return rc;
}

START_TEST(well_formed_requests_pass)
{
    ps_intake_t *in = s_new(PS_DTYPE_F32);
    Shardps__Header h = s_req(PS_MSG_PUSH, 1, S_BEGIN, S_END);
    ck_assert_int_eq(s_check(in, &h, 1, NULL), 0);
    h = s_req(PS_MSG_PULL, 0, 150, 160);
    ck_assert_int_eq(s_check(in, &h, 0, NULL), 0);
    h = s_req(PS_MSG_INIT, 0, 100, 101);
    ck_assert_int_eq(s_check(in, &h, 1, NULL), 0);
    ck_assert(ps_intake_is_push(PS_MSG_PUSH_PULL));
    ck_assert(!ps_intake_is_push(PS_MSG_INIT));
    ck_assert_int_eq(ps_intake_held(in), 0);
    ps_intake_destroy(&in);
    ck_assert_ptr_null(in);
    ps_intake_destroy(&in); /* NULL-safe */
}
END_TEST

START_TEST(strangers_and_forged_tokens_are_refused)
{
    ps_intake_t *in = s_new(PS_DTYPE_F32);
    Shardps__Header h = s_req(PS_MSG_PULL, 0, 150, 160);
    h.sender = 2;
    ck_assert_int_eq(s_check(in, &h, 0, "unknown sender W2"), PS_ENOENT);
    h = s_req(PS_MSG_PULL, 0, 150, 160);
    h.role = PS_ROLE_SERVER;
    ck_assert_int_eq(s_check(in, &h, 0, "unknown sender"), PS_ENOENT);
    ck_assert_uint_eq(ps_intake_forged(in), 0);
    h = s_req(PS_MSG_PULL, 1, 150, 160);
    h.token = s_tokens[0];
    ck_assert_int_eq(s_check(in, &h, 0, "not W1"), PS_ENOENT);
    ck_assert_uint_eq(ps_intake_forged(in), 1);
    ps_intake_destroy(&in);
}
END_TEST

START_TEST(keys_steps_and_payloads_out_of_bounds_are_refused)
{
    ps_intake_t *in = s_new(PS_DTYPE_F32);
    Shardps__Header h = s_req(PS_MSG_PULL, 0, 150, 201);
    ck_assert_int_eq(s_check(in, &h, 0, "not inside this server's shard"), PS_ERANGE);
    h = s_req(PS_MSG_PULL, 0, 150, 150);
    ck_assert_int_eq(s_check(in, &h, 0, "[150, 150)"), PS_ERANGE);
    h = s_req(PS_MSG_PULL, 0, 150, 160);
    h.step = PS_MSG_MAX_STEP + 1;
    ck_assert_int_eq(s_check(in, &h, 0, "outside [0, 2^53]"), PS_ERANGE);
    h = s_req(PS_MSG_PULL, 0, 150, 160);
    h.pull_version = -1;
    ck_assert_int_eq(s_check(in, &h, 0, "outside [0, 2^53]"), PS_ERANGE);
    h = s_req(PS_MSG_PUSH, 0, 150, 160);
    h.dtype = PS_DTYPE_F16;
    ck_assert_int_eq(s_check(in, &h, 1, "payload is f"), PS_ERANGE);
    h = s_req(PS_MSG_PUSH, 0, 150, 160);
    h.payload_len -= 4;
    ck_assert_int_eq(s_check(in, &h, 1, "the range needs 40 bytes"), PS_ERANGE);
    h = s_req(PS_MSG_PUSH, 0, 150, 160);
    ck_assert_int_eq(s_check(in, &h, 2, "in 2 frames"), PS_ERANGE);
    h = s_req(PS_MSG_PULL, 0, 150, 160);
    h.payload_len = 4;
    ck_assert_int_eq(s_check(in, &h, 1, "the range needs 0 bytes"), PS_ERANGE);
    ps_intake_destroy(&in);
}
END_TEST

START_TEST(sparse_pushes_need_entries_within_their_keys)
{
    const uint32_t sparse = ps_wire_sparse_of(PS_DTYPE_F32);
    ps_intake_t *in = s_new(sparse);
    Shardps__Header h = s_req(PS_MSG_PUSH, 0, 150, 160);
    h.dtype = sparse;
    h.nnz = 0;
    ck_assert_int_eq(s_check(in, &h, 1, "no entries"), PS_ERANGE);
    h.nnz = 11;
    ck_assert_int_eq(s_check(in, &h, 1, "11 sparse entries for 10 keys"), PS_ERANGE);
    h.nnz = 3;
    h.payload_len = ps_wire_payload_len(sparse, 10, 3);
    ck_assert_int_eq(s_check(in, &h, 1, NULL), 0);
    h = s_req(PS_MSG_INIT, 0, 150, 160); /* init stays fp32 */
    ck_assert_int_eq(s_check(in, &h, 1, NULL), 0);
    ps_intake_destroy(&in);
}
END_TEST

/* Sends h with payload over an inproc PUSH socket and receives it on the
 * PULL end into *m: a real received message. */
static void s_transfer(ps_sock_t *tx, ps_sock_t *rx, Shardps__Header h, const void *payload,
                       size_t len, ps_msg_t *m)
{
    ps_frame_t f = {payload, len};
    ck_assert_int_eq(ps_msg_send(tx, NULL, h, &f, 1, PS_SEND_COPY), 0);
    *m = (ps_msg_t){0};
    ck_assert_int_eq(ps_msg_recv(rx, 0, m), 0);
}

START_TEST(push_frames_are_held_in_place_or_decoded_and_given_back)
{
    ps_ctx_t *ctx = NULL;
    ps_sock_t *tx = NULL, *rx = NULL;
    char err[128];
    ck_assert_int_eq(ps_ctx_new(&ctx), 0);
    ck_assert_int_eq(ps_sock_new(ctx, PS_SOCK_PULL, &rx, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_bind(rx, "inproc://test-intake", NULL, 0, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_new(ctx, PS_SOCK_PUSH, &tx, err, sizeof err), 0);
    ck_assert_int_eq(ps_sock_connect(tx, "inproc://test-intake"), 0);
    float g[10];
    ps_test_fill(g, 10, -1, 1, 3);
    char why[160];
    /* fp32: the frame itself is the gradient */
    ps_intake_t *in = s_new(PS_DTYPE_F32);
    ps_msg_t m;
    s_transfer(tx, rx, s_req(PS_MSG_PUSH, 0, 150, 160), g, sizeof g, &m);
    ps_request_t req = {.range = {150, 160}};
    ck_assert_int_eq(ps_intake_hold(in, &m, &req, why, sizeof why), 0);
    ps_msg_close(&m); /* the frame outlives its message */
    ck_assert_int_eq(ps_intake_held(in), 1);
    ck_assert_mem_eq(req.data, g, sizeof g);
    ps_intake_release(in, req.frame);
    ck_assert_int_eq(ps_intake_held(in), 0);
    ps_intake_destroy(&in);
    /* fp16: decoded into a buffer of the holder */
    in = s_new(PS_DTYPE_F16);
    uint16_t half[10];
    ps_wire_encode(PS_DTYPE_F16, half, g, 10);
    Shardps__Header h = s_req(PS_MSG_PUSH, 0, 150, 160);
    h.dtype = PS_DTYPE_F16;
    s_transfer(tx, rx, h, half, sizeof half, &m);
    ck_assert_int_eq(ps_intake_hold(in, &m, &req, why, sizeof why), 0);
    ps_msg_close(&m);
    const float *got = req.data;
    for (int i = 0; i < 10; i++) {
        ck_assert(ps_test_close(got[i], g[i], 1e-3, 1e-3));
    }
    ps_intake_release(in, req.frame);
    ps_intake_destroy(&in);
    /* a sparse offset past the keys: refused, nothing held */
    const uint32_t sparse = ps_wire_sparse_of(PS_DTYPE_F32);
    in = s_new(sparse);
    const struct {
        uint32_t off[2];
        float val[2];
    } bad = {{3, 10}, {1.0f, 2.0f}};
    h = s_req(PS_MSG_PUSH, 0, 150, 160);
    h.dtype = sparse;
    h.nnz = 2;
    s_transfer(tx, rx, h, &bad, sizeof bad, &m);
    ck_assert_int_eq(ps_intake_hold(in, &m, &req, why, sizeof why), PS_ERANGE);
    ck_assert_int_eq(ps_intake_held(in), 0);
    ps_msg_close(&m);
    ps_intake_destroy(&in);
    ps_sock_destroy(&tx);
    ps_sock_destroy(&rx);
    ps_ctx_destroy(&ctx);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("intake");
    TCase *tc = tcase_create("intake");
    tcase_add_test(tc, well_formed_requests_pass);
    tcase_add_test(tc, strangers_and_forged_tokens_are_refused);
    tcase_add_test(tc, keys_steps_and_payloads_out_of_bounds_are_refused);
    tcase_add_test(tc, sparse_pushes_need_entries_within_their_keys);
    tcase_add_test(tc, push_frames_are_held_in_place_or_decoded_and_given_back);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
