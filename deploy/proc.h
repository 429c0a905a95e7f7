/*
 * deploy/proc.h - child processes, for the launcher and the bench.
 *
 * Starts a program (fork + exec) with its output inherited, appended to a log
 * file or captured through two pipes; runs a function in a forked child;
 * waits with a timeout, signals process groups, reaps; splits a captured
 * stream into lines; finds sibling executables. It knows nothing of shardps's
 * roles: what a child is and what its exit means is the caller's business.
 * Not thread-safe where it touches the signal mask (ps_proc_spawn): call it
 * from the one thread that manages the children.
 */
#ifndef PS_DEPLOY_PROC_H
#define PS_DEPLOY_PROC_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ps_proc_spec_t.flags */
enum {
    PS_PROC_GROUP = 1u << 0,    /* own process group (pgid = pid): a signal to the group
                                   reaches the child's children; Ctrl-C reaches only us */
    PS_PROC_PDEATH = 1u << 1,   /* SIGKILLed when this process dies */
    PS_PROC_CAPTURE = 1u << 2,  /* stdout and stderr into two pipes (ps_proc_t.out) */
    PS_PROC_NO_STDIN = 1u << 3, /* stdin from /dev/null */
};

/* What to start. */
typedef struct {
    const char *path;     /* the executable; NULL = argv[0] */
    char *const *argv;    /* NULL-terminated; borrowed for the call */
    char *const *envp;    /* NULL-terminated; NULL = this process's environment */
    const char *log_path; /* without PS_PROC_CAPTURE: stdout and stderr appended
                             here (created 0644); NULL = inherited */
    unsigned flags;       /* PS_PROC_* */
    const char *prog;     /* names the caller in the child's "cannot execute" line */
} ps_proc_spec_t;

/* A started child. */
typedef struct {
    pid_t pid;  /* also its process group id with PS_PROC_GROUP */
    int out[2]; /* PS_PROC_CAPTURE: non-blocking read ends of its stdout [0] and
                   stderr [1], close-on-exec; the caller owns and closes them.
                   Otherwise -1. */
} ps_proc_t;

/*
 * Starts spec's program. The child starts with SIGINT, SIGTERM, SIGHUP,
 * SIGCHLD and SIGPIPE at their defaults and this process's signal mask (no
 * handler of ours runs in it); an exec that fails prints
 * "PROG: cannot execute PATH: REASON" on the child's stderr and exits 127.
 * Returns 0 with *p filled, or PS_EIO (pipe, fork, the log file) with why in
 * err. The caller reaps the child (ps_proc_wait, ps_proc_reap).
 */
int ps_proc_spawn(const ps_proc_spec_t *spec, ps_proc_t *p, char *err, size_t errlen);

/* ps_proc_spawn, then waits for the child. Returns its exit code
 * (ps_proc_exit_code), or PS_EIO with why in err when it could not start. */
int ps_proc_run(const ps_proc_spec_t *spec, char *err, size_t errlen);

/* A function run in a child process. */
typedef int ps_proc_fn(const void *arg);

/*
 * Forks a child that runs fn(arg) and exits with what it returns; it dies with
 * this process (PS_PROC_PDEATH). stdio is flushed first, so nothing buffered is
 * written twice. arg is copied with the whole address space: it must live until
 * the call returns, not longer. Returns the child's pid, or PS_EIO.
 * Fork only while this process holds no thread and no ZeroMQ context.
 */
pid_t ps_proc_fork(ps_proc_fn *fn, const void *arg);

/*
 * Waits up to `seconds` (0: only looks; < 0: no limit) for pid (-1: any
 * child) to end and reaps it. Returns its pid with *status set (a waitpid
 * status), 0 when none ended in time, or PS_EIO (no such child).
 */
int ps_proc_wait(pid_t pid, double seconds, int *status);

/* Waits up to `seconds` for pid, then SIGKILLs and reaps it. Returns its exit
 * code (ps_proc_exit_code), 1 when it cannot be waited for, 0 for pid <= 0. */
int ps_proc_reap(pid_t pid, double seconds);

/* A waitpid status as an exit code: the exit status (0..255), or 128 + signal. */
int ps_proc_exit_code(int status);

/* A waitpid status in words: "exited with status 1", "killed by signal 9
 * (SIGKILL)". */
void ps_proc_describe(int status, char *out, size_t cap);

/* Sends sig to pid's process group, or to pid alone when it has none. */
void ps_proc_signal_group(pid_t pid, int sig);

/* ---- pipes ----------------------------------------------------------------- */

/* Writes all of buf, waiting out EINTR and (up to 1 s at a time) a full
 * non-blocking pipe. Returns 0 or PS_EIO. */
int ps_proc_write_all(int fd, const void *buf, size_t len);

/* Reads all of buf within `seconds` (< 0: no limit). Returns 0, PS_ETIMEDOUT,
 * PS_ECLOSED (end of file: the writer is gone) or PS_EIO. */
int ps_proc_read_all(int fd, void *buf, size_t len, double seconds);

/* One captured output stream, split into lines. Zero it, then set fd. */
typedef struct {
    int fd;     /* read end (non-blocking); -1 once closed */
    char *buf;  /* bytes of the current, unfinished line; owned */
    size_t len; /* bytes used in buf */
    size_t cap; /* bytes allocated in buf */
} ps_proc_lines_t;

/* Called with each line, without its newline (line is not NUL-terminated). */
typedef void ps_proc_line_fn(void *ctx, const char *line, size_t n);

/*
 * Reads what is ready on l->fd and calls fn for every complete line; a line
 * longer than max_line bytes is passed on in pieces of max_line. Returns 1
 * when bytes were read, 0 when none were ready, -1 once closed (end of file
 * or an error: the unfinished line is passed on first), or PS_ENOMEM when the
 * line buffer cannot grow (nothing read; the caller says so and closes).
 */
int ps_proc_lines_read(ps_proc_lines_t *l, size_t max_line, ps_proc_line_fn *fn, void *ctx);

/* Passes on the unfinished line, if any, and closes fd. Safe when closed. */
void ps_proc_lines_close(ps_proc_lines_t *l, ps_proc_line_fn *fn, void *ctx);

/* Releases the buffer (after ps_proc_lines_close). */
void ps_proc_lines_fini(ps_proc_lines_t *l);

/* ---- executables ------------------------------------------------------------- */

/* Is path a regular file we may execute? */
int ps_proc_is_exe(const char *path);

/*
 * Finds the executable `name`: next to this program, then in ../SUBDIR/ (a
 * Meson build tree; subdir may be NULL; this one is returned as a real path),
 * then in the installed libexec directory (helpers that are not commands),
 * then on $PATH. Returns 0 with the path in out, or PS_ENOENT.
 */
int ps_proc_find_exe(const char *name, const char *subdir, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
