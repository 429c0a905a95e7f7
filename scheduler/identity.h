/*
 * scheduler/identity.h - private: the job's identity (id, configuration hash,
 * build) and the registration check against it.
 *
 * Two jobs side by side on one machine, or a node pointed at the wrong
 * scheduler, must never mix: every REGISTER carries the node's job id, the
 * hash of the job configuration it was started for and its build, and a node
 * of another job or another build is refused with one line naming both. A
 * node that gives no job id or hash (started by hand) is not checked on it;
 * the build is always checked. Only scheduler/ includes this header.
 */
#ifndef PS_SCHEDULER_IDENTITY_H
#define PS_SCHEDULER_IDENTITY_H

#include <stddef.h>

#include "common/job.h"
#include "proto/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char job_id[64];                    /* --job-id, or derived at start */
    char job_hash[PS_JOB_HASH_LEN + 1]; /* ps_job_hash of the job and node counts */
    char build[96];                     /* ps_codec_build_id() */
} ps_identity_t;

/* Fills *id: job_id (NULL = a fresh one, ps_job_new_id), the configuration
 * hash, this build. */
void ps_identity_init(ps_identity_t *id, const char *job_id, const ps_job_t *job, int servers,
                      int workers);

/* Returns 0 when reg belongs to this job and build, else PS_EINVAL with a
 * one-line reason naming both sides in why. */
int ps_identity_check(const ps_identity_t *id, const Shardps__Register *reg, char *why,
                      size_t cap);

#ifdef __cplusplus
}
#endif
#endif
