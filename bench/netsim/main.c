/*
 * bench/netsim/main.c - shardps-netsim: the simulated cluster (netsim.h),
 * held for whoever runs roles in it by hand: the integration tests, or a
 * person trying a job across "hosts" on one machine.
 *
 *   shardps-netsim --servers S --workers W [--net SPEC] [--log FILE]
 *
 * makes one namespace per role, prints one line per role, "NAME NAMESPACE
 * ADDRESS" (c, s0.., w0..), then "ready", and holds the network until
 * SIGINT, SIGTERM or SIGHUP, or until its parent exits; then it removes
 * every namespace it made. It starts nothing in them: `ip netns exec
 * NAMESPACE CMD` does. Exit status: 0, 1 when a namespace could not be
 * removed, 2 on bad usage, 3 when the network cannot be made here (not
 * root, no iproute2, no veth or TUN support: the reason on stderr).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "bench/netsim/netsim.h"
#include "common/config.h"
#include "common/error.h"
#include "common/version.h"
#include "proto/codec.h"

#define S_PROG "shardps-netsim"

enum { S_EXIT_NOT_HERE = 3 };

int main(int argc, char **argv)
{
    if (ps_version_flag(S_PROG, ps_codec_build_id, argc, argv)) {
        return 0;
    }
    int servers = 0, workers = 1;
    double dilate = 1;
    const char *spec = NULL, *log_path = "shardps-netsim.log";
    ps_flag_t flags[] = {
        {"servers", PS_FLAG_INT, &servers, "N", "server namespaces (s0, s1, ...)"},
        {"workers", PS_FLAG_INT, &workers, "N", "worker namespaces (w0, w1, ...), at least 1"},
        {"net", PS_FLAG_STR, &spec, "RATE[,DELAY][,mtu=BYTES][,queue=BYTES]",
         "each link shaped to RATE each way (tc tbf; 100mbit, 1gbit), DELAY one way between "
         "roles (0.2ms, 20ms: our delay line), packets of at most mtu (default 65000), "
         "queue bytes at each link end (default: 50 ms of its rate); default: not shaped"},
        {"dilate", PS_FLAG_DOUBLE, &dilate, "F",
         "time dilation: links shaped to RATE / F, DELAY and the queues F times longer; "
         "run the roles with SHARDPS_DILATE=F (their clocks F times slower)"},
        {"log", PS_FLAG_STR, &log_path, "FILE",
         "the commands that make and remove the network, and their output (appended)"},
    };
    int rc = ps_config_parse_argv(S_PROG,
                        "Makes a simulated cluster on this machine: a network namespace "
                        "per role (scheduler c,\nservers s0.., workers w0..) linked to a "
                        "routing hub; prints NAME NAMESPACE ADDRESS\nper role, then "
                        "\"ready\", and removes it all on SIGINT, SIGTERM or SIGHUP.\n"
                        "Needs root.",
                        flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    char err[512];
    if (spec && ps_netsim_parse(spec, err, sizeof err) != 0) {
        fprintf(stderr, S_PROG ": error: %s\n", err);
        return 2;
    }
    if (servers < 0 || servers > 64 || workers < 1 || workers > 64) {
        fprintf(stderr, S_PROG ": error: expected --servers 0..64 and --workers 1..64\n");
        return 2;
    }
    /* Signals are taken only in sigsuspend() below, so none is lost between
     * the check and the wait; the parent's exit counts as SIGTERM. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    ps_netsim_catch_signals();
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) {
        return 0; /* the parent is already gone: nobody to hold the network for */
    }
    ps_netsim_t *net = NULL;
    rc = ps_netsim_new(spec, dilate, servers, workers, log_path, &net, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": %s\n", err);
        return rc == PS_EINVAL ? 2 : S_EXIT_NOT_HERE;
    }
    for (int i = 0; ps_netsim_name(net, i); i++) {
        printf("%s %s %s\n", ps_netsim_name(net, i), ps_netsim_ns(net, i),
               ps_netsim_addr(net, i));
    }
    printf("ready\n");
    fflush(stdout);
    fprintf(stderr, S_PROG ": %s: %s\n", ps_netsim_prefix(net), ps_netsim_note(net));
    while (!ps_netsim_stop) {
        sigsuspend(&old);
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s", ps_netsim_prefix(net));
    int left = ps_netsim_destroy(&net);
    if (left) {
        fprintf(stderr, S_PROG ": %d namespaces %s* could not be removed\n", left, prefix);
        return 1;
    }
    fprintf(stderr, S_PROG ": %s removed (signal %d)\n", prefix, (int)ps_netsim_stop);
    return 0;
}
