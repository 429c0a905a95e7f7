/*
 * tests/unit/test_summary.c - the end-of-job summary over a fake core
 * (tests/unit/sched_fake.h), no sockets: a finished 2x2 job's JSON holds
 * what its rows' DONEs and server reports, the view and the facts say, and
 * its "summary:" log line the same figures; a failed (or diverged) job's
 * JSON says how it ended, names who took part and has no results; a path
 * that cannot be written is PS_EIO; no path writes nothing.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/json.h"
#include "common/log.h"
#include "proto/codec.h"
#include "scheduler/summary.h"
#include "tests/unit/sched_fake.h"
#include "tests/unit/testutil.h" /* <check.h>: after scheduler/module.h, whose
                                      ops->fail Check's fail() macro would take */

/* A fake 2x2 job, what the core hands the summary, and a directory for the
 * file. */
typedef struct {
    ps_fake_t f;
    ps_identity_t id;
    ps_summary_from_t from;
    char dir[64];
    char path[128];
} s_fix_t;

/* m packed and unpacked: a heap copy as the core keeps (the fake's fini
 * frees it with protobuf_c_message_free_unpacked). */
static void *s_heap(const ProtobufCMessage *m)
{
    uint8_t buf[2048];
    const size_t len = protobuf_c_message_get_packed_size(m);
    ck_assert_uint_le(len, sizeof buf);
    protobuf_c_message_pack(m, buf);
    void *copy = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
    ck_assert_ptr_nonnull(copy);
    return copy;
}

static void s_setup(s_fix_t *x, int servers, int workers)
{
    memset(x, 0, sizeof *x);
    ps_fake_init(&x->f, servers, workers);
    snprintf(x->dir, sizeof x->dir, "/tmp/test_summary.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(x->dir));
    snprintf(x->path, sizeof x->path, "%s/summary.json", x->dir);
    x->f.cfg.summary = x->path;
    snprintf(x->id.job_id, sizeof x->id.job_id, "job-7");
    snprintf(x->id.job_hash, sizeof x->id.job_hash, "c0ffee");
    snprintf(x->id.build, sizeof x->id.build, "v1.2 protocol 9");
    x->from.id = &x->id;
}

static void s_teardown(s_fix_t *x)
{
    unlink(x->path);
    rmdir(x->dir);
    ps_fake_fini(&x->f);
}

/* Worker w's DONE: steps, samples, pushed and pulled bytes, training
 * seconds, its push bytes by type, and worker 0's accuracies. */
static void s_done(s_fix_t *x, int w, int64_t samples, uint64_t pushed, uint64_t pulled,
                   double train)
{
    Shardps__Done d = SHARDPS__DONE__INIT;
    double acc[2] = {0.5, 0.875};
    uint64_t sent[PS_MSG_PUSH + 1] = {0};
    sent[PS_MSG_PUSH] = pushed;
    d.steps = 100;
    d.samples = samples;
    d.bytes_pushed = pushed;
    d.bytes_pulled = pulled;
    d.train_seconds = train;
    d.wait_seconds = 0.25 * (w + 1);
    d.compute_seconds = train - 0.25 * (w + 1);
    d.final_loss = 0.125;
    d.bytes_sent = sent;
    d.n_bytes_sent = PS_MSG_PUSH + 1;
    if (w == 0) {
        d.test_accuracy = acc;
        d.n_test_accuracy = 2;
    }
    ps_node_t *n = ps_fake_row(&x->f, PS_ROLE_WORKER, w);
    n->done = 1;
    n->stats = s_heap(&d.base);
}

/* Server r's report: dropped pushes, refusals, a staleness histogram and
 * its pull-reply bytes. */
static void s_report(s_fix_t *x, int r, uint64_t dropped, const uint64_t *stale, double sum,
                     int64_t max, uint64_t pull_reply_bytes)
{
    Shardps__ServerReport rep = SHARDPS__SERVER_REPORT__INIT;
    uint64_t sent[PS_MSG_PULL_REPLY + 1] = {0};
    uint64_t hist[3] = {stale[0], stale[1], stale[2]};
    sent[PS_MSG_PULL_REPLY] = pull_reply_bytes;
    rep.pushes = 200;
    rep.pulls = 210;
    rep.dropped = dropped;
    rep.secure_refused = 1;
    rep.staleness = hist;
    rep.n_staleness = 3;
    rep.staleness_sum = sum;
    rep.staleness_max = max;
    rep.bytes_sent = sent;
    rep.n_bytes_sent = PS_MSG_PULL_REPLY + 1;
    ps_node_t *n = ps_fake_row(&x->f, PS_ROLE_SERVER, r);
    n->reported = 1;
    n->report = s_heap(&rep.base);
}

/* A 2x2 job that finished: both workers DONE, both servers reported, the
 * scheduler's own counts in from. */
static void s_finished(s_fix_t *x)
{
    s_setup(x, 2, 2);
    ps_fake_running(&x->f);
    for (int r = 0; r < 2; r++) {
        snprintf(ps_fake_row(&x->f, PS_ROLE_SERVER, r)->endpoint, 128, "tcp://10.0.0.%d:7000",
                 r + 1);
    }
    s_done(x, 0, 3200, 1000, 2000, 4.0);
    s_done(x, 1, 3200, 3000, 4000, 8.0);
    const uint64_t s0[3] = {10, 5, 1}, s1[3] = {20, 0, 0};
    s_report(x, 0, 2, s0, 7, 2, 700);
    s_report(x, 1, 3, s1, 0, 0, 900);
    x->f.facts.phase = PS_PHASE_FINISHED;
    x->f.facts.t_view = 10.0;
    x->f.facts.t_end = 22.5;
    x->f.facts.refused = 7;
    x->f.facts.messages = 99;
    x->f.facts.membership_changes = 1;
    x->f.facts.registrations_refused = 4;
    x->from.joins = 1;
    x->from.restarts = 2;
    x->from.sent[PS_MSG_HEARTBEAT] = 50;
    x->from.received[PS_MSG_HEARTBEAT] = 80;
    x->from.secure_refused = 4;
}

/* The summary file read back. */
static json_t *s_read(const s_fix_t *x)
{
    json_t *doc = NULL;
    char why[256];
    ck_assert_msg(ps_json_read_file(x->path, 1 << 20, &doc, why, sizeof why) == 0, "%s", why);
    return doc;
}

static json_int_t s_int(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_integer(v), "%s is no integer", key);
    return json_integer_value(v);
}

static double s_num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_number(v), "%s is no number", key);
    return json_number_value(v);
}

static const char *s_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_string(v), "%s is no string", key);
    return json_string_value(v);
}

START_TEST(a_finished_job_writes_what_the_rows_say)
{
    s_fix_t x;
    s_finished(&x);
    ck_assert_int_eq(ps_summary_write(&x.f.ops, &x.from), 0);
    json_t *doc = s_read(&x);
    ck_assert_str_eq(s_str(doc, "status"), "ok");
    ck_assert(json_is_null(json_object_get(doc, "failure")));
    ck_assert(json_is_null(json_object_get(doc, "lost")));
    ck_assert_str_eq(s_str(doc, "job_id"), "job-7");
    ck_assert_str_eq(s_str(doc, "job_hash"), "c0ffee");
    ck_assert_str_eq(s_str(doc, "build"), "v1.2 protocol 9");
    ck_assert_int_eq(s_int(doc, "servers"), 2);
    ck_assert_int_eq(s_int(doc, "workers"), 2);
    ck_assert_int_eq(s_int(doc, "batch"), 32);
    ck_assert_int_eq(s_int(doc, "num_params"), 1000);
    ck_assert_int_eq(s_int(doc, "steps"), 100);
    ck_assert_int_eq(s_int(doc, "samples"), 6400);
    ck_assert(ps_test_close(s_num(doc, "samples_per_sec"), 800, 1e-9, 0)); /* over 8 s */
    ck_assert(ps_test_close(s_num(doc, "train_seconds"), 8, 1e-9, 0));
    ck_assert(ps_test_close(s_num(doc, "wall_seconds"), 12.5, 1e-9, 0));
    ck_assert(ps_test_close(s_num(doc, "test_accuracy"), 0.875, 1e-9, 0));
    const json_t *per_epoch = json_object_get(doc, "test_accuracy_per_epoch");
    ck_assert_int_eq(json_array_size(per_epoch), 2);
    ck_assert(ps_test_close(json_number_value(json_array_get(per_epoch, 0)), 0.5, 1e-9, 0));
    ck_assert(ps_test_close(s_num(doc, "final_loss"), 0.125, 1e-9, 0));
    ck_assert_int_eq(s_int(doc, "bytes_pushed"), 4000);
    ck_assert_int_eq(s_int(doc, "bytes_pulled"), 6000);
    ck_assert_int_eq(s_int(doc, "pushes_dropped"), 5);
    ck_assert_int_eq(s_int(doc, "scheduler_refused"), 7);
    ck_assert_int_eq(s_int(doc, "scheduler_messages"), 99);
    ck_assert_int_eq(s_int(doc, "membership_changes"), 1);
    ck_assert_int_eq(s_int(doc, "registrations_refused"), 4);
    ck_assert_int_eq(s_int(doc, "workers_joined"), 1);
    ck_assert_int_eq(s_int(doc, "scheduler_restarts"), 2);
    ck_assert_int_eq(s_int(doc, "secure_refused"), 6); /* ours 4, a server's 1 each */
    const json_t *steps = json_object_get(doc, "worker_steps");
    ck_assert_int_eq(json_array_size(steps), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(steps, 1)), 100);
    const json_t *wait = json_object_get(doc, "worker_wait_seconds");
    ck_assert(ps_test_close(json_number_value(json_array_get(wait, 1)), 0.5, 1e-9, 0));
    const json_t *st = json_object_get(doc, "staleness");
    ck_assert_int_eq(s_int(st, "count"), 36);
    ck_assert_int_eq(s_int(st, "max"), 2);
    ck_assert(ps_test_close(s_num(st, "mean"), 7.0 / 36, 1e-4, 0));
    json_decref(doc);
    s_teardown(&x);
}
END_TEST

START_TEST(a_finished_job_lists_its_nodes_reports_and_bytes)
{
    s_fix_t x;
    s_finished(&x);
    ck_assert_int_eq(ps_summary_write(&x.f.ops, &x.from), 0);
    json_t *doc = s_read(&x);
    const json_t *nodes = json_object_get(doc, "nodes");
    ck_assert_int_eq(json_array_size(nodes), 4);
    ck_assert_str_eq(s_str(json_array_get(nodes, 0), "node"), "S0");
    ck_assert_str_eq(s_str(json_array_get(nodes, 1), "endpoint"), "tcp://10.0.0.2:7000");
    ck_assert_str_eq(s_str(json_array_get(nodes, 3), "node"), "W1");
    ck_assert_int_eq(s_int(json_array_get(nodes, 3), "pid"),
                     ps_fake_row(&x.f, PS_ROLE_WORKER, 1)->pid);
    const json_t *reports = json_object_get(doc, "server_reports");
    ck_assert_int_eq(json_array_size(reports), 2);
    const json_t *s1 = json_array_get(reports, 1);
    ck_assert_int_eq(s_int(s1, "rank"), 1);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(s1, "keys"), 0)), 500);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(s1, "keys"), 1)), 1000);
    ck_assert_int_eq(s_int(s1, "dropped"), 3);
    ck_assert_int_eq(s_int(s1, "pulls"), 210);
    ck_assert_int_eq(s_int(json_object_get(json_array_get(reports, 0), "staleness"), "count"),
                     16);
    const json_t *by = json_object_get(doc, "bytes_by_type");
    ck_assert_int_eq(s_int(json_object_get(json_object_get(by, "scheduler"), "sent"),
                           "heartbeat"), 50);
    ck_assert_int_eq(s_int(json_object_get(json_object_get(by, "scheduler"), "received"),
                           "heartbeat"), 80);
    const json_t *w1 = json_array_get(json_object_get(by, "workers"), 1);
    ck_assert_int_eq(s_int(json_object_get(w1, "sent"), "push"), 3000);
    const json_t *srv0 = json_array_get(json_object_get(by, "servers"), 0);
    ck_assert_int_eq(s_int(json_object_get(srv0, "sent"), "pull_reply"), 700);
    const json_t *total = json_object_get(by, "total");
    ck_assert_int_eq(s_int(total, "heartbeat"), 50);
    ck_assert_int_eq(s_int(total, "push"), 4000);
    ck_assert_int_eq(s_int(total, "pull_reply"), 1600);
    ck_assert_int_eq(json_object_size(total), 3); /* zero counts are left out */
    ck_assert_int_eq(json_array_size(json_object_get(doc, "preflight")), 0);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "server_replacements")), 0);
    ck_assert_int_eq(s_int(doc, "spares_left"), 0);
    json_decref(doc);
    s_teardown(&x);
}
END_TEST

/* Runs ps_summary_write with stderr into a file; the log's text into buf. */
static int s_write_logged(s_fix_t *x, char *buf, size_t cap)
{
    char log[160];
    snprintf(log, sizeof log, "%s/log", x->dir);
    fflush(stderr);
    const int saved = dup(2), fd = open(log, O_CREAT | O_TRUNC | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    const int rc = ps_summary_write(&x->f.ops, &x->from);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    const ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(log);
    return rc;
}

START_TEST(a_finished_job_logs_the_summary_line)
{
    s_fix_t x;
    char log[4096];
    s_finished(&x);
    ps_log_level = PS_LOG_INFO;
    ck_assert_int_eq(s_write_logged(&x, log, sizeof log), 0);
    ck_assert_msg(strstr(log, "summary: model=") != NULL, "%s", log);
    ck_assert_msg(strstr(log, " servers=2 workers=2 epochs=1 batch=32 test_accuracy=0.8750 "
                              "samples_per_sec=800 wall_seconds=12.50 bytes_pushed=4000 "
                              "bytes_pulled=6000 staleness_mean=0.19 staleness_max=2 "
                              "pushes_dropped=5\n") != NULL,
                  "%s", log);
    s_teardown(&x);
}
END_TEST

START_TEST(a_failed_job_says_failed_with_its_cause)
{
    s_fix_t x;
    char log[4096];
    s_setup(&x, 2, 2);
    ps_fake_register(&x.f, PS_ROLE_SERVER, 0);
    ps_fake_register(&x.f, PS_ROLE_SERVER, 1);
    ps_fake_register(&x.f, PS_ROLE_WORKER, 0); /* W1 never came */
    x.f.facts.phase = PS_PHASE_FAILED;
    snprintf(x.f.facts.failure, sizeof x.f.facts.failure, "server S1 lost (silent 5.0 s)");
    snprintf(x.f.facts.lost, sizeof x.f.facts.lost, "S1");
    ps_log_level = PS_LOG_INFO;
    ck_assert_int_eq(s_write_logged(&x, log, sizeof log), 0);
    ck_assert_msg(strstr(log, "summary:") == NULL, "%s", log); /* a finished job's only */
    json_t *doc = s_read(&x);
    ck_assert_str_eq(s_str(doc, "status"), "failed");
    ck_assert_str_eq(s_str(doc, "failure"), "server S1 lost (silent 5.0 s)");
    ck_assert_str_eq(s_str(doc, "lost"), "S1");
    ck_assert_int_eq(json_array_size(json_object_get(doc, "nodes")), 3);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "server_reports")), 0);
    ck_assert_ptr_null(json_object_get(doc, "samples")); /* no results */
    ck_assert_ptr_null(json_object_get(doc, "bytes_by_type"));
    ck_assert_int_eq(s_int(doc, "workers"), 2); /* the settings are there */
    ck_assert_str_eq(s_str(doc, "job_id"), "job-7");
    json_decref(doc);
    s_teardown(&x);
}
END_TEST

START_TEST(a_diverged_job_says_diverged)
{
    s_fix_t x;
    s_setup(&x, 1, 1);
    ps_fake_running(&x.f);
    x.f.facts.phase = PS_PHASE_FAILED;
    x.f.facts.diverged = 1;
    snprintf(x.f.facts.failure, sizeof x.f.facts.failure, "W0: loss is NaN");
    ck_assert_int_eq(ps_summary_write(&x.f.ops, &x.from), 0);
    json_t *doc = s_read(&x);
    ck_assert_str_eq(s_str(doc, "status"), "diverged");
    ck_assert_str_eq(s_str(doc, "failure"), "W0: loss is NaN");
    ck_assert(json_is_null(json_object_get(doc, "lost")));
    json_decref(doc);
    s_teardown(&x);
}
END_TEST

START_TEST(an_unwritable_path_returns_eio)
{
    s_fix_t x;
    s_finished(&x);
    char file[160], under[200];
    snprintf(file, sizeof file, "%s/plain", x.dir);
    FILE *fp = fopen(file, "w");
    ck_assert_ptr_nonnull(fp);
    fclose(fp);
    snprintf(under, sizeof under, "%s/summary.json", file); /* below a plain file */
    x.f.cfg.summary = under;
    ck_assert_int_eq(ps_summary_write(&x.f.ops, &x.from), PS_EIO);
    struct stat sb;
    ck_assert_int_ne(stat(under, &sb), 0);
    unlink(file);
    s_teardown(&x);
}
END_TEST

START_TEST(without_a_path_nothing_is_written)
{
    s_fix_t x;
    s_finished(&x);
    x.f.cfg.summary = NULL;
    ck_assert_int_eq(ps_summary_write(&x.f.ops, &x.from), 0);
    struct stat sb;
    ck_assert_int_ne(stat(x.path, &sb), 0);
    s_teardown(&x);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("summary");
    TCase *tc = tcase_create("summary");
    tcase_add_test(tc, a_finished_job_writes_what_the_rows_say);
    tcase_add_test(tc, a_finished_job_lists_its_nodes_reports_and_bytes);
    tcase_add_test(tc, a_finished_job_logs_the_summary_line);
    tcase_add_test(tc, a_failed_job_says_failed_with_its_cause);
    tcase_add_test(tc, a_diverged_job_says_diverged);
    tcase_add_test(tc, an_unwritable_path_returns_eio);
    tcase_add_test(tc, without_a_path_nothing_is_written);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
