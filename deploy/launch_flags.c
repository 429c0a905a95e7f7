/*
 * deploy/launch_flags.c - shardps-launch's flags, its --help, and each
 * role's command line, all made from the roles' flag tables.
 *
 * A flag is forwarded to every role whose table has it, except the few the
 * launcher writes itself on that role's command line (s_own). No flag is
 * defined here twice: a new flag in a role's table is forwarded and listed in
 * --help without a change here.
 */
#include "deploy/launch_flags.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/safetensors.h"
#include "common/trace.h"
#include "deploy/launch_node.h"
#include "deploy/proc.h"
#include "proto/curve.h"
#include "scheduler/scheduler.h"

static const char *const s_role_name[PS_LAUNCH_NROLES] = {"scheduler", "server", "worker"};

/* The launcher's own flags, before the forwarded ones. */
#define S_NOWN 12

/* Flags the launcher writes itself on each role's command line (see
 * ps_launch_flags_scheduler_argv, ps_launch_flags_node_argv), or that are not
 * for a job (a worker's --evaluate and its --summary) or not for every
 * worker (--fault-nan-push and --fault-huge-push: tests'), so it never forwards them. A server's
 * --checkpoint-dir is its own path of the job's directory: the scheduler's
 * --checkpoint-dir is the job's, and servers take its path by default. */
static const char *const s_own[PS_LAUNCH_NROLES][12] = {
    {"bind", "endpoint-file", "servers", "workers", NULL},
    {"scheduler", "bind", "rank", "spare", "job-hash", "metrics-bind",
     "checkpoint-dir", NULL},
    {"scheduler", "bind", "rank", "job-hash", "evaluate", "summary",
     "fault-nan-push", "fault-huge-push", "metrics-bind", NULL},
};

/* Where a forwarded flag goes, for --help, by the mask of roles
 * (1 << PS_LAUNCH_<role>) whose tables have it; s_note overrides it where the
 * launcher does more. */
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
    {"log-format", "every role and the launcher, which writes every line it relays so"},
    {"keys", "every role; with --secure and no --keys the launcher makes the job's keys in "
             "its private temporary directory"},
    {"secret-file", "every role; without it the launcher makes the job's secret in its "
                    "private temporary directory"},
    {"metrics-bind", "scheduler: the job's metrics, every node's with a node label"},
    {"trace", "every server and worker writes FILE with .S0, .W1 ... before its extension; "
              "the launcher merges them into FILE at the end"},
};

_Static_assert(PS_SCHEDULER_NFLAGS <= PS_LAUNCH_MAX_ROLE_FLAGS &&
                   PS_SERVER_NFLAGS <= PS_LAUNCH_MAX_ROLE_FLAGS &&
                   PS_WORKER_NFLAGS <= PS_LAUNCH_MAX_ROLE_FLAGS,
               "PS_LAUNCH_MAX_ROLE_FLAGS");

/* ---- the forwarding table ------------------------------------------------ */

static int s_owned(int role, const char *name)
{
    for (size_t i = 0; s_own[role][i]; i++) {
        if (!strcmp(s_own[role][i], name)) {
            return 1;
        }
    }
    return 0;
}

/* Index of a forwarded flag in F->fwd, or -1. */
static int s_fwd_index(const ps_launch_flags_t *F, const char *name)
{
    for (size_t i = 0; i < F->nfwd; i++) {
        if (!strcmp(F->fwd[i].flag->name, name)) {
            return (int)i;
        }
    }
    return -1;
}

/* Builds F->fwd from the roles' tables: every flag a role takes and the
 * launcher does not set itself, in the roles' order. */
static void s_fwd_build(ps_launch_flags_t *F)
{
    ps_scheduler_flags_init(&F->role_c);
    ps_server_flags_init(&F->role_s);
    ps_worker_flags_init(&F->role_w);
    F->nrole_flags[PS_LAUNCH_SCHEDULER] =
        ps_scheduler_flags_table(&F->role_c, F->role_flags[PS_LAUNCH_SCHEDULER]);
    F->nrole_flags[PS_LAUNCH_SERVER] =
        ps_server_flags_table(&F->role_s, F->role_flags[PS_LAUNCH_SERVER]);
    F->nrole_flags[PS_LAUNCH_WORKER] =
        ps_worker_flags_table(&F->role_w, F->role_flags[PS_LAUNCH_WORKER]);
    for (int r = 0; r < PS_LAUNCH_NROLES; r++) {
        for (size_t i = 0; i < F->nrole_flags[r]; i++) {
            const ps_flag_t *f = &F->role_flags[r][i];
            if (s_owned(r, f->name)) {
                continue;
            }
            int k = s_fwd_index(F, f->name);
            if (k < 0) {
                assert(F->nfwd < PS_LAUNCH_MAX_FWD);
                k = (int)F->nfwd++;
                F->fwd[k].flag = f;
            }
            F->fwd[k].to |= 1u << r;
        }
    }
    for (size_t k = 0; k < F->nfwd; k++) {
        ps_launch_fwd_t *fw = &F->fwd[k];
        const char *to = s_to_words[fw->to];
        for (size_t i = 0; i < sizeof s_note / sizeof s_note[0]; i++) {
            to = strcmp(s_note[i].name, fw->flag->name) ? to : s_note[i].to;
        }
        /* the role's default, which the launcher's own entry (NULL: not
         * given, so not forwarded) cannot show */
        char def[64];
        ps_config_default(fw->flag, def, sizeof def);
        snprintf(fw->help, sizeof fw->help, "%s (%s)%s%s%s", fw->flag->help, to,
                 def[0] ? " [default: " : "", def, def[0] ? "]" : "");
    }
}

void ps_launch_flags_set(ps_launch_flags_t *F, const char *name, const char *value)
{
    int k = s_fwd_index(F, name);
    assert(k >= 0);
    F->fwd_val[k] = value;
}

const char *ps_launch_flags_value(const ps_launch_flags_t *F, const char *name)
{
    int k = s_fwd_index(F, name);
    return k >= 0 ? F->fwd_val[k] : NULL;
}

/* Allreduce jobs have no servers, and their workers bind ring endpoints. */
static int s_allreduce(const ps_launch_flags_t *F)
{
    return !ps_job_has_servers(&F->job);
}

/* ---- parsing ------------------------------------------------------------- */

/* Finds shardps-<role>: --bin-dir, else next to this executable, else in
 * ../<role>/ (the Meson build tree), else $PATH. Returns 0 or PS_ENOENT. */
static int s_find_bin(const char *bin_dir, const char *role, char *out, size_t cap)
{
    char name[64], cand[PATH_MAX + 128];
    snprintf(name, sizeof name, "shardps-%s", role);
    if (bin_dir) {
        snprintf(cand, sizeof cand, "%s/%s", bin_dir, name);
        if (!ps_proc_is_exe(cand)) {
            fprintf(stderr, PS_LAUNCH_PROG ": error: no executable %s in --bin-dir %s\n",
                    name, bin_dir);
            return PS_ENOENT;
        }
    } else if (ps_proc_find_exe(name, role, cand, sizeof cand) != 0) {
        fprintf(stderr,
                PS_LAUNCH_PROG ": error: cannot find %s (looked next to " PS_LAUNCH_PROG
                               ", in ../%s/ and in $PATH; use --bin-dir)\n",
                name, role);
        return PS_ENOENT;
    }
    if (!realpath(cand, out) && snprintf(out, cap, "%s", cand) >= (int)cap) {
        fprintf(stderr, PS_LAUNCH_PROG ": error: path too long: %s\n", cand);
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
    fprintf(stderr, PS_LAUNCH_PROG ": error: %s\n", msg);
    return PS_EINVAL;
}

/* The output paths (--summary, --dump-params, --checkpoint-dir, --save-model,
 * by default beside --summary) and --init-from: a path that cannot be
 * written or a bad model file fails now, not after the job.
 * Returns 0, or PS_EINVAL after one line on stderr. */
static int s_model_files(ps_launch_flags_t *F)
{
    char why[512];
    /* Every output path before anything starts (the roles check them again). */
    const char *const outputs[] = {"summary", "dump-params"};
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        const char *path = ps_launch_flags_value(F, outputs[i]);
        if (path && i == 0 && ps_file_mkdirs_for(path) != 0) { /* as --plot's, --log-dir's */
            return s_bad("--summary %s: cannot make its directory: %s", path, strerror(errno));
        }
        if (path && ps_file_check_writable(path, why, sizeof why)) {
            return s_bad("--%s %s", outputs[i], why);
        }
    }
    const char *ck = ps_launch_flags_value(F, "checkpoint-dir");
    if (ck && ps_file_check_dir_writable(ck, why, sizeof why)) {
        return s_bad("--checkpoint-dir %s", why);
    }
    int k = s_fwd_index(F, "save-model");
    const char *summary = ps_launch_flags_value(F, "summary");
    if (k >= 0 && !F->fwd_val[k] && summary) {
        const char *slash = strrchr(summary, '/');
        snprintf(F->model_path, sizeof F->model_path, "%.*smodel.safetensors",
                 slash ? (int)(slash - summary) + 1 : 0, summary);
        F->fwd_val[k] = F->model_path;
    }
    if (k >= 0 && F->fwd_val[k] && ps_file_check_writable(F->fwd_val[k], why, sizeof why)) {
        return s_bad("--save-model %s", why);
    }
    const char *init = ps_launch_flags_value(F, "init-from");
    ps_safetensors_t *st = NULL;
    if (init && ps_safetensors_read(init, &st, why, sizeof why) != 0) {
        return s_bad("--init-from %s", why);
    }
    ps_safetensors_destroy(&st);
    return 0;
}

int ps_launch_flags_secure(const ps_launch_flags_t *F)
{
    const char *v = ps_launch_flags_value(F, "secure");
    return v && !strcmp(v, "1");
}

/* --secure --keys DIR: a key file the roles would refuse fails now, with the
 * roles' reason (without --keys the launcher makes the job's keys). */
static int s_keys(const ps_launch_flags_t *F)
{
    const char *keys = ps_launch_flags_value(F, "keys");
    static const ps_role_t roles[] = {PS_ROLE_SCHEDULER, PS_ROLE_SERVER, PS_ROLE_WORKER};
    char why[512];
    for (int r = 0; r < PS_LAUNCH_NROLES && (keys || !ps_launch_flags_secure(F)); r++) {
        if (ps_curve_check_flags(ps_launch_flags_secure(F), keys, roles[r], why, sizeof why)) {
            return s_bad("%s", why);
        }
    }
    return 0;
}
static int s_job_identity(ps_launch_flags_t *F, int argc, char **argv);
/* --plot (by default beside --summary), --log-file, --log-dir and --trace:
 * a place that cannot be written fails now, not after the job. Returns 0,
 * or PS_EINVAL after one line on stderr. */
static int s_observe_files(ps_launch_flags_t *F)
{
    char why[512], probe[PATH_MAX + 32];
    const char *summary = ps_launch_flags_value(F, "summary");
    if (F->plot && !strcmp(F->plot, "none")) {
        F->plot_dir[0] = '\0';
    } else if (F->plot) {
        snprintf(F->plot_dir, sizeof F->plot_dir, "%s", F->plot);
    } else if (summary) {
        const char *slash = strrchr(summary, '/');
        snprintf(F->plot_dir, sizeof F->plot_dir, "%.*s",
                 slash ? (int)(slash - summary) + (slash == summary) : 1, slash ? summary : ".");
    }
    const char *dirs[][2] = {{"--plot", F->plot_dir[0] ? F->plot_dir : NULL},
                             {"--log-dir", F->log_dir}};
    for (int i = 0; i < 2; i++) {
        snprintf(probe, sizeof probe, "%s/progress.csv", dirs[i][1] ? dirs[i][1] : "");
        /* made when missing, as mkdir -p (the default plot directory holds --summary) */
        if (dirs[i][1] && (i == 1 || F->plot) && ps_file_mkdirs(dirs[i][1]) != 0) {
            return s_bad("%s %s: cannot make the directory: %s", dirs[i][0], dirs[i][1],
                         strerror(errno));
        }
        if (dirs[i][1] && ps_file_check_writable(probe, why, sizeof why) != 0) {
            return s_bad("%s %s: not a writable directory", dirs[i][0], dirs[i][1]);
        }
    }
    const char *trace = ps_launch_flags_value(F, "trace");
    if (F->log_file && ps_file_check_writable(F->log_file, why, sizeof why) != 0) {
        return s_bad("--log-file %s", why);
    }
    if (trace && ps_file_check_writable(trace, why, sizeof why) != 0) {
        return s_bad("--trace %s", why);
    }
    return 0;
}

/* After parsing: the job as far as the launcher needs it, the defaults
 * that depend on other flags, the checks across flags, and the role
 * binaries. Returns 0 or PS_EINVAL after one usage line. */
static int s_resolve(ps_launch_flags_t *F, int argc, char **argv)
{
    ps_job_defaults(&F->job);
    const char *mode = ps_launch_flags_value(F, "mode");
    if (mode) {
        (void)ps_job_parse_mode(mode, &F->job); /* a bad one is the scheduler's to report */
    }
    const char *wire = ps_launch_flags_value(F, "wire");
    const char *compress = ps_launch_flags_value(F, "compress");
    if (wire) { /* for the checks against the mode below (allreduce sends fp32) */
        (void)ps_job_parse_wire(wire, &F->job);
    }
    if (compress) {
        (void)ps_job_parse_compress(compress, &F->job);
    }
    if (F->servers == -1) {
        F->servers = s_allreduce(F) ? 0 : 1;
    }
    if (!F->host) {
        F->host = F->node ? "0.0.0.0" : "127.0.0.1";
    }
    if (F->node && ps_launch_node_resolve(F) != 0) {
        return PS_EINVAL;
    }
    if (F->workers == -1) {
        F->workers = 1;
    }
    char err[256];
    if (ps_job_validate_nodes(&F->job, F->servers, F->workers, err, sizeof err) != 0) {
        return s_bad("%s", err);
    }
    if (!F->host || !F->host[0] || strpbrk(F->host, " \t\n/")) {
        return s_bad("--host '%s': must be a host name or address", F->host ? F->host : "");
    }
    if (F->port < 0 || F->port > 65535) {
        return s_bad("--port %d: expected 1 to 65535, or 0", F->port);
    }
    if (F->timeout < 0) {
        return s_bad("--timeout %g: must be >= 0", F->timeout);
    }
    if (F->spares < 0 || F->spares > 64 || F->respawn < 0) {
        return s_bad("--spares %d --respawn %d: spares in [0, 64], respawn >= 0", F->spares,
                     F->respawn);
    }
    if ((F->spares || F->respawn) && F->servers == 0) {
        return s_bad("--spares and --respawn need servers (an allreduce job has none)");
    }
    /* --replicas K: the scheduler makes K spares per server its replicas */
    const char *replicas = ps_launch_flags_value(F, "replicas");
    const int k = replicas ? atoi(replicas) : 0;
    if (k > 0 && F->servers * k + F->spares <= 64) {
        F->spares += F->servers * k;
    }
    if (F->bin_dir && !F->bin_dir[0]) {
        return s_bad("--bin-dir: empty");
    }
    /* A task checks only its own role's files, on its own host: the roles do. */
    if ((!F->node && (s_model_files(F) != 0 || s_keys(F) != 0)) || s_observe_files(F) != 0) {
        return PS_EINVAL;
    }
    if (s_job_identity(F, argc, argv) != 0) {
        return PS_EINVAL;
    }
    const char *level = ps_launch_flags_value(F, "log-level");
    if (level && ps_log_set_level_flag(PS_LAUNCH_PROG, level) != 0) {
        return PS_EINVAL;
    }
    const char *format = ps_launch_flags_value(F, "log-format");
    if (format && ps_log_set_format_flag(PS_LAUNCH_PROG, format) != 0) {
        return PS_EINVAL;
    }
    for (int r = 0; r < PS_LAUNCH_NROLES; r++) {
        if (s_find_bin(F->bin_dir, s_role_name[r], F->bin[r], sizeof F->bin[r]) != 0) {
            return PS_EINVAL;
        }
    }
    return 0;
}

int ps_launch_flags_parse(ps_launch_flags_t *F, int argc, char **argv)
{
    static const char about[] =
        "Starts a local shardps cluster: one scheduler, S servers and M workers, each\n"
        "its own process, with their output relayed on stderr. Job flags are passed\n"
        "to the roles that take them; arguments after \"--\" go to the scheduler.\n"
        "Exit status: 0 job ok, 1 job failed, 2 bad usage, 130/143 interrupted.";
    *F = (ps_launch_flags_t){
        .servers = -1, /* resolved by the mode: 1, or 0 for allreduce */
        .workers = -1, /* 1, or with --node the tasks left */
        .host = NULL,  /* 127.0.0.1, or with --node 0.0.0.0 */
        .port = 0,     /* with --node 9000, else a free one */
    };
    ps_flag_t flags[S_NOWN + PS_LAUNCH_MAX_FWD] = {
        {"servers", PS_FLAG_INT, &F->servers, "N",
         "number of servers (-1 = 1, or 0 with --mode allreduce)"},
        {"workers", PS_FLAG_INT, &F->workers, "N",
         "number of workers (-1 = 1; with --node, the tasks after the scheduler and servers)"},
        {"host", PS_FLAG_STR, &F->host, "HOST",
         "address the roles bind to (default 127.0.0.1; with --node 0.0.0.0)"},
        {"bin-dir", PS_FLAG_STR, &F->bin_dir, "DIR",
         "role binaries (default: next to this one, ../<role>/, $PATH)"},
        {"timeout", PS_FLAG_DOUBLE, &F->timeout, "SECONDS",
         "stop and fail the job after this long (0 = never)", "SHARDPS_JOB_TIMEOUT"},
        {"node", PS_FLAG_BOOL, &F->node, "0|1",
         "start only this task's role of a job a cluster manager started (Slurm, mpirun, "
         "Kubernetes): role, rank and scheduler from its environment"},
        {"port", PS_FLAG_INT, &F->port, "PORT",
         "the scheduler's port (0 = with --node 9000, else a free one; with --node its host: "
         "see docs/cluster.md)"},
        {"plot", PS_FLAG_STR, &F->plot, "DIR",
         "write the run's plots here (progress.png, progress.csv, accuracy.csv); default: "
         "beside --summary; none = no plots"},
        {"log-file", PS_FLAG_STR, &F->log_file, "FILE", "also write every role's output here"},
        {"log-dir", PS_FLAG_STR, &F->log_dir, "DIR",
         "also write each role's output to DIR/scheduler.log, DIR/S0.log, DIR/W0.log ..."},
        {"spares", PS_FLAG_INT, &F->spares, "N",
         "spare servers, 0 to 64: one replaces a lost server from its newest checkpoint"},
        {"respawn", PS_FLAG_INT, &F->respawn, "N",
         "restart up to N servers (as new spares), workers (with --min-workers: they join again) "
         "or the scheduler (killed mid-run, with a checkpoint directory: it resumes) that die "
         "(0 = never)"},
    };
    _Static_assert(sizeof flags / sizeof flags[0] == S_NOWN + PS_LAUNCH_MAX_FWD, "S_NOWN");
    s_fwd_build(F);
    for (size_t i = 0; i < F->nfwd; i++) {
        const ps_flag_t *f = F->fwd[i].flag;
        /* A 0|1 flag stays one, so "--preflight" alone works here too. */
        F->fwd_bool[i] = -1;
        flags[S_NOWN + i] = f->type == PS_FLAG_BOOL
                                ? (ps_flag_t){f->name, PS_FLAG_BOOL, &F->fwd_bool[i],
                                              f->metavar, F->fwd[i].help, f->env}
                                : (ps_flag_t){f->name, PS_FLAG_STR, &F->fwd_val[i], f->metavar,
                                              F->fwd[i].help, f->env};
    }
    int rest = argc;
    int rc = ps_config_parse(PS_LAUNCH_PROG, about, flags, S_NOWN + F->nfwd, argc, argv, &rest);
    if (rc != 0) {
        return rc;
    }
    for (size_t i = 0; i < F->nfwd; i++) {
        if (F->fwd_bool[i] >= 0) {
            F->fwd_val[i] = F->fwd_bool[i] ? "1" : "0";
        }
    }
    if (rest < argc) {
        if (rest < 2 || strcmp(argv[rest - 1], "--") != 0) {
            return s_bad("unexpected argument '%s' (see --help)", argv[rest]);
        }
        F->extra = argv + rest;
        F->nextra = argc - rest;
    }
    return s_resolve(F, argc, argv);
}

/* ---- command lines ------------------------------------------------------- */

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

/* The argv, or NULL (everything freed) when an add ran out of memory. */
static char **s_argv_take(s_argv_t *a)
{
    if (a->oom) {
        for (int i = 0; i < a->n; i++) {
            free(a->v[i]);
        }
        free(a->v);
        return NULL;
    }
    return a->v;
}

void ps_launch_argv_destroy(char ***argv_p)
{
    if (!argv_p || !*argv_p) {
        return;
    }
    for (char **p = *argv_p; *p; p++) {
        free(*p);
    }
    free(*argv_p);
    *argv_p = NULL;
}

/* Appends every forwarded flag that goes to this role and rank, in the
 * order of the role's table. */
static void s_argv_add_fwd(s_argv_t *a, const ps_launch_flags_t *F, int role, int rank)
{
    for (size_t i = 0; i < F->nrole_flags[role]; i++) {
        const char *name = F->role_flags[role][i].name;
        const char *val = ps_launch_flags_value(F, name);
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
        if (!strcmp(name, "trace")) { /* one file per process, merged at the end */
            char tag[16], part[PATH_MAX + 32];
            snprintf(tag, sizeof tag, "%c%d", role == PS_LAUNCH_SERVER ? 'S' : 'W', rank);
            ps_trace_part_path(val, tag, part, sizeof part);
            s_argv_add(a, part);
            continue;
        }
        s_argv_add(a, val);
    }
}

char **ps_launch_flags_scheduler_argv(const ps_launch_flags_t *F, const char *bind,
                                      const char *epfile)
{
    s_argv_t a = {0};
    s_argv_add(&a, F->bin[PS_LAUNCH_SCHEDULER]);
    s_argv_add(&a, "--bind");
    s_argv_add(&a, bind);
    if (epfile) {
        s_argv_add(&a, "--endpoint-file");
        s_argv_add(&a, epfile);
    }
    s_argv_add(&a, "--servers");
    s_argv_addf(&a, "%d", F->servers);
    s_argv_add(&a, "--workers");
    s_argv_addf(&a, "%d", F->workers);
    s_argv_add_fwd(&a, F, PS_LAUNCH_SCHEDULER, 0);
    for (int i = 0; i < F->nextra; i++) {
        s_argv_add(&a, F->extra[i]);
    }
    return s_argv_take(&a);
}

char **ps_launch_flags_node_argv(const ps_launch_flags_t *F, int role, int rank,
                                 const char *endpoint)
{
    s_argv_t a = {0};
    s_argv_add(&a, F->bin[role]);
    s_argv_add(&a, "--scheduler");
    s_argv_add(&a, endpoint);
    if (role == PS_LAUNCH_SERVER || (role == PS_LAUNCH_WORKER && s_allreduce(F))) {
        s_argv_add(&a, "--bind");
        s_argv_addf(&a, "tcp://%s:*", F->host);
    }
    if (role == PS_LAUNCH_SERVER && rank < 0) {
        s_argv_add(&a, "--spare");
    } else {
        s_argv_add(&a, "--rank");
        s_argv_addf(&a, "%d", rank);
    }
    if (F->job_hash[0]) {
        s_argv_add(&a, "--job-hash");
        s_argv_add(&a, F->job_hash);
    }
    s_argv_add_fwd(&a, F, role, rank);
    return s_argv_take(&a);
}

/* The job's identity for every node: --job-id (a fresh one unless given) and
 * the hash of the job configuration, from the scheduler's own flag table and
 * checks run on the flags it will get. Those checks are the launcher's too:
 * a bad job flag, or a --resume with nothing to resume, is one usage line
 * now, a value from the environment named by its variable (argc, argv: the
 * launcher's own). A task (--node) and a job with arguments after "--"
 * (the scheduler's alone to read) leave them to the scheduler: there is no
 * hash when they fail. Returns 0 or PS_EINVAL. */
static int s_job_identity(ps_launch_flags_t *F, int argc, char **argv)
{
    int k = s_fwd_index(F, "job-id");
    if (k >= 0 && !F->fwd_val[k] && !F->node) { /* a task takes the manager's */
        ps_job_new_id(F->job_id, sizeof F->job_id);
        F->fwd_val[k] = F->job_id;
    }
    s_argv_t a = {0};
    s_argv_add(&a, PS_SCHEDULER_PROG);
    s_argv_addf(&a, "--servers=%d", F->servers);
    s_argv_addf(&a, "--workers=%d", F->workers);
    s_argv_add_fwd(&a, F, PS_LAUNCH_SCHEDULER, 0);
    for (int i = 0; i < F->nextra; i++) {
        s_argv_add(&a, F->extra[i]);
    }
    if (ps_launch_flags_secure(F) && !ps_launch_flags_value(F, "keys")) {
        s_argv_add(&a, "--secure=0"); /* the keys the launcher makes at start pass */
    }
    ps_scheduler_flags_t sf;
    ps_flag_t t[PS_SCHEDULER_NFLAGS];
    ps_scheduler_flags_init(&sf);
    size_t n = ps_scheduler_flags_table(&sf, t);
    char err[1024] = "";
    F->job_hash[0] = '\0';
    const int quiet = F->node || F->nextra > 0;
    int rc = a.oom ? PS_ENOMEM
                   : ps_config_parse(quiet ? NULL : PS_LAUNCH_PROG, "", t, n, a.n, a.v, NULL);
    if (rc == 0 && (rc = ps_scheduler_flags_check(&sf, err, sizeof err)) == 0) {
        ps_job_hash(&sf.cfg.job, sf.cfg.servers, sf.cfg.workers, F->job_hash,
                    sizeof F->job_hash);
        rc = quiet ? 0 : ps_scheduler_check_resume(&sf.cfg, err, sizeof err);
    }
    for (int i = 0; i < a.n; i++) {
        free(a.v[i]);
    }
    free(a.v);
    if (quiet || rc == 0) {
        return 0;
    }
    if (err[0]) { /* a parse error has its line already */
        ps_config_blame_env(t, n, argc, argv, err, sizeof err);
        s_bad("%s", err);
    }
    return PS_EINVAL;
}
