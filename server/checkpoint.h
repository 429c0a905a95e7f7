/*
 * server/checkpoint.h - a server's part of a checkpoint: its shard of the
 * flat parameter vector and the optimizer state beside it, as one
 * safetensors file (common/safetensors.h), and loading a shard back from the
 * parts of an earlier job, whatever its number of servers.
 *
 * A part holds the tensors "params" (the shard's keys, in key order) and
 * "opt.<state>" (PyTorch's names: momentum_buffer for sgd and nesterov,
 * exp_avg and exp_avg_sq for adam, sum for adagrad; z and n for ftrl), and
 * in __metadata__ the key range, the step N (the version after step N's
 * update, so also the update count, Adam's t, and the learning-rate
 * schedule's position), each worker's next step and the job's settings.
 * A job with embedding rows (server/rows.h) adds the server's rows, the
 * snapshot of ps_rows_export and ps_rows_pending_export, ascending by key:
 *   rows.keys           U64 [R]     the keys of the R rows
 *   rows.values         F32 [R, D]  their values, D = embed_dim
 *   rows.opt.<state>    F32 [R, D]  their optimizer state, named as above
 *   rows.pending.keys   U64 [Q]     keys with sightings but no row yet
 *   rows.pending.counts U32 [Q]     their sightings, 1 .. min_count - 1
 * and the metadata embed_dim, min_count, rows_first and rows_last (the
 * hashes of the keys this server held, proto/range.h), so that a resumed
 * table holds, and filters, as this one. The file is
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
#include "proto/range.h"
#include "server/rows.h"
#include "server/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A server's embedding rows, in a job with rows. */
typedef struct {
    ps_rows_t *table;    /* borrowed: written by ps_checkpoint_load only; NULL: no rows */
    ps_rowrange_t range; /* the hashes of the keys it holds (the view's, for its rank) */
} ps_checkpoint_rows_t;

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
    ps_checkpoint_rows_t rows; /* a job with rows: the server's (table NULL: none) */
} ps_checkpoint_info_t;

/*
 * Writes the store, and the rows when info->rows.table is set, as
 * dir/step-N/server-R[.K].safetensors (creating the directories) and fills
 * *part (name, size, CRC-32, keys) for the manifest. Returns 0, or PS_EIO /
 * PS_ENOMEM with a one-line reason in why.
 */
int ps_checkpoint_write(const ps_checkpoint_info_t *info, const ps_store_t *store,
                        ps_checkpoint_part_t *part, char *why, size_t cap);

/*
 * Loads every key of the store's shard from the parts of checkpoint `step`
 * in dir (DIR/step-N): parts[0..nparts) are the manifest's entries, in rank
 * order, of a job with the same model and optimizer and any number of
 * servers. Exactly the files they name are read, and only those holding
 * keys of the shard or rows of rows->range; each must have the manifest's
 * size, CRC-32 (of the bytes loaded) and keys. Parameters first (which
 * completes the store's initialisation), then the optimizer state, then
 * (rows non-NULL with a table, which must be empty: ps_rows_clear) the rows
 * and pending sightings whose keys' hashes are in rows->range, from the parts
 * whose rows those were in the old job (ps_range_split_rows of nparts).
 * A part must have rows exactly when the job does, of the job's embed_dim,
 * min_count and optimizer state arrays, keys ascending and inside the part's
 * own range; the rows loaded must fit the job's max_rows.
 * *version (unless NULL): the parts' version (their metadata's; differs from
 * step only in async). Returns 0, or PS_EPROTO (a part is corrupt, not the
 * manifest's, of another step, optimizer or rows layout, or the parts miss
 * keys) / PS_ENOENT / PS_EIO / PS_ENOMEM with a one-line reason naming the
 * file in why. On failure the store may be partly loaded; the rows stay empty.
 */
int ps_checkpoint_load(const char *dir, const ps_checkpoint_part_t *parts, int nparts,
                       int64_t step, ps_store_t *store, const ps_checkpoint_rows_t *rows,
                       const ps_job_t *job, int64_t *version, char *why, size_t cap);

/* Fills *found with part (a manifest's entry), its size and CRC-32 replaced
 * by those of dir/step-N/<part's file> (size 0: missing or unreadable): what
 * this server answers a resume check with. */
void ps_checkpoint_check(const char *dir, const ps_checkpoint_part_t *part,
                         ps_checkpoint_part_t *found);

#ifdef __cplusplus
}
#endif
#endif
