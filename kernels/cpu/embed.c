/*
 * kernels/cpu/embed.c - CPU embedding ops: the gather of a batch's rows into
 * its input matrix, and the gradient of that gather summed per row.
 *
 * Dimension letters: E floats per row, F lookups (fields) per sample, U
 * unique rows, n samples. The gradient walks each row's positions in the
 * CSR order the caller gives (ascending), adding in that order from 0.0f:
 * plain float adds in a fixed order, so the CUDA kernels (kernels/cuda/
 * embed.cu) give the same bits. The inner loops run over e with unit
 * stride, which GCC vectorises at -O3 without reordering the sums across
 * positions; E = 16, the default, gets its own inlined copy. Nothing here
 * allocates or keeps state.
 */
#include "kernels/cpu/cpu.h"

/* The rows of position j = i*F + f in a [n, ldx] matrix start at
 * (j/F)*ldx + (j%F)*E, which is j*E when the rows fill the matrix
 * (ldx == F*E): no division. */
static inline size_t s_at(uint32_t j, uint32_t F, size_t ldx, int E, int packed)
{
    if (packed) {
        return (size_t)j * E;
    }
    const uint32_t i = j / F, f = j - i * F;
    return (size_t)i * ldx + (size_t)f * E;
}

/* The gather for one E; inlined with E = 16 too, so that case copies a row
 * in one vector move. */
static inline __attribute__((always_inline)) void
s_gather(const float *restrict rows, int E, const uint32_t *restrict idx, int n, int F,
         float *restrict x, int ldx)
{
    const uint32_t N = (uint32_t)n * (uint32_t)F;
    const int packed = ldx == F * E;
    for (uint32_t j = 0; j < N; j++) {
        float *restrict xj = x + s_at(j, (uint32_t)F, (size_t)ldx, E, packed);
        const float *restrict r = rows + (size_t)idx[j] * E;
        for (int e = 0; e < E; e++) {
            xj[e] = r[e];
        }
    }
}

/* x[i*ldx + f*E + e] = rows[idx[i*F + f]*E + e] */
void ps_cpu_embed_gather(ps_kctx_t *ctx, const float *rows, int E, const uint32_t *idx, int n,
                         int F, float *x, int ldx)
{
    (void)ctx;
    if (E == 16) {
        s_gather(rows, 16, idx, n, F, x, ldx);
    } else {
        s_gather(rows, E, idx, n, F, x, ldx);
    }
}

/* The gradient for one E, inlined with E = 16 as the gather is. */
static inline __attribute__((always_inline)) void
s_grad(const float *restrict dx, int ldx, int E, int F, const uint32_t *restrict offsets,
       const uint32_t *restrict order, int U, float *restrict drows)
{
    const int packed = ldx == F * E;
    for (int u = 0; u < U; u++) {
        float *restrict d = drows + (size_t)u * E;
        for (int e = 0; e < E; e++) {
            d[e] = 0.0f;
        }
        for (uint32_t k = offsets[u]; k < offsets[u + 1]; k++) {
            const float *restrict g = dx + s_at(order[k], (uint32_t)F, (size_t)ldx, E, packed);
            for (int e = 0; e < E; e++) {
                d[e] += g[e];
            }
        }
    }
}

/* drows[u, :] = sum over k in [offsets[u], offsets[u+1]) of the dx slice of
 * position order[k], in ascending k, from 0.0f */
void ps_cpu_embed_grad(ps_kctx_t *ctx, const float *dx, int ldx, int E, int F,
                       const uint32_t *offsets, const uint32_t *order, int U, float *drows)
{
    (void)ctx;
    if (E == 16) {
        s_grad(dx, ldx, 16, F, offsets, order, U, drows);
    } else {
        s_grad(dx, ldx, E, F, offsets, order, U, drows);
    }
}
