/*
 * kernels/cuda/embed.cu - CUDA embedding ops: the gather of a batch's rows
 * into its input matrix, and the gradient of that gather summed per row.
 *
 * Dimension letters: E floats per row, F lookups (fields) per sample, U
 * unique rows, n samples. Both are grid-stride loops over one thread per
 * output float (coalesced: consecutive threads take consecutive floats of a
 * row). The gradient is a gather too, never a scatter: the thread of (u, e)
 * walks row u's positions in the caller's CSR order and adds them in that
 * order from 0.0f, the loop of kernels/cpu/embed.c, so both backends give
 * the same bits on every run (no atomics; adds alone, nothing to contract
 * into an FMA). It loads a few positions ahead before adding them in order,
 * so a row used by many samples costs memory latency once per few positions.
 * The thread index is 32-bit when the count fits (cuda_impl.h), addresses
 * are size_t.
 */
#include "kernels/cuda/cuda_impl.h"

/* x[i*ldx + f*E + e] = rows[idx[p]*E + e] for thread t = p*E + e, p = i*F + f */
template <typename I>
static __global__ void k_embed_gather(const float *__restrict__ rows, I E,
                                      const uint32_t *__restrict__ idx, I F,
                                      float *__restrict__ x, int ldx, I total)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
        const I p = t / E, e = t - p * E;
        const I i = p / F, f = p - i * F;
        x[(size_t)i * ldx + (size_t)f * E + e] = rows[(size_t)idx[p] * E + e];
    }
}

void ps_cuda_embed_gather(ps_kctx_t *ctx, const float *d_rows, int E, const uint32_t *d_idx,
                          int n, int F, float *d_x, int ldx)
{
    if (n <= 0 || F <= 0 || E <= 0) {
        return;
    }
    const size_t total = (size_t)n * F * E;
    const unsigned blocks = ps_cuda_blocks(total, PS_CUDA_THREADS);
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32(total), k_embed_gather, blocks, PS_CUDA_THREADS,
                       ctx->stream, d_rows, E, d_idx, F, d_x, ldx, total);
}

/* Position j's float e in dx [n, ldx]: sample j/F, field j%F. */
static __device__ __forceinline__ size_t s_at(uint32_t j, uint32_t F, int ldx, int E, int e)
{
    const uint32_t i = j / F, f = j - i * F;
    return (size_t)i * ldx + (size_t)f * E + e;
}

/* Positions loaded ahead of the adds in the gradient's loop. */
#define EG_AHEAD 4

/* drows[u*E + e] = sum over k in [offsets[u], offsets[u+1]) of dx at
 * (order[k], e), in ascending k from 0.0f; thread t = u*E + e. */
template <typename I>
static __global__ void k_embed_grad(const float *__restrict__ dx, int ldx, I E, uint32_t F,
                                    const uint32_t *__restrict__ offsets,
                                    const uint32_t *__restrict__ order,
                                    float *__restrict__ drows, I total)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
        const I u = t / E;
        const int e = (int)(t - u * E);
        const uint32_t end = offsets[u + 1];
        uint32_t k = offsets[u];
        float acc = 0.0f;
        for (; k + EG_AHEAD <= end; k += EG_AHEAD) {
            float v[EG_AHEAD];
            for (int a = 0; a < EG_AHEAD; a++) {
                v[a] = dx[s_at(order[k + a], F, ldx, (int)E, e)];
            }
            for (int a = 0; a < EG_AHEAD; a++) {
                acc += v[a];
            }
        }
        for (; k < end; k++) {
            acc += dx[s_at(order[k], F, ldx, (int)E, e)];
        }
        drows[t] = acc;
    }
}

void ps_cuda_embed_grad(ps_kctx_t *ctx, const float *d_dx, int ldx, int E, int F,
                        const uint32_t *d_offsets, const uint32_t *d_order, int U,
                        float *d_drows)
{
    if (U <= 0 || E <= 0) {
        return;
    }
    const size_t total = (size_t)U * E;
    const unsigned blocks = ps_cuda_blocks(total, PS_CUDA_THREADS);
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32(total), k_embed_grad, blocks, PS_CUDA_THREADS,
                       ctx->stream, d_dx, ldx, E, (uint32_t)F, d_offsets, d_order, d_drows,
                       total);
}
