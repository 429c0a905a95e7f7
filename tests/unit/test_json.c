/*
 * tests/unit/test_json.c - the JSON module (common/json.h): strict parsing
 * with one-line reasons, file reads within a limit, the three styles, reals
 * as printf would write them, quoting outside text, the typed getters, and
 * texts of many small values refused before they cost many times their
 * size (peak memory measured in a child).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/json.h"
#include "tests/unit/testutil.h"

/* Asserts that text is refused with PS_EPROTO and a one-line reason holding want. */
static void s_refused(const char *text, size_t len, const char *want)
{
    json_t *j = (json_t *)1;
    char why[256] = "";
    ck_assert_int_eq(ps_json_parse(text, len, 8, &j, why, sizeof why), PS_EPROTO);
    ck_assert_ptr_null(j);
    ck_assert_msg(strstr(why, want), "reason '%s' lacks '%s'", why, want);
    ck_assert_ptr_null(strchr(why, '\n'));
}

static char *s_dump(const json_t *j, ps_json_style_t style)
{
    ps_text_t t = {0};
    ck_assert_int_eq(ps_json_dump(j, style, &t), 0);
    return t.p;
}

START_TEST(parse_is_strict_and_reasons_are_one_line)
{
    s_refused("{\"a\":1,\"a\":2}", 13, "duplicate");
    s_refused("{\"a\":{\"b\":1,\"b\":1}}", 19, "duplicate");
    s_refused("{} x", 4, "at byte 12");
    s_refused("\"a\"", 3, "expected");
    s_refused("[\"a\\u0000\"]", 11, "NUL");
    s_refused("[\"\xff\"]", 5, "decode");
    s_refused("[\"a\nb\"]", 7, "newline");
    s_refused("[\"a\tb\"]", 7, "control");
    s_refused("{\"a\":1} \x01\n\x7f", 11, "end of file expected");
    char deep[5000];
    memset(deep, '[', sizeof deep);
    s_refused(deep, sizeof deep, "depth");
    json_t *j = NULL;
    ck_assert_int_eq(
        ps_json_parse(" {\"a\": [1, 2.5, \"\\u00e9\"]}\n ", 28, 0, &j, NULL, 0), 0);
    ck_assert_str_eq(json_string_value(ps_json_path(j, "a.2")), "\xc3\xa9");
    json_decref(j);
}
END_TEST

START_TEST(styles_and_reals)
{
    json_t *j = json_pack("{s:s, s:[i, o, o], s:o, s:o}", "a", "x\"\n/", "b", 1,
                          ps_json_real(0.1 + 0.2, 6), ps_json_real(2.0 / 3, 3), "c",
                          ps_json_real(NAN, 3), "d", ps_json_real(123456789.1234567, 3));
    ck_assert_ptr_nonnull(j);
    char *s = s_dump(j, PS_JSON_COMPACT);
    ck_assert_str_eq(
        s, "{\"a\":\"x\\\"\\n/\",\"b\":[1,0.3,0.667],\"c\":null,\"d\":123456789.123}");
    free(s);
    s = s_dump(j, PS_JSON_LINE);
    ck_assert_str_eq(s,
                     "{\"a\": \"x\\\"\\n/\", \"b\": [1, 0.3, 0.667], \"c\": null, \"d\": "
                     "123456789.123}");
    free(s);
    s = s_dump(j, PS_JSON_INDENT);
    ck_assert_ptr_nonnull(strstr(s, "{\n  \"a\": "));
    free(s);
    json_decref(j);
}
END_TEST

START_TEST(files_round_trip_within_a_limit)
{
    char dir[] = "/tmp/ps_json_XXXXXX", path[64], why[256] = "";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/d.json", dir);
    json_t *j = json_pack("{s:I}", "n", (json_int_t)1 << 40), *back = NULL;
    ck_assert_int_eq(ps_json_write_file(path, j, PS_JSON_LINE, why, sizeof why), 0);
    ck_assert_int_eq(ps_json_read_file(path, 1024, &back, why, sizeof why), 0);
    ck_assert(json_equal(j, back));
    json_decref(back);
    ck_assert_int_eq(ps_json_read_file(path, 4, &back, why, sizeof why), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "more than the 4"));
    FILE *f = fopen(path, "w");
    fputs("{\"n\": }", f);
    fclose(f);
    ck_assert_int_eq(ps_json_read_file(path, 1024, &back, why, sizeof why), PS_EPROTO);
    ck_assert_msg(strstr(why, path) == why && strstr(why, "byte 7"), "%s", why);
    unlink(path);
    ck_assert_int_eq(ps_json_read_file(path, 1024, &back, why, sizeof why), PS_ENOENT);
    ck_assert_int_eq(ps_json_write_file(dir, j, PS_JSON_LINE, why, sizeof why), PS_EIO);
    json_decref(j);
    rmdir(dir);
}
END_TEST

START_TEST(quote_escapes_and_shortens)
{
    char buf[16];
    ck_assert_str_eq(ps_json_quote("a\nb\"", buf, sizeof buf), "\"a\\nb\\\"\"");
    ck_assert_str_eq(ps_json_quote("bad \xff", buf, sizeof buf), "\"bad ?\"");
    ck_assert_str_eq(ps_json_quote("del\x7f", buf, sizeof buf), "\"del?\"");
    ck_assert_str_eq(ps_json_quote("0123456789abcdefghij", buf, sizeof buf),
                     "\"0123456789...\"");
    ck_assert_uint_eq(strlen(buf), sizeof buf - 1);
    ck_assert_str_eq(
        ps_json_quote("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
                      buf, sizeof buf),
        "\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9...\"");
}
END_TEST

START_TEST(getters_name_the_path_at_fault)
{
    json_t *j = json_pack("{s:i, s:{s:f, s:s}, s:[i, i]}", "n", 5, "st", "mean", 1.5, "s",
                          "x", "a", 7, 8);
    int64_t i;
    double d;
    const char *s;
    char why[128];
    ck_assert_int_eq(ps_json_get_int(j, "n", 0, 5, &i, why, sizeof why), 0);
    ck_assert_int_eq(i, 5);
    ck_assert_int_eq(ps_json_get_int(j, "n", 0, 4, &i, why, sizeof why), PS_EPROTO);
    ck_assert_str_eq(why, "n is not an integer in [0, 4]");
    ck_assert_int_eq(ps_json_get_int(j, "a.1", 0, 9, &i, why, sizeof why), 0);
    ck_assert_int_eq(i, 8);
    ck_assert_int_eq(ps_json_get_int(j, "a.2", 0, 9, &i, why, sizeof why), PS_EPROTO);
    ck_assert_str_eq(why, "a.2 is missing");
    ck_assert_int_eq(ps_json_get_num(j, "st.mean", &d, why, sizeof why), 0);
    ck_assert(d == 1.5);
    ck_assert_int_eq(ps_json_get_num(j, "n", &d, why, sizeof why), 0);
    ck_assert(d == 5);
    ck_assert_int_eq(ps_json_get_num(j, "st.s", &d, why, sizeof why), PS_EPROTO);
    ck_assert_str_eq(why, "st.s is not a number");
    ck_assert_int_eq(ps_json_get_str(j, "st.s", &s, why, sizeof why), 0);
    ck_assert_str_eq(s, "x");
    ck_assert_int_eq(ps_json_get_str(j, "st.mean.x", &s, why, sizeof why), PS_EPROTO);
    ck_assert_ptr_null(ps_json_path(j, "a.x"));
    ck_assert_ptr_null(ps_json_path(j, "a."));
    json_decref(j);
}
END_TEST

/* ---- memory ---- */

enum { S_HOSTILE_BYTES = 2 << 20 };

static char s_hostile_path[64];
static unsigned s_factor; /* the tree factor the child reads with */

static int s_read_hostile(const void *arg)
{
    (void)arg;
    json_t *j = NULL;
    const int rc =
        ps_json_read_file_within(s_hostile_path, 4 * S_HOSTILE_BYTES, s_factor, &j, NULL, 0);
    json_decref(j);
    return rc;
}

/* Texts of small values (jansson's tree of each would take 20 to 80 times
 * its size), read with the default bound and with a tight one: each read
 * or refused, the reader's peak never past the text, the tree bound and
 * the base. */
START_TEST(hostile_documents_cost_a_bounded_multiple_of_their_size)
{
#if defined(__SANITIZE_ADDRESS__)
    return; /* AddressSanitizer's shadow and quarantine are not the reader's */
#endif
    static const char *shapes[][3] = {
        {"[", "0", "]"},         {"{", "\"a%ld\":0", "}"}, {"[", "{}", "]"},
        {"[", "[]", "]"},        {"[", "\"\"", "]"},       {"[", "{\"a\":[0]}", "]"},
        {"[", "[[[[[[[[", "]"},
    };
    snprintf(s_hostile_path, sizeof s_hostile_path, "/tmp/ps_json_hostile.%d",
             (int)getpid());
    int rc;
    const long base = ps_test_child_peak(NULL, NULL, &rc);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const size_t h = ps_test_put_repeated(s_hostile_path, shapes[i][0], shapes[i][1],
                                              shapes[i][2], S_HOSTILE_BYTES);
        static const unsigned factors[] = {8, PS_JSON_TREE_FACTOR};
        for (int k = 0; k < 2; k++) {
            s_factor = factors[k];
            const long grew = ps_test_child_peak(s_read_hostile, NULL, &rc) - base;
            printf("%s%s... at %u: %zu bytes, %s, the peak grew by %ld bytes (%.1fx)\n",
                   shapes[i][0], shapes[i][1], s_factor, h, rc ? "refused" : "read", grew,
                   (double)grew / (double)h);
            ck_assert(rc == 0 || rc == PS_EPROTO);
            ck_assert_msg(grew <= (long)((s_factor + 1) * h + PS_JSON_TREE_BASE),
                          "%s...: %zu bytes took %ld", shapes[i][1], h, grew);
            ck_assert(rc != 0 || s_factor > 8); /* none passes the tight bound */
        }
    }
    char why[256];
    json_t *j = NULL;
    ck_assert_int_eq(
        ps_json_read_file_within(s_hostile_path, S_HOSTILE_BYTES * 4, 8, &j, why, sizeof why),
        PS_EPROTO);
    ck_assert_msg(strstr(why, s_hostile_path) == why && !strchr(why, '\n'), "%s", why);
    unlink(s_hostile_path);
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, parse_is_strict_and_reasons_are_one_line);
    tcase_add_test(tc, styles_and_reals);
    tcase_add_test(tc, files_round_trip_within_a_limit);
    tcase_add_test(tc, quote_escapes_and_shortens);
    tcase_add_test(tc, getters_name_the_path_at_fault);
    suite_add_tcase(s, tc);
    TCase *mem = tcase_create("memory");
    tcase_set_timeout(mem, 120); /* children parse megabytes: for a loaded machine */
    tcase_add_test(mem, hostile_documents_cost_a_bounded_multiple_of_their_size);
    suite_add_tcase(s, mem);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
