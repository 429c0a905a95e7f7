/*
 * tests/unit/test_sched_observe.c - the scheduler's status view and metrics
 * over a fake core (tests/unit/sched_fake.h), with no metrics port and no
 * sockets: a status request is answered with its request id, the phase and
 * each node's state (registered, running, lost, done, missing), its keys
 * and its last heartbeat's report; the final view goes unasked (request id
 * 0) to every recent asker, at most the latest eight; the tick's gauges and
 * the message counts show in what a scrape gets, the nodes' own series
 * merged under their node label.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "proto/codec.h"
#include "scheduler/observe.h"
#include "tests/unit/sched_fake.h"
#include "tests/unit/testutil.h" /* <check.h>: after scheduler/module.h, whose
                                      ops->fail Check's fail() macro would take */

/* A fake 2x2 job and an observer of it serving on no port. */
typedef struct {
    ps_fake_t f;
    ps_sched_obs_t *o;
} s_fix_t;

static void s_setup(s_fix_t *x)
{
    char err[128];
    ps_fake_init(&x->f, 2, 2);
    x->o = NULL;
    ck_assert_int_eq(ps_sched_obs_new(&x->f.ops, NULL, &x->o, err, sizeof err), 0);
    ck_assert_ptr_nonnull(x->o);
}

static void s_teardown(s_fix_t *x)
{
    ps_sched_obs_destroy(&x->o);
    ck_assert_ptr_null(x->o);
    ps_fake_fini(&x->f);
}

/* shardps-status on route `who` asks, with request_id. */
static void s_ask(s_fix_t *x, const char *who, uint64_t request_id)
{
    ps_msg_t m = {0};
    const ps_route_t route = ps_fake_route(who);
    ps_fake_msg(&m, &route, PS_ROLE_SCHEDULER, 0, PS_MSG_STATUS, 0, NULL);
    m.hdr.request_id = request_id;
    ps_sched_obs_status_reply(x->o, &m);
    ps_msg_close(&m);
}

/* The last status reply sent to who, decoded (free with
 * shardps__status_reply__free_unpacked(r, NULL)). */
static Shardps__StatusReply *s_reply(const s_fix_t *x, const char *who, uint64_t *request_id)
{
    const ps_fake_sent_t *s = ps_fake_last(&x->f, PS_MSG_STATUS_REPLY, who);
    ck_assert_ptr_nonnull(s);
    *request_id = s->request_id;
    Shardps__StatusReply *r = ps_fake_unpack(s, &shardps__status_reply__descriptor);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* What a scrape gets. Caller frees the result. */
static char *s_scrape(s_fix_t *x)
{
    ps_text_t t = {0};
    ps_sched_obs_render(x->o, &t);
    ck_assert(!t.oom);
    ck_assert_ptr_nonnull(t.p);
    return t.p;
}

START_TEST(a_status_request_before_the_view_says_registered_and_missing)
{
    s_fix_t x;
    s_setup(&x);
    ps_fake_register(&x.f, PS_ROLE_SERVER, 0);
    ps_fake_register(&x.f, PS_ROLE_WORKER, 1);
    s_ask(&x, "status-1", 42);
    ck_assert_int_eq(ps_fake_count(&x.f, PS_MSG_ANY, NULL), 1);
    uint64_t id;
    Shardps__StatusReply *r = s_reply(&x, "status-1", &id);
    ck_assert_uint_eq(id, 42);
    ck_assert_str_eq(r->phase, "waiting");
    ck_assert_uint_eq(r->n_nodes, 4);
    ck_assert_str_eq(r->nodes[0]->state, "registered");
    ck_assert_str_eq(r->nodes[1]->state, "missing");
    ck_assert_str_eq(r->nodes[2]->state, "missing");
    ck_assert_str_eq(r->nodes[3]->state, "registered");
    ck_assert_int_eq(r->nodes[3]->role, PS_ROLE_WORKER);
    ck_assert_int_eq(r->nodes[3]->rank, 1);
    ck_assert_uint_eq(r->nodes[3]->pid, ps_fake_row(&x.f, PS_ROLE_WORKER, 1)->pid);
    ck_assert_uint_eq(r->nodes[0]->key_end, 0); /* no keys before the view */
    shardps__status_reply__free_unpacked(r, NULL);
    s_teardown(&x);
}
END_TEST

START_TEST(a_status_request_while_running_says_running_lost_and_done)
{
    s_fix_t x;
    s_setup(&x);
    ps_fake_running(&x.f);
    ps_fake_row(&x.f, PS_ROLE_WORKER, 0)->done = 1;
    ps_node_t *w1 = ps_fake_row(&x.f, PS_ROLE_WORKER, 1);
    w1->used = 0;
    w1->lost = 1;
    s_ask(&x, "status-2", 7);
    uint64_t id;
    Shardps__StatusReply *r = s_reply(&x, "status-2", &id);
    ck_assert_uint_eq(id, 7);
    ck_assert_str_eq(r->phase, "running");
    ck_assert_int_eq(r->total_steps, 100);
    ck_assert_uint_eq(r->num_params, 1000);
    ck_assert_str_eq(r->model, x.f.cfg.job.model);
    ck_assert_uint_eq(r->n_nodes, 4);
    ck_assert_str_eq(r->nodes[0]->state, "running");
    ck_assert_str_eq(r->nodes[1]->state, "running");
    ck_assert_str_eq(r->nodes[2]->state, "done");
    ck_assert_str_eq(r->nodes[3]->state, "lost");
    ck_assert_int_eq(r->nodes[1]->role, PS_ROLE_SERVER);
    ck_assert_uint_eq(r->nodes[1]->key_begin, 500);
    ck_assert_uint_eq(r->nodes[1]->key_end, 1000);
    ck_assert(r->nodes[3]->silent_seconds == 0); /* not used: no silence counted */
    shardps__status_reply__free_unpacked(r, NULL);
    s_teardown(&x);
}
END_TEST

START_TEST(a_heartbeat_report_shows_in_the_status)
{
    s_fix_t x;
    s_setup(&x);
    ps_fake_running(&x.f);
    Shardps__MetricsReport rep = SHARDPS__METRICS_REPORT__INIT;
    rep.step = 10;
    rep.samples = 320;
    rep.loss = 0.5;
    ps_sched_obs_heartbeat(x.o, 2, "W0", &rep); /* row 2: servers first */
    s_ask(&x, "status-3", 1);
    uint64_t id;
    Shardps__StatusReply *r = s_reply(&x, "status-3", &id);
    ck_assert_ptr_nonnull(r->nodes[2]->report);
    ck_assert_int_eq(r->nodes[2]->report->step, 10);
    ck_assert_uint_eq(r->nodes[2]->report->samples, 320);
    ck_assert_int_eq(r->nodes[3]->report ? r->nodes[3]->report->step : 0, 0);
    shardps__status_reply__free_unpacked(r, NULL);
    s_teardown(&x);
}
END_TEST

START_TEST(the_final_view_goes_to_every_watcher_with_request_id_0)
{
    s_fix_t x;
    s_setup(&x);
    ps_fake_running(&x.f);
    s_ask(&x, "watch-a", 5);
    s_ask(&x, "watch-b", 6);
    s_ask(&x, "watch-a", 9); /* remembered once */
    ps_fake_clear(&x.f);
    x.f.facts.phase = PS_PHASE_FINISHED;
    ps_sched_obs_status_final(x.o);
    ck_assert_int_eq(ps_fake_count(&x.f, PS_MSG_ANY, NULL), 2);
    ck_assert_int_eq(ps_fake_count(&x.f, PS_MSG_STATUS_REPLY, "watch-a"), 1);
    ck_assert_int_eq(ps_fake_count(&x.f, PS_MSG_STATUS_REPLY, "watch-b"), 1);
    for (int k = 0; k < 2; k++) {
        uint64_t id = 99;
        Shardps__StatusReply *r = s_reply(&x, k ? "watch-b" : "watch-a", &id);
        ck_assert_uint_eq(id, 0);
        ck_assert_str_eq(r->phase, "finished");
        shardps__status_reply__free_unpacked(r, NULL);
    }
    ps_sched_obs_status_final(NULL); /* the core may call it before the observer exists */
    s_teardown(&x);
}
END_TEST

START_TEST(the_final_view_goes_to_the_latest_eight_watchers)
{
    s_fix_t x;
    s_setup(&x);
    char who[16];
    for (int k = 0; k < 10; k++) {
        snprintf(who, sizeof who, "watch-%d", k);
        s_ask(&x, who, (uint64_t)k + 1);
    }
    ps_fake_clear(&x.f);
    ps_sched_obs_status_final(x.o);
    ck_assert_int_eq(ps_fake_count(&x.f, PS_MSG_STATUS_REPLY, NULL), 8);
    for (int k = 0; k < 10; k++) { /* the two oldest were replaced */
        snprintf(who, sizeof who, "watch-%d", k);
        ck_assert_int_eq(ps_fake_count(&x.f, PS_MSG_STATUS_REPLY, who), k >= 2);
    }
    s_teardown(&x);
}
END_TEST

START_TEST(nothing_asked_means_no_final_view)
{
    s_fix_t x;
    s_setup(&x);
    ps_sched_obs_status_final(x.o);
    ck_assert_int_eq(ps_fake_count(&x.f, PS_MSG_ANY, NULL), 0);
    s_teardown(&x);
}
END_TEST

START_TEST(the_tick_sets_the_gauges_from_rows_facts_and_counts)
{
    s_fix_t x;
    s_setup(&x);
    ps_fake_running(&x.f);
    ps_fake_row(&x.f, PS_ROLE_WORKER, 0)->done = 1;
    ps_node_t *w1 = ps_fake_row(&x.f, PS_ROLE_WORKER, 1);
    w1->used = 0;
    w1->lost = 1;
    x.f.facts.refused = 3;
    x.f.facts.membership_changes = 1;
    const ps_failover_counts_t c = {.replacements = 2, .takeovers = 1, .rebuilds = 1,
                                    .rebuild_max_s = 1.5, .steps_rolled_back = 40};
    ps_sched_obs_tick(x.o, c);
    char *text = s_scrape(&x);
    static const char *const want[] = {
        "shardps_scheduler_nodes{state=\"live\"} 2\n", /* the servers */
        "shardps_scheduler_nodes{state=\"lost\"} 1\n",
        "shardps_scheduler_nodes{state=\"done\"} 1\n",
        "shardps_scheduler_running 1\n",
        "shardps_scheduler_refused_total 3\n",
        "shardps_scheduler_membership_changes_total 1\n",
        "shardps_scheduler_server_replacements_total 2\n",
        "shardps_scheduler_takeovers_total 1\n",
        "shardps_scheduler_replica_rebuilds_total 1\n",
        "shardps_scheduler_replica_rebuild_seconds_max 1.5\n",
        "shardps_scheduler_steps_rolled_back_total 40\n",
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        ck_assert_msg(strstr(text, want[k]) != NULL, "no %s in:\n%s", want[k], text);
    }
    free(text);
    x.f.facts.phase = PS_PHASE_FINISHED;
    ps_sched_obs_tick(x.o, c);
    text = s_scrape(&x);
    ck_assert_msg(strstr(text, "shardps_scheduler_running 0\n") != NULL, "%s", text);
    free(text);
    s_teardown(&x);
}
END_TEST

START_TEST(messages_are_counted_by_type_and_nodes_series_merged)
{
    s_fix_t x;
    s_setup(&x);
    ps_sched_obs_message(x.o, PS_MSG_HEARTBEAT);
    ps_sched_obs_message(x.o, PS_MSG_HEARTBEAT);
    ps_sched_obs_message(x.o, PS_MSG_PUSH); /* none a node sends us: "other" */
    ps_sched_obs_message(x.o, 100000);
    Shardps__MetricsReport rep = SHARDPS__METRICS_REPORT__INIT;
    rep.text = (char *)"# HELP shardps_worker_steps_total steps\n"
                       "# TYPE shardps_worker_steps_total counter\n"
                       "shardps_worker_steps_total 12\n";
    ps_sched_obs_heartbeat(x.o, 3, "W1", &rep);
    ps_sched_obs_heartbeat(x.o, 4, "W2", &rep); /* no such row: ignored */
    char *text = s_scrape(&x);
    ck_assert_msg(strstr(text, "shardps_scheduler_messages_total{type=\"heartbeat\"} 2\n"),
                  "%s", text);
    ck_assert_msg(strstr(text, "shardps_scheduler_messages_total{type=\"other\"} 2\n"), "%s",
                  text);
    ck_assert_msg(strstr(text, "shardps_worker_steps_total{node=\"W1\"} 12\n"), "%s", text);
    ck_assert_msg(!strstr(text, "node=\"W2\""), "%s", text);
    free(text);
    s_teardown(&x);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("sched_observe");
    TCase *tc = tcase_create("sched_observe");
    tcase_add_test(tc, a_status_request_before_the_view_says_registered_and_missing);
    tcase_add_test(tc, a_status_request_while_running_says_running_lost_and_done);
    tcase_add_test(tc, a_heartbeat_report_shows_in_the_status);
    tcase_add_test(tc, the_final_view_goes_to_every_watcher_with_request_id_0);
    tcase_add_test(tc, the_final_view_goes_to_the_latest_eight_watchers);
    tcase_add_test(tc, nothing_asked_means_no_final_view);
    tcase_add_test(tc, the_tick_sets_the_gauges_from_rows_facts_and_counts);
    tcase_add_test(tc, messages_are_counted_by_type_and_nodes_series_merged);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
