/*
 * bench/netsim/delay_line.h - a link delay of our own, for kernels without tc netem.
 *
 * A TUN device in a given network namespace and threads that read each IP
 * packet the kernel routes into it, hold it for a fixed delay and write it
 * back, unchanged, into the same device, where the kernel routes it on. The
 * device has a queue per 4 cores of the machine (1 to PS_DELAY_LINE_QUEUES),
 * a thread each: the kernel keeps a flow on one queue (by its hash), so a
 * flow's packets stay in order, and on a large machine one thread's speed
 * (it also does the kernel's work of re-injecting each packet) does not
 * bound the whole cluster's traffic; on a small one, more threads would
 * cost the roles more cores than they spare. The delay is the same
 * for every packet, so a FIFO per queue keeps them in order with release
 * times that only grow. The device is not persistent: it goes when the line
 * is destroyed (its descriptors closed), or with its namespace. Rates are
 * not the line's business: tc tbf shapes the links around it.
 */
#ifndef PS_NETSIM_DELAY_LINE_H
#define PS_NETSIM_DELAY_LINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_delay_line ps_delay_line_t;

/* Queues of the device at most; packets each queue's FIFO holds (the
 * device's own queue is made as long, so that neither drops first). */
enum { PS_DELAY_LINE_QUEUES = 4, PS_DELAY_LINE_SLOTS = 4096 };

/* What the line has done so far. */
typedef struct {
    uint64_t packets; /* written back after the delay */
    uint64_t bytes;   /* of those packets (IP headers included) */
    uint64_t drops;   /* read while a FIFO was full, or refused on the way back (and,
                         from ps_netsim_line_stats, dropped by the device's queue
                         while the line fell behind) */
    int queues;                         /* of the device, a thread each */
    double cpu_s[PS_DELAY_LINE_QUEUES]; /* each queue's thread's CPU time (user +
                                           system: the kernel's work of reading and
                                           re-injecting each packet runs on it) */
} ps_delay_line_stats_t;

/*
 * Creates the TUN device `dev` (IP packets, no extra header) in the network
 * namespace at ns_path (/run/netns/NAME) and starts the threads that delay
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
