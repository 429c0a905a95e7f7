/*
 * bench/train/scale.c - shardps-bench scale: how the scheduler's and the servers'
 * cost per step grows with the workers.
 *
 * For each worker count (--workers 8,16,32,64) the same sync job through
 * shardps-launch (fixed servers, the MLP with a small batch, one compute
 * thread per worker) runs twice: --max-steps A and --max-steps B (--steps
 * A,B). What a job costs from its summary: the scheduler's CPU seconds and
 * messages received (scheduler_cpu_seconds, scheduler_messages) and each
 * server's CPU seconds and pushes and pulls (server_reports). Start-up
 * (registration, the view, the data set, the final report) is the same in
 * both jobs, so (B - A) / (B - A steps) is the cost of one step alone. Rounds
 * (--reps) go through every worker count in turn, the order of the two jobs
 * alternating, and the table has the medians. CPU seconds, not the wall
 * clock: on shared cores they move much less with the neighbours' load.
 *
 * The workers read an uncompressed copy of the data set (made once in
 * OUT/data unless --data is given): gunzipping it 64 times is most of a
 * 64-worker job's start on a small machine and would only add noise.
 * It does not judge: a failed job is a row with its exit status.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "bench/bench.h"
#include "common/config.h"
#include "common/error.h"
#include "common/file.h"
#include "worker/data.h"

#define S_PROG "shardps-bench scale"

enum { SC_MAX_REPS = 20, SC_COSTS = 5 };

typedef struct {
    const char *out, *launch, *data, *model, *mode;
    long workers[PS_BENCH_LIST_MAX];
    int nworkers;
    long steps[2]; /* the short and the long job's --max-steps */
    int servers, batch, reps, seed;
    double timeout;
} sc_cfg_t;

/* What one job cost: the scheduler's CPU seconds and messages, the servers'
 * CPU seconds and messages (pushes + pulls), all servers together; the
 * training seconds. */
typedef struct {
    double v[SC_COSTS];
} sc_cost_t;
enum { C_SCHED_CPU, C_SCHED_MSGS, C_SERVER_CPU, C_SERVER_MSGS, C_TRAIN };

/* Copies the four Fashion-MNIST files of src, gzipped or not, uncompressed
 * into dst (kept when already there). Returns 0 or PS_EIO with a line on
 * stderr. */
static int s_plain_data(const char *src, const char *dst)
{
    static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    if (ps_file_mkdirs(dst) != 0) {
        return PS_EIO;
    }
    for (int i = 0; i < 4; i++) {
        char in[PATH_MAX + 64], out[PATH_MAX + 64], tmp[PATH_MAX + 72];
        struct stat sb;
        snprintf(out, sizeof out, "%s/%s", dst, names[i]);
        if (stat(out, &sb) == 0 && sb.st_size > 0) {
            continue;
        }
        snprintf(in, sizeof in, "%s/%s.gz", src, names[i]);
        if (stat(in, &sb) != 0) {
            snprintf(in, sizeof in, "%s/%s", src, names[i]);
        }
        snprintf(tmp, sizeof tmp, "%s.tmp", out);
        gzFile g = gzopen(in, "rb"); /* reads plain files too */
        FILE *f = g ? fopen(tmp, "wb") : NULL;
        int bad = !f;
        char buf[1 << 16];
        for (int n; !bad && (n = gzread(g, buf, sizeof buf)) != 0;) {
            bad = n < 0 || fwrite(buf, 1, (size_t)n, f) != (size_t)n;
        }
        if (g) {
            gzclose(g);
        }
        if ((f && fclose(f) != 0) || bad || rename(tmp, out) != 0) {
            remove(tmp);
            fprintf(stderr, S_PROG ": error: cannot copy %s uncompressed to %s (--data DIR)\n",
                    in, dst);
            return PS_EIO;
        }
    }
    return 0;
}

/* One job of m workers and `steps` steps; its cost into *c. Returns the
 * launcher's status, or PS_EPROTO when its summary lacks a figure. */
static int s_job(const sc_cfg_t *c, int round, long m, long steps, sc_cost_t *cost)
{
    char json[PATH_MAX], log[PATH_MAX], num[6][32];
    snprintf(json, sizeof json, "%s/runs/scale_%ld_%ld_%d.json", c->out, m, steps, round);
    snprintf(log, sizeof log, "%s/runs/scale_%ld_%ld_%d.log", c->out, m, steps, round);
    remove(json);
    remove(log);
    snprintf(num[0], sizeof num[0], "%d", c->servers);
    snprintf(num[1], sizeof num[1], "%ld", m);
    snprintf(num[2], sizeof num[2], "%ld", steps);
    snprintf(num[3], sizeof num[3], "%d", c->batch);
    snprintf(num[4], sizeof num[4], "%d", c->seed);
    snprintf(num[5], sizeof num[5], "%g", c->timeout);
    char *argv[] = {(char *)c->launch, "--servers", num[0], "--workers", num[1], "--model",
                    (char *)c->model, "--mode", (char *)c->mode, "--max-steps", num[2],
                    "--batch", num[3], "--seed", num[4], "--timeout", num[5], "--threads", "1",
                    /* a starved heartbeat on a crowded machine must not end the job */
                    "--peer-timeout", "60", "--wait", "600", "--data", (char *)c->data,
                    "--summary", json, "--plot", "none", "--log-level", "warn", NULL};
    int rc = ps_bench_run(argv, log);
    json_t *doc = NULL;
    if (rc == 0 &&
        (ps_json_read_file(json, PS_BENCH_JSON_MAX, &doc, NULL, 0) != 0 ||
         ps_json_get_num(doc, "scheduler_cpu_seconds", &cost->v[C_SCHED_CPU], NULL,
                         0) != 0 ||
         ps_json_get_num(doc, "scheduler_messages", &cost->v[C_SCHED_MSGS], NULL, 0) != 0 ||
         ps_json_get_num(doc, "train_seconds", &cost->v[C_TRAIN], NULL, 0) != 0)) {
        rc = PS_EPROTO;
    }
    if (rc == 0) {
        const json_t *servers = json_object_get(doc, "server_reports");
        cost->v[C_SERVER_CPU] = ps_bench_json_sum(servers, "cpu_seconds");
        cost->v[C_SERVER_MSGS] =
            ps_bench_json_sum(servers, "pushes") + ps_bench_json_sum(servers, "pulls");
    }
    json_decref(doc);
    return rc;
}

/* Every round's pair of jobs per worker count: the per-step costs (the long
 * job less the short one) and the short job's own CPU. */
typedef struct {
    double per[PS_BENCH_LIST_MAX][SC_COSTS][SC_MAX_REPS]; /* per step, by workers, round */
    double base[PS_BENCH_LIST_MAX][2][SC_MAX_REPS]; /* short job: scheduler, per server s */
    int n[PS_BENCH_LIST_MAX];                       /* rounds measured, by workers */
} sc_runs_t;

/* c->reps rounds of a short and a long job for each worker count, in
 * alternating order, into *R. Returns 1 when a job failed (said why), else 0. */
static int s_rounds(const sc_cfg_t *c, sc_runs_t *R)
{
    const double dsteps = (double)(c->steps[1] - c->steps[0]);
    int failed = 0;
    for (int r = 0; r < c->reps; r++) {
        for (int w = 0; w < c->nworkers; w++) {
            sc_cost_t job[2];
            int rc[2];
            const int first = (r + w) % 2; /* alternate which goes first */
            for (int k = 0; k < 2; k++) {
                const int s = k ^ first;
                rc[s] = s_job(c, r, c->workers[w], c->steps[s], &job[s]);
            }
            if (rc[0] || rc[1]) {
                failed = 1;
                fprintf(stderr,
                        S_PROG ": round %d, %ld workers: a job failed (exit %d / %d; logs "
                               "in %s/runs/)\n",
                        r + 1, c->workers[w], rc[0], rc[1], c->out);
                continue;
            }
            const int i = R->n[w]++;
            for (int k = 0; k < SC_COSTS; k++) {
                R->per[w][k][i] = (job[1].v[k] - job[0].v[k]) / dsteps;
            }
            R->base[w][0][i] = job[0].v[C_SCHED_CPU];
            R->base[w][1][i] = job[0].v[C_SERVER_CPU] / c->servers;
            fprintf(
                stderr,
                S_PROG ": round %d, %ld workers: scheduler %.3f ms and %.1f messages per "
                       "step, servers %.3f ms and %.1f messages per step each\n",
                r + 1, c->workers[w], 1e3 * R->per[w][C_SCHED_CPU][i],
                R->per[w][C_SCHED_MSGS][i], 1e3 * R->per[w][C_SERVER_CPU][i] / c->servers,
                R->per[w][C_SERVER_MSGS][i] / c->servers);
        }
    }
    return failed;
}

static int s_measure(const sc_cfg_t *c, ps_bench_page_t *page)
{
    ps_bench_table_t *t = NULL;
    char title[200];
    snprintf(title, sizeof title,
             "### Per-step cost against workers: %s %s, %d servers, batch %d", c->mode,
             c->model, c->servers, c->batch);
    if (ps_bench_table_new(
            page, "scale", title,
            "workers,rounds,sched_cpu_ms_per_step,sched_msgs_per_step,sched_msgs_per_sec,"
            "server_cpu_ms_per_step,server_msgs_per_step,step_ms,sched_cpu_s_startup,"
            "server_cpu_s_startup",
            "workers,rounds,scheduler CPU ms/step,scheduler msgs/step,scheduler msgs/s,"
            "CPU ms/step per server,msgs/step per server,wall ms/step,"
            "scheduler CPU s (short job),CPU s per server (short job)",
            &t) != 0) {
        return 1;
    }
    static sc_runs_t R; /* too large for the stack */
    memset(&R, 0, sizeof R);
    const int failed = s_rounds(c, &R);
    for (int w = 0; w < c->nworkers; w++) {
        if (!R.n[w]) {
            ps_bench_table_rowf(t, "%ld,0,,,,,,,,", c->workers[w]);
            continue;
        }
        double med[SC_COSTS];
        for (int k = 0; k < SC_COSTS; k++) {
            med[k] = ps_bench_median(R.per[w][k], R.n[w]);
        }
        char per_s[32] = ""; /* a few steps of a noisy machine may take no longer */
        if (med[C_TRAIN] > 0) {
            snprintf(per_s, sizeof per_s, "%.0f", med[C_SCHED_MSGS] / med[C_TRAIN]);
        }
        ps_bench_table_rowf(t, "%ld,%d,%.3f,%.1f,%s,%.3f,%.1f,%.1f,%.3f,%.3f",
                            c->workers[w], R.n[w], 1e3 * med[C_SCHED_CPU],
                            med[C_SCHED_MSGS], per_s, 1e3 * med[C_SERVER_CPU] / c->servers,
                            med[C_SERVER_MSGS] / c->servers, 1e3 * med[C_TRAIN],
                            ps_bench_median(R.base[w][0], R.n[w]),
                            ps_bench_median(R.base[w][1], R.n[w]));
    }
    ps_bench_table_note(
        t,
        "Each worker count: `shardps-launch --servers %d --workers M --model %s --mode %s "
        "--batch %d --threads 1 --seed %d` once with `--max-steps %ld` and once with "
        "`--max-steps %ld` (order alternating), %d round(s), in one run; per step = (long "
        "job - short job) / %ld steps, the medians over rounds. CPU: user + system seconds "
        "of the scheduler process (`scheduler_cpu_seconds` in the summary) and of each "
        "server (`server_reports[].cpu_seconds`); messages: those the scheduler received "
        "(`scheduler_messages`: registrations, barriers, heartbeats with their metrics "
        "reports, DONE) and each server's pushes and pulls. Scheduler msgs/s: per step "
        "over "
        "wall seconds per step. Short job: the whole job's CPU with start-up.",
        c->servers, c->model, c->mode, c->batch, c->seed, c->steps[0], c->steps[1], c->reps,
        (long)(c->steps[1] - c->steps[0]));
    ps_bench_table_destroy(&t, 1);
    return failed;
}

int ps_bench_scale_main(int argc, char **argv)
{
    sc_cfg_t c = {.out = "bench-out", .model = "mlp", .mode = "sync", .servers = 4,
                  .batch = 8, .reps = 3, .seed = 1, .timeout = 900};
    const char *workers = "8,16,32,64", *steps = "5,25", *launch = NULL;
    ps_flag_t flags[] = {
        {"out", PS_FLAG_STR, &c.out, "DIR", "where the results page and CSV go"},
        {"workers", PS_FLAG_STR, &workers, "LIST", "worker counts, e.g. 8,16,32,64"},
        {"servers", PS_FLAG_INT, &c.servers, "N", "servers of every job"},
        {"steps", PS_FLAG_STR, &steps, "A,B",
         "--max-steps of the short and the long job (B > A)"},
        {"model", PS_FLAG_STR, &c.model, "NAME", "mlp or cnn"},
        {"mode", PS_FLAG_STR, &c.mode, "MODE", "sync, async, ssp:S or sync:K/N"},
        {"batch", PS_FLAG_INT, &c.batch, "N", "samples per worker per step"},
        {"reps", PS_FLAG_INT, &c.reps, "N", "rounds over every worker count"},
        {"seed", PS_FLAG_INT, &c.seed, "N", "seed of every job"},
        {"timeout", PS_FLAG_DOUBLE, &c.timeout, "SECONDS", "per job"},
        {"data", PS_FLAG_STR, &c.data, "DIR",
         "the workers' data set (default: an uncompressed copy in OUT/data)"},
        {"launch", PS_FLAG_STR, &launch, "PATH",
         "shardps-launch (default: next to this program, ../deploy/, $PATH)"},
    };
    int rc = ps_config_parse_argv(S_PROG,
                             "Runs the same job with more and more workers and reports the "
                             "scheduler's and the\nservers' CPU and messages per step. "
                             "Writes the results page scale.md and scale.csv into --out.",
                             flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    c.nworkers = ps_bench_parse_list(workers, c.workers, PS_BENCH_LIST_MAX);
    int nsteps = ps_bench_parse_list(steps, c.steps, 2);
    int bad = c.nworkers < 1 || nsteps != 2 || c.steps[0] < 1 || c.steps[1] <= c.steps[0];
    for (int i = 0; !bad && i < c.nworkers; i++) {
        bad = c.workers[i] < 1;
    }
    if (bad || c.servers < 1 || c.batch < 1 || c.reps < 1 || c.reps > SC_MAX_REPS ||
        !(c.timeout > 0) || (strcmp(c.model, "mlp") && strcmp(c.model, "cnn"))) {
        fprintf(stderr, S_PROG ": error: expected --workers a list of counts >= 1, --steps "
                        "A,B with 1 <= A < B, --servers, --batch >= 1, --reps 1..%d, "
                        "--timeout > 0, --model mlp|cnn\n", SC_MAX_REPS);
        return 2;
    }
    char path[PATH_MAX], data[PATH_MAX];
    if ((rc = ps_bench_launch_setup(S_PROG, &launch, path, sizeof path, c.out)) != 0) {
        return rc;
    }
    c.launch = launch;
    if (!c.data) {
        snprintf(data, sizeof data, "%s/data", c.out);
        const char *src = getenv("SHARDPS_DATA");
        if (s_plain_data(src && *src ? src : PS_DATA_DEFAULT_DIR, data) != 0) {
            return 1;
        }
        c.data = data;
    }
    ps_bench_page_t *page;
    if (ps_bench_page_new(c.out, "scale", argc, argv, &page) != 0) {
        return 1;
    }
    rc = s_measure(&c, page);
    ps_bench_page_destroy(&page);
    return rc ? 1 : 0;
}
