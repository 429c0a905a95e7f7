/*
 * bench/comm/comm.c - shardps-bench comm: push+pull goodput of the parameter
 * server against raw ZeroMQ (comm_run.c measures one configuration), then
 * allreduce bus bandwidth against MPI (allreduce.c). This file parses the
 * flags, runs the sweep and writes the comm table and plot on the results
 * page (with --secure comm_secure.md, else comm.md).
 *
 * Goodput is payload bytes moved (2 x payload per round) per second;
 * GB = 1e9 bytes. Allreduce: bus bandwidth as nccl-tests define it (busbw =
 * bytes / time x 2(n-1)/n).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/comm/comm.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"

#define COMM_TARGET_RATIO 0.8 /* the design's target for 1-16 MB: rounds/s over the echo's */
#define COMM_CPU_TARGET 1.25  /* and CPU per round over the echo's, 1-16 MB */

/* ---- the sweep ------------------------------------------------------------------- */

/* Goodput in GB/s from rounds per second: every round moves the payload twice. */
static double s_gbs(double rounds_per_s, long bytes)
{
    return rounds_per_s * 2.0 * (double)bytes / 1e9;
}

/* What the sweep compares: shardps against raw ZeroMQ, or with --secure a
 * secure job against a plain one. */
typedef struct {
    const char *file, *title, *csv, *md; /* the table */
    const char *ps, *base;               /* the two sides' names in lines and plots */
} s_sides_t;

static const s_sides_t s_vs_zmq = {
    "comm", "### Parameter-server push+pull goodput vs raw ZeroMQ (same run, loopback TCP)",
    "payload_bytes,payload,servers,inflight,mode,ps_rounds_per_sec,ps_goodput_gbs,"
    "zmq_rounds_per_sec,zmq_goodput_gbs,ratio,ratio_min,ratio_max,ps_cpu_ms_per_round,"
    "zmq_cpu_ms_per_round,ps_faults_per_round,zmq_faults_per_round,cpu_ratio,floor_cpu_ratio",
    "bytes,payload,servers,in flight,mode,shardps rounds/s,shardps GB/s,ZeroMQ rounds/s,"
    "ZeroMQ GB/s,shardps/ZeroMQ,ratio min,ratio max,shardps CPU ms/round,ZeroMQ CPU ms/round,"
    "shardps faults/round,ZeroMQ faults/round,shardps/ZeroMQ CPU,floor CPU ratio",
    "shardps", "ZeroMQ"};

static const s_sides_t s_vs_plain = {
    "comm_secure",
    "### --secure (CurveZMQ) push+pull goodput vs plain (same run, loopback TCP)",
    "payload_bytes,payload,servers,inflight,mode,secure_rounds_per_sec,secure_goodput_gbs,"
    "plain_rounds_per_sec,plain_goodput_gbs,ratio,ratio_min,ratio_max,secure_cpu_ms_per_"
    "round,plain_cpu_ms_per_round,secure_faults_per_round,plain_faults_per_round,cpu_ratio",
    "bytes,payload,servers,in flight,mode,secure rounds/s,secure GB/s,plain rounds/s,"
    "plain GB/s,secure/plain,ratio min,ratio max,secure CPU ms/round,plain CPU ms/round,"
    "secure faults/round,plain faults/round,secure/plain CPU",
    "secure", "plain"};

/* Whether a payload is in the targets' range, 1-16 MB. */
static int s_in_target(long bytes)
{
    return bytes >= (1L << 20) && bytes <= (16L << 20);
}

/* Which result of res is (in flight w, servers s, size z). */
static int s_at(const ps_bench_comm_cfg_t *cfg, int w, int s, int z)
{
    return (w * cfg->nservers + s) * cfg->nsizes + z;
}

/* The CPU target's note (1-16 MB: shardps CPU per round <= COMM_CPU_TARGET x
 * ZeroMQ's, against the floor) and async over sync at the same size and
 * servers, where both were measured: CPU per round of each side, and the
 * CPU ratio (what async costs beyond its transport). */
static void s_cpu_notes(const ps_bench_comm_cfg_t *cfg, const ps_bench_comm_result_t *res,
                        ps_bench_table_t *t)
{
    int rows = 0, met = 0, floor_over = 0, pairs = 0;
    double worst = 0, floor_max = 0, lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {0};
    for (int w = 0; w < cfg->ninflight; w++) {
        for (int s = 0; s < cfg->nservers; s++) {
            for (int z = 0; z < cfg->nsizes; z++) {
                const ps_bench_comm_result_t *q = &res[s_at(cfg, w, s, z)];
                if (isnan(q->ps) || !s_in_target(cfg->sizes[z])) {
                    continue;
                }
                rows++;
                met += q->cpu_ratio <= COMM_CPU_TARGET;
                floor_over += q->floor_ratio > COMM_CPU_TARGET;
                worst = q->cpu_ratio > worst ? q->cpu_ratio : worst;
                floor_max = q->floor_ratio > floor_max ? q->floor_ratio : floor_max;
                for (int v = 0; v < cfg->ninflight && cfg->inflight[w] > 1; v++) {
                    const ps_bench_comm_result_t *y = &res[s_at(cfg, v, s, z)];
                    if (cfg->inflight[v] != 1 || isnan(y->ps)) {
                        continue;
                    }
                    const double a[3] = {q->ps_cpu / y->ps_cpu, q->base_cpu / y->base_cpu,
                                         q->cpu_ratio / y->cpu_ratio};
                    for (int k = 0; k < 3; k++) {
                        lo[k] = a[k] < lo[k] ? a[k] : lo[k];
                        hi[k] = a[k] > hi[k] ? a[k] : hi[k];
                    }
                    pairs++;
                }
            }
        }
    }
    if (rows) {
        ps_bench_table_note(t,
                            "CPU target (1-16 MB: shardps CPU per round <= %.2fx ZeroMQ's): "
                            "met in %d of %d rows; highest ratio %.2f; the floor is above "
                            "the target in %d of them (highest %.2f).",
                            COMM_CPU_TARGET, met, rows, worst, floor_over, floor_max);
    }
    if (pairs) {
        ps_bench_table_note(t,
                            "Async over sync at the same size and servers (1-16 MB): CPU per "
                            "round, shardps %.2f-%.2f and ZeroMQ %.2f-%.2f (more in flight, "
                            "more memory touched); shardps/ZeroMQ CPU, %.2f-%.2f.",
                            lo[0], hi[0], lo[1], hi[1], lo[2], hi[2]);
    }
}

/* The rounds/s target's worst row, over the 1-16 MB rows measured. */
typedef struct {
    int rows, met;
    double worst;
    char worst_at[96];
} s_target_t;

/* Measures configuration (w, s, z) into res and writes its row (an empty one
 * when it failed). Returns 0, or 1 when it failed. */
static int s_measure(const ps_bench_comm_cfg_t *cfg, const s_sides_t *sd, int w, int s, int z,
                     ps_bench_comm_result_t *res, ps_bench_table_t *t, s_target_t *target)
{
    const int n = cfg->nservers * cfg->nsizes * cfg->ninflight, done = s_at(cfg, w, s, z) + 1;
    const int W = (int)cfg->inflight[w], S = (int)cfg->servers[s];
    const long bytes = cfg->sizes[z];
    char name[32], err[256] = "";
    ps_bench_size_name(bytes, name, sizeof name);
    double t0 = ps_now();
    ps_bench_comm_result_t *q = &res[s_at(cfg, w, s, z)];
    int rc = ps_bench_comm_run(cfg, S, bytes, W, q, err, sizeof err);
    if (rc != 0) {
        q->ps = q->base = NAN;
        fprintf(stderr, COMM_PROG ": [%d/%d] %s servers=%d inflight=%d: failed: %s\n", done, n,
                name, S, W, err[0] ? err : ps_strerror(rc));
        ps_bench_table_rowf(t, cfg->secure ? "%ld,%s,%d,%d,%s,,,,,,,,,,,,"
                                           : "%ld,%s,%d,%d,%s,,,,,,,,,,,,,",
                            bytes, name, S, W, W == 1 ? "sync" : "async");
        return 1;
    }
    fprintf(stderr,
            COMM_PROG ": [%d/%d] %s servers=%d inflight=%d: %s %.3f GB/s, %s %.3f GB/s, ratio "
                      "%.2f [%.2f, %.2f], CPU ms/round %.3f vs %.3f, faults/round %.1f vs "
                      "%.1f (%.1f s)\n",
            done, n, name, S, W, sd->ps, s_gbs(q->ps, bytes), sd->base, s_gbs(q->base, bytes),
            q->ratio, q->ratio_lo, q->ratio_hi, q->ps_cpu * 1e3, q->base_cpu * 1e3,
            q->ps_faults, q->base_faults, ps_now() - t0);
    ps_bench_table_rowf(t,
                        cfg->secure ? "%ld,%s,%d,%d,%s,%.1f,%.3f,%.1f,%.3f,%.2f,%.2f,%.2f,%.3f,"
                                      "%.3f,%.1f,%.1f,%.2f"
                                    : "%ld,%s,%d,%d,%s,%.1f,%.3f,%.1f,%.3f,%.2f,%.2f,%.2f,%.3f,"
                                      "%.3f,%.1f,%.1f,%.2f,%.2f",
                        bytes, name, S, W, W == 1 ? "sync" : "async", q->ps,
                        s_gbs(q->ps, bytes), q->base, s_gbs(q->base, bytes), q->ratio,
                        q->ratio_lo, q->ratio_hi, q->ps_cpu * 1e3, q->base_cpu * 1e3,
                        q->ps_faults, q->base_faults, q->cpu_ratio, q->floor_ratio);
    if (!cfg->secure && s_in_target(bytes)) {
        target->rows++;
        target->met += q->ratio >= COMM_TARGET_RATIO;
        if (q->ratio < target->worst) {
            target->worst = q->ratio;
            snprintf(target->worst_at, sizeof target->worst_at, "%s, %d servers, %d in flight",
                     name, S, W);
        }
    }
    return 0;
}

/* What a round is and how it was timed, under the table. */
static void s_method_note(const ps_bench_comm_cfg_t *cfg, ps_bench_table_t *t)
{
    ps_bench_table_note(
        t,
        cfg->secure
            ? "Round: push of the whole payload + pull of it, split over the servers "
              "by the shard map; servers apply plain SGD. Two jobs side by side, the same "
              "but for --secure (CurveZMQ: every frame encrypted and authenticated, "
              "only the job's keys admitted). Goodput = 2 x payload x rounds/s, GB = 1e9 "
              "B. In flight 1: sync mode; more: async. %d repetitions of >= %.2f s, plain "
              "then secure back to back; rates are medians, the ratio is the median of "
              "the %d back-to-back ratios (min and max beside it). CPU per round: user + "
              "system seconds of every process of that side (this one included), median; "
              "faults per round: their minor page faults, median."
            : "Round: push of the whole payload + pull of it (shardps; split over the "
              "servers by the shard map; servers apply plain SGD) or one echo of the "
              "same bytes (ZeroMQ DEALER->ROUTER->DEALER, zero-copy sends, same "
              "split, one echo process per server). Goodput = 2 x payload x rounds/s, "
              "GB = 1e9 B. In flight 1: sync mode; more: async. %d repetitions of "
              ">= %.2f s, ZeroMQ then shardps back to back; rates are medians, the ratio "
              "is the median of the %d back-to-back ratios (min and max beside it). CPU "
              "per round: user + system seconds of every process of that side (this one "
              "included), median; on a machine whose cores are all busy it bounds the "
              "rate. Faults per round: their minor page faults (/proc/PID/stat), median; "
              "in steady state a round should take none. shardps/ZeroMQ CPU: the median "
              "of the back-to-back ratios of CPU per round. Floor CPU ratio: ZeroMQ's "
              "CPU per round plus what no parameter server can skip, measured here on "
              "the payload (one copy into the caller's buffer, one SGD pass), over "
              "ZeroMQ's: the least CPU ratio possible.",
        cfg->reps, cfg->seconds, cfg->reps);
}

/* Goodput against payload: one panel per in-flight count with data, one line
 * pair per server count with data (gnuplot fails on a series that has no
 * point). Returns 0, or 1 when gnuplot failed. */
static int s_plot(const ps_bench_comm_cfg_t *cfg, const s_sides_t *sd,
                  const ps_bench_comm_result_t *res)
{
    ps_bench_str_t gp = {0}, panels = {0};
    int npanels = 0, failed = 0;
    for (int w = 0; w < cfg->ninflight; w++) {
        ps_bench_str_t plot = {0};
        for (int s = 0; s < cfg->nservers; s++) {
            int points = 0;
            ps_bench_str_addf(&gp, "$w%ds%d << EOD\n", w, s);
            for (int z = 0; z < cfg->nsizes; z++) {
                const ps_bench_comm_result_t *q = &res[s_at(cfg, w, s, z)];
                if (!isnan(q->ps)) {
                    ps_bench_str_addf(&gp, "%ld %.4f %.4f\n", cfg->sizes[z],
                                      s_gbs(q->ps, cfg->sizes[z]),
                                      s_gbs(q->base, cfg->sizes[z]));
                    points++;
                }
            }
            ps_bench_str_addf(&gp, "EOD\n");
            if (points) {
                ps_bench_str_addf(&plot,
                                  "%s$w%ds%d u 1:2 w lp lc %d pt 7 t '%s S=%ld', "
                                  "$w%ds%d u 1:3 w l lc %d dt 2 t '%s S=%ld'",
                                  plot.len ? ", " : "", w, s, s + 1, sd->ps, cfg->servers[s],
                                  w, s, s + 1, sd->base, cfg->servers[s]);
            }
        }
        if (plot.len) {
            ps_bench_str_addf(&panels, "set title '%ld in flight (%s)'\nplot %s\n",
                              cfg->inflight[w], cfg->inflight[w] == 1 ? "sync" : "async",
                              ps_bench_str_get(&plot));
            npanels++;
        }
        ps_bench_str_fini(&plot);
    }
    if (npanels) {
        ps_bench_str_t head = {0};
        const char *png = cfg->secure ? "comm_secure_goodput" : "comm_goodput";
        ps_bench_plot_header(&head, cfg->page, png, 420 * npanels, 380);
        ps_bench_plot_sizes(&head, cfg->sizes, cfg->nsizes, "goodput (GB/s)");
        ps_bench_str_addf(&head, "%sset multiplot layout 1,%d\n%sunset multiplot\n",
                          ps_bench_str_get(&gp), npanels, ps_bench_str_get(&panels));
        failed = ps_bench_plot(cfg->page, png, ps_bench_str_get(&head)) == PS_EIO;
        ps_bench_str_fini(&head);
    }
    ps_bench_str_fini(&panels);
    ps_bench_str_fini(&gp);
    return failed;
}

static int s_sweep(const ps_bench_comm_cfg_t *cfg)
{
    const s_sides_t *sd = cfg->secure ? &s_vs_plain : &s_vs_zmq;
    ps_bench_table_t *t;
    if (ps_bench_table_new(cfg->page, sd->file, sd->title, sd->csv, sd->md, &t) != 0) {
        return 1;
    }
    int n = cfg->nservers * cfg->nsizes * cfg->ninflight, failed = 0;
    ps_bench_comm_result_t *res = calloc((size_t)n, sizeof *res);
    if (!res) {
        ps_bench_table_destroy(&t, 0);
        return 1;
    }
    s_target_t target = {.worst = INFINITY};
    for (int w = 0; w < cfg->ninflight; w++) {
        for (int s = 0; s < cfg->nservers; s++) {
            for (int z = 0; z < cfg->nsizes; z++) {
                failed |= s_measure(cfg, sd, w, s, z, res, t, &target);
            }
        }
    }
    s_method_note(cfg, t);
    if (target.rows) {
        ps_bench_table_note(t,
                            "Target (1-16 MB: shardps >= %.1fx ZeroMQ): met in %d of %d rows; "
                            "lowest ratio %.2f (%s).",
                            COMM_TARGET_RATIO, target.met, target.rows, target.worst,
                            target.worst_at);
        s_cpu_notes(cfg, res, t);
    }
    ps_bench_table_destroy(&t, 1);
    failed |= s_plot(cfg, sd, res);
    free(res);
    return failed | ps_bench_allreduce(cfg);
}

/* ---- flags ------------------------------------------------------------------------ */

/* Parses list flag `name` into vals with bounds; prints the error itself. */
static int s_list(const char *name, const char *text, long *vals, int *n, long lo, long hi)
{
    int got = ps_bench_parse_list(text, vals, PS_BENCH_LIST_MAX);
    for (int i = 0; got > 0 && i < got; i++) {
        if (vals[i] < lo || vals[i] > hi) {
            got = PS_EINVAL;
        }
    }
    if (got < 0) {
        fprintf(stderr,
                COMM_PROG
                ": error: --%s %s: expected a comma-separated list of %ld to %ld\n",
                name, text, lo, hi);
        return PS_EINVAL;
    }
    *n = got;
    return 0;
}

/* The list flags, defaulted by --quick and --secure where not given, into
 * cfg, and every bound checked. Returns 0, or 2 after saying what is wrong. */
static int s_check(ps_bench_comm_cfg_t *cfg, int quick, const char *sizes,
                   const char *servers, const char *inflight, const char *arw,
                   const char *ar_sizes)
{
    if (!ar_sizes) {
        ar_sizes = sizes   ? sizes
                   : quick ? "4K,1M,16M,64M"
                           : "4K,16K,64K,256K,1M,4M,16M,64M";
    }
    if (!sizes) {
        sizes = quick         ? "4K,1M,4M,16M"
                : cfg->secure ? "4K,16K,64K,256K,1M,4M,16M"
                              : "4K,16K,64K,256K,1M,4M,16M,64M";
    }
    if (!arw) { /* the ring under --secure is not what that table is about */
        arw = cfg->secure ? "0" : "2,4";
    }
    cfg->seconds = cfg->seconds > 0 ? cfg->seconds : quick ? 0.2 : 0.5;
    cfg->reps = cfg->reps > 0 ? cfg->reps : 7;
    if (s_list("sizes", sizes, cfg->sizes, &cfg->nsizes, 4, 1L << 30) != 0 ||
        s_list("servers", servers, cfg->servers, &cfg->nservers, 1, COMM_MAX_SERVERS) !=
            0 ||
        s_list("inflight", inflight, cfg->inflight, &cfg->ninflight, 1,
               COMM_MAX_INFLIGHT) != 0 ||
        s_list("allreduce-workers", arw, cfg->ar_workers, &cfg->nar, 0, AR_MAX_MEMBERS) !=
            0 ||
        s_list("allreduce-sizes", ar_sizes, cfg->ar_sizes, &cfg->nar_sizes, 4, 1L << 30) !=
            0) {
        return 2;
    }
    if (cfg->ring_kib < 1 || cfg->ring_kib > 65536) {
        fprintf(stderr, COMM_PROG ": error: --ring-kib %d: expected 1 to 65536\n",
                cfg->ring_kib);
        return 2;
    }
    for (int i = 0; i < cfg->nsizes + cfg->nar_sizes; i++) {
        long b = i < cfg->nsizes ? cfg->sizes[i] : cfg->ar_sizes[i - cfg->nsizes];
        if (b % 4) {
            fprintf(stderr,
                    COMM_PROG ": error: --%s: %ld is not a whole number of floats\n",
                    i < cfg->nsizes ? "sizes" : "allreduce-sizes", b);
            return 2;
        }
    }
    if (cfg->nar == 1 && cfg->ar_workers[0] == 0) {
        cfg->nar = 0;
    }
    for (int i = 0; i < cfg->nar; i++) {
        if (cfg->ar_workers[i] < 2) {
            fprintf(stderr,
                    COMM_PROG ": error: --allreduce-workers: allreduce needs 2 or more "
                              "(or 0 for none)\n");
            return 2;
        }
    }
    if (cfg->reps > COMM_MAX_REPS) {
        fprintf(stderr, COMM_PROG ": error: --reps: at most %d\n", COMM_MAX_REPS);
        return 2;
    }
    return 0;
}

int ps_bench_comm_main(int argc, char **argv)
{
    ps_bench_comm_cfg_t cfg = {
        .out = "bench-out", .reps = 7, .seconds = 0, .mpi = 1, .ring_kib = 128};
    int quick = 0;
    const char *sizes = NULL, *servers = "1,2,4", *inflight = "1,4", *arw = NULL;
    const char *ar_sizes = NULL;
    const char *log_level = "warn";
    ps_flag_t flags[] = {
        {"quick", PS_FLAG_BOOL, &quick, NULL,
         "a few sizes (4K,1M,4M,16M; allreduce 4K,1M,16M,64M), shorter repetitions"},
        {"out", PS_FLAG_STR, &cfg.out, "DIR", "where the results page, CSVs and PNGs go"},
        {"sizes", PS_FLAG_STR, &sizes, "LIST",
         "payload bytes, K/M suffixes (default 4K,16K,...,64M)"},
        {"servers", PS_FLAG_STR, &servers, "LIST", "server counts"},
        {"inflight", PS_FLAG_STR, &inflight, "LIST",
         "rounds in flight (1 = sync, more = async)"},
        {"allreduce-workers", PS_FLAG_STR, &arw, "LIST",
         "allreduce ranks (0 = no allreduce; default 2,4, with --secure 0)"},
        {"allreduce-sizes", PS_FLAG_STR, &ar_sizes, "LIST",
         "allreduce payload bytes (default: --sizes when given, else as --sizes')"},
        {"ring-kib", PS_FLAG_INT, &cfg.ring_kib, "KIB",
         "shardps ring: KiB per message (the worker's --ring-kib default)"},
        {"seconds", PS_FLAG_DOUBLE, &cfg.seconds, "S",
         "least timed seconds per repetition (0 = 0.5; quick: 0.2)"},
        {"reps", PS_FLAG_INT, &cfg.reps, "N", "repetitions, median reported"},
        {"mpi", PS_FLAG_BOOL, &cfg.mpi, NULL,
         "compare allreduce with MPI_Allreduce where installed"},
        {"secure", PS_FLAG_BOOL, &cfg.secure, NULL,
         "a --secure job beside a plain one instead of raw ZeroMQ (sizes 4K to 16M, no "
         "allreduce unless asked): the page comm_secure.md, its allreduce table in "
         "comm_secure_allreduce.csv"},
        {"log-level", PS_FLAG_STR, &log_level, "LEVEL",
         "of the shardps roles: err, warn, info, debug"},
    };
    int rc =
        ps_config_parse_argv(COMM_PROG,
                        "Push+pull goodput of the parameter server against payload size, "
                        "servers and requests\nin flight, each beside raw ZeroMQ between "
                        "the same endpoints in the same run;\nallreduce bus bandwidth "
                        "beside MPI_Allreduce. Writes the results page comm.md, comm.csv,\n"
                        "allreduce.csv, comm_goodput.png and allreduce_busbw.png into --out.",
                        flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (s_check(&cfg, quick, sizes, servers, inflight, arw, ar_sizes) != 0) {
        return 2;
    }
    if (ps_log_set_level_flag(COMM_PROG, log_level) != 0) {
        return 2;
    }
    if (ps_file_mkdirs(cfg.out) != 0) {
        fprintf(stderr, COMM_PROG ": error: cannot create %s: %s\n", cfg.out,
                strerror(errno));
        return 1;
    }
    ps_log_set_role("B", -1);
    if (ps_bench_page_new(cfg.out, cfg.secure ? "comm_secure" : "comm", argc, argv, &cfg.page) !=
        0) {
        return 1;
    }
    rc = s_sweep(&cfg);
    ps_bench_page_destroy(&cfg.page);
    return rc ? 1 : 0;
}
