/*
 * worker/kv.c - push/pull client: socket pumping, by the thread that waits.
 *
 * There is no I/O thread. Every socket and all state belong to whoever holds
 * mu. The trainer sends a request itself when it submits it, and while it
 * waits it polls the sockets itself, so a reply reaches it with no hand-off
 * between threads (on a busy machine each hand-off is a wake-up and a context
 * switch per message). While the trainer computes, a ticker thread takes mu
 * every KV_TICK_MS to handle what arrived (scheduler messages, replies) and
 * send heartbeats. The bookkeeping of requests in flight (ids, expected
 * answers, pull reassembly, each request's failure) is worker/kv_slots.c;
 * the embedding rows' requests are worker/kv_rows.c.
 */
#include "worker/kv.h"

#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/trace.h"
#include "proto/addr.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "worker/kv_encode.h"
#include "worker/kv_impl.h"
#include "worker/kv_lanes.h"
#include "worker/kv_slots.h"

/* How often the ticker looks at the sockets while nobody waits; also the
 * longest a waiter polls before it checks heartbeats and the job's state. */
enum { KV_TICK_MS = 50 };

enum { KV_PIECES = 128 }; /* most chunk messages of one push to a server */

/* A push-pull's pull: where its values go and the version they need. */
typedef struct {
    float *dst;
    int64_t version;
} kv_pull_t;

/* Records a fatal condition: every wait fails from now on. Caller holds mu. */
static void s_set_fatal(ps_kv_t *kv, int rc, const char *why)
{
    if (!atomic_load(&kv->fatal)) {
        snprintf(kv->fatal_why, sizeof kv->fatal_why, "%s", why);
        atomic_store(&kv->fatal, rc);
    }
}

/* Sends slot idx's message of `type` for keys `part` to server i: a push's
 * gradient comes from the slot's buffer, a pull asks for the slot's min
 * version (a push-pull's pull_version). Caller holds mu. */
static void s_put(ps_kv_t *kv, int idx, int i, ps_msg_type_t type, ps_range_t part)
{
    const ps_kv_slot_t *sl = ps_kv_slots_get(kv->slots, idx);
    const int push = type == PS_MSG_PUSH || type == PS_MSG_PUSH_PULL;
    const int64_t pull_version = sl->type == PS_KV_PUSH_PULL ? sl->pull_version : sl->step;
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_WORKER, ps_link_rank(kv->link));
    h.token = ps_link_token(kv->link);
    h.request_id = ps_kv_slots_id(kv->slots, idx);
    h.key_begin = part.begin;
    h.key_end = part.end;
    h.step = type == PS_MSG_PULL ? pull_version : sl->step;
    h.version = kv->versions[i];
    h.generation = kv->generation;
    h.pull_version = type == PS_MSG_PUSH_PULL ? pull_version : 0;
    ps_frame_t f = {sl->buf + (part.begin - sl->range.begin), ps_range_len(part) * sizeof(float)};
    int flags = 0;
    if (push && kv->encode) {
        ps_kv_encode_push(kv->encode, &h, &f, part);
        flags = PS_SEND_COPY; /* the encoder's buffer is reused for the next part */
    }
    ps_trace_span_t span = {.on = 0}; /* initial values are no step's message */
    if (type != PS_MSG_INIT) {
        span = ps_trace_span_begin(type == PS_MSG_PULL ? PS_TRACE_PULL_MSG : PS_TRACE_PUSH_MSG,
                                   PS_TRACE_CURRENT_STEP, (int64_t)part.begin);
    }
    int rc = ps_msg_send(kv->servers[i], NULL, h, &f, type != PS_MSG_PULL, flags);
    ps_trace_span_end(&span);
    if (rc != 0) {
        char why[160];
        snprintf(why, sizeof why, "sending to S%d failed: %s", i, ps_strerror(rc));
        ps_kv_slots_complete(kv->slots, idx, rc, why);
    } else if (push) {
        kv->bytes_pushed += f.len;
    }
}

/* Sends now what server i's lane admits, else queues it (kv_lanes.h). */
static void s_send_part(ps_kv_t *kv, int idx, int i, ps_msg_type_t type, ps_range_t part)
{
    if (ps_kv_lanes_admit(kv->lanes, i, type, ps_range_len(part), ps_now())) {
        s_put(kv, idx, i, type, part);
        return;
    }
    const ps_kv_out_t o = {idx, ps_kv_slots_id(kv->slots, idx), type, part,
                           ps_range_len(part), 0};
    ps_kv_lanes_queue(kv->lanes, i, &o);
}

/* Sends what server i's credits let go; drops what belongs to a request
 * that is over (failed, or its slot reused). Caller holds mu. */
static void s_flush(ps_kv_t *kv, int i)
{
    ps_kv_out_t o;
    for (const double now = ps_now(); ps_kv_lanes_next(kv->lanes, i, &o, now);) {
        if (ps_kv_slots_get(kv->slots, o.idx)->state != PS_KV_SENT ||
            ps_kv_slots_id(kv->slots, o.idx) != o.id) {
            ps_kv_lanes_unsend(kv->lanes, i, &o);
            continue;
        }
        if (o.type == PS_MSG_ROWS_PUSH) {
            ps_kv_put_rows(kv, o.idx, i, o.piece);
        } else {
            s_put(kv, o.idx, i, o.type, o.part);
        }
    }
}

/* Sends a data request: one message per server holding part of its keys (a
 * push: one per push piece; a push-pull: to a server whose keys go in one
 * piece, one push-pull, else the pull at once, past the pushes waiting for
 * credits, so its chunks come back as they apply, and the pushes). Pushes
 * go a piece per server in turn from our own rank's server: the workers'
 * first pieces reach different servers, and each server's first chunks
 * arrive early. In ssp a server often answers a pull at once, and a whole
 * shard's reply would stand on the link ahead of the acks that clock our
 * pushes: an ssp push-pull to another host pulls each pushed piece behind
 * it (the server answers a worker's pulls in the order they came). Caller
 * holds mu. */
static void s_send_request(ps_kv_t *kv, int idx)
{
    const ps_kv_slot_t *sl = ps_kv_slots_get(kv->slots, idx);
    const int n = kv->view.num_servers, me = ps_link_rank(kv->link);
    ps_range_t left[PS_MAX_SERVERS] = {{0, 0}}; /* per server: keys still to push */
    ps_range_t after[PS_MAX_SERVERS] = {{0, 0}}; /* and to pull behind them */
    for (int j = 0; j < n; j++) {
        const int i = (me + j) % n;
        ps_range_t part, pull;
        ps_kv_req_t req = sl->type;
        if (req == PS_KV_PUSH_PULL) {
            if ((req = ps_kv_slots_plan(kv->slots, idx, i, &part, &pull)) == PS_KV_PULL) {
                continue; /* none of its keys */
            }
        } else if (!ps_range_intersect(sl->range, (ps_range_t){kv->view.servers[i].begin,
                                                               kv->view.servers[i].end},
                                       &part)) {
            continue;
        }
        if (req == PS_KV_PUSH) {
            left[i] = part;
        }
        if (sl->type == PS_KV_PUSH_PULL && req == PS_KV_PUSH) {
            if (kv->view.job.mode == PS_MODE_SSP && !ps_kv_lanes_local(kv->lanes, i)) {
                after[i] = pull;
            } else if (pull.begin < pull.end) {
                s_put(kv, idx, i, PS_MSG_PULL, pull);
            }
        } else if (req != PS_KV_PUSH) {
            s_send_part(kv, idx, i, req == PS_KV_PUSH_PULL ? PS_MSG_PUSH_PULL
                                    : req == PS_KV_PULL    ? PS_MSG_PULL : PS_MSG_INIT, part);
        }
    }
    for (int more = 1; more;) {
        more = 0;
        for (int j = 0; j < n; j++) {
            const int i = (me + j) % n;
            ps_range_t *l = &left[i], *a = &after[i];
            if (l->begin < l->end) {
                const uint64_t end = ps_kv_slots_piece_end(kv->slots, idx, i, l->begin, l->end);
                s_send_part(kv, idx, i, PS_MSG_PUSH, (ps_range_t){l->begin, end});
                const uint64_t pull_end = end == l->end || end > a->end ? a->end : end;
                if (pull_end > a->begin) {
                    s_send_part(kv, idx, i, PS_MSG_PULL, (ps_range_t){a->begin, pull_end});
                    a->begin = pull_end;
                }
                l->begin = end;
                more |= end < l->end;
            }
        }
    }
}

/* ps_msg_drain's handler for a server's socket. Caller holds mu. */
static int s_on_server(void *arg, ps_msg_t *m, int rc)
{
    const kv_peer_t *p = arg;
    ps_kv_t *kv = p->kv;
    if (rc != 0) {
        ps_log_warn("dropped a malformed message from a server: %s", m->why);
        return 0;
    }
    ps_frame_t frames[PS_MSG_MAX_FRAMES];
    for (int k = 0; k < m->nframes; k++) {
        frames[k].data = ps_msg_frame(m, k, &frames[k].len);
    }
    uint64_t pulled = 0;
    if (m->hdr.type == PS_MSG_PUSH_ACK || m->hdr.type == PS_MSG_PULL_REPLY) {
        const double now = ps_trace_enabled() ? ps_now() : 0;
        ps_trace_span(m->hdr.type == PS_MSG_PUSH_ACK ? PS_TRACE_ACK : PS_TRACE_PULL_PART,
                      PS_TRACE_CURRENT_STEP, now, now, (int64_t)m->hdr.key_begin);
    }
    const ps_kv_slot_t *sl = ps_kv_slots_get(kv->slots, (int)(m->hdr.request_id & 0xff) %
                                                            PS_KV_SLOTS);
    if ((m->hdr.type == PS_MSG_PUSH_ACK || m->hdr.type == PS_MSG_ERROR) &&
        sl->type != PS_KV_ROWS_PULL) {
        /* a rows pull takes no credit: its answer gives none back */
        ps_kv_lanes_answered(kv->lanes, p->server, m->hdr.credits, ps_now());
        s_flush(kv, p->server);
    }
    if (ps_kv_slots_on_reply(kv->slots, p->server, &m->hdr, frames, m->nframes, &pulled) != 0) {
        ps_log_warn("dropped a stray %s from S%d", ps_codec_type_name(m->hdr.type), p->server);
    } else if (pulled) {
        kv->versions[p->server] = m->hdr.version;
        kv->bytes_pulled += pulled;
    }
    return 0;
}

/* Whether server i's pushes go whole: its lane is not paced (the server is
 * on this host: no link between us to keep busy, and each message costs the
 * cores that are the bound), unless chunks are asked for everywhere. Caller
 * holds mu (or is ps_kv_new). */
static void s_set_whole(ps_kv_t *kv, int i)
{
    ps_kv_slots_set_whole(kv->slots, i, ps_kv_lanes_local(kv->lanes, i) && !kv->local_chunks);
}

void ps_kv_set_local_chunks(ps_kv_t *kv, int on)
{
    pthread_mutex_lock(&kv->mu);
    kv->local_chunks = on != 0;
    for (int i = 0; i < kv->view.num_servers; i++) {
        s_set_whole(kv, i);
    }
    pthread_mutex_unlock(&kv->mu);
}

/* Connects a new socket to server i at endpoint ep (under --secure proving
 * key, its CurveZMQ public key) in place of the old one, if any (what the
 * old one still queued for a lost server is dropped). Caller holds mu (or
 * is ps_kv_new). Returns 0 or PS_EINVAL. */
static int s_connect(ps_kv_t *kv, int i, const char *ep, const char *key)
{
    char err[256];
    ps_sock_t *sock = NULL;
    if (ps_sock_new(kv->ctx, PS_SOCK_DEALER, &sock, err, sizeof err) != 0 ||
        ps_sock_set_peer_key(sock, key) != 0 || ps_sock_connect(sock, ep) != 0) {
        ps_sock_destroy(&sock);
        return PS_EINVAL;
    }
    ps_sock_set_linger(kv->servers[i], 0);
    ps_sock_destroy(&kv->servers[i]);
    kv->servers[i] = sock;
    kv->items[1 + i].sock = sock;
    ps_kv_lanes_set_local(kv->lanes, i, ps_addr_is_local(ep));
    s_set_whole(kv, i);
    snprintf(kv->view.servers[i].endpoint, sizeof kv->view.servers[i].endpoint, "%s", ep);
    return 0;
}

/* MSG_FAILOVER: lost servers were replaced, and every server rolled back to
 * the view's start_step or (takeover) forgot the step under way. Connects to
 * each server whose endpoint changed (several when failovers overlap), fails
 * every request in flight with PS_EAGAIN and refuses new ones until the
 * trainer takes the failover (ps_kv_rollback). Caller holds mu. */
static void s_on_failover(ps_kv_t *kv, ps_msg_t *m)
{
    ps_view_t *v = calloc(1, sizeof *v);
    const Shardps__ClusterView *cv = ps_msg_unpack_body(m, &shardps__cluster_view__descriptor);
    if (!v || !cv || ps_codec_view_from_pb(cv, v, NULL, 0) != 0 ||
        v->num_servers != kv->view.num_servers) {
        ps_log_warn("dropped a bad failover message from the scheduler");
        free(v);
        return;
    }
    if (v->generation <= kv->generation) {
        free(v);
        return;
    }
    for (int i = 0; i < v->num_servers; i++) {
        const char *ep = v->servers[i].endpoint;
        if (strcmp(ep, kv->view.servers[i].endpoint) != 0 &&
            s_connect(kv, i, ep, v->servers[i].curve_key) != 0) {
            char err[256];
            snprintf(err, sizeof err, "failover: cannot connect to S%d at '%s'", i, ep);
            s_set_fatal(kv, PS_ECLOSED, err);
            free(v);
            return;
        }
        kv->versions[i] = v->takeover ? kv->versions[i] : v->start_step; /* what pushes say */
    }
    for (int idx = 0; idx < PS_KV_SLOTS; idx++) {
        ps_kv_slots_complete(kv->slots, idx, PS_EAGAIN, "rolled back: a lost server was replaced");
    }
    ps_kv_lanes_reset(kv->lanes);
    kv->generation = v->generation;
    ps_link_set_generation(kv->link, v->generation);
    kv->rollback = v->takeover ? 2 : 1;
    kv->rollback_step = v->start_step;
    free(v);
}

/* ps_msg_drain's handler for the scheduler's socket. Caller holds mu. */
static int s_on_sched(void *arg, ps_msg_t *m, int rc)
{
    ps_kv_t *kv = arg;
    if (rc != 0) {
        ps_log_warn("dropped a malformed message from the scheduler: %s", m->why);
        return 0;
    }
    char err[256];
    switch (ps_link_handle(kv->link, m, err, sizeof err)) {
    case PS_LINK_SHUTDOWN:
        kv->finished = 1;
        ps_kv_slots_complete_type(kv->slots, PS_KV_FINISH);
        s_set_fatal(kv, PS_ECLOSED, "the scheduler ended the job");
        break;
    case PS_LINK_ABORTED:
    case PS_LINK_ERROR:
        s_set_fatal(kv, PS_ECLOSED, err);
        break;
    case PS_LINK_MESSAGE:
        if (m->hdr.type == PS_MSG_BARRIER_DONE) {
            ps_kv_slots_complete_type(kv->slots, PS_KV_BARRIER);
        } else if (m->hdr.type == PS_MSG_FAILOVER) {
            s_on_failover(kv, m);
        }
        break;
    default:
        break;
    }
    return 0;
}

/* Waits up to timeout_ms for any socket, handles everything that arrived and
 * sends a heartbeat when one is due. Caller holds mu. */
static void s_pump(ps_kv_t *kv, long timeout_ms)
{
    int n = kv->view.num_servers;
    if (ps_poll(kv->items, n + 1, timeout_ms) > 0) {
        if (kv->items[0].ready) {
            ps_msg_drain(kv->items[0].sock, 0, INT_MAX, s_on_sched, kv);
        }
        for (int i = 0; i < n; i++) {
            if (kv->items[1 + i].ready) {
                ps_msg_drain(kv->servers[i], 0, INT_MAX, s_on_server, &kv->peers[i]);
            }
        }
    }
    char err[256];
    if (ps_link_tick(kv->link, err, sizeof err) == PS_LINK_LOST && !kv->finished) {
        s_set_fatal(kv, PS_ECLOSED, err);
    }
}

/* The ticker: handles the sockets while nobody waits on them. */
static void *s_ticker_main(void *arg)
{
    ps_kv_t *kv = arg;
    for (;;) {
        struct pollfd p = {.fd = kv->efd, .events = POLLIN};
        if (poll(&p, 1, (int)ps_real_ms(KV_TICK_MS)) > 0) {
            uint64_t v;
            ssize_t got = read(kv->efd, &v, sizeof v);
            (void)got;
        }
        pthread_mutex_lock(&kv->mu);
        if (kv->stop) {
            pthread_mutex_unlock(&kv->mu);
            return NULL;
        }
        s_pump(kv, 0);
        pthread_mutex_unlock(&kv->mu);
    }
}

/* Sends a control message to the scheduler. Caller holds mu. */
static int s_send_ctrl(ps_kv_t *kv, ps_kv_req_t type, const ProtobufCMessage *body)
{
    return ps_link_send(kv->link,
                        type == PS_KV_BARRIER  ? PS_MSG_BARRIER
                        : type == PS_KV_FINISH ? PS_MSG_DONE
                                               : PS_MSG_SHUTDOWN,
                        body);
}

int ps_kv_refused(ps_kv_t *kv, ps_kv_req_t type)
{
    int rc = atomic_load(&kv->fatal);
    if (rc) {
        snprintf(kv->error, sizeof kv->error, "%s", kv->fatal_why);
    } else if (kv->rollback && type != PS_KV_ABORT) {
        snprintf(kv->error, sizeof kv->error, "rolled back: a lost server was replaced");
        rc = PS_EAGAIN;
    }
    return rc;
}

/* Takes a free slot, fills it and sends the request. Returns the handle or a
 * PS_E*. Control requests (barrier, finish, abort) carry their body; a
 * push-pull its destination and pull version in pp. */
static int s_submit(ps_kv_t *kv, ps_kv_req_t type, uint64_t begin, uint64_t end, float *buf,
                    int64_t step, const ProtobufCMessage *body, const kv_pull_t *pp)
{
    if (end < begin || end > kv->view.num_params) {
        return PS_EINVAL;
    }
    pthread_mutex_lock(&kv->mu);
    const int refused = ps_kv_refused(kv, type);
    if (refused) {
        pthread_mutex_unlock(&kv->mu);
        return refused;
    }
    const ps_range_t range = {begin, end};
    ps_kv_slots_set_pace(kv->slots, ps_kv_lanes_rate(kv->lanes));
    int idx = pp ? ps_kv_slots_open_push_pull(kv->slots, range, buf, step, pp->dst, pp->version)
                 : ps_kv_slots_open(kv->slots, type, range, buf, step);
    if (idx >= 0 && (type == PS_KV_PUSH || type == PS_KV_PULL || type == PS_KV_PUSH_PULL ||
                     type == PS_KV_INIT)) {
        s_send_request(kv, idx);
    } else if (idx >= 0) {
        int rc = s_send_ctrl(kv, type, body);
        if (rc != 0 || type == PS_KV_ABORT) { /* an abort expects no answer */
            ps_kv_slots_complete(kv->slots, idx, rc, "cannot reach the scheduler");
        }
    }
    pthread_mutex_unlock(&kv->mu);
    return idx;
}

int ps_kv_set_tensors(ps_kv_t *kv, const uint64_t *starts, size_t n)
{
    pthread_mutex_lock(&kv->mu);
    int rc = kv->encode ? ps_kv_encode_set_tensors(kv->encode, starts, n) : 0;
    pthread_mutex_unlock(&kv->mu);
    return rc;
}

int ps_kv_push(ps_kv_t *kv, uint64_t begin, uint64_t end, const float *grad, int64_t step)
{
    return s_submit(kv, PS_KV_PUSH, begin, end, (float *)grad, step, NULL, NULL);
}

int ps_kv_pull(ps_kv_t *kv, uint64_t begin, uint64_t end, float *dst, int64_t min_version)
{
    return s_submit(kv, PS_KV_PULL, begin, end, dst, min_version, NULL, NULL);
}

int ps_kv_push_pull(ps_kv_t *kv, uint64_t begin, uint64_t end, const float *grad, int64_t step,
                    float *dst, int64_t min_version)
{
    const kv_pull_t pp = {dst, min_version};
    return s_submit(kv, PS_KV_PUSH_PULL, begin, end, (float *)grad, step, NULL, &pp);
}

int ps_kv_init(ps_kv_t *kv, uint64_t begin, uint64_t end, const float *values)
{
    return s_submit(kv, PS_KV_INIT, begin, end, (float *)values, 0, NULL, NULL);
}

int ps_kv_wait(ps_kv_t *kv, int handle)
{
    if (handle < 0 || handle >= PS_KV_SLOTS) {
        return PS_EINVAL;
    }
    pthread_mutex_lock(&kv->mu);
    const ps_kv_slot_t *sl = ps_kv_slots_get(kv->slots, handle);
    while (sl->state == PS_KV_SENT && !atomic_load(&kv->fatal)) {
        s_pump(kv, KV_TICK_MS);
    }
    int done = sl->state == PS_KV_DONE;
    int rc = done ? sl->status : atomic_load(&kv->fatal);
    if (sl->type == PS_KV_FINISH && kv->finished) {
        rc = 0;
    }
    if (rc != 0) {
        snprintf(kv->error, sizeof kv->error, "%s", done ? sl->error : kv->fatal_why);
    }
    if (done) {
        ps_kv_slots_release(kv->slots, handle);
    }
    pthread_mutex_unlock(&kv->mu);
    return rc;
}

/* Sends a control request to the scheduler and waits for its answer. */
static int s_submit_ctrl(ps_kv_t *kv, ps_kv_req_t type, const ProtobufCMessage *body)
{
    int h = s_submit(kv, type, 0, 0, NULL, 0, body, NULL);
    return h < 0 ? h : ps_kv_wait(kv, h);
}

int ps_kv_barrier(ps_kv_t *kv, const char *name)
{
    Shardps__Barrier b = SHARDPS__BARRIER__INIT;
    b.name = (char *)name;
    return s_submit_ctrl(kv, PS_KV_BARRIER, &b.base);
}

int ps_kv_finish(ps_kv_t *kv, const Shardps__Done *done)
{
    pthread_mutex_lock(&kv->mu);
    ps_link_report_now(kv->link); /* the scheduler's metrics end with our final counts */
    pthread_mutex_unlock(&kv->mu);
    return s_submit_ctrl(kv, PS_KV_FINISH, &done->base);
}

void ps_kv_abort(ps_kv_t *kv, const char *reason)
{
    ps_kv_abort_with(kv, PS_ECLOSED, reason);
}

void ps_kv_abort_with(ps_kv_t *kv, int status, const char *reason)
{
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.status = status;
    sd.reason = (char *)reason;
    if (!ps_kv_status(kv)) {
        s_submit_ctrl(kv, PS_KV_ABORT, &sd.base);
    }
}

int ps_kv_status(ps_kv_t *kv)
{
    return atomic_load(&kv->fatal);
}

const char *ps_kv_error(ps_kv_t *kv)
{
    if (kv->error[0]) {
        return kv->error;
    }
    /* No call failed yet: why the job is gone, if it is (fatal_why is final
     * once fatal is seen set). */
    return atomic_load(&kv->fatal) ? kv->fatal_why : "";
}

int ps_kv_takeover_pending(ps_kv_t *kv)
{
    pthread_mutex_lock(&kv->mu);
    const int takeover = kv->rollback == 2; /* the ticker writes it */
    pthread_mutex_unlock(&kv->mu);
    return takeover;
}

int ps_kv_rollback(ps_kv_t *kv, int64_t *step)
{
    pthread_mutex_lock(&kv->mu);
    int pending = kv->rollback != 0;
    if (pending) {
        for (int idx = 0; idx < PS_KV_SLOTS; idx++) {
            if (ps_kv_slots_get(kv->slots, idx)->state == PS_KV_DONE) {
                ps_kv_slots_release(kv->slots, idx); /* handles the trainer gave up */
            }
        }
        kv->rollback = 0;
        kv->rollbacks++;
        *step = kv->rollback_step;
        /* the servers are back at the checkpoint: what waited here belongs
         * to steps they no longer have (as a resumed job, start from zero) */
        if (kv->encode) {
            ps_kv_encode_reset(kv->encode);
        }
    }
    pthread_mutex_unlock(&kv->mu);
    return pending;
}

uint64_t ps_kv_rollbacks(ps_kv_t *kv)
{
    return kv->rollbacks; /* written by the trainer's own calls only: no lock */
}

int64_t ps_kv_version(ps_kv_t *kv)
{
    int64_t v = INT64_MAX;
    pthread_mutex_lock(&kv->mu);
    for (int i = 0; i < kv->view.num_servers; i++) {
        if (kv->view.servers[i].end > kv->view.servers[i].begin && kv->versions[i] < v) {
            v = kv->versions[i];
        }
    }
    pthread_mutex_unlock(&kv->mu);
    return v == INT64_MAX ? 0 : v;
}

void ps_kv_bytes(ps_kv_t *kv, uint64_t *pushed, uint64_t *pulled)
{
    pthread_mutex_lock(&kv->mu);
    *pushed = kv->bytes_pushed;
    *pulled = kv->bytes_pulled;
    pthread_mutex_unlock(&kv->mu);
}

int ps_kv_new(ps_ctx_t *ctx, ps_link_t **link, const ps_view_t *view, ps_kv_t **out,
              char *err, size_t errlen)
{
    ps_kv_t *kv = calloc(1, sizeof *kv);
    if (!kv) {
        snprintf(err, errlen, "out of memory");
        ps_link_destroy(link);
        return PS_ENOMEM;
    }
    kv->view = *view;
    kv->ctx = ctx;
    kv->generation = view->generation;
    kv->link = *link;
    *link = NULL;
    ps_link_set_generation(kv->link, view->generation); /* a joiner's DONE: of this one */
    atomic_init(&kv->fatal, 0);
    kv->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&kv->mu, NULL);
    int n = view->num_servers;
    size_t ns = n > 0 ? (size_t)n : 1; /* allreduce: n = 0, the scheduler link only */
    ps_range_t ranges[PS_MAX_SERVERS];
    for (int i = 0; i < n; i++) {
        ranges[i] = (ps_range_t){view->servers[i].begin, view->servers[i].end};
    }
    kv->servers = calloc(ns, sizeof *kv->servers);
    kv->peers = calloc(ns, sizeof *kv->peers);
    kv->items = calloc(ns + 1, sizeof *kv->items);
    kv->versions = calloc(ns, sizeof *kv->versions);
    int rc = ps_kv_slots_new(ranges, n, &kv->slots);
    ps_rowrange_t rows[PS_MAX_SERVERS];
    for (int i = 0; i < n; i++) {
        rows[i] = view->servers[i].rows;
    }
    if (rc == 0) {
        ps_kv_slots_set_rows(kv->slots, rows);
    }
    rc = rc ? rc : ps_kv_lanes_new(n, PS_KV_SLOTS * 4 + 2 * KV_PIECES + 1, &kv->lanes);
    uint64_t widest = 0;
    for (int i = 0; i < n; i++) {
        widest = ps_range_len(ranges[i]) > widest ? ps_range_len(ranges[i]) : widest;
    }
    rc = rc ? rc : ps_kv_encode_new(&view->job, view->num_params, widest, &kv->encode, err, errlen);
    if (rc == PS_EINVAL) {
        ps_kv_destroy(&kv);
        return rc;
    }
    /* sync and ssp (async, sync:k/n count pushes), dense (top-k: per piece) */
    if (rc == 0 && ps_job_chunked(&view->job) && !ps_kv_encode_topk(kv->encode)) {
        ps_kv_slots_set_chunk(kv->slots, ps_job_chunk_keys(&view->job), KV_PIECES);
        ps_kv_lanes_set_unit(kv->lanes, ps_job_chunk_keys(&view->job));
    }
    if (kv->efd < 0 || !kv->servers || !kv->peers || !kv->items || !kv->versions || rc != 0) {
        snprintf(err, errlen, "out of memory");
        ps_kv_destroy(&kv);
        return PS_ENOMEM;
    }
    kv->items[0].sock = ps_link_sock(kv->link);
    for (int i = 0; i < n; i++) {
        kv->peers[i] = (kv_peer_t){kv, i};
        if (s_connect(kv, i, view->servers[i].endpoint, view->servers[i].curve_key) != 0) {
            snprintf(err, errlen, "cannot connect to S%d at '%s'", i, view->servers[i].endpoint);
            ps_kv_destroy(&kv);
            return PS_EINVAL;
        }
    }
    if (pthread_create(&kv->ticker, NULL, s_ticker_main, kv) != 0) {
        snprintf(err, errlen, "cannot start the ticker thread");
        ps_kv_destroy(&kv);
        return PS_ENOMEM;
    }
    kv->ticker_started = 1;
    if (n > 0) { /* pull replies: the model per round */
        ps_alloc_warm_heap(view->num_params * sizeof(float));
    }
    *out = kv;
    return 0;
}

void ps_kv_destroy(ps_kv_t **kvp)
{
    ps_kv_t *kv = *kvp;
    if (!kv) {
        return;
    }
    if (kv->ticker_started) {
        pthread_mutex_lock(&kv->mu);
        kv->stop = 1;
        pthread_mutex_unlock(&kv->mu);
        uint64_t one = 1;
        ssize_t w = write(kv->efd, &one, sizeof one);
        (void)w;
        pthread_join(kv->ticker, NULL);
    }
    int aborted = atomic_load(&kv->fatal) && !kv->finished;
    for (int i = 0; kv->servers && i < kv->view.num_servers; i++) {
        if (aborted) {
            ps_sock_set_linger(kv->servers[i], PS_ABORT_LINGER_MS);
        }
        ps_sock_destroy(&kv->servers[i]);
    }
    if (aborted && kv->link) {
        ps_sock_set_linger(ps_link_sock(kv->link), PS_ABORT_LINGER_MS);
    }
    ps_link_destroy(&kv->link);
    if (kv->efd >= 0) {
        close(kv->efd);
    }
    pthread_mutex_destroy(&kv->mu);
    ps_kv_slots_destroy(&kv->slots);
    ps_kv_lanes_destroy(&kv->lanes);
    free(kv->servers);
    free(kv->peers);
    free(kv->items);
    free(kv->versions);
    ps_kv_encode_destroy(&kv->encode);
    free(kv);
    *kvp = NULL;
}
