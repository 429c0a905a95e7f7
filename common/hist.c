/* common/hist.c - small-integer histogram for staleness telemetry. */
#include "common/hist.h"

#include <string.h>

void ps_hist_init(ps_hist_t *h)
{
    memset(h, 0, sizeof *h);
    h->max = -1;
}

void ps_hist_add(ps_hist_t *h, int64_t v)
{
    if (v < 0) {
        v = 0;
    }
    h->counts[v < PS_HIST_BUCKETS - 1 ? v : PS_HIST_BUCKETS - 1]++;
    h->n++;
    h->sum += (double)v;
    if (v > h->max) {
        h->max = v;
    }
}

void ps_hist_merge(ps_hist_t *dst, const ps_hist_t *src)
{
    for (int i = 0; i < PS_HIST_BUCKETS; i++) {
        dst->counts[i] += src->counts[i];
    }
    dst->n += src->n;
    dst->sum += src->sum;
    if (src->max > dst->max) {
        dst->max = src->max;
    }
}

int64_t ps_hist_quantile(const ps_hist_t *h, double q)
{
    if (!h->n) {
        return 0;
    }
    uint64_t need = (uint64_t)(q * (double)h->n + 0.999999);
    need = need ? need : 1;
    uint64_t seen = 0;
    for (int i = 0; i < PS_HIST_BUCKETS - 1; i++) {
        seen += h->counts[i];
        if (seen >= need) {
            return i;
        }
    }
    return h->max; /* in the overflow bucket: the max is the honest bound */
}

double ps_hist_mean(const ps_hist_t *h)
{
    return h->n ? h->sum / (double)h->n : 0.0;
}
