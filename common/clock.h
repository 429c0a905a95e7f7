/* common/clock.h - monotonic time and process CPU time in seconds, for timeouts,
 * throughput and cost. */
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

/* CPU seconds this process has used, all threads, user and system. */
static inline double ps_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef __cplusplus
}
#endif
#endif
