/*
 * common/auc.c - ROC AUC by one sort, and the clamped log loss.
 *
 * AUC: each sample becomes one 64-bit word, the score's bits mapped so that
 * unsigned order is float order (NaN lowest, -0 = +0) above the label bit;
 * after sorting, each run of equal scores adds (negatives below it) x
 * (positives in it) plus half of (positives x negatives) in it: the
 * Mann-Whitney U with ties counted half (Hanley & McNeil 1982).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/auc.h"

/* The score's bits in an order where unsigned comparison is float order:
 * negatives flipped whole, positives with the sign bit set; NaN is 0. */
static uint32_t s_order_bits(float s)
{
    if (isnan(s)) {
        return 0;
    }
    if (s == 0.0f) {
        s = 0.0f; /* -0 ties with +0 */
    }
    uint32_t b;
    memcpy(&b, &s, sizeof b);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

static int s_cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

double ps_auc(const float *score, const float *label, size_t n)
{
    if (n == 0) {
        return NAN;
    }
    uint64_t *w = malloc(n * sizeof *w);
    if (!w) {
        return NAN;
    }
    for (size_t i = 0; i < n; i++) {
        w[i] = ((uint64_t)s_order_bits(score[i]) << 1) | (label[i] >= 0.5f);
    }
    qsort(w, n, sizeof *w, s_cmp_u64);
    double u = 0, neg_below = 0, npos = 0;
    for (size_t i = 0; i < n;) {
        const uint64_t key = w[i] >> 1;
        double pos = 0, neg = 0;
        for (; i < n && (w[i] >> 1) == key; i++) {
            if (w[i] & 1) {
                pos += 1;
            } else {
                neg += 1;
            }
        }
        u += pos * neg_below + 0.5 * pos * neg;
        neg_below += neg;
        npos += pos;
    }
    free(w);
    if (npos == 0 || neg_below == 0) {
        return NAN;
    }
    return u / (npos * neg_below);
}

double ps_logloss(const float *prob, const float *label, size_t n)
{
    if (n == 0) {
        return NAN;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double p = prob[i];
        if (!(p >= PS_AUC_EPS)) { /* NaN too */
            p = PS_AUC_EPS;
        } else if (p > 1.0 - PS_AUC_EPS) {
            p = 1.0 - PS_AUC_EPS;
        }
        sum -= label[i] >= 0.5f ? log(p) : log1p(-p);
    }
    return sum / (double)n;
}
