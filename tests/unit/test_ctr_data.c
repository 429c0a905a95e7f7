/*
 * tests/unit/test_ctr_data.c - the Criteo-layout reader on small files the
 * test writes into a fresh temporary directory, plain and gzip: values,
 * missing fields, negative integers, CRLF and a last line without newline,
 * keys distinct across fields, malformed lines counted and skipped, the
 * bound on them naming file:line, missing, unreadable and truncated files,
 * --max-rows, growth past the first allocation, and the held-out split.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "common/error.h"
#include "tests/unit/testutil.h"
#include "worker/ctr_data.h"

static char s_dir[256];

static void s_setup(void)
{
    snprintf(s_dir, sizeof(s_dir), "%s/ps-test-ctr-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(s_dir));
}

static void s_teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s_dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Writes text as s_dir/name, gzip-compressed when gz. Returns the path
 * (static buffer). */
static const char *s_write(const char *name, int gz, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", s_dir, name);
    const size_t len = strlen(text);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        if (len) {
            ck_assert_int_eq(gzwrite(f, text, (unsigned)len), (int)len);
        }
        ck_assert_int_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(text, 1, len, f), len);
        fclose(f);
    }
    return path;
}

/* Appends one line to text: label, then numeric field j as num(j), then
 * categorical field k as 8 hex digits of cat + k, or empty where the bit k
 * of missing is set; `tail` goes before the newline. */
static void s_line(char *text, const char *label, const char *num, uint32_t cat,
                   uint32_t missing, const char *tail)
{
    char *p = text + strlen(text);
    p += sprintf(p, "%s", label);
    for (int j = 0; j < PS_CTR_NUM; j++) {
        p += sprintf(p, "\t%s", num);
    }
    for (int k = 0; k < PS_CTR_CAT; k++) {
        if (missing >> k & 1) {
            p += sprintf(p, "\t");
        } else {
            p += sprintf(p, "\t%08x", cat + (uint32_t)k);
        }
    }
    sprintf(p, "%s\n", tail);
}

static const char s_good[] =
    "1\t5\t-1\t\t0\t12345\t\t\t\t\t\t\t\t7" /* label, I1..I13 */
    "\t68fd1e64\t80e26c9b\tfb936136\t7b4723c4\t25c83c98"
    "\t7e0ccccf\tde7995b8\t1f89b562\ta73ee510\ta8cd5504\tb2cb9c98\t37c9c164\t2824a5f6"
    "\t1adce6ef\t8ba8b39a\t891b62e7\te5ba7672\tf54016b9\t21ddcdc9\tb1252a9d\t07b5194c\t"
    "\t3a171ecb\tc5c50484\te8b83407\t9727dd16\n"
    "0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n";

START_TEST(reads_values_plain_and_gzip)
{
    for (int gz = 0; gz < 2; gz++) {
        const char *path = s_write(gz ? "a.txt.gz" : "a.txt", gz, s_good);
        ps_ctr_set_t s;
        char why[512] = "x";
        ck_assert_int_eq(ps_ctr_read(path, 0, 0, &s, why, sizeof why), 0);
        ck_assert_str_eq(why, "");
        ck_assert_uint_eq(s.n, 2);
        ck_assert_uint_eq(s.bad, 0);
        ck_assert(s.label[0] == 1.0f && s.label[1] == 0.0f);
        const float *x = s.num;
        ck_assert(ps_test_close(x[0], log1p(5.0), 1e-6, 1e-6));
        ck_assert(ps_test_close(x[1], -log(2.0), 1e-6, 1e-6)); /* -1 */
        ck_assert(x[2] == 0.0f && x[3] == 0.0f);               /* missing, 0 */
        ck_assert(ps_test_close(x[4], log1p(12345.0), 1e-6, 1e-6));
        ck_assert(ps_test_close(x[12], log1p(7.0), 1e-6, 1e-6));
        ck_assert_uint_eq(s.keys[0], ps_ctr_key(0, 0x68fd1e64u, 0));
        ck_assert_uint_eq(s.keys[1], ps_ctr_key(1, 0x80e26c9bu, 0));
        ck_assert_uint_eq(s.keys[21], ps_ctr_key(21, 0, 1)); /* C22 empty */
        ck_assert_uint_eq(s.keys[25], ps_ctr_key(25, 0x9727dd16u, 0));
        for (int j = 0; j < PS_CTR_NUM; j++) {
            ck_assert(s.num[PS_CTR_NUM + j] == 0.0f);
        }
        for (int k = 0; k < PS_CTR_CAT; k++) {
            ck_assert_uint_eq(s.keys[PS_CTR_CAT + k], ps_ctr_key(k, 0, 1));
        }
        ps_ctr_set_fini(&s);
        ck_assert_ptr_null(s.keys);
        ps_ctr_set_fini(&s); /* twice is fine */
    }
}
END_TEST

START_TEST(upper_case_crlf_and_last_line_without_newline)
{
    char text[4096] = "";
    s_line(text, "1", "3", 0xABCDEF00u, 0, "\r");
    s_line(text, "0", "-42", 0x00000001u, 0, "");
    text[strlen(text) - 1] = '\0'; /* no final newline */
    /* upper-case hex on the first line */
    for (char *p = text; *p && *p != '\n'; p++) {
        if (*p >= 'a' && *p <= 'f') {
            *p = (char)(*p - 'a' + 'A');
        }
    }
    ps_ctr_set_t s;
    char why[512];
    ck_assert_int_eq(ps_ctr_read(s_write("b", 0, text), 0, 0, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 2);
    ck_assert_uint_eq(s.keys[0], ps_ctr_key(0, 0xabcdef00u, 0));
    ck_assert_uint_eq(s.keys[PS_CTR_CAT + 25], ps_ctr_key(25, 0x0000001au, 0));
    ck_assert(ps_test_close(s.num[PS_CTR_NUM], -log1p(42.0), 1e-6, 1e-6));
    ck_assert(ps_test_close(s.num[0], log1p(3.0), 1e-6, 1e-6));
    ps_ctr_set_fini(&s);
}
END_TEST

START_TEST(keys_are_distinct_across_fields_and_missing)
{
    /* every field holds the value 00000000 on line 1, and is missing on line 2 */
    char text[4096];
    char *p = text + sprintf(text, "0");
    for (int j = 0; j < PS_CTR_NUM; j++) {
        p += sprintf(p, "\t1");
    }
    for (int k = 0; k < PS_CTR_CAT; k++) {
        p += sprintf(p, "\t00000000");
    }
    sprintf(p, "\n");
    s_line(text, "1", "", 0, 0x3ffffffu, "");
    ps_ctr_set_t s;
    ck_assert_int_eq(ps_ctr_read(s_write("c", 0, text), 0, 0, &s, NULL, 0), 0);
    ck_assert_uint_eq(s.n, 2);
    for (int a = 0; a < 2 * PS_CTR_CAT; a++) {
        ck_assert_uint_ne(s.keys[a], 0);
        ck_assert_int_eq(ps_ctr_key_field(s.keys[a]), a % PS_CTR_CAT);
        for (int b = a + 1; b < 2 * PS_CTR_CAT; b++) {
            ck_assert_uint_ne(s.keys[a], s.keys[b]);
        }
    }
    /* the largest value of one field is below the smallest key of the next */
    ck_assert_uint_lt(ps_ctr_key(3, 0xffffffffu, 0), ps_ctr_key(3, 0, 1));
    ck_assert_uint_lt(ps_ctr_key(3, 0, 1), ps_ctr_key(4, 0, 0));
    ck_assert_int_eq(ps_ctr_key_field(ps_ctr_key(25, 0xffffffffu, 1)), 25);
    ps_ctr_set_fini(&s);
}
END_TEST

/* The malformed lines, each with a word its reason must hold. */
static const struct {
    const char *label, *num;
    uint32_t missing;
    const char *tail, *reason;
} s_bad[] = {
    {"2", "1", 0, "", "label"},
    {"", "1", 0, "", "label"},
    {"1", "1.5", 0, "", "(I1) '1.5' is not an integer"},
    {"1", "abc", 0, "", "not an integer"},
    {"1", "-", 0, "", "not an integer"},
    {"1", "1234567890123456789", 0, "", "at most 18 digits"},
    {"1", "1", 0, "\tx", "41 fields, expected 40"},
    {"1", "1", 0, "\t\t", "42 fields, expected 40"},
};

START_TEST(malformed_lines_are_counted_and_skipped)
{
    for (int gz = 0; gz < 2; gz++) {
        char text[16384] = "";
        s_line(text, "1", "1", 0x10, 0, "");
        const int nbad = (int)(sizeof s_bad / sizeof s_bad[0]);
        for (int i = 0; i < nbad; i++) {
            s_line(text, s_bad[i].label, s_bad[i].num, 0x20, s_bad[i].missing,
                   s_bad[i].tail);
        }
        strcat(text, "1\t2\t3\n");                  /* 3 fields */
        strcat(text, "\n");                         /* empty */
        s_line(text, "0", "1", 0xfffffff0u, 0, ""); /* good: C26 wraps to 00000009 */
        char *bad_hex = text + strlen(text);
        s_line(text, "0", "1", 0x30, 0, "");
        bad_hex[strlen(bad_hex) - 2] = 'g'; /* C26 '0000004g' */
        s_line(text, "0", "1", 0x100000, 0, "");
        char *p = text + strlen(text);
        s_line(text, "0", "1", 0x40, 0, "");
        memmove(p + 30, p + 31, strlen(p + 31) + 1); /* C1 of 7 digits */
        s_line(text, "1", "1", 0x50, 0, "");
        s_line(text, "1", "1", 0x60, 0, "");
        char long_line[5200];
        memset(long_line, '1', sizeof long_line - 2);
        long_line[sizeof long_line - 2] = '\n';
        long_line[sizeof long_line - 1] = '\0';
        char *big = malloc(strlen(text) + sizeof long_line + 1024);
        strcpy(big, text);
        strcat(big, long_line);
        s_line(big, "0", "9", 0x70, 0, "");
        const char *path = s_write(gz ? "m.gz" : "m", gz, big);
        free(big);
        ps_ctr_set_t s;
        char why[512];
        ck_assert_int_eq(ps_ctr_read(path, 0, 100, &s, why, sizeof why), 0);
        ck_assert_uint_eq(s.bad, (uint64_t)nbad + 5);
        ck_assert_uint_eq(s.n, 6);
        /* the good lines, in order */
        ck_assert_uint_eq(s.keys[0], ps_ctr_key(0, 0x10, 0));
        ck_assert_uint_eq(s.keys[PS_CTR_CAT], ps_ctr_key(0, 0xfffffff0u, 0));
        ck_assert_uint_eq(s.keys[PS_CTR_CAT + 25], ps_ctr_key(25, 0x00000009u, 0));
        ck_assert_uint_eq(s.keys[2 * PS_CTR_CAT], ps_ctr_key(0, 0x100000, 0));
        ck_assert_uint_eq(s.keys[3 * PS_CTR_CAT], ps_ctr_key(0, 0x50, 0));
        ck_assert_uint_eq(s.keys[5 * PS_CTR_CAT], ps_ctr_key(0, 0x70, 0));
        ck_assert(ps_test_close(s.num[5 * PS_CTR_NUM], log1p(9.0), 1e-6, 1e-6));
        /* why: the first malformed line, file:line */
        char want[600];
        snprintf(want, sizeof want, "%s:2: field 1 (label) '2' is not 0 or 1", path);
        ck_assert_str_eq(why, want);
        ps_ctr_set_fini(&s);

        /* each reason, one bound at a time: the line over it is named */
        for (int i = 0; i < nbad; i++) {
            ck_assert_int_eq(ps_ctr_read(path, 0, (uint64_t)i, &s, why, sizeof why),
                             PS_EINVAL);
            snprintf(want, sizeof want, "%s:%d: ", path, i + 2);
            ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "%s", why);
            ck_assert_msg(strstr(why, s_bad[i].reason) != NULL, "%s lacks %s", why,
                          s_bad[i].reason);
            ck_assert_ptr_null(strchr(why, '\n'));
            ck_assert_uint_eq(s.n, 0);
            ck_assert_ptr_null(s.keys);
        }
        const struct {
            uint64_t max_bad;
            int line;
            const char *reason;
        } later[] = {
            {8, 10, "3 fields, expected 40"},
            {9, 11, "empty line"},
            {10, 13, "(C26) '0000004g' is not 8 hexadecimal digits"},
            {11, 15, "is not 8 hexadecimal digits"},
            {12, 18, "line longer than 4096 bytes"},
        };
        for (size_t i = 0; i < sizeof later / sizeof later[0]; i++) {
            ck_assert_int_eq(ps_ctr_read(path, 0, later[i].max_bad, &s, why, sizeof why),
                             PS_EINVAL);
            snprintf(want, sizeof want, "%s:%d: ", path, later[i].line);
            ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "%s", why);
            ck_assert_msg(strstr(why, later[i].reason) != NULL, "%s", why);
            ck_assert_msg(strstr(why, "at most") != NULL, "%s", why);
        }
    }
}
END_TEST

START_TEST(reasons_are_one_printable_line)
{
    char text[4096] = "";
    s_line(text, "0", "1", 0x10, 0, "");
    char *p = strstr(text, "\t00000010");
    memcpy(p + 1, "\x1b[1m\rx\n", 7); /* C1: an escape, a CR, a newline */
    strcat(text, "junk\n");
    ps_ctr_set_t s;
    char why[600], want[600];
    const char *path = s_write("p", 0, text);
    ck_assert_int_eq(ps_ctr_read(path, 0, 0, &s, why, sizeof why), PS_EINVAL);
    snprintf(want, sizeof want, "%s:1: field 15 (C1) '?[1m?x' is not 8 hexadecimal digits",
             path);
    ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "%s", why);
    /* the newline in C1 ends the line: its rest is line 2 */
    ck_assert_int_eq(ps_ctr_read(path, 0, 1, &s, why, sizeof why), PS_EINVAL);
    ck_assert_msg(strstr(why, ":2: field 11 (I10) '0000001a' is not an integer") != NULL,
                  "%s", why);
    ck_assert_int_eq(ps_ctr_read(path, 0, 3, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.bad, 3);
    ck_assert_uint_eq(s.n, 0);
    for (const char *q = why; *q; q++) {
        ck_assert(*q >= 0x20 && *q < 0x7f);
    }
    ps_ctr_set_fini(&s);
}
END_TEST

START_TEST(missing_directory_and_truncated_files_fail)
{
    ps_ctr_set_t s;
    char why[600], path[512];
    snprintf(path, sizeof path, "%s/nope.txt", s_dir);
    ck_assert_int_eq(ps_ctr_read(path, 0, 0, &s, why, sizeof why), PS_ENOENT);
    ck_assert_ptr_nonnull(strstr(why, path));
    ck_assert_ptr_null(s.keys);
    ck_assert_int_eq(ps_ctr_read(s_dir, 0, 0, &s, why, sizeof why), PS_EIO);
    ck_assert_ptr_nonnull(strstr(why, "directory"));
    ck_assert_int_eq(ps_ctr_read(path, 0, 0, &s, NULL, 0), PS_ENOENT); /* why may be NULL */

    /* a gzip file cut in the middle */
    char *text = calloc(1, 400 * 600);
    for (int i = 0; i < 400; i++) {
        s_line(text, i % 3 ? "0" : "1", "17", (uint32_t)i * 2654435761u, (uint32_t)i, "");
    }
    const char *gz = s_write("t.gz", 1, text);
    free(text);
    FILE *f = fopen(gz, "rb");
    char buf[1 << 16];
    const size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(len, 200);
    f = fopen(gz, "wb");
    fwrite(buf, 1, len / 2, f);
    fclose(f);
    ck_assert_int_eq(ps_ctr_read(gz, 0, 0, &s, why, sizeof why), PS_EIO);
    ck_assert_ptr_nonnull(strstr(why, "t.gz: corrupt or truncated"));
    ck_assert_ptr_null(s.keys);
    /* an empty file is an empty set */
    ck_assert_int_eq(ps_ctr_read(s_write("e", 0, ""), 0, 0, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 0);
    ps_ctr_set_fini(&s);
}
END_TEST

START_TEST(max_rows_growth_and_split)
{
    enum { N = 70000 }; /* past the first allocation */
    char *text = malloc((size_t)N * 400);
    char *p = text;
    *p = '\0';
    for (int i = 0; i < N; i++) {
        p += sprintf(p, "%d", i & 1);
        for (int j = 0; j < PS_CTR_NUM; j++) {
            p += sprintf(p, j == 0 ? "\t%d" : "\t", i);
        }
        for (int k = 0; k < PS_CTR_CAT; k++) {
            p += sprintf(p, "\t%08x", (unsigned)(i + k));
        }
        p += sprintf(p, "\n");
    }
    const char *path = s_write("g.gz", 1, text);
    free(text);
    ps_ctr_set_t s;
    ck_assert_int_eq(ps_ctr_read(path, 0, 0, &s, NULL, 0), 0);
    ck_assert_uint_eq(s.n, N);
    for (int i = 0; i < N; i += 997) {
        ck_assert(s.label[i] == (float)(i & 1));
        ck_assert(
            ps_test_close(s.num[(size_t)i * PS_CTR_NUM], log1p((double)i), 1e-6, 1e-6));
        ck_assert_uint_eq(s.keys[(size_t)i * PS_CTR_CAT + 7],
                          ps_ctr_key(7, (uint32_t)i + 7, 0));
    }
    ps_ctr_view_t tr, te;
    ps_ctr_split(&s, 0.1, &tr, &te);
    ck_assert_uint_eq(tr.n, N - N / 10);
    ck_assert_uint_eq(te.n, N / 10);
    ck_assert_ptr_eq(tr.keys, s.keys);
    ck_assert_ptr_eq(te.keys, s.keys + tr.n * PS_CTR_CAT);
    ck_assert_ptr_eq(te.num, s.num + tr.n * PS_CTR_NUM);
    ck_assert_ptr_eq(te.label, s.label + tr.n);
    ps_ctr_split(&s, 2.0, &tr, &te);
    ck_assert_uint_eq(tr.n, 0);
    ck_assert_uint_eq(te.n, N);
    ps_ctr_split(&s, NAN, &tr, &te);
    ck_assert_uint_eq(te.n, 0);
    ps_ctr_set_fini(&s);

    ck_assert_int_eq(ps_ctr_read(path, 1000, 0, &s, NULL, 0), 0);
    ck_assert_uint_eq(s.n, 1000);
    ck_assert_uint_eq(s.keys[999 * PS_CTR_CAT], ps_ctr_key(0, 999, 0));
    ps_ctr_set_fini(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctr_data");
    TCase *tc = tcase_create("read");
    tcase_add_checked_fixture(tc, s_setup, s_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reads_values_plain_and_gzip);
    tcase_add_test(tc, upper_case_crlf_and_last_line_without_newline);
    tcase_add_test(tc, keys_are_distinct_across_fields_and_missing);
    tcase_add_test(tc, malformed_lines_are_counted_and_skipped);
    tcase_add_test(tc, reasons_are_one_printable_line);
    tcase_add_test(tc, missing_directory_and_truncated_files_fail);
    tcase_add_test(tc, max_rows_growth_and_split);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
