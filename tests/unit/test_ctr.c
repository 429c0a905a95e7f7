/*
 * tests/unit/test_ctr.c - the ctr model (worker/models/ctr.c and model.c's
 * rows plumbing) on the CPU backend: tensor table, the loss and the dense and
 * row gradients against a float64 reference (central differences), repeated
 * keys' gradients as the sums of their positions', determinism and the
 * gradient-ready hook, plain SGD on params and rows learning a separable
 * problem, predict against the reference's sigmoid, model files, and
 * argument errors.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "kernels/optim.h"
#include "tests/unit/modelcheck.h"
#include "tests/unit/testutil.h"
#include "worker/models/embed.h"
#include "worker/models/model.h"

enum { S_F = PS_MODEL_CTR_FIELDS, S_C = PS_MODEL_CTR_NUMERIC };

/* A batch of n samples: keys drawn so that rows repeat (within a field
 * across samples, and sample 0 uses one key in fields 0 and 1), rows,
 * numeric inputs and labels, and its lookups. */
typedef struct {
    int n, E;
    uint64_t *keys;     /* [n*F] */
    ps_embed_batch_t b; /* built from keys */
    float *num;         /* [n*C] */
    uint8_t *y;         /* [n] */
} s_batch_t;

static void s_batch_init(s_batch_t *s, int n, int E, int pool, uint64_t seed)
{
    ps_rng_t r;
    ps_rng_init(&r, seed, 1);
    s->n = n;
    s->E = E;
    s->keys = malloc((size_t)n * S_F * sizeof(uint64_t));
    s->num = malloc((size_t)n * S_C * sizeof(float));
    s->y = malloc((size_t)n);
    ck_assert(s->keys && s->num && s->y);
    for (int j = 0; j < n * S_F; j++) {
        s->keys[j] = (uint64_t)(j % S_F + 1) << 40 | ps_rng_below(&r, (uint64_t)pool);
    }
    s->keys[1] = s->keys[0];
    ps_test_fill(s->num, (size_t)n * S_C, -1.0f, 2.0f, seed + 1);
    for (int i = 0; i < n; i++) {
        s->y[i] = (uint8_t)(ps_rng_next(&r) & 1);
    }
    ck_assert_int_eq(ps_embed_batch_init(&s->b, n * S_F, NULL), 0);
    ck_assert_int_ge(ps_embed_batch_build(&s->b, s->keys, n, S_F), 1);
}

static void s_batch_fini(s_batch_t *s)
{
    ps_embed_batch_fini(&s->b);
    free(s->keys);
    free(s->num);
    free(s->y);
}

/* Rows for the batch's U keys into m's row buffer: a function of the key,
 * so two batches over the same keys get the same rows. */
static void s_fill_rows(ps_model_t *m, const ps_embed_batch_t *b)
{
    const int E = ps_model_embed_dim(m);
    float *rows = ps_model_rows(m);
    for (int u = 0; u < b->U; u++) {
        ps_test_fill(rows + (size_t)u * E, (size_t)E, -0.5f, 0.5f, b->keys[u]);
    }
}

/* The float64 reference: mean logistic loss of m's architecture over the
 * float params p and rows, with param `bump` (-1: none) shifted by delta and
 * row float `rbump` (-1: none) by rdelta; the logits into z[n] when z is not
 * NULL. Widths come from m's tensor table. */
static double s_ref(const ps_model_t *m, const float *p, long bump, double delta,
                    const float *rows, long rbump, double rdelta, const s_batch_t *s, double *z)
{
    const int L = (int)ps_model_num_tensors(m) / 2, E = ps_model_embed_dim(m);
    int w[16];
    size_t off[16];
    w[0] = ps_model_tensor(m, 0)->shape[1];
    for (int l = 0; l < L; l++) {
        w[l + 1] = ps_model_tensor(m, 2 * (size_t)l)->shape[0];
        off[2 * l] = ps_model_tensor(m, 2 * (size_t)l)->offset;
        off[2 * l + 1] = ps_model_tensor(m, 2 * (size_t)l + 1)->offset;
    }
    ck_assert_int_eq(w[0], S_F * E + S_C);
    for (int l = 0; l <= L; l++) {
        ck_assert_int_le(w[l], 1024);
    }
    ck_assert_int_eq(w[L], 1);
    double *buf = malloc(2 * 1024 * sizeof(double)), *a = buf, *b = buf + 1024, total = 0;
    ck_assert_ptr_nonnull(buf);
#define P(i) ((double)p[(i)] + ((long)(i) == bump ? delta : 0.0))
    for (int i = 0; i < s->n; i++) {
        for (int f = 0; f < S_F; f++) {
            const size_t row = s->b.idx[i * S_F + f];
            for (int e = 0; e < E; e++) {
                const size_t at = row * E + e;
                a[f * E + e] = rows[at] + ((long)at == rbump ? rdelta : 0.0);
            }
        }
        for (int c = 0; c < S_C; c++) {
            a[S_F * E + c] = s->num[i * S_C + c];
        }
        for (int l = 0; l < L; l++) {
            for (int o = 0; o < w[l + 1]; o++) {
                double v = P(off[2 * l + 1] + o);
                for (int k = 0; k < w[l]; k++) {
                    v += P(off[2 * l] + (size_t)o * w[l] + k) * a[k];
                }
                b[o] = l + 1 < L && v < 0 ? 0 : v;
            }
            double *t = a;
            a = b;
            b = t;
        }
        const double zi = a[0], yi = s->y[i];
        total += (zi > 0 ? zi : 0) - zi * yi + log1p(exp(-fabs(zi)));
        if (z) {
            z[i] = zi;
        }
    }
#undef P
    free(buf);
    return total / s->n;
}

static ps_model_t *s_new(const char *hidden, int E, int max_batch)
{
    ps_model_t *m = NULL;
    ck_assert_int_eq(ps_model_new_ctr(hidden, E, &ps_kernels_cpu, max_batch, &m), 0);
    ck_assert_ptr_nonnull(m);
    return m;
}

START_TEST(ctr_tensor_table_is_an_mlp_over_rows_and_numeric_inputs)
{
    ps_model_t *m = NULL;
    ck_assert_int_eq(ps_model_new("ctr", NULL, &ps_kernels_cpu, 4, &m), 0);
    ck_assert_int_eq(ps_model_embed_dim(m), 16);
    static const char *names[] = {"fc1.weight", "fc1.bias",   "fc2.weight",
                                  "fc2.bias",   "fc3.weight", "fc3.bias"};
    static const int dims[][2] = {{256, 26 * 16 + 13}, {128, 256}, {1, 128}};
    ck_assert_uint_eq(ps_model_num_tensors(m), 6);
    size_t P = 0;
    for (size_t i = 0; i < 6; i++) {
        const ps_tensor_info_t *t = ps_model_tensor(m, i);
        ck_assert_str_eq(t->name, names[i]);
        ck_assert_uint_eq(t->offset, P);
        ck_assert_int_eq(t->shape[0], dims[i / 2][0]);
        if (i % 2 == 0) {
            ck_assert_int_eq(t->shape[1], dims[i / 2][1]);
        }
        P += t->count;
    }
    ck_assert_uint_eq(ps_model_num_params(m), 256 * 429 + 256 + 128 * 256 + 128 + 128 + 1);
    ck_assert_ptr_nonnull(ps_model_rows(m));
    ck_assert_ptr_nonnull(ps_model_row_grads(m));
    ck_assert_ptr_nonnull(ps_model_batch_x(m));
    ps_model_destroy(&m);
    m = s_new("32,16,8", 8, 4);
    ck_assert_int_eq(ps_model_embed_dim(m), 8);
    ck_assert_uint_eq(ps_model_num_tensors(m), 8);
    ck_assert_int_eq(ps_model_tensor(m, 0)->shape[1], 26 * 8 + 13);
    ck_assert_int_eq(ps_model_tensor(m, 6)->shape[0], 1);
    ps_model_destroy(&m);
    ck_assert_int_eq(ps_model_new("mlp", NULL, &ps_kernels_cpu, 4, &m), 0);
    ck_assert_int_eq(ps_model_embed_dim(m), 0);
    ck_assert_ptr_null(ps_model_rows(m));
    ps_model_destroy(&m);
}
END_TEST

/* The loss equals the reference; the dense gradients and the row gradients
 * equal central differences of the reference (rows used once, by several
 * samples, and twice within sample 0). */
START_TEST(ctr_gradients_match_finite_differences)
{
    enum { N = 6, E = 4 };
    ps_model_t *m = s_new("16,8", E, 8);
    ps_model_init_params(m, 3);
    s_batch_t s;
    s_batch_init(&s, N, E, 3, 5);
    s_fill_rows(m, &s.b);
    float loss = 0;
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, s.y, N, &loss), 0);
    const float *p = ps_model_params(m), *g = ps_model_grads(m);
    const float *rows = ps_model_rows(m), *rg = ps_model_row_grads(m);
    const double want = s_ref(m, p, -1, 0, rows, -1, 0, &s, NULL);
    ck_assert_msg(ps_test_close(loss, want, 1e-6, 1e-5), "loss %g ref %g", loss, want);
    const double h = 1e-4; /* small: a ReLU near its kink must not flip */
    ps_rng_t r;
    ps_rng_init(&r, 11, 0);
    for (size_t t = 0; t < ps_model_num_tensors(m); t++) {
        const ps_tensor_info_t *ti = ps_model_tensor(m, t);
        size_t big = 0;
        for (size_t j = 1; j < ti->count; j++) {
            big = fabsf(g[ti->offset + j]) > fabsf(g[ti->offset + big]) ? j : big;
        }
        ck_assert_msg(g[ti->offset + big] != 0.0f, "%s has no gradient", ti->name);
        for (int k = 0; k < 6; k++) {
            const long at = (long)(ti->offset + (k ? ps_rng_below(&r, ti->count) : big));
            const double fd = (s_ref(m, p, at, h, rows, -1, 0, &s, NULL) -
                               s_ref(m, p, at, -h, rows, -1, 0, &s, NULL)) / (2 * h);
            ck_assert_msg(ps_test_close(g[at], fd, 2e-6, 2e-3), "%s[%ld]: grad %g fd %g",
                          ti->name, at - (long)ti->offset, g[at], fd);
        }
    }
    /* every row float, the shared ones included */
    ck_assert_int_lt(s.b.U, N * S_F);
    int shared = 0;
    for (int u = 0; u < s.b.U; u++) {
        shared += s.b.offsets[u + 1] - s.b.offsets[u] > 1;
        for (int e = 0; e < E; e++) {
            const long at = (long)u * E + e;
            const double fd = (s_ref(m, p, -1, 0, rows, at, h, &s, NULL) -
                               s_ref(m, p, -1, 0, rows, at, -h, &s, NULL)) / (2 * h);
            ck_assert_msg(ps_test_close(rg[at], fd, 2e-6, 2e-3), "row %d[%d]: grad %g fd %g",
                          u, e, rg[at], fd);
        }
    }
    ck_assert_int_gt(shared, 5);
    s_batch_fini(&s);
    ps_model_destroy(&m);
}
END_TEST

/* Rows shared by several positions get the sum, in ascending position
 * order, of the gradients those positions get as rows of their own with the
 * same values: bit for bit. */
START_TEST(ctr_repeated_keys_sum_their_positions_gradients)
{
    enum { N = 9, E = 5 };
    ps_model_t *m = s_new("12", E, N);
    ps_model_init_params(m, 4);
    s_batch_t s;
    s_batch_init(&s, N, E, 2, 8); /* two values per field: heavy repeats */
    s_fill_rows(m, &s.b);
    float l1 = 0, l2 = 0;
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, s.y, N, &l1), 0);
    const int U = s.b.U;
    float *shared = malloc((size_t)U * E * sizeof(float)), *vals = malloc((size_t)U * E * sizeof(float));
    memcpy(shared, ps_model_row_grads(m), (size_t)U * E * sizeof(float));
    memcpy(vals, ps_model_rows(m), (size_t)U * E * sizeof(float));
    /* each position its own key, its row the value of the shared one */
    ps_embed_batch_t own;
    ck_assert_int_eq(ps_embed_batch_init(&own, N * S_F, NULL), 0);
    uint64_t keys[N * S_F];
    for (int j = 0; j < N * S_F; j++) {
        keys[j] = (uint64_t)j;
    }
    ck_assert_int_eq(ps_embed_batch_build(&own, keys, N, S_F), N * S_F);
    for (int j = 0; j < N * S_F; j++) {
        memcpy(ps_model_rows(m) + (size_t)j * E, vals + (size_t)s.b.idx[j] * E,
               E * sizeof(float));
    }
    ck_assert_int_eq(ps_model_train_step_ctr(m, &own, s.num, s.y, N, &l2), 0);
    ck_assert_float_eq(l1, l2);
    const float *each = ps_model_row_grads(m);
    for (int u = 0; u < U; u++) {
        for (int e = 0; e < E; e++) {
            float sum = 0.0f;
            for (uint32_t k = s.b.offsets[u]; k < s.b.offsets[u + 1]; k++) {
                sum += each[(size_t)s.b.order[k] * E + e];
            }
            ck_assert_msg(sum == shared[u * E + e], "row %d[%d]: %.9g, sum %.9g", u, e,
                          shared[u * E + e], sum);
        }
    }
    ps_embed_batch_fini(&own);
    free(shared);
    free(vals);
    s_batch_fini(&s);
    ps_model_destroy(&m);
}
END_TEST

/* Two identical steps give the same bits; the hook reports the dense
 * gradients layer by layer from the last, each already final. */
START_TEST(ctr_step_is_deterministic_and_reports_gradients_by_layer)
{
    enum { N = 32 };
    ps_model_t *m = s_new(NULL, 16, N);
    ps_model_init_params(m, 2);
    s_batch_t s;
    s_batch_init(&s, N, 16, 50, 3);
    s_fill_rows(m, &s.b);
    const size_t P = ps_model_num_params(m), R = (size_t)s.b.U * 16;
    float l1 = 0, l2 = 0, *g1 = malloc(P * sizeof(float)), *r1 = malloc(R * sizeof(float));
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, s.y, N, &l1), 0);
    memcpy(g1, ps_model_grads(m), P * sizeof(float));
    memcpy(r1, ps_model_row_grads(m), R * sizeof(float));
    memset(ps_model_grads(m), 0, P * sizeof(float));
    memset(ps_model_row_grads(m), 0, R * sizeof(float));
    ps_modelcheck_ready_t r = {.m = m, .want = g1};
    ps_model_set_grad_ready(m, ps_modelcheck_on_ready, &r);
    /* from the model's own batch buffers too */
    memcpy(ps_model_batch_x(m), s.num, (size_t)N * S_C * sizeof(float));
    memcpy(ps_model_batch_y(m), s.y, N);
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, ps_model_batch_x(m), ps_model_batch_y(m),
                                             N, &l2),
                     0);
    ps_model_set_grad_ready(m, NULL, NULL);
    ck_assert_float_eq(l1, l2);
    ck_assert_mem_eq(g1, ps_model_grads(m), P * sizeof(float));
    ck_assert_mem_eq(r1, ps_model_row_grads(m), R * sizeof(float));
    ck_assert_int_eq(r.calls, 3);
    ck_assert_uint_eq(r.from[0], ps_model_tensor(m, 4)->offset);
    ck_assert_uint_eq(r.from[1], ps_model_tensor(m, 2)->offset);
    ck_assert_uint_eq(r.from[2], 0);
    ck_assert_int_eq(r.stale, 0);
    free(g1);
    free(r1);
    s_batch_fini(&s);
    ps_model_destroy(&m);
}
END_TEST

/* A separable problem: the label is whether field 0's value is odd. Plain
 * SGD in the test on the dense params and on a table of rows (what the
 * servers would do) cuts the loss to a quarter, and predict then separates
 * the two. */
START_TEST(ctr_sgd_on_params_and_rows_learns_a_separable_problem)
{
    enum { N = 64, E = 8, VALUES = 8, STEPS = 60 };
    ps_model_t *m = s_new("32,16", E, N);
    ps_model_init_params(m, 1);
    s_batch_t s;
    s_batch_init(&s, N, E, VALUES, 21);
    for (int i = 0; i < N; i++) {
        s.y[i] = (uint8_t)(s.keys[i * S_F] & 1);
    }
    /* the table: row of key (field f, value v) at (f*VALUES + v)*E */
    float *table = malloc((size_t)S_F * VALUES * E * sizeof(float));
    ps_test_fill(table, (size_t)S_F * VALUES * E, -0.1f, 0.1f, 9);
    const size_t P = ps_model_num_params(m);
    const float lr = 1.0f;
    float first = 0, loss = 0;
    for (int step = 0; step < STEPS; step++) {
        for (int u = 0; u < s.b.U; u++) {
            const uint64_t k = s.b.keys[u];
            const size_t at = ((size_t)((k >> 40) - 1) * VALUES + (k & 0xffffffffu)) * E;
            memcpy(ps_model_rows(m) + (size_t)u * E, table + at, E * sizeof(float));
        }
        ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, s.y, N, &loss), 0);
        ck_assert(isfinite(loss));
        first = step == 0 ? loss : first;
        float *p = ps_model_params(m);
        const float *g = ps_model_grads(m);
        for (size_t i = 0; i < P; i++) {
            p[i] -= lr * g[i];
        }
        for (int u = 0; u < s.b.U; u++) {
            const uint64_t k = s.b.keys[u];
            const size_t at = ((size_t)((k >> 40) - 1) * VALUES + (k & 0xffffffffu)) * E;
            for (int e = 0; e < E; e++) {
                table[at + e] -= lr * ps_model_row_grads(m)[(size_t)u * E + e];
            }
        }
    }
    ck_assert_msg(loss < 0.25f * first, "loss %g -> %g", first, loss);
    float prob[N];
    ck_assert_int_eq(ps_model_predict_ctr(m, &s.b, s.num, N, prob), 0);
    int right = 0;
    for (int i = 0; i < N; i++) {
        right += (prob[i] > 0.5f) == (s.y[i] == 1);
    }
    ck_assert_int_ge(right, N - 2);
    free(table);
    s_batch_fini(&s);
    ps_model_destroy(&m);
}
END_TEST

/* predict's probabilities are the sigmoid of the reference's logits, and
 * their mean logistic loss is train_step's. */
START_TEST(ctr_predict_matches_the_forward)
{
    enum { N = 20, E = 6 };
    ps_model_t *m = s_new("24,12", E, N);
    ps_model_init_params(m, 6);
    s_batch_t s;
    s_batch_init(&s, N, E, 4, 13);
    s_fill_rows(m, &s.b);
    float prob[N], loss = 0;
    double z[N];
    ck_assert_int_eq(ps_model_predict_ctr(m, &s.b, s.num, N, prob), 0);
    s_ref(m, ps_model_params(m), -1, 0, ps_model_rows(m), -1, 0, &s, z);
    double total = 0;
    for (int i = 0; i < N; i++) {
        const double want = 1.0 / (1.0 + exp(-z[i]));
        ck_assert_msg(ps_test_close(prob[i], want, 1e-6, 1e-5), "prob[%d] %g want %g", i,
                      prob[i], want);
        total -= s.y[i] ? log(prob[i]) : log1p(-prob[i]);
    }
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, s.y, N, &loss), 0);
    ck_assert(ps_test_close(loss, total / N, 1e-5, 1e-4));
    /* fewer samples than the model's batch, and rows refilled in between */
    ps_embed_batch_t b5;
    ck_assert_int_eq(ps_embed_batch_init(&b5, 5 * S_F, NULL), 0);
    ck_assert_int_ge(ps_embed_batch_build(&b5, s.keys, 5, S_F), 1);
    s_fill_rows(m, &b5);
    float p5[5];
    ck_assert_int_eq(ps_model_predict_ctr(m, &b5, s.num, 5, p5), 0);
    for (int i = 0; i < 5; i++) {
        ck_assert(ps_test_close(p5[i], prob[i], 1e-6, 1e-5));
    }
    ps_embed_batch_fini(&b5);
    s_batch_fini(&s);
    ps_model_destroy(&m);
}
END_TEST

START_TEST(ctr_file_round_trips_and_names_its_widths)
{
    char dir[] = "/tmp/ps_ctr_XXXXXX", path[64], why[256] = "", hidden[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ps_model_t *a = s_new("64,32", 8, 4), *b = NULL;
    ps_model_init_params(a, 5);
    ck_assert_int_eq(ps_model_save(a, ps_model_params(a), path, NULL, 0, why, sizeof why), 0);
    ps_safetensors_t *st = NULL;
    ck_assert_int_eq(ps_safetensors_read(path, &st, why, sizeof why), 0);
    ck_assert_str_eq(ps_model_name_of(st, hidden, sizeof hidden), "ctr");
    ck_assert_str_eq(hidden, "64,32");
    ck_assert_str_eq(ps_safetensors_meta(st, "model"), "ctr");
    ck_assert_int_eq(ps_model_embed_dim_of(st), 8);
    ck_assert_int_eq(ps_model_new_ctr(hidden, ps_model_embed_dim_of(st), &ps_kernels_cpu, 4, &b),
                     0);
    ck_assert_int_eq(ps_model_load(b, st, why, sizeof why), 0);
    ck_assert_mem_eq(ps_model_params(a), ps_model_params(b),
                     ps_model_num_params(a) * sizeof(float));
    ps_model_destroy(&b);
    ck_assert_int_eq(ps_model_new_ctr(hidden, 16, &ps_kernels_cpu, 4, &b), 0);
    ck_assert_int_eq(ps_model_load(b, st, why, sizeof why), PS_EINVAL); /* another E */
    ps_model_destroy(&b);
    ck_assert_int_eq(ps_model_new("mlp", "64,32", &ps_kernels_cpu, 4, &b), 0);
    ck_assert_int_eq(ps_model_load(b, st, why, sizeof why), PS_EINVAL);
    ps_model_destroy(&b);
    ps_safetensors_destroy(&st);
    unlink(path);
    /* an mlp's file is no ctr's */
    ck_assert_int_eq(ps_model_new("mlp", NULL, &ps_kernels_cpu, 4, &b), 0);
    ck_assert_int_eq(ps_model_save(b, ps_model_params(b), path, NULL, 0, why, sizeof why), 0);
    ck_assert_int_eq(ps_safetensors_read(path, &st, why, sizeof why), 0);
    ck_assert_str_eq(ps_model_name_of(st, hidden, sizeof hidden), "mlp");
    ck_assert_int_eq(ps_model_embed_dim_of(st), 0);
    ps_safetensors_destroy(&st);
    ps_model_destroy(&b);
    ps_model_destroy(&a);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(ctr_rejects_bad_arguments)
{
    enum { N = 4 };
    ps_model_t *m = (ps_model_t *)1, *img = NULL;
    ck_assert_int_eq(ps_model_new_ctr(NULL, 0, &ps_kernels_cpu, N, &m), PS_EINVAL);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(ps_model_new_ctr(NULL, PS_MODEL_MAX_EMBED_DIM + 1, &ps_kernels_cpu, N, &m),
                     PS_EINVAL);
    ck_assert_int_eq(ps_model_new_ctr("0", 16, &ps_kernels_cpu, N, &m), PS_EINVAL);
    m = s_new("8", 4, N);
    s_batch_t s, big;
    s_batch_init(&s, N, 4, 3, 1);
    s_batch_init(&big, N + 1, 4, 3, 1);
    s_fill_rows(m, &s.b);
    float loss, prob[N + 1];
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, s.y, N, &loss), 0);
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, s.y, N - 1, &loss), PS_EINVAL);
    ck_assert_int_eq(ps_model_train_step_ctr(m, &big.b, big.num, big.y, N + 1, &loss),
                     PS_EINVAL);
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, NULL, N, &loss), PS_EINVAL);
    ck_assert_int_eq(ps_model_predict_ctr(m, &big.b, big.num, N + 1, prob), PS_EINVAL);
    ck_assert_int_eq(ps_model_predict_ctr(m, &s.b, s.num, 0, prob), PS_EINVAL);
    s.y[2] = 2;
    ck_assert_int_eq(ps_model_train_step_ctr(m, &s.b, s.num, s.y, N, &loss), PS_EINVAL);
    /* the image entry points refuse the ctr, and the ctr's the images */
    float x[N * 784] = {0};
    uint8_t y[N] = {0};
    int c;
    ck_assert_int_eq(ps_model_train_step(m, x, y, N, &loss), PS_EINVAL);
    ck_assert_int_eq(ps_model_evaluate(m, x, y, N, &c, &loss), PS_EINVAL);
    ck_assert_int_eq(ps_model_new("mlp", NULL, &ps_kernels_cpu, N, &img), 0);
    s.y[2] = 1;
    ck_assert_int_eq(ps_model_train_step_ctr(img, &s.b, s.num, s.y, N, &loss), PS_EINVAL);
    ck_assert_int_eq(ps_model_predict_ctr(img, &s.b, s.num, N, prob), PS_EINVAL);
    ps_model_destroy(&img);
    s_batch_fini(&s);
    s_batch_fini(&big);
    ps_model_destroy(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctr");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, ctr_tensor_table_is_an_mlp_over_rows_and_numeric_inputs);
    tcase_add_test(tc, ctr_gradients_match_finite_differences);
    tcase_add_test(tc, ctr_repeated_keys_sum_their_positions_gradients);
    tcase_add_test(tc, ctr_step_is_deterministic_and_reports_gradients_by_layer);
    tcase_add_test(tc, ctr_sgd_on_params_and_rows_learns_a_separable_problem);
    tcase_add_test(tc, ctr_predict_matches_the_forward);
    tcase_add_test(tc, ctr_file_round_trips_and_names_its_widths);
    tcase_add_test(tc, ctr_rejects_bad_arguments);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
