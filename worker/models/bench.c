/*
 * worker/models/bench.c - ps-model-bench: times ps_model_train_step alone.
 *
 * Trains one model on one process, no network: batches from Fashion-MNIST
 * (or random inputs with --data ""), plain SGD applied with ps_optim_sgd_step,
 * and reports samples/s of gather + step + update, so it can be compared with the
 * PyTorch-CPU baseline (tools/torch-baseline) at the same BLAS thread count
 * (set OPENBLAS_NUM_THREADS). A measuring tool, not a test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "worker/data.h"
#include "worker/models/model.h"

/* CPU seconds of this thread: on a shared machine this tracks the work done
 * better than the wall clock does (other processes' time slices drop out). */
static double s_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *model = "mlp", *device = "cpu", *data = PS_DATA_DEFAULT_DIR;
    int batch = 64, steps = 600, warmup = 20, eval = 0;
    double lr = 0.1;
    const ps_flag_t flags[] = {
        {"model", PS_FLAG_STR, &model, "NAME", "mlp or cnn"},
        {"device", PS_FLAG_STR, &device, "DEV", "auto, cpu or cuda"},
        {"data", PS_FLAG_STR, &data, "DIR",
         "Fashion-MNIST directory (\"\": random inputs)"},
        {"batch", PS_FLAG_INT, &batch, "N", "samples per step"},
        {"steps", PS_FLAG_INT, &steps, "N", "timed steps"},
        {"warmup", PS_FLAG_INT, &warmup, "N", "untimed steps first"},
        {"lr", PS_FLAG_DOUBLE, &lr, "X", "SGD learning rate"},
        {"eval", PS_FLAG_BOOL, &eval, NULL, "evaluate on the test set at the end"},
    };
    ps_log_set_role("B", -1);
    int rc = ps_config_parse("ps-model-bench", "Times one model's training step.", flags,
                             sizeof(flags) / sizeof(flags[0]), argc, argv, NULL);
    if (rc) {
        return rc == 1 ? 0 : 2;
    }
    if (batch < 1 || steps < 1 || warmup < 0) {
        fprintf(stderr, "ps-model-bench: error: --batch and --steps must be positive\n");
        return 2;
    }
    char err[512];
    const ps_kernels_t *k;
    if (ps_kernels_select(device, &k, err, sizeof(err))) {
        fprintf(stderr, "ps-model-bench: error: %s\n", err);
        return 1;
    }
    ps_dataset_t tr = {0}, te = {0};
    if (*data) {
        if (ps_dataset_load(data, 1, &tr, err, sizeof(err)) ||
            (eval && ps_dataset_load(data, 0, &te, err, sizeof(err)))) {
            fprintf(stderr, "ps-model-bench: error: %s\n", err);
            return 1;
        }
    } else {
        tr.n = batch * 16;
        tr.rows = tr.cols = 28;
        tr.images = calloc((size_t)tr.n * 784, sizeof(float));
        tr.labels = calloc((size_t)tr.n, 1);
        if (!tr.images || !tr.labels) {
            return 1;
        }
        for (size_t i = 0; i < (size_t)tr.n * 784; i++) {
            tr.images[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 0.5f;
        }
        for (int i = 0; i < tr.n; i++) {
            tr.labels[i] = (uint8_t)(i % 10);
        }
    }
    ps_model_t *m = NULL;
    rc = ps_model_new(model, k, batch, &m);
    if (rc) {
        fprintf(stderr, "ps-model-bench: error: model %s: %s\n", model, ps_strerror(rc));
        return 1;
    }
    ps_model_init_params(m, 1);
    const size_t P = ps_model_num_params(m);
    uint32_t *order = malloc((size_t)tr.n * sizeof(uint32_t));
    float *x = malloc((size_t)batch * 784 * sizeof(float));
    uint8_t *y = malloc((size_t)batch);
    if (!order || !x || !y) {
        return 1;
    }
    ps_data_order(1, 0, order, tr.n);
    const ps_optim_sgd_t o = {.lr = (float)lr, .momentum = 0.0f, .weight_decay = 0.0f};
    const int per_epoch = tr.n / batch;
    double t_step = 0.0, c_step = 0.0, loss_sum = 0.0;
    for (int s = 0; s < warmup + steps; s++) {
        /* timed like the PyTorch loop: gather + forward/backward + SGD update */
        double t0 = ps_now(), c0 = s_cpu_now();
        ps_data_gather(&tr, order, (s % per_epoch) * batch, batch, x, y);
        float loss = 0.0f;
        rc = ps_model_train_step(m, x, y, batch, &loss);
        ps_optim_sgd_step(&o, ps_model_params(m), NULL, ps_model_grads(m), 1.0f, P);
        double dt = ps_now() - t0, dc = s_cpu_now() - c0;
        if (rc) {
            fprintf(stderr, "ps-model-bench: error: step %d: %s\n", s, ps_strerror(rc));
            return 1;
        }
        if (s >= warmup) {
            t_step += dt;
            c_step += dc;
            loss_sum += loss;
        }
    }
    const char *thr = getenv("OPENBLAS_NUM_THREADS");
    printf("model=%s device=%s batch=%d steps=%d blas_threads=%s step_ms=%.4f "
           "samples_per_s=%.0f cpu_samples_per_s=%.0f train_loss=%.4f\n",
           model, k->name, batch, steps, thr ? thr : "default", 1e3 * t_step / steps,
           (double)steps * batch / t_step, (double)steps * batch / c_step,
           loss_sum / steps);
    if (eval && te.n > 0) {
        int correct = 0;
        float loss = 0.0f;
        double t0 = ps_now();
        ps_model_evaluate(m, te.images, te.labels, te.n, &correct, &loss);
        printf("test_acc=%.4f test_loss=%.4f eval_s=%.3f\n", (double)correct / te.n, loss,
               ps_now() - t0);
    }
    free(order);
    free(x);
    free(y);
    ps_model_destroy(&m);
    ps_dataset_fini(&tr);
    ps_dataset_fini(&te);
    return 0;
}
