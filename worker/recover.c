/* worker/recover.c - a worker after a failover (see recover.h). */
#include "worker/recover.h"

#include <stdio.h>

#include "common/error.h"
#include "common/log.h"

/* A lost server was replaced and every server rolled back to a checkpoint:
 * this worker starts again at its step, with the data order of that step
 * (as a resumed job does), from the parameters pulled at it. Evaluations of
 * epochs after the step are forgotten; the one of the epoch ending exactly
 * there is made if it was not. In async, or after a replica's takeover,
 * nothing rolls back: the worker pulls the parameters as they are (version
 * *t at least in stepped modes) and does its step t. */
int ps_recover(const ps_recover_t *r, int64_t *t)
{
    const int64_t spe = r->view->steps_per_epoch, total = r->view->total_steps;
    const int stepped = ps_job_is_stepped(r->job), takeover = ps_kv_takeover_pending(r->kv);
    int64_t step;
    if (!ps_kv_rollback(r->kv, &step)) {
        snprintf(r->err, r->errlen, "a request was abandoned with no rollback pending");
        return PS_ESTATE;
    }
    if (!stepped || takeover) {
        if (r->rank == 0) {
            ps_log_info("a lost server was replaced%s; going on at step %lld",
                        takeover ? " by its replica" : " (async)", (long long)*t);
        }
        r->err[0] = '\0';
        return ps_rounds_whole(r->rounds, 0, stepped ? *t : 0, "pulling after a failover");
    }
    const int64_t done_epochs = step / spe + (step == total && step % spe ? 1 : 0);
    ps_evals_forget(r->evals, (size_t)done_epochs);
    if (r->rank == 0) {
        ps_log_info("rolled back to step %lld (a lost server was replaced)", (long long)step);
    }
    *t = step;
    r->err[0] = '\0'; /* the abandoned request's */
    int rc = ps_rounds_whole(r->rounds, 0, step, "pulling after a rollback");
    if (rc == 0 && r->rank == 0 && (int64_t)ps_evals_epochs(r->evals) < done_epochs) {
        rc = ps_evals_at(r->evals, (int)done_epochs, step, 0, r->err, r->errlen);
    }
    return rc;
}
