/*
 * tests/unit/test_kv_lanes.c - the client's lanes to the servers: a push
 * goes at once while the server's window has a credit, else it waits, and
 * everything after it waits behind it in order; answers free credits and
 * the server's grant sets the window; a push given back is no longer in
 * flight; a full lane admits rather than fails; a reset forgets what waits
 * and what flies; counted in keys, the window follows the pace the acks
 * come at, passed by one push so that a pace measured at one push a round
 * trip climbs, and beyond a round trip it holds only what the acks' jitter
 * needs (on a slow share of a link, up to a share of a credit's time);
 * the lanes' paces sum to the worker's rate; a lane to a
 * server on this host is neither paced nor counted; a rows push weighs its
 * rows and keys and waits in line as a push does.
 */
#include <check.h>
#include <string.h>

#include "common/error.h"
#include "tests/unit/testutil.h"
#include "worker/kv_lanes.h"

static ps_kv_out_t s_out(int idx, ps_msg_type_t type, uint64_t b)
{
    return (ps_kv_out_t){idx, (uint64_t)idx + 100, type, {b, b + 4}, 4, 0};
}

START_TEST(pushes_wait_for_credits_and_what_follows_waits_behind_them)
{
    ps_kv_lanes_t *l = NULL;
    ck_assert_int_eq(ps_kv_lanes_new(2, 8, &l), 0);
    ck_assert_uint_eq(ps_kv_lanes_window(l, 0), 0); /* one push, until the server grants more */
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0), 1);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0), 0);
    const ps_kv_out_t a = s_out(1, PS_MSG_PUSH, 4), b = s_out(1, PS_MSG_PUSH, 8);
    ps_kv_lanes_queue(l, 0, &a);
    ps_kv_lanes_queue(l, 0, &b);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PULL, 4, 0), 0); /* behind the pushes */
    const ps_kv_out_t c = s_out(1, PS_MSG_PULL, 0);
    ps_kv_lanes_queue(l, 0, &c);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 1, PS_MSG_PUSH, 4, 0), 1); /* another server's lane */
    ps_kv_out_t o;
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o, 0), 0); /* no credit yet */
    ps_kv_lanes_answered(l, 0, 2, 0);                   /* an ack granting 2 */
    ck_assert_uint_eq(ps_kv_lanes_window(l, 0), 2);
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o, 0), 1);
    ck_assert_uint_eq(o.part.begin, 4);
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o, 0), 1);
    ck_assert_uint_eq(o.part.begin, 8);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 2);
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o, 0), 1); /* the pull, right behind them */
    ck_assert_int_eq(o.type, PS_MSG_PULL);
    ck_assert_uint_eq(o.id, 101);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 2); /* a pull takes no credit */
    ps_kv_lanes_unsend(l, 0, &o);                    /* the pull was not sent: no change */
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 2);
    ps_kv_lanes_unsend(l, 0, &b); /* nor the push of [8, 12): its credit back */
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 1);
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o, 0), 0);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PULL, 4, 0), 1);
    ps_kv_lanes_destroy(&l);
    ck_assert_ptr_null(l);
    ps_kv_lanes_destroy(&l);
}
END_TEST

START_TEST(a_full_lane_admits_and_a_reset_forgets)
{
    ps_kv_lanes_t *l = NULL;
    ck_assert_int_eq(ps_kv_lanes_new(1, 2, &l), 0);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0), 1);
    const ps_kv_out_t a = s_out(2, PS_MSG_PUSH, 0);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0), 0);
    ps_kv_lanes_queue(l, 0, &a);
    ps_kv_lanes_queue(l, 0, &a);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0), 1); /* full: goes anyway */
    ps_kv_lanes_answered(l, 0, 1000, 0);
    ck_assert_uint_eq(ps_kv_lanes_window(l, 0), 2); /* at most the lane's room */
    ps_kv_lanes_reset(l);
    ps_kv_out_t o;
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o, 0), 0);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 0);
    ps_kv_lanes_answered(l, 0, 0, 0); /* a late answer: never below 0 */
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 0);
    ps_kv_lanes_destroy(&l);
    ck_assert_int_eq(ps_kv_lanes_new(1, 0, &l), PS_EINVAL);
    ck_assert_int_eq(ps_kv_lanes_new(-1, 4, &l), PS_EINVAL);
}
END_TEST

/* One lane, pushes of 4 keys, the server granting 8 chunks of 4 keys: the
 * acks of pushes that waited come every 10 ms, the first 10 ms after it
 * was sent (the least round trip). */
START_TEST(a_rows_push_weighs_its_rows_and_keys_behind_the_dense_pushes)
{
    ps_kv_lanes_t *l = NULL;
    ck_assert_int_eq(ps_kv_lanes_new(1, 8, &l), 0);
    ck_assert_int_eq(ps_kv_lanes_paced(l), 0);
    ps_kv_lanes_set_unit(l, 16);
    ck_assert_int_eq(ps_kv_lanes_paced(l), 1);
    ck_assert_uint_eq(ps_kv_lanes_row_weight(3, 16), 54); /* 3 rows of 16 floats, 3 keys */
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 10, 0), 1);
    ps_kv_lanes_answered(l, 0, 1, 0); /* an ack granting a chunk: 16 floats */
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 10, 0), 1);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 1);
    const uint64_t w = ps_kv_lanes_row_weight(1, 16);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_ROWS_PUSH, w, 0), 0); /* 10 + 18 > 16 */
    const ps_kv_out_t r = {3, 103, PS_MSG_ROWS_PUSH, {0, 0}, w, 5};
    ps_kv_lanes_queue(l, 0, &r);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PULL, 4, 0), 0); /* behind it */
    ps_kv_out_t o;
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o, 0), 0);
    ps_kv_lanes_answered(l, 0, 0, 0);
    ck_assert_int_eq(ps_kv_lanes_next(l, 0, &o, 0), 1); /* alone in flight: it goes */
    ck_assert_int_eq(o.type, PS_MSG_ROWS_PUSH);
    ck_assert_int_eq(o.piece, 5);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 1); /* in flight, as a push */
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 10, 0), 0); /* 18 + 10 > 16 */
    ps_kv_lanes_unsend(l, 0, &o); /* not sent after all: its weight back */
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 0);
    ps_kv_lanes_destroy(&l);
}
END_TEST

START_TEST(a_slow_link_paces_the_window)
{
    ps_kv_lanes_t *l = NULL;
    ck_assert_int_eq(ps_kv_lanes_new(1, 64, &l), 0);
    ps_kv_lanes_set_unit(l, 4);
    ck_assert(ps_kv_lanes_rate(l) == 0); /* not measured yet */
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0.0), 1);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0.0), 0); /* one, ungranted */
    for (int k = 0; k < 40; k++) {
        const ps_kv_out_t o = s_out(1, PS_MSG_PUSH, 4 * (uint64_t)k);
        ps_kv_lanes_queue(l, 0, &o);
    }
    ps_kv_lanes_answered(l, 0, 8, 0.02);
    ck_assert_uint_eq(ps_kv_lanes_window(l, 0), 32); /* the grant: no pace yet */
    ps_kv_out_t o;
    double t = 0.02;
    int sent = 0;
    while (ps_kv_lanes_next(l, 0, &o, t)) {
        sent++;
    }
    ck_assert_int_eq(sent, 8);
    for (int k = 0; k < 30; k++) { /* each ack 10 ms after the last */
        t += 0.01;
        ps_kv_lanes_answered(l, 0, 8, t);
        while (ps_kv_lanes_next(l, 0, &o, t - 0.01)) {
        }
    }
    /* 400 keys/s over a 10 ms round trip + PS_KV_QUEUE_SECONDS: about 5.6
     * keys, far under the grant: a push under it and one more */
    const uint64_t w = ps_kv_lanes_window(l, 0);
    ck_assert_uint_ge(w, 4);
    ck_assert_uint_lt(w, 8);
    ck_assert_int_eq(ps_kv_lanes_inflight(l, 0), 2);
    ck_assert(ps_kv_lanes_rate(l) > 390 && ps_kv_lanes_rate(l) < 410); /* keys a second */
    ps_kv_lanes_set_local(l, 0, 1); /* a server on this host: no link, the whole grant */
    ck_assert_uint_eq(ps_kv_lanes_window(l, 0), 32);
    ps_kv_lanes_destroy(&l);
}
END_TEST

/* A link that takes a push each 10 ms, 10 ms from end to end, while
 * another flow holds the rest of it: the lane measures its pace at about
 * one push a round trip. Then the other flow ends, and every push is acked
 * 10 ms after it went: the pace climbs from one push to the grant. */
START_TEST(a_pace_measured_at_one_push_climbs)
{
    ps_kv_lanes_t *l = NULL;
    ck_assert_int_eq(ps_kv_lanes_new(1, 64, &l), 0);
    ps_kv_lanes_set_unit(l, 4);
    double sent[64]; /* when each push in flight went, oldest first */
    int nsent = 0;
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0.0), 1);
    sent[nsent++] = 0;
    for (int k = 0; k < 32; k++) {
        const ps_kv_out_t o = s_out(1, PS_MSG_PUSH, 4 * (uint64_t)k);
        ps_kv_lanes_queue(l, 0, &o);
    }
    double t = 0;
    int most = 0;
    for (int k = 0; k < 400; k++) {
        const double at = sent[0] + 0.01;
        t = k < 40 && t + 0.01 > at ? t + 0.01 : at; /* the first 40: one a 10 ms */
        ps_kv_lanes_answered(l, 0, 8, t);
        memmove(sent, sent + 1, (size_t)--nsent * sizeof *sent);
        ps_kv_out_t o;
        while (ps_kv_lanes_next(l, 0, &o, t)) {
            ck_assert_int_lt(nsent, 64);
            sent[nsent++] = t;
            ps_kv_lanes_queue(l, 0, &o); /* always more waiting */
        }
        if (k == 39) {
            ck_assert_uint_lt(ps_kv_lanes_window(l, 0), 8); /* under two pushes */
        }
        most = k >= 40 && ps_kv_lanes_inflight(l, 0) > most ? ps_kv_lanes_inflight(l, 0) : most;
    }
    ck_assert_int_eq(most, 8); /* the grant: 8 chunks of 4 keys */
    ps_kv_lanes_destroy(&l);
}
END_TEST

/* One lane counted in credits of unit keys, a push of 4 keys in flight and
 * 40 more waiting behind it. */
static ps_kv_lanes_t *s_busy_lane(uint64_t unit)
{
    ps_kv_lanes_t *l = NULL;
    ck_assert_int_eq(ps_kv_lanes_new(1, 64, &l), 0);
    ps_kv_lanes_set_unit(l, unit);
    ck_assert_int_eq(ps_kv_lanes_admit(l, 0, PS_MSG_PUSH, 4, 0.0), 1);
    for (int k = 0; k < 40; k++) {
        const ps_kv_out_t o = s_out(1, PS_MSG_PUSH, 4 * (uint64_t)k);
        ps_kv_lanes_queue(l, 0, &o);
    }
    return l;
}

/* The same acks a million times as often, each on time: nothing queues
 * past the round trip. Then one ack comes 1 ms late (busy cores): the pace
 * falls to about 32 keys a ms, and the window takes in the jitter, about a
 * ms of that pace (without it: under one push). */
START_TEST(a_fast_link_queues_only_what_its_acks_jitter)
{
    ps_kv_lanes_t *l = s_busy_lane(4);
    ps_kv_out_t o;
    double t = 0;
    for (int k = 0; k < 30; k++) {
        t += 1e-8;
        ps_kv_lanes_answered(l, 0, 8, t);
        while (ps_kv_lanes_next(l, 0, &o, t)) {
        }
    }
    ck_assert(ps_kv_lanes_rate(l) > 3.9e8 && ps_kv_lanes_rate(l) < 4.1e8);
    ck_assert_uint_lt(ps_kv_lanes_window(l, 0), 32); /* a round trip's keys */
    t += 1e-3;
    ps_kv_lanes_answered(l, 0, 8, t);
    ck_assert_uint_gt(ps_kv_lanes_window(l, 0), 16);
    ps_kv_lanes_set_local(l, 0, 1); /* on this host: in no rate */
    ck_assert(ps_kv_lanes_rate(l) == 0);
    ps_kv_lanes_destroy(&l);
}
END_TEST

/* A slow share of a link: pushes of 4 keys, each acked 100 ms after the
 * last (40 keys a second; a credit of 40 keys is a second of it). Then one
 * ack comes 100 ms late: the window takes in that jitter, up to
 * PS_KV_QUEUE_CREDIT of a credit's time, where PS_KV_QUEUE_SECONDS alone (a
 * fast link's bound) would keep it at the round trip's keys: the link would
 * idle on every late ack, which a ten times faster link would not. */
START_TEST(a_slow_share_queues_a_share_of_a_credit)
{
    ps_kv_lanes_t *l = s_busy_lane(40);
    ps_kv_out_t o;
    double t = 0;
    for (int k = 0; k < 30; k++) {
        t += 0.1;
        ps_kv_lanes_answered(l, 0, 8, t);
        while (ps_kv_lanes_next(l, 0, &o, t)) {
        }
    }
    ck_assert(ps_kv_lanes_rate(l) > 39 && ps_kv_lanes_rate(l) < 41);
    ck_assert_uint_eq(ps_kv_lanes_window(l, 0), 4); /* a round trip's keys */
    t += 0.2;
    ps_kv_lanes_answered(l, 0, 8, t);
    ck_assert_uint_ge(ps_kv_lanes_window(l, 0), 7); /* and 100 ms of jitter */
    ps_kv_lanes_destroy(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kv_lanes");
    TCase *tc = tcase_create("lanes");
    tcase_add_test(tc, pushes_wait_for_credits_and_what_follows_waits_behind_them);
    tcase_add_test(tc, a_full_lane_admits_and_a_reset_forgets);
    tcase_add_test(tc, a_rows_push_weighs_its_rows_and_keys_behind_the_dense_pushes);
    tcase_add_test(tc, a_slow_link_paces_the_window);
    tcase_add_test(tc, a_pace_measured_at_one_push_climbs);
    tcase_add_test(tc, a_fast_link_queues_only_what_its_acks_jitter);
    tcase_add_test(tc, a_slow_share_queues_a_share_of_a_credit);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
