/* bench/netsim/net.c - a simulated cluster network: namespaces, veth links, tc
 * shaping, and jobs run role by role in them (see net.h). */
#include "bench/netsim/net.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/netsim/delay_line.h"
#include "common/clock.h"
#include "common/error.h"
#include "deploy/proc.h"

extern char **environ;

enum {
    NET_MAX_ROLES = 1 + 64 + 64, /* scheduler, servers, workers */
    NET_SCHED_PORT = 7000,       /* the scheduler's, inside its own namespace */
    /* Every device's MTU: large, so that a TCP segment is one packet end to
     * end (no segmentation on the way to the TUN device) and the delay line
     * moves few packets per second (about 2,000 per gbit/s). */
    NET_MTU = 65000,
};

/* The hub's address, on its side of every link (each role's gateway), and
 * the block of the roles' addresses. */
#define NET_HUB_ADDR "10.99.255.254"
#define NET_ROLES_NET "10.99.0.0/16"
/* The longest DELAY: a job's messages wait on it, and the line holds a
 * link's rate x DELAY in packets. */
#define NET_DELAY_MAX 1.0

volatile sig_atomic_t ps_bench_net_stop = 0;

struct ps_bench_net {
    char prefix[32];                  /* namespace names start with it */
    char ip[PATH_MAX];                /* the ip program */
    char tc[PATH_MAX];                /* the tc program */
    char sysctl[PATH_MAX];            /* the sysctl program */
    char log_path[PATH_MAX];          /* set-up commands' output */
    int servers, workers, nroles;     /* role i: 0 scheduler, 1..S servers, then workers */
    char ns[NET_MAX_ROLES][48];       /* role i's namespace */
    char addr[NET_MAX_ROLES][24];     /* its address */
    int made;                         /* namespaces made: the hub, then roles 0..made-2 */
    ps_bench_delay_line_t *line;      /* holds each packet DELAY; NULL without DELAY */
    char note[512];
};

static void s_on_signal(int sig)
{
    ps_bench_net_stop = sig;
}

void ps_bench_net_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* A number with one of the units, as tc takes it; *scale: the unit's factor. */
static int s_quantity(const char *text, size_t n, const char *const *units,
                      const double *scales, double *value)
{
    char buf[32], unit[16];
    double v;
    int used = 0;
    if (n == 0 || n >= sizeof buf) {
        return PS_EINVAL;
    }
    memcpy(buf, text, n);
    buf[n] = '\0';
    if (sscanf(buf, "%lf%15[a-z]%n", &v, unit, &used) != 2 || buf[used] || !(v > 0) ||
        !isfinite(v)) {
        return PS_EINVAL;
    }
    for (int i = 0; units[i]; i++) {
        if (!strcmp(unit, units[i])) {
            *value = v * scales[i];
            return 0;
        }
    }
    return PS_EINVAL;
}

static const char *const s_rate_units[] = {"bit", "kbit", "mbit", "gbit", NULL};
static const double s_rate_scales[] = {1, 1e3, 1e6, 1e9};
static const char *const s_delay_units[] = {"us", "ms", "s", NULL};
static const double s_delay_scales[] = {1e-6, 1e-3, 1};

/* Splits spec into the rate (bits/s) and the delay (seconds, 0: none).
 * Returns 0, or PS_EINVAL with which part is wrong in err. */
static int s_split(const char *spec, double *rate, double *delay, size_t *rate_len, char *err,
                   size_t errlen)
{
    size_t n = strcspn(spec, ",");
    const char *d = spec + n + (spec[n] != '\0');
    *rate_len = n;
    *delay = 0;
    if (s_quantity(spec, n, s_rate_units, s_rate_scales, rate) != 0 || *rate < 1e3) {
        snprintf(err, errlen,
                 "--net %s: bad RATE '%.*s': expected RATE[,DELAY], RATE as 100mbit, 1gbit, "
                 "10gbit (bit, kbit, mbit, gbit; at least 1kbit)",
                 spec, (int)n, spec);
        return PS_EINVAL;
    }
    if (spec[n] && (s_quantity(d, strlen(d), s_delay_units, s_delay_scales, delay) != 0 ||
                    *delay > NET_DELAY_MAX)) {
        snprintf(err, errlen,
                 "--net %s: bad DELAY '%s': expected RATE[,DELAY], DELAY one way as 200us, "
                 "0.2ms, 20ms (us, ms, s; more than 0, at most 1s)",
                 spec, d);
        return PS_EINVAL;
    }
    return 0;
}

int ps_bench_net_parse(const char *spec, char *err, size_t errlen)
{
    double rate, delay;
    size_t n;
    return s_split(spec, &rate, &delay, &n, err, errlen);
}

/* Runs a set-up command, its output appended to the log. Returns 0, or
 * PS_EIO with its last output line (or how it ended) in why. */
static int s_cmd(ps_bench_net_t *net, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int s_cmd(ps_bench_net_t *net, char *why, size_t whylen, const char *fmt, ...)
{
    char line[1024], *argv[24];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    int argc = 0;
    for (char *p = strtok(line, " "); p && argc < 23; p = strtok(NULL, " ")) {
        argv[argc++] = p;
    }
    argv[argc] = NULL;
    FILE *f = fopen(net->log_path, "a");
    long at = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        at = ftell(f);
        fprintf(f, "+ %s", argv[0]);
        for (int i = 1; i < argc; i++) {
            fprintf(f, " %s", argv[i]);
        }
        fputc('\n', f);
        at = ftell(f);
        fclose(f);
    }
    char err[128];
    ps_proc_spec_t spec = {.argv = argv, .log_path = net->log_path, .prog = "shardps-bench",
                           .flags = PS_PROC_NO_STDIN};
    int rc = ps_proc_run(&spec, err, sizeof err);
    if (rc == 0) {
        return 0;
    }
    /* why: the command and the first line it printed */
    char *out = NULL, first[160] = "";
    if (ps_bench_read_file(net->log_path, &out) == 0 && (long)strlen(out) > at) {
        snprintf(first, sizeof first, "%.*s", (int)strcspn(out + at, "\n"), out + at);
    }
    free(out);
    const char *prog = strrchr(argv[0], '/');
    snprintf(why, whylen, "%s: %s", prog ? prog + 1 : argv[0],
             first[0] ? first : rc < 0 ? err : "failed");
    return PS_EIO;
}

/* tc shaping of one link end: tbf at the rate. Returns 0, or PS_EIO with why. */
static int s_shape(ps_bench_net_t *net, const char *ns, const char *dev, const char *rate,
                   double rate_bits, char *why, size_t whylen)
{
    /* The bucket holds 1 ms at the rate, and at least one packet at the MTU
     * (64 KiB); packets wait up to 50 ms before being dropped. */
    long burst = (long)(rate_bits / 8 / 1000);
    burst = burst < 65536 ? 65536 : burst;
    return s_cmd(net, why, whylen, "%s -n %s qdisc add dev %s root handle 1: tbf rate %s burst %ld "
                                   "latency 50ms",
                 net->tc, ns, dev, rate, burst);
}

/* The delay, where the hub routes between the links: every packet that comes
 * in from a role is routed into the TUN device "line" (policy routing: what
 * did not come out of it goes into it), the delay line hands it back `delay`
 * later, and the hub routes it on to its role's link. Each packet passes the
 * hub once, so two roles are `delay` apart each way. */
static int s_add_delay(ps_bench_net_t *net, const char *hub, double delay, char *why,
                       size_t whylen)
{
    char path[128];
    snprintf(path, sizeof path, "/run/netns/%s", hub);
    int rc = ps_bench_delay_line_new(path, "line", delay, &net->line, why, whylen);
    FILE *f = rc == 0 ? fopen(net->log_path, "a") : NULL;
    if (f) { /* made here, not by a command: said in the log all the same */
        fprintf(f, "+ (delay line) TUN device line in %s, each packet held %.0f us\n", hub,
                delay * 1e6);
        fclose(f);
    }
    rc = rc ? rc : s_cmd(net, why, whylen, "%s -n %s link set line mtu %d up", net->ip, hub,
                         NET_MTU);
    rc = rc ? rc : s_cmd(net, why, whylen, "%s -n %s route add %s dev line table 100", net->ip,
                         hub, NET_ROLES_NET);
    rc = rc ? rc : s_cmd(net, why, whylen, "%s -n %s rule add pref 100 iif line lookup main",
                         net->ip, hub);
    rc = rc ? rc : s_cmd(net, why, whylen, "%s -n %s rule add pref 101 lookup 100", net->ip, hub);
    return rc;
}

int ps_bench_net_create(const char *spec, int servers, int workers, const char *log_path,
                        ps_bench_net_t **out, char *why, size_t whylen)
{
    *out = NULL;
    double rate_bits, delay;
    size_t rate_len;
    char err[256] = "";
    if (s_split(spec, &rate_bits, &delay, &rate_len, err, sizeof err) != 0 || servers < 0 ||
        workers < 1 || 1 + servers + workers > NET_MAX_ROLES) {
        snprintf(why, whylen, "bad network: --net %s, %d servers, %d workers%s%s", spec,
                 servers, workers, err[0] ? ": " : "", err);
        return PS_EINVAL;
    }
    if (geteuid() != 0) {
        snprintf(why, whylen, "cannot create network namespaces: not root");
        return PS_ENOTSUP;
    }
    ps_bench_net_t *net = calloc(1, sizeof *net);
    if (!net) {
        snprintf(why, whylen, "out of memory");
        return PS_ENOMEM;
    }
    if (ps_proc_find_exe("ip", NULL, net->ip, sizeof net->ip) != 0 ||
        ps_proc_find_exe("tc", NULL, net->tc, sizeof net->tc) != 0 ||
        ps_proc_find_exe("sysctl", NULL, net->sysctl, sizeof net->sysctl) != 0) {
        snprintf(why, whylen,
                 "cannot create network namespaces: no ip or tc (iproute2), or no sysctl");
        free(net);
        return PS_ENOTSUP;
    }
    snprintf(net->prefix, sizeof net->prefix, "spsb%d", (int)getpid());
    snprintf(net->log_path, sizeof net->log_path, "%s", log_path);
    net->servers = servers;
    net->workers = workers;
    net->nroles = 1 + servers + workers;
    for (int i = 0; i < net->nroles; i++) {
        if (i == 0) {
            snprintf(net->ns[i], sizeof net->ns[i], "%sc", net->prefix);
        } else if (i <= servers) {
            snprintf(net->ns[i], sizeof net->ns[i], "%ss%d", net->prefix, i - 1);
        } else {
            snprintf(net->ns[i], sizeof net->ns[i], "%sw%d", net->prefix, i - 1 - servers);
        }
        snprintf(net->addr[i], sizeof net->addr[i], "10.99.%d.%d", (i + 1) / 250,
                 (i + 1) % 250 + 1);
    }
    char rate[32], hub[48];
    snprintf(rate, sizeof rate, "%.*s", (int)rate_len, spec);
    snprintf(hub, sizeof hub, "%shub", net->prefix);
    char *e = err;
    size_t ec = sizeof err;
    /* The hub routes (no bridge: the delay line needs each packet at the IP
     * layer), with no reverse-path filter, as a packet from a role comes
     * back to it from the line, not from the role's link. */
    int rc = s_cmd(net, e, ec, "%s netns add %s", net->ip, hub);
    net->made = rc == 0;
    rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s link set lo up", net->ip, hub);
    rc = rc ? rc : s_cmd(net, e, ec, "%s netns exec %s %s -qw net.ipv4.ip_forward=1 "
                                     "net.ipv4.conf.all.rp_filter=0 "
                                     "net.ipv4.conf.default.rp_filter=0",
                         net->ip, hub, net->sysctl);
    if (rc == 0 && delay > 0) {
        rc = s_add_delay(net, hub, delay, e, ec);
    }
    for (int i = 0; rc == 0 && i < net->nroles; i++) {
        const char *ns = net->ns[i];
        const char *tag = ns + strlen(net->prefix); /* c, s0, w1 */
        char vdev[24];
        snprintf(vdev, sizeof vdev, "v%s", tag);
        rc = s_cmd(net, e, ec, "%s netns add %s", net->ip, ns);
        net->made += rc == 0;
        rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s link add %s type veth peer name eth0 netns %s",
                             net->ip, hub, vdev, ns);
        /* a link of its own: the role and the hub each end's only neighbour */
        rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s addr add %s peer %s dev %s", net->ip, hub,
                             NET_HUB_ADDR, net->addr[i], vdev);
        rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s link set %s mtu %d up", net->ip, hub, vdev,
                             NET_MTU);
        rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s addr add %s peer %s dev eth0", net->ip, ns,
                             net->addr[i], NET_HUB_ADDR);
        rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s link set eth0 mtu %d up", net->ip, ns,
                             NET_MTU);
        rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s link set lo up", net->ip, ns);
        rc = rc ? rc : s_cmd(net, e, ec, "%s -n %s route add %s via %s", net->ip, ns,
                             NET_ROLES_NET, NET_HUB_ADDR);
        rc = rc ? rc : s_shape(net, ns, "eth0", rate, rate_bits, e, ec);
        rc = rc ? rc : s_shape(net, hub, vdev, rate, rate_bits, e, ec);
    }
    if (rc != 0) {
        snprintf(why, whylen, "cannot build the simulated network: %s", err);
        ps_bench_net_destroy(&net);
        return PS_ENOTSUP;
    }
    if (delay > 0) {
        snprintf(net->note, sizeof net->note,
                 "%s per link, each direction (tc tbf), and %s one way between roles (our "
                 "delay line: a TUN device in the hub)",
                 rate, spec + rate_len + 1);
    } else {
        snprintf(net->note, sizeof net->note, "%s per link, each direction (tc tbf), no delay",
                 rate);
    }
    *out = net;
    return 0;
}

const char *ps_bench_net_note(const ps_bench_net_t *net)
{
    return net->note;
}

const char *ps_bench_net_prefix(const ps_bench_net_t *net)
{
    return net->prefix;
}

int ps_bench_net_destroy(ps_bench_net_t **netp)
{
    ps_bench_net_t *net = netp ? *netp : NULL;
    if (!net) {
        return 0;
    }
    char why[256], name[64] = "";
    ps_bench_delay_line_destroy(&net->line);
    for (int i = net->made - 2; i >= 0; i--) {
        s_cmd(net, why, sizeof why, "%s netns del %s", net->ip, net->ns[i]);
    }
    if (net->made > 0) {
        snprintf(name, sizeof name, "%shub", net->prefix);
        s_cmd(net, why, sizeof why, "%s netns del %s", net->ip, name);
    }
    int left = 0;
    for (int i = -1; i < net->nroles; i++) {
        char path[128];
        snprintf(path, sizeof path, "/run/netns/%s%s", i < 0 ? net->prefix : net->ns[i],
                 i < 0 ? "hub" : "");
        left += access(path, F_OK) == 0;
    }
    free(net);
    *netp = NULL;
    return left;
}

/* ---- a job on the network ---------------------------------------------------- */

typedef struct {
    pid_t pid; /* 0 once ended */
    int code;  /* its exit code once ended */
} net_proc_t;

/* The environment of a role: ours without any SHARDPS_ROLE, _RANK or
 * _SCHEDULER, then those three. Caller frees the array (the strings in vars
 * are the caller's). */
static char **s_env(char vars[3][96])
{
    size_t n = 0;
    while (environ[n]) {
        n++;
    }
    char **env = calloc(n + 4, sizeof *env);
    if (!env) {
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "SHARDPS_ROLE=", 13) && strncmp(environ[i], "SHARDPS_RANK=", 13) &&
            strncmp(environ[i], "SHARDPS_SCHEDULER=", 18)) {
            env[k++] = environ[i];
        }
    }
    for (int i = 0; i < 3; i++) {
        env[k++] = vars[i];
    }
    env[k] = NULL;
    return env;
}

/* Starts role i of the network (role: index into the job's roles). */
static int s_start_role(const ps_bench_net_t *net, const ps_bench_net_job_t *job, int i,
                        pid_t *pid)
{
    char vars[3][96];
    const char *role = i == 0 ? "scheduler" : i <= job->servers ? "server" : "worker";
    int rank = i == 0 ? 0 : i <= job->servers ? i - 1 : i - 1 - job->servers;
    /* the network's role index: its servers come first, however many this job has */
    int at = i <= job->servers ? i : 1 + net->servers + rank;
    snprintf(vars[0], sizeof vars[0], "SHARDPS_ROLE=%s", role);
    snprintf(vars[1], sizeof vars[1], "SHARDPS_RANK=%d", rank);
    snprintf(vars[2], sizeof vars[2], "SHARDPS_SCHEDULER=tcp://%s:%d", net->addr[0],
             NET_SCHED_PORT);
    int nargs = 0;
    while (job->args[nargs]) {
        nargs++;
    }
    char **argv = calloc((size_t)nargs + 8, sizeof *argv), **env = s_env(vars);
    if (!argv || !env) {
        free(argv);
        free(env);
        return PS_EIO;
    }
    int a = 0;
    argv[a++] = (char *)net->ip;
    argv[a++] = "netns";
    argv[a++] = "exec";
    argv[a++] = (char *)net->ns[at];
    argv[a++] = (char *)job->launch;
    argv[a++] = "--node";
    for (int k = 0; k < nargs; k++) {
        argv[a++] = job->args[k];
    }
    argv[a] = NULL;
    ps_proc_spec_t spec = {.argv = argv,
                           .envp = env,
                           .log_path = job->log_path,
                           .flags = PS_PROC_GROUP | PS_PROC_PDEATH | PS_PROC_NO_STDIN,
                           .prog = "shardps-bench"};
    ps_proc_t p;
    char err[256];
    int rc = ps_proc_spawn(&spec, &p, err, sizeof err);
    free(argv);
    free(env);
    if (rc != 0) {
        fprintf(stderr, "shardps-bench: cannot start the %s in %s: %s\n", role, net->ns[at], err);
        return PS_EIO;
    }
    *pid = p.pid;
    return 0;
}

/* How far the job is (0..1) by worker 0's last progress line
 * ("W0 I epoch=E/N step=S/SPE"), and whether W1's loss was logged. */
static double s_progress(const char *log_path, int64_t max_steps, int *lost_w1)
{
    char *text = NULL;
    double frac = 0;
    *lost_w1 = 0;
    if (ps_bench_read_file(log_path, &text) != 0) {
        return 0;
    }
    static const char key[] = " W0 I epoch=";
    for (const char *p = strstr(text, key); p; p = strstr(p + 1, key)) {
        int e, n;
        long long s, spe;
        if (sscanf(p + sizeof key - 1, "%d/%d step=%lld/%lld", &e, &n, &s, &spe) == 4 && n > 0 &&
            spe > 0) { /* a progress line, not an epoch's evaluation: the last one counts */
            double total = (double)n * (double)spe;
            if (max_steps > 0 && (double)max_steps < total) {
                total = (double)max_steps;
            }
            frac = ((double)(e - 1) * (double)spe + (double)s) / total;
        }
    }
    *lost_w1 = strstr(text, "membership: lost W1") != NULL;
    free(text);
    return frac;
}

/* What the delay line did since `before`, `secs` ago: on stderr and in the
 * job's log. */
static void s_line_report(const ps_bench_net_t *net, const ps_bench_net_job_t *job,
                          const ps_bench_delay_line_stats_t *before, double secs)
{
    ps_bench_delay_line_stats_t now;
    ps_bench_delay_line_stats(net->line, &now);
    double cpu = now.cpu_s - before->cpu_s;
    char line[256];
    snprintf(line, sizeof line,
             "shardps-bench: delay line, this job: %llu packets (%.1f MB), %llu dropped, "
             "CPU %.2f s in %.1f s (%.1f %% of a core)\n",
             (unsigned long long)(now.packets - before->packets),
             (double)(now.bytes - before->bytes) / 1e6,
             (unsigned long long)(now.drops - before->drops), cpu, secs,
             secs > 0 ? 100 * cpu / secs : 0.0);
    fputs(line, stderr);
    FILE *f = fopen(job->log_path, "a");
    if (f) {
        fputs(line, f);
        fclose(f);
    }
}

int ps_bench_net_run(const ps_bench_net_t *net, const ps_bench_net_job_t *job,
                     ps_bench_net_result_t *res)
{
    const int n = 1 + job->servers + job->workers, w1 = 1 + job->servers + 1;
    net_proc_t procs[NET_MAX_ROLES + 1];
    memset(procs, 0, sizeof procs);
    res->status = 0;
    res->killed_at = res->rejoined_at = -1;
    if (job->servers > net->servers || job->workers > net->workers) {
        return PS_EINVAL;
    }
    ps_bench_delay_line_stats_t line_before = {0};
    if (net->line) {
        ps_bench_delay_line_stats(net->line, &line_before);
    }
    double t0 = ps_now(), sched_end = 0, next_look = 0;
    int alive = 0, rc = 0, stopped = 0; /* stopped: the status to report, once killed */
    /* The scheduler first: the others find it listening. */
    for (int i = 0; i < n && rc == 0; i++) {
        rc = s_start_role(net, job, i, &procs[i].pid);
        alive += rc == 0;
    }
    int w1_killed = 0;
    while (alive > 0) {
        int st;
        pid_t pid = ps_proc_wait(-1, 0.1, &st);
        double now = ps_now();
        if (pid > 0) {
            for (int i = 0; i < n; i++) {
                if (procs[i].pid == pid) {
                    procs[i].pid = 0;
                    procs[i].code = ps_proc_exit_code(st);
                    alive--;
                    if (i == 0) {
                        sched_end = now;
                        res->status = procs[i].code ? procs[i].code : res->status;
                    } else if (procs[i].code != 0 && !res->status && !(i == w1 && w1_killed == 1)) {
                        res->status = procs[i].code;
                    }
                    if (i == w1 && w1_killed == 1) {
                        w1_killed = 2; /* the killed one is reaped: the next W1 counts */
                    }
                }
            }
            continue;
        } else if (pid < 0) {
            break; /* no children left that we know of */
        }
        /* Stop everything: start-up failed, a signal, the timeout, or the
         * scheduler ended and the others linger. */
        int stop = rc != 0 || ps_bench_net_stop || now - t0 > job->timeout ||
                   (sched_end > 0 && now - sched_end > 15);
        if (stop && !stopped) {
            stopped = ps_bench_net_stop ? 130 : now - t0 > job->timeout ? 124 : -1;
            for (int i = 0; i < n; i++) {
                if (procs[i].pid > 0) {
                    ps_proc_signal_group(procs[i].pid, SIGKILL);
                }
            }
        }
        if (stopped || now < next_look || (job->kill_at < 0 && job->rejoin_at < 0) ||
            job->workers < 2) {
            continue;
        }
        next_look = now + 0.1;
        int lost;
        double frac = s_progress(job->log_path, job->max_steps, &lost);
        if (!w1_killed && job->kill_at >= 0 && frac >= job->kill_at && procs[w1].pid > 0) {
            ps_proc_signal_group(procs[w1].pid, SIGKILL);
            w1_killed = 1;
            res->killed_at = now - t0;
        } else if (w1_killed == 2 && res->rejoined_at < 0 && job->rejoin_at >= 0 &&
                   frac >= job->rejoin_at && lost && sched_end == 0) {
            if (s_start_role(net, job, w1, &procs[w1].pid) == 0) {
                alive++;
                res->rejoined_at = now - t0;
            }
        }
    }
    if (stopped > 0) {
        res->status = stopped; /* not the SIGKILL the roles died of */
    }
    if (net->line) {
        s_line_report(net, job, &line_before, ps_now() - t0);
    }
    return rc ? PS_EIO : 0;
}
