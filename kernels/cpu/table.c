/*
 * kernels/cpu/table.c - the CPU backend table: memory, copies, and the ops.
 *
 * On the CPU backend memory is host memory (host_is_backend = 1): alloc is a
 * 64-byte aligned malloc, copies (the async ones too) are memcpy done on
 * return, so copy_wait and sync do nothing. The context
 * holds the choice of sgemm (our AVX-512 one, or OpenBLAS) and its packing
 * buffers, made once here so the ops never allocate or probe.
 */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/clock.h"
#include "common/error.h"
#include "kernels/cpu/cpu.h"
#include "kernels/threads.h"

static int s_probe(char *why, size_t whylen)
{
    if (why && whylen) {
        why[0] = '\0';
    }
    return 0;
}

static void s_ctx_destroy(ps_kctx_t **ctx)
{
    if (!ctx || !*ctx) {
        return;
    }
#ifdef PS_HAVE_AVX512
    free((*ctx)->pack.a);
    free((*ctx)->pack.b);
    free((void *)(*ctx)->pack.zero);
#endif
    free(*ctx);
    *ctx = NULL;
}

/*
 * The AVX-512 paths (our sgemm, im2col, pooling) are used when they were
 * built, the CPU has AVX-512F/VL/BW, OpenBLAS is limited to one thread (our
 * sgemm is single-threaded; OpenBLAS's threads win beyond that), and the
 * choice (kernels/threads.h, a worker's --cpu-gemm) is not blas. avx512
 * forces them on (where the CPU has them) whatever the thread count.
 */
static int s_want_avx512(void)
{
#ifdef PS_HAVE_AVX512
    const ps_cpu_gemm_t gemm = ps_kernels_cpu_gemm();
    const int cpu = __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512bw");
    if (gemm == PS_CPU_GEMM_BLAS) {
        return 0;
    }
    if (gemm == PS_CPU_GEMM_AVX512) {
        return cpu;
    }
    return cpu && openblas_get_num_threads() == 1;
#else
    return 0;
#endif
}

static int s_ctx_new(ps_kctx_t **out)
{
    ps_kctx_t *ctx = calloc(1, sizeof(*ctx));
    *out = NULL;
    if (!ctx) {
        return PS_ENOMEM;
    }
    ctx->avx512 = s_want_avx512();
#ifdef PS_HAVE_AVX512
    if (ctx->avx512) {
        ctx->pack.a = aligned_alloc(64, sizeof(float) * 8 * PS_GEMM_KC);
        ctx->pack.b = aligned_alloc(64, sizeof(float) * PS_GEMM_KC * PS_GEMM_NC);
        float *zero = calloc(PS_GEMM_KC, sizeof(float));
        ctx->pack.zero = zero;
        if (!ctx->pack.a || !ctx->pack.b || !zero) {
            s_ctx_destroy(&ctx);
            return PS_ENOMEM;
        }
    }
#endif
    *out = ctx;
    return 0;
}

static void *s_alloc(size_t bytes)
{
    /* aligned_alloc wants a multiple of the alignment, and a non-zero size */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}

static void s_free(void *p)
{
    free(p);
}

static int s_copy_h2d(ps_kctx_t *ctx, void *d_dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes && d_dst != src) {
        memmove(d_dst, src, bytes);
    }
    return 0;
}

static int s_copy_d2h(ps_kctx_t *ctx, void *dst, const void *d_src, size_t bytes)
{
    return s_copy_h2d(ctx, dst, d_src, bytes);
}

static void s_zero(ps_kctx_t *ctx, void *d_p, size_t bytes)
{
    (void)ctx;
    if (bytes) {
        memset(d_p, 0, bytes);
    }
}

static int s_sync(ps_kctx_t *ctx)
{
    (void)ctx;
    return 0;
}

static int s_copy_wait(ps_kctx_t *ctx, int pending)
{
    (void)pending;
    return s_sync(ctx);
}

/* x[i] = pixels[idx[i]] * a + c, y[i] = labels[idx[i]] (kernels.h gather_u8):
 * the conversion of worker/data.c, product and sum rounded apart. */
static void s_gather_u8(ps_kctx_t *ctx, const uint8_t *pixels, const uint8_t *labels,
                        size_t F, const uint32_t *idx, int n, float a, float c, float *x,
                        uint8_t *y)
{
    (void)ctx;
    for (int i = 0; i < n; i++) {
        const uint8_t *p = pixels + (size_t)idx[i] * F;
        float *xi = x + (size_t)i * F;
        for (size_t f = 0; f < F; f++) {
            xi[f] = (float)p[f] * a + c;
        }
        y[i] = labels[idx[i]];
    }
}

static void s_xent_queue(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                         int C, float *dlogits)
{
    ctx->xent_loss = ps_cpu_softmax_xent(ctx, logits, labels, N, C, dlogits, &ctx->xent_hits);
}

static void s_bce_queue(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                        float *dlogits)
{
    ctx->xent_loss = ps_cpu_sigmoid_bce_hits(ctx, logits, labels, N, dlogits, &ctx->xent_hits);
}

static float s_xent_result(ps_kctx_t *ctx, int N, int *correct)
{
    (void)N;
    if (correct) {
        *correct = ctx->xent_hits;
    }
    return ctx->xent_loss;
}

/* No graphs on the CPU: there is no launch overhead to save. */
static int s_graph_begin(ps_kctx_t *ctx)
{
    (void)ctx;
    return PS_ENOTSUP;
}

static int s_graph_end(ps_kctx_t *ctx, ps_kgraph_t **out)
{
    (void)ctx;
    *out = NULL;
    return PS_ENOTSUP;
}

static int s_graph_launch(ps_kctx_t *ctx, ps_kgraph_t *g)
{
    (void)ctx;
    (void)g;
    return PS_ENOTSUP;
}

static int s_graph_nodes(const ps_kgraph_t *g)
{
    (void)g;
    return PS_ENOTSUP;
}

/* No fused dense layers: OpenBLAS has no epilogues, and the separate ops
 * cost the CPU no launches. */
static size_t s_dense_mask_bytes(int N, int O)
{
    (void)N;
    (void)O;
    return 0;
}

static int s_dense_fwd(ps_kctx_t *ctx, const float *x, const float *w, const float *b,
                       float *y, void *mask, int N, int C, int O, int relu)
{
    (void)ctx, (void)x, (void)w, (void)b, (void)y, (void)mask, (void)N, (void)C, (void)O;
    (void)relu;
    return PS_ENOTSUP;
}

static int s_dense_wgrad(ps_kctx_t *ctx, const float *x, const float *dy, float *dw,
                         float *db, int N, int C, int O)
{
    (void)ctx, (void)x, (void)dy, (void)dw, (void)db, (void)N, (void)C, (void)O;
    return PS_ENOTSUP;
}

static int s_dense_dgrad(ps_kctx_t *ctx, const float *dy, const float *w, const void *mask,
                         float *dx, int N, int C, int O)
{
    (void)ctx, (void)dy, (void)w, (void)mask, (void)dx, (void)N, (void)C, (void)O;
    return PS_ENOTSUP;
}

static void s_graph_destroy(ps_kgraph_t **g)
{
    if (g) {
        *g = NULL;
    }
}

/* set_tf32 and set_conv: the CPU has neither TF32 nor cuDNN, so only 0. */
static int s_no_mode(ps_kctx_t *ctx, int on)
{
    (void)ctx;
    return on ? PS_ENOTSUP : 0;
}

static int s_mark(ps_kctx_t *ctx, int slot, int copy)
{
    (void)copy; /* one stream of work: the caller's thread */
    if (slot < 0 || slot >= PS_KERNELS_MARKS) {
        return PS_EINVAL;
    }
    ctx->marks[slot] = ps_now();
    return 0;
}

static double s_mark_ms(ps_kctx_t *ctx, int from, int to)
{
    if (from < 0 || to < 0 || from >= PS_KERNELS_MARKS || to >= PS_KERNELS_MARKS ||
        ctx->marks[from] == 0 || ctx->marks[to] == 0) {
        return -1.0;
    }
    return (ctx->marks[to] - ctx->marks[from]) * 1e3;
}

const ps_kernels_t ps_kernels_cpu = {
    .name = "cpu",
    .host_is_backend = 1,
    .probe = s_probe,
    .ctx_new = s_ctx_new,
    .ctx_destroy = s_ctx_destroy,
    .alloc = s_alloc,
    .free = s_free,
    .host_alloc = s_alloc,
    .host_free = s_free,
    .copy_h2d = s_copy_h2d,
    .copy_d2h = s_copy_d2h,
    .copy_d2d = s_copy_h2d,
    .copy_h2d_async = s_copy_h2d,
    .copy_d2h_async = s_copy_d2h,
    .copy_wait = s_copy_wait,
    .zero = s_zero,
    .sync = s_sync,
    .sgemm = ps_cpu_sgemm,
    .bias_add = ps_cpu_bias_add,
    .bias_relu = ps_cpu_bias_relu,
    .bias_grad = ps_cpu_bias_grad,
    .relu_fwd = ps_cpu_relu_fwd,
    .relu_bwd = ps_cpu_relu_bwd,
    .dense_mask_bytes = s_dense_mask_bytes,
    .dense_fwd = s_dense_fwd,
    .dense_wgrad = s_dense_wgrad,
    .dense_dgrad = s_dense_dgrad,
    .softmax_xent = ps_cpu_softmax_xent,
    .sigmoid_bce = ps_cpu_sigmoid_bce,
    .conv2d_workspace = ps_cpu_conv2d_workspace,
    .conv2d_fwd = ps_cpu_conv2d_fwd,
    .conv2d_bwd = ps_cpu_conv2d_bwd,
    .conv2d_pool_fwd = ps_cpu_conv2d_pool_fwd,
    .conv2d_pool_bwd = ps_cpu_conv2d_pool_bwd,
    .maxpool2_fwd = ps_cpu_maxpool2_fwd,
    .maxpool2_bwd = ps_cpu_maxpool2_bwd,
    .sgd_step = ps_cpu_sgd_step,
    .gather_u8 = s_gather_u8,
    .softmax_xent_queue = s_xent_queue,
    .xent_result = s_xent_result,
    .sigmoid_bce_queue = s_bce_queue,
    .embed_gather = ps_cpu_embed_gather,
    .embed_grad = ps_cpu_embed_grad,
    .graph_begin = s_graph_begin,
    .graph_end = s_graph_end,
    .graph_launch = s_graph_launch,
    .graph_destroy = s_graph_destroy,
    .graph_nodes = s_graph_nodes,
    .set_tf32 = s_no_mode,
    .set_conv = s_no_mode,
    .mark = s_mark,
    .mark_ms = s_mark_ms,
};
