/*
 * kernels/cpu/conv.c - CPU convolution (im2col + sgemm) and 2x2 max pooling.
 *
 * Convolution is stride 1, square kernel K, zero padding pad, NCHW. Per image:
 *   col[C*K*K, HO*WO] = im2col(x_n)                 (one row per (c,kh,kw))
 *   y_n[O, HO*WO]     = w[O, C*K*K] @ col + b       (then optional ReLU)
 * Backward per image (reference: any im2col derivation, e.g. Caffe's):
 *   dw^T[C*K*K, O]   += col @ dy_n^T,   db[O] += sum over HO*WO of dy_n
 *   dcol              = w^T @ dy_n,      dx_n = col2im(dcol)
 * The fused ops (conv2d_pool_fwd/bwd) run pooling image by image inside the
 * convolution so its full-size output never leaves the cache, and is never
 * stored: the backward needs only the pooled output and the winners.
 * dw is accumulated transposed so that col is the sgemm's A operand, which
 * the AVX-512 sgemm reads in place (no transposing copy of col per image),
 * and transposed into dw once at the end. The workspace holds col (then dcol)
 * and dw^T. With an AVX-512 context, im2col, col2im and pooling use the
 * masked-vector versions of conv_avx512.c; the loops here are the portable
 * reference. Dimension letters: N batch, C in-channels, O out-channels, H,W
 * input size, HO,WO output size, K kernel. No allocation; thread-safe on
 * disjoint outputs.
 */
#include <string.h>

#include "kernels/cpu/cpu.h"

static int s_out_h(const ps_conv_shape_t *s)
{
    return s->H + 2 * s->pad - s->K + 1;
}

static int s_out_w(const ps_conv_shape_t *s)
{
    return s->W + 2 * s->pad - s->K + 1;
}

/* Floats of col in the workspace, rounded up to keep what follows aligned. */
static size_t s_col_floats(const ps_conv_shape_t *s)
{
    size_t n = (size_t)s->C * s->K * s->K * s_out_h(s) * s_out_w(s);
    return (n + 15) & ~(size_t)15;
}

/* The workspace: col (then dcol) [CKK, P], dw^T [CKK, O], and one image's
 * convolution output or its gradient [O, P] for the fused pooling ops; each
 * part rounded up to 16 floats so all stay 64-byte aligned. */
static size_t s_round16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

static float *s_ws_col(const ps_conv_shape_t *s, void *ws)
{
    (void)s;
    return ws;
}

static float *s_ws_dwt(const ps_conv_shape_t *s, void *ws)
{
    return (float *)ws + s_col_floats(s);
}

static float *s_ws_y(const ps_conv_shape_t *s, void *ws)
{
    return s_ws_dwt(s, ws) + s_round16((size_t)s->C * s->K * s->K * s->O);
}

size_t ps_cpu_conv2d_workspace(const ps_conv_shape_t *s)
{
    const size_t P = (size_t)s_out_h(s) * s_out_w(s);
    return (s_col_floats(s) + s_round16((size_t)s->C * s->K * s->K * s->O) +
            s_round16((size_t)s->O * P)) *
           sizeof(float);
}

static inline int s_avx512(const ps_kctx_t *ctx)
{
#ifdef PS_HAVE_AVX512
    return ctx && ctx->avx512;
#else
    (void)ctx;
    return 0;
#endif
}

/* Valid output columns [lo, hi) for kernel column kw: 0 <= ow + kw - pad < W. */
static void s_valid_cols(int kw, int pad, int W, int WO, int *lo, int *hi)
{
    int a = pad - kw;
    int b = W + pad - kw;
    *lo = a > 0 ? a : 0;
    *hi = b < WO ? b : WO;
    if (*hi < *lo) {
        *hi = *lo;
    }
}

/* col[C*K*K, HO*WO] from one image x[C,H,W]. */
static void s_im2col(const ps_conv_shape_t *s, const float *restrict x, float *restrict col)
{
    const int C = s->C, H = s->H, W = s->W, K = s->K, pad = s->pad;
    const int HO = s_out_h(s), WO = s_out_w(s);
    for (int c = 0; c < C; c++) {
        const float *xc = x + (size_t)c * H * W;
        for (int kh = 0; kh < K; kh++) {
            for (int kw = 0; kw < K; kw++) {
                float *row = col + ((size_t)(c * K + kh) * K + kw) * HO * WO;
                int lo, hi;
                s_valid_cols(kw, pad, W, WO, &lo, &hi);
                for (int oh = 0; oh < HO; oh++) {
                    float *dst = row + (size_t)oh * WO;
                    const int ih = oh + kh - pad;
                    if (ih < 0 || ih >= H) {
                        memset(dst, 0, (size_t)WO * sizeof(float));
                        continue;
                    }
                    /* input column of ow is ow + shift, valid on [lo, hi) */
                    const float *src = xc + (size_t)ih * W;
                    const int shift = kw - pad;
                    for (int ow = 0; ow < lo; ow++) {
                        dst[ow] = 0.0f;
                    }
                    for (int ow = lo; ow < hi; ow++) {
                        dst[ow] = src[ow + shift];
                    }
                    for (int ow = hi; ow < WO; ow++) {
                        dst[ow] = 0.0f;
                    }
                }
            }
        }
    }
}

/* dx[C,H,W] = col2im(dcol[C*K*K, HO*WO]): the adjoint of s_im2col. */
static void s_col2im(const ps_conv_shape_t *s, const float *restrict dcol,
                     float *restrict dx)
{
    const int C = s->C, H = s->H, W = s->W, K = s->K, pad = s->pad;
    const int HO = s_out_h(s), WO = s_out_w(s);
    memset(dx, 0, (size_t)C * H * W * sizeof(float));
    for (int c = 0; c < C; c++) {
        float *dxc = dx + (size_t)c * H * W;
        for (int kh = 0; kh < K; kh++) {
            for (int kw = 0; kw < K; kw++) {
                const float *row = dcol + ((size_t)(c * K + kh) * K + kw) * HO * WO;
                int lo, hi;
                s_valid_cols(kw, pad, W, WO, &lo, &hi);
                for (int oh = 0; oh < HO; oh++) {
                    const int ih = oh + kh - pad;
                    if (ih < 0 || ih >= H) {
                        continue;
                    }
                    const float *src = row + (size_t)oh * WO;
                    float *dst = dxc + (size_t)ih * W;
                    const int shift = kw - pad;
                    for (int ow = lo; ow < hi; ow++) {
                        dst[ow + shift] += src[ow];
                    }
                }
            }
        }
    }
}

static void s_im2col_any(const ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                         float *col)
{
#ifdef PS_HAVE_AVX512
    if (s_avx512(ctx) && ps_cpu_im2col_avx512(s, x, col) == 0) {
        return;
    }
#endif
    (void)ctx;
    s_im2col(s, x, col);
}

static void s_col2im_any(const ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *dcol,
                         float *dx)
{
#ifdef PS_HAVE_AVX512
    if (s_avx512(ctx) && ps_cpu_col2im_avx512(s, dcol, dx) == 0) {
        return;
    }
#endif
    (void)ctx;
    s_col2im(s, dcol, dx);
}

/* Sum of d[0..n) in 16 interleaved partial sums, so that it vectorises
 * (a single accumulator is a serial chain of dependent adds). */
static float s_sum(const float *restrict d, int n)
{
    float part[16] = {0};
    int p = 0;
    for (; p + 16 <= n; p += 16) {
        for (int l = 0; l < 16; l++) {
            part[l] += d[p + l];
        }
    }
    float acc = 0.0f;
    for (; p < n; p++) {
        acc += d[p];
    }
    for (int l = 0; l < 16; l++) {
        acc += part[l];
    }
    return acc;
}

/* y_n[O,P] = act(w @ im2col(x_n) + b) for one image; col: workspace. */
static void s_fwd_image(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *xn,
                        const float *w, const float *b, float *yn, int relu, float *col)
{
    const int CKK = s->C * s->K * s->K, P = s_out_h(s) * s_out_w(s);
    s_im2col_any(ctx, s, xn, col);
    ps_cpu_sgemm(ctx, 0, 0, s->O, P, CKK, 1.0f, w, CKK, col, P, 0.0f, yn, P);
    for (int o = 0; o < s->O; o++) {
        float *restrict yo = yn + (size_t)o * P;
        const float bo = b[o];
        if (relu) {
            for (int p = 0; p < P; p++) {
                float v = yo[p] + bo;
                yo[p] = v > 0.0f ? v : 0.0f;
            }
        } else {
            for (int p = 0; p < P; p++) {
                yo[p] += bo;
            }
        }
    }
}

/* Backward of one image: dwt[CKK,O] (first ? = : +=) col @ dy_n^T, db (first ?
 * = : +=) row sums of dy_n, dx_n = col2im(w^T @ dy_n) unless dx_n is NULL. */
static void s_bwd_image(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *xn,
                        const float *w, const float *dyn, float *dxn, float *dwt, float *db,
                        int first, float *col)
{
    const int CKK = s->C * s->K * s->K, P = s_out_h(s) * s_out_w(s);
    s_im2col_any(ctx, s, xn, col);
    ps_cpu_sgemm(ctx, 0, 1, CKK, s->O, P, 1.0f, col, P, dyn, P, first ? 0.0f : 1.0f, dwt,
                 s->O);
    for (int o = 0; o < s->O; o++) {
        const float acc = s_sum(dyn + (size_t)o * P, P);
        db[o] = first ? acc : db[o] + acc;
    }
    if (dxn) {
        /* dcol[CKK,P] = w[O,CKK]^T @ dy_n[O,P], into the same workspace */
        ps_cpu_sgemm(ctx, 1, 0, CKK, P, s->O, 1.0f, w, CKK, dyn, P, 0.0f, col, P);
        s_col2im_any(ctx, s, col, dxn);
    }
}

/* dw[O,CKK] = dwt^T; or zeros (and db zeros) when there was no image. */
static void s_bwd_finish(const ps_conv_shape_t *s, const float *dwt, float *dw, float *db)
{
    const int CKK = s->C * s->K * s->K;
    if (s->N == 0) {
        memset(dw, 0, (size_t)s->O * CKK * sizeof(float));
        memset(db, 0, (size_t)s->O * sizeof(float));
        return;
    }
    for (int o = 0; o < s->O; o++) {
        for (int r = 0; r < CKK; r++) {
            dw[(size_t)o * CKK + r] = dwt[(size_t)r * s->O + o];
        }
    }
}

void ps_cpu_conv2d_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                       const float *w, const float *b, float *y, int relu, void *ws)
{
    const size_t P = (size_t)s_out_h(s) * s_out_w(s);
    for (int n = 0; n < s->N; n++) {
        s_fwd_image(ctx, s, x + (size_t)n * s->C * s->H * s->W, w, b, y + n * s->O * P,
                    relu, s_ws_col(s, ws));
    }
}

void ps_cpu_conv2d_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                       const float *w, const float *dy, float *dx, float *dw, float *db,
                       void *ws)
{
    const size_t P = (size_t)s_out_h(s) * s_out_w(s), in = (size_t)s->C * s->H * s->W;
    float *dwt = s_ws_dwt(s, ws);
    for (int n = 0; n < s->N; n++) {
        s_bwd_image(ctx, s, x + n * in, w, dy + n * s->O * P, dx ? dx + n * in : NULL, dwt,
                    db, n == 0, s_ws_col(s, ws));
    }
    s_bwd_finish(s, dwt, dw, db);
}

/* Image by image, so the convolution output never leaves the cache. */
void ps_cpu_conv2d_pool_fwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                            const float *w, const float *b, float *p, uint8_t *arg,
                            void *ws)
{
    const int HO = s_out_h(s), WO = s_out_w(s);
    const size_t pooled = (size_t)s->O * (HO / 2) * (WO / 2);
    float *y = s_ws_y(s, ws);
    for (int n = 0; n < s->N; n++) {
        s_fwd_image(ctx, s, x + (size_t)n * s->C * s->H * s->W, w, b, y, 1,
                    s_ws_col(s, ws));
        ps_cpu_maxpool2_fwd(ctx, y, p + n * pooled, arg + n * pooled, s->O, HO, WO);
    }
}

void ps_cpu_conv2d_pool_bwd(ps_kctx_t *ctx, const ps_conv_shape_t *s, const float *x,
                            const float *w, const float *dp, const uint8_t *arg,
                            const float *p, float *dx, float *dw, float *db, void *ws)
{
    const int HO = s_out_h(s), WO = s_out_w(s);
    const size_t pooled = (size_t)s->O * (HO / 2) * (WO / 2);
    const size_t in = (size_t)s->C * s->H * s->W;
    float *dy = s_ws_y(s, ws), *dwt = s_ws_dwt(s, ws);
    for (int n = 0; n < s->N; n++) {
        ps_cpu_maxpool2_bwd(ctx, dp + n * pooled, arg + n * pooled, p + n * pooled, dy,
                            s->O, HO, WO);
        s_bwd_image(ctx, s, x + n * in, w, dy, dx ? dx + n * in : NULL, dwt, db, n == 0,
                    s_ws_col(s, ws));
    }
    s_bwd_finish(s, dwt, dw, db);
}

/* y[NC, H/2, W/2] = max over each 2x2 window of x[NC, H, W]; arg = winner 0..3
 * (0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right; first max wins). */
void ps_cpu_maxpool2_fwd(ps_kctx_t *ctx, const float *restrict x, float *restrict y,
                         uint8_t *restrict arg, int NC, int H, int W)
{
#ifdef PS_HAVE_AVX512
    if (s_avx512(ctx)) {
        ps_cpu_maxpool2_fwd_avx512(x, y, arg, NC, H, W);
        return;
    }
#else
    (void)ctx; /* a build without the AVX-512 files has the loops below only */
#endif
    const int HO = H / 2, WO = W / 2;
    for (int i = 0; i < NC; i++) {
        const float *xi = x + (size_t)i * H * W;
        float *yi = y + (size_t)i * HO * WO;
        uint8_t *ai = arg + (size_t)i * HO * WO;
        for (int oh = 0; oh < HO; oh++) {
            const float *r0 = xi + (size_t)(2 * oh) * W;
            const float *r1 = r0 + W;
            for (int ow = 0; ow < WO; ow++) {
                float m = r0[2 * ow];
                uint8_t a = 0;
                if (r0[2 * ow + 1] > m) {
                    m = r0[2 * ow + 1];
                    a = 1;
                }
                if (r1[2 * ow] > m) {
                    m = r1[2 * ow];
                    a = 2;
                }
                if (r1[2 * ow + 1] > m) {
                    m = r1[2 * ow + 1];
                    a = 3;
                }
                yi[oh * WO + ow] = m;
                ai[oh * WO + ow] = a;
            }
        }
    }
}

void ps_cpu_maxpool2_bwd(ps_kctx_t *ctx, const float *restrict dy,
                         const uint8_t *restrict arg, const float *restrict y,
                         float *restrict dx, int NC, int H, int W)
{
#ifdef PS_HAVE_AVX512
    if (s_avx512(ctx)) {
        ps_cpu_maxpool2_bwd_avx512(dy, arg, y, dx, NC, H, W);
        return;
    }
#else
    (void)ctx; /* a build without the AVX-512 files has the loops below only */
#endif
    const int HO = H / 2, WO = W / 2;
    for (int i = 0; i < NC; i++) {
        const float *dyi = dy + (size_t)i * HO * WO;
        const uint8_t *ai = arg + (size_t)i * HO * WO;
        float *dxi = dx + (size_t)i * H * W;
        for (int oh = 0; oh < HO; oh++) {
            float *r0 = dxi + (size_t)(2 * oh) * W;
            float *r1 = r0 + W;
            for (int ow = 0; ow < WO; ow++) {
                float g = dyi[oh * WO + ow];
                if (y && !(y[(size_t)i * HO * WO + oh * WO + ow] > 0.0f)) {
                    g = 0.0f; /* the max of the window was a clipped ReLU output */
                }
                const int a = ai[oh * WO + ow];
                r0[2 * ow] = a == 0 ? g : 0.0f;
                r0[2 * ow + 1] = a == 1 ? g : 0.0f;
                r1[2 * ow] = a == 2 ? g : 0.0f;
                r1[2 * ow + 1] = a == 3 ? g : 0.0f;
            }
        }
    }
}
