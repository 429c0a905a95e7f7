/*
 * kernels/cuda/cuda.h - private: the CUDA backend's ops, as plain C prototypes.
 *
 * table.c (plain C) builds the ps_kernels_cuda table from these; the .cu files
 * of kernels/cuda/ define them. No CUDA types appear here, so the table needs
 * no CUDA headers. Everyone else reaches these through ps_kernels_cuda_table()
 * or ps_kernels_select() (kernels/kernels.h).
 */
#ifndef PS_KERNELS_CUDA_CUDA_H
#define PS_KERNELS_CUDA_CUDA_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mem.cu: probe, contexts, memory, copies */
int ps_cuda_probe(char *why, size_t whylen);
int ps_cuda_ctx_new(ps_kctx_t **out);
void ps_cuda_ctx_destroy(ps_kctx_t **ctx);
void *ps_cuda_alloc(size_t bytes);
void ps_cuda_free(void *d_p);
void *ps_cuda_host_alloc(size_t bytes);
void ps_cuda_host_free(void *p);
int ps_cuda_copy_h2d(ps_kctx_t *ctx, void *d_dst, const void *src, size_t bytes);
int ps_cuda_copy_d2h(ps_kctx_t *ctx, void *dst, const void *d_src, size_t bytes);
int ps_cuda_copy_d2d(ps_kctx_t *ctx, void *d_dst, const void *d_src, size_t bytes);
int ps_cuda_copy_h2d_async(ps_kctx_t *ctx, void *d_dst, const void *src, size_t bytes);
int ps_cuda_copy_d2h_async(ps_kctx_t *ctx, void *dst, const void *d_src, size_t bytes);
int ps_cuda_copy_wait(ps_kctx_t *ctx, int pending);
void ps_cuda_zero(ps_kctx_t *ctx, void *d_p, size_t bytes);
int ps_cuda_sync(ps_kctx_t *ctx);

/* device.cu: which GPU (kernels/device.h chooses) */
int ps_cuda_devices(void);
int ps_cuda_use_device(int index, char *name, size_t namelen);

/* dense.cu: cuBLAS sgemm, bias, ReLU, softmax cross-entropy, logistic loss, SGD */
void ps_cuda_sgemm(ps_kctx_t *ctx, int trans_a, int trans_b, int M, int N, int K,
                   float alpha, const float *d_A, int lda, const float *d_B, int ldb,
                   float beta, float *d_C, int ldc);
void ps_cuda_bias_add(ps_kctx_t *ctx, float *d_y, const float *d_b, int N, int C);
void ps_cuda_bias_relu(ps_kctx_t *ctx, float *d_y, const float *d_b, int N, int C);
void ps_cuda_bias_grad(ps_kctx_t *ctx, const float *d_dy, float *d_db, int N, int C);
void ps_cuda_relu_fwd(ps_kctx_t *ctx, const float *d_x, float *d_y, size_t n);
void ps_cuda_relu_bwd(ps_kctx_t *ctx, const float *d_y, const float *d_dy, float *d_dx,
                      size_t n);
float ps_cuda_softmax_xent(ps_kctx_t *ctx, const float *d_logits, const uint8_t *d_labels,
                           int N, int C, float *d_dlogits, int *correct);
void ps_cuda_sgd_step(ps_kctx_t *ctx, float lr, float momentum, float weight_decay,
                      float *d_w, float *d_v, const float *d_grad, float scale, size_t n);

void ps_cuda_gather_u8(ps_kctx_t *ctx, const uint8_t *d_pixels, const uint8_t *d_labels,
                       size_t F, const uint32_t *d_idx, int n, float a, float c, float *d_x,
                       uint8_t *d_y);
void ps_cuda_softmax_xent_queue(ps_kctx_t *ctx, const float *d_logits,
                                const uint8_t *d_labels, int N, int C, float *d_dlogits);
float ps_cuda_xent_result(ps_kctx_t *ctx, int N, int *correct);
float ps_cuda_sigmoid_bce(ps_kctx_t *ctx, const float *d_logits, const uint8_t *d_labels,
                          int N, float *d_dlogits);
void ps_cuda_sigmoid_bce_queue(ps_kctx_t *ctx, const float *d_logits, const uint8_t *d_labels,
                               int N, float *d_dlogits);

/* embed.cu: the gather of embedding rows and its per-row gradient */
void ps_cuda_embed_gather(ps_kctx_t *ctx, const float *d_rows, int E, const uint32_t *d_idx,
                          int n, int F, float *d_x, int ldx);
void ps_cuda_embed_grad(ps_kctx_t *ctx, const float *d_dx, int ldx, int E, int F,
                        const uint32_t *d_offsets, const uint32_t *d_order, int U,
                        float *d_drows);

/* lt.cu: dense layers as cuBLASLt GEMMs with fused epilogues */
size_t ps_cuda_dense_mask_bytes(int N, int O);
int ps_cuda_dense_fwd(ps_kctx_t *ctx, const float *d_x, const float *d_w, const float *d_b,
                      float *d_y, void *d_mask, int N, int C, int O, int relu);
int ps_cuda_dense_wgrad(ps_kctx_t *ctx, const float *d_x, const float *d_dy, float *d_dw,
                        float *d_db, int N, int C, int O);
int ps_cuda_dense_dgrad(ps_kctx_t *ctx, const float *d_dy, const float *d_w,
                        const void *d_mask, float *d_dx, int N, int C, int O);

/* graph.cu: recorded steps (CUDA graphs), TF32, timing events */
int ps_cuda_graph_begin(ps_kctx_t *ctx);
int ps_cuda_graph_end(ps_kctx_t *ctx, ps_kgraph_t **out);
int ps_cuda_graph_launch(ps_kctx_t *ctx, ps_kgraph_t *g);
void ps_cuda_graph_destroy(ps_kgraph_t **g);
int ps_cuda_graph_nodes(const ps_kgraph_t *g);
int ps_cuda_set_tf32(ps_kctx_t *ctx, int on);
int ps_cuda_mark(ps_kctx_t *ctx, int slot, int copy);
double ps_cuda_mark_ms(ps_kctx_t *ctx, int from, int to);

/* dnn.cu: cuDNN for the convolutions, where built */
int ps_cuda_set_conv(ps_kctx_t *ctx, int cudnn);

/* conv.cu: im2col + cuBLAS convolution, 2x2 max pooling */
size_t ps_cuda_conv2d_workspace(const ps_conv_shape_t *s);
void ps_cuda_conv2d_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                        const float *d_w, const float *d_b, float *d_y, int relu,
                        void *d_ws);
void ps_cuda_conv2d_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                        const float *d_w, const float *d_dy, float *d_dx, float *d_dw,
                        float *d_db, void *d_ws);
void ps_cuda_maxpool2_fwd(ps_kctx_t *ctx, const float *d_x, float *d_y, uint8_t *d_arg,
                          int NC, int H, int W);
void ps_cuda_maxpool2_bwd(ps_kctx_t *ctx, const float *d_dy, const uint8_t *d_arg,
                          const float *d_y, float *d_dx, int NC, int H, int W);
void ps_cuda_conv2d_pool_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                             const float *d_w, const float *d_b, float *d_p, uint8_t *d_arg,
                             void *ws);
void ps_cuda_conv2d_pool_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                             const float *d_w, const float *d_dp, const uint8_t *d_arg,
                             const float *d_p, float *d_dx, float *d_dw, float *d_db, void *ws);

#ifdef __cplusplus
}
#endif
#endif
