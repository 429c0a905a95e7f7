/*
 * bench/comm/compress.c - shardps-bench compress: bytes on the wire saved by
 * --wire and --compress, against the accuracy they cost.
 *
 * For each consistency mode (sync, async, ssp:4), seed (--seeds, 1) and codec
 * (fp32, fp16, bf16, topk:0.01, topk:0.01 with bf16 values) one job through
 * shardps-launch, all with the same model, data order and flags (only
 * --mode, --seed, --wire and --compress change). From each job's summary
 * JSON: the final test accuracy and its distance to the fp32 job of the same
 * mode and seed, and the bytes on the wire by message type (header +
 * payload, every byte once, by its sender: bytes_by_type.total) - pushes,
 * pull replies and all types - with what each codec saves against that fp32
 * job; with several seeds, the worst distance over them per mode and codec.
 * Bytes are counted, not timed, so they do not depend on the machine's load;
 * accuracy does not either in sync (deterministic), and varies run to run in
 * async and ssp.
 *
 * It does not judge: a failed job is a row with its exit status, and the
 * sweep goes on.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/job.h"

#define S_PROG "shardps-bench compress"

enum { CMP_MAX = 16 };

typedef struct {
    const char *out, *launch, *model;
    char modes[CMP_MAX][PS_BENCH_WORD_MAX];
    int nmodes;
    char codecs[CMP_MAX][PS_BENCH_WORD_MAX]; /* "fp32", "bf16", "topk:R", "topk:R+bf16" */
    int ncodecs;
    int seeds[CMP_MAX];
    int nseeds;
    int servers, workers, epochs, max_steps, threads;
    double timeout;
    ps_bench_page_t *page; /* the results page, in out */
} cmp_cfg_t;

typedef struct {
    int status;      /* launcher exit status, or a PS_E* when the summary is not readable */
    double acc;      /* final test accuracy */
    double push;     /* bytes on the wire: pushes (all workers) */
    double pull;     /* pull replies (all servers) */
    double total;    /* every message type */
    double wall;     /* job wall time, s */
} cmp_run_t;

/* A codec's --wire and --compress: "topk:0.01+bf16" -> bf16, topk:0.01. */
static void s_codec_flags(const char *codec, char *wire, char *compress, size_t cap)
{
    const char *plus = strchr(codec, '+');
    snprintf(wire, cap, "fp32");
    snprintf(compress, cap, "none");
    if (!strncmp(codec, "topk:", 5)) {
        snprintf(compress, cap, "%.*s", plus ? (int)(plus - codec) : (int)strlen(codec),
                 codec);
        if (plus) {
            snprintf(wire, cap, "%s", plus + 1);
        }
    } else {
        snprintf(wire, cap, "%s", codec);
    }
}

static void s_run(const cmp_cfg_t *cfg, const char *mode, int seed, const char *codec,
                  cmp_run_t *r)
{
    char tag[96], json[PATH_MAX], log[PATH_MAX], wire[32], compress[32], num[6][32];
    snprintf(tag, sizeof tag, "%s_s%d_%s", mode, seed, codec);
    for (char *p = tag; *p; p++) {
        *p = (*p == ':' || *p == '+' || *p == '/') ? '_' : *p;
    }
    snprintf(json, sizeof json, "%s/runs/compress_%s.json", cfg->out, tag);
    snprintf(log, sizeof log, "%s/runs/compress_%s.log", cfg->out, tag);
    remove(json);
    remove(log);
    s_codec_flags(codec, wire, compress, sizeof wire);
    snprintf(num[0], sizeof num[0], "%d", cfg->servers);
    snprintf(num[1], sizeof num[1], "%d", cfg->workers);
    snprintf(num[2], sizeof num[2], "%d", cfg->epochs);
    snprintf(num[3], sizeof num[3], "%d", seed);
    snprintf(num[4], sizeof num[4], "%g", cfg->timeout);
    char *argv[32] = {(char *)cfg->launch, "--servers", num[0], "--workers", num[1],
                      "--model", (char *)cfg->model, "--mode", (char *)mode, "--epochs",
                      num[2], "--seed", num[3], "--timeout", num[4], "--wire", wire,
                      "--compress", compress, "--summary", json};
    int a = 21;
    if (cfg->max_steps > 0) {
        snprintf(num[5], sizeof num[5], "%d", cfg->max_steps);
        argv[a++] = "--max-steps";
        argv[a++] = num[5];
    }
    char threads[16];
    if (cfg->threads > 0) {
        snprintf(threads, sizeof threads, "%d", cfg->threads);
        argv[a++] = "--threads";
        argv[a++] = threads;
    }
    argv[a] = NULL;
    r->status = ps_bench_run(argv, log);
    if (r->status != 0) {
        return;
    }
    json_t *doc = NULL;
    if (ps_json_read_file(json, PS_BENCH_JSON_MAX, &doc, NULL, 0) != 0 ||
        ps_json_get_num(doc, "test_accuracy", &r->acc, NULL, 0) != 0 ||
        ps_json_get_num(doc, "wall_seconds", &r->wall, NULL, 0) != 0) {
        r->status = PS_EPROTO;
    } else {
        /* each message type's bytes; a type that never went is absent (0).
         * Pushes go alone or with their pull (push_pull: async, --overlap 0) */
        const json_t *total = ps_json_path(doc, "bytes_by_type.total");
        r->push = json_number_value(json_object_get(total, "push")) +
                  json_number_value(json_object_get(total, "push_pull"));
        r->pull = json_number_value(json_object_get(total, "pull_reply"));
        r->total = ps_bench_json_sum(total, NULL);
    }
    json_decref(doc);
}

/* "-48.3" (%) of v against base, or "" without a base. */
static const char *s_saved(char *buf, size_t cap, double v, double base)
{
    if (!(base > 0)) {
        buf[0] = '\0';
    } else {
        const double pct = 100.0 * (1.0 - v / base);
        snprintf(buf, cap, "%.1f", fabs(pct) < 0.05 ? 0.0 : pct); /* no "-0.0" */
    }
    return buf;
}

/* Accuracy against total bytes: one line per mode through its codecs (the
 * first seed). */
static void s_plot(const cmp_cfg_t *cfg, const cmp_run_t *runs)
{
    ps_bench_str_t gp = {0}, plot = {0};
    ps_bench_plot_header(&gp, cfg->page, "compress", 560, 380);
    ps_bench_str_addf(&gp, "set xlabel 'bytes on the wire, whole job (MB, log)'\n"
                           "set ylabel 'final test accuracy'\nset logscale x\n"
                           "set key bottom right opaque\n");
    for (int m = 0; m < cfg->nmodes; m++) {
        ps_bench_str_addf(&gp, "$m%d << EOD\n", m);
        int points = 0;
        for (int c = 0; c < cfg->ncodecs; c++) {
            const cmp_run_t *r = &runs[m * cfg->nseeds * cfg->ncodecs + c];
            if (r->status == 0) {
                ps_bench_str_addf(&gp, "%.3f %.4f %s\n", r->total / 1e6, r->acc,
                                  cfg->codecs[c]);
                points++;
            }
        }
        ps_bench_str_addf(&gp, "EOD\n");
        if (points) {
            ps_bench_str_addf(&plot,
                              "%s$m%d u 1:2 w p lc %d pt 7 t '%s', $m%d u 1:2:3 w labels tc lt %d "
                              "font ',7' offset 0,0.7 notitle",
                              plot.len ? ", " : "", m, m + 1, cfg->modes[m], m, m + 1);
        }
    }
    if (plot.len) {
        ps_bench_str_addf(&gp, "plot %s\n", ps_bench_str_get(&plot));
        ps_bench_plot(cfg->page, "compress", ps_bench_str_get(&gp));
    }
    ps_bench_str_fini(&plot);
    ps_bench_str_fini(&gp);
}

/* With several seeds: per mode and codec the worst distance to fp32 over them. */
static void s_worst(const cmp_cfg_t *cfg, const cmp_run_t *runs, const int8_t *have,
                    ps_bench_table_t *t)
{
    ps_bench_str_t worst = {0};
    for (int m = 0; cfg->nseeds > 1 && m < cfg->nmodes; m++) {
        for (int c = 1; c < cfg->ncodecs; c++) {
            double w = INFINITY;
            for (int sd = 0; sd < cfg->nseeds; sd++) {
                const int base = (m * cfg->nseeds + sd) * cfg->ncodecs;
                if (have[base + c] && have[base]) {
                    const double d = 100.0 * (runs[base + c].acc - runs[base].acc);
                    w = d < w ? d : w;
                }
            }
            if (isfinite(w)) {
                ps_bench_str_addf(&worst, "%s%s %s %+.2f", worst.len ? ", " : "",
                                  cfg->modes[m], cfg->codecs[c], w);
            }
        }
    }
    if (worst.len) {
        ps_bench_table_note(t, "Worst over the seeds (points vs fp32 of the same seed): %s.",
                            ps_bench_str_get(&worst));
    }
    ps_bench_str_fini(&worst);
}

static int s_sweep(const cmp_cfg_t *cfg)
{
    const int n = cfg->nmodes * cfg->nseeds * cfg->ncodecs;
    cmp_run_t *runs = calloc((size_t)n, sizeof *runs);
    int8_t *have = calloc((size_t)n, sizeof *have); /* the run is ok */
    const int fp32_first = !strcmp(cfg->codecs[0], "fp32"); /* the baseline */
    ps_bench_table_t *t = NULL;
    char title[160];
    snprintf(title, sizeof title,
             "### Compression: %s, %d servers x %d workers, %d epochs: bytes saved vs accuracy",
             cfg->model, cfg->servers, cfg->workers, cfg->epochs);
    if (!runs || !have ||
        ps_bench_table_new(cfg->page, "compress", title,
                           "mode,seed,codec,status,final_accuracy,accuracy_vs_fp32_points,"
                           "push_bytes,push_saved_pct,pull_reply_bytes,pull_saved_pct,"
                           "total_bytes,total_saved_pct,wall_seconds",
                           "mode,seed,codec,status,final acc,vs fp32 (points),push bytes,"
                           "push saved %,pull-reply bytes,pull saved %,all bytes,"
                           "all saved %,wall s",
                           &t) != 0) {
        free(runs);
        free(have);
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        const int m = i / (cfg->nseeds * cfg->ncodecs), sd = i / cfg->ncodecs % cfg->nseeds,
                  c = i % cfg->ncodecs, seed = cfg->seeds[sd];
        cmp_run_t *r = &runs[i];
        const cmp_run_t *base = c > 0 && fp32_first && have[i - c] ? &runs[i - c] : NULL;
        fprintf(stderr, S_PROG ": [%d/%d] --mode %s --seed %d, %s ...\n", i + 1, n,
                cfg->modes[m], seed, cfg->codecs[c]);
        s_run(cfg, cfg->modes[m], seed, cfg->codecs[c], r);
        if (r->status != 0) {
            failed = 1;
            fprintf(stderr, S_PROG ":   failed (%d); log in %s/runs/\n", r->status, cfg->out);
            ps_bench_table_rowf(t, "%s,%d,%s,failed: %d,,,,,,,,,", cfg->modes[m], seed,
                                cfg->codecs[c], r->status);
            continue;
        }
        have[i] = 1;
        char d[32] = "", s1[32], s2[32], s3[32];
        if (base) {
            snprintf(d, sizeof d, "%+.2f", 100.0 * (r->acc - base->acc));
        }
        fprintf(stderr, S_PROG ":   accuracy %.4f, %.1f MB on the wire (%.1f s)\n", r->acc,
                r->total / 1e6, r->wall);
        ps_bench_table_rowf(t, "%s,%d,%s,ok,%.4f,%s,%.0f,%s,%.0f,%s,%.0f,%s,%.1f",
                            cfg->modes[m], seed, cfg->codecs[c], r->acc, d, r->push,
                            s_saved(s1, 32, r->push, base ? base->push : 0), r->pull,
                            s_saved(s2, 32, r->pull, base ? base->pull : 0), r->total,
                            s_saved(s3, 32, r->total, base ? base->total : 0), r->wall);
    }
    ps_bench_table_note(
        t,
        "Each row: `shardps-launch --servers %d --workers %d --model %s --mode M --epochs %d "
        "--seed S --wire W --compress C`%s; codec topk:R+W means `--compress topk:R --wire W`. "
        "Bytes: the summary's bytes_by_type.total (header + payload frames of every message, "
        "counted once by its sender): pushes, pull replies, and every type (heartbeats, "
        "acks, control...). Saved: against the fp32 row of the same mode and seed. vs fp32: "
        "final test accuracy minus that row's, in points. Top-k keeps the unsent gradient on "
        "the worker (error feedback); pulls stay dense in the --wire dtype. Logs and "
        "summaries: runs/ beside this file.",
        cfg->servers, cfg->workers, cfg->model, cfg->epochs,
        cfg->max_steps > 0 ? " --max-steps N" : "");
    if (fp32_first) {
        s_worst(cfg, runs, have, t);
    }
    ps_bench_table_destroy(&t, 1);
    s_plot(cfg, runs);
    free(runs);
    free(have);
    return failed;
}

int ps_bench_compress_main(int argc, char **argv)
{
    cmp_cfg_t cfg = {.out = "bench-out", .model = "mlp", .servers = 2, .workers = 2,
                     .epochs = 3, .timeout = 1800};
    const char *modes = "sync,async,ssp:4", *codecs = "fp32,fp16,bf16,topk:0.01,topk:0.01+bf16";
    const char *launch = NULL, *seeds = "1";
    ps_flag_t flags[] = {
        {"out", PS_FLAG_STR, &cfg.out, "DIR", "where the results page, CSV and PNG go"},
        {"model", PS_FLAG_STR, &cfg.model, "NAME", "mlp or cnn"},
        {"modes", PS_FLAG_STR, &modes, "LIST", "consistency modes (not allreduce)"},
        {"codecs", PS_FLAG_STR, &codecs, "LIST",
         "fp32, fp16, bf16, topk:R or topk:R+DTYPE; fp32 first: the baseline"},
        {"servers", PS_FLAG_INT, &cfg.servers, "N", "servers"},
        {"workers", PS_FLAG_INT, &cfg.workers, "N", "workers"},
        {"epochs", PS_FLAG_INT, &cfg.epochs, "N", "epochs per job"},
        {"max-steps", PS_FLAG_INT, &cfg.max_steps, "N", "stop each job after N steps (0 = none)"},
        {"seeds", PS_FLAG_STR, &seeds, "LIST", "seeds: each mode and codec runs once with each"},
        {"threads", PS_FLAG_INT, &cfg.threads, "N", "BLAS threads per worker (0 = default)"},
        {"timeout", PS_FLAG_DOUBLE, &cfg.timeout, "SECONDS", "per job"},
        {"launch", PS_FLAG_STR, &launch, "PATH",
         "shardps-launch (default: next to this program, ../deploy/, $PATH)"},
    };
    int rc = ps_config_parse_argv(S_PROG,
                             "Trains the same model in each mode with each wire codec "
                             "through shardps-launch;\nwrites the results page compress.md, "
                             "compress.csv and compress.png (accuracy\nvs bytes) into --out.",
                             flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    cfg.nmodes = ps_bench_split_words(modes, cfg.modes, CMP_MAX);
    cfg.ncodecs = ps_bench_split_words(codecs, cfg.codecs, CMP_MAX);
    char words[CMP_MAX][PS_BENCH_WORD_MAX];
    cfg.nseeds = ps_bench_split_words(seeds, words, CMP_MAX);
    int bad = cfg.nmodes < 0 || cfg.ncodecs < 0 || cfg.nseeds < 1;
    for (int i = 0; !bad && i < cfg.nseeds; i++) {
        char *end;
        long v = strtol(words[i], &end, 10);
        bad = *end || end == words[i] || v < 0 || v > INT_MAX;
        cfg.seeds[i] = (int)v;
    }
    for (int m = 0; !bad && m < cfg.nmodes; m++) {
        ps_job_t job;
        ps_job_defaults(&job);
        bad = ps_job_parse_mode(cfg.modes[m], &job) != 0 || !ps_job_has_servers(&job);
    }
    for (int c = 0; !bad && c < cfg.ncodecs; c++) {
        char wire[32], compress[32];
        ps_job_t job;
        ps_job_defaults(&job);
        s_codec_flags(cfg.codecs[c], wire, compress, sizeof wire);
        bad = ps_job_parse_wire(wire, &job) != 0 || ps_job_parse_compress(compress, &job) != 0;
    }
    if (bad || cfg.servers < 1 || cfg.workers < 1 || cfg.epochs < 1 || cfg.max_steps < 0 ||
        cfg.threads < 0 || !(cfg.timeout > 0)) {
        fprintf(stderr, S_PROG ": error: expected --modes of sync, async, ssp:S, sync:K/N; "
                               "--codecs of fp32, fp16, bf16, topk:R[+fp16|+bf16]; --seeds "
                               "of integers >= 0; counts >= 1\n");
        return 2;
    }
    char path[PATH_MAX];
    int setup = ps_bench_launch_setup(S_PROG, &launch, path, sizeof path, cfg.out);
    if (setup != 0) {
        return setup;
    }
    cfg.launch = launch;
    if (ps_bench_page_new(cfg.out, "compress", argc, argv, &cfg.page) != 0) {
        return 1;
    }
    rc = s_sweep(&cfg);
    ps_bench_page_destroy(&cfg.page);
    return rc ? 1 : 0;
}
