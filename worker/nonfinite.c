/* worker/nonfinite.c - a step's non-finite values: fail or skip (see nonfinite.h). */
#include "worker/nonfinite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/ratelog.h"
#include "kernels/optim.h"

struct ps_nonfinite {
    int skip;           /* --on-nonfinite skip */
    uint64_t steps;     /* steps whose loss or gradient was not finite */
    ps_ratelog_t *log;  /* their log lines, summarised; owned */
};

int ps_nonfinite_new(int skip, ps_nonfinite_t **out)
{
    ps_nonfinite_t *n = calloc(1, sizeof *n);
    if (!n || ps_ratelog_new(&n->log, PS_RATELOG_PERIOD) != 0) {
        free(n);
        return PS_ENOMEM;
    }
    n->skip = skip;
    *out = n;
    return 0;
}

void ps_nonfinite_destroy(ps_nonfinite_t **n)
{
    if (n && *n) {
        ps_ratelog_destroy(&(*n)->log);
        free(*n);
        *n = NULL;
    }
}

uint64_t ps_nonfinite_steps(const ps_nonfinite_t *n)
{
    return n->steps;
}

int ps_nonfinite_found(ps_nonfinite_t *n, const char *what, int64_t step, float *grads,
                       size_t count, char *err, size_t cap)
{
    if (!n->skip) {
        snprintf(err, cap, "training diverged: %s is not finite at step %lld (--on-nonfinite fail)",
                 what, (long long)step);
        return PS_ENONFINITE;
    }
    n->steps++;
    memset(grads, 0, count * sizeof(float));
    ps_ratelog_reject(n->log, "a step", "this worker",
                      "non-finite values, its gradient replaced by zeros (--on-nonfinite skip)");
    return 0;
}

int ps_nonfinite_check(ps_nonfinite_t *n, int64_t step, float *grads, size_t count, char *err,
                       size_t cap)
{
    return ps_optim_finite(grads, count)
               ? 0
               : ps_nonfinite_found(n, "the gradient", step, grads, count, err, cap);
}
