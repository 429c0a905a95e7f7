/*
 * tests/unit/test_proc.c - deploy/proc.h, the child processes of the launcher
 * and the bench: captured output split into lines (partial and over-long lines
 * included), exit codes and their words, exec failures, log files, waiting
 * with a timeout, killing after one, signals to a process group reaching the
 * grandchildren, forked functions, the pipe helpers and finding executables.
 * Runs /bin/sh; no network.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "deploy/proc.h"
#include "tests/unit/testutil.h"

/* Lines seen on one stream, joined with '|'. */
typedef struct {
    char text[32768];
    int n;
} s_seen_t;

static void s_on_line(void *ctx, const char *line, size_t n)
{
    s_seen_t *s = ctx;
    size_t used = strlen(s->text);
    snprintf(s->text + used, sizeof s->text - used, "%s%.*s", s->n++ ? "|" : "", (int)n,
             line);
}

/* Starts `sh -c script` with its output captured, reads both streams to their
 * end with lines of at most max_line bytes, and returns its exit code. */
static int s_capture(const char *script, size_t max_line, s_seen_t *out, s_seen_t *err)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    ps_proc_spec_t spec = {.argv = argv,
                           .flags = PS_PROC_CAPTURE | PS_PROC_NO_STDIN | PS_PROC_PDEATH,
                           .prog = "test_proc"};
    ps_proc_t p;
    char why[256];
    ck_assert_int_eq(ps_proc_spawn(&spec, &p, why, sizeof why), 0);
    ps_proc_lines_t l[2] = {{.fd = p.out[0]}, {.fd = p.out[1]}};
    s_seen_t *seen[2] = {out, err};
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    while (l[0].fd >= 0 || l[1].fd >= 0) {
        struct pollfd pf[2] = {{l[0].fd, POLLIN, 0}, {l[1].fd, POLLIN, 0}};
        ck_assert_int_gt(poll(pf, 2, 5000), 0);
        for (int k = 0; k < 2; k++) {
            if (pf[k].revents) {
                ck_assert_int_ne(ps_proc_lines_read(&l[k], max_line, s_on_line, seen[k]),
                                 PS_ENOMEM);
            }
        }
    }
    ps_proc_lines_fini(&l[0]);
    ps_proc_lines_fini(&l[1]);
    int status;
    ck_assert_int_eq(ps_proc_wait(p.pid, 5.0, &status), p.pid);
    return ps_proc_exit_code(status);
}

START_TEST(capture_splits_both_streams_into_lines)
{
    s_seen_t out, err;
    int rc = s_capture("echo one; echo two >&2; echo three; printf partial", 4096, &out,
                       &err);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(out.text, "one|three|partial");
    ck_assert_str_eq(err.text, "two");
}
END_TEST

START_TEST(capture_splits_a_line_longer_than_the_limit)
{
    s_seen_t out, err;
    ck_assert_int_eq(s_capture("head -c 10000 /dev/zero | tr '\\0' x; echo; echo y", 4096,
                               &out, &err),
                     0);
    ck_assert_int_eq(out.n, 4); /* 4096 + 4096 + 1808, then "y" */
    ck_assert_uint_eq(strlen(out.text), 10000 + 3 + 1);
    ck_assert_str_eq(out.text + strlen(out.text) - 2, "|y");
    ck_assert_int_eq(out.text[4096], '|');
}
END_TEST

START_TEST(capture_gives_the_child_no_stdin)
{
    s_seen_t out, err;
    ck_assert_int_eq(s_capture("cat; echo done", 4096, &out, &err), 0);
    ck_assert_str_eq(out.text, "done");
}
END_TEST

START_TEST(run_returns_exit_codes_and_signals)
{
    char *ex3[] = {"/bin/sh", "-c", "exit 3", NULL};
    char *term[] = {"/bin/sh", "-c", "kill -TERM $$", NULL};
    char why[256];
    ck_assert_int_eq(ps_proc_run(&(ps_proc_spec_t){.argv = ex3}, why, sizeof why), 3);
    ck_assert_int_eq(ps_proc_run(&(ps_proc_spec_t){.argv = term}, why, sizeof why),
                     128 + SIGTERM);
}
END_TEST

START_TEST(describe_says_how_a_child_ended)
{
    char how[96];
    ps_proc_describe(1 << 8, how, sizeof how);
    ck_assert_str_eq(how, "exited with status 1");
    ps_proc_describe(SIGKILL, how, sizeof how);
    ck_assert_str_eq(how, "killed by signal 9 (SIGKILL)");
    ck_assert_int_eq(ps_proc_exit_code(2 << 8), 2);
    ck_assert_int_eq(ps_proc_exit_code(SIGKILL), 128 + SIGKILL);
}
END_TEST

/* A fresh temporary file name (the file is removed). */
static void s_tmpname(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/test_proc.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(buf);
    ck_assert_int_ge(fd, 0);
    close(fd);
    unlink(buf);
}

START_TEST(log_file_is_appended_to_with_both_streams)
{
    char log[256], why[256], *text = NULL;
    s_tmpname(log, sizeof log);
    char *argv[] = {"/bin/sh", "-c", "echo out; echo err >&2", NULL};
    ps_proc_spec_t spec = {.argv = argv, .log_path = log};
    ck_assert_int_eq(ps_proc_run(&spec, why, sizeof why), 0);
    ck_assert_int_eq(ps_proc_run(&spec, why, sizeof why), 0);
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    text = calloc(1, 256);
    ck_assert_uint_eq(fread(text, 1, 255, f), 16);
    fclose(f);
    ck_assert_str_eq(text, "out\nerr\nout\nerr\n");
    free(text);
    unlink(log);
    spec.log_path = "/nonexistent-dir/x.log";
    ck_assert_int_eq(ps_proc_run(&spec, why, sizeof why), PS_EIO);
    ck_assert_ptr_nonnull(strstr(why, "/nonexistent-dir/x.log"));
}
END_TEST

START_TEST(exec_failure_exits_127_and_says_why)
{
    char log[256], why[256], text[256] = "";
    s_tmpname(log, sizeof log);
    char *argv[] = {"/nonexistent/prog", NULL};
    ps_proc_spec_t spec = {.argv = argv, .log_path = log, .prog = "test_proc"};
    ck_assert_int_eq(ps_proc_run(&spec, why, sizeof why), 127);
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_gt(fread(text, 1, sizeof text - 1, f), 0);
    fclose(f);
    unlink(log);
    ck_assert_str_eq(text, "test_proc: cannot execute /nonexistent/prog: No such file or "
                           "directory\n");
}
END_TEST

START_TEST(wait_times_out_and_reap_kills)
{
    char *argv[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    ps_proc_t p;
    char why[256];
    int status;
    ck_assert_int_eq(ps_proc_spawn(&(ps_proc_spec_t){.argv = argv}, &p, why, sizeof why), 0);
    double t0 = ps_now();
    ck_assert_int_eq(ps_proc_wait(p.pid, 0.1, &status), 0);
    ck_assert(ps_now() - t0 >= 0.1);
    ck_assert_int_eq(ps_proc_reap(p.pid, 0.05), 128 + SIGKILL);
    ck_assert_int_eq(ps_proc_wait(p.pid, 0, &status), PS_EIO); /* gone */
    ck_assert_int_eq(ps_proc_reap(0, 1.0), 0);
}
END_TEST

/* Is pid gone (or a zombie nobody has reaped yet)? */
static int s_gone(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return 1;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'Z';
}

START_TEST(group_signal_reaches_grandchildren)
{
    char *argv[] = {"/bin/sh", "-c", "sleep 30 & echo $!; wait", NULL};
    ps_proc_spec_t spec = {.argv = argv, .flags = PS_PROC_GROUP | PS_PROC_CAPTURE};
    ps_proc_t p;
    char why[256], buf[32] = "";
    ck_assert_int_eq(ps_proc_spawn(&spec, &p, why, sizeof why), 0);
    struct pollfd pf = {p.out[0], POLLIN, 0};
    ck_assert_int_gt(poll(&pf, 1, 5000), 0);
    ck_assert_int_gt(read(p.out[0], buf, sizeof buf - 1), 0);
    pid_t grandchild = (pid_t)atoi(buf);
    ck_assert_int_gt(grandchild, 0);
    ck_assert(!s_gone(grandchild));
    ps_proc_signal_group(p.pid, SIGTERM);
    ck_assert_int_eq(ps_proc_reap(p.pid, 5.0), 128 + SIGTERM);
    double until = ps_now() + 5.0;
    while (!s_gone(grandchild) && ps_now() < until) {
        usleep(10000);
    }
    ck_assert(s_gone(grandchild));
    close(p.out[0]);
    close(p.out[1]);
}
END_TEST

static int s_seven(const void *arg)
{
    return *(const int *)arg;
}

START_TEST(fork_runs_a_function_and_exits_with_its_result)
{
    int seven = 7;
    pid_t pid = ps_proc_fork(s_seven, &seven);
    ck_assert_int_gt(pid, 0);
    ck_assert_int_eq(ps_proc_reap(pid, 5.0), 7);
}
END_TEST

START_TEST(read_all_times_out_then_sees_the_writer_go)
{
    int fds[2];
    char buf[8];
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(ps_proc_read_all(fds[0], buf, sizeof buf, 0.05), PS_ETIMEDOUT);
    ck_assert_int_eq(ps_proc_write_all(fds[1], "abcd", 4), 0);
    ck_assert_int_eq(ps_proc_read_all(fds[0], buf, 4, 1.0), 0);
    ck_assert_int_eq(memcmp(buf, "abcd", 4), 0);
    ck_assert_int_eq(ps_proc_write_all(fds[1], "ef", 2), 0);
    close(fds[1]);
    ck_assert_int_eq(ps_proc_read_all(fds[0], buf, sizeof buf, -1), PS_ECLOSED);
    close(fds[0]);
}
END_TEST

START_TEST(find_exe_looks_on_path)
{
    char out[4096];
    ck_assert_int_eq(ps_proc_find_exe("sh", NULL, out, sizeof out), 0);
    ck_assert(ps_proc_is_exe(out));
    ck_assert_int_eq(ps_proc_find_exe("no-such-program-here", "deploy", out, sizeof out),
                     PS_ENOENT);
    ck_assert(!ps_proc_is_exe("/"));
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("proc");
    TCase *tc = tcase_create("proc");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, capture_splits_both_streams_into_lines);
    tcase_add_test(tc, capture_splits_a_line_longer_than_the_limit);
    tcase_add_test(tc, capture_gives_the_child_no_stdin);
    tcase_add_test(tc, run_returns_exit_codes_and_signals);
    tcase_add_test(tc, describe_says_how_a_child_ended);
    tcase_add_test(tc, log_file_is_appended_to_with_both_streams);
    tcase_add_test(tc, exec_failure_exits_127_and_says_why);
    tcase_add_test(tc, wait_times_out_and_reap_kills);
    tcase_add_test(tc, group_signal_reaches_grandchildren);
    tcase_add_test(tc, fork_runs_a_function_and_exits_with_its_result);
    tcase_add_test(tc, read_all_times_out_then_sees_the_writer_go);
    tcase_add_test(tc, find_exe_looks_on_path);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
