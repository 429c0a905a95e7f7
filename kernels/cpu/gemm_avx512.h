/*
 * kernels/cpu/gemm_avx512.h - private: the CPU backend's own AVX-512 sgemm.
 *
 * Used by ps_cpu_sgemm (dense.c) instead of cblas_sgemm when the CPU has
 * AVX-512F/VL, OpenBLAS runs one thread, and SHARDPS_CPU_GEMM is not "blas".
 */
#ifndef PS_KERNELS_GEMM_AVX512_H
#define PS_KERNELS_GEMM_AVX512_H

#ifdef __cplusplus
extern "C" {
#endif

/* Blocking: op(B) blocks of KC x NC, op(A) blocks of MC x KC (see the .c). */
enum { PS_GEMM_KC = 256, PS_GEMM_MC = 128, PS_GEMM_NC = 1024 };

/* Packing buffers, owned by a CPU context and sized once. */
typedef struct {
    float *a;          /* PS_GEMM_MC * PS_GEMM_KC floats */
    float *b;          /* PS_GEMM_KC * PS_GEMM_NC floats */
    const float *zero; /* PS_GEMM_KC zeros: stands in for rows past the edge */
} ps_gemm_pack_t;

/* Row-major C[M,N] = alpha op(A) op(B) + beta C (BLAS semantics), on one thread.
 * Requires AVX-512F and AVX-512VL. */
void ps_cpu_gemm_avx512(const ps_gemm_pack_t *pk, int ta, int tb, int M, int N, int K,
                        float alpha, const float *A, int lda, const float *B, int ldb,
                        float beta, float *C, int ldc);

#ifdef __cplusplus
}
#endif
#endif
