/*
 * bench/train/train_job.c - one job of `shardps-bench train`: its command
 * line (the same model, seed, data order and flags for every job; only the
 * mode, the workers and the scenario change), run through shardps-launch or
 * role by role on the simulated cluster, and what it measured, from the
 * scheduler's summary JSON and worker 0's evaluation lines (test accuracy,
 * or for --model ctr the test AUC), and the machine's CPU over the job.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/netsim/job.h"
#include "bench/train/train.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/job.h"

const char *const ps_bench_train_scenarios[TRAIN_MAX_SCEN] = {"plain", "straggler", "kill"};

/* Servers to start for a mode. Allreduce uses none; the hook for when the
 * launcher of that mode wants something else. */
int ps_bench_train_colocated(const char *token)
{
    const size_t n = strlen(token), k = strlen(TRAIN_COLOCATED);
    return n > k && !strcmp(token + n - k, TRAIN_COLOCATED);
}

const char *ps_bench_train_ring_rows(const char *token)
{
    const size_t k = strlen(TRAIN_RING_ROWS);
    return strncmp(token, TRAIN_RING_ROWS, k) == 0 && token[k] ? token + k : NULL;
}

int ps_bench_train_serverless(const char *token)
{
    return !strcmp(token, "allreduce") || !strcmp(token, TRAIN_MPI) ||
           ps_bench_train_ring_rows(token) != NULL;
}

/* Servers of a run: none under allreduce, one per worker colocated. */
static int s_servers_for(const train_cfg_t *cfg, const train_run_t *r)
{
    return ps_bench_train_serverless(r->label)      ? 0
           : ps_bench_train_colocated(r->label) ? r->workers
                                                   : cfg->servers;
}

void ps_bench_train_tag(const train_run_t *r, char *buf, size_t cap)
{
    char m[32];
    snprintf(m, sizeof m, "%s",
             !strcmp(r->label, TRAIN_MPI)         ? TRAIN_MPI
             : ps_bench_train_ring_rows(r->label) ? r->label
                                                  : r->mode);
    for (char *p = m; *p; p++) {
        *p = *p == ':' ? '_' : *p == '/' ? '-' : *p;
    }
    snprintf(buf, cap, "%s_w%d%s%s%s", m, r->workers,
             ps_bench_train_colocated(r->label) ? "_colocated" : "", r->scen ? "_" : "",
             r->scen ? ps_bench_train_scenarios[r->scen] : "");
}

/* Reads worker 0's evaluations from the log, in order: the epoch ends
 * ("W0 I epoch=E test_accuracy=A test_loss=L elapsed=Xs step=T") and the
 * --eval-every points ("W0 I eval step=T test_accuracy=A test_loss=L
 * elapsed=Xs"); for a model with embedding rows "test_auc=A
 * test_logloss=L" in their place, the AUC kept as the run's metric. */
static void s_parse_epochs(const char *log, train_run_t *r)
{
    static const char key[] = " W0 I ";
    r->nep = 0;
    for (const char *p = strstr(log, key); p && r->nep < TRAIN_MAX_EPOCHS;
         p = strstr(p + 1, key)) {
        const char *q = p + strlen(key);
        int e;
        double acc, loss, t, step;
        long long st;
        int n = sscanf(q, "epoch=%d test_accuracy=%lf test_loss=%lf elapsed=%lfs step=%lld",
                       &e, &acc, &loss, &t, &st);
        if (n < 4) {
            n = sscanf(q, "epoch=%d test_auc=%lf test_logloss=%lf elapsed=%lfs step=%lld",
                       &e, &acc, &loss, &t, &st);
        }
        if (n >= 4) {
            step = n == 5 ? (double)st : NAN;
        } else if (sscanf(q, "eval step=%lld test_accuracy=%lf test_loss=%lf elapsed=%lfs",
                          &st, &acc, &loss, &t) == 4 ||
                   sscanf(q, "eval step=%lld test_auc=%lf test_logloss=%lf elapsed=%lfs",
                          &st, &acc, &loss, &t) == 4) {
            step = (double)st;
        } else {
            continue;
        }
        r->ep_t[r->nep] = t;
        r->ep_acc[r->nep] = acc;
        r->ep_step[r->nep] = step;
        r->nep++;
    }
}

/* Fills r from the summary JSON and the log. Returns 0 or PS_ENOENT. */
static int s_read_results(const char *json_path, const char *log_path, double target,
                          int batch, train_run_t *r)
{
    json_t *doc = NULL;
    char *log = NULL;
    if (ps_json_read_file(json_path, PS_BENCH_JSON_MAX, &doc, NULL, 0) != 0) {
        return PS_ENOENT;
    }
    double pushed = 0, pulled = 0;
    const struct {
        const char *path;
        double *v;
    } figs[] = {{"samples_per_sec", &r->sps},    {"wall_seconds", &r->wall},
                {"bytes_pushed", &pushed},       {"bytes_pulled", &pulled},
                {"staleness.mean", &r->st_mean}, {"staleness.p99", &r->st_p99},
                {"staleness.max", &r->st_max},   {"pushes_dropped", &r->dropped},
                {"num_params", &r->params},      {"steps", &r->steps}};
    int rc = 0;
    for (size_t k = 0; k < sizeof figs / sizeof figs[0]; k++) {
        rc |= ps_json_get_num(doc, figs[k].path, figs[k].v, NULL, 0);
    }
    if (ps_json_get_num(doc, "test_auc", &r->acc, NULL, 0) != 0) { /* a model with rows */
        rc |= ps_json_get_num(doc, "test_accuracy", &r->acc, NULL, 0);
    }
    const double total = ps_bench_json_sum(json_object_get(doc, "worker_steps"), NULL);
    r->bytes_per_step = total > 0 ? (pushed + pulled) / total : NAN;
    json_decref(doc);
    if (ps_bench_read_file(log_path, &log) == 0) {
        s_parse_epochs(log, r);
    }
    free(log);
    r->tta = r->sta = NAN;
    for (int i = 0; i < r->nep; i++) {
        if (r->ep_acc[i] >= target) {
            r->tta = r->ep_t[i];
            r->sta = r->ep_step[i] * r->workers * batch;
            break;
        }
    }
    return rc ? PS_ENOENT : 0;
}

int ps_bench_train_have_allreduce(void)
{
    ps_job_t job;
    ps_job_defaults(&job);
    return ps_job_parse_mode("allreduce", &job) == 0;
}

int ps_bench_train_batch(const train_cfg_t *cfg)
{
    ps_job_t job;
    ps_job_defaults(&job);
    return cfg->batch > 0 ? cfg->batch : job.batch;
}

void ps_bench_train_extra_flags(const train_cfg_t *cfg, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (cfg->threads > 0) {
        snprintf(buf, cap, " --threads %d", cfg->threads);
    }
    if (cfg->batch > 0) {
        snprintf(buf + strlen(buf), cap - strlen(buf), " --batch %d",
                 cfg->batch);
    }
    if (cfg->eval_every > 0) {
        snprintf(buf + strlen(buf), cap - strlen(buf), " --eval-every %d",
                 cfg->eval_every);
    }
    if (cfg->job_flags_text) {
        snprintf(buf + strlen(buf), cap - strlen(buf), " %s",
                 cfg->job_flags_text);
    }
}

int ps_bench_train_max_steps(const train_cfg_t *cfg, const char *label)
{
    return cfg->ring_steps > 0 && ps_bench_train_serverless(label) ? cfg->ring_steps
                                                                    : cfg->max_steps;
}

/* Runs the job of args (the launcher's flags) role by role in the
 * simulated cluster: r's status, the kill's time and the links' figures. */
static void s_run_net(const train_cfg_t *cfg, train_run_t *r, char *const *args,
                      const char *log, double rejoin_at, int colocated)
{
    ps_netsim_job_t job = {.launch = cfg->launch,
                           .args = args,
                           .servers = s_servers_for(cfg, r),
                           .workers = r->workers,
                           .log_path = log,
                           .timeout = cfg->timeout,
                           .max_steps = ps_bench_train_max_steps(cfg, r->label),
                           .kill_at = r->scen == SCEN_KILL ? TRAIN_KILL_AT : -1,
                           .rejoin_at = rejoin_at,
                           .colocated = colocated,
                           .mpirun = strcmp(r->label, TRAIN_MPI) ? NULL : cfg->mpirun};
    ps_netsim_result_t res;
    int rc = ps_netsim_run(cfg->net, &job, &res);
    r->status = rc ? rc : res.status;
    r->killed_at = res.killed_at;
    r->link_tx = res.counted ? res.worker_tx : NAN; /* per step once steps are read */
    r->link_rx = res.counted ? res.worker_rx : NAN;
    r->link_tx_rest = res.counted ? res.rest_tx : NAN;
    r->link_rx_rest = res.counted ? res.rest_rx : NAN;
    r->link_max = res.counted ? res.link_max : NAN;
    r->retrans = res.counted ? (double)res.retrans : NAN;
    r->timeouts = res.counted ? (double)res.timeouts : NAN;
    r->cpu_busy = res.cpu_busy;
    r->line_busy = res.line_busy;
}

/* Appends flag and its value to argv at *a. */
static void s_pair(char **argv, int *a, const char *flag, const char *value)
{
    argv[(*a)++] = (char *)flag;
    argv[(*a)++] = (char *)value;
}

/* Appends flag and v, written into num[48], when v > 0 (0: the default). */
static void s_count(char **argv, int *a, const char *flag, int v, char num[48])
{
    if (v > 0) {
        snprintf(num, 48, "%d", v);
        s_pair(argv, a, flag, num);
    }
}

/* The launcher's command line of run r (tagged tag, its summary at json)
 * into argv (NULL-terminated); num holds the numbers it points to. */
static void s_argv(const train_cfg_t *cfg, const train_run_t *r, const char *tag,
                   const char *json, char num[12][48], char **argv)
{
    int a = 0;
    argv[a++] = (char *)cfg->launch;
    snprintf(num[0], sizeof num[0], "%d", s_servers_for(cfg, r));
    snprintf(num[1], sizeof num[1], "%d", r->workers);
    snprintf(num[2], sizeof num[2], "%d", cfg->epochs);
    snprintf(num[3], sizeof num[3], "%d", cfg->seed);
    snprintf(num[4], sizeof num[4], "%g", cfg->timeout);
    s_pair(argv, &a, "--servers", num[0]);
    s_pair(argv, &a, "--workers", num[1]);
    s_pair(argv, &a, "--model", cfg->model);
    s_pair(argv, &a, "--mode", r->mode);
    s_pair(argv, &a, "--epochs", num[2]);
    s_pair(argv, &a, "--seed", num[3]);
    if (!cfg->net) { /* with --net the bench keeps the time itself */
        s_pair(argv, &a, "--timeout", num[4]);
    }
    /* the nodes register once they have read their data: a big click log,
     * or a ring's table of every key in it, takes longer than the default */
    s_pair(argv, &a, "--wait", num[4]);
    s_pair(argv, &a, "--summary", json);
    s_count(argv, &a, "--max-steps", ps_bench_train_max_steps(cfg, r->label), num[5]);
    s_count(argv, &a, "--threads", cfg->threads, num[6]);
    s_count(argv, &a, "--batch", cfg->batch, num[7]);
    s_count(argv, &a, "--eval-every", cfg->eval_every, num[8]);
    if (r->scen == SCEN_STRAGGLER && cfg->straggler && cfg->straggler_rank < r->workers) {
        s_pair(argv, &a, "--straggler", cfg->straggler);
    }
    if (r->scen == SCEN_KILL) {
        s_pair(argv, &a, "--min-workers", "1");
    }
    if (!strcmp(r->label, TRAIN_MPI)) {
        s_pair(argv, &a, "--allreduce-backend", "mpi");
    }
    if (ps_bench_train_colocated(r->label)) {
        s_pair(argv, &a, "--placement", "colocated");
    }
    if (cfg->ctr_data) {
        s_pair(argv, &a, "--ctr-data", cfg->ctr_data);
    }
    const char *ring_rows = ps_bench_train_ring_rows(r->label);
    if (ring_rows) {
        s_pair(argv, &a, "--ring-rows", ring_rows);
    }
    if (cfg->net) {
        /* progress lines often enough to place the kill; one job id for all */
        snprintf(num[9], sizeof num[9], "bench-%d-%s", (int)getpid(), tag);
        for (char *p = num[9]; *p; p++) {
            *p = *p == '.' ? '-' : *p;
        }
        s_pair(argv, &a, "--progress", "0.25");
        s_pair(argv, &a, "--job-id", num[9]);
        /* no preflight (--node turns it on): its bulk probes would count in
         * every link's bytes and TCP counters (--job-flags may turn it on) */
        s_pair(argv, &a, "--preflight", "0");
    }
    for (int i = 0; cfg->job_flags[i]; i++) {
        argv[a++] = cfg->job_flags[i];
    }
    argv[a] = NULL;
}

void ps_bench_train_job(const train_cfg_t *cfg, train_run_t *r, double rejoin_at,
                        int repeat)
{
    char tag[80], json[PATH_MAX], log[PATH_MAX], num[12][48];
    ps_bench_train_tag(r, tag, sizeof tag);
    if (repeat > 0) {
        snprintf(tag + strlen(tag), sizeof tag - strlen(tag), "_%d", repeat);
    }
    snprintf(json, sizeof json, "%s/runs/%s.json", cfg->out, tag);
    snprintf(log, sizeof log, "%s/runs/%s.log", cfg->out, tag);
    remove(json);
    remove(log);
    char *argv[64 + TRAIN_MAX_JOB_FLAGS];
    s_argv(cfg, r, tag, json, num, argv);
    const int colocated = ps_bench_train_colocated(r->label);
    r->killed_at = -1;
    r->link_tx = r->link_rx = r->link_max = r->retrans = r->timeouts = NAN;
    r->link_tx_rest = r->link_rx_rest = NAN;
    r->cpu_busy = r->line_busy = NAN;
    const double cpu0 = ps_bench_children_cpu_seconds(), t0 = ps_now();
    if (cfg->net) {
        s_run_net(cfg, r, argv + 1, log, rejoin_at, colocated);
    } else {
        double busy0, total0, busy1, total1;
        ps_bench_cpu_ticks(&busy0, &total0);
        r->status = ps_bench_run(argv, log);
        ps_bench_cpu_ticks(&busy1, &total1);
        r->cpu_busy = total1 > total0 ? (busy1 - busy0) / (total1 - total0) : NAN;
    }
    const double cpu1 = ps_bench_children_cpu_seconds();
    r->job_wall = ps_now() - t0;
    r->job_cpu = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : NAN;
    if (r->status == 0 &&
        s_read_results(json, log, cfg->target, ps_bench_train_batch(cfg), r) != 0) {
        r->status = PS_EPROTO; /* ran, but the summary is not what we expect */
    }
    if (cfg->net && r->status == 0 && r->steps > 0) {
        r->link_tx /= r->steps;
        r->link_rx /= r->steps;
        r->link_tx_rest /= r->steps;
        r->link_rx_rest /= r->steps;
        r->link_max /= r->steps;
    }
}
