/*
 * scheduler/manifest.h - which checkpoints are complete.
 *
 * Servers tell the scheduler when their part of checkpoint N is durable
 * (MSG_CHECKPOINT); once every server's part of N is in, the scheduler writes
 * DIR/step-N/manifest.json (atomically) naming each part with its size and
 * CRC-32 as the servers reported them, then DIR/latest ("step-N"). A
 * checkpoint without a manifest is never used. The scheduler reads only
 * manifests, never a part: on resume the servers check their parts against
 * them (scheduler/ckpt.h), and a server loads exactly the files a manifest
 * names, checking the CRC-32 of what it loads (server/checkpoint.h).
 *
 * manifest.json, one line written and read through common/json.h:
 * {"format": "shardps-manifest-1", "step": N, "num_params": P, "servers": S,
 * "workers": M, "parts": [{"file": "server-0.safetensors", "size": BYTES,
 * "crc32": CRC, "key_begin": B, "key_end": E, "version": V}, ...],
 * "job_id": ID, "lineage": [{"job_id": ID, "step": N}, ...], "config_hash":
 * H, "config": {"lr": "0.05", ...}}: the job that wrote it, the jobs it was
 * resumed from (oldest first, each with the step it was resumed at) and the
 * flags a resume must keep (common/job.h, ps_job_resume_fields). Manifests
 * written before these four fields are read as of an unknown job.
 *
 * A directory's checkpoints are those of the job DIR/latest names and of
 * its lineage, at latest's step or before: a newer step, or another job's,
 * is skipped with its reason.
 * No sockets; one thread.
 */
#ifndef PS_SCHEDULER_MANIFEST_H
#define PS_SCHEDULER_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "proto/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_manifest ps_manifest_t;

/* Jobs a lineage holds at most; older ancestors are dropped first. */
enum { PS_MANIFEST_MAX_LINEAGE = 32, PS_MANIFEST_JOB_ID = 64 };

/* The job a checkpoint belongs to, as its manifest records it. */
typedef struct {
    char job_id[PS_MANIFEST_JOB_ID]; /* the job that wrote it; "" = not recorded */
    int nlineage;                    /* jobs it was resumed from, oldest first */
    struct {
        char job_id[PS_MANIFEST_JOB_ID]; /* "" = not recorded */
        int64_t step;                    /* the step it was resumed at */
    } lineage[PS_MANIFEST_MAX_LINEAGE];
    int has_config;                  /* config and config_hash were recorded */
    char config_hash[PS_JOB_HASH_LEN + 1];     /* ps_job_resume_hash of config */
    ps_job_field_t config[PS_JOB_RESUME_FIELDS]; /* the flags a resume must keep */
} ps_manifest_job_t;

/* A tracker of the parts of the checkpoints of a job with these servers
 * (view: borrowed, must outlive it; its checkpoint_dir is DIR) whose
 * manifests record job (borrowed, must outlive it; read at each write, so
 * its owner may fill it in later). Returns 0 or PS_ENOMEM. Caller owns
 * *out; destroy with ps_manifest_destroy(). */
int ps_manifest_new(ps_manifest_t **out, const ps_view_t *view, const ps_manifest_job_t *job);

/* The job recorded in checkpoint stepdir's manifest into *out (all zero
 * when it records none). Returns 1 when it records one, 0 when it is an
 * older manifest without it, or PS_EIO / PS_ENOENT / PS_EPROTO with a
 * reason in why (may be NULL). */
int ps_manifest_read_job(const char *stepdir, ps_manifest_job_t *out, char *why, size_t cap);

/* The step DIR/latest names (a "step-N" line). Returns 0 or PS_ENOENT. */
int ps_manifest_latest(const char *dir, int64_t *step);

/* Whether dir holds a checkpoint of a job other than job_id (NULL: any job
 * is another): 1 with a one-line description of them in why ("job X's
 * step-50 to step-450"), else 0 (no directory, or no manifest in it). */
int ps_manifest_foreign(const char *dir, const char *job_id, char *why, size_t cap);

/* NULL-safe; sets *m to NULL. */
void ps_manifest_destroy(ps_manifest_t **m);

/*
 * Records server `rank`'s part. Returns 1 when it completed its step (the
 * manifest and DIR/latest are written), 0 when parts of the step are still
 * missing, or PS_EIO (the manifest could not be written; logged).
 */
int ps_manifest_add(ps_manifest_t *m, int rank, const ps_checkpoint_part_t *part);

/*
 * The checkpoints of dir whose manifests check out (ps_manifest_check) for
 * a model of num_params (0: any), newest first: at most max steps into
 * steps; only those of DIR/latest's job and lineage, at its step or before
 * (all of them when latest is missing or names no checkpoint). Each one
 * skipped is logged with its reason. Returns how many (0: none, with why
 * saying so), or PS_ENOENT when dir cannot be opened (why names it).
 */
int ps_manifest_list(const char *dir, uint64_t num_params, int64_t *steps, int max, char *why,
                     size_t cap);

/*
 * The newest of those: its step, its parts (parts: PS_MAX_SERVERS entries)
 * and its directory (dir/step-N) in stepdir. Returns the number of parts,
 * or PS_ENOENT (or 0) when there is none.
 */
int ps_manifest_find(const char *dir, uint64_t num_params, int64_t *step,
                     ps_checkpoint_part_t *parts, char *stepdir, size_t cap);

/*
 * Reads the manifest of checkpoint stepdir (dir/step-N) of step for a model
 * of num_params (0: any): it parses, names this step and model and one part
 * per server, each a file name (no path; as proto/codec.h checks a
 * Checkpoint) with its size, CRC-32 and keys, into parts (PS_MAX_SERVERS
 * entries, step set). The parts themselves are not read: they may be on
 * other hosts, and each server checks its own (ps_ckpt, MSG_RESUME_CHECK)
 * and what it loads. Returns the number of parts, or 0 with a one-line
 * reason naming the manifest in why (may be NULL).
 */
int ps_manifest_check(const char *stepdir, int64_t step, uint64_t num_params,
                      ps_checkpoint_part_t *parts, char *why, size_t cap);

/* The number of workers of the job that wrote checkpoint stepdir (its
 * manifest's "workers"), or 0 when it does not say. */
int ps_manifest_workers(const char *stepdir);

#ifdef __cplusplus
}
#endif
#endif
