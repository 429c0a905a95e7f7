/*
 * tests/unit/test_kernels.c - every op of a kernels backend against a naive
 * float64 reference, and each backward op against finite differences of its
 * forward op. Runs on the CPU backend; the helpers go through the table's
 * alloc/copy functions so a device backend can reuse them (suite gpu).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/kernels.h"
#include "kernels/threads.h"
#include "tests/unit/testutil.h"

static const ps_kernels_t *s_k = &ps_kernels_cpu;
static ps_kctx_t *s_ctx;

/* Two fixtures: the CPU backend's portable paths (OpenBLAS + plain loops), and
 * its AVX-512 paths (own sgemm, im2col, pooling) where the CPU has them. */
static void s_setup_portable(void)
{
    ps_kernels_set_cpu_gemm(PS_CPU_GEMM_BLAS);
    ck_assert_int_eq(s_k->ctx_new(&s_ctx), 0);
    ps_kernels_set_cpu_gemm(PS_CPU_GEMM_AUTO);
}

static void s_setup_avx512(void)
{
    ps_kernels_set_cpu_gemm(PS_CPU_GEMM_AVX512);
    ck_assert_int_eq(s_k->ctx_new(&s_ctx), 0);
    ps_kernels_set_cpu_gemm(PS_CPU_GEMM_AUTO);
}

static void s_teardown(void)
{
    s_k->ctx_destroy(&s_ctx);
    ck_assert_ptr_null(s_ctx);
}

/* Backend copy of host floats. Caller frees with s_k->free(). */
static float *s_up(const float *h, size_t n)
{
    float *d = s_k->alloc(n * sizeof(float) + 1);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(s_k->copy_h2d(s_ctx, d, h, n * sizeof(float)), 0);
    return d;
}

/* Copies a backend buffer back into h. */
static void s_down(float *h, const float *d, size_t n)
{
    ck_assert_int_eq(s_k->copy_d2h(s_ctx, h, d, n * sizeof(float)), 0);
}

static float *s_rand(size_t n, float lo, float hi, uint64_t seed)
{
    float *p = malloc(n * sizeof(float) + 1);
    ck_assert_ptr_nonnull(p);
    ps_test_fill(p, n, lo, hi, seed);
    return p;
}

/* ---- sgemm ---------------------------------------------------------------- */

/* C = alpha op(A) op(B) + beta C in float64 over the stored float matrices. */
static void s_ref_gemm(int ta, int tb, int M, int N, int K, double alpha, const float *A,
                       int lda, const float *B, int ldb, double beta, const float *C0,
                       int ldc, double *out)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double acc = 0.0;
            for (int p = 0; p < K; p++) {
                double a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                double b = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                acc += a * b;
            }
            out[(size_t)i * N + j] = alpha * acc + beta * C0[(size_t)i * ldc + j];
        }
    }
}

/* One sgemm case on context ctx against the float64 reference; padded leading
 * dimensions exercise lda/ldb/ldc, and the padding of C must stay untouched.
 * beta == 0 with a NaN-filled C checks that C is then never read. */
static void s_gemm_case(ps_kctx_t *ctx, int ta, int tb, int M, int N, int K, float alpha,
                        float beta)
{
    const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
    const size_t na = (size_t)(ta ? K : M) * lda + 1, nb = (size_t)(tb ? N : K) * ldb + 1;
    const size_t nc = (size_t)M * ldc;
    float *A = s_rand(na, -1, 1, 1), *B = s_rand(nb, -1, 1, 2);
    float *C = s_rand(nc, -1, 1, 3), *got = malloc(nc * sizeof(float) + 1);
    double *want = malloc((size_t)M * N * sizeof(double) + 1);
    if (beta == 0.0f) {
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                C[(size_t)i * ldc + j] = NAN;
            }
        }
    }
    s_ref_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta == 0.0f ? 0.0 : beta, C, ldc,
               want);
    if (beta == 0.0f) {
        /* the reference multiplied NaN by 0; the op must not read C at all */
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double acc = 0.0;
                for (int p = 0; p < K; p++) {
                    double a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                    double b = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                    acc += a * b;
                }
                want[(size_t)i * N + j] = alpha * acc;
            }
        }
    }
    float *dA = s_up(A, na), *dB = s_up(B, nb), *dC = s_up(C, nc);
    s_k->sgemm(ctx, ta, tb, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, ldc);
    s_down(got, dC, nc);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            const double w = want[(size_t)i * N + j];
            ck_assert_msg(ps_test_close(got[(size_t)i * ldc + j], w, 1e-5, 1e-4),
                          "ta=%d tb=%d M=%d N=%d K=%d C[%d,%d]=%g want %g", ta, tb, M, N, K,
                          i, j, got[(size_t)i * ldc + j], w);
        }
        for (int j = N; j < ldc; j++) {
            ck_assert_float_eq(got[(size_t)i * ldc + j], C[(size_t)i * ldc + j]);
        }
    }
    s_k->free(dA);
    s_k->free(dB);
    s_k->free(dC);
    free(A);
    free(B);
    free(C);
    free(got);
    free(want);
}

/* Every sgemm implementation the CPU backend may pick (blas: OpenBLAS;
 * avx512: our own, where the CPU has it), on shapes that cross
 * its register tile (8x32) and cache blocks (MC 128, KC 256, NC 1024). */
START_TEST(sgemm_matches_reference_for_all_transposes)
{
    static const int shapes[][3] = {{37, 29, 53},  {1, 1, 1},  {8, 32, 16},
                                    {64, 10, 128}, {9, 33, 7}, {130, 1061, 300}};
    static const ps_cpu_gemm_t impls[] = {PS_CPU_GEMM_BLAS, PS_CPU_GEMM_AVX512};
    for (int im = 0; im < 2; im++) {
        ps_kernels_set_cpu_gemm(impls[im]);
        ps_kctx_t *ctx = NULL;
        ck_assert_int_eq(s_k->ctx_new(&ctx), 0);
        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
            for (int ta = 0; ta < 2; ta++) {
                for (int tb = 0; tb < 2; tb++) {
                    const int *sh = shapes[t];
                    s_gemm_case(ctx, ta, tb, sh[0], sh[1], sh[2], 0.7f, 0.3f);
                    s_gemm_case(ctx, ta, tb, sh[0], sh[1], sh[2], 1.0f, 0.0f);
                }
            }
        }
        /* K == 0 scales C by beta */
        float c[4] = {1, 2, 3, 4}, a[1] = {0}, b[1] = {0};
        s_k->sgemm(ctx, 0, 0, 2, 2, 0, 1.0f, a, 1, b, 2, 0.5f, c, 2);
        ck_assert_float_eq(c[3], 2.0f);
        s_k->ctx_destroy(&ctx);
    }
    ps_kernels_set_cpu_gemm(PS_CPU_GEMM_AUTO);
}
END_TEST

/*
 * The backward formulas of Y = X @ W^T (the linear layer): with L = sum(R .* Y),
 * dX = R @ W and dW = R^T @ X, both computed by sgemm with transposes, match
 * central differences of L computed by the forward sgemm.
 */
START_TEST(sgemm_gradients_match_finite_differences)
{
    const int n = 5, I = 7, O = 4;
    float *X = s_rand((size_t)n * I, -1, 1, 10), *W = s_rand((size_t)O * I, -1, 1, 11);
    float *R = s_rand((size_t)n * O, -1, 1, 12);
    float *Y = malloc((size_t)n * O * sizeof(float));
    float dX[5 * 7], dW[4 * 7];
    s_k->sgemm(s_ctx, 0, 0, n, I, O, 1.0f, R, O, W, I, 0.0f, dX, I);
    s_k->sgemm(s_ctx, 1, 0, O, I, n, 1.0f, R, O, X, I, 0.0f, dW, I);
    const float eps = 1e-2f;
    for (int which = 0; which < 2; which++) {
        float *P = which ? W : X;
        float *G = which ? dW : dX;
        const int cnt = which ? O * I : n * I;
        for (int i = 0; i < cnt; i++) {
            double l[2];
            const float keep = P[i];
            for (int s = 0; s < 2; s++) {
                P[i] = keep + (s ? -eps : eps);
                s_k->sgemm(s_ctx, 0, 1, n, O, I, 1.0f, X, I, W, I, 0.0f, Y, O);
                double acc = 0.0;
                for (int j = 0; j < n * O; j++) {
                    acc += (double)R[j] * Y[j];
                }
                l[s] = acc;
            }
            P[i] = keep;
            const double fd = (l[0] - l[1]) / (2.0 * eps);
            ck_assert_msg(ps_test_close(G[i], fd, 1e-4, 1e-3), "%s[%d]=%g fd %g",
                          which ? "dW" : "dX", i, G[i], fd);
        }
    }
    free(X);
    free(W);
    free(R);
    free(Y);
}
END_TEST

/* ---- bias and relu --------------------------------------------------------- */

START_TEST(bias_add_and_bias_relu_match_reference)
{
    const int N = 13, C = 37;
    float *y = s_rand((size_t)N * C, -2, 2, 20), *b = s_rand(C, -1, 1, 21);
    float *got = malloc((size_t)N * C * sizeof(float));
    for (int relu = 0; relu < 2; relu++) {
        float *dy = s_up(y, (size_t)N * C), *db = s_up(b, C);
        if (relu) {
            s_k->bias_relu(s_ctx, dy, db, N, C);
        } else {
            s_k->bias_add(s_ctx, dy, db, N, C);
        }
        s_down(got, dy, (size_t)N * C);
        for (int i = 0; i < N * C; i++) {
            double want = (double)y[i] + b[i % C];
            if (relu && want < 0) {
                want = 0;
            }
            ck_assert_msg(ps_test_close(got[i], want, 1e-6, 1e-6), "relu=%d i=%d", relu, i);
        }
        s_k->free(dy);
        s_k->free(db);
    }
    free(y);
    free(b);
    free(got);
}
END_TEST

START_TEST(bias_grad_is_column_sum_and_matches_finite_differences)
{
    const int N = 19, C = 23;
    float *dy = s_rand((size_t)N * C, -1, 1, 30);
    float db[23];
    memset(db, 0x7f, sizeof(db)); /* garbage: bias_grad must overwrite */
    float *d_dy = s_up(dy, (size_t)N * C), *d_db = s_up(db, C);
    s_k->bias_grad(s_ctx, d_dy, d_db, N, C);
    s_down(db, d_db, C);
    for (int c = 0; c < C; c++) {
        double want = 0.0;
        for (int n = 0; n < N; n++) {
            want += dy[(size_t)n * C + c];
        }
        ck_assert_msg(ps_test_close(db[c], want, 1e-5, 1e-5), "db[%d]", c);
    }
    /* L(b) = sum(dy .* (y + b)): dL/db_c by central differences */
    float *y = s_rand((size_t)N * C, -1, 1, 31), *b = s_rand(C, -1, 1, 32);
    float *t = malloc((size_t)N * C * sizeof(float));
    const float eps = 1e-2f;
    for (int c = 0; c < C; c++) {
        double l[2];
        const float keep = b[c];
        for (int s = 0; s < 2; s++) {
            b[c] = keep + (s ? -eps : eps);
            memcpy(t, y, (size_t)N * C * sizeof(float));
            s_k->bias_add(s_ctx, t, b, N, C);
            double acc = 0.0;
            for (int i = 0; i < N * C; i++) {
                acc += (double)dy[i] * t[i];
            }
            l[s] = acc;
        }
        b[c] = keep;
        ck_assert(ps_test_close(db[c], (l[0] - l[1]) / (2 * eps), 1e-3, 1e-3));
    }
    s_k->free(d_dy);
    s_k->free(d_db);
    free(dy);
    free(y);
    free(b);
    free(t);
}
END_TEST

START_TEST(relu_forward_backward_match_reference_and_finite_differences)
{
    const size_t n = 1001;
    float *x = s_rand(n, -1, 1, 40), *dy = s_rand(n, -1, 1, 41);
    float *y = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
    float *d_x = s_up(x, n), *d_dy = s_up(dy, n);
    s_k->relu_fwd(s_ctx, d_x, d_x, n); /* in place */
    s_down(y, d_x, n);
    s_k->relu_bwd(s_ctx, d_x, d_dy, d_dy, n); /* in place */
    s_down(dx, d_dy, n);
    const float eps = 1e-3f;
    for (size_t i = 0; i < n; i++) {
        ck_assert_float_eq(y[i], x[i] > 0 ? x[i] : 0.0f);
        ck_assert_float_eq(dx[i], x[i] > 0 ? dy[i] : 0.0f);
        if (fabsf(x[i]) > 2 * eps) {
            /* d/dx of dy*relu(x) */
            double lp = dy[i] * (double)fmaxf(x[i] + eps, 0);
            double lm = dy[i] * (double)fmaxf(x[i] - eps, 0);
            ck_assert(ps_test_close(dx[i], (lp - lm) / (2 * eps), 1e-4, 1e-3));
        }
    }
    s_k->free(d_x);
    s_k->free(d_dy);
    free(x);
    free(dy);
    free(y);
    free(dx);
}
END_TEST

/* ---- softmax cross-entropy ------------------------------------------------- */

static double s_ref_xent(const float *z, const uint8_t *lab, int N, int C, double *dz,
                         int *correct)
{
    double total = 0.0;
    *correct = 0;
    for (int n = 0; n < N; n++) {
        const float *r = z + (size_t)n * C;
        double m = r[0];
        int best = 0;
        for (int c = 1; c < C; c++) {
            if (r[c] > m) {
                m = r[c];
                best = c;
            }
        }
        double s = 0.0;
        for (int c = 0; c < C; c++) {
            s += exp(r[c] - m);
        }
        double lse = m + log(s);
        total += lse - r[lab[n]];
        *correct += best == lab[n];
        for (int c = 0; c < C; c++) {
            dz[(size_t)n * C + c] = (exp(r[c] - lse) - (c == lab[n])) / N;
        }
    }
    return total / N;
}

START_TEST(softmax_xent_matches_reference_and_finite_differences)
{
    const int N = 17, C = 10;
    float *z = s_rand((size_t)N * C, -4, 4, 50);
    z[3] = 80.0f; /* large logits must not overflow */
    uint8_t lab[17];
    for (int n = 0; n < N; n++) {
        lab[n] = (uint8_t)((n * 7) % C);
    }
    double dz_ref[17 * 10];
    int ok_ref;
    double want = s_ref_xent(z, lab, N, C, dz_ref, &ok_ref);
    float *d_z = s_up(z, (size_t)N * C), *d_dz = s_k->alloc((size_t)N * C * sizeof(float));
    uint8_t *d_lab = s_k->alloc(N);
    ck_assert_int_eq(s_k->copy_h2d(s_ctx, d_lab, lab, N), 0);
    int ok = -1;
    float loss = s_k->softmax_xent(s_ctx, d_z, d_lab, N, C, d_dz, &ok);
    float dz[17 * 10];
    s_down(dz, d_dz, (size_t)N * C);
    ck_assert(ps_test_close(loss, want, 1e-5, 1e-5));
    ck_assert_int_eq(ok, ok_ref);
    for (int i = 0; i < N * C; i++) {
        ck_assert_msg(ps_test_close(dz[i], dz_ref[i], 1e-6, 1e-4), "dz[%d]", i);
    }
    /* forward only, and in place (dlogits == logits) give the same numbers */
    ck_assert_float_eq(s_k->softmax_xent(s_ctx, d_z, d_lab, N, C, NULL, NULL), loss);
    s_k->softmax_xent(s_ctx, d_z, d_lab, N, C, d_z, NULL);
    float dz2[17 * 10];
    s_down(dz2, d_z, (size_t)N * C);
    for (int i = 0; i < N * C; i++) {
        ck_assert_float_eq(dz2[i], dz[i]);
    }
    /* central differences of the mean loss (host, CPU table) */
    const float eps = 1e-2f;
    for (int i = 0; i < N * C; i += 3) {
        const float keep = z[i];
        z[i] = keep + eps;
        double lp = ps_kernels_cpu.softmax_xent(NULL, z, lab, N, C, NULL, NULL);
        z[i] = keep - eps;
        double lm = ps_kernels_cpu.softmax_xent(NULL, z, lab, N, C, NULL, NULL);
        z[i] = keep;
        ck_assert_msg(ps_test_close(dz[i], (lp - lm) / (2 * eps), 2e-4, 1e-2),
                      "dz[%d]=%g fd %g", i, dz[i], (lp - lm) / (2 * eps));
    }
    s_k->free(d_z);
    s_k->free(d_dz);
    s_k->free(d_lab);
    free(z);
}
END_TEST

START_TEST(softmax_xent_counts_correct_with_first_maximum)
{
    float z[3 * 4] = {1, 5, 5, 0, /* tie: first max (1) wins */
                      9, 0, 0, 0, 0, 0, 0, 2};
    uint8_t lab[3] = {1, 0, 2};
    int ok = 0;
    float l = s_k->softmax_xent(s_ctx, z, lab, 3, 4, NULL, &ok);
    ck_assert_int_eq(ok, 2);
    ck_assert(l > 0.0f);
}
END_TEST

/* ---- convolution and pooling ---------------------------------------------- */

static void s_ref_conv(const ps_conv_shape_t *s, const float *x, const float *w,
                       const float *b, double *y)
{
    const int HO = s->H + 2 * s->pad - s->K + 1, WO = s->W + 2 * s->pad - s->K + 1;
    for (int n = 0; n < s->N; n++) {
        for (int o = 0; o < s->O; o++) {
            for (int oh = 0; oh < HO; oh++) {
                for (int ow = 0; ow < WO; ow++) {
                    double acc = b[o];
                    for (int c = 0; c < s->C; c++) {
                        for (int kh = 0; kh < s->K; kh++) {
                            for (int kw = 0; kw < s->K; kw++) {
                                int ih = oh + kh - s->pad, iw = ow + kw - s->pad;
                                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) {
                                    continue;
                                }
                                acc +=
                                    (double)x[((size_t)(n * s->C + c) * s->H + ih) * s->W +
                                              iw] *
                                    w[((size_t)(o * s->C + c) * s->K + kh) * s->K + kw];
                            }
                        }
                    }
                    y[((size_t)(n * s->O + o) * HO + oh) * WO + ow] = acc;
                }
            }
        }
    }
}

/* Forward (with and without ReLU) against the float64 reference for a few
 * shapes, including the two of the CNN at a small batch. */
START_TEST(conv2d_forward_matches_reference)
{
    const ps_conv_shape_t shapes[] = {
        {2, 3, 6, 5, 4, 3, 1}, {1, 1, 28, 28, 32, 5, 2}, {2, 32, 14, 14, 64, 5, 2},
        {1, 2, 5, 5, 3, 3, 0}, {1, 1, 3, 3, 2, 5, 2}, /* kernel larger than image */
    };
    for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
        const ps_conv_shape_t *s = &shapes[t];
        const int HO = s->H + 2 * s->pad - s->K + 1, WO = s->W + 2 * s->pad - s->K + 1;
        const size_t nx = (size_t)s->N * s->C * s->H * s->W;
        const size_t nw = (size_t)s->O * s->C * s->K * s->K;
        const size_t ny = (size_t)s->N * s->O * HO * WO;
        float *x = s_rand(nx, -1, 1, 60 + t), *w = s_rand(nw, -0.3f, 0.3f, 70 + t);
        float *b = s_rand(s->O, -0.5f, 0.5f, 80 + t), *y = malloc(ny * sizeof(float));
        double *want = malloc(ny * sizeof(double));
        s_ref_conv(s, x, w, b, want);
        void *ws = s_k->alloc(s_k->conv2d_workspace(s) + 1);
        float *d_x = s_up(x, nx), *d_w = s_up(w, nw), *d_b = s_up(b, s->O);
        float *d_y = s_k->alloc(ny * sizeof(float));
        for (int relu = 0; relu < 2; relu++) {
            s_k->conv2d_fwd(s_ctx, s, d_x, d_w, d_b, d_y, relu, ws);
            s_down(y, d_y, ny);
            for (size_t i = 0; i < ny; i++) {
                double v = relu && want[i] < 0 ? 0.0 : want[i];
                ck_assert_msg(ps_test_close(y[i], v, 1e-5, 1e-4),
                              "shape %zu relu %d y[%zu]", t, relu, i);
            }
        }
        s_k->free(ws);
        s_k->free(d_x);
        s_k->free(d_w);
        s_k->free(d_b);
        s_k->free(d_y);
        free(x);
        free(w);
        free(b);
        free(y);
        free(want);
    }
}
END_TEST

/* dx, dw, db of L = sum(R .* conv(x, w, b)) against central differences of L
 * evaluated in float64 by the reference convolution. */
START_TEST(conv2d_gradients_match_finite_differences)
{
    const ps_conv_shape_t shapes[] = {{2, 3, 6, 5, 4, 3, 1}, {2, 2, 8, 8, 3, 5, 2}};
    for (size_t t = 0; t < 2; t++) {
        const ps_conv_shape_t *s = &shapes[t];
        const int HO = s->H + 2 * s->pad - s->K + 1, WO = s->W + 2 * s->pad - s->K + 1;
        const size_t nx = (size_t)s->N * s->C * s->H * s->W;
        const size_t nw = (size_t)s->O * s->C * s->K * s->K;
        const size_t ny = (size_t)s->N * s->O * HO * WO;
        float *x = s_rand(nx, -1, 1, 90 + t), *w = s_rand(nw, -0.5f, 0.5f, 91 + t);
        float *b = s_rand(s->O, -0.5f, 0.5f, 92 + t), *R = s_rand(ny, -1, 1, 93 + t);
        float *dx = malloc(nx * sizeof(float)), *dw = malloc(nw * sizeof(float));
        float *db = malloc(s->O * sizeof(float));
        double *y = malloc(ny * sizeof(double));
        void *ws = s_k->alloc(s_k->conv2d_workspace(s) + 1);
        float *d_x = s_up(x, nx), *d_w = s_up(w, nw), *d_R = s_up(R, ny);
        float *d_dx = s_up(x, nx), *d_dw = s_up(w, nw), *d_db = s_up(b, s->O);
        s_k->conv2d_bwd(s_ctx, s, d_x, d_w, d_R, d_dx, d_dw, d_db, ws);
        s_down(dx, d_dx, nx);
        s_down(dw, d_dw, nw);
        s_down(db, d_db, s->O);
        const float eps = 1e-2f;
        float *params[3] = {x, w, b};
        float *grads[3] = {dx, dw, db};
        const size_t counts[3] = {nx, nw, (size_t)s->O};
        for (int which = 0; which < 3; which++) {
            float *P = params[which];
            for (size_t i = 0; i < counts[which]; i++) {
                double l[2];
                const float keep = P[i];
                for (int sgn = 0; sgn < 2; sgn++) {
                    P[i] = keep + (sgn ? -eps : eps);
                    s_ref_conv(s, x, w, b, y);
                    double acc = 0.0;
                    for (size_t j = 0; j < ny; j++) {
                        acc += R[j] * y[j];
                    }
                    l[sgn] = acc;
                }
                P[i] = keep;
                const double fd = (l[0] - l[1]) / (2.0 * eps);
                ck_assert_msg(ps_test_close(grads[which][i], fd, 1e-3, 1e-3),
                              "shape %zu grad %d [%zu] = %g fd %g", t, which, i,
                              grads[which][i], fd);
            }
        }
        /* dx == NULL (first layer) still gives dw and db */
        s_k->conv2d_bwd(s_ctx, s, d_x, d_w, d_R, NULL, d_dw, d_db, ws);
        float *dw2 = malloc(nw * sizeof(float));
        s_down(dw2, d_dw, nw);
        for (size_t i = 0; i < nw; i++) {
            ck_assert_float_eq(dw2[i], dw[i]);
        }
        free(dw2);
        s_k->free(ws);
        s_k->free(d_x);
        s_k->free(d_w);
        s_k->free(d_R);
        s_k->free(d_dx);
        s_k->free(d_dw);
        s_k->free(d_db);
        free(x);
        free(w);
        free(b);
        free(R);
        free(dx);
        free(dw);
        free(db);
        free(y);
    }
}
END_TEST

START_TEST(maxpool2_forward_backward_match_reference)
{
    const int NC = 5, H = 6, W = 8, HO = 3, WO = 4;
    const size_t nx = (size_t)NC * H * W, ny = (size_t)NC * HO * WO;
    float *x = malloc(nx * sizeof(float));
    /* distinct values: a permutation of 0..nx-1 scaled, so no ties */
    for (size_t i = 0; i < nx; i++) {
        x[i] = (float)((i * 37) % nx) * 0.01f - 1.0f;
    }
    float *R = s_rand(ny, -1, 1, 100);
    float *y = malloc(ny * sizeof(float)), *dx = malloc(nx * sizeof(float));
    uint8_t *arg = malloc(ny);
    s_k->maxpool2_fwd(s_ctx, x, y, arg, NC, H, W);
    for (int i = 0; i < NC; i++) {
        for (int oh = 0; oh < HO; oh++) {
            for (int ow = 0; ow < WO; ow++) {
                const float *p = x + (size_t)i * H * W;
                float m = fmaxf(
                    fmaxf(p[(2 * oh) * W + 2 * ow], p[(2 * oh) * W + 2 * ow + 1]),
                    fmaxf(p[(2 * oh + 1) * W + 2 * ow], p[(2 * oh + 1) * W + 2 * ow + 1]));
                ck_assert_float_eq(y[((size_t)i * HO + oh) * WO + ow], m);
            }
        }
    }
    memset(dx, 0x7f, nx * sizeof(float)); /* must be fully overwritten */
    s_k->maxpool2_bwd(s_ctx, R, arg, NULL, dx, NC, H, W);
    const float eps = 1e-3f; /* values are >= 0.01 apart */
    float *yp = malloc(ny * sizeof(float));
    for (size_t i = 0; i < nx; i++) {
        double l[2];
        const float keep = x[i];
        for (int s = 0; s < 2; s++) {
            x[i] = keep + (s ? -eps : eps);
            s_k->maxpool2_fwd(s_ctx, x, yp, arg, NC, H, W);
            double acc = 0.0;
            for (size_t j = 0; j < ny; j++) {
                acc += (double)R[j] * yp[j];
            }
            l[s] = acc;
        }
        x[i] = keep;
        ck_assert_msg(ps_test_close(dx[i], (l[0] - l[1]) / (2 * eps), 1e-3, 1e-3),
                      "dx[%zu]", i);
    }
    free(x);
    free(R);
    free(y);
    free(dx);
    free(arg);
    free(yp);
}
END_TEST

/* ---- update, memory, selection -------------------------------------------- */

/* The fused conv-relu-pool ops equal conv2d_fwd + maxpool2_fwd and
 * maxpool2_bwd(y = p) + conv2d_bwd, on the two CNN shapes at a small batch. */
START_TEST(conv2d_pool_fused_ops_match_unfused)
{
    const ps_conv_shape_t shapes[] = {
        {3, 1, 28, 28, 32, 5, 2}, {3, 32, 14, 14, 64, 5, 2}, {2, 2, 6, 4, 3, 3, 1}};
    for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
        const ps_conv_shape_t *s = &shapes[t];
        const int HO = s->H + 2 * s->pad - s->K + 1, WO = s->W + 2 * s->pad - s->K + 1;
        const size_t nx = (size_t)s->N * s->C * s->H * s->W;
        const size_t nw = (size_t)s->O * s->C * s->K * s->K;
        const size_t ny = (size_t)s->N * s->O * HO * WO, np = ny / 4;
        float *x = s_rand(nx, -1, 1, 140 + t), *w = s_rand(nw, -0.3f, 0.3f, 150 + t);
        float *b = s_rand(s->O, -0.3f, 0.3f, 160 + t), *dp = s_rand(np, -1, 1, 170 + t);
        float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
        float *p1 = malloc(np * sizeof(float)), *p2 = malloc(np * sizeof(float));
        uint8_t *a1 = malloc(np), *a2 = malloc(np);
        float *dx1 = malloc(nx * sizeof(float)), *dx2 = malloc(nx * sizeof(float));
        float *dw1 = malloc(nw * sizeof(float)), *dw2 = malloc(nw * sizeof(float));
        float db1[64], db2[64];
        void *ws = s_k->alloc(s_k->conv2d_workspace(s));
        /* unfused */
        s_k->conv2d_fwd(s_ctx, s, x, w, b, y, 1, ws);
        s_k->maxpool2_fwd(s_ctx, y, p1, a1, s->N * s->O, HO, WO);
        s_k->maxpool2_bwd(s_ctx, dp, a1, p1, dy, s->N * s->O, HO, WO);
        s_k->conv2d_bwd(s_ctx, s, x, w, dy, dx1, dw1, db1, ws);
        /* fused */
        s_k->conv2d_pool_fwd(s_ctx, s, x, w, b, p2, a2, ws);
        s_k->conv2d_pool_bwd(s_ctx, s, x, w, dp, a2, p2, dx2, dw2, db2, ws);
        ck_assert_mem_eq(p1, p2, np * sizeof(float));
        ck_assert_mem_eq(a1, a2, np);
        ck_assert_mem_eq(dx1, dx2, nx * sizeof(float));
        ck_assert_mem_eq(dw1, dw2, nw * sizeof(float));
        ck_assert_mem_eq(db1, db2, s->O * sizeof(float));
        /* dx == NULL gives the same dw */
        s_k->conv2d_pool_bwd(s_ctx, s, x, w, dp, a2, p2, NULL, dw2, db2, ws);
        ck_assert_mem_eq(dw1, dw2, nw * sizeof(float));
        s_k->free(ws);
        free(x);
        free(w);
        free(b);
        free(dp);
        free(y);
        free(dy);
        free(p1);
        free(p2);
        free(a1);
        free(a2);
        free(dx1);
        free(dx2);
        free(dw1);
        free(dw2);
    }
}
END_TEST

/* pool(relu(x)): the fused backward (y given) equals relu_bwd after the plain
 * pooling backward, including windows that are entirely clipped to zero. */
START_TEST(maxpool2_backward_with_fused_relu_matches_unfused)
{
    const int NC = 7, H = 10, W = 6;
    const size_t nx = (size_t)NC * H * W, ny = nx / 4;
    float *x = s_rand(nx, -1, 0.5f, 130), *R = s_rand(ny, -1, 1, 131);
    float *y = malloc(ny * sizeof(float)), *a = malloc(nx * sizeof(float));
    float *b = malloc(nx * sizeof(float));
    uint8_t *arg = malloc(ny);
    s_k->relu_fwd(s_ctx, x, x, nx);
    s_k->maxpool2_fwd(s_ctx, x, y, arg, NC, H, W);
    s_k->maxpool2_bwd(s_ctx, R, arg, y, a, NC, H, W);
    s_k->maxpool2_bwd(s_ctx, R, arg, NULL, b, NC, H, W);
    s_k->relu_bwd(s_ctx, x, b, b, nx);
    int clipped = 0;
    for (size_t i = 0; i < ny; i++) {
        clipped += y[i] == 0.0f;
    }
    ck_assert_int_gt(clipped, 0);
    ck_assert_mem_eq(a, b, nx * sizeof(float));
    free(x);
    free(R);
    free(y);
    free(a);
    free(b);
    free(arg);
}
END_TEST

START_TEST(sgd_step_op_matches_formula)
{
    const size_t n = 33;
    float *w = s_rand(n, -1, 1, 110), *v = s_rand(n, -1, 1, 111);
    float *g = s_rand(n, -1, 1, 112);
    float *w0 = malloc(n * sizeof(float)), *v0 = malloc(n * sizeof(float));
    memcpy(w0, w, n * sizeof(float));
    memcpy(v0, v, n * sizeof(float));
    s_k->sgd_step(s_ctx, 0.1f, 0.9f, 0.01f, w, v, g, 0.5f, n);
    for (size_t i = 0; i < n; i++) {
        double gg = (double)g[i] * 0.5 + 0.01 * w0[i];
        double vv = 0.9 * v0[i] + gg;
        ck_assert(ps_test_close(v[i], vv, 1e-6, 1e-5));
        ck_assert(ps_test_close(w[i], w0[i] - 0.1 * vv, 1e-6, 1e-5));
    }
    free(w);
    free(v);
    free(g);
    free(w0);
    free(v0);
}
END_TEST

START_TEST(memory_ops_copy_and_zero)
{
    float h[100], back[100];
    ps_test_fill(h, 100, -1, 1, 120);
    float *d = s_k->alloc(sizeof(h));
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq((uintptr_t)d % 64, 0);
    float *d2 = s_k->alloc(sizeof(h));
    ck_assert_int_eq(s_k->copy_h2d(s_ctx, d, h, sizeof(h)), 0);
    ck_assert_int_eq(s_k->copy_d2d(s_ctx, d2, d, sizeof(h)), 0);
    ck_assert_int_eq(s_k->copy_d2h(s_ctx, back, d2, sizeof(h)), 0);
    ck_assert_int_eq(s_k->sync(s_ctx), 0);
    ck_assert_mem_eq(back, h, sizeof(h));
    s_k->zero(s_ctx, d2, sizeof(h));
    s_k->copy_d2h(s_ctx, back, d2, sizeof(h));
    for (int i = 0; i < 100; i++) {
        ck_assert_float_eq(back[i], 0.0f);
    }
    /* the async copies: the same bytes, done once copy_wait returns */
    ck_assert_int_eq(s_k->copy_h2d_async(s_ctx, d, h, sizeof(h)), 0);
    ck_assert_int_eq(s_k->copy_d2h_async(s_ctx, back, d, sizeof(h)), 0);
    ck_assert_int_eq(s_k->copy_wait(s_ctx, 0), 0);
    ck_assert_mem_eq(back, h, sizeof(h));
    s_k->free(d);
    s_k->free(d2);
    s_k->free(NULL);
    float *p = s_k->host_alloc(10);
    ck_assert_ptr_nonnull(p);
    s_k->host_free(p);
}
END_TEST

START_TEST(select_picks_cpu_and_rejects_bad_names)
{
    const ps_kernels_t *k = NULL;
    char why[256];
    ck_assert_int_eq(ps_kernels_select("cpu", &k, why, sizeof(why)), 0);
    ck_assert_ptr_eq(k, &ps_kernels_cpu);
    ck_assert_str_eq(k->name, "cpu");
    ck_assert_int_eq(ps_kernels_select("auto", &k, why, sizeof(why)), 0);
    ck_assert_ptr_nonnull(k);
    ck_assert_int_eq(ps_kernels_select("tpu", &k, why, sizeof(why)), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "tpu"));
    ck_assert_int_eq(ps_kernels_select(NULL, &k, why, sizeof(why)), PS_EINVAL);
    if (ps_kernels_cuda_table() == NULL) {
        ck_assert_int_eq(ps_kernels_select("cuda", &k, why, sizeof(why)), PS_ENOTSUP);
        ck_assert_int_eq(ps_kernels_select("auto", &k, why, sizeof(why)), 0);
        ck_assert_ptr_eq(k, &ps_kernels_cpu);
    }
    /* a NULL reason buffer is allowed */
    ck_assert_int_eq(ps_kernels_select("cpu", &k, NULL, 0), 0);
}
END_TEST

START_TEST(cpu_gemm_choice_parses_its_three_names_only)
{
    ps_cpu_gemm_t g = PS_CPU_GEMM_BLAS;
    ck_assert_int_eq(ps_kernels_parse_cpu_gemm("auto", &g), 0);
    ck_assert_int_eq(g, PS_CPU_GEMM_AUTO);
    ck_assert_int_eq(ps_kernels_parse_cpu_gemm("blas", &g), 0);
    ck_assert_int_eq(g, PS_CPU_GEMM_BLAS);
    ck_assert_int_eq(ps_kernels_parse_cpu_gemm("avx512", &g), 0);
    ck_assert_int_eq(g, PS_CPU_GEMM_AVX512);
    ck_assert_int_eq(ps_kernels_parse_cpu_gemm("AVX512", &g), PS_EINVAL);
    ck_assert_int_eq(ps_kernels_parse_cpu_gemm("", &g), PS_EINVAL);
    ck_assert_int_eq(ps_kernels_parse_cpu_gemm(NULL, &g), PS_EINVAL);
    ck_assert_int_eq(g, PS_CPU_GEMM_AVX512); /* untouched on failure */
    /* the backend reads the choice, not the environment */
    setenv("SHARDPS_CPU_GEMM", "avx512", 1);
    ck_assert_int_eq(ps_kernels_cpu_gemm(), PS_CPU_GEMM_AUTO);
    unsetenv("SHARDPS_CPU_GEMM");
}
END_TEST

START_TEST(every_table_entry_is_set)
{
    const ps_kernels_t *k = &ps_kernels_cpu;
    ck_assert(k->probe && k->ctx_new && k->ctx_destroy && k->alloc && k->free);
    ck_assert(k->host_alloc && k->host_free && k->copy_h2d && k->copy_d2h);
    ck_assert(k->copy_d2d && k->zero && k->sync && k->sgemm && k->bias_add);
    ck_assert(k->copy_h2d_async && k->copy_d2h_async && k->copy_wait);
    ck_assert(k->bias_relu && k->bias_grad && k->relu_fwd && k->relu_bwd);
    ck_assert(k->softmax_xent && k->conv2d_workspace && k->conv2d_fwd);
    ck_assert(k->conv2d_bwd && k->maxpool2_fwd && k->maxpool2_bwd && k->sgd_step);
    ck_assert(k->conv2d_pool_fwd && k->conv2d_pool_bwd);
    char why[64];
    ck_assert_int_eq(k->probe(why, sizeof(why)), 0);
    ck_assert_int_eq(k->host_is_backend, 1);
}
END_TEST

static void s_add_tests(TCase *tc)
{
    tcase_add_test(tc, sgemm_matches_reference_for_all_transposes);
    tcase_add_test(tc, sgemm_gradients_match_finite_differences);
    tcase_add_test(tc, bias_add_and_bias_relu_match_reference);
    tcase_add_test(tc, bias_grad_is_column_sum_and_matches_finite_differences);
    tcase_add_test(tc, relu_forward_backward_match_reference_and_finite_differences);
    tcase_add_test(tc, softmax_xent_matches_reference_and_finite_differences);
    tcase_add_test(tc, softmax_xent_counts_correct_with_first_maximum);
    tcase_add_test(tc, conv2d_forward_matches_reference);
    tcase_add_test(tc, conv2d_gradients_match_finite_differences);
    tcase_add_test(tc, maxpool2_forward_backward_match_reference);
    tcase_add_test(tc, maxpool2_backward_with_fused_relu_matches_unfused);
    tcase_add_test(tc, conv2d_pool_fused_ops_match_unfused);
    tcase_add_test(tc, sgd_step_op_matches_formula);
    tcase_add_test(tc, memory_ops_copy_and_zero);
    tcase_add_test(tc, select_picks_cpu_and_rejects_bad_names);
    tcase_add_test(tc, cpu_gemm_choice_parses_its_three_names_only);
    tcase_add_test(tc, every_table_entry_is_set);
}

static Suite *s_suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *portable = tcase_create("cpu-portable");
    tcase_add_checked_fixture(portable, s_setup_portable, s_teardown);
    tcase_set_timeout(portable, 60);
    s_add_tests(portable);
    suite_add_tcase(s, portable);
    TCase *avx = tcase_create("cpu-avx512");
    tcase_add_checked_fixture(avx, s_setup_avx512, s_teardown);
    tcase_set_timeout(avx, 60);
    s_add_tests(avx);
    suite_add_tcase(s, avx);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(s_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
