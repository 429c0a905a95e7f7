/*
 * scheduler/manifest.c - checkpoint manifests: written once every part is
 * durable, read back before a resume or a failover. Reads no part: the
 * servers check and load theirs.
 */
#include "scheduler/manifest.h"

#include <dirent.h>
#include <errno.h>
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
    /* On node-local storage the servers made their step directories, not
     * this one. */
    if (ps_file_make_dir(v->checkpoint_dir) != 0 || ps_file_make_dir(sub) != 0) {
        return PS_EIO;
    }
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

/* Part i of manifest doc into *p (its step: step), checked as a Checkpoint
 * is on the wire: a file name (no path), keys in order. Returns 0, or
 * PS_EPROTO with the reason (naming the manifest) in why. */
static int s_read_part(const json_t *doc, int i, int64_t step, const char *path,
                       ps_checkpoint_part_t *p, char *why, size_t cap)
{
    char key[32], reason[200];
    const char *file = "";
    int64_t size = 0, crc = 0, begin = 0, end = 0;
    snprintf(key, sizeof key, "parts.%d.file", i);
    int rc = ps_json_get_str(doc, key, &file, reason, sizeof reason);
    snprintf(key, sizeof key, "parts.%d.size", i);
    rc = rc ? rc : ps_json_get_int(doc, key, 1, INT64_MAX, &size, reason, sizeof reason);
    snprintf(key, sizeof key, "parts.%d.crc32", i);
    rc = rc ? rc : ps_json_get_int(doc, key, 0, UINT32_MAX, &crc, reason, sizeof reason);
    snprintf(key, sizeof key, "parts.%d.key_begin", i);
    rc = rc ? rc : ps_json_get_int(doc, key, 0, INT64_MAX, &begin, reason, sizeof reason);
    snprintf(key, sizeof key, "parts.%d.key_end", i);
    rc = rc ? rc : ps_json_get_int(doc, key, 0, INT64_MAX, &end, reason, sizeof reason);
    Shardps__Checkpoint pb = SHARDPS__CHECKPOINT__INIT;
    pb.step = step;
    pb.file = (char *)file;
    pb.size = (uint64_t)size;
    pb.crc32 = (uint32_t)crc;
    pb.key_begin = (uint64_t)begin;
    pb.key_end = (uint64_t)end;
    rc = rc ? rc : ps_codec_part_from_pb(&pb, p, reason, sizeof reason);
    if (rc != 0) {
        snprintf(why, cap, "%s: part %d: %s", path, i, reason);
        return PS_EPROTO;
    }
    return 0;
}

int ps_manifest_check(const char *stepdir, int64_t step, uint64_t num_params,
                      ps_checkpoint_part_t *parts, char *why, size_t cap)
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
    const json_t *list = json_object_get(doc, "parts");
    int ok = 0;
    if (rc != 0) {
        snprintf(why, cap, "%s: %s", path, reason);
    } else if (mstep != step) {
        snprintf(why, cap, "%s is the manifest of step %" PRId64 ", not %" PRId64, path, mstep,
                 step);
    } else if (num_params && (uint64_t)mp != num_params) {
        snprintf(why, cap, "%s is of a model of %" PRId64 " parameters, not %" PRIu64, path, mp,
                 num_params);
    } else if (!json_is_array(list) || json_array_size(list) != (size_t)servers) {
        snprintf(why, cap, "%s lists %zu parts for %" PRId64 " servers", path,
                 json_array_size(list), servers);
    } else {
        for (int i = 0; rc == 0 && i < (int)servers; i++) {
            rc = s_read_part(doc, i, step, path, &parts[i], why, cap);
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

int ps_manifest_list(const char *dir, uint64_t num_params, int64_t *out, int max, char *why,
                     size_t cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, cap, "cannot open %s: %s", dir, strerror(errno));
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
    ps_checkpoint_part_t *parts = calloc(PS_MAX_SERVERS, sizeof *parts);
    int got = 0;
    snprintf(why, cap, "%s holds no checkpoint (no step-N/manifest.json)", dir);
    for (size_t i = 0; parts && i < n && got < max; i++) {
        char stepdir[1100], reason[1500];
        snprintf(stepdir, sizeof stepdir, "%s/step-%" PRId64, dir, steps[i]);
        if (ps_manifest_check(stepdir, steps[i], num_params, parts, reason, sizeof reason) > 0) {
            out[got++] = steps[i];
        } else {
            ps_log_warn("resume: skipping checkpoint step-%" PRId64 ": %s", steps[i], reason);
            snprintf(why, cap, "no checkpoint of %s is usable (each one's reason is logged)",
                     dir);
        }
    }
    free(parts);
    free(steps);
    return got;
}

int ps_manifest_find(const char *dir, uint64_t num_params, int64_t *step,
                     ps_checkpoint_part_t *parts, char *stepdir, size_t cap)
{
    char why[600];
    int64_t newest;
    if (ps_manifest_list(dir, num_params, &newest, 1, why, sizeof why) < 1) {
        return PS_ENOENT;
    }
    *step = newest;
    snprintf(stepdir, cap, "%s/step-%" PRId64, dir, newest);
    return ps_manifest_check(stepdir, newest, num_params, parts, why, sizeof why);
}
