/*
 * server/server.c - the server's single event loop: receive, validate, apply.
 *
 * All buffers are sized once from the cluster view: parameters, momentum, one
 * gradient slot per worker (sync), a scratch range (async) and the table of
 * pulls waiting for a newer version. Nothing is allocated per step.
 */
#include "server/server.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"

typedef struct {
    ps_route_t route;    /* who asked */
    uint64_t request_id; /* echoed */
    ps_range_t range;    /* what */
    int64_t min_version; /* answered once version >= this */
    int sender;          /* worker rank */
} ps_pending_pull_t;

typedef struct {
    const ps_server_config_t *cfg;
    void *ctx;
    void *router;
    ps_link_t link;
    ps_view_t *view;
    int rank;
    int workers;
    ps_range_t shard;    /* our keys */
    uint64_t n;          /* keys in the shard */
    float *w;            /* parameters, n */
    float *state;        /* optimizer state: state_floats arrays of n */
    float *slots;        /* sync: workers * n gradients of the step being collected */
    float *scratch;      /* n: aligned copy of an incoming gradient */
    uint64_t *covered;   /* sync: keys of the current step pushed, per worker */
    uint64_t init_covered;
    int initialized;     /* all initial values received */
    int64_t version;     /* updates applied so far */
    ps_pending_pull_t *pending;
    int npending, cap_pending;
    ps_optim_t opt;
    int64_t applied;     /* updates applied (Adam's t) */
    /* counters for the final log line */
    uint64_t pushes, pulls, errors;
    double staleness_sum;
    int64_t staleness_max;
} ps_server_t;

static int s_reply_error(ps_server_t *s, const ps_msg_t *m, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int s_reply_error(ps_server_t *s, const ps_msg_t *m, int status, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    s->errors++;
    ps_log_warn("rejected %s from %s%d: %s", ps_codec_type_name(m->hdr.type),
                ps_codec_role_tag(m->hdr.role), m->hdr.sender, why);
    ps_msg_reply_error(s->router, m, PS_ROLE_SERVER, s->rank, status, "%s", why);
    return status;
}

static void s_reply(ps_server_t *s, const ps_route_t *route, ps_msg_type_t type,
                    uint64_t request_id, ps_range_t r, const float *values)
{
    ps_header_t h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, s->rank);
    h.request_id = request_id;
    h.begin = r.begin;
    h.end = r.end;
    h.version = s->version;
    ps_frame_t f = {values, values ? ps_range_len(r) * sizeof(float) : 0};
    /* sync: values cannot change before the asker pushes again, which it does
     * only after receiving them, so they go zero-copy. async: an update may
     * land while the reply is queued, so copy. */
    int flags = s->view->job.mode == PS_MODE_SYNC ? 0 : PS_SEND_COPY;
    int rc = ps_msg_send(s->router, route, h, &f, values ? 1 : 0, flags);
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
}

static void s_answer_pull(ps_server_t *s, const ps_pending_pull_t *p)
{
    s->pulls++;
    s_reply(s, &p->route, PS_MSG_PULL_REPLY, p->request_id, p->range,
            s->w + (p->range.begin - s->shard.begin));
}

/* Answers every waiting pull that the current version satisfies. */
static void s_flush_pulls(ps_server_t *s)
{
    int kept = 0;
    for (int i = 0; i < s->npending; i++) {
        if (s->initialized && s->version >= s->pending[i].min_version) {
            s_answer_pull(s, &s->pending[i]);
        } else {
            s->pending[kept++] = s->pending[i];
        }
    }
    s->npending = kept;
}

/* Checks what every data message must satisfy. Returns 0 or the error sent. */
static int s_validate(ps_server_t *s, const ps_msg_t *m, ps_range_t *r)
{
    const ps_header_t *h = &m->hdr;
    r->begin = h->begin;
    r->end = h->end;
    if (h->role != PS_ROLE_WORKER || h->sender < 0 || h->sender >= s->workers) {
        return s_reply_error(s, m, PS_ENOENT, "unknown sender %s%d",
                             ps_codec_role_tag(h->role), h->sender);
    }
    if (r->end <= r->begin || !ps_range_contains(s->shard, *r)) {
        return s_reply_error(s, m, PS_ERANGE,
                             "key range [%llu, %llu) is not inside this server's shard "
                             "[%llu, %llu)",
                             (unsigned long long)r->begin, (unsigned long long)r->end,
                             (unsigned long long)s->shard.begin,
                             (unsigned long long)s->shard.end);
    }
    uint64_t want = h->type == PS_MSG_PULL ? 0 : ps_range_len(*r) * sizeof(float);
    if (h->payload_len != want || m->nframes != (want ? 1 : 0)) {
        return s_reply_error(s, m, PS_ERANGE,
                             "payload is %llu bytes in %d frames; the range needs %llu bytes",
                             (unsigned long long)h->payload_len, m->nframes,
                             (unsigned long long)want);
    }
    return 0;
}

/* The aligned gradient of a push: frames are read in place only when aligned. */
static const float *s_payload(ps_server_t *s, const ps_msg_t *m, float *dst)
{
    size_t len;
    const void *p = ps_msg_frame(m, 0, &len);
    if (!dst && ((uintptr_t)p % sizeof(float)) == 0) {
        return p;
    }
    dst = dst ? dst : s->scratch;
    memcpy(dst, p, len);
    return dst;
}

static void s_on_init(ps_server_t *s, const ps_msg_t *m, ps_range_t r)
{
    if (m->hdr.sender != 0) {
        s_reply_error(s, m, PS_ESTATE, "only worker 0 initialises parameters");
        return;
    }
    if (s->initialized || s->init_covered + ps_range_len(r) > s->n) {
        s_reply_error(s, m, PS_ESTATE, "parameters are already initialised");
        return;
    }
    s_payload(s, m, s->w + (r.begin - s->shard.begin));
    s->init_covered += ps_range_len(r);
    if (s->init_covered == s->n) {
        s->initialized = 1;
        memset(s->state, 0, s->n * (size_t)ps_optim_state_floats(&s->opt) * sizeof(float));
        ps_log_info("parameters initialised: keys [%llu, %llu)",
                    (unsigned long long)s->shard.begin, (unsigned long long)s->shard.end);
    }
    s_reply(s, &m->route, PS_MSG_INIT_ACK, m->hdr.request_id, r, NULL);
    s_flush_pulls(s);
}

static float s_lr(const ps_server_t *s, int64_t step)
{
    return ps_optim_lr(&s->view->job, step, s->view->steps_per_epoch, s->view->total_steps);
}

/* sync: every worker has pushed the whole shard for this step: apply the mean. */
static void s_apply_sync(ps_server_t *s)
{
    float *sum = s->slots; /* worker 0's slot accumulates, in rank order */
    for (int k = 1; k < s->workers; k++) {
        const float *g = s->slots + (size_t)k * s->n;
        for (uint64_t i = 0; i < s->n; i++) {
            sum[i] += g[i];
        }
    }
    ps_optim_step(&s->opt, s_lr(s, s->version), ++s->applied, s->w, s->state, s->n, sum,
                  1.0f / (float)s->workers, s->n);
    memset(s->covered, 0, (size_t)s->workers * sizeof *s->covered);
    s->version++;
    s_flush_pulls(s);
}

static void s_on_push(ps_server_t *s, const ps_msg_t *m, ps_range_t r)
{
    const ps_header_t *h = &m->hdr;
    if (!s->initialized) {
        s_reply_error(s, m, PS_ESTATE, "push before the parameters were initialised");
        return;
    }
    uint64_t len = ps_range_len(r);
    if (s->view->job.mode == PS_MODE_SYNC) {
        if (h->step != s->version) {
            s_reply_error(s, m, PS_ESTATE, "push for step %lld, but step %lld is being collected",
                          (long long)h->step, (long long)s->version);
            return;
        }
        if (s->covered[h->sender] + len > s->n) {
            s_reply_error(s, m, PS_ESTATE, "W%d pushed more than its share of step %lld",
                          h->sender, (long long)h->step);
            return;
        }
        float *slot = s->slots + (size_t)h->sender * s->n + (r.begin - s->shard.begin);
        s_payload(s, m, slot);
        s->covered[h->sender] += len;
        s->pushes++;
        s_reply(s, &m->route, PS_MSG_PUSH_ACK, h->request_id, r, NULL);
        for (int k = 0; k < s->workers; k++) {
            if (s->covered[k] != s->n) {
                return;
            }
        }
        s_apply_sync(s);
        return;
    }
    /* async: apply on arrival, record how stale the gradient was. */
    const float *g = s_payload(s, m, NULL);
    uint64_t off = r.begin - s->shard.begin;
    /* async: M pushes make one step of the sync schedule. */
    ps_optim_step(&s->opt, s_lr(s, s->version / s->workers), ++s->applied, s->w + off,
                  s->state + off, s->n, g, 1.0f, len);
    int64_t stale = s->version - h->version;
    s->staleness_sum += (double)(stale > 0 ? stale : 0);
    if (stale > s->staleness_max) {
        s->staleness_max = stale;
    }
    s->version++;
    s->pushes++;
    s_reply(s, &m->route, PS_MSG_PUSH_ACK, h->request_id, r, NULL);
}

static void s_on_pull(ps_server_t *s, const ps_msg_t *m, ps_range_t r)
{
    ps_pending_pull_t p = {m->route, m->hdr.request_id, r, m->hdr.step, m->hdr.sender};
    if (s->initialized && s->version >= p.min_version) {
        s_answer_pull(s, &p);
        return;
    }
    if (s->npending == s->cap_pending) {
        s_reply_error(s, m, PS_ENOMEM, "too many pulls waiting (%d)", s->cap_pending);
        return;
    }
    s->pending[s->npending++] = p;
}

static void s_on_worker_message(ps_server_t *s, ps_msg_t *m)
{
    ps_range_t r;
    switch (m->hdr.type) {
    case PS_MSG_PUSH:
    case PS_MSG_PULL:
    case PS_MSG_INIT:
        break;
    default:
        s_reply_error(s, m, PS_EPROTO, "unexpected message type %s",
                      ps_codec_type_name(m->hdr.type));
        return;
    }
    if (s_validate(s, m, &r) != 0) {
        return;
    }
    if (m->hdr.type == PS_MSG_PUSH) {
        s_on_push(s, m, r);
    } else if (m->hdr.type == PS_MSG_PULL) {
        s_on_pull(s, m, r);
    } else {
        s_on_init(s, m, r);
    }
}

/* Serves until the job ends. Returns 0 (clean shutdown) or 1. */
static int s_loop(ps_server_t *s)
{
    char err[256];
    for (;;) {
        zmq_pollitem_t items[2] = {{s->router, 0, ZMQ_POLLIN, 0},
                                   {s->link.sock, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, 100) < 0) {
            ps_log_err("poll failed: %s", zmq_strerror(zmq_errno()));
            return 1;
        }
        for (int k = 0; k < 64 && (items[0].revents & ZMQ_POLLIN); k++) {
            ps_msg_t m = {0};
            int rc = ps_msg_recv(s->router, PS_RECV_ROUTER, &m);
            if (rc == 0) {
                s_on_worker_message(s, &m);
            } else if (rc == PS_EPROTO) {
                s_reply_error(s, &m, PS_EPROTO, "malformed message: %s", m.hdr.error);
            }
            ps_msg_close(&m);
            int ev = 0;
            size_t evlen = sizeof ev;
            zmq_getsockopt(s->router, ZMQ_EVENTS, &ev, &evlen);
            items[0].revents = (short)ev;
        }
        while (items[1].revents & ZMQ_POLLIN) {
            ps_msg_t m = {0};
            int rc = ps_msg_recv(s->link.sock, 0, &m);
            if (rc == 0) {
                s->link.last_seen = ps_now();
                rc = ps_link_handle(&s->link, &m, err, sizeof err);
                ps_msg_close(&m);
                if (rc == 1) {
                    return 0;
                }
                if (rc == PS_ECLOSED) {
                    ps_log_err("%s", err);
                    return 1;
                }
            }
            int ev = 0;
            size_t evlen = sizeof ev;
            zmq_getsockopt(s->link.sock, ZMQ_EVENTS, &ev, &evlen);
            items[1].revents = (short)ev;
        }
        if (ps_link_tick(&s->link, err, sizeof err) != 0) {
            ps_log_err("%s", err);
            return 1;
        }
    }
}

static int s_setup(ps_server_t *s, char *err, size_t errlen)
{
    const ps_view_t *v = s->view;
    s->rank = s->link.rank;
    s->workers = v->num_workers;
    s->shard.begin = v->servers[s->rank].begin;
    s->shard.end = v->servers[s->rank].end;
    s->n = ps_range_len(s->shard);
    if (ps_optim_from_job(&v->job, &s->opt) != 0) {
        snprintf(err, errlen, "unknown optimizer '%s'", v->job.optimizer);
        return PS_EINVAL;
    }
    size_t n = s->n ? s->n : 1;
    s->cap_pending = 8 * s->workers;
    s->w = calloc(n, sizeof(float));
    s->state = calloc(n * (size_t)(ps_optim_state_floats(&s->opt) + 1), sizeof(float));
    s->scratch = calloc(n, sizeof(float));
    s->slots = v->job.mode == PS_MODE_SYNC ? calloc(n * (size_t)s->workers, sizeof(float))
                                           : calloc(1, sizeof(float));
    s->covered = calloc((size_t)s->workers, sizeof *s->covered);
    s->pending = calloc((size_t)s->cap_pending, sizeof *s->pending);
    if (!s->w || !s->state || !s->scratch || !s->slots || !s->covered || !s->pending) {
        snprintf(err, errlen, "out of memory for a shard of %llu parameters",
                 (unsigned long long)s->n);
        return PS_ENOMEM;
    }
    s->initialized = s->n == 0; /* an empty shard has nothing to wait for */
    ps_log_info("serving keys [%llu, %llu) (%llu parameters) for %d workers, mode %s",
                (unsigned long long)s->shard.begin, (unsigned long long)s->shard.end,
                (unsigned long long)s->n, s->workers, ps_job_mode_name(v->job.mode));
    return 0;
}

int ps_server_run(const ps_server_config_t *cfg)
{
    ps_server_t s = {.cfg = cfg};
    int status = 1;
    char err[256] = "";
    char bound[128], advertise[128];
    ps_job_t job;
    s.view = calloc(1, sizeof *s.view);
    s.ctx = zmq_ctx_new();
    if (!s.view || !s.ctx) {
        ps_log_err("out of memory");
        goto fail;
    }
    s.router = ps_transport_open(s.ctx, ZMQ_ROUTER);
    int rc = s.router ? ps_transport_bind(s.router, cfg->bind, bound, sizeof bound) : PS_EIO;
    if (rc != 0) {
        ps_log_err("cannot bind %s: %s", cfg->bind,
                   rc == PS_EINVAL ? "bad endpoint (expected tcp://HOST:PORT)"
                                   : zmq_strerror(zmq_errno()));
        goto fail;
    }
    snprintf(advertise, sizeof advertise, "%s", cfg->advertise ? cfg->advertise : bound);
    rc = ps_link_join(&s.link, s.ctx, cfg->scheduler, PS_ROLE_SERVER, cfg->rank, advertise,
                      cfg->connect_timeout, cfg->peer_timeout, &job, err, sizeof err);
    if (rc != 0) {
        ps_log_err("%s", err);
        goto fail;
    }
    ps_log_set_role("S", s.link.rank);
    ps_log_info("registered as S%d, listening on %s", s.link.rank, bound);
    if (ps_link_wait_view(&s.link, 0, 0, s.view, err, sizeof err) != 0 ||
        s_setup(&s, err, sizeof err) != 0) {
        ps_log_err("%s", err);
        ps_link_abort(&s.link, err);
        goto fail;
    }
    status = s_loop(&s);
    ps_log_info("served %llu pushes and %llu pulls, rejected %llu messages, version %lld%s",
                (unsigned long long)s.pushes, (unsigned long long)s.pulls,
                (unsigned long long)s.errors, (long long)s.version, "");
    if (s.view->job.mode == PS_MODE_ASYNC && s.pushes) {
        ps_log_info("staleness: mean %.2f max %lld", s.staleness_sum / (double)s.pushes,
                    (long long)s.staleness_max);
    }
fail:
    ps_link_close(&s.link);
    ps_transport_close(&s.router);
    if (s.ctx) {
        zmq_ctx_term(s.ctx);
    }
    free(s.w);
    free(s.state);
    free(s.slots);
    free(s.scratch);
    free(s.covered);
    free(s.pending);
    free(s.view);
    return status;
}
