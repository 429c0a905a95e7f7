/*
 * worker/rounds.c - a worker's rounds with the servers (see rounds.h).
 *
 * With --overlap 1 in sync and ssp, each layer's gradients are pushed as
 * soon as backward has finished them (last layer first), in a push-pull of
 * the layer's keys: the transfer overlaps the rest of backward, the layer's
 * new values come down as soon as the servers have them, and a server sums
 * a worker's parts as one push (the sums, so the parameters, are bitwise
 * those of one whole push). Backward reads no layer's parameters after it
 * finished that layer's gradients, so they may change under it.
 * async applies every push as an update, and sync:k/n counts pushes, so
 * both keep one push per step.
 */
#include "worker/rounds.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/log.h"
#include "common/trace.h"
#include "worker/faults.h"

/* Most pushes of one step (layer by layer, then the rest). */
enum { S_MAX_PUSHES = 16 };

struct ps_rounds {
    ps_rounds_config_t c;  /* what it borrows */
    int64_t push_step;     /* the step being pushed layer by layer */
    uint64_t push_end;     /* keys [push_end, P) are pushed already */
    int push_h[S_MAX_PUSHES]; /* their handles */
    int npush;
    int push_rc;           /* the first refused push, or 0 */
};

static void s_push_ready(void *arg, size_t from);

int ps_rounds_new(const ps_rounds_config_t *c, ps_rounds_t **out)
{
    ps_rounds_t *r = calloc(1, sizeof *r);
    if (!r) {
        return PS_ENOMEM;
    }
    r->c = *c;
    r->push_end = c->view->num_params;
    const ps_job_t *j = c->job;
    if (c->overlap && ps_job_chunked(j) && ps_job_micro_batches(j) == 1) {
        /* micro-batches push their sum: nothing is final before the last */
        ps_model_set_grad_ready(c->model, s_push_ready, r);
    }
    *out = r;
    return 0;
}

void ps_rounds_destroy(ps_rounds_t **r)
{
    if (r && *r) {
        free(*r);
        *r = NULL;
    }
}

int64_t ps_rounds_pull_version(const ps_job_t *j, int64_t t)
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

/* A request refused with PS_ECLOSED found the job already gone (scheduler
 * lost, job aborted): ps_kv_error() holds why, as for a failed wait. */
int ps_rounds_wait(ps_rounds_t *r, int handle, const char *what)
{
    ps_kv_t *kv = r->c.kv;
    int rc = handle < 0 ? handle : ps_kv_wait(kv, handle);
    if (rc != 0) {
        snprintf(r->c.err, r->c.errlen, "%s failed: %s", what,
                 handle < 0 && handle != PS_ECLOSED ? ps_strerror(rc) : ps_kv_error(kv));
    }
    return rc;
}

int ps_rounds_whole(ps_rounds_t *r, int init, int64_t min_version, const char *what)
{
    float *params = ps_model_params(r->c.model);
    const ps_view_t *v = r->c.view;
    const int S = v->num_servers;
    int rc = 0;
    for (int k = 0; k < S && rc == 0; k++) {
        const ps_server_info_t *s = &v->servers[(r->c.rank + k) % S];
        rc = ps_rounds_wait(r,
                            init ? ps_kv_init(r->c.kv, s->begin, s->end, params + s->begin)
                                 : ps_kv_pull(r->c.kv, s->begin, s->end, params + s->begin,
                                              min_version),
                            what);
    }
    return rc;
}

/* Keys [from, to) of the gradient checked before they leave; a failure
 * stops the step's pushes. */
static int s_check_grads(ps_rounds_t *r, uint64_t from, uint64_t to)
{
    int rc = ps_nonfinite_check(r->c.nonfinite, r->push_step, ps_model_grads(r->c.model) + from,
                                to - from, r->c.err, r->c.errlen);
    return rc ? (r->push_rc = rc) : 0;
}

/* The model's gradient-ready hook in sync and ssp: pushes the newly final
 * keys [from, push_end) and pulls their next values: their replies use the
 * downlinks while the rest of backward runs and its keys still go up. With
 * every handle in use the keys wait for the request after backward. The
 * first layer's (from 0: backward's last call) go in that request too
 * (s_push_pull). */
static void s_push_ready(void *arg, size_t from)
{
    ps_rounds_t *r = arg;
    if (from == 0 || from >= r->push_end || r->npush == S_MAX_PUSHES - 1 || r->push_rc ||
        s_check_grads(r, from, r->push_end) != 0) {
        return;
    }
    ps_trace_span_t span = ps_trace_span_begin(PS_TRACE_PUSH, r->push_step, (int64_t)from);
    int h = ps_kv_push_pull(r->c.kv, from, r->push_end, ps_model_grads(r->c.model) + from,
                            r->push_step, ps_model_params(r->c.model) + from,
                            ps_rounds_pull_version(r->c.job, r->push_step));
    ps_trace_span_end(&span);
    if (h < 0) {
        r->push_rc = h;
        return;
    }
    r->push_h[r->npush++] = h;
    r->push_end = from;
}

/* Nothing of step t pushed yet. */
static void s_reset(ps_rounds_t *r, int64_t t)
{
    r->push_step = t;
    r->push_end = r->c.view->num_params;
    r->npush = 0;
    r->push_rc = 0;
}

int ps_rounds_begin(ps_rounds_t *r, int64_t t)
{
    s_reset(r, t);
    return ps_fault_push(r->c.kv, r->c.fault_huge_push, r->c.fault_nan_push, t, r->c.err,
                         r->c.errlen);
}

uint64_t ps_rounds_unpushed(const ps_rounds_t *r)
{
    return r->push_end;
}

/* Pushes step t's gradients and pulls the weights for the next step: what
 * the hook has not pushed and pulled yet goes now, then the rows' push (a
 * model with rows: behind the dense keys, so their pull's replies come down
 * while the rows still go up), then every handle is waited for. */
static int s_push_pull(ps_rounds_t *r, int64_t t)
{
    if (r->push_rc) { /* the job is gone or a request was refused */
        return ps_rounds_wait(r, r->push_rc, "push");
    }
    if (r->push_end > 0 && s_check_grads(r, 0, r->push_end) != 0) {
        return r->push_rc;
    }
    ps_trace_span_t push = ps_trace_span_begin(PS_TRACE_PUSH, t, 0);
    /* What the hook has not pushed and pulled yet, [0, push_end) (every key
     * with --overlap 0 and in async), in one request per server: a server
     * on this host gets one push-pull and answers with the values alone,
     * one over a link the push in pieces behind the pull. Stepped modes'
     * pulls wait for the step's update. */
    int hl = ps_kv_push_pull(r->c.kv, 0, r->push_end, ps_model_grads(r->c.model), t,
                             ps_model_params(r->c.model), ps_rounds_pull_version(r->c.job, t));
    if (r->push_end > 0) {
        ps_trace_span_end(&push);
    }
    int rows = -1, rc = 0;
    if (hl >= 0 && r->c.ctr &&
        (rc = ps_ctr_job_push(r->c.ctr, r->c.kv, t, &rows, r->c.err, r->c.errlen)) != 0) {
        return rc;
    }
    ps_trace_span_t pull = ps_trace_span_begin(PS_TRACE_PULL, t, 0);
    for (int i = 0; i < r->npush && rc == 0; i++) {
        rc = ps_rounds_wait(r, r->push_h[i], "push");
    }
    rc = rc ? rc : ps_rounds_wait(r, hl, "pull");
    rc = rc || rows < 0 ? rc : ps_rounds_wait(r, rows, "pushing rows");
    ps_trace_span_end(&pull);
    return rc;
}

/* s_push_pull, and again for as long as lost servers' replicas take their
 * ranks over meanwhile (stepped modes): the servers forgot the step under
 * way, so its whole push and pull go again, from the gradients still in
 * the model (docs/design/replicas.md). Any other failover (PS_EAGAIN) is
 * the caller's. */
int ps_rounds_end(ps_rounds_t *r, int64_t t)
{
    int rc = s_push_pull(r, t);
    while (rc == PS_EAGAIN && ps_job_is_stepped(r->c.job) && ps_kv_takeover_pending(r->c.kv)) {
        int64_t step;
        ps_kv_rollback(r->c.kv, &step);
        if (r->c.rank == 0) {
            ps_log_info("a lost server's replica took its keys over: step %lld sent again",
                        (long long)t);
        }
        r->c.err[0] = '\0';
        s_reset(r, t);
        rc = s_push_pull(r, t);
    }
    return rc;
}
