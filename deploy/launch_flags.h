/*
 * deploy/launch_flags.h - shardps-launch's flags and the command line it
 * builds for each role.
 *
 * The launcher defines only its own flags (--servers, --workers, --host,
 * --bin-dir, --timeout). Every other flag a role takes is forwarded verbatim
 * to the roles that take it, by the roles' own flag tables (scheduler/flags.h,
 * server/flags.h, worker/flags.h); --help is made from the same tables. The
 * roles validate what they get: this module checks only what the launcher
 * needs itself (the node counts against --mode, --host, --timeout,
 * --log-level) and finds the role binaries. It starts nothing.
 */
#ifndef PS_DEPLOY_LAUNCH_FLAGS_H
#define PS_DEPLOY_LAUNCH_FLAGS_H

#include <limits.h>
#include <stddef.h>

#include "common/config.h"
#include "common/job.h"
#include "scheduler/flags.h"
#include "server/flags.h"
#include "worker/flags.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PS_LAUNCH_PROG "shardps-launch"

/* The roles, as indexes of the per-role arrays. */
enum { PS_LAUNCH_SCHEDULER = 0, PS_LAUNCH_SERVER = 1, PS_LAUNCH_WORKER = 2, PS_LAUNCH_NROLES };

#define PS_LAUNCH_MAX_FWD 80        /* forwarded flags, all roles together */
#define PS_LAUNCH_MAX_ROLE_FLAGS 64 /* entries in one role's table */

/* One forwarded flag: passed as "--name value", when given, to every role
 * whose table has it. */
typedef struct {
    const ps_flag_t *flag; /* the first role table's entry: name, metavar, help */
    unsigned to;           /* mask of 1 << PS_LAUNCH_<role> */
    char help[320];        /* the launcher's --help line: the role's and where it goes */
} ps_launch_fwd_t;

/* The parsed command line. Strings are borrowed from argv or environ. */
typedef struct {
    int servers;         /* S (0 in allreduce mode) */
    int workers;         /* M */
    const char *host;    /* what the roles bind to */
    const char *bin_dir; /* where the role binaries are; NULL = search */
    double timeout;      /* whole-job limit in seconds; 0 = none */
    int node;            /* --node: be this task's role only (deploy/launch_node.h) */
    int port;            /* the scheduler's port; 0: with --node 9000, else a free one */
    int node_role;       /* --node: PS_LAUNCH_<role> of this task */
    int node_rank;       /* --node: its rank within the role */
    char node_scheduler[300]; /* --node: the scheduler's endpoint, tcp://HOST:PORT */
    const char *plot;    /* --plot DIR: the run's plots; default: beside --summary; "none" */
    const char *log_file; /* --log-file FILE: every child's lines also here */
    const char *log_dir; /* --log-dir DIR: each child's lines also in DIR/<tag>.log */
    char plot_dir[PATH_MAX]; /* where the plots go (after parsing); "" = none */
    int spares;          /* spare servers started with the job (--spares) */
    int respawn;         /* killed servers restarted as spares, at most (--respawn) */
    const char *fwd_val[PS_LAUNCH_MAX_FWD]; /* values of the forwarded flags; NULL = not given */
    int fwd_bool[PS_LAUNCH_MAX_FWD]; /* a 0|1 flag as parsed (bare "--flag" = 1), -1 = not
                                        given; becomes fwd_val "0" or "1" */
    char model_path[4096]; /* the default --save-model, beside --summary */
    char job_id[64];     /* the default --job-id: a fresh one (ps_job_new_id) */
    char job_hash[PS_JOB_HASH_LEN + 1]; /* the job flags' ps_job_hash, passed to every
                                           node as --job-hash; "" when they do not
                                           parse (the scheduler says why) */
    char **extra;        /* arguments after "--", appended to the scheduler's */
    int nextra;
    char bin[PS_LAUNCH_NROLES][PATH_MAX]; /* resolved binary of each role */

    /* The roles' flag tables (their destinations hold the roles' defaults
     * and are never read) and what the launcher forwards by them. */
    ps_scheduler_flags_t role_c;
    ps_server_flags_t role_s;
    ps_worker_flags_t role_w;
    ps_flag_t role_flags[PS_LAUNCH_NROLES][PS_LAUNCH_MAX_ROLE_FLAGS];
    size_t nrole_flags[PS_LAUNCH_NROLES];
    ps_launch_fwd_t fwd[PS_LAUNCH_MAX_FWD];
    size_t nfwd;
    ps_job_t job; /* defaults and --mode: whether the job has servers */
} ps_launch_flags_t;

/*
 * Parses and checks argv into *F (no initialisation needed) and resolves the
 * role binaries. Returns 0; 1 after printing --help; PS_EINVAL after one
 * "shardps-launch: error: ..." line on stderr. Sets the log level.
 */
int ps_launch_flags_parse(ps_launch_flags_t *F, int argc, char **argv);

/* 1 when --secure was given (and not as 0). */
int ps_launch_flags_secure(const ps_launch_flags_t *F);

/* Forwards --name value (a forwarded flag, e.g. keys, secret-file; value
 * borrowed: it must outlive F's command lines). */
void ps_launch_flags_set(ps_launch_flags_t *F, const char *name, const char *value);

/* The value given for a forwarded flag, or NULL. Borrowed, like argv. */
const char *ps_launch_flags_value(const ps_launch_flags_t *F, const char *name);

/*
 * The scheduler's command line: its binary, the flags the launcher sets
 * (--bind bind, --endpoint-file epfile unless NULL, --servers, --workers),
 * the forwarded flags it takes, then the arguments after "--".
 * Caller owns the result; free with ps_launch_argv_destroy(). NULL when out
 * of memory.
 */
char **ps_launch_flags_scheduler_argv(const ps_launch_flags_t *F, const char *bind,
                                      const char *epfile);

/* A server's or worker's command line, for the scheduler at endpoint; as
 * ps_launch_flags_scheduler_argv(). A server of rank -1 is a spare
 * (--spare). */
char **ps_launch_flags_node_argv(const ps_launch_flags_t *F, int role, int rank,
                                 const char *endpoint);

/* Frees a command line built above and sets *argv_p to NULL. NULL-safe. */
void ps_launch_argv_destroy(char ***argv_p);

#ifdef __cplusplus
}
#endif
#endif
