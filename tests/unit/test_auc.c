/*
 * tests/unit/test_auc.c - ROC AUC and log loss: perfect, inverse and random
 * rankings, ties counted half, NaN and signed-zero scores, one class only,
 * and both against a naive float64 reference (all positive-negative pairs)
 * on random data with many ties.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "common/auc.h"
#include "tests/unit/testutil.h"
#include "worker/rng.h"

/* The definition: over all (positive, negative) pairs, 1 when the positive
 * scores higher, 1/2 on a tie. O(n^2). */
static double s_auc_pairs(const float *s, const float *y, size_t n)
{
    double u = 0, pairs = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] < 0.5f) {
            continue;
        }
        for (size_t j = 0; j < n; j++) {
            if (y[j] >= 0.5f) {
                continue;
            }
            pairs += 1;
            u += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
        }
    }
    return u / pairs;
}

START_TEST(auc_perfect_and_inverse_rankings)
{
    enum { N = 1000 };
    float s[N], y[N], inv[N];
    for (int i = 0; i < N; i++) {
        s[i] = (float)i / N;
        inv[i] = -s[i];
        y[i] = i >= 700; /* the 300 highest scores are the positives */
    }
    ck_assert_double_eq(ps_auc(s, y, N), 1.0);
    ck_assert_double_eq(ps_auc(inv, y, N), 0.0);
    /* order of the input does not matter */
    float s2[4] = {0.9f, 0.1f, 0.8f, 0.2f}, y2[4] = {1, 0, 1, 0};
    ck_assert_double_eq(ps_auc(s2, y2, 4), 1.0);
}
END_TEST

START_TEST(auc_ties_count_half)
{
    float same[6] = {0.3f, 0.3f, 0.3f, 0.3f, 0.3f, 0.3f}, y[6] = {1, 0, 1, 0, 0, 1};
    ck_assert_double_eq(ps_auc(same, y, 6), 0.5);
    /* positives {0.5, 0.5}, negatives {0.5, 0.2}: pairs 1/2, 1, 1/2, 1 */
    float s[4] = {0.5f, 0.5f, 0.5f, 0.2f}, y2[4] = {1, 1, 0, 0};
    ck_assert_double_eq(ps_auc(s, y2, 4), 0.75);
    /* -0 and +0 are one score */
    float z[2] = {-0.0f, 0.0f}, y3[2] = {1, 0};
    ck_assert_double_eq(ps_auc(z, y3, 2), 0.5);
}
END_TEST

START_TEST(auc_random_scores_near_half)
{
    enum { N = 200000 };
    float *s = malloc(N * sizeof *s), *y = malloc(N * sizeof *y);
    ps_test_fill(s, N, -1, 1, 3);
    ps_test_fill(y, N, 0, 1, 4); /* >= 0.5: positive, independent of s */
    const double auc = ps_auc(s, y, N);
    ck_assert_msg(fabs(auc - 0.5) < 0.01, "auc %g", auc);
    free(s);
    free(y);
}
END_TEST

START_TEST(auc_matches_all_pairs_on_random_data_with_ties)
{
    enum { N = 1500 };
    float s[N], y[N];
    ps_rng_t r;
    ps_rng_init(&r, 11, 0);
    for (int round = 0; round < 20; round++) {
        const int levels = 2 + round * 7; /* few levels: many ties */
        for (int i = 0; i < N; i++) {
            const int level = (int)ps_rng_below(&r, (uint64_t)levels);
            s[i] = (float)level - levels / 2.0f;
            /* labels leaning on the score, so the AUC is not 1/2 */
            y[i] = ps_rng_double(&r) < 0.2 + 0.6 * level / levels;
        }
        const double want = s_auc_pairs(s, y, N), got = ps_auc(s, y, N);
        ck_assert_msg(ps_test_close(got, want, 1e-12, 1e-12), "round %d: %.15g vs %.15g",
                      round, got, want);
        ck_assert(want > 0.55);
    }
}
END_TEST

START_TEST(auc_nan_scores_rank_lowest)
{
    float s[4] = {NAN, 0.1f, -INFINITY, 0.2f}, y[4] = {0, 1, 0, 1};
    ck_assert_double_eq(ps_auc(s, y, 4), 1.0);
    float s2[2] = {NAN, -INFINITY}, y2[2] = {0, 1};
    ck_assert_double_eq(ps_auc(s2, y2, 2), 1.0);
}
END_TEST

START_TEST(auc_one_class_or_empty_is_nan)
{
    float s[3] = {0.1f, 0.2f, 0.3f}, ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
    ck_assert(isnan(ps_auc(s, ones, 3)));
    ck_assert(isnan(ps_auc(s, zeros, 3)));
    ck_assert(isnan(ps_auc(s, ones, 0)));
    ck_assert(isnan(ps_auc(NULL, NULL, 0)));
}
END_TEST

START_TEST(logloss_matches_reference_and_clamps)
{
    enum { N = 4096 };
    float p[N], y[N];
    ps_test_fill(p, N, 0.01f, 0.99f, 5);
    ps_test_fill(y, N, 0, 1, 6);
    double want = 0;
    for (int i = 0; i < N; i++) {
        y[i] = y[i] >= 0.5f;
        want += y[i] ? -log((double)p[i]) : -log(1.0 - (double)p[i]);
    }
    ck_assert(ps_test_close(ps_logloss(p, y, N), want / N, 1e-12, 1e-12));

    /* sure and wrong: the clamp bounds the loss at -log(1e-7) */
    float q[4] = {0.0f, 1.0f, NAN, 0.5f}, l[4] = {1, 0, 1, 1};
    const double big = -log(PS_AUC_EPS);
    ck_assert(ps_test_close(ps_logloss(q, l, 1), big, 1e-9, 1e-9));
    ck_assert(ps_test_close(ps_logloss(q + 1, l + 1, 1), -log1p(-(1.0 - PS_AUC_EPS)), 1e-6,
                            1e-6));
    ck_assert(ps_test_close(ps_logloss(q + 2, l + 2, 1), big, 1e-9, 1e-9));
    ck_assert(ps_test_close(ps_logloss(q + 3, l + 3, 1), log(2.0), 1e-12, 1e-12));
    /* sure and right: about 0 */
    float r[2] = {1.0f, 0.0f}, lr[2] = {1, 0};
    ck_assert(ps_logloss(r, lr, 2) < 1e-6);
    ck_assert(isnan(ps_logloss(r, lr, 0)));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("auc");
    TCase *tc = tcase_create("metrics");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, auc_perfect_and_inverse_rankings);
    tcase_add_test(tc, auc_ties_count_half);
    tcase_add_test(tc, auc_random_scores_near_half);
    tcase_add_test(tc, auc_matches_all_pairs_on_random_data_with_ties);
    tcase_add_test(tc, auc_nan_scores_rank_lowest);
    tcase_add_test(tc, auc_one_class_or_empty_is_nan);
    tcase_add_test(tc, logloss_matches_reference_and_clamps);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
