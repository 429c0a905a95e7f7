/*
 * tests/unit/test_manifest.c - reading checkpoint manifests
 * (scheduler/manifest.h) from a directory that may hold anything: the
 * largest real manifest (every server, the longest lineage, the job's
 * flags) reads back whole, while hostile ones - many small values, deep
 * nesting, a file past the size limit - are refused with one line naming
 * the file, and reading any of them, or any of them mutated at random
 * places, grows the reader's peak memory by at most a small multiple of
 * the file's size (measured in a child).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/json.h"
#include "scheduler/manifest.h"
#include "tests/unit/testutil.h"

enum {
    S_STEP = 40,
    S_MAX_BYTES = 1 << 20, /* the manifest's size limit (docs/design/checkpoints.md) */
    S_FACTOR = 9,          /* its tree within 8 times its size, and its text */
    S_READER = 512 << 10,  /* the reader's own: its tables of parts and flags, the heap
                              growing in steps */
};

static char s_dir[64], s_stepdir[96], s_path[128], s_latest[96];

static void s_setup(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/sps-manifest-unit.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s_dir));
    snprintf(s_stepdir, sizeof s_stepdir, "%s/step-%d", s_dir, S_STEP);
    snprintf(s_path, sizeof s_path, "%s/manifest.json", s_stepdir);
    snprintf(s_latest, sizeof s_latest, "%s/latest", s_dir);
    ck_assert_int_eq(mkdir(s_stepdir, 0777), 0);
}

static void s_teardown(void)
{
    unlink(s_path);
    unlink(s_latest);
    rmdir(s_stepdir);
    rmdir(s_dir);
}

/* The child's read: the whole manifest, as a resume reads it. */
static int s_read(const void *arg)
{
    (void)arg;
    ps_manifest_job_t *job = calloc(1, sizeof *job);
    ps_checkpoint_part_t *parts = calloc(PS_MAX_SERVERS, sizeof *parts);
    int rc = job && parts ? ps_manifest_read_job(s_stepdir, job, NULL, 0) : PS_ENOMEM;
    if (rc >= 0) { /* 1: it names its job, 0: it does not */
        rc = ps_manifest_check(s_stepdir, S_STEP, 0, parts, NULL, 0) == PS_MAX_SERVERS
                 ? 0
                 : PS_EPROTO;
    }
    free(parts);
    free(job);
    return rc;
}

/* The peak growth of a child reading s_path over one reading nothing
 * (forked now, so that both start from this process's heap); asserted within
 * S_FACTOR times the file's size, PS_JSON_TREE_BASE and S_READER.
 * Returns the read's result. */
static int s_read_within_bound(const char *what)
{
    struct stat sb;
    ck_assert_int_eq(stat(s_path, &sb), 0);
    int rc;
    const long base = ps_test_child_peak(NULL, NULL, &rc);
    const long h = (long)sb.st_size, grew = ps_test_child_peak(s_read, NULL, &rc) - base;
    printf("%s: %ld bytes, %s, the peak grew by %ld bytes (%.1fx)\n", what, h,
           rc ? "refused" : "read", grew, (double)grew / (double)h);
    ck_assert_msg(grew <= S_FACTOR * h + PS_JSON_TREE_BASE + S_READER,
                  "%s: %ld bytes took %ld", what, h, grew);
    return rc;
}

/* s_path, the manifest ps_manifest_add writes for PS_MAX_SERVERS servers
 * of a job with the longest lineage and its flags recorded. */
static void s_write_largest(void)
{
    ps_view_t *v = calloc(1, sizeof *v);
    ps_manifest_job_t *job = calloc(1, sizeof *job);
    ck_assert(v && job);
    v->num_params = (uint64_t)PS_MAX_SERVERS << 20;
    v->num_servers = PS_MAX_SERVERS;
    v->num_workers = PS_MAX_WORKERS;
    snprintf(v->checkpoint_dir, sizeof v->checkpoint_dir, "%s", s_dir);
    ps_job_t cfg;
    ps_job_defaults(&cfg);
    ps_job_resume_fields(&cfg, job->config);
    ps_job_resume_hash(job->config, job->config_hash, sizeof job->config_hash);
    job->has_config = 1;
    snprintf(job->job_id, sizeof job->job_id, "job-20261207T120000-%d", PS_MAX_SERVERS);
    for (; job->nlineage < PS_MANIFEST_MAX_LINEAGE; job->nlineage++) {
        snprintf(job->lineage[job->nlineage].job_id, PS_MANIFEST_JOB_ID,
                 "job-20261207T120000-%d", job->nlineage);
        job->lineage[job->nlineage].step = 1000 * (int64_t)job->nlineage;
    }
    ps_manifest_t *m = NULL;
    ck_assert_int_eq(ps_manifest_new(&m, v, job), 0);
    for (int r = 0; r < PS_MAX_SERVERS; r++) {
        ps_checkpoint_part_t p = {.step = S_STEP, .size = 1u << 30, .crc32 = UINT32_MAX,
                                  .begin = (uint64_t)r << 20,
                                  .end = (uint64_t)(r + 1) << 20, .version = S_STEP};
        snprintf(p.file, sizeof p.file, "server-%d.safetensors", r);
        ck_assert_int_eq(ps_manifest_add(m, r, &p), r == PS_MAX_SERVERS - 1);
    }
    ps_manifest_destroy(&m);
    free(job);
    free(v);
}

START_TEST(the_largest_real_manifest_reads_hostile_ones_cost_a_small_multiple)
{
#if defined(__SANITIZE_ADDRESS__)
    return; /* AddressSanitizer's shadow and quarantine are not the reader's */
#endif
    s_write_largest();
    ck_assert_int_eq(s_read_within_bound("the largest real manifest"), 0);
    /* small values a tree of the whole file would hold before any check */
    static const char *hostile[][3] = {
        {"{\"format\": \"shardps-manifest-1\", \"parts\": [", "0", "]}"},
        {"{", "\"k%ld\": 0", "}"},
        {"{\"job_id\": \"j\", \"lineage\": [", "{}", "]}"},
        {"{\"config\": {\"a\": [", "[]", "]}}"},
        {"[", "\"\"", "]"},
        {"{\"parts\": ", "[[[[[[[[", "}"},
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s%s...", hostile[i][0], hostile[i][1]);
        ps_test_put_repeated(s_path, hostile[i][0], hostile[i][1], hostile[i][2],
                             S_MAX_BYTES - 64);
        ck_assert_int_eq(s_read_within_bound(what), PS_EPROTO);
        char why[512] = "";
        ps_checkpoint_part_t *parts = calloc(PS_MAX_SERVERS, sizeof *parts);
        ck_assert_int_eq(ps_manifest_check(s_stepdir, S_STEP, 0, parts, why, sizeof why),
                         0);
        free(parts);
        ck_assert_msg(strstr(why, s_path) == why && !strchr(why, '\n'), "%s", why);
    }
    /* past the limit: refused unread */
    ps_test_put_repeated(s_path, "{\"a\": [", "0", "]}", S_MAX_BYTES);
    ck_assert_int_eq(s_read_within_bound("a manifest past 1 MiB"), PS_EPROTO);
    char why[512] = "";
    ps_manifest_job_t *job = calloc(1, sizeof *job);
    ck_assert_int_eq(ps_manifest_read_job(s_stepdir, job, why, sizeof why), PS_EPROTO);
    free(job);
    ck_assert_msg(strstr(why, s_path) == why && strstr(why, "more than the"), "%s", why);
}
END_TEST

START_TEST(mutated_manifests_stay_within_the_bound)
{
#if defined(__SANITIZE_ADDRESS__)
    return;
#endif
    /* Seeded: a manifest of strings, just within the bound (jansson builds
     * it, about 5 times its size), overwritten at 1 to 4 random places
     * with JSON's structure, strings and escapes (so that what is a string
     * and what is not moves): refused, never over the bound. */
    static const char *tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "\\", "0", "\"a\":",
                                   "[[", "{}", "\"parts\": [", "\\u0000", " "};
    const size_t ntok = sizeof tokens / sizeof tokens[0];
    uint64_t r = 41;
    for (int i = 0; i < 12; i++) {
        ps_test_put_repeated(s_path, "{\"format\": \"shardps-manifest-1\", \"parts\": [",
                             "\"%020ld\"", "]}", S_MAX_BYTES - 64);
        FILE *f = fopen(s_path, "r+");
        ck_assert_ptr_nonnull(f);
        for (int k = 0; k <= i % 4; k++) {
            r = r * 6364136223846793005u + 1442695040888963407u; /* Knuth's MMIX LCG */
            const char *tok = tokens[(r >> 33) % ntok];
            ck_assert_int_eq(fseek(f, (long)((r >> 11) % (S_MAX_BYTES / 2)), SEEK_SET), 0);
            fputs(tok, f);
        }
        ck_assert_int_eq(fclose(f), 0);
        char what[32];
        snprintf(what, sizeof what, "mutated manifest %d", i);
        ck_assert_int_eq(s_read_within_bound(what), PS_EPROTO);
    }
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("manifest");
    tcase_add_checked_fixture(tc, s_setup, s_teardown);
    tcase_set_timeout(tc, 120); /* children parse a megabyte each: for a loaded machine */
    tcase_add_test(tc, the_largest_real_manifest_reads_hostile_ones_cost_a_small_multiple);
    tcase_add_test(tc, mutated_manifests_stay_within_the_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
