/*
 * worker/worker.c - the training loop of one worker: start-up, the step
 * loop, and a step's push and pull (the ring's side of a step is
 * worker/allreduce.c, evaluations worker/evaluate.c, building the model
 * worker/build.c; the state they share is worker/worker_impl.h).
 *
 * Global sample order: all workers draw the same permutation per epoch from
 * the seed; at step k worker r of M takes samples [(k*M + r)*b, +b), so sync
 * training with M workers of batch b sees exactly the batches of one worker
 * with batch M*b (docs/design/models.md).
 *
 * Overlap (--overlap 1): in allreduce a communication thread
 * (worker/overlap.c) owns the ring during each step, summing the last
 * gradient buckets while backward still produces the earlier layers; the
 * ring's check also fails once this worker is shutting down, so the thread
 * never outlives a failed step. In sync and ssp the same flag pushes each
 * layer's gradients to the servers as soon as backward has finished them
 * (last layer first): the transfer overlaps the rest of backward, and a
 * server sums a worker's parts as one push (the sums, so the parameters, are
 * bitwise those of one whole push). async applies every push as an update,
 * and sync:k/n counts pushes, so both keep one push per step.
 */
#include "worker/worker_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/trace.h"
#include "kernels/device.h"
#include "kernels/threads.h"
#include "proto/addr.h"
#include "proto/curve.h"
#include "worker/faults.h"
#include "worker/preflight.h"

/* Writes the parameters as raw little-endian float32 to pattern, its first
 * "%d" replaced by rank; a model with rows then the rows of every key of
 * its click log (ctr_job.h). Returns 0, or a failure with w->err set. */
static int s_dump(ps_worker_t *w, const char *pattern, const float *p, size_t n)
{
    char path[4096];
    const char *at = strstr(pattern, "%d");
    if (at) {
        snprintf(path, sizeof path, "%.*s%d%s", (int)(at - pattern), pattern, w->rank, at + 2);
    } else {
        snprintf(path, sizeof path, "%s", pattern);
    }
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(p, sizeof(float), n, f) == n ? 0 : PS_EIO;
    if (rc == 0 && w->ctr) {
        rc = ps_ctr_job_dump_rows(w->ctr, w->kv, f, w->err, sizeof w->err);
    }
    if ((f && fclose(f) != 0) || (rc == PS_EIO && !w->err[0])) {
        snprintf(w->err, sizeof w->err, "cannot write the parameters to %.200s", path);
        rc = PS_EIO;
    }
    return rc;
}

/* Waits for a request; on failure leaves the reason in w->err. A request
 * refused with PS_ECLOSED found the job already gone (scheduler lost, job
 * aborted): ps_kv_error() holds why, as for a failed wait. */
int ps_worker_wait(ps_worker_t *w, int handle, const char *what)
{
    int rc = handle < 0 ? handle : ps_kv_wait(w->kv, handle);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "%s failed: %s", what,
                 handle < 0 && handle != PS_ECLOSED ? ps_strerror(rc) : ps_kv_error(w->kv));
    }
    return rc;
}

int ps_worker_whole(ps_worker_t *w, int init, int64_t min_version, const char *what)
{
    float *params = ps_model_params(w->model);
    const int S = w->view->num_servers;
    int rc = 0;
    for (int k = 0; k < S && rc == 0; k++) {
        const ps_server_info_t *s = &w->view->servers[(w->rank + k) % S];
        rc = ps_worker_wait(w,
                            init ? ps_kv_init(w->kv, s->begin, s->end, params + s->begin)
                                 : ps_kv_pull(w->kv, s->begin, s->end, params + s->begin,
                                              min_version),
                            what);
    }
    return rc;
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
    return w->rank == 0 ? ps_worker_evaluate_at(w, epoch + 1, step, ps_now() - t0) : 0;
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
 * (ps_worker_push_pull). */
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

/* Pushes step t's gradients and pulls the weights for the next step: what
 * the hook has not pushed yet goes now, then every handle is waited for. */
int ps_worker_push_pull(ps_worker_t *w, int64_t t, float *params)
{
    if (w->push_rc) { /* the job is gone or a request was refused */
        return ps_worker_wait(w, w->push_rc, "push");
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
        rc = ps_worker_wait(w, w->push_h[i], "push");
    }
    rc = rc ? rc : ps_worker_wait(w, hl, "pull");
    ps_trace_span_end(&pull);
    return rc;
}

/* Payload bytes pushed and pulled so far (allreduce: sent and received on
 * the ring since its start-up check, which sent sent0 and received received0). */
static void s_bytes(ps_worker_t *w, uint64_t sent0, uint64_t received0, uint64_t *pushed,
                    uint64_t *pulled)
{
    if (w->mpi) {
        ps_ring_mpi_bytes(w->mpi, pushed, pulled);
        *pushed -= sent0;
        *pulled -= received0;
    } else if (w->ring) {
        ps_ring_bytes(w->ring, pushed, pulled);
        *pushed -= sent0;
        *pulled -= received0;
    } else {
        ps_kv_bytes(w->kv, pushed, pulled);
    }
}

/* After the last step: worker 0's --save-model, and --dump-params. */
static int s_write_outputs(ps_worker_t *w, const float *params)
{
    int rc = 0;
    if (w->rank == 0 && w->cfg->save_model) {
        rc = ps_worker_save_model(w, params);
    }
    if (rc == 0 && w->cfg->dump_params) {
        rc = s_dump(w, w->cfg->dump_params, params, w->view->num_params);
    }
    return rc;
}

/* A step's batch: its indices for the device-resident set, or its samples
 * gathered and normalised on the host. */
static void s_batch(ps_worker_t *w, int first, int b)
{
    if (w->ctr) {
        ps_ctr_job_batch(w->ctr, w->order, (size_t)first, b); /* b fits: the model's */
    } else if (w->resident) {
        memcpy(ps_model_batch_idx(w->model), w->order + first, (size_t)b * sizeof *w->order);
    } else {
        ps_data_gather(&w->train, w->order, first, b, w->x, w->y);
    }
}

/* Samples of the training set. */
static int s_train_samples(const ps_worker_t *w)
{
    return w->ctr ? (int)ps_ctr_job_train_samples(w->ctr) : w->train.n;
}

/* Micro-batch j of mb samples of the step's batch: the model's step on it. */
static int s_train_micro(ps_worker_t *w, int j, int mb, float *loss)
{
    if (w->resident) {
        uint32_t *idx = ps_model_batch_idx(w->model); /* the slices before j are done */
        memmove(idx, idx + (size_t)j * mb, (size_t)mb * sizeof *idx);
        return ps_model_train_step_idx(w->model, mb, loss);
    }
    const size_t at = (size_t)j * mb;
    return ps_model_train_step(w->model, w->x + at * PS_MODEL_IN_H * PS_MODEL_IN_W, w->y + at,
                               mb, loss);
}

/* Step t's compute: the model's training step (with rows: pulled before it,
 * their gradient's push started after it, its handle in *rows_push). With
 * --micro-batch, the batch's micro-batches one after another, their
 * gradients summed in order as a server sums workers' (the servers divide
 * by them all). Returns 0, PS_EAGAIN (a failover) or a failure with w->err
 * set. */
static int s_compute(ps_worker_t *w, int64_t t, int b, float *loss, int *rows_push)
{
    *rows_push = -1;
    if (w->ctr) {
        return ps_ctr_job_step(w->ctr, w->kv, t, s_pull_version(&w->job, t - 1), loss,
                               rows_push, w->err, sizeof w->err);
    }
    const int k = ps_job_micro_batches(&w->job);
    const size_t P = ps_model_num_params(w->model);
    float *grads = ps_model_grads(w->model), sum = 0;
    for (int j = 0; j < k; j++) {
        float l;
        int rc = s_train_micro(w, j, b / k, &l);
        if (rc != 0) {
            snprintf(w->err, sizeof w->err, "training step failed: %s", ps_strerror(rc));
            return rc;
        }
        if (k > 1) {
            ps_optim_accumulate(w->micro_sum, grads, 1.0f, P, j == 0);
        }
        sum += l;
    }
    if (k > 1) {
        memcpy(grads, w->micro_sum, P * sizeof *grads);
    }
    *loss = sum / (float)k;
    return 0;
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
        rc = ps_worker_whole(w, 0, w->view->start_step, "pulling the initial weights");
    }
    uint64_t ring_sent0 = 0, ring_received0 = 0; /* the start-up check's, not training's */
    if (ring) {
        s_bytes(w, 0, 0, &ring_sent0, &ring_received0);
    }
    /* Resumed: the data position, the lr schedule and the pull versions all
     * follow from the step. */
    int64_t t = w->view->start_step, steps = 0;
    int epoch = -1, nsteps = 0;
    double loss_sum = 0, t0 = ps_now();
    ps_worker_progress_t progress = ps_worker_progress_start(
        w->cfg->progress_seconds, spe, total, (double)M * b);
    while ((rc == 0 && t < total) || rc == PS_EAGAIN) {
        if (rc == PS_EAGAIN) {
            rc = ps_worker_rollback(w, &t);
            epoch = -1; /* the order of t's epoch is drawn again */
            continue;
        }
        const int e = (int)(t / spe), k = (int)(t % spe);
        if (e != epoch) {
            if (epoch >= 0 && (rc = s_end_epoch(w, epoch, t, loss_sum, nsteps, t0)) != 0) {
                return rc;
            }
            epoch = e;
            ps_data_order(j->seed, e, w->order, s_train_samples(w));
            loss_sum = 0;
            nsteps = 0;
        }
        const double ts = ps_now();
        ps_trace_step(t);
        s_batch(w, (k * M + rank) * b, b);
        double tc = ps_now();
        float loss;
        if (w->overlap) {
            ps_overlap_begin(w->overlap, t);
        }
        w->push_step = t;
        w->push_end = P;
        w->npush = 0;
        w->push_rc = 0;
        if (!ring && (rc = ps_fault_push(w->kv, w->cfg, t, w->err, sizeof w->err)) != 0) {
            return rc;
        }
        int rows_push;
        rc = s_compute(w, t, b, &loss, &rows_push);
        if (steps == 0 && ps_model_graph_error(w->model) != 0) {
            ps_log_warn("the step could not be recorded as a CUDA graph (%s): queued by hand",
                        ps_strerror(ps_model_graph_error(w->model)));
        }
        if (rc == PS_EAGAIN) {
            continue; /* a failover: rolled back at the loop's top */
        }
        if (rc != 0) {
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
            if ((rc = ps_allreduce_step(w, t)) != 0) {
                return rc;
            }
        } else if ((rc = ps_worker_push_pull_again(w, t, params, &rows_push)) != 0 ||
                   (rows_push >= 0 && (rc = ps_worker_wait(w, rows_push, "pushing rows")))) {
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
            (rc = ps_worker_evaluate_at(w, 0, t, ps_now() - t0)) != 0) {
            return rc;
        }
        if (rank == 0) {
            ps_worker_progress_log(&progress, e, t, loss_sum / nsteps, steps);
        }
    }
    if (rc == 0 && epoch >= 0) {
        rc = s_end_epoch(w, epoch, t, loss_sum, nsteps, t0);
    }
    w->done.train_seconds += ps_now() - t0;
    w->done.steps += steps;
    w->done.samples += steps * b;
    s_bytes(w, ring_sent0, ring_received0, &w->done.bytes_pushed, &w->done.bytes_pulled);
    return rc == 0 ? s_write_outputs(w, params) : rc;
}

void ps_worker_init_params(ps_worker_t *w)
{
    if (w->init) {
        ps_model_load(w->model, w->init, w->err, sizeof w->err); /* checked in s_start */
    } else {
        ps_model_init_params(w->model, w->job.seed);
    }
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

/* What a worker checks and sets up on its own, before joining: the model
 * files, the dataset, the device (into device and gpu). Returns 0 or an
 * error with w->err set. */
static int s_prepare(ps_worker_t *w, char device[256], char gpu[200])
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
    if (cfg->ctr_data) { /* read once the job's model is known: a bad path fails now */
        if ((rc = ps_file_check_readable(cfg->ctr_data, w->err, sizeof w->err)) != 0) {
            return rc;
        }
    } else if ((rc = ps_dataset_load(cfg->data_dir, 1, &w->train, w->err, sizeof w->err))) {
        return rc;
    }
    /* The device is chosen before joining, so a bad --device fails without
     * touching the job, but announced after: a worker that cannot start
     * prints its one error line and nothing else. */
    gpu[0] = '\0';
    if ((rc = ps_kernels_select(cfg->device, &w->kernels, device, 256)) != 0 ||
        (rc = ps_device_use(w->kernels, cfg->gpu, gpu, 200)) != 0) {
        snprintf(w->err, sizeof w->err, "%s", gpu[0] ? gpu : device);
        return rc;
    }
    if (cfg->tf32 && w->kernels->host_is_backend) {
        snprintf(w->err, sizeof w->err, "--tf32 1: the %s backend has no TF32 mode",
                 w->kernels->name);
        return PS_EINVAL;
    }
    ps_kernels_set_threads(cfg->threads);
    return 0;
}

/* Everything up to the first step. Returns 0 or an error with w->err set. */
static int s_start(ps_worker_t *w)
{
    const ps_worker_config_t *cfg = w->cfg;
    char device[256], gpu[200];
    int rc = s_prepare(w, device, gpu);
    if (rc != 0) {
        return rc;
    }
    ps_secret_t secret;
    if ((rc = ps_link_read_secret(cfg->secret_file, &secret, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    const ps_link_ident_t ident = {cfg->job_id, cfg->job_hash, &secret};
    rc = ps_link_join(&w->link, w->ctx, cfg->scheduler, PS_ROLE_WORKER, cfg->rank, NULL,
                      &ident, cfg->connect_timeout, cfg->peer_timeout, &w->job, w->err,
                      sizeof w->err);
    explicit_bzero(&secret, sizeof secret);
    if (rc != 0) {
        return rc;
    }
    w->rank = ps_link_rank(w->link);
    w->token = ps_link_token(w->link);
    ps_link_set_grace(w->link, cfg->scheduler_grace);
    ps_log_set_role("W", w->rank);
    ps_worker_obs_wire(w->obs, w->ctx);
    ps_worker_obs_attach(w->obs, w->link, w->rank);
    ps_log_info("device=%s%s%s", device, gpu[0] ? " " : "", gpu);
    if (cfg->gpu >= 0 && !gpu[0]) {
        ps_log_warn("--gpu %d: no GPU in use (device=%s)", cfg->gpu, device);
    }
    const ps_job_t *j = &w->job;
    if ((rc = ps_worker_build(w)) != 0) {
        return rc;
    }
    char endpoint[PS_ENDPOINT_MAX] = "";
    Shardps__ModelInfo info = SHARDPS__MODEL_INFO__INIT;
    info.num_params = ps_model_num_params(w->model);
    info.train_samples = (uint64_t)s_train_samples(w);
    info.endpoint = endpoint;
    if (j->mode == PS_MODE_ALLREDUCE) {
        char bound[128];
        /* no ring message is longer than the model (or its rows): a longer frame is dropped */
        rc = ps_ring_new(w->ctx, cfg->bind, ps_allreduce_max_floats(w), &w->ring, bound,
                         sizeof bound, w->err, sizeof w->err);
        if (rc != 0) {
            return rc;
        }
        rc = ps_addr_announce_route(bound, cfg->advertise, cfg->scheduler, endpoint,
                                    sizeof endpoint, w->err, sizeof w->err);
        if (rc != 0) {
            return rc;
        }
    }
    uint64_t P = info.num_params;
    rc = ps_link_wait_view(w->link, &info, w->view, w->err, sizeof w->err);
    w->left_out = rc == PS_ENOENT; /* a joiner the job ended without */
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
        if ((rc = ps_allreduce_start(w)) != 0) {
            return rc;
        }
        if (cfg->overlap && !w->mpi && (rc = ps_allreduce_overlap_start(w)) != 0) {
            return rc;
        }
    } else if (cfg->overlap && ps_job_chunked(j) && ps_job_micro_batches(j) == 1) {
        /* micro-batches push their sum: nothing is final before the last */
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
        ps_worker_init_params(w);
        rc = ps_worker_whole(w, 1, 0, "initialising the servers");
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
    ps_ctx_bytes(w->ctx, w->bytes[0], w->bytes[1]);
    w->done.n_bytes_sent = ps_codec_byte_types(w->bytes[0]);
    w->done.n_bytes_received = ps_codec_byte_types(w->bytes[1]);
    return ps_kv_finish(w->kv, &w->done);
}

int ps_worker_run(const ps_worker_config_t *cfg)
{
    ps_worker_t w = {.cfg = cfg, .done = SHARDPS__DONE__INIT};
    w.done.test_accuracy = w.accuracy;
    w.done.test_auc = w.auc;
    w.done.test_logloss = w.logloss;
    w.done.bytes_sent = w.bytes[0];
    w.done.bytes_received = w.bytes[1];
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
        /* a takeover rolls nothing back: the DONE goes again */
        rc = ps_job_is_stepped(&w.job) && !ps_kv_takeover_pending(w.kv)
                 ? s_train(&w, 1)
                 : (ps_kv_rollback(w.kv, &step), 0);
    }
    if (w.left_out) { /* nothing failed: there was no step left for us */
        ps_log_warn("the job ended before this worker took part in it");
        rc = 0;
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
    ps_ring_rows_destroy(&w.rows); /* after the ring that may hold its frames */
    ps_kv_destroy(&w.kv);
    ps_link_destroy(&w.link);
    ps_ring_mpi_destroy(&w.mpi, rc != 0); /* after the scheduler was told */
    if (ps_ctx_refused(w.ctx)) { /* the ring's socket: a worker has no report */
        ps_log_warn("refused %llu connections without this job's keys",
                    (unsigned long long)ps_ctx_refused(w.ctx));
    }
    ps_ctx_destroy(&w.ctx);
    ps_ctr_job_destroy(&w.ctr); /* before the model it borrows */
    ps_model_destroy(&w.model);
    ps_dataset_fini(&w.train);
    ps_dataset_fini(&w.test);
    ps_safetensors_destroy(&w.init);
    ps_ratelog_destroy(&w.nonfinite_log);
    ps_trace_close();
    ps_worker_obs_destroy(&w.obs);
    free(w.order);
    free(w.micro_sum);
    free(w.state);
    free(w.sums);
    free(w.view);
    return rc == 0 ? 0 : 1;
}

