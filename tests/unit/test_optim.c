/*
 * tests/unit/test_optim.c - ps_optim_sgd_step against the PyTorch SGD formula
 * (dampening 0, no Nesterov) evaluated in float64 over several steps.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/optim.h"
#include "tests/unit/testutil.h"

enum { S_N = 257, S_STEPS = 5 };

/* Runs S_STEPS of the optimizer and of the float64 formula side by side. */
static void s_check(float lr, float mu, float wd, float scale)
{
    float w[S_N], v[S_N], g[S_N];
    double rw[S_N], rv[S_N];
    ps_test_fill(w, S_N, -1, 1, 1);
    memset(v, 0, sizeof(v));
    for (int i = 0; i < S_N; i++) {
        rw[i] = w[i];
        rv[i] = 0.0;
    }
    const ps_optim_sgd_t o = {.lr = lr, .momentum = mu, .weight_decay = wd};
    for (int t = 0; t < S_STEPS; t++) {
        ps_test_fill(g, S_N, -1, 1, 100 + t);
        ps_optim_sgd_step(&o, w, v, g, scale, S_N);
        for (int i = 0; i < S_N; i++) {
            double gg = (double)g[i] * scale + (double)wd * rw[i];
            if (mu != 0.0f) {
                rv[i] = mu * rv[i] + gg;
                gg = rv[i];
            }
            rw[i] -= lr * gg;
        }
    }
    for (int i = 0; i < S_N; i++) {
        ck_assert_msg(ps_test_close(w[i], rw[i], 1e-6, 1e-5), "w[%d]=%g want %g", i, w[i],
                      rw[i]);
        if (mu != 0.0f) {
            ck_assert(ps_test_close(v[i], rv[i], 1e-6, 1e-5));
        }
    }
}

START_TEST(plain_sgd_matches_formula)
{
    s_check(0.1f, 0.0f, 0.0f, 1.0f);
}
END_TEST

START_TEST(momentum_matches_formula)
{
    s_check(0.05f, 0.9f, 0.0f, 1.0f);
}
END_TEST

START_TEST(momentum_with_weight_decay_and_scale_matches_formula)
{
    s_check(0.05f, 0.9f, 5e-4f, 0.25f);
}
END_TEST

START_TEST(plain_sgd_leaves_velocity_untouched)
{
    float w[4] = {1, 2, 3, 4}, v[4] = {7, 7, 7, 7}, g[4] = {1, 1, 1, 1};
    const ps_optim_sgd_t o = {.lr = 0.5f, .momentum = 0.0f, .weight_decay = 0.0f};
    ps_optim_sgd_step(&o, w, v, g, 1.0f, 4);
    ck_assert_float_eq(w[0], 0.5f);
    ck_assert_float_eq(v[3], 7.0f);
    /* n == 0 touches nothing */
    ps_optim_sgd_step(&o, w, v, g, 1.0f, 0);
    ck_assert_float_eq(w[0], 0.5f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("sgd");
    tcase_add_test(tc, plain_sgd_matches_formula);
    tcase_add_test(tc, momentum_matches_formula);
    tcase_add_test(tc, momentum_with_weight_decay_and_scale_matches_formula);
    tcase_add_test(tc, plain_sgd_leaves_velocity_untouched);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
