/*
 * tests/unit/test_kv_lanes.c - the client's lanes to the servers: a push
 * goes at once while the server's window has a credit, else it waits, and
 * everything after it waits behind it in order; answers free credits and
 * the server's grant sets the window; a full lane admits rather than fails;
 * a reset forgets what waits and what flies.
 */
#include <check.h>

#include "common/error.h"
#include "tests/unit/testutil.h"
#include "worker/kv_lanes.h"

static ps_kv_out_t s_out(int idx, ps_msg_type_t type, uint64_t b)
{
    return (ps_kv_out_t){idx, (uint64_t)idx + 100, type, {b, b + 4}};
}

START_TEST(pushes_wait_for_credits_and_what_follows_waits_behind_them)
{
    ps_kv_lanes_t *l = NULL;
    ck_assert_int_eq(ps_kv_lanes_new(2, 8, &l), 0);
    ck_assert_int_eq(ps_kv_lanes_window(l, 0), 1); /* until the server grants more */
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH), 1);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH), 0);
    const ps_kv_out_t a = s_out(1, PS_MSG_PUSH, 4), b = s_out(1, PS_MSG_PUSH, 8);
    ps_kv_lanes_queue(l, 0, &a);
    ps_kv_lanes_queue(l, 0, &b);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PULL), 0); /* behind the pushes */
    const ps_kv_out_t c = s_out(1, PS_MSG_PULL, 0);
    ps_kv_lanes_queue(l, 0, &c);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 1, PS_MSG_PUSH), 1); /* another server's lane */
    ps_kv_out_t o;
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o), 0); /* no credit yet */
    ps_kv_lanes_answered(l, 0, 2);                   /* an ack granting 2 */
    ck_assert_int_eq(ps_kv_lanes_window(l, 0), 2);
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o), 1);
    ck_assert_uint_eq(o.part.begin, 4);
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o), 1);
    ck_assert_uint_eq(o.part.begin, 8);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 2);
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o), 1); /* the pull, right behind them */
    ck_assert_int_eq(o.type, PS_MSG_PULL);
    ck_assert_uint_eq(o.id, 101);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 2); /* a pull takes no credit */
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o), 0);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PULL), 1);
    ps_kv_lanes_destroy(&l);
    ck_assert_ptr_null(l);
    ps_kv_lanes_destroy(&l);
}
END_TEST

START_TEST(a_full_lane_admits_and_a_reset_forgets)
{
    ps_kv_lanes_t *l = NULL;
    ck_assert_int_eq(ps_kv_lanes_new(1, 2, &l), 0);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH), 1);
    const ps_kv_out_t a = s_out(2, PS_MSG_PUSH, 0);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH), 0);
    ps_kv_lanes_queue(l, 0, &a);
    ps_kv_lanes_queue(l, 0, &a);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH), 1); /* full: goes anyway */
    ps_kv_lanes_answered(l, 0, 1000);
    ck_assert_int_eq(ps_kv_lanes_window(l, 0), 2); /* at most the lane's room */
    ps_kv_lanes_reset(l);
    ps_kv_out_t o;
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o), 0);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 0);
    ps_kv_lanes_answered(l, 0, 0); /* a late answer: never below 0 */
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 0);
    ps_kv_lanes_destroy(&l);
    ck_assert_int_eq(ps_kv_lanes_new(1, 0, &l), PS_EINVAL);
    ck_assert_int_eq(ps_kv_lanes_new(-1, 4, &l), PS_EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kv_lanes");
    TCase *tc = tcase_create("lanes");
    tcase_add_test(tc, pushes_wait_for_credits_and_what_follows_waits_behind_them);
    tcase_add_test(tc, a_full_lane_admits_and_a_reset_forgets);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
