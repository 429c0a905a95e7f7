/*
 * deploy/proc.c - child processes, for the launcher and the bench.
 *
 * fork + exec rather than posix_spawn: a child must be able to ask for
 * SIGKILL when its parent dies (prctl), which posix_spawn cannot do.
 */
#include "deploy/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"

extern char **environ;

enum { S_LINE_INIT = 4096 }; /* first size of a line buffer */

static void s_close(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* In the child, between fork and exec. */
static void s_child_exec(const ps_proc_spec_t *spec, const char *path, int out_fd,
                         int err_fd, const sigset_t *mask, pid_t parent)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        sigaction(sigs[i], &sa, NULL);
    }
    sigprocmask(SIG_SETMASK, mask, NULL);
    if (spec->flags & PS_PROC_GROUP) {
        setpgid(0, 0);
    }
    if (spec->flags & PS_PROC_PDEATH) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(127); /* it died before we asked */
        }
    }
    if (spec->flags & PS_PROC_NO_STDIN) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) {
            dup2(nul, STDIN_FILENO);
            if (nul != STDIN_FILENO) {
                close(nul);
            }
        }
    }
    if (out_fd >= 0) {
        dup2(out_fd, STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
    }
    execve(path, spec->argv, spec->envp ? spec->envp : environ);
    const char *msg = strerror(errno);
    dprintf(STDERR_FILENO, "%s: cannot execute %s: %s\n", spec->prog ? spec->prog : "",
            path, msg);
    _exit(127);
}

int ps_proc_spawn(const ps_proc_spec_t *spec, ps_proc_t *p, char *err, size_t errlen)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    const char *path = spec->path ? spec->path : spec->argv[0];
    p->pid = 0;
    p->out[0] = p->out[1] = -1;
    if (spec->flags & PS_PROC_CAPTURE) {
        if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
            snprintf(err, errlen, "pipe: %s", strerror(errno));
            goto fail;
        }
    } else if (spec->log_path) {
        /* Opened here, so that a bad path is our error, not the child's. */
        po[1] = open(spec->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (po[1] < 0) {
            snprintf(err, errlen, "%s: %s", spec->log_path, strerror(errno));
            goto fail;
        }
        pe[1] = po[1];
    }
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old); /* no handler runs in the child before exec */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        s_child_exec(spec, path, po[1], pe[1], &old, parent);
    }
    int fork_errno = errno;
    if (pid > 0 && (spec->flags & PS_PROC_GROUP)) {
        setpgid(pid, pid); /* also here, so the group exists before any kill(-pid) */
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(fork_errno));
        goto fail;
    }
    if (pe[1] == po[1]) {
        pe[1] = -1; /* the log file: one descriptor */
    }
    s_close(&po[1]);
    s_close(&pe[1]);
    if (spec->flags & PS_PROC_CAPTURE) {
        fcntl(po[0], F_SETFL, O_NONBLOCK);
        fcntl(pe[0], F_SETFL, O_NONBLOCK);
        p->out[0] = po[0];
        p->out[1] = pe[0];
    }
    p->pid = pid;
    return 0;
fail:
    if (pe[1] == po[1]) {
        pe[1] = -1;
    }
    for (int i = 0; i < 2; i++) {
        s_close(&po[i]);
        s_close(&pe[i]);
    }
    return PS_EIO;
}

int ps_proc_run(const ps_proc_spec_t *spec, char *err, size_t errlen)
{
    ps_proc_t p;
    int status;
    if (ps_proc_spawn(spec, &p, err, errlen) != 0) {
        return PS_EIO;
    }
    if (ps_proc_wait(p.pid, -1, &status) < 0) {
        snprintf(err, errlen, "waitpid: %s", strerror(errno));
        return PS_EIO;
    }
    return ps_proc_exit_code(status);
}

pid_t ps_proc_fork(ps_proc_fn *fn, const void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(1);
        }
        exit(fn(arg));
    }
    return pid < 0 ? PS_EIO : pid;
}

int ps_proc_wait(pid_t pid, double seconds, int *status)
{
    double until = ps_now() + seconds;
    for (;;) {
        pid_t got = waitpid(pid, status, seconds < 0 ? 0 : WNOHANG);
        if (got > 0) {
            return (int)got;
        }
        if (got < 0 && errno != EINTR) {
            return PS_EIO;
        }
        if (got == 0) {
            if (ps_now() >= until) {
                return 0;
            }
            ps_sleep(0.005);
        }
    }
}

int ps_proc_reap(pid_t pid, double seconds)
{
    if (pid <= 0) {
        return 0;
    }
    int status = 0;
    int rc = ps_proc_wait(pid, seconds, &status);
    if (rc == 0) {
        kill(pid, SIGKILL);
        rc = ps_proc_wait(pid, -1, &status);
    }
    return rc < 0 ? 1 : ps_proc_exit_code(status);
}

int ps_proc_exit_code(int status)
{
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void ps_proc_describe(int status, char *out, size_t cap)
{
    if (WIFEXITED(status)) {
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        const char *abbr = sigabbrev_np(WTERMSIG(status));
        snprintf(out, cap, "killed by signal %d%s%s%s", WTERMSIG(status),
                 abbr ? " (SIG" : "", abbr ? abbr : "", abbr ? ")" : "");
    } else {
        snprintf(out, cap, "ended with wait status 0x%x", (unsigned)status);
    }
}

void ps_proc_signal_group(pid_t pid, int sig)
{
    if (kill(-pid, sig) != 0) {
        kill(pid, sig);
    }
}

/* ---- pipes ----------------------------------------------------------------- */

int ps_proc_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (poll(&pfd, 1, (int)ps_real_ms(1000)) > 0) {
                continue;
            }
        }
        if (w <= 0) {
            return PS_EIO;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int ps_proc_read_all(int fd, void *buf, size_t len, double seconds)
{
    char *p = buf;
    double until = ps_now() + seconds;
    while (len > 0) {
        if (seconds >= 0) {
            double left = until - ps_now();
            struct pollfd pf = {fd, POLLIN, 0};
            int n = left > 0 ? poll(&pf, 1, (int)ps_real_ms((long)(left * 1000) + 1)) : 0;
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n == 0) {
                return PS_ETIMEDOUT;
            }
        }
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return r == 0 ? PS_ECLOSED : PS_EIO;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

void ps_proc_lines_close(ps_proc_lines_t *l, ps_proc_line_fn *fn, void *ctx)
{
    if (l->fd < 0) {
        return;
    }
    if (l->len > 0) {
        fn(ctx, l->buf, l->len);
        l->len = 0;
    }
    s_close(&l->fd);
}

int ps_proc_lines_read(ps_proc_lines_t *l, size_t max_line, ps_proc_line_fn *fn, void *ctx)
{
    if (l->fd < 0) {
        return -1;
    }
    if (l->len == l->cap) {
        if (l->cap < max_line) {
            size_t cap = l->cap ? l->cap * 2 : S_LINE_INIT;
            cap = cap < max_line ? cap : max_line;
            char *nb = realloc(l->buf, cap);
            if (!nb) {
                return PS_ENOMEM;
            }
            l->buf = nb;
            l->cap = cap;
        } else {
            fn(ctx, l->buf, l->len); /* a line too long: split it */
            l->len = 0;
        }
    }
    ssize_t n = read(l->fd, l->buf + l->len, l->cap - l->len);
    if (n < 0 && errno == EINTR) {
        return 1;
    }
    if (n < 0 && errno == EAGAIN) {
        return 0;
    }
    if (n <= 0) {
        ps_proc_lines_close(l, fn, ctx);
        return -1;
    }
    size_t from = l->len, start = 0;
    l->len += (size_t)n;
    const char *nl;
    while ((nl = memchr(l->buf + from, '\n', l->len - from)) != NULL) {
        size_t end = (size_t)(nl - l->buf);
        fn(ctx, l->buf + start, end - start);
        start = end + 1;
        from = start;
    }
    if (start > 0) {
        memmove(l->buf, l->buf + start, l->len - start);
        l->len -= start;
    }
    return 1;
}

void ps_proc_lines_fini(ps_proc_lines_t *l)
{
    free(l->buf);
    l->buf = NULL;
    l->len = l->cap = 0;
}

/* ---- executables ------------------------------------------------------------- */

int ps_proc_is_exe(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int ps_proc_find_exe(const char *name, const char *subdir, char *out, size_t cap)
{
    char self[PATH_MAX], cand[2 * PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(cand, sizeof cand, "%s/%s", self, name);
            if (ps_proc_is_exe(cand) && snprintf(out, cap, "%s", cand) < (int)cap) {
                return 0;
            }
            if (subdir) {
                snprintf(cand, sizeof cand, "%s/../%s/%s", self, subdir, name);
                if (ps_proc_is_exe(cand) && realpath(cand, self) &&
                    snprintf(out, cap, "%s", self) < (int)cap) {
                    return 0;
                }
            }
        }
    }
#ifdef PS_LIBEXEC_DIR
    /* an installed helper that is not a command (shardps-bench-mpi) */
    snprintf(cand, sizeof cand, "%s/%s", PS_LIBEXEC_DIR, name);
    if (ps_proc_is_exe(cand) && snprintf(out, cap, "%s", cand) < (int)cap) {
        return 0;
    }
#endif
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t len = strcspn(path, ":");
        snprintf(cand, sizeof cand, "%.*s/%s", (int)(len ? len : 1), len ? path : ".",
                 name);
        if (ps_proc_is_exe(cand) && snprintf(out, cap, "%s", cand) < (int)cap) {
            return 0;
        }
        path += len + (path[len] == ':');
    }
    return PS_ENOENT;
}
