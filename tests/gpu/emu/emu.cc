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
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <cstdio>
#include <ucontext.h>

#include "emu_sync.h"

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
struct emu_stream {
    std::deque<std::function<void()>> q;  // queued, not yet run
    unsigned long long queued = 0, done = 0;
    bool busy = false;                    // running one of its ops now
};
struct emu_event { cudaStream_t s = nullptr; unsigned long long at = 0; };  // last record
static std::set<cudaStream_t> g_streams;
static std::set<cudaEvent_t> g_events;

// Runs s's ops until the first `at` of them are done.
static void run_until(cudaStream_t s, unsigned long long at) {
    if (!s || !g_streams.count(s)) return;  // never recorded, or destroyed (so drained)
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
static void drain_all() { for (cudaStream_t s : g_streams) drain(s); }
static void enqueue(cudaStream_t s, std::function<void()> op) {
    if (!s) die("null stream", nullptr);
    if (!g_streams.count(s)) die("unknown or destroyed stream", s);
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
cudaError_t cudaMallocHost(void **p, size_t n) { *p = malloc(n ? n : 1); g_host[(uintptr_t)*p] = n; return cudaSuccess; }
cudaError_t cudaFreeHost(void *p) {
    drain_all();
    if (!g_host.erase((uintptr_t)p)) die("cudaFreeHost of non-pinned", p);
    free(p); return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = new emu_stream(); g_streams.insert(*s); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!g_streams.count(s)) die("cudaStreamDestroy of unknown stream", s);
    drain(s);
    g_streams.erase(s);
    for (cudaEvent_t e : g_events) if (e->s == s) e->s = nullptr;
    delete s; return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (!g_streams.count(s)) die("sync of unknown stream", s);
    drain(s); return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = new emu_event(); g_events.insert(*e); return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!g_events.erase(e)) die("cudaEventDestroy of unknown event", e);
    delete e; return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!g_events.count(e)) die("record of unknown event", e);
    if (!g_streams.count(s)) die("record on unknown stream", s);
    e->s = s; e->at = s->queued; return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!g_events.count(e)) die("sync of unknown event", e);
    run_until(e->s, e->at); return cudaSuccess;
}
// Waits for the event's record as it is now; a later record does not move it.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    if (!g_events.count(e)) die("wait on unknown event", e);
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

const char *cublasGetStatusName(cublasStatus_t s) { static char b[32]; snprintf(b, 32, "CUBLAS_%d", (int)s); return b; }
const char *cublasGetStatusString(cublasStatus_t) { return "emulated"; }
struct emu_blas { cudaStream_t s; };
cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = new emu_blas(); (*h)->s = nullptr; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { h->s = s; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

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
