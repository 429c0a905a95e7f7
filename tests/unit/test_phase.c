/*
 * tests/unit/test_phase.c - the scheduler's phase table (scheduler/phase.h):
 * every (phase, event) pair is walked against the transitions the job's life
 * has; any other is refused with PS_ESTATE and leaves the phase alone; every
 * phase is reachable from WAITING and the end phases are where it stops.
 */
#include <check.h>
#include <string.h>

#include "common/error.h"
#include "scheduler/phase.h"
#include "tests/unit/testutil.h"

/* The job's life, written out once more by hand: from, event, to. */
static const struct {
    ps_phase_t from;
    ps_phase_event_t ev;
    ps_phase_t to;
} s_legal[] = {
    {PS_PHASE_WAITING, PS_PHASE_EV_SERVERS_VIEWED, PS_PHASE_STARTING},
    {PS_PHASE_WAITING, PS_PHASE_EV_WORKERS_VIEWED, PS_PHASE_RUNNING},
    {PS_PHASE_WAITING, PS_PHASE_EV_SAVED_JOB_BACK, PS_PHASE_RECOVERING},
    {PS_PHASE_STARTING, PS_PHASE_EV_WORKERS_VIEWED, PS_PHASE_RUNNING},
    {PS_PHASE_RECOVERING, PS_PHASE_EV_ALL_BACK, PS_PHASE_RUNNING},
    {PS_PHASE_RUNNING, PS_PHASE_EV_WORKERS_DONE, PS_PHASE_REPORTING},
    {PS_PHASE_REPORTING, PS_PHASE_EV_REPORTS_IN, PS_PHASE_FINISHED},
    {PS_PHASE_WAITING, PS_PHASE_EV_ABORT, PS_PHASE_FAILED},
    {PS_PHASE_RECOVERING, PS_PHASE_EV_ABORT, PS_PHASE_FAILED},
    {PS_PHASE_STARTING, PS_PHASE_EV_ABORT, PS_PHASE_FAILED},
    {PS_PHASE_RUNNING, PS_PHASE_EV_ABORT, PS_PHASE_FAILED},
    {PS_PHASE_REPORTING, PS_PHASE_EV_ABORT, PS_PHASE_FAILED},
    {PS_PHASE_FAILED, PS_PHASE_EV_ABORT, PS_PHASE_FAILED},
};
#define S_NLEGAL (sizeof s_legal / sizeof s_legal[0])

/* The expected target of (from, ev), or -1 when the job has no such step. */
static int s_expected(ps_phase_t from, ps_phase_event_t ev)
{
    for (size_t i = 0; i < S_NLEGAL; i++) {
        if (s_legal[i].from == from && s_legal[i].ev == ev) {
            return (int)s_legal[i].to;
        }
    }
    return -1;
}

START_TEST(every_pair_of_the_table_is_the_jobs_life_or_refused)
{
    int legal = 0;
    for (int p = 0; p < PS_PHASE_COUNT; p++) {
        for (int e = 0; e < PS_PHASE_EV_COUNT; e++) {
            ps_phase_t to = (ps_phase_t)-1;
            const int rc = ps_phase_next((ps_phase_t)p, (ps_phase_event_t)e, &to);
            const int want = s_expected((ps_phase_t)p, (ps_phase_event_t)e);
            if (want < 0) {
                ck_assert_msg(rc == PS_ESTATE, "%s on %s: rc %d, want PS_ESTATE",
                              ps_phase_name(p), ps_phase_event_name(e), rc);
                ck_assert_int_eq(to, (ps_phase_t)-1); /* untouched */
            } else {
                ck_assert_msg(rc == 0 && (int)to == want, "%s on %s: rc %d to %s, want %s",
                              ps_phase_name(p), ps_phase_event_name(e), rc,
                              ps_phase_name(to), ps_phase_name(want));
                legal++;
            }
        }
    }
    ck_assert_int_eq(legal, (int)S_NLEGAL);
}
END_TEST

START_TEST(finished_is_the_end_and_failed_only_fails_again)
{
    ps_phase_t to;
    for (int e = 0; e < PS_PHASE_EV_COUNT; e++) {
        ck_assert_int_eq(ps_phase_next(PS_PHASE_FINISHED, e, &to), PS_ESTATE);
        if (e != PS_PHASE_EV_ABORT) {
            ck_assert_int_eq(ps_phase_next(PS_PHASE_FAILED, e, &to), PS_ESTATE);
        }
    }
    for (int p = 0; p < PS_PHASE_COUNT; p++) {
        const int rc = ps_phase_next(p, PS_PHASE_EV_ABORT, &to);
        ck_assert_int_eq(rc, p == PS_PHASE_FINISHED ? PS_ESTATE : 0);
        ck_assert(rc != 0 || to == PS_PHASE_FAILED);
    }
}
END_TEST

START_TEST(every_phase_is_reachable_from_waiting)
{
    int seen[PS_PHASE_COUNT] = {[PS_PHASE_WAITING] = 1};
    for (int grew = 1; grew;) { /* closure of the table from WAITING */
        grew = 0;
        for (int p = 0; p < PS_PHASE_COUNT; p++) {
            for (int e = 0; seen[p] && e < PS_PHASE_EV_COUNT; e++) {
                ps_phase_t to;
                if (ps_phase_next(p, e, &to) == 0 && !seen[to]) {
                    seen[to] = grew = 1;
                }
            }
        }
    }
    for (int p = 0; p < PS_PHASE_COUNT; p++) {
        ck_assert_msg(seen[p], "%s is not reachable", ps_phase_name(p));
    }
}
END_TEST

START_TEST(out_of_range_is_einval_and_names_are_distinct)
{
    ps_phase_t to = PS_PHASE_WAITING;
    ck_assert_int_eq(ps_phase_next(PS_PHASE_COUNT, PS_PHASE_EV_ABORT, &to), PS_EINVAL);
    ck_assert_int_eq(ps_phase_next(PS_PHASE_WAITING, PS_PHASE_EV_COUNT, &to), PS_EINVAL);
    ck_assert_int_eq(ps_phase_next((ps_phase_t)-1, PS_PHASE_EV_ABORT, &to), PS_EINVAL);
    ck_assert_int_eq(to, PS_PHASE_WAITING);
    ck_assert_str_eq(ps_phase_name(PS_PHASE_COUNT), "?");
    ck_assert_str_eq(ps_phase_event_name(PS_PHASE_EV_COUNT), "?");
    for (int a = 0; a < PS_PHASE_COUNT; a++) {
        for (int b = a + 1; b < PS_PHASE_COUNT; b++) {
            ck_assert_str_ne(ps_phase_name(a), ps_phase_name(b));
        }
    }
    for (int a = 0; a < PS_PHASE_EV_COUNT; a++) {
        for (int b = a + 1; b < PS_PHASE_EV_COUNT; b++) {
            ck_assert_str_ne(ps_phase_event_name(a), ps_phase_event_name(b));
        }
    }
    ck_assert_str_eq(ps_phase_name(PS_PHASE_RUNNING), "running"); /* the status view's word */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("phase");
    TCase *tc = tcase_create("phase");
    tcase_add_test(tc, every_pair_of_the_table_is_the_jobs_life_or_refused);
    tcase_add_test(tc, finished_is_the_end_and_failed_only_fails_again);
    tcase_add_test(tc, every_phase_is_reachable_from_waiting);
    tcase_add_test(tc, out_of_range_is_einval_and_names_are_distinct);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
