/* scheduler/main.c - shardps-scheduler: flags in, one job run, exit status out. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "scheduler/scheduler.h"

int main(int argc, char **argv)
{
    ps_scheduler_config_t cfg = {
        .bind = "tcp://0.0.0.0:9000",
        .servers = 1,
        .workers = 1,
        .peer_timeout = 5.0,
        .wait = 120.0,
    };
    ps_job_defaults(&cfg.job);
    const char *model = "mlp", *mode = "sync", *optimizer = "sgd";
    const char *log_level = "info";
    int seed = (int)cfg.job.seed, max_steps = 0, warmup = 0;
    const char *schedule = "cosine", *straggler = NULL;
    ps_flag_t flags[] = {
        {"bind", PS_FLAG_STR, &cfg.bind, "ENDPOINT", "where nodes reach the scheduler (port * = any free port)"},
        {"endpoint-file", PS_FLAG_STR, &cfg.endpoint_file, "FILE", "write the bound endpoint here"},
        {"servers", PS_FLAG_INT, &cfg.servers, "S", "number of servers to wait for (0 with --mode allreduce)"},
        {"workers", PS_FLAG_INT, &cfg.workers, "M", "number of workers to wait for"},
        {"model", PS_FLAG_STR, &model, "NAME", "model to train: mlp or cnn"},
        {"mode", PS_FLAG_STR, &mode, "MODE", "consistency: sync, async, ssp:S (bounded staleness S), sync:K/N (K of N workers per step) or allreduce (no servers: a ring of workers)"},
        {"staleness-lr", PS_FLAG_BOOL, &cfg.job.staleness_lr, "0|1", "async, ssp: weight a gradient applied tau > 1 versions late by 1/tau"},
        {"straggler", PS_FLAG_STR, &straggler, "RANK:FACTOR", "slow worker RANK's compute down FACTOR times (experiments)"},
        {"optimizer", PS_FLAG_STR, &optimizer, "NAME", "optimizer (on the servers; on every worker under allreduce): sgd, nesterov, adam or adagrad"},
        {"lr", PS_FLAG_DOUBLE, &cfg.job.lr, "X", "learning rate"},
        {"momentum", PS_FLAG_DOUBLE, &cfg.job.momentum, "X", "SGD momentum"},
        {"weight-decay", PS_FLAG_DOUBLE, &cfg.job.weight_decay, "X", "L2 weight decay"},
        {"lr-schedule", PS_FLAG_STR, &schedule, "S", "constant, cosine or step:EVERY_EPOCHS:GAMMA"},
        {"warmup-steps", PS_FLAG_INT, &warmup, "N", "linear learning-rate warm-up over N steps"},
        {"batch", PS_FLAG_INT, &cfg.job.batch, "N", "samples per worker per step"},
        {"epochs", PS_FLAG_INT, &cfg.job.epochs, "N", "passes over the training set"},
        {"max-steps", PS_FLAG_INT, &max_steps, "N", "stop after N steps (0 = run all epochs)"},
        {"seed", PS_FLAG_INT, &seed, "N", "seed for initialisation and sample order"},
        {"summary", PS_FLAG_STR, &cfg.summary, "FILE", "write the job summary here as JSON"},
        {"peer-timeout", PS_FLAG_DOUBLE, &cfg.peer_timeout, "SECONDS", "a node silent this long is lost"},
        {"wait", PS_FLAG_DOUBLE, &cfg.wait, "SECONDS", "how long to wait for every node to register"},
        ps_log_level_flag(&log_level),
    };
    const char *prog = "shardps-scheduler";
    int rc = ps_config_parse(prog,
                             "The shardps scheduler: waits for the servers and workers, assigns "
                             "key ranges,\nruns the job and ends it.",
                             flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    char err[200] = "";
    snprintf(cfg.job.model, sizeof cfg.job.model, "%s", model);
    snprintf(cfg.job.optimizer, sizeof cfg.job.optimizer, "%s", optimizer);
    cfg.job.seed = (uint64_t)(unsigned)seed;
    cfg.job.max_steps = max_steps;
    cfg.job.schedule.warmup_steps = warmup;
    if (ps_log_set_level_flag(prog, log_level) != 0) {
        return 2;
    }
    if (ps_job_parse_schedule(schedule, &cfg.job.schedule) != 0) {
        snprintf(err, sizeof err, "--lr-schedule %s: expected constant, cosine or "
                 "step:EVERY:GAMMA (EVERY >= 1 epochs, 0 < GAMMA <= 1)", schedule);
    } else if (ps_job_parse_mode(mode, &cfg.job) != 0) {
        snprintf(err, sizeof err, "--mode %s: expected sync, async, ssp:S (0 <= S <= %d), "
                 "sync:K/N (1 <= K <= N) or allreduce", mode, PS_MAX_STALENESS);
    } else if (cfg.job.mode == PS_MODE_BACKUP && cfg.job.backup_n != cfg.workers) {
        snprintf(err, sizeof err, "--mode %s: N must be the number of workers (%d)", mode,
                 cfg.workers);
    } else if (straggler && ps_job_parse_straggler(straggler, &cfg.job) != 0) {
        snprintf(err, sizeof err, "--straggler %s: expected RANK:FACTOR with FACTOR in [1, 1000]",
                 straggler);
    } else if (cfg.job.straggler_rank >= cfg.workers) {
        snprintf(err, sizeof err, "--straggler: rank %d is not a worker (%d workers)",
                 cfg.job.straggler_rank, cfg.workers);
    } else if (!ps_job_has_servers(&cfg.job) && cfg.servers != 0) {
        snprintf(err, sizeof err, "--servers %d: --mode allreduce runs without servers "
                 "(use 0)", cfg.servers);
    } else if (ps_job_has_servers(&cfg.job) && (cfg.servers < 1 || cfg.servers > 256)) {
        snprintf(err, sizeof err, "--servers %d: expected 1 to 256 (0 only with --mode "
                 "allreduce)", cfg.servers);
    } else if (cfg.workers < 1 || cfg.workers > 256) {
        snprintf(err, sizeof err, "--workers %d: expected 1 to 256", cfg.workers);
    } else if (!(cfg.peer_timeout > 0) || !(cfg.wait > 0)) {
        snprintf(err, sizeof err, "--peer-timeout and --wait must be > 0");
    } else if (ps_job_validate(&cfg.job, err, sizeof err) == 0) {
        err[0] = '\0';
    }
    if (err[0]) {
        fprintf(stderr, "%s: error: %s\n", prog, err);
        return 2;
    }
    ps_log_set_role("C", -1);
    return ps_scheduler_run(&cfg);
}
