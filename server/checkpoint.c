/*
 * server/checkpoint.c - a shard, and a job's embedding rows, to and from its
 * safetensors part.
 */
#include "server/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/file.h"
#include "common/rowkey.h"
#include "common/safetensors.h"

enum {
    S_MAX_STATE = 2, /* optimizer state arrays at most */
    /* params and its state, the rows' values and their state, three of keys and counts */
    S_MAX_TENSORS = 2 * (1 + S_MAX_STATE) + 3,
    S_NAME = 32, /* a state array's name, bytes at most */
};

/* The names of the optimizer's state arrays, PyTorch's (torch.optim's state
 * keys; for FTRL, which torch.optim lacks, z and n of McMahan et al.), in
 * the store's order. */
static void s_state_names(const ps_job_t *job, const char *names[S_MAX_STATE])
{
    if (!strcmp(job->optimizer, "adam")) {
        names[0] = "opt.exp_avg";
        names[1] = "opt.exp_avg_sq";
    } else if (!strcmp(job->optimizer, "ftrl")) {
        names[0] = "opt.z";
        names[1] = "opt.n";
    } else {
        names[0] = !strcmp(job->optimizer, "adagrad") ? "opt.sum" : "opt.momentum_buffer";
        names[1] = NULL;
    }
}

/* The rows' state arrays: "rows." and the store's names. */
static void s_row_state_names(const ps_job_t *job, char names[S_MAX_STATE][S_NAME])
{
    const char *dense[S_MAX_STATE];
    s_state_names(job, dense);
    for (int a = 0; a < S_MAX_STATE; a++) {
        snprintf(names[a], S_NAME, "rows.%s", dense[a] ? dense[a] : "");
    }
}

/* A job's min_count as the filter reads it: 0 and 1 both mean none. */
static uint64_t s_min_count(uint64_t min_count)
{
    return min_count > 1 ? min_count : 1;
}

/* ---- writing ---- */

/* The rows as a part holds them: ps_rows_export's and
 * ps_rows_pending_export's arrays. */
typedef struct {
    size_t n, np, dim; /* rows, pending keys, floats per row */
    int nstate;        /* state arrays per row */
    uint64_t *keys;    /* n, ascending */
    float *values;     /* n x dim */
    float *state;      /* nstate x n x dim, array after array */
    uint64_t *pkeys;   /* np, ascending */
    uint32_t *pcounts; /* np */
} s_snap_t;

static void s_snap_free(s_snap_t *sn)
{
    free(sn->keys);
    free(sn->values);
    free(sn->state);
    free(sn->pkeys);
    free(sn->pcounts);
    memset(sn, 0, sizeof *sn);
}

/* Takes t's snapshot into *sn. Returns 0 or PS_ENOMEM (*sn empty). */
static int s_snap_take(const ps_rows_t *t, s_snap_t *sn)
{
    memset(sn, 0, sizeof *sn);
    sn->n = ps_rows_count(t);
    sn->np = ps_rows_pending_count(t);
    sn->dim = ps_rows_dim(t);
    sn->nstate = ps_rows_state_floats(t);
    const size_t nd = sn->n * sn->dim;
    /* one byte at least: NULL then means out of memory alone */
    sn->keys = malloc(sn->n * sizeof *sn->keys + 1);
    sn->values = malloc(nd * sizeof *sn->values + 1);
    sn->state = malloc(nd * (size_t)sn->nstate * sizeof *sn->state + 1);
    sn->pkeys = malloc(sn->np * sizeof *sn->pkeys + 1);
    sn->pcounts = malloc(sn->np * sizeof *sn->pcounts + 1);
    if (!sn->keys || !sn->values || !sn->state || !sn->pkeys || !sn->pcounts) {
        s_snap_free(sn);
        return PS_ENOMEM;
    }
    ps_rows_export(t, sn->keys, sn->values, sn->state);
    ps_rows_pending_export(t, sn->pkeys, sn->pcounts);
    return 0;
}

/* The part's tensors into t: the store's n values and state arrays, and the
 * rows of sn (NULL: none), the U64 ones first so that every tensor starts at
 * a multiple of its element size. rnames: storage for the rows' state names.
 * Returns their number. */
static int s_part_tensors(const ps_store_t *store, const float *params, int64_t n,
                          const ps_job_t *job, const s_snap_t *sn,
                          char rnames[S_MAX_STATE][S_NAME], ps_safetensors_tensor_t *t)
{
    const char *names[S_MAX_STATE];
    s_state_names(job, names);
    s_row_state_names(job, rnames);
    int nt = 0;
    if (sn) {
        t[nt++] = (ps_safetensors_tensor_t){.name = "rows.keys", .ndim = 1,
                                            .shape = {(int64_t)sn->n}, .u64 = sn->keys,
                                            .dtype = PS_SAFETENSORS_U64};
        t[nt++] = (ps_safetensors_tensor_t){.name = "rows.pending.keys", .ndim = 1,
                                            .shape = {(int64_t)sn->np}, .u64 = sn->pkeys,
                                            .dtype = PS_SAFETENSORS_U64};
    }
    t[nt++] = (ps_safetensors_tensor_t){.name = "params", .ndim = 1, .shape = {n},
                                        .data = params};
    for (int i = 0; i < ps_store_state_arrays(store) && i < S_MAX_STATE; i++) {
        t[nt++] = (ps_safetensors_tensor_t){.name = names[i], .ndim = 1, .shape = {n},
                                            .data = ps_store_state((ps_store_t *)store, i)};
    }
    if (sn) {
        const int64_t shape[2] = {(int64_t)sn->n, (int64_t)sn->dim};
        t[nt++] = (ps_safetensors_tensor_t){.name = "rows.values", .ndim = 2,
                                            .shape = {shape[0], shape[1]}, .data = sn->values};
        for (int a = 0; a < sn->nstate && a < S_MAX_STATE; a++) {
            t[nt++] = (ps_safetensors_tensor_t){
                .name = rnames[a], .ndim = 2, .shape = {shape[0], shape[1]},
                .data = sn->state + (size_t)a * sn->n * sn->dim};
        }
        t[nt++] = (ps_safetensors_tensor_t){.name = "rows.pending.counts", .ndim = 1,
                                            .shape = {(int64_t)sn->np}, .u32 = sn->pcounts,
                                            .dtype = PS_SAFETENSORS_U32};
    }
    return nt;
}

/* The part's file name in sub: server-R.safetensors, or server-R.K.safetensors
 * (smallest K free) when a part of this step was written before. A step
 * trained again after a rollback must not replace a file that an earlier
 * complete manifest names: until the new manifest is written, that one is
 * what a resume or a failover loads. */
static int s_fresh_name(const char *sub, int rank, char *name, size_t name_cap, char *path,
                        size_t path_cap)
{
    enum { S_MAX_REWRITES = 1000 };
    struct stat sb;
    for (int k = 0; k < S_MAX_REWRITES; k++) {
        if (k == 0) {
            snprintf(name, name_cap, "server-%d.safetensors", rank);
        } else {
            snprintf(name, name_cap, "server-%d.%d.safetensors", rank, k);
        }
        snprintf(path, path_cap, "%s/%s", sub, name);
        if (stat(path, &sb) != 0 && errno == ENOENT) {
            return 0;
        }
    }
    return PS_EIO;
}

/* The metadata's values as text. */
typedef struct {
    char kb[24], ke[24], step[24], version[24], lr_step[24], np[24], rank[16], servers[16];
    char seed[24], mode[32], dim[24], min_count[24], first[24], last[24];
} s_meta_text_t;

enum { S_MAX_META = 20 }; /* metadata pairs at most */

/* The part's metadata pairs into meta (key, value, ...), their values' text
 * in *tx; steps: each worker's next step; sn: the rows (NULL: none).
 * Returns the number of pairs. */
static int s_part_meta(const ps_checkpoint_info_t *info, ps_range_t r, const char *steps,
                       const s_snap_t *sn, s_meta_text_t *tx, const char **meta)
{
    snprintf(tx->kb, sizeof tx->kb, "%" PRIu64, r.begin);
    snprintf(tx->ke, sizeof tx->ke, "%" PRIu64, r.end);
    snprintf(tx->step, sizeof tx->step, "%" PRId64, info->step);
    snprintf(tx->version, sizeof tx->version, "%" PRId64, info->version);
    /* the lr schedule's position: async's is version / workers (consistency.c:s_lr) */
    snprintf(tx->lr_step, sizeof tx->lr_step, "%" PRId64,
             info->version == info->step ? info->step : info->version / info->workers);
    snprintf(tx->np, sizeof tx->np, "%" PRIu64, info->num_params);
    snprintf(tx->rank, sizeof tx->rank, "%d", info->rank);
    snprintf(tx->servers, sizeof tx->servers, "%d", info->servers);
    snprintf(tx->seed, sizeof tx->seed, "%" PRIu64, info->job->seed);
    ps_job_mode_str(info->job, tx->mode, sizeof tx->mode);
    /* version = updates applied (Adam's t); stepped modes: = step = the lr
     * schedule's position. */
    const char *pairs[] = {"format", "shardps-checkpoint-1", "step", tx->step,
                           "version", tx->version, "updates", tx->version,
                           "lr_step", tx->lr_step, "worker_steps", steps,
                           "key_begin", tx->kb, "key_end", tx->ke, "num_params", tx->np,
                           "rank", tx->rank, "servers", tx->servers,
                           "model", info->job->model, "optimizer", info->job->optimizer,
                           "mode", tx->mode, "seed", tx->seed};
    int n = (int)(sizeof pairs / sizeof pairs[0]);
    memcpy(meta, pairs, sizeof pairs);
    if (sn) {
        snprintf(tx->dim, sizeof tx->dim, "%zu", sn->dim);
        snprintf(tx->min_count, sizeof tx->min_count, "%d", info->job->min_count);
        snprintf(tx->first, sizeof tx->first, "%" PRIu64, info->rows.range.first);
        snprintf(tx->last, sizeof tx->last, "%" PRIu64, info->rows.range.last);
        const char *rows[] = {"embed_dim", tx->dim, "min_count", tx->min_count,
                              "rows_first", tx->first, "rows_last", tx->last};
        memcpy(meta + n, rows, sizeof rows);
        n += (int)(sizeof rows / sizeof rows[0]);
    }
    return n / 2;
}

int ps_checkpoint_write(const ps_checkpoint_info_t *info, const ps_store_t *store,
                        ps_checkpoint_part_t *part, char *why, size_t cap)
{
    char sub[4096], path[4200], name[64];
    snprintf(sub, sizeof sub, "%s/step-%" PRId64, info->dir, info->step);
    if (ps_file_make_dir(info->dir) != 0 || ps_file_make_dir(sub) != 0) {
        snprintf(why, cap, "cannot create %s: %s", sub, strerror(errno));
        return PS_EIO;
    }
    if (s_fresh_name(sub, info->rank, name, sizeof name, path, sizeof path) != 0) {
        snprintf(why, cap, "%s: no free name for server %d's part", sub, info->rank);
        return PS_EIO;
    }
    const ps_range_t r = ps_store_shard(store);
    const int64_t n = (int64_t)ps_range_len(r);
    /* Values some of which moved to spares while replies held them are
     * gathered into one array for the file (server/store.h). */
    float *gathered = NULL;
    const float *params = ps_store_flat(store);
    if (!params && (gathered = malloc((size_t)n * sizeof(float)))) {
        ps_store_read(store, r, gathered);
        params = gathered;
    }
    s_snap_t snap = {0};
    const s_snap_t *sn = info->rows.table ? &snap : NULL;
    char *steps = malloc((size_t)info->workers * 24 + 1);
    if (!params || !steps || (sn && s_snap_take(info->rows.table, &snap) != 0)) {
        free(steps);
        free(gathered);
        snprintf(why, cap, "out of memory");
        return PS_ENOMEM;
    }
    size_t at = 0;
    for (int w = 0; w < info->workers; w++) { /* every worker's next step (resumed) is N */
        at += (size_t)sprintf(steps + at, "%s%" PRId64, w ? "," : "", info->step);
    }
    steps[at] = '\0';
    ps_safetensors_tensor_t t[S_MAX_TENSORS];
    char rnames[S_MAX_STATE][S_NAME];
    const int nt = s_part_tensors(store, params, n, info->job, sn, rnames, t);
    s_meta_text_t tx;
    const char *meta[2 * S_MAX_META];
    const int nmeta = s_part_meta(info, r, steps, sn, &tx, meta);
    int rc = ps_safetensors_write(path, t, nt, meta, nmeta, why, cap);
    s_snap_free(&snap);
    free(steps);
    free(gathered);
    if (rc != 0) {
        return rc;
    }
    struct stat sb;
    memset(part, 0, sizeof *part);
    if (stat(path, &sb) != 0 || ps_file_crc32(path, &part->crc32) != 0) {
        snprintf(why, cap, "cannot read back %s", path);
        return PS_EIO;
    }
    part->step = info->step;
    part->version = info->version;
    snprintf(part->file, sizeof part->file, "%s", name);
    part->size = (uint64_t)sb.st_size;
    part->begin = r.begin;
    part->end = r.end;
    return 0;
}

/* ---- loading ---- */

/* The part's keys from its metadata, checked against its step, optimizer and
 * tensor sizes. */
static int s_part_keys(const ps_safetensors_t *st, const char *path, int64_t step,
                       const ps_job_t *job, ps_range_t *keys, int64_t *version, char *why,
                       size_t cap)
{
    const char *vp = ps_safetensors_meta(st, "version");
    *version = vp ? strtoll(vp, NULL, 10) : step;
    const char *kb = ps_safetensors_meta(st, "key_begin"), *ke = ps_safetensors_meta(st, "key_end");
    const char *sp = ps_safetensors_meta(st, "step"), *op = ps_safetensors_meta(st, "optimizer");
    const ps_safetensors_tensor_t *p = ps_safetensors_find(st, "params");
    if (!kb || !ke || !sp || !op || !p) {
        snprintf(why, cap, "%s: not a shardps checkpoint part", path);
        return PS_EPROTO;
    }
    keys->begin = strtoull(kb, NULL, 10);
    keys->end = strtoull(ke, NULL, 10);
    if (strtoll(sp, NULL, 10) != step || strcmp(op, job->optimizer) ||
        keys->end < keys->begin || p->numel != ps_range_len(*keys)) {
        snprintf(why, cap, "%s: step %s, optimizer %s, %zu values for keys [%s, %s): "
                 "not a part of step %" PRId64 " with optimizer %s", path, sp, op, p->numel,
                 kb, ke, step, job->optimizer);
        return PS_EPROTO;
    }
    int rows = 0; /* by its name: its dtype is checked with the rows */
    for (int i = 0; i < ps_safetensors_count(st); i++) {
        rows |= !strcmp(ps_safetensors_at(st, i)->name, "rows.keys");
    }
    if (rows != ps_job_has_rows(job)) {
        snprintf(why, cap, "%s: %s embedding rows, the job (model %s) %s", path,
                 rows ? "holds" : "holds no", job->model, rows ? "has none" : "has some");
        return PS_EPROTO;
    }
    return 0;
}

/* Reads part (the manifest's entry) from dir, when its size and CRC-32, as
 * read, are the manifest's, and its keys are. Returns 0 or a PS_E* with the
 * reason naming the file in why. */
static int s_read_part(const char *dir, const ps_checkpoint_part_t *part, int64_t step,
                       const ps_job_t *job, ps_safetensors_t **st, int64_t *version,
                       char *why, size_t cap)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, part->file);
    uint64_t size = 0;
    uint32_t crc = 0;
    ps_range_t keys = {0, 0};
    int rc = ps_safetensors_read_sum(path, st, &size, &crc, why, cap);
    if (rc == 0 && (size != part->size || crc != part->crc32)) {
        snprintf(why, cap, "%s is %" PRIu64 " bytes with CRC-32 %08" PRIx32 ", the manifest "
                 "says %" PRIu64 " bytes, %08" PRIx32, path, size, crc, part->size,
                 part->crc32);
        rc = PS_EPROTO;
    }
    rc = rc ? rc : s_part_keys(*st, path, step, job, &keys, version, why, cap);
    if (rc == 0 && (keys.begin != part->begin || keys.end != part->end)) {
        snprintf(why, cap, "%s holds keys [%" PRIu64 ", %" PRIu64 "), the manifest says [%" PRIu64
                 ", %" PRIu64 ")", path, keys.begin, keys.end, part->begin, part->end);
        rc = PS_EPROTO;
    }
    return rc;
}

/* One part's rows, checked (s_part_rows): pointers into its file. */
typedef struct {
    size_t n, np;                      /* rows, pending keys */
    const uint64_t *keys;              /* n, ascending */
    const float *values;               /* n x dim */
    const float *state[S_MAX_STATE];   /* each n x dim */
    const uint64_t *pkeys;             /* np, ascending */
    const uint32_t *pcounts;           /* np */
} s_rows_in_t;

/* The metadata value of key as a decimal uint64 into *out. Returns 0, or -1
 * when it is missing or not one. */
static int s_meta_u64(const ps_safetensors_t *st, const char *key, uint64_t *out)
{
    const char *v = ps_safetensors_meta(st, key);
    char *end = NULL;
    if (!v || *v < '0' || *v > '9') {
        return -1;
    }
    errno = 0;
    *out = strtoull(v, &end, 10);
    return errno == 0 && *end == '\0' ? 0 : -1;
}

/* Whether hash h is in r. */
static int s_in(ps_rowrange_t r, uint64_t h)
{
    return h >= r.first && h <= r.last;
}

/* Whether keys[0..n) ascend strictly, each one's hash in r. */
static int s_keys_ok(const uint64_t *keys, size_t n, ps_rowrange_t r)
{
    for (size_t i = 0; i < n; i++) {
        if ((i > 0 && keys[i] <= keys[i - 1]) || !s_in(r, ps_rowkey_hash(keys[i]))) {
            return 0;
        }
    }
    return 1;
}

/* A part's rows tensors against the job (dim, nstate, the job's min_count),
 * and against held: the hashes this part's server held in the old job.
 * Fills *in. Returns 0 or PS_EPROTO with the reason naming path. */
static int s_part_rows(const ps_safetensors_t *st, const char *path, const ps_job_t *job,
                       size_t dim, int nstate, ps_rowrange_t held, s_rows_in_t *in, char *why,
                       size_t cap)
{
    uint64_t edim, minc, first, last;
    const ps_safetensors_tensor_t *k = ps_safetensors_find_dtype(st, "rows.keys",
                                                                 PS_SAFETENSORS_U64);
    const ps_safetensors_tensor_t *v = ps_safetensors_find(st, "rows.values");
    const ps_safetensors_tensor_t *pk = ps_safetensors_find_dtype(st, "rows.pending.keys",
                                                                  PS_SAFETENSORS_U64);
    const ps_safetensors_tensor_t *pc = ps_safetensors_find_dtype(st, "rows.pending.counts",
                                                                  PS_SAFETENSORS_U32);
    if (!k || !v || !pk || !pc || s_meta_u64(st, "embed_dim", &edim) ||
        s_meta_u64(st, "min_count", &minc) || s_meta_u64(st, "rows_first", &first) ||
        s_meta_u64(st, "rows_last", &last)) {
        snprintf(why, cap, "%s: no whole embedding rows (rows.keys U64, rows.values F32, "
                 "rows.pending.keys U64, rows.pending.counts U32, embed_dim, min_count, "
                 "rows_first, rows_last)", path);
        return PS_EPROTO;
    }
    int states = 0; /* the job's layout first: its refusal says what differs */
    for (int i = 0; i < ps_safetensors_count(st); i++) {
        states += !strncmp(ps_safetensors_at(st, i)->name, "rows.opt.", 9);
    }
    if (edim != dim) {
        snprintf(why, cap, "%s: rows of --embed-dim %" PRIu64 ", the job's is %zu", path, edim,
                 dim);
        return PS_EPROTO;
    }
    if (s_min_count(minc) != s_min_count((uint64_t)job->min_count)) {
        snprintf(why, cap, "%s: rows of --min-count %" PRIu64 ", the job's is %d", path, minc,
                 job->min_count);
        return PS_EPROTO;
    }
    if (states != nstate) {
        snprintf(why, cap, "%s: rows with %d optimizer state arrays, the job's %s keeps %d",
                 path, states, job->optimizer, nstate);
        return PS_EPROTO;
    }
    char names[S_MAX_STATE][S_NAME];
    s_row_state_names(job, names);
    memset(in, 0, sizeof *in);
    in->n = k->numel;
    in->np = pk->numel;
    int ok = k->ndim == 1 && pk->ndim == 1 && pc->ndim == 1 && pc->numel == in->np &&
             in->n <= PS_ROWS_MAX && v->ndim == 2 && (uint64_t)v->shape[0] == in->n &&
             (uint64_t)v->shape[1] == dim && first == held.first && last == held.last;
    for (int a = 0; ok && a < nstate; a++) {
        const ps_safetensors_tensor_t *t = ps_safetensors_find(st, names[a]);
        ok = t && t->ndim == 2 && (uint64_t)t->shape[0] == in->n &&
             (uint64_t)t->shape[1] == dim;
        in->state[a] = ok ? t->data : NULL;
    }
    if (!ok) {
        snprintf(why, cap, "%s: rows tensors of other shapes than [R], [R, %zu] and [Q], "
                 "or of hashes [%" PRIu64 ", %" PRIu64 "], not its server's [%" PRIu64
                 ", %" PRIu64 "]", path, dim, first, last, held.first, held.last);
        return PS_EPROTO;
    }
    in->keys = k->u64;
    in->values = v->data;
    in->pkeys = pk->u64;
    in->pcounts = pc->u32;
    if (!s_keys_ok(in->keys, in->n, held) || !s_keys_ok(in->pkeys, in->np, held)) {
        snprintf(why, cap, "%s: row or pending keys not ascending, or not of the hashes "
                 "[%" PRIu64 ", %" PRIu64 "]", path, first, last);
        return PS_EPROTO;
    }
    for (size_t i = 0; i < in->np; i++) {
        if (in->pcounts[i] == 0 || in->pcounts[i] >= s_min_count((uint64_t)job->min_count)) {
            snprintf(why, cap, "%s: pending key %" PRIu64 " seen %" PRIu32 " times, not "
                     "1 .. --min-count - 1", path, in->pkeys[i], in->pcounts[i]);
            return PS_EPROTO;
        }
    }
    return 0;
}

/* Where a row comes from: its key, part and index there. */
typedef struct {
    uint64_t key;
    uint32_t part, row;
} s_src_t;

static int s_by_key(const void *a, const void *b)
{
    const uint64_t x = ((const s_src_t *)a)->key, y = ((const s_src_t *)b)->key;
    return (x > y) - (x < y);
}

/* The keys of in[0..nparts) (rows, or pending when pending) whose hashes are
 * in r, ascending, into *out (n of them). Returns 0 or PS_ENOMEM. */
static int s_select(const s_rows_in_t *in, int nparts, ps_rowrange_t r, int pending,
                    s_src_t **out, size_t *n)
{
    size_t count = 0;
    for (int i = 0; i < nparts; i++) {
        const uint64_t *keys = pending ? in[i].pkeys : in[i].keys;
        for (size_t j = 0; j < (pending ? in[i].np : in[i].n); j++) {
            count += s_in(r, ps_rowkey_hash(keys[j]));
        }
    }
    s_src_t *e = malloc(count * sizeof *e + 1);
    if (!e) {
        return PS_ENOMEM;
    }
    size_t at = 0;
    int sorted = 1;
    for (int i = 0; i < nparts; i++) {
        const uint64_t *keys = pending ? in[i].pkeys : in[i].keys;
        for (size_t j = 0; j < (pending ? in[i].np : in[i].n); j++) {
            if (s_in(r, ps_rowkey_hash(keys[j]))) {
                sorted &= at == 0 || keys[j] > e[at - 1].key;
                e[at++] = (s_src_t){keys[j], (uint32_t)i, (uint32_t)j};
            }
        }
    }
    if (!sorted) { /* the parts of an old job of other servers interleave */
        qsort(e, count, sizeof *e, s_by_key);
    }
    *out = e;
    *n = count;
    return 0;
}

/* The rows of each part whose server held some hashes of r in the old job
 * (held[]: ps_range_split_rows), read into sts[] where not yet, into in[].
 * Parts holding none of r are left unread, as they may be on another host.
 * Returns 0 or a PS_E* with the reason in why. */
static int s_read_held(const char *dir, const ps_checkpoint_part_t *parts, int nparts,
                       int64_t step, const ps_job_t *job, size_t d, int nstate,
                       ps_rowrange_t r, const ps_rowrange_t *held, ps_safetensors_t **sts,
                       s_rows_in_t *in, int64_t *version, char *why, size_t cap)
{
    int rc = 0;
    for (int i = 0; i < nparts && rc == 0; i++) {
        if (held[i].last < r.first || held[i].first > r.last) {
            continue;
        }
        int64_t v = step;
        if (!sts[i] &&
            (rc = s_read_part(dir, &parts[i], step, job, &sts[i], &v, why, cap)) == 0 &&
            version) {
            *version = v;
        }
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, parts[i].file);
        rc = rc ? rc : s_part_rows(sts[i], path, job, d, nstate, held[i], &in[i], why, cap);
    }
    return rc;
}

/* The n rows e[] and np pending keys pe[] name in in[], gathered into *sn as
 * ps_rows_import takes them. Returns 0 or PS_ENOMEM (free *sn either way). */
static int s_gather(const s_rows_in_t *in, const s_src_t *e, size_t n, const s_src_t *pe,
                    size_t np, size_t d, int nstate, s_snap_t *sn)
{
    *sn = (s_snap_t){.n = n, .np = np, .dim = d, .nstate = nstate};
    sn->keys = malloc(n * sizeof *sn->keys + 1);
    sn->values = malloc(n * d * sizeof *sn->values + 1);
    sn->state = malloc(n * d * (size_t)nstate * sizeof *sn->state + 1);
    sn->pkeys = malloc(np * sizeof *sn->pkeys + 1);
    sn->pcounts = malloc(np * sizeof *sn->pcounts + 1);
    if (!sn->keys || !sn->values || !sn->state || !sn->pkeys || !sn->pcounts) {
        return PS_ENOMEM;
    }
    for (size_t j = 0; j < n; j++) {
        const s_rows_in_t *p = &in[e[j].part];
        sn->keys[j] = e[j].key;
        memcpy(sn->values + j * d, p->values + (size_t)e[j].row * d,
               d * sizeof *sn->values);
        for (int a = 0; a < nstate; a++) {
            memcpy(sn->state + ((size_t)a * n + j) * d, p->state[a] + (size_t)e[j].row * d,
                   d * sizeof *sn->state);
        }
    }
    for (size_t j = 0; j < np; j++) {
        sn->pkeys[j] = pe[j].key;
        sn->pcounts[j] = in[pe[j].part].pcounts[pe[j].row];
    }
    return 0;
}

/* The rows of rows->range from the parts whose server held some of those
 * hashes in the old job (of nparts servers: ps_range_split_rows), read into
 * sts[] where not yet, into the empty table. Returns 0 or a PS_E* with the
 * reason in why. */
static int s_load_rows(const char *dir, const ps_checkpoint_part_t *parts, int nparts,
                       int64_t step, const ps_checkpoint_rows_t *rows, const ps_job_t *job,
                       ps_safetensors_t **sts, int64_t *version, char *why, size_t cap)
{
    const size_t d = ps_rows_dim(rows->table);
    const int nstate = ps_rows_state_floats(rows->table);
    const ps_rowrange_t r = rows->range;
    ps_rowrange_t *held = calloc((size_t)nparts + 1, sizeof *held);
    s_rows_in_t *in = calloc((size_t)nparts + 1, sizeof *in);
    s_src_t *e = NULL, *pe = NULL;
    size_t n = 0, np = 0;
    s_snap_t sn = {0};
    int rc = !held || !in ? PS_ENOMEM
             : nparts < 1 ? PS_EPROTO
                          : ps_range_split_rows(nparts, held);
    if (rc == PS_EPROTO) {
        snprintf(why, cap, "%s: no part to load rows from", dir);
    }
    rc = rc ? rc
            : s_read_held(dir, parts, nparts, step, job, d, nstate, r, held, sts, in,
                          version, why, cap);
    rc = rc ? rc : s_select(in, nparts, r, 0, &e, &n);
    rc = rc ? rc : s_select(in, nparts, r, 1, &pe, &np);
    const uint64_t max = job->max_rows && job->max_rows < PS_ROWS_MAX ? job->max_rows
                                                                      : PS_ROWS_MAX;
    if (rc == 0 && n > max) {
        snprintf(why, cap, "%s: %zu rows for this server, more than the job's --max-rows %"
                 PRIu64, dir, n, max);
        rc = PS_EPROTO;
    }
    rc = rc ? rc : s_gather(in, e, n, pe, np, d, nstate, &sn);
    if (rc == 0) {
        rc = ps_rows_import(rows->table, n, sn.keys, sn.values, sn.state, np, sn.pkeys,
                            sn.pcounts);
        if (rc != 0) {
            snprintf(why, cap, "%s: the %zu rows and %zu pending keys of hashes [%" PRIu64
                     ", %" PRIu64 "] do not load: %s", dir, n, np, r.first, r.last,
                     rc == PS_ENONFINITE ? "a value or optimizer state is not finite"
                     : rc == PS_ESTATE  ? "the table is not empty"
                                        : ps_strerror(rc));
            rc = rc == PS_ENOMEM ? rc : PS_EPROTO;
        }
    } else if (rc == PS_ENOMEM) {
        snprintf(why, cap, "out of memory for the rows of %s", dir);
    }
    s_snap_free(&sn);
    free(e);
    free(pe);
    free(in);
    free(held);
    return rc;
}

int ps_checkpoint_load(const char *dir, const ps_checkpoint_part_t *parts, int nparts,
                       int64_t step, ps_store_t *store, const ps_checkpoint_rows_t *rows,
                       const ps_job_t *job, int64_t *version, char *why, size_t cap)
{
    ps_safetensors_t **sts = calloc((size_t)(nparts > 0 ? nparts : 1), sizeof *sts);
    if (!sts) {
        snprintf(why, cap, "out of memory");
        return PS_ENOMEM;
    }
    const ps_range_t shard = ps_store_shard(store);
    const char *names[S_MAX_STATE];
    s_state_names(job, names);
    int rc = 0;
    /* Two passes: the parameters complete the initialisation, which zeroes the
     * optimizer state; the state is copied after. Only the parts holding keys
     * of this shard are read: the others may be on other hosts. */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (int i = 0; i < nparts && rc == 0; i++) {
            const ps_range_t keys = {parts[i].begin, parts[i].end};
            const ps_range_t ov = {keys.begin > shard.begin ? keys.begin : shard.begin,
                                   keys.end < shard.end ? keys.end : shard.end};
            if (ov.end <= ov.begin) {
                continue;
            }
            int64_t v = step;
            if (!sts[i]) {
                rc = s_read_part(dir, &parts[i], step, job, &sts[i], &v, why, cap);
                if (rc == 0 && version) {
                    *version = v;
                }
            }
            if (rc != 0) {
                continue;
            }
            const uint64_t off = ov.begin - keys.begin, len = ps_range_len(ov);
            if (pass == 0) {
                const float *p = ps_safetensors_find(sts[i], "params")->data;
                rc = ps_store_init(store, ov, p + off) < 0 ? PS_EPROTO : 0;
                if (rc != 0) {
                    snprintf(why, cap, "%s/%s: keys [%" PRIu64 ", %" PRIu64 ") overlap another "
                             "part", dir, parts[i].file, ov.begin, ov.end);
                }
                continue;
            }
            for (int a = 0; a < ps_store_state_arrays(store) && rc == 0; a++) {
                const ps_safetensors_tensor_t *t = ps_safetensors_find(sts[i], names[a]);
                if (!t || t->numel != ps_range_len(keys)) {
                    snprintf(why, cap, "%s/%s: no %s of %" PRIu64 " values", dir, parts[i].file,
                             names[a], ps_range_len(keys));
                    rc = PS_EPROTO;
                    break;
                }
                memcpy(ps_store_state(store, a) + (ov.begin - shard.begin), t->data + off,
                       len * sizeof(float));
            }
        }
        if (rc == 0 && pass == 0 && !ps_store_initialized(store)) {
            snprintf(why, cap, "the %d parts in %s do not cover keys [%" PRIu64 ", %" PRIu64 ")",
                     nparts, dir, shard.begin, shard.end);
            rc = PS_EPROTO;
        }
    }
    if (rc == 0 && rows && rows->table) {
        rc = s_load_rows(dir, parts, nparts, step, rows, job, sts, version, why, cap);
    }
    for (int i = 0; i < nparts; i++) {
        ps_safetensors_destroy(&sts[i]);
    }
    free(sts);
    return rc;
}

void ps_checkpoint_check(const char *dir, const ps_checkpoint_part_t *part,
                         ps_checkpoint_part_t *found)
{
    char path[4200];
    struct stat sb;
    *found = *part;
    found->size = 0;
    found->crc32 = 0;
    snprintf(path, sizeof path, "%s/step-%" PRId64 "/%s", dir, part->step, part->file);
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && ps_file_crc32(path, &found->crc32) == 0) {
        found->size = (uint64_t)sb.st_size;
    }
}
