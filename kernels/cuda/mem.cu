/*
 * kernels/cuda/mem.cu - the CUDA backend's plumbing: probe, contexts, device
 * and pinned memory, copies, and the error reporting of the check macros.
 *
 * A context is a non-blocking compute stream, a cuBLAS handle bound to it
 * (and a cuBLASLt one, lt.cu),
 * the small scratch softmax_xent reduces into, and a second non-blocking
 * stream for the *_async copies with the events that order the two (see
 * struct ps_kctx). Ops and plain copies run on the compute stream in call
 * order, so they need no events; only copy_d2h, sync and softmax_xent (which
 * returns a number) wait for it. Device buffers come from cudaMalloc
 * (256-byte aligned), host buffers from cudaMallocHost (pinned, so copies
 * from them are real DMA and asynchronous, and overlap kernels).
 * This file does no math.
 */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/cuda/cuda_impl.h"

/* ---- error reporting ------------------------------------------------------- */

void ps_cuda_report(const char *file, int line, const char *expr, const char *name,
                    const char *desc, const char *hint)
{
    ps_log_err("%s:%d: %s: %s (%s); hint: %s", file, line, expr, name ? name : "?",
               desc ? desc : "?", hint);
}

const char *ps_cuda_hint(cudaError_t err)
{
    switch (err) {
    case cudaErrorMemoryAllocation:
        return "out of GPU memory: lower the batch size or free the GPU (nvidia-smi)";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
        return "no usable GPU or driver: check nvidia-smi, or run with --device cpu";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
        return "this GPU cannot run the build's code (sm_90 + compute_90 PTX): rebuild "
               "with a -gencode for it in kernels/meson.build";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
        return "a kernel faulted (a shardps bug or bad buffer sizes): rerun under "
               "compute-sanitizer; the context is lost, restart the process";
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidValue:
        return "bad arguments to a CUDA call (a shardps bug): check the shapes passed";
    case cudaErrorDevicesUnavailable:
        return "the GPU is busy or in exclusive mode: check nvidia-smi for other jobs";
    case cudaErrorECCUncorrectable:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
        return "the GPU reported a hardware fault: check nvidia-smi -q and dmesg (Xid)";
    default:
        return "see the CUDA runtime error list; check nvidia-smi and the driver";
    }
}

const char *ps_cublas_hint(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "cuBLAS could not start: check the GPU and libcublas (LD_LIBRARY_PATH)";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "out of GPU memory inside cuBLAS: lower the batch size";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "bad gemm arguments (a shardps bug): check M, N, K and the strides";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "this GPU lacks a feature cuBLAS needs";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "a cuBLAS kernel failed: rerun under compute-sanitizer, check nvidia-smi";
    default:
        return "see the cuBLAS status list; check the GPU and libcublas version";
    }
}

/* ---- probe and contexts ---------------------------------------------------- */

int ps_cuda_probe(char *why, size_t whylen)
{
    char local[256];
    if (!why || whylen == 0) {
        why = local;
        whylen = sizeof(local);
    }
    why[0] = '\0';
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(why, whylen, "no usable GPU: cudaGetDeviceCount: %s (%s)",
                 cudaGetErrorName(e), cudaGetErrorString(e));
        (void)cudaGetLastError(); /* clear it, so no later check trips on it */
        return PS_ENODEV;
    }
    if (count == 0) {
        snprintf(why, whylen, "no GPU: the CUDA runtime sees 0 devices");
        return PS_ENODEV;
    }
    int dev = 0, major = 0, minor = 0;
    e = cudaGetDevice(&dev);
    if (e == cudaSuccess) {
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    }
    if (e == cudaSuccess) {
        e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    }
    if (e != cudaSuccess) {
        snprintf(why, whylen, "GPU %d does not answer: %s (%s)", dev, cudaGetErrorName(e),
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        return PS_ENODEV;
    }
    if (major < 9) {
        /* the build carries sm_90 code and compute_90 PTX: nothing older runs it */
        snprintf(why, whylen,
                 "GPU %d is sm_%d%d but this build has code for sm_90 and newer only "
                 "(add its -gencode in kernels/meson.build)",
                 dev, major, minor);
        return PS_ENOTSUP;
    }
    /* create the primary context now: a GPU that is busy (exclusive mode) or
     * broken fails here rather than in the middle of training */
    e = cudaFree(NULL);
    if (e != cudaSuccess) {
        snprintf(why, whylen, "GPU %d cannot start a context: %s (%s)", dev,
                 cudaGetErrorName(e), cudaGetErrorString(e));
        (void)cudaGetLastError();
        return PS_ENODEV;
    }
    return 0;
}

int ps_cuda_ctx_new(ps_kctx_t **out)
{
    *out = NULL;
    ps_kctx_t *c = (ps_kctx_t *)calloc(1, sizeof(*c));
    if (!c) {
        return PS_ENOMEM;
    }
    int rc = PS_ENODEV;
    if (PS_CUDA_SOFT(cudaGetDevice(&c->device)) ||
        PS_CUDA_SOFT(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) ||
        PS_CUDA_SOFT(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking)) ||
        PS_CUDA_SOFT(cudaEventCreateWithFlags(&c->computed, cudaEventDisableTiming)) ||
        PS_CUDA_SOFT(cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming)) ||
        PS_CUDA_SOFT(cudaEventCreateWithFlags(&c->join, cudaEventDisableTiming))) {
        goto fail;
    }
    for (int i = 0; i < PS_KERNELS_MARKS; i++) {
        if (PS_CUDA_SOFT(cudaEventCreateWithFlags(&c->marks[i], cudaEventDefault))) {
            goto fail;
        }
    }
    for (int i = 0; i < PS_CUDA_COPY_EVENTS; i++) {
        if (PS_CUDA_SOFT(cudaEventCreateWithFlags(&c->done[i], cudaEventDisableTiming))) {
            goto fail;
        }
    }
    {
        cublasStatus_t st = cublasCreate(&c->blas);
        if (st != CUBLAS_STATUS_SUCCESS) {
            ps_cuda_report(__FILE__, __LINE__, "cublasCreate(&c->blas)",
                           cublasGetStatusName(st), cublasGetStatusString(st),
                           ps_cublas_hint(st));
            c->blas = NULL;
            rc = st == CUBLAS_STATUS_ALLOC_FAILED ? PS_ENOMEM : PS_ENODEV;
            goto fail;
        }
    }
    if ((rc = ps_cuda_lt_new(&c->lt)) != 0) {
        goto fail;
    }
    PS_CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
    /* plain FP32 (no TF32 tensor-op rounding): results track the CPU backend */
    PS_CUBLAS_CHECK(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    rc = PS_ENOMEM;
    if (PS_CUDA_SOFT(
            cudaMalloc((void **)&c->d_part, PS_CUDA_XENT_BLOCKS * sizeof(double))) ||
        PS_CUDA_SOFT(cudaMalloc((void **)&c->d_hits, PS_CUDA_XENT_BLOCKS * sizeof(int))) ||
        PS_CUDA_SOFT(cudaMalloc((void **)&c->d_red, PS_CUDA_RED_FLOATS * sizeof(float))) ||
        PS_CUDA_SOFT(cudaMalloc((void **)&c->d_out, sizeof(ps_cuda_xent_out_t))) ||
        PS_CUDA_SOFT(cudaMallocHost((void **)&c->h_out, sizeof(ps_cuda_xent_out_t))) ||
        PS_CUDA_SOFT(cudaMalloc(&c->d_blas_ws, PS_CUDA_BLAS_WS_BYTES))) {
        (void)cudaGetLastError();
        goto fail;
    }
    /* a workspace of our own: a recorded step replays gemms that use it */
    PS_CUBLAS_CHECK(cublasSetWorkspace(c->blas, c->d_blas_ws, PS_CUDA_BLAS_WS_BYTES));
    *out = c;
    return 0;
fail:
    (void)cudaGetLastError();
    ps_cuda_ctx_destroy(&c);
    return rc;
}

/* Safe on a half-built context. Waits for both streams first, so buffers
 * still used by queued work are not freed under it. Failures are logged and
 * the rest is still released. */
void ps_cuda_ctx_destroy(ps_kctx_t **ctx)
{
    if (!ctx || !*ctx) {
        return;
    }
    ps_kctx_t *c = *ctx;
    if (c->stream) {
        (void)PS_CUDA_SOFT(cudaStreamSynchronize(c->stream));
    }
    if (c->copy) {
        (void)PS_CUDA_SOFT(cudaStreamSynchronize(c->copy));
    }
    if (c->blas) {
        cublasStatus_t st = cublasDestroy(c->blas);
        if (st != CUBLAS_STATUS_SUCCESS) {
            ps_cuda_report(__FILE__, __LINE__, "cublasDestroy(c->blas)",
                           cublasGetStatusName(st), cublasGetStatusString(st),
                           ps_cublas_hint(st));
        }
    }
    ps_cuda_lt_destroy(&c->lt);
    ps_cuda_dnn_destroy(&c->dnn);
    if (c->h_out) {
        (void)PS_CUDA_SOFT(cudaFreeHost(c->h_out));
    }
    if (c->d_out) {
        (void)PS_CUDA_SOFT(cudaFree(c->d_out));
    }
    if (c->d_hits) {
        (void)PS_CUDA_SOFT(cudaFree(c->d_hits));
    }
    if (c->d_part) {
        (void)PS_CUDA_SOFT(cudaFree(c->d_part));
    }
    if (c->d_red) {
        (void)PS_CUDA_SOFT(cudaFree(c->d_red));
    }
    if (c->d_blas_ws) {
        (void)PS_CUDA_SOFT(cudaFree(c->d_blas_ws));
    }
    for (int i = 0; i < PS_KERNELS_MARKS; i++) {
        if (c->marks[i]) {
            (void)PS_CUDA_SOFT(cudaEventDestroy(c->marks[i]));
        }
    }
    if (c->fork) {
        (void)PS_CUDA_SOFT(cudaEventDestroy(c->fork));
    }
    if (c->join) {
        (void)PS_CUDA_SOFT(cudaEventDestroy(c->join));
    }
    for (int i = 0; i < PS_CUDA_COPY_EVENTS; i++) {
        if (c->done[i]) {
            (void)PS_CUDA_SOFT(cudaEventDestroy(c->done[i]));
        }
    }
    if (c->computed) {
        (void)PS_CUDA_SOFT(cudaEventDestroy(c->computed));
    }
    if (c->copy) {
        (void)PS_CUDA_SOFT(cudaStreamDestroy(c->copy));
    }
    if (c->stream) {
        (void)PS_CUDA_SOFT(cudaStreamDestroy(c->stream));
    }
    free(c);
    *ctx = NULL;
}

/* ---- memory ------------------------------------------------------------------ */

void *ps_cuda_alloc(size_t bytes)
{
    void *d_p = NULL;
    /* cudaMalloc aligns to 256 bytes; a zero size would give NULL */
    if (PS_CUDA_SOFT(cudaMalloc(&d_p, bytes ? bytes : 256))) {
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
        return NULL;
    }
    return d_p;
}

void ps_cuda_free(void *d_p)
{
    if (d_p) {
        PS_CUDA_CHECK(cudaFree(d_p));
    }
}

void *ps_cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    if (PS_CUDA_SOFT(cudaMallocHost(&p, bytes ? bytes : 64))) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

void ps_cuda_host_free(void *p)
{
    if (p) {
        PS_CUDA_CHECK(cudaFreeHost(p));
    }
}

/* ---- copies -------------------------------------------------------------------- */

/* Queued on the context's stream after every earlier op. From pageable memory
 * it returns once src has been staged; from pinned memory (host_alloc) it may
 * return before the copy is done, so src must stay unchanged until the next
 * copy_d2h, sync or softmax_xent of this context. */
int ps_cuda_copy_h2d(ps_kctx_t *ctx, void *d_dst, const void *src, size_t bytes)
{
    if (bytes == 0) {
        return 0;
    }
    if (PS_CUDA_SOFT(
            cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream))) {
        return PS_EIO;
    }
    return 0;
}

int ps_cuda_copy_d2h(ps_kctx_t *ctx, void *dst, const void *d_src, size_t bytes)
{
    if (bytes == 0) {
        return ps_cuda_sync(ctx);
    }
    if (PS_CUDA_SOFT(
            cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, ctx->stream)) ||
        PS_CUDA_SOFT(cudaStreamSynchronize(ctx->stream))) {
        return PS_EIO;
    }
    return 0;
}

int ps_cuda_copy_d2d(ps_kctx_t *ctx, void *d_dst, const void *d_src, size_t bytes)
{
    if (bytes == 0 || d_dst == d_src) {
        return 0;
    }
    if (PS_CUDA_SOFT(
            cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, ctx->stream))) {
        return PS_EIO;
    }
    return 0;
}

void ps_cuda_zero(ps_kctx_t *ctx, void *d_p, size_t bytes)
{
    if (bytes) {
        PS_CUDA_CHECK(cudaMemsetAsync(d_p, 0, bytes, ctx->stream));
    }
}

int ps_cuda_sync(ps_kctx_t *ctx)
{
    if (PS_CUDA_SOFT(cudaStreamSynchronize(ctx->stream)) ||
        PS_CUDA_SOFT(cudaStreamSynchronize(ctx->copy))) {
        return PS_EIO;
    }
    return 0;
}

/* ---- overlapped copies ------------------------------------------------------ */

/* Queues one async copy on the copy stream and records its event. A d2h
 * first waits for the compute stream as it is now; after an h2d the compute
 * stream waits for the copy, so only ops queued later see the data. Empty
 * copies are still counted, so copy_wait's count stays the caller's. */
static int s_copy_async(ps_kctx_t *ctx, void *dst, const void *src, size_t bytes,
                        enum cudaMemcpyKind kind)
{
    cudaEvent_t done = ctx->done[ctx->ncopies % PS_CUDA_COPY_EVENTS];
    if (kind == cudaMemcpyDeviceToHost &&
        (PS_CUDA_SOFT(cudaEventRecord(ctx->computed, ctx->stream)) ||
         PS_CUDA_SOFT(cudaStreamWaitEvent(ctx->copy, ctx->computed, 0)))) {
        return PS_EIO;
    }
    if ((bytes && PS_CUDA_SOFT(cudaMemcpyAsync(dst, src, bytes, kind, ctx->copy))) ||
        ps_cuda_record_done(ctx, done, kind == cudaMemcpyDeviceToHost)) {
        return PS_EIO;
    }
    ctx->ncopies++;
    if (kind == cudaMemcpyHostToDevice &&
        PS_CUDA_SOFT(cudaStreamWaitEvent(ctx->stream, done, 0))) {
        return PS_EIO;
    }
    return 0;
}

int ps_cuda_copy_h2d_async(ps_kctx_t *ctx, void *d_dst, const void *src, size_t bytes)
{
    return s_copy_async(ctx, d_dst, src, bytes, cudaMemcpyHostToDevice);
}

int ps_cuda_copy_d2h_async(ps_kctx_t *ctx, void *dst, const void *d_src, size_t bytes)
{
    return s_copy_async(ctx, dst, d_src, bytes, cudaMemcpyDeviceToHost);
}

/* Syncs on the event of copy number ncopies-1-pending. Its ring slot may hold
 * a later copy's event by now; copies finish in order, so that only waits
 * longer. */
int ps_cuda_copy_wait(ps_kctx_t *ctx, int pending)
{
    const unsigned long long keep = pending > 0 ? (unsigned long long)pending : 0;
    if (keep >= ctx->ncopies) {
        return 0;
    }
    cudaEvent_t e = ctx->done[(ctx->ncopies - 1 - keep) % PS_CUDA_COPY_EVENTS];
    return PS_CUDA_SOFT(cudaEventSynchronize(e)) ? PS_EIO : 0;
}
