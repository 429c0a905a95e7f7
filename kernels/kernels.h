/*
 * kernels/kernels.h - the compute backend interface: one const table of ops.
 *
 * A backend (ps_kernels_cpu: OpenBLAS + plain loops; ps_kernels_cuda: cuBLAS +
 * .cu kernels) is chosen once at start-up with ps_kernels_select() and passed
 * explicitly; call sites never #ifdef on the backend. All tensors are float32,
 * row-major (C order); images are NCHW. Every tensor pointer given to an op is a
 * *backend buffer*: on CPU plain host memory, on CUDA device memory (named d_*
 * at the call site) from alloc(). Host data crosses with copy_h2d / copy_d2h,
 * or overlapped with the ops by copy_h2d_async / copy_d2h_async.
 * When host_is_backend is 1 (CPU) host pointers may be passed to ops directly,
 * which is how models avoid copies on the CPU.
 *
 * Ops take a per-user context (ps_kctx_t: on CUDA a cuBLAS handle, a compute
 * stream the ops run on and a copy stream for the *_async copies; on CPU the
 * sgemm's choice and buffers) created by ctx_new; one context per thread. Ops
 * never allocate. Ops on a device backend may be asynchronous: sync() or a
 * copy_d2h waits for them. A failing device call inside an op is a bug or a
 * dead GPU: the backend prints file:line and the decoded error, then exits
 * (the llm.c cudaCheck habit).
 *
 * Dimension letters: N batch rows, C features/channels, O outputs, H,W spatial,
 * K kernel size.
 *
 * This module does not know about models, parameters or the network.
 */
#ifndef PS_KERNELS_KERNELS_H
#define PS_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-user backend state (opaque; defined by each backend). */
typedef struct ps_kctx ps_kctx_t;

/* Geometry of a stride-1, square-kernel, zero-padded 2-D convolution
 * x[N,C,H,W] * w[O,C,K,K] + b[O] -> y[N,O,HO,WO], HO = H + 2*pad - K + 1. */
typedef struct {
    int N;   /* batch */
    int C;   /* input channels */
    int H;   /* input height */
    int W;   /* input width */
    int O;   /* output channels */
    int K;   /* kernel height = width */
    int pad; /* zero padding on every side */
} ps_conv_shape_t;

typedef struct ps_kernels {
    const char *name;    /* "cpu" or "cuda" */
    int host_is_backend; /* 1: host memory is backend memory (no copies needed) */

    /* ---- lifecycle and memory -------------------------------------------- */

    /* Checks that the backend can run here. Returns 0, or PS_ENODEV (no GPU) /
     * PS_ENOTSUP (not built) with a one-line reason in why. Thread-safe. */
    int (*probe)(char *why, size_t whylen);
    /* Creates a context. Returns 0, PS_ENOMEM or PS_ENODEV. Caller owns the
     * result; destroy with ctx_destroy(), which is NULL-safe and nulls *ctx. */
    int (*ctx_new)(ps_kctx_t **out);
    void (*ctx_destroy)(ps_kctx_t **ctx);

    /* Backend buffer of `bytes` bytes, 64-byte aligned, uninitialised; NULL on
     * failure. Caller owns the result; release with free(NULL-safe). */
    void *(*alloc)(size_t bytes);
    void (*free)(void *d_p);
    /* Host buffer suited to copies (pinned on CUDA, aligned malloc on CPU);
     * NULL on failure. Caller owns the result; release with host_free(). */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    /* Copies; each returns 0 or PS_EIO. copy_d2h waits for prior ops of ctx.
     * copy_h2d from a host_alloc buffer may return before the data has moved
     * (CUDA): leave src unchanged until the next copy_d2h/sync of ctx. */
    int (*copy_h2d)(ps_kctx_t *ctx, void *d_dst, const void *src, size_t bytes);
    int (*copy_d2h)(ps_kctx_t *ctx, void *dst, const void *d_src, size_t bytes);
    int (*copy_d2d)(ps_kctx_t *ctx, void *d_dst, const void *d_src, size_t bytes);
    /* Overlapped copies between host_alloc memory and backend buffers, queued
     * on ctx's copy stream, which runs beside the ops: they run one after
     * another in call order, and copy_wait() tells the host when they are
     * done. On the CPU they are plain copies, done on return. Each returns 0
     * or PS_EIO.
     * copy_h2d_async: ops queued on ctx after the call wait for the data; ops
     * queued before it do not, and the copy does not wait for them (they must
     * not use d_dst). Leave src unchanged until copy_wait() covers the copy.
     * copy_d2h_async: starts once the ops queued on ctx before the call are
     * done, while later ops run on. Do not read dst, nor let later ops write
     * d_src, until copy_wait() covers the copy. */
    int (*copy_h2d_async)(ps_kctx_t *ctx, void *d_dst, const void *src, size_t bytes);
    int (*copy_d2h_async)(ps_kctx_t *ctx, void *dst, const void *d_src, size_t bytes);
    /* Blocks until at most `pending` (>= 0) of the async copies queued on ctx
     * are unfinished; they finish in call order, so 0 waits for all of them
     * and k for all but the last k. Returns 0 or PS_EIO. */
    int (*copy_wait)(ps_kctx_t *ctx, int pending);
    /* d_p[0..bytes) = 0. */
    void (*zero)(ps_kctx_t *ctx, void *d_p, size_t bytes);
    /* Waits for every op and copy queued on ctx. Returns 0 or PS_EIO. */
    int (*sync)(ps_kctx_t *ctx);

    /* ---- dense layers ---------------------------------------------------- */

    /* C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major, op(X) = X or X^T.
     * op(A) is [M,K], op(B) is [K,N]; lda/ldb/ldc are row strides of the
     * matrices as stored. (BLAS sgemm semantics in row-major order.) */
    void (*sgemm)(ps_kctx_t *ctx, int trans_a, int trans_b, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc);
    /* y[N,C] += b[C] on every row. */
    void (*bias_add)(ps_kctx_t *ctx, float *y, const float *b, int N, int C);
    /* y[N,C] = max(y + b, 0): fused bias + ReLU for hidden layers. */
    void (*bias_relu)(ps_kctx_t *ctx, float *y, const float *b, int N, int C);
    /* db[C] = sum over rows of dy[N,C] (gradient of bias_add). Overwrites db. */
    void (*bias_grad)(ps_kctx_t *ctx, const float *dy, float *db, int N, int C);
    /* y[n] = max(x[n], 0); y may equal x. */
    void (*relu_fwd)(ps_kctx_t *ctx, const float *x, float *y, size_t n);
    /* dx[n] = dy * (y > 0), y the ReLU output; dx may equal dy. */
    void (*relu_bwd)(ps_kctx_t *ctx, const float *y, const float *dy, float *dx, size_t n);

    /* ---- loss ------------------------------------------------------------ */

    /* Softmax cross-entropy over logits[N,C] with labels[N] in [0,C) (a backend
     * buffer of bytes). Returns the mean loss over the N rows (waits for the
     * device). When dlogits is not NULL writes the gradient of that mean loss,
     * dlogits = (softmax(logits) - onehot(label)) / N; dlogits may equal
     * logits. When correct is not NULL stores the number of rows whose argmax
     * (first maximum) equals the label. Labels must be valid (the caller checks). */
    float (*softmax_xent)(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                          int C, float *dlogits, int *correct);

    /* ---- convolution and pooling (NCHW) ---------------------------------- */

    /* Bytes of scratch any conv op below needs for shape s (0 if none). */
    size_t (*conv2d_workspace)(const ps_conv_shape_t *s);
    /* y[N,O,HO,WO] = conv(x[N,C,H,W], w[O,C,K,K]) + b[O]; when relu != 0 the
     * output is max(., 0) (fused). ws: conv2d_workspace(s) bytes of scratch. */
    void (*conv2d_fwd)(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                       const float *w, const float *b, float *y, int relu, void *ws);
    /* Gradients of conv2d_fwd (without the ReLU; apply relu_bwd first):
     * dw[O,C,K,K] and db[O] are overwritten; dx[N,C,H,W] too unless dx is NULL
     * (first layer). */
    void (*conv2d_bwd)(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                       const float *w, const float *dy, float *dx, float *dw, float *db,
                       void *ws);
    /* Fused conv2d_fwd (with ReLU) + maxpool2_fwd, for a shape with even HO, WO:
     * p[N,O,HO/2,WO/2] = maxpool2(relu(conv(x, w) + b)) and its winners arg.
     * The full-size convolution output is not stored: the backward needs only
     * p and arg (see conv2d_pool_bwd). ws: conv2d_workspace(s) bytes. */
    void (*conv2d_pool_fwd)(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                            const float *w, const float *b, float *p, uint8_t *arg,
                            void *ws);
    /* Its gradients from dp (gradient at p): the pooling and ReLU backward
     * (maxpool2_bwd with y = p) then conv2d_bwd; dw, db overwritten, dx too
     * unless NULL. */
    void (*conv2d_pool_bwd)(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                            const float *w, const float *dp, const uint8_t *arg,
                            const float *p, float *dx, float *dw, float *db, void *ws);
    /* 2x2 max pooling, stride 2: y[N*C, H/2, W/2] from x[N*C, H, W] (H, W even).
     * arg[N*C*(H/2)*(W/2)] records which of the 4 inputs won (0..3). */
    void (*maxpool2_fwd)(ps_kctx_t *ctx, const float *x, float *y, uint8_t *arg, int NC,
                         int H, int W);
    /* dx[N*C,H,W] = scatter of dy through arg (dx fully overwritten). When y
     * (the pooling's output) is not NULL, the pooled input was a ReLU output
     * and its gradient is folded in: nothing flows where y <= 0. */
    void (*maxpool2_bwd)(ps_kctx_t *ctx, const float *dy, const uint8_t *arg,
                         const float *y, float *dx, int NC, int H, int W);

    /* ---- elementwise update ---------------------------------------------- */

    /* SGD with momentum on backend buffers, same arithmetic as
     * ps_optim_sgd_step() (kernels/optim.h): g = grad*scale + wd*w;
     * v = mu*v + g; w -= lr*v. v unused when momentum is 0. */
    void (*sgd_step)(ps_kctx_t *ctx, float lr, float momentum, float weight_decay, float *w,
                     float *v, const float *grad, float scale, size_t n);

    /* ---- devices (NULL for a backend without: the CPU) ------------------- */

    /* How many devices this process sees (>= 0), or PS_ENODEV. */
    int (*devices)(void);
    /* Makes device index (0 .. devices()-1) the calling thread's, before any
     * context; its name into name. Returns 0, or PS_ENODEV with the reason in
     * name. kernels/device.h chooses the index. */
    int (*use_device)(int index, char *name, size_t namelen);
} ps_kernels_t;

/* The CPU backend (OpenBLAS + vectorised loops). Always present. */
extern const ps_kernels_t ps_kernels_cpu;

/*
 * Chooses a backend by name: "cpu", "cuda", or "auto" (CUDA when it is built
 * and a GPU answers, else CPU). Returns 0, stores a borrowed table (valid for
 * the life of the program) in *out and a one-line description of the choice
 * and its reason in why, for the caller to log (e.g. "cpu (auto: this build
 * has no CUDA backend ...)"); PS_EINVAL for an unknown name; PS_ENOTSUP
 * ("cuda" in a build without CUDA) or PS_ENODEV ("cuda" and no GPU), with a
 * one-line reason in why. Logs nothing.
 * Thread-safe.
 */
int ps_kernels_select(const char *device, const ps_kernels_t **out, char *why,
                      size_t whylen);

/* The CUDA table, or NULL in a build without CUDA. Borrowed; static. */
const ps_kernels_t *ps_kernels_cuda_table(void);

#ifdef __cplusplus
}
#endif
#endif
