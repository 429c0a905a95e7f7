/*
 * proto/codec.h - the wire messages: protobuf-c's generated structs
 * (proto/shardps.pb-c.h, from shardps.proto) and what the library does not do
 * for them.
 *
 * Call sites read and fill the generated structs (Shardps__Header,
 * Shardps__Register, ...) themselves. This module adds: the checks of every
 * message that need no context (protocol version, known type and role,
 * dtype, range order, string sizes, view tiling, step bounds...), run by
 * ps_codec_unpack() so malformed input is refused with a one-line reason;
 * unpacking into an arena (proto/arena.h) so the data path mallocs nothing;
 * and the conversions at the edge of the domain types that are state
 * rather than messages: the cluster view every node keeps (ps_view_t), the
 * job configuration (ps_job_t, common/job.h) and a checkpoint part as a
 * manifest lists it (ps_checkpoint_part_t). Callers check what needs
 * context (sender known, range inside the shard).
 *
 * Sending and receiving a message is proto/msg.h (ps_msg_send_body,
 * ps_msg_unpack_body); this module knows no sockets.
 *
 * Thread safety: plain functions; an arena is one thread's at a time.
 */
#ifndef PS_PROTO_CODEC_H
#define PS_PROTO_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/hist.h"
#include "common/job.h"
#include "proto/arena.h"
#include "proto/range.h"
#include "proto/shardps.pb-c.h"

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
/* 7: authenticated registration (MSG_CHALLENGE, Register.nonce and proof),
 *    ring data carries its sender's token. */
/* 8: embedding rows (MSG_ROWS_*, ServerInfo's row ranges, the job's
 *    embed_dim, min_count, max_rows, l1, l2, micro_batch and ring_rows;
 *    Done's test_auc and test_logloss, ServerReport's rows). */
/* 9: rows messages name their piece of the server's rows range (the
 *    header's piece): a step's rows apply and answer piece by piece. */
#define PS_PROTOCOL_VERSION 9u

/* A Z85 CurveZMQ public key: 40 characters and the NUL. */
enum { PS_CURVE_KEY_LEN = 41 };

/* Short names for the values of the generated enums (MsgType, Role, DType);
 * the types are the generated ones. */
typedef Shardps__MsgType ps_msg_type_t;
#define PS_MSG_NONE SHARDPS__MSG_TYPE__MSG_NONE
#define PS_MSG_REGISTER SHARDPS__MSG_TYPE__MSG_REGISTER
#define PS_MSG_REGISTER_ACK SHARDPS__MSG_TYPE__MSG_REGISTER_ACK
#define PS_MSG_MODEL_INFO SHARDPS__MSG_TYPE__MSG_MODEL_INFO
#define PS_MSG_VIEW SHARDPS__MSG_TYPE__MSG_VIEW
#define PS_MSG_BARRIER SHARDPS__MSG_TYPE__MSG_BARRIER
#define PS_MSG_BARRIER_DONE SHARDPS__MSG_TYPE__MSG_BARRIER_DONE
#define PS_MSG_HEARTBEAT SHARDPS__MSG_TYPE__MSG_HEARTBEAT
#define PS_MSG_SHUTDOWN SHARDPS__MSG_TYPE__MSG_SHUTDOWN
#define PS_MSG_DONE SHARDPS__MSG_TYPE__MSG_DONE
#define PS_MSG_PUSH SHARDPS__MSG_TYPE__MSG_PUSH
#define PS_MSG_PUSH_ACK SHARDPS__MSG_TYPE__MSG_PUSH_ACK
#define PS_MSG_PULL SHARDPS__MSG_TYPE__MSG_PULL
#define PS_MSG_PULL_REPLY SHARDPS__MSG_TYPE__MSG_PULL_REPLY
#define PS_MSG_INIT SHARDPS__MSG_TYPE__MSG_INIT
#define PS_MSG_INIT_ACK SHARDPS__MSG_TYPE__MSG_INIT_ACK
#define PS_MSG_ERROR SHARDPS__MSG_TYPE__MSG_ERROR
#define PS_MSG_REPORT SHARDPS__MSG_TYPE__MSG_REPORT
#define PS_MSG_RING_DATA SHARDPS__MSG_TYPE__MSG_RING_DATA
#define PS_MSG_CHECKPOINT SHARDPS__MSG_TYPE__MSG_CHECKPOINT
#define PS_MSG_MEMBERS SHARDPS__MSG_TYPE__MSG_MEMBERS
#define PS_MSG_PEER_READY SHARDPS__MSG_TYPE__MSG_PEER_READY
#define PS_MSG_FAILOVER SHARDPS__MSG_TYPE__MSG_FAILOVER
#define PS_MSG_FAILOVER_READY SHARDPS__MSG_TYPE__MSG_FAILOVER_READY
#define PS_MSG_JOIN_PREPARE SHARDPS__MSG_TYPE__MSG_JOIN_PREPARE
#define PS_MSG_JOIN_STEP SHARDPS__MSG_TYPE__MSG_JOIN_STEP
#define PS_MSG_STATUS SHARDPS__MSG_TYPE__MSG_STATUS
#define PS_MSG_STATUS_REPLY SHARDPS__MSG_TYPE__MSG_STATUS_REPLY
#define PS_MSG_PREFLIGHT_PROBE SHARDPS__MSG_TYPE__MSG_PREFLIGHT_PROBE
#define PS_MSG_PREFLIGHT_RESULT SHARDPS__MSG_TYPE__MSG_PREFLIGHT_RESULT
#define PS_MSG_PUSH_PULL SHARDPS__MSG_TYPE__MSG_PUSH_PULL
#define PS_MSG_CHALLENGE SHARDPS__MSG_TYPE__MSG_CHALLENGE
#define PS_MSG_RESUME_CHECK SHARDPS__MSG_TYPE__MSG_RESUME_CHECK
#define PS_MSG_REPLICA SHARDPS__MSG_TYPE__MSG_REPLICA
#define PS_MSG_REPLICATE SHARDPS__MSG_TYPE__MSG_REPLICATE
#define PS_MSG_REPLICA_SNAPSHOT SHARDPS__MSG_TYPE__MSG_REPLICA_SNAPSHOT
#define PS_MSG_REPLICA_ACK SHARDPS__MSG_TYPE__MSG_REPLICA_ACK
#define PS_MSG_ROWS_PULL SHARDPS__MSG_TYPE__MSG_ROWS_PULL
#define PS_MSG_ROWS SHARDPS__MSG_TYPE__MSG_ROWS
#define PS_MSG_ROWS_PUSH SHARDPS__MSG_TYPE__MSG_ROWS_PUSH
#define PS_MSG_TYPE_MAX SHARDPS__MSG_TYPE__MSG_ROWS_PUSH

typedef Shardps__Role ps_role_t;
#define PS_ROLE_NONE SHARDPS__ROLE__ROLE_NONE
#define PS_ROLE_SCHEDULER SHARDPS__ROLE__ROLE_SCHEDULER
#define PS_ROLE_SERVER SHARDPS__ROLE__ROLE_SERVER
#define PS_ROLE_WORKER SHARDPS__ROLE__ROLE_WORKER

/* What a payload is (proto/wire.h). */
#define PS_DTYPE_NONE SHARDPS__DTYPE__DTYPE_NONE
#define PS_DTYPE_F32 SHARDPS__DTYPE__DTYPE_F32
#define PS_DTYPE_F16 SHARDPS__DTYPE__DTYPE_F16
#define PS_DTYPE_BF16 SHARDPS__DTYPE__DTYPE_BF16
/* sparse: nnz uint32 offsets, then nnz values */
#define PS_DTYPE_SPARSE_F32 SHARDPS__DTYPE__DTYPE_SPARSE_F32
#define PS_DTYPE_SPARSE_F16 SHARDPS__DTYPE__DTYPE_SPARSE_F16
#define PS_DTYPE_SPARSE_BF16 SHARDPS__DTYPE__DTYPE_SPARSE_BF16
#define PS_DTYPE_MAX SHARDPS__DTYPE__DTYPE_SPARSE_BF16

/* Largest packed header (headers carry no tensors), and the longest error
 * text a header keeps (a longer one is read as ""). */
enum { PS_HEADER_MAX = 512, PS_ERROR_MAX = 160 };

/* Bounds the checks enforce. Strings are counted without their NUL: a
 * string must be shorter than its bound. */
enum {
    PS_MAX_SERVERS = 256,
    PS_MAX_WORKERS = 256,
    PS_MAX_REPLICAS = 3,        /* ClusterView.replicas: hot replicas of each server's keys */
    PS_MAX_EPOCHS = 1000,       /* Done.test_accuracy */
    PS_BYTE_TYPES = 64,         /* byte counts by message type (= PS_CTX_BYTE_TYPES) */
    PS_REPORT_MAX_WAITING = 32, /* MetricsReport.waiting_for */
    PS_ENDPOINT_MAX = 128,      /* every endpoint */
    PS_JOB_ID_MAX = 64,         /* Register.job_id, RegisterAck.job_id */
    PS_BUILD_MAX = 96,          /* Register.build */
    PS_BARRIER_NAME_MAX = 64,   /* Barrier.name */
    PS_CHECKPOINT_FILE_MAX = 64, /* Checkpoint.file */
    PS_MAX_RESUME_CHECK = 16,   /* ResumeCheck.parts: the newest checkpoints a resume weighs */
    PS_MAX_ROWS_MSG = 1 << 20,  /* keys of one MSG_ROWS_* (its nnz) */
    PS_DIR_MAX = 512,           /* ClusterView.checkpoint_dir */
    PS_RESUME_DIR_MAX = 600,    /* ClusterView.resume_dir */
    PS_STATUS_WORD_MAX = 16,    /* StatusReply.phase, .model, StatusNode.state */
    PS_STATUS_MODE_MAX = 32,    /* StatusReply.mode */
};

/* Longest metrics text a report may carry. */
#define PS_METRICS_TEXT_MAX (1u << 20)

/* Largest step a JoinStep carries (as the header's steps: 2^53). */
#define PS_JOIN_MAX_STEP (INT64_C(1) << 53)

/* Seconds a server has to answer each preflight probe before the pair is
 * unreachable. */
#define PS_PREFLIGHT_TIMEOUT 3.0

/* ---- the cluster view: state every node keeps, sent as a ClusterView ---- */

/* A server's place in the cluster view. */
typedef struct {
    int rank;                         /* server rank */
    char endpoint[PS_ENDPOINT_MAX];   /* where workers connect, e.g. tcp://10.0.0.2:41001 */
    uint64_t begin;                   /* first key of the server's range */
    uint64_t end;                     /* one past its last key */
    char curve_key[PS_CURVE_KEY_LEN]; /* --secure: its Z85 public key; else "" */
    ps_rowrange_t rows;               /* a job with embedding rows: the hashes of the
                                         row keys it holds (proto/range.h); else 0, 0 */
} ps_server_info_t;

/* A worker's place in the cluster view (allreduce mode: the ring). */
typedef struct {
    int rank;                         /* worker rank */
    char endpoint[PS_ENDPOINT_MAX];   /* where its left neighbour connects */
    char curve_key[PS_CURVE_KEY_LEN]; /* --secure: its ring socket's Z85 public key; else "" */
} ps_worker_info_t;

/* A checkpoint part: the file a server wrote and synced, as the scheduler's
 * manifest lists it (kept per server and step until the checkpoint is
 * complete, and read back by the tests), so a domain type; it travels as a
 * Checkpoint (MSG_CHECKPOINT), converted by ps_codec_part_to_pb and
 * ps_codec_part_from_pb. */
typedef struct {
    int64_t step;          /* the checkpoint: the version after step N's update is N */
    char file[PS_CHECKPOINT_FILE_MAX]; /* its name inside DIR/step-N/ */
    uint64_t size;         /* bytes */
    uint32_t crc32;        /* zlib's CRC-32 of the file */
    uint64_t begin, end;   /* its keys */
    int64_t version;       /* the server's version in it (updates applied): N in stepped
                              modes, N * workers in async */
} ps_checkpoint_part_t;

/* The one source of truth every node acts on: indexed by rank and kept for
 * the whole job, so it is a domain type, converted once at the edge
 * (ps_codec_view_to_pb, ps_codec_view_from_pb). */
typedef struct {
    uint64_t num_params;                        /* P */
    int num_workers;                            /* M */
    int num_servers;                            /* S; 0 exactly in allreduce mode */
    int64_t steps_per_epoch;                    /* global steps per pass over the data */
    int64_t total_steps;                        /* steps of the whole job */
    ps_server_info_t servers[PS_MAX_SERVERS];   /* S entries, ranges in key order */
    ps_worker_info_t workers[PS_MAX_WORKERS];   /* allreduce: M entries in rank order */
    ps_job_t job;                               /* the job configuration */
    char checkpoint_dir[PS_DIR_MAX]; /* where servers write checkpoints; "" = none */
    int64_t checkpoint_every;  /* steps between checkpoints; 0 = none */
    int64_t start_step;        /* the step the job starts at (resumed: N, else 0) */
    char resume_dir[PS_RESUME_DIR_MAX]; /* resumed: DIR/step-N, the parts to load; else "" */
    int resume_parts;          /* resumed: the parts of the checkpoint in resume_dir */
    ps_checkpoint_part_t resume_files[PS_MAX_SERVERS]; /* resumed: resume_parts entries,
                                  the manifest's: each file's name in resume_dir, its
                                  size, CRC-32 and keys */
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
    int replicas;              /* hot replicas per server's keys (0: none) */
    int replica_of;            /* a replica's view: 1 + the rank it follows (0: none) */
    uint64_t replica_token;    /* a replica's view: what its primary's messages carry */
    int takeover;              /* a failover: a replica took the lost rank in step,
                                  nothing rolls back */
} ps_view_t;


/* The part as a Checkpoint (borrowed from p: its file name). */
void ps_codec_part_to_pb(const ps_checkpoint_part_t *p, Shardps__Checkpoint *out);

/* Checks m (as ps_codec_check) and copies it into p. Returns 0, or PS_EPROTO
 * with the reason in why. */
int ps_codec_part_from_pb(const Shardps__Checkpoint *m, ps_checkpoint_part_t *p, char *why,
                          size_t cap);

/* A job configuration as a JobConfig: pb points into the text fields. */
typedef struct {
    Shardps__JobConfig pb;
    char mode[32];
    char schedule[64];
} ps_job_pb_t;

/* A view as a ClusterView: pb points into the arrays beside it. Large
 * (tens of KiB): one per send, not per message in flight. */
typedef struct {
    Shardps__ClusterView pb;
    ps_job_pb_t job;
    Shardps__ServerInfo servers[PS_MAX_SERVERS];
    Shardps__ServerInfo *server_ptrs[PS_MAX_SERVERS];
    Shardps__WorkerInfo workers[PS_MAX_WORKERS];
    Shardps__WorkerInfo *worker_ptrs[PS_MAX_WORKERS];
    Shardps__Checkpoint files[PS_MAX_SERVERS];
    Shardps__Checkpoint *file_ptrs[PS_MAX_SERVERS];
} ps_view_pb_t;

/* Fills out from v (borrowed: out points into v and into itself, so both
 * must stay unchanged until out is packed). A view is valid with S >= 1
 * servers whose ranges tile [0, P) in rank order, or, in allreduce mode
 * only, with no servers and M workers in rank order, each with an endpoint;
 * this refuses (PS_EINVAL) what ps_codec_view_from_pb would. Worker tokens
 * go along only when one is set (the servers' copy). */
int ps_codec_view_to_pb(const ps_view_t *v, ps_view_pb_t *out);

/* Checks m (as ps_codec_check) and copies it into v. Returns 0, or
 * PS_EPROTO with the reason in why (may be NULL). */
int ps_codec_view_from_pb(const Shardps__ClusterView *m, ps_view_t *v, char *why, size_t cap);

/* The job as a JobConfig (borrowed from j and out, as above). */
void ps_codec_job_to_pb(const ps_job_t *j, ps_job_pb_t *out);

/* The job a JobConfig names, validated (ps_job_validate). Returns 0, or
 * PS_EPROTO (missing, unknown names, invalid values) with the reason in why. */
int ps_codec_job_from_pb(const Shardps__JobConfig *m, ps_job_t *j, char *why, size_t cap);

/* ---- any message --------------------------------------------------------- */

/* Packs a header into buf (cap bytes). Returns the packed length, or
 * PS_EINVAL when it does not fit. */
int ps_codec_pack_header(const Shardps__Header *h, uint8_t *buf, size_t cap);

/*
 * Unpacks a header frame into h, its strings into a (borrowed until a is
 * reset), and checks it (protocol version, known type and role, range order,
 * dtype and nnz, no sparse keys, no negative ring step, generation or pull
 * version). Returns 0, or PS_EPROTO with the reason in why; h holds every
 * field that decoded either way (all defaults when nothing did), so a caller
 * can still address an error reply. An error text of PS_ERROR_MAX or more
 * characters is read as "".
 */
int ps_codec_unpack_header(const void *data, size_t len, ps_arena_t *a, Shardps__Header *h,
                           char *why, size_t cap);

/*
 * Unpacks data as a message of descriptor d into a and checks it
 * (ps_codec_check). Returns the message (cast it to d's struct; borrowed
 * until a is reset), or NULL when it does not decode or fails its check,
 * with the reason in why (may be NULL). With a NULL the message is malloc'd
 * instead, for one kept past its frame: caller owns the result; free with
 * protobuf_c_message_free_unpacked(m, NULL).
 */
void *ps_codec_unpack(const ProtobufCMessageDescriptor *d, const void *data, size_t len,
                      ps_arena_t *a, char *why, size_t cap);

/*
 * What can be checked of a message without context, by its type: a header
 * as above; string sizes against the PS_*_MAX bounds; Register's role
 * (server or worker); RegisterAck's and ClusterView's job; a view's counts,
 * tiling and ranks (see ps_codec_view_to_pb); Done's epochs and byte counts;
 * Checkpoint's step, version, keys and file name (a name, no path:
 * [A-Za-z0-9._+-], not '.' or '..'); a view's resume files as Checkpoints;
 * ResumeCheck's parts (at most PS_MAX_RESUME_CHECK); ServerReport's
 * histogram; PeerReady's endpoint (not empty); Members' count and live ranks
 * (at least one, each below the count); PreflightResult's pairs (at most
 * PS_MAX_SERVERS); MetricsReport's waited-for workers and text;
 * StatusReply's nodes; FailoverReady's values (not negative); JoinStep's step
 * ([0, PS_JOIN_MAX_STEP]) and worker ([-1, PS_MAX_WORKERS)); the scheduler
 * state's view and lost ranks. Barrier and ModelInfo need only their string
 * sizes; a Shutdown nothing. Returns 0 or PS_EPROTO with the reason in why.
 */
int ps_codec_check(const ProtobufCMessage *m, char *why, size_t cap);

/* Packs any message into a malloc'd buffer: *out (caller owns the result;
 * free with free()) and *len. Returns 0 or PS_ENOMEM. For what is kept or
 * written as bytes; ps_msg_send_body() packs what it sends itself. */
int ps_codec_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len);

/* How many of a node's byte counts by message type (PS_BYTE_TYPES of them)
 * go on the wire: trailing zero counts are left out. */
size_t ps_codec_byte_types(const uint64_t *counts);

/* This build's identity for registration, "`git describe` protocol N" (the
 * project version outside a git checkout), into buf. Thread-safe. */
void ps_codec_build_id(char *buf, size_t cap);

/* Names for logs. */
const char *ps_codec_type_name(int type);
const char *ps_codec_role_tag(ps_role_t role); /* "C", "S", "W" */

#ifdef __cplusplus
}
#endif
#endif
