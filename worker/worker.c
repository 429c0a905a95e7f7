/*
 * worker/worker.c - the training loop of one worker.
 *
 * Global sample order: all workers draw the same permutation per epoch from
 * the seed; at step k worker r of M takes samples [(k*M + r)*b, +b), so sync
 * training with M workers of batch b sees exactly the batches of one worker
 * with batch M*b (docs/design.md, "Models, data and the global sample order").
 *
 * allreduce: the same batches and the same optimizer code as the servers
 * (ps_optim_step with the schedule's lr of step t and scale 1/M, update count
 * t + 1), applied by every worker to the ring's sum, so the parameters stay
 * bitwise identical on every worker and match sync training up to the order
 * in which the ring adds the M gradients.
 *
 * Overlap (--overlap 1): the gradient vector is cut into buckets at tensor
 * boundaries and a communication thread (worker/overlap.c) owns the ring
 * during each step, summing the last buckets while backward still produces
 * the earlier layers; the trainer waits for every bucket, then applies the
 * optimizer as before. The ring's check also fails once this worker is
 * shutting down, so the thread never outlives a failed step.
 *
 * In sync and ssp the same flag pushes each layer's gradients to the servers
 * as soon as backward has finished them (last layer first): the transfer
 * overlaps the rest of backward, and a server sums a worker's parts as one
 * push (the sums, so the parameters, are bitwise those of one whole push).
 * async applies every push as an update, and sync:k/n counts pushes, so both
 * keep one push per step.
 */
#include "worker/worker.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "common/trace.h"
#include "kernels/optim.h"
#include "kernels/threads.h"
#include "proto/curve.h"
#include "proto/link.h"
#include "worker/data.h"
#include "worker/kv.h"
#include "worker/preflight.h"
#include "worker/models/model.h"
#include "worker/observe.h"
#include "worker/overlap.h"
#include "worker/ring.h"

/* Most pushes of one step (layer by layer, then the rest). */
enum { PS_WORKER_MAX_PUSHES = 16 };

/* Test accuracy below this (twice chance on 10 classes) after steps with
 * non-finite values means they broke the model: the job has diverged. */
#define PS_WORKER_SANE_ACCURACY 0.2

typedef struct {
    const ps_worker_config_t *cfg;
    ps_ctx_t *ctx;
    ps_link_t *link;       /* until the KV client takes it */
    int rank;              /* this worker's rank */
    ps_job_t job;
    ps_view_t *view;
    const ps_kernels_t *kernels;
    ps_model_t *model;
    ps_kv_t *kv;
    ps_ring_t *ring; /* allreduce: this worker's place in the ring */
    ps_overlap_t *overlap; /* allreduce with --overlap 1: the ring's thread */
    int layer_push;        /* sync, ssp with --overlap 1: push layers during backward */
    int64_t push_step;     /* the step being pushed layer by layer */
    uint64_t push_end;     /* keys [push_end, P) are pushed already */
    int push_h[PS_WORKER_MAX_PUSHES]; /* their handles */
    int npush;
    int push_rc;           /* the first refused push, or 0 */
    atomic_int stopping;   /* set before tearing down: the ring gives up waiting */
    ps_optim_t opt;  /* allreduce: the job's optimizer, applied locally */
    float *state;    /* allreduce: its state, ps_optim_state_floats() arrays of P */
    float *sums;     /* allreduce: 2M floats for the start-up check (lives as long
                        as the ring: a failed ring may still hold its frames) */
    ps_dataset_t train, test;
    uint32_t *order; /* this epoch's global sample order */
    float *x;        /* batch images: the model's pinned buffer; borrowed */
    uint8_t *y;      /* batch labels: likewise */
    ps_safetensors_t *init; /* --init-from: the model file, read before joining */
    ps_done_t done;  /* what we report at the end */
    uint64_t nonfinite;      /* steps whose loss or gradient was not finite */
    ps_ratelog_t *nonfinite_log; /* their log lines, summarised */
    ps_worker_obs_t *obs;    /* metrics and the heartbeat's report */
    char err[256];
} ps_worker_t;

/* Writes the parameters as raw little-endian float32 to pattern, its first
 * "%d" replaced by rank. */
static int s_dump(const char *pattern, int rank, const float *p, size_t n)
{
    char path[4096];
    const char *at = strstr(pattern, "%d");
    if (at) {
        snprintf(path, sizeof path, "%.*s%d%s", (int)(at - pattern), pattern, rank, at + 2);
    } else {
        snprintf(path, sizeof path, "%s", pattern);
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        return PS_EIO;
    }
    size_t w = fwrite(p, sizeof(float), n, f);
    return (fclose(f) == 0 && w == n) ? 0 : PS_EIO;
}

/* Waits for a request; on failure leaves the reason in w->err. A request
 * refused with PS_ECLOSED found the job already gone (scheduler lost, job
 * aborted): ps_kv_error() holds why, as for a failed wait. */
static int s_wait(ps_worker_t *w, int handle, const char *what)
{
    int rc = handle < 0 ? handle : ps_kv_wait(w->kv, handle);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "%s failed: %s", what,
                 handle < 0 && handle != PS_ECLOSED ? ps_strerror(rc) : ps_kv_error(w->kv));
    }
    return rc;
}

/* ps_model_evaluate over a whole data set, its images normalised for the call
 * (the set keeps bytes). Returns 0, PS_ENOMEM or the model's error. */
static int s_evaluate_set(ps_model_t *m, const ps_dataset_t *ds, int *correct, float *loss)
{
    float *x = malloc((size_t)ds->n * ds->rows * ds->cols * sizeof *x);
    if (!x) {
        return PS_ENOMEM;
    }
    ps_data_images(ds, 0, ds->n, x);
    int rc = ps_model_evaluate(m, x, ds->labels, ds->n, correct, loss);
    free(x);
    return rc;
}

/* Test accuracy of the current parameters after step `step` (counted from 0
 * over the job). epoch > 0: the end of that epoch, recorded in the summary;
 * epoch 0: an --eval-every point within an epoch, only logged. */
static int s_evaluate(ps_worker_t *w, int epoch, int64_t step, double t_train)
{
    int correct = 0;
    float loss = 0;
    int rc = s_evaluate_set(w->model, &w->test, &correct, &loss);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "evaluation failed: %s", ps_strerror(rc));
        return rc;
    }
    double acc = (double)correct / w->test.n;
    /* Ending below any sane accuracy after skipped steps means they broke it. */
    if (!isfinite(loss) || !ps_optim_finite(ps_model_params(w->model), w->view->num_params) ||
        (w->nonfinite && acc < PS_WORKER_SANE_ACCURACY)) {
        snprintf(w->err, sizeof w->err,
                 "training diverged: epoch %d ends with test_loss=%g test_accuracy=%.4f%s", epoch,
                 loss, acc, w->nonfinite ? " after steps with non-finite values" : "");
        return PS_ENONFINITE;
    }
    if (epoch == 0) {
        ps_log_info("eval step=%lld test_accuracy=%.4f test_loss=%.4f elapsed=%.2fs",
                    (long long)step, acc, loss, t_train);
        return 0;
    }
    if (w->done.num_epochs_evaluated < PS_MAX_EPOCHS) {
        w->done.test_accuracy[w->done.num_epochs_evaluated++] = acc;
    }
    ps_worker_obs_epoch(w->obs, epoch, acc);
    ps_log_info("epoch=%d test_accuracy=%.4f test_loss=%.4f elapsed=%.2fs step=%lld", epoch, acc,
                loss, t_train, (long long)step);
    return 0;
}

/* The version a pull after pushing step t must wait for. */
static int64_t s_pull_version(const ps_job_t *j, int64_t t)
{
    switch (j->mode) {
    case PS_MODE_SYNC:
    case PS_MODE_BACKUP:
        return t + 1;
    case PS_MODE_SSP:
        return t + 1 - j->staleness > 0 ? t + 1 - j->staleness : 0;
    default:
        return 0;
    }
}

/* Experiments: the straggler's compute takes `factor` times as long. */
static void s_straggle(const ps_job_t *j, int rank, double compute_seconds)
{
    if (rank != j->straggler_rank || j->straggler_factor <= 1.0) {
        return;
    }
    double extra = compute_seconds * (j->straggler_factor - 1.0);
    struct timespec ts = {(time_t)extra, (long)((extra - (double)(time_t)extra) * 1e9)};
    nanosleep(&ts, NULL);
}

/* End of an epoch: remember its loss; worker 0 evaluates. */
static int s_end_epoch(ps_worker_t *w, int epoch, int64_t step, double loss_sum, int nsteps,
                       double t0)
{
    w->done.final_loss = nsteps ? loss_sum / nsteps : 0;
    return w->rank == 0 ? s_evaluate(w, epoch + 1, step, ps_now() - t0) : 0;
}

/* The ring's question while it waits: is the job still there (and are we)? */
static int s_ring_check(void *arg)
{
    ps_worker_t *w = arg;
    if (atomic_load(&w->stopping)) {
        return PS_ECLOSED;
    }
    return ps_kv_status(w->kv);
}

/* The model's gradient-ready hook: hands the final buckets to the ring's thread. */
static void s_grads_ready(void *arg, size_t from)
{
    ps_overlap_ready(arg, from);
}

/* A NaN or an infinity in the step's loss or gradient [from, to), checked
 * while the gradient is still in cache, before it is pushed: ends the job
 * (PS_ENONFINITE, w->err says why) or, with --on-nonfinite skip, replaces
 * the gradient with zeros (the step goes on without this worker's part). */
static int s_nonfinite(ps_worker_t *w, const char *what, uint64_t from, uint64_t to)
{
    if (!w->cfg->skip_nonfinite) {
        snprintf(w->err, sizeof w->err,
                 "training diverged: %s is not finite at step %lld (--on-nonfinite fail)", what,
                 (long long)w->push_step);
        return w->push_rc = PS_ENONFINITE;
    }
    w->nonfinite++;
    memset(ps_model_grads(w->model) + from, 0, (to - from) * sizeof(float));
    ps_ratelog_reject(w->nonfinite_log, "a step", "this worker",
                      "non-finite values, its gradient replaced by zeros (--on-nonfinite skip)");
    return 0;
}

static int s_check_grads(ps_worker_t *w, uint64_t from, uint64_t to)
{
    const float *g = ps_model_grads(w->model);
    return ps_optim_finite(g + from, to - from) ? 0 : s_nonfinite(w, "the gradient", from, to);
}

/* The model's gradient-ready hook in sync and ssp: pushes the newly final
 * keys [from, push_end). With every handle in use the keys wait for the push
 * after backward. The first layer's (from 0: backward's last call) go with
 * the pull right after it, in one request to a server they cover
 * (s_push_pull). */
static void s_push_ready(void *arg, size_t from)
{
    ps_worker_t *w = arg;
    if (from == 0 || from >= w->push_end || w->npush == PS_WORKER_MAX_PUSHES - 1 ||
        w->push_rc || s_check_grads(w, from, w->push_end) != 0) {
        return;
    }
    ps_trace_span_t span = ps_trace_span_begin(PS_TRACE_PUSH, w->push_step, (int64_t)from);
    int h = ps_kv_push(w->kv, from, w->push_end, ps_model_grads(w->model) + from,
                       w->push_step);
    ps_trace_span_end(&span);
    if (h < 0) {
        w->push_rc = h;
        return;
    }
    w->push_h[w->npush++] = h;
    w->push_end = from;
}

/* --fault-nan-push: a NaN gradient for step t under our own token, before
 * the real ones; a server must refuse it without counting it. */
static int s_fault_nan_push(ps_worker_t *w, int64_t t)
{
    static const float nan4[4] = {NAN, NAN, NAN, NAN};
    int rc = ps_kv_wait(w->kv, ps_kv_push(w->kv, 0, 4, nan4, t));
    if (rc != PS_ENONFINITE) {
        snprintf(w->err, sizeof w->err, "--fault-nan-push: the NaN push for step %lld got %s, "
                 "want a refusal as not finite", (long long)t, rc ? ps_strerror(rc) : "accepted");
        return PS_ESTATE;
    }
    ps_log_info("--fault-nan-push: the NaN push for step %lld was refused: %s", (long long)t,
                ps_kv_error(w->kv));
    return 0;
}

/* Pushes step t's gradients and pulls the weights for the next step: what
 * the hook has not pushed yet goes now, then every handle is waited for. */
static int s_push_pull(ps_worker_t *w, int64_t t, float *params)
{
    if (w->push_rc) { /* the job is gone or a request was refused */
        return s_wait(w, w->push_rc, "push");
    }
    if (w->push_end > 0 && s_check_grads(w, 0, w->push_end) != 0) {
        return w->push_rc;
    }
    ps_trace_span_t push = ps_trace_span_begin(PS_TRACE_PUSH, t, 0);
    /* What the hook has not pushed yet and the pull of every key, in one
     * request per server: a server whose keys are all in [0, push_end)
     * (every server with --overlap 0 and in async) gets one push-pull and
     * answers with the values alone; with layers pushed early the others
     * get a push and a pull, or a pull, right behind those pushes (same
     * sockets, so each server sees them first). Stepped modes' pulls wait
     * for the step's update. */
    int hl = ps_kv_push_pull(w->kv, 0, w->view->num_params, ps_model_grads(w->model),
                             w->push_end, t, params, s_pull_version(&w->job, t));
    if (w->push_end > 0) {
        ps_trace_span_end(&push);
    }
    ps_trace_span_t pull = ps_trace_span_begin(PS_TRACE_PULL, t, 0);
    int rc = 0;
    for (int i = 0; i < w->npush && rc == 0; i++) {
        rc = s_wait(w, w->push_h[i], "push");
    }
    rc = rc ? rc : s_wait(w, hl, "pull");
    ps_trace_span_end(&pull);
    return rc;
}

/* allreduce with overlap: plans the buckets from the model's tensors and
 * starts the thread that owns the ring from now on. */
static int s_overlap_start(ps_worker_t *w)
{
    const size_t nt = ps_model_num_tensors(w->model);
    size_t offsets[64];
    ps_range_t buckets[PS_OVERLAP_MAX_BUCKETS];
    if (nt > sizeof offsets / sizeof offsets[0]) {
        snprintf(w->err, sizeof w->err, "overlap: model has too many tensors (%zu)", nt);
        return PS_EINVAL;
    }
    for (size_t i = 0; i < nt; i++) {
        offsets[i] = ps_model_tensor(w->model, i)->offset;
    }
    const uint64_t P = w->view->num_params;
    int nb = ps_overlap_plan(offsets, nt, P, 0, buckets, PS_OVERLAP_MAX_BUCKETS);
    int rc = nb < 0 ? nb
                    : ps_overlap_new(w->ring, ps_model_grads(w->model), P, buckets, nb,
                                     &w->overlap);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "overlap: cannot start: %s", ps_strerror(rc));
        return rc;
    }
    ps_model_set_grad_ready(w->model, s_grads_ready, w->overlap);
    if (w->rank == 0) {
        ps_log_info("overlap: %d gradient buckets, the last [%llu, %llu) first", nb,
                    (unsigned long long)buckets[0].begin,
                    (unsigned long long)buckets[0].end);
    }
    return 0;
}

/* A ring failure's reason: the job's end when that was the cause. */
static int s_ring_failed(ps_worker_t *w, int rc, const char *what)
{
    snprintf(w->err, sizeof w->err, "%s failed: %s", what,
             rc == PS_ECLOSED && ps_kv_status(w->kv) ? ps_kv_error(w->kv)
                                                     : ps_ring_error(w->ring));
    return rc;
}

/* allreduce, one step: sum the gradients over the ring, then apply the
 * optimizer exactly as a sync server would to the mean (scale 1/M). */
static int s_ring_step(ps_worker_t *w, int64_t t)
{
    const uint64_t P = w->view->num_params;
    float *params = ps_model_params(w->model), *grads = ps_model_grads(w->model);
    int rc = w->overlap ? ps_overlap_wait(w->overlap)
                        : ps_ring_allreduce(w->ring, grads, P, t);
    if (rc != 0) {
        return s_ring_failed(w, rc, "ring allreduce");
    }
    float lr = ps_optim_lr(&w->job, t, w->view->steps_per_epoch, w->view->total_steps);
    ps_optim_step(&w->opt, lr, t + 1, params, w->state, P, grads,
                  1.0f / (float)w->view->num_workers, P);
    return 0;
}

/* Payload bytes pushed and pulled so far (allreduce: sent and received on
 * the ring since its start-up check, which sent sent0 and received received0). */
static void s_bytes(ps_worker_t *w, uint64_t sent0, uint64_t received0, uint64_t *pushed,
                    uint64_t *pulled)
{
    if (w->ring) {
        ps_ring_bytes(w->ring, pushed, pulled);
        *pushed -= sent0;
        *pulled -= received0;
    } else {
        ps_kv_bytes(w->kv, pushed, pulled);
    }
}

/*
 * The step loop. t is the global step: in stepped modes the version this
 * worker's gradient is for (under sync:k/n a late worker jumps to the
 * version it pulled, skipping the batches the others already covered); in
 * async a local count. Epoch and batch follow from t.
 */
/* Worker 0 at the end: the trained model, with the job in its metadata. */
static int s_save_model(ps_worker_t *w, const float *params)
{
    const ps_job_t *j = &w->job;
    char mode[32], steps[32], epochs[16], seed[32], acc[32];
    ps_job_mode_str(j, mode, sizeof mode);
    snprintf(steps, sizeof steps, "%lld", (long long)w->done.steps);
    snprintf(epochs, sizeof epochs, "%d", j->epochs);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)j->seed);
    int ne = w->done.num_epochs_evaluated;
    snprintf(acc, sizeof acc, "%.6f", ne ? w->done.test_accuracy[ne - 1] : -1.0);
    const char *meta[] = {"format", "pt", "mode", mode, "steps", steps, "epochs", epochs,
                          "seed", seed, "test_accuracy", acc};
    int rc = ps_model_save(w->model, params, w->cfg->save_model, meta,
                           (int)(sizeof meta / sizeof meta[0] / 2), w->err, sizeof w->err);
    if (rc == 0) {
        ps_log_info("model saved to %s", w->cfg->save_model);
    }
    return rc;
}

/* Failover: a lost server was replaced and every server rolled back to a
 * checkpoint; this worker starts again at its step, with the data order of
 * that step (as a resumed job does), from the parameters pulled at it.
 * Evaluations of epochs after the step are forgotten; the one of the epoch
 * ending exactly there is made if it was not. In async nothing rolls back:
 * the worker pulls the parameters as they are (the spare's keys from its
 * checkpoint) and does its step t again. Returns 0, PS_EAGAIN (another
 * failover came meanwhile) or a failure with w->err set. */
static int s_rollback(ps_worker_t *w, int64_t *t)
{
    const int64_t spe = w->view->steps_per_epoch, total = w->view->total_steps;
    int64_t step;
    if (!ps_kv_rollback(w->kv, &step)) {
        snprintf(w->err, sizeof w->err, "a request was abandoned with no rollback pending");
        return PS_ESTATE;
    }
    if (!ps_job_is_stepped(&w->job)) {
        if (w->rank == 0) {
            ps_log_info("a lost server was replaced; going on at step %lld (async)",
                        (long long)*t);
        }
        w->err[0] = '\0';
        return s_wait(w, ps_kv_pull(w->kv, 0, w->view->num_params, ps_model_params(w->model),
                                    0),
                      "pulling after a failover");
    }
    const int64_t done_epochs = step / spe + (step == total && step % spe ? 1 : 0);
    if (w->done.num_epochs_evaluated > done_epochs) {
        w->done.num_epochs_evaluated = (int)done_epochs;
    }
    if (w->rank == 0) {
        ps_log_info("rolled back to step %lld (a lost server was replaced)", (long long)step);
    }
    *t = step;
    w->err[0] = '\0'; /* the abandoned request's */
    int rc = s_wait(w, ps_kv_pull(w->kv, 0, w->view->num_params, ps_model_params(w->model),
                                  step),
                    "pulling after a rollback");
    if (rc == 0 && w->rank == 0 && w->done.num_epochs_evaluated < done_epochs) {
        rc = s_evaluate(w, (int)done_epochs, step, 0);
    }
    return rc;
}

/* The step loop. rolled_back: start with a pending failover's rollback (the
 * job ended for this worker, then a server was replaced). */
static int s_train(ps_worker_t *w, int rolled_back)
{
    const ps_job_t *j = &w->job;
    const int M = w->view->num_workers, b = j->batch, rank = w->rank;
    const uint64_t P = w->view->num_params;
    const int64_t spe = w->view->steps_per_epoch, total = w->view->total_steps;
    float *params = ps_model_params(w->model);
    const int ring = j->mode == PS_MODE_ALLREDUCE;
    int rc = rolled_back ? PS_EAGAIN : 0;
    if (!ring && !rolled_back) { /* allreduce: every worker initialised its own copy */
        rc = s_wait(w, ps_kv_pull(w->kv, 0, P, params, w->view->start_step),
                    "pulling the initial weights");
    }
    uint64_t ring_sent0 = 0, ring_received0 = 0; /* the start-up check's, not training's */
    if (ring) {
        ps_ring_bytes(w->ring, &ring_sent0, &ring_received0);
    }
    /* Resumed: the data position, the lr schedule and the pull versions all
     * follow from the step. */
    int64_t t = w->view->start_step, steps = 0, last_log_step = 0;
    int epoch = -1, nsteps = 0;
    double loss_sum = 0, t0 = ps_now(), last_log = t0;
    while ((rc == 0 && t < total) || rc == PS_EAGAIN) {
        if (rc == PS_EAGAIN) {
            rc = s_rollback(w, &t);
            epoch = -1; /* the order of t's epoch is drawn again */
            continue;
        }
        const int e = (int)(t / spe), k = (int)(t % spe);
        if (e != epoch) {
            if (epoch >= 0 && (rc = s_end_epoch(w, epoch, t, loss_sum, nsteps, t0)) != 0) {
                return rc;
            }
            epoch = e;
            ps_data_order(j->seed, e, w->order, w->train.n);
            loss_sum = 0;
            nsteps = 0;
        }
        const double ts = ps_now();
        ps_trace_step(t);
        ps_data_gather(&w->train, w->order, (k * M + rank) * b, b, w->x, w->y);
        double tc = ps_now();
        float loss;
        if (w->overlap) {
            ps_overlap_begin(w->overlap, t);
        }
        w->push_step = t;
        w->push_end = P;
        w->npush = 0;
        w->push_rc = 0;
        if (!ring && t == w->cfg->fault_nan_push && (rc = s_fault_nan_push(w, t)) != 0) {
            return rc;
        }
        if ((rc = ps_model_train_step(w->model, w->x, w->y, b, &loss)) != 0) {
            snprintf(w->err, sizeof w->err, "training step failed: %s", ps_strerror(rc));
            return rc;
        }
        if (!isfinite(loss)) {
            if ((rc = s_nonfinite(w, "the loss", 0, w->push_end)) != 0) {
                return rc;
            }
            loss = 0; /* not in the epoch's mean */
        }
        s_straggle(j, rank, ps_now() - tc);
        double tw = ps_now();
        w->done.compute_seconds += tw - tc;
        if (ring) {
            if ((rc = s_ring_step(w, t)) != 0) {
                return rc;
            }
        } else if ((rc = s_push_pull(w, t, params)) != 0) {
            if (rc == PS_EAGAIN) {
                continue; /* rolled back: the step's work is void */
            }
            return rc;
        }
        double te = ps_now();
        w->done.wait_seconds += te - tw;
        ps_trace_span(PS_TRACE_WAIT, t, tw, te, 0);
        ps_trace_span(PS_TRACE_STEP, t, ts, te, 0);
        uint64_t pushed, pulled;
        s_bytes(w, ring_sent0, ring_received0, &pushed, &pulled);
        ps_worker_obs_step(w->obs, steps + 1, b, tw - tc, te - tw, loss, pushed, pulled);
        ps_trace_poll();
        loss_sum += loss;
        nsteps++;
        steps++;
        int64_t next = t + 1;
        if (j->mode == PS_MODE_BACKUP && ps_kv_version(w->kv) > next) {
            next = ps_kv_version(w->kv);
        }
        const int64_t prev = t, every = w->cfg->eval_every;
        t = next;
        if (rank == 0 && every > 0 && t / every != prev / every && t % spe != 0 && t < total &&
            (rc = s_evaluate(w, 0, t, ps_now() - t0)) != 0) {
            return rc;
        }
        double now = ps_now();
        if (rank == 0 && (now - last_log >= w->cfg->progress_seconds || t % spe == 0)) {
            ps_log_info("epoch=%d/%d step=%lld/%lld loss=%.4f samples_per_sec=%.0f", e + 1,
                        j->epochs, (long long)(t - (int64_t)e * spe), (long long)spe,
                        loss_sum / nsteps, (double)(steps - last_log_step) * M * b / (now - last_log));
            last_log = now;
            last_log_step = steps;
        }
    }
    if (rc == 0 && epoch >= 0) {
        rc = s_end_epoch(w, epoch, t, loss_sum, nsteps, t0);
    }
    w->done.train_seconds += ps_now() - t0;
    w->done.steps += steps;
    w->done.samples += steps * b;
    s_bytes(w, ring_sent0, ring_received0, &w->done.bytes_pushed, &w->done.bytes_pulled);
    if (rc == 0 && rank == 0 && w->cfg->save_model) {
        rc = s_save_model(w, params);
    }
    if (rc == 0 && w->cfg->dump_params &&
        s_dump(w->cfg->dump_params, rank, params, P) != 0) {
        snprintf(w->err, sizeof w->err, "cannot write the parameters to %s",
                 w->cfg->dump_params);
        rc = PS_EIO;
    }
    return rc;
}

/* Seeds a new model: the --init-from file's values, else the seed's. */
static void s_init_params(ps_worker_t *w)
{
    if (w->init) {
        ps_model_load(w->model, w->init, w->err, sizeof w->err); /* checked in s_start */
    } else {
        ps_model_init_params(w->model, w->job.seed);
    }
}

/* FNV-1a over the bytes of n floats. */
static uint32_t s_checksum(const float *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n * sizeof *p; i++) {
        h = (h ^ b[i]) * 16777619u;
    }
    return h;
}

/*
 * allreduce: joins the ring, initialises the parameters from the seed (the
 * same on every worker: ps_model_init_params is deterministic) and checks
 * that every worker got the same ones. The check is itself an allreduce, of
 * 2M floats where worker r writes the two 16-bit halves of its checksum at
 * [2r, 2r+2) (exact in float32), so it also proves the ring works end to end
 * before the first step.
 */
static int s_ring_start(ps_worker_t *w)
{
    const int M = w->view->num_workers, rank = w->rank;
    const uint64_t P = w->view->num_params;
    ps_ring_config_t rc_cfg = {
        .rank = rank,
        .size = M,
        .right = w->view->workers[(rank + 1) % M].endpoint,
        .right_key = w->view->workers[(rank + 1) % M].curve_key,
        .sub_floats = (size_t)w->cfg->ring_kib * 1024 / sizeof(float),
        .check = s_ring_check,
        .check_arg = w,
    };
    int rc = ps_ring_connect(w->ring, &rc_cfg, w->err, sizeof w->err);
    if (rc != 0) {
        return rc;
    }
    if (ps_optim_from_job(&w->job, &w->opt) != 0) {
        snprintf(w->err, sizeof w->err, "unknown optimizer '%s'", w->job.optimizer);
        return PS_EINVAL;
    }
    w->state = calloc(P * (size_t)(ps_optim_state_floats(&w->opt) + 1), sizeof(float));
    float *sums = w->sums = calloc(2 * (size_t)M, sizeof(float));
    if (!w->state || !sums) {
        snprintf(w->err, sizeof w->err, "out of memory");
        return PS_ENOMEM;
    }
    s_init_params(w);
    uint32_t mine = s_checksum(ps_model_params(w->model), P);
    sums[2 * rank] = (float)(mine >> 16);
    sums[2 * rank + 1] = (float)(mine & 0xffff);
    rc = ps_ring_allreduce(w->ring, sums, 2 * (uint64_t)M, -1);
    if (rc != 0) {
        return s_ring_failed(w, rc, "checking the initial parameters over the ring");
    }
    for (int i = 0; i < M && rc == 0; i++) {
        uint32_t theirs = ((uint32_t)sums[2 * i] << 16) | (uint32_t)sums[2 * i + 1];
        if (theirs != mine) {
            snprintf(w->err, sizeof w->err,
                     "W%d initialised different parameters (checksum %08x, ours %08x): "
                     "different builds or models?", i, theirs, mine);
            rc = PS_ESTATE;
        }
    }
    if (rc == 0 && rank == 0) {
        ps_log_info("ring of %d workers ready: initial parameters agree (checksum %08x), "
                    "%zu KiB per message", M, mine,
                    rc_cfg.sub_floats * sizeof(float) / 1024);
    }
    return rc;
}

/* Tells the client where the model's tensors start (top-k selects per tensor). */
static int s_kv_tensors(ps_worker_t *w)
{
    const size_t n = ps_model_num_tensors(w->model);
    uint64_t *starts = malloc((n ? n : 1) * sizeof *starts);
    if (!starts) {
        return PS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        starts[i] = ps_model_tensor(w->model, i)->offset;
    }
    int rc = ps_kv_set_tensors(w->kv, starts, n);
    free(starts);
    return rc;
}

/* Everything up to the first step. Returns 0 or an error with w->err set. */
static int s_start(ps_worker_t *w)
{
    const ps_worker_config_t *cfg = w->cfg;
    int rc;
    /* model files first: a bad path or file fails at once, not after a job */
    if (cfg->save_model &&
        (rc = ps_file_check_writable(cfg->save_model, w->err, sizeof w->err))) {
        return rc;
    }
    if (cfg->init_from &&
        (rc = ps_safetensors_read(cfg->init_from, &w->init, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    if ((rc = ps_dataset_load(cfg->data_dir, 1, &w->train, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    /* The device is chosen before joining, so a bad --device fails without
     * touching the job, but announced after: a worker that cannot start
     * prints its one error line and nothing else. */
    char device[256];
    if ((rc = ps_kernels_select(cfg->device, &w->kernels, device, sizeof device)) != 0) {
        snprintf(w->err, sizeof w->err, "%s", device);
        return rc;
    }
    ps_kernels_set_threads(cfg->threads);
    const ps_link_ident_t ident = {cfg->job_id, cfg->job_hash};
    rc = ps_link_join(&w->link, w->ctx, cfg->scheduler, PS_ROLE_WORKER, cfg->rank, NULL,
                      &ident, cfg->connect_timeout, cfg->peer_timeout, &w->job, w->err,
                      sizeof w->err);
    if (rc != 0) {
        return rc;
    }
    w->rank = ps_link_rank(w->link);
    ps_link_set_grace(w->link, cfg->scheduler_grace);
    ps_log_set_role("W", w->rank);
    ps_worker_obs_wire(w->obs, w->ctx);
    ps_worker_obs_attach(w->obs, w->link, w->rank);
    ps_log_info("device=%s", device);
    const ps_job_t *j = &w->job;
    int max_batch = j->batch > 256 ? j->batch : 256; /* evaluation runs in bigger chunks */
    if ((rc = ps_model_new(j->model, w->kernels, max_batch, &w->model)) != 0) {
        snprintf(w->err, sizeof w->err, "cannot build model %s: %s", j->model, ps_strerror(rc));
        return rc;
    }
    if (w->init) {
        char why[200];
        if ((rc = ps_model_load(w->model, w->init, why, sizeof why)) != 0) {
            snprintf(w->err, sizeof w->err, "--init-from %s: %s", cfg->init_from, why);
            return rc;
        }
    }
    if (w->rank == 0 &&
        (rc = ps_dataset_load(cfg->data_dir, 0, &w->test, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    w->order = malloc((size_t)w->train.n * sizeof *w->order);
    /* the step copies these in overlapped, and is done with them on return */
    w->x = ps_model_batch_x(w->model);
    w->y = ps_model_batch_y(w->model);
    if (!w->order) {
        snprintf(w->err, sizeof w->err, "out of memory");
        return PS_ENOMEM;
    }
    ps_model_info_t info = {.num_params = ps_model_num_params(w->model),
                            .train_samples = (uint64_t)w->train.n};
    if (j->mode == PS_MODE_ALLREDUCE) {
        char bound[128];
        /* no ring message is longer than the model: a longer frame is dropped unread */
        rc = ps_ring_new(w->ctx, cfg->bind, ps_model_num_params(w->model), &w->ring, bound,
                         sizeof bound, w->err, sizeof w->err);
        if (rc != 0) {
            return rc;
        }
        snprintf(info.endpoint, sizeof info.endpoint, "%s",
                 cfg->advertise ? cfg->advertise : bound);
    }
    uint64_t P = info.num_params;
    rc = ps_link_wait_view(w->link, &info, w->view, w->err, sizeof w->err);
    if (rc != 0) {
        return rc;
    }
    if (w->view->num_params != P) {
        snprintf(w->err, sizeof w->err, "the view has %llu parameters, our model %llu",
                 (unsigned long long)w->view->num_params, (unsigned long long)P);
        return PS_EPROTO;
    }
    if (w->view->preflight && w->view->num_servers > 0 &&
        (rc = ps_preflight_run(w->ctx, w->link, w->view, w->rank, w->err, sizeof w->err))) {
        return rc;
    }
    if ((rc = ps_kv_new(w->ctx, &w->link, w->view, &w->kv, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    if ((rc = s_kv_tensors(w)) != 0) {
        snprintf(w->err, sizeof w->err, "out of memory");
        return rc;
    }
    if (j->mode == PS_MODE_ALLREDUCE) {
        if ((rc = s_ring_start(w)) != 0) {
            return rc;
        }
        if (cfg->overlap && (rc = s_overlap_start(w)) != 0) {
            return rc;
        }
    } else if (cfg->overlap && (j->mode == PS_MODE_SYNC || j->mode == PS_MODE_SSP)) {
        ps_model_set_grad_ready(w->model, s_push_ready, w);
    }
    /* A worker joining a running job pulls the parameters of its first step
     * (start_step, agreed with the servers): no INIT, and the others are
     * long past the start barrier. */
    if (w->view->joining) {
        ps_log_info("joining the running job at step %lld", (long long)w->view->start_step);
        return 0;
    }
    /* A resumed job's servers load their shards from the checkpoint. */
    if (j->mode != PS_MODE_ALLREDUCE && w->rank == 0 && !w->view->resume_parts) {
        s_init_params(w);
        rc = s_wait(w, ps_kv_init(w->kv, 0, P, ps_model_params(w->model)),
                    "initialising the servers");
        if (rc != 0) {
            return rc;
        }
    }
    double tb = ps_now();
    rc = ps_kv_barrier(w->kv, "init");
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "start barrier failed: %s", ps_kv_error(w->kv));
    }
    w->done.wait_seconds += ps_now() - tb;
    return rc;
}

/* Sends the final report, with the bytes on the wire so far by message type. */
static int s_finish(ps_worker_t *w)
{
    ps_ctx_bytes(w->ctx, w->done.bytes.sent, w->done.bytes.received);
    return ps_kv_finish(w->kv, &w->done);
}

int ps_worker_run(const ps_worker_config_t *cfg)
{
    ps_worker_t w = {.cfg = cfg};
    atomic_init(&w.stopping, 0);
    w.view = calloc(1, sizeof *w.view);
    int rc = w.view ? ps_ratelog_new(&w.nonfinite_log, PS_RATELOG_PERIOD) : PS_ENOMEM;
    rc = rc ? rc : ps_ctx_new(&w.ctx);
    rc = rc ? rc
            : ps_curve_secure_ctx(w.ctx, cfg->secure, cfg->keys, PS_ROLE_WORKER, w.err,
                                  sizeof w.err);
    rc = rc ? rc : ps_trace_open(cfg->trace, cfg->trace_steps, cfg->trace_kib, w.err,
                                 sizeof w.err);
    rc = rc ? rc : ps_worker_obs_new(cfg->metrics_bind, &w.obs, w.err, sizeof w.err);
    if (rc == 0) {
        rc = s_start(&w);
    }
    if (rc == 0) {
        rc = s_train(&w, 0);
    }
    /* A server replaced after our last step rolls us back to train again
     * (async: nothing rolls back; the DONE is sent again). */
    while (rc == 0 && (rc = s_finish(&w)) == PS_EAGAIN) {
        int64_t step;
        rc = ps_job_is_stepped(&w.job) ? s_train(&w, 1) : (ps_kv_rollback(w.kv, &step), 0);
    }
    if (rc != 0 && !w.err[0]) {
        snprintf(w.err, sizeof w.err, "%s", ps_kv_error(w.kv));
    }
    if (rc != 0) {
        ps_log_err("%s", w.err[0] ? w.err : ps_strerror(rc));
        if (w.kv) {
            ps_kv_abort_with(w.kv, rc, w.err);
        } else {
            ps_link_abort_with(w.link, rc, w.err);
        }
    }
    atomic_store(&w.stopping, 1);
    ps_overlap_destroy(&w.overlap); /* before the ring it borrows */
    ps_ring_destroy(&w.ring);
    ps_kv_destroy(&w.kv);
    ps_link_destroy(&w.link);
    if (ps_ctx_refused(w.ctx)) { /* the ring's socket: a worker has no report */
        ps_log_warn("refused %llu connections without this job's keys",
                    (unsigned long long)ps_ctx_refused(w.ctx));
    }
    ps_ctx_destroy(&w.ctx);
    ps_model_destroy(&w.model);
    ps_dataset_fini(&w.train);
    ps_dataset_fini(&w.test);
    ps_safetensors_destroy(&w.init);
    ps_ratelog_destroy(&w.nonfinite_log);
    ps_trace_close();
    ps_worker_obs_destroy(&w.obs);
    free(w.order);
    free(w.state);
    free(w.sums);
    free(w.view);
    return rc == 0 ? 0 : 1;
}

int ps_worker_evaluate(const ps_worker_config_t *cfg)
{
    ps_safetensors_t *st = NULL;
    ps_model_t *model = NULL;
    ps_dataset_t test = {0};
    const ps_kernels_t *k = NULL;
    char err[512] = "", device[256];
    const char *name = NULL;
    int correct = 0, rc;
    float loss = 0;
    if ((rc = ps_safetensors_read(cfg->evaluate, &st, err, sizeof err)) != 0) {
        goto done;
    }
    if (!(name = ps_model_name_of(st))) {
        snprintf(err, sizeof err, "%s: its tensors are not those of any model we know",
                 cfg->evaluate);
        rc = PS_EINVAL;
        goto done;
    }
    if ((rc = ps_kernels_select(cfg->device, &k, device, sizeof device)) != 0) {
        snprintf(err, sizeof err, "%s", device);
        goto done;
    }
    ps_kernels_set_threads(cfg->threads);
    if ((rc = ps_model_new(name, k, 256, &model)) != 0) {
        snprintf(err, sizeof err, "cannot build model %s: %s", name, ps_strerror(rc));
        goto done;
    }
    char why[200];
    if ((rc = ps_model_load(model, st, why, sizeof why)) != 0) {
        snprintf(err, sizeof err, "%s: %s", cfg->evaluate, why);
        goto done;
    }
    if ((rc = ps_dataset_load(cfg->data_dir, 0, &test, err, sizeof err)) != 0) {
        goto done;
    }
    if ((rc = s_evaluate_set(model, &test, &correct, &loss))) {
        snprintf(err, sizeof err, "evaluation failed: %s", ps_strerror(rc));
        goto done;
    }
    double acc = (double)correct / test.n;
    printf("model=%s test_accuracy=%.6f test_loss=%.6f samples=%d file=%s\n", name, acc, loss,
           test.n, cfg->evaluate);
    fflush(stdout);
    if (cfg->summary) {
        FILE *f = fopen(cfg->summary, "w");
        int bad = !f || fprintf(f,
                                "{\"model\": \"%s\", \"test_accuracy\": %.6f, "
                                "\"test_loss\": %.6f, \"samples\": %d}\n",
                                name, acc, loss, test.n) < 0;
        if ((f && fclose(f) != 0) || bad) {
            snprintf(err, sizeof err, "cannot write the summary to %s", cfg->summary);
            rc = PS_EIO;
        }
    }
done:
    if (rc != 0) {
        ps_log_err("%s", err[0] ? err : ps_strerror(rc));
    }
    ps_dataset_fini(&test);
    ps_model_destroy(&model);
    ps_safetensors_destroy(&st);
    return rc == 0 ? 0 : 1;
}
