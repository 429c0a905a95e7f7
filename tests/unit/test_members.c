/*
 * tests/unit/test_members.c - the scheduler's node table and the running
 * job's members (scheduler/members.h), driven through its events with a fake
 * core for the ops: a barrier passes once every live worker is in it, a
 * silent worker is left out only where --min-workers allows, and the job
 * ends once every live worker is done and every server reported.
 */
#include <check.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/hist.h"
#include "scheduler/members.h"
#include "tests/unit/sched_fake.h"
#include "tests/unit/testutil.h"

typedef struct {
    ps_fake_t f;
    ps_preflight_t *preflight;
    ps_members_t *mb;
} s_job_t;

/* A running job of servers x workers: the table's rows are the fake's. */
static void s_new(s_job_t *j, int servers, int workers)
{
    ps_fake_init(&j->f, servers, workers);
    ps_fake_running(&j->f);
    ck_assert_int_eq(ps_preflight_new(&j->preflight, &j->f.ops), 0);
    ck_assert_int_eq(ps_members_new(&j->mb, &j->f.ops, &j->f.facts, j->preflight, NULL), 0);
    ck_assert_int_eq(ps_members_count(j->mb), servers + workers);
    for (int i = 0; i < servers + workers; i++) {
        *ps_members_at(j->mb, i) = j->f.nodes[i];
    }
}

static void s_free(s_job_t *j)
{
    ps_members_destroy(&j->mb);
    ck_assert_ptr_null(j->mb);
    ps_preflight_destroy(&j->preflight);
    ps_fake_fini(&j->f);
}

/* Node (role, rank) sends type with body (NULL: none) at generation.
 * Returns whether the table took it. */
static int s_from(s_job_t *j, ps_role_t role, int rank, ps_msg_type_t type,
                  const ProtobufCMessage *body, int64_t generation)
{
    const ps_node_t *n = ps_members_row(j->mb, role, rank);
    ps_msg_t m = {0};
    ps_fake_msg(&m, &n->route, role, rank, type, generation, body);
    const int took = ps_members_events.on_message(j->mb, n, &m);
    ps_msg_close(&m);
    return took;
}

static void s_barrier(s_job_t *j, int w, const char *name)
{
    Shardps__Barrier b = SHARDPS__BARRIER__INIT;
    b.name = (char *)name;
    ck_assert(s_from(j, PS_ROLE_WORKER, w, PS_MSG_BARRIER, &b.base, 0));
}

static void s_done(s_job_t *j, int w, int64_t generation)
{
    Shardps__Done d = SHARDPS__DONE__INIT;
    d.steps = 100;
    d.samples = 3200;
    ck_assert(s_from(j, PS_ROLE_WORKER, w, PS_MSG_DONE, &d.base, generation));
}

START_TEST(a_barrier_passes_once_every_live_worker_is_in_it)
{
    s_job_t j;
    s_new(&j, 1, 2);
    s_barrier(&j, 0, "epoch");
    ck_assert_int_eq(ps_fake_count(&j.f, PS_MSG_BARRIER_DONE, NULL), 0);
    s_barrier(&j, 1, "epoch");
    ck_assert_int_eq(ps_fake_count(&j.f, PS_MSG_BARRIER_DONE, "W0"), 1);
    ck_assert_int_eq(ps_fake_count(&j.f, PS_MSG_BARRIER_DONE, "W1"), 1);
    ck_assert_int_eq(ps_fake_count(&j.f, PS_MSG_BARRIER_DONE, "S0"), 0);
    /* a worker in another barrier than the others' fails the job */
    s_barrier(&j, 0, "a");
    s_barrier(&j, 1, "b");
    ck_assert(j.f.failed);
    ck_assert_ptr_nonnull(strstr(j.f.failure, "W1 entered barrier 'b'"));
    s_free(&j);
}
END_TEST

START_TEST(a_silent_worker_is_left_out_only_where_min_workers_allows)
{
    s_job_t j;
    s_new(&j, 1, 3);
    const ps_loss_t silent = {.silent = 6, .fd = -1};
    ps_node_t *w2 = ps_members_row(j.mb, PS_ROLE_WORKER, 2);
    ck_assert(!ps_members_events.on_lost(j.mb, w2, &silent)); /* --min-workers: all */
    ck_assert_int_eq(ps_members_live(j.mb), 3);
    j.f.cfg.min_workers = 2;
    s_barrier(&j, 0, "step");
    s_barrier(&j, 1, "step");
    ck_assert(ps_members_events.on_lost(j.mb, w2, &silent));
    ck_assert(w2->lost && !w2->used);
    ck_assert_int_eq(ps_members_live(j.mb), 2);
    ck_assert_int_eq(j.f.facts.membership_changes, 1);
    ck_assert_int_eq(j.f.saves, 1);
    ck_assert_int_eq(ps_fake_count(&j.f, PS_MSG_MEMBERS, "S0"), 1);
    /* the barrier it held passes without it */
    ck_assert_int_eq(ps_fake_count(&j.f, PS_MSG_BARRIER_DONE, NULL), 2);
    /* one more would go below --min-workers */
    ck_assert(!ps_members_events.on_lost(j.mb, ps_members_row(j.mb, PS_ROLE_WORKER, 1),
                                         &silent));
    /* servers are not its to leave out */
    ck_assert(!ps_members_events.on_lost(j.mb, ps_members_row(j.mb, PS_ROLE_SERVER, 0),
                                         &silent));
    s_free(&j);
}
END_TEST

START_TEST(the_job_ends_once_every_live_worker_is_done_and_every_server_reported)
{
    s_job_t j;
    s_new(&j, 2, 2);
    j.f.view.generation = 1;
    s_done(&j, 0, 0); /* before a failover's rollback: it trains again */
    s_done(&j, 1, 1);
    ps_members_events.on_tick(j.mb, ps_now());
    ck_assert_int_eq(j.f.facts.phase, PS_PHASE_RUNNING);
    s_done(&j, 0, 1);
    const double now = ps_now();
    ps_members_events.on_tick(j.mb, now);
    ck_assert_int_eq(j.f.facts.phase, PS_PHASE_REPORTING);
    ck_assert(j.f.facts.t_end == now);
    ck_assert_int_eq(ps_fake_count(&j.f, PS_MSG_REPORT, "S0"), 1);
    ck_assert_int_eq(ps_fake_count(&j.f, PS_MSG_REPORT, "S1"), 1);
    uint64_t staleness[PS_HIST_BUCKETS] = {200};
    Shardps__ServerReport r = SHARDPS__SERVER_REPORT__INIT;
    r.pushes = 200;
    r.staleness = staleness;
    r.n_staleness = PS_HIST_BUCKETS;
    ck_assert(s_from(&j, PS_ROLE_SERVER, 0, PS_MSG_REPORT, &r.base, 1));
    ps_members_events.on_tick(j.mb, ps_now());
    ck_assert_msg(j.f.facts.phase == PS_PHASE_REPORTING, "failed: %s", j.f.failure);
    ck_assert(s_from(&j, PS_ROLE_SERVER, 1, PS_MSG_REPORT, &r.base, 1));
    ps_members_events.on_tick(j.mb, ps_now());
    ck_assert_int_eq(j.f.facts.phase, PS_PHASE_FINISHED);
    ck_assert_ptr_nonnull(ps_members_row(j.mb, PS_ROLE_WORKER, 1)->stats);
    s_free(&j);
}
END_TEST

START_TEST(a_nodes_failure_fails_the_job_and_bad_reports_too)
{
    s_job_t j;
    s_new(&j, 1, 1);
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.status = PS_ENONFINITE;
    sd.reason = (char *)"loss is NaN";
    ck_assert(s_from(&j, PS_ROLE_WORKER, 0, PS_MSG_SHUTDOWN, &sd.base, 0));
    ck_assert(j.f.failed && j.f.facts.diverged);
    ck_assert_str_eq(j.f.failure, "W0 failed: loss is NaN");
    s_free(&j);
    s_new(&j, 1, 1);
    ck_assert(s_from(&j, PS_ROLE_WORKER, 0, PS_MSG_DONE, NULL, 0));
    ck_assert_str_eq(j.f.failure, "W0 sent a bad final report");
    s_free(&j);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("members");
    TCase *tc = tcase_create("members");
    tcase_add_test(tc, a_barrier_passes_once_every_live_worker_is_in_it);
    tcase_add_test(tc, a_silent_worker_is_left_out_only_where_min_workers_allows);
    tcase_add_test(tc, the_job_ends_once_every_live_worker_is_done_and_every_server_reported);
    tcase_add_test(tc, a_nodes_failure_fails_the_job_and_bad_reports_too);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
