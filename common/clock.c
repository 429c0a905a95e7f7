/* common/clock.c - the job's clock: the time dilation factor, read from
 * SHARDPS_DILATE once at start, and sleeping on that clock (see clock.h). */
#include "common/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

double ps_dilation = 1;

/* Reads SHARDPS_DILATE before main() runs: every clock reading, in every
 * thread, sees one factor from the start. */
__attribute__((constructor)) static void s_read_dilation(void)
{
    const char *v = getenv("SHARDPS_DILATE");
    if (!v || !*v) {
        return;
    }
    char *end;
    errno = 0;
    const double f = strtod(v, &end);
    if (errno || *end || !(f >= 1 && f <= 1000)) {
        fprintf(stderr, "%s: error: SHARDPS_DILATE=%s: expected a factor from 1 to 1000\n",
                program_invocation_short_name, v);
        exit(2);
    }
    ps_dilation = f;
}

void ps_sleep(double seconds)
{
    const double real = seconds * ps_dilation;
    if (real <= 0) {
        return;
    }
    /* a signal ends it early, as it would a plain nanosleep: stops stay prompt */
    nanosleep(&(struct timespec){(time_t)real, (long)((real - (double)(time_t)real) * 1e9)},
              NULL);
}

double ps_clock_pad(double start, double cpu, double factor)
{
    const double now = ps_now(), undilated = now - start + cpu * (1 - 1 / ps_dilation);
    const double wait = start + undilated * factor - now;
    ps_sleep(wait);
    return wait > 0 ? wait : 0;
}
