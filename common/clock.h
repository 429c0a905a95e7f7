/* common/clock.h - monotonic time and process CPU time in seconds, for timeouts,
 * throughput and cost, on the job's clock: the real one, or under time
 * dilation one that runs F times slower. */
#ifndef PS_COMMON_CLOCK_H
#define PS_COMMON_CLOCK_H

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Time dilation: SHARDPS_DILATE=F (F >= 1, set by the simulated cluster for
 * every role it runs, `shardps-bench train --net ... --dilate F`) makes this
 * process's clock run F times slower than the real one. Every time the
 * programs take, wait or compare (timeouts, heartbeats, paces, intervals,
 * rates) is on this clock, so a job on links of RATE/F whose workers'
 * compute is padded to F times its length (ps_clock_pad) behaves, on it,
 * as the job on links of RATE: the cores are asked F times less per second
 * of it. CPU time (ps_cpu_seconds) stays real: the cost of messages is not
 * dilated. Read once at start (a bad value ends the program with a one-line
 * error); 1 where the variable is not set.
 */
extern double ps_dilation;

/* Real seconds on the monotonic clock. Thread-safe. */
static inline double ps_real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds on the job's clock (the monotonic one, dilated). Thread-safe. */
static inline double ps_now(void)
{
    return ps_real_now() / ps_dilation;
}

/* Real milliseconds of a wait of ms on the job's clock (negative: forever,
 * as poll() takes it; 0 stays 0). */
static inline long ps_real_ms(long ms)
{
    return ms <= 0 ? ms : (long)((double)ms * ps_dilation);
}

/* Sleeps seconds of the job's clock (none when not positive). */
void ps_sleep(double seconds);

/* Pads work begun at `start` (ps_now()), of which `cpu` real seconds were
 * the calling thread's compute (the rest, its waits, already on the job's
 * clock), so that its compute lasts on the job's clock what it took on the
 * core (under dilation F it took 1/F of that), and the whole lasts `factor`
 * times that. Returns the seconds of the job's clock it waited. */
double ps_clock_pad(double start, double cpu, double factor);

/* CPU seconds this process has used, all threads, user and system: real,
 * never dilated. */
static inline double ps_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds the calling thread has used: real, never dilated. */
static inline double ps_thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef __cplusplus
}
#endif
#endif
