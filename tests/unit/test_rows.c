/*
 * tests/unit/test_rows.c - a server's embedding rows: unknown keys read as
 * their initial values (zeros behind a frequency filter) without costing a
 * row; an update is bitwise ps_optim_step on the row and its state, which
 * depend on the row's own updates alone; the filter and the cap drop and
 * count what they should; a non-finite update leaves the row; snapshots are
 * sorted and load back bitwise, also into a table cleared for it and in
 * parts with the counters (a replica's); growth
 * keeps every row; and the memory held stays within 1.5x of the rows'
 * floats.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/optim.h"
#include "server/rows.h"
#include "tests/unit/testutil.h"

enum { S_DIM = 16, S_MAX_STATE = 2 };

static ps_rows_config_t s_config(const char *optimizer, double momentum, uint32_t min_count,
                                 uint64_t max_rows)
{
    ps_job_t j;
    ps_job_defaults(&j);
    snprintf(j.optimizer, sizeof j.optimizer, "%s", optimizer);
    j.momentum = momentum;
    j.weight_decay = 0.01;
    j.l1 = 0.01;
    j.l2 = 0.1;
    ps_rows_config_t c = {.dim = S_DIM, .seed = 42, .init_bound = 0.1f,
                          .min_count = min_count, .max_rows = max_rows};
    ck_assert_int_eq(ps_optim_from_job(&j, &c.optim), 0);
    return c;
}

static ps_rows_t *s_new(const ps_rows_config_t *c)
{
    ps_rows_t *t = NULL;
    ck_assert_int_eq(ps_rows_new(&t, c), 0);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* The gradient of key k at step s: S_DIM floats from (k, s) alone. */
static void s_grad(uint64_t k, int s, float *g)
{
    ps_test_fill(g, S_DIM, -1, 1, k * 131 + (uint64_t)s);
}

/* One row's values and state, kept by the test with ps_optim_step. */
typedef struct {
    float w[S_DIM];
    float state[S_MAX_STATE * S_DIM]; /* array a at state + a*S_DIM */
} s_row_t;

static void s_ref_init(const ps_rows_config_t *c, uint64_t key, s_row_t *r)
{
    memset(r, 0, sizeof *r);
    ps_optim_row_init(c->seed, key, S_DIM, c->init_bound, r->w);
}

START_TEST(new_refuses_bad_configs)
{
    ps_rows_config_t bad[6];
    for (int i = 0; i < 6; i++) {
        bad[i] = s_config("sgd", 0.9, 1, 0);
    }
    bad[0].dim = 0;
    bad[1].dim = PS_JOB_MAX_EMBED_DIM + 1;
    bad[2].init_bound = -0.1f;
    bad[3].init_bound = NAN;
    bad[4] = s_config("adam", 0, 1, 0);
    bad[5] = s_config("nesterov", 0.9, 1, 0);
    for (int i = 0; i < 6; i++) {
        ps_rows_t *t = (ps_rows_t *)&bad[i];
        ck_assert_int_eq(ps_rows_new(&t, &bad[i]), PS_EINVAL);
        ck_assert_ptr_null(t);
    }
    ps_rows_t *t = NULL;
    ps_rows_destroy(&t); /* NULL-safe */
    ps_rows_destroy(NULL);
    const char *good[] = {"sgd", "adagrad", "ftrl"};
    const int floats[] = {1, 1, 2};
    for (int i = 0; i < 3; i++) {
        ps_rows_config_t c = s_config(good[i], 0.9, 1, 0);
        t = s_new(&c);
        ck_assert_uint_eq(ps_rows_dim(t), S_DIM);
        ck_assert_int_eq(ps_rows_state_floats(t), floats[i]);
        ps_rows_destroy(&t);
        ck_assert_ptr_null(t);
    }
}
END_TEST

START_TEST(unknown_keys_read_as_initial_values_or_zeros_and_cost_nothing)
{
    const uint64_t keys[] = {0, 1, 77, UINT64_MAX, 1ull << 40, 77};
    const size_t n = sizeof keys / sizeof keys[0];
    float got[6 * S_DIM], want[S_DIM];
    ps_rows_config_t c = s_config("adagrad", 0, 1, 0);
    ps_rows_t *t = s_new(&c);
    const size_t bytes = ps_rows_bytes(t);
    ps_rows_read(t, keys, n, got);
    for (size_t i = 0; i < n; i++) {
        ps_optim_row_init(c.seed, keys[i], S_DIM, c.init_bound, want);
        ck_assert_int_eq(memcmp(got + i * S_DIM, want, sizeof want), 0);
    }
    ck_assert_uint_eq(ps_rows_count(t), 0);
    ck_assert_uint_eq(ps_rows_bytes(t), bytes);
    ps_rows_destroy(&t);
    /* behind a filter: zeros, still no row */
    c.min_count = 3;
    t = s_new(&c);
    ps_rows_read(t, keys, n, got);
    for (size_t i = 0; i < n * S_DIM; i++) {
        ck_assert(got[i] == 0.0f);
    }
    ck_assert_uint_eq(ps_rows_count(t), 0);
    ck_assert_uint_eq(ps_rows_pending_count(t), 0);
    ck_assert_uint_eq(ps_rows_bytes(t), bytes);
    /* an empty snapshot needs no arrays */
    ps_rows_export(t, NULL, NULL, NULL);
    ps_rows_pending_export(t, NULL, NULL);
    ck_assert_int_eq(ps_rows_update(t, keys, 0, NULL, 0.1f, 1.0f), 0);
    ps_rows_destroy(&t);
}
END_TEST

/* Three updates of a few keys (the extremes included) match ps_optim_step on
 * the test's own copy of each row, bitwise, values and (exported) state. */
static void s_check_arithmetic(const char *optimizer, double momentum)
{
    const uint64_t keys[] = {5, 1ull << 40, 0, UINT64_MAX};
    enum { N = 4 };
    ps_rows_config_t c = s_config(optimizer, momentum, 1, 0);
    ps_rows_t *t = s_new(&c);
    const int ns = ps_rows_state_floats(t);
    s_row_t ref[N];
    for (int i = 0; i < N; i++) {
        s_ref_init(&c, keys[i], &ref[i]);
    }
    float g[N * S_DIM], got[N * S_DIM];
    for (int s = 1; s <= 3; s++) {
        for (int i = 0; i < N; i++) {
            s_grad(keys[i], s, g + i * S_DIM);
        }
        const float lr = 0.1f * (float)s, scale = 0.5f;
        ck_assert_int_eq(ps_rows_update(t, keys, N, g, lr, scale), 0);
        for (int i = 0; i < N; i++) {
            ps_optim_step(&c.optim, lr, 1, ref[i].w, ref[i].state, S_DIM, g + i * S_DIM,
                          scale, S_DIM);
        }
    }
    ps_rows_read(t, keys, N, got);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(!memcmp(got + i * S_DIM, ref[i].w, sizeof ref[i].w),
                      "%s: key %llu differs from ps_optim_step", optimizer,
                      (unsigned long long)keys[i]);
    }
    /* the snapshot: ascending keys 0, 5, 2^40, UINT64_MAX */
    const int order[N] = {2, 0, 1, 3};
    uint64_t ek[N];
    float ev[N * S_DIM], es[S_MAX_STATE * N * S_DIM];
    ck_assert_uint_eq(ps_rows_count(t), N);
    ps_rows_export(t, ek, ev, es);
    for (int j = 0; j < N; j++) {
        const s_row_t *r = &ref[order[j]];
        ck_assert(ek[j] == keys[order[j]]);
        ck_assert(!memcmp(ev + j * S_DIM, r->w, sizeof r->w));
        for (int a = 0; a < ns; a++) {
            ck_assert_msg(!memcmp(es + (a * N + j) * S_DIM, r->state + a * S_DIM,
                                  S_DIM * sizeof(float)),
                          "%s: state array %d of key %llu", optimizer, a,
                          (unsigned long long)ek[j]);
        }
    }
    ps_rows_stats_t st;
    ps_rows_stats(t, &st);
    ck_assert_uint_eq(st.rows, N);
    ck_assert_uint_eq(st.created, N);
    ck_assert_uint_eq(st.updates, 3 * N);
    ck_assert_uint_eq(st.filtered + st.refused + st.nonfinite + st.pending, 0);
    ps_rows_destroy(&t);
}

START_TEST(update_is_ps_optim_step_on_the_row)
{
    s_check_arithmetic("sgd", 0.0);
    s_check_arithmetic("sgd", 0.9);
    s_check_arithmetic("adagrad", 0.0);
    s_check_arithmetic("ftrl", 0.0);
}
END_TEST

/* Table a updates keys 0..K-1 in ascending order, table b the same keys in
 * descending order, interleaved with other keys of their own, in more
 * calls: each key's row and state depend on its own gradients alone. */
static void s_check_independent(const char *optimizer)
{
    enum { K = 300, EXTRA = 500 };
    ps_rows_config_t c = s_config(optimizer, 0, 1, 0);
    ps_rows_t *a = s_new(&c), *b = s_new(&c);
    static uint64_t ka[K], kb[2];
    static float ga[K * S_DIM], gb[2 * S_DIM];
    int rc = 0;
    for (int s = 1; s <= 3; s++) {
        for (int i = 0; i < K; i++) {
            ka[i] = (uint64_t)i * 7919;
            s_grad(ka[i], s, ga + i * S_DIM);
        }
        ck_assert_int_eq(ps_rows_update(a, ka, K, ga, 0.05f, 1.0f), 0);
        for (int i = K - 1; i >= 0; i--) {
            kb[0] = (uint64_t)i * 7919;
            kb[1] = 1000000007ull + (uint64_t)(i % EXTRA) * 3 + (uint64_t)s; /* b's own */
            s_grad(kb[0], s, gb);
            s_grad(kb[1], s + 10, gb + S_DIM);
            rc |= ps_rows_update(b, kb, 2, gb, 0.05f, 1.0f);
        }
    }
    ck_assert_int_eq(rc, 0);
    const size_t na = ps_rows_count(a), nb = ps_rows_count(b);
    const int ns = ps_rows_state_floats(a);
    ck_assert_uint_eq(na, K);
    ck_assert_uint_gt(nb, K);
    uint64_t *keys_a = malloc(na * sizeof *keys_a), *keys_b = malloc(nb * sizeof *keys_b);
    float *va = malloc(na * S_DIM * sizeof *va), *vb = malloc(nb * S_DIM * sizeof *vb);
    float *sa = malloc(2 * na * S_DIM * sizeof *sa);
    float *sb = malloc(2 * nb * S_DIM * sizeof *sb);
    ck_assert(keys_a && keys_b && va && vb && sa && sb);
    ps_rows_export(a, keys_a, va, sa);
    ps_rows_export(b, keys_b, vb, sb);
    /* b's own keys are all above a's: a's rows are b's first ones */
    ck_assert(!memcmp(keys_a, keys_b, na * sizeof *keys_a));
    ck_assert_msg(!memcmp(va, vb, na * S_DIM * sizeof *va), "%s: values", optimizer);
    for (int s = 0; s < ns; s++) {
        ck_assert_msg(!memcmp(sa + s * na * S_DIM, sb + s * nb * S_DIM,
                              na * S_DIM * sizeof *sa),
                      "%s: state array %d", optimizer, s);
    }
    free(keys_a);
    free(keys_b);
    free(va);
    free(vb);
    free(sa);
    free(sb);
    ps_rows_destroy(&a);
    ps_rows_destroy(&b);
}

START_TEST(row_state_is_independent_of_other_rows_and_of_order)
{
    s_check_independent("adagrad");
    s_check_independent("ftrl");
    s_check_independent("sgd");
}
END_TEST

START_TEST(filter_drops_the_first_sightings_and_counts_them)
{
    ps_rows_config_t c = s_config("adagrad", 0, 3, 0);
    ps_rows_t *t = s_new(&c);
    const uint64_t k = 12345, other = 6;
    float g[2 * S_DIM], got[S_DIM];
    ps_rows_stats_t st;
    for (int s = 1; s <= 2; s++) {
        s_grad(k, s, g);
        ck_assert_int_eq(ps_rows_update(t, &k, 1, g, 0.1f, 1.0f), 0);
        ps_rows_stats(t, &st);
        ck_assert_uint_eq(st.filtered, (uint64_t)s);
        ck_assert_uint_eq(st.rows, 0);
        ck_assert_uint_eq(st.pending, 1);
        ps_rows_read(t, &k, 1, got);
        for (int i = 0; i < S_DIM; i++) {
            ck_assert(got[i] == 0.0f);
        }
    }
    /* the third sighting makes the row: initial values, then this gradient */
    const uint64_t both[2] = {k, other};
    s_grad(k, 3, g);
    s_grad(other, 3, g + S_DIM);
    ck_assert_int_eq(ps_rows_update(t, both, 2, g, 0.1f, 1.0f), 0);
    s_row_t ref;
    s_ref_init(&c, k, &ref);
    ps_optim_step(&c.optim, 0.1f, 1, ref.w, ref.state, S_DIM, g, 1.0f, S_DIM);
    ps_rows_read(t, &k, 1, got);
    ck_assert(!memcmp(got, ref.w, sizeof got));
    ps_rows_stats(t, &st);
    ck_assert_uint_eq(st.rows, 1);
    ck_assert_uint_eq(st.created, 1);
    ck_assert_uint_eq(st.filtered, 3); /* and other's first */
    ck_assert_uint_eq(st.pending, 1);  /* other */
    ck_assert_uint_eq(st.updates, 1);
    /* from now on every update of k applies */
    ck_assert_int_eq(ps_rows_update(t, &k, 1, g, 0.1f, 1.0f), 0);
    ps_rows_stats(t, &st);
    ck_assert_uint_eq(st.updates, 2);
    ck_assert_uint_eq(st.filtered, 3);
    ps_rows_destroy(&t);
}
END_TEST

START_TEST(cap_refuses_new_keys_and_existing_rows_still_update)
{
    for (uint32_t min_count = 1; min_count <= 2; min_count++) {
        ps_rows_config_t c = s_config("sgd", 0, min_count, 4);
        ps_rows_t *t = s_new(&c);
        const uint64_t keys[5] = {10, 20, 30, 40, 50};
        float g[5 * S_DIM], before[S_DIM], after[S_DIM], got[S_DIM];
        for (int i = 0; i < 5; i++) {
            s_grad(keys[i], 1, g + i * S_DIM);
        }
        for (uint32_t s = 0; s < min_count; s++) {
            ck_assert_int_eq(ps_rows_update(t, keys, 4, g, 0.1f, 1.0f), 0);
        }
        ck_assert_uint_eq(ps_rows_count(t), 4);
        ps_rows_read(t, &keys[4], 1, before);
        ps_rows_read(t, &keys[0], 1, got);
        /* key 50 (new) between two rows: refused, counted, returned */
        const uint64_t mix[3] = {10, 50, 40};
        float gm[3 * S_DIM];
        memcpy(gm, g, S_DIM * sizeof(float));
        memcpy(gm + S_DIM, g + 4 * S_DIM, S_DIM * sizeof(float));
        memcpy(gm + 2 * S_DIM, g + 3 * S_DIM, S_DIM * sizeof(float));
        ck_assert_int_eq(ps_rows_update(t, mix, 3, gm, 0.1f, 1.0f), 1);
        ps_rows_stats_t st;
        ps_rows_stats(t, &st);
        ck_assert_uint_eq(st.refused, 1);
        ck_assert_uint_eq(st.rows, 4);
        ck_assert_uint_eq(st.pending, 0); /* a refused key's sighting is not kept */
        ck_assert_uint_eq(st.updates, 6);
        ps_rows_read(t, &keys[4], 1, after);
        ck_assert(!memcmp(before, after, sizeof after));
        /* key 10 moved once more */
        float now[S_DIM];
        ps_rows_read(t, &keys[0], 1, now);
        ps_optim_step(&c.optim, 0.1f, 1, got, NULL, 0, g, 1.0f, S_DIM);
        ck_assert(!memcmp(now, got, sizeof now));
        ps_rows_destroy(&t);
    }
}
END_TEST

START_TEST(nonfinite_update_leaves_the_row_as_it_was)
{
    ps_rows_config_t c = s_config("adagrad", 0, 1, 0);
    ps_rows_t *t = s_new(&c);
    const uint64_t keys[3] = {1, 2, 3};
    float g[3 * S_DIM], v0[3 * S_DIM], v1[3 * S_DIM];
    uint64_t ek[3];
    float es0[3 * S_DIM], es1[3 * S_DIM];
    for (int i = 0; i < 3; i++) {
        s_grad(keys[i], 1, g + i * S_DIM);
    }
    ck_assert_int_eq(ps_rows_update(t, keys, 3, g, 0.1f, 1.0f), 0);
    ps_rows_read(t, keys, 3, v0);
    ps_rows_export(t, ek, v1, es0);
    g[3] = NAN;                      /* key 1: a NaN gradient */
    g[S_DIM + 5] = 3e38f;            /* key 2: finite, but its square is not */
    ck_assert_int_eq(ps_rows_update(t, keys, 3, g, 0.1f, 1.0f), 0);
    ps_rows_read(t, keys, 3, v1);
    ck_assert(!memcmp(v0, v1, 2 * S_DIM * sizeof(float)));
    ck_assert(memcmp(v0 + 2 * S_DIM, v1 + 2 * S_DIM, S_DIM * sizeof(float)) != 0);
    ps_rows_export(t, ek, v1, es1);
    ck_assert(!memcmp(es0, es1, 2 * S_DIM * sizeof(float))); /* keys 1 and 2 */
    ps_rows_stats_t st;
    ps_rows_stats(t, &st);
    ck_assert_uint_eq(st.nonfinite, 2);
    ck_assert_uint_eq(st.updates, 4);
    ps_rows_destroy(&t);
}
END_TEST

enum { S_SNAP_KEYS = 3000 };

/* A table's snapshot, owned by the caller (s_snap_free). */
typedef struct {
    size_t n, np;
    uint64_t *keys, *pkeys;
    float *values, *state;
    uint32_t *pcounts;
} s_snap_t;

static s_snap_t s_snap(const ps_rows_t *t)
{
    s_snap_t s;
    const int ns = ps_rows_state_floats(t);
    s.n = ps_rows_count(t);
    s.np = ps_rows_pending_count(t);
    s.keys = malloc((s.n + 1) * sizeof *s.keys);
    s.values = malloc((s.n + 1) * S_DIM * sizeof *s.values);
    s.state = malloc((s.n + 1) * S_DIM * (size_t)(ns + 1) * sizeof *s.state);
    s.pkeys = malloc((s.np + 1) * sizeof *s.pkeys);
    s.pcounts = malloc((s.np + 1) * sizeof *s.pcounts);
    ck_assert(s.keys && s.values && s.state && s.pkeys && s.pcounts);
    ps_rows_export(t, s.keys, s.values, s.state);
    ps_rows_pending_export(t, s.pkeys, s.pcounts);
    return s;
}

static void s_snap_free(s_snap_t *s)
{
    free(s->keys);
    free(s->values);
    free(s->state);
    free(s->pkeys);
    free(s->pcounts);
}

static int s_snap_equal(const s_snap_t *a, const s_snap_t *b, int ns)
{
    return a->n == b->n && a->np == b->np &&
           !memcmp(a->keys, b->keys, a->n * sizeof *a->keys) &&
           !memcmp(a->values, b->values, a->n * S_DIM * sizeof *a->values) &&
           !memcmp(a->state, b->state, a->n * S_DIM * (size_t)ns * sizeof *a->state) &&
           !memcmp(a->pkeys, b->pkeys, a->np * sizeof *a->pkeys) &&
           !memcmp(a->pcounts, b->pcounts, a->np * sizeof *a->pcounts);
}

/* Sightings of key j: 1 + j % 4 updates, so with min_count 3 some keys
 * have rows and others wait with 1 or 2 sightings. (Check writes down
 * every assertion: loops collect and assert once.) */
static void s_feed(ps_rows_t *t, int reverse)
{
    float g[S_DIM];
    int rc = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < S_SNAP_KEYS; i++) {
            const int j = reverse ? S_SNAP_KEYS - 1 - i : i;
            const uint64_t k = (uint64_t)j * 0x9e3779b97f4a7c15ull; /* scattered */
            if (round <= j % 4) {
                s_grad(k, round, g);
                rc |= ps_rows_update(t, &k, 1, g, 0.05f, 1.0f);
            }
        }
    }
    ck_assert_int_eq(rc, 0);
}

START_TEST(snapshot_is_sorted_and_loads_back_bitwise)
{
    ps_rows_config_t c = s_config("ftrl", 0, 3, 0);
    ps_rows_t *a = s_new(&c), *b = s_new(&c), *r = s_new(&c);
    s_feed(a, 0);
    s_feed(b, 1);
    s_snap_t sa = s_snap(a), sb = s_snap(b);
    ck_assert_uint_eq(sa.n, S_SNAP_KEYS / 2); /* j % 4 in {2, 3} */
    ck_assert_uint_eq(sa.np, S_SNAP_KEYS / 2);
    for (size_t i = 1; i < sa.n; i++) {
        ck_assert(sa.keys[i - 1] < sa.keys[i]);
    }
    for (size_t i = 1; i < sa.np; i++) {
        ck_assert(sa.pkeys[i - 1] < sa.pkeys[i]);
    }
    /* whatever the order the rows were made in: the same bytes */
    ck_assert(s_snap_equal(&sa, &sb, 2));
    /* loaded into an empty table: the same snapshot, and it goes on alike */
    ck_assert_int_eq(ps_rows_import(r, sa.n, sa.keys, sa.values, sa.state, sa.np, sa.pkeys,
                                    sa.pcounts),
                     0);
    s_snap_t sr = s_snap(r);
    ck_assert(s_snap_equal(&sa, &sr, 2));
    s_snap_free(&sr);
    s_feed(a, 0);
    s_feed(r, 1);
    s_snap_t sa2 = s_snap(a), sr2 = s_snap(r);
    ck_assert_uint_eq(sa2.n, S_SNAP_KEYS - S_SNAP_KEYS / 4); /* j % 4 == 0 waits: 2 */
    ck_assert(s_snap_equal(&sa2, &sr2, 2));
    s_snap_free(&sa2);
    s_snap_free(&sr2);
    s_snap_free(&sa);
    s_snap_free(&sb);
    ps_rows_destroy(&a);
    ps_rows_destroy(&b);
    ps_rows_destroy(&r);
}
END_TEST

/* A replica's snapshot: the table exported and loaded in parts of 7 rows
 * and 5 pending keys, with its counters, is the same table: the same
 * snapshot, counters, and updates after. A part naming a key the table has
 * (as a row or pending) is refused, changing nothing. */
START_TEST(snapshot_in_parts_loads_back_bitwise_with_the_counters)
{
    ps_rows_config_t c = s_config("adagrad", 0, 3, 0);
    ps_rows_t *a = s_new(&c), *r = s_new(&c);
    s_feed(a, 0);
    const size_t n = ps_rows_count(a), np = ps_rows_pending_count(a), per = 7, pper = 5;
    uint64_t *keys = malloc(n * sizeof *keys), *pkeys = malloc(np * sizeof *pkeys);
    uint32_t *pcounts = malloc(np * sizeof *pcounts);
    float *part = malloc(per * 2 * S_DIM * sizeof *part);
    ps_rows_export_keys(a, keys);
    ps_rows_pending_export(a, pkeys, pcounts);
    int rc = 0;
    for (size_t at = 0; at < n; at += per) {
        const size_t k = n - at < per ? n - at : per;
        ps_rows_export_part(a, keys + at, k, part, part + k * S_DIM);
        rc |= ps_rows_import_part(r, k, keys + at, part, part + k * S_DIM, 0, NULL, NULL);
    }
    for (size_t at = 0; at < np; at += pper) {
        const size_t k = np - at < pper ? np - at : pper;
        rc |= ps_rows_import_part(r, 0, NULL, NULL, NULL, k, pkeys + at, pcounts + at);
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(ps_rows_import_part(r, 1, keys, part, part + S_DIM, 0, NULL, NULL),
                     PS_EINVAL);
    ck_assert_int_eq(ps_rows_import_part(r, 0, NULL, NULL, NULL, 1, pkeys, pcounts), PS_EINVAL);
    ck_assert_int_eq(ps_rows_import_part(r, 0, NULL, NULL, NULL, 1, keys, pcounts), PS_EINVAL);
    ps_rows_stats_t sta, str;
    ps_rows_stats(a, &sta);
    ps_rows_set_stats(r, &sta);
    s_feed(a, 0);
    s_feed(r, 0);
    s_snap_t sa = s_snap(a), sr = s_snap(r);
    ck_assert(s_snap_equal(&sa, &sr, 1));
    ps_rows_stats(a, &sta);
    ps_rows_stats(r, &str);
    ck_assert(!memcmp(&sta, &str, sizeof sta));
    s_snap_free(&sa);
    s_snap_free(&sr);
    free(keys);
    free(pkeys);
    free(pcounts);
    free(part);
    ps_rows_destroy(&a);
    ps_rows_destroy(&r);
}
END_TEST

/* The import of import_refuses_bad_snapshots_and_stays_empty: 3 rows, 2
 * pending keys. */
static int s_import(ps_rows_t *t, const uint64_t *keys, const float *values,
                    const float *state, const uint64_t *pkeys, const uint32_t *pcounts)
{
    return ps_rows_import(t, 3, keys, values, state, 2, pkeys, pcounts);
}

START_TEST(import_refuses_bad_snapshots_and_stays_empty)
{
    ps_rows_config_t c = s_config("adagrad", 0, 3, 0);
    ps_rows_t *t = s_new(&c);
    uint64_t keys[3] = {1, 5, 9}, pkeys[2] = {2, 6};
    uint32_t pcounts[2] = {1, 2};
    float values[3 * S_DIM], state[3 * S_DIM];
    ps_test_fill(values, 3 * S_DIM, -1, 1, 1);
    ps_test_fill(state, 3 * S_DIM, 0, 1, 2);
    /* unsorted, duplicate rows; unsorted, duplicate pending keys */
    keys[1] = 0;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_EINVAL);
    keys[1] = 1;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_EINVAL);
    keys[1] = 5;
    pkeys[1] = 2;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_EINVAL);
    pkeys[1] = 1;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_EINVAL);
    /* a pending key that has a row; a count of 0 or of min_count */
    pkeys[1] = 9;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_EINVAL);
    pkeys[1] = 6;
    pcounts[0] = 0;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_EINVAL);
    pcounts[0] = 3;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_EINVAL);
    pcounts[0] = 1;
    /* a NaN in the values, an infinity in the state */
    values[20] = NAN;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_ENONFINITE);
    values[20] = 0;
    state[3 * S_DIM - 1] = INFINITY;
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), PS_ENONFINITE);
    state[3 * S_DIM - 1] = 1;
    ck_assert_uint_eq(ps_rows_count(t), 0);
    ck_assert_uint_eq(ps_rows_pending_count(t), 0);
    /* good: loads; a second load finds it not empty */
    ck_assert_int_eq(s_import(t, keys, values, state, pkeys, pcounts), 0);
    ck_assert_uint_eq(ps_rows_count(t), 3);
    ck_assert_uint_eq(ps_rows_pending_count(t), 2);
    float got[S_DIM];
    ps_rows_read(t, &keys[2], 1, got);
    ck_assert(!memcmp(got, values + 2 * S_DIM, sizeof got));
    ck_assert_int_eq(ps_rows_import(t, 0, keys, values, state, 0, pkeys, pcounts),
                     PS_ESTATE);
    ps_rows_destroy(&t);
    /* only pending keys also make it not empty */
    t = s_new(&c);
    ck_assert_int_eq(ps_rows_import(t, 0, NULL, NULL, NULL, 2, pkeys, pcounts), 0);
    ck_assert_int_eq(ps_rows_import(t, 3, keys, values, state, 0, NULL, NULL), PS_ESTATE);
    ps_rows_destroy(&t);
    /* without a filter no key may be pending; past the cap no load */
    c.min_count = 1;
    c.max_rows = 2;
    t = s_new(&c);
    ck_assert_int_eq(ps_rows_import(t, 0, NULL, NULL, NULL, 1, pkeys, pcounts), PS_EINVAL);
    ck_assert_int_eq(ps_rows_import(t, 3, keys, values, state, 0, NULL, NULL), PS_EINVAL);
    ck_assert_int_eq(ps_rows_import(t, 2, keys, values, state, 0, NULL, NULL), 0);
    ps_rows_destroy(&t);
}
END_TEST

/* A failover's rollback empties the table and imports the checkpoint's
 * snapshot again: the same rows, sightings and behaviour as the table the
 * snapshot came from, and the counters go on. */
START_TEST(clear_empties_the_table_for_an_import_again)
{
    ps_rows_config_t c = s_config("adagrad", 0, 3, 0);
    ps_rows_t *a = s_new(&c), *r = s_new(&c);
    s_feed(a, 0);
    s_snap_t sa = s_snap(a);
    s_feed(r, 1);
    s_feed(r, 0); /* more rows and sightings than the snapshot */
    ps_rows_stats_t before, after;
    ps_rows_stats(r, &before);
    ck_assert_int_eq(ps_rows_import(r, sa.n, sa.keys, sa.values, sa.state, sa.np, sa.pkeys,
                                    sa.pcounts),
                     PS_ESTATE);
    ps_rows_t *fresh = s_new(&c);
    ps_rows_clear(r);
    ck_assert_uint_eq(ps_rows_count(r), 0);
    ck_assert_uint_eq(ps_rows_pending_count(r), 0);
    ck_assert_uint_eq(ps_rows_bytes(r), ps_rows_bytes(fresh)); /* the memory went too */
    ps_rows_destroy(&fresh);
    ps_rows_stats(r, &after);
    ck_assert_uint_eq(after.rows, 0);
    ck_assert_uint_eq(after.pending, 0);
    ck_assert_uint_eq(after.created, before.created);
    ck_assert_uint_eq(after.filtered, before.filtered);
    ck_assert_uint_eq(after.updates, before.updates);
    /* a key that had a row reads as unknown again (zeros behind the filter) */
    float got[S_DIM], zeros[S_DIM] = {0};
    ps_rows_read(r, &sa.keys[0], 1, got);
    ck_assert(!memcmp(got, zeros, sizeof got));
    ck_assert_int_eq(ps_rows_import(r, sa.n, sa.keys, sa.values, sa.state, sa.np, sa.pkeys,
                                    sa.pcounts),
                     0);
    s_snap_t sr = s_snap(r);
    ck_assert(s_snap_equal(&sa, &sr, 1));
    s_snap_free(&sr);
    s_feed(a, 0);
    s_feed(r, 1);
    s_snap_t sa2 = s_snap(a), sr2 = s_snap(r);
    ck_assert(s_snap_equal(&sa2, &sr2, 1));
    s_snap_free(&sa2);
    s_snap_free(&sr2);
    /* cleared twice, or when empty: still empty and usable */
    ps_rows_clear(r);
    ps_rows_clear(r);
    ck_assert_uint_eq(ps_rows_count(r), 0);
    s_feed(r, 0);
    ck_assert_uint_eq(ps_rows_count(r), sa.n);
    s_snap_free(&sa);
    ps_rows_destroy(&a);
    ps_rows_destroy(&r);
}
END_TEST

enum { S_GROW_KEYS = 200000, S_GROW_BATCH = 1000 };

/* Row k of the growth test: key and gradient. */
static uint64_t s_grow_key(int i)
{
    /* half sequential, half scattered over the whole space */
    return i % 2 ? (uint64_t)i : (uint64_t)i * 0xd1342543de82ef95ull;
}

static void s_grow_grad(int i, float *g)
{
    for (int d = 0; d < S_DIM; d++) {
        g[d] = (float)((i + d) % 13) * 0.125f - 0.75f;
    }
}

/* 200k keys through many rehashes of the index (and, with a filter, of the
 * sightings, every one of which is removed again): every value is the one
 * of its own two updates. */
static void s_check_growth(uint32_t min_count)
{
    ps_rows_config_t c = s_config("sgd", 0, min_count, 0);
    ps_rows_t *t = s_new(&c);
    static uint64_t keys[S_GROW_BATCH];
    static float g[S_GROW_BATCH * S_DIM];
    size_t bytes = ps_rows_bytes(t);
    int rc = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < S_GROW_KEYS; b += S_GROW_BATCH) {
            for (int i = 0; i < S_GROW_BATCH; i++) {
                keys[i] = s_grow_key(b + i);
                s_grow_grad(b + i, g + i * S_DIM);
            }
            rc |= ps_rows_update(t, keys, S_GROW_BATCH, g, 0.5f, 1.0f);
        }
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_ge(ps_rows_bytes(t), bytes);
        bytes = ps_rows_bytes(t);
    }
    ck_assert_uint_eq(ps_rows_count(t), S_GROW_KEYS);
    ck_assert_uint_eq(ps_rows_pending_count(t), 0);
    float got[S_DIM], want[S_DIM], gi[S_DIM];
    int bad = -1;
    for (int i = 0; i < S_GROW_KEYS && bad < 0; i++) {
        const uint64_t k = s_grow_key(i);
        ps_optim_row_init(c.seed, k, S_DIM, c.init_bound, want);
        s_grow_grad(i, gi);
        for (int u = min_count > 1 ? 1 : 0; u < 2; u++) {
            ps_optim_step(&c.optim, 0.5f, 1, want, NULL, 0, gi, 1.0f, S_DIM);
        }
        ps_rows_read(t, &k, 1, got);
        bad = memcmp(got, want, sizeof got) ? i : -1;
    }
    ck_assert_msg(bad < 0, "min_count %u: key %d differs", min_count, bad);
    ps_rows_stats_t st;
    ps_rows_stats(t, &st);
    ck_assert_uint_eq(st.filtered, min_count > 1 ? S_GROW_KEYS : 0);
    ps_rows_destroy(&t);
}

START_TEST(growth_through_rehashes_keeps_every_row)
{
    s_check_growth(1);
    s_check_growth(2);
}
END_TEST

enum { S_MEM_ROWS = 1000000, S_MEM_BATCH = 4096 };

/*
 * A million rows of 16 floats: the bytes held are within 1.5x of the rows'
 * own floats, rows x dim x (1 + state arrays) x 4, plus a fixed base of one slab
 * of rows (the last slab is partly filled: 2^16 rows with their keys) and
 * 64 KiB. Plain SGD (no state) is the hardest case: the index and the keys
 * weigh most against the values.
 */
static void s_check_memory(const char *optimizer)
{
    ps_rows_config_t c = s_config(optimizer, 0, 1, 0);
    ps_rows_t *t = s_new(&c);
    const int ns = ps_rows_state_floats(t);
    static uint64_t keys[S_MEM_BATCH];
    static float g[S_MEM_BATCH * S_DIM]; /* zeros */
    int rc = 0;
    for (int b = 0; b < S_MEM_ROWS; b += S_MEM_BATCH) {
        const int n = S_MEM_ROWS - b < S_MEM_BATCH ? S_MEM_ROWS - b : S_MEM_BATCH;
        for (int i = 0; i < n; i++) {
            keys[i] = (uint64_t)(b + i) * 2654435761u; /* ids as a server sees them */
        }
        rc |= ps_rows_update(t, keys, (size_t)n, g, 0.1f, 1.0f);
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(ps_rows_count(t), S_MEM_ROWS);
    const double row = (double)S_DIM * (1 + ns) * sizeof(float);
    const double data = S_MEM_ROWS * row, base = 65536.0 * (sizeof(uint64_t) + row) + 65536;
    const double bytes = (double)ps_rows_bytes(t);
    printf("rows %s: %d rows x %d floats: %.1f MiB held, %.1f MiB of floats: ratio %.3f "
           "(%.3f less the base)\n",
           optimizer, S_MEM_ROWS, S_DIM * (1 + ns), bytes / 1048576, data / 1048576,
           bytes / data, (bytes - base) / data);
    ck_assert_msg(bytes <= 1.5 * data + base, "%s: %.0f bytes for %.0f of floats",
                  optimizer, bytes, data);
    ps_rows_destroy(&t);
}

START_TEST(a_million_rows_hold_at_most_1_5x_their_floats)
{
    s_check_memory("sgd");
    s_check_memory("adagrad");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rows");
    TCase *tc = tcase_create("rows");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, new_refuses_bad_configs);
    tcase_add_test(tc, unknown_keys_read_as_initial_values_or_zeros_and_cost_nothing);
    tcase_add_test(tc, update_is_ps_optim_step_on_the_row);
    tcase_add_test(tc, row_state_is_independent_of_other_rows_and_of_order);
    tcase_add_test(tc, filter_drops_the_first_sightings_and_counts_them);
    tcase_add_test(tc, cap_refuses_new_keys_and_existing_rows_still_update);
    tcase_add_test(tc, nonfinite_update_leaves_the_row_as_it_was);
    tcase_add_test(tc, snapshot_is_sorted_and_loads_back_bitwise);
    tcase_add_test(tc, snapshot_in_parts_loads_back_bitwise_with_the_counters);
    tcase_add_test(tc, import_refuses_bad_snapshots_and_stays_empty);
    tcase_add_test(tc, clear_empties_the_table_for_an_import_again);
    tcase_add_test(tc, growth_through_rehashes_keeps_every_row);
    tcase_add_test(tc, a_million_rows_hold_at_most_1_5x_their_floats);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
