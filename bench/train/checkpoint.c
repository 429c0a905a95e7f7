/*
 * bench/train/checkpoint.c - shardps-bench checkpoint: what checkpointing
 * costs; shardps-bench replicas: what hot replicas (--replicas 1) cost.
 *
 * The same sync job through shardps-launch (same model, seed, data order,
 * servers and workers), once without checkpoints and once with
 * --checkpoint-every N (a fresh directory each time), alternated for --reps
 * rounds in one run so that both see the same machine. From each job's
 * summary it keeps samples/s (training throughput); the figure is the
 * median over rounds of (with / without) samples/s, and each round's ratio
 * beside it. On shared cores the wall clock moves with the neighbours' load,
 * so also the CPU seconds of the whole job (the launcher and every role:
 * RUSAGE_CHILDREN around it), steadier; their ratio is the extra work,
 * without the time spent waiting for the disk. Also the checkpoints
 * written and their size on disk. `replicas` is the same comparison with
 * --replicas 1 (a replica per server, from the launcher's spares) in place
 * of the checkpoints.
 *
 * It does not judge: a failed job is a row with its exit status.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "common/config.h"
#include "common/error.h"
#include "deploy/proc.h"


enum { CK_MAX_REPS = 50 };

typedef struct {
    const char *out, *launch, *model;
    int servers, workers, epochs, max_steps, every, reps, seed;
    int replicas; /* the jobs "with" run --replicas 1, not checkpoints */
    const char *prog;
    double timeout;
} ck_cfg_t;

/* Removes dir and what it holds, two levels deep (DIR/step-N/files). */
static void s_remove(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        char path[PATH_MAX + 300];
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (remove(path) != 0 && depth > 0) {
                s_remove(path, depth - 1);
            }
        }
    }
    if (d) {
        closedir(d);
    }
    remove(dir);
}

/* Checkpoints complete in dir (step-N with a manifest) and the bytes of
 * their parts. */
static void s_disk(const char *dir, int *count, double *bytes)
{
    *count = 0;
    *bytes = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        char sub[PATH_MAX], path[PATH_MAX + 300];
        struct stat sb;
        if (strncmp(e->d_name, "step-", 5)) {
            continue;
        }
        if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= (int)sizeof sub) {
            continue;
        }
        snprintf(path, sizeof path, "%s/manifest.json", sub);
        *count += stat(path, &sb) == 0;
        DIR *p = opendir(sub);
        for (struct dirent *f; p && (f = readdir(p)) != NULL;) {
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            if (!strncmp(f->d_name, "server-", 7) && stat(path, &sb) == 0) {
                *bytes += (double)sb.st_size;
            }
        }
        if (p) {
            closedir(p);
        }
    }
    if (d) {
        closedir(d);
    }
}

/* CPU seconds of every waited-for descendant so far. */
static double s_children_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* One job; returns the launcher's status, its samples/s in *sps and the CPU
 * seconds of the job's processes in *cpu. */
static int s_job(const ck_cfg_t *c, int round, int with, double *sps, double *cpu)
{
    char json[PATH_MAX], log[PATH_MAX], dir[PATH_MAX], num[7][32];
    const char *tag = with ? "with" : "without";
    snprintf(json, sizeof json, "%s/runs/ck_%s_%d.json", c->out, tag, round);
    snprintf(log, sizeof log, "%s/runs/ck_%s_%d.log", c->out, tag, round);
    snprintf(dir, sizeof dir, "%s/runs/ck_%d", c->out, round);
    remove(json);
    remove(log);
    if (with) {
        s_remove(dir, 1); /* a fresh directory: nothing to resume or count */
    }
    snprintf(num[0], sizeof num[0], "%d", c->servers);
    snprintf(num[1], sizeof num[1], "%d", c->workers);
    snprintf(num[2], sizeof num[2], "%d", c->epochs);
    snprintf(num[3], sizeof num[3], "%d", c->seed);
    snprintf(num[4], sizeof num[4], "%g", c->timeout);
    snprintf(num[5], sizeof num[5], "%d", c->max_steps);
    snprintf(num[6], sizeof num[6], "%d", c->every);
    char *argv[32] = {(char *)c->launch, "--servers", num[0], "--workers", num[1],
                      "--model", (char *)c->model, "--mode", "sync", "--epochs", num[2],
                      "--seed", num[3], "--timeout", num[4], "--max-steps", num[5],
                      "--summary", json, "--log-level", "warn"};
    int a = 21;
    if (with && c->replicas) {
        argv[a++] = "--replicas";
        argv[a++] = "1";
    } else if (with) {
        argv[a++] = "--checkpoint-dir";
        argv[a++] = dir;
        argv[a++] = "--checkpoint-every";
        argv[a++] = num[6];
    }
    argv[a] = NULL;
    const double cpu0 = s_children_cpu();
    int rc = ps_bench_run(argv, log);
    *cpu = s_children_cpu() - cpu0;
    json_t *doc = NULL;
    if (rc == 0 && (ps_json_read_file(json, PS_BENCH_JSON_MAX, &doc, NULL, 0) != 0 ||
                    ps_json_get_num(doc, "samples_per_sec", sps, NULL, 0) != 0)) {
        rc = PS_EPROTO;
    }
    json_decref(doc);
    return rc;
}

static int s_measure(const ck_cfg_t *c, ps_bench_page_t *page)
{
    ps_bench_table_t *t = NULL;
    char title[160];
    if (c->replicas) {
        snprintf(title, sizeof title, "### Replica cost: sync %s, %d servers x %d workers",
                 c->model, c->servers, c->workers);
    } else {
        snprintf(title, sizeof title,
                 "### Checkpoint cost: sync %s, %d servers x %d workers, every %d steps",
                 c->model, c->servers, c->workers, c->every);
    }
    if (ps_bench_table_new(page, c->replicas ? "replicas" : "checkpoint", title,
                           "round,without_samples_per_sec,with_samples_per_sec,ratio,"
                           "without_cpu_s,with_cpu_s,cpu_ratio,checkpoints,checkpoint_mb",
                           "round,samples/s without,samples/s with,with / without,"
                           "CPU s without,CPU s with,CPU with / without,"
                           "checkpoints complete,MB per checkpoint",
                           &t) != 0) {
        return 1;
    }
    double ratios[CK_MAX_REPS], cpu_ratios[CK_MAX_REPS];
    int n = 0, failed = 0;
    for (int r = 0; r < c->reps; r++) {
        double without = NAN, with = NAN, bytes = 0, cpu[2] = {0, 0};
        int count = 0;
        /* Alternate which goes first, so neither always runs on a warmer machine. */
        int first = r % 2, rc[2];
        for (int k = 0; k < 2; k++) {
            int w = k ^ first;
            rc[w] = s_job(c, r, w, w ? &with : &without, &cpu[w]);
        }
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/runs/ck_%d", c->out, r);
        s_disk(dir, &count, &bytes);
        s_remove(dir, 1);
        if (rc[0] || rc[1]) {
            failed = 1;
            fprintf(stderr, "%s: round %d: a job failed (exit %d / %d; logs in %s/runs/)\n",
                    c->prog, r + 1, rc[0], rc[1], c->out);
            ps_bench_table_rowf(t, "%d,,,,,,,,", r + 1);
            continue;
        }
        ratios[n] = with / without;
        cpu_ratios[n++] = cpu[1] / cpu[0];
        fprintf(stderr,
                "%s: round %d: %.0f samples/s without, %.0f with (%.3f); CPU %.1f s "
                "without, %.1f with (%.3f)\n",
                c->prog, r + 1, without, with, with / without, cpu[0], cpu[1], cpu[1] / cpu[0]);
        ps_bench_table_rowf(t, "%d,%.0f,%.0f,%.3f,%.2f,%.2f,%.3f,%d,%.2f", r + 1, without, with,
                            with / without, cpu[0], cpu[1], cpu[1] / cpu[0], count,
                            count ? bytes / count / 1e6 : 0);
    }
    double med = n ? ps_bench_median(ratios, n) : NAN;
    double cpu_med = n ? ps_bench_median(cpu_ratios, n) : NAN;
    ps_bench_table_rowf(t, "median,,,%.3f,,,%.3f,,", med, cpu_med);
    char with_flags[64];
    if (c->replicas) {
        snprintf(with_flags, sizeof with_flags, "--replicas 1");
    } else {
        snprintf(with_flags, sizeof with_flags, "--checkpoint-dir DIR --checkpoint-every %d",
                 c->every);
    }
    ps_bench_table_note(
        t,
        "Each round: `shardps-launch --servers %d --workers %d --model %s --mode sync "
        "--epochs %d --max-steps %d --seed %d`, without and then with `%s` (the order "
        "alternates by round), in one run. "
        "samples/s from the scheduler's summary; CPU s: the job's processes together. "
        "Median ratio with / without: samples/s %.3f, CPU seconds %.3f.",
        c->servers, c->workers, c->model, c->epochs, c->max_steps, c->seed, with_flags, med,
        cpu_med);
    ps_bench_table_destroy(&t, 1);
    return failed;
}

/* Both subcommands; replicas: `replicas`, else `checkpoint`. */
static int s_main(int argc, char **argv, int replicas)
{
    ck_cfg_t c = {.out = "bench-out", .model = "mlp", .servers = 2, .workers = 2,
                  .epochs = 1, .every = 50, .reps = 5, .seed = 1, .timeout = 1800,
                  .replicas = replicas,
                  .prog = replicas ? "shardps-bench replicas" : "shardps-bench checkpoint"};
    const char *launch = NULL;
    ps_flag_t flags[] = {
        {"out", PS_FLAG_STR, &c.out, "DIR", "where the results page and CSV go"},
        {"model", PS_FLAG_STR, &c.model, "NAME", "mlp or cnn"},
        {"servers", PS_FLAG_INT, &c.servers, "N", "servers of each job"},
        {"workers", PS_FLAG_INT, &c.workers, "N", "workers of each job"},
        {"epochs", PS_FLAG_INT, &c.epochs, "N", "epochs per job"},
        {"max-steps", PS_FLAG_INT, &c.max_steps, "N", "stop each job after N steps (0 = none)"},
        {"every", PS_FLAG_INT, &c.every, "N", "--checkpoint-every of the jobs with checkpoints"},
        {"reps", PS_FLAG_INT, &c.reps, "N", "rounds (one job without, one with, each)"},
        {"seed", PS_FLAG_INT, &c.seed, "N", "seed of every job"},
        {"timeout", PS_FLAG_DOUBLE, &c.timeout, "SECONDS", "per job"},
        {"launch", PS_FLAG_STR, &launch, "PATH",
         "shardps-launch (default: next to this program, ../deploy/, $PATH)"},
    };
    int rc = ps_config_parse_argv(c.prog,
                             replicas
                                 ? "Trains the same sync job without and with --replicas 1, "
                                   "alternated, and reports\nthe throughput ratio. Writes the "
                                   "results page replicas.md and replicas.csv\ninto --out."
                                 : "Trains the same sync job without and with checkpoints, "
                                   "alternated, and reports\nthe throughput ratio. Writes the "
                                   "results page checkpoint.md and checkpoint.csv\ninto --out.",
                             flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    if (c.servers < 1 || c.workers < 1 || c.epochs < 1 || c.max_steps < 0 || c.every < 1 ||
        c.reps < 1 || c.reps > CK_MAX_REPS || !(c.timeout > 0) ||
        (strcmp(c.model, "mlp") && strcmp(c.model, "cnn"))) {
        fprintf(stderr, "%s: error: expected --servers, --workers, --epochs, --every "
                        ">= 1, --max-steps >= 0, --reps 1..%d, --timeout > 0, --model "
                        "mlp|cnn\n", c.prog, CK_MAX_REPS);
        return 2;
    }
    char path[PATH_MAX];
    if ((rc = ps_bench_launch_setup(c.prog, &launch, path, sizeof path, c.out)) != 0) {
        return rc;
    }
    c.launch = launch;
    ps_bench_page_t *page;
    if (ps_bench_page_new(c.out, replicas ? "replicas" : "checkpoint", argc, argv, &page) != 0) {
        return 1;
    }
    rc = s_measure(&c, page);
    ps_bench_page_destroy(&page);
    return rc ? 1 : 0;
}

int ps_bench_checkpoint_main(int argc, char **argv)
{
    return s_main(argc, argv, 0);
}

int ps_bench_replicas_main(int argc, char **argv)
{
    return s_main(argc, argv, 1);
}
