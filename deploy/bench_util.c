/*
 * deploy/bench_util.c - shardps-bench's shared helpers: output tables, plots,
 * list flags, sibling executables, child processes, the summary JSON.
 *
 * Nothing here measures anything; bench_comm.c and bench_train.c do.
 */
#include "deploy/bench.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"

extern char **environ;

/* ---- growable string ---------------------------------------------------- */

void ps_bench_str_addf(ps_bench_str_t *s, const char *fmt, ...)
{
    if (s->oom) {
        return;
    }
    for (;;) {
        size_t room = s->cap - s->len;
        va_list ap;
        va_start(ap, fmt);
        int n = room ? vsnprintf(s->p + s->len, room, fmt, ap) : -2;
        va_end(ap);
        if (n == -1) {
            s->oom = 1; /* encoding error: keep what we have */
            return;
        }
        if (n >= 0 && (size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = s->cap ? s->cap * 2 : 1024;
        while (n >= 0 && cap - s->len <= (size_t)n) {
            cap *= 2;
        }
        char *np = realloc(s->p, cap);
        if (!np) {
            s->oom = 1;
            return;
        }
        s->p = np;
        s->cap = cap;
        s->p[s->len] = '\0';
    }
}

const char *ps_bench_str_get(const ps_bench_str_t *s)
{
    return s->p ? s->p : "";
}

void ps_bench_str_fini(ps_bench_str_t *s)
{
    free(s->p);
    memset(s, 0, sizeof *s);
}

/* ---- output tables ------------------------------------------------------ */

struct ps_bench_table {
    FILE *csv;
    FILE *md;
    char md_path[PATH_MAX];
    int ncols;
    ps_bench_str_t notes; /* markdown paragraphs written after the table */
};

/* Number of comma-separated cells in text. */
static int s_cells(const char *text)
{
    int n = 1;
    for (const char *p = text; *p; p++) {
        n += *p == ',';
    }
    return n;
}

/* Writes text's comma-separated cells as one markdown row. */
static void s_md_row(FILE *f, const char *text, int blank_is_na)
{
    fputs("|", f);
    const char *p = text;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0 && blank_is_na) {
            fputs(" n/a |", f);
        } else {
            fprintf(f, " %.*s |", (int)n, p);
        }
        if (p[n] != ',') {
            break;
        }
        p += n + 1;
    }
    fputs("\n", f);
}

int ps_bench_table_new(const char *dir, const char *name, const char *title,
                       const char *columns, const char *headers, ps_bench_table_t **out)
{
    char path[PATH_MAX];
    ps_bench_table_t *t = calloc(1, sizeof *t);
    if (!t) {
        return PS_ENOMEM;
    }
    t->ncols = s_cells(columns);
    snprintf(path, sizeof path, "%s/%s.csv", dir, name);
    t->csv = fopen(path, "w");
    snprintf(t->md_path, sizeof t->md_path, "%s/%s.md", dir, name);
    t->md = fopen(t->md_path, "w");
    if (!t->csv || !t->md) {
        fprintf(stderr, "shardps-bench: error: cannot write %s: %s\n",
                t->csv ? t->md_path : path, strerror(errno));
        ps_bench_table_destroy(&t, 0);
        return PS_EIO;
    }
    fprintf(t->csv, "%s\n", columns);
    fprintf(t->md, "%s\n\n", title);
    s_md_row(t->md, headers ? headers : columns, 0);
    fputs("|", t->md);
    for (int i = 0; i < t->ncols; i++) {
        fputs("---|", t->md);
    }
    fputs("\n", t->md);
    fflush(t->csv);
    fflush(t->md);
    *out = t;
    return 0;
}

void ps_bench_table_rowf(ps_bench_table_t *t, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(t->csv, "%s\n", line);
    s_md_row(t->md, line, 1);
    fflush(t->csv);
    fflush(t->md);
}

void ps_bench_table_note(ps_bench_table_t *t, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ps_bench_str_addf(&t->notes, "\n%s\n", line);
}

void ps_bench_table_destroy(ps_bench_table_t **tp, int echo)
{
    ps_bench_table_t *t = *tp;
    if (!t) {
        return;
    }
    if (t->md) {
        fputs(ps_bench_str_get(&t->notes), t->md);
    }
    if (t->csv) {
        fclose(t->csv);
    }
    int ok = t->md && fclose(t->md) == 0;
    if (ok && echo) {
        char *text = NULL;
        if (ps_bench_read_file(t->md_path, &text) == 0) {
            printf("\n%s", text);
            fflush(stdout);
        }
        free(text);
    }
    ps_bench_str_fini(&t->notes);
    free(t);
    *tp = NULL;
}

/* ---- plots --------------------------------------------------------------- */

void ps_bench_plot_header(ps_bench_str_t *s, const char *dir, const char *name, int w,
                          int h)
{
    ps_bench_str_addf(s,
                      "# Written by shardps-bench; run with: gnuplot %s.gp\n"
                      "set terminal pngcairo size %d,%d font ',9' noenhanced\n"
                      "set output '%s/%s.png'\n"
                      "set grid\nset key top left\n",
                      name, w, h, dir, name);
}

int ps_bench_plot(const char *dir, const char *name, const char *script)
{
    static int warned;
    char gp[PATH_MAX], log[PATH_MAX], exe[PATH_MAX];
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, name);
    FILE *f = fopen(gp, "w");
    if (!f) {
        return PS_EIO;
    }
    fputs(script, f);
    if (fclose(f) != 0) {
        return PS_EIO;
    }
    if (ps_bench_find_exe("gnuplot", NULL, exe, sizeof exe) != 0) {
        if (!warned) {
            fprintf(stderr,
                    "shardps-bench: gnuplot is not installed (Debian: gnuplot-nox); "
                    "no PNG plots, the CSV/markdown files and the .gp scripts are "
                    "written\n");
            warned = 1;
        }
        return PS_ENOENT;
    }
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    char *argv[] = {exe, gp, NULL};
    int rc = ps_bench_run(argv, log);
    if (rc != 0) {
        fprintf(stderr, "shardps-bench: gnuplot failed on %s (see %s)\n", gp, log);
        return PS_EIO;
    }
    return 0;
}

/* ---- flags and files ------------------------------------------------------ */

int ps_bench_parse_list(const char *text, long *vals, int cap)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0) {
            return PS_EINVAL;
        }
        long mul = 1;
        switch (toupper((unsigned char)*end)) {
        case 'K':
            mul = 1L << 10;
            end++;
            break;
        case 'M':
            mul = 1L << 20;
            end++;
            break;
        case 'G':
            mul = 1L << 30;
            end++;
            break;
        default:
            break;
        }
        if ((*end != ',' && *end != '\0') || n == cap || v > LONG_MAX / mul) {
            return PS_EINVAL;
        }
        vals[n++] = v * mul;
        p = *end == ',' ? end + 1 : end;
    }
    return n > 0 ? n : PS_EINVAL;
}

void ps_bench_size_name(long bytes, char *buf, size_t cap)
{
    static const char units[] = "GMK";
    for (int i = 0; i < 3; i++) {
        long u = 1L << (10 * (3 - i));
        if (bytes >= u && bytes % u == 0) {
            snprintf(buf, cap, "%ld%c", bytes / u, units[i]);
            return;
        }
    }
    snprintf(buf, cap, "%ld", bytes);
}

int ps_bench_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        return PS_EINVAL;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                return PS_EIO;
            }
            *p = c;
            if (c == '\0') {
                break;
            }
        }
    }
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : PS_EIO;
}

static int s_is_exe(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int ps_bench_find_exe(const char *name, const char *subdir, char *out, size_t cap)
{
    char self[PATH_MAX], cand[2 * PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(cand, sizeof cand, "%s/%s", self, name);
            if (s_is_exe(cand) && snprintf(out, cap, "%s", cand) < (int)cap) {
                return 0;
            }
            if (subdir) {
                snprintf(cand, sizeof cand, "%s/../%s/%s", self, subdir, name);
                if (s_is_exe(cand) && realpath(cand, self) &&
                    snprintf(out, cap, "%s", self) < (int)cap) {
                    return 0;
                }
            }
        }
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t len = strcspn(path, ":");
        snprintf(cand, sizeof cand, "%.*s/%s", (int)(len ? len : 1), len ? path : ".",
                 name);
        if (s_is_exe(cand) && snprintf(out, cap, "%s", cand) < (int)cap) {
            return 0;
        }
        path += len + (path[len] == ':');
    }
    return PS_ENOENT;
}

int ps_bench_read_file(const char *path, char **text)
{
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        return PS_ENOENT;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1) {
            break;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (!buf) {
        return PS_ENOMEM;
    }
    buf[len] = '\0';
    *text = buf;
    return 0;
}

int ps_bench_spawn(char *const argv[], const char *log_path, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (log_path) {
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path,
                                         O_WRONLY | O_CREAT | O_APPEND, 0644);
        posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    }
    int rc = posix_spawn(pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "shardps-bench: cannot run %s: %s\n", argv[0], strerror(rc));
        return PS_EIO;
    }
    return 0;
}

int ps_bench_run(char *const argv[], const char *log_path)
{
    pid_t pid;
    if (ps_bench_spawn(argv, log_path, &pid) != 0) {
        return PS_EIO;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            return PS_EIO;
        }
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}

/* ---- the machine ------------------------------------------------------------ */

double ps_bench_loadavg(void)
{
    double load[1];
    return getloadavg(load, 1) == 1 ? load[0] : -1;
}

double ps_bench_cpu_seconds(pid_t pid)
{
    char path[64], *text = NULL;
    snprintf(path, sizeof path, pid ? "/proc/%d/stat" : "/proc/self/stat", (int)pid);
    if (ps_bench_read_file(path, &text) != 0) {
        return -1;
    }
    /* Fields after the command name (which may hold spaces): state is field
     * 3; utime and stime are fields 14 and 15, in clock ticks. */
    unsigned long long ut, st;
    const char *p = strrchr(text, ')');
    int ok = p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                         &st) == 2;
    free(text);
    return ok ? (double)(ut + st) / (double)sysconf(_SC_CLK_TCK) : -1;
}

void ps_bench_machine(char *buf, size_t cap, double load_before)
{
    char *text = NULL, model[128] = "unknown CPU";
    if (ps_bench_read_file("/proc/cpuinfo", &text) == 0) {
        const char *p = strstr(text, "model name");
        if (p && (p = strchr(p, ':'))) {
            p++;
            while (*p == ' ') {
                p++;
            }
            snprintf(model, sizeof model, "%.*s", (int)strcspn(p, "\n"), p);
        }
    }
    free(text);
    snprintf(buf, cap, "%ld cores, %s; 1-minute load average %.2f before the run",
             sysconf(_SC_NPROCESSORS_ONLN), model, load_before);
}

/* ---- the summary JSON ------------------------------------------------------ */

/* Finds `"key":` inside [p, end) at nesting depth 0 relative to p. Returns a
 * pointer just after the colon, or NULL. */
static const char *s_json_key(const char *p, const char *end, const char *key, size_t klen)
{
    int depth = 0;
    for (; p < end && *p; p++) {
        if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (--depth < 0) {
                return NULL;
            }
        } else if (*p == '"') {
            const char *q = strchr(p + 1, '"');
            if (!q) {
                return NULL;
            }
            if (depth == 0 && (size_t)(q - p - 1) == klen && !strncmp(p + 1, key, klen)) {
                q++;
                while (isspace((unsigned char)*q)) {
                    q++;
                }
                if (*q == ':') {
                    return q + 1;
                }
            }
            p = q;
        }
    }
    return NULL;
}

int ps_bench_json_num(const char *json, const char *path, double *v)
{
    const char *p = strchr(json, '{');
    if (!p) {
        return PS_ENOENT;
    }
    p++;
    for (;;) {
        size_t klen = strcspn(path, ".");
        p = s_json_key(p, p + strlen(p), path, klen);
        if (!p) {
            return PS_ENOENT;
        }
        while (isspace((unsigned char)*p)) {
            p++;
        }
        if (path[klen] == '\0') {
            char *end;
            *v = strtod(p, &end);
            return end == p ? PS_ENOENT : 0;
        }
        if (*p != '{') {
            return PS_ENOENT;
        }
        p++;
        path += klen + 1;
    }
}

int ps_bench_json_array(const char *json, const char *key, double *vals, int cap)
{
    const char *p = strchr(json, '{');
    if (!p || !(p = s_json_key(p + 1, p + strlen(p), key, strlen(key)))) {
        return PS_ENOENT;
    }
    while (isspace((unsigned char)*p)) {
        p++;
    }
    if (*p != '[') {
        return PS_ENOENT;
    }
    p++;
    int n = 0;
    for (;;) {
        while (isspace((unsigned char)*p) || *p == ',') {
            p++;
        }
        if (*p == ']' || *p == '\0') {
            break;
        }
        char *end;
        double v = strtod(p, &end);
        if (end == p) {
            return PS_ENOENT;
        }
        if (n < cap) {
            vals[n] = v;
        }
        n++;
        p = end;
    }
    return n < cap ? n : cap;
}
