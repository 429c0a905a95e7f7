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

/* The longest manifest read: one of PS_MAX_SERVERS parts (about 150 bytes
 * each), PS_MANIFEST_MAX_LINEAGE ancestors and the job's flags takes about
 * 40 KiB, so anything near 1 MiB is not one. */
enum { S_MAX_BYTES = 1 << 20 };

/* Its parsed tree within 8 times its size, beyond PS_JSON_TREE_BASE: a
 * real one, at most about 40 KiB, takes about 10 times its size, within
 * the base; a hostile one of small values at most 1 MiB costs at most
 * about 9 MiB while read. */
enum { S_TREE_FACTOR = 8 };

#define S_FORMAT "shardps-manifest-1"

struct ps_manifest {
    const ps_view_t *view;
    const ps_manifest_job_t *job; /* what each manifest records of its job (borrowed) */
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

int ps_manifest_new(ps_manifest_t **out, const ps_view_t *view, const ps_manifest_job_t *job)
{
    *out = NULL;
    ps_manifest_t *m = calloc(1, sizeof *m);
    if (!m || !(m->parts = calloc((size_t)view->num_servers * S_KEEP, sizeof *m->parts))) {
        free(m);
        return PS_ENOMEM;
    }
    m->view = view;
    m->job = job;
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

/* A job id as JSON: null when not recorded. */
static json_t *s_id(const char *id)
{
    return id[0] ? ps_json_text(id) : json_null();
}

/* The job's four fields (job_id, lineage, config_hash, config) as a new
 * object, or NULL when memory ran out. */
static json_t *s_job_json(const ps_manifest_job_t *j)
{
    json_t *lineage = json_array(), *config = json_object();
    int failed = !lineage || !config;
    for (int i = 0; !failed && i < j->nlineage; i++) {
        failed = json_array_append_new(lineage, json_pack("{s:o, s:I}", "job_id",
                                                          s_id(j->lineage[i].job_id), "step",
                                                          (json_int_t)j->lineage[i].step));
    }
    for (int i = 0; !failed && j->has_config && i < PS_JOB_RESUME_FIELDS; i++) {
        failed = json_object_set_new(config, j->config[i].flag,
                                     ps_json_text(j->config[i].value));
    }
    if (failed) {
        json_decref(lineage);
        json_decref(config);
        return NULL;
    }
    if (!j->has_config) {
        json_decref(config);
        config = json_null();
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "job_id", s_id(j->job_id), "lineage", lineage,
                     "config_hash", j->has_config ? json_string(j->config_hash) : json_null(),
                     "config", config);
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
    json_t *doc = parts ? json_pack("{s:s, s:I, s:I, s:i, s:i, s:o}", "format", S_FORMAT,
                                    "step", (json_int_t)step, "num_params",
                                    (json_int_t)v->num_params, "servers", v->num_servers,
                                    "workers", v->num_workers, "parts", parts)
                        : NULL;
    json_t *job = doc ? s_job_json(m->job) : NULL;
    if (!job || json_object_update(doc, job) != 0) {
        json_decref(doc);
        doc = NULL;
    }
    json_decref(job);
    return doc;
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
    int rc = ps_json_read_file_within(path, S_MAX_BYTES, S_TREE_FACTOR, &doc, why, cap);
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

/* The lineage of doc into j; 0 or PS_EPROTO (reason in why). */
static int s_read_lineage(const json_t *doc, ps_manifest_job_t *j, char *why, size_t cap)
{
    const json_t *list = json_object_get(doc, "lineage");
    const size_t n = json_array_size(list);
    if (!json_is_array(list)) {
        snprintf(why, cap, "lineage is not a list");
        return PS_EPROTO;
    }
    /* the newest ancestors when there are more than we keep */
    const size_t from = n > PS_MANIFEST_MAX_LINEAGE ? n - PS_MANIFEST_MAX_LINEAGE : 0;
    for (size_t i = from; i < n; i++) {
        char key[48];
        const char *id = NULL;
        int64_t step;
        snprintf(key, sizeof key, "lineage.%zu.step", i);
        if (ps_json_get_int(doc, key, 0, INT64_MAX, &step, why, cap) != 0) {
            return PS_EPROTO;
        }
        snprintf(key, sizeof key, "lineage.%zu.job_id", i);
        (void)ps_json_get_str(doc, key, &id, NULL, 0); /* null: not recorded */
        snprintf(j->lineage[j->nlineage].job_id, PS_MANIFEST_JOB_ID, "%s", id ? id : "");
        j->lineage[j->nlineage++].step = step;
    }
    return 0;
}

int ps_manifest_read_job(const char *stepdir, ps_manifest_job_t *j, char *why, size_t cap)
{
    char path[1200], reason[256] = "";
    json_t *doc = NULL;
    memset(j, 0, sizeof *j);
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    int rc = ps_json_read_file_within(path, S_MAX_BYTES, S_TREE_FACTOR, &doc, why, cap);
    if (rc != 0) {
        return rc;
    }
    const char *id = NULL, *hash = NULL;
    if (!json_is_string(json_object_get(doc, "job_id"))) {
        json_decref(doc);
        return 0; /* written before manifests named their job */
    }
    if (ps_json_get_str(doc, "job_id", &id, reason, sizeof reason) != 0 ||
        s_read_lineage(doc, j, reason, sizeof reason) != 0) {
        rc = PS_EPROTO;
    }
    snprintf(j->job_id, sizeof j->job_id, "%s", rc == 0 ? id : "");
    if (rc == 0 && json_is_null(json_object_get(doc, "config"))) {
        json_decref(doc);
        return 1; /* a job that recorded no configuration */
    }
    rc = rc ? rc : ps_json_get_str(doc, "config_hash", &hash, reason, sizeof reason);
    ps_job_t names;
    ps_job_defaults(&names);
    ps_job_resume_fields(&names, j->config); /* the flags' names; the values are read */
    for (int i = 0; rc == 0 && i < PS_JOB_RESUME_FIELDS; i++) {
        char key[64];
        const char *v = "";
        ps_job_field_t *f = &j->config[i];
        snprintf(key, sizeof key, "config.%s", f->flag);
        rc = ps_json_get_str(doc, key, &v, reason, sizeof reason);
        snprintf(f->value, sizeof f->value, "%s", v);
    }
    if (rc == 0) {
        snprintf(j->config_hash, sizeof j->config_hash, "%s", hash);
        j->has_config = 1;
    } else if (why) {
        snprintf(why, cap, "%s: %s", path, reason);
    }
    json_decref(doc);
    return rc == 0 ? 1 : PS_EPROTO;
}

int ps_manifest_workers(const char *stepdir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    json_t *doc = NULL;
    int64_t workers = 0;
    if (ps_json_read_file_within(path, S_MAX_BYTES, S_TREE_FACTOR, &doc, NULL, 0) != 0 ||
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

/* The step-N entries of dir, newest first, into *out (caller frees).
 * Returns how many, or PS_ENOENT when dir cannot be opened (why names it). */
static int s_steps(const char *dir, int64_t **out, char *why, size_t cap)
{
    DIR *d = opendir(dir);
    *out = NULL;
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
    *out = steps;
    return (int)n;
}

int ps_manifest_latest(const char *dir, int64_t *step)
{
    char path[4200], line[64] = "";
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        return PS_ENOENT;
    }
    const int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    long long s;
    char nl;
    if (!got || sscanf(line, "step-%lld%c", &s, &nl) != 2 || nl != '\n' || s <= 0) {
        return PS_ENOENT;
    }
    *step = s;
    return 0;
}

/* Whether a checkpoint of job id (known) is of top's job or lineage. */
static int s_kin(const ps_manifest_job_t *top, const char *id)
{
    if (!strcmp(top->job_id, id)) {
        return 1;
    }
    for (int i = 0; i < top->nlineage; i++) {
        if (!strcmp(top->lineage[i].job_id, id)) {
            return 1;
        }
    }
    return 0;
}

/* Why checkpoint step of dir is not one of latest's (top at step top_step,
 * -1: no latest): into why, returning 1; 0 when it is. A newer one is not,
 * whatever its job: latest moves after a step's manifest, so a job stopped
 * between the two leaves one of its own behind it, and latest set back by
 * hand leaves some too. */
static int s_not_kin(const char *dir, int64_t step, int64_t top_step,
                     const ps_manifest_job_t *top, char *why, size_t cap)
{
    char stepdir[1100];
    snprintf(stepdir, sizeof stepdir, "%s/step-%" PRId64, dir, step);
    ps_manifest_job_t *j = top_step < 0 ? NULL : malloc(sizeof *j);
    const int rc = j ? ps_manifest_read_job(stepdir, j, NULL, 0) : 0;
    const int other = rc == 1 && top->job_id[0] && !s_kin(top, j->job_id);
    const int newer = top_step >= 0 && step > top_step;
    if (other) {
        snprintf(why, cap, "of job %s, not of %s/latest's job %s or the jobs it resumed",
                 j->job_id, dir, top->job_id);
    } else if (newer) {
        snprintf(why, cap, "newer than %s/latest (step-%" PRId64 "), which --resume follows%s",
                 dir, top_step, rc < 0 ? ", and incomplete (no manifest)" : "");
    }
    free(j);
    return other || newer;
}

int ps_manifest_list(const char *dir, uint64_t num_params, int64_t *out, int max, char *why,
                     size_t cap)
{
    int64_t *steps, top_step = -1;
    const int n = s_steps(dir, &steps, why, cap);
    if (n < 0) {
        return n;
    }
    ps_checkpoint_part_t *parts = calloc(PS_MAX_SERVERS, sizeof *parts);
    ps_manifest_job_t *top = calloc(1, sizeof *top);
    char stepdir[1100], reason[1500];
    if (top && ps_manifest_latest(dir, &top_step) == 0) {
        snprintf(stepdir, sizeof stepdir, "%s/step-%" PRId64, dir, top_step);
        if (ps_manifest_read_job(stepdir, top, reason, sizeof reason) < 0) {
            ps_log_warn("resume: %s/latest names step-%" PRId64 ", which is not usable (%s): "
                        "every checkpoint of %s is weighed", dir, top_step, reason, dir);
            top_step = -1;
        }
    }
    int got = 0;
    snprintf(why, cap, "%s holds no checkpoint (no step-N/manifest.json)", dir);
    for (int i = 0; parts && top && i < n && got < max; i++) {
        snprintf(stepdir, sizeof stepdir, "%s/step-%" PRId64, dir, steps[i]);
        if (!s_not_kin(dir, steps[i], top_step, top, reason, sizeof reason) &&
            ps_manifest_check(stepdir, steps[i], num_params, parts, reason, sizeof reason) > 0) {
            out[got++] = steps[i];
        } else {
            ps_log_warn("resume: skipping checkpoint step-%" PRId64 ": %s", steps[i], reason);
            snprintf(why, cap, "no checkpoint of %s is usable (each one's reason is logged)",
                     dir);
        }
    }
    free(top);
    free(parts);
    free(steps);
    return got;
}

int ps_manifest_foreign(const char *dir, const char *job_id, char *why, size_t cap)
{
    int64_t *steps;
    char reason[600];
    const int n = s_steps(dir, &steps, reason, sizeof reason);
    ps_manifest_job_t *j = n > 0 ? malloc(sizeof *j) : NULL;
    int64_t first = -1, last = -1;
    char other[PS_MANIFEST_JOB_ID] = "";
    for (int i = 0; j && i < n; i++) {
        char stepdir[1100];
        snprintf(stepdir, sizeof stepdir, "%s/step-%" PRId64, dir, steps[i]);
        const int rc = ps_manifest_read_job(stepdir, j, NULL, 0);
        if (rc < 0 || (rc == 1 && job_id && !strcmp(j->job_id, job_id))) {
            continue; /* incomplete (no manifest), or this job's own */
        }
        if (last < 0) {
            last = steps[i];
            snprintf(other, sizeof other, "%s", rc == 1 ? j->job_id : "");
        }
        first = steps[i];
    }
    free(j);
    free(steps);
    if (last < 0) {
        return 0;
    }
    char job[PS_MANIFEST_JOB_ID + 16];
    snprintf(job, sizeof job, other[0] ? "job %s's" : "an earlier job's", other);
    if (first == last) {
        snprintf(why, cap, "%s step-%" PRId64, job, last);
    } else {
        snprintf(why, cap, "%s step-%" PRId64 " to step-%" PRId64, job, first, last);
    }
    return 1;
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
