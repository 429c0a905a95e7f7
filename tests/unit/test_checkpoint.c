/*
 * tests/unit/test_checkpoint.c - checkpoint parts and manifests: two shards
 * written and loaded back into three (the flat vector re-cut) give bitwise
 * the parameters and Adam's state; a part of another step is refused; the
 * manifest is written once both parts are in, found on resume, and a
 * flipped byte or a truncated part makes the checkpoint unusable; a step
 * written again leaves the part its manifest names as it was.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "scheduler/manifest.h"
#include "server/checkpoint.h"
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
        ck_assert_msg(ps_checkpoint_load(sub, parts, 2, S_STEP, s, &s_job, NULL, why, sizeof why) == 0,
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
    int rc = ps_checkpoint_load(sub, parts, nparts, step, s, &s_job, NULL, why, cap);
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
    ck_assert_int_eq(ps_manifest_new(&m, v), 0);
    ck_assert_int_eq(ps_manifest_add(m, 1, &parts[1]), 0);
    ck_assert_int_eq(ps_manifest_add(m, 0, &parts[0]), 1);
    ps_manifest_destroy(&m);
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
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
