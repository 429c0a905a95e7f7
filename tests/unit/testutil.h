/*
 * tests/unit/testutil.h - small helpers shared by the unit tests: a seeded
 * random fill, an absolute + relative closeness check, the process's page
 * faults, a reader's peak memory in a child, a file of one repeated member,
 * and main()'s run of a Check suite. Header-only.
 */
#ifndef PS_TESTS_TESTUTIL_H
#define PS_TESTS_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker/rng.h"

/* Fills p[0..n) with uniform values in [lo, hi) from seed. */
static inline void ps_test_fill(float *p, size_t n, float lo, float hi, uint64_t seed)
{
    ps_rng_t r;
    ps_rng_init(&r, seed, 77);
    for (size_t i = 0; i < n; i++) {
        p[i] = lo + (hi - lo) * (float)ps_rng_double(&r);
    }
}

/* |got - want| <= atol + rtol * |want| */
static inline int ps_test_close(double got, double want, double atol, double rtol)
{
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Minor page faults of this process so far. */
static inline long ps_test_minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Runs read(arg) (NULL: nothing) in a child process: the child's peak
 * resident bytes, to compare with those of a child that read nothing;
 * *rc: what read returned (0 or a negative PS_E* code). */
static inline long ps_test_child_peak(int (*read)(const void *arg), const void *arg,
                                      int *rc)
{
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        _exit(read ? -read(arg) & 0xff : 0);
    }
    int status;
    struct rusage ru;
    ck_assert_int_eq(wait4(pid, &status, 0, &ru), pid);
    ck_assert(WIFEXITED(status));
    *rc = -WEXITSTATUS(status);
    return ru.ru_maxrss * 1024L; /* Linux gives kilobytes */
}

/* Writes path: head, then copies of member (a printf format of the copy's
 * index, a long) between commas until about `bytes`, then tail: the hostile
 * documents of the JSON readers' bounds. Returns the file's size. */
static inline size_t ps_test_put_repeated(const char *path, const char *head,
                                          const char *member, const char *tail, long bytes)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    long n = fprintf(f, "%s", head);
    for (long i = 0; n < bytes; i++) {
        n += fprintf(f, i ? "," : "");
        n += fprintf(f, member, i);
    }
    n += fprintf(f, "%s", tail);
    ck_assert_int_eq(fclose(f), 0);
    return (size_t)n;
}

/* Runs every test of s (forked; CK_VERBOSITY sets the output) and frees it.
 * Returns main()'s exit status: EXIT_SUCCESS when every test passed. */
static inline int ps_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
