/* tests/gpu/emu/include/cudnn.h - the fake cuDNN of the host emulator: the
 * legacy convolution API that kernels/cuda/dnn.cu uses, NCHW float only. */
#ifndef EMU_CUDNN_H
#define EMU_CUDNN_H
#include <stddef.h>
#include "cuda_runtime.h"
#ifdef __cplusplus
extern "C" {
#endif
typedef enum { CUDNN_STATUS_SUCCESS = 0, CUDNN_STATUS_NOT_INITIALIZED = 1001,
  CUDNN_STATUS_ALLOC_FAILED = 1003, CUDNN_STATUS_BAD_PARAM = 2000,
  CUDNN_STATUS_NOT_SUPPORTED = 3000 } cudnnStatus_t;
typedef enum { CUDNN_TENSOR_NCHW = 0 } cudnnTensorFormat_t;
typedef enum { CUDNN_DATA_FLOAT = 0 } cudnnDataType_t;
typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;
typedef enum { CUDNN_DEFAULT_MATH = 0, CUDNN_TENSOR_OP_MATH = 1,
  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2, CUDNN_FMA_MATH = 3 } cudnnMathType_t;
typedef enum { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 } cudnnDeterminism_t;
/* Two algorithms a direction is enough to check the choice (see emu.cc). */
typedef enum { CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1, CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 2
} cudnnConvolutionFwdAlgo_t;
typedef enum { CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT = 2 } cudnnConvolutionBwdFilterAlgo_t;
typedef enum { CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 2 } cudnnConvolutionBwdDataAlgo_t;
typedef struct emu_dnn *cudnnHandle_t;
typedef struct emu_dnn_tensor *cudnnTensorDescriptor_t;
typedef struct emu_dnn_tensor *cudnnFilterDescriptor_t;
typedef struct emu_dnn_conv *cudnnConvolutionDescriptor_t;
#define EMU_DNN_PERF(name, algo_t)                                                          \
  typedef struct { algo_t algo; cudnnStatus_t status; float time; size_t memory;           \
    cudnnDeterminism_t determinism; cudnnMathType_t mathType; int reserved[3]; } name
EMU_DNN_PERF(cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t);
EMU_DNN_PERF(cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t);
EMU_DNN_PERF(cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t);
const char *cudnnGetErrorString(cudnnStatus_t s);
cudnnStatus_t cudnnCreate(cudnnHandle_t *h);
cudnnStatus_t cudnnDestroy(cudnnHandle_t h);
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s);
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d);
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d);
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d);
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f,
  cudnnDataType_t t, int n, int c, int h, int w);
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
  cudnnTensorFormat_t f, int k, int c, int h, int w);
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w,
  int u, int v, int dil_h, int dil_w, cudnnConvolutionMode_t mode, cudnnDataType_t t);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m);
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, cudnnTensorDescriptor_t x,
  cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int want,
  int *got, cudnnConvolutionFwdAlgoPerf_t *perf);
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h,
  cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
  cudnnFilterDescriptor_t dw, int want, int *got, cudnnConvolutionBwdFilterAlgoPerf_t *perf);
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h,
  cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
  cudnnTensorDescriptor_t dx, int want, int *got, cudnnConvolutionBwdDataAlgoPerf_t *perf);
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, cudnnTensorDescriptor_t xd,
  const void *x, cudnnFilterDescriptor_t wd, const void *w, cudnnConvolutionDescriptor_t c,
  cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
  cudnnTensorDescriptor_t yd, void *y);
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
  cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t dyd, const void *dy,
  cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t ws_bytes,
  const void *beta, cudnnFilterDescriptor_t dwd, void *dw);
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
  cudnnFilterDescriptor_t wd, const void *w, cudnnTensorDescriptor_t dyd, const void *dy,
  cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t ws_bytes,
  const void *beta, cudnnTensorDescriptor_t dxd, void *dx);
#ifdef __cplusplus
}
#endif
#endif
