/*
 * tests/unit/test_range.c - key-range arithmetic and the shard map: the split
 * tiles [0, P) in order and is balanced, lookups are exact on every boundary,
 * intersections (empty ones included), and the MLP layout where a tensor
 * straddles two servers.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/error.h"
#include "proto/range.h"
#include "tests/unit/testutil.h"

/* The bundled MLP 784-256-128-10: tensor sizes in layout order. */
static const uint64_t s_mlp_sizes[] = {784 * 256, 256, 256 * 128, 128, 128 * 10, 10};
enum { S_MLP_TENSORS = 6, S_MLP_P = 235146 };

/* Splits [0, p) into s ranges and checks tiling, order and balance. */
static void s_check_split(uint64_t p, int s)
{
    ps_range_t *r = calloc((size_t)s, sizeof *r);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(ps_range_split(p, s, r), 0);
    uint64_t ceil = (p + (uint64_t)s - 1) / (uint64_t)s, lo = UINT64_MAX, hi = 0, next = 0;
    for (int i = 0; i < s; i++) {
        ck_assert_msg(r[i].begin == next, "p=%llu s=%d: range %d begins at %llu, want %llu",
                      (unsigned long long)p, s, i, (unsigned long long)r[i].begin,
                      (unsigned long long)next);
        ck_assert_uint_le(r[i].begin, r[i].end);
        uint64_t n = ps_range_len(r[i]);
        ck_assert_msg(n <= ceil, "p=%llu s=%d: range %d holds %llu > ceil(p/s)=%llu",
                      (unsigned long long)p, s, i, (unsigned long long)n,
                      (unsigned long long)ceil);
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
        next = r[i].end;
    }
    ck_assert_uint_eq(next, p);
    ck_assert_uint_le(hi - lo, 1);
    free(r);
}

START_TEST(split_tiles_and_balances)
{
    const uint64_t ps[] = {0, 1, 2, 3, 6, 7, 10, 100, 1001, S_MLP_P};
    const int ss[] = {1, 3, 7};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        for (size_t j = 0; j < sizeof ss / sizeof ss[0]; j++) {
            s_check_split(ps[i], ss[j]);
        }
    }
}
END_TEST

START_TEST(split_gives_the_extra_keys_to_the_first_ranges)
{
    ps_range_t r[3];
    ck_assert_int_eq(ps_range_split(10, 3, r), 0);
    ck_assert_uint_eq(ps_range_len(r[0]), 4);
    ck_assert_uint_eq(ps_range_len(r[1]), 3);
    ck_assert_uint_eq(ps_range_len(r[2]), 3);
}
END_TEST

START_TEST(split_with_fewer_keys_than_servers_leaves_empty_tails)
{
    ps_range_t r[7];
    ck_assert_int_eq(ps_range_split(3, 7, r), 0);
    for (int i = 0; i < 7; i++) {
        ck_assert_uint_eq(ps_range_len(r[i]), i < 3 ? 1 : 0);
    }
    ck_assert_uint_eq(r[6].begin, 3);
    ck_assert_uint_eq(r[6].end, 3);
    ck_assert_int_eq(ps_range_split(0, 3, r), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(r[i].begin, 0);
        ck_assert_uint_eq(r[i].end, 0);
    }
}
END_TEST

START_TEST(split_rejects_no_servers)
{
    ps_range_t r[1] = {{5, 9}};
    ck_assert_int_eq(ps_range_split(10, 0, r), PS_EINVAL);
    ck_assert_int_eq(ps_range_split(10, -2, r), PS_EINVAL);
    ck_assert_uint_eq(r[0].begin, 5); /* untouched */
}
END_TEST

START_TEST(find_is_exact_on_every_boundary)
{
    const int ss[] = {1, 3, 7};
    for (size_t j = 0; j < sizeof ss / sizeof ss[0]; j++) {
        int s = ss[j];
        ps_range_t r[7];
        ck_assert_int_eq(ps_range_split(S_MLP_P, s, r), 0);
        for (int i = 0; i < s; i++) {
            ck_assert_int_eq(ps_range_find(r, s, r[i].begin), i);
            ck_assert_int_eq(ps_range_find(r, s, r[i].end - 1), i);
            ck_assert_int_eq(ps_range_find(r, s, r[i].begin + ps_range_len(r[i]) / 2), i);
            if (i > 0) {
                ck_assert_int_eq(ps_range_find(r, s, r[i].begin - 1), i - 1);
            }
        }
        ck_assert_int_eq(ps_range_find(r, s, S_MLP_P), -1);
        ck_assert_int_eq(ps_range_find(r, s, UINT64_MAX), -1);
    }
}
END_TEST

START_TEST(find_skips_empty_ranges_and_handles_no_shards)
{
    ps_range_t r[7];
    ck_assert_int_eq(ps_range_split(3, 7, r), 0);
    ck_assert_int_eq(ps_range_find(r, 7, 0), 0);
    ck_assert_int_eq(ps_range_find(r, 7, 2), 2);
    ck_assert_int_eq(ps_range_find(r, 7, 3), -1);
    ck_assert_int_eq(ps_range_find(r, 0, 0), -1);
}
END_TEST

START_TEST(intersect_cases)
{
    ps_range_t out;
    const ps_range_t a = {10, 20};
    /* inside */
    ck_assert_uint_eq(ps_range_intersect(a, (ps_range_t){12, 15}, &out), 3);
    ck_assert_uint_eq(out.begin, 12);
    ck_assert_uint_eq(out.end, 15);
    /* overlapping the left and the right edge, in both argument orders */
    ck_assert_uint_eq(ps_range_intersect(a, (ps_range_t){5, 12}, &out), 2);
    ck_assert_uint_eq(out.begin, 10);
    ck_assert_uint_eq(out.end, 12);
    ck_assert_uint_eq(ps_range_intersect((ps_range_t){18, 30}, a, &out), 2);
    ck_assert_uint_eq(out.begin, 18);
    ck_assert_uint_eq(out.end, 20);
    /* covering */
    ck_assert_uint_eq(ps_range_intersect(a, (ps_range_t){0, 100}, &out), 10);
    ck_assert_uint_eq(out.begin, 10);
    ck_assert_uint_eq(out.end, 20);
    /* touching (half-open: no common key) and disjoint */
    ck_assert_uint_eq(ps_range_intersect(a, (ps_range_t){20, 25}, &out), 0);
    ck_assert_uint_eq(out.begin, out.end);
    ck_assert_uint_eq(ps_range_intersect(a, (ps_range_t){0, 10}, &out), 0);
    ck_assert_uint_eq(out.begin, out.end);
    ck_assert_uint_eq(ps_range_intersect(a, (ps_range_t){40, 50}, &out), 0);
    ck_assert_uint_eq(out.begin, out.end);
    /* an empty range intersects nothing, even inside */
    ck_assert_uint_eq(ps_range_intersect(a, (ps_range_t){15, 15}, &out), 0);
    ck_assert_uint_eq(out.begin, out.end);
}
END_TEST

START_TEST(contains_cases)
{
    const ps_range_t a = {10, 20};
    ck_assert(ps_range_contains(a, a));
    ck_assert(ps_range_contains(a, (ps_range_t){10, 11}));
    ck_assert(ps_range_contains(a, (ps_range_t){19, 20}));
    ck_assert(!ps_range_contains(a, (ps_range_t){9, 11}));
    ck_assert(!ps_range_contains(a, (ps_range_t){19, 21}));
    ck_assert(!ps_range_contains(a, (ps_range_t){15, 12})); /* reversed */
}
END_TEST

START_TEST(mlp_tensor_straddles_servers)
{
    uint64_t p = 0;
    for (int i = 0; i < S_MLP_TENSORS; i++) {
        p += s_mlp_sizes[i];
    }
    ck_assert_uint_eq(p, S_MLP_P);
    ps_range_t r[3];
    ck_assert_int_eq(ps_range_split(p, 3, r), 0);
    /* 235146 = 3 * 78382: three equal shards */
    ck_assert_uint_eq(r[0].end, 78382);
    ck_assert_uint_eq(r[1].end, 156764);
    ck_assert_uint_eq(r[2].end, p);
    /* fc1.weight is [0, 200704): it spans S0 and S1 and ends inside S2 */
    const ps_range_t fc1w = {0, s_mlp_sizes[0]};
    ps_range_t part;
    ck_assert_uint_eq(ps_range_intersect(fc1w, r[0], &part), 78382);
    ck_assert_uint_eq(ps_range_intersect(fc1w, r[1], &part), 78382);
    ck_assert_uint_eq(ps_range_intersect(fc1w, r[2], &part), 200704 - 156764);
    ck_assert_uint_eq(part.begin, 156764);
    ck_assert_uint_eq(part.end, 200704);
    ck_assert_int_eq(ps_range_find(r, 3, fc1w.begin), 0);
    ck_assert_int_eq(ps_range_find(r, 3, fc1w.end - 1), 2);
    /* the parts a client sends for fc1.weight add up to the tensor, in order */
    uint64_t next = fc1w.begin, total = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t n = ps_range_intersect(fc1w, r[i], &part);
        if (n) {
            ck_assert_uint_eq(part.begin, next);
            next = part.end;
            total += n;
        }
    }
    ck_assert_uint_eq(total, ps_range_len(fc1w));
    /* fc1.bias [200704, 200960) lies inside S2 alone */
    const ps_range_t fc1b = {200704, 200960};
    ck_assert(ps_range_contains(r[2], fc1b));
    ck_assert_uint_eq(ps_range_intersect(fc1b, r[1], &part), 0);
    /* with two servers fc1.weight spans S0 and S1 */
    ps_range_t r2[2];
    ck_assert_int_eq(ps_range_split(p, 2, r2), 0);
    ck_assert_uint_eq(r2[0].end, 117573);
    ck_assert_uint_eq(ps_range_intersect(fc1w, r2[0], &part), 117573);
    ck_assert_uint_eq(ps_range_intersect(fc1w, r2[1], &part), 200704 - 117573);
}
END_TEST

START_TEST(row_split_tiles_the_hashed_space)
{
    ps_rowrange_t r[7];
    for (int s = 1; s <= 7; s++) {
        ck_assert_int_eq(ps_range_split_rows(s, r), 0);
        ck_assert(ps_range_rows_tile(r, s));
        for (int i = 0; i < s; i++) {
            /* widths equal within one */
            const uint64_t w = r[i].last - r[i].first, w0 = r[0].last - r[0].first;
            ck_assert(w == w0 || w + 1 == w0 || w == w0 + 1);
            ck_assert_int_eq(ps_range_find_row(r, s, 0), ps_range_find_row(r, s, 0));
        }
    }
    ck_assert_int_eq(ps_range_split_rows(0, r), PS_EINVAL);
    ck_assert_int_eq(ps_range_split_rows(2, r), 0);
    ck_assert_uint_eq(r[0].last, (UINT64_MAX >> 1));
    ck_assert_uint_eq(r[1].first, (UINT64_MAX >> 1) + 1);
    r[1].first++; /* a gap */
    ck_assert(!ps_range_rows_tile(r, 2));
}
END_TEST

START_TEST(row_pieces_tile_a_range_and_find_their_hashes)
{
    /* a whole space (one server), a middle range and a narrow one */
    const ps_rowrange_t ranges[] = {{0, UINT64_MAX}, {1000, (UINT64_MAX >> 1) + 77},
                                    {5, 5 + PS_RANGE_ROW_PIECES + 2}};
    for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
        const ps_rowrange_t r = ranges[i];
        ps_rowrange_t p[PS_RANGE_ROW_PIECES];
        for (int q = 0; q < PS_RANGE_ROW_PIECES; q++) {
            p[q] = ps_range_row_piece(r, q);
            ck_assert(p[q].first <= p[q].last);
            ck_assert(q == 0 ? p[q].first == r.first : p[q].first == p[q - 1].last + 1);
            /* each end, and one past it, in the right piece */
            ck_assert_int_eq(ps_range_row_piece_of(r, p[q].first), q);
            ck_assert_int_eq(ps_range_row_piece_of(r, p[q].last), q);
            if (q > 0) {
                ck_assert_int_eq(ps_range_row_piece_of(r, p[q].first - 1), q - 1);
            }
        }
        ck_assert_uint_eq(p[PS_RANGE_ROW_PIECES - 1].last, r.last);
    }
}
END_TEST

START_TEST(row_hash_spreads_neighbouring_keys)
{
    /* 2^16 consecutive keys over 4 servers: each holds about a quarter, and
     * every key is found in the range that holds its hash */
    ps_rowrange_t r[4];
    ck_assert_int_eq(ps_range_split_rows(4, r), 0);
    int count[4] = {0};
    for (uint64_t k = 0; k < 65536; k++) {
        const int i = ps_range_find_row(r, 4, k);
        ck_assert(i >= 0 && i < 4);
        const uint64_t h = ps_rowkey_hash(k);
        ck_assert(h >= r[i].first && h <= r[i].last);
        count[i]++;
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_gt(count[i], 15500);
        ck_assert_int_lt(count[i], 17300);
    }
    /* a bijection, with its inverse */
    for (uint64_t k = 1; k < (1ull << 60); k = k * 3 + 1) {
        ck_assert_uint_eq(ps_rowkey_unhash(ps_rowkey_hash(k)), k);
    }
    ck_assert(ps_rowkey_hash(1) != ps_rowkey_hash(2));
    ck_assert_uint_eq(ps_rowkey_hash(0), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("range");
    TCase *tc = tcase_create("range");
    tcase_add_test(tc, split_tiles_and_balances);
    tcase_add_test(tc, split_gives_the_extra_keys_to_the_first_ranges);
    tcase_add_test(tc, split_with_fewer_keys_than_servers_leaves_empty_tails);
    tcase_add_test(tc, split_rejects_no_servers);
    tcase_add_test(tc, find_is_exact_on_every_boundary);
    tcase_add_test(tc, find_skips_empty_ranges_and_handles_no_shards);
    tcase_add_test(tc, intersect_cases);
    tcase_add_test(tc, contains_cases);
    tcase_add_test(tc, mlp_tensor_straddles_servers);
    tcase_add_test(tc, row_split_tiles_the_hashed_space);
    tcase_add_test(tc, row_hash_spreads_neighbouring_keys);
    tcase_add_test(tc, row_pieces_tile_a_range_and_find_their_hashes);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
