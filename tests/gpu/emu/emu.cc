// tests/gpu/emu/emu.cc - host emulation of the CUDA runtime and cuBLAS subset
// that kernels/cuda/ uses, so the gpu suite's logic (index maths, the cuBLAS
// transposition trick, shared-memory reductions, chunking, device/host pointer
// discipline in copies and gemms, the ordering between streams) runs on a
// machine without a GPU, under AddressSanitizer. Not numerics: expf/logf are
// the host's, gemm is a float64 loop. Built only by run.sh; never linked into
// shardps. Kernels are run block by block; threads run one after another, or,
// for kernels that call __syncthreads (listed by run.sh in emu_sync.h), as
// ucontext coroutines switched at each barrier.
//
// Streams are lazy: each queues its copies, memsets, kernels and gemms and
// runs them, in order, only when something needs them: a host sync of the
// stream or of an event recorded on it, another stream reaching a wait on
// such an event, a copy into pageable host memory, or cudaFree/cudaFreeHost
// (which sync the device, as CUDA's do). So a missing event between two
// streams, or a pinned buffer reused before its async copy ran, gives wrong
// bytes here, as it can on a GPU. Copies from pageable memory take the bytes
// at the call, as CUDA stages them.
//
// cuBLASLt's matmul is the same host GEMM as cublasSgemm's, then its
// epilogue as kernels/cuda/dense.cu's separate kernels compute it, element
// by element (the bias gradient in bias_grad's summation order): so the
// fused dense layers give the separate ops' bits here, and a wrong operand,
// layout or mask gives wrong bytes. EMU_LT_REFUSE set makes the heuristic
// find no algorithm, as cuBLASLt does for a shape it cannot fuse.
//
// cuDNN's convolutions are direct float64 loops (see the cuDNN section).
//
// Stream capture records instead of queueing: every stream in a capture (the
// origin, and each stream that waited on an event recorded in it) keeps its
// own branch of items (an op, a wait on a point of another branch, an
// external event record), and the graph is those branches. A launch replays
// each branch on a private lazy stream of the graph, whose waits are the
// recorded ones: so a missing edge between a copy and a kernel in the graph
// gives wrong bytes here too. Syncing, or waiting on, anything inside a
// capture, allocating during one, and ending one with a branch not joined
// back are errors, as on a GPU.
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cudnn.h>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <cstdio>
#include <ucontext.h>

#include "emu_sync.h"
#include "kernels/cuda/cuda_impl.h"  // bias_grad's geometry, for the fused bias gradient

uint3e blockIdx, threadIdx;
dim3 gridDim, blockDim;
static std::map<uintptr_t, size_t> g_dev;   // device allocations
static std::map<uintptr_t, size_t> g_host;  // pinned allocations
static cudaError_t g_last = cudaSuccess;
static bool g_nodev = getenv("EMU_NODEV") != nullptr;

static bool in(const std::map<uintptr_t, size_t> &m, const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}
static bool is_dev(const void *p, size_t n) { return in(g_dev, p, n); }
static bool is_pinned(const void *p, size_t n) { return in(g_host, p, n); }
static void die(const char *m, const void *p) { fprintf(stderr, "EMU: %s %p\n", m, p); abort(); }

// ---- lazy streams and events
struct emu_capture;
struct emu_stream {
    std::deque<std::function<void()>> q;  // queued, not yet run
    unsigned long long queued = 0, done = 0;
    bool busy = false;                    // running one of its ops now
    emu_capture *cap = nullptr;           // the capture it records into, if any
    int branch = 0;                       // its branch there
};
struct emu_event {
    cudaStream_t s = nullptr; unsigned long long at = 0;  // last record
    emu_capture *cap = nullptr; int branch = 0; size_t pos = 0;  // or in a capture
    bool timing = true;
};
enum { IT_OP, IT_WAIT, IT_EXT };
struct emu_item {
    int kind; std::function<void()> op;   // IT_OP
    int branch; size_t pos;               // IT_WAIT: the first pos items of branch
    cudaEvent_t ev;                       // IT_EXT
};
typedef std::vector<std::vector<emu_item>> emu_branches;
struct emu_capture { emu_branches br; std::vector<cudaStream_t> streams; cudaStream_t origin; };
struct emu_graph { emu_branches br; };
struct emu_gexec { emu_branches br; std::vector<cudaStream_t> priv; };
static std::set<cudaStream_t> g_streams;
static std::set<cudaEvent_t> g_events;
static int g_captures;  // captures under way

// Runs s's ops until the first `at` of them are done.
static void run_until(cudaStream_t s, unsigned long long at) {
    if (!s || !g_streams.count(s)) return;  // never recorded, or destroyed (so drained)
    if (s->cap) die("waiting for a capturing stream (it runs nothing)", s);
    while (s->done < at) {
        if (s->busy) die("streams wait on each other: deadlock", s);
        std::function<void()> op = std::move(s->q.front());
        s->q.pop_front();
        s->busy = true;
        op();
        s->busy = false;
        s->done++;
    }
}
static void drain(cudaStream_t s) { run_until(s, s->queued); }
static void drain_all() {
    if (g_captures) die("device-wide sync (cudaFree...) during a capture", nullptr);
    for (cudaStream_t s : g_streams) drain(s);
}
static void enqueue(cudaStream_t s, std::function<void()> op) {
    if (!s) die("null stream", nullptr);
    if (!g_streams.count(s)) die("unknown or destroyed stream", s);
    if (s->cap) { s->cap->br[s->branch].push_back({IT_OP, std::move(op), 0, 0, nullptr}); return; }
    s->q.push_back(std::move(op));
    s->queued++;
}

extern "C" {
const char *cudaGetErrorName(cudaError_t e) { static char b[32]; snprintf(b, 32, "cudaError%d", (int)e); return b; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaErrorMemoryAllocation ? "out of memory" : "emulated error"; }
cudaError_t cudaGetLastError(void) { cudaError_t e = g_last; g_last = cudaSuccess; return e; }
cudaError_t cudaGetDeviceCount(int *n) { if (g_nodev) { g_last = cudaErrorNoDevice; return cudaErrorNoDevice; } *n = 1; return cudaSuccess; }
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { if (d != 0) { g_last = cudaErrorInvalidValue; return cudaErrorInvalidValue; } return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) { if (d != 0) return cudaErrorInvalidValue; snprintf(p->name, sizeof p->name, "emulated GPU"); return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int) { *v = a == cudaDevAttrComputeCapabilityMajor ? 9 : 0; return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t n) {
    if (g_captures) die("cudaMalloc during a capture", nullptr);
    if (n > ((size_t)1 << 40)) { g_last = cudaErrorMemoryAllocation; return cudaErrorMemoryAllocation; }
    void *q = nullptr;
    if (posix_memalign(&q, 256, n ? n : 1)) return cudaErrorMemoryAllocation;
    memset(q, 0xA5, n);  // garbage, like fresh device memory
    g_dev[(uintptr_t)q] = n; *p = q; return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    auto it = g_dev.find((uintptr_t)p);
    if (it == g_dev.end()) die("cudaFree of non-device pointer", p);
    drain_all();
    g_dev.erase(it); free(p); return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) {
    if (g_captures) die("cudaMallocHost during a capture", nullptr);
    *p = malloc(n ? n : 1); g_host[(uintptr_t)*p] = n; return cudaSuccess; }
cudaError_t cudaFreeHost(void *p) {
    drain_all();
    if (!g_host.erase((uintptr_t)p)) die("cudaFreeHost of non-pinned", p);
    free(p); return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = new emu_stream(); g_streams.insert(*s); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!g_streams.count(s)) die("cudaStreamDestroy of unknown stream", s);
    if (s->cap) die("cudaStreamDestroy of a capturing stream", s);
    drain(s);
    g_streams.erase(s);
    for (cudaEvent_t e : g_events) if (e->s == s) e->s = nullptr;
    delete s; return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (!g_streams.count(s)) die("sync of unknown stream", s);
    drain(s); return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f) {
    *e = new emu_event(); (*e)->timing = !(f & cudaEventDisableTiming); g_events.insert(*e); return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!g_events.erase(e)) die("cudaEventDestroy of unknown event", e);
    delete e; return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!g_events.count(e)) die("record of unknown event", e);
    if (!g_streams.count(s)) die("record on unknown stream", s);
    if (s->cap) {  // a point in the capture, for waits in it
        e->s = nullptr; e->cap = s->cap; e->branch = s->branch; e->pos = s->cap->br[s->branch].size();
        return cudaSuccess;
    }
    e->cap = nullptr; e->s = s; e->at = s->queued; return cudaSuccess;
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned f) {
    if (!(f & cudaEventRecordExternal) || !s->cap) return cudaEventRecord(e, s);
    if (!g_events.count(e)) die("record of unknown event", e);
    s->cap->br[s->branch].push_back({IT_EXT, {}, 0, 0, e});  // set by each launch
    e->cap = nullptr; e->s = nullptr;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!g_events.count(e)) die("sync of unknown event", e);
    if (e->cap) die("host waits on an event recorded inside a capture", e);
    run_until(e->s, e->at); return cudaSuccess;
}
// Emulated time: a thousandth of a millisecond per op between two records
// on one stream (the suite checks only that timing works and is ordered).
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!g_events.count(a) || !g_events.count(b)) die("elapsed time of unknown event", a);
    if (!a->timing || !b->timing) die("elapsed time of an event without timing", a);
    if (!a->s || !b->s) die("elapsed time of an unrecorded event", a);
    run_until(a->s, a->at); run_until(b->s, b->at);
    *ms = a->s == b->s && b->at >= a->at ? 0.001f * (float)(b->at - a->at) : 0.0f;
    return cudaSuccess;
}
// Waits for the event's record as it is now; a later record does not move it.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    if (!g_events.count(e)) die("wait on unknown event", e);
    if (e->cap) {  // an edge inside the capture; s joins it if it had not
        emu_capture *c = e->cap;
        if (s->cap && s->cap != c) die("stream waits on another capture's event", s);
        if (!s->cap) {
            s->cap = c; s->branch = (int)c->br.size(); c->br.emplace_back(); c->streams.push_back(s);
        }
        if (s->branch != e->branch) c->br[s->branch].push_back({IT_WAIT, {}, e->branch, e->pos, nullptr});
        return cudaSuccess;
    }
    if (s->cap) die("capture waits on an event recorded outside it (isolation)", s);
    cudaStream_t on = e->s;
    unsigned long long at = e->at;
    if (on == s) return cudaSuccess;  // its own earlier work: already in order
    enqueue(s, [on, at]() { run_until(on, at); });
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st) {
    if (!st) die("null stream", nullptr);
    bool dd = is_dev(d, n), sd = is_dev(s, n);
    if (k == cudaMemcpyHostToDevice && (!dd || is_dev(s, 1))) die("bad h2d", d);
    if (k == cudaMemcpyDeviceToHost && (!sd || is_dev(d, 1))) die("bad d2h", s);
    if (k == cudaMemcpyDeviceToDevice && (!sd || !dd)) die("bad d2d", d);
    if (st->cap && ((k == cudaMemcpyHostToDevice && !is_pinned(s, n)) ||
                    (k == cudaMemcpyDeviceToHost && !is_pinned(d, n))))
        die("captured copy with pageable host memory", st);
    if (k == cudaMemcpyHostToDevice && !is_pinned(s, n)) {  // pageable: staged now
        auto staged = std::make_shared<std::vector<char>>((const char *)s, (const char *)s + n);
        enqueue(st, [d, staged, n]() { memcpy(d, staged->data(), n); });
        return cudaSuccess;
    }
    enqueue(st, [d, s, n]() { memcpy(d, s, n); });
    if (k == cudaMemcpyDeviceToHost && !is_pinned(d, n)) drain(st);  // pageable: returns when done
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st) {
    if (!is_dev(d, n)) die("bad memset", d);
    enqueue(st, [d, v, n]() { memset(d, v, n); });
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode) {
    if (!g_streams.count(s)) die("capture of unknown stream", s);
    if (s->cap) die("capture of a capturing stream", s);
    emu_capture *c = new emu_capture();
    c->br.emplace_back(); c->streams.push_back(s); c->origin = s;
    s->cap = c; s->branch = 0; g_captures++;
    return cudaSuccess;
}
// Every other branch must end in a wait of the origin on its last item.
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    emu_capture *c = s->cap;
    if (!c || c->origin != s) die("end of a capture this stream did not begin", s);
    for (size_t b = 1; b < c->br.size(); b++) {
        bool joined = false;
        for (const emu_item &it : c->br[0])
            joined |= it.kind == IT_WAIT && it.branch == (int)b && it.pos == c->br[b].size();
        if (!joined) die("capture ended with a stream not joined back", c->streams[b]);
    }
    for (cudaStream_t t : c->streams) { t->cap = nullptr; t->branch = 0; }
    for (cudaEvent_t e : g_events) if (e->cap == c) e->cap = nullptr;
    *g = new emu_graph{c->br};
    delete c; g_captures--;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long) {
    emu_gexec *e = new emu_gexec{g->br, {}};
    for (size_t b = 0; b < g->br.size(); b++) {
        cudaStream_t t = new emu_stream(); g_streams.insert(t); e->priv.push_back(t);
    }
    *x = e; return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
// Nodes: the ops and external event records (waits are edges, not nodes).
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *count) {
    if (nodes) die("cudaGraphGetNodes: only the count is emulated", nodes);
    size_t n = 0;
    for (const auto &b : g->br) for (const emu_item &it : b) n += it.kind != IT_WAIT;
    *count = n; return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
    for (cudaStream_t t : x->priv) {
        drain(t); g_streams.erase(t);
        for (cudaEvent_t e : g_events) if (e->s == t) e->s = nullptr;
        delete t;
    }
    delete x; return cudaSuccess;
}
// Each branch replays on its private stream after the launch stream's
// earlier work; the launch stream's next op waits for all of them.
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) {
    if (!g_streams.count(s)) die("launch on unknown stream", s);
    if (s->cap) die("graph launch inside a capture", s);
    const unsigned long long at = s->queued;
    std::vector<unsigned long long> start, end;
    for (cudaStream_t t : x->priv) start.push_back(t->queued);
    for (size_t b = 0; b < x->br.size(); b++) {
        cudaStream_t t = x->priv[b];
        enqueue(t, [s, at]() { run_until(s, at); });
        for (const emu_item &it : x->br[b]) {
            if (it.kind == IT_OP) {
                enqueue(t, it.op);
            } else if (it.kind == IT_WAIT) {
                cudaStream_t o = x->priv[it.branch];
                unsigned long long to = start[it.branch] + 1 + it.pos;
                enqueue(t, [o, to]() { run_until(o, to); });
            } else {
                enqueue(t, []() {});
                it.ev->cap = nullptr; it.ev->s = t; it.ev->at = t->queued;
            }
        }
        end.push_back(t->queued);
    }
    std::vector<cudaStream_t> priv = x->priv;
    enqueue(s, [priv, end]() { for (size_t b = 0; b < priv.size(); b++) run_until(priv[b], end[b]); });
    return cudaSuccess;
}

const char *cublasGetStatusName(cublasStatus_t s) { static char b[32]; snprintf(b, 32, "CUBLAS_%d", (int)s); return b; }
const char *cublasGetStatusString(cublasStatus_t) { return "emulated"; }
struct emu_blas { cudaStream_t s; };
cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = new emu_blas(); (*h)->s = nullptr; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { h->s = s; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t m) {
    return m == CUBLAS_DEFAULT_MATH || m == CUBLAS_TF32_TENSOR_OP_MATH ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *ws, size_t bytes) {
    if (!is_dev(ws, bytes)) die("cublas workspace not device memory", ws);
    return CUBLAS_STATUS_SUCCESS;
}

// Checks the arguments at the call, as cuBLAS does; the caller queues gemm1.
static cublasStatus_t gemm_check(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                 const float *A, int lda, const float *B, int ldb, float *C, int ldc) {
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    int ra = ta == CUBLAS_OP_N ? m : k, rb = tb == CUBLAS_OP_N ? k : n;
    if (lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1)) return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    // every element touched must be device memory
    if (!is_dev(C, ((size_t)(n - 1) * ldc + m) * 4)) die("gemm C not device", C);
    if (k > 0) {
        size_t ca = ta == CUBLAS_OP_N ? k : m, cb = tb == CUBLAS_OP_N ? n : k;
        if (!is_dev(A, ((ca - 1) * lda + ra) * 4)) die("gemm A not device/oob", A);
        if (!is_dev(B, ((cb - 1) * ldb + rb) * 4)) die("gemm B not device/oob", B);
    }
    return CUBLAS_STATUS_SUCCESS;
}
static void gemm1(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0;
            for (int p = 0; p < k; p++) {
                float a = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
                float b = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
                acc += (double)a * b;
            }
            float c = (float)(alpha * acc);
            if (beta != 0.0f) c += beta * C[i + (size_t)j * ldc];
            C[i + (size_t)j * ldc] = c;
        }
}
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
  const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc) {
    if (!h->s) die("no stream on handle", nullptr);
    cublasStatus_t st = gemm_check(ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
    if (st) return st;
    float a = *alpha, b = *beta;  // host pointer mode: read at the call
    enqueue(h->s, [=]() { gemm1(ta, tb, m, n, k, a, A, lda, B, ldb, b, C, ldc); });
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
  const float *alpha, const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
  const float *beta, float *C, int ldc, long long sc, int batch) {
    if (!h->s) die("no stream on handle", nullptr);
    if (batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < batch; i++) {
        cublasStatus_t st = gemm_check(ta, tb, m, n, k, A + i * sa, lda, B + i * sb, ldb, C + i * sc, ldc);
        if (st) return st;
    }
    float a = *alpha, b = *beta;
    enqueue(h->s, [=]() {
        for (int i = 0; i < batch; i++)
            gemm1(ta, tb, m, n, k, a, A + i * sa, lda, B + i * sb, ldb, b, C + i * sc, ldc);
    });
    return CUBLAS_STATUS_SUCCESS;
}

// ---- cuBLASLt
struct emu_lt { int unused; };
struct emu_lt_desc {
    int ta = 0, tb = 0; uint32_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    const float *vec = nullptr; void *aux = nullptr; int64_t aux_ld = 0;
};
struct emu_lt_layout { uint64_t rows, cols; int64_t ld; };
struct emu_lt_pref { int unused; };
static const uint64_t EMU_ALGO = 0x4c74;  // marks an algorithm the heuristic gave

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { *h = new emu_lt(); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct, cudaDataType_t scale) {
    if ((ct != CUBLAS_COMPUTE_32F && ct != CUBLAS_COMPUTE_32F_FAST_TF32) || scale != CUDA_R_32F)
        return CUBLAS_STATUS_INVALID_VALUE;
    *d = new emu_lt_desc(); return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                              const void *buf, size_t bytes) {
    size_t want = a == CUBLASLT_MATMUL_DESC_BIAS_POINTER || a == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
                      ? sizeof(void *) : a == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD ? 8 : 4;
    if (bytes != want) return CUBLAS_STATUS_INVALID_VALUE;
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: memcpy(&d->ta, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: memcpy(&d->tb, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: memcpy(&d->epi, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: memcpy(&d->vec, buf, bytes); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: memcpy(&d->aux, buf, bytes); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: memcpy(&d->aux_ld, buf, 8); break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (t != CUDA_R_32F || ld < (int64_t)(rows > 1 ? rows : 1)) return CUBLAS_STATUS_INVALID_VALUE;
    *l = new emu_lt_layout{rows, cols, ld}; return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = new emu_lt_pref(); return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { delete p; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *, size_t bytes) {
    return bytes == (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES ? 8u : 4u) ? CUBLAS_STATUS_SUCCESS
                                                                             : CUBLAS_STATUS_INVALID_VALUE;
}

// The GEMM's shape from the layouts: op(A) [m,k], op(B) [k,n], D [m,n].
static bool lt_shape(const emu_lt_desc *o, const emu_lt_layout *a, const emu_lt_layout *b, const emu_lt_layout *d,
                     int *m, int *n, int *k) {
    *m = (int)d->rows; *n = (int)d->cols; *k = (int)(o->ta ? a->rows : a->cols);
    return (o->ta ? a->cols : a->rows) == d->rows && (o->tb ? b->rows : b->cols) == d->cols &&
           (uint64_t)*k == (o->tb ? b->cols : b->rows);
}
static bool lt_epi_ok(const emu_lt_desc *o, int m) {
    bool aux = o->epi == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || o->epi == CUBLASLT_EPILOGUE_DRELU;
    bool vec = o->epi == CUBLASLT_EPILOGUE_BIAS || o->epi == CUBLASLT_EPILOGUE_RELU_BIAS ||
               o->epi == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || o->epi == CUBLASLT_EPILOGUE_BGRADB;
    if (!aux && !vec && o->epi != CUBLASLT_EPILOGUE_DEFAULT) return false;
    if (aux && (!o->aux || o->aux_ld % 128 || o->aux_ld < m)) return false;
    return !vec || o->vec;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t,
    int requested, cublasLtMatmulHeuristicResult_t *results, int *found) {
    int m, n, k;
    *found = 0;
    if (requested < 1 || c->rows != d->rows || c->cols != d->cols || !lt_shape(op, a, b, d, &m, &n, &k) ||
        !lt_epi_ok(op, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (getenv("EMU_LT_REFUSE")) return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(results, 0, sizeof(*results));
    results->algo.data[0] = EMU_ALGO;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// sum over kk < k of op(B)[kk][j] for each column j, in bias_grad's order:
// R row blocks, each of PS_CUDA_BG_ROWS lanes striding down the rows, the
// lanes then the blocks added in order (dense.cu k_bias_grad, k_bias_grad_sum).
static void lt_bgradb(int tb, int k, int n, const float *B, int ldb, float *db) {
    const size_t R = ps_cuda_bg_blocks(k, n), L = PS_CUDA_BG_ROWS;
    for (int j = 0; j < n; j++) {
        float total = 0.0f, first = 0.0f;
        for (size_t y = 0; y < R; y++) {
            float s = 0.0f;
            for (size_t r = 0; r < L; r++) {
                float acc = 0.0f;
                for (size_t kk = y * L + r; kk < (size_t)k; kk += R * L)
                    acc += tb ? B[j + kk * ldb] : B[kk + (size_t)j * ldb];
                s += acc;
            }
            if (y == 0) first = s;
            total += s;
        }
        db[j] = R > 1 ? total : first;
    }
}
// D's epilogue, element by element as k_bias (bias, ReLU) and k_relu_bwd.
static void lt_epilogue(const emu_lt_desc o, int m, int n, float *D, int ldd) {
    uint8_t *mask = (uint8_t *)o.aux;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float &v = D[i + (size_t)j * ldd];
            const size_t bit = (size_t)j * o.aux_ld + i;
            if (o.epi == CUBLASLT_EPILOGUE_DRELU) {
                v = mask[bit >> 3] >> (bit & 7) & 1 ? v : 0.0f;
                continue;
            }
            if (o.epi == CUBLASLT_EPILOGUE_DEFAULT || o.epi == CUBLASLT_EPILOGUE_BGRADB) continue;
            const float x = v + o.vec[i];
            v = o.epi == CUBLASLT_EPILOGUE_BIAS ? x : (x > 0.0f ? x : 0.0f);
            if (o.epi == CUBLASLT_EPILOGUE_RELU_AUX_BIAS)
                mask[bit >> 3] = (uint8_t)((mask[bit >> 3] & ~(1u << (bit & 7))) | (unsigned)(x > 0.0f) << (bit & 7));
        }
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
    cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta, const void *C,
    cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo, void *ws,
    size_t ws_bytes, cudaStream_t s) {
    int m, n, k;
    if (!algo || algo->data[0] != EMU_ALGO) die("cublasLtMatmul without a heuristic's algorithm", algo);
    if (C != D || c->ld != d->ld) die("cublasLtMatmul: only C == D is emulated", C);
    if (!lt_shape(op, a, b, d, &m, &n, &k) || !lt_epi_ok(op, m)) return CUBLAS_STATUS_INVALID_VALUE;
    if (ws_bytes && !is_dev(ws, ws_bytes)) die("cublasLt workspace not device memory", ws);
    const cublasOperation_t ta = op->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = op->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st = gemm_check(ta, tb, m, n, k, (const float *)A, (int)a->ld, (const float *)B, (int)b->ld,
                                   (float *)D, (int)d->ld);
    if (st) return st;
    const emu_lt_desc o = *op;  // read at the call: a recording keeps these pointers
    const bool bgrad = o.epi == CUBLASLT_EPILOGUE_BGRADB;
    if (o.vec && !is_dev(o.vec, (size_t)(bgrad ? n : m) * 4)) die("cublasLt bias not device memory", o.vec);
    if (o.aux && !is_dev(o.aux, (size_t)o.aux_ld / 8 * n)) die("cublasLt mask not device memory", o.aux);
    const float al = *(const float *)alpha, be = *(const float *)beta;
    const int lda = (int)a->ld, ldb = (int)b->ld, ldd = (int)d->ld;
    enqueue(s, [=]() {
        gemm1(ta, tb, m, n, k, al, (const float *)A, lda, (const float *)B, ldb, be, (float *)D, ldd);
        if (bgrad) lt_bgradb(o.tb, k, n, (const float *)B, ldb, (float *)o.vec);
        lt_epilogue(o, m, n, (float *)D, ldd);
    });
    return CUBLAS_STATUS_SUCCESS;
}

// ---- cuDNN: descriptors as small structs, the three convolutions as direct
// float64 loops on the host (NCHW, cross-correlation, stride 1). The
// heuristics list a non-deterministic (backward) or too large (forward)
// algorithm first and a deterministic FMA one second, and running algorithm
// 0 dies: so a choice that ignores determinism or the workspace shows here.
struct emu_dnn { cudaStream_t s; };
struct emu_dnn_tensor { int n, c, h, w; };
struct emu_dnn_conv { int pad; cudnnMathType_t math; };
const char *cudnnGetErrorString(cudnnStatus_t) { return "emulated cuDNN error"; }
cudnnStatus_t cudnnCreate(cudnnHandle_t *h) { *h = new emu_dnn(); (*h)->s = nullptr; return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { delete h; return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) { h->s = s; return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) { *d = new emu_dnn_tensor(); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { delete d; return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) { *d = new emu_dnn_tensor(); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { delete d; return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) { *d = new emu_dnn_conv(); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) { delete d; return CUDNN_STATUS_SUCCESS; }
static cudnnStatus_t dnn_set4(emu_dnn_tensor *d, int n, int c, int h, int w) {
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
    *d = {n, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t,
  cudnnDataType_t, int n, int c, int h, int w) { return dnn_set4(d, n, c, h, w); }
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t,
  cudnnTensorFormat_t, int k, int c, int h, int w) {
    return h == w ? dnn_set4(d, k, c, h, w) : CUDNN_STATUS_NOT_SUPPORTED;  // square kernels only
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w,
  int u, int v, int dil_h, int dil_w, cudnnConvolutionMode_t mode, cudnnDataType_t) {
    if (pad_h != pad_w || pad_h < 0 || u != 1 || v != 1 || dil_h != 1 || dil_w != 1 ||
        mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_NOT_SUPPORTED;
    d->pad = pad_h;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) { d->math = m; return CUDNN_STATUS_SUCCESS; }
// The shapes agree: y = conv(x, w) with d's padding.
static bool dnn_shapes(const emu_dnn_tensor *x, const emu_dnn_tensor *w, const emu_dnn_conv *d,
                       const emu_dnn_tensor *y) {
    return x->c == w->c && y->n == x->n && y->c == w->n && y->h == x->h + 2 * d->pad - w->h + 1 &&
           y->w == x->w + 2 * d->pad - w->w + 1;
}
// Two candidates: `first` (rejected by dnn.cu's rules) and a good one.
extern "C++" {  // templates: C++ linkage inside the extern "C" block
template <typename P, typename A>
static cudnnStatus_t dnn_list(bool ok, int want, int *got, P *perf, bool first_big, cudnnMathType_t m) {
    if (!ok) return CUDNN_STATUS_BAD_PARAM;
    *got = want < 2 ? want : 2;
    P bad = {(A)0, CUDNN_STATUS_SUCCESS, 1.0f, first_big ? ((size_t)1 << 40) : 0,
             first_big ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC, m, {0, 0, 0}};
    P good = {(A)1, CUDNN_STATUS_SUCCESS, 2.0f, 1024, CUDNN_DETERMINISTIC, m, {0, 0, 0}};
    if (*got > 0) perf[0] = bad;
    if (*got > 1) perf[1] = good;
    return CUDNN_STATUS_SUCCESS;
}
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, cudnnTensorDescriptor_t x,
  cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int want,
  int *got, cudnnConvolutionFwdAlgoPerf_t *perf) {
    return dnn_list<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
        dnn_shapes(x, w, c, y), want, got, perf, true, c->math);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t,
  cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
  cudnnFilterDescriptor_t dw, int want, int *got, cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
    return dnn_list<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
        dnn_shapes(x, dw, c, dy), want, got, perf, false, c->math);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t,
  cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
  cudnnTensorDescriptor_t dx, int want, int *got, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
    return dnn_list<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
        dnn_shapes(dx, w, c, dy), want, got, perf, false, c->math);
}
static size_t dnn_count(const emu_dnn_tensor *t) { return (size_t)t->n * t->c * t->h * t->w; }
// Checks a call's operands as cuDNN would meet them; dies on a misuse.
static void dnn_check(cudnnHandle_t h, const emu_dnn_tensor *x, const void *px,
                      const emu_dnn_tensor *w, const void *pw, const emu_dnn_conv *c,
                      const emu_dnn_tensor *y, const void *py, int algo, void *ws, size_t wsb) {
    if (!h->s) die("no stream on the cuDNN handle", nullptr);
    if (!dnn_shapes(x, w, c, y)) die("cuDNN descriptors disagree", nullptr);
    if (algo != 1) die("cuDNN algorithm not the deterministic one that fits", nullptr);
    if (!is_dev(px, dnn_count(x) * 4) || !is_dev(pw, dnn_count(w) * 4) || !is_dev(py, dnn_count(y) * 4))
        die("cuDNN operand not device memory", nullptr);
    if (wsb < 1024 || !is_dev(ws, wsb)) die("cuDNN workspace", ws);
}
// The sum over (c, kh, kw) of one output element, or its adjoints: f(xi, wi, yi)
// for every valid (n, o, c, oh, ow, kh, kw), in that nesting.
extern "C++" {
template <typename F>
static void dnn_each(emu_dnn_tensor x, emu_dnn_tensor w, emu_dnn_tensor y, int pad, F f) {
    for (int n = 0; n < y.n; n++) for (int o = 0; o < y.c; o++)
    for (int oh = 0; oh < y.h; oh++) for (int ow = 0; ow < y.w; ow++) {
        size_t yi = (((size_t)n * y.c + o) * y.h + oh) * y.w + ow;
        for (int c = 0; c < x.c; c++) for (int kh = 0; kh < w.h; kh++) for (int kw = 0; kw < w.w; kw++) {
            int ih = oh + kh - pad, iw = ow + kw - pad;
            if (ih < 0 || ih >= x.h || iw < 0 || iw >= x.w) continue;
            f((((size_t)n * x.c + c) * x.h + ih) * x.w + iw, (((size_t)o * w.c + c) * w.h + kh) * w.w + kw, yi);
        }
    }
}
}
// out = alpha * acc + beta * out, acc summed in float64.
static void dnn_store(float *out, const std::vector<double> &acc, float alpha, float beta) {
    for (size_t i = 0; i < acc.size(); i++) out[i] = (float)(alpha * acc[i]) + (beta != 0.0f ? beta * out[i] : 0.0f);
}
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, cudnnTensorDescriptor_t xd,
  const void *x, cudnnFilterDescriptor_t wd, const void *w, cudnnConvolutionDescriptor_t c,
  cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wsb, const void *beta,
  cudnnTensorDescriptor_t yd, void *y) {
    dnn_check(h, xd, x, wd, w, c, yd, y, algo, ws, wsb);
    emu_dnn_tensor X = *xd, W = *wd, Y = *yd;
    float a = *(const float *)alpha, b = *(const float *)beta;
    const float *px = (const float *)x, *pw = (const float *)w;
    float *py = (float *)y;
    int pad = c->pad;
    enqueue(h->s, [=]() {
        std::vector<double> acc(dnn_count(&Y));
        dnn_each(X, W, Y, pad, [&](size_t xi, size_t wi, size_t yi) { acc[yi] += (double)px[xi] * pw[wi]; });
        dnn_store(py, acc, a, b);
    });
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
  cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t dyd, const void *dy,
  cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t wsb,
  const void *beta, cudnnFilterDescriptor_t dwd, void *dw) {
    dnn_check(h, xd, x, dwd, dw, c, dyd, dy, algo, ws, wsb);
    emu_dnn_tensor X = *xd, W = *dwd, Y = *dyd;
    float a = *(const float *)alpha, b = *(const float *)beta;
    const float *px = (const float *)x, *pdy = (const float *)dy;
    float *pdw = (float *)dw;
    int pad = c->pad;
    enqueue(h->s, [=]() {
        std::vector<double> acc(dnn_count(&W));
        dnn_each(X, W, Y, pad, [&](size_t xi, size_t wi, size_t yi) { acc[wi] += (double)px[xi] * pdy[yi]; });
        dnn_store(pdw, acc, a, b);
    });
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
  cudnnFilterDescriptor_t wd, const void *w, cudnnTensorDescriptor_t dyd, const void *dy,
  cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t wsb,
  const void *beta, cudnnTensorDescriptor_t dxd, void *dx) {
    dnn_check(h, dxd, dx, wd, w, c, dyd, dy, algo, ws, wsb);
    emu_dnn_tensor X = *dxd, W = *wd, Y = *dyd;
    float a = *(const float *)alpha, b = *(const float *)beta;
    const float *pw = (const float *)w, *pdy = (const float *)dy;
    float *pdx = (float *)dx;
    int pad = c->pad;
    enqueue(h->s, [=]() {
        std::vector<double> acc(dnn_count(&X));
        dnn_each(X, W, Y, pad, [&](size_t xi, size_t wi, size_t yi) { acc[xi] += (double)pw[wi] * pdy[yi]; });
        dnn_store(pdx, acc, a, b);
    });
    return CUDNN_STATUS_SUCCESS;
}
}  // extern "C"

// ---- kernel launches: blocks in order; threads serially, or as coroutines
// (round-robin between barriers) for kernels that call __syncthreads.
enum { MAXT = 1024, STK = 256 * 1024 };
static ucontext_t g_sched, g_th[MAXT];
static char *g_stack[MAXT];
static int g_cur, g_done[MAXT];
static std::function<void()> *g_body;
static bool g_coro;

void __syncthreads(void) {
    if (!g_coro) die("__syncthreads in a kernel not marked as syncing", nullptr);
    swapcontext(&g_th[g_cur], &g_sched);
}
static void tramp(void) { (*g_body)(); g_done[g_cur] = 1; }

static void run_kernel(const char *name, dim3 g, dim3 b, std::function<void()> &body);

// Checks the configuration at the launch (as CUDA reports it to
// cudaGetLastError); the blocks run when the stream gets there.
void emu_launch(const char *name, dim3 g, dim3 b, cudaStream_t s, std::function<void()> body) {
    if (!s) die("launch on null stream", nullptr);
    size_t nt = (size_t)b.x * b.y * b.z;
    if (g.x == 0 || g.y == 0 || nt == 0 || nt > 1024 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        g_last = cudaErrorInvalidConfiguration; return;
    }
    enqueue(s, [name, g, b, body]() mutable { run_kernel(name, g, b, body); });
}

static void run_kernel(const char *name, dim3 g, dim3 b, std::function<void()> &body) {
    static const std::set<std::string> sync = {EMU_SYNC_KERNELS};
    size_t nt = (size_t)b.x * b.y * b.z;
    gridDim = g; blockDim = b; g_body = &body;
    g_coro = sync.count(name) > 0;
    for (unsigned bz = 0; bz < g.z; bz++) for (unsigned by = 0; by < g.y; by++) for (unsigned bx = 0; bx < g.x; bx++) {
        blockIdx = {bx, by, bz};
        if (!g_coro) {
            for (unsigned tz = 0; tz < b.z; tz++) for (unsigned ty = 0; ty < b.y; ty++) for (unsigned tx = 0; tx < b.x; tx++) {
                threadIdx = {tx, ty, tz}; body();
            }
            continue;
        }
        for (size_t t = 0; t < nt; t++) {
            if (!g_stack[t]) g_stack[t] = (char *)malloc(STK);
            getcontext(&g_th[t]);
            g_th[t].uc_stack.ss_sp = g_stack[t]; g_th[t].uc_stack.ss_size = STK; g_th[t].uc_link = &g_sched;
            makecontext(&g_th[t], tramp, 0);
            g_done[t] = 0;
        }
        size_t alive = nt;
        while (alive) {
            size_t finished = 0, waiting = 0;
            for (size_t t = 0; t < nt; t++) {
                if (g_done[t]) continue;
                g_cur = (int)t;
                threadIdx = {(unsigned)(t % b.x), (unsigned)(t / b.x % b.y), (unsigned)(t / b.x / b.y)};
                swapcontext(&g_sched, &g_th[t]);
                if (g_done[t]) finished++; else waiting++;
            }
            if (finished && waiting) die("divergent __syncthreads", nullptr);
            alive -= finished;
        }
    }
}
