/*
 * common/job.h - the job configuration: what every node of a job agrees on.
 *
 * The scheduler fills it from its flags, validates it, and sends it inside
 * the cluster view; servers and workers act only on the copy they receive.
 * Plain data; the codec in proto/ maps it to and from the wire. Every check
 * of a job's values lives here (parsers of the text forms, ps_job_validate,
 * ps_job_validate_nodes), so the scheduler, the launcher and the codec agree.
 */
#ifndef PS_COMMON_JOB_H
#define PS_COMMON_JOB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PS_MODE_SYNC = 0,   /* bulk synchronous: a step applies once every worker pushed */
    PS_MODE_ASYNC = 1,  /* every push applies on arrival; pulls return current values */
    PS_MODE_SSP = 2,    /* sync steps, but a worker may run `staleness` steps ahead */
    PS_MODE_BACKUP = 3, /* a step applies once backup_k of the workers pushed */
    PS_MODE_ALLREDUCE = 4, /* no servers: workers sum gradients over a ring and
                              each applies the same optimizer step locally */
} ps_mode_t;

/* Most steps a worker may run ahead under ssp: each costs one gradient copy
 * per worker on every server. */
#define PS_MAX_STALENESS 32

/* Largest learning rate a job accepts: lr is in (0, 10]; momentum and
 * weight decay in [0, 1). */
#define PS_JOB_MAX_LR 10.0

/* How the learning rate changes with the step (evaluated by kernels/optim.h). */
typedef enum {
    PS_LR_CONSTANT = 0, /* lr */
    PS_LR_COSINE = 1,   /* lr * (1 + cos(pi * t / T)) / 2 over the T steps of the job */
    PS_LR_STEP = 2,     /* lr * gamma^floor(epoch / every) */
} ps_lr_kind_t;

typedef struct {
    ps_lr_kind_t kind;    /* the curve */
    int every;            /* PS_LR_STEP: epochs between decays */
    double gamma;         /* PS_LR_STEP: factor per decay */
    int64_t warmup_steps; /* linear warm-up from lr/warmup to lr over these steps */
} ps_lr_schedule_t;

/* How tensors travel (--wire): pushes and pull replies; servers keep fp32. */
typedef enum {
    PS_WIRE_FP32 = 0, /* as computed: bitwise */
    PS_WIRE_FP16 = 1, /* IEEE binary16, round-to-nearest-even */
    PS_WIRE_BF16 = 2, /* bfloat16, round-to-nearest-even */
} ps_wire_kind_t;

/* --ring-rows: how a ctr job's row gradients travel under --mode allreduce
 * (docs/design/rows.md, "The ring's variants"). */
typedef enum {
    PS_RING_ROWS_DENSE = 0,     /* every worker's whole table, summed by the ring with the
                                   dense gradient (Horovod's sparse_as_dense) */
    PS_RING_ROWS_ALLGATHER = 1, /* each worker's rows of the step, sent to every other */
} ps_ring_rows_kind_t;

/* --hidden: at most this many hidden layers, each 1..PS_JOB_MAX_WIDTH wide,
 * as text of at most PS_JOB_HIDDEN_TEXT - 1 characters. */
#define PS_JOB_MAX_HIDDEN 8
#define PS_JOB_MAX_WIDTH 65536
#define PS_JOB_HIDDEN_TEXT 64

/* --chunk-kib: pushes travel, and servers apply and answer them, in chunks
 * of this many KiB of fp32 keys; a power of two, at most a server store's
 * chunk (1 MiB), so a chunk never crosses one. 0 (the default): sized to
 * the shards by the scheduler (ps_job_auto_chunk_kib), from
 * PS_JOB_CHUNK_KIB_MIN to PS_JOB_CHUNK_KIB_AUTO_MAX. */
#define PS_JOB_CHUNK_KIB_MIN 4
#define PS_JOB_CHUNK_KIB_MAX 1024
#define PS_JOB_CHUNK_KIB_AUTO_MAX 16
#define PS_JOB_CHUNK_KIB_SHARD_CHUNKS 32
#define PS_JOB_CHUNK_KIB_DEFAULT 0

/* Largest top-k fraction (--compress topk:R, R in (0, 1]). */
#define PS_JOB_MAX_TOPK 1.0

/* --embed-dim: floats per embedding row, 1 .. PS_JOB_MAX_EMBED_DIM. */
#define PS_JOB_MAX_EMBED_DIM 1024
#define PS_JOB_EMBED_DIM_DEFAULT 16

/* --max-rows: embedding rows per server at most (row indices are 32-bit). */
#define PS_JOB_MAX_ROWS ((uint64_t)UINT32_MAX - 1)

typedef struct {
    char model[16];      /* "mlp" or "cnn" */
    char hidden[PS_JOB_HIDDEN_TEXT]; /* mlp's hidden widths "H1,H2,..."; "" = the default */
    ps_mode_t mode;      /* consistency mode, see ps_mode_t */
    int staleness;       /* PS_MODE_SSP: s in ssp:s */
    int backup_k;        /* PS_MODE_BACKUP: k in sync:k/n (n = the number of workers) */
    int backup_n;        /* PS_MODE_BACKUP: n in sync:k/n */
    int staleness_lr;    /* async, ssp: weight a gradient tau > 1 versions stale by 1/tau */
    int straggler_rank;  /* worker slowed down for experiments, -1 = none */
    double straggler_factor; /* its compute takes this many times as long (>= 1) */
    char optimizer[16];  /* sgd, nesterov, adam, adagrad or ftrl (run by the servers, or
                            by every worker in allreduce mode) */
    double lr;           /* learning rate */
    double momentum;     /* SGD momentum (0 = plain SGD) */
    double weight_decay; /* L2 penalty added to the gradient */
    ps_lr_schedule_t schedule; /* learning-rate schedule */
    int batch;           /* samples per worker per step */
    int micro_batch;     /* --micro-batch: a worker's gradient is the sum of its batch's
                            micro-batches of this many samples (each its mean), and a step
                            divides by every worker's micro-batches; 0 = one, the batch */
    int epochs;          /* passes over the training set */
    int64_t max_steps;   /* stop after this many steps per worker; 0 = no limit */
    uint64_t seed;       /* drives initialisation and the global sample order */
    ps_wire_kind_t wire; /* dtype of pushes and pull replies */
    double topk;         /* --compress topk:R: pushes send this fraction of each part's
                            keys (error feedback keeps the rest); 0 = dense */
    int chunk_kib;       /* --chunk-kib: the pipeline's chunk, KiB of fp32 keys (0: auto; not in
                            the job's hash: it moves no value) */
    double l1;           /* ftrl: L1 strength (lambda1 of McMahan et al. 2013); >= 0 */
    double l2;           /* ftrl: L2 strength (lambda2); >= 0 */
    int embed_dim;       /* ctr: floats per embedding row (--embed-dim) */
    int min_count;       /* ctr: a key gets a row on its min_count-th update (--min-count);
                            before that it reads as zeros and its gradients are dropped */
    uint64_t max_rows;   /* ctr: embedding rows per server at most (--max-rows); 0 = no cap */
    ps_ring_rows_kind_t ring_rows; /* ctr with allreduce: how the rows' gradients travel
                                      (--ring-rows); dense for every other job */
} ps_job_t;

/* Fills *job with the project defaults. */
void ps_job_defaults(ps_job_t *job);

/* Parses "sync", "async", "ssp:S", "sync:K/N" or "allreduce" into job's mode fields.
 * Returns 0 or PS_EINVAL. */
int ps_job_parse_mode(const char *text, ps_job_t *job);

/* Writes the mode's text form (as parsed above) into buf. */
void ps_job_mode_str(const ps_job_t *job, char *buf, size_t cap);

/* Parses "fp32", "fp16" or "bf16" into job->wire. Returns 0 or PS_EINVAL. */
int ps_job_parse_wire(const char *text, ps_job_t *job);

/* The --wire text of job->wire. */
const char *ps_job_wire_name(const ps_job_t *job);

/* Parses "dense" or "allgather" into job->ring_rows. Returns 0 or PS_EINVAL. */
int ps_job_parse_ring_rows(const char *text, ps_job_t *job);

/* The --ring-rows text of job->ring_rows ("?" for a value out of the enum). */
const char *ps_job_ring_rows_name(const ps_job_t *job);

/* Parses "none" or "topk:R" (0 < R <= 1) into job->topk. Returns 0 or PS_EINVAL. */
int ps_job_parse_compress(const char *text, ps_job_t *job);

/* Writes the --compress text of job->topk ("none", "topk:0.01") into buf. */
void ps_job_compress_str(const ps_job_t *job, char *buf, size_t cap);

/* Non-zero when steps go in chunked rounds: sync and ssp (sync:k/n picks a
 * step's k workers from whole pushes; async has no steps). */
static inline int ps_job_chunked(const ps_job_t *job)
{
    return job->mode == PS_MODE_SYNC || job->mode == PS_MODE_SSP;
}

/* The chunk --chunk-kib 0 stands for, for num_params keys over servers:
 * the largest power of two KiB that cuts a mean shard into
 * PS_JOB_CHUNK_KIB_SHARD_CHUNKS chunks or more, within [PS_JOB_CHUNK_KIB_MIN,
 * PS_JOB_CHUNK_KIB_AUTO_MAX]: a narrow shard gets small chunks, so that
 * its pushes can go in small messages and each server's pipeline fills and
 * drains fast (worker/kv_slots.h), a wide one the larger chunks whose
 * turns and messages cost the cores less. */
int ps_job_auto_chunk_kib(uint64_t num_params, int servers);

/* Keys of a pipeline chunk: job->chunk_kib KiB of fp32 keys (resolved: the
 * scheduler's view never carries 0). */
static inline uint64_t ps_job_chunk_keys(const ps_job_t *job)
{
    return (uint64_t)job->chunk_kib * 1024 / 4;
}

/* Parses --hidden's "H1,H2,..." (1 to PS_JOB_MAX_HIDDEN widths, each in
 * [1, PS_JOB_MAX_WIDTH]) into widths[0..*n). Returns 0 or PS_EINVAL. */
int ps_job_parse_hidden(const char *text, int *widths, int *n);

/* Parses "RANK:FACTOR" (FACTOR >= 1) into the straggler fields. Returns 0 or PS_EINVAL. */
int ps_job_parse_straggler(const char *text, ps_job_t *job);

/*
 * Async over M workers with --staleness-lr: staleness adds momentum of about
 * 1 - 1/M of its own (Mitliagkas et al., "Asynchrony begets momentum", 2016),
 * so the servers run SGD (or Nesterov) momentum lowered by that much, not
 * below 0, and raise the rate by (1 - lowered) / (1 - the job's), so that
 * lr / (1 - momentum), how far a steady gradient moves a parameter, stays
 * the job's. Returns the momentum the servers run; *rate gets the factor
 * (the job's momentum and 1 when nothing changes: other modes, optimizers,
 * one worker, no momentum, --staleness-lr 0).
 */
double ps_job_async_momentum(const ps_job_t *job, int workers, double *rate);

/* Micro-batches in a worker's batch (1 without --micro-batch). */
static inline int ps_job_micro_batches(const ps_job_t *job)
{
    return job->micro_batch > 0 ? job->batch / job->micro_batch : 1;
}

/* Non-zero for the modes that apply whole steps (sync, ssp, backup, allreduce). */
static inline int ps_job_is_stepped(const ps_job_t *job)
{
    return job->mode != PS_MODE_ASYNC;
}

/* Non-zero for the modes that keep parameters on servers (all but allreduce). */
static inline int ps_job_has_servers(const ps_job_t *job)
{
    return job->mode != PS_MODE_ALLREDUCE;
}

/* A new embedding row's values are uniform in +-this (kernels/optim.h,
 * ps_optim_row_init): 1/sqrt(embed_dim), so a row has about the norm of a
 * dense layer's input, whatever its width. */
float ps_job_row_bound(const ps_job_t *job);

/* The click model's categorical fields (Criteo's C1..C26): one key each per
 * sample. */
#define PS_JOB_ROW_FIELDS 26

/* Samples a worker evaluates at once: the model's batch buffers hold at
 * least this many. */
#define PS_JOB_EVAL_BATCH 256

/* The longest rows message of the job, in bytes: a step's keys (or an
 * evaluation chunk's), each with its row. A server's socket must take it.
 * 0 for a job without rows. */
uint64_t ps_job_rows_frame_max(const ps_job_t *job);

/* Whether the job's model has embedding rows (--model ctr): rows are pulled
 * and pushed by key, beside the dense parameters. */
static inline int ps_job_has_rows(const ps_job_t *job)
{
    return job->model[0] == 'c' && job->model[1] == 't' && job->model[2] == 'r' &&
           job->model[3] == '\0';
}

/* Parses "constant", "cosine" or "step:EVERY:GAMMA" into s (warmup untouched).
 * Returns 0 or PS_EINVAL. */
int ps_job_parse_schedule(const char *text, ps_lr_schedule_t *s);

/* Writes the schedule's text form (as parsed above) into buf. */
void ps_job_schedule_name(const ps_lr_schedule_t *s, char *buf, size_t cap);


/* Most servers, and most workers, in one job. */
#define PS_JOB_MAX_NODES 256

/* Checks every field. Returns 0, or PS_EINVAL with a one-line reason in err.
 * What a node checks on the job it receives (proto/codec.c). */
int ps_job_validate(const ps_job_t *job, char *err, size_t errlen);

/* Checks the job against the cluster that runs it: 1..PS_JOB_MAX_NODES
 * servers (exactly 0 under allreduce), 1..PS_JOB_MAX_NODES workers, N of
 * sync:K/N equal to the workers, the straggler one of them. Only those: call
 * ps_job_validate() for the fields. Returns 0, or PS_EINVAL with a one-line
 * reason in err that names the flag (--servers, --workers, --mode, --straggler).
 * Used by the scheduler and, before it starts anything, by shardps-launch. */
int ps_job_validate_nodes(const ps_job_t *job, int servers, int workers, char *err,
                          size_t errlen);

/*
 * The job configuration's identity: 16 lowercase hex digits (FNV-1a 64) of
 * every field of *job and the node counts, in one canonical text form, so two
 * processes that parsed the same job flags agree and any other value differs.
 * Written into buf (at least PS_JOB_HASH_LEN + 1 bytes). Thread-safe.
 */
#define PS_JOB_HASH_LEN 16
void ps_job_hash(const ps_job_t *job, int servers, int workers, char *buf, size_t cap);

/*
 * The flags a resumed job must keep: those that change its arithmetic (the
 * model, the mode, the optimizer and its settings, the batch, the seed, the
 * wire). The rest may change on any resume: --epochs, --max-steps, the node
 * counts, --chunk-kib (it moves no value), --straggler, logging and outputs.
 * ps_job_resume_fields writes each flag (its name without "--") and its
 * value in the flag's text form, in this fixed order; ps_job_resume_hash is
 * the FNV-1a 64 of them, as 16 hex digits. Thread-safe.
 */
enum { PS_JOB_RESUME_FIELDS = 20, PS_JOB_FIELD_TEXT = PS_JOB_HIDDEN_TEXT };
typedef struct {
    const char *flag;               /* "lr", "batch", ... (static) */
    char value[PS_JOB_FIELD_TEXT];  /* "0.05", "64", ... */
} ps_job_field_t;
void ps_job_resume_fields(const ps_job_t *job, ps_job_field_t out[PS_JOB_RESUME_FIELDS]);
void ps_job_resume_hash(const ps_job_field_t f[PS_JOB_RESUME_FIELDS], char *buf, size_t cap);

/* Index of flag among the resume fields, or -1. */
int ps_job_resume_index(const char *flag);

/* A fresh job id, "job-YYYYmmddTHHMMSS-RAND" (UTC start time, 16 random bits:
 * two jobs started in the same second on one machine still differ), into buf. */
void ps_job_new_id(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
