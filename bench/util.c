/*
 * bench/util.c - shardps-bench's shared helpers: list flags, files, running a
 * program, the machine, medians, sums over JSON documents.
 *
 * Nothing here measures anything; comm/ and train/ do. Results pages and
 * their tables are page.c's, plots plots.c's.
 */
#include "bench/bench.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "deploy/proc.h"

/* ---- flags and files ------------------------------------------------------ */

int ps_bench_split_words(const char *text, char items[][PS_BENCH_WORD_MAX], int cap)
{
    int n = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= PS_BENCH_WORD_MAX || n == cap) {
            return PS_EINVAL;
        }
        snprintf(items[n++], PS_BENCH_WORD_MAX, "%.*s", (int)len, p);
        p += len + (p[len] == ',');
    }
    return n > 0 ? n : PS_EINVAL;
}

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

int ps_bench_launch_setup(const char *prog, const char **launch, char *path, size_t cap,
                          const char *out)
{
    if (!*launch) {
        if (ps_proc_find_exe("shardps-launch", "deploy", path, cap) != 0) {
            fprintf(stderr,
                    "%s: error: cannot find shardps-launch (looked next to this program, in "
                    "../deploy/ and on $PATH; use --launch)\n",
                    prog);
            return 2;
        }
        *launch = path;
    }
    char runs[PATH_MAX];
    snprintf(runs, sizeof runs, "%s/runs", out);
    if (ps_file_mkdirs(runs) != 0) {
        fprintf(stderr, "%s: error: cannot create %s: %s\n", prog, runs, strerror(errno));
        return 1;
    }
    return 0;
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

int ps_bench_run(char *const argv[], const char *log_path)
{
    ps_proc_spec_t spec = {.argv = argv, .log_path = log_path, .prog = "shardps-bench"};
    char err[PATH_MAX + 64];
    int rc = ps_proc_run(&spec, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "shardps-bench: cannot run %s: %s\n", argv[0], err);
    }
    return rc;
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ps_bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the machine ------------------------------------------------------------ */

double ps_bench_loadavg(void)
{
    double load[1];
    return getloadavg(load, 1) == 1 ? load[0] : -1;
}

/* Reads fields minflt (10), utime (14) and stime (15) of /proc/PID/stat (0:
 * this process). Returns 0, or -1 when it cannot be read. */
static int s_proc_stat(pid_t pid, unsigned long long *minflt, unsigned long long *ticks)
{
    char path[64], *text = NULL;
    snprintf(path, sizeof path, pid ? "/proc/%d/stat" : "/proc/self/stat", (int)pid);
    if (ps_bench_read_file(path, &text) != 0) {
        return -1;
    }
    /* Fields after the command name (which may hold spaces): state is field
     * 3; minflt is field 10, utime and stime (clock ticks) fields 14 and 15. */
    unsigned long long flt = 0, ut = 0, st = 0;
    const char *p = strrchr(text, ')');
    int ok = p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %llu %*u %*u %*u %llu %llu",
                         &flt, &ut, &st) == 3;
    free(text);
    *minflt = flt;
    *ticks = ut + st;
    return ok ? 0 : -1;
}

double ps_bench_cpu_seconds(pid_t pid)
{
    unsigned long long flt, ticks;
    return s_proc_stat(pid, &flt, &ticks) == 0
               ? (double)ticks / (double)sysconf(_SC_CLK_TCK)
               : -1;
}

double ps_bench_children_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) != 0) {
        return -1;
    }
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

void ps_bench_cpu_ticks(double *busy, double *total)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        (void)!fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                      &v[3], &v[4], &v[5], &v[6], &v[7]);
        fclose(f);
    }
    *total = 0;
    for (int k = 0; k < 8; k++) {
        *total += (double)v[k];
    }
    *busy = *total - (double)v[3] - (double)v[4]; /* not idle, not waiting for I/O */
}

double ps_bench_minor_faults(pid_t pid)
{
    unsigned long long flt, ticks;
    return s_proc_stat(pid, &flt, &ticks) == 0 ? (double)flt : -1;
}

void ps_bench_machine(char *buf, size_t cap)
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
    snprintf(buf, cap, "%ld cores, %s", sysconf(_SC_NPROCESSORS_ONLN), model);
}

/* ---- JSON documents ------------------------------------------------------- */

/* A member's number: the member itself, or its field key. */
static double s_json_term(const json_t *x, const char *key)
{
    return json_number_value(key ? json_object_get(x, key) : x);
}

double ps_bench_json_sum(const json_t *v, const char *key)
{
    double sum = 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        sum += s_json_term(json_array_get(v, i), key);
    }
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x)
    {
        sum += s_json_term(x, key);
    }
    return sum;
}
