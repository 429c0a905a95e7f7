/*
 * server/server.c - the server's event loop and its setup: each worker's
 * request is checked (server/intake.h) and handed to the consistency state
 * machine (server/consistency.h), which answers through server/reply.h;
 * each scheduler message goes to server/control.h (failovers, joins,
 * checkpoints); a hot replica's updates go out through server/replica.h
 * and, on a replica, come in through server/replica_follow.h. The shard
 * lives in server/store.h, the metrics in server/observe.h. This file owns
 * the sockets and knows no module's rules.
 */
#include "server/server.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "common/trace.h"
#include "proto/addr.h"
#include "proto/curve.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "proto/wire.h"
#include "server/checkpoint.h"
#include "server/consistency.h"
#include "server/control.h"
#include "server/intake.h"
#include "server/listen.h"
#include "server/observe.h"
#include "server/replica.h"
#include "server/replica_follow.h"
#include "server/reply.h"
#include "server/rows.h"
#include "server/store.h"

typedef struct ps_server {
    const ps_server_config_t *cfg;
    ps_ctx_t *ctx;
    ps_sock_t *router;        /* the workers' requests in, replies out */
    ps_link_t *link;          /* the scheduler */
    ps_view_t *view;          /* the cluster view (control updates tokens and servers) */
    int rank;
    int workers;
    ps_range_t shard;         /* our keys */
    uint32_t push_dtype;      /* what a push carries: the wire dtype, sparse with top-k */
    ps_store_t *store;        /* parameters, optimizer state */
    ps_rows_t *rows;          /* a job with embedding rows: ours; else NULL */
    ps_rows_stats_t rows_stats; /* its counters, as the last snapshot read them */
    ps_consistency_t *cons;   /* when to apply and answer */
    ps_intake_t *intake;      /* requests' checks, held push frames */
    ps_reply_t *reply;        /* replies out, and those waiting for a worker's share */
    ps_control_t *control;    /* failovers, membership, joins, checkpoints */
    ps_ratelog_t *rejections; /* their log lines, at most one per sender and reason */
    ps_server_obs_t *obs;     /* metrics and the heartbeat's report */
    ps_replica_t *replica;    /* --replicas: our keys' replicas, kept in step */
    ps_follow_t *follow;      /* a replica: its primary's snapshot and updates */
} ps_server_t;

/* The consistency's callbacks (ps_consistency_ops_t); the asker is a
 * ps_reply_to_t. */
static void s_on_ack(void *ctx, const void *asker, ps_range_t range, int64_t version)
{
    ps_reply_ack(((ps_server_t *)ctx)->reply, asker, range, version);
}

static void s_on_reply(void *ctx, const void *asker, ps_range_t part, const float *values,
                       int64_t version)
{
    (void)values; /* the reply reads the store's chunks itself */
    ps_reply_pull(((ps_server_t *)ctx)->reply, asker, part, version);
}

static void s_on_release(void *ctx, void *frame)
{
    ps_intake_release(((ps_server_t *)ctx)->intake, frame);
}

/* The rows gradient of a step (or an async push), sent to the replicas and applied; the
 * cap's refusals warned of at the 1st, 2nd, 4th ... call that has some. */
static void s_on_apply_rows(void *ctx, const uint64_t *keys, const float *grads, uint64_t n,
                            float lr, float scale, int64_t t, int last)
{
    ps_server_t *s = ctx;
    if (s->replica) {
        ps_replica_update_rows(s->replica, keys, grads, n, lr, scale, t, last);
    }
    const int refused = ps_rows_update(s->rows, keys, n, grads, lr, scale);
    if (refused == PS_ENOMEM) {
        ps_log_err("out of memory for new rows at step %lld: some keys of it not applied",
                   (long long)t);
    } else if (refused > 0) {
        ps_rows_stats_t st;
        ps_rows_stats(s->rows, &st);
        if ((st.refused & (st.refused - 1)) < (uint64_t)refused) { /* crossed a power of 2 */
            ps_log_warn("--max-rows %llu reached: %llu updates of new keys dropped so far "
                        "(they read as before)", (unsigned long long)st.rows,
                        (unsigned long long)st.refused);
        }
    }
}

static void s_on_reply_rows(void *ctx, const void *asker, const void *keys, uint64_t n,
                            int64_t version)
{
    ps_server_t *s = ctx;
    ps_reply_rows(s->reply, asker, s->rows, keys, n, version);
}

/* A step was applied: the store is the cut after it. A replica writes no
 * checkpoint: its primary does. */
static void s_on_stepped(void *ctx, int64_t version)
{
    (void)version;
    ps_server_t *s = ctx;
    if (!s->view->replica_of) {
        ps_control_stepped(s->control);
    }
}

static void s_on_update(void *ctx, ps_range_t range, const float *grad, float lr, float scale,
                        int64_t version)
{
    ps_server_t *s = ctx;
    if (s->replica) {
        /* the replicas apply it while we do and while the step's other chunks
         * still arrive: only the last chunk's round to them stands between
         * the step and its replies */
        ps_replica_update(s->replica, range, grad, lr, scale, version);
    }
}

/* The control module's callbacks (ps_control_ops_t): the scheduler's link
 * (send is the replica's side's too). */
static void s_control_send(void *ctx, ps_msg_type_t type, const ProtobufCMessage *body)
{
    ps_link_send(((ps_server_t *)ctx)->link, type, body);
}

static void s_control_generation(void *ctx, int64_t generation)
{
    ps_link_set_generation(((ps_server_t *)ctx)->link, generation);
}

static void s_control_abort(void *ctx, const char *why)
{
    ps_link_abort(((ps_server_t *)ctx)->link, why);
}

static void s_control_reloaded(void *ctx)
{
    ps_server_t *s = ctx;
    if (s->replica) {
        ps_replica_resync(s->replica);
    }
}

static void s_control_promoted(void *ctx, int rank)
{
    ps_link_set_rank(((ps_server_t *)ctx)->link, rank);
    ps_link_set_replica(((ps_server_t *)ctx)->link, 0, 0, NULL, 0);
    ps_log_set_role("S", rank);
}

/* A checked push (or a push-pull) to the consistency, its frame held; then
 * a push-pull's pull. Returns 0 or a PS_E* with the reason in why. */
static int s_push(ps_server_t *s, ps_msg_t *m, ps_request_t *req, char *why, size_t cap)
{
    const Shardps__Header *h = &m->hdr;
    int rc = ps_intake_hold(s->intake, m, req, why, cap);
    if (rc != 0) {
        return rc;
    }
    const int64_t before = ps_consistency_version(s->cons);
    const double ta = ps_now();
    rc = ps_consistency_push(s->cons, req, why, cap);
    if (ps_consistency_version(s->cons) != before) { /* it completed a step */
        const double te = ps_now();
        ps_server_obs_apply(s->obs, te - ta);
        ps_trace_span(PS_TRACE_APPLY, h->step, ta, te, 0); /* the metric's times */
    }
    ps_control_pushed(s->control);
    if (rc == 0 && h->type == PS_MSG_PUSH_PULL) {
        /* the pull right behind its push: async is answered with this
         * push applied, stepped modes once the step is */
        req->step = h->pull_version;
        rc = ps_consistency_pull(s->cons, req, why, cap);
    }
    return rc;
}

/* A checked rows push or pull: its frame held, then to the consistency. */
static int s_rows(ps_server_t *s, ps_msg_t *m, ps_request_t *req, char *why, size_t cap)
{
    int rc = ps_intake_hold(s->intake, m, req, why, cap);
    if (rc != 0) {
        return rc;
    }
    if (m->hdr.type == PS_MSG_ROWS_PULL) {
        return ps_consistency_pull_rows(s->cons, req, why, cap);
    }
    rc = ps_consistency_push_rows(s->cons, req, why, cap);
    ps_control_pushed(s->control);
    return rc;
}

/* The replica's side's callbacks (ps_follow_ops_t): the link, and the
 * workers' socket its primary sends on. */
static void s_follow_register_as(void *ctx, int follows, uint64_t token,
                                 const char *endpoint, int in_step)
{
    ps_link_set_replica(((ps_server_t *)ctx)->link, follows, token, endpoint, in_step);
}

static void s_follow_ack(void *ctx, const ps_route_t *route, uint64_t id)
{
    ps_server_t *s = ctx;
    Shardps__Header h;
    ps_msg_header(&h, PS_MSG_REPLICA_ACK, PS_ROLE_SERVER, s->rank);
    h.request_id = id;
    ps_msg_send(s->router, route, h, NULL, 0, 0);
}

static void s_follow_refuse(void *ctx, const ps_msg_t *m, int status, const char *why)
{
    ps_reply_error(((ps_server_t *)ctx)->reply, m, status, "%s", why);
}

static void s_on_worker_message(ps_server_t *s, ps_msg_t *m)
{
    const Shardps__Header *h = &m->hdr;
    ps_server_obs_message(s->obs, h->role == PS_ROLE_WORKER ? h->sender : -1, h->type,
                          h->payload_len);
    switch (h->type) {
    case PS_MSG_PUSH:
    case PS_MSG_PULL:
    case PS_MSG_PUSH_PULL:
    case PS_MSG_INIT:
    case PS_MSG_ROWS_PUSH:
    case PS_MSG_ROWS_PULL:
        if (s->view->replica_of) {
            ps_reply_error(s->reply, m, PS_ESTATE, "a replica serves no worker");
            return;
        }
        break;
    case PS_MSG_REPLICATE:
    case PS_MSG_REPLICA_SNAPSHOT:
        ps_follow_receive(s->follow, m);
        return;
    case PS_MSG_PREFLIGHT_PROBE:
        /* A worker's preflight: answered at once, payload dropped unread.
         * Data messages are checked for their role in ps_intake_check. */
        if (h->role != PS_ROLE_WORKER) {
            ps_reply_error(s->reply, m, PS_ENOENT, "unknown sender %s%d",
                           ps_codec_role_tag(h->role), h->sender);
            return;
        }
        ps_msg_send_ctrl(s->router, &m->route, PS_MSG_PREFLIGHT_PROBE, PS_ROLE_SERVER,
                         s->rank, NULL);
        return;
    default:
        ps_reply_error(s->reply, m, PS_EPROTO, "unexpected message type %s",
                      ps_codec_type_name(h->type));
        return;
    }
    ps_trace_span_t receive = ps_trace_span_begin(PS_TRACE_RECEIVE, h->step, h->type);
    ps_trace_span_t check = ps_trace_span_begin(PS_TRACE_VALIDATE, h->step, 0);
    char why[160];
    int rc = ps_intake_check(s->intake, h, m->nframes, why, sizeof why);
    if (rc != 0) {
        ps_reply_error(s->reply, m, rc, "%s", why);
        return;
    }
    /* After the token check: a stranger's message is refused, not dropped. */
    if (ps_control_is_stale(s->control, h->generation, why, sizeof why)) {
        char peer[32];
        snprintf(peer, sizeof peer, "W%d", h->sender);
        ps_ratelog_reject(s->rejections, ps_codec_type_name(h->type), peer, why);
        return;
    }
    ps_trace_span_end(&check);
    ps_reply_to_t to = {m->route, h->request_id, h->type, h->sender, h->step, h->piece};
    ps_request_t req = {h->sender, h->step, h->version, {h->key_begin, h->key_end}, NULL, NULL, &to};
    if (ps_intake_is_push(h->type)) {
        rc = s_push(s, m, &req, why, sizeof why);
    } else if (ps_intake_is_rows(h->type)) {
        rc = s_rows(s, m, &req, why, sizeof why);
    } else if (h->type == PS_MSG_PULL) {
        rc = ps_consistency_pull(s->cons, &req, why, sizeof why);
    } else {
        size_t len;
        req.data = ps_msg_frame(m, 0, &len);
        rc = ps_consistency_init(s->cons, &req, why, sizeof why);
    }
    if (rc != 0) {
        ps_reply_error(s->reply, m, rc, "%s", why);
    }
    ps_trace_span_end(&receive);
}

/* The counts the heartbeat and the end of the job read. */
static ps_server_snapshot_t s_snapshot(ps_server_t *s)
{
    const ps_replica_stats_t rs = ps_replica_stats(s->replica);
    if (s->rows) {
        ps_rows_stats(s->rows, &s->rows_stats);
    }
    return (ps_server_snapshot_t){.stats = ps_consistency_stats(s->cons),
                                  .replicated = rs.updates,
                                  .replica_bytes = rs.bytes,
                                  .replica_snapshots = rs.snapshots,
                                  .version = ps_consistency_version(s->cons),
                                  .rejected = ps_reply_errors(s->reply),
                                  .held = ps_intake_held(s->intake),
                                  .pending_pulls = ps_consistency_pending_pulls(s->cons),
                                  .forged = ps_intake_forged(s->intake),
                                  .unread_refused = ps_reply_refused(s->reply),
                                  .stale = ps_control_stale(s->control),
                                  .rows = s->rows ? &s->rows_stats : NULL,
                                  .rows_bytes = s->rows ? ps_rows_bytes(s->rows) : 0};
}

/* The heartbeat's report (ps_link_report_fn): who the step waits for, and
 * the metrics. Runs in the loop's thread, like everything that changes them. */
static void s_heartbeat_report(void *arg, Shardps__MetricsReport *r, ps_text_t *text)
{
    ps_server_t *s = arg;
    if (!s->control) { /* before the view */
        return;
    }
    const ps_server_snapshot_t snap = s_snapshot(s);
    r->step = snap.version;
    r->n_waiting_for = (size_t)ps_consistency_missing(s->cons, r->waiting_for,
                                                      PS_REPORT_MAX_WAITING, &r->waited_seconds);
    ps_server_obs_render(s->obs, &snap, text);
}

/* Sends the telemetry the scheduler asked for at the end of the job. */
static void s_send_report(ps_server_t *s)
{
    ps_link_report_now(s->link); /* the scheduler's metrics end with our final counts */
    const ps_server_snapshot_t snap = s_snapshot(s);
    Shardps__ServerReport r;
    uint64_t bytes[2][PS_BYTE_TYPES];
    ps_server_obs_report(&snap, s->ctx, &r, bytes);
    ps_link_send(s->link, PS_MSG_REPORT, &r.base);
}

/* MSG_REPLICA from the scheduler: a primary's replica to keep in step (or
 * drop); a replica's new primary. */
static void s_on_replica(ps_server_t *s, ps_msg_t *m)
{
    char why[256];
    const Shardps__Replica *r = ps_msg_unpack_body(m, &shardps__replica__descriptor);
    if (r && s->view->replica_of) {
        ps_follow_new_primary(s->follow, r);
    } else if (!r || !s->replica) {
        ps_log_warn("dropped a bad replica message from the scheduler");
    } else if (ps_replica_attach(s->replica, r, why, sizeof why) != 0) {
        ps_log_warn("%s: going on without a replica", why);
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
        ps_reply_error(s->reply, m, PS_EPROTO, "malformed message: %s", m->why);
    }
    return 0;
}

/* ps_msg_drain's handler for the scheduler's messages: the end of the job
 * and its telemetry here, the rest to the control module. */
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
    case PS_LINK_MESSAGE: {
        if (m->hdr.type == PS_MSG_REPORT) {
            s_send_report(l->s);
            return 0;
        }
        if (m->hdr.type == PS_MSG_REPLICA) {
            s_on_replica(l->s, m);
            return 0;
        }
        size_t len = 0;
        const void *body = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
        if (ps_control_handle(l->s->control, m->hdr.type, body, len) != 0) {
            l->status = 1; /* a failover could not roll the shard back */
            return 1;
        }
        return 0;
    }
    default:
        return 0;
    }
}

/* Serves until the job ends. Returns 0 (clean shutdown) or 1. */
static int s_loop(ps_server_t *s)
{
    char err[256];
    ps_loop_t l = {s, -1};
    int moving = 0; /* waiting replies went out last time: buffers are coming back */
    for (;;) {
        ps_sock_t *rsocks[PS_MAX_REPLICAS];
        const int nr = ps_replica_socks(s->replica, rsocks, PS_MAX_REPLICAS);
        ps_pollitem_t items[2 + PS_MAX_REPLICAS] = {{.sock = s->router},
                                                    {.sock = ps_link_sock(s->link)}};
        for (int i = 0; i < nr; i++) {
            items[2 + i].sock = rsocks[i];
        }
        /* Replies waiting for buffers go soon after ZeroMQ gives some back;
         * a worker that does not read at all costs a wake-up every 10 ms. */
        int rc = ps_poll(items, 2 + nr, !ps_reply_waiting(s->reply) ? 100 : moving ? 1 : 10);
        if (rc < 0) {
            ps_log_err("poll failed: %s", ps_strerror(rc));
            return 1;
        }
        int acks = 0;
        for (int i = 0; i < nr; i++) {
            acks |= items[2 + i].ready;
        }
        if (acks) {
            ps_replica_drain(s->replica);
        }
        if (items[0].ready) {
            ps_msg_drain(s->router, PS_RECV_ROUTER, 64, s_on_receive, &l);
            if (ps_follow_flush(s->follow) != 0) { /* out of step with its primary */
                return 1;
            }
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
        ps_consistency_send_applied(s->cons); /* what this turn's messages applied */
        ps_consistency_tick(s->cons);
        if (s->replica) {
            ps_replica_flush(s->replica); /* members that changed */
        }
        moving = ps_reply_flush(s->reply, ps_consistency_version(s->cons)) > 0;
        ps_ratelog_tick(s->rejections);
        ps_trace_poll();
    }
}

/* A job with embedding rows: our table, with the optimizer the store runs
 * (run: the job as the servers run it). Returns 0, PS_EINVAL or PS_ENOMEM. */
static int s_setup_rows(ps_server_t *s, const ps_job_t *run)
{
    if (!ps_job_has_rows(run)) {
        return 0;
    }
    ps_rows_config_t rc = {
        .dim = (size_t)run->embed_dim,
        .seed = run->seed,
        .init_bound = ps_job_row_bound(run),
        .min_count = (uint32_t)run->min_count,
        .max_rows = run->max_rows,
    };
    int err = ps_optim_from_job(run, &rc.optim);
    return err ? err : ps_rows_new(&s->rows, &rc);
}

/* The modules around the store, for the view's shard and job. Returns 0 or
 * a PS_E* with a one-line reason in err. */
static int s_setup_modules(ps_server_t *s, char *err, size_t errlen)
{
    const ps_view_t *v = s->view;
    ps_job_t run = v->job; /* async: the momentum the servers run, and the rate's factor */
    double rate = 1;
    run.momentum = ps_job_async_momentum(&v->job, s->workers, &rate);
    int rc = ps_store_new(&s->store, s->shard, &run);
    if (rc == PS_EINVAL) {
        snprintf(err, errlen, "unknown optimizer '%s'", v->job.optimizer);
        return rc;
    }
    ps_consistency_config_t cc = {
        .job = v->job,
        .workers = s->workers,
        .rank = s->rank,
        .steps_per_epoch = v->steps_per_epoch,
        .total_steps = v->total_steps,
        .report_missing = s->cfg->report_missing,
        .asker_size = sizeof(ps_reply_to_t),
        .ops = {s, s_on_ack, s_on_reply, s_on_release, s_on_stepped, s_on_update,
                s_on_apply_rows, s_on_reply_rows},
        .resent = v->replicas > 0,
        .async_rate = (float)rate,
        .rows = ps_job_has_rows(&v->job),
        .row_range = v->servers[s->rank].rows,
    };
    rc = rc ? rc : s_setup_rows(s, &run);
    rc = rc ? rc : ps_consistency_new(&s->cons, &cc, s->store);
    rc = rc ? rc : ps_ratelog_new(&s->rejections, PS_RATELOG_PERIOD);
    const uint32_t reply_dtype = ps_wire_dtype(&v->job);
    s->push_dtype = v->job.topk > 0 ? ps_wire_sparse_of(reply_dtype) : reply_dtype;
    const int sync = v->job.mode == PS_MODE_SYNC;
    const ps_reply_config_t rcfg = {s->shard,     s->workers,    s->rank,
                                    !sync,        reply_dtype,   s->store,
                                    s->rejections, s->obs,
                                    ps_job_chunked(&v->job) ? ps_job_chunk_keys(&v->job) : 0};
    rc = rc ? rc : ps_reply_new(&s->reply, &rcfg);
    /* A spare per chunk and per reply that may be out: an update of values
     * replies still hold always finds a buffer (server/store.h). Outside
     * sync, replies hold values while updates come, so the spares of the
     * counted holds are touched now, not page by page in the first rounds
     * that need them. */
    const int cap = rc ? 0 : ps_reply_hold_cap(s->reply);
    rc = rc ? rc : ps_store_reserve(s->store, (int)ps_reply_parts(s->shard) + cap, sync ? 0 : cap);
    const ps_intake_config_t icfg = {s->shard, s->workers, v->worker_tokens, s->push_dtype,
                                     s->cons ? ps_consistency_max_held(s->cons) + 1 : 0,
                                     v->servers[s->rank].rows,
                                     s->rows ? (int)ps_rows_dim(s->rows) : 0};
    rc = rc ? rc : ps_intake_new(&s->intake, &icfg);
    if (rc == 0 && v->replicas > 0) {
        rc = ps_replica_new(&s->replica, s->ctx, s->store, s->rows, s->cons, s->reply, s->rank);
    }
    const ps_follow_config_t fcfg = {
        s->view, s->store, s->rows, s->cons,
        {s, s_control_send, s_follow_register_as, s_follow_ack, s_follow_refuse}};
    rc = rc ? rc : ps_follow_new(&s->follow, &fcfg);
    const ps_control_config_t ccfg = {
        s->view, s->rank, s->store, s->cons, s->cfg->checkpoint_dir,
        {s, s_control_send, s_control_generation, s_control_abort, s_control_promoted,
         s_control_reloaded},
        s->rows};
    rc = rc ? rc : ps_control_new(&s->control, &ccfg);
    if (rc != 0) {
        snprintf(err, errlen, "out of memory for a shard of %llu parameters",
                 (unsigned long long)ps_range_len(s->shard));
        return PS_ENOMEM;
    }
    return 0;
}

static int s_setup(ps_server_t *s, char *err, size_t errlen)
{
    const ps_view_t *v = s->view;
    s->rank = v->replica_of ? v->replica_of - 1 : ps_link_rank(s->link);
    s->workers = v->num_workers;
    s->shard.begin = v->servers[s->rank].begin;
    s->shard.end = v->servers[s->rank].end;
    const uint64_t n = ps_range_len(s->shard);
    if (ps_wire_worker_momentum(&v->job)) {
        /* top-k with SGD momentum: the workers run it (momentum correction),
         * we apply plain SGD; the store, the consistency and checkpoints
         * all see momentum 0 */
        s->view->job.momentum = 0;
    }
    int rc = s_setup_modules(s, err, errlen);
    if (rc != 0) {
        return rc;
    }
    ps_server_obs_setup(s->obs, s->workers);
    ps_server_obs_wire(s->obs, s->ctx);
    ps_alloc_warm_heap(n * sizeof(float)); /* a push of the shard per round */
    if (v->resume_parts > 0 && (rc = ps_control_resume(s->control, err, errlen)) != 0) {
        return rc;
    }
    char mode[32];
    ps_job_mode_str(&v->job, mode, sizeof mode);
    ps_log_info("%s keys [%llu, %llu) (%llu parameters) for %d workers, mode %s, "
                "optimizer %s",
                v->replica_of ? "a replica of" : "serving", (unsigned long long)s->shard.begin,
                (unsigned long long)s->shard.end, (unsigned long long)n, s->workers, mode,
                v->job.optimizer);
    return 0;
}

/* Binds the workers' socket once the shard is known (server/listen.h), then
 * tells the scheduler where, which sends the workers the view once every
 * server has. */
static int s_listen(ps_server_t *s, char *err, size_t errlen)
{
    char bound[128], advertise[PS_ENDPOINT_MAX];
    int rc = ps_listen_open(s->ctx, s->cfg->bind, s->shard, s->push_dtype,
                            ps_job_rows_frame_max(&s->view->job), &s->router, bound,
                            sizeof bound, err, errlen);
    if (rc != 0) {
        return rc;
    }
    ps_reply_set_sock(s->reply, s->router);
    /* Bound to every interface: the address we reach the scheduler from
     * (the scheduler makes a loopback one right for the other hosts). */
    rc = ps_addr_announce_route(bound, s->cfg->advertise, s->cfg->scheduler, advertise,
                                sizeof advertise, err, errlen);
    if (rc != 0) {
        return rc;
    }
    ps_follow_listening(s->follow, advertise);
    Shardps__PeerReady ready = SHARDPS__PEER_READY__INIT;
    ready.endpoint = advertise;
    rc = ps_link_send(s->link, PS_MSG_PEER_READY, &ready.base);
    if (rc != 0) {
        snprintf(err, errlen, "cannot tell the scheduler we are ready: %s", ps_strerror(rc));
    }
    return rc;
}

/* MSG_RESUME_CHECK before the view: answered from our copy of the checkpoint
 * directory (ps_control_resume_check). */
static void s_on_resume_check(void *arg, ps_msg_t *m)
{
    ps_server_t *s = arg;
    const Shardps__ResumeCheck *q;
    ps_control_resume_check_t a;
    if (m->hdr.type != PS_MSG_RESUME_CHECK ||
        !(q = ps_msg_unpack_body(m, &shardps__resume_check__descriptor))) {
        return;
    }
    ps_control_resume_check(q, s->cfg->checkpoint_dir, &a);
    if (ps_link_send(s->link, PS_MSG_RESUME_CHECK, &a.msg.base) != 0) {
        ps_log_warn("cannot answer the scheduler's resume check");
    }
}

/* Start-up before the view: the ZeroMQ context, security, tracing and
 * metrics, a check that the workers' address binds, then registering with the
 * scheduler, whose rank names us in logs and traces. Returns 0, or -1 after
 * logging why. */
static int s_start(ps_server_t *s, char *err, size_t errlen)
{
    const ps_server_config_t *cfg = s->cfg;
    s->view = calloc(1, sizeof *s->view);
    if (!s->view || ps_ctx_new(&s->ctx) != 0) {
        ps_log_err("out of memory");
        return -1;
    }
    if (ps_ctx_set_io_threads(s->ctx, PS_SERVER_IO_THREADS) != 0) {
        ps_log_err("cannot give ZeroMQ %d I/O threads", PS_SERVER_IO_THREADS);
        return -1;
    }
    if (ps_curve_secure_ctx(s->ctx, cfg->secure, cfg->keys, PS_ROLE_SERVER, err,
                            errlen) != 0 ||
        ps_trace_open(cfg->trace, cfg->trace_steps, cfg->trace_kib, err, errlen) != 0 ||
        ps_server_obs_new(cfg->metrics_bind, &s->obs, err, errlen) != 0) {
        ps_log_err("%s", err);
        return -1;
    }
    if (ps_listen_check(s->ctx, cfg->bind, err, errlen) != 0) {
        ps_log_err("cannot bind %s: %s", cfg->bind, err);
        return -1;
    }
    ps_secret_t secret;
    ps_job_t job;
    if (ps_link_read_secret(cfg->secret_file, &secret, err, errlen) != 0) {
        ps_log_err("%s", err);
        return -1;
    }
    const ps_link_ident_t ident = {cfg->job_id, cfg->job_hash, &secret};
    int rc = ps_link_join(&s->link, s->ctx, cfg->scheduler, PS_ROLE_SERVER,
                          cfg->spare ? PS_LINK_RANK_SPARE : cfg->rank, NULL, &ident,
                          cfg->connect_timeout, cfg->peer_timeout, &job, err, errlen);
    explicit_bzero(&secret, sizeof secret);
    if (rc != 0) {
        ps_log_err("%s", err);
        return -1;
    }
    ps_link_set_grace(s->link, cfg->scheduler_grace);
    ps_log_set_role("S", ps_link_rank(s->link));
    char tag[16];
    snprintf(tag, sizeof tag, "S%d", ps_link_rank(s->link));
    ps_trace_set_process(tag, ps_link_clock_offset(s->link));
    ps_link_set_report(s->link, s_heartbeat_report, s);
    ps_link_set_on_message(s->link, s_on_resume_check, s);
    ps_log_info("registered as S%d%s", ps_link_rank(s->link),
                cfg->spare ? " (a spare)" : "");
    return 0;
}

int ps_server_run(const ps_server_config_t *cfg)
{
    ps_server_t s = {.cfg = cfg};
    int status = 1;
    char err[768] = "";
    if (s_start(&s, err, sizeof err) != 0) {
        goto fail;
    }
    int rc = ps_link_wait_view(s.link, NULL, s.view, err, sizeof err);
    if (rc == PS_ENOENT) { /* only a spare waits for a view past the job's end */
        ps_log_info("the job ended without needing this spare");
        status = 0;
        goto fail;
    }
    if (rc == 0 && s.view->replaced) { /* a spare, now the lost server's rank */
        ps_link_set_rank(s.link, s.view->replaced - 1);
        ps_link_set_generation(s.link, s.view->generation);
        ps_log_set_role("S", s.view->replaced - 1);
        ps_log_info("taking over S%d's keys from %s (failover %lld)", s.view->replaced - 1,
                    s.view->resume_dir, (long long)s.view->generation);
    }
    if (rc == 0 && s.view->replica_of) {
        ps_link_set_generation(s.link, s.view->generation);
        ps_log_info("the replica of S%d (failover %lld)", s.view->replica_of - 1,
                    (long long)s.view->generation);
    }
    /* s_listen binds for the shard and says where (PEER_READY) before a
     * promoted spare's FAILOVER_READY: the scheduler needs its endpoint
     * for the workers' view. */
    if (rc != 0 || s_setup(&s, err, sizeof err) != 0 || s_listen(&s, err, sizeof err) != 0) {
        ps_log_err("%s", err);
        ps_link_abort(s.link, err);
        goto fail;
    }
    if (s.view->replaced) {
        ps_control_takeover(s.control);
    }
    status = s_loop(&s);
    const ps_server_snapshot_t snap = s_snapshot(&s);
    ps_ratelog_destroy(&s.rejections); /* its last counts before the totals */
    ps_server_obs_log_totals(&snap);
fail:
    if (status != 0) {
        ps_sock_set_linger(s.router, PS_ABORT_LINGER_MS);
        ps_sock_set_linger(s.link ? ps_link_sock(s.link) : NULL, PS_ABORT_LINGER_MS);
    }
    ps_link_destroy(&s.link);
    ps_sock_destroy(&s.router);
    ps_replica_destroy(&s.replica); /* its socket, before the context */
    ps_follow_destroy(&s.follow);
    ps_ctx_destroy(&s.ctx);
    ps_reply_destroy(&s.reply); /* after ps_ctx_destroy: ZeroMQ gave every buffer back */
    ps_consistency_destroy(&s.cons); /* releases the held frames: before their holders */
    ps_intake_destroy(&s.intake);
    ps_control_destroy(&s.control);
    ps_store_destroy(&s.store);
    ps_rows_destroy(&s.rows);
    ps_ratelog_destroy(&s.rejections);
    ps_trace_close();
    ps_server_obs_destroy(&s.obs);
    free(s.view);
    return status;
}
