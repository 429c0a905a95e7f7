/*
 * tests/unit/modelcheck.h - the checks test_mlp and test_cnn share: a seeded
 * Fashion-MNIST-shaped batch, a model's loss and gradient against the test's
 * float64 reference model (gradients by central differences), and SGD steps
 * that must halve the loss; and a recorder of the gradient-ready hook's reports
 * (test_mlp, tests/gpu/test_cuda). The reference model itself stays in each
 * test.
 * Failures are Check assertions: call these from a test function only.
 */
#ifndef PS_TESTS_MODELCHECK_H
#define PS_TESTS_MODELCHECK_H

#include <stdint.h>

#include "worker/models/model.h"

/* Pixels of one input sample: x is [N, 784] (28 x 28). */
enum { PS_MODELCHECK_PIXELS = 784 };

/*
 * Mean softmax cross-entropy of the reference model in float64 over the float
 * parameters p (flat, PyTorch order) on x[n, 784] and labels y[n], with
 * parameter `bump` (-1: none) shifted by delta.
 */
typedef double (*ps_modelcheck_loss_fn)(const float *p, long bump, double delta,
                                        const float *x, const uint8_t *y, int n);

/* How ps_modelcheck_gradients() probes the gradient. */
typedef struct {
    int n;               /* samples in the batch */
    uint64_t batch_seed; /* of the batch, as ps_modelcheck_batch() makes it */
    double h;            /* central-difference step in parameter units */
    int per_tensor;      /* elements checked per tensor: the largest |g|, then drawn */
    uint64_t seed;       /* of the drawn elements */
    double atol, rtol;   /* pass: |g - difference| <= atol + rtol * |difference| */
} ps_modelcheck_grad_t;

/* Fills x[n, 784] uniformly in [-0.8, 2.0) from seed, and y[n] with the
 * labels (3i + seed) mod 10. */
void ps_modelcheck_batch(float *x, uint8_t *y, int n, uint64_t seed);

/*
 * Runs one training step of m (max batch >= how->n) on a batch from
 * ps_modelcheck_batch() and checks its loss against ref (1e-5 absolute +
 * relative); then, tensor by tensor, that the gradient is not all zero and
 * that how->per_tensor of its elements (the largest |g|, then ones drawn
 * from how->seed) match central differences of ref within how's tolerance.
 * m keeps that step's gradients.
 */
void ps_modelcheck_gradients(ps_model_t *m, ps_modelcheck_loss_fn ref,
                             const ps_modelcheck_grad_t *how);

/*
 * Runs `steps` training steps of m on (x, y), each followed by an SGD step
 * (lr 0.05, momentum 0.9, no weight decay), and checks every loss is finite
 * and the last below half the first. m keeps the trained parameters.
 */
void ps_modelcheck_sgd_halves_loss(ps_model_t *m, const float *x, const uint8_t *y, int n,
                                   int steps);

/*
 * Records the reports of the gradient-ready hook (ps_model_set_grad_ready with
 * ps_modelcheck_on_ready and a pointer to this) and checks each reported range
 * [from, P) already holds its final value: want, the gradients of an identical
 * step run before.
 */
typedef struct {
    ps_model_t *m;
    const float *want; /* [P] the gradients of an identical step */
    size_t from[8];    /* the first 8 reports */
    int calls;
    int stale; /* a reported key did not hold its final value yet */
} ps_modelcheck_ready_t;

void ps_modelcheck_on_ready(void *arg, size_t from);

#endif
