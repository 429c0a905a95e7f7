/*
 * tests/unit/test_clock.c - the job's clock under time dilation: it runs F
 * times slower than the real one, a wait of it is F times longer in real
 * time, and padded compute lasts on it what it took on the core, F times
 * that for a straggler; undilated, nothing is padded. Bounds from below
 * only: a sleep never ends early, so none of these can fail on a slow or
 * busy machine.
 */
#include <check.h>

#include "common/clock.h"
#include "tests/unit/testutil.h"

/* Spins for about `seconds` of real CPU time of this thread. */
static double s_spin(double seconds)
{
    const double c0 = ps_thread_cpu_seconds();
    volatile double x = 1;
    while (ps_thread_cpu_seconds() - c0 < seconds) {
        x = x * 1.0000001 + 1e-9;
    }
    return ps_thread_cpu_seconds() - c0;
}

START_TEST(the_clock_runs_slower_and_waits_last_longer)
{
    ck_assert(ps_dilation == 1); /* SHARDPS_DILATE not set */
    ck_assert_int_eq(ps_real_ms(250), 250);
    ps_dilation = 4;
    ck_assert_int_eq(ps_real_ms(250), 1000);
    ck_assert_int_eq(ps_real_ms(0), 0);
    ck_assert_int_eq(ps_real_ms(-1), -1); /* forever stays forever */
    const double r0 = ps_real_now(), v0 = ps_now();
    ps_sleep(0.01); /* 10 ms of the job's clock: 40 ms real */
    ck_assert(ps_real_now() - r0 >= 0.04);
    ck_assert(ps_now() - v0 >= 0.01);
    ps_dilation = 1;
}
END_TEST

START_TEST(padded_compute_lasts_its_core_time_and_a_straggler_more)
{
    ps_dilation = 5;
    double start = ps_now();
    double cpu = s_spin(0.02);
    ck_assert(ps_clock_pad(start, cpu, 1) > 0);
    ck_assert(ps_now() - start >= cpu); /* on the job's clock, what the core took */
    start = ps_now();
    cpu = s_spin(0.01);
    ps_clock_pad(start, cpu, 3);
    ck_assert(ps_now() - start >= 3 * cpu);
    ps_dilation = 1;
    start = ps_now();
    cpu = s_spin(0.01);
    ck_assert(ps_clock_pad(start, cpu, 1) == 0); /* undilated, no straggler: no wait */
    start = ps_now();
    ps_sleep(0.01); /* a wait inside the work, then the straggler's factor 2 */
    ps_clock_pad(start, 0, 2);
    ck_assert(ps_now() - start >= 0.02);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = tcase_create("clock");
    tcase_add_test(tc, the_clock_runs_slower_and_waits_last_longer);
    tcase_add_test(tc, padded_compute_lasts_its_core_time_and_a_straggler_more);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
