/*
 * tests/unit/test_wire.c - payload dtypes (proto/wire.c): fp16 and bf16
 * rounding to nearest even on ties, subnormals, overflow and specials;
 * every 16-bit value round-trips; millions of fp32 values against
 * references (the compiler's _Float16, a float64 bf16 rounding); top-k picks
 * the largest magnitudes with error feedback; the sparse decode refuses
 * every malformed payload with PS_ERANGE and leaves its output untouched.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "proto/wire.h"
#include "tests/unit/testutil.h"

static float s_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t s_u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

START_TEST(bf16_rounds_to_nearest_even)
{
    ck_assert_uint_eq(ps_wire_f32_to_bf16(1.0f), 0x3f80);
    /* exactly half an ulp above 1: the tie goes to the even 1.0 */
    ck_assert_uint_eq(ps_wire_f32_to_bf16(s_f(0x3f808000u)), 0x3f80);
    /* half an ulp above 1 + ulp (odd): the tie goes up to even */
    ck_assert_uint_eq(ps_wire_f32_to_bf16(s_f(0x3f818000u)), 0x3f82);
    /* just above half: up; just below: down */
    ck_assert_uint_eq(ps_wire_f32_to_bf16(s_f(0x3f808001u)), 0x3f81);
    ck_assert_uint_eq(ps_wire_f32_to_bf16(s_f(0x3f807fffu)), 0x3f80);
    ck_assert_uint_eq(ps_wire_f32_to_bf16(-0.0f), 0x8000);
    /* the largest float rounds past bf16's largest: infinity */
    ck_assert_uint_eq(ps_wire_f32_to_bf16(s_f(0x7f7fffffu)), 0x7f80);
}
END_TEST

START_TEST(bf16_keeps_specials)
{
    ck_assert_uint_eq(ps_wire_f32_to_bf16(INFINITY), 0x7f80);
    ck_assert_uint_eq(ps_wire_f32_to_bf16(-INFINITY), 0xff80);
    /* a NaN whose payload sits in the low bits only must not become infinity */
    ck_assert(isnan(ps_wire_bf16_to_f32(ps_wire_f32_to_bf16(s_f(0x7f800001u)))));
    ck_assert(isnan(ps_wire_bf16_to_f32(ps_wire_f32_to_bf16(s_f(0xffffffffu)))));
    ck_assert(isnan(ps_wire_bf16_to_f32(ps_wire_f32_to_bf16(NAN))));
    ck_assert(isinf(ps_wire_bf16_to_f32(0x7f80)));
}
END_TEST

START_TEST(f16_rounds_to_nearest_even)
{
    ck_assert_uint_eq(ps_wire_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(ps_wire_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie: even */
    ck_assert_uint_eq(ps_wire_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
    ck_assert_uint_eq(ps_wire_f32_to_f16(65504.0f), 0x7bff);  /* largest */
    ck_assert_uint_eq(ps_wire_f32_to_f16(65519.0f), 0x7bff);  /* below the tie */
    ck_assert_uint_eq(ps_wire_f32_to_f16(65520.0f), 0x7c00);  /* tie: overflow */
    ck_assert_uint_eq(ps_wire_f32_to_f16(-1e9f), 0xfc00);
    ck_assert_uint_eq(ps_wire_f32_to_f16(ldexpf(1, -14)), 0x0400); /* smallest normal */
    ck_assert_uint_eq(ps_wire_f32_to_f16(ldexpf(1, -24)), 0x0001); /* smallest subnormal */
    ck_assert_uint_eq(ps_wire_f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie: even (0) */
    ck_assert_uint_eq(ps_wire_f32_to_f16(3 * ldexpf(1, -25)), 0x0002); /* tie: even (2) */
    ck_assert_uint_eq(ps_wire_f32_to_f16(ldexpf(1, -26)), 0x0000);
    ck_assert_uint_eq(ps_wire_f32_to_f16(-0.0f), 0x8000);
}
END_TEST

START_TEST(f16_keeps_specials)
{
    ck_assert_uint_eq(ps_wire_f32_to_f16(INFINITY), 0x7c00);
    ck_assert_uint_eq(ps_wire_f32_to_f16(-INFINITY), 0xfc00);
    ck_assert(isnan(ps_wire_f16_to_f32(ps_wire_f32_to_f16(s_f(0x7f800001u)))));
    ck_assert(isnan(ps_wire_f16_to_f32(ps_wire_f32_to_f16(-NAN))));
    ck_assert(isinf(ps_wire_f16_to_f32(0x7c00)));
    ck_assert(ps_wire_f16_to_f32(0x0001) == ldexpf(1, -24));
}
END_TEST

/* Every 16-bit pattern that is not a NaN survives decode then encode. */
START_TEST(every_16_bit_value_round_trips)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f16 = ps_wire_f16_to_f32((uint16_t)h), b16 = ps_wire_bf16_to_f32((uint16_t)h);
        if (isnan(f16)) {
            ck_assert(isnan(ps_wire_f16_to_f32(ps_wire_f32_to_f16(f16))));
        } else {
            ck_assert_uint_eq(ps_wire_f32_to_f16(f16), h);
        }
        if (isnan(b16)) {
            ck_assert(isnan(ps_wire_bf16_to_f32(ps_wire_f32_to_bf16(b16))));
        } else {
            ck_assert_uint_eq(ps_wire_f32_to_bf16(b16), h);
        }
    }
}
END_TEST

/* bf16 by float64: the nearer of the two neighbours, the even one on a tie. */
static uint16_t s_ref_bf16(float f)
{
    uint32_t u = s_u(f);
    uint32_t lo = u >> 16, hi = lo + 1;
    double d = f, a = s_f(lo << 16), b = s_f(hi << 16);
    double da = fabs(d - a), db = fabs(b - d);
    if (isinf(b) && !isinf(a)) { /* past the largest bf16: by the exponent's next step */
        db = fabs(ldexp(1.0, 128) - fabs(d));
    }
    return (uint16_t)(da < db ? lo : db < da ? hi : (lo & 1u) ? hi : lo);
}

/* Millions of fp32 bit patterns against the references, through the vector
 * loops (ps_wire_encode), every exponent and sign. */
START_TEST(encode_matches_references)
{
    enum { N = 1 << 16 };
    static float src[N], back[N];
    static uint16_t enc[N];
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            src[i] = s_f((uint32_t)x);
            if (isnan(src[i])) {
                src[i] = 1.5f;
            }
        }
        ps_wire_encode(PS_DTYPE_BF16, enc, src, N);
        for (int i = 0; i < N; i++) {
            ck_assert_msg(enc[i] == s_ref_bf16(src[i]), "bf16(%a) = %04x, want %04x",
                          (double)src[i], enc[i], s_ref_bf16(src[i]));
        }
        ps_wire_decode(PS_DTYPE_BF16, back, enc, N);
        ck_assert_uint_eq(s_u(back[7]), (uint32_t)enc[7] << 16);
#ifdef __FLT16_MAX__
        ps_wire_encode(PS_DTYPE_F16, enc, src, N);
        for (int i = 0; i < N; i++) {
            _Float16 r = (_Float16)src[i];
            uint16_t want;
            memcpy(&want, &r, sizeof want);
            ck_assert_msg(enc[i] == want, "f16(%a) = %04x, want %04x", (double)src[i], enc[i],
                          want);
        }
        ps_wire_decode(PS_DTYPE_F16, back, enc, N);
        for (int i = 0; i < N; i += 97) {
            _Float16 h;
            memcpy(&h, &enc[i], sizeof h);
            ck_assert(back[i] == (float)h || (isnan(back[i]) && isnan((float)h)));
        }
#endif
    }
}
END_TEST

/* Decoding reads any alignment (a received frame need not be aligned). */
START_TEST(decode_reads_unaligned)
{
    unsigned char buf[1 + 2 * 5];
    uint16_t h[5] = {0x3c00, 0x4000, 0xbc00, 0x0001, 0x7c00};
    memcpy(buf + 1, h, sizeof h);
    float out[5];
    ps_wire_decode(PS_DTYPE_F16, out, buf + 1, 5);
    ck_assert(out[0] == 1.0f && out[1] == 2.0f && out[2] == -1.0f &&
              out[3] == ldexpf(1, -24) && isinf(out[4]));
}
END_TEST

START_TEST(topk_count_is_ceil_and_at_least_one)
{
    ck_assert_uint_eq(ps_wire_topk_count(0.01, 0), 0);
    ck_assert_uint_eq(ps_wire_topk_count(0.01, 10), 1);
    ck_assert_uint_eq(ps_wire_topk_count(0.01, 100), 1);
    ck_assert_uint_eq(ps_wire_topk_count(0.01, 101), 2);
    ck_assert_uint_eq(ps_wire_topk_count(1.0, 7), 7);
}
END_TEST

/* Top-k sends the largest magnitudes in key order; the residual keeps the
 * rest, and sent entries keep only their rounding error. */
START_TEST(topk_sends_largest_and_keeps_the_rest)
{
    float acc[8] = {0.1f, -5.0f, 0.2f, 3.0f, -0.3f, 0.0f, 4.0f, 0.05f};
    const float orig[8] = {0.1f, -5.0f, 0.2f, 3.0f, -0.3f, 0.0f, 4.0f, 0.05f};
    float scratch[8];
    unsigned char payload[3 * 8];
    size_t len = ps_wire_topk_encode(PS_DTYPE_SPARSE_F32, payload, acc, 8, 3, scratch);
    ck_assert_uint_eq(len, 3 * 8);
    uint32_t idx[3];
    float vals[3];
    memcpy(idx, payload, sizeof idx);
    memcpy(vals, payload + sizeof idx, sizeof vals);
    ck_assert_uint_eq(idx[0], 1);
    ck_assert_uint_eq(idx[1], 3);
    ck_assert_uint_eq(idx[2], 6);
    ck_assert(vals[0] == -5.0f && vals[1] == 3.0f && vals[2] == 4.0f);
    for (int i = 0; i < 8; i++) {
        ck_assert(acc[i] == ((i == 1 || i == 3 || i == 6) ? 0.0f : orig[i]));
    }
    /* decoding gives back the sent entries, zero elsewhere */
    float dense[8];
    char why[160];
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_SPARSE_F32, dense, 8, payload, len, 3,
                                            why, sizeof why), 0);
    for (int i = 0; i < 8; i++) {
        ck_assert(dense[i] + acc[i] == orig[i]);
    }
}
END_TEST

START_TEST(topk_bf16_residual_keeps_rounding_error)
{
    float acc[4] = {1.0f + ldexpf(1, -10), 0.0f, 0.0f, 0.0f};
    float scratch[4];
    unsigned char payload[6];
    ck_assert_uint_eq(ps_wire_topk_encode(PS_DTYPE_SPARSE_BF16, payload, acc, 4, 1, scratch), 6);
    uint16_t v;
    memcpy(&v, payload + 4, sizeof v);
    ck_assert_uint_eq(v, 0x3f80); /* 1.0 in bf16 */
    ck_assert(acc[0] == ldexpf(1, -10));
}
END_TEST

START_TEST(topk_ties_and_nan)
{
    float acc[6] = {1.0f, 2.0f, 1.0f, 2.0f, 1.0f, 0.0f}, scratch[6];
    unsigned char payload[3 * 8];
    ps_wire_topk_encode(PS_DTYPE_SPARSE_F32, payload, acc, 6, 3, scratch);
    uint32_t idx[3];
    memcpy(idx, payload, sizeof idx);
    ck_assert(idx[0] == 0 && idx[1] == 1 && idx[2] == 3); /* the tie: the lower key */
    float nan_acc[4] = {9.0f, NAN, 1.0f, 0.0f};
    ps_wire_topk_encode(PS_DTYPE_SPARSE_F32, payload, nan_acc, 4, 1, scratch);
    memcpy(idx, payload, sizeof idx[0]);
    ck_assert_uint_eq(idx[0], 1); /* a NaN is sent, so the server refuses it */
}
END_TEST

/* One payload from two pieces, as a push part over two tensors: offsets are
 * from the part's start; a piece with k = n goes whole (bf16, rounding error
 * kept), the other by top-k. */
START_TEST(topk_select_pieces_into_one_payload)
{
    float acc[6] = {0.5f, -7.0f, 0.25f, 1.0f + ldexpf(1, -10), 0.0f, -2.0f}, scratch[6];
    uint32_t idx[4];
    uint16_t vals[4];
    ck_assert_uint_eq(ps_wire_topk_select(PS_DTYPE_BF16, idx, vals, 0, acc, 3, 1, scratch), 1);
    ck_assert_uint_eq(ps_wire_topk_select(PS_DTYPE_BF16, idx + 1, vals + 1, 3, acc + 3, 3, 3,
                                          scratch), 3);
    ck_assert(idx[0] == 1 && idx[1] == 3 && idx[2] == 4 && idx[3] == 5);
    ck_assert(ps_wire_bf16_to_f32(vals[0]) == -7.0f && ps_wire_bf16_to_f32(vals[1]) == 1.0f);
    ck_assert(ps_wire_bf16_to_f32(vals[2]) == 0.0f && ps_wire_bf16_to_f32(vals[3]) == -2.0f);
    ck_assert(acc[0] == 0.5f && acc[1] == 0.0f && acc[2] == 0.25f);
    ck_assert(acc[3] == ldexpf(1, -10) && acc[4] == 0.0f && acc[5] == 0.0f);
}
END_TEST

/* Many sizes and ratios against a sort: exactly the k largest go. */
START_TEST(topk_matches_sorting)
{
    enum { N = 3000 };
    static float acc[N], copy[N], scratch[N];
    static unsigned char payload[N * 8];
    for (int t = 1; t < 40; t++) {
        size_t n = (size_t)(t * 73) % N + 1, k = (size_t)(t * 31) % n + 1;
        ps_test_fill(acc, n, -1, 1, (uint64_t)t);
        if (t % 3 == 0) { /* many equal values */
            for (size_t i = 0; i < n; i += 2) {
                acc[i] = 0.5f;
            }
        }
        memcpy(copy, acc, n * sizeof *acc);
        ps_wire_topk_encode(PS_DTYPE_SPARSE_F32, payload, acc, n, k, scratch);
        /* the smallest magnitude sent >= the largest left */
        float min_sent = INFINITY, max_left = 0;
        uint32_t prev = 0;
        for (size_t j = 0; j < k; j++) {
            uint32_t at;
            memcpy(&at, payload + 4 * j, sizeof at);
            ck_assert(j == 0 || at > prev);
            prev = at;
            min_sent = fminf(min_sent, fabsf(copy[at]));
            ck_assert(acc[at] == 0.0f);
        }
        size_t left = 0;
        for (size_t i = 0; i < n; i++) {
            if (acc[i] != 0.0f || copy[i] == 0.0f) {
                left++;
                max_left = fmaxf(max_left, fabsf(copy[i]));
            }
        }
        ck_assert_uint_eq(left, n - k);
        ck_assert(min_sent >= max_left);
    }
}
END_TEST

/* A sparse payload of 3 entries over 10 keys, offsets given. */
static size_t s_sparse(unsigned char *p, const uint32_t *idx, int nnz)
{
    memcpy(p, idx, (size_t)nnz * 4);
    for (int j = 0; j < nnz; j++) {
        float v = (float)(j + 1);
        memcpy(p + (size_t)nnz * 4 + (size_t)j * 4, &v, 4);
    }
    return (size_t)nnz * 8;
}

START_TEST(sparse_decode_refuses_malformed)
{
    unsigned char p[64];
    float dst[10], before[10];
    char why[160];
    for (int i = 0; i < 10; i++) {
        dst[i] = before[i] = 7.0f;
    }
    const uint32_t ok[3] = {0, 4, 9}, out_of_range[3] = {0, 4, 10}, unsorted[3] = {4, 0, 9},
                   dup[3] = {0, 4, 4};
    size_t len = s_sparse(p, ok, 3);
    /* count mismatch: the header's nnz against the bytes */
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_SPARSE_F32, dst, 10, p, len, 2, why,
                                            sizeof why), PS_ERANGE);
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_SPARSE_F32, dst, 10, p, len - 1, 3, why,
                                            sizeof why), PS_ERANGE);
    /* more entries than keys */
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_SPARSE_F32, dst, 2, p, len, 3, why,
                                            sizeof why), PS_ERANGE);
    len = s_sparse(p, out_of_range, 3);
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_SPARSE_F32, dst, 10, p, len, 3, why,
                                            sizeof why), PS_ERANGE);
    ck_assert_ptr_nonnull(strstr(why, "outside"));
    len = s_sparse(p, unsorted, 3);
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_SPARSE_F32, dst, 10, p, len, 3, why,
                                            sizeof why), PS_ERANGE);
    ck_assert_ptr_nonnull(strstr(why, "ascending"));
    len = s_sparse(p, dup, 3);
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_SPARSE_F32, dst, 10, p, len, 3, why,
                                            sizeof why), PS_ERANGE);
    /* dense of the wrong size, an unknown dtype */
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_BF16, dst, 10, p, 19, 0, why, sizeof why),
                     PS_ERANGE);
    ck_assert_int_eq(ps_wire_decode_payload(99, dst, 10, p, 40, 0, why, sizeof why), PS_ERANGE);
    ck_assert_mem_eq(dst, before, sizeof dst); /* nothing written */
    len = s_sparse(p, ok, 3);
    ck_assert_int_eq(ps_wire_decode_payload(PS_DTYPE_SPARSE_F32, dst, 10, p, len, 3, why,
                                            sizeof why), 0);
    ck_assert(dst[0] == 1.0f && dst[4] == 2.0f && dst[9] == 3.0f && dst[1] == 0.0f);
}
END_TEST

START_TEST(payload_lengths)
{
    ck_assert_uint_eq(ps_wire_payload_len(PS_DTYPE_F32, 10, 0), 40);
    ck_assert_uint_eq(ps_wire_payload_len(PS_DTYPE_BF16, 10, 0), 20);
    ck_assert_uint_eq(ps_wire_payload_len(PS_DTYPE_F16, 10, 0), 20);
    ck_assert_uint_eq(ps_wire_payload_len(PS_DTYPE_SPARSE_F32, 10, 3), 24);
    ck_assert_uint_eq(ps_wire_payload_len(PS_DTYPE_SPARSE_BF16, 10, 3), 18);
    ck_assert_uint_eq(ps_wire_payload_len(42, 10, 3), 0);
    ps_job_t j;
    ps_job_defaults(&j);
    ck_assert_uint_eq(ps_wire_dtype(&j), PS_DTYPE_F32);
    ck_assert_int_eq(ps_job_parse_wire("bf16", &j), 0);
    ck_assert_uint_eq(ps_wire_dtype(&j), PS_DTYPE_BF16);
    ck_assert_uint_eq(ps_wire_sparse_of(PS_DTYPE_BF16), PS_DTYPE_SPARSE_BF16);
    ck_assert_int_eq(ps_job_parse_wire("fp8", &j), PS_EINVAL);
    ck_assert_int_eq(ps_job_parse_compress("topk:0.01", &j), 0);
    ck_assert(j.topk == 0.01);
    ck_assert_int_eq(ps_job_parse_compress("topk:0", &j), PS_EINVAL);
    ck_assert_int_eq(ps_job_parse_compress("topk:1.5", &j), PS_EINVAL);
    ck_assert_int_eq(ps_job_parse_compress("topk:0.1x", &j), PS_EINVAL);
    ck_assert_int_eq(ps_job_parse_compress("none", &j), 0);
    ck_assert(j.topk == 0);
    /* momentum correction: top-k with SGD momentum only */
    ck_assert_int_eq(ps_wire_worker_momentum(&j), 0);
    j.topk = 0.01;
    ck_assert_int_ne(ps_wire_worker_momentum(&j), 0);
    j.momentum = 0;
    ck_assert_int_eq(ps_wire_worker_momentum(&j), 0);
    j.momentum = 0.9;
    snprintf(j.optimizer, sizeof j.optimizer, "adam");
    ck_assert_int_eq(ps_wire_worker_momentum(&j), 0);
}
END_TEST

START_TEST(row_keys_go_in_hash_order_inside_the_shard)
{
    /* keys of hashes 10, 20, 30, one unaligned byte in */
    unsigned char buf[1 + 3 * sizeof(uint64_t)];
    uint64_t k[3] = {ps_rowkey_unhash(10), ps_rowkey_unhash(20), ps_rowkey_unhash(30)};
    memcpy(buf + 1, k, sizeof k);
    char why[160];
    ck_assert_int_eq(ps_wire_check_row_keys(buf + 1, 3, NULL, why, sizeof why), 0);
    ck_assert_int_eq(ps_wire_check_row_keys(buf + 1, 0, NULL, why, sizeof why), 0);
    const ps_rowrange_t held = {10, 29};
    ck_assert_int_eq(ps_wire_check_row_keys(buf + 1, 3, &held, why, sizeof why), PS_ERANGE);
    ck_assert_ptr_nonnull(strstr(why, "not in the rows it was sent to"));
    uint64_t rep[2] = {k[1], k[1]}, back[2] = {k[1], k[0]};
    ck_assert_int_eq(ps_wire_check_row_keys(rep, 2, NULL, why, sizeof why), PS_ERANGE);
    ck_assert_ptr_nonnull(strstr(why, "repeats"));
    ck_assert_int_eq(ps_wire_check_row_keys(back, 2, NULL, why, sizeof why), PS_ERANGE);
    ck_assert_ptr_nonnull(strstr(why, "out of order"));
}
END_TEST

static Suite *s_suite(void)
{
    Suite *s = suite_create("wire");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bf16_rounds_to_nearest_even);
    tcase_add_test(tc, bf16_keeps_specials);
    tcase_add_test(tc, f16_rounds_to_nearest_even);
    tcase_add_test(tc, f16_keeps_specials);
    tcase_add_test(tc, every_16_bit_value_round_trips);
    tcase_add_test(tc, encode_matches_references);
    tcase_add_test(tc, decode_reads_unaligned);
    tcase_add_test(tc, topk_count_is_ceil_and_at_least_one);
    tcase_add_test(tc, topk_sends_largest_and_keeps_the_rest);
    tcase_add_test(tc, topk_bf16_residual_keeps_rounding_error);
    tcase_add_test(tc, topk_ties_and_nan);
    tcase_add_test(tc, topk_matches_sorting);
    tcase_add_test(tc, topk_select_pieces_into_one_payload);
    tcase_add_test(tc, sparse_decode_refuses_malformed);
    tcase_add_test(tc, payload_lengths);
    tcase_add_test(tc, row_keys_go_in_hash_order_inside_the_shard);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ps_test_run(s_suite());
}
