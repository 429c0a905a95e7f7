/*
 * deploy/launch_children.c - shardps-launch's child processes: starting them,
 * relaying their output line by line, signalling and reaping them.
 *
 * Starting, waiting and line splitting are deploy/proc.h's; the logger-line
 * format is common/log.h's. This file only ties them to the job's table.
 */
#include "deploy/launch_children.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/json.h"
#include "common/log.h"
#include "deploy/launch_flags.h"

#define S_LINE_MAX (64 * 1024) /* longer child lines are split at this size */
/* Room for a line as written: a prefix and the line, as JSON up to 6 bytes
 * a byte (a control character quoted as \u00XX). */
#define S_OUT_MAX (6 * S_LINE_MAX + 256)

/* ---- output -------------------------------------------------------------- */

/* A child's line as this launcher writes it, into C->scratch (the line
 * copied behind S_OUT_MAX as a message): its logger's lines as they are, or
 * as JSON with --log-format json; other lines get the time, the child's tag
 * and '>' for its stdout, '!' for its stderr. Returns the length. */
static size_t s_format(ps_launch_children_t *C, const ps_launch_child_t *c, int k,
                       const char *p, size_t n)
{
    char stamp[PS_LOG_STAMP_MAX], node[16];
    int level = k == 0 ? PS_LOG_STDOUT : PS_LOG_STDERR;
    size_t at = 0;
    const int json = ps_log_format() == PS_LOG_JSON;
    if (ps_log_is_line(p, n) &&
        (!json || ps_log_split(p, n, stamp, node, sizeof node, &level, &at) != 0)) {
        memcpy(C->scratch, p, n);
        return n;
    }
    char *msg = C->scratch + S_OUT_MAX;
    memcpy(msg, p + at, n - at);
    msg[n - at] = '\0';
    return ps_log_line(C->scratch, S_OUT_MAX, at ? stamp : NULL, at ? node : c->tag, level,
                       msg);
}

/* Emits one child line (without its newline) on stderr with one write(). */
static void s_emit(ps_launch_children_t *C, const ps_launch_child_t *c, int k, const char *p,
                   size_t n)
{
    size_t used = s_format(C, c, k, p, n);
    C->scratch[used++] = '\n';
    /* When stderr is gone there is nothing better to do. */
    (void)ps_proc_write_all(STDERR_FILENO, C->scratch, used);
    if (C->log_fd >= 0) {
        (void)ps_proc_write_all(C->log_fd, C->scratch, used);
    }
    if (c->log_fd >= 0) {
        (void)ps_proc_write_all(c->log_fd, C->scratch, used);
    }
}

/* Where a child's stream sends its lines. */
typedef struct {
    ps_launch_children_t *C;
    const ps_launch_child_t *c;
    int k; /* 0 stdout, 1 stderr */
} s_sink_t;

/* A JSON logger line's message when its level is info, else "". */
static void s_json_info(const char *p, size_t n, char *out, size_t cap)
{
    json_t *j = NULL;
    const char *level = NULL, *msg = NULL;
    out[0] = '\0';
    if (ps_json_parse(p, n, 0, &j, NULL, 0) == 0 &&
        ps_json_get_str(j, "level", &level, NULL, 0) == 0 && !strcmp(level, "info") &&
        ps_json_get_str(j, "message", &msg, NULL, 0) == 0) {
        snprintf(out, cap, "%s", msg);
    }
    json_decref(j);
}

/* The scheduler's summary line and its usage error, kept for the
 * launcher's last line on stdout. */
static void s_keep_summary(ps_launch_children_t *C, const ps_launch_child_t *c, const char *p,
                           size_t n)
{
    static const char key[] = " I summary: ", err[] = PS_SCHEDULER_PROG ": error: ",
                      json_key[] = "\"message\":\"summary: ";
    if (c->role != PS_LAUNCH_SCHEDULER) {
        return;
    }
    const char *at = memmem(p, n, key, sizeof key - 1);
    if (at) {
        at += sizeof key - 1;
        snprintf(C->summary, sizeof C->summary, "%.*s", (int)(p + n - at), at);
    } else if (n >= sizeof err - 1 && !memcmp(p, err, sizeof err - 1)) {
        at = p + sizeof err - 1;
        snprintf(C->error, sizeof C->error, "%.*s", (int)(p + n - at), at);
    } else if (p[0] == '{' && memmem(p, n, json_key, sizeof json_key - 1)) {
        char msg[sizeof C->summary + 8];
        s_json_info(p, n, msg, sizeof msg);
        if (!strncmp(msg, "summary: ", 9)) {
            snprintf(C->summary, sizeof C->summary, "%s", msg + 9);
        }
    }
}

static void s_on_line(void *ctx, const char *p, size_t n)
{
    const s_sink_t *sink = ctx;
    s_keep_summary(sink->C, sink->c, p, n);
    s_emit(sink->C, sink->c, sink->k, p, n);
}

static void s_stream_close(ps_launch_children_t *C, ps_launch_child_t *c, int k)
{
    s_sink_t sink = {C, c, k};
    ps_proc_lines_close(&c->out[k], s_on_line, &sink);
}

/* Reads what is there on one stream and emits every complete line.
 * Returns 1 when bytes were read, 0 when none are ready, -1 once closed. */
static int s_stream_read(ps_launch_children_t *C, ps_launch_child_t *c, int k)
{
    s_sink_t sink = {C, c, k};
    int rc = ps_proc_lines_read(&c->out[k], S_LINE_MAX, s_on_line, &sink);
    if (rc == PS_ENOMEM) {
        ps_log_err("out of memory reading %s's output", c->tag);
        s_stream_close(C, c, k);
        return -1;
    }
    return rc;
}

int ps_launch_children_poll(ps_launch_children_t *C, int fd, int ms, int *fd_ready)
{
    size_t n = 0;
    C->pfd[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
    for (int i = 0; i < C->nkids; i++) {
        for (int k = 0; k < 2; k++) {
            if (C->kids[i].out[k].fd >= 0) {
                C->who[n] = &C->kids[i];
                C->which[n] = k;
                C->pfd[n++] = (struct pollfd){.fd = C->kids[i].out[k].fd, .events = POLLIN};
            }
        }
    }
    int rc = poll(C->pfd, (nfds_t)n, (int)ps_real_ms(ms)); /* ms of the job's clock */
    *fd_ready = rc > 0 && C->pfd[0].revents;
    if (rc > 0) {
        for (size_t i = 1; i < n; i++) {
            if (C->pfd[i].revents) {
                s_stream_read(C, C->who[i], C->which[i]);
            }
        }
    }
    return rc;
}

int ps_launch_children_open_streams(const ps_launch_children_t *C)
{
    int n = 0;
    for (int i = 0; i < C->nkids; i++) {
        n += (C->kids[i].out[0].fd >= 0) + (C->kids[i].out[1].fd >= 0);
    }
    return n;
}

void ps_launch_children_close(ps_launch_children_t *C)
{
    for (int i = 0; i < C->nkids; i++) {
        s_stream_close(C, &C->kids[i], 0);
        s_stream_close(C, &C->kids[i], 1);
    }
}

/* ---- the table ----------------------------------------------------------- */

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

int ps_launch_children_init(ps_launch_children_t *C, int servers, int spares, int workers)
{
    *C = (ps_launch_children_t){.nkids = 1 + servers + spares + workers, .log_fd = -1};
    s_raise_fd_limit(C->nkids);
    size_t npoll = 1 + 2 * (size_t)C->nkids;
    C->kids = calloc((size_t)C->nkids, sizeof *C->kids);
    C->scratch = malloc(S_OUT_MAX + S_LINE_MAX + 1);
    C->pfd = calloc(npoll, sizeof *C->pfd);
    C->who = calloc(npoll, sizeof *C->who);
    C->which = calloc(npoll, sizeof *C->which);
    if (!C->kids || !C->scratch || !C->pfd || !C->who || !C->which) {
        return PS_ENOMEM;
    }
    for (int i = 0; i < C->nkids; i++) {
        ps_launch_child_t *c = &C->kids[i];
        const int nservers = servers + spares;
        c->role = i == 0 ? PS_LAUNCH_SCHEDULER : i <= nservers ? PS_LAUNCH_SERVER
                                                                 : PS_LAUNCH_WORKER;
        c->rank = i == 0 ? 0 : i <= servers ? i - 1 : i <= nservers ? -1 : i - 1 - nservers;
        snprintf(c->tag, sizeof c->tag, "%s", "C");
        if (i > servers && i <= nservers) {
            snprintf(c->tag, sizeof c->tag, "spare%d", i - 1 - servers);
        } else if (i > 0) {
            snprintf(c->tag, sizeof c->tag, "%c%d", c->role == PS_LAUNCH_SERVER ? 'S' : 'W',
                     c->rank);
        }
        c->out[0].fd = c->out[1].fd = -1;
        c->log_fd = -1;
    }
    return 0;
}

static int s_open_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        ps_log_err("cannot write the log file %s: %s", path, strerror(errno));
    }
    return fd;
}

int ps_launch_children_log(ps_launch_children_t *C, const char *file, const char *dir)
{
    if (file && (C->log_fd = s_open_log(file)) < 0) {
        return PS_EIO;
    }
    for (int i = 0; dir && i < C->nkids; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s.log", dir, i == 0 ? "scheduler" : C->kids[i].tag);
        if ((C->kids[i].log_fd = s_open_log(path)) < 0) {
            return PS_EIO;
        }
    }
    return 0;
}

void ps_launch_children_fini(ps_launch_children_t *C)
{
    if (C->kids) {
        for (int i = 0; i < C->nkids; i++) {
            ps_proc_lines_fini(&C->kids[i].out[0]);
            ps_proc_lines_fini(&C->kids[i].out[1]);
            if (C->kids[i].log_fd >= 0) {
                close(C->kids[i].log_fd);
            }
        }
    }
    if (C->log_fd >= 0) {
        close(C->log_fd);
    }
    free(C->kids);
    free(C->scratch);
    free(C->pfd);
    free(C->who);
    free(C->which);
    *C = (ps_launch_children_t){0};
}

int ps_launch_children_all_started(const ps_launch_children_t *C)
{
    int all = 1;
    for (int i = 0; i < C->nkids; i++) {
        all &= C->kids[i].pid > 0;
    }
    return all;
}

ps_launch_child_t *ps_launch_children_running(ps_launch_children_t *C)
{
    for (int i = 0; i < C->nkids; i++) {
        if (C->kids[i].running) {
            return &C->kids[i];
        }
    }
    return NULL;
}

/* ---- processes ----------------------------------------------------------- */

int ps_launch_children_spawn(ps_launch_children_t *C, ps_launch_child_t *c, char **argv)
{
    if (!argv) {
        ps_log_err("cannot start %s: out of memory", c->tag);
        return PS_EIO;
    }
    if (ps_log_level >= PS_LOG_DEBUG) {
        size_t cap = 4096, used = 0;
        char line[4096];
        line[0] = '\0';
        for (int i = 0; argv[i] && used + 1 < cap; i++) {
            int w = snprintf(line + used, cap - used, "%s%s", i ? " " : "", argv[i]);
            used += w > 0 ? (size_t)w : 0;
        }
        ps_log_debug("starting %s: %s", c->tag, line);
    }
    /* Own process group, so a stop reaches its own children too and the
     * terminal's Ctrl-C reaches only the launcher; die with the launcher. */
    ps_proc_spec_t spec = {
        .path = argv[0],
        .argv = argv,
        .flags = PS_PROC_GROUP | PS_PROC_PDEATH | PS_PROC_CAPTURE | PS_PROC_NO_STDIN,
        .prog = PS_LAUNCH_PROG,
    };
    /* A local worker's local rank is its rank, so the workers of one host
     * spread over its GPUs (kernels/device.h); the child inherits it. */
    if (c->role == PS_LAUNCH_WORKER) {
        char rank[16];
        snprintf(rank, sizeof rank, "%d", c->rank);
        setenv("LOCAL_RANK", rank, 1);
    }
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
    C->nrunning++;
    return 0;
}

int ps_launch_children_respawn(ps_launch_children_t *C, ps_launch_child_t *c, int n,
                               char **argv)
{
    s_stream_close(C, c, 0);
    s_stream_close(C, c, 1);
    if (c->role == PS_LAUNCH_SERVER) {
        c->rank = -1;
        snprintf(c->tag, sizeof c->tag, "spare%d", n);
    }
    c->joining = c->role == PS_LAUNCH_WORKER;
    return ps_launch_children_spawn(C, c, argv);
}

void ps_launch_children_signal(ps_launch_children_t *C, int sig)
{
    for (int i = 0; i < C->nkids; i++) {
        ps_launch_child_t *c = &C->kids[i];
        if (c->running) {
            ps_proc_signal_group(c->pid, sig);
        }
    }
}

ps_launch_child_t *ps_launch_children_reap(ps_launch_children_t *C, int *status)
{
    for (;;) {
        pid_t pid = ps_proc_wait(-1, 0, status);
        if (pid <= 0) {
            return NULL;
        }
        ps_launch_child_t *c = NULL;
        for (int i = 0; i < C->nkids; i++) {
            if (C->kids[i].running && C->kids[i].pid == pid) {
                c = &C->kids[i];
            }
        }
        if (!c) {
            continue;
        }
        c->running = 0;
        C->nrunning--;
        /* Its last words are already in the pipes: print them before its end. */
        for (int k = 0; k < 2; k++) {
            for (int n = 0; n < 256 && s_stream_read(C, c, k) == 1; n++) {
            }
        }
        return c;
    }
}
