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
/* 4: --secure (the nodes' CurveZMQ public keys in Register and the view,
 *    the report's secure_refused); per-node tokens (RegisterAck, Header, the
 *    servers' view), MSG_PEER_READY; job identity at registration, preflight
 *    (MSG_PREFLIGHT_*); observability (MSG_STATUS, metrics reports on
 *    heartbeats, the header's clock); failover (MSG_FAILOVER,
 *    MSG_FAILOVER_READY, the header's generation, Register.spare, the view's
 *    generation and replaced_rank); joins and agreed steps (MSG_JOIN_*, the
 *    view's joining and resume_step), run ids at registration (a restarted
 *    scheduler). */
/* 5: the report's cpu_seconds; Checkpoint.version (async checkpoints); wire
 *    dtypes (fp16, bf16, sparse top-k; the header's nnz, the job's wire and
 *    compress), bytes by message type in Done and ServerReport. */
/* 6: MSG_PUSH_PULL (a push and the pull of its keys in one request; the
 *    header's pull_version). */
#define PS_PROTOCOL_VERSION 6u

/* A Z85 CurveZMQ public key: 40 characters and the NUL. */
enum { PS_CURVE_KEY_LEN = 41 };

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
    PS_MSG_PEER_READY = 21,
    PS_MSG_FAILOVER = 23,
    PS_MSG_FAILOVER_READY = 24,
    PS_MSG_JOIN_PREPARE = 25,
    PS_MSG_JOIN_STEP = 26,
    PS_MSG_STATUS = 27,
    PS_MSG_STATUS_REPLY = 28,
    PS_MSG_PREFLIGHT_PROBE = 29,
    PS_MSG_PREFLIGHT_RESULT = 30,
    PS_MSG_PUSH_PULL = 31,
    PS_MSG_TYPE_MAX = 31,
} ps_msg_type_t;

/* Mirrors Role in shardps.proto. */
typedef enum {
    PS_ROLE_NONE = 0,
    PS_ROLE_SCHEDULER = 1,
    PS_ROLE_SERVER = 2,
    PS_ROLE_WORKER = 3,
} ps_role_t;

/* Mirrors DType in shardps.proto; what a payload is (proto/wire.h). */
enum {
    PS_DTYPE_NONE = 0,
    PS_DTYPE_F32 = 1,
    PS_DTYPE_F16 = 2,
    PS_DTYPE_BF16 = 3,
    PS_DTYPE_SPARSE_F32 = 4,  /* nnz uint32 offsets, then nnz fp32 values */
    PS_DTYPE_SPARSE_F16 = 5,
    PS_DTYPE_SPARSE_BF16 = 6,
    PS_DTYPE_MAX = 6,
};

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
    uint64_t token;       /* worker -> server data: the worker's token; else 0 */
    double clock;         /* REGISTER, REGISTER_ACK: the sender's ps_now(); else 0 */
    int64_t generation;   /* failovers the sender has seen; servers drop older data */
    uint64_t nnz;         /* sparse payload (PS_DTYPE_SPARSE_*): its entries; else 0 */
    int64_t pull_version; /* PS_MSG_PUSH_PULL: the pull's minimum version; else 0 */
} ps_header_t;

/* Largest packed header; headers carry no tensors, so this is small. */
enum { PS_HEADER_MAX = 512 };

/* A server's place in the cluster view. */
typedef struct {
    int rank;           /* server rank */
    char endpoint[128]; /* where workers connect, e.g. tcp://10.0.0.2:41001 */
    uint64_t begin;     /* first key of the server's range */
    uint64_t end;       /* one past its last key */
    char curve_key[PS_CURVE_KEY_LEN]; /* --secure: its Z85 public key; else "" */
} ps_server_info_t;

/* A worker's place in the cluster view (allreduce mode: the ring). */
typedef struct {
    int rank;           /* worker rank */
    char endpoint[128]; /* where its left neighbour connects, e.g. tcp://10.0.0.3:41002 */
    char curve_key[PS_CURVE_KEY_LEN]; /* --secure: its ring socket's Z85 public key; else "" */
} ps_worker_info_t;

enum { PS_MAX_SERVERS = 256, PS_MAX_WORKERS = 256, PS_MAX_EPOCHS = 1000 };

/* Message types a node's byte counts tell apart (= PS_CTX_BYTE_TYPES). */
enum { PS_BYTE_TYPES = 64 };

/* A node's bytes on the wire by message type (ps_ctx_bytes): [t] = type t. */
typedef struct {
    uint64_t sent[PS_BYTE_TYPES];
    uint64_t received[PS_BYTE_TYPES];
} ps_byte_counts_t;

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
    uint64_t worker_tokens[PS_MAX_WORKERS]; /* servers' copy: worker r's token; else all 0 */
    int preflight;             /* non-zero: every worker probes every server before
                                  step 0 (worker/preflight.h) */
    int64_t generation;        /* lost servers replaced so far (scheduler/failover.c) */
    int replaced;              /* 1 + the rank of the server replaced (0 = none): on
                                  a spare's VIEW its new rank; on MSG_FAILOVER the
                                  rank just replaced (for logs: workers compare
                                  every endpoint) */
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
    int64_t version;       /* the server's version in it (updates applied): N in stepped
                              modes, N * workers in async */
} ps_checkpoint_part_t;

typedef struct {
    ps_role_t role;     /* server or worker */
    int rank;           /* wanted rank, -1 for any */
    char endpoint[128]; /* servers: advertised endpoint */
    uint32_t pid;       /* for operators' log lines */
    char curve_key[PS_CURVE_KEY_LEN]; /* --secure: the Z85 public key it serves with; else "" */
    char job_id[64];    /* the job the node belongs to; "" = any */
    char job_hash[PS_JOB_HASH_LEN + 1]; /* its job configuration's hash; "" = unchecked */
    char build[96];     /* ps_codec_build_id() of the node */
    int spare;          /* servers: wait as a spare for a lost server's place */
    uint64_t run_id;    /* 0, or registering again: the run id of its RegisterAck */
} ps_register_t;

/* The scheduler's answer to a registration. */
typedef struct {
    int rank;           /* the node's rank */
    uint64_t token;     /* the node's secret, echoed in its data headers (workers) */
    ps_job_t job;       /* the job configuration */
    char job_id[64];    /* the job's id */
    char job_hash[PS_JOB_HASH_LEN + 1]; /* its configuration's hash */
    uint64_t run_id;    /* this run of the job (kept by a restarted scheduler) */
} ps_register_ack_t;

/* Seconds a server has to answer each preflight probe before the pair is
 * unreachable. */
#define PS_PREFLIGHT_TIMEOUT 3.0

/* One worker-server pair of a preflight. */
typedef struct {
    int server;          /* server rank */
    int reached;         /* non-zero: every probe was answered in time */
    double rtt_ms;       /* median round trip of a small probe, ms */
    double mbytes_per_s; /* bulk probe, 1e6 bytes per second */
} ps_preflight_pair_t;

/* A server's answer to MSG_FAILOVER (MSG_FAILOVER_READY). */
typedef struct {
    int64_t generation;   /* the failover it answers */
    int64_t step;         /* the step it rolled back to, or (stepped) its new version */
    int64_t from_version; /* its version before the rollback */
    int stepped;          /* 0: rolled back; 1: applied the first step after it */
} ps_failover_ready_t;

/* MSG_JOIN_STEP: a server's version (held there), or the step agreed. */
typedef struct {
    int64_t step;   /* server: its version; scheduler: the agreed step J */
    int worker;     /* scheduler: the worker live from J, or -1 */
    int checkpoint; /* scheduler: write checkpoint step-J */
    int members;    /* server 0: the step a MSG_MEMBERS took effect at (for the log) */
    uint64_t token; /* scheduler, with worker: the joining worker's token */
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
    ps_byte_counts_t bytes; /* on the wire by message type, up to the DONE */
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
    uint64_t secure_refused; /* --secure: connections refused by the key check (ZAP) */
    uint64_t forged;   /* requests whose token is not the claimed worker's (within rejected) */
    uint64_t unread_refused; /* pull replies refused: the worker held its share unread */
    double cpu_seconds; /* the server process's CPU time when it reported */
    ps_byte_counts_t bytes; /* on the wire by message type, up to the report */
} ps_server_report_t;

enum { PS_REPORT_MAX_WAITING = 32 };

/* What a node sends with each heartbeat (MSG_HEARTBEAT's optional body). */
typedef struct {
    int64_t step;          /* workers: steps done; servers: the step being collected */
    uint64_t samples;      /* workers: samples processed */
    double loss;           /* workers: mean training loss since the last report */
    double test_accuracy;  /* worker 0: the last evaluation; -1 before the first */
    int epoch;             /* workers: epochs evaluated */
    int nwaiting;          /* servers: live workers the step waits for (at most
                              PS_REPORT_MAX_WAITING listed) */
    int waiting_for[PS_REPORT_MAX_WAITING]; /* their ranks, ascending */
    double waited_seconds; /* servers: how long the step has waited */
    uint64_t bytes_pushed; /* workers: payload bytes pushed (ring: sent) */
    uint64_t bytes_pulled; /* workers: payload bytes pulled (ring: received) */
    char *text;            /* Prometheus text or NULL; pack: borrowed; unpack: caller
                              owns the result (free()) */
} ps_metrics_report_t;

/* One node of the cluster view a scheduler answers MSG_STATUS with. */
typedef struct {
    ps_role_t role;
    int rank;
    char endpoint[128];
    uint32_t pid;
    uint64_t begin, end;        /* servers: their keys */
    char state[16];             /* registered, running, done, lost */
    double silent_seconds;      /* since its last message */
    ps_metrics_report_t report; /* its last report; text always NULL */
    double steps_per_second;    /* workers, over the last seconds */
    double samples_per_second;
} ps_status_node_t;

typedef struct {
    char phase[16];          /* waiting, running, reporting, finished, failed */
    char model[16];
    char mode[32];
    int64_t total_steps;
    double elapsed_seconds;  /* since the scheduler started */
    uint64_t num_params;
    int nnodes;
    ps_status_node_t *nodes; /* unpack: caller owns the result; free with ps_codec_status_fini() */
} ps_status_t;

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
int ps_codec_pack_register_ack(const ps_register_ack_t *a, uint8_t **out, size_t *len);
int ps_codec_unpack_register_ack(const void *data, size_t len, ps_register_ack_t *a);
/* A worker's preflight: n pairs (n <= PS_MAX_SERVERS). Unpack returns the count. */
int ps_codec_pack_preflight(const ps_preflight_pair_t *pairs, int n, uint8_t **out,
                            size_t *len);
int ps_codec_unpack_preflight(const void *data, size_t len, ps_preflight_pair_t *pairs);

/* This build's identity for registration, "`git describe` protocol N" (the
 * project version outside a git checkout), into buf. Thread-safe. */
void ps_codec_build_id(char *buf, size_t cap);
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

/* A server's endpoint once bound for its shard (MSG_PEER_READY). */
int ps_codec_pack_peer_ready(const char *endpoint, uint8_t **out, size_t *len);
int ps_codec_unpack_peer_ready(const void *data, size_t len, char *endpoint, size_t cap);

/* The live workers (MSG_MEMBERS): live[w] non-zero for each live rank of n
 * (<= PS_MAX_WORKERS). unpack_members fills live[0..*n) and refuses a rank
 * outside [0, *n), n outside [1, PS_MAX_WORKERS] or no live worker. */
int ps_codec_pack_members(const unsigned char *live, int n, uint8_t **out, size_t *len);
int ps_codec_unpack_members(const void *data, size_t len, unsigned char *live, int *n);

/* The report a node sends with a heartbeat; unpack leaves r->text NULL
 * when the report has none, and refuses more than PS_REPORT_MAX_WAITING
 * waited-for workers or a text longer than 1 MiB. */
int ps_codec_pack_metrics(const ps_metrics_report_t *r, uint8_t **out, size_t *len);
int ps_codec_unpack_metrics(const void *data, size_t len, ps_metrics_report_t *r);

/* The cluster view for shardps-status (MSG_STATUS_REPLY). */
int ps_codec_pack_status(const ps_status_t *st, uint8_t **out, size_t *len);
int ps_codec_unpack_status(const void *data, size_t len, ps_status_t *st);
/* Frees what ps_codec_unpack_status allocated; st stays valid (no nodes). */
void ps_codec_status_fini(ps_status_t *st);
int ps_codec_pack_failover_ready(const ps_failover_ready_t *r, uint8_t **out, size_t *len);
int ps_codec_unpack_failover_ready(const void *data, size_t len, ps_failover_ready_t *r);
/* MSG_JOIN_STEP; unpack refuses a step outside [0, 2^53] or a worker outside
 * [-1, PS_MAX_WORKERS). */
int ps_codec_pack_join_step(const ps_join_step_t *j, uint8_t **out, size_t *len);
int ps_codec_unpack_join_step(const void *data, size_t len, ps_join_step_t *j);

/* A scheduler's own state (JoinSchedulerState), for a restarted scheduler. */
typedef struct {
    uint64_t run_id;
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
