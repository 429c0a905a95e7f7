/*
 * worker/nonfinite.h - what a worker does with a step whose loss or
 * gradient is not finite (--on-nonfinite): end the job as diverged, or
 * replace its gradient by zeros, count it and go on. Checked while the
 * gradient is still in cache, before it leaves (docs/design/failures.md).
 */
#ifndef PS_WORKER_NONFINITE_H
#define PS_WORKER_NONFINITE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_nonfinite ps_nonfinite_t;

/* skip: 1 for --on-nonfinite skip, 0 for fail. Caller owns the result;
 * destroy with ps_nonfinite_destroy(). Returns 0 or PS_ENOMEM. */
int ps_nonfinite_new(int skip, ps_nonfinite_t **out);
void ps_nonfinite_destroy(ps_nonfinite_t **n);

/* Steps skipped so far. */
uint64_t ps_nonfinite_steps(const ps_nonfinite_t *n);

/* `what` (the loss, the gradient) of step was not finite: with fail,
 * PS_ENONFINITE with the reason in err; with skip, grads[0, count) zeroed,
 * the step counted and its line logged (summarised), and 0. */
int ps_nonfinite_found(ps_nonfinite_t *n, const char *what, int64_t step, float *grads,
                       size_t count, char *err, size_t cap);

/* grads[0, count) of step checked: 0 when every value is finite, else as
 * ps_nonfinite_found for the gradient. */
int ps_nonfinite_check(ps_nonfinite_t *n, int64_t step, float *grads, size_t count, char *err,
                       size_t cap);

#ifdef __cplusplus
}
#endif
#endif
