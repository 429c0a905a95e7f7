/*
 * tests/unit/test_jscan.c - JSON tokens read in place (common/jscan.h):
 * every escape and UTF-8 form RFC 8259 allows unescaped into the text
 * itself, each one it does not refused with the byte named; integers in
 * range, numbers that are not such integers told from text that is no
 * number; containers opened, walked and closed; nothing after the end.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/jscan.h"
#include "tests/unit/testutil.h"

/* A scanner over a copy of text (in buf, which it rewrites). */
static ps_jscan_t s_scan(char *buf, size_t cap, const char *text)
{
    snprintf(buf, cap, "%s", text);
    ps_jscan_t s;
    ps_jscan_init(&s, buf, strlen(buf), 8);
    return s;
}

START_TEST(strings_are_unescaped_in_place)
{
    static const struct {
        const char *json, *want;
    } ok[] = {
        {"\"plain\"", "plain"},
        {" \"\"", ""},
        {"\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t\"", "q\" b\\ s/ \b\f\n\r\t"},
        {"\"\\u00e9\\u20AC\"", "\xc3\xa9\xe2\x82\xac"},
        {"\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80"},
        {"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"", /* raw UTF-8, up to U+10FFFF */
         "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"},
    };
    char buf[128];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ps_jscan_t s = s_scan(buf, sizeof buf, ok[i].json);
        const char *str;
        ck_assert_msg(ps_jscan_string(&s, &str) == 0, "%s: %s", ok[i].json, s.why);
        ck_assert_str_eq(str, ok[i].want);
        ck_assert(str >= buf && str < buf + sizeof buf); /* in the text itself */
        ck_assert_int_eq(ps_jscan_end(&s), 0);
    }
    /* two strings in a row: the second's bytes do not overwrite the first */
    ps_jscan_t s = s_scan(buf, sizeof buf, "\"ab\\n\":\"\\u0063d\"");
    const char *a, *b;
    ck_assert_int_eq(ps_jscan_string(&s, &a), 0);
    ck_assert_int_eq(ps_jscan_take(&s, ':'), 0);
    ck_assert_int_eq(ps_jscan_string(&s, &b), 0);
    ck_assert_str_eq(a, "ab\n");
    ck_assert_str_eq(b, "cd");
}
END_TEST

START_TEST(bad_strings_are_refused_naming_the_byte)
{
    static const struct {
        const char *json, *why;
    } bad[] = {
        {"x", "at byte 8: a string expected"},
        {"\"abc", "ends inside a string"},
        {"\"a\\x\"", "at byte 11: invalid escape"},
        {"\"a\\", "invalid escape"},
        {"\"\\u12\"", "invalid escape"},
        {"\"\\u0000\"", "NUL"},
        {"\"\\ud800\"", "lone high surrogate"},
        {"\"\\ud800\\u0041\"", "lone high surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"a\tb\"", "control character 0x9"},
        {"\"\x80\"", "invalid UTF-8"},
        {"\"\xc0\xaf\"", "invalid UTF-8"},         /* overlong '/' */
        {"\"\xe0\x80\xaf\"", "invalid UTF-8"},     /* overlong */
        {"\"\xed\xa0\x80\"", "invalid UTF-8"},     /* a surrogate */
        {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"}, /* above U+10FFFF */
        {"\"\xe2\x82\"", "invalid UTF-8"},         /* cut short */
    };
    char buf[64];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_jscan_t s = s_scan(buf, sizeof buf, bad[i].json);
        const char *str;
        ck_assert_int_eq(ps_jscan_string(&s, &str), PS_EPROTO);
        ck_assert_msg(strstr(s.why, bad[i].why), "%zu: '%s' lacks '%s'", i, s.why, bad[i].why);
    }
}
END_TEST

START_TEST(integers_in_range_and_other_numbers)
{
    char buf[64];
    int64_t v = -1;
    ps_jscan_t s = s_scan(buf, sizeof buf, " 0");
    ck_assert_int_eq(ps_jscan_uint(&s, 10, &v), 0);
    ck_assert_int_eq(v, 0);
    s = s_scan(buf, sizeof buf, "4611686018427387903");
    ck_assert_int_eq(ps_jscan_uint(&s, INT64_MAX / 2, &v), 0);
    ck_assert_int_eq(v, INT64_MAX / 2);
    static const char *range[] = {"11", "-1", "-0", "1.5", "1e2", "2E-1", "99999999999999999999"};
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
        s = s_scan(buf, sizeof buf, range[i]);
        ck_assert_msg(ps_jscan_uint(&s, 10, &v) == PS_ERANGE, "%s", range[i]);
        ck_assert_int_eq(ps_jscan_end(&s), 0); /* the whole number was taken */
    }
    static const char *bad[] = {"", "-", "x", "01", "1.", "1e", "1e+", ".5", "+1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = s_scan(buf, sizeof buf, bad[i]);
        ck_assert_msg(ps_jscan_uint(&s, 10, &v) == PS_EPROTO, "'%s'", bad[i]);
        ck_assert_ptr_nonnull(strstr(s.why, "at byte"));
    }
}
END_TEST

START_TEST(containers_open_walk_and_close)
{
    char buf[64];
    ps_jscan_t s = s_scan(buf, sizeof buf, " { } ");
    ck_assert_int_eq(ps_jscan_open(&s, '{'), 0);
    ck_assert_int_eq(ps_jscan_end(&s), 0);
    s = s_scan(buf, sizeof buf, "[1 ,\n2\t]x");
    int64_t v, sum = 0;
    for (int more = ps_jscan_open(&s, '['); more > 0; more = ps_jscan_next(&s, ']')) {
        ck_assert_int_eq(ps_jscan_uint(&s, 9, &v), 0);
        sum += v;
    }
    ck_assert_int_eq(sum, 3);
    ck_assert_int_eq(ps_jscan_end(&s), PS_EPROTO);
    ck_assert_str_eq(s.why, "at byte 16: end of file expected");
    s = s_scan(buf, sizeof buf, "[1 2]");
    ck_assert_int_eq(ps_jscan_open(&s, '['), 1);
    ck_assert_int_eq(ps_jscan_uint(&s, 9, &v), 0);
    ck_assert_int_eq(ps_jscan_next(&s, ']'), PS_EPROTO);
    ck_assert_str_eq(s.why, "at byte 11: ',' or ']' expected");
    s = s_scan(buf, sizeof buf, "[");
    ck_assert_int_eq(ps_jscan_open(&s, '{'), PS_EPROTO);
    ck_assert_int_eq(ps_jscan_open(&s, '['), 1); /* the end: a member must follow */
    ck_assert_int_eq(ps_jscan_peek(&s), -1);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("jscan");
    TCase *tc = tcase_create("jscan");
    tcase_add_test(tc, strings_are_unescaped_in_place);
    tcase_add_test(tc, bad_strings_are_refused_naming_the_byte);
    tcase_add_test(tc, integers_in_range_and_other_numbers);
    tcase_add_test(tc, containers_open_walk_and_close);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
