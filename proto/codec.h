/*
 * proto/codec.h - plain C views of the wire messages, and their encoding.
 *
 * The only module that touches protobuf-c: everything else sees the structs
 * below. Decoding validates what can be checked without context (protocol
 * version, known type, known role, dtype, range order, string sizes); callers
 * check what needs context (sender known, range inside the shard).
 */
#ifndef PS_PROTO_CODEC_H
#define PS_PROTO_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/hist.h"
#include "common/job.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: checkpoints (MSG_CHECKPOINT, the view's checkpoint and resume fields). */
/* 3: membership (MSG_MEMBERS, the report's steps_fewer_workers). */
/* 4: joins and agreed steps (MSG_JOIN_*, the view's joining and resume_step),
 *    job ids at registration (a restarted scheduler). */
#define PS_PROTOCOL_VERSION 4u

/* Mirrors MsgType in shardps.proto. */
typedef enum {
    PS_MSG_NONE = 0,
    PS_MSG_REGISTER = 1,
    PS_MSG_REGISTER_ACK = 2,
    PS_MSG_MODEL_INFO = 3,
    PS_MSG_VIEW = 4,
    PS_MSG_BARRIER = 5,
    PS_MSG_BARRIER_DONE = 6,
    PS_MSG_HEARTBEAT = 7,
    PS_MSG_SHUTDOWN = 8,
    PS_MSG_DONE = 9,
    PS_MSG_PUSH = 10,
    PS_MSG_PUSH_ACK = 11,
    PS_MSG_PULL = 12,
    PS_MSG_PULL_REPLY = 13,
    PS_MSG_INIT = 14,
    PS_MSG_INIT_ACK = 15,
    PS_MSG_ERROR = 16,
    PS_MSG_REPORT = 17,
    PS_MSG_RING_DATA = 18,
    PS_MSG_CHECKPOINT = 19,
    PS_MSG_MEMBERS = 20,
    PS_MSG_JOIN_PREPARE = 25,
    PS_MSG_JOIN_STEP = 26,
    PS_MSG_TYPE_MAX = 26,
} ps_msg_type_t;

/* Mirrors Role in shardps.proto. */
typedef enum {
    PS_ROLE_NONE = 0,
    PS_ROLE_SCHEDULER = 1,
    PS_ROLE_SERVER = 2,
    PS_ROLE_WORKER = 3,
} ps_role_t;

enum { PS_DTYPE_NONE = 0, PS_DTYPE_F32 = 1 };

typedef struct {
    uint32_t protocol;    /* PS_PROTOCOL_VERSION */
    ps_msg_type_t type;   /* what this message is */
    ps_role_t role;       /* sender's role */
    int32_t sender;       /* sender's rank within its role */
    uint64_t request_id;  /* echoed in replies */
    uint64_t begin, end;  /* key range [begin, end) in elements */
    int64_t step;         /* push: step; pull: minimum version wanted */
    int64_t version;      /* push: version computed on; reply: version served */
    uint32_t dtype;       /* PS_DTYPE_* of the payload */
    uint64_t payload_len; /* bytes in the payload frames */
    int32_t status;       /* 0 or PS_E* */
    char error[160];      /* reason when status != 0 */
    int32_t ring_step;    /* ring data: 0..M-2 reduce-scatter, M-1..2M-3 all-gather */
} ps_header_t;

/* Largest packed header; headers carry no tensors, so this is small. */
enum { PS_HEADER_MAX = 512 };

/* A server's place in the cluster view. */
typedef struct {
    int rank;           /* server rank */
    char endpoint[128]; /* where workers connect, e.g. tcp://10.0.0.2:41001 */
    uint64_t begin;     /* first key of the server's range */
    uint64_t end;       /* one past its last key */
} ps_server_info_t;

/* A worker's place in the cluster view (allreduce mode: the ring). */
typedef struct {
    int rank;           /* worker rank */
    char endpoint[128]; /* where its left neighbour connects, e.g. tcp://10.0.0.3:41002 */
} ps_worker_info_t;

enum { PS_MAX_SERVERS = 256, PS_MAX_WORKERS = 256, PS_MAX_EPOCHS = 1000 };

/* The one source of truth every node acts on. */
typedef struct {
    uint64_t num_params;                        /* P */
    int num_workers;                            /* M */
    int num_servers;                            /* S; 0 exactly in allreduce mode */
    int64_t steps_per_epoch;                    /* global steps per pass over the data */
    int64_t total_steps;                        /* steps of the whole job */
    ps_server_info_t servers[PS_MAX_SERVERS];   /* S entries, ranges in key order */
    ps_worker_info_t workers[PS_MAX_WORKERS];   /* allreduce: M entries in rank order */
    ps_job_t job;                               /* the job configuration */
    char checkpoint_dir[512];  /* where servers write checkpoints; "" = none */
    int64_t checkpoint_every;  /* steps between checkpoints; 0 = none */
    int64_t start_step;        /* the step the job starts at (resumed: N, else 0) */
    char resume_dir[600];      /* resumed: DIR/step-N, the parts to load; else "" */
    int resume_parts;          /* resumed: server-0 .. server-(this-1) in resume_dir */
    int64_t resume_step;       /* resumed with other workers: the checkpoint's step; else 0 */
    int joining;               /* this worker joins a running job at start_step */
} ps_view_t;

/* A server's part of a checkpoint, written and synced (MSG_CHECKPOINT). */
typedef struct {
    int64_t step;          /* the checkpoint: the version after step N's update is N */
    char file[64];         /* its name inside DIR/step-N/ */
    uint64_t size;         /* bytes */
    uint32_t crc32;        /* zlib's CRC-32 of the file */
    uint64_t begin, end;   /* its keys */
} ps_checkpoint_part_t;

typedef struct {
    ps_role_t role;     /* server or worker */
    int rank;           /* wanted rank, -1 for any */
    char endpoint[128]; /* servers: advertised endpoint */
    uint32_t pid;       /* for operators' log lines */
    uint64_t job_id;    /* 0, or registering again: the job id of its RegisterAck */
} ps_register_t;

/* MSG_JOIN_STEP: a server's version (held there), or the step agreed. */
typedef struct {
    int64_t step;   /* server: its version; scheduler: the agreed step J */
    int worker;     /* scheduler: the worker live from J, or -1 */
    int checkpoint; /* scheduler: write checkpoint step-J */
    int members;    /* server 0: the step a MSG_MEMBERS took effect at (for the log) */
} ps_join_step_t;

/* Largest step a JoinStep carries (as the header's steps: 2^53). */
#define PS_JOIN_MAX_STEP (INT64_C(1) << 53)

/* What a worker tells the scheduler once it knows the job (before the view). */
typedef struct {
    uint64_t num_params;    /* P of its model */
    uint64_t train_samples; /* size of its training set */
    char endpoint[128];     /* allreduce: where its left neighbour connects; else "" */
} ps_model_info_t;

/* What a worker reports at the end of its job. */
typedef struct {
    int64_t steps;          /* steps taken */
    int64_t samples;        /* training samples processed */
    uint64_t bytes_pushed;  /* payload bytes sent in pushes (allreduce: sent on the ring) */
    uint64_t bytes_pulled;  /* payload bytes received in pulls (allreduce: from the ring) */
    double train_seconds;   /* wall time of the training loop */
    double compute_seconds; /* forward + backward */
    double wait_seconds;    /* blocked on pulls/pushes/barriers */
    int num_epochs_evaluated;
    double test_accuracy[PS_MAX_EPOCHS]; /* worker 0: after each epoch */
    double final_loss;      /* mean training loss of the last epoch */
} ps_done_t;

/* What a server reports at the end of a job. */
typedef struct {
    uint64_t pushes;   /* pushes accepted */
    uint64_t pulls;    /* pulls answered */
    uint64_t rejected; /* invalid messages */
    uint64_t dropped;  /* late pushes dropped (sync:k/n) */
    uint64_t nonfinite; /* pushes refused for a NaN or an infinity (within rejected) */
    int64_t version;   /* updates applied */
    ps_hist_t staleness; /* of every applied gradient */
    int64_t steps_fewer_workers; /* steps applied with fewer live workers than the view's */
} ps_server_report_t;

/* Header: pack into buf (cap bytes). Returns the packed length or PS_EINVAL. */
int ps_codec_pack_header(const ps_header_t *h, uint8_t *buf, size_t cap);

/* Header: unpack and validate. Returns 0, or PS_EPROTO with the reason in h->error
 * (h is zeroed first, so a caller can still reply to what it could read). */
int ps_codec_unpack_header(const void *data, size_t len, ps_header_t *h);

/* Control bodies. Each pack_* returns a malloc'd buffer in *out and its length
 * (caller owns the result; free with free()) or PS_ENOMEM/PS_EINVAL. Each
 * unpack_* returns 0 or PS_EPROTO. */
int ps_codec_pack_register(const ps_register_t *r, uint8_t **out, size_t *len);
int ps_codec_unpack_register(const void *data, size_t len, ps_register_t *r);
int ps_codec_pack_register_ack(int rank, const ps_job_t *job, uint64_t job_id, uint8_t **out,
                               size_t *len);
int ps_codec_unpack_register_ack(const void *data, size_t len, int *rank, ps_job_t *job,
                                 uint64_t *job_id);
int ps_codec_pack_model_info(const ps_model_info_t *mi, uint8_t **out, size_t *len);
int ps_codec_unpack_model_info(const void *data, size_t len, ps_model_info_t *mi);
/* A view is valid with S >= 1 servers whose ranges tile [0, P) in rank order,
 * or, in allreduce mode only, with no servers and M workers in rank order,
 * each with an endpoint. pack_view refuses (PS_EINVAL) what unpack_view would. */
int ps_codec_pack_view(const ps_view_t *v, uint8_t **out, size_t *len);
int ps_codec_unpack_view(const void *data, size_t len, ps_view_t *v);
int ps_codec_pack_barrier(const char *name, uint8_t **out, size_t *len);
int ps_codec_unpack_barrier(const void *data, size_t len, char *name, size_t cap);
int ps_codec_pack_shutdown(int status, const char *reason, uint8_t **out, size_t *len);
int ps_codec_unpack_shutdown(const void *data, size_t len, int *status, char *reason,
                             size_t cap);
int ps_codec_pack_done(const ps_done_t *d, uint8_t **out, size_t *len);
int ps_codec_unpack_done(const void *data, size_t len, ps_done_t *d);

int ps_codec_pack_checkpoint(const ps_checkpoint_part_t *c, uint8_t **out, size_t *len);
int ps_codec_unpack_checkpoint(const void *data, size_t len, ps_checkpoint_part_t *c);

int ps_codec_pack_report(const ps_server_report_t *r, uint8_t **out, size_t *len);
int ps_codec_unpack_report(const void *data, size_t len, ps_server_report_t *r);

/* The live workers (MSG_MEMBERS): live[w] non-zero for each live rank of n
 * (<= PS_MAX_WORKERS). unpack_members fills live[0..*n) and refuses a rank
 * outside [0, *n), n outside [1, PS_MAX_WORKERS] or no live worker. */
int ps_codec_pack_members(const unsigned char *live, int n, uint8_t **out, size_t *len);
int ps_codec_unpack_members(const void *data, size_t len, unsigned char *live, int *n);

/* MSG_JOIN_STEP; unpack refuses a step outside [0, 2^53] or a worker outside
 * [-1, PS_MAX_WORKERS). */
int ps_codec_pack_join_step(const ps_join_step_t *j, uint8_t **out, size_t *len);
int ps_codec_unpack_join_step(const void *data, size_t len, ps_join_step_t *j);

/* A scheduler's own state (JoinSchedulerState), for a restarted scheduler. */
typedef struct {
    uint64_t job_id;
    unsigned char lost[PS_MAX_WORKERS]; /* [w] non-zero: worker w left out */
    int membership_changes;
    int workers_joined;
    int restarts;         /* scheduler restarts so far */
    int64_t checkpoint;   /* newest complete checkpoint's step, -1 none */
    double seconds;       /* the job's time so far */
    int finished;         /* the job ended */
} ps_sched_state_t;

/* The state with the view v; unpack refuses a view that does not decode and
 * a lost rank outside the view's workers. */
int ps_codec_pack_sched_state(const ps_sched_state_t *st, const ps_view_t *v, uint8_t **out,
                              size_t *len);
int ps_codec_unpack_sched_state(const void *data, size_t len, ps_sched_state_t *st,
                                ps_view_t *v);

/* Names for logs. */
const char *ps_codec_type_name(int type);
const char *ps_codec_role_tag(ps_role_t role); /* "C", "S", "W" */

#ifdef __cplusplus
}
#endif
#endif
