/*
 * tests/unit/test_embed.c - a batch's embedding lookups (worker/models/embed.c):
 * the distinct keys, rows and CSR against a qsort reference on random keys
 * with many repeats, in the shapes keys take (Criteo's field-tagged values,
 * full 64-bit hashes, one key throughout, keys differing only in their top
 * bits), and the argument errors.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/kernels.h"
#include "tests/unit/testutil.h"
#include "worker/models/embed.h"

enum { S_F = 26 };

static int s_cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Checks b against keys[N]: the distinct keys ascending (as qsort and a
 * scan give them), each position's row holding its key, and the CSR: rows
 * non-empty, offsets from 0 to N, order a permutation grouped by row and
 * ascending within one. */
static void s_check_batch(const ps_embed_batch_t *b, const uint64_t *keys, int n, int F)
{
    const int N = n * F;
    uint64_t *ref = malloc(((size_t)N + 1) * sizeof(uint64_t));
    uint8_t *seen = calloc((size_t)N + 1, 1);
    ck_assert(ref && seen);
    memcpy(ref, keys, (size_t)N * sizeof(uint64_t));
    qsort(ref, (size_t)N, sizeof(uint64_t), s_cmp_u64);
    int U = 0;
    for (int r = 0; r < N; r++) {
        if (r == 0 || ref[r] != ref[r - 1]) {
            ref[U++] = ref[r];
        }
    }
    ck_assert_int_eq(b->U, U);
    ck_assert_int_eq(b->n, n);
    ck_assert_int_eq(b->F, F);
    for (int u = 0; u < U; u++) {
        ck_assert_msg(b->keys[u] == ref[u], "key %d: %llx want %llx", u,
                      (unsigned long long)b->keys[u], (unsigned long long)ref[u]);
    }
    for (int j = 0; j < N; j++) {
        ck_assert_uint_lt(b->idx[j], (unsigned)U);
        ck_assert(b->keys[b->idx[j]] == keys[j]);
    }
    ck_assert_uint_eq(b->offsets[0], 0);
    ck_assert_uint_eq(b->offsets[U], (unsigned)N);
    for (int u = 0; u < U; u++) {
        ck_assert_uint_lt(b->offsets[u], b->offsets[u + 1]);
        for (uint32_t k = b->offsets[u]; k < b->offsets[u + 1]; k++) {
            const uint32_t j = b->order[k];
            ck_assert_uint_lt(j, (unsigned)N);
            ck_assert(!seen[j]);
            seen[j] = 1;
            ck_assert_uint_eq(b->idx[j], (unsigned)u);
            if (k > b->offsets[u]) {
                ck_assert_uint_lt(b->order[k - 1], j);
            }
        }
    }
    free(seen);
    free(ref);
}

/* keys[N] of one of the shapes: 0 Criteo-like (field + 1) << 40 | value with
 * values from a small pool (many repeats) and some missing, 1 full 64-bit
 * values from a pool, 2 one key, 3 keys differing only in bits 56..63. */
static void s_keys(uint64_t *keys, int N, int shape, uint64_t seed)
{
    ps_rng_t r;
    ps_rng_init(&r, seed, (uint64_t)shape);
    uint64_t pool[97];
    for (int i = 0; i < 97; i++) {
        pool[i] = ps_rng_next(&r);
    }
    for (int j = 0; j < N; j++) {
        const uint64_t v = ps_rng_next(&r);
        switch (shape) {
        case 0: {
            const uint64_t f = (uint64_t)(j % S_F) + 1;
            const int missing = v % 17 == 0;
            keys[j] = f << 40 | (missing ? (uint64_t)1 << 32 : (v >> 20) % (1 + j % 300));
            break;
        }
        case 1:
            keys[j] = pool[v % (v & 1 ? 97 : 7)];
            break;
        case 2:
            keys[j] = 0xdeadbeef12345678ULL;
            break;
        default:
            keys[j] = (v % 5) << 56 | 42;
            break;
        }
    }
}

START_TEST(build_matches_qsort_on_keys_with_repeats)
{
    static const int ns[] = {1, 2, 7, 64, 256};
    ps_embed_batch_t b;
    ck_assert_int_eq(ps_embed_batch_init(&b, 256 * S_F, NULL), 0);
    uint64_t *keys = malloc(256 * S_F * sizeof(uint64_t));
    ck_assert_ptr_nonnull(keys);
    for (int shape = 0; shape < 4; shape++) {
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            const int n = ns[t];
            s_keys(keys, n * S_F, shape, 100 + t);
            const int U = ps_embed_batch_build(&b, keys, n, S_F);
            ck_assert_int_eq(U, b.U);
            s_check_batch(&b, keys, n, S_F);
            if (shape == 2) {
                ck_assert_int_eq(U, 1);
            }
        }
    }
    /* all distinct: U = N */
    for (int j = 0; j < 256 * S_F; j++) {
        keys[j] = (uint64_t)(256 * S_F - j) * 0x9E3779B97F4A7C15ULL;
    }
    ck_assert_int_eq(ps_embed_batch_build(&b, keys, 256, S_F), 256 * S_F);
    s_check_batch(&b, keys, 256, S_F);
    free(keys);
    ps_embed_batch_fini(&b);
    ck_assert_ptr_null(b.keys);
    ps_embed_batch_fini(&b); /* safe twice */
}
END_TEST

START_TEST(build_with_backend_buffers_and_any_field_count)
{
    ps_embed_batch_t b;
    ck_assert_int_eq(ps_embed_batch_init(&b, 100, &ps_kernels_cpu), 0);
    ck_assert_uint_eq((uintptr_t)b.idx % 64, 0);
    uint64_t keys[100];
    s_keys(keys, 100, 1, 7);
    ck_assert_int_eq(ps_embed_batch_build(&b, keys, 20, 5), b.U);
    s_check_batch(&b, keys, 20, 5);
    ck_assert_int_eq(ps_embed_batch_build(&b, keys, 100, 1), b.U);
    s_check_batch(&b, keys, 100, 1);
    ps_embed_batch_fini(&b);
}
END_TEST

START_TEST(build_of_nothing_and_bad_sizes)
{
    ps_embed_batch_t b;
    uint64_t keys[8] = {3, 1, 3, 2, 9, 9, 1, 0};
    ck_assert_int_eq(ps_embed_batch_init(&b, 0, NULL), PS_EINVAL);
    ck_assert_int_eq(ps_embed_batch_init(&b, 8, NULL), 0);
    ck_assert_int_eq(ps_embed_batch_build(&b, keys, 0, S_F), 0);
    ck_assert_int_eq(b.U, 0);
    ck_assert_uint_eq(b.offsets[0], 0);
    ck_assert_int_eq(ps_embed_batch_build(&b, keys, 4, 2), 5);
    ck_assert_int_eq(ps_embed_batch_build(&b, keys, 3, 3), PS_EINVAL);
    ck_assert_int_eq(ps_embed_batch_build(&b, keys, -1, 2), PS_EINVAL);
    ck_assert_int_eq(ps_embed_batch_build(&b, keys, 2, -1), PS_EINVAL);
    ck_assert_int_eq(ps_embed_batch_build(&b, NULL, 2, 2), PS_EINVAL);
    ck_assert_int_eq(b.U, 5); /* unchanged by the refusals */
    s_check_batch(&b, keys, 4, 2);
    ck_assert(b.keys[0] == 0 && b.keys[4] == 9);
    ps_embed_batch_fini(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("embed");
    TCase *tc = tcase_create("dedup");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, build_matches_qsort_on_keys_with_repeats);
    tcase_add_test(tc, build_with_backend_buffers_and_any_field_count);
    tcase_add_test(tc, build_of_nothing_and_bad_sizes);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
