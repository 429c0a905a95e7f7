/* deploy/launch_node.c - shardps-launch --node: this task's role from the
 * cluster manager's environment, then exec. */
#include "deploy/launch_node.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"

static int s_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int s_bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PS_LAUNCH_PROG ": error: --node: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return PS_EINVAL;
}

/* The environment variable name as a non-negative integer, or -1 when unset
 * or not one. */
static long s_env_int(const char *name)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v) {
        return -1;
    }
    long n = strtol(v, &end, 10);
    return *end || n < 0 || n > 1000000 ? -1 : n;
}

/* The first host of a Slurm host list: "node[01-03,7],gpu5" -> "node01". */
static int s_first_host(const char *list, char *out, size_t cap)
{
    size_t n = strcspn(list, ",[");
    if (!n || n >= cap) {
        return PS_EINVAL;
    }
    memcpy(out, list, n);
    out[n] = '\0';
    if (list[n] == '[') {
        size_t m = strspn(list + n + 1, "0123456789");
        if (!m || n + m >= cap) {
            return PS_EINVAL;
        }
        memcpy(out + n, list + n + 1, m);
        out[n + m] = '\0';
    }
    return 0;
}

/* Global task numbering, as the manager gives it: rank and size. Returns the
 * manager's name, or NULL when none is there. */
static const char *s_task(long *rank, long *size)
{
    static const char *const vars[][3] = {
        {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
        {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMI", "PMI_RANK", "PMI_SIZE"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        *rank = s_env_int(vars[i][1]);
        *size = s_env_int(vars[i][2]);
        if (*rank >= 0 && *size > 0) {
            return vars[i][0];
        }
    }
    return NULL;
}

/* A Kubernetes job's name: K8S_JOB_NAME (the pod's job-name label, from the
 * downward API) less its role's suffix, "-scheduler", "-servers" or
 * "-workers" (deploy/kubernetes/), into out. Returns 0, or PS_ENOENT when
 * the variable is unset or ends otherwise. */
static int s_k8s_job(char *out, size_t cap)
{
    static const char *const suffix[] = {"-scheduler", "-servers", "-workers"};
    const char *name = getenv("K8S_JOB_NAME");
    size_t n = name ? strlen(name) : 0;
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        size_t k = strlen(suffix[i]);
        if (n > k && n - k < cap && !strcmp(name + n - k, suffix[i])) {
            snprintf(out, cap, "%.*s", (int)(n - k), name);
            return 0;
        }
    }
    return PS_ENOENT;
}

/* The scheduler's host: SHARDPS_SCHEDULER_HOST, a Kubernetes headless
 * Service name (SHARDPS_SERVICE; else the job's NAME-scheduler), or the
 * first host of the Slurm step. */
static int s_scheduler_host(char *out, size_t cap)
{
    const char *h = getenv("SHARDPS_SCHEDULER_HOST");
    h = h && *h ? h : getenv("SHARDPS_SERVICE");
    if (h && *h) {
        return snprintf(out, cap, "%s", h) < (int)cap ? 0 : PS_EINVAL;
    }
    char job[200];
    if (s_k8s_job(job, sizeof job) == 0) {
        return snprintf(out, cap, "%s-scheduler", job) < (int)cap ? 0 : PS_EINVAL;
    }
    const char *list = getenv("SLURM_STEP_NODELIST");
    list = list && *list ? list : getenv("SLURM_JOB_NODELIST");
    return list && *list ? s_first_host(list, out, cap) : PS_ENOENT;
}

/* Forwards --name value (borrowed: static, or F's). */
static void s_set(ps_launch_flags_t *F, const char *name, const char *value)
{
    for (size_t i = 0; i < F->nfwd; i++) {
        if (!strcmp(F->fwd[i].flag->name, name)) {
            F->fwd_val[i] = value;
        }
    }
}

/* A job id every task of the job sees the same: the manager's. */
static void s_manager_job_id(ps_launch_flags_t *F)
{
    const char *slurm = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    const char *pmix = getenv("PMIX_NAMESPACE"), *ompi = getenv("OMPI_MCA_ess_base_jobid");
    char k8s[sizeof F->job_id];
    if (s_k8s_job(k8s, sizeof k8s) == 0) {
        snprintf(F->job_id, sizeof F->job_id, "%s", k8s);
    } else if (slurm && *slurm) {
        snprintf(F->job_id, sizeof F->job_id, "slurm-%s.%s", slurm, step ? step : "0");
    } else if (pmix && *pmix) {
        snprintf(F->job_id, sizeof F->job_id, "mpi-%s", pmix);
    } else if (ompi && *ompi) {
        snprintf(F->job_id, sizeof F->job_id, "mpi-%s", ompi);
    } else {
        return; /* none: the tasks join without a job id (not checked) */
    }
    s_set(F, "job-id", F->job_id);
}

int ps_launch_node_resolve(ps_launch_flags_t *F)
{
    const char *role = getenv("SHARDPS_ROLE");
    long rank = -1, size = -1;
    const char *manager = NULL;
    if (role && *role) {
        manager = "SHARDPS_ROLE";
        rank = s_env_int("JOB_COMPLETION_INDEX");
        rank = rank >= 0 ? rank : s_env_int("SHARDPS_RANK");
        if (!strcmp(role, "scheduler")) {
            F->node_role = PS_LAUNCH_SCHEDULER;
            rank = 0;
        } else if (!strcmp(role, "server") || !strcmp(role, "worker")) {
            F->node_role = role[0] == 's' ? PS_LAUNCH_SERVER : PS_LAUNCH_WORKER;
            if (rank < 0) {
                return s_bad("SHARDPS_ROLE=%s needs its rank: JOB_COMPLETION_INDEX (an indexed "
                             "Job) or SHARDPS_RANK", role);
            }
        } else {
            return s_bad("SHARDPS_ROLE=%s: expected scheduler, server or worker", role);
        }
        if (F->workers < 1) {
            return s_bad("SHARDPS_ROLE=%s needs --workers (SHARDPS_WORKERS): the job's size "
                         "is not in the environment", role);
        }
    } else if ((manager = s_task(&rank, &size))) {
        int S = F->servers;
        if (size < S + 2) {
            return s_bad("%s started %ld tasks; the job needs 1 scheduler + %d servers + at "
                         "least 1 worker", manager, size, S);
        }
        if (F->workers >= 0 && F->workers != size - 1 - S) {
            return s_bad("--workers %d, but %s started %ld tasks = 1 scheduler + %d servers + "
                         "%ld workers", F->workers, manager, size, S, size - 1 - S);
        }
        F->workers = (int)(size - 1 - S);
        F->node_role = rank == 0 ? PS_LAUNCH_SCHEDULER
                       : rank <= S ? PS_LAUNCH_SERVER
                                   : PS_LAUNCH_WORKER;
        rank = rank == 0 ? 0 : rank <= S ? rank - 1 : rank - 1 - S;
    } else {
        return s_bad("no task in the environment: expected SLURM_PROCID, OMPI_COMM_WORLD_RANK, "
                     "PMI_RANK or SHARDPS_ROLE (see docs/cluster.md)");
    }
    F->node_rank = (int)rank;
    if (F->port == 0) {
        F->port = 9000; /* every task must know it: no free one */
    }
    const char *ep = getenv("SHARDPS_SCHEDULER");
    char host[256];
    if (ep && *ep) {
        const char *colon = strrchr(ep, ':');
        F->port = colon ? atoi(colon + 1) : 0;
        if (strncmp(ep, "tcp://", 6) || F->port < 1 || F->port > 65535) {
            return s_bad("SHARDPS_SCHEDULER=%s: expected tcp://HOST:PORT", ep);
        }
        snprintf(F->node_scheduler, sizeof F->node_scheduler, "%s", ep);
    } else if (s_scheduler_host(host, sizeof host) == 0) {
        snprintf(F->node_scheduler, sizeof F->node_scheduler, "tcp://%s:%d", host, F->port);
    } else if (F->node_role != PS_LAUNCH_SCHEDULER) {
        return s_bad("no scheduler address: set SHARDPS_SCHEDULER=tcp://HOST:PORT, "
                     "SHARDPS_SCHEDULER_HOST or SHARDPS_SERVICE (%s gives no host list)",
                     manager);
    }
    if (!ps_launch_flags_value(F, "job-id")) {
        s_manager_job_id(F);
    }
    /* The roles may be on several hosts: an unreachable pair (a firewall, a
     * wrong address) is named before step 0 unless --preflight 0 says not. */
    if (!ps_launch_flags_value(F, "preflight")) {
        s_set(F, "preflight", "1");
    }
    return 0;
}

int ps_launch_node_exec(const ps_launch_flags_t *F)
{
    static const char *const tag[PS_LAUNCH_NROLES] = {"C", "S", "W"};
    char **argv;
    if (F->node_role == PS_LAUNCH_SCHEDULER) {
        char bind[300];
        snprintf(bind, sizeof bind, "tcp://%s:%d", F->host, F->port);
        argv = ps_launch_flags_scheduler_argv(F, bind, NULL);
    } else {
        argv = ps_launch_flags_node_argv(F, F->node_role, F->node_rank, F->node_scheduler);
    }
    if (!argv) {
        ps_log_err("out of memory");
        return 1;
    }
    const char *job = ps_launch_flags_value(F, "job-id");
    ps_log_info("task is %s%d of job %s (%d servers, %d workers), scheduler at %s",
                tag[F->node_role], F->node_role == PS_LAUNCH_SCHEDULER ? 0 : F->node_rank,
                job ? job : "(no id)", F->servers, F->workers,
                F->node_scheduler[0] ? F->node_scheduler : "this task");
    fflush(stderr);
    execv(argv[0], argv);
    ps_log_err("cannot run %s: %s", argv[0], strerror(errno));
    char **a = argv;
    ps_launch_argv_destroy(&a);
    return 1;
}
