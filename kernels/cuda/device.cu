/*
 * kernels/cuda/device.cu - the CUDA backend's devices: how many this
 * process sees, and making one the calling thread's (kernels/device.h
 * decides which). No context is made here beyond what cudaSetDevice does.
 */
#include <stdio.h>

#include <cuda_runtime.h>

#include "common/error.h"
#include "kernels/cuda/cuda.h"

int ps_cuda_devices(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear it, so no later check trips on it */
        return PS_ENODEV;
    }
    return count;
}

int ps_cuda_use_device(int index, char *name, size_t namelen)
{
    cudaDeviceProp prop;
    cudaError_t e = cudaSetDevice(index);
    if (e == cudaSuccess) {
        e = cudaGetDeviceProperties(&prop, index);
    }
    if (e != cudaSuccess) {
        snprintf(name, namelen, "cannot use it: %s (%s)", cudaGetErrorName(e),
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        return PS_ENODEV;
    }
    snprintf(name, namelen, "%s", prop.name);
    return 0;
}
