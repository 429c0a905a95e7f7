/*
 * tests/unit/test_failover.c - the failover module's state without sockets
 * (scheduler/failover.h): spares register once per connection and are
 * forgotten when silent or closed; a promoted spare leaves the spares and
 * its spare id is remembered; a replaced server's connection is known; the
 * servers' answers to a failover complete it once, with the steps (stepped)
 * or updates (async) lost; the first step after the rollback closes every
 * open replacement's recovery time, once.
 */
#include <check.h>
#include <string.h>

#include "common/error.h"
#include "scheduler/failover.h"
#include "tests/unit/testutil.h"

enum { S_SERVERS = 3 };

static ps_route_t s_route(int k)
{
    ps_route_t r = {.len = 5};
    memcpy(r.id, "\x00rt", 3);
    r.id[3] = (uint8_t)(k >> 8);
    r.id[4] = (uint8_t)k;
    return r;
}

/* Adds spare k (route k, pid 100 + k, fd 10 + k) at now; asserts it took. */
static const ps_node_t *s_add(ps_failover_t *f, int k, double now)
{
    const ps_node_t *n = NULL;
    const char *why = NULL;
    ps_route_t r = s_route(k);
    ck_assert_int_eq(ps_failover_spare_add(f, &r, 100u + (unsigned)k, 10 + k, "key", now, &n,
                                           &why),
                     0);
    ck_assert_ptr_nonnull(n);
    return n;
}

static Shardps__FailoverReady s_ready(int64_t generation, int64_t step, int64_t from, int stepped)
{
    Shardps__FailoverReady rd = SHARDPS__FAILOVER_READY__INIT;
    rd.generation = generation;
    rd.step = step;
    rd.from_version = from;
    rd.stepped = stepped != 0;
    return rd;
}

START_TEST(spares_get_ids_past_the_servers_once_per_connection)
{
    ps_failover_t *f;
    ck_assert_int_eq(ps_failover_new(&f, S_SERVERS), 0);
    const ps_node_t *a = s_add(f, 1, 0);
    ck_assert_int_eq(a->rank, S_SERVERS);
    ck_assert_int_eq(a->role, PS_ROLE_SERVER);
    ck_assert_str_eq(a->curve_key, "key");
    ck_assert_str_eq(a->endpoint, ""); /* it binds once promoted */
    ck_assert_int_eq(s_add(f, 2, 0)->rank, S_SERVERS + 1);
    const ps_node_t *n = NULL;
    const char *why = NULL;
    ps_route_t again = s_route(1);
    ck_assert_int_eq(ps_failover_spare_add(f, &again, 1, 1, "", 0, &n, &why), PS_ESTATE);
    ck_assert_str_eq(why, "this spare is registered already");
    ck_assert_int_eq(ps_failover_spares(f), 2);
    for (int k = 3; ps_failover_spares(f) < PS_FAILOVER_MAX_SPARES; k++) {
        s_add(f, k, 0);
    }
    ps_route_t more = s_route(999);
    ck_assert_int_eq(ps_failover_spare_add(f, &more, 1, 1, "", 0, &n, &why), PS_ESTATE);
    ck_assert_str_eq(why, "too many spares wait already");
    ps_failover_destroy(&f);
    ck_assert_ptr_null(f);
    ps_failover_destroy(&f); /* NULL-safe */
}
END_TEST

START_TEST(a_restarted_scheduler_numbers_new_spares_past_its_predecessors)
{
    ps_failover_t *f;
    ck_assert_int_eq(ps_failover_new(&f, S_SERVERS), 0);
    ck_assert_int_eq(ps_failover_next_id(f), S_SERVERS);
    /* the state file said the old scheduler gave ids up to S_SERVERS + 3 */
    ck_assert_int_eq(ps_failover_readmit_below(f, S_SERVERS + 4), 0);
    ck_assert_int_eq(ps_failover_next_id(f), S_SERVERS + 4);
    ck_assert_int_eq(s_add(f, 1, 0)->rank, S_SERVERS + 4);
    ck_assert_int_eq(ps_failover_next_id(f), S_SERVERS + 5);
    /* none saved (or fewer than given here): nothing changes */
    ck_assert_int_eq(ps_failover_readmit_below(f, 0), 0);
    ck_assert_int_eq(ps_failover_next_id(f), S_SERVERS + 5);
    ps_failover_destroy(&f);
}
END_TEST

START_TEST(silent_or_closed_spares_are_forgotten_and_heartbeats_keep_them)
{
    ps_failover_t *f;
    ck_assert_int_eq(ps_failover_new(&f, S_SERVERS), 0);
    s_add(f, 1, 0.0);
    const int id2 = s_add(f, 2, 0.0)->rank;
    s_add(f, 3, 0.0);
    ps_route_t r2 = s_route(2), stranger = s_route(7);
    ck_assert_int_eq(ps_failover_spare_seen(f, &r2, id2 + 1, 4.0), 0); /* another's id */
    ck_assert_int_eq(ps_failover_spare_seen(f, &stranger, id2, 4.0), 0);
    ck_assert_int_eq(ps_failover_spare_seen(f, &r2, id2, 4.0), 1);
    ck_assert_int_eq(ps_failover_spares_expire(f, 5.5, 5.0), 2); /* 1 and 3: silent 5.5 s */
    ck_assert_int_eq(ps_failover_spares(f), 1);
    ck_assert_int_eq(ps_failover_spare_seen(f, &r2, id2, 5.5), 1);
    ck_assert_int_eq(ps_failover_spare_closed(f, 11), 0); /* spare 1's fd: gone already */
    ck_assert_int_eq(ps_failover_spare_closed(f, -1), 0);
    ck_assert_int_eq(ps_failover_spare_closed(f, 12), 1);
    ck_assert_int_eq(ps_failover_spares(f), 0);
    ps_failover_destroy(&f);
}
END_TEST

START_TEST(a_promoted_spare_leaves_the_spares_and_its_id_is_kept)
{
    ps_failover_t *f;
    ps_node_t spare;
    ck_assert_int_eq(ps_failover_new(&f, S_SERVERS), 0);
    ck_assert_int_eq(ps_failover_promote(f, 1, &spare), PS_ENOENT); /* none waits */
    s_add(f, 1, 0);
    s_add(f, 2, 0);
    ck_assert_int_eq(ps_failover_promoted_id(f, 1), -1);
    ck_assert_int_eq(ps_failover_promote(f, S_SERVERS, &spare), PS_ENOENT); /* no such server */
    ck_assert_int_eq(ps_failover_promote(f, 1, &spare), 0);
    ck_assert_int_eq(ps_failover_spares(f), 1);
    ck_assert_int_eq(ps_failover_promoted_id(f, 1), spare.rank);
    ck_assert_int_eq(ps_failover_promoted_id(f, 0), -1);
    ck_assert_int_eq(ps_failover_promoted_id(f, -1), -1);
    ps_route_t was = spare.route;
    ck_assert_int_eq(ps_failover_spare_seen(f, &was, spare.rank, 1), 0); /* no spare now */
    ck_assert_int_eq(ps_failover_promote(f, 2, &spare), 0);
    ck_assert_int_eq(ps_failover_spares(f), 0);
    ck_assert_int_ne(ps_failover_promoted_id(f, 1), ps_failover_promoted_id(f, 2));
    ps_failover_destroy(&f);
}
END_TEST

START_TEST(a_replaced_servers_connection_is_known)
{
    ps_failover_t *f;
    ck_assert_int_eq(ps_failover_new(&f, S_SERVERS), 0);
    ps_route_t old = s_route(40), other = s_route(41);
    ck_assert_int_eq(ps_failover_retired(f, &old), 0);
    ps_failover_retire(f, &old);
    ck_assert_int_eq(ps_failover_retired(f, &old), 1);
    ck_assert_int_eq(ps_failover_retired(f, &other), 0);
    ps_failover_destroy(&f);
}
END_TEST

START_TEST(stepped_every_server_answers_once_then_the_workers_roll_back)
{
    ps_failover_t *f;
    ck_assert_int_eq(ps_failover_new(&f, S_SERVERS), 0);
    Shardps__FailoverReady rd = s_ready(1, 50, 57, 0);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 1, 10.0), 0); /* no failover yet */
    ck_assert_int_eq(ps_failover_record(f, 1, 1, 50, 10.0, 5.0, 1), 0);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 1, 10.1), 0);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 1, 10.1), 0); /* answered already */
    ck_assert_int_eq(ps_failover_ready(f, S_SERVERS, &rd, 1, 10.1), 0); /* no such server */
    rd = s_ready(1, 50, 0, 0);
    ck_assert_int_eq(ps_failover_ready(f, 1, &rd, 1, 10.2), 0); /* the spare */
    rd = s_ready(1, 50, 60, 0);
    ck_assert_int_eq(ps_failover_ready(f, 2, &rd, 1, 10.3), 1); /* the last: phase 2 */
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(f, &reps), 1);
    ck_assert_int_eq(reps[0].rank, 1);
    ck_assert_int_eq(reps[0].generation, 1);
    ck_assert_int_eq(reps[0].step, 50);
    ck_assert_int_eq(reps[0].steps_lost, 10); /* the farthest server stood at 60 */
    ck_assert_int_eq(reps[0].updates_lost, 0);
    ck_assert(reps[0].detect_s == 5.0);
    ck_assert(reps[0].recover_s < 0); /* until the first step after the rollback */
    rd = s_ready(1, 51, 0, 1);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 1, 12.5), 0);
    ck_assert(ps_test_close(reps[0].recover_s, 2.5, 1e-9, 0));
    ck_assert_int_eq(ps_failover_ready(f, 2, &rd, 1, 20.0), 0); /* closed once */
    ck_assert(ps_test_close(reps[0].recover_s, 2.5, 1e-9, 0));
    ps_failover_destroy(&f);
}
END_TEST

START_TEST(async_counts_the_updates_lost_from_the_others_highest_version)
{
    ps_failover_t *f;
    ck_assert_int_eq(ps_failover_new(&f, S_SERVERS), 0);
    ck_assert_int_eq(ps_failover_record(f, 2, 1, 30, 1.0, 5.0, 0), 0);
    Shardps__FailoverReady rd = s_ready(1, 0, 47, 0);
    ck_assert_int_eq(ps_failover_ready(f, 0, &rd, 0, 1.1), 0);
    rd = s_ready(1, 40, 0, 0); /* the spare: its part's version */
    ck_assert_int_eq(ps_failover_ready(f, 2, &rd, 0, 1.2), 0);
    rd = s_ready(1, 0, 45, 0);
    ck_assert_int_eq(ps_failover_ready(f, 1, &rd, 0, 1.3), 1);
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(f, &reps), 1);
    ck_assert_int_eq(reps[0].base, 40);
    ck_assert_int_eq(reps[0].updates_lost, 7); /* 47 - 40 */
    ck_assert_int_eq(reps[0].steps_lost, 0);
    ps_failover_destroy(&f);
}
END_TEST

START_TEST(a_server_lost_during_a_recovery_ends_with_it)
{
    ps_failover_t *f;
    ck_assert_int_eq(ps_failover_new(&f, S_SERVERS), 0);
    ck_assert_int_eq(ps_failover_record(f, 0, 1, 50, 10.0, 5.0, 1), 0);
    ck_assert_int_eq(ps_failover_record(f, 2, 2, 50, 11.0, 4.0, 1), 0);
    Shardps__FailoverReady rd = s_ready(2, 50, 50, 0);
    for (int r = 0; r < S_SERVERS; r++) { /* the second one's answers start afresh */
        ck_assert_int_eq(ps_failover_ready(f, r, &rd, 1, 11.5), r == S_SERVERS - 1);
    }
    rd = s_ready(2, 51, 0, 1);
    ck_assert_int_eq(ps_failover_ready(f, 1, &rd, 1, 13.0), 0);
    const ps_failover_rep_t *reps;
    ck_assert_int_eq(ps_failover_replacements(f, &reps), 2);
    ck_assert(ps_test_close(reps[0].recover_s, 3.0, 1e-9, 0));
    ck_assert(ps_test_close(reps[1].recover_s, 2.0, 1e-9, 0));
    for (int k = 0; k < 20; k++) { /* the records grow */
        ck_assert_int_eq(ps_failover_record(f, 1, 3 + k, 50, 20.0, 1.0, 1), 0);
    }
    ck_assert_int_eq(ps_failover_replacements(f, &reps), 22);
    ck_assert_int_eq(reps[21].generation, 22);
    ps_failover_destroy(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("failover");
    TCase *tc = tcase_create("failover");
    tcase_add_test(tc, spares_get_ids_past_the_servers_once_per_connection);
    tcase_add_test(tc, a_restarted_scheduler_numbers_new_spares_past_its_predecessors);
    tcase_add_test(tc, silent_or_closed_spares_are_forgotten_and_heartbeats_keep_them);
    tcase_add_test(tc, a_promoted_spare_leaves_the_spares_and_its_id_is_kept);
    tcase_add_test(tc, a_replaced_servers_connection_is_known);
    tcase_add_test(tc, stepped_every_server_answers_once_then_the_workers_roll_back);
    tcase_add_test(tc, async_counts_the_updates_lost_from_the_others_highest_version);
    tcase_add_test(tc, a_server_lost_during_a_recovery_ends_with_it);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
