/*
 * common/hist.h - a histogram of small non-negative integers (staleness).
 *
 * Values 0 .. PS_HIST_BUCKETS-2 each have a bucket; larger ones share the
 * last. The exact maximum and sum are kept beside, so the mean and the max
 * are exact and percentiles are exact below the last bucket. Plain data.
 */
#ifndef PS_COMMON_HIST_H
#define PS_COMMON_HIST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PS_HIST_BUCKETS = 64 };

typedef struct {
    uint64_t counts[PS_HIST_BUCKETS]; /* counts[i]: values == i; last: >= PS_HIST_BUCKETS-1 */
    uint64_t n;                       /* values added */
    double sum;                       /* their sum */
    int64_t max;                      /* the largest; -1 when empty */
} ps_hist_t;

/* Empties h. */
void ps_hist_init(ps_hist_t *h);

/* Adds one value (negative values count as 0). */
void ps_hist_add(ps_hist_t *h, int64_t v);

/* Adds every value of src into dst. */
void ps_hist_merge(ps_hist_t *dst, const ps_hist_t *src);

/* The smallest value v with at least q (0..1) of the values <= v; 0 when empty. */
int64_t ps_hist_quantile(const ps_hist_t *h, double q);

/* The mean; 0 when empty. */
double ps_hist_mean(const ps_hist_t *h);

#ifdef __cplusplus
}
#endif
#endif
