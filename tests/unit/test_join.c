/*
 * tests/unit/test_join.c - a resume with another worker count starts at the
 * step of the same data position (ps_join_map_step, scheduler/join.h): the
 * same count keeps the step; otherwise the new job starts its epoch at the
 * first global batch not wholly seen, the next epoch when that is past the
 * end; a job of less than one step per epoch keeps the step.
 */
#include <check.h>
#include <stdint.h>

#include "scheduler/join.h"
#include "tests/unit/testutil.h"

START_TEST(the_same_worker_count_keeps_the_step)
{
    for (int M = 1; M <= 8; M++) {
        for (int64_t step = 0; step < 500; step += 7) {
            ck_assert_int_eq(ps_join_map_step(step, M, M, 32, 60000), step);
        }
    }
}
END_TEST

START_TEST(steps_map_to_the_first_batch_not_wholly_seen)
{
    /* 1000 samples, batch 10: 2 workers take 50 steps an epoch, 1 takes 100, 3 take 33 */
    ck_assert_int_eq(ps_join_map_step(10, 2, 1, 10, 1000), 20);   /* 200 samples seen */
    ck_assert_int_eq(ps_join_map_step(10, 1, 2, 10, 1000), 5);    /* 100 seen */
    ck_assert_int_eq(ps_join_map_step(11, 1, 2, 10, 1000), 6);    /* 110 seen: 100-119 not all */
    ck_assert_int_eq(ps_join_map_step(10, 2, 3, 10, 1000), 7);    /* 200 seen: ceil(20/3) */
    ck_assert_int_eq(ps_join_map_step(60, 2, 3, 10, 1000), 33 + 7); /* epoch 1, step 10 of it */
    ck_assert_int_eq(ps_join_map_step(99, 1, 2, 10, 1000), 50);   /* past the end: next epoch */
    ck_assert_int_eq(ps_join_map_step(49, 2, 3, 10, 1000), 33);   /* ceil(98/3) = 33: too */
    ck_assert_int_eq(ps_join_map_step(0, 4, 3, 10, 1000), 0);
}
END_TEST

START_TEST(the_mapped_step_skips_no_sample_and_repeats_less_than_a_batch)
{
    const int batch = 8;
    const uint64_t samples = 6000;
    for (int M = 1; M <= 6; M++) {
        for (int N = 1; N <= 6; N++) {
            const int64_t spe_m = (int64_t)(samples / ((uint64_t)M * batch));
            const int64_t spe_n = (int64_t)(samples / ((uint64_t)N * batch));
            for (int64_t step = 0; step < 3 * spe_m; step++) {
                const int64_t got = ps_join_map_step(step, M, N, batch, samples);
                const int64_t epoch = step / spe_m, k = step % spe_m;
                const int64_t e = got / spe_n, kn = got % spe_n;
                if (e == epoch) { /* within the epoch: minimal kn with kn*N >= k*M */
                    ck_assert_int_ge(kn * N, k * M);
                    ck_assert_int_lt((kn - 1) * N, k * M);
                } else { /* past the new epoch's last whole global batch */
                    ck_assert_int_eq(e, epoch + 1);
                    ck_assert_int_eq(kn, 0);
                    ck_assert_int_gt(k * M, (spe_n - 1) * N);
                }
            }
        }
    }
}
END_TEST

START_TEST(less_than_one_step_an_epoch_keeps_the_step)
{
    ck_assert_int_eq(ps_join_map_step(5, 2, 4, 100, 300), 5); /* 4 x 100 > 300 */
    ck_assert_int_eq(ps_join_map_step(5, 4, 2, 100, 300), 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("join");
    TCase *tc = tcase_create("join");
    tcase_add_test(tc, the_same_worker_count_keeps_the_step);
    tcase_add_test(tc, steps_map_to_the_first_batch_not_wholly_seen);
    tcase_add_test(tc, the_mapped_step_skips_no_sample_and_repeats_less_than_a_batch);
    tcase_add_test(tc, less_than_one_step_an_epoch_keeps_the_step);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
