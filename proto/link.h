/*
 * proto/link.h - a node's link to the scheduler: joining a job and liveness.
 *
 * Servers and workers join the same way: REGISTER, wait for REGISTER_ACK (the
 * job configuration and the node's rank), optionally report the model size,
 * wait for the cluster view. Afterwards the owner's event loop calls
 * ps_link_tick() to send heartbeats and notice a silent scheduler, and
 * ps_link_handle() for messages from the scheduler. The link is owned by one
 * thread at a time (it may be handed over before another thread starts).
 */
#ifndef PS_PROTO_LINK_H
#define PS_PROTO_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/job.h"
#include "proto/codec.h"
#include "proto/msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How often nodes and the scheduler send heartbeats. */
#define PS_HEARTBEAT_SECONDS 0.5

/* Defaults of the link flags below. */
#define PS_LINK_DEFAULT_SCHEDULER "tcp://127.0.0.1:9000"
#define PS_LINK_DEFAULT_CONNECT_TIMEOUT 10.0
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

/* The check of the two timeout flags' values after parsing: both > 0 (NaN is
 * not). Returns 0 or PS_EINVAL; prints nothing, the caller's one error line
 * names the flags it checked. */
int ps_link_check_timeouts(double connect_timeout, double peer_timeout);

typedef struct {
    void *sock;          /* DEALER connected to the scheduler; owned */
    ps_role_t role;      /* this node's role */
    int rank;            /* this node's rank, from REGISTER_ACK */
    char scheduler[128]; /* the scheduler's endpoint, for messages */
    double peer_timeout; /* seconds of scheduler silence that mean it is lost */
    double last_seen;    /* ps_now() of the last message from the scheduler */
    double last_sent;    /* ps_now() of our last heartbeat */
} ps_link_t;

/*
 * Connects to the scheduler and registers. endpoint: what a server advertises
 * (NULL for workers). Waits up to connect_timeout seconds for the answer.
 * On success fills l, l->rank and *job. Returns 0, or PS_ETIMEDOUT (no answer:
 * unreachable scheduler), PS_EINVAL (bad endpoint), PS_EPROTO / PS_ESTATE
 * (refused); err gets a one-line reason. On failure l holds no socket.
 */
int ps_link_join(ps_link_t *l, void *ctx, const char *scheduler, ps_role_t role,
                 int want_rank, const char *endpoint, double connect_timeout,
                 double peer_timeout, ps_job_t *job, char *err, size_t errlen);

/*
 * Workers pass info (their model size, the size of their training set and,
 * in allreduce mode, their ring endpoint) to report it first; servers pass
 * NULL. Waits for the cluster view as long as the scheduler is alive.
 * Returns 0, or PS_ECLOSED (scheduler lost or job aborted) / PS_EPROTO with a
 * reason in err.
 */
int ps_link_wait_view(ps_link_t *l, const ps_model_info_t *info, ps_view_t *view, char *err,
                      size_t errlen);

/* Sends a heartbeat when one is due. Returns 0, or PS_ECLOSED with a reason in
 * err when the scheduler has been silent for longer than peer_timeout. */
int ps_link_tick(ps_link_t *l, char *err, size_t errlen);

/*
 * Handles a message that arrived on l->sock. Returns 0 when it was a heartbeat
 * (or anything else merely proving the scheduler alive), 1 for a clean
 * SHUTDOWN (the job is over), PS_ECLOSED for an abort (reason in err), or the
 * message type (> 1) for the caller to handle (BARRIER_DONE, ...).
 */
int ps_link_handle(ps_link_t *l, const ps_msg_t *m, char *err, size_t errlen);

/* Tells the scheduler this node is failing, so it stops the job at once. */
void ps_link_abort(ps_link_t *l, const char *reason);

/* Closes the socket; safe on a zeroed or closed link. */
void ps_link_close(ps_link_t *l);

#ifdef __cplusplus
}
#endif
#endif
