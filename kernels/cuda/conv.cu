/*
 * kernels/cuda/conv.cu - CUDA convolution (im2col + cuBLAS, or cuDNN) and 2x2
 * max pooling.
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
 * Nothing runs once per image. A chunk is as many images as fit in
 * PS_CUDA_CONV_WS_BYTES (at least one). The workspace keeps the whole
 * batch's columns, chunk after chunk, each chunk wide as above: the fused
 * backward (conv2d_pool_bwd) reads the columns its forward wrote instead of
 * writing them again, so the layer's workspace grows by N*CKK*P floats.
 * Behind them lie one chunk's dcol and dyw, and the fused ops' full-size
 * convolution output. All sums run
 * in a fixed order: deterministic. The elementwise kernels index in 32-bit
 * unsigned arithmetic and divide by a multiply-high (no integer divide on a
 * GPU) whenever their sizes fit, in size_t otherwise; grids run along the
 * contiguous dimension, a row of col or dyw per blockIdx.y where that saves
 * divisions.
 * With cuDNN on (set_conv) the products are cuDNN's where it takes the
 * shape (dnn.cu), and only the bias, ReLU, pooling and bias gradient run
 * here; the columns are then neither written nor read.
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

/* n rounded up to 256 bytes: each area of the workspace starts aligned. */
static size_t s_align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* Bytes of one chunk's columns, 256-aligned: the stride of the kept ones,
 * so each chunk's start is aligned as the workspace is (cuBLAS may choose
 * its kernel by alignment: the same one as when they were written anew). */
static size_t s_chunk_stride(const ps_conv_shape_t *s)
{
    return s_align256((size_t)s_chunk(s) * s_image_bytes(s));
}

/* Bytes of the kept columns: every image's, chunk after chunk. */
static size_t s_kept_bytes(const ps_conv_shape_t *s)
{
    if (s->N <= 0) {
        return 0;
    }
    return (size_t)((s->N + s_chunk(s) - 1) / s_chunk(s)) * s_chunk_stride(s);
}

/* Bytes of one chunk's dcol, then its dyw, each 256-aligned. */
static size_t s_cols_bytes(const ps_conv_shape_t *s)
{
    if (s->N <= 0) {
        return 0;
    }
    return s_chunk_stride(s) + s_align256((size_t)s_chunk(s) * s_dyw_image_bytes(s));
}

/* The dcol area of a workspace: after the kept columns. */
static float *s_ws_dcol(const ps_conv_shape_t *s, void *ws)
{
    return (float *)((char *)ws + s_kept_bytes(s));
}

/* The dyw area of a workspace: after one chunk's dcol. */
static float *s_ws_dyw(const ps_conv_shape_t *s, void *ws)
{
    return (float *)((char *)ws + s_kept_bytes(s) + s_chunk_stride(s));
}

/* The kept columns of the chunk that starts at image n0. */
static float *s_ws_cols(const ps_conv_shape_t *s, void *ws, int n0)
{
    return (float *)((char *)ws + (size_t)(n0 / s_chunk(s)) * s_chunk_stride(s));
}

/* Bytes of the full-size convolution output, 256-aligned: the fused
 * conv + pool ops keep it in the workspace, after the columns. */
static size_t s_out_bytes(const ps_conv_shape_t *s)
{
    size_t n = (size_t)(s->N > 0 ? s->N : 0) * s->O * s_out_h(s) * s_out_w(s) * sizeof(float);
    return s_align256(n);
}

size_t ps_cuda_conv2d_workspace(const ps_conv_shape_t *s)
{
    return s_kept_bytes(s) + s_cols_bytes(s) + s_out_bytes(s);
}

/* The conv output area of a workspace (see ps_cuda_conv2d_workspace). */
static float *s_ws_out(const ps_conv_shape_t *s, void *ws)
{
    return (float *)((char *)ws + s_kept_bytes(s) + s_cols_bytes(s));
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

/* y of a grid that loops over `rows` rows in blockIdx.y (the limit is 65535) */
static unsigned s_grid_y(size_t rows)
{
    return (unsigned)(rows < 65535 ? rows : 65535);
}

/* The index kernels below take I = unsigned or size_t (see
 * PS_CUDA_LAUNCH_IDX) and divide only by s_div, by divisors made on the host. */

/* col[CKK][nb][P] (wide) from x[nb][C][H][W]. Row r = (c*K + kh)*K + kw
 * (blockIdx.y, looping) holds x[n][c][oh+kh-pad][ow+kw-pad] at j = n*P +
 * oh*WO + ow; threads run along j (coalesced writes). dp, dwo: P and WO. */
template <typename I>
static __global__ void k_im2col(const float *x, float *col, s_geom_t g, s_divu_t dp,
                                s_divu_t dwo, I wide)
{
    const unsigned KK = g.K * g.K, rows = g.C * KK, HW = g.H * g.W;
    const I P = dp.d, x_img = (I)g.C * HW, step = (I)gridDim.x * blockDim.x;
    for (unsigned r = blockIdx.y; r < rows; r += gridDim.y) {
        const unsigned c = r / KK, kh = (r - c * KK) / g.K, kw = r - c * KK - kh * g.K;
        const float *xc = x + (I)c * HW;
        float *cr = col + (I)r * wide;
        for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < wide; j += step) {
            const I n = s_div(j, dp);
            const unsigned p = (unsigned)(j - n * P);
            const unsigned oh = s_div(p, dwo), ow = p - oh * g.WO;
            const int ih = (int)(oh + kh) - g.pad, iw = (int)(ow + kw) - g.pad;
            float v = 0.0f;
            if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) {
                v = xc[n * x_img + (unsigned)(ih * g.W + iw)];
            }
            cr[j] = v;
        }
    }
}

/* dx[nb][C][H][W] = adjoint of k_im2col over dcol[CKK][nb][P] (wide); one
 * thread per input pixel gathers the (kh, kw) columns that read it:
 * oh = ih + pad - kh. dhw, dw, dc: H*W, W and C. */
template <typename I>
static __global__ void k_col2im(const float *dcol, float *dx, s_geom_t g, s_divu_t dhw,
                                s_divu_t dw, s_divu_t dc, I wide, I total)
{
    const I P = (I)g.HO * g.WO, step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const I nc = s_div(i, dhw), n = s_div(nc, dc);
        const unsigned q = (unsigned)(i - nc * dhw.d), ih = s_div(q, dw), iw = q - ih * g.W;
        const unsigned c = (unsigned)(nc - n * dc.d);
        const float *dn = dcol + n * P;
        float acc = 0.0f;
        for (int kh = 0; kh < g.K; kh++) {
            const int oh = (int)ih + g.pad - kh;
            if (oh < 0 || oh >= g.HO) {
                continue;
            }
            const float *dr = dn + (I)((c * g.K + kh) * g.K) * wide + (unsigned)(oh * g.WO);
            for (int kw = 0; kw < g.K; kw++) {
                const int ow = (int)iw + g.pad - kw;
                if (ow < 0 || ow >= g.WO) {
                    continue;
                }
                acc += dr[(I)kw * wide + (unsigned)ow];
            }
        }
        dx[i] = acc;
    }
}

/* dyw[O][nb][P] = dy[nb][O][P]: the chunk's dy in the wide layout. Row o
 * (blockIdx.y, looping), threads along j = n*P + p; dp: P. */
template <typename I>
static __global__ void k_dy_wide(const float *dy, float *dyw, int O, s_divu_t dp, I wide)
{
    const I P = dp.d, step = (I)gridDim.x * blockDim.x;
    for (unsigned o = blockIdx.y; o < (unsigned)O; o += gridDim.y) {
        const float *d = dy + (I)o * P;
        float *w = dyw + (I)o * wide;
        for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < wide; j += step) {
            const I n = s_div(j, dp);
            w[j] = d[n * O * P + (j - n * P)];
        }
    }
}

/* y[N][O][P] += b[o] (relu: max(., 0)); dp, dO: P and O */
template <typename I>
static __global__ void k_conv_bias(float *y, const float *b, I total, s_divu_t dp,
                                   s_divu_t dO, int relu)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const I no = s_div(i, dp); /* n*O + o */
        const float v = y[i] + b[no - s_div(no, dO) * dO.d];
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
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32(total * O), k_conv_bias_part, grid, PS_CUDA_THREADS,
                       ctx->stream, d_dy, d_part, O, s_divu((unsigned)(P > 0 ? P : 1)),
                       total, (unsigned)T);
    if (T > 1) {
        k_conv_bias_sum<<<(unsigned)O, DB_THREADS, 0, ctx->stream>>>(d_part, d_db,
                                                                     (unsigned)T);
        PS_CUDA_CHECK_LAUNCH();
    }
}

/* The chunk's columns: the 32-bit path when they and its images fit it. */
static void s_im2col(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                     float *d_col, int nb)
{
    const s_geom_t g = s_geom(s);
    const size_t wide = (size_t)nb * g.HO * g.WO, rows = (size_t)g.C * g.K * g.K;
    if (wide == 0 || rows == 0) {
        return;
    }
    const size_t nx = (size_t)nb * g.C * g.H * g.W;
    const dim3 grid(ps_cuda_blocks(wide, PS_CUDA_THREADS), s_grid_y(rows));
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32(wide * rows) && ps_cuda_fits32(nx), k_im2col, grid,
                       PS_CUDA_THREADS, ctx->stream, d_x, d_col, g,
                       s_divu((unsigned)(g.HO * g.WO)), s_divu((unsigned)g.WO), wide);
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
    const int dnn = ps_cuda_dnn_fwd(ctx, s, d_x, d_w, d_y) == 0;
    for (int n0 = 0; !dnn && n0 < s->N; n0 += chunk) {
        const int nb = s->N - n0 < chunk ? s->N - n0 : chunk;
        float *d_col = s_ws_cols(s, d_ws, n0);
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
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32(total), k_conv_bias,
                       ps_cuda_blocks(total, PS_CUDA_THREADS), PS_CUDA_THREADS, ctx->stream,
                       d_y, d_b, total, s_divu((unsigned)P), s_divu((unsigned)s->O), relu);
}

/* conv2d_bwd; kept: the workspace holds x's columns, written by the forward
 * (conv2d_pool_fwd) just before, so they are read, not written again. */
static void s_conv_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                       const float *d_w, const float *d_dy, float *d_dx, float *d_dw,
                       float *d_db, void *d_ws, int kept)
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
    if (ps_cuda_dnn_bwd(ctx, s, d_x, d_w, d_dy, d_dx, d_dw) == 0) {
        return;
    }
    const int chunk = s_chunk(s);
    float *d_dcol = s_ws_dcol(s, d_ws), *d_dyw = s_ws_dyw(s, d_ws);
    const size_t x_img = (size_t)s->C * s->H * s->W, y_img = (size_t)s->O * P;
    const s_divu_t dp = s_divu((unsigned)P), dhw = s_divu((unsigned)(s->H * s->W));
    const s_divu_t dw = s_divu((unsigned)s->W), dc = s_divu((unsigned)s->C);
    for (int n0 = 0; n0 < N; n0 += chunk) {
        const int nb = N - n0 < chunk ? N - n0 : chunk, wide = nb * P;
        float *d_col = s_ws_cols(s, d_ws, n0);
        if (!kept) {
            s_im2col(ctx, s, d_x + (size_t)n0 * x_img, d_col, nb);
        }
        const size_t ny = (size_t)nb * y_img;
        const dim3 grid(ps_cuda_blocks((size_t)wide, PS_CUDA_THREADS),
                        s_grid_y((size_t)s->O));
        PS_CUDA_LAUNCH_IDX(ps_cuda_fits32(ny), k_dy_wide, grid, PS_CUDA_THREADS,
                           ctx->stream, d_dy + (size_t)n0 * y_img, d_dyw, s->O, dp,
                           (size_t)wide);
        /* dw[O,CKK] (+)= dyw[O,nb*P] @ col[CKK,nb*P]^T: the chunk in one gemm */
        ps_cuda_sgemm(ctx, 0, 1, s->O, CKK, wide, 1.0f, d_dyw, wide, d_col, wide,
                      n0 == 0 ? 0.0f : 1.0f, d_dw, CKK);
        if (!d_dx) {
            continue;
        }
        /* dcol[CKK,nb*P] = w[O,CKK]^T @ dyw[O,nb*P], beside the columns, so
         * they stay intact for another backward */
        ps_cuda_sgemm(ctx, 1, 0, CKK, wide, s->O, 1.0f, d_w, CKK, d_dyw, wide, 0.0f, d_dcol,
                      wide);
        const size_t total = (size_t)nb * x_img;
        const int fits = ps_cuda_fits32(total) && ps_cuda_fits32((size_t)wide * CKK);
        PS_CUDA_LAUNCH_IDX(fits, k_col2im, ps_cuda_blocks(total, PS_CUDA_THREADS),
                           PS_CUDA_THREADS, ctx->stream, d_dcol, d_dx + (size_t)n0 * x_img,
                           s_geom(s), dhw, dw, dc, (size_t)wide, total);
    }
}

void ps_cuda_conv2d_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *d_x,
                        const float *d_w, const float *d_dy, float *d_dx, float *d_dw,
                        float *d_db, void *d_ws)
{
    s_conv_bwd(ctx, s, d_x, d_w, d_dy, d_dx, d_dw, d_db, d_ws, 0);
}

/* ---- 2x2 max pooling ------------------------------------------------------------ */

/* y[NC,HO,WO] = max of each 2x2 window of x[NC,H,W]; arg = winner 0..3 in the
 * CPU order (top-left, top-right, bottom-left, bottom-right; first max wins).
 * dwo, dho: WO and HO. */
template <typename I>
static __global__ void k_maxpool_fwd(const float *x, float *y, uint8_t *arg, int H, int W,
                                     s_divu_t dwo, s_divu_t dho, I total)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const I q = s_div(i, dwo), nc = s_div(q, dho); /* q = nc*HO + oh */
        const unsigned ow = (unsigned)(i - q * dwo.d), oh = (unsigned)(q - nc * dho.d);
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
template <typename I>
static __global__ void k_maxpool_bwd(const float *dy, const uint8_t *arg, const float *y,
                                     float *dx, int H, int W, s_divu_t dwo, s_divu_t dho,
                                     I total)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const I q = s_div(i, dwo), nc = s_div(q, dho);
        const unsigned ow = (unsigned)(i - q * dwo.d), oh = (unsigned)(q - nc * dho.d);
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

/* Windows of a pooling: NC*(H/2)*(W/2), 0 when any is not positive. The
 * 32-bit path needs the input's NC*H*W to fit too. */
static size_t s_pool_total(int NC, int H, int W)
{
    return NC > 0 && H / 2 > 0 && W / 2 > 0 ? (size_t)NC * (H / 2) * (W / 2) : 0;
}

void ps_cuda_maxpool2_fwd(ps_kctx_t *ctx, const float *d_x, float *d_y, uint8_t *d_arg,
                          int NC, int H, int W)
{
    const size_t total = s_pool_total(NC, H, W);
    if (total == 0) {
        return;
    }
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32((size_t)NC * H * W), k_maxpool_fwd,
                       ps_cuda_blocks(total, PS_CUDA_THREADS), PS_CUDA_THREADS, ctx->stream,
                       d_x, d_y, d_arg, H, W, s_divu((unsigned)(W / 2)),
                       s_divu((unsigned)(H / 2)), total);
}

void ps_cuda_maxpool2_bwd(ps_kctx_t *ctx, const float *d_dy, const uint8_t *d_arg,
                          const float *d_y, float *d_dx, int NC, int H, int W)
{
    const size_t total = s_pool_total(NC, H, W);
    if (total == 0) {
        return;
    }
    PS_CUDA_LAUNCH_IDX(ps_cuda_fits32((size_t)NC * H * W), k_maxpool_bwd,
                       ps_cuda_blocks(total, PS_CUDA_THREADS), PS_CUDA_THREADS, ctx->stream,
                       d_dy, d_arg, d_y, d_dx, H, W, s_divu((unsigned)(W / 2)),
                       s_divu((unsigned)(H / 2)), total);
}

/* Fused ops by composition: the convolution output lives in the workspace,
 * and the backward reads the columns the forward left there. */
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
    s_conv_bwd(ctx, s, d_x, d_w, d_dy, d_dx, d_dw, d_db, ws, 1);
}
