/*
 * tests/unit/test_store.c - a server's shard: initialisation completes only
 * when every key was set, once (overlaps and repeats refused, out-of-shard
 * ranges too), from any alignment; an optimizer step on a range of the
 * shard is bitwise ps_optim_step on the same data, state included, also
 * when replies hold a chunk's values (copy on write into a spare), and a
 * block of keys whose update would overflow is left as it was.
 */
#include <check.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "server/store.h"
#include "tests/unit/testutil.h"

enum { S_BASE = 1000, S_N = 40 };

static ps_job_t s_job(const char *optimizer)
{
    ps_job_t j;
    ps_job_defaults(&j);
    snprintf(j.optimizer, sizeof j.optimizer, "%s", optimizer);
    return j;
}

static ps_range_t s_keys(uint64_t a, uint64_t b)
{
    return (ps_range_t){S_BASE + a, S_BASE + b};
}

static ps_store_t *s_new(const char *optimizer)
{
    ps_job_t j = s_job(optimizer);
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, s_keys(0, S_N), &j), 0);
    ck_assert_ptr_nonnull(s);
    return s;
}

START_TEST(new_refuses_an_unknown_optimizer)
{
    ps_job_t j = s_job("rmsprop");
    ps_store_t *s = (ps_store_t *)&j;
    ck_assert_int_eq(ps_store_new(&s, s_keys(0, S_N), &j), PS_EINVAL);
    ck_assert_ptr_null(s);
    ps_store_destroy(&s); /* NULL-safe */
}
END_TEST

START_TEST(init_completes_only_when_every_key_is_set)
{
    ps_store_t *s = s_new("sgd");
    ck_assert_uint_eq(ps_store_shard(s).begin, S_BASE);
    ck_assert_uint_eq(ps_store_shard(s).end, S_BASE + S_N);
    float v[S_N];
    ps_test_fill(v, S_N, -1, 1, 1);
    ck_assert_int_eq(ps_store_init(s, s_keys(10, 20), v + 10), 0);
    ck_assert_int_eq(ps_store_init(s, s_keys(0, 10), v), 0);
    ck_assert(!ps_store_initialized(s));
    ck_assert_int_eq(ps_store_init(s, s_keys(20, S_N), v + 20), 1);
    ck_assert(ps_store_initialized(s));
    ck_assert_int_eq(memcmp(ps_store_values(s, S_BASE), v, sizeof v), 0);
    ck_assert(ps_store_values(s, S_BASE + 7)[0] == v[7]);
    ck_assert_int_eq(ps_store_init(s, s_keys(0, S_N), v), PS_ESTATE);
    ck_assert_int_eq(ps_store_init(s, s_keys(3, 4), v), PS_ESTATE);
    ps_store_destroy(&s);
    ck_assert_ptr_null(s);
}
END_TEST

START_TEST(init_refuses_overlaps_and_changes_nothing)
{
    ps_store_t *s = s_new("sgd");
    float v[S_N], w[S_N];
    ps_test_fill(v, S_N, -1, 1, 2);
    ps_test_fill(w, S_N, 5, 6, 3);
    ck_assert_int_eq(ps_store_init(s, s_keys(0, 10), v), 0);
    /* overlaps the end of [0, 10): refused, keys 10..14 still unset */
    ck_assert_int_eq(ps_store_init(s, s_keys(9, 15), w), PS_ESTATE);
    ck_assert(ps_store_values(s, S_BASE + 9)[0] == v[9]);
    ck_assert(ps_store_values(s, S_BASE + 10)[0] == 0.0f);
    ck_assert_int_eq(ps_store_init(s, s_keys(5, 6), w), PS_ESTATE);
    ck_assert_int_eq(ps_store_init(s, s_keys(10, S_N), v + 10), 1);
    ck_assert_int_eq(memcmp(ps_store_values(s, S_BASE), v, sizeof v), 0);
    ps_store_destroy(&s);
}
END_TEST

START_TEST(init_refuses_ranges_outside_the_shard)
{
    ps_store_t *s = s_new("sgd");
    float v[S_N + 2] = {0};
    ps_range_t below = {S_BASE - 1, S_BASE + 3}, above = {S_BASE + S_N - 1, S_BASE + S_N + 1};
    ck_assert_int_eq(ps_store_init(s, below, v), PS_ERANGE);
    ck_assert_int_eq(ps_store_init(s, above, v), PS_ERANGE);
    ck_assert_int_eq(ps_store_init(s, s_keys(4, 4), v), PS_ERANGE);
    ck_assert_int_eq(ps_store_init(s, s_keys(5, 4), v), PS_ERANGE);
    ck_assert_int_eq(ps_store_init(s, s_keys(0, S_N), v), 1);
    ps_store_destroy(&s);
}
END_TEST

START_TEST(init_reads_unaligned_values)
{
    ps_store_t *s = s_new("sgd");
    float v[S_N];
    unsigned char raw[sizeof v + 1];
    ps_test_fill(v, S_N, -1, 1, 4);
    memcpy(raw + 1, v, sizeof v);
    ck_assert_int_eq(ps_store_init(s, s_keys(0, S_N), raw + 1), 1);
    ck_assert_int_eq(memcmp(ps_store_values(s, S_BASE), v, sizeof v), 0);
    ps_store_destroy(&s);
}
END_TEST

START_TEST(an_empty_shard_is_initialised_at_once)
{
    ps_job_t j = s_job("adam");
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, (ps_range_t){7, 7}, &j), 0);
    ck_assert(ps_store_initialized(s));
    float v = 1;
    ck_assert_int_eq(ps_store_init(s, (ps_range_t){7, 8}, &v), PS_ERANGE);
    ps_store_destroy(&s);
}
END_TEST

/* Steps keys [a, b) of a fresh store three times and the same data with
 * ps_optim_step: both must give the same bits. */
static void s_check_steps(const char *optimizer, uint64_t a, uint64_t b)
{
    ps_job_t j = s_job(optimizer);
    j.weight_decay = 0.01;
    ps_optim_t o;
    ck_assert_int_eq(ps_optim_from_job(&j, &o), 0);
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, s_keys(0, S_N), &j), 0);
    float w[S_N], state[2 * S_N] = {0}, g[S_N];
    ps_test_fill(w, S_N, -1, 1, 5);
    ck_assert_int_eq(ps_store_init(s, s_keys(0, S_N), w), 1);
    for (int64_t t = 1; t <= 3; t++) {
        ps_test_fill(g, S_N, -2, 2, 10 + (uint64_t)t);
        const float lr = 0.1f * (float)t, scale = 0.25f;
        ps_store_step(s, s_keys(a, b), g + a, lr, scale, t);
        /* the state's second array is S_N floats after the first */
        ps_optim_step(&o, lr, t, w + a, state + a, S_N, g + a, scale, b - a);
    }
    ck_assert_msg(memcmp(ps_store_values(s, S_BASE), w, sizeof w) == 0,
                  "%s on keys [%llu, %llu) differs from ps_optim_step", optimizer,
                  (unsigned long long)a, (unsigned long long)b);
    ps_store_destroy(&s);
}

START_TEST(step_on_a_range_is_ps_optim_step)
{
    const char *opts[] = {"sgd", "nesterov", "adam", "adagrad"};
    for (int i = 0; i < 4; i++) {
        s_check_steps(opts[i], 0, S_N);
        s_check_steps(opts[i], 7, 23);
        s_check_steps(opts[i], S_N - 1, S_N);
    }
}
END_TEST

/* A shard of two chunks and a bit, Adam (two state arrays), with w and its
 * reference state to replay every step on with ps_optim_step. */
enum { S_BIG = PS_STORE_CHUNK_KEYS * 2 + 100 };

/* A reply holds chunk 0 while keys [a, b) are updated: what it holds stays
 * as it was, the store's values (read back by ps_store_read) are bitwise
 * ps_optim_step's, chunks nobody holds are updated in place, and once the
 * hold is let go the next update of the chunk needs no spare. */
static void s_check_held(uint64_t a, uint64_t b)
{
    ps_job_t j = s_job("adam");
    ps_optim_t o;
    ck_assert_int_eq(ps_optim_from_job(&j, &o), 0);
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, s_keys(0, S_BIG), &j), 0);
    ck_assert_int_eq(ps_store_reserve(s, 1, 1), 0);
    float *w = malloc(S_BIG * sizeof *w), *g = malloc(S_BIG * sizeof *g);
    float *state = calloc(2 * S_BIG, sizeof *state), *got = malloc(S_BIG * sizeof *got);
    float *seen = malloc(PS_STORE_CHUNK_KEYS * sizeof *seen);
    ck_assert(w && g && state && got && seen);
    ps_test_fill(w, S_BIG, -1, 1, 3);
    ck_assert_int_eq(ps_store_init(s, s_keys(0, S_BIG), w), 1);
    ck_assert_ptr_nonnull(ps_store_flat(s));
    const ps_range_t chunk0 = s_keys(10, PS_STORE_CHUNK_KEYS);
    const float *held = ps_store_hold(s, chunk0);
    memcpy(seen, held, ps_range_len(chunk0) * sizeof *seen);
    const float *chunk1 = ps_store_values(s, S_BASE + PS_STORE_CHUNK_KEYS);
    for (int64_t t = 1; t <= 2; t++) {
        ps_test_fill(g, S_BIG, -2, 2, 20 + (uint64_t)t);
        ps_store_step(s, s_keys(a, b), g + a, 0.01f, 0.5f, t);
        ps_optim_step(&o, 0.01f, t, w + a, state + a, S_BIG, g + a, 0.5f, b - a);
        ck_assert_mem_eq(held, seen, ps_range_len(chunk0) * sizeof *seen);
        ck_assert_ptr_ne(ps_store_values(s, S_BASE + 10), held); /* a spare */
        ck_assert_ptr_eq(ps_store_values(s, S_BASE + PS_STORE_CHUNK_KEYS), chunk1);
        ps_store_read(s, s_keys(0, S_BIG), got);
        ck_assert_mem_eq(got, w, S_BIG * sizeof *w);
    }
    ck_assert_ptr_null(ps_store_flat(s)); /* chunk 0 lives in a spare */
    ps_store_release((void *)held, s);
    const float *now = ps_store_values(s, S_BASE);
    ps_store_step(s, s_keys(a, b), g + a, 0.01f, 0.5f, 3);
    ps_optim_step(&o, 0.01f, 3, w + a, state + a, S_BIG, g + a, 0.5f, b - a);
    ck_assert_ptr_eq(ps_store_values(s, S_BASE), now); /* in place */
    ps_store_read(s, s_keys(0, S_BIG), got);
    ck_assert_mem_eq(got, w, S_BIG * sizeof *w);
    ps_store_destroy(&s);
    free(w);
    free(g);
    free(state);
    free(got);
    free(seen);
}

/* An update of several blocks (4096 keys each) gives the bits of one
 * ps_optim_step over them, state included; in one whose last key would
 * overflow, the last block keeps its values and state and the others
 * apply, whether in place or into a spare while a reply holds the values. */
START_TEST(an_update_over_blocks_is_one_step_but_an_overflowing_block)
{
    enum { B = 4096, N = 3 * B + 100 };
    ps_job_t j = s_job("sgd");
    j.momentum = 0.9;
    ps_optim_t o;
    ck_assert_int_eq(ps_optim_from_job(&j, &o), 0);
    ps_store_t *s = NULL;
    ck_assert_int_eq(ps_store_new(&s, (ps_range_t){0, N}, &j), 0);
    ck_assert_int_eq(ps_store_reserve(s, 1, 1), 0);
    float *w = malloc(N * sizeof *w), *g = malloc(N * sizeof *g);
    float *state = calloc(N, sizeof *state);
    ps_test_fill(w, N, -1, 1, 5);
    ck_assert_int_eq(ps_store_init(s, (ps_range_t){0, N}, w), 1);
    for (int t = 1; t <= 3; t++) { /* in place, overflowing in place, into a spare */
        ps_test_fill(g, N, -2, 2, 5 + (uint64_t)t);
        const float lr = t == 1 ? 0.1f : 10.0f;
        if (t > 1) {
            g[N - 1] = 3e38f; /* finite, but 10 x it is not */
        }
        const float *held = t == 3 ? ps_store_hold(s, (ps_range_t){0, N}) : NULL;
        ck_assert_int_eq(ps_store_step(s, (ps_range_t){0, N}, g, lr, 0.5f, t), t > 1);
        ps_optim_step(&o, lr, t, w, state, N, g, 0.5f, t > 1 ? 3 * B : N);
        ck_assert(memcmp(ps_store_values(s, 0), w, N * sizeof *w) == 0);
        ck_assert(memcmp(ps_store_state(s, 0), state, N * sizeof *state) == 0);
        if (held) {
            ck_assert_ptr_ne(ps_store_values(s, 0), held); /* it went to a spare */
            ps_store_release((void *)held, s);
        }
    }
    free(w);
    free(g);
    free(state);
    ps_store_destroy(&s);
}
END_TEST

START_TEST(an_update_of_held_values_leaves_them_and_writes_a_spare)
{
    s_check_held(0, S_BIG);                     /* every chunk */
    s_check_held(5, PS_STORE_CHUNK_KEYS + 50);  /* part of chunk 0: the rest copied */
}
END_TEST

/* An update of a held chunk writes a spare: a warm one (touched by
 * ps_store_reserve) costs no page faults then, a cold one its pages. */
START_TEST(warm_spares_take_an_update_without_page_faults)
{
    ps_job_t j = s_job("sgd");
    mallopt(M_PERTURB, 0); /* meson test sets MALLOC_PERTURB_: malloc would touch them */
    float *g = calloc(PS_STORE_CHUNK_KEYS, sizeof *g);
    ck_assert_ptr_nonnull(g);
    long faults_of[2];
    for (int warm = 0; warm < 2; warm++) { /* cold first: its memory is fresh */
        ps_store_t *s = NULL;
        ck_assert_int_eq(ps_store_new(&s, s_keys(0, PS_STORE_CHUNK_KEYS), &j), 0);
        ck_assert_int_eq(ps_store_reserve(s, 2, warm), 0);
        ck_assert_int_eq(ps_store_init(s, s_keys(0, PS_STORE_CHUNK_KEYS), g), 1);
        ps_store_step(s, s_keys(0, 1), g, 0.1f, 1.0f, 1); /* in place: warms the stack */
        const float *held = ps_store_hold(s, s_keys(0, PS_STORE_CHUNK_KEYS));
        const long before = ps_test_minflt();
        ps_store_step(s, s_keys(0, PS_STORE_CHUNK_KEYS), g, 0.1f, 1.0f, 2);
        const long faults = ps_test_minflt() - before;
        ck_assert_ptr_ne(ps_store_values(s, S_BASE), held); /* it went to a spare */
        faults_of[warm] = faults;
        ps_store_release((void *)held, s);
        ps_store_destroy(&s);
    }
    /* cold: 256 here (fewer where the kernel maps larger folios at once) */
    ck_assert_msg(faults_of[1] <= 2 && faults_of[0] > faults_of[1],
                  "page faults of an update into a cold spare %ld, a warm one %ld",
                  faults_of[0], faults_of[1]);
    free(g);
}
END_TEST

int main(void)
{
    ps_log_set_level("err");
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_add_test(tc, new_refuses_an_unknown_optimizer);
    tcase_add_test(tc, init_completes_only_when_every_key_is_set);
    tcase_add_test(tc, init_refuses_overlaps_and_changes_nothing);
    tcase_add_test(tc, init_refuses_ranges_outside_the_shard);
    tcase_add_test(tc, init_reads_unaligned_values);
    tcase_add_test(tc, an_empty_shard_is_initialised_at_once);
    tcase_add_test(tc, step_on_a_range_is_ps_optim_step);
    tcase_add_test(tc, an_update_over_blocks_is_one_step_but_an_overflowing_block);
    tcase_add_test(tc, an_update_of_held_values_leaves_them_and_writes_a_spare);
    tcase_add_test(tc, warm_spares_take_an_update_without_page_faults);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
