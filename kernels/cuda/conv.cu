/*
 * kernels/cuda/conv.cu - CUDA convolution (im2col + cuBLAS) and 2x2 max pooling.
 *
 * Same maths as kernels/cpu/conv.c (stride 1, square kernel K, zero padding,
 * NCHW), batched over a chunk of nb images so one launch does many images.
 * The chunk's columns lie side by side ("wide"): col[CKK][nb][P], so the
 * chunk is one [CKK, nb*P] matrix and image n's columns are the [CKK, P]
 * block at n*P with row stride nb*P:
 *   col[CKK][nb*P]      = im2col(x)                        (P = HO*WO)
 *   y_n[O, P]           = w[O, CKK] @ col_n      one strided-batched gemm
 *   y                  += b (then optional ReLU)           one kernel
 * Backward, with dy of the chunk transposed to the same layout, dyw[O][nb*P]:
 *   db[o]               = sum over n, p of dy     two passes: threads' partial
 *                         sums (the context's scratch), then one block per o
 *   dw[O, CKK]         += dyw @ col^T                       one gemm per chunk
 *   dcol[CKK][nb*P]     = w^T @ dyw                         one gemm per chunk
 *   dx                  = col2im(dcol)  as a gather: each input pixel sums the
 *                         columns it fed, so no atomics and dx is overwritten.
 * Nothing runs once per image. The workspace holds col (then dcol) and dyw
 * for one chunk; a chunk is as many images as fit in PS_CUDA_CONV_WS_BYTES
 * (at least one), so the workspace stays bounded for any batch. All sums run
 * in a fixed order: deterministic.
 * Dimension letters: N batch, C in-channels, O out-channels, H,W input size,
 * HO,WO output size, K kernel, P = HO*WO, CKK = C*K*K.
 */
#include "kernels/cuda/cuda_impl.h"

/* Upper bound of the conv workspace; larger batches are done in chunks. */
#define PS_CUDA_CONV_WS_BYTES ((size_t)128 << 20)

static int s_out_h(const ps_conv_shape_t *s)
{
    return s->H + 2 * s->pad - s->K + 1;
}

static int s_out_w(const ps_conv_shape_t *s)
{
    return s->W + 2 * s->pad - s->K + 1;
}

/* Bytes of col for one image. */
static size_t s_image_bytes(const ps_conv_shape_t *s)
{
    return (size_t)s->C * s->K * s->K * s_out_h(s) * s_out_w(s) * sizeof(float);
}

/* Bytes of dyw (dy in the wide layout) for one image. */
static size_t s_dyw_image_bytes(const ps_conv_shape_t *s)
{
    return (size_t)s->O * s_out_h(s) * s_out_w(s) * sizeof(float);
}

/* Images per chunk: as many as fit the cap, at least 1, at most N. */
static int s_chunk(const ps_conv_shape_t *s)
{
    const size_t per = s_image_bytes(s) + s_dyw_image_bytes(s);
    size_t nb = per ? PS_CUDA_CONV_WS_BYTES / per : (size_t)s->N;
    if (nb < 1) {
        nb = 1;
    }
    return nb < (size_t)s->N ? (int)nb : s->N;
}

/* The im2col columns of one chunk of images, then its dyw, 256-aligned. */
static size_t s_cols_bytes(const ps_conv_shape_t *s)
{
    if (s->N <= 0) {
        return 0;
    }
    const size_t col = ((size_t)s_chunk(s) * s_image_bytes(s) + 255) & ~(size_t)255;
    return col + (size_t)s_chunk(s) * s_dyw_image_bytes(s);
}

/* The dyw area of a workspace: after one chunk's columns. */
static float *s_ws_dyw(const ps_conv_shape_t *s, void *ws)
{
    const size_t col = ((size_t)s_chunk(s) * s_image_bytes(s) + 255) & ~(size_t)255;
    return (float *)((char *)ws + col);
}

/* Bytes of the full-size convolution output, 256-aligned: the fused
 * conv + pool ops keep it in the workspace, after the columns. */
static size_t s_out_bytes(const ps_conv_shape_t *s)
{
    size_t n = (size_t)(s->N > 0 ? s->N : 0) * s->O * s_out_h(s) * s_out_w(s) * sizeof(float);
    return (n + 255) & ~(size_t)255;
}

size_t ps_cuda_conv2d_workspace(const ps_conv_shape_t *s)
{
    size_t cols = (s_cols_bytes(s) + 255) & ~(size_t)255;
    return cols + s_out_bytes(s);
}

/* The conv output area of a workspace (see ps_cuda_conv2d_workspace). */
static float *s_ws_out(const ps_conv_shape_t *s, void *ws)
{
    return (float *)((char *)ws + ((s_cols_bytes(s) + 255) & ~(size_t)255));
}

/* Geometry passed by value to the kernels. */
typedef struct {
    int C, H, W, K, pad, HO, WO;
} s_geom_t;

static s_geom_t s_geom(const ps_conv_shape_t *s)
{
    s_geom_t g = {s->C, s->H, s->W, s->K, s->pad, s_out_h(s), s_out_w(s)};
    return g;
}

/* ---- index arithmetic -------------------------------------------------------- */

/* A divisor d in [1, 2^31) with its multiplier and shift, for division by
 * a multiply-high (Granlund and Montgomery, "Division by invariant integers
 * using multiplication", PLDI 1994): n / d = (umulhi(n, m) + n) >> s for
 * every n < 2^31. A GPU has no integer divide: n / d in 32 bits is about
 * twenty instructions, in 64 bits several times that; this is three. */
typedef struct {
    unsigned d, m, s;
} s_divu_t;

/* d = 0 only with nothing to divide (an empty shape): no multiplier then */
static s_divu_t s_divu(unsigned d)
{
    s_divu_t v = {d, 0, 0};
    if (d == 0) {
        return v;
    }
    while (v.s < 31 && (1u << v.s) < d) {
        v.s++;
    }
    /* m = 2^32 (2^s - d) / d + 1 < 2^32, since 2^(s-1) < d <= 2^s */
    const unsigned long long one = 1;
    v.m = (unsigned)((one << 32) * ((one << v.s) - d) / d + 1);
    return v;
}

/* n / d on the 32-bit path (n < 2^31: umulhi(n, m) <= n, so the sum fits) */
static __device__ __forceinline__ unsigned s_div(unsigned n, s_divu_t d)
{
    return (__umulhi(n, d.m) + n) >> d.s;
}

/* n / d on the size_t path */
static __device__ __forceinline__ size_t s_div(size_t n, s_divu_t d)
{
    return n / d.d;
}

/* Queues k<unsigned> (32-bit indices) when `fits`, else k<size_t>, on
 * ctx->stream; the kernels' index-typed arguments convert at the call. */
#define S_LAUNCH(fits, k, grid, block, ...)                                                \
    do {                                                                                   \
        if (fits) {                                                                        \
            k<unsigned><<<grid, block, 0, ctx->stream>>>(__VA_ARGS__);                     \
        } else {                                                                           \
            k<size_t><<<grid, block, 0, ctx->stream>>>(__VA_ARGS__);                       \
        }                                                                                  \
        PS_CUDA_CHECK_LAUNCH();                                                            \
    } while (0)

/* y of a grid that loops over `rows` rows in blockIdx.y (the limit is 65535) */
static unsigned s_grid_y(size_t rows)
{
    return (unsigned)(rows < 65535 ? rows : 65535);
}

/* col[CKK][nb][P] (wide) from x[nb][C][H][W]; one thread per col element
 * (coalesced writes along p). Row r = (c*K + kh)*K + kw holds
 * x[n][c][oh+kh-pad][ow+kw-pad]. */
static __global__ void k_im2col(const float *x, float *col, s_geom_t g, int nb, size_t total)
{
    const size_t P = (size_t)g.HO * g.WO;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t p = i % P;
        const size_t n = (i / P) % (size_t)nb;
        const size_t r = i / (P * (size_t)nb);
        const int kw = (int)(r % g.K);
        const int kh = (int)((r / g.K) % g.K);
        const int c = (int)(r / ((size_t)g.K * g.K));
        const int oh = (int)(p / g.WO), ow = (int)(p % g.WO);
        const int ih = oh + kh - g.pad, iw = ow + kw - g.pad;
        float v = 0.0f;
        if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) {
            v = x[((n * g.C + c) * g.H + ih) * g.W + iw];
        }
        col[i] = v;
    }
}

/* dx[nb][C][H][W] = adjoint of k_im2col over dcol[CKK][nb][P] (wide); one
 * thread per input pixel gathers the (kh, kw) columns that read it:
 * oh = ih + pad - kh. */
static __global__ void k_col2im(const float *dcol, float *dx, s_geom_t g, int nb, size_t total)
{
    const size_t P = (size_t)g.HO * g.WO;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int iw = (int)(i % g.W);
        const int ih = (int)((i / g.W) % g.H);
        const int c = (int)((i / ((size_t)g.W * g.H)) % g.C);
        const size_t n = i / ((size_t)g.W * g.H * g.C);
        const float *dn = dcol + n * P;
        float acc = 0.0f;
        for (int kh = 0; kh < g.K; kh++) {
            const int oh = ih + g.pad - kh;
            if (oh < 0 || oh >= g.HO) {
                continue;
            }
            for (int kw = 0; kw < g.K; kw++) {
                const int ow = iw + g.pad - kw;
                if (ow < 0 || ow >= g.WO) {
                    continue;
                }
                const size_t r = ((size_t)c * g.K + kh) * g.K + kw;
                acc += dn[r * nb * P + (size_t)oh * g.WO + ow];
            }
        }
        dx[i] = acc;
    }
}

/* dyw[O][nb][P] = dy[nb][O][P]: the chunk's dy in the wide layout */
static __global__ void k_dy_wide(const float *dy, float *dyw, int O, int nb, size_t P,
                                 size_t total)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t p = i % P;
        const size_t n = (i / P) % (size_t)nb;
        const size_t o = i / (P * (size_t)nb);
        dyw[i] = dy[(n * O + o) * P + p];
    }
}

/* y[N][O][P] += b[o] (relu: max(., 0)) */
static __global__ void k_conv_bias(float *y, const float *b, size_t total, int O, size_t P,
                                   int relu)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = y[i] + b[(i / P) % (size_t)O];
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

/* ---- bias gradient ------------------------------------------------------------ */

/* Threads per block of the second pass; a power of two. */
#define DB_THREADS 256
/* Values each first-pass thread sums at least, as the thread count is chosen. */
#define DB_ITEMS 32

/* Pass 1: part[o][k] = sum over j = k, k + T, k + 2T, ... < N*P of dy[n][o][p]
 * at j = n*P + p (dp: P), for the T first-pass threads k of channel o
 * (blockIdx.y, looping). One partial a thread, so no barrier: consecutive
 * threads read consecutive values. */
template <typename I>
static __global__ void k_conv_bias_part(const float *dy, float *part, int O, s_divu_t dp,
                                        I total, unsigned T)
{
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= T) {
        return;
    }
    const I P = dp.d;
    for (unsigned o = blockIdx.y; o < (unsigned)O; o += gridDim.y) {
        const float *d = dy + (I)o * P;
        float acc = 0.0f;
        for (I j = k; j < total; j += T) {
            const I n = s_div(j, dp);
            acc += d[n * O * P + (j - n * P)];
        }
        part[(size_t)o * T + k] = acc;
    }
}

/* Pass 2: db[o] = sum over k < T of part[o][k]: block o, each thread its
 * strided k in order, then a fixed-order tree. */
static __global__ void __launch_bounds__(DB_THREADS)
    k_conv_bias_sum(const float *part, float *db, unsigned T)
{
    __shared__ float s[DB_THREADS];
    const unsigned t = threadIdx.x;
    const float *row = part + (size_t)blockIdx.x * T;
    float acc = 0.0f;
    for (unsigned k = t; k < T; k += DB_THREADS) {
        acc += row[k];
    }
    s[t] = acc;
    __syncthreads();
    for (unsigned h = DB_THREADS / 2; h > 0; h >>= 1) {
        if (t < h) {
            s[t] += s[t + h];
        }
        __syncthreads();
    }
    if (t == 0) {
        db[blockIdx.x] = s[0];
    }
}

/* db[O] = sum over n < N, p < P of dy[N][O][P] in two passes through the
 * context's scratch: O*T floats for T threads a channel, at most
 * PS_CUDA_RED_FLOATS in all (about as many threads as an H100 holds at
 * once). With T = 1 (a tiny batch, or more channels than the scratch holds)
 * the first pass writes db itself. T depends on the shape only, so the
 * summation order, and the bits, are the same every run. */
static void s_conv_bias_grad(ps_kctx_t *ctx, const float *d_dy, float *d_db, int N, int O,
                             int P)
{
    const size_t total = (size_t)N * P, cap = PS_CUDA_RED_FLOATS / (size_t)O;
    size_t T = (total + DB_ITEMS - 1) / DB_ITEMS;
    T = T < cap ? T : cap;
    T = T > 0 ? T : 1;
    float *d_part = T > 1 ? ctx->d_red : d_db;
    const unsigned blocks = (unsigned)((T + PS_CUDA_THREADS - 1) / PS_CUDA_THREADS);
    const dim3 grid(blocks, s_grid_y((size_t)O));
    S_LAUNCH(ps_cuda_fits32(total * O), k_conv_bias_part, grid, PS_CUDA_THREADS, d_dy,
             d_part, O, s_divu((unsigned)(P > 0 ? P : 1)), total, (unsigned)T);
    if (T > 1) {
        k_conv_bias_sum<<<(unsigned)O, DB_THREADS, 0, ctx->stream>>>(d_part, d_db,
                                                                     (unsigned)T);
        PS_CUDA_CHECK_LAUNCH();
    }
}

static void s_im2col(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                     float *d_col, int nb)
{
    const size_t total = (size_t)nb * s_image_bytes(s) / sizeof(float);
    if (total == 0) {
        return;
    }
    k_im2col<<<ps_cuda_blocks(total, PS_CUDA_THREADS), PS_CUDA_THREADS, 0, ctx->stream>>>(
        d_x, d_col, s_geom(s), nb, total);
    PS_CUDA_CHECK_LAUNCH();
}

void ps_cuda_conv2d_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                        const float *d_w, const float *d_b, float *d_y, int relu,
                        void *d_ws)
{
    const int HO = s_out_h(s), WO = s_out_w(s);
    const int CKK = s->C * s->K * s->K, P = HO * WO;
    if (s->N <= 0 || s->O <= 0 || P <= 0) {
        return;
    }
    const int chunk = s_chunk(s);
    const float one = 1.0f, zero = 0.0f;
    float *d_col = (float *)d_ws;
    for (int n0 = 0; n0 < s->N; n0 += chunk) {
        const int nb = s->N - n0 < chunk ? s->N - n0 : chunk;
        s_im2col(ctx, s, d_x + (size_t)n0 * s->C * s->H * s->W, d_col, nb);
        /* row-major y_n[O,P] = w[O,CKK] @ col_n[CKK,P], i.e. column-major
         * y_n^T[P,O] = col_n^T[P,CKK] @ w^T[CKK,O]; col_n starts at n*P with
         * row stride nb*P (wide); w shared (stride 0) */
        PS_CUBLAS_CHECK(cublasSgemmStridedBatched(
            ctx->blas, CUBLAS_OP_N, CUBLAS_OP_N, P, s->O, CKK, &one, d_col, nb * P,
            (long long)P, d_w, CKK, 0, &zero, d_y + (size_t)n0 * s->O * P, P,
            (long long)s->O * P, nb));
    }
    const size_t total = (size_t)s->N * s->O * P;
    k_conv_bias<<<ps_cuda_blocks(total, PS_CUDA_THREADS), PS_CUDA_THREADS, 0,
                  ctx->stream>>>(d_y, d_b, total, s->O, (size_t)P, relu);
    PS_CUDA_CHECK_LAUNCH();
}

void ps_cuda_conv2d_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                        const float *d_w, const float *d_dy, float *d_dx, float *d_dw,
                        float *d_db, void *d_ws)
{
    const int HO = s_out_h(s), WO = s_out_w(s);
    const int CKK = s->C * s->K * s->K, P = HO * WO;
    if (s->O <= 0) {
        return;
    }
    const int N = s->N > 0 ? s->N : 0;
    s_conv_bias_grad(ctx, d_dy, d_db, N, s->O, P > 0 ? P : 0);
    if (N == 0 || P <= 0) {
        /* no images (or no outputs): the gradients are zero */
        ps_cuda_zero(ctx, d_dw, (size_t)s->O * CKK * sizeof(float));
        if (d_dx) {
            ps_cuda_zero(ctx, d_dx, (size_t)N * s->C * s->H * s->W * sizeof(float));
        }
        return;
    }
    const int chunk = s_chunk(s);
    float *d_col = (float *)d_ws, *d_dyw = s_ws_dyw(s, d_ws);
    const size_t x_img = (size_t)s->C * s->H * s->W, y_img = (size_t)s->O * P;
    for (int n0 = 0; n0 < N; n0 += chunk) {
        const int nb = N - n0 < chunk ? N - n0 : chunk, wide = nb * P;
        s_im2col(ctx, s, d_x + (size_t)n0 * x_img, d_col, nb);
        const size_t ny = (size_t)nb * y_img;
        k_dy_wide<<<ps_cuda_blocks(ny, PS_CUDA_THREADS), PS_CUDA_THREADS, 0, ctx->stream>>>(
            d_dy + (size_t)n0 * y_img, d_dyw, s->O, nb, (size_t)P, ny);
        PS_CUDA_CHECK_LAUNCH();
        /* dw[O,CKK] (+)= dyw[O,nb*P] @ col[CKK,nb*P]^T: the chunk in one gemm */
        ps_cuda_sgemm(ctx, 0, 1, s->O, CKK, wide, 1.0f, d_dyw, wide, d_col, wide,
                      n0 == 0 ? 0.0f : 1.0f, d_dw, CKK);
        if (!d_dx) {
            continue;
        }
        /* dcol[CKK,nb*P] = w[O,CKK]^T @ dyw[O,nb*P]; overwrites col, whose last
         * reader (the dw gemm) is earlier on the stream */
        ps_cuda_sgemm(ctx, 1, 0, CKK, wide, s->O, 1.0f, d_w, CKK, d_dyw, wide, 0.0f, d_col,
                      wide);
        const size_t total = (size_t)nb * x_img;
        k_col2im<<<ps_cuda_blocks(total, PS_CUDA_THREADS), PS_CUDA_THREADS, 0,
                   ctx->stream>>>(d_col, d_dx + (size_t)n0 * x_img, s_geom(s), nb, total);
        PS_CUDA_CHECK_LAUNCH();
    }
}

/* ---- 2x2 max pooling ------------------------------------------------------------ */

/* y[NC,HO,WO] = max of each 2x2 window of x[NC,H,W]; arg = winner 0..3 in the
 * CPU order (top-left, top-right, bottom-left, bottom-right; first max wins). */
static __global__ void k_maxpool_fwd(const float *x, float *y, uint8_t *arg, int H, int W,
                                     size_t total)
{
    const int HO = H / 2, WO = W / 2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int ow = (int)(i % WO), oh = (int)((i / WO) % HO);
        const size_t nc = i / ((size_t)HO * WO);
        const float *r0 = x + (nc * H + 2 * oh) * W + 2 * ow;
        const float *r1 = r0 + W;
        float m = r0[0];
        uint8_t a = 0;
        if (r0[1] > m) {
            m = r0[1];
            a = 1;
        }
        if (r1[0] > m) {
            m = r1[0];
            a = 2;
        }
        if (r1[1] > m) {
            m = r1[1];
            a = 3;
        }
        y[i] = m;
        arg[i] = a;
    }
}

/* dx[NC,H,W]: each window's four inputs get dy or 0 by arg (fully written);
 * with y (the pooled ReLU output), nothing flows where y <= 0. */
static __global__ void k_maxpool_bwd(const float *dy, const uint8_t *arg, const float *y,
                                     float *dx, int H, int W, size_t total)
{
    const int HO = H / 2, WO = W / 2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int ow = (int)(i % WO), oh = (int)((i / WO) % HO);
        const size_t nc = i / ((size_t)HO * WO);
        float *r0 = dx + (nc * H + 2 * oh) * W + 2 * ow;
        float *r1 = r0 + W;
        const float g = (y && y[i] <= 0.0f) ? 0.0f : dy[i];
        const int a = arg[i];
        r0[0] = a == 0 ? g : 0.0f;
        r0[1] = a == 1 ? g : 0.0f;
        r1[0] = a == 2 ? g : 0.0f;
        r1[1] = a == 3 ? g : 0.0f;
    }
}

void ps_cuda_maxpool2_fwd(ps_kctx_t *ctx, const float *d_x, float *d_y, uint8_t *d_arg,
                          int NC, int H, int W)
{
    const size_t total =
        (size_t)(NC > 0 ? NC : 0) * (H / 2 > 0 ? H / 2 : 0) * (W / 2 > 0 ? W / 2 : 0);
    if (total == 0) {
        return;
    }
    k_maxpool_fwd<<<ps_cuda_blocks(total, PS_CUDA_THREADS), PS_CUDA_THREADS, 0,
                    ctx->stream>>>(d_x, d_y, d_arg, H, W, total);
    PS_CUDA_CHECK_LAUNCH();
}

void ps_cuda_maxpool2_bwd(ps_kctx_t *ctx, const float *d_dy, const uint8_t *d_arg,
                          const float *d_y, float *d_dx, int NC, int H, int W)
{
    const size_t total =
        (size_t)(NC > 0 ? NC : 0) * (H / 2 > 0 ? H / 2 : 0) * (W / 2 > 0 ? W / 2 : 0);
    if (total == 0) {
        return;
    }
    k_maxpool_bwd<<<ps_cuda_blocks(total, PS_CUDA_THREADS), PS_CUDA_THREADS, 0,
                    ctx->stream>>>(d_dy, d_arg, d_y, d_dx, H, W, total);
    PS_CUDA_CHECK_LAUNCH();
}

/* Fused ops by composition: the convolution output lives in the workspace. */
void ps_cuda_conv2d_pool_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                             const float *d_w, const float *d_b, float *d_p, uint8_t *d_arg,
                             void *ws)
{
    float *d_y = s_ws_out(s, ws);
    ps_cuda_conv2d_fwd(ctx, s, d_x, d_w, d_b, d_y, 1, ws);
    ps_cuda_maxpool2_fwd(ctx, d_y, d_p, d_arg, s->N * s->O, s_out_h(s), s_out_w(s));
}

void ps_cuda_conv2d_pool_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                             const float *d_w, const float *d_dp, const uint8_t *d_arg,
                             const float *d_p, float *d_dx, float *d_dw, float *d_db, void *ws)
{
    float *d_dy = s_ws_out(s, ws);
    ps_cuda_maxpool2_bwd(ctx, d_dp, d_arg, d_p, d_dy, s->N * s->O, s_out_h(s), s_out_w(s));
    ps_cuda_conv2d_bwd(ctx, s, d_x, d_w, d_dy, d_dx, d_dw, d_db, ws);
}
