/*
 * kernels/cuda/dense.cu - CUDA dense-layer ops: cuBLAS sgemm, bias, ReLU,
 * fused softmax cross-entropy, logistic loss, SGD; each a C function over
 * device buffers.
 *
 * Every op is queued on ctx->stream and returns at once, except
 * softmax_xent and sigmoid_bce, which return the loss and so wait for their
 * one 16-byte copy.
 * Elementwise kernels are grid-stride loops, so any n works with a capped
 * grid; those that divide an index (bias, gather) use 32-bit indices when the
 * count fits (a GPU divides 64-bit integers slowly), size_t ones otherwise.
 * Reductions (bias_grad, the loss) run in a fixed order through shared
 * memory and per-block partial sums, never with atomics: the same inputs
 * give the same bits every run. Arithmetic follows kernels/cpu/dense.c;
 * where the CPU backend matches a formula exactly (sgd_step) the kernel
 * forbids FMA contraction with __f*_rn so both backends give identical bits.
 * Shapes: N rows (batch), C columns (features or classes).
 */
#include "kernels/cuda/cuda_impl.h"

/* ---- sgemm ---------------------------------------------------------------- */

/*
 * Row-major C[M,N] = alpha op(A) op(B) + beta C through column-major cuBLAS:
 * a row-major matrix with row stride ld is its transpose in column-major with
 * leading dimension ld, so C^T = op(B)^T op(A)^T is one cublasSgemm with the
 * operands swapped, m = N, n = M, and the same transpose flags.
 */
void ps_cuda_sgemm(ps_kctx_t *ctx, int trans_a, int trans_b, int M, int N, int K,
                   float alpha, const float *d_A, int lda, const float *d_B, int ldb,
                   float beta, float *d_C, int ldc)
{
    if (M <= 0 || N <= 0) {
        return;
    }
    PS_CUBLAS_CHECK(cublasSgemm(ctx->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, d_B,
                                ldb, d_A, lda, &beta, d_C, ldc));
}

/* ---- bias and ReLU ----------------------------------------------------------- */

/* y[N,C] = y + b[c] (relu: max(., 0)); total = N*C; I = unsigned (32-bit
 * indices) when total fits ps_cuda_fits32, else size_t */
template <typename I>
static __global__ void k_bias(float *y, const float *b, I total, unsigned C, int relu)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        float v = y[i] + b[i % C];
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

static void s_bias(ps_kctx_t *ctx, float *d_y, const float *d_b, int N, int C, int relu)
{
    const size_t total = (size_t)N * C;
    if (N <= 0 || C <= 0) {
        return;
    }
    const unsigned blocks = ps_cuda_blocks(total, PS_CUDA_THREADS);
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32(total), k_bias, blocks, PS_CUDA_THREADS, ctx->stream,
                       d_y, d_b, total, C, relu);
}

void ps_cuda_bias_add(ps_kctx_t *ctx, float *d_y, const float *d_b, int N, int C)
{
    s_bias(ctx, d_y, d_b, N, C, 0);
}

void ps_cuda_bias_relu(ps_kctx_t *ctx, float *d_y, const float *d_b, int N, int C)
{
    s_bias(ctx, d_y, d_b, N, C, 1);
}

#define BG_COLS PS_CUDA_BG_COLS
#define BG_ROWS PS_CUDA_BG_ROWS

/* Pass 1: part[R][C], R = gridDim.y row blocks; block (x, y) covers 32
 * columns and the rows n = y*BG_ROWS + lane + k*R*BG_ROWS. Each row lane
 * sums its rows in order, then lane 0 adds the BG_ROWS partials in order. */
static __global__ void k_bias_grad(const float *dy, float *part, int N, int C)
{
    __shared__ float lane[BG_ROWS][BG_COLS + 1];
    const int c = blockIdx.x * BG_COLS + threadIdx.x;
    const unsigned step = gridDim.y * BG_ROWS;
    float acc = 0.0f;
    if (c < C) {
        for (unsigned n = blockIdx.y * BG_ROWS + threadIdx.y; n < (unsigned)N; n += step) {
            acc += dy[(size_t)n * C + c];
        }
    }
    lane[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float s = 0.0f;
        for (int r = 0; r < BG_ROWS; r++) {
            s += lane[r][threadIdx.x];
        }
        part[(size_t)blockIdx.y * C + c] = s;
    }
}

/* Pass 2: db[c] = sum over r < R of part[r][c], in r order; thread per c. */
static __global__ void k_bias_grad_sum(const float *part, float *db, int R, int C)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) {
        float s = 0.0f;
        for (int r = 0; r < R; r++) {
            s += part[(size_t)r * C + c];
        }
        db[c] = s;
    }
}

/* db[C] = column sums of dy[N,C], in two passes through the context's
 * scratch when N is large (one, straight into db, when it is not). The
 * row-block count R depends on N and C only: the same bits every run. */
void ps_cuda_bias_grad(ps_kctx_t *ctx, const float *d_dy, float *d_db, int N, int C)
{
    if (C <= 0) {
        return;
    }
    N = N < 0 ? 0 : N;
    const size_t R = ps_cuda_bg_blocks(N, C);
    float *d_part = R > 1 ? ctx->d_red : d_db;
    const dim3 block(BG_COLS, BG_ROWS);
    const dim3 grid((unsigned)((C + BG_COLS - 1) / BG_COLS), (unsigned)R);
    k_bias_grad<<<grid, block, 0, ctx->stream>>>(d_dy, d_part, N, C);
    PS_CUDA_CHECK_LAUNCH();
    if (R > 1) {
        k_bias_grad_sum<<<ps_cuda_blocks((size_t)C, PS_CUDA_THREADS), PS_CUDA_THREADS, 0,
                          ctx->stream>>>(d_part, d_db, (int)R, C);
        PS_CUDA_CHECK_LAUNCH();
    }
}

/* y = max(x, 0); may run in place */
static __global__ void k_relu_fwd(const float *x, float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

/* dx = dy * (y > 0); may run in place (dx == dy) */
static __global__ void k_relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

void ps_cuda_relu_fwd(ps_kctx_t *ctx, const float *d_x, float *d_y, size_t n)
{
    if (n == 0) {
        return;
    }
    k_relu_fwd<<<ps_cuda_blocks(n, PS_CUDA_THREADS), PS_CUDA_THREADS, 0, ctx->stream>>>(
        d_x, d_y, n);
    PS_CUDA_CHECK_LAUNCH();
}

void ps_cuda_relu_bwd(ps_kctx_t *ctx, const float *d_y, const float *d_dy, float *d_dx,
                      size_t n)
{
    if (n == 0) {
        return;
    }
    k_relu_bwd<<<ps_cuda_blocks(n, PS_CUDA_THREADS), PS_CUDA_THREADS, 0, ctx->stream>>>(
        d_y, d_dy, d_dx, n);
    PS_CUDA_CHECK_LAUNCH();
}

/* ---- the losses: softmax cross-entropy and logistic ------------------------------- */

/* Threads per block of the row pass; a power of two for the tree reduction. */
#define XENT_THREADS 256

/*
 * Softmax cross-entropy of row n, the CPU formulas in the CPU order:
 * m = max z (first argmax), lse = m + log(sum exp(z - m)), loss = lse - z[y],
 * dz = exp(z - lse)/N - onehot/N. The row is read fully (max, sum, z[y])
 * before any of it is written, so dz may alias z.
 */
struct s_xent_row {
    const float *z;        /* [N,C] logits */
    const uint8_t *labels; /* [N] */
    int C;                 /* classes */
    float *dz;             /* [N,C] their gradient, or NULL */
    float inv_n;           /* 1/N */
    __device__ float operator()(long long n, int *hit) const
    {
        const float *r = z + (size_t)n * C;
        int best = 0;
        float m = r[0];
        for (int c = 1; c < C; c++) {
            if (r[c] > m) {
                m = r[c];
                best = c;
            }
        }
        float sum = 0.0f;
        for (int c = 0; c < C; c++) {
            sum += expf(r[c] - m);
        }
        const float lse = m + logf(sum);
        const int y = labels[n];
        const float loss = lse - r[y]; /* before dz, which may be r, is written */
        *hit = best == y;
        if (dz) {
            float *d = dz + (size_t)n * C;
            for (int c = 0; c < C; c++) {
                d[c] = expf(r[c] - lse) * inv_n;
            }
            d[y] -= inv_n;
        }
        return loss;
    }
};

/*
 * Logistic loss of row n, the CPU formulas of ps_cpu_sigmoid_bce_hits:
 * e = exp(-|z|), loss = max(z, 0) - z*y + log1p(e), dz = (sigmoid(z) - y) / N
 * with sigmoid(z) = 1/(1+e) (z >= 0) or e/(1+e); a hit is a prediction
 * z > 0 equal to the label. z is read before dz is written, so dz may alias z.
 */
struct s_bce_row {
    const float *z;        /* [N] logits */
    const uint8_t *labels; /* [N] 0 or not */
    float *dz;             /* [N] their gradient, or NULL */
    float inv_n;           /* 1/N */
    __device__ float operator()(long long n, int *hit) const
    {
        const float v = z[n], y = labels[n] ? 1.0f : 0.0f;
        const float e = expf(-fabsf(v));
        const float loss = (v > 0.0f ? v : 0.0f) - v * y + log1pf(e);
        *hit = (v > 0.0f) == (labels[n] != 0);
        if (dz) {
            const float s = v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
            dz[n] = (s - y) * inv_n;
        }
        return loss;
    }
};

/*
 * One thread per row (grid-stride), each row's loss and hit by R; the block
 * then sums its rows' losses (double) and hits in shared memory and leaves
 * one partial each.
 */
template <typename R>
static __global__ void __launch_bounds__(XENT_THREADS)
    k_loss_rows(const R row, int N, double *part, int *part_hits)
{
    __shared__ double s_loss[XENT_THREADS];
    __shared__ int s_hits[XENT_THREADS];
    const int t = threadIdx.x;
    double loss = 0.0;
    int hits = 0;
    for (long long n = (long long)blockIdx.x * XENT_THREADS + t; n < N;
         n += (long long)gridDim.x * XENT_THREADS) {
        int hit;
        loss += (double)row(n, &hit);
        hits += hit;
    }
    s_loss[t] = loss;
    s_hits[t] = hits;
    __syncthreads();
    for (int s = XENT_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) {
            s_loss[t] += s_loss[t + s];
            s_hits[t] += s_hits[t + s];
        }
        __syncthreads();
    }
    if (t == 0) {
        part[blockIdx.x] = s_loss[0];
        part_hits[blockIdx.x] = s_hits[0];
    }
}

/* Sums the nb block partials in block order (nb <= PS_CUDA_XENT_BLOCKS: a
 * thousand additions, one thread is plenty and keeps the order fixed). */
static __global__ void k_loss_final(const double *part, const int *part_hits, int nb,
                                    ps_cuda_xent_out_t *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double s = 0.0;
        int h = 0;
        for (int i = 0; i < nb; i++) {
            s += part[i];
            h += part_hits[i];
        }
        out->loss_sum = s;
        out->hits = h;
        out->pad = 0;
    }
}

/* Queues the row pass of N > 0 rows, the final sum and the 16-byte copy of
 * the sums into h_out (read by ps_cuda_xent_result). */
template <typename R>
static void s_loss_queue(ps_kctx_t *ctx, const R &row, int N)
{
    size_t nb = ((size_t)N + XENT_THREADS - 1) / XENT_THREADS;
    if (nb > PS_CUDA_XENT_BLOCKS) {
        nb = PS_CUDA_XENT_BLOCKS;
    }
    k_loss_rows<R><<<(unsigned)nb, XENT_THREADS, 0, ctx->stream>>>(row, N, ctx->d_part,
                                                                    ctx->d_hits);
    PS_CUDA_CHECK_LAUNCH();
    k_loss_final<<<1, 1, 0, ctx->stream>>>(ctx->d_part, ctx->d_hits, (int)nb, ctx->d_out);
    PS_CUDA_CHECK_LAUNCH();
    PS_CUDA_CHECK(cudaMemcpyAsync(ctx->h_out, ctx->d_out, sizeof(*ctx->h_out),
                                  cudaMemcpyDeviceToHost, ctx->stream));
}

/* No rows: nothing queued, the sums are zero. */
static void s_loss_none(ps_kctx_t *ctx)
{
    ctx->h_out->loss_sum = 0.0;
    ctx->h_out->hits = 0;
}

void ps_cuda_softmax_xent_queue(ps_kctx_t *ctx, const float *d_logits,
                                const uint8_t *d_labels, int N, int C, float *d_dlogits)
{
    if (N <= 0 || C <= 0) {
        s_loss_none(ctx);
        return;
    }
    s_loss_queue(ctx, s_xent_row{d_logits, d_labels, C, d_dlogits, 1.0f / (float)N}, N);
}

float ps_cuda_xent_result(ps_kctx_t *ctx, int N, int *correct)
{
    if (correct) {
        *correct = N > 0 ? ctx->h_out->hits : 0;
    }
    return N > 0 ? (float)(ctx->h_out->loss_sum / N) : 0.0f;
}

float ps_cuda_softmax_xent(ps_kctx_t *ctx, const float *d_logits, const uint8_t *d_labels,
                           int N, int C, float *d_dlogits, int *correct)
{
    ps_cuda_softmax_xent_queue(ctx, d_logits, d_labels, N, C, d_dlogits);
    if (N > 0 && C > 0) {
        PS_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    }
    return ps_cuda_xent_result(ctx, N > 0 && C > 0 ? N : 0, correct);
}

void ps_cuda_sigmoid_bce_queue(ps_kctx_t *ctx, const float *d_logits, const uint8_t *d_labels,
                               int N, float *d_dlogits)
{
    if (N <= 0) {
        s_loss_none(ctx);
        return;
    }
    s_loss_queue(ctx, s_bce_row{d_logits, d_labels, d_dlogits, 1.0f / (float)N}, N);
}

float ps_cuda_sigmoid_bce(ps_kctx_t *ctx, const float *d_logits, const uint8_t *d_labels,
                          int N, float *d_dlogits)
{
    ps_cuda_sigmoid_bce_queue(ctx, d_logits, d_labels, N, d_dlogits);
    if (N > 0) {
        PS_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    }
    return ps_cuda_xent_result(ctx, N > 0 ? N : 0, NULL);
}

/* ---- batches from the device-resident dataset ----------------------------------- */

/* x[i][f] = pixels[idx[i]][f] * a + c, y[i] = labels[idx[i]]; one thread per
 * x element (coalesced writes), the labels by the first F-th of them. The
 * product and the sum are rounded apart (__f*_rn), as on the host. I indexes
 * x (unsigned when n*F fits ps_cuda_fits32, else size_t); the dataset, which
 * may be larger, is indexed in size_t. */
template <typename I>
static __global__ void k_gather_u8(const uint8_t *pixels, const uint8_t *labels, I F,
                                   const uint32_t *idx, float a, float c, float *x,
                                   uint8_t *y, I total)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const I n = i / F, f = i - n * F;
        const size_t s = idx[n];
        x[i] = __fadd_rn(__fmul_rn((float)pixels[s * F + f], a), c);
        if (f == 0) {
            y[n] = labels[s];
        }
    }
}

void ps_cuda_gather_u8(ps_kctx_t *ctx, const uint8_t *d_pixels, const uint8_t *d_labels,
                       size_t F, const uint32_t *d_idx, int n, float a, float c, float *d_x,
                       uint8_t *d_y)
{
    const size_t total = (size_t)(n > 0 ? n : 0) * F;
    if (total == 0) {
        return;
    }
    const unsigned blocks = ps_cuda_blocks(total, PS_CUDA_THREADS);
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32(total), k_gather_u8, blocks, PS_CUDA_THREADS,
                       ctx->stream, d_pixels, d_labels, F, d_idx, a, c, d_x, d_y, total);
}

/* ---- SGD ------------------------------------------------------------------------ */

/* ps_optim_sgd_step() (kernels/optim.c) step by step, unfused:
 *   mu == 0: w -= lr * (grad*scale + wd*w)
 *   else:    g = grad*scale + wd*w; v = mu*v + g; w -= lr*v */
static __global__ void k_sgd(float lr, float mu, float wd, float *w, float *v,
                             const float *grad, float scale, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float wi = w[i];
        const float g = __fadd_rn(__fmul_rn(grad[i], scale), __fmul_rn(wd, wi));
        if (mu == 0.0f) {
            w[i] = __fsub_rn(wi, __fmul_rn(lr, g));
        } else {
            const float vi = __fadd_rn(__fmul_rn(mu, v[i]), g);
            v[i] = vi;
            w[i] = __fsub_rn(wi, __fmul_rn(lr, vi));
        }
    }
}

void ps_cuda_sgd_step(ps_kctx_t *ctx, float lr, float momentum, float weight_decay,
                      float *d_w, float *d_v, const float *d_grad, float scale, size_t n)
{
    if (n == 0) {
        return;
    }
    k_sgd<<<ps_cuda_blocks(n, PS_CUDA_THREADS), PS_CUDA_THREADS, 0, ctx->stream>>>(
        lr, momentum, weight_decay, d_w, d_v, d_grad, scale, n);
    PS_CUDA_CHECK_LAUNCH();
}
