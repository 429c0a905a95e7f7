/* bench/netsim/job.c - a shardps job run role by role in the simulated
 * cluster's namespaces, worker 1 killed and started again on cue (see job.h). */
#include "bench/netsim/job.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/trace.h"
#include "deploy/proc.h"

extern char **environ;

enum {
    JOB_SCHED_PORT = 7000, /* the scheduler's, inside its own namespace */
    JOB_MAX_ROLES = 1 + 64 + 64,
};

typedef struct {
    pid_t pid; /* 0 once ended */
    int code;  /* its exit code once ended */
} job_proc_t;

/* Variables a role's environment gets: its role, rank, scheduler, dilation. */
enum { JOB_VARS = 4 };

/* The environment of a role: ours without any SHARDPS_ROLE, _RANK,
 * _SCHEDULER or _DILATE, then those (vars; the network's dilation, its
 * clock: common/clock.h). Caller frees the array (the strings in vars are
 * the caller's). */
static char **s_env(char vars[JOB_VARS][96])
{
    size_t n = 0;
    while (environ[n]) {
        n++;
    }
    char **env = calloc(n + JOB_VARS + 1, sizeof *env);
    if (!env) {
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "SHARDPS_ROLE=", 13) &&
            strncmp(environ[i], "SHARDPS_RANK=", 13) &&
            strncmp(environ[i], "SHARDPS_SCHEDULER=", 18) &&
            strncmp(environ[i], "SHARDPS_DILATE=", 15)) {
            env[k++] = environ[i];
        }
    }
    for (int i = 0; i < JOB_VARS; i++) {
        env[k++] = vars[i];
    }
    env[k] = NULL;
    return env;
}

/* The network's role index of the job's role i: the network's servers come
 * first, however many this job has; a colocated server shares its worker's. */
static int s_role_at(const ps_netsim_t *net, const ps_netsim_job_t *job, int i)
{
    int rank = i == 0 ? 0 : i <= job->servers ? i - 1 : i - 1 - job->servers;
    return i <= job->servers && !(i > 0 && job->colocated) ? i
                                                           : 1 + ps_netsim_servers(net) + rank;
}

/* Reads the counters of every namespace the job's n roles run in into c
 * (one entry per role; a colocated server's is its worker's). 0 or PS_EIO. */
static int s_snap(const ps_netsim_t *net, const ps_netsim_job_t *job, int n,
                  ps_netsim_counters_t *c)
{
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        rc = ps_netsim_counters(net, s_role_at(net, job, i), &c[i]);
    }
    return rc;
}

/* The links' figures of the job from the counters before (c0) and after (c1). */
static void s_link_result(const ps_netsim_job_t *job, int n, const ps_netsim_counters_t *c0,
                          const ps_netsim_counters_t *c1, ps_netsim_result_t *res)
{
    res->counted = 1;
    for (int i = 0; i < n; i++) {
        const double tx = (double)(c1[i].tx_bytes - c0[i].tx_bytes);
        const double rx = (double)(c1[i].rx_bytes - c0[i].rx_bytes);
        if (i > job->servers) {
            const int rest = job->workers > 1 ? job->workers - 1 : 1;
            res->worker_tx += tx / job->workers;
            res->worker_rx += rx / job->workers;
            if (i > job->servers + 1 || job->workers == 1) { /* not W0, or W0 alone */
                res->rest_tx += tx / rest;
                res->rest_rx += rx / rest;
            }
        }
        res->link_max = tx > res->link_max ? tx : res->link_max;
        res->link_max = rx > res->link_max ? rx : res->link_max;
        if (i > 0 && i <= job->servers && job->colocated) {
            continue; /* its worker's namespace: counted there */
        }
        res->retrans += c1[i].retrans - c0[i].retrans;
        res->timeouts += c1[i].timeouts - c0[i].timeouts;
    }
}

/* Spawns argv with our environment plus vars (s_env) in its own process
 * group, output appended to the job's log; what and ns name it in an error. */
static int s_spawn(const ps_netsim_job_t *job, char **argv, char vars[JOB_VARS][96],
                   const char *what, const char *ns, pid_t *pid)
{
    char **env = s_env(vars);
    if (!env) {
        return PS_EIO;
    }
    ps_proc_spec_t spec = {.argv = argv,
                           .envp = env,
                           .log_path = job->log_path,
                           .flags = PS_PROC_GROUP | PS_PROC_PDEATH | PS_PROC_NO_STDIN,
                           .prog = "shardps-bench"};
    ps_proc_t p;
    char err[256];
    int rc = ps_proc_spawn(&spec, &p, err, sizeof err);
    free(env);
    if (rc != 0) {
        fprintf(stderr, "shardps-bench: cannot start the %s in %s: %s\n", what, ns, err);
        return PS_EIO;
    }
    *pid = p.pid;
    return 0;
}

/* argv: `ip netns exec NS`, then the npre words of pre, then the job's
 * args, NULL-terminated; NULL on no memory. Caller frees the array (not the
 * strings: borrowed). */
static char **s_argv(const ps_netsim_t *net, const ps_netsim_job_t *job, const char *ns,
                     char *const *pre, int npre)
{
    int nargs = 0;
    while (job->args[nargs]) {
        nargs++;
    }
    char **argv = calloc((size_t)(nargs + npre) + 8, sizeof *argv);
    if (!argv) {
        return NULL;
    }
    int a = 0;
    argv[a++] = (char *)ps_netsim_ip(net);
    argv[a++] = "netns";
    argv[a++] = "exec";
    argv[a++] = (char *)ns;
    for (int k = 0; k < npre; k++) {
        argv[a++] = pre[k];
    }
    for (int k = 0; k < nargs; k++) {
        argv[a++] = job->args[k];
    }
    argv[a] = NULL;
    return argv;
}

/* Starts role i of the network (role: index into the job's roles). */
static int s_start_role(const ps_netsim_t *net, const ps_netsim_job_t *job, int i,
                        pid_t *pid)
{
    char vars[JOB_VARS][96];
    const char *role = i == 0 ? "scheduler" : i <= job->servers ? "server" : "worker";
    int rank = i == 0 ? 0 : i <= job->servers ? i - 1 : i - 1 - job->servers;
    int at = s_role_at(net, job, i);
    snprintf(vars[0], sizeof vars[0], "SHARDPS_ROLE=%s", role);
    snprintf(vars[1], sizeof vars[1], "SHARDPS_RANK=%d", rank);
    snprintf(vars[2], sizeof vars[2], "SHARDPS_SCHEDULER=tcp://%s:%d",
             ps_netsim_addr(net, 0), JOB_SCHED_PORT);
    snprintf(vars[3], sizeof vars[3], "SHARDPS_DILATE=%g", ps_netsim_dilation(net));
    char *pre[] = {(char *)job->launch, "--node"};
    char **argv = s_argv(net, job, ps_netsim_ns(net, at), pre, 2);
    int rc = argv ? s_spawn(job, argv, vars, role, ps_netsim_ns(net, at), pid) : PS_EIO;
    free(argv);
    return rc;
}

/* Writes mpirun's rsh agent beside the job's log into path: "HOST CMD..."
 * runs CMD in the network namespace HOST (the hosts mpirun is given are the
 * workers' namespaces). Each daemon gets a temporary directory of its own:
 * all of them run on this one host under one host name, and two creating
 * the same directory at once fail ("mkdir ... File exists", orte_init
 * failed, no rank starts). 0 or PS_EIO. */
static int s_mpi_agent(const ps_netsim_t *net, const ps_netsim_job_t *job, char *path,
                       size_t cap)
{
    const char *slash = strrchr(job->log_path, '/');
    int dir = slash ? (int)(slash - job->log_path) : 1;
    snprintf(path, cap, "%.*s/mpi-netns-agent.sh", dir, slash ? job->log_path : ".");
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "shardps-bench: cannot write %s\n", path);
        return PS_EIO;
    }
    fprintf(f, "#!/bin/sh\n# mpirun's rsh agent on the simulated cluster: HOST CMD... runs "
               "CMD in namespace HOST,\n# with a temporary directory of its own\nns=$1\nshift\n"
               "dir=${TMPDIR:-/tmp}/$ns.ompi\nmkdir -p \"$dir\" || exit 1\n"
               "%s netns exec \"$ns\" env OMPI_MCA_orte_tmpdir_base=\"$dir\" sh -c \"$*\"\n"
               "rc=$?\nrm -rf \"$dir\"\nexit $rc\n",
            ps_netsim_ip(net));
    return fclose(f) == 0 && chmod(path, 0700) == 0 ? 0 : PS_EIO;
}

/* Starts the job's workers as the ranks of one mpirun in the scheduler's
 * namespace, rank r in worker r's namespace (--host, one slot each), told
 * its rank by Open MPI's OMPI_COMM_WORLD_RANK. */
static int s_start_mpi(const ps_netsim_t *net, const ps_netsim_job_t *job, pid_t *pid)
{
    char vars[JOB_VARS][96], agent[4096], hosts[64 * 40] = "", np[16];
    if (s_mpi_agent(net, job, agent, sizeof agent) != 0) {
        return PS_EIO;
    }
    for (int r = 0; r < job->workers; r++) {
        const char *ns = ps_netsim_ns(net, 1 + ps_netsim_servers(net) + r);
        snprintf(hosts + strlen(hosts), sizeof hosts - strlen(hosts), "%s%s", r ? "," : "", ns);
    }
    snprintf(np, sizeof np, "%d", job->workers);
    snprintf(vars[0], sizeof vars[0], "SHARDPS_ROLE=worker");
    snprintf(vars[1], sizeof vars[1], "OMPI_MCA_mpi_yield_when_idle=1");
    snprintf(vars[2], sizeof vars[2], "SHARDPS_SCHEDULER=tcp://%s:%d",
             ps_netsim_addr(net, 0), JOB_SCHED_PORT);
    snprintf(vars[3], sizeof vars[3], "SHARDPS_DILATE=%g", ps_netsim_dilation(net));
    /* routed direct: every daemon reports to mpirun itself (the default tree
     * routing cannot place daemons whose hosts all have one name);
     * rtc_hwloc_vmhole none: the daemons do not map the topology into shared
     * memory at a guessed address, which now and then crashes them */
    char *pre[] = {(char *)job->mpirun, "--allow-run-as-root", "--mca", "routed", "direct",
                   "--mca", "rtc_hwloc_vmhole", "none",
                   "--mca", "plm_rsh_agent", agent, "--host", hosts, "-np", np,
                   "--mca", "btl", "tcp,self", "--mca", "pml", "ob1",
                   "--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0",
                   "sh", "-c", "SHARDPS_RANK=$OMPI_COMM_WORLD_RANK exec \"$0\" \"$@\"",
                   (char *)job->launch, "--node"};
    const int npre = (int)(sizeof pre / sizeof pre[0]);
    char **argv = s_argv(net, job, ps_netsim_ns(net, 0), pre, npre);
    int rc = argv ? s_spawn(job, argv, vars, "workers' mpirun", ps_netsim_ns(net, 0), pid)
                  : PS_EIO;
    free(argv);
    return rc;
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
        if (sscanf(p + sizeof key - 1, "%d/%d step=%lld/%lld", &e, &n, &s, &spe) == 4 &&
            n > 0 &&
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

/* Appends line to stderr and the job's log. */
static void s_report(const ps_netsim_job_t *job, const char *line)
{
    fputs(line, stderr);
    FILE *f = fopen(job->log_path, "a");
    if (f) {
        fputs(line, f);
        fclose(f);
    }
}

/* What the delay line did since `before`, `secs` ago: on stderr and in the
 * job's log. Returns its busiest thread's share of a core. */
static double s_line_report(const ps_netsim_t *net, const ps_netsim_job_t *job,
                            const ps_delay_line_stats_t *before, double secs)
{
    ps_delay_line_stats_t now;
    ps_netsim_line_stats(net, &now);
    double cpu = 0, most = 0;
    for (int i = 0; i < now.queues; i++) {
        const double q = now.cpu_s[i] - before->cpu_s[i];
        cpu += q;
        most = q > most ? q : most;
    }
    const double busiest = secs > 0 ? most / secs : 0;
    char line[320];
    snprintf(line, sizeof line,
             "shardps-bench: delay line, this job: %llu packets (%.1f MB), %llu dropped, "
             "CPU %.2f s in %.1f s (%d thread%s, the busiest %.1f %% of a core)\n",
             (unsigned long long)(now.packets - before->packets),
             (double)(now.bytes - before->bytes) / 1e6,
             (unsigned long long)(now.drops - before->drops), cpu, secs,
             now.queues, now.queues == 1 ? "" : "s", 100 * busiest);
    s_report(job, line);
    return busiest;
}

/* --trace FILE among the job's flags: each role's own launcher (one per
 * namespace here) wrote FILE with the role's tag in it, so they are merged
 * into FILE as a launcher of the whole job does. */
static void s_merge_trace(const ps_netsim_job_t *job)
{
    const char *trace = NULL;
    for (int i = 0; job->args[i]; i++) {
        if (!strcmp(job->args[i], "--trace") && job->args[i + 1]) {
            trace = job->args[i + 1];
        } else if (!strncmp(job->args[i], "--trace=", 8)) {
            trace = job->args[i] + 8;
        }
    }
    if (!trace) {
        return;
    }
    char tags[JOB_MAX_ROLES][16];
    const char *names[JOB_MAX_ROLES]; /* the roles, all but the scheduler */
    const int roles = job->servers + job->workers;
    for (int i = 0; i < roles; i++) {
        snprintf(tags[i], sizeof tags[i], "%c%d", i < job->servers ? 'S' : 'W',
                 i < job->servers ? i : i - job->servers);
        names[i] = tags[i];
    }
    char err[512], line[PATH_MAX + 600];
    int n;
    if (ps_trace_merge_parts(trace, names, roles, &n, err, sizeof err) != 0) {
        snprintf(line, sizeof line, "shardps-bench: trace not merged: %s\n", err);
        s_report(job, line);
    } else if (n > 0) {
        snprintf(line, sizeof line, "shardps-bench: trace of %d processes merged into %s\n",
                 n, trace);
        s_report(job, line);
    }
}

/* A job as it runs: its processes and what has happened to them. */
typedef struct {
    /* the scheduler, the servers, the workers, and mpirun */
    job_proc_t procs[JOB_MAX_ROLES + 1];
    int n, w1, started;   /* roles; W1's index; processes started at first */
    int alive;            /* processes not yet reaped */
    int rc;               /* 0, or a start-up failure */
    int stopped;          /* the status to report once all were killed; 0: not */
    int w1_killed;        /* 0; 1: W1 killed; 2: and reaped, a new W1 counts */
    int mpirun_failed;    /* mpirun ended badly: its ranks are gone */
    double t0, sched_end; /* the start; the scheduler's end (0: running) */
    double next_look;     /* when to read the progress next */
} job_run_t;

/* Process pid ended with wait status st: its code into res->status when it
 * is the first failure that counts. */
static void s_reaped(const ps_netsim_job_t *job, job_run_t *r, pid_t pid, int st,
                     double now, ps_netsim_result_t *res)
{
    for (int i = 0; i < r->n; i++) {
        if (r->procs[i].pid != pid) {
            continue;
        }
        r->procs[i].pid = 0;
        r->procs[i].code = ps_proc_exit_code(st);
        r->alive--;
        if (i == 0) {
            r->sched_end = now;
            res->status = r->procs[i].code ? r->procs[i].code : res->status;
        } else if (r->procs[i].code != 0 && !res->status &&
                   !(i == r->w1 && r->w1_killed == 1)) {
            res->status = r->procs[i].code;
        }
        if (i == r->w1 && r->w1_killed == 1) {
            r->w1_killed = 2; /* the killed one is reaped: the next W1 counts */
        }
        /* its ranks are gone: the scheduler would wait for them in vain */
        r->mpirun_failed |= job->mpirun && i == r->started && r->procs[i].code != 0;
    }
}

/* Stops everything once start-up failed, mpirun failed, a signal came, the
 * timeout passed, or the scheduler ended and the others linger (times of
 * the roles' clock: `dilate` times the real ones). */
static void s_stop_when_due(const ps_netsim_job_t *job, job_run_t *r, double now,
                            double dilate)
{
    /* mpirun takes its daemons in the namespaces down after its ranks,
     * which on a loaded machine takes a while */
    const double linger = (job->mpirun ? 60 : 15) * dilate, timeout = job->timeout * dilate;
    int stop = r->rc != 0 || r->mpirun_failed || ps_netsim_stop || now - r->t0 > timeout ||
               (r->sched_end > 0 && now - r->sched_end > linger);
    if (stop && !r->stopped) {
        r->stopped = ps_netsim_stop ? 130 : now - r->t0 > timeout ? 124 : -1;
        for (int i = 0; i < r->n; i++) {
            if (r->procs[i].pid > 0) {
                ps_proc_signal_group(r->procs[i].pid, SIGKILL);
            }
        }
    }
}

/* --kill-at and --rejoin-at: W1 killed once the job's progress reaches the
 * one, a new W1 started at the other (after the scheduler lost the first). */
static void s_kill_or_rejoin(const ps_netsim_t *net, const ps_netsim_job_t *job,
                             job_run_t *r, double now, ps_netsim_result_t *res)
{
    r->next_look = now + 0.1;
    int lost;
    double frac = s_progress(job->log_path, job->max_steps, &lost);
    if (!r->w1_killed && job->kill_at >= 0 && frac >= job->kill_at &&
        r->procs[r->w1].pid > 0) {
        ps_proc_signal_group(r->procs[r->w1].pid, SIGKILL);
        r->w1_killed = 1;
        res->killed_at = (now - r->t0) / ps_netsim_dilation(net);
    } else if (r->w1_killed == 2 && res->rejoined_at < 0 && job->rejoin_at >= 0 &&
               frac >= job->rejoin_at && lost && r->sched_end == 0) {
        if (s_start_role(net, job, r->w1, &r->procs[r->w1].pid) == 0) {
            r->alive++;
            res->rejoined_at = (now - r->t0) / ps_netsim_dilation(net);
        }
    }
}

int ps_netsim_run(const ps_netsim_t *net, const ps_netsim_job_t *job,
                  ps_netsim_result_t *res)
{
    job_run_t r = {.n = 1 + job->servers + job->workers, .w1 = 1 + job->servers + 1};
    memset(res, 0, sizeof *res);
    res->killed_at = res->rejoined_at = -1;
    if ((job->servers > ps_netsim_servers(net) && !job->colocated) ||
        (job->colocated && job->servers > job->workers) ||
        job->workers > ps_netsim_workers(net)) {
        return PS_EINVAL;
    }
    ps_delay_line_stats_t line_before = {0};
    const int has_line = ps_netsim_line_stats(net, &line_before) == 0;
    ps_netsim_counters_t c0[JOB_MAX_ROLES + 1], c1[JOB_MAX_ROLES + 1];
    const int counted = s_snap(net, job, r.n, c0) == 0;
    double busy0, total0, busy1, total1;
    ps_bench_cpu_ticks(&busy0, &total0);
    r.t0 = ps_now();
    /* The scheduler first: the others find it listening. Under mpirun, one
     * process stands for all the workers, in W0's place. */
    r.started = job->mpirun ? 1 + job->servers : r.n;
    for (int i = 0; i < r.started && r.rc == 0; i++) {
        r.rc = s_start_role(net, job, i, &r.procs[i].pid);
        r.alive += r.rc == 0;
    }
    if (job->mpirun && r.rc == 0) {
        r.rc = s_start_mpi(net, job, &r.procs[r.started].pid);
        r.alive += r.rc == 0;
    }
    while (r.alive > 0) {
        int st;
        pid_t pid = ps_proc_wait(-1, 0.1, &st);
        double now = ps_now();
        if (pid < 0) {
            break; /* no children left that we know of */
        }
        if (pid > 0) {
            s_reaped(job, &r, pid, st, now, res);
            continue;
        }
        s_stop_when_due(job, &r, now, ps_netsim_dilation(net));
        if (!r.stopped && now >= r.next_look &&
            (job->kill_at >= 0 || job->rejoin_at >= 0) && job->workers >= 2 &&
            !job->mpirun) {
            s_kill_or_rejoin(net, job, &r, now, res);
        }
    }
    if (r.stopped > 0) {
        res->status = r.stopped; /* not the SIGKILL the roles died of */
    }
    if (has_line) {
        res->line_busy = s_line_report(net, job, &line_before, ps_now() - r.t0);
    }
    ps_bench_cpu_ticks(&busy1, &total1);
    res->cpu_busy = total1 > total0 ? (busy1 - busy0) / (total1 - total0) : 0;
    if (counted && s_snap(net, job, r.n, c1) == 0) {
        s_link_result(job, r.n, c0, c1, res);
    }
    s_merge_trace(job);
    return r.rc ? PS_EIO : 0;
}
