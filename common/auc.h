/*
 * common/auc.h - ranking and loss metrics of a binary classifier: ROC AUC and
 * the mean log loss, over flat arrays of scores and 0/1 labels.
 *
 * Used by the click-through-rate model's evaluation and by the data
 * generator's report of its planted model. Double-precision sums; no state,
 * no logging. Does not know where scores come from.
 */
#ifndef PS_COMMON_AUC_H
#define PS_COMMON_AUC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ps_logloss()'s clamp of a probability into [PS_AUC_EPS, 1 - PS_AUC_EPS]. */
#define PS_AUC_EPS 1e-7

/*
 * The area under the ROC curve of score[0..n) against label[0..n): the
 * probability that a random positive scores above a random negative, a tie
 * counting one half (the Mann-Whitney statistic). A label of at least 0.5 is
 * a positive, anything else a negative; a NaN score ranks below every other.
 * Sorts a copy: O(n log n) time, 8n bytes of scratch. Returns a value in
 * [0, 1], or NaN when there is no positive or no negative (n == 0 included)
 * or the scratch cannot be allocated. The arrays are borrowed for the call.
 * Thread-safe.
 */
double ps_auc(const float *score, const float *label, size_t n);

/*
 * The mean binary cross-entropy -(y log p + (1 - y) log(1 - p)) of the
 * probabilities prob[0..n) against label[0..n) (y = 1 when the label is at
 * least 0.5, else 0), each p clamped to [PS_AUC_EPS, 1 - PS_AUC_EPS] first
 * (a NaN p counts as PS_AUC_EPS). Returns NaN when n == 0. The arrays are
 * borrowed for the call. Thread-safe.
 */
double ps_logloss(const float *prob, const float *label, size_t n);

#ifdef __cplusplus
}
#endif
#endif
