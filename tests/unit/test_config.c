/*
 * tests/unit/test_config.c - flag and environment parsing (common/config.h):
 * each flag type in each spelling, the environment and its precedence (flag >
 * environment > default), "--" and stray arguments, every bad value giving
 * PS_EINVAL and its one error line, and --help listing every flag with its
 * SHARDPS_* name and default.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/error.h"
#include "tests/unit/testutil.h"

/* ---- output capture ------------------------------------------------------ */

/* What a parse printed on one stream (stdout or stderr). */
typedef struct {
    int fd;       /* STDOUT_FILENO or STDERR_FILENO */
    int saved;    /* the stream's own fd, restored by s_cap_end */
    FILE *tmp;    /* where it went meanwhile */
    char text[8192];
} s_cap_t;

static void s_cap_begin(s_cap_t *c, int fd)
{
    fflush(NULL);
    c->fd = fd;
    c->tmp = tmpfile();
    ck_assert_ptr_nonnull(c->tmp);
    c->saved = dup(fd);
    ck_assert_int_ge(c->saved, 0);
    ck_assert_int_ge(dup2(fileno(c->tmp), fd), 0);
}

static const char *s_cap_end(s_cap_t *c)
{
    fflush(NULL);
    dup2(c->saved, c->fd);
    close(c->saved);
    rewind(c->tmp);
    size_t n = fread(c->text, 1, sizeof c->text - 1, c->tmp);
    c->text[n] = '\0';
    fclose(c->tmp);
    return c->text;
}

/* ---- a table with one flag of each type ------------------------------------ */

typedef struct {
    int count;
    double rate;
    const char *name;
    int on;
    int from_env_only;
} s_vals_t;

static void s_defaults(s_vals_t *v)
{
    v->count = 3;
    v->rate = 0.5;
    v->name = "dflt";
    v->on = 0;
    v->from_env_only = 7;
}

#define S_NFLAGS 5
static void s_table(s_vals_t *v, ps_flag_t *t)
{
    const ps_flag_t flags[S_NFLAGS] = {
        {"count", PS_FLAG_INT, &v->count, "N", "how many"},
        {"rate", PS_FLAG_DOUBLE, &v->rate, "X", "how fast"},
        {"name", PS_FLAG_STR, &v->name, "NAME", "what"},
        {"on", PS_FLAG_BOOL, &v->on, NULL, "whether"},
        {"env-only", PS_FLAG_INT, &v->from_env_only, "N", "set from the environment"},
    };
    memcpy(t, flags, sizeof flags);
}

/* Parses argv (NULL-terminated, argv[0] included) into *v from its defaults.
 * Returns ps_config_parse's result; its stderr goes into err (may be NULL). */
static int s_parse(s_vals_t *v, char **argv, int *rest, char *err, size_t errlen)
{
    ps_flag_t t[S_NFLAGS];
    int argc = 0;
    while (argv[argc]) {
        argc++;
    }
    s_defaults(v);
    s_table(v, t);
    s_cap_t cap;
    s_cap_begin(&cap, STDERR_FILENO);
    int rc = ps_config_parse("prog", "about", t, S_NFLAGS, argc, argv, rest);
    const char *text = s_cap_end(&cap);
    if (err && errlen) { /* the first line or so, as much as fits */
        size_t n = strlen(text) < errlen ? strlen(text) : errlen - 1;
        memcpy(err, text, n);
        err[n] = '\0';
    }
    return rc;
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(no_arguments_keep_the_defaults)
{
    s_vals_t v;
    char *argv[] = {"prog", NULL};
    char err[256];
    ck_assert_int_eq(s_parse(&v, argv, NULL, err, sizeof err), 0);
    ck_assert_int_eq(v.count, 3);
    ck_assert_double_eq(v.rate, 0.5);
    ck_assert_str_eq(v.name, "dflt");
    ck_assert_int_eq(v.on, 0);
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(each_type_parses_in_both_spellings)
{
    s_vals_t v;
    char *a1[] = {"prog", "--count", "-12", "--rate", "2.5e-3", "--name", "x y", "--on", NULL};
    ck_assert_int_eq(s_parse(&v, a1, NULL, NULL, 0), 0);
    ck_assert_int_eq(v.count, -12);
    ck_assert_double_eq(v.rate, 2.5e-3);
    ck_assert_str_eq(v.name, "x y");
    ck_assert_int_eq(v.on, 1);
    char *a2[] = {"prog", "--count=2147483647", "--rate=-1", "--name=", "--on=1", NULL};
    ck_assert_int_eq(s_parse(&v, a2, NULL, NULL, 0), 0);
    ck_assert_int_eq(v.count, 2147483647);
    ck_assert_double_eq(v.rate, -1.0);
    ck_assert_str_eq(v.name, "");
    ck_assert_int_eq(v.on, 1);
}
END_TEST

START_TEST(bool_takes_a_following_value_only_when_it_is_one)
{
    s_vals_t v;
    static const char *const yes[] = {"1", "true", "TRUE", "yes", "Yes"};
    static const char *const no[] = {"0", "false", "False", "no", "NO"};
    for (int i = 0; i < 5; i++) {
        char *a[] = {"prog", "--on", (char *)yes[i], NULL};
        ck_assert_int_eq(s_parse(&v, a, NULL, NULL, 0), 0);
        ck_assert_int_eq(v.on, 1);
        char *b[] = {"prog", "--on", (char *)no[i], NULL};
        ck_assert_int_eq(s_parse(&v, b, NULL, NULL, 0), 0);
        ck_assert_int_eq(v.on, 0);
    }
    /* "--on" then a flag: the flag is not its value */
    char *c[] = {"prog", "--on", "--count", "4", NULL};
    ck_assert_int_eq(s_parse(&v, c, NULL, NULL, 0), 0);
    ck_assert_int_eq(v.on, 1);
    ck_assert_int_eq(v.count, 4);
    /* "--on maybe": on, and "maybe" is a stray argument */
    char err[256];
    char *d[] = {"prog", "--on", "maybe", NULL};
    ck_assert_int_eq(s_parse(&v, d, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: unexpected argument 'maybe' (see --help)\n");
    char *e[] = {"prog", "--on=maybe", NULL};
    ck_assert_int_eq(s_parse(&v, e, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: --on maybe: not 0 or 1\n");
    /* "--on 2": a number meant as its value, which is not 0 or 1 */
    char *f[] = {"prog", "--on", "2", NULL};
    ck_assert_int_eq(s_parse(&v, f, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: --on 2: not 0 or 1\n");
}
END_TEST

START_TEST(environment_overrides_default_and_flag_overrides_environment)
{
    s_vals_t v;
    setenv("SHARDPS_COUNT", "9", 1);
    setenv("SHARDPS_ENV_ONLY", "11", 1);
    setenv("SHARDPS_ON", "yes", 1);
    char *a[] = {"prog", NULL};
    ck_assert_int_eq(s_parse(&v, a, NULL, NULL, 0), 0);
    ck_assert_int_eq(v.count, 9);
    ck_assert_int_eq(v.from_env_only, 11); /* "env-only" -> SHARDPS_ENV_ONLY */
    ck_assert_int_eq(v.on, 1);
    char *b[] = {"prog", "--count", "5", "--on=0", NULL};
    ck_assert_int_eq(s_parse(&v, b, NULL, NULL, 0), 0);
    ck_assert_int_eq(v.count, 5);
    ck_assert_int_eq(v.from_env_only, 11);
    ck_assert_int_eq(v.on, 0);
    unsetenv("SHARDPS_COUNT");
    unsetenv("SHARDPS_ENV_ONLY");
    unsetenv("SHARDPS_ON");
}
END_TEST

START_TEST(bad_environment_value_is_einval_with_its_name)
{
    s_vals_t v;
    char err[256];
    char *a[] = {"prog", "--count", "1", NULL};
    setenv("SHARDPS_COUNT", "abc", 1);
    /* even when the flag would override it: the environment is read first */
    ck_assert_int_eq(s_parse(&v, a, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: environment SHARDPS_COUNT=abc is not an integer in [-2147483647, 2147483647]\n");
    unsetenv("SHARDPS_COUNT");
    setenv("SHARDPS_RATE", "fast", 1);
    ck_assert_int_eq(s_parse(&v, a, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: environment SHARDPS_RATE=fast is not a number\n");
    unsetenv("SHARDPS_RATE");
    setenv("SHARDPS_ON", "2", 1);
    ck_assert_int_eq(s_parse(&v, a, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: environment SHARDPS_ON=2 is not 0 or 1\n");
    unsetenv("SHARDPS_ON");
}
END_TEST

START_TEST(bad_values_are_einval_with_one_line)
{
    static const struct {
        const char *flag, *value, *line;
    } cases[] = {
        {"--count", "abc", "prog: error: --count abc: not an integer in [-2147483647, 2147483647]\n"},
        {"--count", "12x", "prog: error: --count 12x: not an integer in [-2147483647, 2147483647]\n"},
        {"--count", "", "prog: error: --count : not an integer in [-2147483647, 2147483647]\n"},
        {"--count", "2147483648", "prog: error: --count 2147483648: not an integer in [-2147483647, 2147483647]\n"},
        {"--count", "-2147483648", "prog: error: --count -2147483648: not an integer in [-2147483647, 2147483647]\n"},
        {"--count", "1.5", "prog: error: --count 1.5: not an integer in [-2147483647, 2147483647]\n"},
        {"--rate", "x", "prog: error: --rate x: not a number\n"},
        {"--rate", "inf", "prog: error: --rate inf: not a number\n"},
        {"--rate", "nan", "prog: error: --rate nan: not a number\n"},
        {"--rate", "1e999", "prog: error: --rate 1e999: not a number\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_vals_t v;
        char err[256];
        char *a[] = {"prog", (char *)cases[i].flag, (char *)cases[i].value, NULL};
        ck_assert_int_eq(s_parse(&v, a, NULL, err, sizeof err), PS_EINVAL);
        ck_assert_str_eq(err, cases[i].line);
    }
}
END_TEST

START_TEST(unknown_missing_and_stray_are_einval)
{
    s_vals_t v;
    char err[256];
    char *a[] = {"prog", "--nope=1", NULL};
    ck_assert_int_eq(s_parse(&v, a, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: unknown flag --nope (see --help)\n");
    char *b[] = {"prog", "--count", NULL};
    ck_assert_int_eq(s_parse(&v, b, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: flag --count needs a value\n");
    char *c[] = {"prog", "stray", NULL};
    ck_assert_int_eq(s_parse(&v, c, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: unexpected argument 'stray' (see --help)\n");
    /* a prefix of a name is not the name, but the name is suggested */
    char *d[] = {"prog", "--coun", "1", NULL};
    ck_assert_int_eq(s_parse(&v, d, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: unknown flag --coun; did you mean --count? (see --help)\n");
    /* one letter wrong, one too many, two swapped: the nearest flag */
    char *e[] = {"prog", "--rste", "1", NULL};
    ck_assert_int_eq(s_parse(&v, e, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: unknown flag --rste; did you mean --rate? (see --help)\n");
    char *f[] = {"prog", "--onn", NULL};
    ck_assert_int_eq(s_parse(&v, f, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: unknown flag --onn; did you mean --on? (see --help)\n");
    char *g[] = {"prog", "--env-olny=1", NULL};
    ck_assert_int_eq(s_parse(&v, g, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err,
                     "prog: error: unknown flag --env-olny; "
                     "did you mean --env-only? (see --help)\n");
}
END_TEST

START_TEST(rest_gets_the_first_argument_not_consumed)
{
    s_vals_t v;
    int rest = -1;
    char *a[] = {"prog", "--count", "2", "--", "--rate", "x", NULL};
    ck_assert_int_eq(s_parse(&v, a, &rest, NULL, 0), 0);
    ck_assert_int_eq(rest, 4);
    ck_assert_int_eq(v.count, 2);
    ck_assert_double_eq(v.rate, 0.5); /* after "--": not parsed */
    char *b[] = {"prog", "--count", "2", "file", "--rate", "1", NULL};
    ck_assert_int_eq(s_parse(&v, b, &rest, NULL, 0), 0);
    ck_assert_int_eq(rest, 3);
    ck_assert_double_eq(v.rate, 0.5);
    char *c[] = {"prog", "--count", "2", NULL};
    ck_assert_int_eq(s_parse(&v, c, &rest, NULL, 0), 0);
    ck_assert_int_eq(rest, 3);
    /* without rest, "--" still ends the flags, and what follows is stray */
    char err[256];
    char *d[] = {"prog", "--", "x", NULL};
    ck_assert_int_eq(s_parse(&v, d, NULL, err, sizeof err), PS_EINVAL);
    ck_assert_str_eq(err, "prog: error: unexpected argument 'x' (see --help)\n");
}
END_TEST

START_TEST(help_returns_1_and_lists_every_flag)
{
    static const char *const spell[] = {"--help", "-h"};
    for (int i = 0; i < 2; i++) {
        s_vals_t v;
        ps_flag_t t[S_NFLAGS];
        s_defaults(&v);
        s_table(&v, t);
        char *argv[] = {"prog", "--count", "8", (char *)spell[i], "--bogus", NULL};
        s_cap_t cap;
        s_cap_begin(&cap, STDOUT_FILENO);
        int rc = ps_config_parse("prog", "What prog does.", t, S_NFLAGS, 5, argv, NULL);
        const char *out = s_cap_end(&cap);
        ck_assert_int_eq(rc, 1);
        ck_assert_ptr_eq(strstr(out, "usage: prog [flags]\nWhat prog does.\n"), out);
        for (size_t k = 0; k < S_NFLAGS; k++) {
            char want[128];
            snprintf(want, sizeof want, "  --%s%s%s", t[k].name, t[k].metavar ? " " : "",
                     t[k].metavar ? t[k].metavar : "");
            ck_assert_msg(strstr(out, want), "--help lacks '%s':\n%s", want, out);
            ck_assert_ptr_nonnull(strstr(out, t[k].help));
        }
        /* defaults as parsed so far ("--count 8" came first), env names */
        ck_assert_ptr_nonnull(strstr(out, "how many [default: 8] (SHARDPS_COUNT)\n"));
        ck_assert_ptr_nonnull(strstr(out, "how fast [default: 0.5] (SHARDPS_RATE)\n"));
        ck_assert_ptr_nonnull(strstr(out, "what [default: dflt] (SHARDPS_NAME)\n"));
        ck_assert_ptr_nonnull(strstr(out, "whether [default: 0] (SHARDPS_ON)\n"));
        ck_assert_ptr_nonnull(strstr(out, "(SHARDPS_ENV_ONLY)\n"));
        ck_assert_ptr_nonnull(strstr(out, "  --help"));
    }
}
END_TEST

START_TEST(help_omits_an_empty_string_default)
{
    const char *none = NULL;
    ps_flag_t t[] = {{"file", PS_FLAG_STR, &none, "FILE", "where"}};
    s_cap_t cap;
    s_cap_begin(&cap, STDOUT_FILENO);
    ps_config_usage("prog", "about", t, 1);
    const char *out = s_cap_end(&cap);
    ck_assert_ptr_nonnull(strstr(out, "  --file FILE"));
    ck_assert_ptr_nonnull(strstr(out, "where (SHARDPS_FILE)\n"));
    ck_assert_ptr_null(strstr(out, "default"));
}
END_TEST

START_TEST(a_named_variable_replaces_the_default_one)
{
    double limit = 5;
    int n = 1;
    ps_flag_t t[] = {{"timeout", PS_FLAG_DOUBLE, &limit, "S", "how long", "SHARDPS_X_TIMEOUT"},
                     {"count", PS_FLAG_INT, &n, "N", "how many"}};
    char *argv[] = {"prog", NULL};
    setenv("SHARDPS_TIMEOUT", "nonsense", 1); /* not this program's: ignored */
    setenv("SHARDPS_X_TIMEOUT", "7.5", 1);
    ck_assert_int_eq(ps_config_parse("prog", "about", t, 2, 1, argv, NULL), 0);
    ck_assert_double_eq(limit, 7.5);
    s_cap_t cap;
    s_cap_begin(&cap, STDOUT_FILENO);
    ps_config_usage("prog", "about", t, 2);
    const char *out = s_cap_end(&cap);
    ck_assert_ptr_nonnull(strstr(out, "how long [default: 7.5] (SHARDPS_X_TIMEOUT)\n"));
    ck_assert_ptr_nonnull(strstr(out, "  --version"));
    unsetenv("SHARDPS_TIMEOUT");
    unsetenv("SHARDPS_X_TIMEOUT");
}
END_TEST

START_TEST(parse_argv_reads_no_environment)
{
    int n = 1;
    ps_flag_t t[] = {{"count", PS_FLAG_INT, &n, "N", "how many"}};
    char *argv[] = {"prog", "--help", NULL};
    setenv("SHARDPS_COUNT", "not a number", 1);
    char *none[] = {"prog", NULL};
    ck_assert_int_eq(ps_config_parse_argv("prog", "about", t, 1, 1, none, NULL), 0);
    ck_assert_int_eq(n, 1);
    s_cap_t cap;
    s_cap_begin(&cap, STDOUT_FILENO);
    ck_assert_int_eq(ps_config_parse_argv("prog", "about", t, 1, 2, argv, NULL), 1);
    const char *out = s_cap_end(&cap);
    ck_assert_ptr_null(strstr(out, "SHARDPS_")); /* --help names no variable */
    unsetenv("SHARDPS_COUNT");
}
END_TEST

START_TEST(an_error_about_a_value_from_the_environment_names_the_variable)
{
    double limit = 5, rate = 1;
    ps_flag_t t[] = {{"timeout", PS_FLAG_DOUBLE, &limit, "S", "how long", "SHARDPS_X_TIMEOUT"},
                     {"rate", PS_FLAG_DOUBLE, &rate, "X", "how fast"}};
    char err[256];
    char *none[] = {"prog", NULL}, *typed[] = {"prog", "--timeout=0", NULL};
    setenv("SHARDPS_X_TIMEOUT", "0", 1);
    snprintf(err, sizeof err, "--timeout 0: out of range (0, 10]");
    ps_config_blame_env(t, 2, 1, none, err, sizeof err);
    ck_assert_str_eq(err, "SHARDPS_X_TIMEOUT=0: out of range (0, 10]");
    snprintf(err, sizeof err, "--timeout 0: out of range (0, 10]"); /* typed: stays */
    ps_config_blame_env(t, 2, 2, typed, err, sizeof err);
    ck_assert_str_eq(err, "--timeout 0: out of range (0, 10]");
    snprintf(err, sizeof err, "--rate -1: out of range"); /* not from the environment */
    ps_config_blame_env(t, 2, 1, none, err, sizeof err);
    ck_assert_str_eq(err, "--rate -1: out of range");
    snprintf(err, sizeof err, "--timeout: empty");
    ps_config_blame_env(t, 2, 1, none, err, sizeof err);
    ck_assert_str_eq(err, "SHARDPS_X_TIMEOUT: empty");
    unsetenv("SHARDPS_X_TIMEOUT");
}
END_TEST

START_TEST(endpoint_syntax_is_checked_before_use)
{
    char err[200];
    const char *good[] = {"tcp://127.0.0.1:9000", "tcp://host-a:1", "tcp://[::1]:65535",
                          "ipc:///tmp/x", "inproc://t"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ck_assert_int_eq(ps_config_check_endpoint("scheduler", good[i], 0, err, sizeof err), 0);
    }
    ck_assert_int_eq(ps_config_check_endpoint("bind", "tcp://0.0.0.0:*", 1, err, sizeof err), 0);
    ck_assert_int_eq(ps_config_check_endpoint("bind", NULL, 1, err, sizeof err), 0);
    const char *bad[] = {"nonsense", "tcp://host", "tcp://:9000", "tcp://h:0", "tcp://h:65536",
                         "tcp://h:9x", "tcp://h:*", "udp://h:1", "ipc://", "tcp://a b:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(ps_config_check_endpoint("scheduler", bad[i], 0, err, sizeof err),
                         PS_EINVAL);
        ck_assert_ptr_nonnull(strstr(err, bad[i]));
        ck_assert_ptr_nonnull(strstr(err, "--scheduler"));
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, no_arguments_keep_the_defaults);
    tcase_add_test(tc, each_type_parses_in_both_spellings);
    tcase_add_test(tc, bool_takes_a_following_value_only_when_it_is_one);
    tcase_add_test(tc, environment_overrides_default_and_flag_overrides_environment);
    tcase_add_test(tc, bad_environment_value_is_einval_with_its_name);
    tcase_add_test(tc, bad_values_are_einval_with_one_line);
    tcase_add_test(tc, unknown_missing_and_stray_are_einval);
    tcase_add_test(tc, rest_gets_the_first_argument_not_consumed);
    tcase_add_test(tc, help_returns_1_and_lists_every_flag);
    tcase_add_test(tc, help_omits_an_empty_string_default);
    tcase_add_test(tc, endpoint_syntax_is_checked_before_use);
    tcase_add_test(tc, a_named_variable_replaces_the_default_one);
    tcase_add_test(tc, parse_argv_reads_no_environment);
    tcase_add_test(tc, an_error_about_a_value_from_the_environment_names_the_variable);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
