/*
 * tests/unit/testutil.h - small helpers shared by the unit tests: a seeded
 * random fill and an absolute + relative closeness check. Header-only.
 */
#ifndef PS_TESTS_TESTUTIL_H
#define PS_TESTS_TESTUTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
