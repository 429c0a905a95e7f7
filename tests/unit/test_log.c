/*
 * tests/unit/test_log.c - the logger's line format (common/log.h): the ISO
 * 8601 stamp that opens every line, the JSON lines of --log-format json, and
 * the checks by which shardps-launch tells a child's logger lines (relayed
 * verbatim, or as JSON) from its other output (prefixed);
 * and the rate-limited rejection lines (common/ratelog.h).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "tests/unit/testutil.h"

START_TEST(stamp_is_iso_8601_with_the_utc_offset)
{
    char buf[PS_LOG_STAMP_MAX];
    ps_log_stamp(buf, sizeof buf);
    ck_assert_uint_eq(strlen(buf), 29);
    ck_assert(buf[4] == '-' && buf[10] == 'T' && buf[19] == '.');
    ck_assert(buf[23] == '+' || buf[23] == '-');
    char line[64];
    snprintf(line, sizeof line, "%s W0 I x", buf);
    ck_assert(ps_log_is_line(line, strlen(line)));
    /* the stamp names the time now, whatever the local zone */
    ck_assert(fabs(ps_log_line_time(line, strlen(line)) - (double)time(NULL)) < 2.0);
}
END_TEST

START_TEST(is_line_needs_the_whole_stamp_and_a_space)
{
    static const char ok[] = "2026-03-02T12:00:01.250+01:00 W0 I loss=0.5";
    ck_assert(ps_log_is_line(ok, strlen(ok)));
    ck_assert(ps_log_is_line("2026-03-02T12:00:01.250-05:30 ", 30));
    ck_assert(!ps_log_is_line("2026-03-02T12:00:01.250+01:00", 29)); /* no space */
    ck_assert(!ps_log_is_line(ok, 20));                              /* n cuts the stamp */
    ck_assert(!ps_log_is_line("2026-03-02T12:00:01,250+01:00 W0", 32)); /* separator */
    ck_assert(!ps_log_is_line("2026-03-02T12:00:01.250Z W0 I x", 31));  /* no offset */
    ck_assert(!ps_log_is_line("12:00:01.250 W0 I loss=0.5", 26));       /* no date */
    ck_assert(!ps_log_is_line("Traceback (most recent call last):", 34));
    ck_assert(!ps_log_is_line("", 0));
    static const char js[] = "{\"time\":\"2026-03-02T12:00:01.250+01:00\",\"node\":\"C\"}";
    ck_assert(ps_log_is_line(js, strlen(js)));
    ck_assert(!ps_log_is_line("{\"time\":\"soon\"}", 15));
}
END_TEST

START_TEST(line_time_reads_the_offset)
{
    /* 12:00 at +01:00 and 11:00 at UTC are the same instant */
    static const char a[] = "2026-03-02T12:00:01.250+01:00 W0 I x",
                      b[] = "{\"time\":\"2026-03-02T11:00:01.250+00:00\",\"node\":\"W0\"}";
    ck_assert_double_eq_tol(ps_log_line_time(a, strlen(a)), ps_log_line_time(b, strlen(b)),
                            1e-9);
    ck_assert_double_eq_tol(ps_log_line_time(b, strlen(b)), 1772449201.25, 1e-6);
    ck_assert(ps_log_line_time("12:00:01.250 W0 I x", 19) < 0);
}
END_TEST

START_TEST(split_gives_a_text_lines_parts)
{
    static const char l[] = "2026-03-02T12:00:01.250+01:00 S12 W lost W1";
    char stamp[PS_LOG_STAMP_MAX], node[16];
    int level;
    size_t at;
    ck_assert_int_eq(ps_log_split(l, strlen(l), stamp, node, sizeof node, &level, &at), 0);
    ck_assert_str_eq(stamp, "2026-03-02T12:00:01.250+01:00");
    ck_assert_str_eq(node, "S12");
    ck_assert_int_eq(level, PS_LOG_WARN);
    ck_assert_str_eq(l + at, "lost W1");
    static const char relayed[] = "2026-03-02T12:00:01.250+01:00 W1 ! boom";
    ck_assert_int_eq(
        ps_log_split(relayed, strlen(relayed), stamp, node, sizeof node, &level, &at), 0);
    ck_assert_int_eq(level, PS_LOG_STDERR);
    ck_assert_int_eq(ps_log_split(l, strlen(l), stamp, node, 3, &level, &at), -1);
    static const char bad[] = "2026-03-02T12:00:01.250+01:00 W1 Q x",
                      quote[] = "2026-03-02T12:00:01.250+01:00 W\"1 I x";
    ck_assert_int_eq(ps_log_split(bad, strlen(bad), stamp, node, sizeof node, &level, &at),
                     -1);
    ck_assert_int_eq(
        ps_log_split(quote, strlen(quote), stamp, node, sizeof node, &level, &at), -1);
}
END_TEST

START_TEST(json_lines_are_one_object_each)
{
    char buf[512];
    ck_assert_int_eq(ps_log_set_format_flag("t", "json"), 0);
    size_t n = ps_log_line(buf, sizeof buf, "2026-03-02T12:00:01.250+01:00", "W3",
                           PS_LOG_INFO, "say \"hi\"\n");
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf, "{\"time\":\"2026-03-02T12:00:01.250+01:00\",\"node\":\"W3\","
                          "\"role\":\"worker\",\"rank\":3,\"level\":\"info\","
                          "\"message\":\"say \\\"hi\\\"\\n\"}");
    ps_log_line(buf, sizeof buf, "2026-03-02T12:00:01.250+01:00", "C", PS_LOG_STDERR, "x");
    ck_assert_str_eq(buf, "{\"time\":\"2026-03-02T12:00:01.250+01:00\",\"node\":\"C\","
                          "\"role\":\"scheduler\",\"rank\":null,\"level\":\"stderr\","
                          "\"message\":\"x\"}");
    /* cut to fit, still one object */
    char msg[200];
    memset(msg, 'x', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    n = ps_log_line(buf, 140, NULL, "S0", PS_LOG_ERR, msg);
    ck_assert(n < 140 && buf[n - 1] == '}' && strstr(buf, "...\"}"));
    ck_assert_int_eq(ps_log_set_format_flag("t", "text"), 0);
    ps_log_line(buf, sizeof buf, "2026-03-02T12:00:01.250+01:00", "W1", PS_LOG_STDOUT, "x");
    ck_assert_str_eq(buf, "2026-03-02T12:00:01.250+01:00 W1 > x");
    ck_assert_int_eq(ps_log_set_format_flag("t", "yaml"), PS_EINVAL);
}
END_TEST

START_TEST(ratelog_summary_reads_whatever_the_kind)
{
    ps_ratelog_t *r = NULL;
    ck_assert_int_eq(ps_ratelog_new(&r, 10), 0);
    fflush(stderr);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(dup2(fileno(tmp), STDERR_FILENO), 0);
    for (int i = 0; i < 3043; i++) {
        ps_ratelog_reject(r, "a registration", "tcp://10.0.0.9", "wrong job secret");
    }
    ps_ratelog_destroy(&r); /* logs what is still counted */
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char text[1024];
    rewind(tmp);
    size_t n = fread(text, 1, sizeof text - 1, tmp);
    text[n] = '\0';
    fclose(tmp);
    ck_assert_ptr_nonnull(strstr(text, " rejected a registration from tcp://10.0.0.9: "
                                       "wrong job secret\n"));
    const char *sum = strstr(text, " 3,042 more rejected in ");
    ck_assert_ptr_nonnull(sum);
    ck_assert_ptr_nonnull(
        strstr(sum, " s (a registration from tcp://10.0.0.9): wrong job secret\n"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, stamp_is_iso_8601_with_the_utc_offset);
    tcase_add_test(tc, is_line_needs_the_whole_stamp_and_a_space);
    tcase_add_test(tc, line_time_reads_the_offset);
    tcase_add_test(tc, split_gives_a_text_lines_parts);
    tcase_add_test(tc, json_lines_are_one_object_each);
    tcase_add_test(tc, ratelog_summary_reads_whatever_the_kind);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
