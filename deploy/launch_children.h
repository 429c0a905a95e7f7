/*
 * deploy/launch_children.h - shardps-launch's child processes and their
 * output.
 *
 * The table of the job's processes (the scheduler, S servers, M workers),
 * each started through deploy/proc.h in its own process group with its
 * stdout and stderr captured. Every line a child prints is re-emitted on the
 * launcher's stderr: verbatim when it is already a logger line, otherwise
 * with a logger-format prefix carrying the child's tag (C, S0, W1, ...).
 * What an exit means, and when to stop, is the caller's (deploy/launch.c).
 * Single-threaded: call it from the launcher's one thread.
 */
#ifndef PS_DEPLOY_LAUNCH_CHILDREN_H
#define PS_DEPLOY_LAUNCH_CHILDREN_H

#include <poll.h>
#include <sys/types.h>

#include "deploy/proc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One process of the job. */
typedef struct {
    char tag[24];           /* log tag: "C", "S0", "W3", "spare0" */
    int role;               /* PS_LAUNCH_<role> (deploy/launch_flags.h) */
    int rank;               /* rank within the role; 0 for the scheduler; -1 for a spare */
    pid_t pid;              /* 0 until started; also its process group id */
    int running;            /* started and not yet reaped */
    ps_proc_lines_t out[2]; /* [0] stdout, [1] stderr */
    int log_fd;             /* --log-dir: its lines also go here; -1 = none */
    int joining;            /* a worker started again to join the running job */
} ps_launch_child_t;

/* All of them. Embedded; ps_launch_children_init / _fini. */
typedef struct {
    ps_launch_child_t *kids; /* [0] scheduler, [1..S] servers, then the spare
                                servers, then the M workers */
    int nkids;               /* 1 + S + spares + M */
    int nrunning;            /* children started and not reaped */
    char *scratch;           /* one output line being assembled */
    struct pollfd *pfd;      /* poll set: [0] the caller's fd, then open streams */
    ps_launch_child_t **who; /* the child of each pfd entry */
    int *which;              /* its stream: 0 stdout, 1 stderr */
    int log_fd;              /* --log-file: every child's lines also go here; -1 = none */
    char summary[1024];      /* the scheduler's "summary: k=v ..." line's k=v part; "" = none */
    char error[512];         /* the scheduler's last "PROG: error: why" line's why; "" = none */
} ps_launch_children_t;

/* Makes the table for 1 + servers + spares + workers children, none started,
 * and room for two pipes per child under RLIMIT_NOFILE. Returns 0 or
 * PS_ENOMEM (fini is still safe). */
int ps_launch_children_init(ps_launch_children_t *C, int servers, int spares, int workers);

/* Frees the table (after ps_launch_children_close). */
void ps_launch_children_fini(ps_launch_children_t *C);

/* Copies of the relayed lines: all of them into file, and each child's into
 * DIR/scheduler.log, DIR/S0.log, DIR/W0.log ... (either may be NULL). The
 * files are created afresh. Returns 0, or PS_EIO after logging which file. */
int ps_launch_children_log(ps_launch_children_t *C, const char *file, const char *dir);

/* Starts c with argv (argv[0] is the binary; NULL = out of memory). Returns
 * 0, or PS_EIO after logging why. argv is borrowed for the call. */
int ps_launch_children_spawn(ps_launch_children_t *C, ps_launch_child_t *c, char **argv);

/* Starts a reaped child's slot again (--respawn): a server's as spare server
 * number `n` (a killed server's place), a worker's as the same worker, there
 * to join the running job (joining). What
 * its old streams still hold is relayed and they are closed first. As
 * ps_launch_children_spawn(). */
int ps_launch_children_respawn(ps_launch_children_t *C, ps_launch_child_t *c, int n,
                               char **argv);

/* Sends sig to the process group of every running child. */
void ps_launch_children_signal(ps_launch_children_t *C, int sig);

/* Reaps one of our children that has exited, after relaying the output it left
 * in its pipes. Returns it with *status set (a waitpid status), or NULL when
 * none has exited. */
ps_launch_child_t *ps_launch_children_reap(ps_launch_children_t *C, int *status);

/* The first running child, or NULL. */
ps_launch_child_t *ps_launch_children_running(ps_launch_children_t *C);

/* Has every child been started? */
int ps_launch_children_all_started(const ps_launch_children_t *C);

/* How many output streams are still open. */
int ps_launch_children_open_streams(const ps_launch_children_t *C);

/*
 * poll()s fd (POLLIN) and every open stream for up to ms, then relays the
 * lines that are ready. Returns poll's result (errno set when < 0), with
 * *fd_ready set when fd is readable.
 */
int ps_launch_children_poll(ps_launch_children_t *C, int fd, int ms, int *fd_ready);

/* Relays every unfinished line and closes every stream. */
void ps_launch_children_close(ps_launch_children_t *C);

#ifdef __cplusplus
}
#endif
#endif
