/*
 * proto/link.h - a node's link to the scheduler: joining a job and liveness.
 *
 * Servers and workers join the same way: REGISTER, wait for REGISTER_ACK (the
 * job configuration and the node's rank), optionally report the model size,
 * wait for the cluster view. Afterwards the owner's event loop polls and
 * drains ps_link_sock() and hands every message to ps_link_handle(), which
 * records that the scheduler is alive and says what the message means (a
 * typed event); it calls ps_link_tick() at least every few hundred ms to send
 * heartbeats and to learn when the scheduler has been silent too long.
 * Liveness lives here: callers never keep their own last-seen times.
 *
 * Thread safety: none inside. A link is used by one thread at a time; the
 * server's loop owns its link, and the worker's KV client keeps its link
 * behind the client's mutex (the trainer that waits and the 50 ms ticker take
 * turns; see worker/kv.h).
 */
#ifndef PS_PROTO_LINK_H
#define PS_PROTO_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/job.h"
#include "common/secret.h"
#include "common/metrics.h"
#include "proto/codec.h"
#include "proto/msg.h"
#include "proto/sock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How often nodes and the scheduler send heartbeats. */
#define PS_HEARTBEAT_SECONDS 0.5

/* Defaults of the link flags below. */
#define PS_LINK_DEFAULT_SCHEDULER "tcp://127.0.0.1:9000"
/* as long as torchrun's rendezvous: nodes started by hand before their
 * scheduler wait for it (saying so, see PS_LINK_WAIT_LOG_SECONDS) */
#define PS_LINK_DEFAULT_CONNECT_TIMEOUT 900.0
#define PS_LINK_DEFAULT_PEER_TIMEOUT 5.0

/*
 * The flags through which a node reaches the scheduler, one definition for
 * the flag tables of shardps-server and shardps-worker (name, metavar and
 * --help line): --scheduler ENDPOINT, --rank R (the line names the role),
 * --connect-timeout SECONDS and --peer-timeout SECONDS. dst is where
 * ps_config_parse() stores the value and holds the default on entry;
 * borrowed, it must outlive the table. Thread-safe.
 */
ps_flag_t ps_link_scheduler_flag(const char **dst);
ps_flag_t ps_link_rank_flag(int *dst, ps_role_t role);
ps_flag_t ps_link_connect_timeout_flag(double *dst);
ps_flag_t ps_link_peer_timeout_flag(double *dst);
/* --job-id ID and --job-hash HEX (see ps_link_ident_t), as above. */
ps_flag_t ps_link_job_id_flag(const char **dst);
ps_flag_t ps_link_job_hash_flag(const char **dst);
/* --secret-file PATH (SHARDPS_SECRET_FILE): the job's secret (common/secret.h),
 * for every role. */
ps_flag_t ps_link_secret_flag(const char **dst);

/* Reads the --secret-file value path into *s (NULL or "": none, s->set 0).
 * Returns 0, or PS_EINVAL with a one-line reason in err. */
int ps_link_read_secret(const char *path, ps_secret_t *s, char *err, size_t errlen);

/* Seconds between a waiting node's "still waiting for the scheduler" lines
 * (ten times that after its first 30 s) and the scheduler's "still waiting
 * for S1 W3" lines. */
#define PS_LINK_WAIT_LOG_SECONDS 3.0

/* Which job a node belongs to, checked by the scheduler at registration (a
 * node of another job or another build is refused, naming both). */
typedef struct {
    const char *job_id;   /* the job's id; NULL or "" = any (a node started by hand) */
    const char *job_hash; /* the job configuration's hash (ps_job_hash), as
                             shardps-launch computes it; NULL or "" = unchecked */
    const ps_secret_t *secret; /* the job's secret, answering the scheduler's
                                  challenge; NULL = none (borrowed for the call) */
} ps_link_ident_t;
ps_flag_t ps_link_scheduler_grace_flag(double *dst);

/* The check of the two timeout flags' values after parsing: both in
 * (0, PS_CONFIG_MAX_SECONDS] (NaN is not). Returns 0 or PS_EINVAL; prints
 * nothing, the caller's one error line names the flags it checked. */
int ps_link_check_timeouts(double connect_timeout, double peer_timeout);

/* The checks of the flags above after parsing: rank in [-1, 65535], the
 * timeouts in (0, PS_CONFIG_MAX_SECONDS]. Returns 0 or PS_EINVAL with
 * "--NAME V: out of range [MIN, MAX]" in err. */
int ps_link_check_flags(int rank, double connect_timeout, double peer_timeout, char *err,
                        size_t errlen);

/* The check of --scheduler-grace after parsing: in [0, PS_CONFIG_MAX_SECONDS].
 * Returns 0 or PS_EINVAL with "--scheduler-grace V: out of range" in err. */
int ps_link_check_grace(double grace, char *err, size_t errlen);

typedef struct ps_link ps_link_t;

/* want_rank of a server that registers as a spare (Register.spare). */
#define PS_LINK_RANK_SPARE (-2)

/*
 * Connects to the scheduler and registers. endpoint: what a server advertises
 * (NULL for workers); ident: the job it belongs to (NULL = any; this build's
 * ps_codec_build_id() always goes along). Waits up to connect_timeout seconds
 * for the answer, logging every PS_LINK_WAIT_LOG_SECONDS that it still waits.
 * On success returns 0 with the link in *out (caller owns the result; destroy
 * with ps_link_destroy()) and the job in *job. Returns PS_ETIMEDOUT (no
 * answer: unreachable scheduler), PS_ECLOSED (its ZeroMQ handshake failed,
 * told at once: one side --secure and the other not, or another job's keys;
 * err names the flags that mend it), PS_EINVAL (bad endpoint), PS_EPROTO /
 * PS_ESTATE (refused), with a one-line reason in err and *out NULL.
 */
int ps_link_join(ps_link_t **out, ps_ctx_t *ctx, const char *scheduler, ps_role_t role,
                 int want_rank, const char *endpoint, const ps_link_ident_t *ident,
                 double connect_timeout, double peer_timeout, ps_job_t *job, char *err,
                 size_t errlen);

/*
 * A lost scheduler may come back (a restarted `shardps-scheduler --resume
 * DIR`): for up to grace seconds after it fell silent the node goes on and
 * registers again (same role, rank and job id) every PS_LINK_REJOIN_SECONDS
 * at the same endpoint; its answer ends the wait (a DONE sent meanwhile or
 * before is sent again). A scheduler that refuses us as unknown (PS_ESTATE:
 * it restarted before we missed it) starts the same. 0 (the default): a
 * lost scheduler is lost at once.
 */
void ps_link_set_grace(ps_link_t *l, double grace);

/* Seconds between registrations while the scheduler is lost (ps_link_set_grace). */
#define PS_LINK_REJOIN_SECONDS 1.0

/* This node's rank, from REGISTER_ACK. */
int ps_link_rank(const ps_link_t *l);

/* This node's token, from REGISTER_ACK: a worker puts it in the header of
 * every push, pull and init (Shardps__Header.token); servers refuse a request
 * whose token is not the claimed worker's. */
uint64_t ps_link_token(const ps_link_t *l);

/* The socket to the scheduler; borrowed, valid until ps_link_destroy(). Only
 * for ps_poll() and ps_msg_drain(); every message from it goes to
 * ps_link_handle(), and ps_sock_set_linger() may shorten its closing. */
ps_sock_t *ps_link_sock(ps_link_t *l);

/*
 * Workers pass info (their model size, the size of their training set and,
 * in allreduce mode, their ring endpoint) to report it first; servers pass
 * NULL. Waits for the cluster view as long as the scheduler is alive.
 * Returns 0, or PS_ECLOSED (scheduler lost or job aborted), PS_ENOENT (the
 * job ended cleanly before this node was needed: a spare server's normal
 * end) or PS_EPROTO, with a reason in err.
 */
int ps_link_wait_view(ps_link_t *l, const Shardps__ModelInfo *info, ps_view_t *view,
                      char *err, size_t errlen);

/*
 * Keeps the link alive from a thread of its own while the caller does long
 * work that does not touch the link (a worker reading its click log after
 * joining): heartbeats go out and the scheduler's messages are handled, as
 * ps_link_wait_view() would. ps_link_keepalive_stop() ends it and returns 0,
 * or the error that ended the wait meanwhile (the job aborted, the scheduler
 * lost), with a reason in err. Stopping a link not kept alive returns 0.
 */
int ps_link_keepalive_start(ps_link_t *l);
int ps_link_keepalive_stop(ps_link_t *l, char *err, size_t errlen);

/* What a message from the scheduler, or a tick, means for the node. */
typedef enum {
    PS_LINK_ALIVE,    /* a heartbeat, or nothing new: the scheduler is there */
    PS_LINK_MESSAGE,  /* a message for the caller (BARRIER_DONE, REPORT, VIEW...):
                         read m->hdr.type */
    PS_LINK_SHUTDOWN, /* a clean SHUTDOWN: the job is over */
    PS_LINK_ABORTED,  /* the scheduler aborted the job; reason in err */
    PS_LINK_ERROR,    /* the scheduler answered PS_MSG_ERROR; reason in err */
    PS_LINK_LOST,     /* (tick only) the scheduler has been silent for longer
                         than peer_timeout; reason in err */
} ps_link_event_t;

/* Sends a heartbeat when one is due. Returns PS_LINK_ALIVE, or PS_LINK_LOST
 * with a reason in err when the scheduler has been silent too long. */
ps_link_event_t ps_link_tick(ps_link_t *l, char *err, size_t errlen);

/*
 * Handles a message received from ps_link_sock(): records that the scheduler
 * is alive and returns what the message means (never PS_LINK_LOST). While
 * the scheduler is lost (ps_link_set_grace) its answers to registering again
 * are handled here (PS_LINK_ALIVE). m stays the caller's (a body may be
 * unpacked into its arena).
 */
ps_link_event_t ps_link_handle(ps_link_t *l, ps_msg_t *m, char *err, size_t errlen);

/*
 * Metrics on heartbeats: fn fills the report each heartbeat carries (and
 * appends the node's Prometheus text to text); it runs in the thread that
 * ticks the link. r comes initialised, test_accuracy -1, with room for
 * PS_REPORT_MAX_WAITING ranks at r->waiting_for (set r->n_waiting_for).
 * NULL: bare heartbeats (the default).
 */
typedef void (*ps_link_report_fn)(void *arg, Shardps__MetricsReport *r, ps_text_t *text);
void ps_link_set_report(ps_link_t *l, ps_link_report_fn fn, void *arg);

/* A message from the scheduler that ps_link_wait_view() does not take itself
 * (a server's MSG_RESUME_CHECK): fn(arg, m) gets it (borrowed for the call)
 * on the waiting thread. NULL (the default): such messages are dropped. */
typedef void (*ps_link_message_fn)(void *arg, ps_msg_t *m);
void ps_link_set_on_message(ps_link_t *l, ps_link_message_fn fn, void *arg);

/* Sends a heartbeat (with its report) now: the scheduler gets final counts
 * before a DONE or a server's end-of-job REPORT. */
void ps_link_report_now(ps_link_t *l);

/* Seconds to add to this node's ps_now() for the scheduler's clock, measured
 * at registration from the round trip (traces are merged on it). */
double ps_link_clock_offset(const ps_link_t *l);

/* Sends a control message (header of type from this node, body packed; NULL
 * for none) to the scheduler. A DONE is kept and sent again to a restarted
 * scheduler. Returns 0 or a PS_E* as ps_msg_send_body(). */
int ps_link_send(ps_link_t *l, ps_msg_type_t type, const ProtobufCMessage *body);


/* A hot replica (server/replica.h) registers again with a restarted
 * scheduler as one: follows = 1 + the rank it follows (0: none now), its
 * primary's token, where it listens (NULL: unchanged) and whether it is in
 * step, so that a takeover still finds it. */
void ps_link_set_replica(ps_link_t *l, int follows, uint64_t token, const char *endpoint,
                         int in_step);

/* A spare server promoted to a lost server's rank (scheduler/failover.c)
 * sends as that rank from now on. */
void ps_link_set_rank(ps_link_t *l, int rank);

/* The failovers this node has seen: stamped on every message it sends, so
 * the scheduler ignores what was sent before the node rolled back. */
void ps_link_set_generation(ps_link_t *l, int64_t generation);

/* Tells the scheduler this node is failing, so it stops the job at once.
 * NULL-safe. */
void ps_link_abort(ps_link_t *l, const char *reason);

/* The same with the PS_E* status the scheduler records (PS_ENONFINITE: the
 * job diverged); ps_link_abort() sends PS_ECLOSED. */
void ps_link_abort_with(ps_link_t *l, int status, const char *reason);

/* Closes the socket and frees the link; NULL-safe; sets *l to NULL. */
void ps_link_destroy(ps_link_t **l);

#ifdef __cplusplus
}
#endif
#endif
