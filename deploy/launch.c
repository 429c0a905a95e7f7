/*
 * deploy/launch.c - shardps-launch: a whole shardps cluster on this machine.
 *
 * Starts one scheduler, S servers and M workers, each its own process, and
 * turns their exit statuses into one exit status for the job. The scheduler
 * starts first on an ephemeral port and writes its endpoint into a file in a
 * fresh temporary directory; servers and workers are then started with that
 * endpoint. Their output is relayed on the launcher's stderr.
 *
 * A child that fails, a signal to the launcher, or --timeout stops the job:
 * SIGTERM to every child's process group, SIGKILL after 5 s, output drained.
 * Under --respawn a lost child starts again instead, the scheduler included
 * (at its port, resuming from its state file).
 *
 * This file is the job's life: its phases, its deadlines and its exit code.
 * The flags and each role's command line are deploy/launch_flags.c's; the
 * processes and their output are deploy/launch_children.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/trace.h"
#include "common/version.h"
#include "deploy/launch_children.h"
#include "deploy/launch_flags.h"
#include "proto/codec.h"
#include "proto/curve.h"
#include "deploy/launch_node.h"
#include "deploy/launch_plot.h"
#include "deploy/launch_summary.h"
#include "scheduler/scheduler.h"

#define S_ENDPOINT_WAIT_S 15.0 /* how long the scheduler has to write its endpoint */
#define S_STOP_GRACE_S 5.0     /* SIGTERM -> SIGKILL */
#define S_AFTER_SCHED_S 15.0   /* others must exit this long after the scheduler did */
#define S_DRAIN_S 1.0          /* pipes still open after every child exited */
#define S_ENDPOINT_TICK_MS 20  /* how often the endpoint file is looked at */

/* Launcher-only flags whose SHARDPS_* variables must not reach the children:
 * a role may read a flag of the same name with another meaning (a worker's
 * --summary, --evaluate), and dump-params goes to worker 0 only. */
static const char *const s_unset_env[] = {
    "SHARDPS_HOST",
    "SHARDPS_BIN_DIR",
    "SHARDPS_JOB_TIMEOUT",
    "SHARDPS_DUMP_PARAMS",
    "SHARDPS_SAVE_MODEL",
    "SHARDPS_SUMMARY",
    "SHARDPS_EVALUATE",
    "SHARDPS_METRICS_BIND", /* the scheduler's alone: servers and workers would all bind it */
    "SHARDPS_TRACE",        /* each process gets its own file on its command line */
};

enum { S_PHASE_ENDPOINT, S_PHASE_RUN, S_PHASE_STOP };

typedef struct {
    ps_launch_flags_t *F;       /* the command line */
    ps_launch_children_t C;     /* the processes */
    char tmpdir[PATH_MAX];      /* fresh directory for the endpoint file; "" if none */
    char secret[PATH_MAX + 16]; /* the job's secret made in tmpdir; "" if given */
    int made_keys;              /* --secure without --keys: the job's keys are in tmpdir */
    char epfile[PATH_MAX];      /* the endpoint file */
    char endpoint[256];         /* what the scheduler wrote */
    int sig_pipe[2];            /* self-pipe: signal handlers write the signal number */
    int phase;                  /* S_PHASE_* */
    double t_start;             /* ps_now() when the scheduler was started */
    double stop_at;             /* when SIGKILL follows SIGTERM (S_PHASE_STOP) */
    int killed;                 /* SIGKILL was sent */
    double sched_done_at;       /* when the scheduler exited 0; 0 = not yet */
    double drain_until;         /* after the last child was reaped; 0 = not yet */
    ps_launch_plot_t *plot;     /* the run's plots (--plot); NULL = none */
    int exit_code;              /* what main returns */
    int respawned;              /* scheduler, servers and workers restarted so far (--respawn) */
    int no_progress;            /* the scheduler ended the job at chance (its exit status) */
    int sched_failed;           /* the scheduler failed the job first: its cause is the job's */
    const char *summary;        /* --summary: the scheduler's, then ours (s_write_summary) */
    char why[512];              /* first cause of a failure */
} s_launch_t;

/* Write end of the self-pipe. The one mutable global: a signal handler can
 * reach nothing else. */
static int s_sig_wfd = -1;

static void s_on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t rc = write(s_sig_wfd, &b, 1);
    (void)rc; /* a full pipe already wakes poll() */
    errno = saved;
}

/* ---- stopping ------------------------------------------------------------ */

/* Starts stopping the job; the first cause wins. */
static void s_stop(s_launch_t *L, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void s_stop(s_launch_t *L, int code, const char *fmt, ...)
{
    if (L->phase == S_PHASE_STOP) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->why, sizeof L->why, fmt, ap);
    va_end(ap);
    L->exit_code = code;
    L->phase = S_PHASE_STOP;
    L->stop_at = ps_now() + S_STOP_GRACE_S;
    if (code == 0) { /* the job is done; what is left is only stopped */
        ps_log_warn("%s", L->why);
    } else {
        ps_log_err("%s", L->why);
    }
    if (L->C.nrunning > 0) {
        ps_log_info("stopping %d process%s (SIGTERM, SIGKILL after %.0f s)", L->C.nrunning,
                    L->C.nrunning == 1 ? "" : "es", S_STOP_GRACE_S);
        ps_launch_children_signal(&L->C, SIGTERM);
        ps_launch_children_signal(&L->C, SIGCONT); /* a stopped one takes its SIGTERM */
    }
}

static void s_kill_now(s_launch_t *L)
{
    if (L->killed || L->C.nrunning == 0) {
        return;
    }
    L->killed = 1;
    for (int i = 0; i < L->C.nkids; i++) {
        if (L->C.kids[i].running) {
            ps_log_warn("%s (pid %d) still running; sending SIGKILL", L->C.kids[i].tag,
                        (int)L->C.kids[i].pid);
        }
    }
    ps_launch_children_signal(&L->C, SIGKILL);
}

/* --respawn: starts a dead child's slot again while the budget lasts and the
 * job runs: a server as a new spare, a worker with its rank (it joins the
 * running job in place of itself, once the scheduler has left it out). A
 * child whose binary could not be run (status 127, ps_proc_spawn) is not:
 * it would fail again at once, spending the budget. Returns 0 (started, or
 * nothing to do) or PS_EIO. */
static int s_respawn(s_launch_t *L, ps_launch_child_t *c, int status)
{
    const ps_launch_flags_t *F = L->F;
    if (L->respawned >= F->respawn || L->sched_done_at != 0) {
        return 0;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        ps_log_warn("%s could not be run: not started again", c->tag);
        return PS_EIO;
    }
    const int server = c->role == PS_LAUNCH_SERVER;
    char **argv = ps_launch_flags_node_argv(F, c->role, server ? -1 : c->rank, L->endpoint);
    int rc = ps_launch_children_respawn(&L->C, c, F->spares + L->respawned, argv);
    ps_launch_argv_destroy(&argv);
    if (rc == 0) {
        L->respawned++;
        ps_log_info("started %s (pid %d), respawn %d of %d", c->tag, (int)c->pid, L->respawned,
                    F->respawn);
    }
    return rc;
}

/* Under --min-workers K, a worker's failure leaves the job to the scheduler
 * (which leaves the worker out) while K workers still run, and always when
 * the worker was started again to join; under --respawn it is started again
 * to join (stepped modes: an async job takes no joiners). */
static int s_worker_may_fail(s_launch_t *L, ps_launch_child_t *c, const char *how, int status)
{
    const char *k = ps_launch_flags_value(L->F, "min-workers");
    int min = k ? atoi(k) : 0;
    if (c->role != PS_LAUNCH_WORKER || min <= 0) {
        return 0;
    }
    int running = 0;
    for (int i = 0; i < L->C.nkids; i++) {
        running += L->C.kids[i].role == PS_LAUNCH_WORKER && L->C.kids[i].running;
    }
    if (c->joining && L->sched_done_at != 0) {
        /* started again after a kill near the end: the others finished the
         * job while it was on its way back in; nothing was lost */
        ps_log_info("%s (pid %d) %s: the job ended before this worker took part in it", c->tag,
                    (int)c->pid, how);
        return 1;
    }
    if (running < min && c->joining) {
        /* On its way back in, the others may have finished the job (it had
         * nothing left to join), or the scheduler ends it for want of
         * workers: either way the scheduler's exit says how the job went. */
        ps_log_warn("%s (pid %d) %s while joining; the scheduler ends the job", c->tag,
                    (int)c->pid, how);
        return 1;
    }
    if (running < min) {
        return 0;
    }
    ps_log_warn("%s (pid %d) %s; %d workers run (--min-workers %d): the job goes on", c->tag,
                (int)c->pid, how, running, min);
    const char *mode = ps_launch_flags_value(L->F, "mode");
    if (!mode || strcmp(mode, "async") != 0) {
        s_respawn(L, c, status); /* not started: the job goes on without it all the same */
    }
    return 1;
}

/* With spares (--spares, --respawn) a server's death is the scheduler's to
 * judge: it replaces the server from a spare, or fails the job when it
 * cannot. Under --respawn the dead server's slot starts again as a new
 * spare, so the next loss has one too. */
static int s_server_may_fail(s_launch_t *L, ps_launch_child_t *c, const char *how, int status)
{
    const ps_launch_flags_t *F = L->F;
    if (c->role != PS_LAUNCH_SERVER || (F->spares == 0 && F->respawn == 0) ||
        L->phase != S_PHASE_RUN) {
        return 0;
    }
    const char *replicas = ps_launch_flags_value(F, "replicas");
    const char *to = replicas && atoi(replicas) > 0 ? "its replica, or a spare" : "a spare";
    ps_log_warn("%s (pid %d) %s; the scheduler hands its rank to %s", c->tag, (int)c->pid,
                how, to);
    return s_respawn(L, c, status) == 0;
}

/* The directory the scheduler keeps its state in (its --checkpoint-dir, or
 * the one it resumed from, where it checkpoints on); NULL when it has none. */
static const char *s_state_dir(const ps_launch_flags_t *F)
{
    const char *dir = ps_launch_flags_value(F, "checkpoint-dir");
    dir = dir ? dir : ps_launch_flags_value(F, "resume");
    return dir ? dir : ps_launch_flags_value(F, "resume-or-start");
}

/* --respawn: a scheduler killed by a signal mid-run (one that exited chose
 * to: its job ended or failed) starts again at the same port with --resume
 * DIR, from its state file there; the nodes, still running on their
 * --scheduler-grace, register with it again. Returns 1 when it started. */
static int s_scheduler_may_restart(s_launch_t *L, ps_launch_child_t *c, const char *how,
                                   int status)
{
    ps_launch_flags_t *F = L->F;
    const char *dir = s_state_dir(F);
    const char *port = strrchr(L->endpoint, ':');
    if (c->role != PS_LAUNCH_SCHEDULER || !WIFSIGNALED(status) || L->phase != S_PHASE_RUN ||
        L->respawned >= F->respawn || !dir || !port) {
        return 0;
    }
    char state[PATH_MAX + 32];
    snprintf(state, sizeof state, "%s/scheduler.state", dir);
    if (access(state, F_OK) != 0) {
        ps_log_err("scheduler (pid %d) %s before it saved its state in %s: not started again",
                   (int)c->pid, how, dir);
        return 0;
    }
    char bind[300];
    snprintf(bind, sizeof bind, "tcp://%s%s", F->host, port);
    /* --resume DIR for this command line only (it and --resume-or-start exclude each other) */
    const char *resume = ps_launch_flags_value(F, "resume");
    const char *or_start = ps_launch_flags_value(F, "resume-or-start");
    ps_launch_flags_set(F, "resume", dir);
    ps_launch_flags_set(F, "resume-or-start", NULL);
    char **argv = ps_launch_flags_scheduler_argv(F, bind, NULL);
    ps_launch_flags_set(F, "resume", resume);
    ps_launch_flags_set(F, "resume-or-start", or_start);
    ps_log_warn("scheduler (pid %d) %s; starting it again at %s from %s", (int)c->pid, how,
                bind, state);
    int rc = ps_launch_children_respawn(&L->C, c, 0, argv);
    ps_launch_argv_destroy(&argv);
    if (rc != 0) {
        return 0;
    }
    L->respawned++;
    ps_log_info("started scheduler (pid %d), respawn %d of %d", (int)c->pid, L->respawned,
                F->respawn);
    return 1;
}

/* Reaps every child that has exited; a failure starts the stop. */
static void s_reap(s_launch_t *L)
{
    int status = 0;
    ps_launch_child_t *c;
    while ((c = ps_launch_children_reap(&L->C, &status)) != NULL) {
        int pid = (int)c->pid;
        char how[96];
        ps_proc_describe(status, how, sizeof how);
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (c->role == PS_LAUNCH_SCHEDULER && WIFEXITED(status) && WEXITSTATUS(status) == 2 &&
            L->phase == S_PHASE_STOP) {
            /* The scheduler's "nothing to resume" (its own line says why)
             * outranks the nodes it stopped, who may have gone first. */
            L->exit_code = 2;
        }
        if (L->phase == S_PHASE_STOP) {
            ps_log_debug("%s (pid %d) %s", c->tag, pid, how);
        } else if (c->role == PS_LAUNCH_SCHEDULER && L->phase == S_PHASE_ENDPOINT) {
            /* Status 2 is the scheduler's "bad usage": it rejected a job flag
             * we forwarded (its own error line says which), so ours is too. */
            int usage = WIFEXITED(status) && WEXITSTATUS(status) == 2;
            if (usage && L->C.error[0]) { /* the cause, for the result line */
                s_stop(L, 2, "%s", L->C.error);
            } else {
                s_stop(L, usage ? 2 : 1, "scheduler (pid %d) %s %s", pid, how,
                       access(L->epfile, F_OK) == 0 ? "before the servers and workers started"
                                                    : "before writing its endpoint");
            }
        } else if (c->role == PS_LAUNCH_SCHEDULER && WIFEXITED(status) &&
                   WEXITSTATUS(status) == 2) {
            s_stop(L, 2, "scheduler (pid %d) %s: nothing to resume", pid, how);
        } else if (c->role == PS_LAUNCH_SCHEDULER && WIFEXITED(status) &&
                   WEXITSTATUS(status) == PS_EXIT_NO_PROGRESS) {
            L->no_progress = 1; /* the job finished: the nodes end as after an ok one */
            L->sched_done_at = ps_now();
        } else if (!ok && s_scheduler_may_restart(L, c, how, status)) {
            /* started again: the job goes on */
        } else if (!ok && !s_worker_may_fail(L, c, how, status) &&
                   !s_server_may_fail(L, c, how, status)) {
            L->sched_failed = c->role == PS_LAUNCH_SCHEDULER && WIFEXITED(status);
            s_stop(L, 1, "%s (pid %d) %s", c->tag, pid, how);
        } else {
            ps_log_debug("%s (pid %d) %s", c->tag, pid, how);
            if (c->role == PS_LAUNCH_SCHEDULER) {
                L->sched_done_at = ps_now();
            }
        }
        status = 0;
    }
}

/* ---- starting ------------------------------------------------------------ */

/* Looks for the endpoint file. Returns 1 when read, 0 when not there yet,
 * PS_EPROTO when it is there but unusable (after logging why). */
static int s_read_endpoint(s_launch_t *L)
{
    int fd = open(L->epfile, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    char buf[sizeof L->endpoint + 1];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (!nl) {
        if ((size_t)n == sizeof buf - 1) {
            s_stop(L, 1, "scheduler endpoint file %s: line too long", L->epfile);
            return PS_EPROTO;
        }
        return 0; /* not written atomically after all: wait for the newline */
    }
    while (nl > buf && (nl[-1] == '\r' || nl[-1] == ' ' || nl[-1] == '\t')) {
        nl--;
    }
    *nl = '\0';
    if (buf[0] == '\0' || strpbrk(buf, " \t") || !strstr(buf, "://")) {
        s_stop(L, 1, "scheduler endpoint file %s: bad endpoint '%s'", L->epfile, buf);
        return PS_EPROTO;
    }
    if (snprintf(L->endpoint, sizeof L->endpoint, "%s", buf) >= (int)sizeof L->endpoint) {
        s_stop(L, 1, "scheduler endpoint file %s: endpoint too long", L->epfile);
        return PS_EPROTO;
    }
    return 1;
}

static int s_start_scheduler(s_launch_t *L)
{
    char bind[300], port[16] = "*";
    if (L->F->port) {
        snprintf(port, sizeof port, "%d", L->F->port);
    }
    snprintf(bind, sizeof bind, "tcp://%s:%s", L->F->host, port);
    char **argv = ps_launch_flags_scheduler_argv(L->F, bind, L->epfile);
    int rc = ps_launch_children_spawn(&L->C, &L->C.kids[0], argv);
    ps_launch_argv_destroy(&argv);
    return rc;
}

static int s_start_nodes(s_launch_t *L)
{
    for (int i = 1; i < L->C.nkids; i++) {
        ps_launch_child_t *c = &L->C.kids[i];
        char **argv = ps_launch_flags_node_argv(L->F, c->role, c->rank, L->endpoint);
        int rc = ps_launch_children_spawn(&L->C, c, argv);
        ps_launch_argv_destroy(&argv);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- set-up -------------------------------------------------------------- */

/* A scheduler the launcher may restart (--respawn, a state directory) is
 * waited for by the nodes: --scheduler-grace unless given. */
#define S_DEFAULT_GRACE "60"

static void s_default_grace(ps_launch_flags_t *F)
{
    if (F->respawn > 0 && s_state_dir(F) && !ps_launch_flags_value(F, "scheduler-grace")) {
        ps_launch_flags_set(F, "scheduler-grace", S_DEFAULT_GRACE);
    }
}

static int s_install_signals(s_launch_t *L)
{
    if (pipe2(L->sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        ps_log_err("pipe: %s", strerror(errno));
        return PS_EIO;
    }
    s_sig_wfd = L->sig_pipe[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sa.sa_flags = 0;
    sigaction(SIGPIPE, &sa, NULL);
    return 0;
}

/* Makes L->tmpdir and names L->epfile in it. Returns 0 or PS_EIO (after
 * logging why, or with why in L->why). */
static int s_make_tmpdir(s_launch_t *L)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(L->tmpdir, sizeof L->tmpdir, "%s/shardps-launch.XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(L->tmpdir)) {
        ps_log_err("cannot create a temporary directory %s: %s", L->tmpdir,
                   strerror(errno));
        L->tmpdir[0] = '\0';
        return PS_EIO;
    }
    if (snprintf(L->epfile, sizeof L->epfile, "%s/scheduler.endpoint", L->tmpdir) >=
        (int)sizeof L->epfile) {
        snprintf(L->why, sizeof L->why, "temporary directory path too long");
        return PS_EIO;
    }
    return 0;
}

/* --secure without --keys: the job's own keys, made in the private (0700)
 * temporary directory and removed with it, so no other job shares them. */
static int s_make_keys(s_launch_t *L, ps_launch_flags_t *F)
{
    if (!ps_launch_flags_secure(F) || ps_launch_flags_value(F, "keys")) {
        return 0;
    }
    if (ps_curve_keygen(L->tmpdir, L->why, sizeof L->why) != 0) {
        return PS_EIO;
    }
    ps_launch_flags_set(F, "keys", L->tmpdir);
    L->made_keys = 1;
    return 0;
}

/* Without --secret-file: the job's own secret, made in the private (0700)
 * temporary directory; the roles get its path, never its value. */
static int s_make_secret(s_launch_t *L, ps_launch_flags_t *F)
{
    const char *given = ps_launch_flags_value(F, "secret-file");
    if (given && given[0]) {
        return 0;
    }
    snprintf(L->secret, sizeof L->secret, "%s/job.secret", L->tmpdir);
    if (ps_secret_write(L->secret, L->why, sizeof L->why) != 0) {
        ps_log_err("%s", L->why);
        return -1;
    }
    ps_launch_flags_set(F, "secret-file", L->secret);
    return 0;
}

static void s_remove_tmpdir(s_launch_t *L)
{
    if (!L->tmpdir[0]) {
        return;
    }
    DIR *d = opendir(L->tmpdir);
    if (d) {
        struct dirent *e;
        char path[PATH_MAX + 256];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", L->tmpdir, e->d_name);
                unlink(path);
            }
        }
        closedir(d);
    }
    rmdir(L->tmpdir);
    L->tmpdir[0] = '\0';
}

/* ---- the loop ------------------------------------------------------------ */

static void s_on_signals(s_launch_t *L)
{
    unsigned char b[64];
    ssize_t n;
    while ((n = read(L->sig_pipe[0], b, sizeof b)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            int sig = b[i];
            if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP) {
                continue; /* SIGCHLD: s_reap() runs every turn */
            }
            if (L->phase == S_PHASE_STOP) {
                s_kill_now(L); /* asked twice: stop waiting */
            } else {
                s_stop(L, 128 + sig, "interrupted by SIG%s", sigabbrev_np(sig));
            }
        }
    }
}

/* Milliseconds until the nearest deadline, for poll(). */
static int s_poll_ms(const s_launch_t *L, double now)
{
    double timeout = L->F->timeout;
    double next = now + (L->plot ? 0.5 : 1.0); /* a safety tick; the plots' questions */
    if (L->phase == S_PHASE_ENDPOINT) {
        next = now + S_ENDPOINT_TICK_MS / 1000.0;
    }
    if (L->phase != S_PHASE_STOP && timeout > 0 && L->t_start + timeout < next) {
        next = L->t_start + timeout;
    }
    if (L->phase == S_PHASE_STOP && !L->killed && L->stop_at < next) {
        next = L->stop_at;
    }
    if (L->phase == S_PHASE_RUN && L->sched_done_at > 0 &&
        L->sched_done_at + S_AFTER_SCHED_S < next) {
        next = L->sched_done_at + S_AFTER_SCHED_S;
    }
    if (L->drain_until > 0 && L->drain_until < next) {
        next = L->drain_until;
    }
    double ms = (next - now) * 1000.0;
    return ms <= 0 ? 0 : (int)ms + 1;
}

/* Checks the clocks and the endpoint file after each wake-up. */
static void s_on_tick(s_launch_t *L, double now)
{
    const ps_launch_flags_t *F = L->F;
    if (L->phase == S_PHASE_ENDPOINT) {
        int rc = s_read_endpoint(L);
        if (rc == 1) {
            ps_log_info("scheduler at %s; starting %d server%s, %d spare%s and %d worker%s",
                        L->endpoint, F->servers, F->servers == 1 ? "" : "s", F->spares,
                        F->spares == 1 ? "" : "s", F->workers, F->workers == 1 ? "" : "s");
            if (L->made_keys) { /* no other way to learn them */
                ps_log_info(
                    "shardps-status --scheduler %s --keys %s asks this --secure job "
                    "(its keys, made for it, go at its end)",
                    L->endpoint, L->tmpdir);
            }
            L->phase = S_PHASE_RUN;
            if (s_start_nodes(L) != 0) {
                s_stop(L, 1, "could not start every server and worker");
            }
        } else if (rc == 0 && now - L->t_start > S_ENDPOINT_WAIT_S) {
            s_stop(L, 1, "scheduler wrote no endpoint to %s within %.0f s", L->epfile,
                   S_ENDPOINT_WAIT_S);
        }
    }
    if (L->phase != S_PHASE_STOP && F->timeout > 0 && now - L->t_start >= F->timeout) {
        s_stop(L, 1, "timed out after %g s (--timeout)", F->timeout);
    }
    if (L->phase == S_PHASE_RUN && L->sched_done_at > 0 && L->C.nrunning > 0 &&
        now - L->sched_done_at >= S_AFTER_SCHED_S) {
        /* The job finished (the scheduler exited 0 after its summary): a node
         * that does not exit (stopped, hung) is stopped, and the job stays ok. */
        const ps_launch_child_t *c = ps_launch_children_running(&L->C);
        s_stop(L, 0, "%s (pid %d)%s still running %.0f s after the job finished; stopping %s",
               c ? c->tag : "?", c ? (int)c->pid : 0, L->C.nrunning > 1 ? " and others" : "",
               S_AFTER_SCHED_S, L->C.nrunning > 1 ? "them" : "it");
    }
    if (L->phase == S_PHASE_STOP && !L->killed && now >= L->stop_at) {
        s_kill_now(L);
    }
    if (L->plot && L->phase == S_PHASE_RUN && L->sched_done_at == 0) {
        ps_launch_plot_poll(L->plot, L->endpoint,
                            ps_launch_flags_secure(L->F) ? ps_launch_flags_value(L->F, "keys")
                                                         : NULL,
                            now);
    }
}

/* --trace: the servers' and workers' files merged into one, on the
 * scheduler's clock; the parts that exist (a failed node may have written none). */
static void s_merge_traces(const s_launch_t *L)
{
    const char *trace = ps_launch_flags_value(L->F, "trace");
    const char **tags = trace ? calloc((size_t)L->C.nkids, sizeof *tags) : NULL;
    if (!tags) {
        return;
    }
    for (int i = 1; i < L->C.nkids; i++) {
        tags[i - 1] = L->C.kids[i].tag;
    }
    char err[512];
    int n;
    if (ps_trace_merge_parts(trace, tags, L->C.nkids - 1, &n, err, sizeof err) != 0) {
        ps_log_err("trace not merged: %s", err);
    } else if (n > 0) {
        ps_log_info("trace of %d processes merged into %s", n, trace);
    }
    free(tags);
}

/* Runs the job to its end: every child reaped and its output relayed. */
static void s_run(s_launch_t *L)
{
    for (;;) {
        double now = ps_now();
        if (L->C.nrunning == 0 && L->phase != S_PHASE_ENDPOINT &&
            (L->phase == S_PHASE_STOP || ps_launch_children_all_started(&L->C))) {
            if (L->drain_until == 0) {
                L->drain_until = now + S_DRAIN_S;
            }
            if (ps_launch_children_open_streams(&L->C) == 0 || now >= L->drain_until) {
                break;
            }
        }
        int sig_ready = 0;
        int rc =
            ps_launch_children_poll(&L->C, L->sig_pipe[0], s_poll_ms(L, now), &sig_ready);
        if (rc < 0 && errno != EINTR) {
            s_stop(L, 1, "poll: %s", strerror(errno));
            s_kill_now(L);
        }
        if (sig_ready) {
            s_on_signals(L);
        }
        s_reap(L);
        s_on_tick(L, ps_now());
    }
    ps_launch_children_close(&L->C);
}

/* --summary FILE: the scheduler writes it when it ends the job, and the
 * launcher once every child exited (s_write_summary), from the scheduler's
 * if there is one: an earlier run's goes first, lest it pass for this one's. */
static void s_forget_summary(s_launch_t *L)
{
    L->summary = ps_launch_flags_value(L->F, "summary");
    if (L->summary && unlink(L->summary) != 0 && errno != ENOENT) {
        ps_log_warn("cannot remove the earlier %s: %s", L->summary, strerror(errno));
    }
}

/* The user's summary, however the job ended (deploy/launch_summary.h). */
static void s_write_summary(s_launch_t *L)
{
    if (!L->summary) {
        return;
    }
    char cause[512];
    const ps_launch_summary_t sum = {.scheduler_file = L->summary,
                                     .path = L->summary,
                                     .job_id = ps_launch_flags_value(L->F, "job-id"),
                                     .exit_code = L->exit_code,
                                     .why = L->why};
    const int rc = ps_launch_summary_write(&sum, cause, sizeof cause);
    if (rc < 0 && L->exit_code == 0) {
        snprintf(L->why, sizeof L->why, "cannot write the summary to %s", L->summary);
        L->exit_code = 1;
    } else if ((L->no_progress && L->exit_code == PS_EXIT_NO_PROGRESS) ||
               (L->sched_failed && cause[0])) {
        snprintf(L->why, sizeof L->why, "%s", cause); /* the scheduler's, in its summary */
    }
}

/* The job's last line, on stdout (the logs are on stderr, a failure's cause
 * among them), so that a script can take it alone: "job ok in 44.5 s: <the
 * scheduler's summary>" or "job failed: why". */
static void s_print_result(const s_launch_t *L)
{
    const char *sum = L->C.summary;
    if (L->exit_code == PS_EXIT_NO_PROGRESS && L->no_progress) {
        printf("job no_progress in %.1f s: %s%s%s\n", ps_now() - L->t_start, L->why,
               sum[0] ? ": " : "", sum);
    } else if (L->exit_code == 0) {
        printf("job ok in %.1f s%s%s\n", ps_now() - L->t_start, sum[0] ? ": " : "", sum);
    } else {
        printf("job failed: %s\n", L->why[0] ? L->why : "could not start");
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    ps_launch_flags_t flags;
    s_launch_t launch = {.F = &flags, .sig_pipe = {-1, -1}};
    s_launch_t *L = &launch;
    if (ps_version_flag(PS_LAUNCH_PROG, ps_codec_build_id, argc, argv)) {
        return 0;
    }
    ps_log_set_role("L", -1);
    int rc = ps_launch_flags_parse(&flags, argc, argv);
    if (rc == 1) {
        return 0;
    }
    if (rc != 0) {
        return 2;
    }
    for (size_t i = 0; i < sizeof s_unset_env / sizeof s_unset_env[0]; i++) {
        unsetenv(s_unset_env[i]);
    }
    if (flags.node) {
        return ps_launch_node_exec(&flags); /* returns only when it could not */
    }

    L->exit_code = 1;
    s_default_grace(&flags);
    if (ps_launch_children_init(&L->C, flags.servers, flags.spares, flags.workers) != 0) {
        ps_log_err("out of memory");
        goto fail;
    }
    if (s_install_signals(L) != 0 || s_make_tmpdir(L) != 0 || s_make_keys(L, &flags) != 0 ||
        s_make_secret(L, &flags) != 0 ||
        ps_launch_children_log(&L->C, flags.log_file, flags.log_dir) != 0) {
        goto fail;
    }
    if (flags.plot_dir[0] && ps_launch_plot_new(flags.plot_dir, &L->plot) != 0) {
        ps_log_err("out of memory");
        goto fail;
    }
    s_forget_summary(L);
    L->t_start = ps_now();
    L->phase = S_PHASE_ENDPOINT;
    if (s_start_scheduler(L) != 0) {
        snprintf(L->why, sizeof L->why, "could not start the scheduler");
        goto fail;
    }
    s_run(L);
    s_merge_traces(L);
    if (L->phase != S_PHASE_STOP) {
        L->exit_code = L->no_progress ? PS_EXIT_NO_PROGRESS : 0;
        if (L->summary && access(L->summary, F_OK) != 0) {
            snprintf(L->why, sizeof L->why, "summary file %s was not written", L->summary);
            L->exit_code = 1;
        }
    }
    s_write_summary(L);
    if (L->plot) {
        ps_launch_plot_write(L->plot, L->summary);
    }
    if (L->exit_code != 0 && !L->no_progress) {
        ps_log_write(PS_LOG_ERR, "job failed: %s", L->why);
    }
    goto done;
fail:
    L->exit_code = 1;
    ps_log_write(PS_LOG_ERR, "job failed: %s", L->why[0] ? L->why : "could not start");
done:
    s_print_result(L);
    s_remove_tmpdir(L);
    ps_launch_plot_destroy(&L->plot);
    ps_launch_children_fini(&L->C);
    for (int i = 0; i < 2; i++) {
        if (L->sig_pipe[i] >= 0) {
            close(L->sig_pipe[i]);
        }
    }
    return L->exit_code;
}
