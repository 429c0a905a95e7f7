/* scheduler/flags.c - shardps-scheduler's flag table and the checks after parsing. */
#include "scheduler/flags.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "common/job.h"
#include "common/http.h"
#include "common/log.h"
#include "proto/addr.h"
#include "proto/curve.h"
#include "proto/link.h"

void ps_scheduler_flags_init(ps_scheduler_flags_t *f)
{
    memset(f, 0, sizeof *f);
    f->cfg.bind = "tcp://0.0.0.0:9000";
    f->cfg.servers = 1;
    f->cfg.workers = 1;
    f->cfg.peer_timeout = 5.0;
    f->cfg.wait = 120.0;
    ps_job_defaults(&f->cfg.job);
    f->cfg.placement = "dedicated";
    f->model = "mlp";
    f->hidden = "";
    f->mode = "sync";
    f->optimizer = "sgd";
    f->wire = "fp32";
    f->compress = "none";
    f->ring_rows = "dense";
    f->schedule = "cosine";
    f->seed = (int)f->cfg.job.seed;
    f->log_level = "info";
    f->log_format = "text";
    f->checkpoint_every = "0";
    f->on_no_progress = "fail";
}

size_t ps_scheduler_flags_table(ps_scheduler_flags_t *f, ps_flag_t *out)
{
    ps_scheduler_config_t *c = &f->cfg;
    const ps_flag_t t[] = {
        {"bind", PS_FLAG_STR, &c->bind, "ENDPOINT", "where nodes reach the scheduler (port * = any free port)"},
        {"endpoint-file", PS_FLAG_STR, &c->endpoint_file, "FILE", "write the bound endpoint here"},
        {"servers", PS_FLAG_INT, &c->servers, "S", "number of servers to wait for (0 with --mode allreduce)"},
        {"workers", PS_FLAG_INT, &c->workers, "M", "number of workers to wait for"},
        {"model", PS_FLAG_STR, &f->model, "NAME", "model to train: mlp or cnn (Fashion-MNIST), or ctr (click-through: embedding rows of 26 categorical fields and an mlp)"},
        {"hidden", PS_FLAG_STR, &f->hidden, "H1,H2,...", "mlp, ctr: the hidden layers' widths (default 256,128), e.g. 2048,2048"},
        {"embed-dim", PS_FLAG_INT, &c->job.embed_dim, "D", "ctr: floats per embedding row, 1 to 1024"},
        {"min-count", PS_FLAG_INT, &c->job.min_count, "N", "ctr: a key gets a row on its N-th update; before, it reads as zeros and its updates are counted and dropped"},
        {"max-rows", PS_FLAG_INT, &f->max_rows, "N", "ctr: embedding rows per server at most (0 = no cap); past it a new key's updates are counted and dropped, with a warning"},
        {"mode", PS_FLAG_STR, &f->mode, "MODE", "consistency: sync, async, ssp:S (bounded staleness S), sync:K/N (K of N workers per step) or allreduce (no servers: a ring of workers)"},
        {"ring-rows", PS_FLAG_STR, &f->ring_rows, "dense|allgather", "ctr with --mode allreduce: how the rows' gradients travel: dense (every worker holds the whole table and the ring sums it with the dense gradient, as Horovod's sparse_as_dense) or allgather (each worker's rows of the step go to every other)"},
        {"staleness-lr", PS_FLAG_BOOL, &c->job.staleness_lr, "0|1", "async, ssp: weight a gradient applied tau > 1 versions late by 1/tau; async: each push of M workers also by (M-1)/M, with SGD momentum lowered by 1-1/M at a rate keeping lr/(1-momentum)"},
        {"straggler", PS_FLAG_STR, &f->straggler, "RANK:FACTOR", "slow worker RANK's compute down FACTOR times (experiments)"},
        {"placement", PS_FLAG_STR, &c->placement, "P", "dedicated (servers on hosts of their own) or colocated (server i on worker i's host, S <= M): recorded in the summary; the simulated cluster places the nodes so"},
        {"chunk-kib", PS_FLAG_INT, &c->job.chunk_kib, "KIB", "sync and ssp: servers apply pushes and answer pulls in chunks of KIB KiB (a power of two, 4 to 1024; 0 = sized to the shards, 4 to 16), and pushes travel in whole chunks, about 2 ms of the link each, so uplink and downlink work at once"},
        {"wire", PS_FLAG_STR, &f->wire, "DTYPE", "how pushes and pull replies travel: fp32, fp16 or bf16 (servers keep fp32; not with allreduce)"},
        {"compress", PS_FLAG_STR, &f->compress, "C", "pushes: none, or topk:R (send the fraction R of each tensor's largest gradients, tensors of at most R x params keys whole, keep the rest for the next push; not with allreduce)"},
        {"optimizer", PS_FLAG_STR, &f->optimizer, "NAME", "optimizer (on the servers; on every worker under allreduce): sgd, nesterov, adam, adagrad or ftrl (ctr: sgd, adagrad or ftrl)"},
        {"l1", PS_FLAG_DOUBLE, &c->job.l1, "X", "ftrl: L1 strength, >= 0"},
        {"l2", PS_FLAG_DOUBLE, &c->job.l2, "X", "ftrl: L2 strength, >= 0"},
        {"lr", PS_FLAG_DOUBLE, &c->job.lr, "X", "learning rate, in (0, 10]"},
        {"momentum", PS_FLAG_DOUBLE, &c->job.momentum, "X", "SGD momentum, in [0, 1)"},
        {"weight-decay", PS_FLAG_DOUBLE, &c->job.weight_decay, "X", "L2 weight decay, in [0, 1)"},
        {"lr-schedule", PS_FLAG_STR, &f->schedule, "S", "constant, cosine or step:EVERY_EPOCHS:GAMMA"},
        {"warmup-steps", PS_FLAG_INT, &f->warmup, "N", "linear learning-rate warm-up over N steps"},
        {"batch", PS_FLAG_INT, &c->job.batch, "N", "samples per worker per step"},
        {"micro-batch", PS_FLAG_INT, &c->job.micro_batch, "N", "a worker computes its gradient as the sum of its batch's micro-batches of N samples (a divisor of --batch; 0 = one): M workers of batch B give the bits of 1 worker of batch M*B with --micro-batch B"},
        {"epochs", PS_FLAG_INT, &c->job.epochs, "N", "passes over the training set"},
        {"max-steps", PS_FLAG_INT, &f->max_steps, "N", "stop after N steps (0 = run all epochs)"},
        {"seed", PS_FLAG_INT, &f->seed, "N", "seed for initialisation and sample order"},
        {"summary", PS_FLAG_STR, &c->summary, "FILE", "write the job summary here as JSON"},
        {"peer-timeout", PS_FLAG_DOUBLE, &c->peer_timeout, "SECONDS", "a node silent this long is lost; in (0, 86400]"},
        {"checkpoint-dir", PS_FLAG_STR, &c->checkpoint_dir, "DIR", "servers write a checkpoint to DIR/step-N/ every --checkpoint-every (not allreduce; in async each server at its own moment: no cut)"},
        {"checkpoint-every", PS_FLAG_STR, &f->checkpoint_every, "N", "steps between checkpoints (async: each server at version N*workers), or Ns: seconds (e.g. 30s; at a step agreed with the servers; not async); 0 = none"},
        {"resume", PS_FLAG_STR, &c->resume, "DIR", "continue from the newest complete checkpoint in DIR (checkpoints go on there); exit 2 when DIR holds none (a missing or mistyped DIR, or every checkpoint refused)"},
        {"resume-or-start", PS_FLAG_STR, &f->resume_or_start, "DIR", "as --resume DIR, but start from step 0 when DIR holds no checkpoint yet (a job that restarts itself)"},
        {"resume-override", PS_FLAG_STR, &f->resume_override, "F1,F2", "with --resume: these flags (without --, e.g. lr,batch) may differ from the checkpoint's; any other that changes the arithmetic refuses the resume (exit 2, naming each)"},
        {"on-no-progress", PS_FLAG_STR, &f->on_no_progress, "fail|warn", "a job at chance (test accuracy <= 0.15, AUC <= 0.52, or training loss not below a uniform guess's) after a whole epoch: fail ends with status no_progress and exit 4; warn logs it and ends ok"},
        {"replicas", PS_FLAG_INT, &c->replicas, "K", "keep each server's keys also on K hot replicas (0 to 3; spares become them): a lost server's replica takes over with nothing rolled back (sync, async)"},
        {"min-workers", PS_FLAG_INT, &c->min_workers, "K", "a lost worker is left out and the job goes on while K workers live (0 = all: any loss aborts; not with allreduce)"},
        {"preflight", PS_FLAG_BOOL, &c->preflight, "0|1", "before step 0 every worker probes every server (round trip, 2 MiB bulk); the table is logged and an unreachable pair fails the job, naming it"},
        {"advertise", PS_FLAG_STR, &c->advertise, "HOST", "this host's address toward the job's other hosts: nodes here that reach the scheduler over loopback are announced at it (default: the local end of the route to a node on another host)"},
        {"job-id", PS_FLAG_STR, &c->job_id, "ID", "this job's id: a node started for another job is refused at registration (default: job-<start time>-<random>)"},
        ps_http_bind_flag(&c->metrics_bind),
        {"metrics-hold", PS_FLAG_DOUBLE, &c->metrics_hold, "SECONDS", "after the job, keep serving the metrics until one scrape took the final values, at most this long; in [0, 86400]"},
        {"wait", PS_FLAG_DOUBLE, &c->wait, "SECONDS", "how long to wait for every node to register; in (0, 86400]"},
        ps_curve_secure_flag(&c->secure),
        ps_curve_keys_flag(&c->keys),
        ps_link_secret_flag(&f->secret_file),
        ps_log_level_flag(&f->log_level),
        ps_log_format_flag(&f->log_format),
    };
    _Static_assert(sizeof t / sizeof t[0] == PS_SCHEDULER_NFLAGS, "PS_SCHEDULER_NFLAGS");
    memcpy(out, t, sizeof t);
    return PS_SCHEDULER_NFLAGS;
}

int ps_scheduler_flags_check_outputs(const ps_scheduler_flags_t *f, char *err, size_t errlen)
{
    const ps_scheduler_config_t *c = &f->cfg;
    char why[512];
    const char *bad = NULL;
    /* its folder made when missing, as --plot's and --log-dir's */
    if (c->summary && ps_file_mkdirs_for(c->summary) != 0) {
        snprintf(why, sizeof why, "%s: cannot make its directory: %s", c->summary,
                 strerror(errno));
        bad = "summary";
    } else if (c->summary && ps_file_check_writable(c->summary, why, sizeof why)) {
        bad = "summary";
    } else if (c->endpoint_file && ps_file_check_writable(c->endpoint_file, why, sizeof why)) {
        bad = "endpoint-file";
    } else if ((c->checkpoint_every > 0 || c->checkpoint_seconds > 0) && c->checkpoint_dir &&
               ps_file_check_dir_writable(c->checkpoint_dir, why, sizeof why)) {
        bad = c->checkpoint_dir == c->resume ? "resume" : "checkpoint-dir";
    } else {
        return ps_config_check_endpoint("bind", c->bind, 1, err, errlen);
    }
    snprintf(err, errlen, "--%s %s", bad, why);
    return PS_EINVAL;
}

/* --checkpoint-every: "N" steps or "Ns" seconds. Returns 0 or PS_EINVAL. */
static int s_parse_every(const char *text, ps_scheduler_config_t *c)
{
    char *end;
    errno = 0;
    if (!text) {
        return 0;
    }
    if (text[0] && text[strlen(text) - 1] == 's') {
        double sec = strtod(text, &end);
        return *end == 's' && end[1] == '\0' && end != text && sec > 0 &&
                       sec <= PS_CONFIG_MAX_SECONDS
                   ? (c->checkpoint_seconds = sec, 0)
                   : PS_EINVAL;
    }
    long n = strtol(text, &end, 10);
    return *end == '\0' && end != text && !errno && n >= 0 && n <= INT_MAX
               ? (c->checkpoint_every = (int)n, 0)
               : PS_EINVAL;
}

/* The job's text flags parsed into f->cfg.job. Returns 0 or PS_EINVAL with
 * the flag named in err. */
static int s_parse_job(ps_scheduler_flags_t *f, char *err, size_t errlen)
{
    ps_job_t *job = &f->cfg.job;
    snprintf(job->model, sizeof job->model, "%s", f->model);
    if (strlen(f->hidden) >= sizeof job->hidden) {
        snprintf(err, errlen, "--hidden %.32s...: too long", f->hidden);
        return PS_EINVAL;
    }
    snprintf(job->hidden, sizeof job->hidden, "%s", f->hidden);
    snprintf(job->optimizer, sizeof job->optimizer, "%s", f->optimizer);
    job->seed = (uint64_t)(unsigned)f->seed;
    job->max_steps = f->max_steps;
    job->max_rows = (uint64_t)(int64_t)f->max_rows; /* a negative one: refused as too many */
    job->schedule.warmup_steps = f->warmup;
    if (ps_job_parse_schedule(f->schedule, &job->schedule) != 0) {
        snprintf(err, errlen, "--lr-schedule %s: expected constant, cosine or "
                 "step:EVERY:GAMMA (EVERY >= 1 epochs, 0 < GAMMA <= 1)", f->schedule);
        return PS_EINVAL;
    }
    if (ps_job_parse_mode(f->mode, job) != 0) {
        snprintf(err, errlen, "--mode %s: expected sync, async, ssp:S (0 <= S <= %d), "
                 "sync:K/N (1 <= K <= N) or allreduce", f->mode, PS_MAX_STALENESS);
        return PS_EINVAL;
    }
    if (ps_job_parse_wire(f->wire, job) != 0) {
        snprintf(err, errlen, "--wire %s: expected fp32, fp16 or bf16", f->wire);
        return PS_EINVAL;
    }
    if (ps_job_parse_compress(f->compress, job) != 0) {
        snprintf(err, errlen, "--compress %s: expected none or topk:R with 0 < R <= 1",
                 f->compress);
        return PS_EINVAL;
    }
    if (ps_job_parse_ring_rows(f->ring_rows, job) != 0) {
        snprintf(err, errlen, "--ring-rows %s: expected dense or allgather", f->ring_rows);
        return PS_EINVAL;
    }
    if (f->straggler && ps_job_parse_straggler(f->straggler, job) != 0) {
        snprintf(err, errlen, "--straggler %s: expected RANK:FACTOR with FACTOR in [1, 1000]",
                 f->straggler);
        return PS_EINVAL;
    }
    return 0;
}

/* --resume-override's names into the mask of resume fields, and
 * --on-no-progress. Returns 0 or PS_EINVAL with the flag named in err. */
static int s_parse_resume(ps_scheduler_flags_t *f, char *err, size_t errlen)
{
    const char *o = f->resume_override;
    if (o && !f->cfg.resume) {
        snprintf(err, errlen, "--resume-override needs --resume or --resume-or-start");
        return PS_EINVAL;
    }
    while (o && *o) {
        char name[32];
        const size_t len = strcspn(o, ",");
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), o);
        const int k = ps_job_resume_index(name);
        if (k < 0) {
            ps_job_t names;
            ps_job_field_t all[PS_JOB_RESUME_FIELDS];
            char list[512];
            size_t n = 0;
            ps_job_defaults(&names);
            ps_job_resume_fields(&names, all);
            for (int i = 0; i < PS_JOB_RESUME_FIELDS; i++) {
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? "," : "",
                                      all[i].flag);
            }
            snprintf(err, errlen, "--resume-override %s: '%s' is not a flag a resume keeps; "
                     "expected names from %s", f->resume_override, name, list);
            return PS_EINVAL;
        }
        f->cfg.resume_override |= 1u << k;
        o += len + (o[len] == ',');
    }
    if (strcmp(f->on_no_progress, "fail") && strcmp(f->on_no_progress, "warn")) {
        snprintf(err, errlen, "--on-no-progress %s: expected fail or warn", f->on_no_progress);
        return PS_EINVAL;
    }
    f->cfg.no_progress_warn = !strcmp(f->on_no_progress, "warn");
    return 0;
}

/* --checkpoint-every, --checkpoint-dir and the --resume flags, once the job
 * (its mode) is known. */
static int s_check_checkpoint(ps_scheduler_flags_t *f, char *err, size_t errlen)
{
    const ps_job_t *job = &f->cfg.job;
    if (s_parse_every(f->checkpoint_every, &f->cfg) != 0) {
        snprintf(err, errlen, "--checkpoint-every %s: expected steps N (0 to %d) or seconds "
                 "Ns (0 < N <= %.0f)", f->checkpoint_every, INT_MAX, PS_CONFIG_MAX_SECONDS);
        return PS_EINVAL;
    }
    if (f->resume_or_start && f->cfg.resume) {
        snprintf(err, errlen, "--resume and --resume-or-start: give one of them");
        return PS_EINVAL;
    }
    if (f->resume_or_start) {
        f->cfg.resume = f->resume_or_start;
        f->cfg.resume_or_start = 1;
    }
    if (s_parse_resume(f, err, errlen) != 0) {
        return PS_EINVAL;
    }
    if (f->cfg.resume && !f->cfg.resume[0]) {
        snprintf(err, errlen, "--resume: empty directory name");
        return PS_EINVAL;
    }
    const int every = f->cfg.checkpoint_every > 0 || f->cfg.checkpoint_seconds > 0;
    if (every && !f->cfg.checkpoint_dir && !f->cfg.resume) {
        snprintf(err, errlen, "--checkpoint-every needs --checkpoint-dir (or --resume)");
        return PS_EINVAL;
    }
    if ((every || f->cfg.resume) && job->mode == PS_MODE_ALLREDUCE) {
        snprintf(err, errlen, "--checkpoint-every and --resume need a mode with servers: "
                 "allreduce has no shards to save");
        return PS_EINVAL;
    }
    if (f->cfg.checkpoint_seconds > 0 && !ps_job_is_stepped(job)) {
        /* a timed checkpoint holds every server at one agreed step; async
         * servers apply pushes as they come and have none */
        snprintf(err, errlen, "--checkpoint-every %s: timed checkpoints need --mode sync, "
                 "ssp:S or sync:K/N; in async checkpoint every N steps",
                 f->checkpoint_every);
        return PS_EINVAL;
    }
    if (!f->cfg.checkpoint_dir) {
        f->cfg.checkpoint_dir = f->cfg.resume; /* a resumed job checkpoints where it was */
    }
    return 0;
}

/* --replicas and --min-workers against the job's nodes and mode. */
static int s_check_workers(ps_scheduler_flags_t *f, char *err, size_t errlen)
{
    const ps_job_t *job = &f->cfg.job;
    if (f->cfg.replicas < 0 || f->cfg.replicas > PS_MAX_REPLICAS ||
        (f->cfg.replicas && ((job->mode != PS_MODE_SYNC && job->mode != PS_MODE_ASYNC) ||
                             job->topk > 0))) {
        snprintf(err, errlen, "--replicas %d: expected 0 to %d, and more than 0 only with "
                 "--mode sync or async and dense pushes (no --compress topk)",
                 f->cfg.replicas, PS_MAX_REPLICAS);
        return PS_EINVAL;
    }
    if (f->cfg.min_workers < 0 || f->cfg.min_workers > f->cfg.workers ||
        (job->mode == PS_MODE_ALLREDUCE && f->cfg.min_workers > 0 &&
         f->cfg.min_workers < f->cfg.workers)) {
        snprintf(err, errlen, "--min-workers K needs 0 <= K <= --workers, and K = 0 or "
                 "--workers with --mode allreduce (a ring needs every worker)");
        return PS_EINVAL;
    }
    return 0;
}

/* The timeouts, the metrics endpoint and the link's security flags. */
static int s_check_links(ps_scheduler_flags_t *f, char *err, size_t errlen)
{
    if (ps_config_check_range("peer-timeout", f->cfg.peer_timeout, 0, PS_CONFIG_MAX_SECONDS,
                              PS_RANGE_OPEN_MIN, err, errlen) ||
        ps_http_check_bind(f->cfg.metrics_bind, err, errlen) ||
        ps_config_check_range("metrics-hold", f->cfg.metrics_hold, 0, PS_CONFIG_MAX_SECONDS,
                              PS_RANGE_CLOSED, err, errlen) ||
        ps_config_check_range("wait", f->cfg.wait, 0, PS_CONFIG_MAX_SECONDS, PS_RANGE_OPEN_MIN,
                              err, errlen) ||
        ps_addr_check_advertise(f->cfg.advertise, 0, err, errlen)) {
        return PS_EINVAL;
    }
    if (ps_curve_check_flags(f->cfg.secure, f->cfg.keys, PS_ROLE_SCHEDULER, err, errlen) != 0 ||
        ps_link_read_secret(f->secret_file, &f->cfg.secret, err, errlen) != 0) {
        return PS_EINVAL;
    }
    return 0;
}

int ps_scheduler_flags_check(ps_scheduler_flags_t *f, char *err, size_t errlen)
{
    if (s_parse_job(f, err, errlen) != 0) {
        return PS_EINVAL;
    }
    int rc =
        ps_job_validate_nodes(&f->cfg.job, f->cfg.servers, f->cfg.workers, err, errlen);
    if (rc != 0) {
        return rc;
    }
    const int colocated = !strcmp(f->cfg.placement, "colocated");
    if ((!colocated && strcmp(f->cfg.placement, "dedicated")) ||
        (colocated && f->cfg.servers > f->cfg.workers)) {
        snprintf(err, errlen,
                 "--placement %.32s: expected dedicated, or colocated with "
                 "--servers at most --workers",
                 f->cfg.placement);
        return PS_EINVAL;
    }
    if (s_check_checkpoint(f, err, errlen) != 0 || s_check_workers(f, err, errlen) != 0 ||
        s_check_links(f, err, errlen) != 0) {
        return PS_EINVAL;
    }
    return ps_job_validate(&f->cfg.job, err, errlen);
}
