/*
 * server/server.c - the server's single event loop: receive, validate, hand
 * each request to the consistency state machine (server/consistency.h), and
 * send what it says.
 *
 * The shard's values live in server/store.h, the rules of when to apply and
 * answer in server/consistency.h, the copies of replies in
 * server/reply_pool.h. This file holds the sockets: the messages in, the
 * frames of held pushes (moved out of their messages), the replies out.
 */
#include "server/server.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/hist.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "server/checkpoint.h"
#include "server/consistency.h"
#include "server/reply_pool.h"
#include "server/store.h"

/* Who asked, kept by the consistency while a pull waits. */
typedef struct {
    ps_route_t route;     /* who asked */
    uint64_t request_id;  /* echoed */
    ps_msg_type_t type;   /* init, push or pull */
} ps_asker_t;

typedef struct {
    const ps_server_config_t *cfg;
    ps_ctx_t *ctx;
    ps_sock_t *router;
    ps_link_t *link;
    ps_view_t *view;
    int rank;
    int workers;
    ps_range_t shard;     /* our keys */
    ps_store_t *store;    /* parameters, optimizer state */
    ps_consistency_t *cons; /* when to apply and answer */
    ps_reply_pool_t *pool; /* copies of replies (not sync) */
    /* The frames of the pushes the consistency holds, moved out of their
     * messages: as many as it can hold, and the one being pushed. */
    ps_payload_t *held;
    int *held_free;       /* indices of the free ones */
    int nheld_free;
    uint64_t errors;      /* messages rejected, reported at the end */
    int64_t checkpointed; /* the version of the last checkpoint written (or loaded) */
    ps_ratelog_t *rejections; /* their log lines, at most one per sender and reason */
    int64_t checkpoint_at; /* a checkpoint step agreed with the scheduler (timed), or -1 */
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
    char peer[32];
    snprintf(peer, sizeof peer, "%s%d", ps_codec_role_tag(m->hdr.role), m->hdr.sender);
    s->errors++;
    ps_ratelog_reject(s->rejections, ps_codec_type_name(m->hdr.type), peer, why);
    ps_msg_reply_error(s->router, m, PS_ROLE_SERVER, s->rank, status, "%s", why);
    return status;
}

static void s_reply(ps_server_t *s, const ps_asker_t *a, ps_msg_type_t type, ps_range_t r,
                    const float *values, int64_t version)
{
    ps_header_t h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, s->rank);
    h.request_id = a->request_id;
    h.begin = r.begin;
    h.end = r.end;
    h.version = version;
    ps_frame_t f = {values, values ? ps_range_len(r) * sizeof(float) : 0};
    /* sync: values cannot change before the asker pushes again, which it does
     * only after receiving them, so they go zero-copy. Every other mode can
     * apply a step while the reply is queued (async, ssp: the asker already
     * pushed it; sync:k/n: without the asker), so copy. */
    const int must_copy = values && s->view->job.mode != PS_MODE_SYNC;
    float *copy = must_copy && f.len <= PS_CONSISTENCY_REPLY_KEYS * sizeof(float)
                      ? ps_reply_pool_take(s->pool)
                      : NULL;
    int rc;
    if (copy) {
        memcpy(copy, values, f.len);
        f.data = copy;
        rc = ps_msg_send_zc(s->router, &a->route, h, &f, 1, ps_reply_pool_give, s->pool);
    } else { /* sync: zero-copy; the pool ran dry: ZeroMQ copies */
        rc = ps_msg_send(s->router, &a->route, h, &f, values ? 1 : 0,
                         must_copy ? PS_SEND_COPY : 0);
    }
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
}

/* The consistency's callbacks (ps_consistency_ops_t). */
static void s_on_ack(void *ctx, const void *asker, ps_range_t range, int64_t version)
{
    const ps_asker_t *a = asker;
    s_reply(ctx, a, a->type == PS_MSG_INIT ? PS_MSG_INIT_ACK : PS_MSG_PUSH_ACK, range, NULL,
            version);
}

static void s_on_reply(void *ctx, const void *asker, ps_range_t part, const float *values,
                       int64_t version)
{
    s_reply(ctx, asker, PS_MSG_PULL_REPLY, part, values, version);
}

static void s_on_release(void *ctx, void *frame)
{
    ps_server_t *s = ctx;
    ps_payload_close(frame);
    s->held_free[s->nheld_free++] = (int)((ps_payload_t *)frame - s->held);
}

/* Moves m's gradient frame into a free holder and returns it. */
static ps_payload_t *s_hold(ps_server_t *s, ps_msg_t *m)
{
    ps_payload_t *f = &s->held[s->held_free[--s->nheld_free]];
    ps_msg_take_payload(m, 0, f);
    return f;
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
    /* Before any arithmetic on them: steps and versions are counts of
     * updates, far below 2^53 in any real job. */
    if (h->step < 0 || h->step > PS_MSG_MAX_STEP || h->version < 0 ||
        h->version > PS_MSG_MAX_STEP) {
        return s_reply_error(s, m, PS_ERANGE, "step %lld or version %lld outside [0, 2^53]",
                             (long long)h->step, (long long)h->version);
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

/* After each step (the consistency's stepped callback, so also each of the
 * several steps one ssp push may complete): when the version N is a
 * checkpoint (a multiple of --checkpoint-every, or the step agreed for a
 * timed one), writes the shard and tells the scheduler. Nothing changes the
 * store before this runs, so the part is the cut after step N-1's update. A
 * part that cannot be written is logged and skipped: that checkpoint never
 * becomes complete, training goes on. */
static void s_maybe_checkpoint(ps_server_t *s)
{
    const ps_view_t *v = s->view;
    const int64_t version = ps_consistency_version(s->cons);
    const int due = (v->checkpoint_every > 0 && version % v->checkpoint_every == 0) ||
                    version == s->checkpoint_at;
    if (!due || version == s->checkpointed) {
        return;
    }
    s->checkpointed = version;
    ps_checkpoint_info_t info = {v->checkpoint_dir, version, s->rank, v->num_servers,
                                 v->num_workers, v->num_params, &v->job};
    ps_checkpoint_part_t part;
    char why[256];
    uint8_t *body;
    size_t len;
    const double t0 = ps_now();
    int rc = ps_checkpoint_write(&info, s->store, &part, why, sizeof why);
    ps_log_debug("checkpoint step-%lld: %s written in %.1f ms", (long long)version, part.file,
                 (ps_now() - t0) * 1e3);
    if (rc != 0) {
        ps_log_warn("checkpoint of step %lld not written: %s", (long long)version, why);
    } else if (ps_codec_pack_checkpoint(&part, &body, &len) == 0) {
        ps_link_send(s->link, PS_MSG_CHECKPOINT, body, len);
        free(body);
    }
}

/* The consistency applied a step: the store is the cut after it. */
static void s_on_stepped(void *ctx, int64_t version)
{
    (void)version;
    s_maybe_checkpoint(ctx);
}

/* Resumed job: the shard comes from the checkpoint's parts, not from an INIT. */
static int s_resume(ps_server_t *s, char *err, size_t errlen)
{
    const ps_view_t *v = s->view;
    char why[224];
    /* resumed with another number of workers: the parts are of resume_step */
    const int64_t step = v->resume_step ? v->resume_step : v->start_step;
    int rc = ps_checkpoint_load(v->resume_dir, v->resume_parts, step, s->store, &v->job, why,
                                sizeof why);
    rc = rc ? rc : ps_consistency_resume(s->cons, v->start_step);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resume: %s", why);
        return rc;
    }
    s->checkpointed = v->start_step;
    ps_log_info("resumed at step %lld from %d parts in %s", (long long)v->start_step,
                v->resume_parts, v->resume_dir);
    return 0;
}

static void s_on_worker_message(ps_server_t *s, ps_msg_t *m)
{
    const ps_header_t *h = &m->hdr;
    ps_range_t r;
    switch (h->type) {
    case PS_MSG_PUSH:
    case PS_MSG_PULL:
    case PS_MSG_INIT:
        break;
    default:
        s_reply_error(s, m, PS_EPROTO, "unexpected message type %s",
                      ps_codec_type_name(h->type));
        return;
    }
    if (s_validate(s, m, &r) != 0) {
        return;
    }
    ps_asker_t asker = {m->route, h->request_id, h->type};
    ps_request_t req = {h->sender, h->step, h->version, r, NULL, NULL, &asker};
    char why[160];
    int rc;
    if (h->type == PS_MSG_PUSH) {
        ps_payload_t *f = s_hold(s, m);
        size_t len;
        req.data = ps_payload_data(f, &len);
        req.frame = f;
        rc = ps_consistency_push(s->cons, &req, why, sizeof why);
    } else if (h->type == PS_MSG_PULL) {
        rc = ps_consistency_pull(s->cons, &req, why, sizeof why);
    } else {
        size_t len;
        req.data = ps_msg_frame(m, 0, &len);
        rc = ps_consistency_init(s->cons, &req, why, sizeof why);
    }
    if (rc != 0) {
        s_reply_error(s, m, rc, "%s", why);
    }
}

/* The scheduler's new set of live workers (a worker was lost): steps complete
 * with those from now on; a step the change completes applies (and is
 * checkpointed: s_on_stepped) at once. Server 0 tells the scheduler the step
 * it took effect at, for its membership line. */
static void s_on_members(ps_server_t *s, const ps_msg_t *m)
{
    unsigned char live[PS_MAX_WORKERS];
    int n = 0;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (!p || ps_codec_unpack_members(p, len, live, &n) != 0 || n != s->workers) {
        ps_log_warn("dropped a bad membership message from the scheduler");
        return;
    }
    int nlive = 0;
    char ranks[256] = "";
    for (int w = 0, at = 0; w < n; w++) {
        nlive += live[w] != 0;
        if (live[w] && at < (int)sizeof ranks - 8) {
            at += snprintf(ranks + at, sizeof ranks - (size_t)at, " W%d", w);
        }
    }
    const int64_t version = ps_consistency_version(s->cons);
    if (ps_consistency_set_workers(s->cons, live) != 0) {
        ps_log_warn("membership message with no live worker dropped");
        return;
    }
    ps_log_debug("%d of %d workers live from step %lld:%s", nlive, n, (long long)version,
                 ranks);
    if (s->rank == 0) { /* the step, for the scheduler's membership line */
        ps_join_step_t js = {.step = version, .worker = -1, .members = 1};
        uint8_t *body;
        if (ps_codec_pack_join_step(&js, &body, &len) == 0) {
            ps_link_send(s->link, PS_MSG_JOIN_STEP, body, len);
            free(body);
        }
    }
}

/* The scheduler agrees a future step with every server (server/consistency.h,
 * ps_consistency_hold): we stop at the step in progress and say our version. */
static void s_on_join_prepare(ps_server_t *s)
{
    ps_join_step_t js = {.step = ps_consistency_hold(s->cons), .worker = -1};
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_join_step(&js, &body, &len) == 0) {
        ps_link_send(s->link, PS_MSG_JOIN_STEP, body, len);
        free(body);
    }
}

/* The agreed step J: a checkpoint there, a worker live from there; go on. */
static void s_on_join_step(ps_server_t *s, const ps_msg_t *m)
{
    ps_join_step_t js;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (!p || ps_codec_unpack_join_step(p, len, &js) != 0 || js.worker >= s->workers) {
        ps_log_warn("dropped a bad join-step message from the scheduler");
        ps_consistency_join(s->cons, -1, 0); /* never stay held */
        return;
    }
    if (js.checkpoint) {
        s->checkpoint_at = js.step;
        s_maybe_checkpoint(s); /* held at J already: the cut before any step goes on */
    }
    if (ps_consistency_join(s->cons, js.worker, js.step) != 0) {
        ps_log_warn("W%d cannot join at step %lld (version %lld)", js.worker,
                    (long long)js.step, (long long)ps_consistency_version(s->cons));
    } else if (js.worker >= 0) { /* the scheduler's membership line says it */
        ps_log_debug("W%d live from step %lld", js.worker, (long long)js.step);
    }
}

/* Sends the telemetry the scheduler asked for at the end of the job. */
static void s_send_report(ps_server_t *s)
{
    const ps_consistency_stats_t *st = ps_consistency_stats(s->cons);
    ps_server_report_t r = {.pushes = st->pushes,
                            .pulls = st->pulls,
                            .rejected = s->errors,
                            .dropped = st->dropped,
                            .nonfinite = st->nonfinite,
                            .version = ps_consistency_version(s->cons),
                            .staleness = st->staleness,
                            .steps_fewer_workers = st->steps_fewer};
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_report(&r, &body, &len) == 0) {
        ps_link_send(s->link, PS_MSG_REPORT, body, len);
        free(body);
    }
}

/* What the loop's drain handlers share: the server, and how the job ended. */
typedef struct {
    ps_server_t *s;
    int status; /* -1 while serving; then 0 (clean shutdown) or 1 */
} ps_loop_t;

/* ps_msg_drain's handler for the workers' socket. */
static int s_on_receive(void *arg, ps_msg_t *m, int rc)
{
    ps_server_t *s = ((ps_loop_t *)arg)->s;
    if (rc == 0) {
        s_on_worker_message(s, m);
    } else {
        s_reply_error(s, m, PS_EPROTO, "malformed message: %s", m->hdr.error);
    }
    return 0;
}

/* ps_msg_drain's handler for the scheduler's messages; stops at the end. */
static int s_on_link(void *arg, ps_msg_t *m, int rc)
{
    ps_loop_t *l = arg;
    char err[256];
    if (rc != 0) {
        return 0;
    }
    switch (ps_link_handle(l->s->link, m, err, sizeof err)) {
    case PS_LINK_SHUTDOWN:
        l->status = 0;
        return 1;
    case PS_LINK_ABORTED:
        ps_log_err("%s", err);
        l->status = 1;
        return 1;
    case PS_LINK_MESSAGE:
        if (m->hdr.type == PS_MSG_REPORT) {
            s_send_report(l->s);
        } else if (m->hdr.type == PS_MSG_MEMBERS) {
            s_on_members(l->s, m);
        } else if (m->hdr.type == PS_MSG_JOIN_PREPARE) {
            s_on_join_prepare(l->s);
        } else if (m->hdr.type == PS_MSG_JOIN_STEP) {
            s_on_join_step(l->s, m);
        }
        return 0;
    default:
        return 0;
    }
}

/* Serves until the job ends. Returns 0 (clean shutdown) or 1. */
static int s_loop(ps_server_t *s)
{
    char err[256];
    ps_loop_t l = {s, -1};
    for (;;) {
        ps_pollitem_t items[2] = {{.sock = s->router}, {.sock = ps_link_sock(s->link)}};
        int rc = ps_poll(items, 2, 100);
        if (rc < 0) {
            ps_log_err("poll failed: %s", ps_strerror(rc));
            return 1;
        }
        if (items[0].ready) {
            ps_msg_drain(s->router, PS_RECV_ROUTER, 64, s_on_receive, &l);
        }
        if (items[1].ready) {
            ps_msg_drain(items[1].sock, 0, 64, s_on_link, &l);
            if (l.status >= 0) {
                return l.status;
            }
        }
        if (ps_link_tick(s->link, err, sizeof err) == PS_LINK_LOST) {
            ps_log_err("%s", err);
            return 1;
        }
        ps_consistency_tick(s->cons);
        ps_ratelog_tick(s->rejections);
    }
}

static int s_setup(ps_server_t *s, char *err, size_t errlen)
{
    const ps_view_t *v = s->view;
    s->rank = ps_link_rank(s->link);
    s->workers = v->num_workers;
    s->checkpoint_at = -1;
    s->shard.begin = v->servers[s->rank].begin;
    s->shard.end = v->servers[s->rank].end;
    const uint64_t n = ps_range_len(s->shard);
    int rc = ps_store_new(&s->store, s->shard, &v->job);
    if (rc == PS_EINVAL) {
        snprintf(err, errlen, "unknown optimizer '%s'", v->job.optimizer);
        return rc;
    }
    ps_consistency_config_t cc = {
        .job = v->job,
        .workers = s->workers,
        .steps_per_epoch = v->steps_per_epoch,
        .total_steps = v->total_steps,
        .report_missing = s->cfg->report_missing,
        .asker_size = sizeof(ps_asker_t),
        .ops = {s, s_on_ack, s_on_reply, s_on_release, s_on_stepped},
    };
    rc = rc ? rc : ps_consistency_new(&s->cons, &cc, s->store);
    rc = rc ? rc : ps_reply_pool_new(&s->pool, n, PS_CONSISTENCY_REPLY_KEYS);
    rc = rc ? rc : ps_ratelog_new(&s->rejections, PS_RATELOG_PERIOD);
    int nheld = s->cons ? ps_consistency_max_held(s->cons) + 1 : 0;
    s->held = calloc((size_t)nheld, sizeof *s->held);
    s->held_free = calloc((size_t)nheld, sizeof *s->held_free);
    if (rc || !s->held || !s->held_free) {
        snprintf(err, errlen, "out of memory for a shard of %llu parameters",
                 (unsigned long long)n);
        return PS_ENOMEM;
    }
    for (int i = 0; i < nheld; i++) {
        s->held_free[s->nheld_free++] = i;
    }
    if (v->resume_parts > 0 && (rc = s_resume(s, err, errlen)) != 0) {
        return rc;
    }
    char mode[32];
    ps_job_mode_str(&v->job, mode, sizeof mode);
    ps_log_info("serving keys [%llu, %llu) (%llu parameters) for %d workers, mode %s, "
                "optimizer %s",
                (unsigned long long)s->shard.begin, (unsigned long long)s->shard.end,
                (unsigned long long)n, s->workers, mode, v->job.optimizer);
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
    if (!s.view || ps_ctx_new(&s.ctx) != 0) {
        ps_log_err("out of memory");
        goto fail;
    }
    int rc = ps_sock_new(s.ctx, PS_SOCK_ROUTER, &s.router, err, sizeof err);
    if (rc == 0) {
        rc = ps_sock_bind(s.router, cfg->bind, bound, sizeof bound, err, sizeof err);
    }
    if (rc != 0) {
        ps_log_err("cannot bind %s: %s", cfg->bind, err);
        goto fail;
    }
    snprintf(advertise, sizeof advertise, "%s", cfg->advertise ? cfg->advertise : bound);
    rc = ps_link_join(&s.link, s.ctx, cfg->scheduler, PS_ROLE_SERVER, cfg->rank, advertise,
                      cfg->connect_timeout, cfg->peer_timeout, &job, err, sizeof err);
    if (rc != 0) {
        ps_log_err("%s", err);
        goto fail;
    }
    ps_link_set_grace(s.link, cfg->scheduler_grace);
    ps_log_set_role("S", ps_link_rank(s.link));
    ps_log_info("registered as S%d, listening on %s", ps_link_rank(s.link), bound);
    if (ps_link_wait_view(s.link, NULL, s.view, err, sizeof err) != 0 ||
        s_setup(&s, err, sizeof err) != 0) {
        ps_log_err("%s", err);
        ps_link_abort(s.link, err);
        goto fail;
    }
    status = s_loop(&s);
    const ps_consistency_stats_t *st = ps_consistency_stats(s.cons);
    ps_ratelog_destroy(&s.rejections); /* its last counts before the totals */
    ps_log_info("served %llu pushes and %llu pulls, rejected %llu messages (%llu non-finite), "
                "dropped %llu late pushes, version %lld, staleness mean %.2f max %lld",
                (unsigned long long)st->pushes, (unsigned long long)st->pulls,
                (unsigned long long)s.errors, (unsigned long long)st->nonfinite,
                (unsigned long long)st->dropped,
                (long long)ps_consistency_version(s.cons), ps_hist_mean(&st->staleness),
                (long long)(st->staleness.max > 0 ? st->staleness.max : 0));
fail:
    if (status != 0) {
        ps_sock_set_linger(s.router, PS_ABORT_LINGER_MS);
        ps_sock_set_linger(s.link ? ps_link_sock(s.link) : NULL, PS_ABORT_LINGER_MS);
    }
    ps_link_destroy(&s.link);
    ps_sock_destroy(&s.router);
    ps_ctx_destroy(&s.ctx);
    ps_reply_pool_destroy(&s.pool); /* after ps_ctx_destroy: ZeroMQ gave every buffer back */
    ps_consistency_destroy(&s.cons); /* closes the held frames: before freeing their holders */
    ps_store_destroy(&s.store);
    ps_ratelog_destroy(&s.rejections);
    free(s.held);
    free(s.held_free);
    free(s.view);
    return status;
}
