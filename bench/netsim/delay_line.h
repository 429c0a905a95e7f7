/*
 * bench/netsim/delay_line.h - a link delay of our own, for kernels without tc netem.
 *
 * A TUN device in a given network namespace and a thread that reads each IP
 * packet the kernel routes into it, holds it for a fixed delay and writes it
 * back, unchanged, into the same device, where the kernel routes it on. The
 * delay is the same for every packet, so one FIFO keeps them in order with
 * release times that only grow. The device is not persistent: it goes when
 * the line is destroyed (its descriptor closed), or with its namespace.
 * Rates are not the line's business: tc tbf shapes the links around it.
 */
#ifndef PS_NETSIM_DELAY_LINE_H
#define PS_NETSIM_DELAY_LINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_delay_line ps_delay_line_t;

/* What the line has done so far. */
typedef struct {
    uint64_t packets; /* written back after the delay */
    uint64_t bytes;   /* of those packets (IP headers included) */
    uint64_t drops;   /* read while the FIFO was full, or refused on the way back */
    double cpu_s;     /* the thread's CPU time (user + system: the kernel's work of
                         reading and re-injecting each packet runs on it) */
} ps_delay_line_stats_t;

/*
 * Creates the TUN device `dev` (IP packets, no extra header) in the network
 * namespace at ns_path (/run/netns/NAME) and starts the thread that delays
 * what it reads by `delay` seconds (> 0). The calling thread's own namespace
 * is left as it was. The device is down and unaddressed: the caller sets it
 * up and routes into it. Returns 0 and the line in *out (caller owns it;
 * destroy with ps_delay_line_destroy()), or PS_ENOTSUP / PS_ENOMEM with
 * why.
 */
int ps_delay_line_new(const char *ns_path, const char *dev, double delay,
                      ps_delay_line_t **out, char *why, size_t whylen);

/* The line's counts so far (any thread; the counts are read without a lock,
 * so one may be a packet behind another). */
void ps_delay_line_stats(const ps_delay_line_t *line, ps_delay_line_stats_t *stats);

/* Stops the thread, drops what it still holds and closes the device.
 * NULL-safe; sets *line to NULL. */
void ps_delay_line_destroy(ps_delay_line_t **line);

#ifdef __cplusplus
}
#endif
#endif
