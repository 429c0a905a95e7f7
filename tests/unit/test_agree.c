/*
 * tests/unit/test_agree.c - a step agreed with every server
 * (scheduler/agree.h), driven through its events with a fake core: every
 * server is asked once, each answers once, the step is past every answer,
 * and answers of an abandoned agreement change nothing.
 */
#include <check.h>
#include <stdint.h>

#include "common/error.h"
#include "scheduler/agree.h"
#include "tests/unit/sched_fake.h"
#include "tests/unit/testutil.h"

/* Server r answers version (of generation gen) through the events. Returns
 * whether the module took the message. */
static int s_answer(ps_fake_t *f, ps_agree_t *a, int r, int64_t version, int64_t gen)
{
    const ps_node_t *n = ps_fake_row(f, PS_ROLE_SERVER, r);
    Shardps__JoinStep js = SHARDPS__JOIN_STEP__INIT;
    js.step = version;
    ps_msg_t m = {0};
    ps_fake_msg(&m, &n->route, PS_ROLE_SERVER, r, PS_MSG_JOIN_STEP, gen, &js.base);
    const int took = ps_agree_events.on_message(a, n, &m);
    ps_msg_close(&m);
    return took;
}

START_TEST(every_server_is_asked_and_the_step_is_past_every_answer)
{
    ps_fake_t f;
    ps_fake_init(&f, 3, 2);
    ps_fake_running(&f);
    ps_agree_t *a;
    ck_assert_int_eq(ps_agree_new(&a, &f.ops), 0);
    ck_assert_int_eq(ps_agree_start(a, 1, 77, 0), 0);
    ck_assert_int_eq(ps_agree_start(a, 0, 78, 0), PS_ESTATE); /* one at a time */
    ck_assert_int_eq(ps_fake_count(&f, PS_MSG_JOIN_PREPARE, NULL), 3);
    Shardps__JoinStep *js =
        ps_fake_unpack(ps_fake_last(&f, PS_MSG_JOIN_PREPARE, "S2"), &shardps__join_step__descriptor);
    ck_assert_ptr_nonnull(js);
    ck_assert_int_eq(js->worker, 1);
    ck_assert_uint_eq(js->token, 77);
    protobuf_c_message_free_unpacked(&js->base, NULL);

    int64_t J = -1;
    ck_assert(s_answer(&f, a, 0, 10, 0));
    ck_assert(s_answer(&f, a, 2, 12, 0));
    ck_assert(!ps_agree_ready(a, &J));
    ck_assert(s_answer(&f, a, 2, 40, 0)); /* a second answer is dropped */
    ck_assert(!ps_agree_ready(a, &J));
    ck_assert(s_answer(&f, a, 1, 11, 0));
    ck_assert(ps_agree_ready(a, &J));
    ck_assert_int_eq(J, 13);

    ps_agree_commit(a, J, 1, 77);
    ck_assert(!ps_agree_active(a));
    ck_assert_int_eq(ps_fake_count(&f, PS_MSG_JOIN_STEP, NULL), 3);
    js = ps_fake_unpack(ps_fake_last(&f, PS_MSG_JOIN_STEP, "S0"), &shardps__join_step__descriptor);
    ck_assert_int_eq(js->step, 13);
    ck_assert_int_eq(js->worker, 1);
    ck_assert(!js->checkpoint);
    protobuf_c_message_free_unpacked(&js->base, NULL);
    ps_agree_destroy(&a);
    ck_assert_ptr_null(a);
    ps_fake_fini(&f);
}
END_TEST

START_TEST(answers_of_an_abandoned_agreement_change_nothing)
{
    ps_fake_t f;
    ps_fake_init(&f, 2, 2);
    ps_fake_running(&f);
    ps_agree_t *a;
    ck_assert_int_eq(ps_agree_new(&a, &f.ops), 0);
    ck_assert_int_eq(ps_agree_abandon(a), 0);
    ck_assert_int_eq(ps_agree_start(a, -1, 0, 1), 0);
    ck_assert(ps_agree_checkpoint(a));
    ck_assert_int_eq(ps_agree_worker(a), -1);
    s_answer(&f, a, 0, 5, 0);
    /* a failover: a new generation, the holds end, the agreement goes */
    f.view.generation = 1;
    ck_assert_int_eq(ps_agree_abandon(a), 1);
    ck_assert_int_eq(ps_agree_start(a, -1, 0, 1), 0);
    ck_assert(s_answer(&f, a, 1, 99, 0)); /* the older generation's: taken, ignored */
    int64_t J;
    ck_assert(s_answer(&f, a, 0, 7, 1));
    ck_assert(!ps_agree_ready(a, &J));
    ck_assert(s_answer(&f, a, 1, 6, 1));
    ck_assert(ps_agree_ready(a, &J));
    ck_assert_int_eq(J, 8);
    ps_agree_destroy(&a);
    ps_fake_fini(&f);
}
END_TEST

START_TEST(a_worker_or_a_members_answer_is_not_the_agreements)
{
    ps_fake_t f;
    ps_fake_init(&f, 1, 2);
    ps_fake_running(&f);
    ps_agree_t *a;
    ck_assert_int_eq(ps_agree_new(&a, &f.ops), 0);
    ck_assert_int_eq(ps_agree_start(a, -1, 0, 0), 0);
    /* server 0's answer to MSG_MEMBERS is the core's (members.c) */
    Shardps__JoinStep js = SHARDPS__JOIN_STEP__INIT;
    js.members = 1;
    ps_msg_t m = {0};
    ps_fake_msg_from(&f, &m, ps_fake_row(&f, PS_ROLE_SERVER, 0), PS_MSG_JOIN_STEP, &js.base);
    ck_assert(!ps_agree_events.on_message(a, ps_fake_row(&f, PS_ROLE_SERVER, 0), &m));
    ps_msg_close(&m);
    /* another type, or no node: not its */
    ps_fake_msg_from(&f, &m, ps_fake_row(&f, PS_ROLE_WORKER, 0), PS_MSG_BARRIER, NULL);
    ck_assert(!ps_agree_events.on_message(a, ps_fake_row(&f, PS_ROLE_WORKER, 0), &m));
    ck_assert(!ps_agree_events.on_message(a, NULL, &m));
    ps_msg_close(&m);
    int64_t J;
    ck_assert(!ps_agree_ready(a, &J));
    ps_agree_release(a);
    Shardps__JoinStep *rel =
        ps_fake_unpack(ps_fake_last(&f, PS_MSG_JOIN_STEP, "S0"), &shardps__join_step__descriptor);
    ck_assert_int_eq(rel->step, 0);
    ck_assert_int_eq(rel->worker, -1);
    protobuf_c_message_free_unpacked(&rel->base, NULL);
    ps_agree_destroy(&a);
    ps_fake_fini(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("agree");
    TCase *tc = tcase_create("agree");
    tcase_add_test(tc, every_server_is_asked_and_the_step_is_past_every_answer);
    tcase_add_test(tc, answers_of_an_abandoned_agreement_change_nothing);
    tcase_add_test(tc, a_worker_or_a_members_answer_is_not_the_agreements);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
