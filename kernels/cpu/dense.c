/*
 * kernels/cpu/dense.c - CPU dense-layer ops: OpenBLAS sgemm and plain loops.
 *
 * The loops are written so GCC vectorises them at -O3 (restrict pointers, unit
 * stride, no calls in the inner loop). Nothing here allocates or keeps state;
 * every function is thread-safe on disjoint outputs. Shapes: N rows (batch),
 * C columns (features or classes).
 */
#include <math.h>

#include <cblas.h>

#include "kernels/cpu/cpu.h"
#include "kernels/optim.h"

void ps_cpu_sgemm(ps_kctx_t *ctx, int trans_a, int trans_b, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc)
{
#ifdef PS_HAVE_AVX512
    if (ctx && ctx->avx512) {
        ps_cpu_gemm_avx512(&ctx->pack, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                           beta, C, ldc);
        return;
    }
#else
    (void)ctx;
#endif
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta,
                C, ldc);
}

/* y[N,C] += b[C] */
void ps_cpu_bias_add(ps_kctx_t *ctx, float *restrict y, const float *restrict b, int N,
                     int C)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        float *restrict row = y + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            row[c] += b[c];
        }
    }
}

/* y[N,C] = max(y + b, 0) */
void ps_cpu_bias_relu(ps_kctx_t *ctx, float *restrict y, const float *restrict b, int N,
                      int C)
{
    (void)ctx;
    for (int n = 0; n < N; n++) {
        float *restrict row = y + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float v = row[c] + b[c];
            row[c] = v > 0.0f ? v : 0.0f;
        }
    }
}

/* db[C] = sum_n dy[n,C] */
void ps_cpu_bias_grad(ps_kctx_t *ctx, const float *restrict dy, float *restrict db, int N,
                      int C)
{
    (void)ctx;
    for (int c = 0; c < C; c++) {
        db[c] = 0.0f;
    }
    for (int n = 0; n < N; n++) {
        const float *restrict row = dy + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            db[c] += row[c];
        }
    }
}

/* y = max(x, 0); in place allowed, so no restrict. */
void ps_cpu_relu_fwd(ps_kctx_t *ctx, const float *x, float *y, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}

/* dx = dy * (y > 0); in place (dx == dy) allowed. */
void ps_cpu_relu_bwd(ps_kctx_t *ctx, const float *y, const float *dy, float *dx, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        const float g = dy[i]; /* load unconditionally so the select vectorises */
        dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
}

/*
 * Per row: m = max(z); lse = m + log(sum exp(z - m)); loss = lse - z[label];
 * dz = (exp(z - lse) - onehot) / N. Rows are processed independently, so
 * dlogits may alias logits: each row is fully read before it is written.
 */
float ps_cpu_softmax_xent(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                          int C, float *dlogits, int *correct)
{
    (void)ctx;
    double total = 0.0;
    int hits = 0;
    const float inv_n = N > 0 ? 1.0f / (float)N : 0.0f;
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * C;
        int best = 0;
        float m = z[0];
        for (int c = 1; c < C; c++) {
            if (z[c] > m) {
                m = z[c];
                best = c;
            }
        }
        float sum = 0.0f;
        for (int c = 0; c < C; c++) {
            sum += expf(z[c] - m);
        }
        const float lse = m + logf(sum);
        const int y = labels[n];
        total += (double)(lse - z[y]);
        hits += best == y;
        if (dlogits) {
            float *dz = dlogits + (size_t)n * C;
            for (int c = 0; c < C; c++) {
                dz[c] = expf(z[c] - lse) * inv_n;
            }
            dz[y] -= inv_n;
        }
    }
    if (correct) {
        *correct = hits;
    }
    return N > 0 ? (float)(total / N) : 0.0f;
}

/*
 * Per row: e = exp(-|z|); loss = max(z, 0) - z*y + log1p(e) (softplus(z) - y*z
 * without overflow); sigmoid(z) = 1/(1 + e) for z >= 0, e/(1 + e) below;
 * dz = (sigmoid(z) - y) / N. Each row is read before it is written, so
 * dlogits may alias logits. hits: rows whose (z > 0) equals the label.
 */
float ps_cpu_sigmoid_bce_hits(ps_kctx_t *ctx, const float *logits, const uint8_t *labels,
                              int N, float *dlogits, int *correct)
{
    (void)ctx;
    double total = 0.0;
    int hits = 0;
    const float inv_n = N > 0 ? 1.0f / (float)N : 0.0f;
    for (int n = 0; n < N; n++) {
        const float z = logits[n], y = labels[n] ? 1.0f : 0.0f;
        const float e = expf(-fabsf(z));
        total += (double)((z > 0.0f ? z : 0.0f) - z * y + log1pf(e));
        hits += (z > 0.0f) == (labels[n] != 0);
        if (dlogits) {
            const float s = z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
            dlogits[n] = (s - y) * inv_n;
        }
    }
    if (correct) {
        *correct = hits;
    }
    return N > 0 ? (float)(total / N) : 0.0f;
}

float ps_cpu_sigmoid_bce(ps_kctx_t *ctx, const float *logits, const uint8_t *labels, int N,
                         float *dlogits)
{
    return ps_cpu_sigmoid_bce_hits(ctx, logits, labels, N, dlogits, NULL);
}

void ps_cpu_sgd_step(ps_kctx_t *ctx, float lr, float momentum, float weight_decay, float *w,
                     float *v, const float *grad, float scale, size_t n)
{
    (void)ctx;
    const ps_optim_sgd_t o = {.lr = lr, .momentum = momentum, .weight_decay = weight_decay};
    ps_optim_sgd_step(&o, w, v, grad, scale, n);
}
