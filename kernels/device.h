/*
 * kernels/device.h - which GPU a worker uses: one per local rank.
 *
 * A worker on a host with several GPUs takes GPU (local rank mod visible
 * GPUs): the tasks a cluster manager starts on one host spread over its
 * GPUs. The local rank is the first of LOCAL_RANK, SLURM_LOCALID and
 * OMPI_COMM_WORLD_LOCAL_RANK; none means 0. CUDA_VISIBLE_DEVICES only
 * narrows what is visible (the runtime numbers those 0, 1, ...): a manager
 * that gives each task its own GPU (Slurm --gpus-per-task=1, a Kubernetes
 * nvidia.com/gpu: 1) leaves one visible, device 0; one that shows several
 * tasks the same set has them spread over it. --gpu N takes visible GPU N
 * whatever the rank.
 *
 * It does not balance by memory or load, and it does not pick a device for
 * servers (they compute on the CPU).
 *
 * Thread safety: ps_device_pick is pure; ps_device_local_rank reads the
 * environment; ps_device_use sets the calling thread's CUDA device.
 */
#ifndef PS_KERNELS_DEVICE_H
#define PS_KERNELS_DEVICE_H

#include <stddef.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the choice depends on. */
typedef struct {
    int gpu;        /* --gpu N; -1 = not given */
    int local_rank; /* this task's rank on its host; -1 = none in the environment */
    int count;      /* GPUs the runtime sees (after CUDA_VISIBLE_DEVICES) */
    const char *visible; /* CUDA_VISIBLE_DEVICES, for the messages; NULL = unset */
} ps_device_in_t;

/*
 * The visible GPU index to use: gpu when given, else local_rank mod count
 * (0 without a local rank). Returns it, or PS_ENODEV (count < 1) /
 * PS_EINVAL (gpu >= count) with a one-line reason in why.
 */
int ps_device_pick(const ps_device_in_t *in, char *why, size_t whylen);

/* This task's local rank from the environment (-1 when none), and the
 * variable that gave it in *from (NULL-safe; "" when none). */
int ps_device_local_rank(const char **from);

/*
 * With backend k (for one without devices, the CPU: nothing, 0):
 * picks this task's GPU (--gpu gpu, -1 = by local rank) and makes it the
 * calling thread's device, before any context. what gets a line for the log,
 * e.g. "GPU 1 NVIDIA H100 80GB HBM3 (local rank 1 from SLURM_LOCALID, 2
 * visible)". Returns 0, or a PS_E* with the reason in what.
 */
int ps_device_use(const ps_kernels_t *k, int gpu, char *what, size_t whatlen);

#ifdef __cplusplus
}
#endif
#endif
