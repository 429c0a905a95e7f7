/* tests/unit/modelcheck.c - the checks test_mlp and test_cnn share. */
#include "tests/unit/modelcheck.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/optim.h"
#include "tests/unit/testutil.h"

void ps_modelcheck_batch(float *x, uint8_t *y, int n, uint64_t seed)
{
    ps_test_fill(x, (size_t)n * PS_MODELCHECK_PIXELS, -0.8f, 2.0f, seed);
    for (int i = 0; i < n; i++) {
        y[i] = (uint8_t)((i * 3 + seed) % 10);
    }
}

void ps_modelcheck_gradients(ps_model_t *m, ps_modelcheck_loss_fn ref,
                             const ps_modelcheck_grad_t *how)
{
    const int n = how->n;
    float *x = malloc((size_t)n * PS_MODELCHECK_PIXELS * sizeof(float));
    uint8_t *y = malloc((size_t)n);
    ck_assert(x && y);
    ps_modelcheck_batch(x, y, n, how->batch_seed);
    float loss = 0;
    ck_assert_int_eq(ps_model_train_step(m, x, y, n, &loss), 0);
    const float *p = ps_model_params(m), *g = ps_model_grads(m);
    const double want = ref(p, -1, 0, x, y, n);
    ck_assert_msg(ps_test_close(loss, want, 1e-5, 1e-5), "loss %g ref %g", loss, want);
    const double h = how->h;
    ps_rng_t r;
    ps_rng_init(&r, how->seed, 0);
    for (size_t t = 0; t < ps_model_num_tensors(m); t++) {
        const ps_tensor_info_t *ti = ps_model_tensor(m, t);
        size_t big = 0;
        for (size_t j = 1; j < ti->count; j++) {
            if (fabsf(g[ti->offset + j]) > fabsf(g[ti->offset + big])) {
                big = j;
            }
        }
        ck_assert_msg(g[ti->offset + big] != 0.0f, "%s has no gradient", ti->name);
        for (int k = 0; k < how->per_tensor; k++) {
            const size_t j = k == 0 ? big : (size_t)ps_rng_below(&r, ti->count);
            const long idx = (long)(ti->offset + j);
            const double fd =
                (ref(p, idx, h, x, y, n) - ref(p, idx, -h, x, y, n)) / (2 * h);
            ck_assert_msg(ps_test_close(g[idx], fd, how->atol, how->rtol),
                          "%s[%zu]: grad %g fd %g", ti->name, j, g[idx], fd);
        }
    }
    free(y);
    free(x);
}

void ps_modelcheck_sgd_halves_loss(ps_model_t *m, const float *x, const uint8_t *y, int n,
                                   int steps)
{
    const size_t P = ps_model_num_params(m);
    float *v = calloc(P, sizeof(float));
    ck_assert_ptr_nonnull(v);
    const ps_optim_sgd_t o = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.0f};
    float first = 0, loss = 0;
    for (int step = 0; step < steps; step++) {
        ck_assert_int_eq(ps_model_train_step(m, x, y, n, &loss), 0);
        ck_assert(isfinite(loss));
        if (step == 0) {
            first = loss;
        }
        ps_optim_sgd_step(&o, ps_model_params(m), v, ps_model_grads(m), 1.0f, P);
    }
    ck_assert_msg(loss < 0.5f * first, "loss %g -> %g", first, loss);
    free(v);
}

void ps_modelcheck_on_ready(void *arg, size_t from)
{
    ps_modelcheck_ready_t *r = arg;
    const size_t P = ps_model_num_params(r->m);
    r->stale |= memcmp(ps_model_grads(r->m) + from, r->want + from,
                       (P - from) * sizeof(float)) != 0;
    if (r->calls < 8) {
        r->from[r->calls] = from;
    }
    r->calls++;
}
