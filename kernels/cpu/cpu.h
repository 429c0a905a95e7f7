/*
 * kernels/cpu/cpu.h - private: the CPU backend's ops, shared between its files.
 *
 * Only the files of kernels/cpu/ include this; everyone else reaches these functions
 * through the ps_kernels_cpu table (kernels/kernels.h).
 */
#ifndef PS_KERNELS_CPU_H
#define PS_KERNELS_CPU_H

#include "kernels/kernels.h"
#ifdef PS_HAVE_AVX512
#include "kernels/cpu/avx512.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A CPU context: which code paths to use, and the sgemm's packing buffers. */
struct ps_kctx {
    int avx512; /* 1: the AVX-512 paths of avx512.h, 0: cblas_sgemm + portable loops */
    float xent_loss;                /* softmax_xent_queue's (or sigmoid_bce_queue's) mean loss */
    int xent_hits;                  /* and its correct rows */
    double marks[PS_KERNELS_MARKS]; /* mark(): clock readings (s); 0 = unset */
#ifdef PS_HAVE_AVX512
    ps_gemm_pack_t pack; /* the AVX-512 sgemm's buffers; owned */
#endif
};

/* dense.c */
void ps_cpu_sgemm(ps_kctx_t *ctx, int trans_a, int trans_b, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc);
void ps_cpu_bias_add(ps_kctx_t *ctx, float *y, const float *b, int N, int C);
void ps_cpu_bias_relu(ps_kctx_t *ctx, float *y, const float *b, int N, int C);
void ps_cpu_bias_grad(ps_kctx_t *ctx, const float *dy, float *db, int N, int C);
void ps_cpu_relu_fwd(ps_kctx_t *ctx, const float *x, float *y, size_t n);
void ps_cpu_relu_bwd(ps_kctx_t *ctx, const float *y, const float *dy, float *dx, size_t n);
float ps_cpu_softmax_xent(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                          int C, float *dlogits, int *correct);
/* sigmoid_bce, and the rows whose prediction (z > 0) equals the label in
 * *correct when not NULL (for sigmoid_bce_queue) */
float ps_cpu_sigmoid_bce_hits(ps_kctx_t *ctx, const float *logits, const uint8_t *labels,
                              int N, float *dlogits, int *correct);
float ps_cpu_sigmoid_bce(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                         float *dlogits);
void ps_cpu_sgd_step(ps_kctx_t *ctx, float lr, float momentum, float weight_decay, float *w,
                     float *v, const float *grad, float scale, size_t n);

/* embed.c */
void ps_cpu_embed_gather(ps_kctx_t *ctx, const float *rows, int E, const uint32_t *idx, int n,
                         int F, float *x, int ldx);
void ps_cpu_embed_grad(ps_kctx_t *ctx, const float *dx, int ldx, int E, int F,
                       const uint32_t *offsets, const uint32_t *order, int U, float *drows);

/* conv.c */
size_t ps_cpu_conv2d_workspace(const ps_conv_shape_t *s);
void ps_cpu_conv2d_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                       const float *w, const float *b, float *y, int relu, void *ws);
void ps_cpu_conv2d_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                       const float *w, const float *dy, float *dx, float *dw, float *db,
                       void *ws);
void ps_cpu_conv2d_pool_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                            const float *w, const float *b, float *p, uint8_t *arg,
                            void *ws);
void ps_cpu_conv2d_pool_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                            const float *w, const float *dp, const uint8_t *arg,
                            const float *p, float *dx, float *dw, float *db, void *ws);
void ps_cpu_maxpool2_fwd(ps_kctx_t *ctx, const float *x, float *y, uint8_t *arg, int NC,
                         int H, int W);
void ps_cpu_maxpool2_bwd(ps_kctx_t *ctx, const float *dy, const uint8_t *arg,
                         const float *y, float *dx, int NC, int H, int W);

#ifdef __cplusplus
}
#endif
#endif
