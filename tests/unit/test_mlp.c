/*
 * tests/unit/test_mlp.c - the model plumbing and the MLP on the CPU backend:
 * tensor table and layout, initialisation, the loss and gradients against a
 * float64 reference MLP (gradients by central differences of that reference),
 * SGD steps reducing the loss, chunked evaluation, and argument errors.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "tests/unit/modelcheck.h"
#include "tests/unit/testutil.h"
#include "worker/models/model.h"

enum { S_IN = PS_MODELCHECK_PIXELS, S_H1 = 256, S_H2 = 128, S_OUT = 10 };

/* Mean softmax cross-entropy of the MLP in float64 over float parameters p
 * (flat, PyTorch order), with parameter `bump` (-1: none) shifted by delta. */
static double s_ref_loss(const float *p, long bump, double delta, const float *x,
                         const uint8_t *y, int n)
{
    const size_t o_w1 = 0, o_b1 = o_w1 + S_H1 * S_IN, o_w2 = o_b1 + S_H1;
    const size_t o_b2 = o_w2 + S_H2 * S_H1, o_w3 = o_b2 + S_H2, o_b3 = o_w3 + S_OUT * S_H2;
#define P(i) ((double)p[(i)] + ((long)(i) == bump ? delta : 0.0))
    double total = 0.0;
    double h1[S_H1], h2[S_H2], z[S_OUT];
    for (int s = 0; s < n; s++) {
        const float *xs = x + (size_t)s * S_IN;
        for (int o = 0; o < S_H1; o++) {
            double a = P(o_b1 + o);
            for (int i = 0; i < S_IN; i++) {
                a += P(o_w1 + (size_t)o * S_IN + i) * xs[i];
            }
            h1[o] = a > 0 ? a : 0;
        }
        for (int o = 0; o < S_H2; o++) {
            double a = P(o_b2 + o);
            for (int i = 0; i < S_H1; i++) {
                a += P(o_w2 + (size_t)o * S_H1 + i) * h1[i];
            }
            h2[o] = a > 0 ? a : 0;
        }
        double m = -1e300;
        for (int o = 0; o < S_OUT; o++) {
            double a = P(o_b3 + o);
            for (int i = 0; i < S_H2; i++) {
                a += P(o_w3 + (size_t)o * S_H2 + i) * h2[i];
            }
            z[o] = a;
            m = a > m ? a : m;
        }
        double se = 0;
        for (int o = 0; o < S_OUT; o++) {
            se += exp(z[o] - m);
        }
        total += m + log(se) - z[y[s]];
    }
#undef P
    return total / n;
}

static ps_model_t *s_new(int max_batch)
{
    ps_model_t *m = NULL;
    ck_assert_int_eq(ps_model_new("mlp", NULL, &ps_kernels_cpu, max_batch, &m), 0);
    ck_assert_ptr_nonnull(m);
    return m;
}

START_TEST(mlp_tensor_table_matches_pytorch_layout)
{
    ps_model_t *m = s_new(4);
    static const char *names[] = {"fc1.weight", "fc1.bias",   "fc2.weight",
                                  "fc2.bias",   "fc3.weight", "fc3.bias"};
    static const size_t counts[] = {256 * 784, 256, 128 * 256, 128, 10 * 128, 10};
    ck_assert_uint_eq(ps_model_num_params(m), 235146);
    ck_assert_uint_eq(ps_model_num_tensors(m), 6);
    size_t off = 0;
    for (size_t i = 0; i < 6; i++) {
        const ps_tensor_info_t *t = ps_model_tensor(m, i);
        ck_assert_str_eq(t->name, names[i]);
        ck_assert_uint_eq(t->count, counts[i]);
        ck_assert_uint_eq(t->offset, off);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            numel *= (size_t)t->shape[d];
        }
        ck_assert_uint_eq(numel, t->count); /* the PyTorch shape */
        ck_assert_int_eq(t->ndim, i % 2 ? 1 : 2);
        off += t->count;
    }
    ck_assert_ptr_null(ps_model_tensor(m, 6));
    ps_model_destroy(&m);
    ck_assert_ptr_null(m);
    ps_model_destroy(&m); /* NULL-safe */
}
END_TEST

START_TEST(mlp_file_round_trips_and_refuses_another_model)
{
    char dir[] = "/tmp/ps_mlp_XXXXXX", path[64], why[256] = "", hidden[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ps_model_t *a = s_new(4), *b = s_new(4), *c = NULL;
    ps_model_init_params(a, 5);
    const char *meta[] = {"steps", "7"};
    ck_assert_int_eq(ps_model_save(a, ps_model_params(a), path, meta, 1, why, sizeof why), 0);
    ps_safetensors_t *st = NULL;
    ck_assert_int_eq(ps_safetensors_read(path, &st, why, sizeof why), 0);
    ck_assert_str_eq(ps_model_name_of(st, hidden, sizeof hidden), "mlp");
    ck_assert_str_eq(hidden, ""); /* the default widths */
    ck_assert_str_eq(ps_safetensors_meta(st, "model"), "mlp");
    ck_assert_str_eq(ps_safetensors_meta(st, "steps"), "7");
    ck_assert_int_eq(ps_safetensors_find(st, "fc2.weight")->shape[1], 256);
    ck_assert_int_eq(ps_model_load(b, st, why, sizeof why), 0);
    ck_assert_int_eq(memcmp(ps_model_params(a), ps_model_params(b),
                            ps_model_num_params(a) * sizeof(float)), 0);
    ck_assert_int_eq(ps_model_new("cnn", NULL, &ps_kernels_cpu, 4, &c), 0);
    ck_assert_int_eq(ps_model_load(c, st, why, sizeof why), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "conv1.weight"));
    ps_safetensors_destroy(&st);
    ps_model_destroy(&a);
    ps_model_destroy(&b);
    ps_model_destroy(&c);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(mlp_init_is_deterministic_and_within_pytorch_bounds)
{
    ps_model_t *a = s_new(4), *b = s_new(4);
    ps_model_init_params(a, 7);
    ps_model_init_params(b, 7);
    const size_t P = ps_model_num_params(a);
    ck_assert_mem_eq(ps_model_params(a), ps_model_params(b), P * sizeof(float));
    ps_model_init_params(b, 8);
    ck_assert(memcmp(ps_model_params(a), ps_model_params(b), P * sizeof(float)) != 0);
    static const int fan_in[] = {784, 784, 256, 256, 128, 128};
    for (size_t i = 0; i < 6; i++) {
        const ps_tensor_info_t *t = ps_model_tensor(a, i);
        const float bound = 1.0f / sqrtf((float)fan_in[i]);
        const float *p = ps_model_params(a) + t->offset;
        double s = 0, s2 = 0;
        for (size_t j = 0; j < t->count; j++) {
            ck_assert(p[j] >= -bound && p[j] <= bound);
            s += p[j];
            s2 += (double)p[j] * p[j];
        }
        if (t->count > 1000) {
            /* U(-b,b): mean 0, variance b^2/3 */
            const double var = s2 / t->count, want = (double)bound * bound / 3.0;
            ck_assert(fabs(s / t->count) < 0.05 * bound);
            ck_assert(ps_test_close(var, want, 0, 0.05));
        }
    }
    ps_model_destroy(&a);
    ps_model_destroy(&b);
}
END_TEST

/* The model's loss equals the float64 reference, and its gradient (of the
 * mean loss) equals central differences of that reference on a few
 * parameters of every tensor, including the largest-gradient one. */
START_TEST(mlp_gradients_match_finite_differences)
{
    ps_model_t *m = s_new(8);
    ps_model_init_params(m, 3);
    const ps_modelcheck_grad_t how = {.n = 6,
                                      .batch_seed = 5,
                                      .h = 1e-4,
                                      .per_tensor = 5,
                                      .seed = 11,
                                      .atol = 2e-6,
                                      .rtol = 2e-3};
    ps_modelcheck_gradients(m, s_ref_loss, &how);
    ps_model_destroy(&m);
}
END_TEST

START_TEST(mlp_sgd_steps_reduce_the_loss)
{
    enum { N = 32 };
    ps_model_t *m = s_new(N);
    ps_model_init_params(m, 1);
    float *x = malloc(N * S_IN * sizeof(float));
    uint8_t y[N];
    ps_modelcheck_batch(x, y, N, 9);
    ps_modelcheck_sgd_halves_loss(m, x, y, N, 15);
    int correct = 0;
    float eval_loss = 0;
    ck_assert_int_eq(ps_model_evaluate(m, x, y, N, &correct, &eval_loss), 0);
    ck_assert_int_gt(correct, N / 2);
    free(x);
    ps_model_destroy(&m);
}
END_TEST

/* evaluate() over n samples in chunks of max_batch equals the train_step loss
 * over the same samples with one big batch, and counts argmax hits. */
START_TEST(mlp_evaluate_in_chunks_matches_one_batch)
{
    enum { N = 45 };
    ps_model_t *small = s_new(8), *big = s_new(N);
    ps_model_init_params(small, 4);
    ps_model_init_params(big, 4);
    float *x = malloc(N * S_IN * sizeof(float));
    uint8_t y[N];
    ps_modelcheck_batch(x, y, N, 6);
    float l_train = 0, l_eval = 0, l_eval_big = 0;
    int c_small = -1, c_big = -2;
    ck_assert_int_eq(ps_model_train_step(big, x, y, N, &l_train), 0);
    ck_assert_int_eq(ps_model_evaluate(small, x, y, N, &c_small, &l_eval), 0);
    ck_assert_int_eq(ps_model_evaluate(big, x, y, N, &c_big, &l_eval_big), 0);
    ck_assert(ps_test_close(l_eval, l_train, 1e-5, 1e-5));
    ck_assert(ps_test_close(l_eval_big, l_train, 1e-6, 1e-6));
    ck_assert_int_eq(c_small, c_big);
    ck_assert_int_ge(c_small, 0);
    ck_assert_int_le(c_small, N);
    int c0 = -1;
    float l0 = -1;
    ck_assert_int_eq(ps_model_evaluate(small, x, y, 0, &c0, &l0), 0);
    ck_assert_int_eq(c0, 0);
    free(x);
    ps_model_destroy(&small);
    ps_model_destroy(&big);
}
END_TEST

/* A model after one training step on a fixed batch, with that step's loss and
 * a copy of its gradients, for comparing a second identical step with. */
enum { S_STEP_N = 16 };
typedef struct {
    ps_model_t *m;
    float *x; /* [S_STEP_N, S_IN] */
    uint8_t y[S_STEP_N];
    size_t P;  /* parameters */
    float *g1; /* [P] the first step's gradients */
    float l1;  /* the first step's loss */
} s_stepped_t;

static void s_stepped_init(s_stepped_t *s)
{
    s->m = s_new(S_STEP_N);
    ps_model_init_params(s->m, 2);
    s->x = malloc(S_STEP_N * S_IN * sizeof(float));
    ps_modelcheck_batch(s->x, s->y, S_STEP_N, 3);
    s->P = ps_model_num_params(s->m);
    s->g1 = malloc(s->P * sizeof(float));
    ck_assert_int_eq(ps_model_train_step(s->m, s->x, s->y, S_STEP_N, &s->l1), 0);
    memcpy(s->g1, ps_model_grads(s->m), s->P * sizeof(float));
}

static void s_stepped_fini(s_stepped_t *s)
{
    free(s->g1);
    free(s->x);
    ps_model_destroy(&s->m);
}

START_TEST(mlp_train_step_is_deterministic)
{
    s_stepped_t s;
    s_stepped_init(&s);
    float l2;
    ck_assert_int_eq(ps_model_train_step(s.m, s.x, s.y, S_STEP_N, &l2), 0);
    ck_assert_float_eq(s.l1, l2);
    ck_assert_mem_eq(s.g1, ps_model_grads(s.m), s.P * sizeof(float));
    s_stepped_fini(&s);
}
END_TEST

START_TEST(model_lends_aligned_batch_buffers_that_train_like_any_memory)
{
    s_stepped_t s;
    s_stepped_init(&s);
    float *bx = ps_model_batch_x(s.m), l2;
    uint8_t *by = ps_model_batch_y(s.m);
    ck_assert_ptr_nonnull(bx);
    ck_assert_ptr_nonnull(by);
    ck_assert_uint_eq((uintptr_t)bx % 64, 0);
    memcpy(bx, s.x, S_STEP_N * S_IN * sizeof(float));
    memcpy(by, s.y, S_STEP_N);
    ck_assert_int_eq(ps_model_train_step(s.m, bx, by, S_STEP_N, &l2), 0);
    ck_assert_float_eq(s.l1, l2);
    ck_assert_mem_eq(s.g1, ps_model_grads(s.m), s.P * sizeof(float));
    s_stepped_fini(&s);
}
END_TEST

START_TEST(mlp_reports_gradients_final_layer_by_layer_from_the_last)
{
    s_stepped_t s;
    s_stepped_init(&s);
    ps_model_t *m = s.m;
    float l2;
    memset(ps_model_grads(m), 0, s.P * sizeof(float));
    ps_modelcheck_ready_t r = {.m = m, .want = s.g1};
    ps_model_set_grad_ready(m, ps_modelcheck_on_ready, &r);
    ck_assert_int_eq(ps_model_train_step(m, s.x, s.y, S_STEP_N, &l2), 0);
    ck_assert_int_eq(r.calls, 3);
    ck_assert_uint_eq(r.from[0], ps_model_tensor(m, 4)->offset); /* fc3 */
    ck_assert_uint_eq(r.from[1], ps_model_tensor(m, 2)->offset); /* fc2 */
    ck_assert_uint_eq(r.from[2], 0);
    ck_assert_int_eq(r.stale, 0);
    ck_assert_float_eq(s.l1, l2);
    ck_assert_mem_eq(s.g1, ps_model_grads(m), s.P * sizeof(float));
    ps_model_set_grad_ready(m, NULL, NULL);
    r.calls = 0;
    ck_assert_int_eq(ps_model_train_step(m, s.x, s.y, S_STEP_N, &l2), 0);
    ck_assert_int_eq(r.calls, 0);
    s_stepped_fini(&s);
}
END_TEST

/* --hidden: the widths make the tensors fc1..fc(L+1), chained 784 -> ... ->
 * 10; the model trains, saves under those names, and a file says its widths. */
START_TEST(mlp_hidden_widths_shape_the_layers)
{
    enum { N = 32 };
    static const int dims[][2] = {{64, 784}, {32, 64}, {16, 32}, {10, 16}};
    ps_model_t *m = NULL, *b = NULL;
    ck_assert_int_eq(ps_model_new("mlp", "64,32,16", &ps_kernels_cpu, N, &m), 0);
    ck_assert_uint_eq(ps_model_num_tensors(m), 8);
    size_t P = 0;
    for (size_t l = 0; l < 4; l++) {
        char name[16];
        const ps_tensor_info_t *w = ps_model_tensor(m, 2 * l), *bias = ps_model_tensor(m, 2 * l + 1);
        snprintf(name, sizeof name, "fc%zu.weight", l + 1);
        ck_assert_str_eq(w->name, name);
        ck_assert_int_eq(w->shape[0], dims[l][0]);
        ck_assert_int_eq(w->shape[1], dims[l][1]);
        ck_assert_int_eq(bias->shape[0], dims[l][0]);
        P += (size_t)dims[l][0] * dims[l][1] + dims[l][0];
    }
    ck_assert_uint_eq(ps_model_num_params(m), P);
    ps_model_init_params(m, 3);
    float *x = malloc(N * S_IN * sizeof(float));
    uint8_t y[N];
    ps_modelcheck_batch(x, y, N, 9);
    ps_modelcheck_sgd_halves_loss(m, x, y, N, 30);

    char dir[] = "/tmp/ps_mlph_XXXXXX", path[64], why[256] = "", hidden[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ck_assert_int_eq(ps_model_save(m, ps_model_params(m), path, NULL, 0, why, sizeof why), 0);
    ps_safetensors_t *st = NULL;
    ck_assert_int_eq(ps_safetensors_read(path, &st, why, sizeof why), 0);
    ck_assert_str_eq(ps_model_name_of(st, hidden, sizeof hidden), "mlp");
    ck_assert_str_eq(hidden, "64,32,16");
    ck_assert_int_eq(ps_model_new("mlp", hidden, &ps_kernels_cpu, N, &b), 0);
    ck_assert_int_eq(ps_model_load(b, st, why, sizeof why), 0);
    ck_assert_mem_eq(ps_model_params(b), ps_model_params(m), P * sizeof(float));
    ps_model_destroy(&b);
    ck_assert_int_eq(ps_model_new("mlp", "64,32", &ps_kernels_cpu, N, &b), 0);
    ck_assert_int_eq(ps_model_load(b, st, why, sizeof why), PS_EINVAL); /* fewer layers */
    ps_model_destroy(&b);
    ck_assert_int_eq(ps_model_new("mlp", "256,128", &ps_kernels_cpu, N, &b), 0);
    ck_assert_uint_eq(ps_model_num_params(b), 235146); /* the default, spelt out */
    ps_model_destroy(&b);
    ps_safetensors_destroy(&st);
    unlink(path);
    rmdir(dir);
    free(x);
    ps_model_destroy(&m);
}
END_TEST

START_TEST(model_rejects_bad_hidden_widths)
{
    static const char *bad[] = {"0", "64,,32", "a", "64,", ",64", "65537", "-4",
                                "1,2,3,4,5,6,7,8,9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps_model_t *m = (ps_model_t *)1;
        ck_assert_msg(ps_model_new("mlp", bad[i], &ps_kernels_cpu, 4, &m) == PS_EINVAL,
                      "--hidden %s was taken", bad[i]);
        ck_assert_ptr_null(m);
    }
    ps_model_t *m = NULL;
    ck_assert_int_eq(ps_model_new("cnn", "64", &ps_kernels_cpu, 4, &m), PS_EINVAL);
    ck_assert_int_eq(ps_model_new("mlp", "1,2,3,4,5,6,7,8", &ps_kernels_cpu, 4, &m), 0);
    ck_assert_uint_eq(ps_model_num_tensors(m), 18);
    ps_model_destroy(&m);
}
END_TEST

START_TEST(model_rejects_bad_arguments)
{
    ps_model_t *m = (ps_model_t *)1;
    ck_assert_int_eq(ps_model_new("resnet", NULL, &ps_kernels_cpu, 4, &m), PS_EINVAL);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(ps_model_new("mlp", NULL, &ps_kernels_cpu, 0, &m), PS_EINVAL);
    ck_assert_int_eq(ps_model_new(NULL, NULL, &ps_kernels_cpu, 4, &m), PS_EINVAL);
    m = s_new(4);
    float x[5 * S_IN] = {0};
    uint8_t y[5] = {0, 1, 2, 3, 4};
    float loss;
    ck_assert_int_eq(ps_model_train_step(m, x, y, 5, &loss), PS_EINVAL);
    ck_assert_int_eq(ps_model_train_step(m, x, y, 0, &loss), PS_EINVAL);
    y[1] = 10;
    ck_assert_int_eq(ps_model_train_step(m, x, y, 2, &loss), PS_EINVAL);
    int c;
    ck_assert_int_eq(ps_model_evaluate(m, x, y, 5, &c, &loss), PS_EINVAL);
    ps_model_destroy(&m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mlp");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mlp_tensor_table_matches_pytorch_layout);
    tcase_add_test(tc, mlp_file_round_trips_and_refuses_another_model);
    tcase_add_test(tc, mlp_init_is_deterministic_and_within_pytorch_bounds);
    tcase_add_test(tc, mlp_gradients_match_finite_differences);
    tcase_add_test(tc, mlp_sgd_steps_reduce_the_loss);
    tcase_add_test(tc, mlp_evaluate_in_chunks_matches_one_batch);
    tcase_add_test(tc, mlp_train_step_is_deterministic);
    tcase_add_test(tc, model_lends_aligned_batch_buffers_that_train_like_any_memory);
    tcase_add_test(tc, mlp_reports_gradients_final_layer_by_layer_from_the_last);
    tcase_add_test(tc, model_rejects_bad_arguments);
    tcase_add_test(tc, mlp_hidden_widths_shape_the_layers);
    tcase_add_test(tc, model_rejects_bad_hidden_widths);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
