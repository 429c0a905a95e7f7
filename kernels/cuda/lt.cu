/*
 * kernels/cuda/lt.cu - dense layers as cuBLASLt GEMMs with the ops around
 * them fused into the GEMM's epilogue (kernels.h dense_fwd, dense_wgrad,
 * dense_dgrad): one kernel where the separate path runs two or three.
 *
 *   forward   y = x @ w^T + b, ReLU      EPILOGUE_RELU_AUX_BIAS (its mask
 *             kept for the backward), RELU_BIAS, or BIAS for the logits
 *   weights   dw = dy^T @ x, db = sum dy EPILOGUE_BGRADB: the bias gradient
 *             is the column sum of the GEMM's B operand (dy) over k
 *   input     dx = (dy @ w) * relu'(x)   EPILOGUE_DRELU, with the mask the
 *             forward of the layer below wrote
 *
 * The row-major trick of ps_cuda_sgemm holds here too: a row-major [R,C]
 * matrix is a column-major [C,R] one, so each GEMM is the column-major
 * transpose, and the per-feature bias runs along D's rows.
 *
 * A plan (descriptors, layouts and the algorithm cublasLtMatmulAlgoGetHeuristic
 * chose) is made the first time a shape is seen and kept in the context, so
 * steps only set the pointers (host-side, so a CUDA graph may record them)
 * and launch. A refusal (no algorithm for the shape and epilogue, or a call
 * cuBLASLt turns down) is kept too, and answered PS_ENOTSUP at once: the
 * caller runs the separate ops.
 * The workspace is the context's fixed cuBLAS one; nothing here allocates
 * device memory after the context is made.
 *
 * Determinism: the preference allows no split-K (REDUCTION_SCHEME_NONE), so
 * each dot product and each bias-gradient sum is one sequence inside one
 * kernel, with no atomics and no reduction pass whose order could vary; the
 * algorithm is chosen once per shape and kept. So a job gets the same bits
 * every run on the same GPU and library (cuBLAS's reproducibility promise);
 * not the same bits as the separate ops, whose sums run in another order.
 */
#include <string.h>

#include <cublasLt.h>

#include "common/error.h"
#include "kernels/cuda/cuda_impl.h"

enum { S_FWD, S_WGRAD, S_DGRAD };

/* Plans kept per context: three per dense layer and batch size; a model
 * with more shapes than this runs the rest unfused. */
#define S_PLANS 48

/* One GEMM shape's plan; the key first. */
typedef struct {
    int used;      /* 1: this slot holds a plan */
    int ok;        /* 1: cuBLASLt has an algorithm; 0: it refused */
    int kind;      /* S_FWD, S_WGRAD or S_DGRAD */
    unsigned epi;  /* cublasLtEpilogue_t */
    int m, n, k;   /* column-major D[m,n], k the inner dimension */
    int tf32;      /* the context's TF32 switch when made */
    unsigned align; /* the pointers' common alignment, bytes (<= 256) */
    cublasLtMatmulDesc_t op;         /* owned */
    cublasLtMatrixLayout_t a, b, d;  /* owned */
    cublasLtMatmulAlgo_t algo;       /* the heuristic's first choice */
} s_plan_t;

struct ps_cuda_lt {
    cublasLtHandle_t h;     /* owned */
    s_plan_t plans[S_PLANS];
};

int ps_cuda_lt_new(struct ps_cuda_lt **out)
{
    *out = (struct ps_cuda_lt *)calloc(1, sizeof(**out));
    if (!*out) {
        return PS_ENOMEM;
    }
    cublasStatus_t st = cublasLtCreate(&(*out)->h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        ps_cuda_report(__FILE__, __LINE__, "cublasLtCreate", cublasGetStatusName(st),
                       cublasGetStatusString(st), ps_cublas_hint(st));
        free(*out);
        *out = NULL;
        return st == CUBLAS_STATUS_ALLOC_FAILED ? PS_ENOMEM : PS_ENODEV;
    }
    return 0;
}

static void s_plan_fini(s_plan_t *p)
{
    if (p->d) {
        (void)cublasLtMatrixLayoutDestroy(p->d);
    }
    if (p->b) {
        (void)cublasLtMatrixLayoutDestroy(p->b);
    }
    if (p->a) {
        (void)cublasLtMatrixLayoutDestroy(p->a);
    }
    if (p->op) {
        (void)cublasLtMatmulDescDestroy(p->op);
    }
    memset(p, 0, sizeof(*p));
}

void ps_cuda_lt_destroy(struct ps_cuda_lt **lt)
{
    if (!lt || !*lt) {
        return;
    }
    for (int i = 0; i < S_PLANS; i++) {
        s_plan_fini(&(*lt)->plans[i]);
    }
    (void)cublasLtDestroy((*lt)->h);
    free(*lt);
    *lt = NULL;
}

/* The largest power of two, at most 256, that divides every address. */
static unsigned s_align(const void *const *ptrs, int n)
{
    uintptr_t bits = 256;
    for (int i = 0; i < n; i++) {
        bits |= (uintptr_t)ptrs[i];
    }
    return (unsigned)(bits & (~bits + 1));
}

/* The operands of one GEMM, column-major: D[m,n] = op(A) op(B), the
 * epilogue's vector (bias or bias gradient) and aux (the ReLU mask). */
typedef struct {
    int kind;
    unsigned epi;
    int m, n, k;
    int ta, tb;           /* A, B transposed */
    int lda, ldb, ldd;    /* leading dimensions as stored */
    const void *A, *B;    /* device */
    void *D, *vec, *aux;  /* device; vec, aux NULL when the epilogue has none */
} s_gemm_t;

/* Points the plan's descriptor at g's vector and mask (host-side only). */
static void s_point(cublasLtMatmulDesc_t op, const s_gemm_t *g)
{
    if (g->vec) {
        PS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->vec, sizeof(g->vec)));
    }
    if (g->aux) {
        const int64_t ld = ((int64_t)g->m + 127) / 128 * 128; /* bits, as cuBLASLt asks */
        PS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof(g->aux)));
        PS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
    }
}

/* Fills slot p for g: descriptors, then one algorithm from the heuristic
 * (p->ok = 0 when there is none). */
static void s_plan_make(ps_kctx_t *ctx, s_plan_t *p, const s_gemm_t *g, unsigned align)
{
    memset(p, 0, sizeof(*p));
    p->used = 1;
    p->kind = g->kind;
    p->epi = g->epi;
    p->m = g->m;
    p->n = g->n;
    p->k = g->k;
    p->tf32 = ctx->tf32;
    p->align = align;
    const cublasComputeType_t ct =
        ctx->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cublasOperation_t ta = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint32_t epi = g->epi;
    PS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
    PS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                   sizeof(ta)));
    PS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                   sizeof(tb)));
    PS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                   sizeof(epi)));
    s_point(p->op, g);
    PS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_32F, g->ta ? g->k : g->m,
                                               g->ta ? g->m : g->k, g->lda));
    PS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_32F, g->tb ? g->n : g->k,
                                               g->tb ? g->k : g->n, g->ldb));
    PS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, g->m, g->n, g->ldd));
    cublasLtMatmulPreference_t pref;
    PS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = PS_CUDA_BLAS_WS_BYTES;
    const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE; /* no split-K: see the top */
    PS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    PS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme, sizeof(scheme)));
    /* the heuristic assumes 256-byte operands unless told: tell it the real ones */
    const cublasLtMatmulPreferenceAttributes_t al[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t bytes = align;
    for (int i = 0; i < 4; i++) {
        PS_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(pref, al[i], &bytes, sizeof(bytes)));
    }
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        ctx->lt->h, p->op, p->a, p->b, p->d, p->d, pref, 1, &r, &found);
    (void)cublasLtMatmulPreferenceDestroy(pref);
    p->ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p->ok) {
        p->algo = r.algo;
    }
}

/* g's plan: the cached one, or a new one; NULL when there is no room. */
static s_plan_t *s_plan(ps_kctx_t *ctx, const s_gemm_t *g)
{
    const void *ptrs[] = {g->A, g->B, g->D, g->vec, g->aux};
    const unsigned align = s_align(ptrs, 5);
    for (int i = 0; i < S_PLANS; i++) {
        s_plan_t *p = &ctx->lt->plans[i];
        if (!p->used) {
            s_plan_make(ctx, p, g, align);
            return p;
        }
        if (p->kind == g->kind && p->epi == g->epi && p->m == g->m && p->n == g->n &&
            p->k == g->k && p->tf32 == ctx->tf32 && p->align == align) {
            return p;
        }
    }
    return NULL;
}

/* Queues g on the compute stream with its plan; PS_ENOTSUP (nothing queued)
 * when cuBLASLt refused the shape or the cache is full. */
static int s_run(ps_kctx_t *ctx, const s_gemm_t *g)
{
    s_plan_t *p = s_plan(ctx, g);
    if (!p || !p->ok) {
        return PS_ENOTSUP;
    }
    s_point(p->op, g);
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t st = cublasLtMatmul(ctx->lt->h, p->op, &one, g->A, p->a, g->B, p->b,
                                             &zero, g->D, p->d, g->D, p->d, &p->algo,
                                             ctx->d_blas_ws, PS_CUDA_BLAS_WS_BYTES, ctx->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        /* refused at the call (it checks before it queues): unfused from now on */
        ps_cuda_report(__FILE__, __LINE__, "cublasLtMatmul", cublasGetStatusName(st),
                       cublasGetStatusString(st), "this layer shape runs unfused from now on");
        p->ok = 0;
        return PS_ENOTSUP;
    }
    return 0;
}

size_t ps_cuda_dense_mask_bytes(int N, int O)
{
    /* one bit per output, columns of ceil(O/128)*128 bits */
    return N > 0 && O > 0 ? (size_t)N * (((size_t)O + 127) / 128 * 16) : 0;
}

/* y^T[O,N] = w[C,O]^T x^T[C,N] (+ b along the rows, ReLU, mask) */
int ps_cuda_dense_fwd(ps_kctx_t *ctx, const float *d_x, const float *d_w, const float *d_b,
                      float *d_y, void *d_mask, int N, int C, int O, int relu)
{
    if (N <= 0 || C <= 0 || O <= 0) {
        return PS_ENOTSUP;
    }
    const unsigned epi = !relu ? CUBLASLT_EPILOGUE_BIAS
                         : d_mask ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS
                                  : CUBLASLT_EPILOGUE_RELU_BIAS;
    const s_gemm_t g = {S_FWD, epi, O, N, C, 1, 0, C, C, O,
                        d_w, d_x, d_y, (void *)d_b, relu ? d_mask : NULL};
    return s_run(ctx, &g);
}

/* dw^T[C,O] = x^T[C,N] dy[N,O], db[O] = sums of op(B) = dy over k = N */
int ps_cuda_dense_wgrad(ps_kctx_t *ctx, const float *d_x, const float *d_dy, float *d_dw,
                        float *d_db, int N, int C, int O)
{
    if (N <= 0 || C <= 0 || O <= 0) {
        return PS_ENOTSUP;
    }
    const s_gemm_t g = {S_WGRAD, CUBLASLT_EPILOGUE_BGRADB, C, O, N, 0, 1, C, O, C,
                        d_x, d_dy, d_dw, d_db, NULL};
    return s_run(ctx, &g);
}

/* dx^T[C,N] = w^T[C,O] dy^T[O,N], then the mask's ReLU gradient */
int ps_cuda_dense_dgrad(ps_kctx_t *ctx, const float *d_dy, const float *d_w,
                        const void *d_mask, float *d_dx, int N, int C, int O)
{
    if (N <= 0 || C <= 0 || O <= 0 || !d_mask) {
        return PS_ENOTSUP;
    }
    const s_gemm_t g = {S_DGRAD, CUBLASLT_EPILOGUE_DRELU, C, N, O, 0, 0, C, O, C,
                        d_w, d_dy, d_dx, NULL, (void *)d_mask};
    return s_run(ctx, &g);
}
