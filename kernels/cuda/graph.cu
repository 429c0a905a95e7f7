/*
 * kernels/cuda/graph.cu - recorded steps (CUDA graphs), the TF32 switch and
 * timing events of the CUDA backend.
 *
 * A recording is a stream capture of the context's compute stream, joined
 * by its copy stream (the fork event), so the overlapped copies of a step
 * (params in layer by layer, gradients out layer by layer) become graph
 * nodes with the same event edges as when queued by hand. A d2h copy's done
 * event is recorded as an external event node, so after a replay copy_wait
 * can wait for each layer's gradients as they land; the replay restores the
 * context's copy count to the one after the recording, which names the same
 * ring events. graph_end joins the copy stream back (the join event), as a
 * capture must. Nothing here allocates per step: a graph is instantiated
 * once and replayed. Its node count (kernels, copies, event records) is
 * kept: the launches a replay makes, which the fused dense layers cut.
 */
#include "common/error.h"
#include "kernels/cuda/cuda_impl.h"

int ps_cuda_record_done(ps_kctx_t *ctx, cudaEvent_t done, int d2h)
{
    if (ctx->recording && d2h) {
        return PS_CUDA_SOFT(cudaEventRecordWithFlags(done, ctx->copy, cudaEventRecordExternal))
                   ? PS_EIO
                   : 0;
    }
    return PS_CUDA_SOFT(cudaEventRecord(done, ctx->copy)) ? PS_EIO : 0;
}

int ps_cuda_graph_begin(ps_kctx_t *ctx)
{
    if (ctx->recording) {
        return PS_EIO;
    }
    /* thread-local: other threads' CUDA calls (another context) go on */
    if (PS_CUDA_SOFT(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal))) {
        return PS_EIO;
    }
    if (PS_CUDA_SOFT(cudaEventRecord(ctx->fork, ctx->stream)) ||
        PS_CUDA_SOFT(cudaStreamWaitEvent(ctx->copy, ctx->fork, 0))) {
        cudaGraph_t g = NULL;
        (void)cudaStreamEndCapture(ctx->stream, &g);
        if (g) {
            (void)cudaGraphDestroy(g);
        }
        (void)cudaGetLastError();
        return PS_EIO;
    }
    ctx->recording = 1;
    return 0;
}

int ps_cuda_graph_end(ps_kctx_t *ctx, ps_kgraph_t **out)
{
    *out = NULL;
    if (!ctx->recording) {
        return PS_EIO;
    }
    ctx->recording = 0;
    int bad = PS_CUDA_SOFT(cudaEventRecord(ctx->join, ctx->copy)) ||
              PS_CUDA_SOFT(cudaStreamWaitEvent(ctx->stream, ctx->join, 0));
    cudaGraph_t graph = NULL;
    bad |= PS_CUDA_SOFT(cudaStreamEndCapture(ctx->stream, &graph));
    ps_kgraph_t *g = bad ? NULL : (ps_kgraph_t *)calloc(1, sizeof(*g));
    size_t nodes = 0;
    if (g && PS_CUDA_SOFT(cudaGraphGetNodes(graph, NULL, &nodes))) {
        free(g);
        g = NULL;
    }
    if (g && PS_CUDA_SOFT(cudaGraphInstantiate(&g->exec, graph, 0))) {
        free(g);
        g = NULL;
    }
    if (graph) {
        (void)PS_CUDA_SOFT(cudaGraphDestroy(graph));
    }
    if (!g) {
        (void)cudaGetLastError();
        return bad ? PS_EIO : PS_ENOMEM;
    }
    g->ctx = ctx;
    g->ncopies = ctx->ncopies;
    g->nodes = (int)nodes;
    *out = g;
    return 0;
}

int ps_cuda_graph_launch(ps_kctx_t *ctx, ps_kgraph_t *g)
{
    if (!g || g->ctx != ctx || ctx->recording) {
        return PS_EIO;
    }
    if (PS_CUDA_SOFT(cudaGraphLaunch(g->exec, ctx->stream))) {
        return PS_EIO;
    }
    /* the replay's copies carry the recording's ring events */
    ctx->ncopies = g->ncopies;
    return 0;
}

void ps_cuda_graph_destroy(ps_kgraph_t **g)
{
    if (!g || !*g) {
        return;
    }
    /* a replay may still run: wait for it before the graph goes */
    (void)PS_CUDA_SOFT(cudaStreamSynchronize((*g)->ctx->stream));
    (void)PS_CUDA_SOFT(cudaGraphExecDestroy((*g)->exec));
    free(*g);
    *g = NULL;
}

int ps_cuda_graph_nodes(const ps_kgraph_t *g)
{
    return g ? g->nodes : 0;
}

/* cuBLAS by its math mode; cuBLASLt by the compute type of the plans made
 * from now on (lt.cu keys its plans by the switch). */
int ps_cuda_set_tf32(ps_kctx_t *ctx, int on)
{
    ctx->tf32 = on != 0;
    PS_CUBLAS_CHECK(
        cublasSetMathMode(ctx->blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    return 0;
}

int ps_cuda_mark(ps_kctx_t *ctx, int slot, int copy)
{
    if (slot < 0 || slot >= PS_KERNELS_MARKS || ctx->recording) {
        return PS_EINVAL;
    }
    if (PS_CUDA_SOFT(cudaEventRecord(ctx->marks[slot], copy ? ctx->copy : ctx->stream))) {
        return PS_EIO;
    }
    ctx->marked |= 1u << slot;
    return 0;
}

double ps_cuda_mark_ms(ps_kctx_t *ctx, int from, int to)
{
    if (from < 0 || to < 0 || from >= PS_KERNELS_MARKS || to >= PS_KERNELS_MARKS ||
        !(ctx->marked >> from & 1) || !(ctx->marked >> to & 1)) {
        return -1.0;
    }
    float ms = 0;
    if (PS_CUDA_SOFT(cudaEventSynchronize(ctx->marks[from])) ||
        PS_CUDA_SOFT(cudaEventSynchronize(ctx->marks[to])) ||
        PS_CUDA_SOFT(cudaEventElapsedTime(&ms, ctx->marks[from], ctx->marks[to]))) {
        return -1.0;
    }
    return ms;
}
