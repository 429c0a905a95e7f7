/*
 * tests/unit/test_metrics.c - the metrics registry and its text
 * (common/metrics.h): counters, gauges and histograms render in the
 * Prometheus text format, one HELP/TYPE per family; histogram buckets are
 * cumulative and their p50/p99 estimates interpolate; a histogram of small
 * integers loads from counts; nodes' texts merge under one family each with
 * their node label; updates from several threads all count. The trace ring
 * (common/trace.h) keeps the newest spans of its steps within its budget,
 * and merging moves timestamps by each file's clock offset.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/http.h"
#include "common/metrics.h"
#include "common/trace.h"
#include "tests/unit/testutil.h"

static char *s_render(ps_metrics_t *m)
{
    ps_text_t t = {0};
    ps_metrics_render(m, &t);
    ck_assert(!t.oom);
    return t.p;
}

static int s_count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++) {
        n++;
    }
    return n;
}

START_TEST(counters_and_gauges_render_once_per_family)
{
    ps_metrics_t *m;
    ck_assert_int_eq(ps_metrics_new(&m), 0);
    ps_metric_t *a = ps_metrics_counter(m, "x_total", "peer=\"W0\"", "things");
    ps_metric_t *g = ps_metrics_gauge(m, "y", NULL, "a level");
    ps_metric_t *b = ps_metrics_counter(m, "x_total", "peer=\"W1\"", "things");
    ps_metric_add(a, 3);
    ps_metric_add(a, 0.5);
    ps_metric_add(b, 7);
    ps_metric_set(g, -2);
    ps_metric_add(NULL, 1); /* NULL-safe */
    ck_assert(ps_metric_value(a) == 3.5);
    char *t = s_render(m);
    ck_assert_int_eq(s_count(t, "# TYPE x_total counter\n"), 1);
    ck_assert_int_eq(s_count(t, "# HELP x_total things\n"), 1);
    ck_assert_ptr_nonnull(strstr(t, "x_total{peer=\"W0\"} 3.5\nx_total{peer=\"W1\"} 7\n"));
    ck_assert_ptr_nonnull(strstr(t, "# TYPE y gauge\ny -2\n"));
    free(t);
    ps_metrics_destroy(&m);
    ck_assert_ptr_null(m);
}
END_TEST

START_TEST(histogram_buckets_are_cumulative_with_quantiles)
{
    ps_metrics_t *m;
    ck_assert_int_eq(ps_metrics_new(&m), 0);
    const double bounds[] = {1, 2, 4};
    ps_metric_t *h = ps_metrics_histogram(m, "lat_seconds", NULL, "latency", bounds, 3);
    for (int i = 0; i < 50; i++) {
        ps_metric_observe(h, 0.5); /* bucket le=1 */
    }
    for (int i = 0; i < 49; i++) {
        ps_metric_observe(h, 3); /* le=4 */
    }
    ps_metric_observe(h, 100); /* +Inf */
    char *t = s_render(m);
    ck_assert_ptr_nonnull(strstr(t, "lat_seconds_bucket{le=\"1\"} 50\n"
                                    "lat_seconds_bucket{le=\"2\"} 50\n"
                                    "lat_seconds_bucket{le=\"4\"} 99\n"
                                    "lat_seconds_bucket{le=\"+Inf\"} 100\n"
                                    "lat_seconds_sum 272\nlat_seconds_count 100\n"));
    /* p50: rank 50 is the top of [0, 1]; p99: rank 99 the top of (2, 4] */
    ck_assert_ptr_nonnull(strstr(t, "# TYPE lat_seconds_p50 gauge\nlat_seconds_p50 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "# TYPE lat_seconds_p99 gauge\nlat_seconds_p99 4\n"));
    free(t);
    const uint64_t counts[] = {5, 0, 3, 1, 0, 2}; /* values 0..5 */
    ps_metric_load_values(h, counts, 6, 23);
    t = s_render(m);
    ck_assert_ptr_nonnull(strstr(t, "lat_seconds_bucket{le=\"1\"} 5\n"
                                    "lat_seconds_bucket{le=\"2\"} 8\n"
                                    "lat_seconds_bucket{le=\"4\"} 9\n"
                                    "lat_seconds_bucket{le=\"+Inf\"} 11\n"
                                    "lat_seconds_sum 23\nlat_seconds_count 11\n"));
    free(t);
    ps_metrics_destroy(&m);
}
END_TEST

START_TEST(merge_puts_every_node_under_one_family)
{
    const char *w0 = "# HELP steps_total steps\n# TYPE steps_total counter\nsteps_total 5\n"
                     "# HELP q queue\n# TYPE q gauge\nq{kind=\"a\"} 1\n";
    const char *w1 = "# HELP steps_total steps\n# TYPE steps_total counter\nsteps_total 6\n";
    const char *s0 = "# HELP q queue\n# TYPE q gauge\nq{kind=\"a\"} 2\n";
    const char *texts[] = {w0, w1, s0};
    const char *labels[] = {"node=\"W0\"", "node=\"W1\"", "node=\"S0\""};
    ps_text_t t = {0};
    ps_metrics_merge(&t, texts, labels, 3);
    ck_assert_str_eq(t.p, "# HELP steps_total steps\n# TYPE steps_total counter\n"
                          "steps_total{node=\"W0\"} 5\nsteps_total{node=\"W1\"} 6\n"
                          "# HELP q queue\n# TYPE q gauge\n"
                          "q{node=\"W0\",kind=\"a\"} 1\nq{node=\"S0\",kind=\"a\"} 2\n");
    free(t.p);
}
END_TEST

static void *s_adder(void *arg)
{
    for (int i = 0; i < 100000; i++) {
        ps_metric_add(arg, 1);
    }
    return NULL;
}

START_TEST(adds_from_threads_all_count)
{
    ps_metrics_t *m;
    ck_assert_int_eq(ps_metrics_new(&m), 0);
    ps_metric_t *c = ps_metrics_counter(m, "n_total", NULL, "n");
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        pthread_create(&th[i], NULL, s_adder, c);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    ck_assert(ps_metric_value(c) == 400000);
    ps_metrics_destroy(&m);
}
END_TEST

static char *s_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

START_TEST(trace_keeps_the_newest_spans_of_its_steps_within_budget)
{
    char dir[] = "/tmp/ps_trace_XXXXXX", path[64], merged[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json", dir);
    snprintf(merged, sizeof merged, "%s/m.json", dir);
    char err[256];
    ck_assert_int_eq(ps_trace_open(path, "9:x", 16, err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_trace_open(path, "100:200000", 16, err, sizeof err), 0);
    ps_trace_set_process("W3", 2.5);
    for (int64_t s = 0; s < 100000; s++) {
        ps_trace_span(PS_TRACE_STEP, s, 1.0, 1.5, 0);
    }
    ck_assert_int_eq(ps_trace_close(), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_le(st.st_size, 16 * 1024);
    char *text = s_slurp(path);
    ck_assert_ptr_nonnull(strstr(text, "\"process\":\"W3\""));
    ck_assert_ptr_null(strstr(text, "\"step\":99}")); /* outside 100:200000 */
    ck_assert_ptr_nonnull(strstr(text, "\"step\":99999}")); /* the newest are kept */
    ck_assert_ptr_nonnull(strstr(text, "\"ts\":1000000.0,\"dur\":500000.0,"));
    const char *in[] = {path};
    ck_assert_int_eq(ps_trace_merge(in, 1, merged, err, sizeof err), 0);
    text = s_slurp(merged);
    ck_assert_ptr_nonnull(strstr(text, "\"ts\":3500000.0,\"dur\":500000.0,")); /* +2.5 s */
    /* an offset that takes a timestamp below zero, and its fraction */
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"otherData\":{\"process\":\"W1\",\"clock_offset_us\":-2500000.500},"
          "\"traceEvents\":[\n{\"name\":\"step\",\"ph\":\"X\",\"ts\":1000000.250,"
          "\"dur\":1.000}\n]}\n", f);
    fclose(f);
    ck_assert_int_eq(ps_trace_merge(in, 1, merged, err, sizeof err), 0);
    text = s_slurp(merged);
    ck_assert_ptr_nonnull(strstr(text, "\"ts\":-1500000.25,\"dur\":1.0}"));
    /* a broken event: refused with the file and line at fault */
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"otherData\":{\"clock_offset_us\":0},\"traceEvents\":[\n{\"ts\":1}\n,{\"ts\":\n]}\n",
          f);
    fclose(f);
    ck_assert_int_eq(ps_trace_merge(in, 1, merged, err, sizeof err), PS_EINVAL);
    ck_assert_msg(strstr(err, ":3: not JSON at byte") && !strchr(err, '\n'), "%s", err);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(trace_span_records_from_begin_to_end_only_when_tracing)
{
    ps_trace_span_t off = ps_trace_span_begin(PS_TRACE_REPLY, 5, 3);
    ck_assert_int_eq(off.on, 0); /* tracing off: no clock read, nothing recorded */
    ps_trace_span_end(&off);
    char dir[] = "/tmp/ps_span_XXXXXX", path[64], err[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json", dir);
    ck_assert_int_eq(ps_trace_open(path, NULL, 16, err, sizeof err), 0);
    ps_trace_span_t sp = ps_trace_span_begin(PS_TRACE_REPLY, 5, 3);
    ck_assert_int_eq(sp.on, 1);
    ck_assert(sp.t0 > 0);
    ps_trace_span_end(&sp);
    ck_assert_int_eq(ps_trace_close(), 0);
    const char *text = s_slurp(path);
    ck_assert_ptr_nonnull(strstr(text, "\"reply\""));
    ck_assert_ptr_nonnull(strstr(text, "\"worker\""));
    ck_assert_ptr_null(strstr(text, "\"step\":0")); /* only the one span, of step 5 */
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static void s_render_nothing(void *arg, ps_text_t *out)
{
    (void)arg;
    (void)out;
}

START_TEST(metrics_bind_without_a_port_takes_the_default_one)
{
    char err[256], bound[64] = "";
    ck_assert_int_eq(ps_http_check_bind("127.0.0.1", err, sizeof err), 0);
    ck_assert_int_eq(ps_http_check_bind("localhost:0", err, sizeof err), 0);
    ck_assert_int_eq(ps_http_check_bind("127.0.0.1:", err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_http_check_bind(":9470", err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_http_check_bind("127.0.0.1:65536", err, sizeof err), PS_EINVAL);
    ps_http_t *h = NULL;
    int rc = ps_http_new("127.0.0.1", s_render_nothing, NULL, &h, bound, sizeof bound, err,
                         sizeof err);
    if (rc == 0) { /* PS_EIO: someone else has the port here; the parse was checked above */
        ck_assert_str_eq(bound, "127.0.0.1:" PS_HTTP_DEFAULT_PORT_STR);
    } else {
        ck_assert_int_eq(rc, PS_EIO);
    }
    ps_http_destroy(&h);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, counters_and_gauges_render_once_per_family);
    tcase_add_test(tc, histogram_buckets_are_cumulative_with_quantiles);
    tcase_add_test(tc, merge_puts_every_node_under_one_family);
    tcase_add_test(tc, adds_from_threads_all_count);
    tcase_add_test(tc, trace_keeps_the_newest_spans_of_its_steps_within_budget);
    tcase_add_test(tc, trace_span_records_from_begin_to_end_only_when_tracing);
    tcase_add_test(tc, metrics_bind_without_a_port_takes_the_default_one);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
