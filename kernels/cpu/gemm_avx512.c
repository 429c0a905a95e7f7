/*
 * kernels/cpu/gemm_avx512.c - single-threaded AVX-512 sgemm for the CPU backend.
 *
 * Why: OpenBLAS 0.3.21 (Debian 12) does not know AMD Zen 4/5 and runs its AVX2
 * (Haswell) kernels there, at about half of what the FMA units can do. This is
 * a plain BLIS-style GEMM (Goto & van de Geijn, "Anatomy of high-performance
 * matrix multiplication", TOMS 2008): pack a KC x NC block of op(B) into
 * 32-column panels and an MC x KC block of op(A) into 8-row panels, then an
 * 8x32 register-blocked micro-kernel (16 zmm accumulators, A broadcast from
 * memory) sweeps the panels. Transposed operands are packed with 8x8 in-register
 * transposes. Row-major, BLAS semantics: C = alpha op(A) op(B) + beta C.
 *
 * Compiled with -mavx512f: only call it after checking the CPU (dense.c does).
 * Uses the caller's packing buffers (no allocation); not parallel.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/gemm_avx512.h"

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
 * Packs op(A)[i0 .. i0+mc, p0 .. p0+kc) into 8-row panels: panel q holds
 * Ap[q*kc*8 + k*8 + r] = op(A)(i0 + 8q + r, p0 + k), rows past mc zero.
 */
static void s_pack_a(int ta, const float *A, int lda, int i0, int mc, int p0, int kc,
                     float *Ap, const float *zero)
{
    for (int q = 0; q * S_MR < mc; q++) {
        float *dst = Ap + (size_t)q * kc * S_MR;
        const int rows = mc - q * S_MR < S_MR ? mc - q * S_MR : S_MR;
        const int i = i0 + q * S_MR;
        if (ta) {
            /* op(A)(i, p) = A[p*lda + i]: each k gives 8 contiguous rows */
            const __mmask8 mask = (__mmask8)((1u << rows) - 1);
            for (int k = 0; k < kc; k++) {
                const float *s = A + (size_t)(p0 + k) * lda + i;
                __m256 v = _mm256_maskz_loadu_ps(mask, s);
                _mm256_storeu_ps(dst + (size_t)k * S_MR, v);
            }
        } else {
            const float *src[8];
            for (int r = 0; r < S_MR; r++) {
                src[r] = r < rows ? A + (size_t)(i + r) * lda + p0 : zero;
            }
            s_pack_lines8(src, kc, dst, S_MR);
        }
    }
}

/*
 * Packs op(B)[p0 .. p0+kc, j0 .. j0+nc) into 32-column panels: panel q holds
 * Bp[q*kc*32 + k*32 + c] = op(B)(p0 + k, j0 + 32q + c), columns past nc zero.
 */
static void s_pack_b(int tb, const float *B, int ldb, int p0, int kc, int j0, int nc,
                     float *Bp, const float *zero)
{
    for (int q = 0; q * S_NR < nc; q++) {
        float *dst = Bp + (size_t)q * kc * S_NR;
        const int cols = nc - q * S_NR < S_NR ? nc - q * S_NR : S_NR;
        const int j = j0 + q * S_NR;
        if (!tb) {
            /* op(B)(p, j) = B[p*ldb + j]: each k gives up to 32 contiguous columns */
            const __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);
            const __mmask16 m1 =
                (__mmask16)(cols >= 32 ? 0xffff : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
            for (int k = 0; k < kc; k++) {
                const float *s = B + (size_t)(p0 + k) * ldb + j;
                _mm512_storeu_ps(dst + (size_t)k * S_NR, _mm512_maskz_loadu_ps(m0, s));
                _mm512_storeu_ps(dst + (size_t)k * S_NR + 16,
                                 _mm512_maskz_loadu_ps(m1, s + 16));
            }
        } else {
            /* op(B)(p, j) = B[j*ldb + p]: column j is a contiguous line along k */
            for (int g = 0; g < S_NR; g += 8) {
                const float *src[8];
                for (int c = 0; c < 8; c++) {
                    src[c] = g + c < cols ? B + (size_t)(j + g + c) * ldb + p0 : zero;
                }
                s_pack_lines8(src, kc, dst + g, S_NR);
            }
        }
    }
}

/*
 * C[0..m, 0..n) = alpha * (Ap panel @ Bp panel) + beta * C, m <= 8, n <= 32.
 * Ap: [kc][8], Bp: [kc][32]. beta == 0 never reads C.
 */
static void s_kernel_8x32(int kc, const float *restrict Ap, const float *restrict Bp,
                          float *C, int ldc, float alpha, float beta, int m, int n)
{
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps();
    __m512 c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
    __m512 c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps();
    __m512 c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps();
    __m512 c40 = _mm512_setzero_ps(), c41 = _mm512_setzero_ps();
    __m512 c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
    __m512 c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps();
    __m512 c70 = _mm512_setzero_ps(), c71 = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(Bp), b1 = _mm512_loadu_ps(Bp + 16);
        __m512 a;
        a = _mm512_set1_ps(Ap[0]);
        c00 = _mm512_fmadd_ps(a, b0, c00);
        c01 = _mm512_fmadd_ps(a, b1, c01);
        a = _mm512_set1_ps(Ap[1]);
        c10 = _mm512_fmadd_ps(a, b0, c10);
        c11 = _mm512_fmadd_ps(a, b1, c11);
        a = _mm512_set1_ps(Ap[2]);
        c20 = _mm512_fmadd_ps(a, b0, c20);
        c21 = _mm512_fmadd_ps(a, b1, c21);
        a = _mm512_set1_ps(Ap[3]);
        c30 = _mm512_fmadd_ps(a, b0, c30);
        c31 = _mm512_fmadd_ps(a, b1, c31);
        a = _mm512_set1_ps(Ap[4]);
        c40 = _mm512_fmadd_ps(a, b0, c40);
        c41 = _mm512_fmadd_ps(a, b1, c41);
        a = _mm512_set1_ps(Ap[5]);
        c50 = _mm512_fmadd_ps(a, b0, c50);
        c51 = _mm512_fmadd_ps(a, b1, c51);
        a = _mm512_set1_ps(Ap[6]);
        c60 = _mm512_fmadd_ps(a, b0, c60);
        c61 = _mm512_fmadd_ps(a, b1, c61);
        a = _mm512_set1_ps(Ap[7]);
        c70 = _mm512_fmadd_ps(a, b0, c70);
        c71 = _mm512_fmadd_ps(a, b1, c71);
        Ap += S_MR;
        Bp += S_NR;
    }
    const __m512 acc[8][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                              {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
    const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
    const __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int r = 0; r < m; r++) {
        float *row = C + (size_t)r * ldc;
        __m512 v0 = _mm512_mul_ps(va, acc[r][0]), v1 = _mm512_mul_ps(va, acc[r][1]);
        if (beta != 0.0f) {
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), v0);
            v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), v1);
        }
        _mm512_mask_storeu_ps(row, m0, v0);
        _mm512_mask_storeu_ps(row + 16, m1, v1);
    }
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
            for (int ic = 0; ic < M; ic += PS_GEMM_MC) {
                const int mc = M - ic < PS_GEMM_MC ? M - ic : PS_GEMM_MC;
                s_pack_a(ta, A, lda, ic, mc, pc, kc, pk->a, pk->zero);
                for (int jr = 0; jr < nc; jr += S_NR) {
                    const int n = nc - jr < S_NR ? nc - jr : S_NR;
                    const float *bp = pk->b + (size_t)(jr / S_NR) * kc * S_NR;
                    for (int ir = 0; ir < mc; ir += S_MR) {
                        const int m = mc - ir < S_MR ? mc - ir : S_MR;
                        const float *ap = pk->a + (size_t)(ir / S_MR) * kc * S_MR;
                        float *c = C + (size_t)(ic + ir) * ldc + jc + jr;
                        s_kernel_8x32(kc, ap, bp, c, ldc, alpha, beta_k, m, n);
                    }
                }
            }
        }
    }
}
