/*
 * kernels/cpu/gemm_avx512.c - single-threaded AVX-512 sgemm for the CPU backend.
 *
 * Why: OpenBLAS 0.3.21 (Debian 12) does not know AMD Zen 4/5 and runs its AVX2
 * (Haswell) kernels there, at about half of what the FMA units can do. This is
 * a plain BLIS-style GEMM (Goto & van de Geijn, "Anatomy of high-performance
 * matrix multiplication", TOMS 2008): pack a KC x NC block of op(B) into
 * 32-column panels (16 for a narrow last one; transposed B with 8x8 in-register
 * transposes), then an 8x32 register-blocked micro-kernel (16 zmm accumulators)
 * sweeps them, broadcasting op(A) straight from A: 8 row pointers when A is
 * row-major along k, one pointer stepping lda when it is transposed. A is not
 * packed (its 8 x KC panel stays in L1 across the sweep), which saves a copy
 * of every im2col matrix the convolutions feed through here.
 * Row-major, BLAS semantics: C = alpha op(A) op(B) + beta C.
 *
 * Compiled with -mavx512f: only call it after checking the CPU (dense.c does).
 * Uses the caller's packing buffers (no allocation); not parallel.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/avx512.h"

enum { S_MR = 8, S_NR = 32 };

/* 8x8 transpose of r[0..7] in place (r[i] = row i in, column i out). */
static inline void s_tr8x8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/*
 * Gathers 8 "lines" that run along k into dst[k*w + 0..7], k in [0, kc): line
 * i starts at src[i] and is contiguous. Missing lines point at zeros (the
 * caller passes a zero line of at least kc floats). w is the panel width.
 */
static void s_pack_lines8(const float *const src[8], int kc, float *dst, int w)
{
    int k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; i++) {
            r[i] = _mm256_loadu_ps(src[i] + k);
        }
        s_tr8x8(r);
        for (int j = 0; j < 8; j++) {
            _mm256_storeu_ps(dst + (size_t)(k + j) * w, r[j]);
        }
    }
    for (; k < kc; k++) {
        for (int i = 0; i < 8; i++) {
            dst[(size_t)k * w + i] = src[i][k];
        }
    }
}

/*
 * Packs op(B)[p0 .. p0+kc, j0 .. j0+nc) into panels of S_NR columns; panel q
 * starts at Bp + q*kc*S_NR and holds op(B)(p0 + k, j0 + S_NR*q + c) at
 * [k*w + c], w = S_NR, or 16 for a last panel of at most 16 columns. Columns
 * past nc are zero.
 */
static void s_pack_b(int tb, const float *B, int ldb, int p0, int kc, int j0, int nc,
                     float *Bp, const float *zero)
{
    for (int q = 0; q * S_NR < nc; q++) {
        float *dst = Bp + (size_t)q * kc * S_NR;
        const int cols = nc - q * S_NR < S_NR ? nc - q * S_NR : S_NR;
        const int w = cols <= 16 ? 16 : S_NR;
        const int j = j0 + q * S_NR;
        if (!tb) {
            /* op(B)(p, j) = B[p*ldb + j]: each k gives up to 32 contiguous columns */
            const __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);
            const __mmask16 m1 = (__mmask16)(cols >= 32  ? 0xffff
                                             : cols > 16 ? (1u << (cols - 16)) - 1
                                                         : 0);
            for (int k = 0; k < kc; k++) {
                const float *s = B + (size_t)(p0 + k) * ldb + j;
                _mm512_storeu_ps(dst + (size_t)k * w, _mm512_maskz_loadu_ps(m0, s));
                if (w == S_NR) {
                    _mm512_storeu_ps(dst + (size_t)k * w + 16,
                                     _mm512_maskz_loadu_ps(m1, s + 16));
                }
            }
        } else {
            /* op(B)(p, j) = B[j*ldb + p]: column j is a contiguous line along k */
            for (int g = 0; g < w; g += 8) {
                const float *src[8];
                for (int c = 0; c < 8; c++) {
                    src[c] = g + c < cols ? B + (size_t)(j + g + c) * ldb + p0 : zero;
                }
                s_pack_lines8(src, kc, dst + g, w);
            }
        }
    }
}

/*
 * The micro-kernel: C[0..m, 0..n) = alpha * op(A)[8 x kc] @ Bp[kc x nrw] + beta C,
 * m <= 8, n <= nrw (16 or 32). op(A)(r, k) is ar[r][k] when rows != 0, else
 * a[k*acs + r]. beta == 0 never reads C. Always inlined into the four
 * specialisations below so that nrw and rows are constants.
 */
static inline __attribute__((always_inline)) void
s_kernel(int kc, int rows, const float *const *ar, const float *a, size_t acs,
         const float *restrict Bp, int nrw, float *C, int ldc, float alpha, float beta,
         int m, int n)
{
    __m512 c0[S_MR], c1[S_MR];
    const float *rp[S_MR];
#pragma GCC unroll 8
    for (int r = 0; r < S_MR; r++) {
        c0[r] = _mm512_setzero_ps();
        c1[r] = _mm512_setzero_ps();
        rp[r] = rows ? ar[r] : NULL;
    }
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(Bp);
        const __m512 b1 = nrw == 32 ? _mm512_loadu_ps(Bp + 16) : b0;
#pragma GCC unroll 8
        for (int r = 0; r < S_MR; r++) {
            const __m512 av = _mm512_set1_ps(rows ? rp[r][k] : a[r]);
            c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
            if (nrw == 32) {
                c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
            }
        }
        a += acs;
        Bp += nrw;
    }
    const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
    const __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int r = 0; r < m; r++) {
        float *row = C + (size_t)r * ldc;
        __m512 v0 = _mm512_mul_ps(va, c0[r]);
        if (beta != 0.0f) {
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), v0);
        }
        _mm512_mask_storeu_ps(row, m0, v0);
        if (nrw == 32) {
            __m512 v1 = _mm512_mul_ps(va, c1[r]);
            if (beta != 0.0f) {
                v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), v1);
            }
            _mm512_mask_storeu_ps(row + 16, m1, v1);
        }
    }
}

static void s_kernel_rows32(int kc, const float *const *ar, const float *Bp, float *C,
                            int ldc, float alpha, float beta, int m, int n)
{
    s_kernel(kc, 1, ar, NULL, 0, Bp, 32, C, ldc, alpha, beta, m, n);
}

static void s_kernel_rows16(int kc, const float *const *ar, const float *Bp, float *C,
                            int ldc, float alpha, float beta, int m, int n)
{
    s_kernel(kc, 1, ar, NULL, 0, Bp, 16, C, ldc, alpha, beta, m, n);
}

static void s_kernel_cols32(int kc, const float *a, size_t acs, const float *Bp, float *C,
                            int ldc, float alpha, float beta, int m, int n)
{
    s_kernel(kc, 0, NULL, a, acs, Bp, 32, C, ldc, alpha, beta, m, n);
}

static void s_kernel_cols16(int kc, const float *a, size_t acs, const float *Bp, float *C,
                            int ldc, float alpha, float beta, int m, int n)
{
    s_kernel(kc, 0, NULL, a, acs, Bp, 16, C, ldc, alpha, beta, m, n);
}

/* C = beta * C for the degenerate cases (K == 0 or alpha == 0). */
static void s_scale(int M, int N, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *row = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++) {
            row[j] = beta == 0.0f ? 0.0f : beta * row[j];
        }
    }
}

void ps_cpu_gemm_avx512(const ps_gemm_pack_t *pk, int ta, int tb, int M, int N, int K,
                        float alpha, const float *A, int lda, const float *B, int ldb,
                        float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) {
        return;
    }
    if (K <= 0 || alpha == 0.0f) {
        s_scale(M, N, beta, C, ldc);
        return;
    }
    for (int jc = 0; jc < N; jc += PS_GEMM_NC) {
        const int nc = N - jc < PS_GEMM_NC ? N - jc : PS_GEMM_NC;
        for (int pc = 0; pc < K; pc += PS_GEMM_KC) {
            const int kc = K - pc < PS_GEMM_KC ? K - pc : PS_GEMM_KC;
            const float beta_k = pc == 0 ? beta : 1.0f;
            s_pack_b(tb, B, ldb, pc, kc, jc, nc, pk->b, pk->zero);
            for (int ir = 0; ir < M; ir += S_MR) {
                const int m = M - ir < S_MR ? M - ir : S_MR;
                /* where op(A)[ir .. ir+8, pc .. pc+kc) comes from */
                const float *ar[S_MR];
                const float *a = NULL;
                size_t acs = 0;
                if (!ta) {
                    for (int r = 0; r < S_MR; r++) {
                        ar[r] = r < m ? A + (size_t)(ir + r) * lda + pc : pk->zero;
                    }
                } else if (m == S_MR) {
                    a = A + (size_t)pc * lda + ir;
                    acs = (size_t)lda;
                } else {
                    /* a short last panel of A^T: copy it so no read runs past A */
                    const __mmask8 mask = (__mmask8)((1u << m) - 1);
                    for (int k = 0; k < kc; k++) {
                        const float *s = A + (size_t)(pc + k) * lda + ir;
                        _mm256_storeu_ps(pk->a + (size_t)k * S_MR,
                                         _mm256_maskz_loadu_ps(mask, s));
                    }
                    a = pk->a;
                    acs = S_MR;
                }
                float *c = C + (size_t)ir * ldc + jc;
                for (int jr = 0; jr < nc; jr += S_NR) {
                    const int n = nc - jr < S_NR ? nc - jr : S_NR;
                    const float *bp = pk->b + (size_t)(jr / S_NR) * kc * S_NR;
                    if (!ta) {
                        if (n <= 16) {
                            s_kernel_rows16(kc, ar, bp, c + jr, ldc, alpha, beta_k, m, n);
                        } else {
                            s_kernel_rows32(kc, ar, bp, c + jr, ldc, alpha, beta_k, m, n);
                        }
                    } else if (n <= 16) {
                        s_kernel_cols16(kc, a, acs, bp, c + jr, ldc, alpha, beta_k, m, n);
                    } else {
                        s_kernel_cols32(kc, a, acs, bp, c + jr, ldc, alpha, beta_k, m, n);
                    }
                }
            }
        }
    }
}
