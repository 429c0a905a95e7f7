/*
 * kernels/cuda/cuda_impl.h - private to the .cu files of kernels/cuda/: the
 * context struct, the check macros and the launch-geometry helpers.
 *
 * Check macros (after llm.c's cudaCheck): PS_CUDA_CHECK / PS_CUBLAS_CHECK print
 * "file:line: call: ErrorName (description); hint: ..." through the logger and
 * exit(EXIT_FAILURE). They guard every CUDA and cuBLAS call inside the ops,
 * where a failure is our bug or a dead GPU. PS_CUDA_SOFT prints the same line
 * and yields non-zero instead of exiting; it is used only where kernels.h
 * promises the caller an error code (ctx_new, alloc, copies, sync), i.e.
 * where the outside world (no GPU, out of memory) can cause the failure.
 * probe() logs nothing: failing is its normal answer on a machine without GPU.
 *
 * Plain C (the CUDA runtime and cuBLAS headers are C); only .cu files include it.
 */
#ifndef PS_KERNELS_CUDA_IMPL_H
#define PS_KERNELS_CUDA_IMPL_H

#include <stddef.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks of the first softmax_xent pass at most; each leaves one partial sum. */
#define PS_CUDA_XENT_BLOCKS 1024

/* Floats of the context's scratch for the partial sums of the two-pass bias
 * gradients (bias_grad, conv2d_bwd): 1 MiB. Each op's pass count comes from
 * its shape and this size alone, so the summation order is fixed. */
#define PS_CUDA_RED_FLOATS ((size_t)1 << 18)

/* bias_grad's geometry (dense.cu): a column tile of 32 columns (one warp,
 * coalesced reads of a row) by PS_CUDA_BG_ROWS row lanes that stride down
 * the rows; each lane sums about PS_CUDA_BG_ITEMS rows as the number of row
 * blocks is chosen, and there are PS_CUDA_BG_PARTS row blocks at most. The
 * host emulation's fused bias gradient (tests/gpu/emu) sums in this order. */
#define PS_CUDA_BG_COLS 32
#define PS_CUDA_BG_ROWS 16
#define PS_CUDA_BG_ITEMS 4
#define PS_CUDA_BG_PARTS 64

/* Row blocks of bias_grad over dy[N,C] (N >= 0, C > 0): from the shape and
 * the scratch size alone, so the summation order is fixed. */
static inline size_t ps_cuda_bg_blocks(int N, int C)
{
    const size_t per = PS_CUDA_BG_ROWS * PS_CUDA_BG_ITEMS;
    size_t R = ((size_t)N + per - 1) / per, cap = PS_CUDA_RED_FLOATS / (size_t)C;
    cap = cap < PS_CUDA_BG_PARTS ? cap : PS_CUDA_BG_PARTS;
    R = R < cap ? R : cap;
    return R > 0 ? R : 1;
}

/* softmax_xent's reduced result, written by the device, read back pinned. */
typedef struct {
    double loss_sum; /* sum over rows of the per-row loss */
    int hits;        /* rows whose first argmax equals the label */
    int pad;         /* keeps the struct 16 bytes */
} ps_cuda_xent_out_t;

/* Events of the async copies' ring (see struct ps_kctx). More copies in
 * flight than this only make copy_wait wait longer. */
#define PS_CUDA_COPY_EVENTS 32

/* One per user thread (kernels.h). Ops and the plain copies are queued on
 * `stream`, so they run in call order with no events between them. The
 * *_async copies go on `copy`; events order the two streams: after each async
 * copy, done[n % PS_CUDA_COPY_EVENTS] is recorded on `copy` (n counts the
 * copies), and `stream` waits for it after an h2d, copy_wait syncs on it; a
 * d2h first makes `copy` wait for `computed`, recorded on `stream`. */
struct ps_kctx {
    int device;                /* CUDA device current when the context was made */
    cudaStream_t stream;       /* the compute stream: every op and plain copy; owned */
    cublasHandle_t blas;       /* bound to stream; owned */
    double *d_part;            /* [PS_CUDA_XENT_BLOCKS] per-block loss sums; owned */
    int *d_hits;               /* [PS_CUDA_XENT_BLOCKS] per-block hit counts; owned */
    float *d_red;              /* [PS_CUDA_RED_FLOATS] bias-gradient partial sums; owned */
    ps_cuda_xent_out_t *d_out; /* softmax_xent's final sums (device); owned */
    ps_cuda_xent_out_t *h_out; /* pinned host copy of *d_out; owned */

    cudaStream_t copy;                     /* the copy stream: the *_async copies; owned */
    cudaEvent_t computed;                  /* on stream, before each d2h; owned */
    cudaEvent_t done[PS_CUDA_COPY_EVENTS]; /* on copy, after each async copy; owned */
    unsigned long long ncopies;            /* async copies queued so far */

    void *d_blas_ws;            /* cuBLAS workspace, fixed so graphs may replay it; owned;
                                   cuBLASLt's too (one stream: never both at once) */
    struct ps_cuda_lt *lt;      /* cuBLASLt handle and cached GEMM plans (lt.cu); owned */
    struct ps_cuda_dnn *dnn;    /* cuDNN handle, workspace and plans (dnn.cu); NULL until
                                   set_conv first turns cuDNN on; owned */
    int tf32;                   /* 1: GEMMs may round their inputs to TF32 (set_tf32) */
    int recording;              /* 1 between graph_begin and graph_end */
    cudaEvent_t fork, join;     /* bring the copy stream into a recording and back; owned */
    cudaEvent_t marks[PS_KERNELS_MARKS]; /* mark(): timing events; owned */
    unsigned marked;            /* bit i: marks[i] recorded */
};

/* cuBLAS workspace per context (cuBLAS's advice for Hopper). */
#define PS_CUDA_BLAS_WS_BYTES ((size_t)32 << 20)

/* A recorded step: the instantiated graph and the copy count after it. */
struct ps_kgraph {
    cudaGraphExec_t exec;       /* owned */
    ps_kctx_t *ctx;             /* the context that recorded it; borrowed */
    unsigned long long ncopies; /* ctx->ncopies once the recording ended */
    int nodes;                  /* the graph's nodes: launches per replay */
};

/* lt.cu: a context's cuBLASLt state. new returns 0, PS_ENOMEM or PS_ENODEV;
 * destroy is NULL-safe and nulls *lt. */
int ps_cuda_lt_new(struct ps_cuda_lt **out);
void ps_cuda_lt_destroy(struct ps_cuda_lt **lt);

/* dnn.cu: the convolutions' products through cuDNN (kernels.h set_conv).
 * fwd: y = conv(x, w), no bias; bwd: dw, and dx unless NULL (overwritten).
 * Each returns 0, or PS_ENOTSUP with nothing queued (cuDNN off, not built,
 * or no deterministic algorithm for s): conv.cu then runs im2col. The answer
 * for a shape never changes while the switch stays, so a forward and its
 * backward take the same path. destroy is NULL-safe and nulls *d. */
int ps_cuda_dnn_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                    const float *d_w, float *d_y);
int ps_cuda_dnn_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                    const float *d_w, const float *d_dy, float *d_dx, float *d_dw);
void ps_cuda_dnn_destroy(struct ps_cuda_dnn **d);

/* Records an async copy's done event on the copy stream (graph.cu): inside
 * a recording a d2h's becomes an external event node, so the host can wait
 * for each replay's copy. Returns 0 or PS_EIO. */
int ps_cuda_record_done(ps_kctx_t *ctx, cudaEvent_t done, int d2h);

/* Logs "file:line: expr: name (description); hint: ..." at error level. */
void ps_cuda_report(const char *file, int line, const char *expr, const char *name,
                    const char *desc, const char *hint);
/* Operator hint for a CUDA runtime error (static string). */
const char *ps_cuda_hint(cudaError_t err);
/* Operator hint for a cuBLAS status (static string). */
const char *ps_cublas_hint(cublasStatus_t st);

#define PS_CUDA_CHECK(call)                                                                \
    do {                                                                                   \
        cudaError_t ps_e_ = (call);                                                        \
        if (ps_e_ != cudaSuccess) {                                                        \
            ps_cuda_report(__FILE__, __LINE__, #call, cudaGetErrorName(ps_e_),             \
                           cudaGetErrorString(ps_e_), ps_cuda_hint(ps_e_));                \
            exit(EXIT_FAILURE);                                                            \
        }                                                                                  \
    } while (0)

#define PS_CUBLAS_CHECK(call)                                                              \
    do {                                                                                   \
        cublasStatus_t ps_s_ = (call);                                                     \
        if (ps_s_ != CUBLAS_STATUS_SUCCESS) {                                              \
            ps_cuda_report(__FILE__, __LINE__, #call, cublasGetStatusName(ps_s_),          \
                           cublasGetStatusString(ps_s_), ps_cublas_hint(ps_s_));           \
            exit(EXIT_FAILURE);                                                            \
        }                                                                                  \
    } while (0)

/* Kernel launches: queued-launch errors (bad configuration, no image for this
 * GPU) show up at once; faults inside the kernel surface at the next sync. */
#define PS_CUDA_CHECK_LAUNCH() PS_CUDA_CHECK(cudaGetLastError())

/* Evaluates to 0 on success; on failure logs like PS_CUDA_CHECK and gives 1. */
#define PS_CUDA_SOFT(call) ps_cuda_soft_((call), __FILE__, __LINE__, #call)

static inline int ps_cuda_soft_(cudaError_t e, const char *file, int line, const char *expr)
{
    if (e == cudaSuccess) {
        return 0;
    }
    ps_cuda_report(file, line, expr, cudaGetErrorName(e), cudaGetErrorString(e),
                   ps_cuda_hint(e));
    return 1;
}

/* Threads per block of the elementwise kernels. */
#define PS_CUDA_THREADS 256
/* Grid cap of the grid-stride kernels (H100: 132 SMs x 2048 threads = 1056
 * blocks of 256 resident; 8192 leaves room and keeps launches cheap). */
#define PS_CUDA_MAX_BLOCKS 8192

/* Largest element count that the index kernels address in 32-bit unsigned
 * arithmetic (so a grid-stride step cannot wrap, and the multiply-high
 * division of conv.cu holds); larger counts take their size_t path.
 * tests/gpu/emu/run.sh lowers it so that its small shapes check both paths. */
#ifndef PS_CUDA_IDX32_MAX
#define PS_CUDA_IDX32_MAX ((size_t)0x7fffffff)
#endif

/* 1 when every index below n fits the 32-bit path. */
static inline int ps_cuda_fits32(size_t n)
{
    return n <= PS_CUDA_IDX32_MAX;
}

/* Queues k<unsigned> (32-bit indices) when `fits`, else k<size_t>, on
 * stream; the kernels' index-typed arguments convert at the call.
 * (tests/gpu/emu/run.sh rewrites this header's launches too.) */
#define PS_CUDA_LAUNCH_IDX(fits, k, grid, block, stream, ...)                              \
    do {                                                                                   \
        if (fits) {                                                                        \
            k<unsigned><<<grid, block, 0, stream>>>(__VA_ARGS__);                          \
        } else {                                                                           \
            k<size_t><<<grid, block, 0, stream>>>(__VA_ARGS__);                            \
        }                                                                                  \
        PS_CUDA_CHECK_LAUNCH();                                                            \
    } while (0)

/* Blocks for n items at `threads` per block, capped; n > 0. */
static inline unsigned ps_cuda_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return b > PS_CUDA_MAX_BLOCKS ? PS_CUDA_MAX_BLOCKS : (unsigned)b;
}

#ifdef __cplusplus
}
#endif
#endif
