/*
 * scheduler/manifest.c - checkpoint manifests: written once every part is
 * durable, checked part by part before a resume.
 */
#include "scheduler/manifest.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/file.h"
#include "common/json.h"
#include "common/log.h"

/* Checkpoints whose parts are tracked at once: a server may report the
 * next checkpoint before a slower one's report of this one arrives. */
enum { S_KEEP = 4 };

/* The longest manifest read (a part takes a line of about 150 bytes). */
enum { S_MAX_BYTES = 1 << 24 };

#define S_FORMAT "shardps-manifest-1"

/* What a part's file name may hold: no '/', nothing that breaks a log line. */
#define S_NAME_CHARS                                                                         \
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+"

struct ps_manifest {
    const ps_view_t *view;
    ps_checkpoint_part_t *parts; /* servers x S_KEEP: a slot per step (s_slot) */
};

/* The slot of step: the one whose parts are of it, else the one of the
 * oldest step (steps are every N steps, or agreed for timed ones). */
static size_t s_slot(const ps_manifest_t *m, int64_t step)
{
    size_t oldest = 0;
    int64_t oldest_step = INT64_MAX;
    for (size_t k = 0; k < S_KEEP; k++) {
        int64_t newest = -1;
        for (int r = 0; r < m->view->num_servers; r++) {
            const ps_checkpoint_part_t *p = &m->parts[(size_t)r * S_KEEP + k];
            if (p->size && p->step == step) {
                return k;
            }
            newest = p->size && p->step > newest ? p->step : newest;
        }
        if (newest < oldest_step) {
            oldest_step = newest;
            oldest = k;
        }
    }
    return oldest;
}

int ps_manifest_new(ps_manifest_t **out, const ps_view_t *view)
{
    *out = NULL;
    ps_manifest_t *m = calloc(1, sizeof *m);
    if (!m || !(m->parts = calloc((size_t)view->num_servers * S_KEEP, sizeof *m->parts))) {
        free(m);
        return PS_ENOMEM;
    }
    m->view = view;
    *out = m;
    return 0;
}

void ps_manifest_destroy(ps_manifest_t **mp)
{
    if (*mp) {
        free((*mp)->parts);
        free(*mp);
        *mp = NULL;
    }
}

/* The manifest of step (its parts in slot) as JSON. New reference, or NULL
 * when a part's file name is not UTF-8 or memory ran out. */
static json_t *s_manifest_json(const ps_manifest_t *m, int64_t step, size_t slot)
{
    const ps_view_t *v = m->view;
    json_t *parts = json_array();
    for (int r = 0; parts && r < v->num_servers; r++) {
        const ps_checkpoint_part_t *p = &m->parts[(size_t)r * S_KEEP + slot];
        json_t *part = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "file", p->file, "size",
                                 (json_int_t)p->size, "crc32", (json_int_t)p->crc32,
                                 "key_begin", (json_int_t)p->begin, "key_end",
                                 (json_int_t)p->end, "version", (json_int_t)p->version);
        if (json_array_append_new(parts, part) != 0) {
            json_decref(parts);
            parts = NULL;
        }
    }
    return parts ? json_pack("{s:s, s:I, s:I, s:i, s:i, s:o}", "format", S_FORMAT, "step",
                             (json_int_t)step, "num_params", (json_int_t)v->num_params,
                             "servers", v->num_servers, "workers", v->num_workers, "parts",
                             parts)
                 : NULL;
}

static int s_write_manifest(ps_manifest_t *m, int64_t step, size_t slot)
{
    const ps_view_t *v = m->view;
    char sub[4096], path[4200], latest[4200], name[32], why[256];
    snprintf(sub, sizeof sub, "%s/step-%" PRId64, v->checkpoint_dir, step);
    snprintf(path, sizeof path, "%s/manifest.json", sub);
    snprintf(latest, sizeof latest, "%s/latest", v->checkpoint_dir);
    snprintf(name, sizeof name, "step-%" PRId64 "\n", step);
    json_t *doc = s_manifest_json(m, step, slot);
    if (!doc) {
        return PS_EINVAL;
    }
    /* one line: "key": value pairs spaced as readers before this module expect */
    int rc = ps_json_write_file(path, doc, PS_JSON_LINE, why, sizeof why);
    json_decref(doc);
    return rc ? rc
              : ps_file_write_atomic(latest, (const void *[]){name}, (size_t[]){strlen(name)},
                                     1, NULL, 0);
}

int ps_manifest_add(ps_manifest_t *m, int rank, const ps_checkpoint_part_t *part)
{
    const ps_view_t *v = m->view;
    const size_t slot = s_slot(m, part->step);
    m->parts[(size_t)rank * S_KEEP + slot] = *part;
    for (int r = 0; r < v->num_servers; r++) {
        if (m->parts[(size_t)r * S_KEEP + slot].step != part->step) {
            return 0;
        }
    }
    int rc = s_write_manifest(m, part->step, slot);
    if (rc != 0) {
        ps_log_warn("checkpoint step-%" PRId64 ": cannot write its manifest in %s: %s",
                    part->step, v->checkpoint_dir, ps_strerror(rc));
        return rc;
    }
    ps_log_info("checkpoint step-%" PRId64 " complete in %s", part->step, v->checkpoint_dir);
    return 1;
}

/* Checks part i of manifest doc against its file in stepdir. Returns 0, or
 * PS_EPROTO with the reason (naming the file at fault) in why. */
static int s_check_part(const json_t *doc, int i, const char *path, const char *stepdir,
                        char *why, size_t cap)
{
    char key[32], fpath[1300], reason[128];
    const char *file;
    int64_t size, crc;
    uint32_t got;
    struct stat sb;
    snprintf(key, sizeof key, "parts.%d.file", i);
    int rc = ps_json_get_str(doc, key, &file, reason, sizeof reason);
    snprintf(key, sizeof key, "parts.%d.size", i);
    rc = rc ? rc : ps_json_get_int(doc, key, 0, INT64_MAX, &size, reason, sizeof reason);
    snprintf(key, sizeof key, "parts.%d.crc32", i);
    rc = rc ? rc : ps_json_get_int(doc, key, 0, UINT32_MAX, &crc, reason, sizeof reason);
    if (rc == 0 && (!file[0] || strlen(file) >= 64 || strspn(file, S_NAME_CHARS) < strlen(file) ||
                    !strcmp(file, ".") || !strcmp(file, ".."))) {
        snprintf(reason, sizeof reason, "parts.%d.file is not a file name", i);
        rc = PS_EPROTO;
    }
    if (rc != 0) {
        snprintf(why, cap, "%s: %s", path, reason);
        return rc;
    }
    snprintf(fpath, sizeof fpath, "%s/%s", stepdir, file);
    if (stat(fpath, &sb) != 0) {
        snprintf(why, cap, "%s is missing", fpath);
    } else if ((uint64_t)sb.st_size != (uint64_t)size) {
        snprintf(why, cap, "%s is %lld bytes, the manifest says %" PRId64 " (truncated?)", fpath,
                 (long long)sb.st_size, size);
    } else if (ps_file_crc32(fpath, &got) != 0 || got != (uint32_t)crc) {
        snprintf(why, cap, "%s has CRC-32 %08" PRIx32 ", the manifest says %08" PRIx32
                 " (corrupt)", fpath, got, (uint32_t)crc);
    } else {
        return 0;
    }
    return PS_EPROTO;
}

int ps_manifest_check(const char *stepdir, int64_t step, uint64_t num_params, char *why,
                      size_t cap)
{
    char path[1200], reason[256];
    const char *format = "";
    int64_t mstep, mp, servers;
    json_t *doc = NULL;
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    int rc = ps_json_read_file(path, S_MAX_BYTES, &doc, why, cap);
    if (rc == PS_ENOENT) {
        snprintf(why, cap, "%s is missing (the checkpoint is incomplete)", path);
    }
    if (rc != 0) {
        return 0;
    }
    if ((rc = ps_json_get_str(doc, "format", &format, reason, sizeof reason)) == 0 &&
        strcmp(format, S_FORMAT) != 0) {
        snprintf(reason, sizeof reason, "format is not " S_FORMAT);
        rc = PS_EPROTO;
    }
    rc = rc ? rc : ps_json_get_int(doc, "step", 0, INT64_MAX, &mstep, reason, sizeof reason);
    rc = rc ? rc : ps_json_get_int(doc, "num_params", 0, INT64_MAX, &mp, reason, sizeof reason);
    rc = rc ? rc
            : ps_json_get_int(doc, "servers", 1, PS_MAX_SERVERS, &servers, reason, sizeof reason);
    const json_t *parts = json_object_get(doc, "parts");
    int ok = 0;
    if (rc != 0) {
        snprintf(why, cap, "%s: %s", path, reason);
    } else if (mstep != step) {
        snprintf(why, cap, "%s is the manifest of step %" PRId64 ", not %" PRId64, path, mstep,
                 step);
    } else if ((uint64_t)mp != num_params) {
        snprintf(why, cap, "%s is of a model of %" PRId64 " parameters, not %" PRIu64, path, mp,
                 num_params);
    } else if (!json_is_array(parts) || json_array_size(parts) != (size_t)servers) {
        snprintf(why, cap, "%s lists %zu parts for %" PRId64 " servers", path,
                 json_array_size(parts), servers);
    } else {
        for (int i = 0; rc == 0 && i < (int)servers; i++) {
            rc = s_check_part(doc, i, path, stepdir, why, cap);
        }
        ok = rc == 0;
    }
    json_decref(doc);
    return ok ? (int)servers : 0;
}

int ps_manifest_workers(const char *stepdir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    json_t *doc = NULL;
    int64_t workers = 0;
    if (ps_json_read_file(path, S_MAX_BYTES, &doc, NULL, 0) != 0 ||
        ps_json_get_int(doc, "workers", 1, INT32_MAX, &workers, NULL, 0) != 0) {
        workers = 0;
    }
    json_decref(doc);
    return (int)workers;
}

static int s_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int ps_manifest_find(const char *dir, uint64_t num_params, int64_t *step, int *nparts,
                     char *stepdir, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        ps_log_warn("resume: cannot open %s", dir);
        return PS_ENOENT;
    }
    int64_t *steps = NULL;
    size_t n = 0, ncap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end;
        if (strncmp(e->d_name, "step-", 5) != 0) {
            continue;
        }
        long long s = strtoll(e->d_name + 5, &end, 10);
        if (*end || s <= 0) {
            continue;
        }
        if (n == ncap) {
            ncap = ncap ? 2 * ncap : 16;
            int64_t *grown = realloc(steps, ncap * sizeof *steps);
            if (!grown) {
                break;
            }
            steps = grown;
        }
        steps[n++] = s;
    }
    closedir(d);
    if (n) {
        qsort(steps, n, sizeof *steps, s_desc);
    }
    int rc = PS_ENOENT;
    for (size_t i = 0; i < n && rc != 0; i++) {
        char why[3000];
        snprintf(stepdir, cap, "%s/step-%" PRId64, dir, steps[i]);
        int parts = ps_manifest_check(stepdir, steps[i], num_params, why, sizeof why);
        if (parts > 0) {
            *step = steps[i];
            *nparts = parts;
            rc = 0;
        } else {
            ps_log_warn("resume: skipping checkpoint step-%" PRId64 ": %s", steps[i], why);
        }
    }
    free(steps);
    return rc;
}
