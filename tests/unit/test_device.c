/*
 * tests/unit/test_device.c - which GPU a worker uses (kernels/device.h):
 * local rank mod the visible GPUs, device 0 without a local rank or with
 * one GPU visible (a manager's CUDA_VISIBLE_DEVICES per task), --gpu over
 * the rank, the refusals (no GPU, --gpu past the visible ones) with their
 * exact codes, the environment's order of local-rank variables, and the CPU
 * backend's nothing-to-do.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/device.h"
#include "tests/unit/testutil.h"

static int s_pick(int gpu, int local_rank, int count)
{
    char why[256];
    const ps_device_in_t in = {.gpu = gpu, .local_rank = local_rank, .count = count,
                               .visible = "2,3"};
    return ps_device_pick(&in, why, sizeof why);
}

START_TEST(local_rank_spreads_over_the_visible_gpus)
{
    for (int r = 0; r < 8; r++) {
        ck_assert_int_eq(s_pick(-1, r, 4), r % 4);
    }
    ck_assert_int_eq(s_pick(-1, 5, 2), 1);
    ck_assert_int_eq(s_pick(-1, -1, 4), 0); /* no local rank */
    for (int r = 0; r < 4; r++) {
        ck_assert_int_eq(s_pick(-1, r, 1), 0); /* one GPU per task: its own */
    }
}
END_TEST

START_TEST(gpu_flag_wins_and_is_checked)
{
    ck_assert_int_eq(s_pick(2, 1, 4), 2);
    ck_assert_int_eq(s_pick(0, 3, 4), 0);
    char why[256];
    const ps_device_in_t past = {.gpu = 2, .local_rank = 0, .count = 2, .visible = "4,5"};
    ck_assert_int_eq(ps_device_pick(&past, why, sizeof why), PS_EINVAL);
    ck_assert_str_eq(why, "--gpu 2: 2 GPUs are visible here (0 to 1), CUDA_VISIBLE_DEVICES=4,5");
    const ps_device_in_t none = {.gpu = -1, .local_rank = 0, .count = 0, .visible = NULL};
    ck_assert_int_eq(ps_device_pick(&none, why, sizeof why), PS_ENODEV);
    ck_assert_str_eq(why, "no GPU is visible");
    ck_assert_int_eq(s_pick(-1, 0, PS_ENODEV), PS_ENODEV);
}
END_TEST

START_TEST(local_rank_comes_from_the_first_manager_variable)
{
    const char *from = NULL;
    unsetenv("LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    ck_assert_int_eq(ps_device_local_rank(&from), -1);
    ck_assert_str_eq(from, "");
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
    ck_assert_int_eq(ps_device_local_rank(&from), 3);
    ck_assert_str_eq(from, "OMPI_COMM_WORLD_LOCAL_RANK");
    setenv("SLURM_LOCALID", "2", 1);
    ck_assert_int_eq(ps_device_local_rank(&from), 2);
    ck_assert_str_eq(from, "SLURM_LOCALID");
    setenv("LOCAL_RANK", "x1", 1); /* not a number: the next one */
    ck_assert_int_eq(ps_device_local_rank(&from), 2);
    setenv("LOCAL_RANK", "1", 1);
    ck_assert_int_eq(ps_device_local_rank(NULL), 1);
}
END_TEST

START_TEST(the_cpu_backend_uses_no_device)
{
    char what[256] = "x";
    ck_assert_int_eq(ps_device_use(&ps_kernels_cpu, 3, what, sizeof what), 0);
    ck_assert_str_eq(what, "");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("device");
    tcase_add_test(tc, local_rank_spreads_over_the_visible_gpus);
    tcase_add_test(tc, gpu_flag_wins_and_is_checked);
    tcase_add_test(tc, local_rank_comes_from_the_first_manager_variable);
    tcase_add_test(tc, the_cpu_backend_uses_no_device);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
