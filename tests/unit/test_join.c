/*
 * tests/unit/test_join.c - a resume with another worker count starts at the
 * step of the same data position (ps_join_map_step, scheduler/join.h): the
 * same count keeps the step; otherwise the new job starts its epoch at the
 * first global batch not wholly seen, the next epoch when that is past the
 * end; a job of less than one step per epoch keeps the step.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/error.h"
#include "scheduler/join.h"
#include "tests/unit/sched_fake.h"
#include "tests/unit/testutil.h"

START_TEST(the_same_worker_count_keeps_the_step)
{
    for (int M = 1; M <= 8; M++) {
        for (int64_t step = 0; step < 500; step += 7) {
            ck_assert_int_eq(ps_join_map_step(step, M, M, 32, 60000), step);
        }
    }
}
END_TEST

START_TEST(steps_map_to_the_first_batch_not_wholly_seen)
{
    /* 1000 samples, batch 10: 2 workers take 50 steps an epoch, 1 takes 100, 3 take 33 */
    ck_assert_int_eq(ps_join_map_step(10, 2, 1, 10, 1000), 20);   /* 200 samples seen */
    ck_assert_int_eq(ps_join_map_step(10, 1, 2, 10, 1000), 5);    /* 100 seen */
    ck_assert_int_eq(ps_join_map_step(11, 1, 2, 10, 1000), 6);    /* 110 seen: 100-119 not all */
    ck_assert_int_eq(ps_join_map_step(10, 2, 3, 10, 1000), 7);    /* 200 seen: ceil(20/3) */
    ck_assert_int_eq(ps_join_map_step(60, 2, 3, 10, 1000), 33 + 7); /* epoch 1, step 10 of it */
    ck_assert_int_eq(ps_join_map_step(99, 1, 2, 10, 1000), 50);   /* past the end: next epoch */
    ck_assert_int_eq(ps_join_map_step(49, 2, 3, 10, 1000), 33);   /* ceil(98/3) = 33: too */
    ck_assert_int_eq(ps_join_map_step(0, 4, 3, 10, 1000), 0);
}
END_TEST

START_TEST(the_mapped_step_skips_no_sample_and_repeats_less_than_a_batch)
{
    const int batch = 8;
    const uint64_t samples = 6000;
    for (int M = 1; M <= 6; M++) {
        for (int N = 1; N <= 6; N++) {
            const int64_t spe_m = (int64_t)(samples / ((uint64_t)M * batch));
            const int64_t spe_n = (int64_t)(samples / ((uint64_t)N * batch));
            for (int64_t step = 0; step < 3 * spe_m; step++) {
                const int64_t got = ps_join_map_step(step, M, N, batch, samples);
                const int64_t epoch = step / spe_m, k = step % spe_m;
                const int64_t e = got / spe_n, kn = got % spe_n;
                if (e == epoch) { /* within the epoch: minimal kn with kn*N >= k*M */
                    ck_assert_int_ge(kn * N, k * M);
                    ck_assert_int_lt((kn - 1) * N, k * M);
                } else { /* past the new epoch's last whole global batch */
                    ck_assert_int_eq(e, epoch + 1);
                    ck_assert_int_eq(kn, 0);
                    ck_assert_int_gt(k * M, (spe_n - 1) * N);
                }
            }
        }
    }
}
END_TEST

START_TEST(less_than_one_step_an_epoch_keeps_the_step)
{
    ck_assert_int_eq(ps_join_map_step(5, 2, 4, 100, 300), 5); /* 4 x 100 > 300 */
    ck_assert_int_eq(ps_join_map_step(5, 4, 2, 100, 300), 5);
}
END_TEST


/* A 2x2 sync job running, worker 1 lost: a joiner may take its rank. */
typedef struct {
    ps_fake_t f;
    ps_agree_t *agree;
    ps_join_t *join;
} s_job_t;

static void s_job_init(s_job_t *t)
{
    ps_fake_init(&t->f, 2, 2);
    ps_fake_running(&t->f);
    ps_node_t *w1 = ps_fake_row(&t->f, PS_ROLE_WORKER, 1);
    w1->used = 0;
    w1->lost = 1;
    ck_assert_int_eq(ps_agree_new(&t->agree, &t->f.ops), 0);
    ck_assert_int_eq(ps_join_new(&t->join, &t->f.ops, t->agree), 0);
}

static void s_job_fini(s_job_t *t)
{
    ps_join_destroy(&t->join);
    ps_agree_destroy(&t->agree);
    ps_fake_fini(&t->f);
}

/* A worker registering on route "joiner" for rank; returns whether join took it. */
static int s_register(s_job_t *t, int rank)
{
    Shardps__Register reg = SHARDPS__REGISTER__INIT;
    reg.role = PS_ROLE_WORKER;
    reg.rank = rank;
    reg.pid = 4242;
    ps_route_t route = ps_fake_route("joiner");
    ps_msg_t m = {0};
    ps_fake_msg(&m, &route, PS_ROLE_WORKER, rank, PS_MSG_REGISTER, 0, &reg.base);
    const int took = ps_join_events.on_register(t->join, &m, &reg);
    ps_msg_close(&m);
    return took;
}

/* Row n reports a model of p parameters. */
static void s_model(s_job_t *t, const ps_node_t *n, uint64_t p)
{
    Shardps__ModelInfo mi = SHARDPS__MODEL_INFO__INIT;
    mi.num_params = p;
    mi.train_samples = 6000;
    ps_msg_t m = {0};
    ps_fake_msg_from(&t->f, &m, n, PS_MSG_MODEL_INFO, &mi.base);
    ck_assert(ps_join_events.on_message(t->join, n, &m));
    ps_msg_close(&m);
}

/* Every server answers the agreement with version. */
static void s_answers(s_job_t *t, int64_t version)
{
    for (int r = 0; r < 2; r++) {
        const ps_node_t *n = ps_fake_row(&t->f, PS_ROLE_SERVER, r);
        Shardps__JoinStep js = SHARDPS__JOIN_STEP__INIT;
        js.step = version;
        ps_msg_t m = {0};
        ps_fake_msg_from(&t->f, &m, n, PS_MSG_JOIN_STEP, &js.base);
        ck_assert(ps_agree_events.on_message(t->agree, n, &m));
        ps_msg_close(&m);
    }
}

START_TEST(a_joiner_takes_the_lost_rank_and_is_live_from_the_agreed_step)
{
    s_job_t t;
    s_job_init(&t);
    ck_assert(s_register(&t, -1));
    const ps_node_t *n = ps_fake_row(&t.f, PS_ROLE_WORKER, 1);
    ck_assert(n->used);
    ck_assert(n->lost); /* not live before it joins */
    ck_assert_int_eq(ps_fake_count(&t.f, PS_MSG_REGISTER_ACK, "W1"), 1);
    ps_join_events.on_tick(t.join, 1.0);
    ck_assert(!ps_agree_active(t.agree)); /* no model yet: no agreement */
    s_model(&t, n, t.f.view.num_params);
    ck_assert_uint_eq(n->train_samples, 6000);
    ps_join_events.on_tick(t.join, 1.1);
    ck_assert(ps_agree_active(t.agree));
    ck_assert_int_eq(ps_agree_worker(t.agree), 1);
    ck_assert_int_eq(ps_fake_count(&t.f, PS_MSG_JOIN_PREPARE, NULL), 2);
    s_answers(&t, 41);
    ps_join_events.on_tick(t.join, 1.2);
    ck_assert(!ps_agree_active(t.agree));
    ck_assert_int_eq(ps_fake_count(&t.f, PS_MSG_JOIN_STEP, NULL), 2);
    const ps_fake_sent_t *sent = ps_fake_last(&t.f, PS_MSG_VIEW, "W1");
    ck_assert_ptr_nonnull(sent);
    Shardps__ClusterView *cv = ps_fake_unpack(sent, &shardps__cluster_view__descriptor);
    ck_assert_ptr_nonnull(cv);
    ck_assert_int_eq(cv->start_step, 42);
    ck_assert(cv->joining);
    protobuf_c_message_free_unpacked(&cv->base, NULL);
    ck_assert(!n->lost);
    ck_assert_int_eq(t.f.facts.membership_changes, 1);
    ck_assert_int_eq(ps_join_count(t.join), 1);
    s_job_fini(&t);
}
END_TEST

START_TEST(a_joiner_is_refused_a_rank_that_is_not_lost_and_in_async)
{
    s_job_t t;
    s_job_init(&t);
    ck_assert(s_register(&t, 0)); /* worker 0 is alive */
    const ps_fake_sent_t *e = ps_fake_last(&t.f, PS_MSG_ERROR, NULL);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->status, PS_ESTATE);
    ck_assert_ptr_nonnull(strstr(e->why, "that worker is not lost"));
    ck_assert(s_register(&t, 5));
    ck_assert_int_eq(ps_fake_last(&t.f, PS_MSG_ERROR, NULL)->status, PS_EINVAL);
    t.f.cfg.job.mode = PS_MODE_ASYNC;
    ck_assert(s_register(&t, 1));
    ck_assert_ptr_nonnull(strstr(ps_fake_last(&t.f, PS_MSG_ERROR, NULL)->why, "only in sync"));
    ck_assert(!ps_fake_row(&t.f, PS_ROLE_WORKER, 1)->used);
    t.f.facts.phase = PS_PHASE_WAITING; /* before the job runs: start.c's */
    ck_assert(!s_register(&t, 1));
    s_job_fini(&t);
}
END_TEST

START_TEST(a_joiner_of_another_model_or_gone_silent_is_dropped)
{
    s_job_t t;
    s_job_init(&t);
    ck_assert(s_register(&t, 1));
    const ps_node_t *n = ps_fake_row(&t.f, PS_ROLE_WORKER, 1);
    s_model(&t, n, t.f.view.num_params + 1);
    ck_assert(!n->used);
    ck_assert_int_eq(ps_fake_count(&t.f, PS_MSG_SHUTDOWN, "W1"), 1);
    /* again, then silent while its step is being agreed */
    ck_assert(s_register(&t, 1));
    s_model(&t, n, t.f.view.num_params);
    ps_join_events.on_tick(t.join, 1.0);
    ck_assert(ps_agree_active(t.agree));
    const ps_loss_t loss = {.silent = 6, .fd = -1};
    ck_assert(ps_join_events.on_lost(t.join, n, &loss));
    ck_assert(!n->used);
    ck_assert(!ps_join_events.on_lost(t.join, n, &loss)); /* not a joiner any more */
    s_answers(&t, 9);
    ps_join_events.on_tick(t.join, 1.1);
    /* the agreement ends with no worker, and nobody gets a view */
    Shardps__JoinStep *js = ps_fake_unpack(ps_fake_last(&t.f, PS_MSG_JOIN_STEP, "S1"),
                                           &shardps__join_step__descriptor);
    ck_assert_int_eq(js->worker, -1);
    ck_assert_int_eq(js->step, 10);
    protobuf_c_message_free_unpacked(&js->base, NULL);
    ck_assert_int_eq(ps_fake_count(&t.f, PS_MSG_VIEW, NULL), 0);
    ck_assert_int_eq(ps_join_count(t.join), 0);
    s_job_fini(&t);
}
END_TEST

START_TEST(a_joiner_at_the_last_step_ends_cleanly)
{
    s_job_t t;
    s_job_init(&t);
    ck_assert(s_register(&t, 1));
    const ps_node_t *n = ps_fake_row(&t.f, PS_ROLE_WORKER, 1);
    s_model(&t, n, t.f.view.num_params);
    ps_join_events.on_tick(t.join, 1.0);
    s_answers(&t, t.f.view.total_steps - 1);
    ps_join_events.on_tick(t.join, 1.1);
    Shardps__Shutdown *sd =
        ps_fake_unpack(ps_fake_last(&t.f, PS_MSG_SHUTDOWN, "W1"), &shardps__shutdown__descriptor);
    ck_assert_ptr_nonnull(sd);
    ck_assert_int_eq(sd->status, 0);
    protobuf_c_message_free_unpacked(&sd->base, NULL);
    ck_assert(!n->used);
    s_job_fini(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("join");
    TCase *tc = tcase_create("join");
    tcase_add_test(tc, the_same_worker_count_keeps_the_step);
    tcase_add_test(tc, steps_map_to_the_first_batch_not_wholly_seen);
    tcase_add_test(tc, the_mapped_step_skips_no_sample_and_repeats_less_than_a_batch);
    tcase_add_test(tc, less_than_one_step_an_epoch_keeps_the_step);
    tcase_add_test(tc, a_joiner_takes_the_lost_rank_and_is_live_from_the_agreed_step);
    tcase_add_test(tc, a_joiner_is_refused_a_rank_that_is_not_lost_and_in_async);
    tcase_add_test(tc, a_joiner_of_another_model_or_gone_silent_is_dropped);
    tcase_add_test(tc, a_joiner_at_the_last_step_ends_cleanly);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
