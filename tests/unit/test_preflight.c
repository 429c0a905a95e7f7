/*
 * tests/unit/test_preflight.c - the scheduler's side of --preflight
 * (scheduler/preflight.h), driven through its events with a fake core: the
 * verdict waits for every live worker, passes (a barrier may go) or fails
 * the job naming each unreachable pair, and a bad result fails it too.
 */
#include <check.h>
#include <string.h>

#include "scheduler/preflight.h"
#include "tests/unit/sched_fake.h"
#include "tests/unit/testutil.h"

/* Worker w's result: every server reached but `unreached` (-1: none); servers
 * pairs in all. Returns whether the module took it. */
static int s_result(ps_fake_t *f, ps_preflight_t *p, int w, int servers, int unreached)
{
    Shardps__PreflightPair pairs[4], *ptrs[4];
    Shardps__PreflightResult r = SHARDPS__PREFLIGHT_RESULT__INIT;
    for (int k = 0; k < servers; k++) {
        shardps__preflight_pair__init(&pairs[k]);
        pairs[k].server = k;
        pairs[k].reached = k != unreached;
        pairs[k].rtt_ms = 0.25;
        pairs[k].mbytes_per_s = 900;
        ptrs[k] = &pairs[k];
    }
    r.n_pairs = (size_t)servers;
    r.pairs = ptrs;
    const ps_node_t *n = ps_fake_row(f, PS_ROLE_WORKER, w);
    ps_msg_t m = {0};
    ps_fake_msg_from(f, &m, n, PS_MSG_PREFLIGHT_RESULT, &r.base);
    const int took = ps_preflight_events.on_message(p, n, &m);
    ps_msg_close(&m);
    return took;
}

/* A 2x3 job running with --preflight. */
static ps_preflight_t *s_new(ps_fake_t *f)
{
    ps_fake_init(f, 2, 3);
    ps_fake_running(f);
    f->view.preflight = 1;
    ps_preflight_t *p;
    ck_assert_int_eq(ps_preflight_new(&p, &f->ops), 0);
    return p;
}

START_TEST(the_verdict_waits_for_every_live_worker_then_lets_the_barrier_go)
{
    ps_fake_t f;
    ps_preflight_t *p = s_new(&f);
    ck_assert(s_result(&f, p, 0, 2, -1));
    ck_assert(s_result(&f, p, 2, 2, -1));
    ck_assert(!ps_preflight_passed(p));
    ck_assert_int_eq(f.barrier_checks, 0);
    /* worker 1 is left out: the others' results decide */
    ps_fake_row(&f, PS_ROLE_WORKER, 1)->lost = 1;
    ps_preflight_progress(p);
    ck_assert(ps_preflight_passed(p));
    ck_assert_int_eq(f.barrier_checks, 1);
    ck_assert(!f.failed);
    ps_preflight_progress(p); /* given once */
    ck_assert_int_eq(f.barrier_checks, 1);
    json_t *j = ps_preflight_json(p);
    ck_assert_int_eq((int)json_array_size(j), 4);
    ck_assert_int_eq((int)json_integer_value(json_object_get(json_array_get(j, 3), "worker")), 2);
    json_decref(j);
    ps_preflight_destroy(&p);
    ps_fake_fini(&f);
}
END_TEST

START_TEST(an_unreachable_pair_fails_the_job_naming_it)
{
    ps_fake_t f;
    ps_preflight_t *p = s_new(&f);
    ck_assert(s_result(&f, p, 0, 2, -1));
    ck_assert(s_result(&f, p, 1, 2, 1));
    ck_assert(!f.failed);
    ck_assert(s_result(&f, p, 2, 2, -1));
    ck_assert(f.failed);
    ck_assert_ptr_nonnull(strstr(f.failure, "W1 cannot reach S1 at tcp://127.0.0.1:7001"));
    ck_assert(!ps_preflight_passed(p));
    ck_assert_int_eq(f.barrier_checks, 0);
    ps_preflight_destroy(&p);
    ps_fake_fini(&f);
}
END_TEST

START_TEST(a_bad_or_second_result_fails_the_job)
{
    ps_fake_t f;
    ps_preflight_t *p = s_new(&f);
    ck_assert(s_result(&f, p, 0, 1, -1)); /* one pair of two */
    ck_assert(f.failed);
    ck_assert_ptr_nonnull(strstr(f.failure, "W0 sent a bad preflight result"));
    ps_preflight_destroy(&p);
    ps_fake_fini(&f);

    p = s_new(&f);
    ck_assert(s_result(&f, p, 0, 2, -1));
    ck_assert(!f.failed);
    ck_assert(s_result(&f, p, 0, 2, -1));
    ck_assert(f.failed);
    ps_preflight_destroy(&p);
    ps_fake_fini(&f);
}
END_TEST

START_TEST(without_preflight_the_verdict_passes_and_other_messages_are_not_its)
{
    ps_fake_t f;
    ps_preflight_t *p = s_new(&f);
    f.view.preflight = 0;
    ps_preflight_progress(p);
    ck_assert(ps_preflight_passed(p));
    ps_msg_t m = {0};
    ps_fake_msg_from(&f, &m, ps_fake_row(&f, PS_ROLE_WORKER, 0), PS_MSG_BARRIER, NULL);
    ck_assert(!ps_preflight_events.on_message(p, ps_fake_row(&f, PS_ROLE_WORKER, 0), &m));
    ck_assert(!ps_preflight_events.on_message(p, NULL, &m));
    ps_msg_close(&m);
    ps_preflight_destroy(&p);
    ck_assert_ptr_null(p);
    ps_fake_fini(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("preflight");
    TCase *tc = tcase_create("preflight");
    tcase_add_test(tc, the_verdict_waits_for_every_live_worker_then_lets_the_barrier_go);
    tcase_add_test(tc, an_unreachable_pair_fails_the_job_naming_it);
    tcase_add_test(tc, a_bad_or_second_result_fails_the_job);
    tcase_add_test(tc, without_preflight_the_verdict_passes_and_other_messages_are_not_its);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
