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
 * K kernel size; E, F, U for embedding rows (see embed_gather).
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

/* A recorded sequence of ops and async copies, replayed as one launch (on
 * CUDA a CUDA graph). Opaque; made by graph_end, freed by graph_destroy. */
typedef struct ps_kgraph ps_kgraph_t;

/* Timing marks per context (see mark / mark_ms). */
enum { PS_KERNELS_MARKS = 16 };

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

    /* ---- fused dense layers ---------------------------------------------- */

    /* The three GEMMs of a dense layer with the ops around them fused in (on
     * CUDA cuBLASLt epilogues). Each returns 0, or PS_ENOTSUP with nothing
     * queued when the backend cannot fuse this shape (the CPU never does):
     * the caller then runs the separate ops named, which compute the same.
     * Bytes of the ReLU mask of y[N,O] that dense_fwd writes (0: the backend
     * keeps none). */
    size_t (*dense_mask_bytes)(int N, int O);
    /* y[N,O] = x[N,C] @ w[O,C]^T + b[O] (sgemm, then bias_add), with relu
     * != 0 then max(., 0) (bias_relu); with mask not NULL also which outputs
     * were positive, into mask (dense_mask_bytes(N, O) bytes, 256-byte
     * aligned), for dense_dgrad. */
    int (*dense_fwd)(ps_kctx_t *ctx, const float *x, const float *w, const float *b,
                     float *y, void *mask, int N, int C, int O, int relu);
    /* dw[O,C] = dy[N,O]^T @ x[N,C] and db[O] = column sums of dy (sgemm, then
     * bias_grad); dw and db overwritten. */
    int (*dense_wgrad)(ps_kctx_t *ctx, const float *x, const float *dy, float *dw,
                       float *db, int N, int C, int O);
    /* dx[N,C] = dy[N,O] @ w[O,C], then 0 wherever the ReLU whose mask
     * dense_fwd wrote (for x, [N,C]) gave 0 (sgemm, then relu_bwd). */
    int (*dense_dgrad)(ps_kctx_t *ctx, const float *dy, const float *w, const void *mask,
                       float *dx, int N, int C, int O);

    /* ---- loss ------------------------------------------------------------ */

    /* Softmax cross-entropy over logits[N,C] with labels[N] in [0,C) (a backend
     * buffer of bytes). Returns the mean loss over the N rows (waits for the
     * device). When dlogits is not NULL writes the gradient of that mean loss,
     * dlogits = (softmax(logits) - onehot(label)) / N; dlogits may equal
     * logits. When correct is not NULL stores the number of rows whose argmax
     * (first maximum) equals the label. Labels must be valid (the caller checks). */
    float (*softmax_xent)(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                          int C, float *dlogits, int *correct);
    /* Logistic loss of one logit per row: the mean over the N rows of
     * softplus(z) - y*z, computed as max(z, 0) - z*y + log1p(exp(-|z|)), for
     * logits[N] and labels[N] of 0/1 (a backend buffer of bytes; nonzero
     * counts as 1). Returns that mean (waits for the device). When dlogits
     * is not NULL writes the gradient of the mean, dlogits = (sigmoid(z) - y)
     * * (1/N); dlogits may equal logits. */
    float (*sigmoid_bce)(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                         float *dlogits);

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
     * unless NULL. s, x and ws must be those of the conv2d_pool_fwd before
     * it, ws untouched since (so one workspace per layer): a backend may
     * keep the forward's im2col columns there (CUDA does). It leaves them
     * intact, so it may run again. */
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
    /* ---- device-resident data -------------------------------------------- */

    /* Gathers a batch from a dataset kept as grey levels: for i < n and
     * s = idx[i] (< the dataset's count: the caller checks),
     * x[i][0..F) = pixels[s][0..F) * a + c (a multiply then an add, never
     * fused: the bits of the host's conversion) and y[i] = labels[s].
     * All five pointers are backend buffers. */
    void (*gather_u8)(ps_kctx_t *ctx, const uint8_t *pixels, const uint8_t *labels, size_t F,
                      const uint32_t *idx, int n, float a, float c, float *x, uint8_t *y);

    /* softmax_xent (same arithmetic, same arguments less `correct`) without
     * waiting for the device: the result stays in ctx until the next
     * softmax_xent_queue. xent_result reads it once a sync or copy_wait of ctx
     * has covered the op: the mean loss over N rows, and the rows whose
     * argmax is the label in *correct when correct is not NULL. */
    void (*softmax_xent_queue)(ps_kctx_t *ctx, const float *logits, const uint8_t *labels,
                               int N, int C, float *dlogits);
    float (*xent_result)(ps_kctx_t *ctx, int N, int *correct);
    /* sigmoid_bce (same arithmetic, same arguments) without waiting for the
     * device; xent_result then reads its mean loss, and in *correct the rows
     * whose prediction (z > 0) equals their label. */
    void (*sigmoid_bce_queue)(ps_kctx_t *ctx, const float *logits, const uint8_t *labels,
                              int N, float *dlogits);

    /* ---- embedding rows (sparse inputs) ------------------------------------ */

    /* Dimension letters: E floats per row, F lookups (fields) per sample, U
     * rows. Gathers each sample's F rows side by side into x: for i < n,
     * f < F, e < E, x[i*ldx + f*E + e] = rows[idx[i*F + f]*E + e]. rows is
     * [U,E], idx [n*F] row numbers (< U: the caller checks), x [n,ldx] with
     * ldx >= F*E; its columns past F*E are left untouched. Copies only: the
     * same bits on every backend. */
    void (*embed_gather)(ps_kctx_t *ctx, const float *rows, int E, const uint32_t *idx, int n,
                         int F, float *x, int ldx);
    /* The gradient of embed_gather, as a sum per row in a fixed order: for
     * u < U, drows[u*E + e] = the sum over k in [offsets[u], offsets[u+1]),
     * in ascending k, starting from 0.0f, of dx[(j/F)*ldx + (j%F)*E + e] with
     * j = order[k]. offsets [U+1] and order [n*F] (the positions j = i*F + f
     * grouped by row, ascending within a row) are the batch's CSR, as its
     * dedup builds them. No atomics: the same bits on every backend and
     * every run. drows [U,E] is overwritten. */
    void (*embed_grad)(ps_kctx_t *ctx, const float *dx, int ldx, int E, int F,
                       const uint32_t *offsets, const uint32_t *order, int U, float *drows);

    /* ---- recorded steps (CUDA graphs) -------------------------------------- */

    /* graph_begin starts recording what is queued on ctx (ops, plain and
     * async copies) instead of running it; graph_end stops, and on success
     * stores the recording in *out (caller owns it; free with graph_destroy,
     * NULL-safe, nulls *g). While recording nothing may wait for the device
     * (no softmax_xent, copy_d2h, sync, copy_wait) and copies must be from or
     * to host_alloc memory. Scalars and pointers are fixed at recording: a
     * replay reads the same buffers, whatever they then hold. graph_launch
     * queues one replay on ctx (the context that recorded it); copy_wait and
     * xent_result then see its copies and loss as if queued by hand. Each
     * returns 0, PS_ENOTSUP (a backend without graphs: CPU), or PS_EIO. */
    int (*graph_begin)(ps_kctx_t *ctx);
    int (*graph_end)(ps_kctx_t *ctx, ps_kgraph_t **out);
    int (*graph_launch)(ps_kctx_t *ctx, ps_kgraph_t *g);
    void (*graph_destroy)(ps_kgraph_t **g);
    /* Nodes of a recording (kernels, library GEMM kernels, copies, event
     * records): the launches one replay makes, >= 0. The CPU has no
     * recordings: PS_ENOTSUP. */
    int (*graph_nodes)(const ps_kgraph_t *g);

    /* ---- arithmetic mode and timing ---------------------------------------- */

    /* on != 0 lets the GEMMs round their inputs to TF32 on tensor cores
     * (CUDA, sm_80 and newer): faster, and different arithmetic (10-bit
     * mantissas in the products). 0 (the default) is plain FP32. Returns 0,
     * or PS_ENOTSUP when on != 0 and the backend has no such mode (CPU). */
    int (*set_tf32)(ps_kctx_t *ctx, int on);
    /* cudnn != 0 runs the convolutions' products (conv2d_* ops) through
     * cuDNN with deterministic algorithms, where the backend was built with
     * it; a shape cuDNN has no such algorithm for runs im2col + GEMM, which
     * 0 (the default) runs always. Same results within rounding, not the
     * same bits. Not while recording, nor between a forward and its
     * backward. Returns 0; PS_ENOTSUP when cudnn != 0 and the backend has
     * no cuDNN (CPU, or CUDA built without); PS_ENOMEM / PS_ENODEV when
     * cuDNN cannot start; PS_ESTATE while recording. */
    int (*set_conv)(ps_kctx_t *ctx, int cudnn);
    /* Marks point `slot` (< PS_KERNELS_MARKS) in ctx's compute stream
     * (copy = 0) or copy stream (copy = 1), on CUDA with an event; on the CPU
     * it reads the clock. mark_ms waits for both marks and returns the
     * milliseconds between them (< 0 when a mark was never set or the
     * backend failed). Not while recording. */
    int (*mark)(ps_kctx_t *ctx, int slot, int copy);
    double (*mark_ms)(ps_kctx_t *ctx, int from, int to);
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

/* 1 when the CUDA backend was built with cuDNN (set_conv may turn it on),
 * else 0. Thread-safe. */
int ps_kernels_has_cudnn(void);

/* A --conv flag's values (shardps-worker's and shardps-bench compute's):
 * the convolutions through cuDNN, or im2col + GEMM, the default. */
#define PS_KERNELS_CONV_NAMES "cudnn|gemm"
#define PS_KERNELS_CONV_DEFAULT "gemm"

/* Parses a --conv value for set_conv: "cudnn" into *cudnn = 1, "gemm" into
 * 0. Returns 0; PS_EINVAL for another name, or PS_ENOTSUP for cudnn in a
 * build without cuDNN, with a one-line reason naming the flag in err
 * (*cudnn untouched). Thread-safe. */
int ps_kernels_parse_conv(const char *name, int *cudnn, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
