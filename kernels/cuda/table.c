/*
 * kernels/cuda/table.c - the CUDA backend table (cuBLAS + .cu kernels).
 *
 * Plain C: the ops are C functions defined in the .cu files of this folder
 * (prototypes in cuda.h). Device memory is not host memory (host_is_backend
 * = 0), so models copy parameters, inputs and gradients themselves.
 * select.c finds this table through ps_kernels_cuda_table().
 */
#include "kernels/cuda/cuda.h"

const ps_kernels_t ps_kernels_cuda = {
    .name = "cuda",
    .host_is_backend = 0,
    .probe = ps_cuda_probe,
    .ctx_new = ps_cuda_ctx_new,
    .ctx_destroy = ps_cuda_ctx_destroy,
    .alloc = ps_cuda_alloc,
    .free = ps_cuda_free,
    .host_alloc = ps_cuda_host_alloc,
    .host_free = ps_cuda_host_free,
    .copy_h2d = ps_cuda_copy_h2d,
    .copy_d2h = ps_cuda_copy_d2h,
    .copy_d2d = ps_cuda_copy_d2d,
    .copy_h2d_async = ps_cuda_copy_h2d_async,
    .copy_d2h_async = ps_cuda_copy_d2h_async,
    .copy_wait = ps_cuda_copy_wait,
    .zero = ps_cuda_zero,
    .sync = ps_cuda_sync,
    .sgemm = ps_cuda_sgemm,
    .bias_add = ps_cuda_bias_add,
    .bias_relu = ps_cuda_bias_relu,
    .bias_grad = ps_cuda_bias_grad,
    .relu_fwd = ps_cuda_relu_fwd,
    .relu_bwd = ps_cuda_relu_bwd,
    .softmax_xent = ps_cuda_softmax_xent,
    .sigmoid_bce = ps_cuda_sigmoid_bce,
    .conv2d_workspace = ps_cuda_conv2d_workspace,
    .conv2d_fwd = ps_cuda_conv2d_fwd,
    .conv2d_bwd = ps_cuda_conv2d_bwd,
    .conv2d_pool_fwd = ps_cuda_conv2d_pool_fwd,
    .conv2d_pool_bwd = ps_cuda_conv2d_pool_bwd,
    .maxpool2_fwd = ps_cuda_maxpool2_fwd,
    .maxpool2_bwd = ps_cuda_maxpool2_bwd,
    .sgd_step = ps_cuda_sgd_step,
    .devices = ps_cuda_devices,
    .use_device = ps_cuda_use_device,
    .gather_u8 = ps_cuda_gather_u8,
    .softmax_xent_queue = ps_cuda_softmax_xent_queue,
    .xent_result = ps_cuda_xent_result,
    .sigmoid_bce_queue = ps_cuda_sigmoid_bce_queue,
    .embed_gather = ps_cuda_embed_gather,
    .embed_grad = ps_cuda_embed_grad,
    .graph_begin = ps_cuda_graph_begin,
    .graph_end = ps_cuda_graph_end,
    .graph_launch = ps_cuda_graph_launch,
    .graph_destroy = ps_cuda_graph_destroy,
    .set_tf32 = ps_cuda_set_tf32,
    .mark = ps_cuda_mark,
    .mark_ms = ps_cuda_mark_ms,
};
