/*
 * proto/wire.c - payload dtypes: fp16 / bf16 conversions (round-to-nearest-
 * even, specials kept), dense encode/decode, top-k sparse encode with error
 * feedback, and the checked sparse decode the server applies.
 *
 * The conversions are branch-light integer code on one value, inlined into
 * plain loops, so GCC vectorises them at -O2/-O3; no F16C dependency (the
 * CPU kernels pick their own instruction sets, this stays portable).
 */
#include "proto/wire.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"

static inline uint32_t s_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float s_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* After F. Giesen's float_to_half_fast3_rtne: the subnormal range is rounded
 * by the FPU's own round-to-nearest-even (adding a magic number), the normal
 * range by adding half an ulp minus one plus the kept mantissa's low bit. */
static inline uint16_t s_f32_to_f16(float f)
{
    const uint32_t f32_inf = 255u << 23;
    const uint32_t f16_max = (127u + 16u) << 23; /* 2^16: rounds to infinity */
    const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    uint32_t u = s_bits(f);
    const uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint16_t o;
    if (u >= f16_max) {
        o = u > f32_inf ? 0x7e00 : 0x7c00; /* NaN stays a (quiet) NaN, else infinity */
    } else if (u < (113u << 23)) {         /* below 2^-14: an fp16 subnormal or 0 */
        o = (uint16_t)(s_bits(s_float(u) + s_float(denorm_magic)) - denorm_magic);
    } else {
        const uint32_t odd = (u >> 13) & 1u;
        u += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
        o = (uint16_t)(u >> 13);
    }
    return (uint16_t)(o | (sign >> 16));
}

static inline float s_f16_to_f32(uint16_t h)
{
    const uint32_t shifted_exp = 0x7c00u << 13;
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    const uint32_t exp = shifted_exp & o;
    o += (uint32_t)(127 - 15) << 23;
    if (exp == shifted_exp) { /* infinity or NaN */
        o += (uint32_t)(128 - 16) << 23;
    } else if (exp == 0) { /* zero or subnormal: renormalise through the FPU */
        o += 1u << 23;
        o = s_bits(s_float(o) - s_float(113u << 23));
    }
    return s_float(o | (((uint32_t)h & 0x8000u) << 16));
}

static inline uint16_t s_f32_to_bf16(float f)
{
    const uint32_t u = s_bits(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    /* a NaN must not round into an infinity: keep it, quiet */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

static inline float s_bf16_to_f32(uint16_t h)
{
    return s_float((uint32_t)h << 16);
}

uint16_t ps_wire_f32_to_f16(float f)
{
    return s_f32_to_f16(f);
}

float ps_wire_f16_to_f32(uint16_t h)
{
    return s_f16_to_f32(h);
}

uint16_t ps_wire_f32_to_bf16(float f)
{
    return s_f32_to_bf16(f);
}

float ps_wire_bf16_to_f32(uint16_t h)
{
    return s_bf16_to_f32(h);
}

uint32_t ps_wire_dtype(const ps_job_t *job)
{
    return job->wire == PS_WIRE_FP16   ? PS_DTYPE_F16
           : job->wire == PS_WIRE_BF16 ? PS_DTYPE_BF16
                                       : PS_DTYPE_F32;
}

int ps_wire_is_sparse(uint32_t dtype)
{
    return dtype >= PS_DTYPE_SPARSE_F32 && dtype <= PS_DTYPE_SPARSE_BF16;
}

uint32_t ps_wire_sparse_of(uint32_t dense)
{
    return dense - PS_DTYPE_F32 + PS_DTYPE_SPARSE_F32;
}

uint32_t ps_wire_dense_of(uint32_t dtype)
{
    return ps_wire_is_sparse(dtype) ? dtype - PS_DTYPE_SPARSE_F32 + PS_DTYPE_F32 : dtype;
}

size_t ps_wire_value_size(uint32_t dtype)
{
    switch (ps_wire_dense_of(dtype)) {
    case PS_DTYPE_F32:
        return 4;
    case PS_DTYPE_F16:
    case PS_DTYPE_BF16:
        return 2;
    default:
        return 0;
    }
}

uint64_t ps_wire_payload_len(uint32_t dtype, uint64_t n, uint64_t nnz)
{
    const uint64_t vs = ps_wire_value_size(dtype);
    return ps_wire_is_sparse(dtype) ? nnz * (sizeof(uint32_t) + vs) : n * vs;
}

void ps_wire_encode(uint32_t dtype, void *dst, const float *src, size_t n)
{
    uint16_t *d = dst; /* dst is ours (a send buffer): aligned */
    if (dtype == PS_DTYPE_F16) {
        for (size_t i = 0; i < n; i++) {
            d[i] = s_f32_to_f16(src[i]);
        }
    } else if (dtype == PS_DTYPE_BF16) {
        for (size_t i = 0; i < n; i++) {
            d[i] = s_f32_to_bf16(src[i]);
        }
    } else {
        memcpy(dst, src, n * sizeof(float));
    }
}

void ps_wire_decode(uint32_t dtype, float *dst, const void *src, size_t n)
{
    const unsigned char *s = src;
    if (dtype == PS_DTYPE_F16 || dtype == PS_DTYPE_BF16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, sizeof h);
            dst[i] = dtype == PS_DTYPE_F16 ? s_f16_to_f32(h) : s_bf16_to_f32(h);
        }
    } else {
        memcpy(dst, src, n * sizeof(float));
    }
}

uint64_t ps_wire_topk_count(double ratio, uint64_t n)
{
    if (n == 0) {
        return 0;
    }
    double k = ceil(ratio * (double)n);
    return k < 1 ? 1 : k > (double)n ? n : (uint64_t)k;
}

/* |x| for ranking; a NaN ranks above everything so it is sent (and refused). */
static inline float s_mag(float x)
{
    return isnan(x) ? INFINITY : fabsf(x);
}

/* The k-th largest of a[0..n) (1 <= k <= n, no NaN), reordering a:
 * quickselect with a middle pivot (Hoare partition), O(n) expected. */
static float s_kth_largest(float *a, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1;
    const ptrdiff_t want = (ptrdiff_t)k - 1;
    while (lo < hi) {
        const float pivot = a[lo + (hi - lo) / 2];
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) {
                i++;
            }
            while (a[j] < pivot) {
                j--;
            }
            if (i <= j) {
                const float t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        /* a[lo..j] >= pivot >= a[i..hi]; between them, the pivot's value */
        if (want <= j) {
            hi = j;
        } else if (want >= i) {
            lo = i;
        } else {
            return a[want];
        }
    }
    return a[want];
}

/* One value of dense dtype at p (any alignment), and back: what the server
 * will decode. */
static float s_round_trip(uint32_t dense, float x, unsigned char *p)
{
    if (dense == PS_DTYPE_F32) {
        memcpy(p, &x, sizeof x);
        return x;
    }
    uint16_t h = dense == PS_DTYPE_F16 ? s_f32_to_f16(x) : s_f32_to_bf16(x);
    memcpy(p, &h, sizeof h);
    return dense == PS_DTYPE_F16 ? s_f16_to_f32(h) : s_bf16_to_f32(h);
}

size_t ps_wire_topk_select(uint32_t dense, uint32_t *idx, void *vals, uint32_t base,
                           float *acc, size_t n, size_t k, float *scratch)
{
    k = k > n ? n : k;
    if (k == 0) {
        return 0;
    }
    float thr = -1.0f; /* k = n: every entry goes, no selection */
    size_t ties = 0, m = 0;
    if (k < n) {
        for (size_t i = 0; i < n; i++) {
            scratch[i] = s_mag(acc[i]);
        }
        thr = s_kth_largest(scratch, n, k);
        size_t above = 0;
        for (size_t i = 0; i < n; i++) {
            above += s_mag(acc[i]) > thr;
        }
        ties = k - above;
    }
    const size_t vs = ps_wire_value_size(dense);
    for (size_t i = 0; i < n && m < k; i++) {
        const float g = s_mag(acc[i]);
        if (g > thr || (g == thr && ties > 0)) {
            ties -= g == thr;
            idx[m] = base + (uint32_t)i;
            /* the residual keeps the rounding error of what was sent */
            const float sent = s_round_trip(dense, acc[i], (unsigned char *)vals + m * vs);
            acc[i] = isfinite(sent) ? acc[i] - sent : 0.0f;
            m++;
        }
    }
    return k;
}

size_t ps_wire_topk_encode(uint32_t dtype, void *dst, float *acc, size_t n, size_t k,
                           float *scratch)
{
    k = k > n ? n : k;
    const uint32_t dense = ps_wire_dense_of(dtype);
    ps_wire_topk_select(dense, dst, (unsigned char *)dst + k * sizeof(uint32_t), 0, acc, n, k,
                        scratch);
    return ps_wire_payload_len(dtype, n, k);
}

int ps_wire_decode_payload(uint32_t dtype, float *dst, size_t n, const void *payload,
                           size_t len, uint64_t nnz, char *why, size_t whylen)
{
    if (!ps_wire_value_size(dtype)) {
        snprintf(why, whylen, "unknown dtype %u", (unsigned)dtype);
        return PS_ERANGE;
    }
    if (!ps_wire_is_sparse(dtype)) {
        if (len != ps_wire_payload_len(dtype, n, 0)) {
            snprintf(why, whylen, "payload is %zu bytes; %zu keys of %s need %llu", len, n,
                     ps_wire_dtype_name(dtype),
                     (unsigned long long)ps_wire_payload_len(dtype, n, 0));
            return PS_ERANGE;
        }
        ps_wire_decode(dtype, dst, payload, n);
        return 0;
    }
    if (nnz > n || len != ps_wire_payload_len(dtype, n, nnz)) {
        snprintf(why, whylen, "sparse payload of %zu bytes with %llu entries over %zu keys "
                 "(%s needs %llu bytes, at most %zu entries)", len, (unsigned long long)nnz, n,
                 ps_wire_dtype_name(dtype),
                 (unsigned long long)ps_wire_payload_len(dtype, n, nnz > n ? n : nnz), n);
        return PS_ERANGE;
    }
    const unsigned char *p = payload;
    uint64_t prev = 0;
    for (uint64_t j = 0; j < nnz; j++) {
        uint32_t at;
        memcpy(&at, p + j * sizeof at, sizeof at);
        if (at >= n || (j > 0 && at <= prev)) {
            snprintf(why, whylen, "sparse entry %llu: offset %u %s", (unsigned long long)j,
                     (unsigned)at,
                     at >= n ? "is outside the range"
                     : at == prev ? "repeats the previous one" : "is not ascending");
            return PS_ERANGE;
        }
        prev = at;
    }
    const uint32_t dense = ps_wire_dense_of(dtype);
    const size_t vs = ps_wire_value_size(dense);
    const unsigned char *vals = p + nnz * sizeof(uint32_t);
    memset(dst, 0, n * sizeof *dst);
    for (uint64_t j = 0; j < nnz; j++) {
        uint32_t at;
        memcpy(&at, p + j * sizeof at, sizeof at);
        ps_wire_decode(dense, &dst[at], vals + j * vs, 1);
    }
    return 0;
}

int ps_wire_check_row_keys(const void *keys, uint64_t nnz, const ps_rowrange_t *held,
                           char *why, size_t whylen)
{
    const unsigned char *p = keys;
    uint64_t prev = 0;
    for (uint64_t i = 0; i < nnz; i++) {
        uint64_t k;
        memcpy(&k, p + i * sizeof k, sizeof k);
        const uint64_t h = ps_rowkey_hash(k);
        if (i > 0 && h <= prev) {
            snprintf(why, whylen, "row key %llu at %llu %s", (unsigned long long)k,
                     (unsigned long long)i,
                     h == prev ? "repeats the one before it"
                               : "is out of order (keys go in the order of their hashes)");
            return PS_ERANGE;
        }
        if (held && (h < held->first || h > held->last)) {
            snprintf(why, whylen, "row key %llu is not in the rows it was sent to (its hash "
                     "%016llx is outside %016llx..%016llx)", (unsigned long long)k,
                     (unsigned long long)h, (unsigned long long)held->first,
                     (unsigned long long)held->last);
            return PS_ERANGE;
        }
        prev = h;
    }
    return 0;
}

int ps_wire_worker_momentum(const ps_job_t *job)
{
    return job->topk > 0 && job->momentum > 0 && !strcmp(job->optimizer, "sgd");
}

const char *ps_wire_dtype_name(uint32_t dtype)
{
    static const char *names[] = {"none", "fp32", "fp16", "bf16",
                                  "topk-fp32", "topk-fp16", "topk-bf16"};
    return dtype <= PS_DTYPE_MAX ? names[dtype] : "unknown";
}
