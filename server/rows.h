/*
 * server/rows.h - one server's embedding rows: a table of rows of dim floats
 * addressed by 64-bit keys (the server's share of a sparse key space), each
 * with its own optimizer state, a frequency filter (a key gets a row on its
 * min_count-th update) and a cap on the number of rows.
 *
 * Plain memory and arithmetic, like server/store.h: no sockets, no
 * consistency rules, no clock. Rows are never deleted. Memory stays near
 * rows x (dim + state floats) x 4 bytes: the index is open addressing over
 * 8-byte slots, the keys, values and state live in large slabs that growth
 * never moves, and a pulled key that has no row costs nothing.
 *
 * Not thread-safe: one thread makes every call.
 */
#ifndef PS_SERVER_ROWS_H
#define PS_SERVER_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_rows ps_rows_t;

/* Most rows one table holds, whatever max_rows says (row indices are 32-bit). */
#define PS_ROWS_MAX PS_JOB_MAX_ROWS

typedef struct {
    size_t dim;         /* floats per row, 1 .. PS_JOB_MAX_EMBED_DIM */
    ps_optim_t optim;   /* the per-row optimizer: PS_OPT_SGD (momentum allowed),
                           PS_OPT_ADAGRAD or PS_OPT_FTRL (no per-row step count, so
                           not Adam; nor Nesterov) */
    uint64_t seed;      /* initial values: ps_optim_row_init(seed, key, dim, init_bound) */
    float init_bound;   /* >= 0, finite */
    uint32_t min_count; /* a key gets a row on its min_count-th update (0, 1: the first) */
    uint64_t max_rows;  /* rows at most; 0 = no cap (PS_ROWS_MAX either way) */
} ps_rows_config_t;

typedef struct {        /* counters since the table was made */
    uint64_t rows;      /* rows now */
    uint64_t pending;   /* keys now with sightings but no row (min_count > 1) */
    uint64_t created;   /* rows created by updates (not counting imported ones) */
    uint64_t filtered;  /* key updates dropped: fewer than min_count sightings so far */
    uint64_t refused;   /* key updates dropped: the table was at max_rows */
    uint64_t nonfinite; /* key updates undone: a value or state would become non-finite */
    uint64_t updates;   /* key updates applied */
} ps_rows_stats_t;

/*
 * An empty table. Returns 0, PS_EINVAL (dim out of range, init_bound negative
 * or not finite, an optimizer other than sgd, adagrad or ftrl) or PS_ENOMEM.
 * *cfg is copied. Caller owns *out; destroy with ps_rows_destroy().
 */
int ps_rows_new(ps_rows_t **out, const ps_rows_config_t *cfg);

/* Frees the table; NULL-safe; sets *t to NULL. */
void ps_rows_destroy(ps_rows_t **t);

/* Empties the table (its rows and pending sightings, and their memory), as
 * before a snapshot is imported again (a failover's rollback). The counters
 * other than rows and pending stay as they were. */
void ps_rows_clear(ps_rows_t *t);

/* Floats per row (the config's dim). */
size_t ps_rows_dim(const ps_rows_t *t);

/* Arrays of optimizer state per row (ps_optim_state_floats of the config's
 * optimizer: 0, 1 or 2). */
int ps_rows_state_floats(const ps_rows_t *t);

/*
 * The values of keys[0..n) into out (n x dim floats, key i at out + i*dim):
 * a key with a row gives its values; one without gives its initial values
 * when min_count <= 1, zeros when min_count > 1 (a filtered key reads as
 * zeros). Never creates a row nor counts a sighting, so pulls cost no memory.
 * Keys may repeat.
 */
void ps_rows_read(const ps_rows_t *t, const uint64_t *keys, size_t n, float *out);

/*
 * One update of keys[0..n), distinct, with gradient grad*scale at learning
 * rate lr (grad: n x dim floats, key i at grad + i*dim): ps_optim_step on the
 * row and its state, t = 1. In key order, for each key:
 *   - a key with a row: the row is updated (stats.updates);
 *   - at the cap (rows == max_rows), a key without a row gets none: its
 *     update is dropped, its sighting not counted (stats.refused), and it
 *     reads as before;
 *   - else the update is a sighting of the key: on its min_count-th the key
 *     gets a row (initial values, zeroed state; stats.created) and the
 *     update applies; earlier ones are dropped (stats.filtered).
 * A row whose update would make a value or its state NaN or infinite is
 * left as it was (stats.nonfinite). A key given twice is updated, and
 * sighted, twice.
 * Returns the number of keys refused by the cap in this call (so the caller
 * can warn), or PS_ENOMEM: keys before the one that needed memory were
 * applied as above, that key and the ones after it were not (not sighted
 * either); the table stays valid.
 */
int ps_rows_update(ps_rows_t *t, const uint64_t *keys, size_t n, const float *grad,
                   float lr, float scale);

/* The counters into *out. */
void ps_rows_stats(const ps_rows_t *t, ps_rows_stats_t *out);

/* Bytes of memory the table holds: every allocation, at its allocated size
 * (the memory metric). */
size_t ps_rows_bytes(const ps_rows_t *t);

/* Rows in the table. */
size_t ps_rows_count(const ps_rows_t *t);

/* Keys with sightings but no row (always 0 when min_count <= 1). */
size_t ps_rows_pending_count(const ps_rows_t *t);

/*
 * Snapshot of the rows (checkpoints, replicas), ascending by key, so the
 * bytes are the same whatever order the rows were made in. With
 * r = ps_rows_count(t) and d = dim: keys gets r keys; values r x d floats,
 * row i at values + i*d; state the state_floats arrays one after the other,
 * array a of row i at state + (a*r + i)*d (so ps_optim_step on the snapshot
 * takes stride r*d). The arrays are the caller's; state may be NULL when
 * there are no state arrays, and all three when there are no rows.
 */
void ps_rows_export(const ps_rows_t *t, uint64_t *keys, float *values, float *state);

/* ps_rows_export in parts (a replica's snapshot, a part a message): the
 * keys of every row, ascending, into keys (ps_rows_count(t) of them); then
 * the rows of keys[0..n), each with a row, into values and state in
 * ps_rows_export's layout for n rows. */
void ps_rows_export_keys(const ps_rows_t *t, uint64_t *keys);
void ps_rows_export_part(const ps_rows_t *t, const uint64_t *keys, size_t n, float *values,
                         float *state);

/* The keys that have sightings but no row, ascending, into keys and their
 * sightings (1 .. min_count - 1) into counts: ps_rows_pending_count(t) of
 * each (NULL when none). With the rows, what makes a resumed table filter
 * as this one. */
void ps_rows_pending_export(const ps_rows_t *t, uint64_t *keys, uint32_t *counts);

/*
 * Loads a snapshot (the arrays of ps_rows_export and ps_rows_pending_export,
 * same layout, copied) into an empty table: n rows and np pending keys.
 * Returns 0; PS_ESTATE when the table has rows or pending keys; PS_EINVAL
 * when keys or pkeys are not strictly ascending, a pending key has a row,
 * a count is outside 1 .. min_count - 1 (so any pending key with
 * min_count <= 1), or n exceeds the cap; PS_ENONFINITE when a value or state
 * is NaN or infinite; PS_ENOMEM. On failure the table stays empty. The
 * counters other than rows and pending stay as they were.
 */
int ps_rows_import(ps_rows_t *t, size_t n, const uint64_t *keys, const float *values,
                   const float *state, size_t np, const uint64_t *pkeys,
                   const uint32_t *pcounts);

/*
 * ps_rows_import for a snapshot that comes in parts: the part (same
 * arrays) is loaded beside the rows and pending keys the table has. Returns
 * 0; PS_EINVAL as ps_rows_import, or a key the table has already (as a
 * row or pending), or more rows than the cap in all; PS_ENONFINITE;
 * PS_ENOMEM (the rows before the one that needed memory are loaded). On
 * any other failure nothing changes.
 */
int ps_rows_import_part(ps_rows_t *t, size_t n, const uint64_t *keys, const float *values,
                        const float *state, size_t np, const uint64_t *pkeys,
                        const uint32_t *pcounts);

/* Sets the counters a copy of a table continues from (a replica's
 * snapshot): all of *st but rows and pending, which the table counts. */
void ps_rows_set_stats(ps_rows_t *t, const ps_rows_stats_t *st);

#ifdef __cplusplus
}
#endif
#endif
