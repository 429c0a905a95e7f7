/* common/clock.h - monotonic time in seconds, for timeouts and throughput. */
#ifndef PS_COMMON_CLOCK_H
#define PS_COMMON_CLOCK_H

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on the monotonic clock. Thread-safe. */
static inline double ps_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef __cplusplus
}
#endif
#endif
