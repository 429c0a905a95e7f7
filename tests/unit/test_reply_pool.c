/*
 * tests/unit/test_reply_pool.c - reply buffers count against the peer they
 * go to: a peer holding its share gets no more until some come back, other
 * peers are not affected (beyond the shared buffers, more are allocated),
 * and every buffer given back, shared or not, is freed once (the ASan build
 * checks); replies from held values count against the share and a cap.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "server/reply_pool.h"
#include "tests/unit/testutil.h"

enum { S_KEYS = 1000, S_BUF = 1024, S_SHARE = 4 }; /* one part per pull: 4 shared buffers */

START_TEST(a_peer_holding_its_share_gets_no_more_until_one_comes_back)
{
    ps_reply_pool_t *p = NULL;
    ck_assert_int_eq(ps_reply_pool_new(&p, S_KEYS, S_BUF, 2), 0);
    float *mine[S_SHARE];
    for (int i = 0; i < S_SHARE; i++) {
        mine[i] = ps_reply_pool_take(p, 0);
        ck_assert_ptr_nonnull(mine[i]);
        memset(mine[i], 0xab, S_BUF * sizeof(float)); /* the whole buffer is ours */
    }
    ck_assert_int_eq(ps_reply_pool_held(p, 0), S_SHARE);
    ck_assert_ptr_null(ps_reply_pool_take(p, 0));
    /* the other peer is not affected: shared buffers are out, it gets new ones */
    float *theirs[S_SHARE];
    for (int i = 0; i < S_SHARE; i++) {
        theirs[i] = ps_reply_pool_take(p, 1);
        ck_assert_ptr_nonnull(theirs[i]);
        memset(theirs[i], 0xcd, S_BUF * sizeof(float));
    }
    ck_assert_ptr_null(ps_reply_pool_take(p, 1));
    ck_assert_int_eq(ps_reply_pool_held(p, 1), S_SHARE);
    /* one back: peer 0 may take one more */
    ps_reply_pool_give(mine[2], p);
    ck_assert_int_eq(ps_reply_pool_held(p, 0), S_SHARE - 1);
    mine[2] = ps_reply_pool_take(p, 0);
    ck_assert_ptr_nonnull(mine[2]);
    ck_assert_ptr_null(ps_reply_pool_take(p, 0));
    for (int i = 0; i < S_SHARE; i++) {
        ps_reply_pool_give(mine[i], p);
        ps_reply_pool_give(theirs[i], p);
    }
    ck_assert_int_eq(ps_reply_pool_held(p, 0), 0);
    ck_assert_int_eq(ps_reply_pool_held(p, 1), 0);
    ps_reply_pool_destroy(&p);
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(an_unknown_peer_gets_nothing)
{
    ps_reply_pool_t *p = NULL;
    ck_assert_int_eq(ps_reply_pool_new(&p, S_KEYS, S_BUF, 2), 0);
    ck_assert_ptr_null(ps_reply_pool_take(p, 2));
    ck_assert_ptr_null(ps_reply_pool_take(p, -1));
    ck_assert_int_eq(ps_reply_pool_held(p, 2), 0);
    ps_reply_pool_destroy(&p);
    ps_reply_pool_destroy(&p); /* NULL-safe */
}
END_TEST

/* Replies sent from held values count against the same share, and all
 * peers' together against the hold cap (the holder's spares). */
START_TEST(holds_count_against_the_share_and_the_cap)
{
    ps_reply_pool_t *p = NULL;
    ck_assert_int_eq(ps_reply_pool_new(&p, S_KEYS, S_BUF, 3), 0);
    ck_assert_int_eq(ps_reply_pool_hold_cap(p), S_SHARE);
    for (int i = 0; i < S_SHARE - 1; i++) {
        ck_assert_int_eq(ps_reply_pool_hold(p, 0), 0);
    }
    float *b = ps_reply_pool_take(p, 0); /* a copy counts too */
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(ps_reply_pool_held(p, 0), S_SHARE);
    ck_assert_int_eq(ps_reply_pool_hold(p, 0), PS_ENOMEM); /* its share */
    ps_reply_pool_give(b, p);
    ck_assert_int_eq(ps_reply_pool_hold(p, 1), 0);
    ck_assert_int_eq(ps_reply_pool_hold(p, 2), PS_ENOMEM); /* the cap, all peers */
    ck_assert_int_eq(ps_reply_pool_hold(p, 3), PS_ENOMEM); /* no such peer */
    ps_reply_pool_unhold(p, 0);
    ck_assert_int_eq(ps_reply_pool_hold(p, 2), 0);
    ck_assert_int_eq(ps_reply_pool_held(p, 0), S_SHARE - 2);
    ck_assert_int_eq(ps_reply_pool_held(p, 2), 1);
    ps_reply_pool_destroy(&p);
}
END_TEST

int main(void)
{
    ps_log_set_level("err");
    Suite *s = suite_create("reply_pool");
    TCase *tc = tcase_create("reply_pool");
    tcase_add_test(tc, a_peer_holding_its_share_gets_no_more_until_one_comes_back);
    tcase_add_test(tc, an_unknown_peer_gets_nothing);
    tcase_add_test(tc, holds_count_against_the_share_and_the_cap);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
