/*
 * tests/unit/test_checkpoint.c - checkpoint parts and manifests: two shards
 * written and loaded back into three (the flat vector re-cut) give bitwise
 * the parameters and Adam's state; a part of another step is refused; the
 * manifest is written once both parts are in, found on resume, and a
 * flipped byte or a truncated part makes the checkpoint unusable; a step
 * written again leaves the part its manifest names as it was. A job's
 * embedding rows: two servers' rows, state and pending sightings load back
 * bitwise into two, three or one server (re-cut by their keys' hashes) and
 * train on as the originals; FTRL's two state arrays have names of their
 * own; rows of another layout than the job's (embed_dim, state arrays,
 * min_count, max_rows, rows or none) are refused with one line saying so;
 * a part written by hand in the documented format loads, and each bad
 * variant of it (unsorted or foreign keys, wrong dtype or shape, a count
 * outside the filter, a NaN, a tensor or metadata missing) is refused,
 * leaving the table empty.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/rowkey.h"
#include "common/safetensors.h"
#include "kernels/optim.h"
#include "proto/range.h"
#include "scheduler/manifest.h"
#include "server/checkpoint.h"
#include "server/rows.h"
#include "server/store.h"
#include "tests/unit/testutil.h"

enum { S_P = 70, S_STEP = 7 };

static char s_dir[256];
static ps_job_t s_job;
static float s_ref[3][S_P]; /* params, exp_avg, exp_avg_sq of the whole vector */

static void s_setup(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/sps-ckpt-unit.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s_dir));
    ps_job_defaults(&s_job);
    snprintf(s_job.optimizer, sizeof s_job.optimizer, "adam");
}

static void s_teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Two stores over [0, 30) and [30, 70), trained a few steps, written as the
 * parts of step S_STEP; their values kept in s_ref. */
static void s_write_parts(ps_checkpoint_part_t parts[2])
{
    const uint64_t cut[3] = {0, 30, S_P};
    float w[S_P], g[S_P];
    ps_test_fill(w, S_P, -1, 1, 1);
    for (int r = 0; r < 2; r++) {
        ps_range_t keys = {cut[r], cut[r + 1]};
        ps_store_t *s = NULL;
        ck_assert_int_eq(ps_store_new(&s, keys, &s_job), 0);
        ck_assert_int_eq(ps_store_init(s, keys, w + keys.begin), 1);
        for (int t = 1; t <= S_STEP; t++) {
            ps_test_fill(g, S_P, -1, 1, 10 + (uint64_t)t);
            ps_store_step(s, keys, g + keys.begin, 0.01f, 0.5f, t);
        }
        const uint64_t n = ps_range_len(keys);
        memcpy(s_ref[0] + keys.begin, ps_store_values(s, keys.begin), n * sizeof(float));
        for (int a = 0; a < 2; a++) {
            memcpy(s_ref[1 + a] + keys.begin, ps_store_state(s, a), n * sizeof(float));
        }
        ps_checkpoint_info_t info = {s_dir, S_STEP, S_STEP, r, 2, 2, S_P, &s_job};
        char why[256];
        ck_assert_int_eq(ps_checkpoint_write(&info, s, &parts[r], why, sizeof why), 0);
        ck_assert_uint_eq(parts[r].begin, keys.begin);
        ck_assert_uint_gt(parts[r].size, n * 3 * sizeof(float));
        ps_store_destroy(&s);
    }
}

START_TEST(two_parts_load_into_three_shards_bitwise)
{
    ps_checkpoint_part_t parts[2];
    s_write_parts(parts);
    char sub[300], why[256];
    snprintf(sub, sizeof sub, "%s/step-%d", s_dir, S_STEP);
    const uint64_t cut[4] = {0, 20, 50, S_P};
    for (int r = 0; r < 3; r++) {
        ps_range_t keys = {cut[r], cut[r + 1]};
        ps_store_t *s = NULL;
        ck_assert_int_eq(ps_store_new(&s, keys, &s_job), 0);
        ck_assert_msg(
            ps_checkpoint_load(sub, parts, 2, S_STEP, s, NULL, &s_job, NULL, why, sizeof why) == 0,
            "%s", why);
        ck_assert(ps_store_initialized(s));
        const size_t bytes = ps_range_len(keys) * sizeof(float);
        ck_assert_mem_eq(ps_store_values(s, keys.begin), s_ref[0] + keys.begin, bytes);
        ck_assert_mem_eq(ps_store_state(s, 0), s_ref[1] + keys.begin, bytes);
        ck_assert_mem_eq(ps_store_state(s, 1), s_ref[2] + keys.begin, bytes);
        ps_store_destroy(&s);
    }
}
END_TEST

/* Loads parts[0..nparts) of step into a store of keys [begin, end). Returns
 * what ps_checkpoint_load returned, its reason in why. */
static int s_load(const ps_checkpoint_part_t *parts, int nparts, int64_t step, uint64_t begin,
                  uint64_t end, char *why, size_t cap)
{
    char sub[300];
    snprintf(sub, sizeof sub, "%s/step-%d", s_dir, S_STEP);
    ps_range_t keys = {begin, end};
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, keys, &s_job), 0);
    int rc = ps_checkpoint_load(sub, parts, nparts, step, s, NULL, &s_job, NULL, why, cap);
    ps_store_destroy(&s);
    return rc;
}

START_TEST(load_refuses_another_step_and_missing_keys)
{
    ps_checkpoint_part_t parts[2];
    s_write_parts(parts);
    char why[256];
    ck_assert_int_eq(s_load(parts, 2, S_STEP + 1, 0, S_P, why, sizeof why), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "server-0.safetensors"));
    ck_assert_int_eq(s_load(parts, 1, S_STEP, 0, S_P, why, sizeof why), PS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "do not cover"));
}
END_TEST

/* The manifest's CRC is checked on the bytes loaded: a part whose entry
 * names another file's CRC (an intact copy's) is refused, naming the file. */
START_TEST(load_refuses_a_part_whose_crc_is_not_the_manifests)
{
    ps_checkpoint_part_t parts[2];
    s_write_parts(parts);
    char why[512];
    parts[1].crc32 ^= 1;
    ck_assert_int_eq(s_load(parts, 2, S_STEP, 0, S_P, why, sizeof why), PS_EPROTO);
    ck_assert_msg(strstr(why, "server-1.safetensors") && strstr(why, "the manifest says"), "%s",
                  why);
    /* a shard of part 0's keys alone never reads part 1 */
    ck_assert_msg(s_load(parts, 2, S_STEP, 0, 30, why, sizeof why) == 0, "%s", why);
    /* the check a server answers a resume check with */
    ps_checkpoint_part_t found;
    parts[1].crc32 ^= 1;
    ps_checkpoint_check(s_dir, &parts[1], &found);
    ck_assert_uint_eq(found.size, parts[1].size);
    ck_assert_uint_eq(found.crc32, parts[1].crc32);
    snprintf(parts[1].file, sizeof parts[1].file, "server-9.safetensors");
    ps_checkpoint_check(s_dir, &parts[1], &found);
    ck_assert_uint_eq(found.size, 0);
}
END_TEST

/* A step trained again after a rollback (here by one worker, with other
 * values) is written beside the first part, not over it: the complete
 * manifest of the first pass names that one, and it must still load. */
START_TEST(a_step_written_again_keeps_the_part_a_manifest_names)
{
    ps_checkpoint_part_t parts[2], again;
    s_write_parts(parts);
    const ps_range_t keys = {0, 30};
    float w[30];
    ps_test_fill(w, 30, -1, 1, 99);
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, keys, &s_job), 0);
    ck_assert_int_eq(ps_store_init(s, keys, w), 1);
    ps_checkpoint_info_t info = {s_dir, S_STEP, S_STEP, 0, 2, 1, S_P, &s_job};
    char why[512];
    ck_assert_int_eq(ps_checkpoint_write(&info, s, &again, why, sizeof why), 0);
    ps_store_destroy(&s);
    ck_assert_str_eq(again.file, "server-0.1.safetensors");
    ck_assert_uint_ne(again.crc32, parts[0].crc32);
    ck_assert_msg(s_load(parts, 2, S_STEP, 0, S_P, why, sizeof why) == 0, "%s", why);
    parts[0] = again;
    ck_assert_msg(s_load(parts, 2, S_STEP, 0, S_P, why, sizeof why) == 0, "%s", why);
}
END_TEST

START_TEST(manifest_written_found_and_corruption_detected)
{
    ps_checkpoint_part_t parts[2];
    s_write_parts(parts);
    ps_view_t *v = calloc(1, sizeof *v);
    ck_assert_ptr_nonnull(v);
    v->num_params = S_P;
    v->num_servers = 2;
    v->num_workers = 2;
    v->checkpoint_every = S_STEP;
    snprintf(v->checkpoint_dir, sizeof v->checkpoint_dir, "%s", s_dir);
    ps_manifest_t *m = NULL;
    ps_manifest_job_t *job = calloc(1, sizeof *job), *back = calloc(1, sizeof *back);
    ck_assert_ptr_nonnull(job);
    ck_assert_ptr_nonnull(back);
    ps_job_t j;
    ps_job_defaults(&j);
    snprintf(job->job_id, sizeof job->job_id, "job-b");
    job->nlineage = 1;
    snprintf(job->lineage[0].job_id, sizeof job->lineage[0].job_id, "job-a");
    job->lineage[0].step = 7;
    ps_job_resume_fields(&j, job->config);
    ps_job_resume_hash(job->config, job->config_hash, sizeof job->config_hash);
    job->has_config = 1;
    ck_assert_int_eq(ps_manifest_new(&m, v, job), 0);
    ck_assert_int_eq(ps_manifest_add(m, 1, &parts[1]), 0);
    ck_assert_int_eq(ps_manifest_add(m, 0, &parts[0]), 1);
    ps_manifest_destroy(&m);
    char stepdir[700], why[300];
    snprintf(stepdir, sizeof stepdir, "%s/step-%d", s_dir, S_STEP);
    /* the job, its lineage and its configuration read back as written */
    ck_assert_int_eq(ps_manifest_read_job(stepdir, back, why, sizeof why), 1);
    ck_assert_str_eq(back->job_id, "job-b");
    ck_assert_int_eq(back->nlineage, 1);
    ck_assert_str_eq(back->lineage[0].job_id, "job-a");
    ck_assert_int_eq(back->lineage[0].step, 7);
    ck_assert_str_eq(back->config_hash, job->config_hash);
    ck_assert_str_eq(back->config[ps_job_resume_index("lr")].value,
                     job->config[ps_job_resume_index("lr")].value);
    ck_assert_int_eq(ps_manifest_foreign(s_dir, "job-b", why, sizeof why), 0);
    ck_assert_int_eq(ps_manifest_foreign(s_dir, "job-c", why, sizeof why), 1);
    ck_assert_ptr_nonnull(strstr(why, "job job-b's step-"));
    free(back);
    free(job);
    int64_t step = 0;
    char sub[700], path[800];
    ps_checkpoint_part_t *got = calloc(PS_MAX_SERVERS, sizeof *got);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(ps_manifest_find(s_dir, S_P, &step, got, sub, sizeof sub), 2);
    ck_assert_int_eq(step, S_STEP);
    for (int r = 0; r < 2; r++) { /* the parts as the servers reported them */
        ck_assert_str_eq(got[r].file, parts[r].file);
        ck_assert_uint_eq(got[r].crc32, parts[r].crc32);
        ck_assert_uint_eq(got[r].size, parts[r].size);
        ck_assert_uint_eq(got[r].end, parts[r].end);
    }
    ck_assert_int_le(ps_manifest_find(s_dir, S_P + 1, &step, got, sub, sizeof sub), 0);
    /* the scheduler reads no part: a missing one is the servers' to find */
    snprintf(path, sizeof path, "%s/server-1.safetensors", sub);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(ps_manifest_find(s_dir, S_P, &step, got, sub, sizeof sub), 2);
    /* a part name with a path in it is refused */
    snprintf(path, sizeof path, "%s/manifest.json", sub);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char *at = strstr(text, "server-1.safetensors");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "../x/1.safetensors1", 19);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_le(ps_manifest_find(s_dir, S_P, &step, got, sub, sizeof sub), 0);
    free(got);
    free(v);
}
END_TEST

/* ---- embedding rows ---- */

enum { S_DIM = 4, S_KEYS = 600, S_MAX_SERVERS = 3 };

/* A ctr job: adagrad (one state array per row), rows of S_DIM, a filter of 3. */
static ps_job_t s_rows_job(const char *optimizer, double momentum, int min_count)
{
    ps_job_t j;
    ps_job_defaults(&j);
    snprintf(j.model, sizeof j.model, "ctr");
    snprintf(j.optimizer, sizeof j.optimizer, "%s", optimizer);
    j.momentum = momentum;
    j.embed_dim = S_DIM;
    j.min_count = min_count;
    return j;
}

/* An empty table for job, as the server makes it. */
static ps_rows_t *s_table(const ps_job_t *job)
{
    ps_rows_config_t c = {.dim = (size_t)job->embed_dim, .seed = job->seed,
                          .init_bound = ps_job_row_bound(job),
                          .min_count = (uint32_t)job->min_count, .max_rows = job->max_rows};
    ck_assert_int_eq(ps_optim_from_job(job, &c.optim), 0);
    ps_rows_t *t = NULL;
    ck_assert_int_eq(ps_rows_new(&t, &c), 0);
    return t;
}

/* Key i's updates, round r: key i is sighted 1 + i % 4 times in all, so
 * behind a filter of 3 some keys have rows and others wait. */
static void s_feed_rows(ps_rows_t *t, ps_rowrange_t held, int rounds)
{
    float g[S_DIM];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < S_KEYS; i++) {
            const uint64_t k = (uint64_t)i * 0x9e3779b97f4a7c15ull + 7;
            if (r % 4 <= i % 4 && ps_rowkey_hash(k) >= held.first &&
                ps_rowkey_hash(k) <= held.last) {
                ps_test_fill(g, S_DIM, -1, 1, k + (uint64_t)r);
                ck_assert_int_ge(ps_rows_update(t, &k, 1, g, 0.1f, 1.0f), 0);
            }
        }
    }
}

/* A table's whole snapshot: rows, then pending keys, as bytes to compare. */
typedef struct {
    size_t n, np, bytes;
    unsigned char *p;
} s_rsnap_t;

static s_rsnap_t s_rsnap(const ps_rows_t *t)
{
    s_rsnap_t sn = {ps_rows_count(t), ps_rows_pending_count(t), 0, NULL};
    const size_t d = ps_rows_dim(t), ns = (size_t)ps_rows_state_floats(t);
    sn.bytes = sn.n * (8 + d * 4 * (1 + ns)) + sn.np * 12;
    sn.p = calloc(1, sn.bytes + 1);
    ck_assert_ptr_nonnull(sn.p);
    uint64_t *keys = (uint64_t *)(void *)sn.p;
    float *values = (float *)(void *)(keys + sn.n);
    uint64_t *pkeys = (uint64_t *)(void *)(values + sn.n * d * (1 + ns));
    ps_rows_export(t, keys, values, values + sn.n * d);
    ps_rows_pending_export(t, pkeys, (uint32_t *)(void *)(pkeys + sn.np));
    return sn;
}

/* The rows of an old job of `from` servers, written as checkpoint S_STEP's
 * parts (with a dense shard each), in tables[] (kept for the caller). */
static void s_write_rows_parts(const ps_job_t *job, int from, ps_checkpoint_part_t *parts,
                               ps_rows_t **tables)
{
    ps_rowrange_t held[S_MAX_SERVERS];
    ck_assert_int_eq(ps_range_split_rows(from, held), 0);
    float w[S_P];
    ps_test_fill(w, S_P, -1, 1, 1);
    for (int r = 0; r < from; r++) {
        const ps_range_t keys = {(uint64_t)S_P * (uint64_t)r / (uint64_t)from,
                                 (uint64_t)S_P * (uint64_t)(r + 1) / (uint64_t)from};
        ps_store_t *s = NULL;
        ck_assert_int_eq(ps_store_new(&s, keys, job), 0);
        ck_assert_int_eq(ps_store_init(s, keys, w + keys.begin), 1);
        tables[r] = s_table(job);
        s_feed_rows(tables[r], held[r], 4);
        ps_checkpoint_info_t info = {.dir = s_dir, .step = S_STEP, .version = S_STEP, .rank = r,
                                     .servers = from, .workers = 2, .num_params = S_P,
                                     .job = job, .rows = {tables[r], held[r]}};
        char why[256];
        ck_assert_msg(ps_checkpoint_write(&info, s, &parts[r], why, sizeof why) == 0, "%s", why);
        ps_store_destroy(&s);
    }
}

/* Loads the parts of `from` servers into server r of `to` (its dense keys
 * and its hashes); the loaded table into *out (NULL: destroyed). Returns
 * what ps_checkpoint_load returned, its reason in why. */
static int s_load_rows(const ps_job_t *job, const ps_checkpoint_part_t *parts, int from, int to,
                       int r, ps_rows_t **out, char *why, size_t cap)
{
    char sub[300];
    snprintf(sub, sizeof sub, "%s/step-%d", s_dir, S_STEP);
    ps_rowrange_t held[S_MAX_SERVERS];
    ck_assert_int_eq(ps_range_split_rows(to, held), 0);
    const ps_range_t keys = {(uint64_t)S_P * (uint64_t)r / (uint64_t)to,
                             (uint64_t)S_P * (uint64_t)(r + 1) / (uint64_t)to};
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, keys, job), 0);
    ps_checkpoint_rows_t rows = {s_table(job), held[r]};
    int rc = ps_checkpoint_load(sub, parts, from, S_STEP, s, &rows, job, NULL, why, cap);
    if (rc != 0) { /* a refusal loads no row */
        ck_assert_uint_eq(ps_rows_count(rows.table), 0);
        ck_assert_uint_eq(ps_rows_pending_count(rows.table), 0);
    }
    ps_store_destroy(&s);
    if (out) {
        *out = rows.table;
    } else {
        ps_rows_destroy(&rows.table);
    }
    return rc;
}

/* Two servers' rows into 2 (the same cut), 3 and 1: each server gets exactly
 * the rows and sightings of its hashes, bitwise, and they train on as the
 * originals do. */
START_TEST(rows_load_back_bitwise_on_any_number_of_servers)
{
    const ps_job_t job = s_rows_job("adagrad", 0, 3);
    ps_checkpoint_part_t parts[2];
    ps_rows_t *orig[2], *got[S_MAX_SERVERS];
    s_write_rows_parts(&job, 2, parts, orig);
    ck_assert_uint_gt(ps_rows_count(orig[0]), 50);
    ck_assert_uint_gt(ps_rows_pending_count(orig[1]), 50);
    char why[512];
    for (int r = 0; r < 2; r++) { /* the same cut: the same bytes */
        ck_assert_msg(s_load_rows(&job, parts, 2, 2, r, &got[r], why, sizeof why) == 0, "%s",
                      why);
        s_rsnap_t a = s_rsnap(orig[r]), b = s_rsnap(got[r]);
        ck_assert_uint_eq(a.n, b.n);
        ck_assert_uint_eq(a.np, b.np);
        ck_assert_mem_eq(a.p, b.p, a.bytes);
        free(a.p);
        free(b.p);
        /* and they go on alike: the same updates, the filter included */
        ps_rowrange_t held[2];
        ps_range_split_rows(2, held);
        s_feed_rows(orig[r], held[r], 3);
        s_feed_rows(got[r], held[r], 3);
        a = s_rsnap(orig[r]);
        b = s_rsnap(got[r]);
        ck_assert_uint_eq(a.bytes, b.bytes);
        ck_assert_mem_eq(a.p, b.p, a.bytes);
        free(a.p);
        free(b.p);
        ps_rows_destroy(&got[r]);
    }
    for (int r = 0; r < 2; r++) { /* the originals as they were written */
        ps_rows_destroy(&orig[r]);
    }
    s_write_rows_parts(&job, 2, parts, orig);
    for (int to = 1; to <= 3; to += 2) {
        size_t n = 0, np = 0;
        ps_rowrange_t held[S_MAX_SERVERS];
        ps_range_split_rows(to, held);
        for (int r = 0; r < to; r++) {
            ck_assert_msg(s_load_rows(&job, parts, 2, to, r, &got[r], why, sizeof why) == 0,
                          "%s", why);
            n += ps_rows_count(got[r]);
            np += ps_rows_pending_count(got[r]);
            /* each row as the old server holding its key had it */
            s_rsnap_t b = s_rsnap(got[r]);
            const uint64_t *keys = (const uint64_t *)(const void *)b.p;
            const float *values = (const float *)(const void *)(keys + b.n);
            for (size_t i = 0; i < b.n; i++) {
                const uint64_t h = ps_rowkey_hash(keys[i]);
                ck_assert(h >= held[r].first && h <= held[r].last);
                float want[S_DIM];
                ps_rows_read(orig[h >= ((uint64_t)1 << 63)], &keys[i], 1, want);
                ck_assert_mem_eq(values + i * S_DIM, want, sizeof want);
            }
            free(b.p);
            ps_rows_destroy(&got[r]);
        }
        ck_assert_uint_eq(n, ps_rows_count(orig[0]) + ps_rows_count(orig[1]));
        ck_assert_uint_eq(np, ps_rows_pending_count(orig[0]) + ps_rows_pending_count(orig[1]));
    }
    ps_rows_destroy(&orig[0]);
    ps_rows_destroy(&orig[1]);
}
END_TEST

/* FTRL keeps two state arrays: the dense shard's and the rows' are written
 * under names of their own and load back. */
START_TEST(ftrl_state_is_written_and_loads_back)
{
    const ps_job_t job = s_rows_job("ftrl", 0, 1);
    ps_checkpoint_part_t parts[1];
    ps_rows_t *orig[1], *got = NULL;
    s_write_rows_parts(&job, 1, parts, orig);
    char why[512], path[400];
    ck_assert_msg(s_load_rows(&job, parts, 1, 1, 0, &got, why, sizeof why) == 0, "%s", why);
    s_rsnap_t a = s_rsnap(orig[0]), b = s_rsnap(got);
    ck_assert_uint_eq(a.bytes, b.bytes);
    ck_assert_mem_eq(a.p, b.p, a.bytes);
    free(a.p);
    free(b.p);
    snprintf(path, sizeof path, "%s/step-%d/%s", s_dir, S_STEP, parts[0].file);
    ps_safetensors_t *st = NULL;
    ck_assert_int_eq(ps_safetensors_read(path, &st, why, sizeof why), 0);
    const char *names[] = {"opt.z", "opt.n", "rows.opt.z", "rows.opt.n", "rows.values"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        ck_assert_msg(ps_safetensors_find(st, names[i]), "no %s", names[i]);
    }
    ck_assert_ptr_nonnull(ps_safetensors_find_dtype(st, "rows.keys", PS_SAFETENSORS_U64));
    ck_assert_ptr_nonnull(
        ps_safetensors_find_dtype(st, "rows.pending.counts", PS_SAFETENSORS_U32));
    ck_assert_str_eq(ps_safetensors_meta(st, "embed_dim"), "4");
    ps_safetensors_destroy(&st);
    ps_rows_destroy(&got);
    ps_rows_destroy(&orig[0]);
}
END_TEST

/* A job that is not the checkpoint's (its rows' layout) is refused with one
 * line saying what differs. */
START_TEST(rows_of_another_layout_are_refused)
{
    const ps_job_t job = s_rows_job("sgd", 0.9, 3);
    ps_checkpoint_part_t parts[2];
    ps_rows_t *orig[2];
    s_write_rows_parts(&job, 2, parts, orig);
    ps_rows_destroy(&orig[0]);
    ps_rows_destroy(&orig[1]);
    char why[512];
    ck_assert_msg(s_load_rows(&job, parts, 2, 2, 0, NULL, why, sizeof why) == 0, "%s", why);
    ps_job_t other = job;
    other.embed_dim = S_DIM * 2;
    ck_assert_int_eq(s_load_rows(&other, parts, 2, 2, 0, NULL, why, sizeof why), PS_EPROTO);
    ck_assert_msg(strstr(why, "server-0.safetensors: rows of --embed-dim 4, the job's is 8"),
                  "%s", why);
    other = job;
    other.momentum = 0; /* plain sgd keeps no state: the dense shard loads, the rows not */
    ck_assert_int_eq(s_load_rows(&other, parts, 2, 2, 1, NULL, why, sizeof why), PS_EPROTO);
    ck_assert_msg(strstr(why, "server-1.safetensors: rows with 1 optimizer state arrays, "
                             "the job's sgd keeps 0"), "%s", why);
    other = job;
    other.min_count = 2;
    ck_assert_int_eq(s_load_rows(&other, parts, 2, 2, 0, NULL, why, sizeof why), PS_EPROTO);
    ck_assert_msg(strstr(why, "rows of --min-count 3, the job's is 2"), "%s", why);
    other = job;
    other.max_rows = 5;
    ck_assert_int_eq(s_load_rows(&other, parts, 2, 1, 0, NULL, why, sizeof why), PS_EPROTO);
    ck_assert_msg(strstr(why, "more than the job's --max-rows 5"), "%s", why);
    /* rows where the job has none, and none where it has some */
    other = job;
    snprintf(other.model, sizeof other.model, "mlp");
    char sub[300];
    snprintf(sub, sizeof sub, "%s/step-%d", s_dir, S_STEP);
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, (ps_range_t){0, S_P}, &other), 0);
    ck_assert_int_eq(ps_checkpoint_load(sub, parts, 2, S_STEP, s, NULL, &other, NULL, why,
                                        sizeof why),
                     PS_EPROTO);
    ps_store_destroy(&s);
    ck_assert_msg(strstr(why, "holds embedding rows, the job (model mlp) has none"), "%s", why);
    ck_assert_int_eq(ps_store_new(&s, (ps_range_t){0, S_P}, &job), 0);
    float w[S_P] = {0};
    ck_assert_int_eq(ps_store_init(s, (ps_range_t){0, S_P}, w), 1);
    ps_checkpoint_part_t dense;
    ps_checkpoint_info_t info = {.dir = s_dir, .step = S_STEP, .version = S_STEP, .rank = 0,
                                 .servers = 1, .workers = 2, .num_params = S_P, .job = &job};
    ck_assert_int_eq(ps_checkpoint_write(&info, s, &dense, why, sizeof why), 0);
    ps_store_destroy(&s);
    ck_assert_int_eq(s_load_rows(&job, &dense, 1, 1, 0, NULL, why, sizeof why), PS_EPROTO);
    ck_assert_msg(strstr(why, "holds no embedding rows"), "%s", why);
    /* every line is one line */
    ck_assert_ptr_null(strchr(why, '\n'));
}
END_TEST

/* A bad variant of a one-server part (the documented format, written here by
 * hand): what each changes. */
typedef enum {
    S_GOOD,
    S_UNSORTED,    /* two row keys swapped */
    S_FOREIGN,     /* rows_first not the server's */
    S_KEYS_F32,    /* rows.keys as F32 of the same bytes */
    S_SHAPE,       /* rows.values [R * D / 2, 2] */
    S_NO_STATE,    /* rows.opt.sum missing */
    S_NO_COUNTS,   /* rows.pending.counts missing */
    S_COUNT_ZERO,  /* a pending count of 0 */
    S_COUNT_MIN,   /* a pending count of min_count */
    S_NAN,         /* a NaN among the values */
    S_NO_META,     /* embed_dim missing */
    S_PENDING_ROW, /* a pending key that has a row */
    S_VARIANTS
} s_variant_t;

/* Writes t's rows (and a dense shard of S_P) as the one part of a 1-server
 * job, changed as v says, and fills *part as the manifest would. */
static void s_hand_part(const ps_job_t *job, const ps_rows_t *t, s_variant_t v,
                        ps_checkpoint_part_t *part)
{
    const size_t n = ps_rows_count(t), np = ps_rows_pending_count(t), d = S_DIM;
    uint64_t *keys = malloc(n * 8 + 8), *pkeys = malloc(np * 8 + 8);
    float *values = malloc(n * d * 4 + 4), *state = malloc(n * d * 4 + 4), params[S_P] = {0};
    uint32_t *pcounts = malloc(np * 4 + 4);
    ck_assert(keys && pkeys && values && state && pcounts && n > 4 && np > 4);
    ps_rows_export(t, keys, values, state);
    ps_rows_pending_export(t, pkeys, pcounts);
    if (v == S_UNSORTED) {
        const uint64_t k = keys[1];
        keys[1] = keys[2];
        keys[2] = k;
    }
    pcounts[1] = v == S_COUNT_ZERO ? 0 : v == S_COUNT_MIN ? (uint32_t)job->min_count : pcounts[1];
    values[3] = v == S_NAN ? NAN : values[3];
    pkeys[np - 1] = v == S_PENDING_ROW ? keys[n - 1] : pkeys[np - 1];
    if (v == S_PENDING_ROW) { /* still ascending: sorted again */
        for (size_t i = np - 1; i > 0 && pkeys[i] < pkeys[i - 1]; i--) {
            const uint64_t k = pkeys[i];
            pkeys[i] = pkeys[i - 1];
            pkeys[i - 1] = k;
        }
    }
    ps_safetensors_tensor_t ts[8] = {
        {.name = "rows.keys", .ndim = 1, .shape = {(int64_t)n}, .u64 = keys,
         .dtype = PS_SAFETENSORS_U64},
        {.name = "rows.pending.keys", .ndim = 1, .shape = {(int64_t)np}, .u64 = pkeys,
         .dtype = PS_SAFETENSORS_U64},
        {.name = "params", .ndim = 1, .shape = {S_P}, .data = params},
        {.name = "opt.sum", .ndim = 1, .shape = {S_P}, .data = params},
        {.name = "rows.values", .ndim = 2, .shape = {(int64_t)n, (int64_t)d}, .data = values},
        {.name = "rows.opt.sum", .ndim = 2, .shape = {(int64_t)n, (int64_t)d}, .data = state},
        {.name = "rows.pending.counts", .ndim = 1, .shape = {(int64_t)np}, .u32 = pcounts,
         .dtype = PS_SAFETENSORS_U32},
    };
    int nt = 7;
    if (v == S_KEYS_F32) {
        ts[0].dtype = PS_SAFETENSORS_F32;
        ts[0].shape[0] = 2 * (int64_t)n;
    } else if (v == S_SHAPE) {
        ts[4].shape[0] = (int64_t)(n * d / 2);
        ts[4].shape[1] = 2;
    } else if (v == S_NO_STATE) {
        ts[5] = ts[6];
        nt = 6;
    } else if (v == S_NO_COUNTS) {
        nt = 6;
    }
    char sub[300], path[400], np_[24], minc[24], first[24], step[24];
    snprintf(sub, sizeof sub, "%s/step-%d", s_dir, S_STEP);
    ck_assert_int_eq(ps_file_make_dir(sub), 0);
    snprintf(part->file, sizeof part->file, "hand-%d.safetensors", (int)v);
    snprintf(path, sizeof path, "%s/%s", sub, part->file);
    snprintf(np_, sizeof np_, "%d", S_P);
    snprintf(minc, sizeof minc, "%d", job->min_count);
    snprintf(first, sizeof first, "%d", v == S_FOREIGN ? 1 : 0);
    snprintf(step, sizeof step, "%d", S_STEP);
    const char *meta[] = {"step", step, "key_begin", "0", "key_end", np_,
                          "optimizer", job->optimizer, "min_count", minc,
                          "rows_first", first, "rows_last", "18446744073709551615",
                          "embed_dim", "4"};
    const int nmeta = v == S_NO_META ? 7 : 8;
    char why[256];
    ck_assert_msg(ps_safetensors_write(path, ts, nt, meta, nmeta, why, sizeof why) == 0, "%s",
                  why);
    part->step = S_STEP;
    part->version = S_STEP;
    part->begin = 0;
    part->end = S_P;
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    part->size = (uint64_t)sb.st_size;
    ck_assert_int_eq(ps_file_crc32(path, &part->crc32), 0);
    free(keys);
    free(pkeys);
    free(values);
    free(state);
    free(pcounts);
}

START_TEST(a_hand_written_part_loads_and_each_bad_variant_is_refused)
{
    const ps_job_t job = s_rows_job("adagrad", 0, 3);
    ps_rows_t *t = s_table(&job);
    const ps_rowrange_t all = {0, UINT64_MAX};
    s_feed_rows(t, all, 4);
    static const char *const says[S_VARIANTS] = {
        [S_UNSORTED] = "not ascending",
        [S_FOREIGN] = "not its server's",
        [S_KEYS_F32] = "no whole embedding rows",
        [S_SHAPE] = "other shapes",
        [S_NO_STATE] = "rows with 0 optimizer state arrays",
        [S_NO_COUNTS] = "no whole embedding rows",
        [S_COUNT_ZERO] = "seen 0 times",
        [S_COUNT_MIN] = "seen 3 times",
        [S_NAN] = "not finite",
        [S_NO_META] = "no whole embedding rows",
        [S_PENDING_ROW] = "do not load",
    };
    char why[512];
    for (int v = 0; v < S_VARIANTS; v++) {
        ps_checkpoint_part_t part;
        s_hand_part(&job, t, (s_variant_t)v, &part);
        ps_rows_t *got = NULL;
        const int rc = s_load_rows(&job, &part, 1, 1, 0, &got, why, sizeof why);
        if (v == S_GOOD) {
            ck_assert_msg(rc == 0, "%s", why);
            s_rsnap_t a = s_rsnap(t), b = s_rsnap(got);
            ck_assert_uint_eq(a.bytes, b.bytes);
            ck_assert_mem_eq(a.p, b.p, a.bytes);
            free(a.p);
            free(b.p);
        } else {
            ck_assert_msg(rc == PS_EPROTO, "variant %d: rc %d", v, rc);
            ck_assert_msg(strstr(why, says[v]) && !strchr(why, '\n'), "variant %d: %s", v, why);
        }
        ps_rows_destroy(&got);
    }
    ps_rows_destroy(&t);
}
END_TEST

int main(void)
{
    ps_log_set_level("err");
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, s_setup, s_teardown);
    tcase_add_test(tc, two_parts_load_into_three_shards_bitwise);
    tcase_add_test(tc, load_refuses_a_part_whose_crc_is_not_the_manifests);
    tcase_add_test(tc, load_refuses_another_step_and_missing_keys);
    tcase_add_test(tc, manifest_written_found_and_corruption_detected);
    tcase_add_test(tc, a_step_written_again_keeps_the_part_a_manifest_names);
    tcase_add_test(tc, rows_load_back_bitwise_on_any_number_of_servers);
    tcase_add_test(tc, ftrl_state_is_written_and_loads_back);
    tcase_add_test(tc, rows_of_another_layout_are_refused);
    tcase_add_test(tc, a_hand_written_part_loads_and_each_bad_variant_is_refused);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
