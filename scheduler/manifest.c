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
#include "common/log.h"

/* Checkpoints whose parts are tracked at once: a server may report the
 * next checkpoint before a slower one's report of this one arrives. */
enum { S_KEEP = 4 };

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

/* Writes text as the file path, atomically (ps_file_write_atomic). */
static int s_write_text(const char *path, const char *text)
{
    return ps_file_write_atomic(path, (const void *[]){text}, (size_t[]){strlen(text)}, 1,
                                NULL, 0);
}

static int s_write_manifest(ps_manifest_t *m, int64_t step, size_t slot)
{
    const ps_view_t *v = m->view;
    const int S = v->num_servers;
    size_t cap = 256 + (size_t)S * 200, at = 0;
    char *text = malloc(cap);
    if (!text) {
        return PS_ENOMEM;
    }
    at += (size_t)snprintf(text + at, cap - at,
                           "{\"format\": \"shardps-manifest-1\", \"step\": %" PRId64
                           ", \"num_params\": %" PRIu64 ", \"servers\": %d, \"workers\": %d, "
                           "\"parts\": [\n",
                           step, v->num_params, S, v->num_workers);
    for (int r = 0; r < S; r++) {
        const ps_checkpoint_part_t *p = &m->parts[(size_t)r * S_KEEP + slot];
        at += (size_t)snprintf(text + at, cap - at,
                               "  {\"file\": \"%s\", \"size\": %" PRIu64 ", \"crc32\": %" PRIu32
                               ", \"key_begin\": %" PRIu64 ", \"key_end\": %" PRIu64
                               ", \"version\": %" PRId64 "}%s\n",
                               p->file, p->size, p->crc32, p->begin, p->end, p->version,
                               r + 1 < S ? "," : "");
    }
    snprintf(text + at, cap - at, "]}\n");
    char sub[4096], path[4200], latest[4200], name[32];
    snprintf(sub, sizeof sub, "%s/step-%" PRId64, v->checkpoint_dir, step);
    snprintf(path, sizeof path, "%s/manifest.json", sub);
    snprintf(latest, sizeof latest, "%s/latest", v->checkpoint_dir);
    snprintf(name, sizeof name, "step-%" PRId64 "\n", step);
    int rc = s_write_text(path, text);
    rc = rc ? rc : s_write_text(latest, name);
    free(text);
    return rc;
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

/* Reads a whole small file into a NUL-terminated buffer (caller frees), or NULL. */
static char *s_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && n < (1 << 24) && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

/* Checks checkpoint stepdir against its manifest. Returns its number of parts,
 * or 0 with the reason (naming the file at fault) in why. */
static int s_check(const char *stepdir, int64_t step, uint64_t num_params, char *why,
                   size_t cap)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    char *text = s_slurp(path);
    if (!text) {
        snprintf(why, cap, "%s is missing (the checkpoint is incomplete)", path);
        return 0;
    }
    const char *at;
    int64_t mstep = -1;
    uint64_t mp = 0;
    int servers = 0, nparts = 0;
    int ok = (at = strstr(text, "\"step\": ")) && sscanf(at, "\"step\": %" SCNd64, &mstep) == 1 &&
             (at = strstr(text, "\"num_params\": ")) &&
             sscanf(at, "\"num_params\": %" SCNu64, &mp) == 1 &&
             (at = strstr(text, "\"servers\": ")) && sscanf(at, "\"servers\": %d", &servers) == 1;
    if (!ok || mstep != step || servers < 1 || servers > PS_MAX_SERVERS) {
        snprintf(why, cap, "%s does not parse as the manifest of step %" PRId64, path, step);
        free(text);
        return 0;
    }
    if (mp != num_params) {
        snprintf(why, cap, "%s is of a model of %" PRIu64 " parameters, not %" PRIu64, path, mp,
                 num_params);
        free(text);
        return 0;
    }
    for (at = text; (at = strstr(at, "{\"file\": \"")) != NULL; at++, nparts++) {
        char file[64], fpath[1300];
        uint64_t size;
        uint32_t crc, got;
        struct stat sb;
        if (sscanf(at, "{\"file\": \"%63[^\"]\", \"size\": %" SCNu64 ", \"crc32\": %" SCNu32,
                   file, &size, &crc) != 3 || strchr(file, '/')) {
            snprintf(why, cap, "%s: part %d does not parse", path, nparts);
            break;
        }
        snprintf(fpath, sizeof fpath, "%s/%s", stepdir, file);
        if (stat(fpath, &sb) != 0) {
            snprintf(why, cap, "%s is missing", fpath);
            break;
        }
        if ((uint64_t)sb.st_size != size) {
            snprintf(why, cap, "%s is %lld bytes, the manifest says %" PRIu64 " (truncated?)",
                     fpath, (long long)sb.st_size, size);
            break;
        }
        if (ps_file_crc32(fpath, &got) != 0 || got != crc) {
            snprintf(why, cap, "%s has CRC-32 %08" PRIx32 ", the manifest says %08" PRIx32
                     " (corrupt)", fpath, got, crc);
            break;
        }
    }
    free(text);
    if (at) {
        return 0;
    }
    if (nparts != servers) {
        snprintf(why, cap, "%s lists %d parts for %d servers", path, nparts, servers);
        return 0;
    }
    return nparts;
}

int ps_manifest_workers(const char *stepdir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    char *text = s_slurp(path);
    const char *at = text ? strstr(text, "\"workers\": ") : NULL;
    int workers = 0;
    if (!at || sscanf(at, "\"workers\": %d", &workers) != 1 || workers < 1) {
        workers = 0;
    }
    free(text);
    return workers;
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
        int parts = s_check(stepdir, steps[i], num_params, why, sizeof why);
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
