/* scheduler/identity.c - the job's identity and the registration check. */
#include "scheduler/identity.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"

void ps_identity_init(ps_identity_t *id, const char *job_id, const ps_job_t *job, int servers,
                      int workers)
{
    memset(id, 0, sizeof *id);
    if (job_id && job_id[0]) {
        snprintf(id->job_id, sizeof id->job_id, "%s", job_id);
    } else {
        ps_job_new_id(id->job_id, sizeof id->job_id);
    }
    ps_job_hash(job, servers, workers, id->job_hash, sizeof id->job_hash);
    ps_codec_build_id(id->build, sizeof id->build);
}

int ps_identity_check(const ps_identity_t *id, const Shardps__Register *reg, char *why, size_t cap)
{
    if (strcmp(reg->build, id->build)) {
        snprintf(why, cap, "the node's build '%s' is not the scheduler's '%s' (job %s)",
                 reg->build, id->build, id->job_id);
    } else if (reg->job_id[0] && strcmp(reg->job_id, id->job_id)) {
        snprintf(why, cap, "the node belongs to job '%s', this scheduler runs job '%s'",
                 reg->job_id, id->job_id);
    } else if (reg->job_hash[0] && strcmp(reg->job_hash, id->job_hash)) {
        snprintf(why, cap, "the node's job configuration %s is not job %s's %s (other job "
                 "flags)", reg->job_hash, id->job_id, id->job_hash);
    } else {
        return 0;
    }
    return PS_EINVAL;
}
