/*
 * server/checkpoint.c - a shard to and from its safetensors part.
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
#include "common/safetensors.h"

enum { S_MAX_STATE = 2 };

/* The names of the optimizer's state arrays, PyTorch's (torch.optim's state
 * keys), in the store's order. */
static void s_state_names(const ps_job_t *job, const char *names[S_MAX_STATE])
{
    if (!strcmp(job->optimizer, "adam")) {
        names[0] = "opt.exp_avg";
        names[1] = "opt.exp_avg_sq";
    } else {
        names[0] = !strcmp(job->optimizer, "adagrad") ? "opt.sum" : "opt.momentum_buffer";
        names[1] = NULL;
    }
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
    const char *names[S_MAX_STATE];
    s_state_names(info->job, names);
    /* Values some of which moved to spares while replies held them are
     * gathered into one array for the file (server/store.h). */
    float *gathered = NULL;
    const float *params = ps_store_flat(store);
    if (!params && (gathered = malloc((size_t)n * sizeof(float)))) {
        ps_store_read(store, r, gathered);
        params = gathered;
    }
    if (!params) {
        snprintf(why, cap, "out of memory");
        return PS_ENOMEM;
    }
    ps_safetensors_tensor_t t[1 + S_MAX_STATE] = {
        {.name = "params", .ndim = 1, .shape = {n}, .data = params}};
    int nt = 1;
    for (int i = 0; i < ps_store_state_arrays(store) && i < S_MAX_STATE; i++, nt++) {
        t[nt] = (ps_safetensors_tensor_t){.name = names[i], .ndim = 1, .shape = {n},
                                          .data = ps_store_state((ps_store_t *)store, i)};
    }
    char kb[24], ke[24], step[24], version[24], lr_step[24], np[24], rank[16], servers[16];
    char seed[24], mode[32];
    char *steps = malloc((size_t)info->workers * 24 + 1);
    if (!steps) {
        free(gathered);
        snprintf(why, cap, "out of memory");
        return PS_ENOMEM;
    }
    snprintf(kb, sizeof kb, "%" PRIu64, r.begin);
    snprintf(ke, sizeof ke, "%" PRIu64, r.end);
    snprintf(step, sizeof step, "%" PRId64, info->step);
    snprintf(version, sizeof version, "%" PRId64, info->version);
    /* the lr schedule's position: async's is version / workers (consistency.c:s_lr) */
    snprintf(lr_step, sizeof lr_step, "%" PRId64,
             info->version == info->step ? info->step : info->version / info->workers);
    snprintf(np, sizeof np, "%" PRIu64, info->num_params);
    snprintf(rank, sizeof rank, "%d", info->rank);
    snprintf(servers, sizeof servers, "%d", info->servers);
    snprintf(seed, sizeof seed, "%" PRIu64, info->job->seed);
    ps_job_mode_str(info->job, mode, sizeof mode);
    size_t at = 0;
    for (int w = 0; w < info->workers; w++) { /* every worker's next step (resumed) is N */
        at += (size_t)sprintf(steps + at, "%s%s", w ? "," : "", step);
    }
    steps[at] = '\0';
    /* version = updates applied (Adam's t); stepped modes: = step = the lr
     * schedule's position. */
    const char *meta[] = {"format", "shardps-checkpoint-1", "step", step, "version", version,
                          "updates", version, "lr_step", lr_step, "worker_steps", steps,
                          "key_begin", kb, "key_end", ke, "num_params", np, "rank", rank,
                          "servers", servers, "model", info->job->model,
                          "optimizer", info->job->optimizer, "mode", mode, "seed", seed};
    int rc = ps_safetensors_write(path, t, nt, meta, (int)(sizeof meta / sizeof meta[0] / 2),
                                  why, cap);
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

int ps_checkpoint_load(const char *dir, const ps_checkpoint_part_t *parts, int nparts,
                       int64_t step, ps_store_t *store, const ps_job_t *job, int64_t *version,
                       char *why, size_t cap)
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
