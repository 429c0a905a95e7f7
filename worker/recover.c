/*
 * worker/recover.c - what a worker does after a failover (worker/kv.h,
 * ps_kv_rollback): roll back to the checkpoint every server went back to,
 * go on where it was (async, or a replica's takeover: the step under way is
 * sent again) (docs/design/failover.md, docs/design/replicas.md).
 */
#include <stdio.h>

#include "common/error.h"
#include "common/log.h"
#include "worker/worker_impl.h"

/* A lost server was replaced and every server rolled back to a checkpoint:
 * this worker starts again at its step, with the data order of that step
 * (as a resumed job does), from the parameters pulled at it. Evaluations of
 * epochs after the step are forgotten; the one of the epoch ending exactly
 * there is made if it was not. In async, or after a replica's takeover,
 * nothing rolls back: the worker pulls the parameters as they are (version
 * *t at least in stepped modes) and does its step t. */
int ps_worker_rollback(ps_worker_t *w, int64_t *t)
{
    const int64_t spe = w->view->steps_per_epoch, total = w->view->total_steps;
    const int stepped = ps_job_is_stepped(&w->job), takeover = ps_kv_takeover_pending(w->kv);
    int64_t step;
    if (!ps_kv_rollback(w->kv, &step)) {
        snprintf(w->err, sizeof w->err, "a request was abandoned with no rollback pending");
        return PS_ESTATE;
    }
    if (!stepped || takeover) {
        if (w->rank == 0) {
            ps_log_info("a lost server was replaced%s; going on at step %lld",
                        takeover ? " by its replica" : " (async)", (long long)*t);
        }
        w->err[0] = '\0';
        return ps_worker_whole(w, 0, stepped ? *t : 0, "pulling after a failover");
    }
    const int64_t done_epochs = step / spe + (step == total && step % spe ? 1 : 0);
    if ((int64_t)w->done.n_test_accuracy > done_epochs) {
        w->done.n_test_accuracy = (size_t)done_epochs;
    }
    if ((int64_t)w->done.n_test_auc > done_epochs) {
        w->done.n_test_auc = w->done.n_test_logloss = (size_t)done_epochs;
    }
    if (w->rank == 0) {
        ps_log_info("rolled back to step %lld (a lost server was replaced)", (long long)step);
    }
    *t = step;
    w->err[0] = '\0'; /* the abandoned request's */
    int rc = ps_worker_whole(w, 0, step, "pulling after a rollback");
    const size_t evaluated = w->ctr ? w->done.n_test_auc : w->done.n_test_accuracy;
    if (rc == 0 && w->rank == 0 && (int64_t)evaluated < done_epochs) {
        rc = ps_worker_evaluate_at(w, (int)done_epochs, step, 0);
    }
    return rc;
}

/* ps_worker_push_pull, and again for as long as lost servers' replicas
 * take their ranks over meanwhile (stepped modes): the servers forgot the
 * step under way, so its whole push and pull go again, the rows push
 * first, from the gradients still in the model. Any other failover
 * (PS_EAGAIN) is the caller's. */
int ps_worker_push_pull_again(ps_worker_t *w, int64_t t, float *params, int *rows_push)
{
    int rc = ps_worker_push_pull(w, t, params);
    while (rc == PS_EAGAIN && ps_job_is_stepped(&w->job) && ps_kv_takeover_pending(w->kv)) {
        int64_t step;
        ps_kv_rollback(w->kv, &step);
        if (w->rank == 0) {
            ps_log_info("a lost server's replica took its keys over: step %lld sent again",
                        (long long)t);
        }
        w->err[0] = '\0';
        w->push_end = w->view->num_params;
        w->npush = 0;
        w->push_rc = 0;
        *rows_push = -1; /* the rollback released it */
        if (w->ctr && (rc = ps_ctr_job_push_again(w->ctr, w->kv, t, rows_push, w->err,
                                                  sizeof w->err)) != 0) {
            return rc;
        }
        rc = ps_worker_push_pull(w, t, params);
    }
    return rc;
}
