/*
 * kernels/cpu/avx512.h - private: the CPU backend's AVX-512 code paths.
 *
 * An sgemm (gemm_avx512.c) used instead of cblas_sgemm, and im2col, col2im and
 * pooling (conv_avx512.c) used instead of the portable loops of conv.c, when
 * the CPU has AVX-512F/VL/BW, OpenBLAS runs one thread, and the sgemm choice
 * (kernels/threads.h) is not blas (decided once per context; see table.c). Same results as the
 * portable paths up to float summation order.
 */
#ifndef PS_KERNELS_AVX512_H
#define PS_KERNELS_AVX512_H

#include <stdint.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocking: op(B) is packed in blocks of KC x NC (see the .c). */
enum { PS_GEMM_KC = 256, PS_GEMM_NC = 512 };

/* Packing buffers, owned by a CPU context and sized once. */
typedef struct {
    float *a;          /* 8 * PS_GEMM_KC floats: a short last panel of A^T */
    float *b;          /* PS_GEMM_KC * PS_GEMM_NC floats */
    const float *zero; /* PS_GEMM_KC zeros: stands in for rows past the edge */
} ps_gemm_pack_t;

/* Row-major C[M,N] = alpha op(A) op(B) + beta C (BLAS semantics), on one thread.
 * Requires AVX-512F and AVX-512VL. */
void ps_cpu_gemm_avx512(const ps_gemm_pack_t *pk, int ta, int tb, int M, int N, int K,
                        float alpha, const float *A, int lda, const float *B, int ldb,
                        float beta, float *C, int ldc);

/* col[C*K*K, HO*WO] = im2col(x[C,H,W]) for one image (see conv.c). Returns 0,
 * or -1 without touching col for shapes it does not handle (W, WO > 64 or
 * K > 16): the caller then uses the portable loop. */
int ps_cpu_im2col_avx512(const ps_conv_shape_t *s, const float *x, float *col);
/* dx[C,H,W] = col2im(dcol) for one image, overwriting dx. Returns 0, or -1
 * as ps_cpu_im2col_avx512. */
int ps_cpu_col2im_avx512(const ps_conv_shape_t *s, const float *dcol, float *dx);
/* The maxpool2 ops of kernels.h, without the context argument. */
void ps_cpu_maxpool2_fwd_avx512(const float *x, float *y, uint8_t *arg, int NC, int H,
                                int W);
void ps_cpu_maxpool2_bwd_avx512(const float *dy, const uint8_t *arg, const float *y,
                                float *dx, int NC, int H, int W);

#ifdef __cplusplus
}
#endif
#endif
