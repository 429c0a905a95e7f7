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
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/hist.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "proto/curve.h"
#include "common/trace.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "proto/wire.h"
#include "server/checkpoint.h"
#include "server/consistency.h"
#include "server/observe.h"
#include "server/reply_pool.h"
#include "server/store.h"

/* Who asked, kept by the consistency while a pull waits. */
typedef struct {
    ps_route_t route;     /* who asked */
    uint64_t request_id;  /* echoed */
    ps_msg_type_t type;   /* init, push, pull or push-pull */
    int worker;           /* its rank (its token checked) */
    int64_t step;         /* of the request, for the trace */
} ps_asker_t;

/* A pull reply part waiting for a reply buffer of its worker's share. */
typedef struct {
    ps_asker_t asker;
    ps_range_t range;
} ps_deferred_t;

/* Per worker, its deferred parts in the order they were due (a pull's parts
 * must arrive in key order): a ring, allocated on first use. */
typedef struct {
    ps_deferred_t *q;
    int head, n;
} ps_defer_ring_t;

/* What the release of a reply sent from held values needs (s_on_sent's
 * hint): the server, and the worker it went to. */
typedef struct ps_server ps_server_t;
typedef struct {
    ps_server_t *s;
    int worker;
} ps_sent_t;

/* Room above the shard's bytes in the largest frame a worker may send (the
 * header frame is under PS_HEADER_MAX). */
#define PS_SERVER_FRAME_HEADROOM (64 << 10)
/* Messages queued to one peer at least: a worker has at most PS_KV_SLOTS
 * (64) requests in flight, a pull answered in messages of up to 32 MiB
 * (s_reply); beyond what
 * the view allows (s_listen), messages to that peer are dropped, which only
 * a peer that stopped reading can meet. */
#define PS_SERVER_QUEUE_MIN 1000
#define PS_SERVER_REQUESTS_IN_FLIGHT 64

struct ps_server {
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
    ps_reply_pool_t *pool; /* each worker's share of replies out (not sync) */
    ps_defer_ring_t *deferred; /* per worker: reply parts waiting for its buffers */
    int defer_cap;        /* parts one worker may have waiting: its requests in flight */
    int ndeferred;        /* parts waiting, all workers */
    /* The frames of the pushes the consistency holds, moved out of their
     * messages: as many as it can hold, and the one being pushed. */
    ps_payload_t *held;
    float **decoded;      /* --wire / --compress: held[i]'s gradient as fp32 (what the
                             consistency holds), allocated at its first use */
    int *held_free;       /* indices of the free ones */
    int nheld;            /* holders */
    int nheld_free;
    uint64_t errors;      /* messages rejected, reported at the end */
    uint64_t forged;      /* of them: a token that is not the claimed worker's */
    uint64_t unread_refused; /* pull replies refused: the worker held its share unread */
    int64_t checkpointed; /* the version of the last checkpoint written (or loaded) */
    ps_ratelog_t *rejections; /* their log lines, at most one per sender and reason */
    ps_server_obs_t *obs; /* metrics and the heartbeat's report */
    int64_t generation;   /* failovers seen: data messages of another one are dropped */
    int64_t rolled_to;    /* the step of the last failover's rollback; -1 when its first
                             step after was reported (or there was none) */
    uint64_t stale;       /* data messages dropped for an old generation */
    int64_t checkpoint_at; /* a checkpoint step agreed with the scheduler (timed), or -1 */
    uint32_t reply_dtype; /* --wire: the dtype of pull replies */
    uint32_t push_dtype;  /* what a push must carry: the wire dtype, sparse with top-k */
    ps_sent_t *sent;      /* per worker: the hint of its replies' release */
};

/* How many store chunks a pull of the whole shard is answered from: its
 * frames (a message carries up to PS_MSG_MAX_FRAMES of them). */
static uint64_t s_reply_parts(const ps_server_t *s)
{
    return (ps_range_len(s->shard) + PS_CONSISTENCY_REPLY_KEYS - 1) / PS_CONSISTENCY_REPLY_KEYS;
}

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

/* A worker that does not read holds its share of reply buffers
 * (server/reply_pool.h) and has as many parts waiting as a worker can have
 * requests in flight: this part of its pull gets an error, not a copy. */
static void s_refuse_unread(ps_server_t *s, const ps_asker_t *a, Shardps__Header h)
{
    char peer[16], why[160];
    snprintf(peer, sizeof peer, "W%d", a->worker);
    snprintf(why, sizeof why, "%d replies to %s not read yet and %d waiting; pull refused",
             ps_reply_pool_held(s->pool, a->worker), peer, s->deferred[a->worker].n);
    s->unread_refused++;
    ps_ratelog_reject(s->rejections, "pull reply", peer, "replies not read; pull refused");
    h.type = PS_MSG_ERROR;
    h.status = PS_ESTATE;
    h.version = 0;
    h.error = why;
    ps_msg_send(s->router, &a->route, h, NULL, 0, 0);
}

/* The release of a reply sent from held values outside sync: the values,
 * and the worker's share. From ZeroMQ's I/O thread (ps_msg_release_fn). */
static void s_on_sent(void *data, void *hint)
{
    const ps_sent_t *t = hint;
    ps_store_release(data, t->s->store);
    ps_reply_pool_unhold(t->s->pool, t->worker);
}

/* The key `chunks` store chunks past the start of key k's chunk. */
static uint64_t s_chunk_end(const ps_server_t *s, uint64_t k, uint64_t chunks)
{
    return s->shard.begin +
           ((k - s->shard.begin) / PS_STORE_CHUNK_KEYS + chunks) * PS_STORE_CHUNK_KEYS;
}

/* Cuts keys r (at most PS_MSG_MAX_FRAMES chunks: s_reply cuts messages so)
 * at the store's chunks into parts; returns how many. */
static int s_chunk_parts(const ps_server_t *s, ps_range_t r, ps_range_t *parts)
{
    int n = 0;
    for (uint64_t b = r.begin; b < r.end; n++) {
        const uint64_t e = s_chunk_end(s, b, 1);
        parts[n] = (ps_range_t){b, e < r.end ? e : r.end};
        b = parts[n].end;
    }
    return n;
}

/* --wire fp16 / bf16: sends keys [h.key_begin, h.key_end) encoded into buffers of
 * the asker's share, a frame per store chunk; the encoding is the copy, once
 * per reply. Returns 0, or PS_ENOMEM when its share is out (nothing sent). */
static int s_send_encoded(ps_server_t *s, const ps_asker_t *a, Shardps__Header h)
{
    ps_range_t parts[PS_MSG_MAX_FRAMES];
    ps_frame_t f[PS_MSG_MAX_FRAMES];
    const int n = s_chunk_parts(s, (ps_range_t){h.key_begin, h.key_end}, parts);
    for (int i = 0; i < n; i++) {
        if (!(f[i].data = ps_reply_pool_take(s->pool, a->worker))) {
            while (i-- > 0) {
                ps_reply_pool_give((void *)f[i].data, s->pool);
            }
            return PS_ENOMEM;
        }
    }
    for (int i = 0; i < n; i++) {
        const uint64_t k = ps_range_len(parts[i]);
        ps_wire_encode(s->reply_dtype, (void *)f[i].data,
                       ps_store_values(s->store, parts[i].begin), k);
        f[i].len = ps_wire_payload_len(s->reply_dtype, k, 0);
    }
    h.dtype = s->reply_dtype;
    int rc = ps_msg_send_zc(s->router, &a->route, h, f, n, ps_reply_pool_give, s->pool);
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
    return 0;
}

/* Sends keys [h.key_begin, h.key_end) to a, a frame per store chunk, from the
 * store's values themselves, held until ZeroMQ has sent them: an update
 * meanwhile writes a new version beside them (server/store.h), so the reply
 * needs no copy in any mode. Outside sync each frame counts against a's
 * share (server/reply_pool.h); in sync a worker pulls once per step.
 * Returns 0, or PS_ENOMEM when the share is out (nothing sent). */
static int s_send_held(ps_server_t *s, const ps_asker_t *a, Shardps__Header h)
{
    ps_range_t parts[PS_MSG_MAX_FRAMES];
    ps_frame_t f[PS_MSG_MAX_FRAMES];
    const int n = s_chunk_parts(s, (ps_range_t){h.key_begin, h.key_end}, parts);
    const int counted = s->view->job.mode != PS_MODE_SYNC;
    for (int i = 0; counted && i < n; i++) {
        if (ps_reply_pool_hold(s->pool, a->worker) != 0) {
            while (i-- > 0) {
                ps_reply_pool_unhold(s->pool, a->worker);
            }
            return PS_ENOMEM;
        }
    }
    for (int i = 0; i < n; i++) {
        f[i] = (ps_frame_t){ps_store_hold(s->store, parts[i]),
                            ps_range_len(parts[i]) * sizeof(float)};
    }
    int rc = counted ? ps_msg_send_zc(s->router, &a->route, h, f, n, s_on_sent,
                                      &s->sent[a->worker])
                     : ps_msg_send_zc(s->router, &a->route, h, f, n, ps_store_release,
                                      s->store);
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
    return 0;
}

/* One message of a pull reply, as the job's --wire says. */
static int s_send_part(ps_server_t *s, const ps_asker_t *a, Shardps__Header h)
{
    return s->reply_dtype == PS_DTYPE_F32 ? s_send_held(s, a, h) : s_send_encoded(s, a, h);
}

/* A reply part whose worker has its share of buffers out waits, behind its
 * other waiting parts; once as many wait as it can have requests in flight,
 * the part is refused. */
static void s_defer(ps_server_t *s, const ps_asker_t *a, Shardps__Header h)
{
    ps_defer_ring_t *d = &s->deferred[a->worker];
    if ((!d->q && !(d->q = malloc((size_t)s->defer_cap * sizeof *d->q))) ||
        d->n == s->defer_cap) {
        s_refuse_unread(s, a, h);
        return;
    }
    d->q[(d->head + d->n++) % s->defer_cap] = (ps_deferred_t){*a, {h.key_begin, h.key_end}};
    s->ndeferred++;
}

/* Sends the waiting parts whose workers have buffers back: the store's
 * current values at the current version (newer than was due, which every
 * mode that copies accepts). Returns how many went. */
static int s_send_deferred(ps_server_t *s)
{
    int sent = 0;
    for (int w = 0; w < s->workers && s->ndeferred > 0; w++) {
        ps_defer_ring_t *d = &s->deferred[w];
        while (d->n > 0) {
            const ps_deferred_t *p = &d->q[d->head];
            Shardps__Header h;
            ps_msg_header(&h, PS_MSG_PULL_REPLY, PS_ROLE_SERVER, s->rank);
            h.request_id = p->asker.request_id;
            h.key_begin = p->range.begin;
            h.key_end = p->range.end;
            h.version = ps_consistency_version(s->cons);
            if (s_send_part(s, &p->asker, h) != 0) {
                break;
            }
            d->head = (d->head + 1) % s->defer_cap;
            d->n--;
            s->ndeferred--;
            sent++;
        }
    }
    return sent;
}

static void s_reply(ps_server_t *s, const ps_asker_t *a, ps_msg_type_t type, ps_range_t r,
                    const float *values, int64_t version)
{
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, s->rank);
    h.request_id = a->request_id;
    h.key_begin = r.begin;
    h.key_end = r.end;
    h.version = version;
    const double t0 = ps_trace_enabled() ? ps_now() : 0;
    ps_server_obs_reply(s->obs, a->worker,
                        values ? ps_wire_payload_len(s->reply_dtype, ps_range_len(r), 0) : 0);
    /* A pull's answer goes in one message of a frame per store chunk (up to
     * PS_MSG_MAX_FRAMES chunks a message), from the store's values, held
     * (s_send_held), or encoded (--wire fp16 / bf16); past its worker's
     * share a message waits, and once one waits the later ones queue behind
     * it (key order). */
    if (values) {
        for (uint64_t b = r.begin; b < r.end; b = h.key_end) {
            const uint64_t e = s_chunk_end(s, b, PS_MSG_MAX_FRAMES);
            h.key_begin = b;
            h.key_end = e < r.end ? e : r.end;
            if (s->deferred[a->worker].n > 0 || s_send_part(s, a, h) != 0) {
                s_defer(s, a, h);
            }
        }
    } else {
        int rc = ps_msg_send(s->router, &a->route, h, NULL, 0, 0);
        if (rc != 0) {
            ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
        }
    }
    ps_trace_span(PS_TRACE_REPLY, a->step, t0, t0 ? ps_now() : 0, a->worker);
}

/* A push-pull's push is acked by its pull's reply, not on its own. */
static int s_carries_push(ps_msg_type_t type)
{
    return type == PS_MSG_PUSH || type == PS_MSG_PUSH_PULL;
}

/* The consistency's callbacks (ps_consistency_ops_t). */
static void s_on_ack(void *ctx, const void *asker, ps_range_t range, int64_t version)
{
    const ps_asker_t *a = asker;
    if (a->type == PS_MSG_PUSH_PULL) {
        return; /* its pull's reply is the ack */
    }
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

/* --wire / --compress: decodes m's gradient into the fp32 buffer of the
 * holder s_hold takes next, which the consistency then holds instead of the
 * frame. Checks the sparse offsets first. Returns that buffer, or NULL with
 * the error sent (nothing held, nothing changed). */
static const float *s_decode_push(ps_server_t *s, const ps_msg_t *m, ps_range_t r)
{
    const int next = s->held_free[s->nheld_free - 1];
    const size_t n = ps_range_len(r);
    float **dst = &s->decoded[next];
    if (!*dst && !(*dst = malloc(ps_range_len(s->shard) * sizeof **dst))) {
        s_reply_error(s, m, PS_ENOMEM, "out of memory to decode a push");
        return NULL;
    }
    size_t len = 0;
    const void *p = m->nframes ? ps_msg_frame(m, 0, &len) : NULL;
    char why[160];
    if (ps_wire_decode_payload(m->hdr.dtype, *dst, n, p, len, m->hdr.nnz, why, sizeof why)) {
        s_reply_error(s, m, PS_ERANGE, "%s", why);
        return NULL;
    }
    return *dst;
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
    const Shardps__Header *h = &m->hdr;
    r->begin = h->key_begin;
    r->end = h->key_end;
    if (h->role != PS_ROLE_WORKER || h->sender < 0 || h->sender >= s->workers) {
        return s_reply_error(s, m, PS_ENOENT, "unknown sender %s%d",
                             ps_codec_role_tag(h->role), h->sender);
    }
    /* A worker is whoever holds its token (from this job's scheduler, in the
     * view): anyone else claiming its rank, a stale node of an old job
     * included (its token is another scheduler's), changes nothing and gets
     * no data. This is the job check on every data message. */
    if (h->token != s->view->worker_tokens[h->sender]) {
        s->forged++;
        return s_reply_error(s, m, PS_ENOENT, "not W%d: its token does not match",
                             h->sender);
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
        h->version > PS_MSG_MAX_STEP || h->pull_version < 0 ||
        h->pull_version > PS_MSG_MAX_STEP) {
        return s_reply_error(s, m, PS_ERANGE,
                             "step %lld, version %lld or pull version %lld outside [0, 2^53]",
                             (long long)h->step, (long long)h->version,
                             (long long)h->pull_version);
    }
    /* pushes travel as the job says (--wire, --compress); INIT is fp32 */
    const uint32_t dtype = s_carries_push(h->type) ? s->push_dtype : PS_DTYPE_F32;
    if (h->type != PS_MSG_PULL && h->dtype != dtype) {
        return s_reply_error(s, m, PS_ERANGE, "payload is %s; this job's %s carries %s",
                             ps_wire_dtype_name(h->dtype), ps_codec_type_name(h->type),
                             ps_wire_dtype_name(dtype));
    }
    if (ps_wire_is_sparse(dtype) && h->nnz == 0) { /* a top-k push sends >= 1 */
        return s_reply_error(s, m, PS_ERANGE, "a sparse push with no entries");
    }
    if (h->nnz > ps_range_len(*r)) {
        return s_reply_error(s, m, PS_ERANGE, "%llu sparse entries for %llu keys",
                             (unsigned long long)h->nnz,
                             (unsigned long long)ps_range_len(*r));
    }
    uint64_t want =
        h->type == PS_MSG_PULL ? 0 : ps_wire_payload_len(dtype, ps_range_len(*r), h->nnz);
    if (h->payload_len != want || m->nframes != (want ? 1 : 0)) {
        return s_reply_error(s, m, PS_ERANGE,
                             "payload is %llu bytes in %d frames; the range needs %llu bytes",
                             (unsigned long long)h->payload_len, m->nframes,
                             (unsigned long long)want);
    }
    return 0;
}

/* After each step (the consistency's stepped callback, so also each of the
 * several steps one ssp push may complete; async: each push): when the
 * version N is a checkpoint (a multiple of --checkpoint-every, or the step
 * agreed for a timed one), writes the shard and tells the scheduler. Nothing
 * changes the store before this runs, so the part is the cut after step
 * N-1's update. In async a step is one push from each of the M workers
 * (consistency.c:s_lr), so checkpoint N is written at version N * M, by
 * each server at its own time: no cut (design.md). A part that cannot be
 * written is logged and skipped: that checkpoint never becomes complete,
 * training goes on. */
static void s_maybe_checkpoint(ps_server_t *s)
{
    const ps_view_t *v = s->view;
    const int64_t version = ps_consistency_version(s->cons);
    const int64_t per_step = ps_job_is_stepped(&v->job) ? 1 : v->num_workers;
    const int64_t every = (int64_t)v->checkpoint_every * per_step;
    const int due = (every > 0 && version % every == 0) || version == s->checkpoint_at;
    if (!due || version == s->checkpointed) {
        return;
    }
    s->checkpointed = version;
    ps_checkpoint_info_t info = {v->checkpoint_dir, version / per_step, version, s->rank,
                                 v->num_servers, v->num_workers, v->num_params, &v->job};
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
        ps_link_send_bytes(s->link, PS_MSG_CHECKPOINT, body, len);
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
    int64_t version = v->start_step;
    int rc = ps_checkpoint_load(v->resume_dir, v->resume_parts, step, s->store, &v->job,
                                &version, why, sizeof why);
    if (ps_job_is_stepped(&v->job)) {
        version = v->start_step; /* the parts' own, or the step of another worker count */
    }
    rc = rc ? rc : ps_consistency_resume(s->cons, version);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resume: %s", why);
        return rc;
    }
    s->checkpointed = version;
    ps_log_info("resumed at step %lld from %d parts in %s", (long long)v->start_step,
                v->resume_parts, v->resume_dir);
    return 0;
}

/* Tells the scheduler where this server stands in failover generation. */
static void s_failover_ready(ps_server_t *s, int64_t step, int64_t from, int stepped)
{
    ps_failover_ready_t r = {s->generation, step, from, stepped};
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_failover_ready(&r, &body, &len) == 0) {
        ps_link_send_bytes(s->link, PS_MSG_FAILOVER_READY, body, len);
        free(body);
    }
}

/* The first step applied after a failover's rollback: the scheduler's
 * recovery time ends here. */
static void s_failover_stepped(ps_server_t *s)
{
    const int64_t version = ps_consistency_version(s->cons);
    if (s->rolled_to >= 0 && version > s->rolled_to) {
        s->rolled_to = -1;
        s_failover_ready(s, version, version, 1);
    }
}

/* MSG_FAILOVER: a lost server was replaced by a spare loading checkpoint N.
 * Every server must be at the same step for a consistent cut, so this one
 * reloads its own keys of checkpoint N too (any number of parts), drops what
 * it held or owed for later steps, and answers FAILOVER_READY; the scheduler
 * sends the workers the rollback once every server has. In async there is
 * no cut to keep: this server keeps its store and version (only the lost
 * server's updates since its checkpoint part are lost) and answers at once.
 * Returns 0, or 1 when the shard cannot be reloaded (the job cannot go on). */
static int s_on_failover(ps_server_t *s, const ps_msg_t *m)
{
    ps_view_t *v = calloc(1, sizeof *v);
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (!v || !p || ps_codec_unpack_view(p, len, v) != 0 || v->num_servers != s->view->num_servers ||
        v->resume_parts < 1) {
        ps_log_warn("dropped a bad failover message from the scheduler");
        free(v);
        return 0;
    }
    if (v->generation <= s->generation) {
        free(v);
        return 0;
    }
    const int64_t from = ps_consistency_version(s->cons);
    const int stepped = ps_job_is_stepped(&s->view->job);
    const int64_t to = stepped ? v->start_step : from;
    char why[224];
    int rc = stepped ? ps_store_reset(s->store) : 0;
    if (rc != 0) {
        snprintf(why, sizeof why, "out of memory");
    } else if (stepped) {
        rc = ps_checkpoint_load(v->resume_dir, v->resume_parts, v->start_step, s->store,
                                &s->view->job, NULL, why, sizeof why);
        rc = rc ? rc : ps_consistency_rollback(s->cons, v->start_step);
    }
    if (rc != 0) {
        ps_log_err("failover: cannot roll back to step %lld: %s", (long long)v->start_step, why);
        ps_link_abort(s->link, why);
        free(v);
        return 1;
    }
    s->generation = v->generation;
    s->checkpointed = stepped ? v->start_step : s->checkpointed;
    s->rolled_to = to;
    memcpy(s->view->servers, v->servers, sizeof v->servers);
    ps_link_set_generation(s->link, s->generation);
    if (stepped) {
        ps_log_info("failover %lld: rolled back from step %lld to %lld (%s)",
                    (long long)s->generation, (long long)from, (long long)v->start_step,
                    v->resume_dir);
    } else {
        ps_log_info("failover %lld: S%d replaced from %s; going on at version %lld (async)",
                    (long long)s->generation, v->replaced - 1, v->resume_dir, (long long)from);
    }
    s_failover_ready(s, to, from, 0);
    free(v);
    return 0;
}

static void s_on_worker_message(ps_server_t *s, ps_msg_t *m)
{
    const Shardps__Header *h = &m->hdr;
    ps_range_t r;
    ps_server_obs_message(s->obs, h->role == PS_ROLE_WORKER ? h->sender : -1, h->type,
                          h->payload_len);
    switch (h->type) {
    case PS_MSG_PUSH:
    case PS_MSG_PULL:
    case PS_MSG_PUSH_PULL:
    case PS_MSG_INIT:
        break;
    case PS_MSG_PREFLIGHT_PROBE:
        /* A worker's preflight: answered at once, payload dropped unread. */
        ps_msg_send_ctrl_bytes(s->router, &m->route, PS_MSG_PREFLIGHT_PROBE, PS_ROLE_SERVER,
                         s->rank, NULL, 0);
        return;
    default:
        s_reply_error(s, m, PS_EPROTO, "unexpected message type %s",
                      ps_codec_type_name(h->type));
        return;
    }
    const int traced = ps_trace_enabled();
    const double t0 = traced ? ps_now() : 0;
    if (s_validate(s, m, &r) != 0) {
        return;
    }
    /* After the token check: a stranger's message is refused, not dropped. */
    if (h->generation != s->generation) {
        /* Sent before its worker rolled back: the worker asks again. */
        char peer[32], why[64];
        snprintf(peer, sizeof peer, "W%d", h->sender);
        snprintf(why, sizeof why, "of failover %lld, not %lld", (long long)h->generation,
                 (long long)s->generation);
        ps_ratelog_reject(s->rejections, ps_codec_type_name(h->type), peer, why);
        s->stale++;
        return;
    }
    ps_trace_span(PS_TRACE_VALIDATE, h->step, t0, traced ? ps_now() : 0, 0);
    ps_asker_t asker = {m->route, h->request_id, h->type, h->sender, h->step};
    ps_request_t req = {h->sender, h->step, h->version, r, NULL, NULL, &asker};
    char why[160];
    int rc;
    if (s_carries_push(h->type)) {
        const float *decoded = NULL;
        if (h->dtype != PS_DTYPE_F32 && !(decoded = s_decode_push(s, m, r))) {
            return;
        }
        ps_payload_t *f = s_hold(s, m);
        size_t len;
        req.data = decoded ? decoded : ps_payload_data(f, &len);
        req.frame = f;
        const int64_t before = ps_consistency_version(s->cons);
        const double ta = ps_now();
        rc = ps_consistency_push(s->cons, &req, why, sizeof why);
        if (ps_consistency_version(s->cons) != before) { /* it completed a step */
            const double te = ps_now();
            ps_server_obs_apply(s->obs, te - ta);
            ps_trace_span(PS_TRACE_APPLY, h->step, ta, te, 0);
        }
        s_failover_stepped(s);
        if (rc == 0 && h->type == PS_MSG_PUSH_PULL) {
            /* the pull right behind its push: async is answered with this
             * push applied, stepped modes once the step is */
            req.step = h->pull_version;
            rc = ps_consistency_pull(s->cons, &req, why, sizeof why);
        }
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
    ps_trace_span(PS_TRACE_RECEIVE, h->step, t0, traced ? ps_now() : 0, h->type);
}

/* MSG_JOIN_STEP to the scheduler: our version or a membership step. */
static void s_send_join_step(ps_server_t *s, const ps_join_step_t *js)
{
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_join_step(js, &body, &len) == 0) {
        ps_link_send_bytes(s->link, PS_MSG_JOIN_STEP, body, len);
        free(body);
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
        s_send_join_step(s, &(ps_join_step_t){.step = version, .worker = -1, .members = 1});
    }
}

/* The scheduler agrees a future step with every server (server/consistency.h,
 * ps_consistency_hold): we stop at the step in progress and say our version. */
static void s_on_join_prepare(ps_server_t *s, const ps_msg_t *m)
{
    ps_join_step_t join;
    size_t n;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &n) : NULL;
    if (p && ps_codec_unpack_join_step(p, n, &join) == 0 && join.worker >= 0 &&
        join.worker < s->workers) {
        /* the joiner's requests may come before the agreed step is known */
        s->view->worker_tokens[join.worker] = join.token;
    }
    s_send_join_step(s, &(ps_join_step_t){.step = ps_consistency_hold(s->cons), .worker = -1});
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
    if (js.worker >= 0) { /* its requests carry the token it registered with */
        s->view->worker_tokens[js.worker] = js.token;
    }
    if (ps_consistency_join(s->cons, js.worker, js.step) != 0) {
        ps_log_warn("W%d cannot join at step %lld (version %lld)", js.worker,
                    (long long)js.step, (long long)ps_consistency_version(s->cons));
    } else if (js.worker >= 0) { /* the scheduler's membership line says it */
        ps_log_debug("W%d live from step %lld", js.worker, (long long)js.step);
    }
}

/* The heartbeat's report (ps_link_report_fn): who the step waits for, and
 * the metrics. Runs in the loop's thread, like everything that changes them. */
static void s_heartbeat_report(void *arg, Shardps__MetricsReport *r, ps_text_t *text)
{
    ps_server_t *s = arg;
    if (!s->cons) { /* before the view */
        return;
    }
    ps_server_snapshot_t snap = {ps_consistency_stats(s->cons), ps_consistency_version(s->cons),
                                 s->errors, ps_consistency_max_held(s->cons) + 1 - s->nheld_free,
                                 ps_consistency_pending_pulls(s->cons)};
    r->step = snap.version;
    r->n_waiting_for = (size_t)ps_consistency_missing(s->cons, r->waiting_for,
                                                      PS_REPORT_MAX_WAITING, &r->waited_seconds);
    ps_server_obs_render(s->obs, &snap, text);
}

/* Sends the telemetry the scheduler asked for at the end of the job. */
static void s_send_report(ps_server_t *s)
{
    ps_link_report_now(s->link); /* the scheduler's metrics end with our final counts */
    const ps_consistency_stats_t *st = ps_consistency_stats(s->cons);
    ps_server_report_t r = {.pushes = st->pushes,
                            .pulls = st->pulls,
                            .rejected = s->errors,
                            .dropped = st->dropped,
                            .nonfinite = st->nonfinite,
                            .version = ps_consistency_version(s->cons),
                            .staleness = st->staleness,
                            .steps_fewer_workers = st->steps_fewer,
                            .secure_refused = ps_ctx_refused(s->ctx),
                            .forged = s->forged,
                            .unread_refused = s->unread_refused,
                            .cpu_seconds = ps_cpu_seconds()};
    ps_ctx_bytes(s->ctx, r.bytes.sent, r.bytes.received);
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_report(&r, &body, &len) == 0) {
        ps_link_send_bytes(s->link, PS_MSG_REPORT, body, len);
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
        s_reply_error(s, m, PS_EPROTO, "malformed message: %s", m->why);
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
        } else if (m->hdr.type == PS_MSG_FAILOVER && s_on_failover(l->s, m) != 0) {
            l->status = 1;
            return 1;
        } else if (m->hdr.type == PS_MSG_JOIN_PREPARE) {
            s_on_join_prepare(l->s, m);
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
    int moving = 0; /* waiting replies went out last time: buffers are coming back */
    for (;;) {
        ps_pollitem_t items[2] = {{.sock = s->router}, {.sock = ps_link_sock(s->link)}};
        /* Replies waiting for buffers go soon after ZeroMQ gives some back;
         * a worker that does not read at all costs a wake-up every 10 ms. */
        int rc = ps_poll(items, 2, !s->ndeferred ? 100 : moving ? 1 : 10);
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
        moving = s_send_deferred(s) > 0;
        ps_ratelog_tick(s->rejections);
        ps_trace_poll();
    }
}

static int s_setup(ps_server_t *s, char *err, size_t errlen)
{
    const ps_view_t *v = s->view;
    s->rank = ps_link_rank(s->link);
    s->workers = v->num_workers;
    s->generation = v->generation;
    s->rolled_to = -1;
    s->checkpoint_at = -1;
    s->shard.begin = v->servers[s->rank].begin;
    s->shard.end = v->servers[s->rank].end;
    const uint64_t n = ps_range_len(s->shard);
    if (ps_wire_worker_momentum(&v->job)) {
        /* top-k with SGD momentum: the workers run it (momentum correction),
         * we apply plain SGD; the store, the consistency and checkpoints
         * all see momentum 0 */
        s->view->job.momentum = 0;
    }
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
    rc = rc ? rc : ps_reply_pool_new(&s->pool, n, PS_CONSISTENCY_REPLY_KEYS, s->workers);
    /* A spare per chunk and per reply that may be out: an update of values
     * replies still hold always finds a buffer (server/store.h). Outside
     * sync, replies hold values while updates come, so the spares of the
     * counted holds (at most the pool's 64 MiB) are touched now, not page by
     * page in the first rounds that need them. (Touching them was once
     * blamed for test_async_fault's collapsed async jobs: those were async
     * SGD with momentum 0.9 diverging, with or without it; design.md.) */
    const int cap = rc ? 0 : ps_reply_pool_hold_cap(s->pool);
    rc = rc ? rc
            : ps_store_reserve(s->store, (int)s_reply_parts(s) + cap,
                               v->job.mode == PS_MODE_SYNC ? 0 : cap);
    s->sent = calloc((size_t)s->workers, sizeof *s->sent);
    for (int w = 0; s->sent && w < s->workers; w++) {
        s->sent[w] = (ps_sent_t){s, w};
    }
    s->defer_cap = (int)(PS_SERVER_REQUESTS_IN_FLIGHT * s_reply_parts(s));
    s->deferred = calloc((size_t)s->workers, sizeof *s->deferred);
    rc = rc ? rc : ps_ratelog_new(&s->rejections, PS_RATELOG_PERIOD);
    int nheld = s->cons ? ps_consistency_max_held(s->cons) + 1 : 0;
    s->held = calloc((size_t)nheld, sizeof *s->held);
    s->held_free = calloc((size_t)nheld, sizeof *s->held_free);
    s->decoded = calloc((size_t)nheld, sizeof *s->decoded);
    s->nheld = s->decoded ? nheld : 0;
    s->reply_dtype = ps_wire_dtype(&v->job);
    s->push_dtype = v->job.topk > 0 ? ps_wire_sparse_of(s->reply_dtype) : s->reply_dtype;
    if (rc || !s->held || !s->held_free || !s->deferred || !s->decoded || !s->sent) {
        snprintf(err, errlen, "out of memory for a shard of %llu parameters",
                 (unsigned long long)n);
        return PS_ENOMEM;
    }
    for (int i = 0; i < nheld; i++) {
        s->held_free[s->nheld_free++] = i;
    }
    ps_server_obs_setup(s->obs, s->workers);
    ps_server_obs_wire(s->obs, s->ctx);
    ps_alloc_warm_heap(n * sizeof(float)); /* a push of the shard per round */
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

/* Checks at start that cfg->bind can be bound (a bad endpoint, a port in
 * use, an address not ours), so the error comes before joining: binds it on
 * a scratch socket and closes it. The real bind waits for the view
 * (s_listen). */
static int s_check_bind(ps_server_t *s, char *err, size_t errlen)
{
    ps_sock_t *probe = NULL;
    int rc = ps_sock_new(s->ctx, PS_SOCK_ROUTER, &probe, err, errlen);
    if (rc == 0) {
        ps_sock_set_max_message(probe, 0); /* takes nothing while it is open */
        rc = ps_sock_bind(probe, s->cfg->bind, NULL, 0, err, errlen);
        ps_sock_set_linger(probe, 0);
    }
    ps_sock_destroy(&probe);
    return rc;
}

/* Binds the workers' socket once the shard is known, so that ZeroMQ drops a
 * frame bigger than the largest legitimate one (a push of the whole shard)
 * at its header, before allocating it; then tells the scheduler where, which
 * sends the workers the view once every server has. The limit must be set
 * before the bind: ZeroMQ copies a socket's options into its listener then.
 * The probe's port may take a moment to be free again: retried for 2 s. */
static int s_listen(ps_server_t *s, char *err, size_t errlen)
{
    char bound[128], advertise[128], why[128] = "";
    /* a top-k push of every key (topk:1) is 4 + 4 bytes a key */
    const uint64_t n = ps_range_len(s->shard);
    const uint64_t push = ps_wire_payload_len(s->push_dtype, n, n);
    const long long max_frame =
        (long long)(push > n * sizeof(float) ? push : n * sizeof(float)) +
        PS_SERVER_FRAME_HEADROOM;
    const uint64_t queue = PS_SERVER_REQUESTS_IN_FLIGHT * (s_reply_parts(s) + 1) * 2;
    int rc = ps_sock_new(s->ctx, PS_SOCK_ROUTER, &s->router, why, sizeof why);
    if (rc == 0) {
        ps_sock_set_max_message(s->router, max_frame);
        const int q = queue > PS_SERVER_QUEUE_MIN ? (int)queue : PS_SERVER_QUEUE_MIN;
        ps_sock_set_queue_limit(s->router, q, q);
        const double deadline = ps_now() + 2.0;
        while ((rc = ps_sock_bind(s->router, s->cfg->bind, bound, sizeof bound, why,
                                  sizeof why)) == PS_EIO &&
               ps_now() < deadline) {
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        }
    }
    if (rc != 0) {
        snprintf(err, errlen, "cannot bind %s: %s", s->cfg->bind, why);
        return rc;
    }
    snprintf(advertise, sizeof advertise, "%s", s->cfg->advertise ? s->cfg->advertise : bound);
    uint8_t *body;
    size_t len;
    rc = ps_codec_pack_peer_ready(advertise, &body, &len);
    if (rc == 0) {
        rc = ps_link_send_bytes(s->link, PS_MSG_PEER_READY, body, len);
        free(body);
    }
    if (rc != 0) {
        snprintf(err, errlen, "cannot tell the scheduler we are ready: %s", ps_strerror(rc));
        return rc;
    }
    ps_log_info("listening on %s (frames up to %lld bytes)", bound, max_frame);
    return 0;
}

int ps_server_run(const ps_server_config_t *cfg)
{
    ps_server_t s = {.cfg = cfg};
    int status = 1;
    char err[256] = "";
    ps_job_t job;
    s.view = calloc(1, sizeof *s.view);
    if (!s.view || ps_ctx_new(&s.ctx) != 0) {
        ps_log_err("out of memory");
        goto fail;
    }
    if (ps_curve_secure_ctx(s.ctx, cfg->secure, cfg->keys, PS_ROLE_SERVER, err,
                            sizeof err) != 0 ||
        ps_trace_open(cfg->trace, cfg->trace_steps, cfg->trace_kib, err, sizeof err) != 0 ||
        ps_server_obs_new(cfg->metrics_bind, &s.obs, err, sizeof err) != 0) {
        ps_log_err("%s", err);
        goto fail;
    }
    if (s_check_bind(&s, err, sizeof err) != 0) {
        ps_log_err("cannot bind %s: %s", cfg->bind, err);
        goto fail;
    }
    const ps_link_ident_t ident = {cfg->job_id, cfg->job_hash};
    int rc = ps_link_join(&s.link, s.ctx, cfg->scheduler, PS_ROLE_SERVER,
                          cfg->spare ? PS_LINK_RANK_SPARE : cfg->rank, NULL, &ident,
                          cfg->connect_timeout, cfg->peer_timeout, &job, err, sizeof err);
    if (rc != 0) {
        ps_log_err("%s", err);
        goto fail;
    }
    ps_link_set_grace(s.link, cfg->scheduler_grace);
    ps_log_set_role("S", ps_link_rank(s.link));
    char tag[16];
    snprintf(tag, sizeof tag, "S%d", ps_link_rank(s.link));
    ps_trace_set_process(tag, ps_link_clock_offset(s.link));
    ps_link_set_report(s.link, s_heartbeat_report, &s);
    ps_log_info("registered as S%d%s", ps_link_rank(s.link), cfg->spare ? " (a spare)" : "");
    rc = ps_link_wait_view(s.link, NULL, s.view, err, sizeof err);
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
    /* s_listen binds for the shard and says where (PEER_READY) before a
     * promoted spare's FAILOVER_READY: the scheduler needs its endpoint
     * for the workers' view. */
    if (rc != 0 || s_setup(&s, err, sizeof err) != 0 || s_listen(&s, err, sizeof err) != 0) {
        ps_log_err("%s", err);
        ps_link_abort(s.link, err);
        goto fail;
    }
    if (s.view->replaced) { /* async: at its part's version, not the step */
        s.rolled_to = ps_consistency_version(s.cons);
        s_failover_ready(&s, s.rolled_to, s.rolled_to, 0);
    }
    status = s_loop(&s);
    const ps_consistency_stats_t *st = ps_consistency_stats(s.cons);
    ps_ratelog_destroy(&s.rejections); /* its last counts before the totals */
    ps_log_info("served %llu pushes and %llu pulls, rejected %llu messages (%llu non-finite), "
                "dropped %llu late pushes and %llu of before a failover, version %lld, "
                "staleness mean %.2f max %lld",
                (unsigned long long)st->pushes, (unsigned long long)st->pulls,
                (unsigned long long)s.errors, (unsigned long long)st->nonfinite,
                (unsigned long long)st->dropped, (unsigned long long)s.stale,
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
    ps_trace_close();
    ps_server_obs_destroy(&s.obs);
    for (int i = 0; s.decoded && i < s.nheld; i++) {
        free(s.decoded[i]);
    }
    free(s.decoded);
    free(s.held);
    free(s.held_free);
    free(s.sent);
    for (int w = 0; s.deferred && w < s.workers; w++) {
        free(s.deferred[w].q);
    }
    free(s.deferred);
    free(s.view);
    return status;
}
