/*
 * deploy/launch.c - shardps-launch: a whole shardps cluster on this machine.
 *
 * Starts one scheduler, S servers and M workers, each its own process, and
 * turns their exit statuses into one exit status for the job. The scheduler
 * starts first on an ephemeral port and writes its endpoint into a file in a
 * fresh temporary directory; servers and workers are then started with that
 * endpoint. Every line a child prints on stdout or stderr is re-emitted on the
 * launcher's stderr: verbatim when it is already a logger line, otherwise with
 * a logger-format prefix carrying the child's tag (C, S0, W1, ...).
 *
 * A child that fails, a signal to the launcher, or --timeout stops the job:
 * SIGTERM to every child's process group, SIGKILL after 5 s, output drained.
 *
 * It does not define or check job flags: it forwards them verbatim to the
 * roles that take them, by the roles' own flag tables (scheduler/flags.h,
 * server/flags.h, worker/flags.h), and the roles validate them. It checks
 * only what it needs itself: the server and worker counts against --mode
 * (common/job.h), and --log-level.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/job.h"
#include "common/log.h"
#include "common/safetensors.h"
#include "deploy/proc.h"
#include "scheduler/flags.h"
#include "server/flags.h"
#include "worker/flags.h"

#define S_PROG "shardps-launch"
#define S_LINE_MAX (64 * 1024) /* longer child lines are split at this size */
#define S_ENDPOINT_WAIT_S 15.0 /* how long the scheduler has to write its endpoint */
#define S_STOP_GRACE_S 5.0     /* SIGTERM -> SIGKILL */
#define S_AFTER_SCHED_S 15.0   /* others must exit this long after the scheduler did */
#define S_DRAIN_S 1.0          /* pipes still open after every child exited */
#define S_ENDPOINT_TICK_MS 20  /* how often the endpoint file is looked at */

enum { S_ROLE_C = 0, S_ROLE_S = 1, S_ROLE_W = 2 };
static const char *const s_role_name[] = {"scheduler", "server", "worker"};

/* Flags the launcher writes itself on each role's command line (see
 * s_start_scheduler, s_start_nodes), or that are not for a job (a worker's
 * --evaluate and its --summary), so it never forwards them. */
static const char *const s_own[3][7] = {
    {"bind", "endpoint-file", "servers", "workers", NULL},
    {"scheduler", "bind", "advertise", "rank", NULL},
    {"scheduler", "bind", "advertise", "rank", "evaluate", "summary", NULL},
};

/* Where a forwarded flag goes, for --help, by the mask of roles (1 << S_ROLE_*)
 * whose tables have it; s_note overrides it where the launcher does more. */
static const char *const s_to_words[8] = {
    "", "scheduler", "servers", "scheduler and servers", "workers", "scheduler and workers",
    "servers and workers", "every role",
};
static const struct {
    const char *name;
    const char *to;
} s_note[] = {
    {"summary", "scheduler; must exist at the end"},
    {"dump-params", "worker 0, or every worker when FILE holds %d"},
    {"save-model", "worker 0; default: model.safetensors beside --summary"},
    {"log-level", "every role and the launcher"},
};

#define S_MAX_FWD 64        /* forwarded flags, all roles together */
#define S_MAX_ROLE_FLAGS 32 /* entries in one role's table */
_Static_assert(PS_SCHEDULER_NFLAGS <= S_MAX_ROLE_FLAGS && PS_SERVER_NFLAGS <= S_MAX_ROLE_FLAGS &&
                   PS_WORKER_NFLAGS <= S_MAX_ROLE_FLAGS,
               "S_MAX_ROLE_FLAGS");

/* One forwarded flag: passed as "--name value", when given, to every role
 * whose table has it. */
typedef struct {
    const ps_flag_t *flag; /* the first role table's entry: name, metavar, help */
    unsigned to;           /* mask of 1 << S_ROLE_* */
    char help[320];        /* the launcher's --help line: the role's and where it goes */
} s_fwd_t;

/* Launcher-only flags whose SHARDPS_* variables must not reach the children:
 * a role may read a flag of the same name with another meaning (a worker's
 * --summary, --evaluate), and dump-params goes to worker 0 only. */
static const char *const s_unset_env[] = {
    "SHARDPS_HOST",
    "SHARDPS_BIN_DIR",
    "SHARDPS_TIMEOUT",
    "SHARDPS_DUMP_PARAMS",
    "SHARDPS_SAVE_MODEL",
    "SHARDPS_SUMMARY",
    "SHARDPS_EVALUATE",
};

enum { S_PHASE_ENDPOINT, S_PHASE_RUN, S_PHASE_STOP };

typedef struct {
    char tag[16];           /* log tag: "C", "S0", "W3" */
    int role;               /* S_ROLE_* */
    int rank;               /* rank within the role; 0 for the scheduler */
    pid_t pid;              /* 0 until started; also its process group id */
    int running;            /* started and not yet reaped */
    ps_proc_lines_t out[2]; /* [0] stdout, [1] stderr (lines <= S_LINE_MAX) */
} s_child_t;

typedef struct {
    /* Flags. Strings are borrowed from argv or environ. */
    int servers;             /* S (0 in allreduce mode) */
    int workers;             /* M */
    const char *host;        /* what the roles bind to */
    const char *bin_dir;     /* where the role binaries are; NULL = search */
    double timeout;          /* whole-job limit in seconds; 0 = none */
    const char *fwd_val[S_MAX_FWD]; /* values of the forwarded flags; NULL = not given */
    char model_path[4096];   /* the default --save-model, beside --summary */
    char **extra;            /* arguments after "--", appended to the scheduler's */
    int nextra;

    /* The roles' flag tables (their destinations hold the roles' defaults
     * and are never read) and what the launcher forwards by them. */
    ps_scheduler_flags_t role_c;
    ps_server_flags_t role_s;
    ps_worker_flags_t role_w;
    ps_flag_t role_flags[3][S_MAX_ROLE_FLAGS]; /* [S_ROLE_*] */
    size_t nrole_flags[3];
    s_fwd_t fwd[S_MAX_FWD];
    size_t nfwd;
    ps_job_t job; /* defaults and --mode: whether the job has servers */

    /* Run state. */
    char bin[3][PATH_MAX]; /* resolved binary of each role */
    char tmpdir[PATH_MAX]; /* fresh directory for the endpoint file; "" if none */
    char epfile[PATH_MAX]; /* the endpoint file */
    char endpoint[256];    /* what the scheduler wrote */
    s_child_t *kids;       /* [0] scheduler, [1..S] servers, [S+1..S+M] workers */
    int nkids;             /* 1 + S + M */
    int nrunning;          /* children started and not reaped */
    int sig_pipe[2];       /* self-pipe: signal handlers write the signal number */
    int phase;             /* S_PHASE_* */
    double t_start;        /* ps_now() when the scheduler was started */
    double stop_at;        /* when SIGKILL follows SIGTERM (S_PHASE_STOP) */
    int killed;            /* SIGKILL was sent */
    double sched_done_at;  /* when the scheduler exited 0; 0 = not yet */
    double drain_until;    /* after the last child was reaped; 0 = not yet */
    int exit_code;         /* what main returns */
    char why[512];         /* first cause of a failure */
    char *scratch;         /* one output line being assembled */
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

/* ---- output ------------------------------------------------------------- */

/* Does the line start like "HH:MM:SS.mmm "? */
static int s_is_logger_line(const char *p, size_t n)
{
    static const char shape[] = "00:00:00.000 ";
    if (n < sizeof shape - 1) {
        return 0;
    }
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        if (shape[i] == '0') {
            if (p[i] < '0' || p[i] > '9') {
                return 0;
            }
        } else if (p[i] != shape[i]) {
            return 0;
        }
    }
    return 1;
}

/* Emits one child line (without its newline) on stderr with one write(). */
static void s_emit(s_launch_t *L, const s_child_t *c, int k, const char *p, size_t n)
{
    size_t used = 0;
    if (!s_is_logger_line(p, n)) {
        struct timeval tv;
        struct tm tm;
        gettimeofday(&tv, NULL);
        localtime_r(&tv.tv_sec, &tm);
        /* '>' marks the child's stdout, '!' its stderr: not from the logger. */
        int w =
            snprintf(L->scratch, 64, "%02d:%02d:%02d.%03d %s %c ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv.tv_usec / 1000), c->tag, k == 0 ? '>' : '!');
        used = (w > 0 && w < 64) ? (size_t)w : 0;
    }
    memcpy(L->scratch + used, p, n);
    used += n;
    L->scratch[used++] = '\n';
    /* When stderr is gone there is nothing better to do. */
    (void)ps_proc_write_all(STDERR_FILENO, L->scratch, used);
}

/* Where a child's stream sends its lines. */
typedef struct {
    s_launch_t *L;
    const s_child_t *c;
    int k; /* 0 stdout, 1 stderr */
} s_sink_t;

static void s_on_line(void *ctx, const char *p, size_t n)
{
    const s_sink_t *sink = ctx;
    s_emit(sink->L, sink->c, sink->k, p, n);
}

static void s_stream_close(s_launch_t *L, s_child_t *c, int k)
{
    s_sink_t sink = {L, c, k};
    ps_proc_lines_close(&c->out[k], s_on_line, &sink);
}

/* Reads what is there on one stream and emits every complete line.
 * Returns 1 when bytes were read, 0 when none are ready, -1 once closed. */
static int s_stream_read(s_launch_t *L, s_child_t *c, int k)
{
    s_sink_t sink = {L, c, k};
    int rc = ps_proc_lines_read(&c->out[k], S_LINE_MAX, s_on_line, &sink);
    if (rc == PS_ENOMEM) {
        ps_log_err("out of memory reading %s's output", c->tag);
        s_stream_close(L, c, k);
        return -1;
    }
    return rc;
}

/* ---- children ----------------------------------------------------------- */

/* Growable NULL-terminated argv; strings are owned copies. */
typedef struct {
    char **v;
    int n;
    int cap;
    int oom;
} s_argv_t;

static void s_argv_add(s_argv_t *a, const char *s)
{
    if (a->oom) {
        return;
    }
    if (a->n + 2 > a->cap) {
        int cap = a->cap ? a->cap * 2 : 32;
        char **nv = realloc(a->v, (size_t)cap * sizeof *nv);
        if (!nv) {
            a->oom = 1;
            return;
        }
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n] = strdup(s);
    if (!a->v[a->n]) {
        a->oom = 1;
        return;
    }
    a->n++;
    a->v[a->n] = NULL;
}

static void s_argv_addf(s_argv_t *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void s_argv_addf(s_argv_t *a, const char *fmt, ...)
{
    char buf[PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s_argv_add(a, buf);
}

static void s_argv_fini(s_argv_t *a)
{
    for (int i = 0; i < a->n; i++) {
        free(a->v[i]);
    }
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

static int s_owned(int role, const char *name)
{
    for (size_t i = 0; s_own[role][i]; i++) {
        if (!strcmp(s_own[role][i], name)) {
            return 1;
        }
    }
    return 0;
}

/* Index of a forwarded flag in L->fwd, or -1. */
static int s_fwd_index(const s_launch_t *L, const char *name)
{
    for (size_t i = 0; i < L->nfwd; i++) {
        if (!strcmp(L->fwd[i].flag->name, name)) {
            return (int)i;
        }
    }
    return -1;
}

/* Builds L->fwd from the roles' tables: every flag a role takes and the
 * launcher does not set itself, in the roles' order. */
static void s_fwd_build(s_launch_t *L)
{
    ps_scheduler_flags_init(&L->role_c);
    ps_server_flags_init(&L->role_s);
    ps_worker_flags_init(&L->role_w);
    L->nrole_flags[S_ROLE_C] = ps_scheduler_flags_table(&L->role_c, L->role_flags[S_ROLE_C]);
    L->nrole_flags[S_ROLE_S] = ps_server_flags_table(&L->role_s, L->role_flags[S_ROLE_S]);
    L->nrole_flags[S_ROLE_W] = ps_worker_flags_table(&L->role_w, L->role_flags[S_ROLE_W]);
    for (int r = 0; r < 3; r++) {
        for (size_t i = 0; i < L->nrole_flags[r]; i++) {
            const ps_flag_t *f = &L->role_flags[r][i];
            if (s_owned(r, f->name)) {
                continue;
            }
            int k = s_fwd_index(L, f->name);
            if (k < 0) {
                assert(L->nfwd < S_MAX_FWD);
                k = (int)L->nfwd++;
                L->fwd[k].flag = f;
            }
            L->fwd[k].to |= 1u << r;
        }
    }
    for (size_t k = 0; k < L->nfwd; k++) {
        s_fwd_t *fw = &L->fwd[k];
        const char *to = s_to_words[fw->to];
        for (size_t i = 0; i < sizeof s_note / sizeof s_note[0]; i++) {
            to = strcmp(s_note[i].name, fw->flag->name) ? to : s_note[i].to;
        }
        snprintf(fw->help, sizeof fw->help, "%s (%s)", fw->flag->help, to);
    }
}

/* Appends every forwarded flag that goes to this role and rank, in the
 * order of the role's table. */
static void s_argv_add_fwd(s_argv_t *a, const s_launch_t *L, int role, int rank)
{
    for (size_t i = 0; i < L->nrole_flags[role]; i++) {
        const char *name = L->role_flags[role][i].name;
        int k = s_fwd_index(L, name);
        const char *val = k >= 0 ? L->fwd_val[k] : NULL;
        if (!val || s_owned(role, name)) {
            continue;
        }
        /* One parameters file: worker 0 writes it, unless each worker's name differs;
         * the model file is worker 0's alone. */
        if (rank != 0 && ((!strcmp(name, "dump-params") && !strstr(val, "%d")) ||
                          !strcmp(name, "save-model"))) {
            continue;
        }
        s_argv_addf(a, "--%s", name);
        s_argv_add(a, val);
    }
}

static const char *s_fwd_value(const s_launch_t *L, const char *name)
{
    int k = s_fwd_index(L, name);
    return k >= 0 ? L->fwd_val[k] : NULL;
}

/* Allreduce jobs have no servers, and their workers bind ring endpoints. */
static int s_allreduce(const s_launch_t *L)
{
    return !ps_job_has_servers(&L->job);
}

/* Starts one child. Returns 0, or PS_EIO after logging why. */
static int s_spawn(s_launch_t *L, s_child_t *c, s_argv_t *a)
{
    if (a->oom) {
        ps_log_err("cannot start %s: out of memory", c->tag);
        return PS_EIO;
    }
    if (ps_log_level >= PS_LOG_DEBUG) {
        size_t cap = 4096, used = 0;
        char line[4096];
        line[0] = '\0';
        for (int i = 0; i < a->n && used + 1 < cap; i++) {
            int w = snprintf(line + used, cap - used, "%s%s", i ? " " : "", a->v[i]);
            used += w > 0 ? (size_t)w : 0;
        }
        ps_log_debug("starting %s: %s", c->tag, line);
    }
    /* Own process group, so a stop reaches its own children too and the
     * terminal's Ctrl-C reaches only the launcher; die with the launcher. */
    ps_proc_spec_t spec = {
        .path = L->bin[c->role],
        .argv = a->v,
        .flags = PS_PROC_GROUP | PS_PROC_PDEATH | PS_PROC_CAPTURE | PS_PROC_NO_STDIN,
        .prog = S_PROG,
    };
    ps_proc_t p;
    char err[256];
    if (ps_proc_spawn(&spec, &p, err, sizeof err) != 0) {
        ps_log_err("cannot start %s: %s", c->tag, err);
        return PS_EIO;
    }
    c->out[0].fd = p.out[0];
    c->out[1].fd = p.out[1];
    c->pid = p.pid;
    c->running = 1;
    L->nrunning++;
    return 0;
}

/* Sends sig to the process group of every running child. */
static void s_signal_all(s_launch_t *L, int sig)
{
    for (int i = 0; i < L->nkids; i++) {
        s_child_t *c = &L->kids[i];
        if (c->running) {
            ps_proc_signal_group(c->pid, sig);
        }
    }
}

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
    ps_log_err("%s", L->why);
    if (L->nrunning > 0) {
        ps_log_info("stopping %d process%s (SIGTERM, SIGKILL after %.0f s)", L->nrunning,
                    L->nrunning == 1 ? "" : "es", S_STOP_GRACE_S);
        s_signal_all(L, SIGTERM);
    }
}

static void s_kill_now(s_launch_t *L)
{
    if (L->killed || L->nrunning == 0) {
        return;
    }
    L->killed = 1;
    for (int i = 0; i < L->nkids; i++) {
        if (L->kids[i].running) {
            ps_log_warn("%s (pid %d) still running; sending SIGKILL", L->kids[i].tag,
                        (int)L->kids[i].pid);
        }
    }
    s_signal_all(L, SIGKILL);
}

/* Reaps every child that has exited; a failure starts the stop. */
static void s_reap(s_launch_t *L)
{
    for (;;) {
        int status = 0;
        pid_t pid = ps_proc_wait(-1, 0, &status);
        if (pid <= 0) {
            return;
        }
        s_child_t *c = NULL;
        for (int i = 0; i < L->nkids; i++) {
            if (L->kids[i].running && L->kids[i].pid == pid) {
                c = &L->kids[i];
            }
        }
        if (!c) {
            continue;
        }
        c->running = 0;
        L->nrunning--;
        /* Its last words are already in the pipes: print them before its end. */
        for (int k = 0; k < 2; k++) {
            for (int n = 0; n < 256 && s_stream_read(L, c, k) == 1; n++) {
            }
        }
        char how[96];
        ps_proc_describe(status, how, sizeof how);
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (L->phase == S_PHASE_STOP) {
            ps_log_debug("%s (pid %d) %s", c->tag, (int)pid, how);
        } else if (c->role == S_ROLE_C && L->phase == S_PHASE_ENDPOINT) {
            /* Status 2 is the scheduler's "bad usage": it rejected a job flag
             * we forwarded (its own error line says which), so ours is too. */
            int usage = WIFEXITED(status) && WEXITSTATUS(status) == 2;
            s_stop(L, usage ? 2 : 1, "scheduler (pid %d) %s %s", (int)pid, how,
                   access(L->epfile, F_OK) == 0 ? "before the servers and workers started"
                                                : "before writing its endpoint");
        } else if (!ok) {
            s_stop(L, 1, "%s (pid %d) %s", c->tag, (int)pid, how);
        } else {
            ps_log_debug("%s (pid %d) %s", c->tag, (int)pid, how);
            if (c->role == S_ROLE_C) {
                L->sched_done_at = ps_now();
            }
        }
    }
}

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
    s_argv_t a = {0};
    s_argv_add(&a, L->bin[S_ROLE_C]);
    s_argv_add(&a, "--bind");
    s_argv_addf(&a, "tcp://%s:*", L->host);
    s_argv_add(&a, "--endpoint-file");
    s_argv_add(&a, L->epfile);
    s_argv_add(&a, "--servers");
    s_argv_addf(&a, "%d", L->servers);
    s_argv_add(&a, "--workers");
    s_argv_addf(&a, "%d", L->workers);
    s_argv_add_fwd(&a, L, S_ROLE_C, 0);
    for (int i = 0; i < L->nextra; i++) {
        s_argv_add(&a, L->extra[i]);
    }
    int rc = s_spawn(L, &L->kids[0], &a);
    s_argv_fini(&a);
    return rc;
}

static int s_start_nodes(s_launch_t *L)
{
    for (int i = 1; i < L->nkids; i++) {
        s_child_t *c = &L->kids[i];
        s_argv_t a = {0};
        s_argv_add(&a, L->bin[c->role]);
        s_argv_add(&a, "--scheduler");
        s_argv_add(&a, L->endpoint);
        if (c->role == S_ROLE_S || (c->role == S_ROLE_W && s_allreduce(L))) {
            s_argv_add(&a, "--bind");
            s_argv_addf(&a, "tcp://%s:*", L->host);
        }
        s_argv_add(&a, "--rank");
        s_argv_addf(&a, "%d", c->rank);
        s_argv_add_fwd(&a, L, c->role, c->rank);
        int rc = s_spawn(L, c, &a);
        s_argv_fini(&a);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- set-up ------------------------------------------------------------- */

/* Finds shardps-<role>: --bin-dir, else next to this executable, else in
 * ../<role>/ (the Meson build tree), else $PATH. Returns 0 or PS_ENOENT. */
static int s_find_bin(const char *bin_dir, const char *role, char *out, size_t cap)
{
    char name[64], cand[PATH_MAX + 128];
    snprintf(name, sizeof name, "shardps-%s", role);
    if (bin_dir) {
        snprintf(cand, sizeof cand, "%s/%s", bin_dir, name);
        if (!ps_proc_is_exe(cand)) {
            fprintf(stderr, S_PROG ": error: no executable %s in --bin-dir %s\n", name,
                    bin_dir);
            return PS_ENOENT;
        }
    } else if (ps_proc_find_exe(name, role, cand, sizeof cand) != 0) {
        fprintf(stderr,
                S_PROG ": error: cannot find %s (looked next to " S_PROG
                       ", in ../%s/ and in $PATH; use --bin-dir)\n",
                name, role);
        return PS_ENOENT;
    }
    if (!realpath(cand, out) && snprintf(out, cap, "%s", cand) >= (int)cap) {
        fprintf(stderr, S_PROG ": error: path too long: %s\n", cand);
        return PS_ENOENT;
    }
    return 0;
}

static int s_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int s_bad(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, S_PROG ": error: %s\n", msg);
    return PS_EINVAL;
}

/* --save-model (by default beside --summary) and --init-from: a path that
 * cannot be written or a bad model file fails now, not after the job.
 * Returns 0, or PS_EINVAL after one line on stderr. */
static int s_model_files(s_launch_t *L)
{
    char why[512];
    int k = s_fwd_index(L, "save-model");
    const char *summary = s_fwd_value(L, "summary");
    if (k >= 0 && !L->fwd_val[k] && summary) {
        const char *slash = strrchr(summary, '/');
        snprintf(L->model_path, sizeof L->model_path, "%.*smodel.safetensors",
                 slash ? (int)(slash - summary) + 1 : 0, summary);
        L->fwd_val[k] = L->model_path;
    }
    if (k >= 0 && L->fwd_val[k] && ps_safetensors_check_path(L->fwd_val[k], why, sizeof why)) {
        return s_bad("--save-model %s", why);
    }
    const char *init = s_fwd_value(L, "init-from");
    ps_safetensors_t *st = NULL;
    if (init && ps_safetensors_read(init, &st, why, sizeof why) != 0) {
        return s_bad("--init-from %s", why);
    }
    ps_safetensors_destroy(&st);
    return 0;
}

/* Parses and checks the launcher's flags. Returns 0, 1 after --help, or
 * PS_EINVAL after one line on stderr. */
static int s_parse(s_launch_t *L, int argc, char **argv)
{
    static const char about[] =
        "Starts a local shardps cluster: one scheduler, S servers and M workers, each\n"
        "its own process, with their output relayed on stderr. Job flags are passed\n"
        "to the roles that take them; arguments after \"--\" go to the scheduler.\n"
        "Exit status: 0 job ok, 1 job failed, 2 bad usage, 130/143 interrupted.";
    ps_flag_t flags[5 + S_MAX_FWD] = {
        {"servers", PS_FLAG_INT, &L->servers, "N",
         "number of servers (-1 = 1, or 0 with --mode allreduce)"},
        {"workers", PS_FLAG_INT, &L->workers, "N", "number of workers"},
        {"host", PS_FLAG_STR, &L->host, "HOST", "address the roles bind to"},
        {"bin-dir", PS_FLAG_STR, &L->bin_dir, "DIR",
         "role binaries (default: next to this one, ../<role>/, $PATH)"},
        {"timeout", PS_FLAG_DOUBLE, &L->timeout, "SECONDS",
         "stop and fail the job after this long (0 = never)"},
    };
    s_fwd_build(L);
    for (size_t i = 0; i < L->nfwd; i++) {
        const ps_flag_t *f = L->fwd[i].flag;
        flags[5 + i] =
            (ps_flag_t){f->name, PS_FLAG_STR, &L->fwd_val[i], f->metavar, L->fwd[i].help};
    }
    int rest = argc;
    int rc = ps_config_parse(S_PROG, about, flags, 5 + L->nfwd, argc, argv, &rest);
    if (rc != 0) {
        return rc;
    }
    if (rest < argc) {
        if (rest < 2 || strcmp(argv[rest - 1], "--") != 0) {
            return s_bad("unexpected argument '%s' (see --help)", argv[rest]);
        }
        L->extra = argv + rest;
        L->nextra = argc - rest;
    }
    ps_job_defaults(&L->job);
    const char *mode = s_fwd_value(L, "mode");
    if (mode) {
        (void)ps_job_parse_mode(mode, &L->job); /* a bad one is the scheduler's to report */
    }
    if (L->servers == -1) {
        L->servers = s_allreduce(L) ? 0 : 1;
    }
    char err[256];
    if (ps_job_validate_nodes(&L->job, L->servers, L->workers, err, sizeof err) != 0) {
        return s_bad("%s", err);
    }
    if (!L->host || !L->host[0] || strpbrk(L->host, " \t\n/")) {
        return s_bad("--host '%s': must be a host name or address", L->host ? L->host : "");
    }
    if (L->timeout < 0) {
        return s_bad("--timeout %g: must be >= 0", L->timeout);
    }
    if (L->bin_dir && !L->bin_dir[0]) {
        return s_bad("--bin-dir: empty");
    }
    if (s_model_files(L) != 0) {
        return PS_EINVAL;
    }
    const char *level = s_fwd_value(L, "log-level");
    if (level && ps_log_set_level_flag(S_PROG, level) != 0) {
        return PS_EINVAL;
    }
    for (int r = 0; r < 3; r++) {
        if (s_find_bin(L->bin_dir, s_role_name[r], L->bin[r], sizeof L->bin[r]) != 0) {
            return PS_EINVAL;
        }
    }
    return 0;
}

/* Makes room for two pipes per child under RLIMIT_NOFILE. */
static void s_raise_fd_limit(int nkids)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)nkids * 2 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
        setrlimit(RLIMIT_NOFILE, &rl);
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

/* ---- the loop ----------------------------------------------------------- */

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
    double next = now + 1.0; /* a safety tick */
    if (L->phase == S_PHASE_ENDPOINT) {
        next = now + S_ENDPOINT_TICK_MS / 1000.0;
    }
    if (L->phase != S_PHASE_STOP && L->timeout > 0 && L->t_start + L->timeout < next) {
        next = L->t_start + L->timeout;
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
    if (L->phase == S_PHASE_ENDPOINT) {
        int rc = s_read_endpoint(L);
        if (rc == 1) {
            ps_log_info("scheduler at %s; starting %d server%s and %d worker%s",
                        L->endpoint, L->servers, L->servers == 1 ? "" : "s", L->workers,
                        L->workers == 1 ? "" : "s");
            L->phase = S_PHASE_RUN;
            if (s_start_nodes(L) != 0) {
                s_stop(L, 1, "could not start every server and worker");
            }
        } else if (rc == 0 && now - L->t_start > S_ENDPOINT_WAIT_S) {
            s_stop(L, 1, "scheduler wrote no endpoint to %s within %.0f s", L->epfile,
                   S_ENDPOINT_WAIT_S);
        }
    }
    if (L->phase != S_PHASE_STOP && L->timeout > 0 && now - L->t_start >= L->timeout) {
        s_stop(L, 1, "timed out after %g s (--timeout)", L->timeout);
    }
    if (L->phase == S_PHASE_RUN && L->sched_done_at > 0 && L->nrunning > 0 &&
        now - L->sched_done_at >= S_AFTER_SCHED_S) {
        const s_child_t *c = NULL;
        for (int i = 0; i < L->nkids && !c; i++) {
            c = L->kids[i].running ? &L->kids[i] : NULL;
        }
        s_stop(L, 1, "%s (pid %d)%s still running %.0f s after the scheduler finished",
               c ? c->tag : "?", c ? (int)c->pid : 0, L->nrunning > 1 ? " and others" : "",
               S_AFTER_SCHED_S);
    }
    if (L->phase == S_PHASE_STOP && !L->killed && now >= L->stop_at) {
        s_kill_now(L);
    }
}

static int s_open_streams(const s_launch_t *L)
{
    int n = 0;
    for (int i = 0; i < L->nkids; i++) {
        n += (L->kids[i].out[0].fd >= 0) + (L->kids[i].out[1].fd >= 0);
    }
    return n;
}

/* Runs the job to its end. Returns PS_OK or PS_ENOMEM. */
static int s_run(s_launch_t *L)
{
    size_t cap = 1 + 2 * (size_t)L->nkids;
    struct pollfd *pfd = calloc(cap, sizeof *pfd);
    s_child_t **who = calloc(cap, sizeof *who);
    int *which = calloc(cap, sizeof *which);
    if (!pfd || !who || !which) {
        free(pfd);
        free(who);
        free(which);
        return PS_ENOMEM;
    }
    for (;;) {
        double now = ps_now();
        if (L->nrunning == 0 && L->phase != S_PHASE_ENDPOINT) {
            int all_started = 1;
            for (int i = 0; i < L->nkids; i++) {
                all_started &= L->kids[i].pid > 0;
            }
            if (L->phase == S_PHASE_STOP || all_started) {
                if (L->drain_until == 0) {
                    L->drain_until = now + S_DRAIN_S;
                }
                if (s_open_streams(L) == 0 || now >= L->drain_until) {
                    break;
                }
            }
        }
        size_t n = 0;
        pfd[n++] = (struct pollfd){.fd = L->sig_pipe[0], .events = POLLIN};
        for (int i = 0; i < L->nkids; i++) {
            for (int k = 0; k < 2; k++) {
                if (L->kids[i].out[k].fd >= 0) {
                    who[n] = &L->kids[i];
                    which[n] = k;
                    pfd[n++] =
                        (struct pollfd){.fd = L->kids[i].out[k].fd, .events = POLLIN};
                }
            }
        }
        int rc = poll(pfd, (nfds_t)n, s_poll_ms(L, now));
        if (rc < 0 && errno != EINTR) {
            s_stop(L, 1, "poll: %s", strerror(errno));
            s_kill_now(L);
        }
        if (rc > 0) {
            for (size_t i = 1; i < n; i++) {
                if (pfd[i].revents) {
                    s_stream_read(L, who[i], which[i]);
                }
            }
            if (pfd[0].revents) {
                s_on_signals(L);
            }
        }
        s_reap(L);
        s_on_tick(L, ps_now());
    }
    for (int i = 0; i < L->nkids; i++) {
        s_stream_close(L, &L->kids[i], 0);
        s_stream_close(L, &L->kids[i], 1);
    }
    free(pfd);
    free(who);
    free(which);
    return PS_OK;
}

int main(int argc, char **argv)
{
    s_launch_t launch = {
        .servers = -1, /* resolved by the mode: 1, or 0 for allreduce */
        .workers = 1,
        .host = "127.0.0.1",
        .sig_pipe = {-1, -1},
    };
    s_launch_t *L = &launch;
    ps_log_set_role("L", -1);
    int rc = s_parse(L, argc, argv);
    if (rc == 1) {
        return 0;
    }
    if (rc != 0) {
        return 2;
    }
    for (size_t i = 0; i < sizeof s_unset_env / sizeof s_unset_env[0]; i++) {
        unsetenv(s_unset_env[i]);
    }

    L->exit_code = 1;
    L->nkids = 1 + L->servers + L->workers;
    s_raise_fd_limit(L->nkids);
    L->kids = calloc((size_t)L->nkids, sizeof *L->kids);
    L->scratch = malloc(S_LINE_MAX + 64);
    if (!L->kids || !L->scratch) {
        ps_log_err("out of memory");
        goto fail;
    }
    for (int i = 0; i < L->nkids; i++) {
        s_child_t *c = &L->kids[i];
        c->role = i == 0 ? S_ROLE_C : i <= L->servers ? S_ROLE_S : S_ROLE_W;
        c->rank = i == 0 ? 0 : i <= L->servers ? i - 1 : i - 1 - L->servers;
        snprintf(c->tag, sizeof c->tag, "%s", "C");
        if (i > 0) {
            snprintf(c->tag, sizeof c->tag, "%c%d", c->role == S_ROLE_S ? 'S' : 'W',
                     c->rank);
        }
        c->out[0].fd = c->out[1].fd = -1;
    }
    if (s_install_signals(L) != 0) {
        goto fail;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(L->tmpdir, sizeof L->tmpdir, "%s/shardps-launch.XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(L->tmpdir)) {
        ps_log_err("cannot create a temporary directory %s: %s", L->tmpdir,
                   strerror(errno));
        L->tmpdir[0] = '\0';
        goto fail;
    }
    if (snprintf(L->epfile, sizeof L->epfile, "%s/scheduler.endpoint", L->tmpdir) >=
        (int)sizeof L->epfile) {
        snprintf(L->why, sizeof L->why, "temporary directory path too long");
        goto fail;
    }

    L->t_start = ps_now();
    L->phase = S_PHASE_ENDPOINT;
    if (s_start_scheduler(L) != 0) {
        snprintf(L->why, sizeof L->why, "could not start the scheduler");
        goto fail;
    }
    if (s_run(L) != PS_OK) {
        ps_log_err("out of memory");
        s_signal_all(L, SIGKILL);
        goto fail;
    }
    if (L->phase != S_PHASE_STOP) {
        L->exit_code = 0;
        const char *summary = s_fwd_value(L, "summary");
        if (summary && access(summary, F_OK) != 0) {
            snprintf(L->why, sizeof L->why, "summary file %s was not written", summary);
            L->exit_code = 1;
        }
    }
    double took = ps_now() - L->t_start;
    if (L->exit_code == 0) {
        ps_log_write(PS_LOG_INFO, "job ok in %.1f s", took);
    } else {
        ps_log_write(PS_LOG_ERR, "job failed: %s", L->why);
    }
    goto done;
fail:
    L->exit_code = 1;
    ps_log_write(PS_LOG_ERR, "job failed: %s", L->why[0] ? L->why : "could not start");
done:
    s_remove_tmpdir(L);
    if (L->kids) {
        for (int i = 0; i < L->nkids; i++) {
            ps_proc_lines_fini(&L->kids[i].out[0]);
            ps_proc_lines_fini(&L->kids[i].out[1]);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (L->sig_pipe[i] >= 0) {
            close(L->sig_pipe[i]);
        }
    }
    free(L->kids);
    free(L->scratch);
    return L->exit_code;
}
