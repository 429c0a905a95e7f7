/* tests/gpu/emu/include/cuda_runtime.h - the fake CUDA runtime of the host
 * emulator (see ../emu.cc); only the names kernels/cuda/ uses. */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __cplusplus
#include <functional>
#include <tuple>
extern "C" {
#endif
typedef enum {
    cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInitializationError = 3,
    cudaErrorInvalidValue = 1, cudaErrorInvalidConfiguration = 9, cudaErrorNoDevice = 100,
    cudaErrorInsufficientDriver = 35, cudaErrorNoKernelImageForDevice = 209,
    cudaErrorUnsupportedPtxVersion = 222, cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719, cudaErrorMisalignedAddress = 716,
    cudaErrorDevicesUnavailable = 46, cudaErrorECCUncorrectable = 214,
    cudaErrorHardwareStackError = 714, cudaErrorIllegalInstruction = 715
} cudaError_t;
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_gexec *cudaGraphExec_t;
typedef struct emu_gnode *cudaGraphNode_t;
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum cudaDeviceAttr { cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76 };
typedef struct { char name[256]; } cudaDeviceProp;
#define cudaStreamNonBlocking 1
#define cudaEventDefault 0
#define cudaEventDisableTiming 2
#define cudaEventRecordExternal 1
const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d);
cudaError_t cudaFree(void *p);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned f);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode m);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *count);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);
#ifdef __cplusplus
}
struct uint3e { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
extern uint3e blockIdx, threadIdx;
extern dim3 gridDim, blockDim;
#define __global__
#define __shared__ static
#define __launch_bounds__(x)
#define __device__
#define __forceinline__ inline
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
void __syncthreads(void);
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
void emu_launch(const char *name, dim3 g, dim3 b, cudaStream_t s, std::function<void()> body);
/* the arguments are evaluated at the launch, as CUDA does; the kernel runs
 * when its stream gets there */
#define EMU_LAUNCH(k, g, b, shm, s, ...) \
    emu_launch(#k, dim3(g), dim3(b), s, \
               [emu_args = std::make_tuple(__VA_ARGS__)]() { std::apply(k, emu_args); })
/* k<T><<<...>>>: named k, as run.sh lists the kernels with barriers */
#define EMU_LAUNCH_T(k, T, g, b, shm, s, ...) \
    emu_launch(#k, dim3(g), dim3(b), s, \
               [emu_args = std::make_tuple(__VA_ARGS__)]() { std::apply(k<T>, emu_args); })
#endif
#endif
