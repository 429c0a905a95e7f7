/*
 * tests/unit/test_cnn.c - the CNN on the CPU backend: tensor table (PyTorch
 * names, shapes, order), loss and gradients against a float64 reference CNN
 * (gradients by central differences of that reference), SGD steps reducing the
 * loss, and chunked evaluation.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tests/unit/modelcheck.h"
#include "tests/unit/testutil.h"
#include "worker/models/model.h"

/* offsets of the tensors in the flat vector (PyTorch order) */
enum {
    O_W1 = 0,
    O_B1 = O_W1 + 32 * 25,
    O_W2 = O_B1 + 32,
    O_B2 = O_W2 + 64 * 32 * 25,
    O_F1 = O_B2 + 64,
    O_FB1 = O_F1 + 128 * 3136,
    O_F2 = O_FB1 + 128,
    O_FB2 = O_F2 + 10 * 128,
    S_P = O_FB2 + 10,
};

/* relu(conv(in[C,H,H], w[O,C,5,5], pad 2) + b), then 2x2 max pool -> out[O,H/2,H/2]. */
static void s_ref_conv_pool(const double *in, int C, int H, const double *w,
                            const double *b, int O, double *out)
{
    double *y = malloc(sizeof(double) * O * H * H);
    for (int o = 0; o < O; o++) {
        for (int i = 0; i < H; i++) {
            for (int j = 0; j < H; j++) {
                double acc = b[o];
                for (int c = 0; c < C; c++) {
                    for (int kh = 0; kh < 5; kh++) {
                        const int ih = i + kh - 2;
                        if (ih < 0 || ih >= H) {
                            continue;
                        }
                        for (int kw = 0; kw < 5; kw++) {
                            const int iw = j + kw - 2;
                            if (iw < 0 || iw >= H) {
                                continue;
                            }
                            acc += w[((o * C + c) * 5 + kh) * 5 + kw] *
                                   in[(c * H + ih) * H + iw];
                        }
                    }
                }
                y[(o * H + i) * H + j] = acc > 0 ? acc : 0;
            }
        }
    }
    const int h = H / 2;
    for (int o = 0; o < O; o++) {
        for (int i = 0; i < h; i++) {
            for (int j = 0; j < h; j++) {
                const double *r = y + (o * H + 2 * i) * H + 2 * j;
                out[(o * h + i) * h + j] = fmax(fmax(r[0], r[1]), fmax(r[H], r[H + 1]));
            }
        }
    }
    free(y);
}

/* Mean cross-entropy of the CNN in float64 over params p with p[bump] += delta. */
static double s_ref_loss(const float *p, long bump, double delta, const float *x,
                         const uint8_t *y, int n)
{
    double *q = malloc(sizeof(double) * S_P);
    for (long i = 0; i < S_P; i++) {
        q[i] = p[i] + (i == bump ? delta : 0.0);
    }
    double in[784], p1[32 * 196], p2[3136], h[128];
    double total = 0;
    for (int s = 0; s < n; s++) {
        for (int i = 0; i < 784; i++) {
            in[i] = x[(size_t)s * 784 + i];
        }
        s_ref_conv_pool(in, 1, 28, q + O_W1, q + O_B1, 32, p1);
        s_ref_conv_pool(p1, 32, 14, q + O_W2, q + O_B2, 64, p2);
        for (int o = 0; o < 128; o++) {
            double a = q[O_FB1 + o];
            for (int i = 0; i < 3136; i++) {
                a += q[O_F1 + (size_t)o * 3136 + i] * p2[i];
            }
            h[o] = a > 0 ? a : 0;
        }
        double z[10], m = -1e300, se = 0;
        for (int o = 0; o < 10; o++) {
            double a = q[O_FB2 + o];
            for (int i = 0; i < 128; i++) {
                a += q[O_F2 + o * 128 + i] * h[i];
            }
            z[o] = a;
            m = a > m ? a : m;
        }
        for (int o = 0; o < 10; o++) {
            se += exp(z[o] - m);
        }
        total += m + log(se) - z[y[s]];
    }
    free(q);
    return total / n;
}

static ps_model_t *s_new(int max_batch)
{
    ps_model_t *m = NULL;
    ck_assert_int_eq(ps_model_new("cnn", NULL, &ps_kernels_cpu, max_batch, &m), 0);
    return m;
}

START_TEST(cnn_tensor_table_matches_pytorch_layout)
{
    ps_model_t *m = s_new(2);
    static const char *names[] = {"conv1.weight", "conv1.bias", "conv2.weight",
                                  "conv2.bias",   "fc1.weight", "fc1.bias",
                                  "fc2.weight",   "fc2.bias"};
    static const size_t counts[] = {32 * 25,    32,  64 * 32 * 25, 64,
                                    128 * 3136, 128, 10 * 128,     10};
    ck_assert_uint_eq(ps_model_num_params(m), 454922);
    ck_assert_uint_eq(ps_model_num_params(m), S_P);
    ck_assert_uint_eq(ps_model_num_tensors(m), 8);
    size_t off = 0;
    for (size_t i = 0; i < 8; i++) {
        const ps_tensor_info_t *t = ps_model_tensor(m, i);
        ck_assert_str_eq(t->name, names[i]);
        ck_assert_uint_eq(t->count, counts[i]);
        ck_assert_uint_eq(t->offset, off);
        off += t->count;
    }
    /* PyTorch bounds: 1/sqrt(fan_in), fan_in = C*K*K or in_features */
    ps_model_init_params(m, 5);
    static const int fan_in[] = {25, 25, 800, 800, 3136, 3136, 128, 128};
    for (size_t i = 0; i < 8; i++) {
        const ps_tensor_info_t *t = ps_model_tensor(m, i);
        const float bound = 1.0f / sqrtf((float)fan_in[i]);
        for (size_t j = 0; j < t->count; j++) {
            ck_assert(fabsf(ps_model_params(m)[t->offset + j]) <= bound);
        }
    }
    ps_model_destroy(&m);
}
END_TEST

START_TEST(cnn_gradients_match_finite_differences)
{
    ps_model_t *m = s_new(4);
    ps_model_init_params(m, 3);
    /* a tiny step in float64 keeps ReLU and max-pool decisions unchanged */
    const ps_modelcheck_grad_t how = {.n = 2,
                                      .batch_seed = 5,
                                      .h = 1e-6,
                                      .per_tensor = 3,
                                      .seed = 12,
                                      .atol = 1e-6,
                                      .rtol = 2e-3};
    ps_modelcheck_gradients(m, s_ref_loss, &how);
    ps_model_destroy(&m);
}
END_TEST

START_TEST(cnn_sgd_steps_reduce_the_loss_and_evaluate_in_chunks)
{
    enum { N = 16 };
    ps_model_t *m = s_new(N), *small = s_new(5);
    ps_model_init_params(m, 1);
    float *x = malloc(N * 784 * sizeof(float));
    uint8_t y[N];
    ps_modelcheck_batch(x, y, N, 9);
    ps_modelcheck_sgd_halves_loss(m, x, y, N, 20);
    /* evaluation in chunks of 5 equals one batch of 16 */
    memcpy(ps_model_params(small), ps_model_params(m),
           ps_model_num_params(m) * sizeof(float));
    int c_big = -1, c_small = -2;
    float l_big = 0, l_small = 0;
    ck_assert_int_eq(ps_model_evaluate(m, x, y, N, &c_big, &l_big), 0);
    ck_assert_int_eq(ps_model_evaluate(small, x, y, N, &c_small, &l_small), 0);
    ck_assert_int_eq(c_big, c_small);
    ck_assert_int_gt(c_big, N / 2);
    ck_assert(ps_test_close(l_small, l_big, 1e-5, 1e-4));
    free(x);
    ps_model_destroy(&m);
    ps_model_destroy(&small);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cnn");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cnn_tensor_table_matches_pytorch_layout);
    tcase_add_test(tc, cnn_gradients_match_finite_differences);
    tcase_add_test(tc, cnn_sgd_steps_reduce_the_loss_and_evaluate_in_chunks);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
