/*
 * bench/netsim/netsim.h - a simulated cluster network on one machine.
 *
 * One network namespace per role (the scheduler, each server, each worker),
 * each with its own veth link to a hub namespace that routes between the
 * links, as if every role were its own host on a switch. Role i is named
 * "c" (i = 0), "s0".. (the servers), then "w0".. (the workers); its
 * namespace is PREFIX + name (PREFIX "spsb" + our pid), its address
 * 10.99.x.y. The root namespace is never touched.
 *
 * With a spec "RATE[,DELAY]", each link is shaped with tc tbf to RATE on both
 * ends' egress (the role's side: what it sends; the hub's side: what it
 * receives), so each role has RATE up and RATE down, as separate hosts would.
 * DELAY (one way between any two roles) is a delay line of our own
 * (delay_line.h; tc netem is not in every kernel): the hub routes every packet
 * from a role through a TUN device whose thread hands it back DELAY later.
 * Without a spec the links are not shaped. Every device has a 65000-byte MTU,
 * so that a TCP segment is one packet all the way, unless the spec ends in
 * ",mtu=BYTES": then every device's MTU and TCP's largest segment (GSO) are
 * BYTES, as on real links, where a packet is a few microseconds of a link,
 * not half a millisecond (a link end forwards a packet once it has all of
 * it), and the delay line moves more packets. Each link end queues 50 ms of
 * its rate, or ",queue=BYTES" bytes: runs that compare rates give it in
 * bytes, since a queue in time holds a tenth of the bytes at a tenth of the
 * rate.
 *
 * Users: `shardps-bench train --net` (jobs on it: job.h), and the integration
 * tests through `shardps-netsim` (main.c), which hold the network while they
 * run roles in it by hand. Not thread-safe: one thread makes and removes it.
 */
#ifndef PS_NETSIM_NETSIM_H
#define PS_NETSIM_NETSIM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/netsim/delay_line.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_netsim ps_netsim_t;

/* Set by the handler ps_netsim_catch_signals() installs (SIGINT, SIGTERM,
 * SIGHUP) to the signal's number: whoever holds a network stops what runs
 * on it and removes it. */
extern volatile sig_atomic_t ps_netsim_stop;

/* Installs the handler that sets ps_netsim_stop. */
void ps_netsim_catch_signals(void);

/* Checks "RATE[,DELAY][,mtu=BYTES][,queue=BYTES]" (RATE: a number and bit,
 * kbit, mbit, gbit, at least 1kbit; DELAY: a number and us, ms, s, at most
 * 1s; mtu 1280 to 65000; queue 16384 to 2^30). Returns 0, or PS_EINVAL with
 * why (which part is wrong) in err. */
int ps_netsim_parse(const char *spec, char *err, size_t errlen);

/*
 * Makes the namespaces for a scheduler, `servers` servers and `workers`
 * workers, shaped by spec (NULL: not shaped) and dilated `dilate` times
 * (1: not; else the links shaped to RATE / dilate and DELAY and the queues'
 * 50 ms dilate times longer, for roles run with SHARDPS_DILATE=dilate:
 * common/clock.h), with the commands that make them
 * and their output appended to log_path (copied). Returns 0 and the network in
 * *out (caller owns it; destroy with ps_netsim_destroy()), PS_EINVAL on a bad
 * spec or count, or PS_ENOTSUP with the reason in why when the network cannot
 * be made here (not root, no ip, no veth, no TUN device...), everything made
 * so far removed.
 */
int ps_netsim_new(const char *spec, double dilate, int servers, int workers,
                  const char *log_path, ps_netsim_t **out, char *why, size_t whylen);

/* The most time dilation a network takes (--dilate). */
enum { PS_NETSIM_MAX_DILATE = 1000 };

/* What was simulated, in words, for the output and the tables: "1gbit per
 * link, each direction (tc tbf), and 0.2ms one way between roles (...)".
 * Borrowed; valid until the network is destroyed. */
const char *ps_netsim_note(const ps_netsim_t *net);

/* The namespaces' common name prefix ("spsb1234"). Borrowed, as the note. */
const char *ps_netsim_prefix(const ps_netsim_t *net);

/* The servers and workers the network was made for. */
int ps_netsim_servers(const ps_netsim_t *net);
int ps_netsim_workers(const ps_netsim_t *net);

/* Role i (0 scheduler, 1..servers the servers, then the workers): its name
 * ("c", "s0", "w1"), namespace and address (dotted IPv4). Borrowed, as the
 * note; NULL when i is out of range. */
const char *ps_netsim_name(const ps_netsim_t *net, int i);
const char *ps_netsim_ns(const ps_netsim_t *net, int i);
const char *ps_netsim_addr(const ps_netsim_t *net, int i);

/* The ip program the network was made with (for `ip netns exec`). */
const char *ps_netsim_ip(const ps_netsim_t *net);

/* What the delay line has done so far. Returns 0, or PS_ENOENT when the
 * network has none (no DELAY). */
int ps_netsim_line_stats(const ps_netsim_t *net, ps_delay_line_stats_t *stats);

/* The link rate in bits/s, undilated (0 when not shaped). */
double ps_netsim_rate(const ps_netsim_t *net);

/* The time dilation it was made with (1: none). */
double ps_netsim_dilation(const ps_netsim_t *net);

/* Counters of role i's namespace, since it was made. */
typedef struct {
    uint64_t tx_bytes; /* sent on its link (eth0), headers included */
    uint64_t rx_bytes; /* received on it */
    uint64_t retrans;  /* TCP segments retransmitted (/proc/net/snmp Tcp RetransSegs) */
    uint64_t timeouts; /* TCP retransmission timeouts (/proc/net/netstat TCPTimeouts) */
} ps_netsim_counters_t;

/* Reads role i's counters from inside its namespace (the calling thread
 * enters it and comes back). Returns 0, PS_ENOENT (no such role) or PS_EIO. */
int ps_netsim_counters(const ps_netsim_t *net, int i, ps_netsim_counters_t *c);

/* Removes every namespace (with it its links and qdiscs) and the delay line.
 * NULL-safe; sets *net to NULL. Returns the count of namespaces of this
 * network still there afterwards (0 when all went). */
int ps_netsim_destroy(ps_netsim_t **net);

#ifdef __cplusplus
}
#endif
#endif
