/* worker/observe.c - the worker's metrics and its heartbeat report. */
#include "worker/observe.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/http.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/trace.h"
#include "proto/msg.h"

struct ps_worker_obs {
    ps_metrics_t *reg;
    ps_http_t *http;
    ps_metric_t *steps, *samples, *compute, *wait, *pushed, *pulled, *loss, *accuracy,
        *epochs, *step_seconds, *rate;
    /* the loss since the last report, in millionths: summed by the trainer,
     * taken by the reporter */
    _Atomic int64_t loss_micro;
    _Atomic uint64_t loss_n;
    /* the reporter's own (one thread at a time: the link's holder) */
    double last_t;
    double last_steps;
    ps_msg_bytes_metrics_t wire; /* bytes on the wire by type (ps_worker_obs_wire) */
};

static void s_render(void *arg, ps_text_t *out)
{
    ps_metrics_render(((ps_worker_obs_t *)arg)->reg, out);
}

int ps_worker_obs_new(const char *bind, ps_worker_obs_t **out, char *err, size_t errlen)
{
    ps_worker_obs_t *o = calloc(1, sizeof *o);
    *out = NULL;
    if (!o || ps_metrics_new(&o->reg) != 0) {
        free(o);
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    ps_metrics_t *m = o->reg;
    static const double step_bounds[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                         0.1,   0.2,   0.5,   1,    2,    5};
    o->steps = ps_metrics_counter(m, "shardps_worker_steps_total", NULL, "training steps done");
    o->samples = ps_metrics_counter(m, "shardps_worker_samples_total", NULL,
                                    "training samples processed");
    o->rate = ps_metrics_gauge(m, "shardps_worker_steps_per_second", NULL,
                               "steps per second since the last heartbeat");
    o->compute = ps_metrics_counter(m, "shardps_worker_compute_seconds_total", NULL,
                                    "seconds in forward and backward");
    o->wait = ps_metrics_counter(m, "shardps_worker_wait_seconds_total", NULL,
                                 "seconds blocked on pushes, pulls and the ring");
    o->pushed = ps_metrics_counter(m, "shardps_worker_pushed_bytes_total", NULL,
                                   "payload bytes pushed to the servers (allreduce: sent on the ring)");
    o->pulled = ps_metrics_counter(m, "shardps_worker_pulled_bytes_total", NULL,
                                   "payload bytes pulled from the servers (allreduce: received)");
    o->loss = ps_metrics_gauge(m, "shardps_worker_loss", NULL,
                               "mean training loss since the last heartbeat");
    o->accuracy = ps_metrics_gauge(m, "shardps_worker_test_accuracy", NULL,
                                   "worker 0: test accuracy of the last evaluation");
    o->epochs = ps_metrics_gauge(m, "shardps_worker_epochs_evaluated", NULL,
                                 "worker 0: epochs evaluated");
    o->step_seconds = ps_metrics_histogram(m, "shardps_worker_step_seconds", NULL,
                                           "wall seconds of one training step", step_bounds,
                                           (int)(sizeof step_bounds / sizeof step_bounds[0]));
    atomic_init(&o->loss_n, 0);
    atomic_init(&o->loss_micro, 0);
    ps_metric_set(o->accuracy, -1);
    o->last_t = ps_now();
    char bound[96];
    int rc = bind ? ps_http_new(bind, s_render, o, &o->http, bound, sizeof bound, err, errlen)
                  : 0;
    if (rc != 0) {
        ps_worker_obs_destroy(&o);
        return rc;
    }
    if (bind) {
        ps_log_info("metrics on http://%s/metrics", bound);
    }
    *out = o;
    return 0;
}

void ps_worker_obs_destroy(ps_worker_obs_t **op)
{
    ps_worker_obs_t *o = *op;
    if (o) {
        ps_http_destroy(&o->http); /* first: it reads the registry */
        ps_metrics_destroy(&o->reg);
        free(o);
        *op = NULL;
    }
}

/* The heartbeat's report (ps_link_report_fn). */
static void s_report(void *arg, Shardps__MetricsReport *r, ps_text_t *text)
{
    ps_worker_obs_t *o = arg;
    double now = ps_now(), steps = ps_metric_value(o->steps);
    uint64_t n = atomic_exchange(&o->loss_n, 0);
    double sum = (double)atomic_exchange(&o->loss_micro, 0) * 1e-6;
    if (n > 0) {
        ps_metric_set(o->loss, sum / (double)n);
    }
    if (now > o->last_t) {
        ps_metric_set(o->rate, (steps - o->last_steps) / (now - o->last_t));
    }
    o->last_t = now;
    o->last_steps = steps;
    r->step = (int64_t)steps;
    r->samples = (uint64_t)ps_metric_value(o->samples);
    r->loss = ps_metric_value(o->loss);
    r->test_accuracy = ps_metric_value(o->accuracy);
    r->epoch = (int)ps_metric_value(o->epochs);
    r->bytes_pushed = (uint64_t)ps_metric_value(o->pushed);
    r->bytes_pulled = (uint64_t)ps_metric_value(o->pulled);
    ps_msg_bytes_metrics_update(&o->wire);
    ps_metrics_render(o->reg, text);
}

void ps_worker_obs_attach(ps_worker_obs_t *o, ps_link_t *link, int rank)
{
    char tag[16];
    snprintf(tag, sizeof tag, "W%d", rank);
    ps_trace_set_process(tag, ps_link_clock_offset(link));
    ps_link_set_report(link, s_report, o);
}

void ps_worker_obs_wire(ps_worker_obs_t *o, const ps_ctx_t *ctx)
{
    ps_msg_bytes_metrics_init(&o->wire, o->reg, "worker", ctx);
}

void ps_worker_obs_step(ps_worker_obs_t *o, int64_t steps, int samples, double compute,
                        double wait, double loss, uint64_t pushed, uint64_t pulled)
{
    ps_metric_set(o->steps, (double)steps);
    ps_metric_add(o->samples, samples);
    ps_metric_add(o->compute, compute);
    ps_metric_add(o->wait, wait);
    ps_metric_set(o->pushed, (double)pushed);
    ps_metric_set(o->pulled, (double)pulled);
    atomic_fetch_add(&o->loss_micro, (int64_t)(loss * 1e6));
    atomic_fetch_add(&o->loss_n, 1);
    ps_metric_observe(o->step_seconds, compute + wait);
}

void ps_worker_obs_epoch(ps_worker_obs_t *o, int epochs, double accuracy)
{
    ps_metric_set(o->epochs, epochs);
    ps_metric_set(o->accuracy, accuracy);
}

ps_worker_progress_t ps_worker_progress_start(double period, int64_t steps_per_epoch,
                                              int64_t total, double samples_per_step)
{
    return (ps_worker_progress_t){period, steps_per_epoch, total, samples_per_step, ps_now(),
                                  0};
}

void ps_worker_progress_log(ps_worker_progress_t *p, int epoch, int64_t t, double mean_loss,
                            int64_t steps)
{
    const int64_t spe = p->steps_per_epoch, total = p->total;
    const double now = ps_now();
    if (now - p->last < p->period && t % spe != 0 && t != total) {
        return;
    }
    const int64_t shown = total < spe ? total : spe; /* one epoch's steps, as this job runs */
    const double dt = now - p->last, dsteps = (double)(steps - p->last_steps);
    char eta[32] = "";
    if (dsteps > 0 && t < total) {
        snprintf(eta, sizeof eta, " eta=%.0fs", (double)(total - t) * dt / dsteps);
    }
    ps_log_info("epoch=%d/%lld step=%lld/%lld loss=%.4f samples_per_sec=%.0f%s", epoch + 1,
                (long long)((total + spe - 1) / spe), (long long)(t - (int64_t)epoch * spe),
                (long long)shown, mean_loss, dsteps * p->samples_per_step / dt, eta);
    p->last = now;
    p->last_steps = steps;
}
