/*
 * server/checkpoint.h - a server's part of a checkpoint: its shard of the
 * flat parameter vector and the optimizer state beside it, as one
 * safetensors file (common/safetensors.h), and loading a shard back from the
 * parts of an earlier job, whatever its number of servers.
 *
 * A part holds the tensors "params" (the shard's keys, in key order) and
 * "opt.<state>" (PyTorch's names: momentum_buffer for sgd and nesterov,
 * exp_avg and exp_avg_sq for adam, sum for adagrad), and in __metadata__ the
 * key range, the step N (the version after step N's update, so also the
 * update count, Adam's t, and the learning-rate schedule's position), each
 * worker's next step and the job's settings. The file is
 * DIR/step-N/server-R.safetensors, written atomically, DIR being this
 * server's copy of the job's checkpoint directory (node-local or shared);
 * a step written again (trained again after a rollback) gets a new name,
 * server-R.K.safetensors, so that no file a manifest names is replaced.
 * No sockets; one thread.
 */
#ifndef PS_SERVER_CHECKPOINT_H
#define PS_SERVER_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "proto/codec.h"
#include "server/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a part records besides the store. */
typedef struct {
    const char *dir;     /* the job's checkpoint directory */
    int64_t step;        /* N: the checkpoint (stepped modes: the version the store is at) */
    int64_t version;     /* the store's version: N in stepped modes, N * workers in async */
    int rank;            /* this server */
    int servers;         /* S of the job */
    int workers;         /* M of the job (each one's next step, on resume, is N) */
    uint64_t num_params; /* P */
    const ps_job_t *job; /* model, optimizer, seed, mode */
} ps_checkpoint_info_t;

/*
 * Writes the store as dir/step-N/server-R[.K].safetensors (creating the
 * directories) and fills *part (name, size, CRC-32, keys) for the manifest.
 * Returns 0, or PS_EIO / PS_ENOMEM with a one-line reason in why.
 */
int ps_checkpoint_write(const ps_checkpoint_info_t *info, const ps_store_t *store,
                        ps_checkpoint_part_t *part, char *why, size_t cap);

/*
 * Loads every key of the store's shard from the parts of checkpoint `step`
 * in dir (DIR/step-N): parts[0..nparts) are the manifest's entries, of a
 * job with the same model and optimizer and any number of servers. Exactly
 * the files they name are read, and only those holding keys of the shard;
 * each must have the manifest's size, CRC-32 (of the bytes loaded) and keys.
 * Parameters first (which completes the store's initialisation), then the
 * optimizer state. *version (unless NULL): the parts' version (their
 * metadata's; differs from step only in async). Returns 0, or PS_EPROTO (a
 * part is corrupt, not the manifest's, of another step or optimizer, or the
 * parts miss keys) / PS_ENOENT / PS_EIO / PS_ENOMEM with a one-line reason
 * naming the file in why.
 */
int ps_checkpoint_load(const char *dir, const ps_checkpoint_part_t *parts, int nparts,
                       int64_t step, ps_store_t *store, const ps_job_t *job, int64_t *version,
                       char *why, size_t cap);

/* Fills *found with part (a manifest's entry), its size and CRC-32 replaced
 * by those of dir/step-N/<part's file> (size 0: missing or unreadable): what
 * this server answers a resume check with. */
void ps_checkpoint_check(const char *dir, const ps_checkpoint_part_t *part,
                         ps_checkpoint_part_t *found);

#ifdef __cplusplus
}
#endif
#endif
