/*
 * worker/worker.c - one worker: its start-up, the step loop, the outputs
 * at the end and the teardown. It owns the worker's state and reaches each
 * part of a step through that part's own interface: the model, its data and
 * a step's compute (worker/step.h), the rounds with the servers
 * (worker/rounds.h) or the ring (worker/allreduce.h), what non-finite
 * values do (worker/nonfinite.h), evaluations (worker/evaluate.h) and the
 * recovery after a failover (worker/recover.h).
 *
 * The loop reads top-down as its stages: an epoch's start (its sample
 * order) and end (worker 0 evaluates), a step (batch, compute, exchange)
 * and what follows it (the next step, --eval-every, the progress line).
 *
 * Overlap (--overlap 1): in allreduce a communication thread
 * (worker/overlap.c) owns the ring during each step, summing the last
 * gradient buckets while backward still produces the earlier layers; the
 * ring's check also fails once this worker is shutting down, so the thread
 * never outlives a failed step. In sync and ssp the same flag pushes each
 * layer's gradients during backward (worker/rounds.c).
 */
#include "worker/worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/safetensors.h"
#include "common/trace.h"
#include "kernels/device.h"
#include "kernels/threads.h"
#include "proto/addr.h"
#include "proto/curve.h"
#include "proto/link.h"
#include "worker/allreduce.h"
#include "worker/evaluate.h"
#include "worker/kv.h"
#include "worker/nonfinite.h"
#include "worker/observe.h"
#include "worker/preflight.h"
#include "worker/recover.h"
#include "worker/rounds.h"
#include "worker/step.h"

typedef struct {
    const ps_worker_config_t *cfg;
    ps_ctx_t *ctx;
    ps_link_t *link;       /* until the KV client takes it */
    int rank;              /* this worker's rank */
    uint64_t token;        /* this worker's token (RegisterAck), for its ring data */
    ps_job_t job;
    ps_view_t *view;
    const ps_kernels_t *kernels;
    ps_dataset_t train;    /* the training set, read before joining; then the step's */
    ps_safetensors_t *init; /* --init-from: the model file, read before joining */
    ps_step_t *step;       /* the model, its data and a step's compute */
    ps_kv_t *kv;
    ps_rounds_t *rounds;   /* with servers: the rounds of a step; else NULL */
    ps_allreduce_t *ring;  /* allreduce: the ring's side of a step; else NULL */
    ps_nonfinite_t *nonfinite; /* --on-nonfinite */
    ps_evals_t evals;      /* worker 0's evaluations */
    Shardps__Done done;    /* what we report at the end */
    uint64_t bytes[2][PS_BYTE_TYPES]; /* done.bytes_sent, bytes_received: by type */
    ps_worker_obs_t *obs;  /* metrics and the heartbeat's report */
    int left_out;          /* the job ended cleanly before it sent us a view */
    char err[256];
} ps_worker_t;

/* Where the step loop is, over one call of s_train. */
typedef struct {
    int64_t t;         /* the step under way */
    int64_t steps;     /* steps done in this call */
    int epoch;         /* the epoch whose order is drawn; -1: none yet */
    int nsteps;        /* steps done in that epoch */
    double loss_sum;   /* their losses */
    double t0;         /* when the loop started */
    uint64_t sent0, received0; /* the ring's start-up check's bytes, not training's */
    ps_worker_progress_t progress; /* worker 0's progress line */
} s_loop_t;

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
    ps_ctr_job_t *ctr = ps_step_ctr(w->step);
    if (rc == 0 && ctr) {
        rc = ps_ctr_job_dump_rows(ctr, w->kv, f, w->err, sizeof w->err);
    }
    if ((f && fclose(f) != 0) || (rc == PS_EIO && !w->err[0])) {
        snprintf(w->err, sizeof w->err, "cannot write the parameters to %.200s", path);
        rc = PS_EIO;
    }
    return rc;
}

/* After the last step: worker 0's --save-model, and --dump-params. */
static int s_write_outputs(ps_worker_t *w)
{
    const float *params = ps_model_params(ps_step_model(w->step));
    int rc = 0;
    if (w->rank == 0 && w->cfg->save_model) {
        rc = ps_evals_save(&w->evals, &w->job, w->done.steps, params, w->cfg->save_model,
                           w->err, sizeof w->err);
    }
    if (rc == 0 && w->cfg->dump_params) {
        rc = s_dump(w, w->cfg->dump_params, params, w->view->num_params);
    }
    return rc;
}

/* Pads step compute that began at start (the job's clock) and took cpu
 * seconds of this thread: under time dilation so that it lasts as long as
 * undilated (common/clock.h), and the straggler's (--straggler R:F), waits
 * and all, F times that. */
static void s_pad_compute(const ps_job_t *j, int rank, double start, double cpu)
{
    const double factor =
        rank == j->straggler_rank && j->straggler_factor > 1.0 ? j->straggler_factor : 1.0;
    if (factor > 1.0 || ps_dilation > 1.0) {
        ps_clock_pad(start, cpu, factor);
    }
}

/* Payload bytes pushed and pulled so far (allreduce: sent and received on
 * the ring since its start-up check). */
static void s_bytes(const ps_worker_t *w, const s_loop_t *l, uint64_t *pushed,
                    uint64_t *pulled)
{
    if (w->ring) {
        ps_allreduce_bytes(w->ring, pushed, pulled);
        *pushed -= l->sent0;
        *pulled -= l->received0;
    } else {
        ps_kv_bytes(w->kv, pushed, pulled);
    }
}

/* The loop's start: the parameters pulled (allreduce: every worker
 * initialised its own copy), unless a failover's rollback is pending
 * (returned as PS_EAGAIN). Resumed, the data position, the lr schedule and
 * the pull versions all follow from the view's start step. */
static int s_loop_start(ps_worker_t *w, int rolled_back, s_loop_t *l)
{
    int rc = rolled_back ? PS_EAGAIN : 0;
    if (w->rounds && !rolled_back) {
        rc = ps_rounds_whole(w->rounds, 0, w->view->start_step, "pulling the initial weights");
    }
    *l = (s_loop_t){.t = w->view->start_step, .epoch = -1};
    if (w->ring) {
        ps_allreduce_bytes(w->ring, &l->sent0, &l->received0);
    }
    l->t0 = ps_now();
    l->progress = ps_worker_progress_start(w->cfg->progress_seconds, w->view->steps_per_epoch,
                                           w->view->total_steps,
                                           (double)w->view->num_workers * w->job.batch);
    return rc;
}

/* End of an epoch: remember its loss; worker 0 evaluates. */
static int s_end_epoch(ps_worker_t *w, const s_loop_t *l)
{
    w->done.final_loss = l->nsteps ? l->loss_sum / l->nsteps : 0;
    return w->rank == 0 ? ps_evals_at(&w->evals, l->epoch + 1, l->t, ps_now() - l->t0, w->err,
                                      sizeof w->err)
                        : 0;
}

/* Step t's epoch: when t starts a new one, the last one's end and the new
 * one's sample order. */
static int s_epoch(ps_worker_t *w, s_loop_t *l)
{
    const int e = (int)(l->t / w->view->steps_per_epoch);
    int rc;
    if (e == l->epoch) {
        return 0;
    }
    if (l->epoch >= 0 && (rc = s_end_epoch(w, l)) != 0) {
        return rc;
    }
    l->epoch = e;
    ps_step_order(w->step, e);
    l->loss_sum = 0;
    l->nsteps = 0;
    return 0;
}

/* The step after t, in sync (its rows are asked for ahead: ctr_job.h),
 * when it is in the same epoch, before the job's end (first -1: none).
 * Other modes pull at the step's start: in ssp and async a pull sent ahead
 * would be answered at once with older rows. */
static ps_step_next_t s_next_batch(const ps_worker_t *w, int64_t t)
{
    const int64_t spe = w->view->steps_per_epoch;
    const int k = (int)((t + 1) % spe);
    if (!w->rounds || w->job.mode != PS_MODE_SYNC || k == 0 || t + 1 >= w->view->total_steps) {
        return (ps_step_next_t){-1, 0};
    }
    return (ps_step_next_t){(k * w->view->num_workers + w->rank) * w->job.batch,
                            ps_rounds_pull_version(&w->job, t)};
}

/* Step t's compute, the exchange started first (the ring's thread, or the
 * rounds' layer pushes and faults): the loss into *loss, a non-finite one
 * as --on-nonfinite says (then 0, not in the epoch's mean). */
static int s_compute(ps_worker_t *w, const s_loop_t *l, float *loss)
{
    const int64_t t = l->t;
    ps_model_t *m = ps_step_model(w->step);
    int rc = 0;
    if (w->ring) {
        ps_allreduce_begin(w->ring, t);
    } else if ((rc = ps_rounds_begin(w->rounds, t)) != 0) {
        return rc;
    }
    const ps_step_next_t next = s_next_batch(w, t);
    rc = ps_step_compute(w->step, w->kv, t, ps_rounds_pull_version(&w->job, t - 1), w->job.batch,
                         next.first >= 0 ? &next : NULL, loss, w->err, sizeof w->err);
    if (l->steps == 0 && ps_model_graph_error(m) != 0) {
        ps_log_warn("the step could not be recorded as a CUDA graph (%s): queued by hand",
                    ps_strerror(ps_model_graph_error(m)));
    }
    if (rc != 0 || isfinite(*loss)) {
        return rc;
    }
    const uint64_t unpushed = w->rounds ? ps_rounds_unpushed(w->rounds) : w->view->num_params;
    rc = ps_nonfinite_found(w->nonfinite, "the loss", t, ps_model_grads(m), unpushed, w->err,
                            sizeof w->err);
    *loss = 0;
    return rc;
}

/* Step t: its batch, compute and exchange (the ring's sum, or the rounds'
 * push and pull), and what they took. Returns 0, PS_EAGAIN (a failover:
 * the step's work is void) or a failure. */
static int s_step(ps_worker_t *w, const s_loop_t *l, float *loss)
{
    const int64_t t = l->t;
    const int M = w->view->num_workers, b = w->job.batch;
    const int k = (int)(t % w->view->steps_per_epoch);
    const double ts = ps_now();
    ps_trace_step(t);
    ps_step_batch(w->step, (k * M + w->rank) * b, b);
    const double tc = ps_now(), cpu = ps_thread_cpu_seconds();
    int rc = s_compute(w, l, loss);
    if (rc != 0) {
        return rc;
    }
    s_pad_compute(&w->job, w->rank, tc, ps_thread_cpu_seconds() - cpu);
    const double tw = ps_now();
    w->done.compute_seconds += tw - tc;
    rc = w->ring ? ps_allreduce_step(w->ring, t) : ps_rounds_end(w->rounds, t);
    if (rc != 0) {
        return rc;
    }
    const double te = ps_now();
    w->done.wait_seconds += te - tw;
    ps_trace_span(PS_TRACE_WAIT, t, tw, te, 0);
    ps_trace_span(PS_TRACE_STEP, t, ts, te, 0);
    uint64_t pushed, pulled;
    s_bytes(w, l, &pushed, &pulled);
    ps_worker_obs_step(w->obs, l->steps + 1, b, tw - tc, te - tw, *loss, pushed, pulled);
    ps_trace_poll();
    return 0;
}

/* After step t with its loss: the next step (with backup workers the
 * servers' version may be past it), worker 0's --eval-every point and its
 * progress line. */
static int s_next(ps_worker_t *w, s_loop_t *l, float loss)
{
    const int64_t spe = w->view->steps_per_epoch, prev = l->t, every = w->cfg->eval_every;
    l->loss_sum += loss;
    l->nsteps++;
    l->steps++;
    l->t = prev + 1;
    if (w->job.mode == PS_MODE_BACKUP && ps_kv_version(w->kv) > l->t) {
        l->t = ps_kv_version(w->kv);
    }
    if (w->rank != 0) {
        return 0;
    }
    int rc;
    if (every > 0 && l->t / every != prev / every && l->t % spe != 0 &&
        l->t < w->view->total_steps &&
        (rc = ps_evals_at(&w->evals, 0, l->t, ps_now() - l->t0, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    ps_worker_progress_log(&l->progress, (int)(prev / spe), l->t, l->loss_sum / l->nsteps,
                           l->steps);
    return 0;
}

/* The loop's end: the last epoch's, the totals and the outputs. */
static int s_loop_end(ps_worker_t *w, const s_loop_t *l, int rc)
{
    if (rc == 0 && l->epoch >= 0) {
        rc = s_end_epoch(w, l);
    }
    w->done.train_seconds += ps_now() - l->t0;
    w->done.steps += l->steps;
    w->done.samples += l->steps * w->job.batch;
    s_bytes(w, l, &w->done.bytes_pushed, &w->done.bytes_pulled);
    return rc == 0 ? s_write_outputs(w) : rc;
}

/* The step loop. rolled_back: start with a pending failover's rollback (the
 * job ended for this worker, then a server was replaced). */
static int s_train(ps_worker_t *w, int rolled_back)
{
    const ps_recover_t recover = {.job = &w->job, .view = w->view, .rank = w->rank,
                                  .kv = w->kv, .rounds = w->rounds, .evals = &w->evals,
                                  .err = w->err, .errlen = sizeof w->err};
    s_loop_t l;
    int rc = s_loop_start(w, rolled_back, &l);
    while ((rc == 0 && l.t < w->view->total_steps) || rc == PS_EAGAIN) {
        float loss;
        if (rc == PS_EAGAIN) {
            rc = ps_recover(&recover, &l.t);
            l.epoch = -1; /* the order of t's epoch is drawn again */
            continue;
        }
        if ((rc = s_epoch(w, &l)) != 0) {
            return rc;
        }
        if ((rc = s_step(w, &l, &loss)) == PS_EAGAIN) {
            continue; /* a failover: rolled back at the loop's top */
        }
        if (rc != 0 || (rc = s_next(w, &l, loss)) != 0) {
            return rc;
        }
    }
    return s_loop_end(w, &l, rc);
}

/* Tells the client where the model's tensors start (top-k selects per tensor). */
static int s_kv_tensors(ps_worker_t *w)
{
    const ps_model_t *m = ps_step_model(w->step);
    const size_t n = ps_model_num_tensors(m);
    uint64_t *starts = malloc((n ? n : 1) * sizeof *starts);
    if (!starts) {
        return PS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        starts[i] = ps_model_tensor(m, i)->offset;
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

/* Once joined: the job's model, its data and its device, and in allreduce
 * the ring's socket (its endpoint into bound) and a ctr model's table of
 * rows. Reading a click log and building a ring's table take longer than
 * the scheduler's patience with a silent node: heartbeats go on meanwhile.
 * Returns 0 or an error with w->err set. */
static int s_build(ps_worker_t *w, char *bound, size_t bound_cap)
{
    if (ps_link_keepalive_start(w->link) != 0) {
        snprintf(w->err, sizeof w->err, "cannot start the heartbeat thread");
        return PS_ENOMEM;
    }
    const ps_worker_config_t *cfg = w->cfg;
    const ps_step_flags_t step = {cfg->ctr_data, cfg->data_dir, cfg->init_from, cfg->tf32,
                                  cfg->graph, cfg->fuse_dense, cfg->conv_dnn};
    const ps_allreduce_flags_t ring = {cfg->bind, cfg->ring_kib, cfg->allreduce_mpi,
                                       cfg->overlap};
    int rc = ps_step_new(&step, &w->job, w->kernels, w->rank, w->init, &w->train, &w->step,
                         w->err, sizeof w->err);
    if (rc == 0 && w->job.mode == PS_MODE_ALLREDUCE) {
        rc = ps_allreduce_new(w->ctx, &ring, &w->job, ps_step_model(w->step),
                              ps_step_ctr(w->step), bound, bound_cap, w->err, sizeof w->err,
                              &w->ring);
    }
    const double slow = cfg->fault_slow_build;
    if (rc == 0 && slow > 0) {
        ps_sleep(slow);
    }
    char why[256];
    int lost = ps_link_keepalive_stop(w->link, why, sizeof why);
    if (rc == 0 && lost != 0) {
        snprintf(w->err, sizeof w->err, "%s", why);
    }
    return rc ? rc : lost;
}

/* Joins the job: registered, the device announced, the model built and the
 * cluster view received. Returns 0 or an error with w->err set. */
static int s_join(ps_worker_t *w)
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
    char bound[128], endpoint[PS_ENDPOINT_MAX] = "";
    if ((rc = s_build(w, bound, sizeof bound)) != 0) {
        return rc;
    }
    if (w->ring && (rc = ps_addr_announce_route(bound, cfg->advertise, cfg->scheduler, endpoint,
                                                sizeof endpoint, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    Shardps__ModelInfo info = SHARDPS__MODEL_INFO__INIT;
    info.num_params = ps_model_num_params(ps_step_model(w->step));
    info.train_samples = (uint64_t)ps_step_samples(w->step);
    info.endpoint = endpoint;
    rc = ps_link_wait_view(w->link, &info, w->view, w->err, sizeof w->err);
    w->left_out = rc == PS_ENOENT; /* a joiner the job ended without */
    if (rc != 0) {
        return rc;
    }
    if (w->view->num_params != info.num_params) {
        snprintf(w->err, sizeof w->err, "the view has %llu parameters, our model %llu",
                 (unsigned long long)w->view->num_params,
                 (unsigned long long)info.num_params);
        return PS_EPROTO;
    }
    return 0;
}

/* Everything up to the first step: joined, the KV client and the step's
 * exchange (the rounds, or the ring) ready, the parameters initialised and
 * the start barrier passed. Returns 0 or an error with w->err set. */
static int s_start(ps_worker_t *w)
{
    const ps_job_t *j = &w->job;
    int rc = s_join(w);
    if (rc != 0) {
        return rc;
    }
    if (w->view->preflight && w->view->num_servers > 0 &&
        (rc = ps_preflight_run(w->ctx, w->link, w->view, w->rank, w->err, sizeof w->err))) {
        return rc;
    }
    if ((rc = ps_kv_new(w->ctx, &w->link, w->view, &w->kv, w->err, sizeof w->err)) != 0) {
        return rc;
    }
    ps_kv_set_local_chunks(w->kv, w->cfg->local_chunks);
    if ((rc = s_kv_tensors(w)) != 0) {
        snprintf(w->err, sizeof w->err, "out of memory");
        return rc;
    }
    ps_model_t *model = ps_step_model(w->step);
    w->evals.model = model;
    w->evals.test = ps_step_test(w->step);
    w->evals.ctr = ps_step_ctr(w->step);
    w->evals.kv = w->kv;
    if (w->ring) {
        ps_step_init_params(w->step, w->init); /* the same on every worker: the ring checks */
        if ((rc = ps_allreduce_start(w->ring, w->view, w->kv, w->rank, w->token)) != 0) {
            return rc;
        }
    } else {
        const ps_rounds_config_t rounds = {
            .overlap = w->cfg->overlap, .fault_nan_push = w->cfg->fault_nan_push,
            .fault_huge_push = w->cfg->fault_huge_push, .job = j, .view = w->view,
            .rank = w->rank, .kv = w->kv, .model = model, .ctr = w->evals.ctr,
            .nonfinite = w->nonfinite, .err = w->err, .errlen = sizeof w->err};
        if ((rc = ps_rounds_new(&rounds, &w->rounds)) != 0) {
            snprintf(w->err, sizeof w->err, "out of memory");
            return rc;
        }
    }
    /* A worker joining a running job pulls the parameters of its first step
     * (start_step, agreed with the servers): no INIT, and the others are
     * long past the start barrier. */
    if (w->view->joining) {
        ps_log_info("joining the running job at step %lld", (long long)w->view->start_step);
        return 0;
    }
    /* A resumed job's servers load their shards from the checkpoint. */
    if (w->rounds && w->rank == 0 && !w->view->resume_parts) {
        ps_step_init_params(w->step, w->init);
        if ((rc = ps_rounds_whole(w->rounds, 1, 0, "initialising the servers")) != 0) {
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

/* Sends the final report: the evaluations, and the bytes on the wire so far
 * by message type. */
static int s_finish(ps_worker_t *w)
{
    ps_evals_report(&w->evals, &w->done);
    ps_ctx_bytes(w->ctx, w->bytes[0], w->bytes[1]);
    w->done.n_bytes_sent = ps_codec_byte_types(w->bytes[0]);
    w->done.n_bytes_received = ps_codec_byte_types(w->bytes[1]);
    return ps_kv_finish(w->kv, &w->done);
}

/* The job's end for this worker: the error line and the scheduler told of
 * a failure, then everything torn down in the order each part borrows the
 * others. */
static int s_end(ps_worker_t *w, int rc)
{
    if (w->left_out) { /* nothing failed: there was no step left for us */
        ps_log_warn("the job ended before this worker took part in it");
        rc = 0;
    }
    if (rc != 0 && !w->err[0]) {
        snprintf(w->err, sizeof w->err, "%s", ps_kv_error(w->kv));
    }
    if (rc != 0) {
        ps_log_err("%s", w->err[0] ? w->err : ps_strerror(rc));
        if (w->kv) {
            ps_kv_abort_with(w->kv, rc, w->err);
        } else {
            ps_link_abort_with(w->link, rc, w->err);
        }
    }
    ps_allreduce_stop(w->ring); /* the ring's thread asks the KV client */
    ps_rounds_destroy(&w->rounds);
    ps_kv_destroy(&w->kv);
    ps_link_destroy(&w->link);
    ps_allreduce_destroy(&w->ring, rc != 0); /* MPI's after the scheduler was told */
    if (ps_ctx_refused(w->ctx)) { /* the ring's socket: a worker has no report */
        ps_log_warn("refused %llu connections without this job's keys",
                    (unsigned long long)ps_ctx_refused(w->ctx));
    }
    ps_ctx_destroy(&w->ctx);
    ps_step_destroy(&w->step);
    ps_dataset_fini(&w->train);
    ps_safetensors_destroy(&w->init);
    ps_nonfinite_destroy(&w->nonfinite);
    ps_trace_close();
    ps_worker_obs_destroy(&w->obs);
    free(w->view);
    return rc == 0 ? 0 : 1;
}

int ps_worker_run(const ps_worker_config_t *cfg)
{
    ps_worker_t w = {.cfg = cfg, .done = SHARDPS__DONE__INIT};
    w.done.bytes_sent = w.bytes[0];
    w.done.bytes_received = w.bytes[1];
    w.view = calloc(1, sizeof *w.view);
    int rc = w.view ? ps_nonfinite_new(cfg->skip_nonfinite, &w.nonfinite) : PS_ENOMEM;
    rc = rc ? rc : ps_ctx_new(&w.ctx);
    rc = rc ? rc
            : ps_curve_secure_ctx(w.ctx, cfg->secure, cfg->keys, PS_ROLE_WORKER, w.err,
                                  sizeof w.err);
    rc = rc ? rc : ps_trace_open(cfg->trace, cfg->trace_steps, cfg->trace_kib, w.err,
                                 sizeof w.err);
    rc = rc ? rc : ps_worker_obs_new(cfg->metrics_bind, &w.obs, w.err, sizeof w.err);
    w.evals = (ps_evals_t){.nonfinite = w.nonfinite, .obs = w.obs};
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
    return s_end(&w, rc);
}
