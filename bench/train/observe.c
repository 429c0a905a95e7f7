/*
 * bench/train/observe.c - shardps-bench observe: what watching a job costs it.
 *
 * The same MLP sync job through shardps-launch in four variants:
 *   off         no metrics endpoint, no trace (the nodes' heartbeat reports,
 *               always on, are in every variant);
 *   metrics     the scheduler serves the job's metrics (--metrics-bind) and
 *               this program scrapes them every second, as a watching user
 *               or a busy Prometheus would (its default is every 15 s);
 *   metrics-hot the same scraped every 100 ms, ten times that: an upper bound;
 *   trace       every process traces every step (--trace), the files written
 *               and merged at the end.
 * Each round runs every variant once, and the order turns by one each round
 * (off first, then metrics first, ...), so neither the machine's other load
 * nor a variant's place in the round (after which one, how long into the
 * run) favours a variant.
 *
 * Two figures per job: samples/s from the summary (the workers' training
 * loop, what the user waits for, and what other load on the machine disturbs
 * most), and the CPU seconds of every process of the job per 1,000 samples
 * (from getrusage(RUSAGE_CHILDREN): the launcher reaps the roles, we reap the
 * launcher; start-up and the trace files' writing at the end included),
 * which contention disturbs much less. A variant's cost is the median, over
 * rounds, of its job against the same round's off job: a pair runs within
 * a minute, so a load that comes and goes over the run cancels.
 *
 * On a shared machine both figures move by more than the cost being
 * measured, so a third, direct one is beside them: the nanoseconds one span
 * and one metric update take here (timed in a loop), times how many a step
 * makes (counted in the last traced job's merged trace), against the CPU
 * time of an unwatched step. Nothing here fails on a timing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/config.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/metrics.h"
#include "common/trace.h"
#include "deploy/proc.h"

#define S_PROG "shardps-bench observe"

enum { S_OFF, S_METRICS, S_METRICS_HOT, S_TRACE, S_NVARIANTS, S_MAX_ROUNDS = 50 };
static const char *const s_variant[S_NVARIANTS] = {"off", "metrics", "metrics-hot", "trace"};
/* The metrics variants' scrape intervals (ms). */
static const long s_scrape_ms[S_NVARIANTS] = {[S_METRICS] = 1000, [S_METRICS_HOT] = 100};

/* The scraper thread's state. */
typedef struct {
    int port;
    long every_ms;
    atomic_int stop;
    long scrapes;    /* answered scrapes */
    long long bytes; /* their bytes */
} s_scraper_t;

/* A free loopback port: bound once, released, handed to the scheduler. */
static int s_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
        port = ntohs(sa.sin_port);
    }
    if (fd >= 0) {
        close(fd);
    }
    return port;
}

/* One GET /metrics; returns the bytes of the answer, or -1. */
static long s_scrape(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    long total = -1;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        static const char req[] = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
        if (ps_proc_write_all(fd, req, sizeof req - 1) == 0) {
            char buf[65536];
            ssize_t n;
            total = 0;
            while ((n = read(fd, buf, sizeof buf)) > 0) {
                total += n;
            }
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    return total;
}

static void *s_scraper(void *arg)
{
    s_scraper_t *s = arg;
    double next = ps_now();
    while (!atomic_load(&s->stop)) {
        if (ps_now() >= next) {
            long n = s_scrape(s->port);
            if (n > 0) {
                s->scrapes++;
                s->bytes += n;
            }
            next += s->every_ms / 1e3;
        }
        /* short naps, so that the job's end is not kept waiting a scrape interval */
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    return NULL;
}

typedef struct {
    const char *out, *launch;
    int servers, workers, steps, batch;
} s_cfg_t;

/* One job's figures. */
typedef struct {
    double sps;     /* samples/s (the summary's); <= 0: the job failed */
    double cpu;     /* CPU seconds of all its processes per 1,000 samples */
    double steps;   /* steps it made */
} s_result_t;

/* CPU seconds of the children reaped so far (and theirs). */
static double s_children_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* One job (a failed one is said on stderr, with r->sps -1). */
static void s_job(const s_cfg_t *c, int variant, int round, long *scrapes, s_result_t *r)
{
    char json[PATH_MAX], log[PATH_MAX], trace[PATH_MAX], bind[64], num[4][16];
    snprintf(json, sizeof json, "%s/runs/observe-%s-%d.json", c->out, s_variant[variant], round);
    snprintf(log, sizeof log, "%s/runs/observe-%s-%d.log", c->out, s_variant[variant], round);
    snprintf(trace, sizeof trace, "%s/runs/observe-%d.trace.json", c->out, round);
    snprintf(num[0], sizeof num[0], "%d", c->servers);
    snprintf(num[1], sizeof num[1], "%d", c->workers);
    snprintf(num[2], sizeof num[2], "%d", c->steps);
    snprintf(num[3], sizeof num[3], "%d", c->batch);
    remove(json);
    /* --epochs as many as the steps: --max-steps, not the data set's size, ends the job */
    char *argv[32] = {(char *)c->launch, "--servers", num[0], "--workers", num[1],
                      "--max-steps", num[2], "--epochs", num[2], "--batch", num[3],
                      "--model", "mlp", "--mode", "sync", "--summary", json, "--plot", "none",
                      "--timeout", "600"};
    int a = 21;
    s_scraper_t sc = {.every_ms = s_scrape_ms[variant]};
    pthread_t th;
    int scraping = 0;
    if (sc.every_ms > 0) {
        sc.port = s_free_port();
        snprintf(bind, sizeof bind, "127.0.0.1:%d", sc.port);
        argv[a++] = "--metrics-bind";
        argv[a++] = bind;
        atomic_init(&sc.stop, 0);
        scraping = sc.port > 0 && pthread_create(&th, NULL, s_scraper, &sc) == 0;
    } else if (variant == S_TRACE) {
        argv[a++] = "--trace";
        argv[a++] = trace;
    }
    argv[a] = NULL;
    const double cpu0 = s_children_cpu();
    int rc = ps_bench_run(argv, log);
    const double cpu = s_children_cpu() - cpu0;
    if (scraping) {
        atomic_store(&sc.stop, 1);
        pthread_join(th, NULL);
        *scrapes += sc.scrapes;
    }
    json_t *doc = NULL;
    double samples = 0;
    r->sps = -1;
    if (rc != 0 || ps_json_read_file(json, PS_BENCH_JSON_MAX, &doc, NULL, 0) != 0 ||
        ps_json_get_num(doc, "samples_per_sec", &r->sps, NULL, 0) != 0 ||
        ps_json_get_num(doc, "samples", &samples, NULL, 0) != 0 ||
        ps_json_get_num(doc, "steps", &r->steps, NULL, 0) != 0 || samples <= 0) {
        fprintf(stderr, S_PROG ": %s run %d failed (exit %d; see %s)\n", s_variant[variant],
                round, rc, log);
        r->sps = -1;
    } else {
        r->cpu = cpu / samples * 1000;
    }
    json_decref(doc);
}

/* Nanoseconds per span (tracing on: its two ps_now() and ps_trace_span) and
 * per metric update. */
static void s_unit_costs(const char *out, double *ns_span, double *ns_update)
{
    enum { N = 2000000 };
    char path[PATH_MAX], err[256];
    snprintf(path, sizeof path, "%s/runs/observe-unit.trace.json", out);
    *ns_span = *ns_update = -1;
    if (ps_trace_open(path, NULL, 1024, err, sizeof err) == 0) {
        double t0 = ps_now();
        for (int i = 0; i < N; i++) { /* with the two timestamps a span takes */
            const double a = ps_now();
            ps_trace_span(PS_TRACE_PUSH, i, a, ps_now(), i);
        }
        *ns_span = (ps_now() - t0) / N * 1e9;
        ps_trace_close();
        remove(path);
    }
    ps_metrics_t *m;
    if (ps_metrics_new(&m) == 0) {
        const double bounds[] = {0.001, 0.01, 0.1};
        ps_metric_t *c = ps_metrics_counter(m, "c_total", NULL, "c");
        ps_metric_t *h = ps_metrics_histogram(m, "h_seconds", NULL, "h", bounds, 3);
        double t0 = ps_now();
        for (int i = 0; i < N; i++) {
            ps_metric_add(c, 1);
            ps_metric_observe(h, 0.005);
        }
        *ns_update = (ps_now() - t0) / (2.0 * N) * 1e9;
        ps_metrics_destroy(&m);
    }
}

/* In a merged trace: spans per step, and the metric updates the same code
 * paths make per step (a worker's step: 9; a server's message: 2, its reply
 * and its apply: 1 each). */
static void s_per_step(const char *trace, int steps, int workers, double *spans,
                       double *updates)
{
    json_t *doc = NULL;
    *spans = *updates = -1;
    if (ps_json_read_file(trace, PS_BENCH_JSON_MAX, &doc, NULL, 0) != 0) {
        return;
    }
    const json_t *ev = json_object_get(doc, "traceEvents");
    long n = 0, recv = 0, reply = 0, apply = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        const json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        n += ph && !strcmp(ph, "X");
        recv += name && !strcmp(name, "receive");
        reply += name && !strcmp(name, "reply");
        apply += name && !strcmp(name, "apply");
    }
    json_decref(doc);
    *spans = (double)n / steps;
    *updates = 9.0 * workers + (2.0 * (double)recv + (double)reply + (double)apply) / steps;
}

/* One row per variant: its samples/s and CPU per 1000 samples, and their
 * paired ratios to the same round's off job. Returns the off jobs' median
 * CPU seconds per 1000 samples (0 when none). */
static double s_rows(const s_result_t res[S_NVARIANTS][S_MAX_ROUNDS], int rounds,
                     ps_bench_table_t *t)
{
    double cbase = 0;
    for (int v = 0; v < S_NVARIANTS; v++) {
        /* a variant's jobs, and their ratios to the same round's off job */
        double sps[S_MAX_ROUNDS], cpu[S_MAX_ROUNDS], rs[S_MAX_ROUNDS], rcpu[S_MAX_ROUNDS];
        int n = 0, np = 0;
        for (int r = 0; r < rounds; r++) {
            const s_result_t *x = &res[v][r], *o = &res[S_OFF][r];
            if (x->sps <= 0) {
                continue;
            }
            sps[n] = x->sps;
            cpu[n++] = x->cpu;
            if (o->sps > 0) {
                rs[np] = x->sps / o->sps;
                rcpu[np++] = x->cpu / o->cpu;
            }
        }
        if (!n || !np) {
            ps_bench_table_rowf(t, "%s,%d,,,,,,,,", s_variant[v], n);
            continue;
        }
        const double med = ps_bench_median(sps, n), cmed = ps_bench_median(cpu, n);
        const double ratio = ps_bench_median(rs, np), cratio = ps_bench_median(rcpu, np);
        cbase = v == S_OFF ? cmed : cbase;
        ps_bench_table_rowf(t, "%s,%d,%.0f,%.0f,%.0f,%.3f,%.1f,%.4f,%.3f,%.1f", s_variant[v],
                            n, med, sps[0], sps[n - 1], ratio, 100 * (1 - ratio), cmed, cratio,
                            100 * (cratio - 1));
    }
    return cbase;
}

/* The direct estimate (spans and metric updates per step, each one's cost
 * here, against an unwatched step's CPU) and what was watched, under the
 * table. */
static void s_notes(const s_cfg_t *c, const s_result_t res[S_NVARIANTS][S_MAX_ROUNDS],
                    int rounds, double cbase, const long scrapes[S_NVARIANTS],
                    ps_bench_table_t *t)
{
    double ns_span, ns_update, spans, updates;
    char last[PATH_MAX];
    snprintf(last, sizeof last, "%s/runs/observe-%d.trace.json", c->out, rounds - 1);
    s_unit_costs(c->out, &ns_span, &ns_update);
    const double last_steps = res[S_TRACE][rounds - 1].sps > 0 ? res[S_TRACE][rounds - 1].steps
                                                                : c->steps;
    s_per_step(last, (int)last_steps, c->workers, &spans, &updates);
    if (cbase > 0 && spans > 0 && ns_span > 0) {
        /* the off runs' CPU per step, all processes */
        double step_us = cbase / 1000 * c->batch * c->workers * 1e6;
        double trace_us = spans * ns_span / 1e3, metrics_us = updates * ns_update / 1e3;
        ps_bench_table_note(t, "Direct estimate: a step of the whole job makes %.0f spans "
                               "(%.0f ns each here) and about %.0f metric updates (%.0f ns "
                               "each), %.2f us and %.2f us of CPU against %.0f us of CPU per "
                               "unwatched step: metrics %.3f %%, tracing %.3f %% (plus writing "
                               "the files at the end).",
                            spans, ns_span, updates, ns_update, metrics_us, trace_us, step_us,
                            100 * metrics_us / step_us, 100 * trace_us / step_us);
    }
    ps_bench_table_note(t, "metrics: the scheduler served %ld scrapes of the whole job's "
                           "metrics (every %ld ms) during the metrics runs, %ld (every %ld ms) "
                           "during the metrics-hot runs. trace: every step of every process, "
                           "16 MiB ring each.",
                        scrapes[S_METRICS], s_scrape_ms[S_METRICS], scrapes[S_METRICS_HOT],
                        s_scrape_ms[S_METRICS_HOT]);
}

/* Every round of every variant, then the table on the page. Returns 0 or 1. */
static int s_measure(const s_cfg_t *c, int rounds, ps_bench_page_t *page)
{
    static s_result_t res[S_NVARIANTS][S_MAX_ROUNDS];
    long scrapes[S_NVARIANTS] = {0};
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < S_NVARIANTS; k++) {
            const int v = (r + k) % S_NVARIANTS; /* the order turns each round */
            s_result_t *x = &res[v][r];
            s_job(c, v, r, &scrapes[v], x);
            fprintf(stderr, S_PROG ": round %d/%d %-11s %.0f samples/s, %.4f CPU s per 1000\n",
                    r + 1, rounds, s_variant[v], x->sps, x->cpu);
        }
    }
    ps_bench_table_t *t = NULL;
    char title[256];
    snprintf(title, sizeof title,
             "### Cost of watching a job: MLP sync, %d servers x %d workers, %d steps of "
             "batch %d, %d rounds, the order turning each round",
             c->servers, c->workers, c->steps, c->batch, rounds);
    if (ps_bench_table_new(page, "observe", title,
                           "variant,runs,samples_per_sec_median,min,max,vs_off,cost_percent,"
                           "cpu_s_per_1000_median,cpu_vs_off,cpu_cost_percent",
                           "variant,runs,samples/s (median),min,max,vs off (paired median),"
                           "cost %,CPU s per 1000 samples (median),CPU vs off (paired median),"
                           "CPU cost %",
                           &t) != 0) {
        return 1;
    }
    const double cbase = s_rows(res, rounds, t);
    s_notes(c, res, rounds, cbase, scrapes, t);
    ps_bench_table_destroy(&t, 1);
    return 0;
}

int ps_bench_observe_main(int argc, char **argv)
{
    s_cfg_t c = {.out = "bench-out", .servers = 2, .workers = 2, .steps = 600, .batch = 64};
    int rounds = 5;
    const char *launch = NULL;
    ps_flag_t flags[] = {
        {"out", PS_FLAG_STR, &c.out, "DIR", "where the results page and CSV go"},
        {"rounds", PS_FLAG_INT, &rounds, "N", "jobs per variant, alternated (1 to 50)"},
        {"servers", PS_FLAG_INT, &c.servers, "N", "servers of every job"},
        {"workers", PS_FLAG_INT, &c.workers, "N", "workers of every job"},
        {"max-steps", PS_FLAG_INT, &c.steps, "N", "steps of every job"},
        {"batch", PS_FLAG_INT, &c.batch, "N", "samples per worker per step"},
        {"launch", PS_FLAG_STR, &launch, "PATH",
         "shardps-launch (default: next to this program, ../deploy/, $PATH)"},
    };
    int rc = ps_config_parse_argv(S_PROG,
                             "Runs one MLP sync job with metrics off, with its metrics served and\n"
                             "scraped every second, scraped every 100 ms, and with every step\n"
                             "traced, in turn (the order turning each round), and writes\n"
                             "samples/s and each variant's cost on the results page observe.md\n"
                             "and in observe.csv.",
                             flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (rounds < 1 || rounds > S_MAX_ROUNDS || c.servers < 1 || c.workers < 1 || c.steps < 1 ||
        c.batch < 1) {
        fprintf(stderr, S_PROG ": error: expected --rounds 1..%d and positive --servers, "
                        "--workers, --max-steps, --batch\n", S_MAX_ROUNDS);
        return 2;
    }
    char path[PATH_MAX];
    if ((rc = ps_bench_launch_setup(S_PROG, &launch, path, sizeof path, c.out)) != 0) {
        return rc;
    }
    c.launch = launch;
    ps_bench_page_t *page;
    if (ps_bench_page_new(c.out, "observe", argc, argv, &page) != 0) {
        return 1;
    }
    rc = s_measure(&c, rounds, page);
    ps_bench_page_destroy(&page);
    return rc ? 1 : 0;
}
