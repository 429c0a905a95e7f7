/*
 * kernels/cuda/dnn.cu - the convolutions' products through cuDNN's legacy
 * API, in a build that has cuDNN (-Dcudnn, PS_HAVE_CUDNN) and a context that
 * asked for it (set_conv). conv.cu asks here first and runs im2col + cuBLAS
 * whenever the answer is PS_ENOTSUP: cuDNN off or not built, or no
 * deterministic algorithm for the shape.
 *
 *   forward          y  = x (*) w            cudnnConvolutionForward
 *   weight gradient  dw = x (*) dy           cudnnConvolutionBackwardFilter
 *   input gradient   dx = dy (*)^T w         cudnnConvolutionBackwardData
 * (cross-correlation, NCHW, as torch.nn.Conv2d). The bias, ReLU, pooling and
 * bias gradient stay conv.cu's kernels, so only the products change.
 *
 * A plan per shape (N, C, H, W, O, K, pad) and TF32 switch holds the tensor,
 * filter and convolution descriptors and one algorithm per direction, from
 * cudnnGetConvolution*Algorithm_v7's heuristic list (host-side: it measures
 * nothing, so it may run inside a recording). It is made the first time the
 * shape is seen and kept in the context, a refusal too, so the forward and
 * its backward always take the same path. All three run in the context's
 * fixed cuDNN workspace, allocated by set_conv before any recording; an
 * algorithm needing more is passed over. A step only launches.
 *
 * Determinism: an algorithm is taken only when its perf record says
 * CUDNN_DETERMINISTIC. Every forward algorithm is; backward data ALGO_0 and
 * backward filter ALGO_0 and ALGO_3 add partial sums with atomics, in an
 * order that changes run to run, and are passed over; ALGO_1, the FFT and
 * the Winograd ones qualify. So a job gets the same bits every run, as the
 * im2col path does (not the same bits as it: cuDNN sums in its own order).
 * Math: FP32 FMA kernels (CUDNN_FMA_MATH) unless TF32 is on, as cuBLAS's.
 */
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/cuda/cuda_impl.h"

#ifdef PS_HAVE_CUDNN
#include <cudnn.h>

/* The context's cuDNN workspace; an algorithm needing more is passed over. */
#define S_WS_BYTES ((size_t)64 << 20)
/* Plans kept per context: a model's layers times its batch sizes. */
#define S_PLANS 16

typedef struct {
    int used;                 /* 1: this slot holds a plan */
    int ok;                   /* 1: every direction has an algorithm; 0: refused */
    ps_conv_shape_t s;        /* the key: the shape ... */
    int tf32;                 /* ... and the context's TF32 switch */
    cudnnTensorDescriptor_t x, y;      /* x[N,C,H,W], y[N,O,HO,WO]; owned */
    cudnnFilterDescriptor_t w;         /* w[O,C,K,K]; owned */
    cudnnConvolutionDescriptor_t conv; /* pad, stride 1; owned */
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
} s_plan_t;

struct ps_cuda_dnn {
    int on;            /* set_conv's choice */
    cudnnHandle_t h;   /* bound to the context's compute stream; owned */
    void *d_ws;        /* [S_WS_BYTES]; owned */
    s_plan_t plans[S_PLANS];
};

/* Logs a failed cuDNN call as ps_cuda_report does (written here, through
 * the logger alone, so this file and mem.cu, which destroys the state,
 * lean on each other in one direction only). */
static void s_report(const char *file, int line, const char *expr, const char *desc)
{
    ps_log_err("%s:%d: %s: %s; hint: check the cuDNN install, or run with --conv gemm",
               file, line, expr, desc);
}

/* cuDNN calls inside a step: a failure is our bug or a dead GPU. */
#define S_DNN_CHECK(call)                                                                  \
    do {                                                                                   \
        cudnnStatus_t ps_d_ = (call);                                                      \
        if (ps_d_ != CUDNN_STATUS_SUCCESS) {                                               \
            s_report(__FILE__, __LINE__, #call, cudnnGetErrorString(ps_d_));               \
            exit(EXIT_FAILURE);                                                            \
        }                                                                                  \
    } while (0)

static void s_plan_fini(s_plan_t *p)
{
    if (p->conv) {
        (void)cudnnDestroyConvolutionDescriptor(p->conv);
    }
    if (p->w) {
        (void)cudnnDestroyFilterDescriptor(p->w);
    }
    if (p->y) {
        (void)cudnnDestroyTensorDescriptor(p->y);
    }
    if (p->x) {
        (void)cudnnDestroyTensorDescriptor(p->x);
    }
    memset(p, 0, sizeof(*p));
}

void ps_cuda_dnn_destroy(struct ps_cuda_dnn **d)
{
    if (!d || !*d) {
        return;
    }
    for (int i = 0; i < S_PLANS; i++) {
        s_plan_fini(&(*d)->plans[i]);
    }
    if ((*d)->h) {
        (void)cudnnDestroy((*d)->h);
    }
    if ((*d)->d_ws) {
        (void)cudaFree((*d)->d_ws);
    }
    free(*d);
    *d = NULL;
}

int ps_cuda_set_conv(ps_kctx_t *ctx, int cudnn)
{
    if (ctx->dnn || !cudnn) {
        if (ctx->dnn) {
            ctx->dnn->on = cudnn != 0;
        }
        return 0;
    }
    if (ctx->recording) {
        return PS_ESTATE; /* the handle and workspace are device allocations */
    }
    struct ps_cuda_dnn *d = (struct ps_cuda_dnn *)calloc(1, sizeof(*d));
    if (!d) {
        return PS_ENOMEM;
    }
    cudnnStatus_t st = cudnnCreate(&d->h);
    if (st != CUDNN_STATUS_SUCCESS) {
        s_report(__FILE__, __LINE__, "cudnnCreate(&d->h)", cudnnGetErrorString(st));
        free(d);
        return st == CUDNN_STATUS_ALLOC_FAILED ? PS_ENOMEM : PS_ENODEV;
    }
    if (cudnnSetStream(d->h, ctx->stream) != CUDNN_STATUS_SUCCESS ||
        cudaMalloc(&d->d_ws, S_WS_BYTES) != cudaSuccess) {
        s_report(__FILE__, __LINE__, "cudaMalloc(&d->d_ws, S_WS_BYTES)", "out of memory");
        ps_cuda_dnn_destroy(&d);
        return PS_ENOMEM;
    }
    d->on = 1;
    ctx->dnn = d;
    return 0;
}

/* Plain FP32 takes no tensor-op algorithm (the descriptor's CUDNN_FMA_MATH
 * then governs the run); TF32 anything but FP16 conversion. */
static int s_math_ok(cudnnMathType_t m, int tf32)
{
    return tf32 ? m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                : m == CUDNN_FMA_MATH || m == CUDNN_DEFAULT_MATH;
}

/* The first deterministic algorithm of a heuristic list (best first) that
 * fits the workspace in the wanted math; -1 when none does. T is one of the
 * three cudnnConvolution*AlgoPerf_t. */
template <typename T>
static int s_first(const T *perf, int n, int tf32)
{
    for (int i = 0; i < n; i++) {
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            perf[i].determinism == CUDNN_DETERMINISTIC && perf[i].memory <= S_WS_BYTES &&
            s_math_ok(perf[i].mathType, tf32)) {
            return i;
        }
    }
    return -1;
}

/* Descriptors of p's shape; 0, or 1 when cuDNN refuses one. */
static int s_describe(s_plan_t *p)
{
    const ps_conv_shape_t *s = &p->s;
    const int HO = s->H + 2 * s->pad - s->K + 1, WO = s->W + 2 * s->pad - s->K + 1;
    const cudnnMathType_t math = p->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    return cudnnCreateTensorDescriptor(&p->x) || cudnnCreateTensorDescriptor(&p->y) ||
           cudnnCreateFilterDescriptor(&p->w) || cudnnCreateConvolutionDescriptor(&p->conv) ||
           cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->N, s->C,
                                      s->H, s->W) ||
           cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->N, s->O,
                                      HO, WO) ||
           cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->O, s->C,
                                      s->K, s->K) ||
           cudnnSetConvolution2dDescriptor(p->conv, s->pad, s->pad, 1, 1, 1, 1,
                                           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ||
           cudnnSetConvolutionMathType(p->conv, math);
}

/* Fills p's descriptors and algorithms; p->ok says whether all were found. */
static void s_plan_make(struct ps_cuda_dnn *d, s_plan_t *p)
{
    p->used = 1;
    if (s_describe(p)) {
        return;
    }
    cudnnConvolutionFwdAlgoPerf_t f[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int nf = 0, nbf = 0, nbd = 0;
    if (cudnnGetConvolutionForwardAlgorithm_v7(d->h, p->x, p->w, p->conv, p->y,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, f) ||
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            d->h, p->x, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nbf, bf) ||
        cudnnGetConvolutionBackwardDataAlgorithm_v7(
            d->h, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nbd, bd)) {
        return;
    }
    const int kf = s_first(f, nf, p->tf32), kbf = s_first(bf, nbf, p->tf32);
    const int kbd = s_first(bd, nbd, p->tf32);
    if (kf < 0 || kbf < 0 || kbd < 0) {
        ps_log_debug("cuDNN has no deterministic algorithm for a convolution of %dx%dx%dx%d "
                     "by %dx%dx%d: im2col runs it",
                     p->s.N, p->s.C, p->s.H, p->s.W, p->s.O, p->s.K, p->s.K);
        return;
    }
    p->fwd = f[kf].algo;
    p->bwd_filter = bf[kbf].algo;
    p->bwd_data = bd[kbd].algo;
    p->ok = 1;
}

static int s_same(const ps_conv_shape_t *a, const ps_conv_shape_t *b)
{
    return a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W && a->O == b->O &&
           a->K == b->K && a->pad == b->pad;
}

/* The plan of s, made on first sight; NULL when cuDNN is off or refused s,
 * or past the cache (then im2col runs the shape, forward and backward). */
static s_plan_t *s_plan(ps_kctx_t *ctx, const ps_conv_shape_t *s)
{
    struct ps_cuda_dnn *d = ctx->dnn;
    if (!d || !d->on) {
        return NULL;
    }
    for (int i = 0; i < S_PLANS; i++) {
        s_plan_t *p = &d->plans[i];
        if (!p->used) {
            p->s = *s;
            p->tf32 = ctx->tf32;
            s_plan_make(d, p);
            return p->ok ? p : NULL;
        }
        if (s_same(&p->s, s) && p->tf32 == ctx->tf32) {
            return p->ok ? p : NULL;
        }
    }
    return NULL;
}

int ps_cuda_dnn_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                    const float *d_w, float *d_y)
{
    const s_plan_t *p = s_plan(ctx, s);
    if (!p) {
        return PS_ENOTSUP;
    }
    const float one = 1.0f, zero = 0.0f;
    struct ps_cuda_dnn *d = ctx->dnn;
    S_DNN_CHECK(cudnnConvolutionForward(d->h, &one, p->x, d_x, p->w, d_w, p->conv, p->fwd,
                                        d->d_ws, S_WS_BYTES, &zero, p->y, d_y));
    return 0;
}

int ps_cuda_dnn_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                    const float *d_w, const float *d_dy, float *d_dx, float *d_dw)
{
    const s_plan_t *p = s_plan(ctx, s);
    if (!p) {
        return PS_ENOTSUP;
    }
    const float one = 1.0f, zero = 0.0f;
    struct ps_cuda_dnn *d = ctx->dnn;
    S_DNN_CHECK(cudnnConvolutionBackwardFilter(d->h, &one, p->x, d_x, p->y, d_dy, p->conv,
                                               p->bwd_filter, d->d_ws, S_WS_BYTES, &zero,
                                               p->w, d_dw));
    if (d_dx) {
        S_DNN_CHECK(cudnnConvolutionBackwardData(d->h, &one, p->w, d_w, p->y, d_dy, p->conv,
                                                 p->bwd_data, d->d_ws, S_WS_BYTES, &zero,
                                                 p->x, d_dx));
    }
    return 0;
}

#else /* no cuDNN in this build: im2col runs every convolution */

void ps_cuda_dnn_destroy(struct ps_cuda_dnn **d)
{
    (void)d;
}

int ps_cuda_set_conv(ps_kctx_t *ctx, int cudnn)
{
    (void)ctx;
    return cudnn ? PS_ENOTSUP : 0;
}

int ps_cuda_dnn_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                    const float *d_w, float *d_y)
{
    (void)ctx, (void)s, (void)d_x, (void)d_w, (void)d_y;
    return PS_ENOTSUP;
}

int ps_cuda_dnn_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                    const float *d_w, const float *d_dy, float *d_dx, float *d_dw)
{
    (void)ctx, (void)s, (void)d_x, (void)d_w, (void)d_dy, (void)d_dx, (void)d_dw;
    return PS_ENOTSUP;
}

#endif
