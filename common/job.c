/* common/job.c - job configuration defaults and validation. */
#include "common/job.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/error.h"

void ps_job_defaults(ps_job_t *job)
{
    memset(job, 0, sizeof *job);
    snprintf(job->model, sizeof job->model, "mlp");
    job->mode = PS_MODE_SYNC;
    job->staleness_lr = 1;
    job->straggler_rank = -1;
    job->straggler_factor = 1.0;
    snprintf(job->optimizer, sizeof job->optimizer, "sgd");
    job->lr = 0.05;
    job->momentum = 0.9;
    job->weight_decay = 0.0;
    job->schedule.kind = PS_LR_COSINE;
    job->batch = 64;
    job->epochs = 1;
    job->max_steps = 0;
    job->seed = 1;
    job->chunk_kib = PS_JOB_CHUNK_KIB_DEFAULT;
    job->embed_dim = PS_JOB_EMBED_DIM_DEFAULT;
    job->min_count = 1;
}

int ps_job_parse_mode(const char *text, ps_job_t *job)
{
    int a = 0, b = 0, used = 0;
    job->staleness = job->backup_k = job->backup_n = 0;
    if (!strcmp(text, "sync")) {
        job->mode = PS_MODE_SYNC;
    } else if (!strcmp(text, "async")) {
        job->mode = PS_MODE_ASYNC;
    } else if (!strcmp(text, "allreduce")) {
        job->mode = PS_MODE_ALLREDUCE;
    } else if (sscanf(text, "ssp:%d%n", &a, &used) == 1 && !text[used] && a >= 0 &&
               a <= PS_MAX_STALENESS) {
        job->mode = PS_MODE_SSP;
        job->staleness = a;
    } else if (sscanf(text, "sync:%d/%d%n", &a, &b, &used) == 2 && !text[used] && a >= 1 &&
               a <= b) {
        job->mode = PS_MODE_BACKUP;
        job->backup_k = a;
        job->backup_n = b;
    } else {
        return PS_EINVAL;
    }
    return 0;
}

int ps_job_parse_wire(const char *text, ps_job_t *job)
{
    static const char *names[] = {"fp32", "fp16", "bf16"};
    for (int i = 0; i < 3; i++) {
        if (!strcmp(text, names[i])) {
            job->wire = (ps_wire_kind_t)i;
            return 0;
        }
    }
    return PS_EINVAL;
}

const char *ps_job_wire_name(const ps_job_t *job)
{
    return job->wire == PS_WIRE_FP16 ? "fp16" : job->wire == PS_WIRE_BF16 ? "bf16" : "fp32";
}

int ps_job_parse_ring_rows(const char *text, ps_job_t *job)
{
    if (!strcmp(text, "dense")) {
        job->ring_rows = PS_RING_ROWS_DENSE;
    } else if (!strcmp(text, "allgather")) {
        job->ring_rows = PS_RING_ROWS_ALLGATHER;
    } else {
        return PS_EINVAL;
    }
    return 0;
}

const char *ps_job_ring_rows_name(const ps_job_t *job)
{
    switch (job->ring_rows) {
    case PS_RING_ROWS_DENSE:
        return "dense";
    case PS_RING_ROWS_ALLGATHER:
        return "allgather";
    }
    return "?";
}

int ps_job_parse_compress(const char *text, ps_job_t *job)
{
    double r = 0;
    int used = 0;
    if (!strcmp(text, "none")) {
        job->topk = 0;
        return 0;
    }
    if (sscanf(text, "topk:%lf%n", &r, &used) == 1 && !text[used] && r > 0 &&
        r <= PS_JOB_MAX_TOPK) {
        job->topk = r;
        return 0;
    }
    return PS_EINVAL;
}

int ps_job_parse_hidden(const char *text, int *widths, int *n)
{
    int count = 0;
    const char *at = text;
    if (!text || strlen(text) >= PS_JOB_HIDDEN_TEXT) {
        return PS_EINVAL;
    }
    for (;;) {
        char *end;
        if (*at < '0' || *at > '9' || count == PS_JOB_MAX_HIDDEN) {
            return PS_EINVAL;
        }
        long v = strtol(at, &end, 10);
        if (v < 1 || v > PS_JOB_MAX_WIDTH) {
            return PS_EINVAL;
        }
        widths[count++] = (int)v;
        if (*end == '\0') {
            break;
        }
        if (*end != ',') {
            return PS_EINVAL;
        }
        at = end + 1;
    }
    *n = count;
    return 0;
}

void ps_job_compress_str(const ps_job_t *job, char *buf, size_t cap)
{
    if (job->topk > 0) {
        snprintf(buf, cap, "topk:%g", job->topk);
    } else {
        snprintf(buf, cap, "none");
    }
}

void ps_job_mode_str(const ps_job_t *job, char *buf, size_t cap)
{
    switch (job->mode) {
    case PS_MODE_ASYNC:
        snprintf(buf, cap, "async");
        break;
    case PS_MODE_SSP:
        snprintf(buf, cap, "ssp:%d", job->staleness);
        break;
    case PS_MODE_BACKUP:
        snprintf(buf, cap, "sync:%d/%d", job->backup_k, job->backup_n);
        break;
    case PS_MODE_ALLREDUCE:
        snprintf(buf, cap, "allreduce");
        break;
    default:
        snprintf(buf, cap, "sync");
    }
}

int ps_job_parse_straggler(const char *text, ps_job_t *job)
{
    int rank = 0, used = 0;
    double factor = 0;
    if (sscanf(text, "%d:%lf%n", &rank, &factor, &used) != 2 || text[used] || rank < 0 ||
        !(factor >= 1.0) || factor > 1000.0) {
        return PS_EINVAL;
    }
    job->straggler_rank = rank;
    job->straggler_factor = factor;
    return 0;
}

int ps_job_parse_schedule(const char *text, ps_lr_schedule_t *s)
{
    if (!strcmp(text, "constant")) {
        s->kind = PS_LR_CONSTANT;
        return 0;
    }
    if (!strcmp(text, "cosine")) {
        s->kind = PS_LR_COSINE;
        return 0;
    }
    int every = 0, used = 0;
    double gamma = 0;
    if (sscanf(text, "step:%d:%lf%n", &every, &gamma, &used) == 2 && !text[used] &&
        every >= 1 && gamma > 0 && gamma <= 1) {
        s->kind = PS_LR_STEP;
        s->every = every;
        s->gamma = gamma;
        return 0;
    }
    return PS_EINVAL;
}

void ps_job_schedule_name(const ps_lr_schedule_t *s, char *buf, size_t cap)
{
    switch (s->kind) {
    case PS_LR_COSINE:
        snprintf(buf, cap, "cosine");
        break;
    case PS_LR_STEP:
        snprintf(buf, cap, "step:%d:%g", s->every, s->gamma);
        break;
    default:
        snprintf(buf, cap, "constant");
    }
}

double ps_job_async_momentum(const ps_job_t *job, int workers, double *rate)
{
    *rate = 1;
    const int sgd = !strcmp(job->optimizer, "sgd") || !strcmp(job->optimizer, "nesterov");
    if (job->mode != PS_MODE_ASYNC || !job->staleness_lr || !sgd || workers < 2 ||
        job->momentum <= 0) {
        return job->momentum;
    }
    double mu = job->momentum - (1 - 1.0 / workers);
    mu = mu > 0 ? mu : 0;
    *rate = (1 - mu) / (1 - job->momentum);
    return mu;
}

float ps_job_row_bound(const ps_job_t *job)
{
    return 1.0f / sqrtf((float)(job->embed_dim > 0 ? job->embed_dim : 1));
}

uint64_t ps_job_rows_frame_max(const ps_job_t *job)
{
    if (!ps_job_has_rows(job)) {
        return 0;
    }
    const uint64_t samples = job->batch > PS_JOB_EVAL_BATCH ? (uint64_t)job->batch
                                                            : PS_JOB_EVAL_BATCH;
    return samples * PS_JOB_ROW_FIELDS *
           (sizeof(uint64_t) + (uint64_t)job->embed_dim * sizeof(float));
}

/* What a job with embedding rows needs beyond a dense one's checks. */
static int s_validate_rows(const ps_job_t *job, char *err, size_t errlen)
{
    if (!ps_job_has_rows(job)) {
        return 0;
    }
    if (job->embed_dim < 1 || job->embed_dim > PS_JOB_MAX_EMBED_DIM) {
        snprintf(err, errlen, "--embed-dim %d: expected 1 to %d", job->embed_dim,
                 PS_JOB_MAX_EMBED_DIM);
    } else if (job->min_count < 1) {
        snprintf(err, errlen, "--min-count %d: expected 1 or more", job->min_count);
    } else if (job->max_rows > PS_JOB_MAX_ROWS) {
        snprintf(err, errlen, "--max-rows %lld: expected 0 (no cap) to %llu",
                 (long long)job->max_rows, (unsigned long long)PS_JOB_MAX_ROWS);
    } else if (strcmp(job->optimizer, "sgd") && strcmp(job->optimizer, "adagrad") &&
               strcmp(job->optimizer, "ftrl")) {
        /* a row's state is made with it; adam's bias correction would need
         * a step count per row, nesterov a look-ahead the rows do not keep */
        snprintf(err, errlen, "--optimizer %s: a model with embedding rows takes sgd, "
                 "adagrad or ftrl", job->optimizer);
    } else if (job->wire != PS_WIRE_FP32 || job->topk > 0) {
        snprintf(err, errlen, "--wire and --compress are for dense models: rows travel as fp32");
    } else if (job->mode == PS_MODE_ALLREDUCE && job->min_count > 1) {
        /* every worker's table holds each row of its click log from the start */
        snprintf(err, errlen, "--min-count %d: the frequency filter is the servers': not with "
                 "--mode allreduce", job->min_count);
    } else if (job->mode == PS_MODE_ALLREDUCE && job->max_rows > 0) {
        snprintf(err, errlen, "--max-rows %llu: the cap on rows is the servers': not with "
                 "--mode allreduce", (unsigned long long)job->max_rows);
    } else {
        return 0;
    }
    return PS_EINVAL;
}

int ps_job_validate(const ps_job_t *job, char *err, size_t errlen)
{
    int widths[PS_JOB_MAX_HIDDEN], nwidths;
    if (strcmp(job->model, "mlp") && strcmp(job->model, "cnn") && !ps_job_has_rows(job)) {
        snprintf(err, errlen, "unknown model '%s' (expected mlp, cnn or ctr)", job->model);
    } else if (job->mode < PS_MODE_SYNC || job->mode > PS_MODE_ALLREDUCE ||
               (job->mode == PS_MODE_SSP &&
                (job->staleness < 0 || job->staleness > PS_MAX_STALENESS)) ||
               (job->mode == PS_MODE_BACKUP &&
                (job->backup_k < 1 || job->backup_k > job->backup_n))) {
        snprintf(err, errlen, "bad consistency mode");
    } else if (job->straggler_rank >= 0 &&
               !(job->straggler_factor >= 1.0 && job->straggler_factor <= 1000.0)) {
        snprintf(err, errlen, "straggler factor must be in [1, 1000], got %g",
                 job->straggler_factor);
    } else if (strcmp(job->optimizer, "sgd") && strcmp(job->optimizer, "nesterov") &&
               strcmp(job->optimizer, "adam") && strcmp(job->optimizer, "adagrad") &&
               strcmp(job->optimizer, "ftrl")) {
        snprintf(err, errlen,
                 "unknown optimizer '%s' (expected sgd, nesterov, adam, adagrad or ftrl)",
                 job->optimizer);
    } else if (ps_config_check_range("lr", job->lr, 0, PS_JOB_MAX_LR, PS_RANGE_OPEN_MIN, err,
                                     errlen) ||
               ps_config_check_range("momentum", job->momentum, 0, 1, PS_RANGE_OPEN_MAX, err,
                                     errlen) ||
               ps_config_check_range("weight-decay", job->weight_decay, 0, 1, PS_RANGE_OPEN_MAX,
                                     err, errlen) ||
               /* ftrl's strengths: finite as the float32 the optimizer keeps */
               ps_config_check_range("l1", job->l1, 0, FLT_MAX, PS_RANGE_CLOSED, err,
                                     errlen) ||
               ps_config_check_range("l2", job->l2, 0, FLT_MAX, PS_RANGE_CLOSED, err,
                                     errlen)) {
        /* err says which */
    } else if (!strcmp(job->optimizer, "ftrl") &&
               (job->schedule.kind != PS_LR_CONSTANT || job->schedule.warmup_steps > 0)) {
        /* its weights are a closed form in lr: a falling lr shrinks them all */
        snprintf(err, errlen, "--optimizer ftrl takes --lr-schedule constant and no warm-up "
                 "(its rate per coordinate falls already)");
    } else if (job->batch < 1 || job->batch > 65536) {
        snprintf(err, errlen, "--batch %d: expected 1 to 65536", job->batch);
    } else if (job->micro_batch < 0 ||
               (job->micro_batch > 0 && job->batch % job->micro_batch != 0)) {
        snprintf(err, errlen, "--micro-batch %d: expected 0 (none) or a divisor of --batch %d",
                 job->micro_batch, job->batch);
    } else if (job->epochs < 1) {
        snprintf(err, errlen, "--epochs %d: expected 1 or more", job->epochs);
    } else if (job->schedule.warmup_steps < 0) {
        snprintf(err, errlen, "--warmup-steps %lld: expected 0 or more",
                 (long long)job->schedule.warmup_steps);
    } else if (job->max_steps < 0) {
        snprintf(err, errlen, "--max-steps %lld: expected 0 or more", (long long)job->max_steps);
    } else if (job->wire < PS_WIRE_FP32 || job->wire > PS_WIRE_BF16) {
        snprintf(err, errlen, "unknown wire dtype %d", (int)job->wire);
    } else if (!(job->topk >= 0 && job->topk <= PS_JOB_MAX_TOPK)) {
        snprintf(err, errlen, "top-k fraction must be in (0, 1], got %g", job->topk);
    } else if (job->chunk_kib != 0 &&
               (job->chunk_kib < PS_JOB_CHUNK_KIB_MIN || job->chunk_kib > PS_JOB_CHUNK_KIB_MAX ||
                (job->chunk_kib & (job->chunk_kib - 1)))) {
        snprintf(err, errlen, "--chunk-kib %d: expected 0 or a power of two in [%d, %d]",
                 job->chunk_kib, PS_JOB_CHUNK_KIB_MIN, PS_JOB_CHUNK_KIB_MAX);
    } else if (job->hidden[0] && !strcmp(job->model, "cnn")) {
        snprintf(err, errlen, "--hidden is for the mlp and the ctr model, not the cnn");
    } else if (job->hidden[0] && ps_job_parse_hidden(job->hidden, widths, &nwidths) != 0) {
        snprintf(err, errlen, "--hidden %s: expected 1 to %d comma-separated widths in [1, %d]",
                 job->hidden, PS_JOB_MAX_HIDDEN, PS_JOB_MAX_WIDTH);
    } else if (job->ring_rows != PS_RING_ROWS_DENSE &&
               (job->ring_rows != PS_RING_ROWS_ALLGATHER || !ps_job_has_rows(job) ||
                job->mode != PS_MODE_ALLREDUCE)) {
        snprintf(err, errlen, "--ring-rows %s: for --model ctr with --mode allreduce",
                 ps_job_ring_rows_name(job));
    } else {
        return s_validate_rows(job, err, errlen);
    }
    return PS_EINVAL;
}

int ps_job_validate_nodes(const ps_job_t *job, int servers, int workers, char *err,
                          size_t errlen)
{
    char mode[32];
    ps_job_mode_str(job, mode, sizeof mode);
    if (job->mode == PS_MODE_BACKUP && job->backup_n != workers) {
        snprintf(err, errlen, "--mode %s: N must be the number of workers (%d)", mode, workers);
    } else if (job->straggler_rank >= 0 && job->straggler_rank >= workers) {
        snprintf(err, errlen, "--straggler: rank %d is not a worker (%d workers)",
                 job->straggler_rank, workers);
    } else if (!ps_job_has_servers(job) && servers != 0) {
        snprintf(err, errlen, "--servers %d: --mode allreduce runs without servers (use 0)",
                 servers);
    } else if (ps_job_has_servers(job) && (servers < 1 || servers > PS_JOB_MAX_NODES)) {
        snprintf(err, errlen, "--servers %d: expected 1 to %d (0 only with --mode allreduce)",
                 servers, PS_JOB_MAX_NODES);
    } else if (!ps_job_has_servers(job) && (job->wire != PS_WIRE_FP32 || job->topk > 0)) {
        /* the ring sums partial sums hop by hop: each hop would round again */
        snprintf(err, errlen, "--wire and --compress need servers: --mode allreduce sends "
                 "fp32 only");
    } else if (!ps_job_has_servers(job) && job->micro_batch > 0) {
        snprintf(err, errlen, "--micro-batch sums on the servers: not with --mode allreduce");
    } else if (workers < 1 || workers > PS_JOB_MAX_NODES) {
        snprintf(err, errlen, "--workers %d: expected 1 to %d", workers, PS_JOB_MAX_NODES);
    } else {
        return 0;
    }
    return PS_EINVAL;
}

/* FNV-1a 64 of text[0..n) as 16 hex digits into buf. */
static void s_fnv_hex(const char *text, size_t n, char *buf, size_t cap)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64 offset basis */
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    }
    snprintf(buf, cap, "%016llx", (unsigned long long)h);
}

void ps_job_hash(const ps_job_t *job, int servers, int workers, char *buf, size_t cap)
{
    char mode[32], sched[64], text[512];
    ps_job_mode_str(job, mode, sizeof mode);
    ps_job_schedule_name(&job->schedule, sched, sizeof sched);
    /* %a: the doubles' exact bits, not a rounding of them. */
    int n = snprintf(text, sizeof text,
                     "model=%s mode=%s staleness_lr=%d straggler=%d:%a optimizer=%s lr=%a "
                     "momentum=%a weight_decay=%a schedule=%s warmup=%lld batch=%d epochs=%d "
                     "max_steps=%lld seed=%llu servers=%d workers=%d",
                     job->model, mode, job->staleness_lr, job->straggler_rank,
                     job->straggler_factor, job->optimizer, job->lr, job->momentum,
                     job->weight_decay, sched, (long long)job->schedule.warmup_steps,
                     job->batch, job->epochs, (long long)job->max_steps,
                     (unsigned long long)job->seed, servers, workers);
    if (job->wire != PS_WIRE_FP32 || job->topk > 0) { /* older jobs keep their hash */
        n += snprintf(text + n, sizeof text - (size_t)n, " wire=%s topk=%a",
                      ps_job_wire_name(job), job->topk);
    }
    if (job->hidden[0]) {
        n += snprintf(text + n, sizeof text - (size_t)n, " hidden=%s", job->hidden);
    }
    if (job->micro_batch > 0) { /* older jobs keep their hash */
        n += snprintf(text + n, sizeof text - (size_t)n, " micro_batch=%d", job->micro_batch);
    }
    if (ps_job_has_rows(job) && !ps_job_has_servers(job)) {
        n += snprintf(text + n, sizeof text - (size_t)n, " ring_rows=%s",
                      ps_job_ring_rows_name(job));
    }
    if (ps_job_has_rows(job) || !strcmp(job->optimizer, "ftrl")) {
        n += snprintf(text + n, sizeof text - (size_t)n,
                      " embed_dim=%d min_count=%d max_rows=%llu l1=%a l2=%a", job->embed_dim,
                      job->min_count, (unsigned long long)job->max_rows, job->l1, job->l2);
    }
    s_fnv_hex(text, n < (int)sizeof text ? (size_t)n : sizeof text, buf, cap);
}

static const char *const s_resume_flags[PS_JOB_RESUME_FIELDS] = {
    "model",    "hidden",     "mode",      "staleness-lr", "optimizer", "lr",
    "momentum", "weight-decay", "lr-schedule", "warmup-steps", "batch", "micro-batch",
    "seed",     "wire",       "compress",  "l1",           "l2",        "embed-dim",
    "min-count", "max-rows",
};

int ps_job_resume_index(const char *flag)
{
    for (int i = 0; i < PS_JOB_RESUME_FIELDS; i++) {
        if (!strcmp(flag, s_resume_flags[i])) {
            return i;
        }
    }
    return -1;
}

/* x's shortest text that reads back as x ("0.05", not 0.05000000000000000277). */
static void s_real(double x, char *buf, size_t cap)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) {
            return;
        }
    }
}

void ps_job_resume_fields(const ps_job_t *job, ps_job_field_t out[PS_JOB_RESUME_FIELDS])
{
    char v[PS_JOB_RESUME_FIELDS][PS_JOB_FIELD_TEXT];
    snprintf(v[0], sizeof v[0], "%s", job->model);
    snprintf(v[1], sizeof v[1], "%s", job->hidden);
    ps_job_mode_str(job, v[2], sizeof v[2]);
    snprintf(v[3], sizeof v[3], "%d", job->staleness_lr);
    snprintf(v[4], sizeof v[4], "%s", job->optimizer);
    s_real(job->lr, v[5], sizeof v[5]);
    s_real(job->momentum, v[6], sizeof v[6]);
    s_real(job->weight_decay, v[7], sizeof v[7]);
    ps_job_schedule_name(&job->schedule, v[8], sizeof v[8]);
    snprintf(v[9], sizeof v[9], "%lld", (long long)job->schedule.warmup_steps);
    snprintf(v[10], sizeof v[10], "%d", job->batch);
    snprintf(v[11], sizeof v[11], "%d", job->micro_batch);
    snprintf(v[12], sizeof v[12], "%llu", (unsigned long long)job->seed);
    snprintf(v[13], sizeof v[13], "%s", ps_job_wire_name(job));
    ps_job_compress_str(job, v[14], sizeof v[14]);
    s_real(job->l1, v[15], sizeof v[15]);
    s_real(job->l2, v[16], sizeof v[16]);
    snprintf(v[17], sizeof v[17], "%d", job->embed_dim);
    snprintf(v[18], sizeof v[18], "%d", job->min_count);
    snprintf(v[19], sizeof v[19], "%llu", (unsigned long long)job->max_rows);
    for (int i = 0; i < PS_JOB_RESUME_FIELDS; i++) {
        out[i].flag = s_resume_flags[i];
        memcpy(out[i].value, v[i], sizeof out[i].value);
    }
}

void ps_job_resume_hash(const ps_job_field_t f[PS_JOB_RESUME_FIELDS], char *buf, size_t cap)
{
    char text[PS_JOB_RESUME_FIELDS * (PS_JOB_FIELD_TEXT + 20)];
    size_t n = 0;
    for (int i = 0; i < PS_JOB_RESUME_FIELDS; i++) {
        n += (size_t)snprintf(text + n, sizeof text - n, "%s=%s\n", f[i].flag, f[i].value);
    }
    s_fnv_hex(text, n, buf, cap);
}

void ps_job_new_id(char *buf, size_t cap)
{
    unsigned short rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
        rnd = (unsigned short)(getpid() ^ time(NULL));
    }
    time_t now = time(NULL);
    struct tm tm;
    char when[32];
    strftime(when, sizeof when, "%Y%m%dT%H%M%S", gmtime_r(&now, &tm));
    snprintf(buf, cap, "job-%s-%04x", when, rnd);
}

int ps_job_auto_chunk_kib(uint64_t num_params, int servers)
{
    const uint64_t shard_kib = servers > 0 ? num_params * 4 / 1024 / (uint64_t)servers : 0;
    int kib = PS_JOB_CHUNK_KIB_MIN;
    while (kib < PS_JOB_CHUNK_KIB_AUTO_MAX &&
           (uint64_t)kib * 2 * PS_JOB_CHUNK_KIB_SHARD_CHUNKS <= shard_kib) {
        kib *= 2;
    }
    return kib;
}
