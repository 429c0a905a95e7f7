/*
 * tests/unit/test_kv_slots.c - the KV client's request table, without
 * sockets: request ids and their recycling, late replies dropped, pull
 * reassembly in key order, failures completing a request with its own status
 * and reason.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "tests/unit/testutil.h"
#include "worker/kv_slots.h"

/* Two servers: S0 holds keys [0, 10), S1 [10, 16). */
static ps_kv_slots_t *s_table(void)
{
    ps_range_t servers[2] = {{0, 10}, {10, 16}};
    ps_kv_slots_t *t = NULL;
    ck_assert_int_eq(ps_kv_slots_new(servers, 2, &t), 0);
    return t;
}

/* A reply header from server i to request id. */
static Shardps__Header s_reply(ps_msg_type_t type, int i, uint64_t id, uint64_t b, uint64_t e)
{
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, i);
    h.request_id = id;
    h.key_begin = b;
    h.key_end = e;
    h.dtype = PS_DTYPE_F32; /* what ps_msg_send sets on any payload */
    return h;
}

/* Feeds a pull reply of keys [b, e) from server i whose values are key + 0.5. */
static int s_pull_part(ps_kv_slots_t *t, int i, uint64_t id, uint64_t b, uint64_t e,
                       uint64_t *pulled)
{
    float v[16];
    for (uint64_t k = b; k < e; k++) {
        v[k - b] = (float)k + 0.5f;
    }
    Shardps__Header h = s_reply(PS_MSG_PULL_REPLY, i, id, b, e);
    return ps_kv_slots_on_reply(t, i, &h, &(ps_frame_t){v, (e - b) * sizeof(float)}, 1, pulled);
}

/* Acks from S0 (on_s0 of them) then S1 (on_s1): the last one, not before,
 * completes request id (slot sl) without a failure. */
static void s_acks_end_it(ps_kv_slots_t *t, const ps_kv_slot_t *sl, uint64_t id, int on_s0,
                          int on_s1)
{
    for (int k = 0; k < on_s0 + on_s1; k++) {
        ck_assert_int_eq(sl->state, PS_KV_SENT);
        Shardps__Header h = s_reply(PS_MSG_PUSH_ACK, k < on_s0 ? 0 : 1, id, 0, 0);
        ck_assert_int_eq(ps_kv_slots_on_reply(t, k < on_s0 ? 0 : 1, &h, NULL, 0, NULL), 0);
    }
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    ck_assert_int_eq(sl->status, 0);
}

START_TEST(ids_carry_index_and_generation)
{
    ps_kv_slots_t *t = s_table();
    float buf[16];
    int a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, 16}, buf, 0);
    int b = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, 16}, buf, 0);
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(b, 1);
    uint64_t id_a = ps_kv_slots_id(t, a);
    ck_assert_uint_eq(id_a & 0xff, 0);
    ck_assert_uint_eq(ps_kv_slots_id(t, b) & 0xff, 1);
    /* recycled: same index, a new id */
    ps_kv_slots_release(t, a);
    ck_assert_int_eq(ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 4}, buf, 0), a);
    ck_assert_uint_ne(ps_kv_slots_id(t, a), id_a);
    ck_assert_uint_eq(ps_kv_slots_id(t, a) & 0xff, 0);
    /* every slot in use */
    for (int i = 2; i < PS_KV_SLOTS; i++) {
        ck_assert_int_eq(ps_kv_slots_open(t, PS_KV_BARRIER, (ps_range_t){0, 0}, NULL, 0), i);
    }
    ck_assert_int_eq(ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, 1}, buf, 0), PS_ENOMEM);
    ps_kv_slots_destroy(&t);
    ck_assert_ptr_null(t);
    ps_kv_slots_destroy(&t);
}
END_TEST

START_TEST(push_completes_with_one_ack_per_server)
{
    ps_kv_slots_t *t = s_table();
    float g[16] = {0};
    int a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){8, 12}, g, 5); /* both servers */
    int b = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, 4}, g, 5);  /* S0 only */
    const ps_kv_slot_t *sa = ps_kv_slots_get(t, a), *sb = ps_kv_slots_get(t, b);
    ck_assert_uint_eq(sa->left, 2);
    ck_assert_uint_eq(sb->left, 1);
    ck_assert_int_eq(sa->step, 5);
    Shardps__Header h = s_reply(PS_MSG_PUSH_ACK, 1, ps_kv_slots_id(t, a), 10, 12);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 1, &h, NULL, 0, NULL), 0);
    ck_assert_int_eq(sa->state, PS_KV_SENT);
    h = s_reply(PS_MSG_PUSH_ACK, 0, ps_kv_slots_id(t, a), 8, 10);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, NULL, 0, NULL), 0);
    ck_assert_int_eq(sa->state, PS_KV_DONE);
    ck_assert_int_eq(sa->status, 0);
    ck_assert_int_eq(sb->state, PS_KV_SENT);
    /* a request that touches no server is done at once */
    int c = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){3, 3}, g, 5);
    ck_assert_int_eq(ps_kv_slots_get(t, c)->state, PS_KV_DONE);
    ps_kv_slots_destroy(&t);
}
END_TEST

START_TEST(late_reply_to_a_recycled_slot_is_dropped)
{
    ps_kv_slots_t *t = s_table();
    float g[16] = {0}, dst[16] = {0};
    int a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, 4}, g, 0);
    uint64_t old = ps_kv_slots_id(t, a);
    ps_kv_slots_complete(t, a, PS_ECLOSED, "given up");
    ps_kv_slots_release(t, a);
    ck_assert_int_eq(ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 4}, dst, 0), a);
    /* the old push's ack, and a pull reply under the old id */
    Shardps__Header h = s_reply(PS_MSG_PUSH_ACK, 0, old, 0, 4);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, NULL, 0, NULL), PS_ENOENT);
    uint64_t pulled = 99;
    ck_assert_int_eq(s_pull_part(t, 0, old, 0, 4, &pulled), PS_ENOENT);
    ck_assert_uint_eq(pulled, 0);
    const ps_kv_slot_t *sl = ps_kv_slots_get(t, a);
    ck_assert_int_eq(sl->state, PS_KV_SENT);
    ck_assert_uint_eq(sl->left, 4);
    ck_assert(dst[0] == 0.0f);
    /* wrong sender, unknown index, not a server: dropped too */
    uint64_t id = ps_kv_slots_id(t, a);
    h = s_reply(PS_MSG_PULL_REPLY, 1, id, 0, 4); /* says S1, came from S0's socket */
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, &(ps_frame_t){dst, 16}, 1, NULL), PS_ENOENT);
    ck_assert_int_eq(s_pull_part(t, 0, id | 0xff, 0, 4, NULL), PS_ENOENT);
    h = s_reply(PS_MSG_PULL_REPLY, 0, id, 0, 4);
    h.role = PS_ROLE_WORKER;
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, &(ps_frame_t){dst, 16}, 1, NULL), PS_ENOENT);
    ck_assert_int_eq(sl->state, PS_KV_SENT);
    /* the current id completes it */
    ck_assert_int_eq(s_pull_part(t, 0, id, 0, 4, &pulled), 0);
    ck_assert_uint_eq(pulled, 4 * sizeof(float));
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    /* and a second copy of that reply finds the slot done: dropped */
    ck_assert_int_eq(s_pull_part(t, 0, id, 0, 4, NULL), PS_ENOENT);
    ps_kv_slots_destroy(&t);
}
END_TEST

START_TEST(pull_completes_when_every_key_arrived_in_order)
{
    ps_kv_slots_t *t = s_table();
    float dst[16] = {0};
    int a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){2, 14}, dst + 2, 7);
    uint64_t id = ps_kv_slots_id(t, a);
    const ps_kv_slot_t *sl = ps_kv_slots_get(t, a);
    ck_assert_uint_eq(sl->left, 12);
    /* S0's keys [2, 10) in two messages, S1's [10, 14) in one; servers interleave */
    ck_assert_int_eq(s_pull_part(t, 0, id, 2, 6, NULL), 0);
    ck_assert_int_eq(s_pull_part(t, 1, id, 10, 14, NULL), 0);
    ck_assert_int_eq(sl->state, PS_KV_SENT);
    ck_assert_uint_eq(sl->left, 4);
    ck_assert_int_eq(s_pull_part(t, 0, id, 6, 10, NULL), 0);
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    ck_assert_int_eq(sl->status, 0);
    for (int k = 2; k < 14; k++) {
        ck_assert(dst[k] == (float)k + 0.5f);
    }
    ck_assert(dst[0] == 0.0f && dst[14] == 0.0f);
    ps_kv_slots_destroy(&t);
}
END_TEST

START_TEST(push_pull_completes_with_the_values_into_dst_not_the_gradient)
{
    ps_kv_slots_t *t = s_table();
    float grad[16], dst[16] = {0};
    for (int k = 0; k < 16; k++) {
        grad[k] = -1.0f;
    }
    int a = ps_kv_slots_open_push_pull(t, (ps_range_t){4, 16}, grad + 4, 9, dst + 4, 10);
    uint64_t id = ps_kv_slots_id(t, a);
    const ps_kv_slot_t *sl = ps_kv_slots_get(t, a);
    ck_assert_int_eq(sl->type, PS_KV_PUSH_PULL);
    ck_assert_int_eq(sl->step, 9);
    ck_assert_int_eq(sl->pull_version, 10);
    ck_assert_uint_eq(sl->left, 12); /* keys: the values are the acks */
    ck_assert_int_eq(s_pull_part(t, 1, id, 10, 16, NULL), 0);
    uint64_t pulled = 0;
    ck_assert_int_eq(s_pull_part(t, 0, id, 4, 10, &pulled), 0);
    ck_assert_uint_eq(pulled, 6 * sizeof(float));
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    ck_assert_int_eq(sl->status, 0);
    for (int k = 4; k < 16; k++) {
        ck_assert(dst[k] == (float)k + 0.5f);
        ck_assert(grad[k] == -1.0f);
    }
    ck_assert(dst[0] == 0.0f && dst[3] == 0.0f);
    ps_kv_slots_release(t, a);
    /* a separate ack is not its answer */
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){0, 16}, grad, 9, dst, 10);
    Shardps__Header h = s_reply(PS_MSG_PUSH_ACK, 0, ps_kv_slots_id(t, a), 0, 10);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, NULL, 0, NULL), 0);
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    ck_assert_int_eq(sl->status, PS_EPROTO);
    ps_kv_slots_release(t, a);
    /* a refused push fails the round with the server's status */
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){0, 16}, grad, 9, dst, 10);
    h = s_reply(PS_MSG_ERROR, 1, ps_kv_slots_id(t, a), 10, 16);
    h.status = PS_ENONFINITE;
    h.error = (char *)"gradient holds NaN or infinity";
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 1, &h, NULL, 0, NULL), 0);
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    ck_assert_int_eq(sl->status, PS_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(sl->error, "NaN"));
    ps_kv_slots_destroy(&t);
}
END_TEST

/* Chunks of 4 keys from each server's first key (S0 [0, 10), S1 [10, 16)),
 * a round's layers pushed last first: [12, 16), [6, 12), then [0, 6). Each
 * push-pull pulls the whole chunks its keys complete: [14, 16); [8, 10) and
 * [10, 14); [0, 8): every key once, and no pull waits for a later push. */
START_TEST(layer_push_pulls_pull_the_chunks_they_complete)
{
    ps_kv_slots_t *t = s_table();
    ps_kv_slots_set_chunk(t, 4, 0);
    float grad[16] = {0}, dst[16] = {0};
    int a = ps_kv_slots_open_push_pull(t, (ps_range_t){12, 16}, grad + 12, 9, dst + 12, 10);
    ps_range_t push, pull;
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 0, &push, &pull), PS_KV_PULL);
    ck_assert_uint_eq(ps_range_len(pull), 0);
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 1, &push, &pull), PS_KV_PUSH);
    ck_assert(push.begin == 12 && push.end == 16 && pull.begin == 14 && pull.end == 16);
    const ps_kv_slot_t *sl = ps_kv_slots_get(t, a);
    ck_assert_uint_eq(sl->left, 2 + 2); /* two push pieces, two keys */
    uint64_t id = ps_kv_slots_id(t, a);
    ck_assert_int_eq(s_pull_part(t, 1, id, 14, 16, NULL), 0);
    s_acks_end_it(t, sl, id, 0, 2);
    ck_assert(dst[14] == 14.5f && dst[15] == 15.5f && dst[12] == 0.0f);
    ps_kv_slots_release(t, a);
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){6, 12}, grad + 6, 9, dst + 6, 10);
    sl = ps_kv_slots_get(t, a);
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 0, &push, &pull), PS_KV_PUSH);
    ck_assert(push.begin == 6 && push.end == 10 && pull.begin == 8 && pull.end == 10);
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 1, &push, &pull), PS_KV_PUSH);
    ck_assert(push.begin == 10 && push.end == 12 && pull.begin == 10 && pull.end == 14);
    ck_assert_uint_eq(sl->left, 2 + 2 + 1 + 4);
    id = ps_kv_slots_id(t, a);
    ck_assert_int_eq(s_pull_part(t, 1, id, 10, 14, NULL), 0);
    ck_assert_int_eq(s_pull_part(t, 0, id, 8, 10, NULL), 0);
    s_acks_end_it(t, sl, id, 2, 1);
    ck_assert(dst[8] == 8.5f && dst[13] == 13.5f && dst[7] == 0.0f && dst[12] == 12.5f);
    ps_kv_slots_release(t, a);
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){0, 6}, grad, 9, dst, 10);
    sl = ps_kv_slots_get(t, a);
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 0, &push, &pull), PS_KV_PUSH);
    ck_assert(push.begin == 0 && push.end == 6 && pull.begin == 0 && pull.end == 8);
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 1, &push, &pull), PS_KV_PULL);
    ck_assert_uint_eq(sl->left, 2 + 8);
    id = ps_kv_slots_id(t, a);
    ck_assert_int_eq(s_pull_part(t, 0, id, 0, 8, NULL), 0);
    s_acks_end_it(t, sl, id, 2, 0);
    for (int k = 0; k < 16; k++) {
        ck_assert(dst[k] == (float)k + 0.5f);
    }
    ps_kv_slots_release(t, a);
    /* a part outside the chunks it pulls, a key twice, or an ack from a
     * server whose push was folded into its reply fails the round */
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){12, 16}, grad + 12, 9, dst + 12, 10);
    ck_assert_int_eq(s_pull_part(t, 1, ps_kv_slots_id(t, a), 12, 16, NULL), 0);
    ck_assert_int_eq(ps_kv_slots_get(t, a)->status, PS_EPROTO);
    ps_kv_slots_release(t, a);
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){6, 12}, grad + 6, 9, dst + 6, 10);
    ck_assert_int_eq(s_pull_part(t, 1, ps_kv_slots_id(t, a), 10, 12, NULL), 0);
    ck_assert_int_eq(s_pull_part(t, 1, ps_kv_slots_id(t, a), 10, 12, NULL), 0);
    ck_assert_int_eq(ps_kv_slots_get(t, a)->status, PS_EPROTO);
    ps_kv_slots_release(t, a);
    ps_kv_slots_set_chunk(t, 16, 0); /* one chunk each: one push-pull per server */
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){0, 16}, grad, 9, dst, 10);
    Shardps__Header h = s_reply(PS_MSG_PUSH_ACK, 0, ps_kv_slots_id(t, a), 0, 10);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, NULL, 0, NULL), 0);
    ck_assert_int_eq(ps_kv_slots_get(t, a)->status, PS_EPROTO);
    ps_kv_slots_destroy(&t);
}
END_TEST

/* Chunks of 4 keys from each server's first key: a push of [2, 16) goes to
 * S0 as [2, 4) [4, 8) [8, 10) and to S1 as [10, 14) [14, 16), an ack each; a
 * push-pull of every key pushes in chunks and pulls behind them, its acks due. */
START_TEST(pushes_go_a_message_per_chunk_each_acked)
{
    ps_kv_slots_t *t = s_table();
    ps_kv_slots_set_chunk(t, 4, 0);
    float grad[16] = {0}, dst[16] = {0};
    int a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){2, 16}, grad, 3);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, a, 0, 2, 10), 4);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, a, 0, 8, 10), 10);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, a, 1, 10, 16), 14);
    const ps_kv_slot_t *sl = ps_kv_slots_get(t, a);
    ck_assert_uint_eq(sl->left, 5);
    uint64_t id = ps_kv_slots_id(t, a);
    s_acks_end_it(t, sl, id, 3, 2);
    ps_kv_slots_release(t, a);
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){0, 16}, grad, 9, dst, 10);
    sl = ps_kv_slots_get(t, a);
    ck_assert_uint_eq(sl->left, 16 + 3 + 2);
    ps_range_t pushed, pulled;
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 0, &pushed, &pulled), PS_KV_PUSH);
    ck_assert_uint_eq(pushed.end, 10);
    ck_assert_uint_eq(pulled.end, 10);
    ps_kv_slots_release(t, a);
    ps_kv_slots_set_pace(t, 0); /* not measured: the largest, one message per server */
    int b = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){2, 16}, grad, 4);
    ck_assert_uint_eq(ps_kv_slots_get(t, b)->left, 2);
    ps_kv_slots_release(t, b);
    /* 11 keys a PS_KV_PIECE_SECONDS, but shards of 8 keys in at least
     * PS_KV_SHARD_PIECES messages: one chunk each, cut from each server's
     * first key: S0 [2, 4) [4, 8) [8, 10), S1 [10, 14) [14, 16) */
    ps_kv_slots_set_pace(t, 11 / PS_KV_PIECE_SECONDS);
    b = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){2, 16}, grad, 5);
    ck_assert_uint_eq(ps_kv_slots_get(t, b)->left, 5);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, b, 0, 4, 10), 8);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, b, 1, 10, 16), 14);
    ps_kv_slots_release(t, b);
    ps_kv_slots_set_pace(t, 1 / PS_KV_PIECE_SECONDS); /* never under a chunk */
    b = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){2, 16}, grad, 6);
    ck_assert_uint_eq(ps_kv_slots_get(t, b)->left, 5);
    ps_kv_slots_release(t, b);
    ps_kv_slots_set_chunk(t, 4, 2); /* at most 2 messages: chunks of 8 */
    b = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, 10}, grad, 7);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, b, 0, 0, 10), 8);
    ps_kv_slots_release(t, b);
    ps_kv_slots_set_chunk(t, 16, 0); /* one chunk each: one push-pull per server */
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){0, 16}, grad, 9, dst, 10);
    ck_assert_uint_eq(ps_kv_slots_get(t, a)->left, 16);
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 1, &pushed, &pulled), PS_KV_PUSH_PULL);
    ps_kv_slots_destroy(&t);
}
END_TEST

/* Chunks of 4 keys, S1 on this host (its pushes whole): a push of keys
 * [2, 16) is S0's 3 chunk messages and one to S1, and a push-pull of every
 * key pushes S0's chunks, then pulls, and is one push-pull to S1. */
START_TEST(pushes_to_a_server_on_this_host_go_whole)
{
    ps_kv_slots_t *t = s_table();
    ps_kv_slots_set_chunk(t, 4, 0);
    ps_kv_slots_set_whole(t, 1, 1);
    float grad[16] = {0}, dst[16] = {0};
    int a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){2, 16}, grad, 3);
    ck_assert_uint_eq(ps_kv_slots_get(t, a)->left, 3 + 1);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, a, 0, 2, 10), 4);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, a, 1, 10, 16), 16);
    ps_kv_slots_release(t, a);
    a = ps_kv_slots_open_push_pull(t, (ps_range_t){0, 16}, grad, 9, dst, 10);
    ck_assert_uint_eq(ps_kv_slots_get(t, a)->left, 16 + 3);
    ps_range_t pushed, pulled;
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 0, &pushed, &pulled), PS_KV_PUSH);
    ck_assert_int_eq(ps_kv_slots_plan(t, a, 1, &pushed, &pulled), PS_KV_PUSH_PULL);
    ps_kv_slots_release(t, a);
    ps_kv_slots_set_whole(t, 1, 0); /* chunked again, as any server */
    a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){2, 16}, grad, 4);
    ck_assert_uint_eq(ps_kv_slots_get(t, a)->left, 3 + 2);
    ps_kv_slots_destroy(&t);
}
END_TEST

/* Chunks of 16 KiB (4096 keys), one server of 64 chunks: with no pace
 * measured a push goes in 64 KiB messages; over a fast link in 32 KiB ones,
 * the most a link's message carries; over a slow one in what its link takes
 * in PS_KV_PIECE_SECONDS, whole chunks, never less than one. */
START_TEST(link_messages_are_smaller_than_unpaced_ones)
{
    enum { CK = 4096, N = 64 * CK };
    ps_range_t server = {0, N};
    ps_kv_slots_t *t = NULL;
    ck_assert_int_eq(ps_kv_slots_new(&server, 1, &t), 0);
    ps_kv_slots_set_chunk(t, CK, 0);
    float *grad = calloc(N, sizeof(float));
    const struct {
        double rate;   /* keys a second */
        uint64_t left; /* messages of a push of every key */
    } cases[] = {
        {0, N / PS_KV_PIECE_KEYS},
        {1e12, N / PS_KV_LINK_PIECE_KEYS},
        {3.0 * CK / PS_KV_PIECE_SECONDS, N / PS_KV_LINK_PIECE_KEYS},
        {1.5 * CK / PS_KV_PIECE_SECONDS, N / CK},
        {1.0 / PS_KV_PIECE_SECONDS, N / CK},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ps_kv_slots_set_pace(t, cases[k].rate);
        const int a = ps_kv_slots_open(t, PS_KV_PUSH, server, grad, (int64_t)k);
        ck_assert_uint_eq(ps_kv_slots_get(t, a)->left, cases[k].left);
        ps_kv_slots_release(t, a);
    }
    free(grad);
    ps_kv_slots_destroy(&t);
}
END_TEST

/* Chunks of 8 KiB (2048 keys), 8 servers of 8 chunks each: over a fast
 * link a server's shard goes in one-chunk messages, PS_KV_SHARD_PIECES at
 * most, not in 32 KiB ones (two a shard), so that each server's pipeline
 * fills and drains in a fraction of the round; where the shards are wide
 * the link's 32 KiB cap holds. */
START_TEST(a_shard_goes_in_many_messages_over_a_link)
{
    enum { CK = 2048, S = 8, W = 8 * CK, NARROW = 8 * W };
    ps_range_t servers[S];
    for (int i = 0; i < S; i++) {
        servers[i] = (ps_range_t){(uint64_t)i * W, (uint64_t)(i + 1) * W};
    }
    ps_kv_slots_t *t = NULL;
    ck_assert_int_eq(ps_kv_slots_new(servers, S, &t), 0);
    ps_kv_slots_set_chunk(t, CK, 0);
    ps_kv_slots_set_pace(t, 1e12);
    float *grad = calloc(NARROW, sizeof(float));
    int a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, NARROW}, grad, 1);
    ck_assert_uint_eq(ps_kv_slots_get(t, a)->left, NARROW / CK);
    ck_assert_uint_eq(ps_kv_slots_piece_end(t, a, 3, 3 * W, 4 * W), 3 * W + CK);
    ps_kv_slots_release(t, a);
    ps_kv_slots_destroy(&t);
    ps_range_t wide = {0, 64 * W};
    ck_assert_int_eq(ps_kv_slots_new(&wide, 1, &t), 0);
    ps_kv_slots_set_chunk(t, CK, 0);
    ps_kv_slots_set_pace(t, 1e12);
    a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, W}, grad, 2);
    ck_assert_uint_eq(ps_kv_slots_get(t, a)->left, W / PS_KV_LINK_PIECE_KEYS);
    ps_kv_slots_release(t, a);
    free(grad);
    ps_kv_slots_destroy(&t);
}
END_TEST

START_TEST(pull_reply_in_several_frames_fills_its_keys_in_order)
{
    ps_kv_slots_t *t = s_table();
    float v[10], dst[16] = {0};
    for (int k = 0; k < 10; k++) {
        v[k] = (float)k + 0.25f;
    }
    int a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 10}, dst, 0);
    const ps_kv_slot_t *sl = ps_kv_slots_get(t, a);
    /* one message, one frame per store chunk: keys [0, 3), [3, 8), [8, 10) */
    const ps_frame_t f[3] = {{v, 3 * sizeof(float)}, {v + 3, 5 * sizeof(float)},
                             {v + 8, 2 * sizeof(float)}};
    Shardps__Header h = s_reply(PS_MSG_PULL_REPLY, 0, ps_kv_slots_id(t, a), 0, 10);
    uint64_t pulled = 0;
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, f, 3, &pulled), 0);
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    ck_assert_int_eq(sl->status, 0);
    ck_assert_uint_eq(pulled, sizeof v);
    ck_assert_int_eq(memcmp(dst, v, sizeof v), 0);
    ps_kv_slots_release(t, a);
    /* a frame that splits a value, or an empty one, fails the pull */
    const ps_frame_t split[2] = {{v, 6}, {(const char *)v + 6, 10 * sizeof(float) - 6}};
    const ps_frame_t empty[2] = {{v, 0}, {v, sizeof v}};
    const ps_frame_t *bad[2] = {split, empty};
    for (int b = 0; b < 2; b++) {
        a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 10}, dst, 0);
        h = s_reply(PS_MSG_PULL_REPLY, 0, ps_kv_slots_id(t, a), 0, 10);
        ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, bad[b], 2, NULL), 0);
        ck_assert_int_eq(sl->status, PS_EPROTO);
        ps_kv_slots_release(t, a);
    }
    ps_kv_slots_destroy(&t);
}
END_TEST

START_TEST(pull_out_of_order_or_mismatched_fails)
{
    ps_kv_slots_t *t = s_table();
    float dst[16] = {0};
    /* a later part before the first */
    int a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 10}, dst, 0);
    ck_assert_int_eq(s_pull_part(t, 0, ps_kv_slots_id(t, a), 5, 10, NULL), 0);
    const ps_kv_slot_t *sl = ps_kv_slots_get(t, a);
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    ck_assert_int_eq(sl->status, PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(sl->error, "S0 sent a pull reply that does not match"));
    ps_kv_slots_release(t, a);
    /* the same part twice */
    a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 10}, dst, 0);
    uint64_t id = ps_kv_slots_id(t, a);
    ck_assert_int_eq(s_pull_part(t, 0, id, 0, 5, NULL), 0);
    ck_assert_int_eq(s_pull_part(t, 0, id, 0, 5, NULL), 0);
    ck_assert_int_eq(sl->status, PS_EPROTO);
    ps_kv_slots_release(t, a);
    /* keys outside the server's shard, and a payload of the wrong size */
    a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){8, 12}, dst, 0);
    id = ps_kv_slots_id(t, a);
    ck_assert_int_eq(s_pull_part(t, 0, id, 8, 12, NULL), 0);
    ck_assert_int_eq(sl->status, PS_EPROTO);
    ps_kv_slots_release(t, a);
    a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 4}, dst, 0);
    Shardps__Header h = s_reply(PS_MSG_PULL_REPLY, 0, ps_kv_slots_id(t, a), 0, 4);
    ck_assert_int_eq(
        ps_kv_slots_on_reply(t, 0, &h, &(ps_frame_t){dst, 3 * sizeof(float)}, 1, NULL), 0);
    ck_assert_int_eq(sl->status, PS_EPROTO);
    ps_kv_slots_release(t, a);
    /* an ack where a pull reply was due */
    a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 4}, dst, 0);
    h = s_reply(PS_MSG_PUSH_ACK, 0, ps_kv_slots_id(t, a), 0, 4);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, NULL, 0, NULL), 0);
    ck_assert_int_eq(sl->status, PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(sl->error, "unexpected"));
    ps_kv_slots_destroy(&t);
}
END_TEST

/* --wire bf16: a pull reply of 2-byte values widens into the fp32 buffer;
 * one of fp32 size, or a sparse one, does not match and fails the pull. */
START_TEST(pull_reply_in_bf16_decodes_to_fp32)
{
    ps_kv_slots_t *t = s_table();
    float dst[4] = {0};
    const ps_kv_slot_t *sl;
    int a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 4}, dst, 0);
    sl = ps_kv_slots_get(t, a);
    Shardps__Header h = s_reply(PS_MSG_PULL_REPLY, 0, ps_kv_slots_id(t, a), 0, 4);
    h.dtype = PS_DTYPE_BF16;
    const uint16_t v[4] = {0x3f80, 0xc000, 0x0000, 0x3f00}; /* 1, -2, 0, 0.5 */
    uint64_t pulled = 0;
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, &(ps_frame_t){v, sizeof v}, 1, &pulled), 0);
    ck_assert_int_eq(sl->state, PS_KV_DONE);
    ck_assert_int_eq(sl->status, 0);
    ck_assert_uint_eq(pulled, sizeof v);
    ck_assert(dst[0] == 1.0f && dst[1] == -2.0f && dst[2] == 0.0f && dst[3] == 0.5f);
    ps_kv_slots_release(t, a);
    a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 4}, dst, 0);
    h = s_reply(PS_MSG_PULL_REPLY, 0, ps_kv_slots_id(t, a), 0, 4);
    h.dtype = PS_DTYPE_BF16;
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, &(ps_frame_t){dst, sizeof dst}, 1, NULL), 0);
    ck_assert_int_eq(sl->status, PS_EPROTO);
    ps_kv_slots_release(t, a);
    a = ps_kv_slots_open(t, PS_KV_PULL, (ps_range_t){0, 4}, dst, 0);
    h = s_reply(PS_MSG_PULL_REPLY, 0, ps_kv_slots_id(t, a), 0, 4);
    h.dtype = PS_DTYPE_SPARSE_BF16;
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, &(ps_frame_t){v, sizeof v}, 1, NULL), 0);
    ck_assert_int_eq(sl->status, PS_EPROTO);
    ps_kv_slots_destroy(&t);
}
END_TEST

START_TEST(failure_completes_with_its_own_status_and_reason)
{
    ps_kv_slots_t *t = s_table();
    float g[16] = {0};
    int a = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, 16}, g, 0);
    int b = ps_kv_slots_open(t, PS_KV_PUSH, (ps_range_t){0, 16}, g, 0);
    int c = ps_kv_slots_open(t, PS_KV_BARRIER, (ps_range_t){0, 0}, NULL, 0);
    Shardps__Header h = s_reply(PS_MSG_ERROR, 1, ps_kv_slots_id(t, a), 10, 16);
    h.status = PS_ESTATE;
    h.error = (char *)"push for step 0, but steps 3 to 3 are being collected";
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 1, &h, NULL, 0, NULL), 0);
    ps_kv_slots_complete(t, b, PS_ETIMEDOUT, "sending to S0 failed");
    const ps_kv_slot_t *sa = ps_kv_slots_get(t, a), *sb = ps_kv_slots_get(t, b);
    /* done at once, though S0 never answered */
    ck_assert_int_eq(sa->state, PS_KV_DONE);
    ck_assert_int_eq(sa->status, PS_ESTATE);
    ck_assert_str_eq(sa->error,
                     "S1 refused: push for step 0, but steps 3 to 3 are being collected");
    ck_assert_int_eq(sb->status, PS_ETIMEDOUT);
    ck_assert_str_eq(sb->error, "sending to S0 failed");
    /* a later failure does not overwrite the first one */
    h.request_id = ps_kv_slots_id(t, b);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 1, &h, NULL, 0, NULL), PS_ENOENT);
    ps_kv_slots_complete(t, b, PS_EIO, "again");
    ck_assert_str_eq(sb->error, "sending to S0 failed");
    /* an error without a PS_E* status still fails */
    int d = ps_kv_slots_open(t, PS_KV_INIT, (ps_range_t){0, 4}, g, 0);
    h = s_reply(PS_MSG_ERROR, 0, ps_kv_slots_id(t, d), 0, 4);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, NULL, 0, NULL), 0);
    ck_assert_int_eq(ps_kv_slots_get(t, d)->status, PS_EPROTO);
    /* scheduler requests complete by type, with status 0 */
    ck_assert_int_eq(ps_kv_slots_get(t, c)->state, PS_KV_SENT);
    ps_kv_slots_complete_type(t, PS_KV_FINISH);
    ck_assert_int_eq(ps_kv_slots_get(t, c)->state, PS_KV_SENT);
    ps_kv_slots_complete_type(t, PS_KV_BARRIER);
    ck_assert_int_eq(ps_kv_slots_get(t, c)->state, PS_KV_DONE);
    ck_assert_int_eq(ps_kv_slots_get(t, c)->status, 0);
    ps_kv_slots_destroy(&t);
}
END_TEST

START_TEST(no_servers_keeps_scheduler_requests)
{
    ps_kv_slots_t *t = NULL;
    ck_assert_int_eq(ps_kv_slots_new(NULL, 0, &t), 0);
    int a = ps_kv_slots_open(t, PS_KV_FINISH, (ps_range_t){0, 0}, NULL, 0);
    ck_assert_int_eq(ps_kv_slots_get(t, a)->left, 1);
    Shardps__Header h = s_reply(PS_MSG_PUSH_ACK, 0, ps_kv_slots_id(t, a), 0, 0);
    ck_assert_int_eq(ps_kv_slots_on_reply(t, 0, &h, NULL, 0, NULL), PS_ENOENT);
    ps_kv_slots_destroy(&t);
    ck_assert_int_eq(ps_kv_slots_new(NULL, -1, &t), PS_EINVAL);
    ck_assert_ptr_null(t);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("kv_slots");
    TCase *tc = tcase_create("kv_slots");
    tcase_add_test(tc, ids_carry_index_and_generation);
    tcase_add_test(tc, push_completes_with_one_ack_per_server);
    tcase_add_test(tc, link_messages_are_smaller_than_unpaced_ones);
    tcase_add_test(tc, a_shard_goes_in_many_messages_over_a_link);
    tcase_add_test(tc, late_reply_to_a_recycled_slot_is_dropped);
    tcase_add_test(tc, pull_completes_when_every_key_arrived_in_order);
    tcase_add_test(tc, pull_out_of_order_or_mismatched_fails);
    tcase_add_test(tc, pull_reply_in_several_frames_fills_its_keys_in_order);
    tcase_add_test(tc, layer_push_pulls_pull_the_chunks_they_complete);
    tcase_add_test(tc, pushes_go_a_message_per_chunk_each_acked);
    tcase_add_test(tc, pushes_to_a_server_on_this_host_go_whole);
    tcase_add_test(tc, push_pull_completes_with_the_values_into_dst_not_the_gradient);
    tcase_add_test(tc, failure_completes_with_its_own_status_and_reason);
    tcase_add_test(tc, pull_reply_in_bf16_decodes_to_fp32);
    tcase_add_test(tc, no_servers_keeps_scheduler_requests);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
