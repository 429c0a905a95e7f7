/*
 * tests/unit/test_consistency_rows.c - embedding rows in the consistency
 * modes: a stepped step waits for every live worker's rows push (a message
 * per piece of the server's rows) as well as its dense keys; a piece
 * applies as soon as every worker pushed it, and the next step's pulls of
 * it are answered then; the rows of a step are summed in worker-rank order
 * (bitwise, whatever the arrival order) with the step's lr and scale; a
 * second rows push of a piece is refused; rows pulls wait for their
 * version; async applies a rows push on arrival; a hot replica replays its
 * primary's rows updates piece by piece and ends the step on the last, or,
 * taking over before it came, the workers' pushes sent again do, without
 * applying a piece twice; every frame comes back once.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "server/consistency.h"
#include "server/store.h"
#include "tests/unit/testutil.h"

enum { S_DIM = 2, S_N = 8, S_MAX = 64 };

/* The server's rows: hashes 0 .. 15, so piece q holds hashes 2q and 2q + 1. */
static const ps_rowrange_t s_range = {0, 15};

/* What the state machine asked for. */
typedef struct {
    ps_store_t *store;
    ps_consistency_t *c;
    int applies;                 /* apply_rows calls with keys */
    int ends;                    /* and with last set */
    uint64_t keys[S_MAX];        /* every call's keys, one after another */
    float grads[S_MAX * S_DIM];  /* and sums */
    uint64_t nkeys;
    float lr, scale;
    int replies;                 /* reply_rows calls */
    int64_t reply_version;       /* the last one's */
    uint64_t reply_keys;
    int released[S_MAX];         /* times frame i came back */
    int frames;
    char why[160];
} s_fix_t;

static void s_on_ack(void *ctx, const void *asker, ps_range_t range, int64_t version)
{
    (void)ctx, (void)asker, (void)range, (void)version;
}

static void s_on_reply(void *ctx, const void *asker, ps_range_t part, const float *values,
                       int64_t version)
{
    (void)ctx, (void)asker, (void)part, (void)values, (void)version;
}

static void s_on_release(void *ctx, void *frame)
{
    s_fix_t *f = ctx;
    f->released[(int *)frame - f->released]++;
}

static void s_on_apply_rows(void *ctx, const uint64_t *keys, const float *grads, uint64_t n,
                            float lr, float scale, int64_t t, int last)
{
    (void)t;
    s_fix_t *f = ctx;
    ck_assert_uint_le(f->nkeys + n, S_MAX);
    f->applies += n > 0;
    f->ends += last;
    memcpy(f->keys + f->nkeys, keys, n * sizeof *keys);
    memcpy(f->grads + f->nkeys * S_DIM, grads, n * S_DIM * sizeof *grads);
    f->nkeys += n;
    f->lr = lr;
    f->scale = scale;
}

static void s_on_reply_rows(void *ctx, const void *asker, const void *keys, uint64_t nkeys,
                            int64_t version)
{
    (void)asker, (void)keys;
    s_fix_t *f = ctx;
    f->replies++;
    f->reply_version = version;
    f->reply_keys = nkeys;
}

static s_fix_t *s_new(ps_mode_t mode, int workers)
{
    s_fix_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    ps_job_t job;
    ps_job_defaults(&job);
    snprintf(job.model, sizeof job.model, "ctr");
    job.mode = mode;
    job.embed_dim = S_DIM;
    job.momentum = 0;
    job.staleness_lr = 0;
    job.lr = 0.5;
    job.schedule.kind = PS_LR_CONSTANT;
    ck_assert_int_eq(ps_store_new(&f->store, (ps_range_t){0, S_N}, &job), 0);
    ps_consistency_config_t cfg = {
        .job = job,
        .workers = workers,
        .steps_per_epoch = 100,
        .total_steps = 1000,
        .report_missing = 5,
        .asker_size = sizeof(int),
        .ops = {f, s_on_ack, s_on_reply, s_on_release, NULL, NULL, s_on_apply_rows,
                s_on_reply_rows},
        .rows = 1,
        .row_range = s_range,
    };
    ck_assert_int_eq(ps_consistency_new(&f->c, &cfg, f->store), 0);
    float v[S_N] = {0};
    int asker = 0;
    ps_request_t r = {0, 0, 0, {0, S_N}, v, NULL, &asker};
    ck_assert_int_eq(ps_consistency_init(f->c, &r, f->why, sizeof f->why), 0);
    return f;
}

static void s_free(s_fix_t *f)
{
    ps_consistency_destroy(&f->c);
    for (int i = 0; i < f->frames; i++) {
        ck_assert_msg(f->released[i] == 1, "frame %d released %d times", i, f->released[i]);
    }
    ps_store_destroy(&f->store);
    free(f);
}

/* Worker w's dense push of every key for step t. */
static int s_push(s_fix_t *f, int w, int64_t t)
{
    static const float g[S_N] = {0};
    ps_request_t r = {w, t, t, {0, S_N}, g, &f->released[f->frames++], &w};
    return ps_consistency_push(f->c, &r, f->why, sizeof f->why);
}

/* The piece of the server's rows holding key k. */
static int s_piece_of(uint64_t k)
{
    return ps_range_row_piece_of(s_range, ps_rowkey_hash(k));
}

/* Worker w's rows push of piece q of step t: those of keys[0..n) (grads n
 * x S_DIM) in the piece. */
static int s_push_piece(s_fix_t *f, int w, int64_t t, int q, const uint64_t *keys,
                        const float *grads, uint64_t n)
{
    uint64_t at = 0, m = 0;
    while (at < n && s_piece_of(keys[at]) < q) {
        at++;
    }
    while (at + m < n && s_piece_of(keys[at + m]) == q) {
        m++;
    }
    ps_request_t r = {w, t, t, {0, 0}, m ? grads + at * S_DIM : NULL,
                      &f->released[f->frames++], &w, m ? keys + at : NULL, m, q};
    return ps_consistency_push_rows(f->c, &r, f->why, sizeof f->why);
}

/* Worker w's rows push of step t: keys[0..n), grads n x S_DIM, a message
 * per piece as a worker sends it. The first refusal, or 0. */
static int s_push_rows(s_fix_t *f, int w, int64_t t, const uint64_t *keys, const float *grads,
                       uint64_t n)
{
    int rc = 0;
    for (int q = 0; q < PS_RANGE_ROW_PIECES && rc == 0; q++) {
        rc = s_push_piece(f, w, t, q, keys, grads, n);
    }
    return rc;
}

/* Worker w's pull of keys[0..n) (all in one piece) at version. */
static int s_pull_rows(s_fix_t *f, int w, int64_t version, const uint64_t *keys, uint64_t n)
{
    ps_request_t r = {w,    version, 0, {0, 0}, NULL, &f->released[f->frames++],
                      &w,   keys,    n, n ? s_piece_of(keys[0]) : 0};
    return ps_consistency_pull_rows(f->c, &r, f->why, sizeof f->why);
}

/* Keys travel in the order of their hashes: these are the keys of hashes
 * 3, 7, 9 and 1, 7, 12 (filled in by main). */
static uint64_t s_k0[3], s_k1[3];
/* Values whose float sum depends on the order of summation. */
static const float s_g0[] = {1e8f, 1, 2, 3, 4, 5}, s_g1[] = {6, 7, 0.37f, 1, -1e8f, 9};

START_TEST(sync_step_waits_for_every_workers_rows_and_sums_them_in_rank_order)
{
    for (int order = 0; order < 2; order++) {
        s_fix_t *f = s_new(PS_MODE_SYNC, 2);
        ck_assert_int_eq(s_push(f, 0, 0), 0);
        ck_assert_int_eq(s_push(f, 1, 0), 0);
        /* dense keys all in, rows not: the step waits */
        ck_assert_int_eq(ps_consistency_version(f->c), 0);
        if (order == 0) {
            ck_assert_int_eq(s_push_rows(f, 0, 0, s_k0, s_g0, 3), 0);
            ck_assert_int_eq(ps_consistency_version(f->c), 0);
            ck_assert_int_eq(s_push_rows(f, 1, 0, s_k1, s_g1, 3), 0);
        } else {
            ck_assert_int_eq(s_push_rows(f, 1, 0, s_k1, s_g1, 3), 0);
            ck_assert_int_eq(ps_consistency_version(f->c), 0);
            ck_assert_int_eq(s_push_rows(f, 0, 0, s_k0, s_g0, 3), 0);
        }
        ck_assert_int_eq(ps_consistency_version(f->c), 1);
        ck_assert_int_eq(f->applies, 5); /* the pieces of hashes 1, 3, 7, 9 and 12 */
        ck_assert_int_eq(f->ends, 1);
        /* the union, ascending by hash; hash 7 is W0's plus W1's, in that order */
        const uint64_t want[] = {s_k1[0], s_k0[0], s_k0[1], s_k0[2], s_k1[2]};
        ck_assert_uint_eq(f->nkeys, 5);
        ck_assert_mem_eq(f->keys, want, sizeof want);
        const float k7[2] = {s_g0[2] + s_g1[2], s_g0[3] + s_g1[3]};
        ck_assert_mem_eq(&f->grads[2 * S_DIM], k7, sizeof k7);
        ck_assert_mem_eq(&f->grads[0], &s_g1[0], 2 * sizeof(float));
        ck_assert_mem_eq(&f->grads[4 * S_DIM], &s_g1[4], 2 * sizeof(float));
        ck_assert(f->scale == 0.5f && f->lr == 0.5f);
        s_free(f);
    }
}
END_TEST

START_TEST(a_second_rows_push_of_a_step_is_refused)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 2);
    ck_assert_int_eq(s_push_rows(f, 0, 0, s_k0, s_g0, 3), 0);
    ck_assert_int_eq(s_push_rows(f, 0, 0, s_k1, s_g1, 3), PS_ESTATE);
    ck_assert_ptr_nonnull(strstr(f->why, "twice"));
    /* a step outside the window too */
    ck_assert_int_eq(s_push_rows(f, 1, 5, s_k1, s_g1, 3), PS_ESTATE);
    /* a non-finite gradient never counts */
    const float bad[] = {1, 2, 3, 4, 5, 1.0f / 0.0f};
    ck_assert_int_eq(s_push_rows(f, 1, 0, s_k1, bad, 3), PS_ENONFINITE);
    ck_assert_int_eq(s_push(f, 0, 0), 0);
    ck_assert_int_eq(s_push(f, 1, 0), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    s_free(f);
}
END_TEST

START_TEST(an_empty_rows_push_completes_a_workers_share)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 2);
    ck_assert_int_eq(s_push(f, 0, 0), 0);
    ck_assert_int_eq(s_push(f, 1, 0), 0);
    ck_assert_int_eq(s_push_rows(f, 0, 0, NULL, NULL, 0), 0);
    ck_assert_int_eq(s_push_rows(f, 1, 0, s_k1, s_g1, 3), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_uint_eq(f->nkeys, 3);
    ck_assert_mem_eq(f->grads, s_g1, sizeof s_g1);
    s_free(f);
}
END_TEST

START_TEST(rows_pulls_wait_for_their_version)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 1);
    ck_assert_int_eq(s_pull_rows(f, 0, 0, s_k0, 3), 0);
    ck_assert_int_eq(f->replies, 1); /* version 0 is there */
    ck_assert_int_eq(f->released[0], 1);
    ck_assert_int_eq(s_pull_rows(f, 0, 1, s_k0, 3), 0);
    ck_assert_int_eq(f->replies, 1);
    ck_assert_int_eq(ps_consistency_pending_pulls(f->c), 1);
    ck_assert_int_eq(s_push(f, 0, 0), 0);
    ck_assert_int_eq(s_push_rows(f, 0, 0, s_k0, s_g0, 3), 0);
    ck_assert_int_eq(f->replies, 2);
    ck_assert_int_eq(f->reply_version, 1);
    ck_assert_uint_eq(f->reply_keys, 3);
    /* a waiting pull forgotten by a rollback gives its frame back */
    ck_assert_int_eq(s_pull_rows(f, 0, 5, s_k0, 3), 0);
    ck_assert_int_eq(ps_consistency_rollback(f->c, 0), 0);
    ck_assert_int_eq(ps_consistency_pending_pulls(f->c), 0);
    s_free(f);
}
END_TEST

START_TEST(async_applies_a_rows_push_on_arrival)
{
    s_fix_t *f = s_new(PS_MODE_ASYNC, 2);
    ck_assert_int_eq(s_push_rows(f, 1, 0, s_k1, s_g1, 3), 0);
    ck_assert_int_eq(f->applies, 3); /* a piece each */
    ck_assert_mem_eq(f->grads, s_g1, sizeof s_g1);
    ck_assert_int_eq(s_push_rows(f, 0, 0, s_k0, s_g0, 3), 0);
    ck_assert_int_eq(f->applies, 6);
    ck_assert_mem_eq(f->keys + 3, s_k0, sizeof s_k0);
    ck_assert_int_eq(ps_consistency_stats(f->c)->row_pushes, 2 * PS_RANGE_ROW_PIECES);
    s_free(f);
}
END_TEST

/* A hot replica: its primary's step with no rows key still ends its rows
 * (the last call), and the replica replays the pieces' rows updates as they
 * come, before the dense chunks too, the last call after those ending the
 * step; out of place it is refused. Async: at the version it was applied
 * at. */
START_TEST(a_replica_replays_the_rows_after_the_dense_chunks_and_ends_the_step)
{
    s_fix_t *p = s_new(PS_MODE_SYNC, 1);
    ck_assert_int_eq(s_push(p, 0, 0), 0);
    ck_assert_int_eq(s_push_rows(p, 0, 0, NULL, NULL, 0), 0);
    ck_assert_int_eq(ps_consistency_version(p->c), 1);
    ck_assert_int_eq(p->applies, 0);
    ck_assert_int_eq(p->ends, 1);
    ck_assert_uint_eq(p->nkeys, 0);
    s_free(p);
    s_fix_t *f = s_new(PS_MODE_SYNC, 2);
    static const float g[S_N] = {0};
    ck_assert_int_eq(ps_consistency_replay_rows(f->c, s_k0, s_g0, 1, 0.5f, 0.5f, 0, 0), 0);
    ck_assert_int_eq(ps_consistency_replay_rows(f->c, s_k0, s_g0, 0, 0.5f, 0.5f, 0, 1),
                     PS_ESTATE); /* the last before the dense chunks */
    ck_assert_int_eq(ps_consistency_replay(f->c, (ps_range_t){0, S_N}, g, 0.5f, 0.5f, 1), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 0); /* the rows end the step */
    ck_assert_int_eq(ps_consistency_replay_rows(f->c, s_k1, s_g1, 1, 0.5f, 0.5f, 0, 0), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(ps_consistency_replay_rows(f->c, s_k1, s_g1, 0, 0.5f, 0.5f, 0, 1), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(f->applies, 2);
    ck_assert_int_eq(f->ends, 1);
    ck_assert_uint_eq(f->keys[1], s_k1[0]);
    ck_assert_float_eq(f->scale, 0.5f);
    ck_assert_int_eq(ps_consistency_replay_rows(f->c, s_k0, s_g0, 3, 0.5f, 0.5f, 0, 1),
                     PS_ESTATE);
    s_free(f);
    f = s_new(PS_MODE_ASYNC, 2);
    ck_assert_int_eq(ps_consistency_replay_rows(f->c, s_k0, s_g0, 3, 0.5f, 1, 1, 1), PS_ESTATE);
    ck_assert_int_eq(ps_consistency_replay_rows(f->c, s_k0, s_g0, 3, 0.5f, 1, 0, 1), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(f->applies, 1);
    s_free(f);
}
END_TEST

/* A replica that took over between a step's dense chunks and its rows:
 * the chunks stay applied, the workers' pushes of the step sent again
 * complete it, and the rows are summed from both. */
START_TEST(a_takeover_between_the_chunks_and_the_rows_ends_the_step_on_the_rows)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 2);
    static const float g[S_N] = {0};
    ck_assert_int_eq(ps_consistency_restore(f->c, 0, NULL, 0), 0);
    ck_assert_int_eq(ps_consistency_replay(f->c, (ps_range_t){0, S_N}, g, 0.5f, 0.5f, 1), 0);
    ck_assert_int_eq(ps_consistency_forget(f->c), 0);
    ck_assert_int_eq(s_push(f, 0, 0), 0);
    ck_assert_int_eq(s_push(f, 1, 0), 0);
    ck_assert_int_eq(s_push_rows(f, 1, 0, s_k1, s_g1, 3), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(s_push_rows(f, 0, 0, s_k0, s_g0, 3), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    ck_assert_int_eq(f->applies, 5);
    ck_assert_int_eq(f->ends, 1);
    ck_assert_uint_eq(f->nkeys, 5);
    s_free(f);
}
END_TEST

/* Sync: a piece applies once every worker pushed it, dense keys or not,
 * and the next step's pulls of that piece are answered then, at the next
 * version; a pull of a piece still coming waits. */
START_TEST(a_piece_applies_when_every_worker_pushed_it_and_answers_its_pulls)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 2);
    const uint64_t k3 = s_k0[0], k12 = s_k1[2]; /* pieces 1 and 6 */
    ck_assert_int_eq(s_pull_rows(f, 0, 1, &k3, 1), 0);
    ck_assert_int_eq(s_pull_rows(f, 1, 1, &k12, 1), 0);
    ck_assert_int_eq(f->replies, 0);
    ck_assert_int_eq(s_push_piece(f, 0, 0, 1, s_k0, s_g0, 3), 0);
    ck_assert_int_eq(f->applies, 0);
    ck_assert_int_eq(s_push_piece(f, 1, 0, 1, s_k1, s_g1, 3), 0);
    ck_assert_int_eq(f->applies, 1);
    ck_assert_uint_eq(f->keys[0], k3);
    ps_consistency_send_applied(f->c);
    ck_assert_int_eq(f->replies, 1);
    ck_assert_int_eq(f->reply_version, 1);
    ck_assert_int_eq(ps_consistency_version(f->c), 0);
    ck_assert_int_eq(ps_consistency_pending_pulls(f->c), 1); /* piece 6 is not in */
    ck_assert_int_eq(s_push_rows(f, 0, 0, NULL, NULL, 0), PS_ESTATE); /* piece 0 then 1 twice */
    s_free(f);
}
END_TEST

/* A replica that applied a piece of the step under way, then took over:
 * the workers' pushes sent again complete the step without applying that
 * piece twice. */
START_TEST(a_takeover_applies_no_piece_twice)
{
    s_fix_t *f = s_new(PS_MODE_SYNC, 2);
    const float g3[S_DIM] = {0.25f, 0.5f};
    ck_assert_int_eq(ps_consistency_restore(f->c, 0, NULL, 0), 0);
    ck_assert_int_eq(ps_consistency_replay_rows(f->c, s_k0, g3, 1, 0.5f, 0.5f, 0, 0), 0);
    ck_assert_int_eq(ps_consistency_forget(f->c), 0);
    ck_assert_int_eq(s_push(f, 0, 0), 0);
    ck_assert_int_eq(s_push(f, 1, 0), 0);
    ck_assert_int_eq(s_push_rows(f, 0, 0, s_k0, s_g0, 3), 0);
    ck_assert_int_eq(s_push_rows(f, 1, 0, s_k1, s_g1, 3), 0);
    ck_assert_int_eq(ps_consistency_version(f->c), 1);
    /* hash 3 once, as the replay had it; the others from the pushes */
    const uint64_t want[] = {s_k0[0], s_k1[0], s_k0[1], s_k0[2], s_k1[2]};
    ck_assert_uint_eq(f->nkeys, 5);
    ck_assert_mem_eq(f->keys, want, sizeof want);
    ck_assert_mem_eq(f->grads, g3, sizeof g3);
    s_free(f);
}
END_TEST

START_TEST(sum_rows_merges_weighted_parts)
{
    const ps_rows_part_t parts[] = {{s_k0, s_g0, 3, 2.0f}, {s_k1, s_g1, 3, 0.5f}};
    uint64_t *keys = NULL, cap = 0;
    float *grads = NULL;
    ck_assert_int_eq(ps_optim_sum_rows(parts, 2, S_DIM, &keys, &grads, &cap), 5);
    ck_assert_float_eq(grads[2 * S_DIM], 2.0f * s_g0[2] + 0.5f * s_g1[2]);
    ck_assert_float_eq(grads[1 * S_DIM], 2.0f * s_g0[0]);
    ck_assert_int_eq(ps_optim_sum_rows(parts, 0, S_DIM, &keys, &grads, &cap), 0);
    free(keys);
    free(grads);
}
END_TEST

int main(void)
{
    const uint64_t h0[] = {3, 7, 9}, h1[] = {1, 7, 12};
    for (int i = 0; i < 3; i++) {
        s_k0[i] = ps_rowkey_unhash(h0[i]);
        s_k1[i] = ps_rowkey_unhash(h1[i]);
    }
    ps_log_set_level("err");
    Suite *s = suite_create("consistency_rows");
    TCase *tc = tcase_create("consistency_rows");
    tcase_add_test(tc, sync_step_waits_for_every_workers_rows_and_sums_them_in_rank_order);
    tcase_add_test(tc, a_second_rows_push_of_a_step_is_refused);
    tcase_add_test(tc, an_empty_rows_push_completes_a_workers_share);
    tcase_add_test(tc, rows_pulls_wait_for_their_version);
    tcase_add_test(tc, async_applies_a_rows_push_on_arrival);
    tcase_add_test(tc, sum_rows_merges_weighted_parts);
    tcase_add_test(tc, a_replica_replays_the_rows_after_the_dense_chunks_and_ends_the_step);
    tcase_add_test(tc, a_takeover_between_the_chunks_and_the_rows_ends_the_step_on_the_rows);
    tcase_add_test(tc, a_piece_applies_when_every_worker_pushed_it_and_answers_its_pulls);
    tcase_add_test(tc, a_takeover_applies_no_piece_twice);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
