/*
 * tests/gpu/test_cuda.c - the CUDA backend against the CPU backend: every op of
 * the table on random inputs (absolute + relative tolerance), gradients by
 * finite differences where cheap, determinism, the copy stream's ordering
 * against the compute stream, and a training step of each bundled model on
 * both backends, with its copies overlapped and serialised, and its batch
 * from the model's pinned buffers or other memory, or gathered on the device
 * from a resident set, queued by hand or replayed as a recorded graph; the
 * embedding ops bit for bit, and the ctr model's step, rows included.
 * Suite 'gpu'.
 *
 * Without a usable GPU it prints "skipped: no GPU (reason)" and exits 77
 * (Meson's skip). CUDA does not survive fork(): a process that has initialised
 * the driver cannot use it in a forked child. So main() asks probe() in a
 * throwaway child, and the parent stays CUDA-free while Check forks one child
 * per test (each test makes its own context in the fixture).
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "kernels/device.h"
#include "kernels/kernels.h"
#include "kernels/optim.h"
#include "tests/unit/modelcheck.h"
#include "tests/unit/testutil.h"
#include "worker/data.h"
#include "worker/models/embed.h"
#include "worker/models/model.h"

static const ps_kernels_t *s_cu; /* the CUDA table (set in main) */
static const ps_kernels_t *s_cpu = &ps_kernels_cpu;
static ps_kctx_t *s_ctx;  /* CUDA context of the running test */
static ps_kctx_t *s_cctx; /* CPU context of the running test */
static int s_dnn;         /* 1: the running test's convolutions go through cuDNN */

static void s_setup(void)
{
    ck_assert_int_eq(s_cu->ctx_new(&s_ctx), 0);
    ck_assert_int_eq(s_cpu->ctx_new(&s_cctx), 0);
}

/* The same, with cuDNN's convolutions (set_conv) for the context and models. */
static void s_setup_dnn(void)
{
    s_setup();
    s_dnn = 1;
    ck_assert_int_eq(s_cu->set_conv(s_ctx, 1), 0);
}

static void s_teardown(void)
{
    s_cu->ctx_destroy(&s_ctx);
    ck_assert_ptr_null(s_ctx);
    s_cpu->ctx_destroy(&s_cctx);
}

/* ---- helpers ---------------------------------------------------------------- */

/* Host buffer of n random floats in [lo, hi). Caller frees with free(). */
static float *s_rand(size_t n, float lo, float hi, uint64_t seed)
{
    float *p = malloc(n * sizeof(float) + 4);
    ck_assert_ptr_nonnull(p);
    ps_test_fill(p, n, lo, hi, seed);
    return p;
}

/* Host buffer of n floats (uninitialised). */
static float *s_host(size_t n)
{
    float *p = malloc(n * sizeof(float) + 4);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Device copy of host floats. Caller frees with s_cu->free(). */
static float *s_up(const float *h, size_t n)
{
    float *d = s_cu->alloc(n * sizeof(float) + 4);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d, h, n * sizeof(float)), 0);
    return d;
}

/* Device buffer of n floats (uninitialised). */
static float *s_dev(size_t n)
{
    float *d = s_cu->alloc(n * sizeof(float) + 4);
    ck_assert_ptr_nonnull(d);
    return d;
}

static void s_down(float *h, const float *d, size_t n)
{
    ck_assert_int_eq(s_cu->copy_d2h(s_ctx, h, d, n * sizeof(float)), 0);
}

static double s_maxabs(const float *p, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        m = fabs(p[i]) > m ? fabs(p[i]) : m;
    }
    return m;
}

/* Every |got - want| <= atol + rtol*|want|; reports the first miss. */
static void s_check(const float *got, const float *want, size_t n, double atol, double rtol,
                    const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (!ps_test_close(got[i], want[i], atol, rtol)) {
            ck_abort_msg("%s[%zu] = %.9g, cpu %.9g (atol %g rtol %g)", what, i, got[i],
                         want[i], atol, rtol);
        }
    }
}

/* The same, with atol scaled by the largest |want|: sums of many terms in a
 * different order differ by a fraction of the largest value, not of each. */
static void s_check_scaled(const float *got, const float *want, size_t n, double rel,
                           const char *what)
{
    s_check(got, want, n, rel * (s_maxabs(want, n) + 1e-30), rel, what);
}

/* A convolution's three gradients of shape t against the CPU's. */
static void s_check_conv_grads(const float *gx, const float *dx, size_t nx, const float *gw,
                               const float *dw, size_t nw, const float *gb, const float *db,
                               size_t no, size_t t)
{
    char what[64];
    snprintf(what, sizeof(what), "dx(shape %zu)", t);
    s_check_scaled(gx, dx, nx, 2e-5, what);
    snprintf(what, sizeof(what), "dw(shape %zu)", t);
    s_check_scaled(gw, dw, nw, 5e-5, what);
    snprintf(what, sizeof(what), "db(shape %zu)", t);
    s_check_scaled(gb, db, no, 5e-5, what);
}

/* ---- table, memory, selection --------------------------------------------------- */

START_TEST(every_table_entry_is_set_and_probe_succeeds)
{
    const ps_kernels_t *k = s_cu;
    ck_assert(k->probe && k->ctx_new && k->ctx_destroy && k->alloc && k->free);
    ck_assert(k->host_alloc && k->host_free && k->copy_h2d && k->copy_d2h);
    ck_assert(k->copy_d2d && k->zero && k->sync && k->sgemm && k->bias_add);
    ck_assert(k->bias_relu && k->bias_grad && k->relu_fwd && k->relu_bwd);
    ck_assert(k->softmax_xent && k->conv2d_workspace && k->conv2d_fwd);
    ck_assert(k->conv2d_bwd && k->maxpool2_fwd && k->maxpool2_bwd && k->sgd_step);
    ck_assert(k->copy_h2d_async && k->copy_d2h_async && k->copy_wait);
    /* every member after host_is_backend is a function pointer: none may be
     * NULL, including ops added to kernels.h after this test was written */
    const char *base = (const char *)k;
    for (size_t off = offsetof(ps_kernels_t, probe);
         off + sizeof(void (*)(void)) <= sizeof(*k); off += sizeof(void (*)(void))) {
        void (*fp)(void);
        memcpy(&fp, base + off, sizeof(fp));
        ck_assert_msg(fp != NULL, "ps_kernels_cuda has no op at byte offset %zu", off);
    }
    ck_assert_str_eq(k->name, "cuda");
    ck_assert_int_eq(k->host_is_backend, 0);
    char why[256] = "x";
    ck_assert_int_eq(k->probe(why, sizeof(why)), 0);
    ck_assert_str_eq(why, "");
    ck_assert_int_eq(k->probe(NULL, 0), 0);
}
END_TEST

/* A worker's GPU: by local rank mod the visible GPUs, named in the log line;
 * --gpu past the visible ones is refused. */
START_TEST(device_use_takes_the_local_ranks_gpu_and_names_it)
{
    const ps_kernels_t *k = s_cu;
    int count = k->devices();
    ck_assert_int_ge(count, 1);
    char what[256];
    setenv("LOCAL_RANK", "1", 1);
    ck_assert_int_eq(ps_device_use(k, -1, what, sizeof what), 0);
    char want[64];
    snprintf(want, sizeof want, "GPU %d ", 1 % count);
    ck_assert_msg(strncmp(what, want, strlen(want)) == 0, "%s", what);
    ck_assert_ptr_nonnull(strstr(what, "local rank 1 from LOCAL_RANK"));
    unsetenv("LOCAL_RANK");
    ck_assert_int_eq(ps_device_use(k, count, what, sizeof what), PS_EINVAL);
    ck_assert_int_eq(ps_device_use(k, 0, what, sizeof what), 0);
    ck_assert_msg(strncmp(what, "GPU 0 ", 6) == 0, "%s", what);
}
END_TEST

START_TEST(select_picks_cuda_when_asked_and_for_auto)
{
    const ps_kernels_t *k = NULL;
    char why[256];
    ck_assert_int_eq(ps_kernels_select("cuda", &k, why, sizeof(why)), 0);
    ck_assert_ptr_eq(k, s_cu);
    k = NULL;
    ck_assert_int_eq(ps_kernels_select("auto", &k, why, sizeof(why)), 0);
    ck_assert_ptr_eq(k, s_cu);
    ck_assert_int_eq(ps_kernels_select("cpu", &k, why, sizeof(why)), 0);
    ck_assert_ptr_eq(k, &ps_kernels_cpu);
}
END_TEST

START_TEST(memory_copies_zero_and_alignment)
{
    enum { n = 1000 };
    float *h = s_rand(n, -1, 1, 1), *back = s_host(n);
    float *d = s_cu->alloc(n * sizeof(float)), *d2 = s_cu->alloc(n * sizeof(float));
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(d2);
    ck_assert_uint_eq((uintptr_t)d % 64, 0);
    ck_assert_uint_eq((uintptr_t)d2 % 64, 0);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d, h, n * sizeof(float)), 0);
    ck_assert_int_eq(s_cu->copy_d2d(s_ctx, d2, d, n * sizeof(float)), 0);
    ck_assert_int_eq(s_cu->copy_d2h(s_ctx, back, d2, n * sizeof(float)), 0);
    ck_assert_mem_eq(back, h, n * sizeof(float));
    /* partial zero: only the first half */
    s_cu->zero(s_ctx, d2, n / 2 * sizeof(float));
    ck_assert_int_eq(s_cu->sync(s_ctx), 0);
    s_down(back, d2, n);
    for (int i = 0; i < n; i++) {
        ck_assert_float_eq(back[i], i < n / 2 ? 0.0f : h[i]);
    }
    /* zero-byte copies are no-ops */
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d, h, 0), 0);
    ck_assert_int_eq(s_cu->copy_d2h(s_ctx, back, d, 0), 0);
    /* pinned host buffers: copies in and out of them */
    float *pin = s_cu->host_alloc(n * sizeof(float));
    ck_assert_ptr_nonnull(pin);
    memcpy(pin, h, n * sizeof(float));
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d2, pin, n * sizeof(float)), 0);
    ck_assert_int_eq(s_cu->sync(s_ctx), 0); /* pinned h2d may still be in flight */
    memset(pin, 0, n * sizeof(float));
    ck_assert_int_eq(s_cu->copy_d2h(s_ctx, pin, d2, n * sizeof(float)), 0);
    ck_assert_mem_eq(pin, h, n * sizeof(float));
    s_cu->host_free(pin);
    s_cu->host_free(NULL);
    /* an impossible allocation fails cleanly and leaves the context usable */
    ck_assert_ptr_null(s_cu->alloc((size_t)1 << 52));
    void *z = s_cu->alloc(0);
    ck_assert_ptr_nonnull(z);
    s_cu->free(z);
    s_cu->relu_fwd(s_ctx, d, d2, n);
    ck_assert_int_eq(s_cu->sync(s_ctx), 0);
    s_cu->free(d);
    s_cu->free(d2);
    s_cu->free(NULL);
    free(h);
    free(back);
}
END_TEST

/* The copy stream: async copies move the same bytes as the plain ones; ops
 * queued after an h2d see its data; a d2h sees the ops queued before it;
 * copy_wait(k) leaves at most the last k copies unfinished, also past the
 * ring of events; sync waits for copies too. */
/* Queues, half by half as a model's layers, pin -> d_x (async copy in),
 * relu(d_x) -> d_y, d_y -> out (async copy out): four copies. */
static void s_relu_halves(const float *pin, float *out, float *d_x, float *d_y, size_t n)
{
    const size_t half = n / 2;
    for (int h = 0; h < 2; h++) {
        const size_t at = h ? half : 0, len = h ? n - half : half;
        ck_assert_int_eq(
            s_cu->copy_h2d_async(s_ctx, d_x + at, pin + at, len * sizeof(float)), 0);
        s_cu->relu_fwd(s_ctx, d_x + at, d_y + at, len);
        ck_assert_int_eq(
            s_cu->copy_d2h_async(s_ctx, out + at, d_y + at, len * sizeof(float)), 0);
    }
}

START_TEST(async_copies_order_with_the_compute_stream)
{
    enum { n = 5000, half = n / 2, many = 40 };
    const size_t bytes = n * sizeof(float);
    float *x = s_rand(n, -1, 1, 700), *want = s_host(n), *back = s_host(n);
    s_cpu->relu_fwd(s_cctx, x, want, n);
    float *pin = s_cu->host_alloc(bytes), *out = s_cu->host_alloc(bytes);
    ck_assert_ptr_nonnull(pin);
    ck_assert_ptr_nonnull(out);
    memcpy(pin, x, bytes);
    float *d_x = s_dev(n), *d_y = s_dev(n);
    /* bytes: async in then plain out, and async out */
    ck_assert_int_eq(s_cu->copy_h2d_async(s_ctx, d_x, pin, bytes), 0);
    s_down(back, d_x, n);
    ck_assert_mem_eq(back, x, bytes);
    ck_assert_int_eq(s_cu->copy_d2h_async(s_ctx, out, d_x, bytes), 0);
    ck_assert_int_eq(s_cu->copy_wait(s_ctx, 0), 0);
    ck_assert_mem_eq(out, x, bytes);

    /* half by half, as a model's layers: in, compute, out */
    s_cu->zero(s_ctx, d_x, bytes);
    ck_assert_int_eq(s_cu->sync(s_ctx), 0); /* copies in do not wait for earlier ops */
    memset(out, 0, bytes);
    s_relu_halves(pin, out, d_x, d_y, n);
    ck_assert_int_eq(s_cu->copy_wait(s_ctx, 2), 0); /* the first half's in and out */
    ck_assert_mem_eq(out, want, half * sizeof(float));
    ck_assert_int_eq(s_cu->copy_wait(s_ctx, 0), 0);
    ck_assert_mem_eq(out, want, bytes);
    memset(pin, 0, bytes); /* covered by copy_wait: the device keeps its copy */
    s_down(back, d_x, n);
    ck_assert_mem_eq(back, x, bytes);

    /* more copies in flight than the context has events; empty ones count */
    memset(out, 0, bytes);
    for (int i = 0; i < many; i++) {
        ck_assert_int_eq(s_cu->copy_d2h_async(s_ctx, out + i, d_y + i, sizeof(float)), 0);
    }
    ck_assert_int_eq(s_cu->copy_h2d_async(s_ctx, d_x, pin, 0), 0);
    ck_assert_int_eq(s_cu->copy_d2h_async(s_ctx, out, d_y, 0), 0);
    ck_assert_int_eq(s_cu->copy_wait(s_ctx, many + 100), 0); /* nothing to wait for */
    ck_assert_int_eq(s_cu->copy_wait(s_ctx, many + 2 - 5), 0);
    ck_assert_mem_eq(out, want, 5 * sizeof(float));
    ck_assert_int_eq(s_cu->copy_wait(s_ctx, 0), 0);
    ck_assert_mem_eq(out, want, many * sizeof(float));

    /* sync waits for the copy stream as well */
    memset(out, 0, bytes);
    ck_assert_int_eq(s_cu->copy_d2h_async(s_ctx, out, d_y, bytes), 0);
    ck_assert_int_eq(s_cu->sync(s_ctx), 0);
    ck_assert_mem_eq(out, want, bytes);
    s_cu->host_free(pin);
    s_cu->host_free(out);
    s_cu->free(d_x);
    s_cu->free(d_y);
    free(x);
    free(want);
    free(back);
}
END_TEST

START_TEST(two_contexts_work_side_by_side)
{
    ps_kctx_t *other = NULL;
    ck_assert_int_eq(s_cu->ctx_new(&other), 0);
    enum { n = 4096 };
    float *x = s_rand(n, -1, 1, 2), *a = s_host(n), *b = s_host(n);
    float *d_x = s_up(x, n), *d_a = s_dev(n), *d_b = s_dev(n);
    ck_assert_int_eq(s_cu->sync(s_ctx), 0); /* d_x is ready for the other stream */
    s_cu->relu_fwd(s_ctx, d_x, d_a, n);
    s_cu->relu_fwd(other, d_x, d_b, n);
    ck_assert_int_eq(s_cu->copy_d2h(s_ctx, a, d_a, n * sizeof(float)), 0);
    ck_assert_int_eq(s_cu->copy_d2h(other, b, d_b, n * sizeof(float)), 0);
    ck_assert_mem_eq(a, b, n * sizeof(float));
    s_cu->ctx_destroy(&other);
    ck_assert_ptr_null(other);
    s_cu->ctx_destroy(&other); /* NULL-safe */
    s_cu->free(d_x);
    s_cu->free(d_a);
    s_cu->free(d_b);
    free(x);
    free(a);
    free(b);
}
END_TEST

/* ---- sgemm ---------------------------------------------------------------------- */

static void s_gemm_case(int M, int N, int K, int pad, uint64_t seed)
{
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad + 1;
            const int ldc = N + pad + 2;
            const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb;
            const size_t nc = (size_t)M * ldc;
            float *A = s_rand(na, -1, 1, seed), *B = s_rand(nb, -1, 1, seed + 1);
            float *C = s_rand(nc, -1, 1, seed + 2), *want = s_host(nc), *got = s_host(nc);
            memcpy(want, C, nc * sizeof(float));
            s_cpu->sgemm(s_cctx, ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, want, ldc);
            float *d_A = s_up(A, na), *d_B = s_up(B, nb), *d_C = s_up(C, nc);
            s_cu->sgemm(s_ctx, ta, tb, M, N, K, 0.7f, d_A, lda, d_B, ldb, 0.3f, d_C, ldc);
            s_down(got, d_C, nc);
            char what[64];
            snprintf(what, sizeof(what), "C(ta=%d tb=%d %dx%dx%d)", ta, tb, M, N, K);
            s_check(got, want, nc, 1e-5 * sqrt((double)K), 1e-4, what);
            for (int i = 0; i < M; i++) { /* padding past N untouched */
                for (int j = N; j < ldc; j++) {
                    ck_assert_float_eq(got[(size_t)i * ldc + j], C[(size_t)i * ldc + j]);
                }
            }
            s_cu->free(d_A);
            s_cu->free(d_B);
            s_cu->free(d_C);
            free(A);
            free(B);
            free(C);
            free(want);
            free(got);
        }
    }
}

START_TEST(sgemm_matches_cpu_for_all_transposes_and_strides)
{
    s_gemm_case(37, 29, 53, 3, 10);
    s_gemm_case(1, 1, 1, 0, 20);
    s_gemm_case(300, 257, 513, 0, 30);
    s_gemm_case(64, 10, 128, 5, 40); /* the MLP's last layer shape */
}
END_TEST

/* ---- fused dense layers ----------------------------------------------------------- */

/* A fused result against the separate ops': the same bits under the host
 * emulation (tests/gpu/emu, built with PS_GPU_EMU), whose cuBLASLt computes
 * the separate kernels' arithmetic; on a GPU cuBLASLt sums in its own order,
 * so within the GEMM tolerance. */
static void s_same(const float *got, const float *want, size_t n, const char *what)
{
#ifdef PS_GPU_EMU
    ck_assert_msg(memcmp(got, want, n * sizeof(float)) == 0, "%s: not the separate ops' bits",
                  what);
#else
    s_check_scaled(got, want, n, 1e-5, what);
#endif
}

/* Downloads d_got and d_want (n floats) and compares them with s_same. */
static void s_same_dev(const float *d_got, const float *d_want, size_t n, const char *what)
{
    float *got = s_host(n), *want = s_host(n);
    s_down(got, d_got, n);
    s_down(want, d_want, n);
    s_same(got, want, n, what);
    free(got);
    free(want);
}

/* 1 when a fused op ran. The emulation fuses every shape; a GPU's cuBLASLt
 * may refuse one (PS_ENOTSUP, nothing queued), which leaves nothing to
 * compare. */
static int s_ran(int rc, const char *what)
{
#ifdef PS_GPU_EMU
    ck_assert_msg(rc == 0, "%s: refused (%d)", what, rc);
#else
    ck_assert_msg(rc == 0 || rc == PS_ENOTSUP, "%s: %d", what, rc);
    if (rc) {
        fprintf(stderr, "note: cuBLASLt refused %s\n", what);
    }
#endif
    return rc == 0;
}

/* One dense layer x[N,C] -> [N,O] whose input x is itself a ReLU layer's
 * output (with its mask): the fused forward with each epilogue, the
 * weight and input gradients, against the separate ops; the forward and
 * the bias gradient against the CPU backend too. */
static void s_dense_case(int N, int C, int O, uint64_t seed)
{
    const size_t nx = (size_t)N * C, nw = (size_t)O * C, ny = (size_t)N * O;
    float *x0 = s_rand(nx, -1, 1, seed), *w0 = s_rand((size_t)C * C, -1, 1, seed + 1);
    float *w = s_rand(nw, -1, 1, seed + 2), *b = s_rand(O, -1, 1, seed + 3);
    float *dy = s_rand(ny, -1, 1, seed + 4), *x = s_host(nx), *y = s_host(ny);
    float *d_x0 = s_up(x0, nx), *d_w0 = s_up(w0, (size_t)C * C), *d_w = s_up(w, nw);
    float *d_b = s_up(b, O), *d_dy = s_up(dy, ny), *d_x = s_dev(nx), *d_y = s_dev(ny);
    float *d_r = s_dev(ny > nw ? ny : nw), *d_db = s_dev(O), *d_db2 = s_dev(O);
    ck_assert_uint_ge(s_cu->dense_mask_bytes(N, C) * 8, nx);
    void *d_mx = s_cu->alloc(s_cu->dense_mask_bytes(N, C));
    void *d_my = s_cu->alloc(s_cu->dense_mask_bytes(N, O));
    /* x = relu(x0 @ w0^T + b0), b0 = w's first C floats: its mask into d_mx */
    const int masked =
        s_ran(s_cu->dense_fwd(s_ctx, d_x0, d_w0, d_w, d_x, d_mx, N, C, C, 1), "x's forward");
    if (!masked) {
        s_cu->sgemm(s_ctx, 0, 1, N, C, C, 1.0f, d_x0, C, d_w0, C, 0.0f, d_x, C);
        s_cu->bias_relu(s_ctx, d_x, d_w, N, C);
    }
    s_down(x, d_x, nx);
    float *want = s_host(ny > nw ? ny : nw);
    s_cpu->sgemm(s_cctx, 0, 1, N, O, C, 1.0f, x, C, w, C, 0.0f, want, O);
    s_cpu->bias_add(s_cctx, want, b, N, O);
    for (int epi = 0; epi < 3; epi++) { /* relu + mask, relu, bias only */
        const char *what = epi == 0 ? "relu+mask" : epi == 1 ? "relu" : "bias";
        if (!s_ran(s_cu->dense_fwd(s_ctx, d_x, d_w, d_b, d_y, epi ? NULL : d_my, N, C, O,
                                   epi < 2),
                   what)) {
            continue;
        }
        s_cu->sgemm(s_ctx, 0, 1, N, O, C, 1.0f, d_x, C, d_w, C, 0.0f, d_r, O);
        (epi < 2 ? s_cu->bias_relu : s_cu->bias_add)(s_ctx, d_r, d_b, N, O);
        s_same_dev(d_y, d_r, ny, what);
        if (epi == 2) {
            s_down(y, d_y, ny);
            s_check(y, want, ny, 1e-5 * sqrt((double)C), 1e-4, "fused forward vs cpu");
        }
    }
    /* dw, db in one GEMM */
    float *d_dw = s_dev(nw), *db = s_host(O);
    if (s_ran(s_cu->dense_wgrad(s_ctx, d_x, d_dy, d_dw, d_db, N, C, O), "dw, db")) {
        s_cu->sgemm(s_ctx, 1, 0, O, C, N, 1.0f, d_dy, O, d_x, C, 0.0f, d_r, C);
        s_cu->bias_grad(s_ctx, d_dy, d_db2, N, O);
        s_same_dev(d_dw, d_r, nw, "dw");
        s_same_dev(d_db, d_db2, O, "db");
        s_down(db, d_db, O);
        s_cpu->bias_grad(s_cctx, dy, want, N, O);
        s_check_scaled(db, want, O, 1e-5, "fused db vs cpu");
    }
    /* dx with x's ReLU gradient from its mask */
    float *d_dx = s_dev(nx);
    if (masked && s_ran(s_cu->dense_dgrad(s_ctx, d_dy, d_w, d_mx, d_dx, N, C, O), "dx")) {
        s_cu->sgemm(s_ctx, 0, 0, N, C, O, 1.0f, d_dy, O, d_w, C, 0.0f, d_r, C);
        s_cu->relu_bwd(s_ctx, d_x, d_r, d_r, nx);
        s_same_dev(d_dx, d_r, nx, "dx");
    }
    float *bufs[] = {d_x0, d_w0, d_w, d_b, d_dy, d_x, d_y, d_r, d_db, d_db2, d_dw, d_dx};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
        s_cu->free(bufs[i]);
    }
    s_cu->free(d_mx);
    s_cu->free(d_my);
    float *host[] = {x0, w0, w, b, dy, x, y, want, db};
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
        free(host[i]);
    }
}

START_TEST(fused_dense_layers_match_the_separate_ops_and_cpu)
{
    s_dense_case(5, 7, 9, 70);
    s_dense_case(70, 33, 130, 80); /* bias_grad in two passes; masks over 128 rows */
    s_dense_case(1, 1, 1, 90);
    /* what the backend cannot fuse is refused with nothing queued */
    ck_assert_int_eq(s_cu->dense_dgrad(s_ctx, NULL, NULL, NULL, NULL, 4, 4, 4), PS_ENOTSUP);
    ck_assert_int_eq(s_cu->dense_fwd(s_ctx, NULL, NULL, NULL, NULL, NULL, 0, 4, 4, 1),
                     PS_ENOTSUP);
    ck_assert_int_eq(s_cpu->dense_wgrad(s_cctx, NULL, NULL, NULL, NULL, 4, 4, 4), PS_ENOTSUP);
    ck_assert_uint_eq(s_cpu->dense_mask_bytes(4, 4), 0);
#ifdef PS_GPU_EMU
    /* a shape cuBLASLt has no algorithm for: refused, and the refusal kept */
    ps_kctx_t *c = NULL;
    setenv("EMU_LT_REFUSE", "1", 1);
    ck_assert_int_eq(s_cu->ctx_new(&c), 0);
    float *d = s_dev(64);
    ck_assert_int_eq(s_cu->dense_wgrad(c, d, d, d, d, 4, 4, 4), PS_ENOTSUP);
    unsetenv("EMU_LT_REFUSE");
    ck_assert_int_eq(s_cu->dense_wgrad(c, d, d, d, d, 4, 4, 4), PS_ENOTSUP);
    ck_assert_int_eq(s_cu->dense_wgrad(c, d, d, d, d, 4, 4, 3), 0);
    s_cu->ctx_destroy(&c);
    s_cu->free(d);
#endif
}
END_TEST

/* ---- bias and ReLU -------------------------------------------------------------- */

START_TEST(bias_add_and_bias_relu_match_cpu)
{
    static const int shapes[][2] = {{333, 257}, {64, 10}, {1, 1}, {5, 4099}};
    for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
        const int N = shapes[t][0], C = shapes[t][1];
        const size_t n = (size_t)N * C;
        float *y = s_rand(n, -2, 2, 50 + t), *b = s_rand(C, -1, 1, 60 + t);
        float *want = s_host(n), *got = s_host(n);
        for (int relu = 0; relu < 2; relu++) {
            memcpy(want, y, n * sizeof(float));
            float *d_y = s_up(y, n), *d_b = s_up(b, C);
            if (relu) {
                s_cpu->bias_relu(s_cctx, want, b, N, C);
                s_cu->bias_relu(s_ctx, d_y, d_b, N, C);
            } else {
                s_cpu->bias_add(s_cctx, want, b, N, C);
                s_cu->bias_add(s_ctx, d_y, d_b, N, C);
            }
            s_down(got, d_y, n);
            ck_assert_mem_eq(got, want, n * sizeof(float)); /* one add: exact */
            s_cu->free(d_y);
            s_cu->free(d_b);
        }
        free(y);
        free(b);
        free(want);
        free(got);
    }
}
END_TEST

START_TEST(bias_grad_matches_cpu_and_finite_differences)
{
    /* {5000, 33}: more row blocks than the two-pass sum takes (capped) */
    static const int shapes[][2] = {{1000, 10}, {64, 256}, {7, 1000},
                                    {1, 33},    {0, 5},    {5000, 33}};
    for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
        const int N = shapes[t][0], C = shapes[t][1];
        const size_t n = (size_t)N * C;
        float *dy = s_rand(n + 1, -1, 1, 70 + t), *want = s_host(C), *got = s_host(C);
        s_cpu->bias_grad(s_cctx, dy, want, N, C);
        float *garbage = s_rand(C, 1e6f, 2e6f, 3);
        float *d_dy = s_up(dy, n + 1), *d_db = s_up(garbage, C); /* must overwrite */
        s_cu->bias_grad(s_ctx, d_dy, d_db, N, C);
        s_down(got, d_db, C);
        s_check(got, want, C, 1e-5 * sqrt((double)N + 1), 1e-5, "db");
        s_cu->free(d_dy);
        s_cu->free(d_db);
        free(dy);
        free(want);
        free(got);
        free(garbage);
    }
    /* L(b) = sum(R .* (y + b)) is linear in b: central differences of L with
     * the GPU bias_add give dL/db = column sums of R exactly up to rounding */
    const int N = 9, C = 13;
    float *R = s_rand((size_t)N * C, -1, 1, 80), *y = s_rand((size_t)N * C, -1, 1, 81);
    float *b = s_rand(C, -1, 1, 82), *t = s_host((size_t)N * C), *db = s_host(C);
    float *d_R = s_up(R, (size_t)N * C), *d_db = s_dev(C), *d_t = s_dev((size_t)N * C);
    s_cu->bias_grad(s_ctx, d_R, d_db, N, C);
    s_down(db, d_db, C);
    const float eps = 0.25f;
    for (int c = 0; c < C; c++) {
        double l[2];
        const float keep = b[c];
        for (int s = 0; s < 2; s++) {
            b[c] = keep + (s ? -eps : eps);
            float *d_b = s_up(b, C);
            ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_t, y, (size_t)N * C * sizeof(float)),
                             0);
            s_cu->bias_add(s_ctx, d_t, d_b, N, C);
            s_down(t, d_t, (size_t)N * C);
            s_cu->free(d_b);
            double acc = 0.0;
            for (int i = 0; i < N * C; i++) {
                acc += (double)R[i] * t[i];
            }
            l[s] = acc;
        }
        b[c] = keep;
        ck_assert_msg(ps_test_close(db[c], (l[0] - l[1]) / (2 * eps), 1e-4, 1e-4),
                      "db[%d] = %g, fd %g", c, db[c], (l[0] - l[1]) / (2 * eps));
    }
    s_cu->free(d_R);
    s_cu->free(d_db);
    s_cu->free(d_t);
    free(R);
    free(y);
    free(b);
    free(t);
    free(db);
}
END_TEST

START_TEST(relu_forward_backward_match_cpu_in_place_and_past_the_grid)
{
    /* more elements than the capped grid has threads: the grid-stride loop */
    const size_t n = (size_t)8192 * 256 * 5 / 4 + 7;
    float *x = s_rand(n, -1, 1, 90), *dy = s_rand(n, -1, 1, 91);
    float *y_cpu = s_host(n), *dx_cpu = s_host(n), *got = s_host(n);
    s_cpu->relu_fwd(s_cctx, x, y_cpu, n);
    s_cpu->relu_bwd(s_cctx, y_cpu, dy, dx_cpu, n);
    float *d_x = s_up(x, n), *d_dy = s_up(dy, n), *d_y = s_dev(n);
    s_cu->relu_fwd(s_ctx, d_x, d_y, n);
    s_down(got, d_y, n);
    ck_assert_mem_eq(got, y_cpu, n * sizeof(float));
    s_cu->relu_fwd(s_ctx, d_x, d_x, n); /* in place */
    s_down(got, d_x, n);
    ck_assert_mem_eq(got, y_cpu, n * sizeof(float));
    s_cu->relu_bwd(s_ctx, d_x, d_dy, d_dy, n); /* in place */
    s_down(got, d_dy, n);
    ck_assert_mem_eq(got, dx_cpu, n * sizeof(float));
    s_cu->free(d_x);
    s_cu->free(d_dy);
    s_cu->free(d_y);
    free(x);
    free(dy);
    free(y_cpu);
    free(dx_cpu);
    free(got);
}
END_TEST

/* ---- softmax cross-entropy -------------------------------------------------------- */

static void s_xent_case(int N, int C, uint64_t seed)
{
    const size_t n = (size_t)N * C;
    float *z = s_rand(n, -4, 4, seed), *dz_cpu = s_host(n), *got = s_host(n);
    if (n > 3) {
        z[3] = 80.0f; /* large logits must not overflow */
    }
    uint8_t *lab = malloc((size_t)N + 1);
    for (int i = 0; i < N; i++) {
        lab[i] = (uint8_t)((i * 7 + seed) % (uint64_t)C);
    }
    int ok_cpu = -1, ok = -2, ok2 = -3;
    const float l_cpu = s_cpu->softmax_xent(s_cctx, z, lab, N, C, dz_cpu, &ok_cpu);
    float *d_z = s_up(z, n), *d_dz = s_dev(n);
    uint8_t *d_lab = s_cu->alloc((size_t)N + 1);
    ck_assert_ptr_nonnull(d_lab);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_lab, lab, (size_t)N), 0);
    const float l = s_cu->softmax_xent(s_ctx, d_z, d_lab, N, C, d_dz, &ok);
    ck_assert_msg(ps_test_close(l, l_cpu, 1e-6, 1e-5), "N=%d C=%d loss %.9g cpu %.9g", N, C,
                  l, l_cpu);
    ck_assert_int_eq(ok, ok_cpu);
    s_down(got, d_dz, n);
    s_check(got, dz_cpu, n, 1e-6 / N, 1e-4, "dz");
    /* forward only, and in place, give the same bits (fixed reduction order) */
    ck_assert_float_eq(s_cu->softmax_xent(s_ctx, d_z, d_lab, N, C, NULL, &ok2), l);
    ck_assert_int_eq(ok2, ok);
    ck_assert_float_eq(s_cu->softmax_xent(s_ctx, d_z, d_lab, N, C, d_z, NULL), l);
    float *got2 = s_host(n);
    s_down(got2, d_z, n);
    ck_assert_mem_eq(got2, got, n * sizeof(float));
    s_cu->free(d_z);
    s_cu->free(d_dz);
    s_cu->free(d_lab);
    free(z);
    free(dz_cpu);
    free(got);
    free(got2);
    free(lab);
}

START_TEST(softmax_xent_matches_cpu_for_one_to_many_blocks)
{
    s_xent_case(1, 10, 100);
    s_xent_case(17, 10, 101);
    s_xent_case(100, 37, 102);
    s_xent_case(10000, 10, 103);  /* 40 blocks */
    s_xent_case(300001, 10, 104); /* more rows than 1024 blocks of threads */
    s_xent_case(64, 256, 105);
}
END_TEST

START_TEST(softmax_xent_counts_correct_with_first_maximum)
{
    float z[3 * 4] = {1, 5, 5, 0, /* tie: the first maximum (1) wins */
                      9, 0, 0, 0, 0, 0, 0, 2};
    uint8_t lab[3] = {1, 0, 2};
    float *d_z = s_up(z, 12);
    uint8_t *d_lab = s_cu->alloc(3);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_lab, lab, 3), 0);
    int ok = 0;
    const float l = s_cu->softmax_xent(s_ctx, d_z, d_lab, 3, 4, NULL, &ok);
    ck_assert_int_eq(ok, 2);
    ck_assert(ps_test_close(l, s_cpu->softmax_xent(s_cctx, z, lab, 3, 4, NULL, NULL), 1e-6,
                            1e-6));
    ok = 7;
    ck_assert_float_eq(s_cu->softmax_xent(s_ctx, d_z, d_lab, 0, 4, NULL, &ok), 0.0f);
    ck_assert_int_eq(ok, 0);
    s_cu->free(d_z);
    s_cu->free(d_lab);
}
END_TEST

START_TEST(softmax_xent_gradient_matches_finite_differences)
{
    const int N = 6, C = 10;
    const size_t n = (size_t)N * C;
    float *z = s_rand(n, -3, 3, 110), *dz = s_host(n);
    uint8_t lab[6] = {0, 3, 9, 4, 4, 1};
    float *d_z = s_up(z, n), *d_dz = s_dev(n);
    uint8_t *d_lab = s_cu->alloc(N);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_lab, lab, N), 0);
    s_cu->softmax_xent(s_ctx, d_z, d_lab, N, C, d_dz, NULL);
    s_down(dz, d_dz, n);
    const float eps = 1e-2f;
    for (size_t i = 0; i < n; i++) {
        const float keep = z[i];
        double l[2];
        for (int s = 0; s < 2; s++) {
            z[i] = keep + (s ? -eps : eps);
            ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_z, z, n * sizeof(float)), 0);
            l[s] = s_cu->softmax_xent(s_ctx, d_z, d_lab, N, C, NULL, NULL);
        }
        z[i] = keep;
        const double fd = (l[0] - l[1]) / (2 * eps);
        ck_assert_msg(ps_test_close(dz[i], fd, 2e-4, 1e-2), "dz[%zu] = %g, fd %g", i, dz[i],
                      fd);
    }
    s_cu->free(d_z);
    s_cu->free(d_dz);
    s_cu->free(d_lab);
    free(z);
    free(dz);
}
END_TEST

/* ---- logistic loss ---------------------------------------------------------------- */

static void s_bce_case(int N, uint64_t seed)
{
    float *z = s_rand((size_t)N, -6, 6, seed), *dz_cpu = s_host((size_t)N);
    float *got = s_host((size_t)N), *got2 = s_host((size_t)N);
    if (N > 3) {
        z[1] = 90.0f; /* large logits of both signs must not overflow */
        z[2] = -90.0f;
        z[3] = 0.0f;
    }
    uint8_t *lab = malloc((size_t)N + 1);
    for (int i = 0; i < N; i++) {
        lab[i] = (uint8_t)((i * 7 + seed) % 3 == 0);
    }
    const float l_cpu = s_cpu->sigmoid_bce(s_cctx, z, lab, N, dz_cpu);
    float *d_z = s_up(z, (size_t)N), *d_dz = s_dev((size_t)N);
    uint8_t *d_lab = s_cu->alloc((size_t)N + 1);
    ck_assert_ptr_nonnull(d_lab);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_lab, lab, (size_t)N), 0);
    const float l = s_cu->sigmoid_bce(s_ctx, d_z, d_lab, N, d_dz);
    ck_assert_msg(ps_test_close(l, l_cpu, 1e-6, 1e-5), "N=%d loss %.9g cpu %.9g", N, l, l_cpu);
    ck_assert(isfinite(l));
    s_down(got, d_dz, (size_t)N);
    s_check(got, dz_cpu, (size_t)N, 1e-6 / N, 1e-5, "dz");
    /* forward only, queued, and in place: the same bits; hits as the CPU's */
    ck_assert_float_eq(s_cu->sigmoid_bce(s_ctx, d_z, d_lab, N, NULL), l);
    int hits = -1, hits_cpu = -2;
    s_cpu->sigmoid_bce_queue(s_cctx, z, lab, N, NULL);
    const float lq_cpu = s_cpu->xent_result(s_cctx, N, &hits_cpu);
    ck_assert_float_eq(lq_cpu, l_cpu);
    s_cu->sigmoid_bce_queue(s_ctx, d_z, d_lab, N, d_z);
    ck_assert_int_eq(s_cu->sync(s_ctx), 0);
    ck_assert_float_eq(s_cu->xent_result(s_ctx, N, &hits), l);
    ck_assert_int_eq(hits, hits_cpu);
    s_down(got2, d_z, (size_t)N);
    ck_assert_mem_eq(got2, got, (size_t)N * sizeof(float));
    s_cu->free(d_z);
    s_cu->free(d_dz);
    s_cu->free(d_lab);
    free(z);
    free(dz_cpu);
    free(got);
    free(got2);
    free(lab);
}

START_TEST(sigmoid_bce_matches_cpu_for_one_to_many_blocks)
{
    s_bce_case(1, 120);
    s_bce_case(77, 121);
    s_bce_case(256, 122);
    s_bce_case(300001, 123); /* more rows than 1024 blocks of threads */
    ck_assert_float_eq(s_cu->sigmoid_bce(s_ctx, NULL, NULL, 0, NULL), 0.0f);
}
END_TEST

/* ---- embedding rows --------------------------------------------------------------- */

/* Gather and gradient of one shape on both backends: the same bits, the
 * columns past F*E untouched, and the same bits again on a second run.
 * Field 0 uses one key throughout (a row summed over every sample). */
static void s_embed_case(int n, int F, int E, int pad, int pool, uint64_t seed)
{
    const int N = n * F, ldx = F * E + pad;
    uint64_t *keys = malloc((size_t)N * sizeof(uint64_t));
    ps_rng_t r;
    ps_rng_init(&r, seed, 3);
    for (int j = 0; j < N; j++) {
        keys[j] = j % F == 0 ? 7 : (uint64_t)(j % F) << 40 | ps_rng_below(&r, (uint64_t)pool);
    }
    ps_embed_batch_t b;
    ck_assert_int_eq(ps_embed_batch_init(&b, N, s_cu), 0);
    const int U = ps_embed_batch_build(&b, keys, n, F);
    ck_assert_int_ge(U, 1);
    const size_t nx = (size_t)n * ldx, nr = (size_t)U * E;
    float *rows = s_rand(nr, -1, 1, seed + 1), *dx = s_rand(nx, -1, 1, seed + 2);
    float *x_cpu = s_rand(nx, 5, 6, seed + 3), *got = s_host(nx > nr ? nx : nr);
    float *dr_cpu = s_host(nr);
    float *d_rows = s_up(rows, nr), *d_x = s_up(x_cpu, nx), *d_dx = s_up(dx, nx);
    float *d_dr = s_dev(nr);
    uint32_t *d_idx = s_cu->alloc((size_t)N * 4), *d_order = s_cu->alloc((size_t)N * 4);
    uint32_t *d_off = s_cu->alloc(((size_t)U + 1) * 4);
    ck_assert(d_idx && d_order && d_off);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_idx, b.idx, (size_t)N * 4), 0);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_order, b.order, (size_t)N * 4), 0);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_off, b.offsets, ((size_t)U + 1) * 4), 0);

    s_cpu->embed_gather(s_cctx, rows, E, b.idx, n, F, x_cpu, ldx);
    s_cu->embed_gather(s_ctx, d_rows, E, d_idx, n, F, d_x, ldx);
    s_down(got, d_x, nx);
    ck_assert_mem_eq(got, x_cpu, nx * sizeof(float));
    for (int i = 0; i < n && pad > 0; i++) { /* the padding kept its values */
        ck_assert(x_cpu[(size_t)i * ldx + F * E] >= 5.0f);
    }
    s_cpu->embed_grad(s_cctx, dx, ldx, E, F, b.offsets, b.order, U, dr_cpu);
    s_cu->embed_grad(s_ctx, d_dx, ldx, E, F, d_off, d_order, U, d_dr);
    s_down(got, d_dr, nr);
    ck_assert_mem_eq(got, dr_cpu, nr * sizeof(float));
    s_cu->zero(s_ctx, d_dr, nr * sizeof(float));
    s_cu->embed_grad(s_ctx, d_dx, ldx, E, F, d_off, d_order, U, d_dr);
    s_down(got, d_dr, nr);
    ck_assert_mem_eq(got, dr_cpu, nr * sizeof(float));
    /* row 0 (key 7, field 0 of every sample) sums n positions */
    ck_assert_uint_eq(b.offsets[1] - b.offsets[0], (unsigned)n);
    double want = 0;
    for (int i = 0; i < n; i++) {
        want += dx[(size_t)i * ldx];
    }
    ck_assert(ps_test_close(dr_cpu[0], want, 1e-5, 1e-5));
    s_cu->free(d_rows);
    s_cu->free(d_x);
    s_cu->free(d_dx);
    s_cu->free(d_dr);
    s_cu->free(d_idx);
    s_cu->free(d_order);
    s_cu->free(d_off);
    ps_embed_batch_fini(&b);
    free(keys);
    free(rows);
    free(dx);
    free(x_cpu);
    free(got);
    free(dr_cpu);
}

START_TEST(embed_gather_and_grad_match_cpu_bitwise)
{
    s_embed_case(256, 26, 16, 0, 300, 130); /* the ctr's shape: past 2^16 floats */
    s_embed_case(37, 5, 3, 7, 4, 131);      /* padded rows, heavy repeats */
    s_embed_case(9, 26, 16, 13, 2, 132);    /* padding as wide as the numeric inputs */
    s_embed_case(1, 1, 1, 0, 1, 133);
}
END_TEST

/* The ctr model on both backends: the same params and rows give the same
 * loss, dense and row gradients (within the GEMMs' rounding); on the GPU
 * the same bits on every step, overlapped or profiled, from the model's
 * batch buffers or other memory, with the hook told of each layer; predict
 * agrees. */
START_TEST(ctr_training_step_matches_cpu)
{
    enum { B = 64, n = 50, E = 8 };
    ps_model_t *mc = NULL, *mg = NULL;
    ck_assert_int_eq(ps_model_new_ctr("64,32", E, s_cpu, B, &mc), 0);
    ck_assert_int_eq(ps_model_new_ctr("64,32", E, s_cu, B, &mg), 0);
    const size_t P = ps_model_num_params(mc), nt = ps_model_num_tensors(mc);
    ps_model_init_params(mc, 3);
    ps_model_init_params(mg, 3);
    const int F = PS_MODEL_CTR_FIELDS, C = PS_MODEL_CTR_NUMERIC;
    uint64_t keys[n * PS_MODEL_CTR_FIELDS];
    ps_rng_t r;
    ps_rng_init(&r, 9, 4);
    for (int j = 0; j < n * F; j++) {
        keys[j] = (uint64_t)(j % F + 1) << 40 | ps_rng_below(&r, 6);
    }
    ps_embed_batch_t b;
    ck_assert_int_eq(ps_embed_batch_init(&b, B * F, s_cu), 0);
    const int U = ps_embed_batch_build(&b, keys, n, F);
    const size_t R = (size_t)U * E;
    float *num = s_rand((size_t)n * C, -1, 2, 10), prob_c[n], prob_g[n];
    uint8_t y[n];
    for (int i = 0; i < n; i++) {
        y[i] = (uint8_t)(i % 3 == 0);
    }
    ps_test_fill(ps_model_rows(mc), R, -0.5f, 0.5f, 11);
    memcpy(ps_model_rows(mg), ps_model_rows(mc), R * sizeof(float));
    float lc = 0, lg = 0, l2 = 0;
    ck_assert_int_eq(ps_model_train_step_ctr(mc, &b, num, y, n, &lc), 0);
    ck_assert_int_eq(ps_model_train_step_ctr(mg, &b, num, y, n, &lg), 0);
    ck_assert_msg(ps_test_close(lg, lc, 1e-6, 1e-5), "loss %.9g cpu %.9g", lg, lc);
    for (size_t t = 0; t < nt; t++) {
        const ps_tensor_info_t *ti = ps_model_tensor(mc, t);
        s_check_scaled(ps_model_grads(mg) + ti->offset, ps_model_grads(mc) + ti->offset,
                       ti->count, 1e-4, ti->name);
    }
    s_check_scaled(ps_model_row_grads(mg), ps_model_row_grads(mc), R, 1e-4, "row grads");
    float *g1 = s_host(P), *r1 = s_host(R);
    memcpy(g1, ps_model_grads(mg), P * sizeof(float));
    memcpy(r1, ps_model_row_grads(mg), R * sizeof(float));
    /* overlapped with the hook, from the batch buffers; then profiled */
    memset(ps_model_grads(mg), 0, P * sizeof(float));
    memset(ps_model_row_grads(mg), 0, R * sizeof(float));
    memcpy(ps_model_batch_x(mg), num, (size_t)n * C * sizeof(float));
    memcpy(ps_model_batch_y(mg), y, n);
    ps_modelcheck_ready_t ready = {.m = mg, .want = g1};
    ps_model_set_grad_ready(mg, ps_modelcheck_on_ready, &ready);
    ck_assert_int_eq(ps_model_train_step_ctr(mg, &b, ps_model_batch_x(mg), ps_model_batch_y(mg),
                                             n, &l2),
                     0);
    ck_assert_float_eq(l2, lg);
    ck_assert_mem_eq(ps_model_grads(mg), g1, P * sizeof(float));
    ck_assert_mem_eq(ps_model_row_grads(mg), r1, R * sizeof(float));
    ck_assert_int_eq(ready.stale, 0);
    ck_assert_int_eq(ready.calls, (int)nt / 2);
    for (int c = 0; c < ready.calls && c < 8; c++) {
        ck_assert_uint_eq(ready.from[c], ps_model_tensor(mg, nt - 2 - 2 * (size_t)c)->offset);
    }
    ps_model_set_grad_ready(mg, NULL, NULL);
    ps_model_profile_t prof = {0};
    memset(ps_model_row_grads(mg), 0, R * sizeof(float));
    ps_model_set_profile(mg, &prof);
    ck_assert_int_eq(ps_model_train_step_ctr(mg, &b, num, y, n, &l2), 0);
    ps_model_set_profile(mg, NULL);
    ck_assert_int_eq(prof.steps, 1);
    ck_assert_float_eq(l2, lg);
    ck_assert_mem_eq(ps_model_grads(mg), g1, P * sizeof(float));
    ck_assert_mem_eq(ps_model_row_grads(mg), r1, R * sizeof(float));
    ck_assert_int_eq(ps_model_predict_ctr(mc, &b, num, n, prob_c), 0);
    ck_assert_int_eq(ps_model_predict_ctr(mg, &b, num, n, prob_g), 0);
    s_check(prob_g, prob_c, n, 1e-6, 1e-5, "prob");
    ck_assert_int_eq(ps_model_train_step_ctr(mg, &b, num, y, B + 1, &l2), PS_EINVAL);
    ps_embed_batch_fini(&b);
    ps_model_destroy(&mc);
    ps_model_destroy(&mg);
    free(num);
    free(g1);
    free(r1);
}
END_TEST

/* ---- convolution ------------------------------------------------------------------ */

/* {N, C, H, W, O, K, pad} */
static const ps_conv_shape_t s_conv_shapes[] = {
    {2, 3, 6, 5, 4, 3, 1},      /* small, odd sizes */
    {3, 1, 28, 28, 32, 5, 2},   /* the CNN's first layer */
    {3, 32, 14, 14, 64, 5, 2},  /* the CNN's second layer */
    {1, 2, 5, 5, 3, 3, 0},      /* no padding */
    {1, 1, 3, 3, 2, 5, 2},      /* kernel larger than the image */
    {200, 8, 32, 32, 2, 5, 2},  /* over the workspace cap: two chunks */
    {48, 1, 28, 28, 256, 1, 0}, /* db: more partial sums than the scratch holds */
};
enum { S_NSHAPES = sizeof(s_conv_shapes) / sizeof(s_conv_shapes[0]) };

static void s_conv_sizes(const ps_conv_shape_t *s, size_t *nx, size_t *nw, size_t *ny)
{
    const int HO = s->H + 2 * s->pad - s->K + 1, WO = s->W + 2 * s->pad - s->K + 1;
    *nx = (size_t)s->N * s->C * s->H * s->W;
    *nw = (size_t)s->O * s->C * s->K * s->K;
    *ny = (size_t)s->N * s->O * HO * WO;
}

START_TEST(conv2d_forward_matches_cpu)
{
    for (size_t t = 0; t < S_NSHAPES; t++) {
        const ps_conv_shape_t *s = &s_conv_shapes[t];
        size_t nx, nw, ny;
        s_conv_sizes(s, &nx, &nw, &ny);
        float *x = s_rand(nx, -1, 1, 200 + t), *w = s_rand(nw, -0.3f, 0.3f, 210 + t);
        float *b = s_rand(s->O, -0.5f, 0.5f, 220 + t);
        float *want = s_host(ny), *got = s_host(ny);
        void *ws = malloc(s_cpu->conv2d_workspace(s) + 4);
        void *d_ws = s_cu->alloc(s_cu->conv2d_workspace(s) + 4);
        ck_assert_ptr_nonnull(d_ws);
        float *d_x = s_up(x, nx), *d_w = s_up(w, nw), *d_b = s_up(b, s->O),
              *d_y = s_dev(ny);
        for (int relu = 0; relu < 2; relu++) {
            s_cpu->conv2d_fwd(s_cctx, s, x, w, b, want, relu, ws);
            s_cu->conv2d_fwd(s_ctx, s, d_x, d_w, d_b, d_y, relu, d_ws);
            s_down(got, d_y, ny);
            char what[64];
            snprintf(what, sizeof(what), "y(shape %zu relu %d)", t, relu);
            s_check_scaled(got, want, ny, 2e-5, what);
        }
        s_cu->free(d_ws);
        s_cu->free(d_x);
        s_cu->free(d_w);
        s_cu->free(d_b);
        s_cu->free(d_y);
        free(ws);
        free(x);
        free(w);
        free(b);
        free(want);
        free(got);
    }
}
END_TEST

START_TEST(conv2d_backward_matches_cpu)
{
    for (size_t t = 0; t < S_NSHAPES; t++) {
        const ps_conv_shape_t *s = &s_conv_shapes[t];
        size_t nx, nw, ny;
        s_conv_sizes(s, &nx, &nw, &ny);
        float *x = s_rand(nx, -1, 1, 300 + t), *w = s_rand(nw, -0.3f, 0.3f, 310 + t);
        float *dy = s_rand(ny, -1, 1, 320 + t);
        float *dx = s_host(nx), *dw = s_host(nw), *db = s_host(s->O);
        float *gx = s_host(nx), *gw = s_host(nw), *gb = s_host(s->O);
        void *ws = malloc(s_cpu->conv2d_workspace(s) + 4);
        void *d_ws = s_cu->alloc(s_cu->conv2d_workspace(s) + 4);
        ck_assert_ptr_nonnull(d_ws);
        s_cpu->conv2d_bwd(s_cctx, s, x, w, dy, dx, dw, db, ws);
        /* outputs start as garbage: the op must overwrite them */
        float *junk = s_rand(nx > nw ? nx : nw, 1e3f, 2e3f, 5);
        float *d_x = s_up(x, nx), *d_w = s_up(w, nw), *d_dy = s_up(dy, ny);
        float *d_dx = s_up(junk, nx), *d_dw = s_up(junk, nw), *d_db = s_up(junk, s->O);
        s_cu->conv2d_bwd(s_ctx, s, d_x, d_w, d_dy, d_dx, d_dw, d_db, d_ws);
        s_down(gx, d_dx, nx);
        s_down(gw, d_dw, nw);
        s_down(gb, d_db, s->O);
        s_check_conv_grads(gx, dx, nx, gw, dw, nw, gb, db, s->O, t);
        /* dx == NULL (first layer): the same dw and db, bit for bit */
        float *gw2 = s_host(nw), *gb2 = s_host(s->O);
        s_cu->conv2d_bwd(s_ctx, s, d_x, d_w, d_dy, NULL, d_dw, d_db, d_ws);
        s_down(gw2, d_dw, nw);
        s_down(gb2, d_db, s->O);
        ck_assert_mem_eq(gw2, gw, nw * sizeof(float));
        ck_assert_mem_eq(gb2, gb, s->O * sizeof(float));
        s_cu->free(d_ws);
        s_cu->free(d_x);
        s_cu->free(d_w);
        s_cu->free(d_dy);
        s_cu->free(d_dx);
        s_cu->free(d_dw);
        s_cu->free(d_db);
        free(ws);
        free(junk);
        free(x);
        free(w);
        free(dy);
        free(dx);
        free(dw);
        free(db);
        free(gx);
        free(gw);
        free(gb);
        free(gw2);
        free(gb2);
    }
}
END_TEST

/* The fused conv + pool ops on batch B right after batch A in the same
 * workspace: the backward reads the columns its forward kept there, so B's
 * gradients must be B's (against the CPU's, from the GPU's p and winners),
 * and a second backward must give the same bits (the columns stay). */
static void s_conv_pool_case(const ps_conv_shape_t *s, size_t t)
{
    const int HO = s->H + 2 * s->pad - s->K + 1, WO = s->W + 2 * s->pad - s->K + 1;
    size_t nx, nw, ny;
    s_conv_sizes(s, &nx, &nw, &ny);
    const size_t np = (size_t)s->N * s->O * (HO / 2) * (WO / 2);
    float *xa = s_rand(nx, -1, 1, 400 + t), *xb = s_rand(nx, -1, 1, 410 + t);
    float *w = s_rand(nw, -0.3f, 0.3f, 420 + t), *b = s_rand(s->O, -0.1f, 0.3f, 430 + t);
    float *dp = s_rand(np, -1, 1, 440 + t), *p = s_host(np), *want = s_host(np);
    float *dx = s_host(nx), *dw = s_host(nw), *db = s_host(s->O);
    float *gx = s_host(nx), *gw = s_host(nw), *gb = s_host(s->O);
    uint8_t *arg = malloc(np), *carg = malloc(np);
    void *ws = malloc(s_cpu->conv2d_workspace(s) + 4);
    void *d_ws = s_cu->alloc(s_cu->conv2d_workspace(s));
    ck_assert_ptr_nonnull(d_ws);
    float *d_xa = s_up(xa, nx), *d_xb = s_up(xb, nx), *d_w = s_up(w, nw), *d_b = s_up(b, s->O);
    float *d_dp = s_up(dp, np), *d_p = s_dev(np), *d_dx = s_dev(nx), *d_dw = s_dev(nw);
    float *d_db = s_dev(s->O);
    uint8_t *d_arg = s_cu->alloc(np);
    s_cu->conv2d_pool_fwd(s_ctx, s, d_xa, d_w, d_b, d_p, d_arg, d_ws);
    s_cu->conv2d_pool_bwd(s_ctx, s, d_xa, d_w, d_dp, d_arg, d_p, d_dx, d_dw, d_db, d_ws);
    s_cu->conv2d_pool_fwd(s_ctx, s, d_xb, d_w, d_b, d_p, d_arg, d_ws);
    s_cu->conv2d_pool_bwd(s_ctx, s, d_xb, d_w, d_dp, d_arg, d_p, d_dx, d_dw, d_db, d_ws);
    s_down(p, d_p, np);
    ck_assert_int_eq(s_cu->copy_d2h(s_ctx, arg, d_arg, np), 0);
    s_down(gx, d_dx, nx);
    s_down(gw, d_dw, nw);
    s_down(gb, d_db, s->O);
    s_cpu->conv2d_pool_fwd(s_cctx, s, xb, w, b, want, carg, ws);
    char what[64];
    snprintf(what, sizeof(what), "p(shape %zu)", t);
    s_check_scaled(p, want, np, 2e-5, what);
    s_cpu->conv2d_pool_bwd(s_cctx, s, xb, w, dp, arg, p, dx, dw, db, ws);
    s_check_conv_grads(gx, dx, nx, gw, dw, nw, gb, db, s->O, t);
    s_cu->conv2d_pool_bwd(s_ctx, s, d_xb, d_w, d_dp, d_arg, d_p, NULL, d_dw, d_db, d_ws);
    s_down(dw, d_dw, nw);
    s_down(db, d_db, s->O);
    ck_assert_mem_eq(dw, gw, nw * sizeof(float));
    ck_assert_mem_eq(db, gb, s->O * sizeof(float));
    float *d_free[] = {d_xa, d_xb, d_w, d_b, d_dp, d_p, d_dx, d_dw, d_db};
    for (size_t i = 0; i < sizeof(d_free) / sizeof(d_free[0]); i++) {
        s_cu->free(d_free[i]);
    }
    float *h_free[] = {xa, xb, w, b, dp, p, want, dx, dw, db, gx, gw, gb};
    for (size_t i = 0; i < sizeof(h_free) / sizeof(h_free[0]); i++) {
        free(h_free[i]);
    }
    s_cu->free(d_arg);
    s_cu->free(d_ws);
    free(arg);
    free(carg);
    free(ws);
}

START_TEST(conv2d_pool_backward_uses_this_batchs_columns)
{
    /* {N, C, H, W, O, K, pad}: HO and WO even */
    static const ps_conv_shape_t shapes[] = {
        {2, 3, 6, 6, 4, 3, 1},
        {3, 32, 14, 14, 64, 5, 2}, /* the CNN's second layer */
        {200, 8, 32, 32, 2, 5, 2}, /* two chunks */
    };
    for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
        s_conv_pool_case(&shapes[t], t);
    }
}
END_TEST

/* dx, dw, db of L = sum(R .* conv(x, w, b)) on the GPU against central
 * differences of L from the GPU forward. L is linear in each input, so a
 * large step is exact up to rounding and keeps the quotient's noise low. */
START_TEST(conv2d_gradients_match_finite_differences)
{
    const ps_conv_shape_t sh = {2, 3, 6, 5, 4, 3, 1}, *s = &sh;
    size_t nx, nw, ny;
    s_conv_sizes(s, &nx, &nw, &ny);
    float *x = s_rand(nx, -1, 1, 400), *w = s_rand(nw, -0.5f, 0.5f, 401);
    float *b = s_rand(s->O, -0.5f, 0.5f, 402), *R = s_rand(ny, -1, 1, 403);
    float *gx = s_host(nx), *gw = s_host(nw), *gb = s_host(s->O), *y = s_host(ny);
    void *d_ws = s_cu->alloc(s_cu->conv2d_workspace(s) + 4);
    float *d_x = s_up(x, nx), *d_w = s_up(w, nw), *d_b = s_up(b, s->O), *d_R = s_up(R, ny);
    float *d_dx = s_dev(nx), *d_dw = s_dev(nw), *d_db = s_dev(s->O), *d_y = s_dev(ny);
    s_cu->conv2d_bwd(s_ctx, s, d_x, d_w, d_R, d_dx, d_dw, d_db, d_ws);
    s_down(gx, d_dx, nx);
    s_down(gw, d_dw, nw);
    s_down(gb, d_db, s->O);
    float *params[3] = {x, w, b}, *grads[3] = {gx, gw, gb};
    float *d_params[3] = {d_x, d_w, d_b};
    const size_t counts[3] = {nx, nw, (size_t)s->O};
    const float eps = 0.25f;
    for (int which = 0; which < 3; which++) {
        float *P = params[which];
        for (size_t i = 0; i < counts[which]; i++) {
            double l[2];
            const float keep = P[i];
            for (int sgn = 0; sgn < 2; sgn++) {
                P[i] = keep + (sgn ? -eps : eps);
                ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_params[which], P,
                                                counts[which] * sizeof(float)),
                                 0);
                s_cu->conv2d_fwd(s_ctx, s, d_x, d_w, d_b, d_y, 0, d_ws);
                s_down(y, d_y, ny);
                double acc = 0.0;
                for (size_t j = 0; j < ny; j++) {
                    acc += (double)R[j] * y[j];
                }
                l[sgn] = acc;
            }
            P[i] = keep;
            ck_assert_int_eq(
                s_cu->copy_h2d(s_ctx, d_params[which], P, counts[which] * sizeof(float)),
                0);
            const double fd = (l[0] - l[1]) / (2.0 * eps);
            ck_assert_msg(ps_test_close(grads[which][i], fd, 1e-4, 1e-4),
                          "grad %d [%zu] = %g, fd %g", which, i, grads[which][i], fd);
        }
    }
    s_cu->free(d_ws);
    s_cu->free(d_x);
    s_cu->free(d_w);
    s_cu->free(d_b);
    s_cu->free(d_R);
    s_cu->free(d_dx);
    s_cu->free(d_dw);
    s_cu->free(d_db);
    s_cu->free(d_y);
    free(x);
    free(w);
    free(b);
    free(R);
    free(gx);
    free(gw);
    free(gb);
    free(y);
}
END_TEST

/* ---- max pooling ------------------------------------------------------------------ */

static void s_pool_case(int NC, int H, int W, int ties, uint64_t seed)
{
    const int HO = H / 2, WO = W / 2;
    const size_t nx = (size_t)NC * H * W, ny = (size_t)NC * HO * WO;
    float *x = s_rand(nx, -1, 1, seed), *dy = s_rand(ny, -1, 1, seed + 1);
    if (ties) { /* coarse values: many windows hold equal maxima */
        for (size_t i = 0; i < nx; i++) {
            x[i] = (float)(int)(x[i] * 2.0f);
        }
    }
    float *y = s_host(ny), *dx = s_host(nx), *gy = s_host(ny), *gx = s_host(nx);
    uint8_t *arg = malloc(ny), *garg = malloc(ny);
    s_cpu->maxpool2_fwd(s_cctx, x, y, arg, NC, H, W);
    s_cpu->maxpool2_bwd(s_cctx, dy, arg, ties ? y : NULL, dx, NC, H, W); /* ties: with the ReLU fold */
    float *junk = s_rand(nx, 5, 6, 7);
    float *d_x = s_up(x, nx), *d_dy = s_up(dy, ny), *d_y = s_dev(ny),
          *d_dx = s_up(junk, nx);
    uint8_t *d_arg = s_cu->alloc(ny);
    s_cu->maxpool2_fwd(s_ctx, d_x, d_y, d_arg, NC, H, W);
    s_cu->maxpool2_bwd(s_ctx, d_dy, d_arg, ties ? d_y : NULL, d_dx, NC, H, W);
    s_down(gy, d_y, ny);
    s_down(gx, d_dx, nx);
    ck_assert_int_eq(s_cu->copy_d2h(s_ctx, garg, d_arg, ny), 0);
    ck_assert_mem_eq(gy, y, ny * sizeof(float));
    ck_assert_mem_eq(garg, arg, ny);
    ck_assert_mem_eq(gx, dx, nx * sizeof(float));
    s_cu->free(d_x);
    s_cu->free(d_dy);
    s_cu->free(d_y);
    s_cu->free(d_dx);
    s_cu->free(d_arg);
    free(x);
    free(dy);
    free(y);
    free(dx);
    free(gy);
    free(gx);
    free(arg);
    free(garg);
    free(junk);
}

START_TEST(maxpool2_matches_cpu_including_ties)
{
    s_pool_case(5, 6, 8, 0, 500);
    s_pool_case(64 * 32, 28, 28, 0, 510); /* the CNN's first pool at batch 64 */
    s_pool_case(64 * 64, 14, 14, 1, 520);
    s_pool_case(1, 2, 2, 1, 530);
}
END_TEST

/* ---- SGD ------------------------------------------------------------------------- */

START_TEST(sgd_step_matches_cpu)
{
    const size_t n = 100003;
    for (int mom = 0; mom < 2; mom++) {
        const float mu = mom ? 0.9f : 0.0f;
        float *w = s_rand(n, -1, 1, 600), *v = s_rand(n, -1, 1, 601);
        float *g = s_rand(n, -1, 1, 602), *gw = s_host(n), *gv = s_host(n);
        float *d_w = s_up(w, n), *d_v = s_up(v, n), *d_g = s_up(g, n);
        for (int step = 0; step < 3; step++) {
            s_cpu->sgd_step(s_cctx, 0.1f, mu, 0.01f, w, v, g, 0.5f, n);
            s_cu->sgd_step(s_ctx, 0.1f, mu, 0.01f, d_w, d_v, d_g, 0.5f, n);
        }
        s_down(gw, d_w, n);
        s_down(gv, d_v, n);
        /* the kernel does the CPU's unfused float operations in the same order:
         * equal unless the CPU build contracts into FMAs (-march with FMA) */
        s_check(gw, w, n, 1e-7, 1e-6, "w");
        s_check(gv, v, n, 1e-7, 1e-6, "v");
        s_cu->free(d_w);
        s_cu->free(d_v);
        s_cu->free(d_g);
        free(w);
        free(v);
        free(g);
        free(gw);
        free(gv);
    }
}
END_TEST

/* A recorded sequence (async copy in, an op, async copy out, in two halves)
 * replayed: each replay reads the pinned input as it is at the replay and
 * lands its copies out, layer by layer, for copy_wait, as when queued by
 * hand; then the context works on as before. */
START_TEST(graph_replays_copies_and_ops_with_fresh_inputs)
{
    enum { n = 3000, half = n / 2 };
    const size_t bytes = n * sizeof(float);
    float *pin = s_cu->host_alloc(bytes), *out = s_cu->host_alloc(bytes);
    float *want = s_host(n), *d_x = s_dev(n), *d_y = s_dev(n);
    ck_assert_int_eq(s_cu->graph_begin(s_ctx), 0);
    s_relu_halves(pin, out, d_x, d_y, n);
    ps_kgraph_t *g = NULL;
    ck_assert_int_eq(s_cu->graph_end(s_ctx, &g), 0);
    ck_assert_ptr_nonnull(g);
    for (int round = 0; round < 3; round++) {
        float *x = s_rand(n, -1, 1, 900 + round);
        memcpy(pin, x, bytes);
        memset(out, 0, bytes);
        s_cpu->relu_fwd(s_cctx, x, want, n);
        ck_assert_int_eq(s_cu->graph_launch(s_ctx, g), 0);
        ck_assert_int_eq(s_cu->copy_wait(s_ctx, 2), 0); /* the first half's in and out */
        ck_assert_mem_eq(out, want, half * sizeof(float));
        ck_assert_int_eq(s_cu->copy_wait(s_ctx, 0), 0);
        ck_assert_mem_eq(out, want, bytes);
        free(x);
    }
    /* eager work after replays */
    ck_assert_int_eq(s_cu->copy_d2h_async(s_ctx, out, d_x, bytes), 0);
    ck_assert_int_eq(s_cu->copy_wait(s_ctx, 0), 0);
    ck_assert_mem_eq(out, pin, bytes);
    ck_assert_int_gt(s_cu->graph_nodes(g), 0);
    s_cu->graph_destroy(&g);
    ck_assert_ptr_null(g);
    s_cu->graph_destroy(&g);
    ck_assert_int_eq(s_cpu->graph_nodes(NULL), PS_ENOTSUP);
    ps_kgraph_t *none = (ps_kgraph_t *)&none;
    ck_assert_int_eq(s_cpu->graph_begin(s_cctx), PS_ENOTSUP);
    ck_assert_int_eq(s_cpu->graph_end(s_cctx, &none), PS_ENOTSUP);
    ck_assert_ptr_null(none);
    s_cu->host_free(pin);
    s_cu->host_free(out);
    s_cu->free(d_x);
    s_cu->free(d_y);
    free(want);
}
END_TEST

/* TF32 switches on and off (the emulation cannot show its rounding); the
 * CPU has no TF32. Marks time the streams in order. */
START_TEST(tf32_switch_and_timing_marks)
{
    ck_assert_int_eq(s_cu->set_tf32(s_ctx, 1), 0);
    ck_assert_int_eq(s_cu->set_tf32(s_ctx, 0), 0);
    ck_assert_int_eq(s_cpu->set_tf32(s_cctx, 0), 0);
    ck_assert_int_eq(s_cpu->set_tf32(s_cctx, 1), PS_ENOTSUP);
    float *d_x = s_dev(4096);
    ck_assert_double_lt(s_cu->mark_ms(s_ctx, 0, 1), 0); /* never marked */
    ck_assert_int_eq(s_cu->mark(s_ctx, 0, 0), 0);
    s_cu->relu_fwd(s_ctx, d_x, d_x, 4096);
    ck_assert_int_eq(s_cu->mark(s_ctx, 1, 0), 0);
    ck_assert_int_eq(s_cu->mark(s_ctx, 2, 1), 0);
    ck_assert_int_eq(s_cu->mark(s_ctx, PS_KERNELS_MARKS, 0), PS_EINVAL);
    ck_assert_double_ge(s_cu->mark_ms(s_ctx, 0, 1), 0);
    ck_assert_int_eq(s_cpu->mark(s_cctx, 0, 0), 0);
    ck_assert_int_eq(s_cpu->mark(s_cctx, 1, 0), 0);
    ck_assert_double_ge(s_cpu->mark_ms(s_cctx, 0, 1), 0);
    s_cu->free(d_x);
}
END_TEST

/* cuDNN can be switched on exactly where the build has it, and not while
 * recording. */
START_TEST(conv_switch_follows_the_build)
{
    const int want = ps_kernels_has_cudnn() ? 0 : PS_ENOTSUP;
    ck_assert_int_eq(s_cu->set_conv(s_ctx, 1), want);
    ck_assert_int_eq(s_cu->set_conv(s_ctx, 0), 0);
    ck_assert_int_eq(s_cpu->set_conv(s_cctx, 0), 0);
    ck_assert_int_eq(s_cpu->set_conv(s_cctx, 1), PS_ENOTSUP);
    /* not while recording: the handle and workspace are allocations */
    ps_kctx_t *c = NULL;
    ck_assert_int_eq(s_cu->ctx_new(&c), 0);
    ck_assert_int_eq(s_cu->graph_begin(c), 0);
    ck_assert_int_eq(s_cu->set_conv(c, 1), ps_kernels_has_cudnn() ? PS_ESTATE : PS_ENOTSUP);
    ps_kgraph_t *g = NULL;
    ck_assert_int_eq(s_cu->graph_end(c, &g), 0);
    s_cu->graph_destroy(&g);
    s_cu->ctx_destroy(&c);
}
END_TEST

/* The device gather of a batch from grey levels gives the host's bits. */
START_TEST(gather_u8_matches_the_host_conversion)
{
    enum { count = 97, F = 784, n = 33 };
    uint8_t *pix = malloc((size_t)count * F), lab[count], y[n], gy[n];
    uint32_t idx[n];
    for (size_t i = 0; i < (size_t)count * F; i++) {
        pix[i] = (uint8_t)(i * 2654435761u >> 13);
    }
    for (int i = 0; i < count; i++) {
        lab[i] = (uint8_t)(i % 10);
    }
    for (int i = 0; i < n; i++) {
        idx[i] = (uint32_t)((i * 31 + 5) % count);
    }
    ps_dataset_t ds = {.n = count, .rows = 28, .cols = 28, .pixels = pix, .labels = lab};
    float *want = s_host((size_t)n * F), *got = s_host((size_t)n * F), a, c;
    ps_data_gather(&ds, idx, 0, n, want, y);
    ps_data_norm(&a, &c);
    uint8_t *d_pix = s_cu->alloc((size_t)count * F), *d_lab = s_cu->alloc(count);
    uint8_t *d_y = s_cu->alloc(n);
    uint32_t *d_idx = s_cu->alloc(sizeof idx);
    float *d_x = s_dev((size_t)n * F);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_pix, pix, (size_t)count * F), 0);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_lab, lab, count), 0);
    ck_assert_int_eq(s_cu->copy_h2d(s_ctx, d_idx, idx, sizeof idx), 0);
    s_cu->gather_u8(s_ctx, d_pix, d_lab, F, d_idx, n, a, c, d_x, d_y);
    s_down(got, d_x, (size_t)n * F);
    ck_assert_int_eq(s_cu->copy_d2h(s_ctx, gy, d_y, n), 0);
    ck_assert_mem_eq(got, want, (size_t)n * F * sizeof(float));
    ck_assert_mem_eq(gy, y, n);
    memset(got, 0, (size_t)n * F * sizeof(float));
    s_cpu->gather_u8(s_cctx, pix, lab, F, idx, n, a, c, got, gy);
    ck_assert_mem_eq(got, want, (size_t)n * F * sizeof(float));
    s_cu->free(d_pix);
    s_cu->free(d_lab);
    s_cu->free(d_y);
    s_cu->free(d_idx);
    s_cu->free(d_x);
    free(pix);
    free(want);
    free(got);
}
END_TEST

/* ---- models end to end ------------------------------------------------------------ */

enum { S_IN = PS_MODEL_IN_H * PS_MODEL_IN_W };

static void s_batch(float *x, uint8_t *y, int n, uint64_t seed)
{
    ps_test_fill(x, (size_t)n * S_IN, -0.8f, 2.0f, seed);
    for (int i = 0; i < n; i++) {
        y[i] = (uint8_t)((i * 3 + seed) % PS_MODEL_CLASSES);
    }
}

/* The copies overlapped with compute (the default) against serialised
 * (profiling: all params in, then all gradients out): the same loss and
 * gradients, bit for bit. Overlapped, the hook reports each layer's
 * gradients, last layer first, once their copy has landed; serialised, once. */
static void s_overlap_case(ps_model_t *m, const float *x, const uint8_t *y, int n)
{
    const size_t P = ps_model_num_params(m), nt = ps_model_num_tensors(m);
    float *serial = s_host(P), ls = 0, lo = 0;
    ps_model_profile_t prof = {0};
    ps_model_set_profile(m, &prof);
    ck_assert_int_eq(ps_model_train_step(m, x, y, n, &ls), 0);
    ps_model_set_profile(m, NULL);
    ck_assert_int_eq(prof.steps, 1);
    memcpy(serial, ps_model_grads(m), P * sizeof(float));
    memset(ps_model_grads(m), 0, P * sizeof(float)); /* an early report would see zeros */
    ps_modelcheck_ready_t r = {.m = m, .want = serial};
    ps_model_set_grad_ready(m, ps_modelcheck_on_ready, &r);
    ck_assert_int_eq(ps_model_train_step(m, x, y, n, &lo), 0);
    ck_assert_float_eq(lo, ls);
    ck_assert_mem_eq(ps_model_grads(m), serial, P * sizeof(float));
    ck_assert_int_eq(r.stale, 0);
    ck_assert_int_eq(r.calls, (int)nt / 2); /* one per layer: weight and bias */
    for (int c = 0; c < r.calls && c < 8; c++) {
        ck_assert_uint_eq(r.from[c], ps_model_tensor(m, nt - 2 - 2 * (size_t)c)->offset);
    }
    r.calls = 0;
    memset(ps_model_grads(m), 0, P * sizeof(float));
    ps_model_set_profile(m, &prof);
    ck_assert_int_eq(ps_model_train_step(m, x, y, n, &ls), 0);
    ps_model_set_profile(m, NULL);
    ck_assert_float_eq(ls, lo);
    ck_assert_int_eq(r.calls, 1);
    ck_assert_uint_eq(r.from[0], 0);
    ck_assert_int_eq(r.stale, 0);
    ps_model_set_grad_ready(m, NULL, NULL);
    free(serial);
}

/* Steps from the model's batch buffers (pinned: the batch copies in on the
 * copy stream, ahead of the params) give the bits of steps from other memory
 * (copied on the compute stream), overlapped and profiled, with each batch
 * gathered into the buffers right after the step before returned: a stale or
 * missing copy would leave the other batch, or garbage, on the device. So
 * does evaluation from them, and x from them with y from elsewhere. */
static void s_batch_buffers_case(ps_model_t *m, const float *x, const uint8_t *y, int n)
{
    const size_t P = ps_model_num_params(m), nx = (size_t)n * S_IN;
    float *bx = ps_model_batch_x(m), *want = s_host(2 * P), wl[2], l = 0;
    uint8_t *by = ps_model_batch_y(m);
    ck_assert_ptr_nonnull(bx);
    ck_assert_ptr_nonnull(by);
    for (int b = 0; b < 2; b++) { /* batches 0 and 1 from pageable memory */
        ck_assert_int_eq(ps_model_train_step(m, x + b * nx, y + b * n, n, &wl[b]), 0);
        memcpy(want + b * P, ps_model_grads(m), P * sizeof(float));
    }
    ps_model_profile_t prof = {0};
    for (int round = 0; round < 5; round++) {
        const int b = round % 2; /* alternate, so a stale batch shows */
        memcpy(bx, x + b * nx, nx * sizeof(float));
        memcpy(by, y + b * n, (size_t)n);
        ps_model_set_profile(m, round == 2 ? &prof : NULL);
        const uint8_t *labels = round == 3 ? y + b * n : by;
        ck_assert_int_eq(ps_model_train_step(m, bx, labels, n, &l), 0);
        ck_assert_msg(l == wl[b], "round %d loss %.9g want %.9g", round, l, wl[b]);
        ck_assert_mem_eq(ps_model_grads(m), want + b * P, P * sizeof(float));
    }
    ps_model_set_profile(m, NULL);
    ck_assert_int_eq(prof.steps, 1);
    int cw = -1, cb = -2;
    float ew = 0, eb = 0;
    ck_assert_int_eq(ps_model_evaluate(m, x, y, n, &cw, &ew), 0);
    ck_assert_int_eq(ps_model_evaluate(m, bx, by, n, &cb, &eb), 0); /* round 4's batch 0 */
    ck_assert_int_eq(cb, cw);
    ck_assert_float_eq(eb, ew);
    free(want);
}

/* Params p0 scaled by (1 + b/100): each batch b trains from other params, so
 * a replay that kept stale params would show. */
static void s_params_for(ps_model_t *m, const float *p0, int b)
{
    const size_t P = ps_model_num_params(m);
    for (size_t i = 0; i < P; i++) {
        ps_model_params(m)[i] = p0[i] * (1.0f + 0.01f * (float)b);
    }
}

/* A resident training set: a step on indices gives the bits of the same
 * batch gathered on the host; recorded as a graph and replayed, step after
 * step with new params and new indices (a replay reads both afresh), the
 * same bits again, with the hook told of each layer as its gradients land;
 * a new batch size records anew; profiled steps run unrecorded. */
static void s_resident_case(ps_model_t *m, int n)
{
    enum { count = 200, rounds = 3 };
    const size_t P = ps_model_num_params(m), nt = ps_model_num_tensors(m);
    uint8_t *pix = malloc((size_t)count * S_IN), lab[count], y[64];
    uint32_t order[count];
    for (size_t i = 0; i < (size_t)count * S_IN; i++) {
        pix[i] = (uint8_t)(i * 2654435761u >> 11);
    }
    for (int i = 0; i < count; i++) {
        lab[i] = (uint8_t)((i * 7) % 10);
        order[i] = (uint32_t)((i * 53 + 17) % count);
    }
    ck_assert_int_le(n, 64);
    ps_dataset_t ds = {.n = count, .rows = 28, .cols = 28, .pixels = pix, .labels = lab};
    float a, c, *x = s_host((size_t)n * S_IN), *p0 = s_host(P), *want = s_host(rounds * P);
    float wl[rounds], l = 0;
    ps_data_norm(&a, &c);
    memcpy(p0, ps_model_params(m), P * sizeof(float));
    for (int b = 0; b < rounds; b++) {
        s_params_for(m, p0, b);
        ps_data_gather(&ds, order, b * n, n, x, y);
        ck_assert_int_eq(ps_model_train_step(m, x, y, n, &wl[b]), 0);
        memcpy(want + b * P, ps_model_grads(m), P * sizeof(float));
    }
    lab[5] = PS_MODEL_CLASSES;
    ck_assert_int_eq(ps_model_set_data(m, pix, lab, count, a, c), PS_EINVAL);
    lab[5] = (uint8_t)((5 * 7) % 10);
    ck_assert_int_eq(ps_model_train_step_idx(m, n, &l), PS_EINVAL); /* nothing resident */
    ck_assert_int_eq(ps_model_set_data(m, pix, lab, count, a, c), 0);
    uint32_t *idx = ps_model_batch_idx(m);
    ck_assert_ptr_nonnull(idx);
    ps_modelcheck_ready_t r = {.m = m};
    for (int graph = 0; graph < 2; graph++) {
        ps_model_set_graph(m, graph);
        for (int round = 0; round <= rounds; round++) {
            const int b = (round * 2) % rounds; /* 0, 2, 1, ...: out of order */
            s_params_for(m, p0, b);
            memcpy(idx, order + b * n, (size_t)n * sizeof(uint32_t));
            memset(ps_model_grads(m), 0, P * sizeof(float));
            r.want = want + b * P;
            r.calls = 0;
            ps_model_set_grad_ready(m, ps_modelcheck_on_ready, &r);
            ck_assert_int_eq(ps_model_train_step_idx(m, n, &l), 0);
            ps_model_set_grad_ready(m, NULL, NULL);
            ck_assert_msg(l == wl[b], "graph %d round %d loss %.9g want %.9g", graph, round, l,
                          wl[b]);
            ck_assert_mem_eq(ps_model_grads(m), want + b * P, P * sizeof(float));
            ck_assert_int_eq(r.stale, 0);
            ck_assert_int_eq(r.calls, (int)nt / 2);
        }
    }
    /* a smaller batch records again; profiled, it runs unrecorded */
    s_params_for(m, p0, 0);
    ps_data_gather(&ds, order, 0, n - 3, x, y);
    float l2 = 0;
    ck_assert_int_eq(ps_model_train_step(m, x, y, n - 3, &l2), 0);
    memcpy(want, ps_model_grads(m), P * sizeof(float));
    memcpy(idx, order, (size_t)n * sizeof(uint32_t));
    ps_model_profile_t prof = {0};
    for (int round = 0; round < 3; round++) {
        ps_model_set_profile(m, round == 1 ? &prof : NULL);
        ck_assert_int_eq(ps_model_train_step_idx(m, n - 3, &l), 0);
        ck_assert_float_eq(l, l2);
        ck_assert_mem_eq(ps_model_grads(m), want, P * sizeof(float));
    }
    ps_model_set_profile(m, NULL);
    ck_assert_int_eq(prof.steps, 1);
    idx[1] = count;
    ck_assert_int_eq(ps_model_train_step_idx(m, n, &l), PS_EINVAL);
    ck_assert_int_eq(ps_model_train_step_idx(m, 0, &l), PS_EINVAL);
    ps_model_set_graph(m, 0);
    memcpy(ps_model_params(m), p0, P * sizeof(float));
    free(pix);
    free(x);
    free(p0);
    free(want);
}

/* The recorded step with the dense layers fused and without: fewer graph
 * nodes (launches) fused, and the same loss and gradients (the same bits
 * under the emulation). The training set is resident (s_resident_case). */
static void s_nodes_case(ps_model_t *m, int n)
{
    const size_t P = ps_model_num_params(m);
    float *g1 = s_host(P), l1 = 0, l0 = 0;
    uint32_t *idx = ps_model_batch_idx(m);
    for (int i = 0; i < n; i++) {
        idx[i] = (uint32_t)(i * 7 % 200);
    }
    ps_model_set_graph(m, 1);
    ck_assert_int_eq(ps_model_train_step_idx(m, n, &l1), 0);
    const int fused = ps_model_graph_nodes(m);
    memcpy(g1, ps_model_grads(m), P * sizeof(float));
    ps_model_set_fused(m, 0); /* drops the recording: the next step records anew */
    ck_assert_int_eq(ps_model_graph_nodes(m), 0);
    ck_assert_int_eq(ps_model_train_step_idx(m, n, &l0), 0);
    const int unfused = ps_model_graph_nodes(m);
    ps_model_set_fused(m, 1);
    ps_model_set_graph(m, 0);
    fprintf(stderr, "note: a recorded step of %d samples: %d graph nodes fused, %d unfused\n",
            n, fused, unfused);
    ck_assert_int_gt(fused, 0);
    ck_assert_int_lt(fused, unfused);
    s_same(&l0, &l1, 1, "loss unfused");
    s_same(ps_model_grads(m), g1, P, "grads unfused");
    free(g1);
}

/* One model on both backends: the same params give the same loss and grads;
 * the overlapped copies give the serial ones' bits, from any host memory;
 * evaluation in chunks agrees; five SGD steps follow the same loss curve. */
static void s_model_case(const char *name)
{
    const int B = 64, n = 50, ne = 150;
    ps_model_t *mc = NULL, *mg = NULL;
    const int rc = ps_model_new(name, NULL, s_cpu, B, &mc);
    if (rc == PS_EINVAL) {
        fprintf(stderr, "note: model %s is not built here; not compared\n", name);
        return;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(ps_model_new(name, NULL, s_cu, B, &mg), 0);
    ck_assert_int_eq(ps_model_set_conv(mg, s_dnn), 0);
    const size_t P = ps_model_num_params(mc);
    ck_assert_uint_eq(ps_model_num_params(mg), P);
    ps_model_init_params(mc, 3);
    ps_model_init_params(mg, 3);
    ck_assert_mem_eq(ps_model_params(mc), ps_model_params(mg), P * sizeof(float));
    float *x = s_host((size_t)ne * S_IN);
    uint8_t *y = malloc(ne);
    s_batch(x, y, ne, 9);

    float lc = 0, lg = 0;
    ck_assert_int_eq(ps_model_train_step(mc, x, y, n, &lc), 0);
    ck_assert_int_eq(ps_model_train_step(mg, x, y, n, &lg), 0);
    ck_assert_msg(ps_test_close(lg, lc, 1e-6, 1e-5), "%s loss %.9g cpu %.9g", name, lg, lc);
    for (size_t t = 0; t < ps_model_num_tensors(mc); t++) {
        const ps_tensor_info_t *ti = ps_model_tensor(mc, t);
        char what[96];
        snprintf(what, sizeof(what), "%s grad %s", name, ti->name);
        s_check_scaled(ps_model_grads(mg) + ti->offset, ps_model_grads(mc) + ti->offset,
                       ti->count, 1e-4, what);
    }
    /* the same step again gives the same bits (deterministic reductions) */
    float *g1 = s_host(P), lg2 = 0;
    memcpy(g1, ps_model_grads(mg), P * sizeof(float));
    ck_assert_int_eq(ps_model_train_step(mg, x, y, n, &lg2), 0);
    ck_assert_float_eq(lg2, lg);
    ck_assert_mem_eq(g1, ps_model_grads(mg), P * sizeof(float));
    s_overlap_case(mg, x, y, n);
    ck_assert_mem_eq(g1, ps_model_grads(mg), P * sizeof(float));
    s_batch_buffers_case(mg, x, y, n);
    s_resident_case(mg, 16); /* a small batch: the emulation runs every kernel */
    s_nodes_case(mg, 16);
    s_resident_case(mc, 16); /* the CPU runs the same path, unrecorded */

    int cc = -1, cg = -2;
    float ec = 0, eg = 0;
    ck_assert_int_eq(ps_model_evaluate(mc, x, y, ne, &cc, &ec), 0);
    ck_assert_int_eq(ps_model_evaluate(mg, x, y, ne, &cg, &eg), 0);
    ck_assert(ps_test_close(eg, ec, 1e-6, 1e-5));
    ck_assert_msg(abs(cg - cc) <= 1, "%s correct %d cpu %d", name, cg, cc); /* near-ties */

    /* five SGD steps with momentum on each model's host buffers */
    const ps_optim_sgd_t o = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.0f};
    float *vc = calloc(P, sizeof(float)), *vg = calloc(P, sizeof(float));
    for (int step = 0; step < 5; step++) {
        ck_assert_int_eq(ps_model_train_step(mc, x, y, n, &lc), 0);
        ck_assert_int_eq(ps_model_train_step(mg, x, y, n, &lg), 0);
        ck_assert_msg(ps_test_close(lg, lc, 1e-5, 1e-3), "%s step %d loss %.9g cpu %.9g",
                      name, step, lg, lc);
        ps_optim_sgd_step(&o, ps_model_params(mc), vc, ps_model_grads(mc), 1.0f, P);
        ps_optim_sgd_step(&o, ps_model_params(mg), vg, ps_model_grads(mg), 1.0f, P);
    }
    /* argument errors are caught before the device is touched */
    uint8_t bad[2] = {1, PS_MODEL_CLASSES};
    ck_assert_int_eq(ps_model_train_step(mg, x, bad, 2, &lg), PS_EINVAL);
    ck_assert_int_eq(ps_model_train_step(mg, x, y, B + 1, &lg), PS_EINVAL);
    ck_assert_int_eq(ps_model_train_step(mg, x, y, 0, &lg), PS_EINVAL);
    ps_model_destroy(&mc);
    ps_model_destroy(&mg);
    ck_assert_ptr_null(mg);
    free(x);
    free(y);
    free(g1);
    free(vc);
    free(vg);
}

START_TEST(mlp_training_step_matches_cpu)
{
    s_model_case("mlp");
}
END_TEST

START_TEST(cnn_training_step_matches_cpu)
{
    s_model_case("cnn");
}
END_TEST

/* ---- main ------------------------------------------------------------------------ */

static Suite *s_suite(void)
{
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("cuda_vs_cpu");
    tcase_add_checked_fixture(tc, s_setup, s_teardown);
    tcase_set_timeout(tc, 120); /* each test starts CUDA in its own child */
    tcase_add_test(tc, every_table_entry_is_set_and_probe_succeeds);
    tcase_add_test(tc, select_picks_cuda_when_asked_and_for_auto);
    tcase_add_test(tc, device_use_takes_the_local_ranks_gpu_and_names_it);
    tcase_add_test(tc, memory_copies_zero_and_alignment);
    tcase_add_test(tc, async_copies_order_with_the_compute_stream);
    tcase_add_test(tc, two_contexts_work_side_by_side);
    tcase_add_test(tc, sgemm_matches_cpu_for_all_transposes_and_strides);
    tcase_add_test(tc, fused_dense_layers_match_the_separate_ops_and_cpu);
    tcase_add_test(tc, bias_add_and_bias_relu_match_cpu);
    tcase_add_test(tc, bias_grad_matches_cpu_and_finite_differences);
    tcase_add_test(tc, relu_forward_backward_match_cpu_in_place_and_past_the_grid);
    tcase_add_test(tc, softmax_xent_matches_cpu_for_one_to_many_blocks);
    tcase_add_test(tc, softmax_xent_counts_correct_with_first_maximum);
    tcase_add_test(tc, softmax_xent_gradient_matches_finite_differences);
    tcase_add_test(tc, sigmoid_bce_matches_cpu_for_one_to_many_blocks);
    tcase_add_test(tc, embed_gather_and_grad_match_cpu_bitwise);
    tcase_add_test(tc, conv2d_forward_matches_cpu);
    tcase_add_test(tc, conv2d_backward_matches_cpu);
    tcase_add_test(tc, conv2d_gradients_match_finite_differences);
    tcase_add_test(tc, conv2d_pool_backward_uses_this_batchs_columns);
    tcase_add_test(tc, maxpool2_matches_cpu_including_ties);
    tcase_add_test(tc, sgd_step_matches_cpu);
    tcase_add_test(tc, graph_replays_copies_and_ops_with_fresh_inputs);
    tcase_add_test(tc, tf32_switch_and_timing_marks);
    tcase_add_test(tc, gather_u8_matches_the_host_conversion);
    tcase_add_test(tc, mlp_training_step_matches_cpu);
    tcase_add_test(tc, cnn_training_step_matches_cpu);
    tcase_add_test(tc, ctr_training_step_matches_cpu);
    tcase_add_test(tc, conv_switch_follows_the_build);
    suite_add_tcase(s, tc);
    if (ps_kernels_has_cudnn()) {
        /* the convolutions again, through cuDNN */
        TCase *dnn = tcase_create("cudnn_vs_cpu");
        tcase_add_checked_fixture(dnn, s_setup_dnn, s_teardown);
        tcase_set_timeout(dnn, 120);
        tcase_add_test(dnn, conv2d_forward_matches_cpu);
        tcase_add_test(dnn, conv2d_backward_matches_cpu);
        tcase_add_test(dnn, conv2d_gradients_match_finite_differences);
        tcase_add_test(dnn, conv2d_pool_backward_uses_this_batchs_columns);
        tcase_add_test(dnn, cnn_training_step_matches_cpu);
        suite_add_tcase(s, dnn);
    }
    return s;
}

/* Runs probe() in a child process so this one never initialises CUDA (which
 * would break CUDA in the children Check forks). Returns probe's code and its
 * reason in why; a child that dies counts as no GPU. */
static int s_probe_in_child(char *why, size_t whylen)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, whylen, "pipe failed");
        return PS_EIO;
    }
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(why, whylen, "fork failed");
        return PS_EIO;
    }
    if (pid == 0) {
        char msg[256];
        close(fds[0]);
        const int rc = s_cu->probe(msg, sizeof(msg));
        const ssize_t len = (ssize_t)strlen(msg);
        if (write(fds[1], msg, (size_t)len) != len) {
            _exit(2);
        }
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < whylen && (r = read(fds[0], why + got, whylen - 1 - got)) > 0) {
        got += (size_t)r;
    }
    why[got] = '\0';
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        snprintf(why, whylen, "the probe process died");
        return PS_ENODEV;
    }
    return WEXITSTATUS(status) == 0 ? 0 : PS_ENODEV;
}

int main(void)
{
    s_cu = ps_kernels_cuda_table();
    if (!s_cu) {
        printf("skipped: no GPU (this build has no CUDA backend)\n");
        return 77;
    }
    char why[256];
    if (s_probe_in_child(why, sizeof(why)) != 0) {
        printf("skipped: no GPU (%s)\n", why);
        return 77;
    }
    SRunner *sr = srunner_create(s_suite());
    srunner_run_all(sr, CK_ENV);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
