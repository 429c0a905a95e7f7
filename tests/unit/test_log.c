/*
 * tests/unit/test_log.c - the logger's line format (common/log.h): the stamp
 * that opens every line, and the check by which shardps-launch tells a
 * child's logger lines (relayed verbatim) from its other output (prefixed);
 * and the rate-limited rejection lines (common/ratelog.h).
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/ratelog.h"
#include "tests/unit/testutil.h"

START_TEST(stamp_is_hh_mm_ss_mmm)
{
    char buf[16];
    ps_log_stamp(buf, sizeof buf);
    ck_assert_uint_eq(strlen(buf), 12);
    char line[32];
    snprintf(line, sizeof line, "%s W0 I x", buf);
    ck_assert(ps_log_is_line(line, strlen(line)));
}
END_TEST

START_TEST(is_line_needs_the_whole_stamp_and_a_space)
{
    ck_assert(ps_log_is_line("12:00:01.250 W0 I loss=0.5", 26));
    ck_assert(ps_log_is_line("12:00:01.250 ", 13));
    ck_assert(!ps_log_is_line("12:00:01.250", 12));      /* no space */
    ck_assert(!ps_log_is_line("12:00:01.250 W0", 12));   /* n cuts the stamp */
    ck_assert(!ps_log_is_line("12:00:01,250 W0 I", 17)); /* wrong separator */
    ck_assert(!ps_log_is_line("1a:00:01.250 W0 I", 17)); /* not a digit */
    ck_assert(!ps_log_is_line("Traceback (most recent call last):", 34));
    ck_assert(!ps_log_is_line("", 0));
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
    tcase_add_test(tc, stamp_is_hh_mm_ss_mmm);
    tcase_add_test(tc, is_line_needs_the_whole_stamp_and_a_space);
    tcase_add_test(tc, ratelog_summary_reads_whatever_the_kind);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
