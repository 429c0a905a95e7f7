/*
 * bench/train/memory.c - shardps-bench memory: what a server's embedding
 * rows cost in memory, against their arithmetic.
 *
 * A real job (shardps-launch, one server, one worker, --model ctr) on a
 * click log of many keys (shardps-datagen ctr at --scale 1, made once in
 * OUT/runs/) trains one epoch with --max-rows N: the server's table fills
 * to N rows and stops there. Its end-of-job report gives the process's peak
 * resident memory (server_reports[0].peak_resident_bytes in the summary)
 * and the table's own accounting (rows.bytes). The same job with
 * --max-rows 1 is the fixed base: the process, its buffers, the dense
 * model and one row. So a row costs (peak - base) / N bytes, set beside
 * its arithmetic, (dim + optimizer state) x 4 bytes, as a ratio.
 *
 * It does not judge: a failed job is a row with its exit status.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "common/config.h"
#include "common/error.h"
#include "common/job.h"
#include "common/json.h"
#include "deploy/proc.h"
#include "kernels/optim.h"

#define S_PROG "shardps-bench memory"

typedef struct {
    const char *out, *launch, *data;
    long rows[PS_BENCH_LIST_MAX];
    int nrows;
    char optimizers[PS_BENCH_LIST_MAX][PS_BENCH_WORD_MAX];
    int noptimizers;
    int dim, batch, seed;
    double timeout;
} mem_cfg_t;

/* What one job's server reported. */
typedef struct {
    double peak;  /* peak resident bytes of the server process */
    double table; /* the table's own accounting, bytes */
    double rows;  /* rows it held at the end */
} mem_run_t;

/* Writes the click log with shardps-datagen (kept when already there).
 * Returns 0, or 1 with a line on stderr. */
static int s_click_log(const char *out, int lines, char *path, size_t cap)
{
    snprintf(path, cap, "%s/runs/memory_clicks_%d.txt", out, lines);
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > 0) {
        return 0;
    }
    char gen[PATH_MAX], log[PATH_MAX], n[32];
    if (ps_proc_find_exe("shardps-datagen", "deploy", gen, sizeof gen) != 0) {
        fprintf(stderr, S_PROG ": error: cannot find shardps-datagen (looked next to this "
                        "program, in ../deploy/ and on $PATH)\n");
        return 1;
    }
    snprintf(log, sizeof log, "%s/runs/memory_datagen.log", out);
    snprintf(n, sizeof n, "%d", lines);
    char *argv[] = {gen, "ctr", "--rows", n, "--seed", "1", "--scale", "1", "--out", path, NULL};
    int rc = ps_bench_run(argv, log);
    if (rc != 0) {
        fprintf(stderr, S_PROG ": error: shardps-datagen ctr exited %d (log: %s)\n", rc, log);
        remove(path);
        return 1;
    }
    return 0;
}

/* One epoch of the job with --max-rows cap and optimizer opt; what its
 * server reported into *r. Returns the launcher's status, or PS_EPROTO when
 * its summary lacks a figure. */
static int s_job(const mem_cfg_t *c, const char *opt, long cap, mem_run_t *r)
{
    char json[PATH_MAX], log[PATH_MAX], num[5][32];
    snprintf(json, sizeof json, "%s/runs/memory_%s_%ld.json", c->out, opt, cap);
    snprintf(log, sizeof log, "%s/runs/memory_%s_%ld.log", c->out, opt, cap);
    remove(json);
    snprintf(num[0], sizeof num[0], "%ld", cap);
    snprintf(num[1], sizeof num[1], "%d", c->dim);
    snprintf(num[2], sizeof num[2], "%d", c->batch);
    snprintf(num[3], sizeof num[3], "%d", c->seed);
    snprintf(num[4], sizeof num[4], "%g", c->timeout);
    char *argv[] = {(char *)c->launch, "--servers", "1", "--workers", "1", "--model", "ctr",
                    "--ctr-data", (char *)c->data, "--max-rows", num[0], "--embed-dim", num[1],
                    "--batch", num[2], "--seed", num[3], "--timeout", num[4], "--optimizer",
                    (char *)opt, "--lr", "0.03", "--lr-schedule", "constant", "--momentum", "0", "--hidden", "16",
                    "--epochs", "1", "--peer-timeout", "60", "--summary", json, "--plot",
                    "none", "--log-level", "warn", NULL};
    int rc = ps_bench_run(argv, log);
    if (rc != 0) {
        return rc;
    }
    json_t *doc = NULL;
    char why[256];
    if (ps_json_read_file(json, PS_BENCH_JSON_MAX, &doc, why, sizeof why) != 0) {
        fprintf(stderr, S_PROG ": %s\n", why);
        return PS_EPROTO;
    }
    const json_t *peak = ps_json_path(doc, "server_reports.0.peak_resident_bytes");
    const json_t *table = ps_json_path(doc, "rows.bytes");
    const json_t *rows = ps_json_path(doc, "rows.total");
    rc = json_is_number(peak) && json_is_number(table) && json_is_number(rows) ? 0 : PS_EPROTO;
    if (rc == 0) {
        *r = (mem_run_t){json_number_value(peak), json_number_value(table),
                         json_number_value(rows)};
    }
    json_decref(doc);
    return rc;
}

/* The optimizer state floats a row float of opt carries. */
static int s_state_floats(const char *opt)
{
    ps_job_t job;
    ps_job_defaults(&job);
    job.momentum = 0; /* as the jobs run */
    snprintf(job.optimizer, sizeof job.optimizer, "%s", opt);
    ps_optim_t o;
    return ps_optim_from_job(&job, &o) == 0 ? ps_optim_state_floats(&o) : -1;
}

static int s_measure(const mem_cfg_t *c, ps_bench_page_t *page)
{
    ps_bench_table_t *t = NULL;
    if (ps_bench_table_new(
            page, "memory", "### A server's memory against its rows",
            "optimizer,rows,state_floats,row_bytes,base_mb,peak_mb,bytes_per_row,ratio,"
            "table_ratio",
            "optimizer,rows,state floats per float,row bytes (dim + state) x 4,base MB,"
            "peak MB,bytes per row (peak - base) / rows,ratio to row bytes,"
            "table's own accounting / (rows x row bytes)",
            &t) != 0) {
        return 1;
    }
    int failed = 0;
    for (int o = 0; o < c->noptimizers; o++) {
        const char *opt = c->optimizers[o];
        const int S = s_state_floats(opt);
        const double row_bytes = (double)c->dim * (1 + S) * 4;
        mem_run_t base;
        int rc = S < 0 ? PS_EINVAL : s_job(c, opt, 1, &base);
        if (rc != 0) {
            fprintf(stderr, S_PROG ": %s: the base job failed (%d; logs in %s/runs/)\n", opt,
                    rc, c->out);
            failed = 1;
            continue;
        }
        for (int i = 0; i < c->nrows; i++) {
            mem_run_t r;
            if ((rc = s_job(c, opt, c->rows[i], &r)) != 0) {
                fprintf(stderr, S_PROG ": %s, %ld rows: the job failed (%d; logs in %s/runs/)\n",
                        opt, c->rows[i], rc, c->out);
                ps_bench_table_rowf(t, "%s,%ld,%d,%.0f,,,,failed %d,", opt, c->rows[i], S,
                                    row_bytes, rc);
                failed = 1;
                continue;
            }
            const double per = (r.peak - base.peak) / r.rows;
            ps_bench_table_rowf(t, "%s,%.0f,%d,%.0f,%.1f,%.1f,%.1f,%.3f,%.3f", opt, r.rows, S,
                                row_bytes, base.peak / 1e6, r.peak / 1e6, per, per / row_bytes,
                                r.table / (r.rows * row_bytes));
            fprintf(stderr, S_PROG ": %s, %.0f rows: %.1f bytes a row, %.2fx its %.0f\n", opt,
                    r.rows, per, per / row_bytes, row_bytes);
        }
    }
    ps_bench_table_note(
        t,
        "Each row: `shardps-launch --servers 1 --workers 1 --model ctr --embed-dim %d "
        "--hidden 16 --batch %d --optimizer OPT --lr 0.03 --lr-schedule constant --momentum 0 "
        "--epochs 1 "
        "--max-rows N --seed %d` on `%s` (shardps-datagen ctr --scale 1): the table fills to "
        "N rows. Peak: the server process's peak resident memory "
        "(`server_reports[0].peak_resident_bytes`); base: the same job with `--max-rows 1`. "
        "Row bytes: the row's floats and its optimizer state, 4 bytes each.",
        c->dim, c->batch, c->seed, c->data);
    ps_bench_table_destroy(&t, 1);
    return failed;
}

int ps_bench_memory_main(int argc, char **argv)
{
    mem_cfg_t c = {.out = "bench-out", .dim = 16, .batch = 4096, .seed = 1, .timeout = 1800};
    const char *rows = "1000000,4000000", *optimizers = "sgd,adagrad", *launch = NULL;
    int lines = 6000000;
    ps_flag_t flags[] = {
        {"out", PS_FLAG_STR, &c.out, "DIR", "where the results page and CSV go"},
        {"rows", PS_FLAG_STR, &rows, "LIST", "table sizes, e.g. 1000000,4000000"},
        {"optimizers", PS_FLAG_STR, &optimizers, "LIST", "sgd, adagrad, ftrl"},
        {"embed-dim", PS_FLAG_INT, &c.dim, "D", "floats per row"},
        {"batch", PS_FLAG_INT, &c.batch, "N", "samples per step"},
        {"lines", PS_FLAG_INT, &lines, "N",
         "lines of the generated click log (enough for the largest table's keys)"},
        {"ctr-data", PS_FLAG_STR, &c.data, "FILE", "a click log instead of a generated one"},
        {"seed", PS_FLAG_INT, &c.seed, "N", "seed of every job"},
        {"timeout", PS_FLAG_DOUBLE, &c.timeout, "SECONDS", "per job"},
        {"launch", PS_FLAG_STR, &launch, "PATH",
         "shardps-launch (default: next to this program, ../deploy/, $PATH)"},
    };
    int rc = ps_config_parse_argv(S_PROG,
                                  "Fills a server's table of embedding rows to each size and "
                                  "reports its memory per row\nagainst the rows' arithmetic. "
                                  "Writes the results page memory.md and memory.csv into --out.",
                                  flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    c.nrows = ps_bench_parse_list(rows, c.rows, PS_BENCH_LIST_MAX);
    c.noptimizers = ps_bench_split_words(optimizers, c.optimizers, PS_BENCH_LIST_MAX);
    int bad = c.nrows < 1 || c.noptimizers < 1;
    for (int i = 0; !bad && i < c.nrows; i++) {
        bad = c.rows[i] < 2;
    }
    if (bad || c.dim < 1 || c.batch < 1 || lines < 1 || !(c.timeout > 0)) {
        fprintf(stderr, S_PROG ": error: expected --rows a list of sizes >= 2, --optimizers a "
                        "list, --embed-dim, --batch and --lines >= 1, --timeout > 0\n");
        return 2;
    }
    char path[PATH_MAX], data[PATH_MAX];
    if ((rc = ps_bench_launch_setup(S_PROG, &launch, path, sizeof path, c.out)) != 0) {
        return rc;
    }
    c.launch = launch;
    if (!c.data) {
        if (s_click_log(c.out, lines, data, sizeof data) != 0) {
            return 1;
        }
        c.data = data;
    }
    ps_bench_page_t *page;
    if (ps_bench_page_new(c.out, "memory", argc, argv, &page) != 0) {
        return 1;
    }
    rc = s_measure(&c, page);
    ps_bench_page_destroy(&page);
    return rc ? 1 : 0;
}
