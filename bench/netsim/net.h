/*
 * bench/netsim/net.h - a simulated cluster network for shardps-bench train --net.
 *
 * One network namespace per role (the scheduler, each server, each worker),
 * each with its own veth link to a hub namespace that routes between the
 * links, as if every role were its own host on a switch. Each link is shaped
 * with tc tbf to RATE on both ends' egress (the role's side: what it sends;
 * the hub's side: what it receives), so each role has RATE up and RATE down,
 * as separate hosts would. DELAY (one way between any two roles) is a delay
 * line of our own (bench/delay_line.h; this kernel has no tc netem): the hub
 * routes every packet from a role through a TUN device whose thread hands it
 * back DELAY later. Every device has a 65000-byte MTU, so that a TCP segment
 * is one packet all the way. The root namespace is never touched.
 *
 * A job runs there role by role: `ip netns exec NS shardps-launch --node`,
 * each told its role by SHARDPS_ROLE/SHARDPS_RANK and the scheduler's address
 * by SHARDPS_SCHEDULER (deploy/launch_node.h), all output appended to one log.
 * The bench watches worker 0's progress lines to kill worker 1 and start it
 * again (it rejoins with its rank) at given fractions of the job.
 */
#ifndef PS_BENCH_NET_H
#define PS_BENCH_NET_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_bench_net ps_bench_net_t;

/* Set by the bench's SIGINT/SIGTERM/SIGHUP handler while a net run is on:
 * the job in progress is stopped and the namespaces removed. */
extern volatile sig_atomic_t ps_bench_net_stop;

/* Installs the handler that sets ps_bench_net_stop. */
void ps_bench_net_catch_signals(void);

/* Checks "RATE[,DELAY]" (RATE: a number and bit, kbit, mbit, gbit, at least
 * 1kbit; DELAY: a number and us, ms, s, at most 1s). Returns 0, or PS_EINVAL
 * with why (which part is wrong) in err. */
int ps_bench_net_parse(const char *spec, char *err, size_t errlen);

/*
 * Makes the namespaces for a scheduler, `servers` servers and `workers`
 * workers, shaped by spec, with commands logged to log_path (copied). Returns 0 and
 * the network in *out (destroy with ps_bench_net_destroy), or PS_ENOTSUP
 * with the reason in why when the network cannot be made here (not root, no
 * ip, no veth, no TUN device...), everything made so far removed.
 */
int ps_bench_net_create(const char *spec, int servers, int workers, const char *log_path,
                        ps_bench_net_t **out, char *why, size_t whylen);

/* What was simulated, in words, for the output and the tables: "1gbit per
 * link, each direction (tc tbf), and 0.2ms one way between any two roles (a
 * delay line ...)". */
const char *ps_bench_net_note(const ps_bench_net_t *net);

/* The namespaces' common name prefix ("spsb1234"), for checks. */
const char *ps_bench_net_prefix(const ps_bench_net_t *net);

/* Removes every namespace (with it its links and qdiscs). NULL-safe; sets
 * *net to NULL. Returns the count of namespaces of this network still there
 * afterwards (0 when all went). */
int ps_bench_net_destroy(ps_bench_net_t **net);

/* One job on the network. */
typedef struct {
    const char *launch;   /* shardps-launch */
    char *const *args;    /* its flags (no --node), NULL-terminated */
    int servers, workers; /* of this job (at most the network's) */
    const char *log_path; /* every role's output, appended */
    double timeout;       /* seconds; then every role is killed */
    int64_t max_steps;    /* the job's --max-steps (0: none), for its progress */
    double kill_at;       /* kill W1 when the job is this far (0..1); < 0: never */
    double rejoin_at;     /* start W1 again this far (after its loss was seen); < 0: never */
} ps_bench_net_job_t;

/* What happened. */
typedef struct {
    int status;       /* the scheduler's exit code, else the first other role's
                         that failed (the W1 killed on purpose excepted); 124 on
                         timeout, 130 when stopped by a signal */
    double killed_at; /* seconds from the start when W1 was killed; -1 never */
    double rejoined_at; /* when it was started again; -1 never */
} ps_bench_net_result_t;

/* Runs the job and waits for every role; with a delay line, says what it
 * did during the job (packets, bytes, its CPU time) on stderr and in the
 * job's log. Returns 0 with *res filled, or
 * PS_EIO when a role could not be started (the others are stopped). */
int ps_bench_net_run(const ps_bench_net_t *net, const ps_bench_net_job_t *job,
                     ps_bench_net_result_t *res);

#ifdef __cplusplus
}
#endif
#endif
