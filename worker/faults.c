/* worker/faults.c - pushes that test the servers (see faults.h). */
#include "worker/faults.h"

#include <math.h>
#include <stdio.h>

#include "common/error.h"
#include "common/log.h"

/* --fault-nan-push: a NaN gradient for step t; a server must refuse it
 * without counting it. */
static int s_nan_push(ps_kv_t *kv, int64_t t, char *err, size_t cap)
{
    static const float nan4[4] = {NAN, NAN, NAN, NAN};
    int rc = ps_kv_wait(kv, ps_kv_push(kv, 0, 4, nan4, t));
    if (rc != PS_ENONFINITE) {
        snprintf(err, cap, "--fault-nan-push: the NaN push for step %lld got %s, "
                 "want a refusal as not finite", (long long)t, rc ? ps_strerror(rc) : "accepted");
        return PS_ESTATE;
    }
    ps_log_info("--fault-nan-push: the NaN push for step %lld was refused: %s", (long long)t,
                ps_kv_error(kv));
    return 0;
}

/* --fault-huge-push: five finite pushes of 3e38 for step t (accepted:
 * finite), whose updates soon overflow; the servers must undo those and go
 * on. */
static int s_huge_push(ps_kv_t *kv, int64_t t, char *err, size_t cap)
{
    static const float huge4[4] = {3e38f, 3e38f, 3e38f, 3e38f};
    for (int i = 0; i < 5; i++) {
        int rc = ps_kv_wait(kv, ps_kv_push(kv, 0, 4, huge4, t));
        if (rc != 0) {
            snprintf(err, cap, "--fault-huge-push: push %d of 3e38 for step %lld "
                     "got %s, want it accepted", i + 1, (long long)t, ps_strerror(rc));
            return PS_ESTATE;
        }
    }
    ps_log_info("--fault-huge-push: 5 pushes of 3e38 for step %lld accepted", (long long)t);
    return 0;
}

int ps_fault_push(ps_kv_t *kv, int64_t huge_step, int64_t nan_step, int64_t t, char *err,
                  size_t cap)
{
    int rc = t == huge_step ? s_huge_push(kv, t, err, cap) : 0;
    return rc == 0 && t == nan_step ? s_nan_push(kv, t, err, cap) : rc;
}
