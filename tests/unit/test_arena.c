/*
 * tests/unit/test_arena.c - proto/arena: the bump allocator protobuf-c
 * unpacks into. Pieces come from the buffer, aligned, until it is full, then
 * from malloc; protobuf-c's own frees (a failed unpack) give the malloc'd
 * ones back at once, and a reset gives back everything.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proto/arena.h"
#include "proto/codec.h"
#include "tests/unit/testutil.h"

START_TEST(arena_hands_out_aligned_pieces_of_its_buffer)
{
    PS_ARENA_ON_STACK(a, 256);
    ProtobufCAllocator *pc = &a->pc;
    char *p = pc->alloc(pc->allocator_data, 1);
    char *q = pc->alloc(pc->allocator_data, 17);
    char *r = pc->alloc(pc->allocator_data, 8);
    ck_assert_ptr_eq(p, (char *)a_buf);
    ck_assert_ptr_eq(q, p + PS_ARENA_ALIGN);
    ck_assert_ptr_eq(r, q + 2 * PS_ARENA_ALIGN);
    ck_assert_uint_eq((uintptr_t)r % PS_ARENA_ALIGN, 0);
    pc->free(pc->allocator_data, q); /* a piece of the buffer: back only with the reset */
    ck_assert_uint_eq(a->used, 4 * PS_ARENA_ALIGN);
    ps_arena_reset(a);
    ck_assert_uint_eq(a->used, 0);
    ck_assert_ptr_eq(pc->alloc(pc->allocator_data, 1), (void *)a_buf);
    ps_arena_fini(a);
}
END_TEST

START_TEST(arena_falls_back_to_malloc_and_frees_on_reset)
{
    PS_ARENA_ON_STACK(a, 64);
    ProtobufCAllocator *pc = &a->pc;
    char *in = pc->alloc(pc->allocator_data, 48);
    char *big1 = pc->alloc(pc->allocator_data, 100);
    char *big2 = pc->alloc(pc->allocator_data, 1000);
    char *big3 = pc->alloc(pc->allocator_data, 20); /* 16 bytes left: too few */
    ck_assert_ptr_eq(in, (char *)a_buf);
    ck_assert(big1 && big2 && big3);
    ck_assert((big1 < (char *)a_buf || big1 >= (char *)a_buf + 64));
    ck_assert_uint_eq((uintptr_t)big2 % PS_ARENA_ALIGN, 0);
    memset(big2, 0x5a, 1000);
    ck_assert_int_eq(ps_arena_spills(a), 3);
    pc->free(pc->allocator_data, big2); /* the middle one, then the first */
    ck_assert_int_eq(ps_arena_spills(a), 2);
    pc->free(pc->allocator_data, big3);
    ck_assert_int_eq(ps_arena_spills(a), 1);
    ps_arena_reset(a);
    ck_assert_ptr_null(a->big);
    ps_arena_fini(a);
    /* no buffer at all: every piece from malloc */
    ps_arena_t none;
    ps_arena_init(&none, NULL, 0);
    ck_assert_ptr_nonnull(none.pc.alloc(none.pc.allocator_data, 1));
    ck_assert_int_eq(ps_arena_spills(&none), 1);
    ps_arena_fini(&none);
    ck_assert_ptr_null(none.big);
}
END_TEST

START_TEST(arena_takes_a_message_and_a_failed_unpack_leaves_nothing)
{
    /* a view too big for the buffer: decoded anyway, partly from malloc */
    static ps_view_t v;
    static ps_view_pb_t pb;
    memset(&v, 0, sizeof v);
    v.num_params = 1000;
    v.num_workers = 2;
    v.num_servers = 10;
    v.steps_per_epoch = 1;
    ps_job_defaults(&v.job);
    for (int i = 0; i < 10; i++) {
        v.servers[i].rank = i;
        v.servers[i].begin = (uint64_t)i * 100;
        v.servers[i].end = (uint64_t)(i + 1) * 100;
        snprintf(v.servers[i].endpoint, sizeof v.servers[i].endpoint, "tcp://10.0.0.%d:1", i);
    }
    ck_assert_int_eq(ps_codec_view_to_pb(&v, &pb), 0);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(ps_codec_pack(&pb.pb.base, &buf, &len), 0);
    PS_ARENA_ON_STACK(a, 256);
    const Shardps__ClusterView *m =
        ps_codec_unpack(&shardps__cluster_view__descriptor, buf, len, a, NULL, 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->n_servers, 10);
    ck_assert_str_eq(m->servers[9]->endpoint, "tcp://10.0.0.9:1");
    ck_assert_int_gt(ps_arena_spills(a), 0);
    ps_arena_reset(a);
    /* cut short: protobuf-c gives back what it took on the way */
    char why[PS_ERROR_MAX];
    ck_assert_ptr_null(
        ps_codec_unpack(&shardps__cluster_view__descriptor, buf, len - 3, a, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "does not decode"));
    ck_assert_ptr_null(a->big);
    ps_arena_fini(a);
    free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena");
    TCase *t = tcase_create("arena");
    tcase_add_test(t, arena_hands_out_aligned_pieces_of_its_buffer);
    tcase_add_test(t, arena_falls_back_to_malloc_and_frees_on_reset);
    tcase_add_test(t, arena_takes_a_message_and_a_failed_unpack_leaves_nothing);
    suite_add_tcase(s, t);
    return ps_test_run(s);
}
