/*
 * scheduler/identity.h - private: the job's identity (id, configuration hash,
 * build) and the registration check against it.
 *
 * Two jobs side by side on one machine, or a node pointed at the wrong
 * scheduler, must never mix: every REGISTER carries the node's job id, the
 * hash of the job configuration it was started for and its build, and a node
 * of another job or another build is refused with one line naming both. A
 * node that gives no job id or hash (started by hand) is not checked on it,
 * unless the job was named (--job-id): then a node must name it too. The
 * build is always checked.
 *
 * Before any of that, a job with a secret (common/secret.h) asks every
 * registration for proof that the node holds it: a REGISTER without a valid
 * proof is answered with a fresh nonce (MSG_CHALLENGE), bound to the
 * connection (its socket, not only the routing id, which a client may
 * choose) and valid PS_IDENTITY_NONCE_SECONDS; the node registers again
 * with HMAC-SHA256(secret, nonce || role || job id). A wrong proof is
 * refused with a reason that names nothing of the job. Only scheduler/
 * includes this header.
 */
#ifndef PS_SCHEDULER_IDENTITY_H
#define PS_SCHEDULER_IDENTITY_H

#include <stddef.h>

#include "common/job.h"
#include "common/secret.h"
#include "proto/msg.h"
#include "proto/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How long a challenge's nonce may be answered. */
#define PS_IDENTITY_NONCE_SECONDS 30.0

typedef struct {
    char job_id[64];                    /* --job-id, or derived at start */
    int named;                          /* job_id came from --job-id */
    ps_secret_t secret;                 /* the job's secret; set 0: registration is open */
    uint8_t nonce_key[PS_SECRET_LEN];   /* this process's key for its nonces' tags */
    char job_hash[PS_JOB_HASH_LEN + 1]; /* ps_job_hash of the job and node counts */
    char build[96];                     /* ps_codec_build_id() */
} ps_identity_t;

/* Fills *id: job_id (NULL = a fresh one, ps_job_new_id), the configuration
 * hash, this build, the job's secret (NULL or unset: none). */
void ps_identity_init(ps_identity_t *id, const char *job_id, const ps_job_t *job, int servers,
                      int workers, const ps_secret_t *secret);

/* The outcome of ps_identity_prove. */
typedef enum {
    PS_IDENTITY_PROVEN = 0,     /* the node holds the secret (or the job has none) */
    PS_IDENTITY_CHALLENGED = 1, /* no proof yet: *nonce is its challenge */
    PS_IDENTITY_REFUSED = 2,    /* a proof that does not hold */
} ps_identity_proof_t;

/* Checks reg's proof of the job's secret, made for a nonce of ours for the
 * connection at now (ps_now()): route is its routing id, fd its socket
 * (ps_msg_t.peer_fd; -1 for inproc). A nonce answered on another socket,
 * even under the same routing id, is refused, as is any registration whose
 * socket has closed. PS_IDENTITY_CHALLENGED fills nonce
 * (PS_IDENTITY_NONCE_LEN bytes) and *nonce_len. */
enum { PS_IDENTITY_NONCE_LEN = 40 };
ps_identity_proof_t ps_identity_prove(const ps_identity_t *id, const Shardps__Register *reg,
                                      const ps_route_t *route, int fd, double now,
                                      uint8_t *nonce, size_t *nonce_len);

/* Returns 0 when reg belongs to this job and build, else PS_EINVAL with a
 * one-line reason naming both sides in why. */
int ps_identity_check(const ps_identity_t *id, const Shardps__Register *reg, char *why,
                      size_t cap);

#ifdef __cplusplus
}
#endif
#endif
