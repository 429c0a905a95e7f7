/*
 * scheduler/manifest.h - which checkpoints are complete.
 *
 * Servers tell the scheduler when their part of checkpoint N is durable
 * (MSG_CHECKPOINT); once every server's part of N is in, the scheduler writes
 * DIR/step-N/manifest.json (atomically) naming each part with its size and
 * CRC-32, then DIR/latest ("step-N"). A checkpoint without a manifest, or
 * whose parts do not match it, is never used: on resume ps_manifest_find()
 * takes the newest one that checks out and logs one line for each newer one
 * it skips, naming the file at fault.
 *
 * manifest.json, one line written and read through common/json.h:
 * {"format": "shardps-manifest-1", "step": N, "num_params": P, "servers": S,
 * "workers": M, "parts": [{"file": "server-0.safetensors", "size": BYTES,
 * "crc32": CRC, "key_begin": B, "key_end": E, "version": V}, ...]}.
 * No sockets; one thread.
 */
#ifndef PS_SCHEDULER_MANIFEST_H
#define PS_SCHEDULER_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "proto/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_manifest ps_manifest_t;

/* A tracker of the parts of the checkpoints of a job with these servers
 * (view: borrowed, must outlive it; its checkpoint_dir is DIR). Returns 0 or
 * PS_ENOMEM. Caller owns *out; destroy with ps_manifest_destroy(). */
int ps_manifest_new(ps_manifest_t **out, const ps_view_t *view);

/* NULL-safe; sets *m to NULL. */
void ps_manifest_destroy(ps_manifest_t **m);

/*
 * Records server `rank`'s part. Returns 1 when it completed its step (the
 * manifest and DIR/latest are written), 0 when parts of the step are still
 * missing, or PS_EIO (the manifest could not be written; logged).
 */
int ps_manifest_add(ps_manifest_t *m, int rank, const ps_checkpoint_part_t *part);

/*
 * The newest complete checkpoint in dir for a model of num_params: its step,
 * its parts' count and its directory (dir/step-N) in stepdir. Checkpoints
 * without a manifest, or with a part missing, of another size or checksum,
 * are skipped with one log line each. Returns 0, or PS_ENOENT when none is
 * complete.
 */
int ps_manifest_find(const char *dir, uint64_t num_params, int64_t *step, int *nparts,
                     char *stepdir, size_t cap);

/*
 * Checks checkpoint stepdir (dir/step-N) of step for a model of num_params
 * against its manifest: the manifest parses, names this step and model and
 * one part per server, and each part's file is there with the size and
 * CRC-32 it lists. Returns the number of parts, or 0 with a one-line reason
 * naming the file at fault in why (may be NULL).
 */
int ps_manifest_check(const char *stepdir, int64_t step, uint64_t num_params, char *why,
                      size_t cap);

/* The number of workers of the job that wrote checkpoint stepdir (its
 * manifest's "workers"), or 0 when it does not say. */
int ps_manifest_workers(const char *stepdir);

#ifdef __cplusplus
}
#endif
#endif
