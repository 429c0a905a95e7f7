/*
 * server/reply.c - acks and pull replies to workers: frames from the store's
 * held values or encoded into the pool's buffers, each worker's share, and
 * the rings of parts waiting for it (see reply.h).
 */
#include "server/reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/trace.h"
#include "proto/wire.h"
#include "server/consistency.h"
#include "server/reply_pool.h"

/* A pull reply part waiting for a reply buffer of its worker's share. */
typedef struct {
    ps_reply_to_t to;
    ps_range_t range;
    int64_t version; /* due at */
    uint64_t gate;   /* may go once the gate has opened this far (ps_reply_gate) */
} ps_deferred_t;

/* Per worker, its deferred parts in the order they were due (a pull's parts
 * must arrive in key order): a ring, allocated on first use. */
typedef struct {
    ps_deferred_t *q;
    int head, n;
} ps_defer_ring_t;

/* What the release of a reply sent from held values needs (s_on_sent's
 * hint): the replies, and the worker it went to. */
typedef struct {
    ps_reply_t *r;
    int worker;
} ps_sent_t;

struct ps_reply {
    ps_reply_config_t cfg;
    ps_sock_t *sock;           /* borrowed: the server's ROUTER */
    ps_reply_pool_t *pool;     /* each worker's share of replies out */
    ps_defer_ring_t *deferred; /* per worker: parts waiting for its share */
    int defer_cap;             /* parts one worker may have waiting */
    int ndeferred;             /* parts waiting, all workers */
    ps_sent_t *sent;           /* per worker: the hint of its replies' release */
    uint64_t refused;          /* parts refused: the worker held its share unread */
    uint64_t errors;           /* requests refused (ps_reply_error) */
    uint32_t credits;          /* chunk pushes each worker may have in flight to us */
    uint64_t gate_need;        /* a reply due now waits until gate_open reaches this */
    uint64_t gate_open;
    uint64_t *row_keys;    /* a rows pull's keys, aligned, and their rows: grown as needed */
    float *row_values;
    uint64_t row_cap;      /* keys they hold */
};

void ps_reply_gate(ps_reply_t *r, uint64_t need, uint64_t open)
{
    r->gate_need = need;
    r->gate_open = open;
}

uint64_t ps_reply_parts(ps_range_t shard)
{
    return (ps_range_len(shard) + PS_CONSISTENCY_REPLY_KEYS - 1) / PS_CONSISTENCY_REPLY_KEYS;
}

int ps_reply_new(ps_reply_t **out, const ps_reply_config_t *cfg)
{
    *out = NULL;
    ps_reply_t *r = calloc(1, sizeof *r);
    if (!r) {
        return PS_ENOMEM;
    }
    r->cfg = *cfg;
    /* a pull answered chunk by chunk as its step applies: a part per chunk */
    const uint64_t chunk = cfg->chunk && cfg->chunk < PS_CONSISTENCY_REPLY_KEYS
                               ? cfg->chunk : PS_CONSISTENCY_REPLY_KEYS;
    const uint64_t parts = (ps_range_len(cfg->shard) + chunk - 1) / chunk;
    r->defer_cap = (int)(PS_REPLY_REQUESTS_IN_FLIGHT * (parts ? parts : 1));
    /* every worker's window together: PS_REPLY_CREDIT_BYTES of pushes queued
     * toward our link at most, at least one chunk each */
    const uint64_t each = PS_REPLY_CREDIT_BYTES / (chunk * sizeof(float) * (uint64_t)cfg->workers);
    r->credits = each > 0 ? (uint32_t)each : 1;
    r->deferred = calloc((size_t)cfg->workers, sizeof *r->deferred);
    r->sent = calloc((size_t)cfg->workers, sizeof *r->sent);
    int rc = ps_reply_pool_new(&r->pool, ps_range_len(cfg->shard), PS_CONSISTENCY_REPLY_KEYS,
                               cfg->workers);
    if (rc != 0 || !r->deferred || !r->sent) {
        ps_reply_destroy(&r);
        return PS_ENOMEM;
    }
    for (int w = 0; w < cfg->workers; w++) {
        r->sent[w] = (ps_sent_t){r, w};
    }
    *out = r;
    return 0;
}

void ps_reply_destroy(ps_reply_t **rp)
{
    ps_reply_t *r = rp ? *rp : NULL;
    if (!r) {
        return;
    }
    ps_reply_pool_destroy(&r->pool);
    for (int w = 0; r->deferred && w < r->cfg.workers; w++) {
        free(r->deferred[w].q);
    }
    free(r->deferred);
    free(r->sent);
    free(r->row_keys);
    free(r->row_values);
    free(r);
    *rp = NULL;
}

void ps_reply_set_sock(ps_reply_t *r, ps_sock_t *sock)
{
    r->sock = sock;
}

int ps_reply_hold_cap(const ps_reply_t *r)
{
    return ps_reply_pool_hold_cap(r->pool);
}

int ps_reply_waiting(const ps_reply_t *r)
{
    return r->ndeferred;
}

uint64_t ps_reply_refused(const ps_reply_t *r)
{
    return r->refused;
}

uint64_t ps_reply_errors(const ps_reply_t *r)
{
    return r->errors;
}

int ps_reply_error(ps_reply_t *r, const ps_msg_t *req, int status, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    char peer[32];
    snprintf(peer, sizeof peer, "%s%d", ps_codec_role_tag(req->hdr.role), req->hdr.sender);
    r->errors++;
    ps_ratelog_reject(r->cfg.rejections, ps_codec_type_name(req->hdr.type), peer, why);
    ps_msg_reply_error(r->sock, req, PS_ROLE_SERVER, r->cfg.rank, status, "%s", why);
    return status;
}

/* A worker that does not read holds its share of reply buffers
 * (server/reply_pool.h) and has as many parts waiting as a worker can have
 * requests in flight: this part of its pull gets an error, not a copy. */
static void s_refuse_unread(ps_reply_t *r, const ps_reply_to_t *to, Shardps__Header h)
{
    char peer[16], why[160];
    snprintf(peer, sizeof peer, "W%d", to->worker);
    snprintf(why, sizeof why, "%d replies to %s not read yet and %d waiting; pull refused",
             ps_reply_pool_held(r->pool, to->worker), peer, r->deferred[to->worker].n);
    r->refused++;
    ps_ratelog_reject(r->cfg.rejections, "pull reply", peer, "replies not read; pull refused");
    h.type = PS_MSG_ERROR;
    h.status = PS_ESTATE;
    h.version = 0;
    h.error = why;
    ps_msg_send(r->sock, &to->route, h, NULL, 0, 0);
}

/* The release of a reply sent from held values outside sync: the values,
 * and the worker's share. From ZeroMQ's I/O thread (ps_msg_release_fn). */
static void s_on_sent(void *data, void *hint)
{
    const ps_sent_t *t = hint;
    ps_store_release(data, t->r->cfg.store);
    ps_reply_pool_unhold(t->r->pool, t->worker);
}

/* The key `chunks` store chunks past the start of key k's chunk. */
static uint64_t s_chunk_end(const ps_reply_t *r, uint64_t k, uint64_t chunks)
{
    const uint64_t begin = r->cfg.shard.begin;
    return begin + ((k - begin) / PS_STORE_CHUNK_KEYS + chunks) * PS_STORE_CHUNK_KEYS;
}

/* Cuts keys k (at most PS_MSG_MAX_FRAMES chunks: ps_reply_pull cuts messages
 * so) at the store's chunks into parts; returns how many. */
static int s_chunk_parts(const ps_reply_t *r, ps_range_t k, ps_range_t *parts)
{
    int n = 0;
    for (uint64_t b = k.begin; b < k.end; n++) {
        const uint64_t e = s_chunk_end(r, b, 1);
        parts[n] = (ps_range_t){b, e < k.end ? e : k.end};
        b = parts[n].end;
    }
    return n;
}

/* --wire fp16 / bf16: sends keys [h.key_begin, h.key_end) encoded into buffers of
 * the worker's share, a frame per store chunk; the encoding is the copy, once
 * per reply. Returns 0, or PS_ENOMEM when its share is out (nothing sent). */
static int s_send_encoded(ps_reply_t *r, const ps_reply_to_t *to, Shardps__Header h)
{
    ps_range_t parts[PS_MSG_MAX_FRAMES];
    ps_frame_t f[PS_MSG_MAX_FRAMES];
    const int n = s_chunk_parts(r, (ps_range_t){h.key_begin, h.key_end}, parts);
    for (int i = 0; i < n; i++) {
        if (!(f[i].data = ps_reply_pool_take(r->pool, to->worker))) {
            while (i-- > 0) {
                ps_reply_pool_give((void *)f[i].data, r->pool);
            }
            return PS_ENOMEM;
        }
    }
    for (int i = 0; i < n; i++) {
        const uint64_t k = ps_range_len(parts[i]);
        ps_wire_encode(r->cfg.dtype, (void *)f[i].data,
                       ps_store_values(r->cfg.store, parts[i].begin), k);
        f[i].len = ps_wire_payload_len(r->cfg.dtype, k, 0);
    }
    h.dtype = r->cfg.dtype;
    int rc = ps_msg_send_zc(r->sock, &to->route, h, f, n, ps_reply_pool_give, r->pool);
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
    return 0;
}

/* Sends keys [h.key_begin, h.key_end) to the worker, a frame per store chunk, from
 * the store's values themselves, held until ZeroMQ has sent them: an update
 * meanwhile writes a new version beside them (server/store.h), so the reply
 * needs no copy in any mode. Outside sync each frame counts against the
 * worker's share (server/reply_pool.h); in sync a worker pulls once per step.
 * Returns 0, or PS_ENOMEM when the share is out (nothing sent). */
static int s_send_held(ps_reply_t *r, const ps_reply_to_t *to, Shardps__Header h)
{
    ps_range_t parts[PS_MSG_MAX_FRAMES];
    ps_frame_t f[PS_MSG_MAX_FRAMES];
    const int n = s_chunk_parts(r, (ps_range_t){h.key_begin, h.key_end}, parts);
    const int counted = r->cfg.counted;
    for (int i = 0; counted && i < n; i++) {
        if (ps_reply_pool_hold(r->pool, to->worker) != 0) {
            while (i-- > 0) {
                ps_reply_pool_unhold(r->pool, to->worker);
            }
            return PS_ENOMEM;
        }
    }
    for (int i = 0; i < n; i++) {
        f[i] = (ps_frame_t){ps_store_hold(r->cfg.store, parts[i]),
                            ps_range_len(parts[i]) * sizeof(float)};
    }
    int rc = counted ? ps_msg_send_zc(r->sock, &to->route, h, f, n, s_on_sent,
                                      &r->sent[to->worker])
                     : ps_msg_send_zc(r->sock, &to->route, h, f, n, ps_store_release,
                                      r->cfg.store);
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
    return 0;
}

/* One message of a pull reply, as the job's --wire says. */
static int s_send_part(ps_reply_t *r, const ps_reply_to_t *to, Shardps__Header h)
{
    return r->cfg.dtype == PS_DTYPE_F32 ? s_send_held(r, to, h) : s_send_encoded(r, to, h);
}

/* A reply part whose worker has its share of buffers out waits, behind its
 * other waiting parts; once as many wait as it can have requests in flight,
 * the part is refused. */
static void s_defer(ps_reply_t *r, const ps_reply_to_t *to, Shardps__Header h)
{
    ps_defer_ring_t *d = &r->deferred[to->worker];
    if ((!d->q && !(d->q = malloc((size_t)r->defer_cap * sizeof *d->q))) ||
        d->n == r->defer_cap) {
        s_refuse_unread(r, to, h);
        return;
    }
    d->q[(d->head + d->n++) % r->defer_cap] =
        (ps_deferred_t){*to, {h.key_begin, h.key_end}, h.version, r->gate_need};
    r->ndeferred++;
}

int ps_reply_flush(ps_reply_t *r, int64_t version)
{
    int sent = 0;
    const int first = ps_consistency_first_worker(r->cfg.rank, r->cfg.workers);
    for (int k = 0; k < r->cfg.workers && r->ndeferred > 0; k++) {
        ps_defer_ring_t *d = &r->deferred[(first + k) % r->cfg.workers];
        while (d->n > 0) {
            const ps_deferred_t *p = &d->q[d->head];
            if (p->gate > r->gate_open) {
                break; /* its update is not at the replicas yet */
            }
            Shardps__Header h;
            ps_msg_header(&h, PS_MSG_PULL_REPLY, PS_ROLE_SERVER, r->cfg.rank);
            h.request_id = p->to.request_id;
            h.key_begin = p->range.begin;
            h.key_end = p->range.end;
            h.version = version > p->version ? version : p->version;
            if (s_send_part(r, &p->to, h) != 0) {
                break;
            }
            d->head = (d->head + 1) % r->defer_cap;
            d->n--;
            r->ndeferred--;
            sent++;
        }
    }
    return sent;
}

/* A reply's header: to's request, keys, version. */
static Shardps__Header s_header(const ps_reply_t *r, const ps_reply_to_t *to, ps_msg_type_t type,
                            ps_range_t keys, int64_t version)
{
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, r->cfg.rank);
    h.request_id = to->request_id;
    h.key_begin = keys.begin;
    h.key_end = keys.end;
    h.version = version;
    return h;
}

void ps_reply_ack(ps_reply_t *r, const ps_reply_to_t *to, ps_range_t keys, int64_t version)
{
    if (to->type == PS_MSG_PUSH_PULL) {
        return; /* its pull's reply is the ack */
    }
    const ps_msg_type_t type = to->type == PS_MSG_INIT ? PS_MSG_INIT_ACK : PS_MSG_PUSH_ACK;
    ps_trace_span_t span = ps_trace_span_begin(PS_TRACE_REPLY, to->step, to->worker);
    Shardps__Header h = s_header(r, to, type, keys, version);
    h.credits = type == PS_MSG_PUSH_ACK ? r->credits : 0;
    ps_server_obs_reply(r->cfg.obs, to->worker, 0);
    int rc = ps_msg_send(r->sock, &to->route, h, NULL, 0, 0);
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
    ps_trace_span_end(&span);
}

/* The rows of keys[0 .. n) of table in r's buffer, grown as needed (the
 * keys copied first when their frame is not aligned). NULL: no memory. */
static const float *s_read_rows(ps_reply_t *r, const ps_rows_t *table, const void *keys,
                                uint64_t n)
{
    const size_t dim = ps_rows_dim(table);
    if (n > r->row_cap) {
        uint64_t *k = realloc(r->row_keys, n * sizeof *k);
        r->row_keys = k ? k : r->row_keys;
        float *v = k ? realloc(r->row_values, n * dim * sizeof *v) : NULL;
        r->row_values = v ? v : r->row_values;
        if (!v) {
            return NULL;
        }
        r->row_cap = n;
    }
    const uint64_t *k = keys;
    if ((uintptr_t)keys % sizeof(uint64_t) != 0) {
        memcpy(r->row_keys, keys, n * sizeof *r->row_keys);
        k = r->row_keys;
    }
    ps_rows_read(table, k, n, r->row_values);
    return r->row_values;
}

void ps_reply_rows(ps_reply_t *r, const ps_reply_to_t *to, const ps_rows_t *table,
                   const void *keys, uint64_t n, int64_t version)
{
    ps_trace_span_t span = ps_trace_span_begin(PS_TRACE_REPLY, to->step, to->worker);
    Shardps__Header h = s_header(r, to, PS_MSG_ROWS, (ps_range_t){0, 0}, version);
    const float *rows = n ? s_read_rows(r, table, keys, n) : NULL;
    const ps_frame_t f = {rows, n * ps_rows_dim(table) * sizeof *rows};
    h.nnz = n;
    h.piece = to->piece;
    if (n && !rows) {
        h.type = PS_MSG_ERROR;
        h.status = PS_ENOMEM;
        h.error = "out of memory to read the rows asked";
        h.nnz = 0;
    }
    ps_server_obs_reply(r->cfg.obs, to->worker, h.nnz ? f.len : 0);
    const int rc = ps_msg_send(r->sock, &to->route, h, &f, h.nnz ? 1 : 0, PS_SEND_COPY);
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
    ps_trace_span_end(&span);
}

void ps_reply_pull(ps_reply_t *r, const ps_reply_to_t *to, ps_range_t keys, int64_t version)
{
    ps_trace_span_t span = ps_trace_span_begin(PS_TRACE_REPLY, to->step, to->worker);
    Shardps__Header h = s_header(r, to, PS_MSG_PULL_REPLY, keys, version);
    ps_server_obs_reply(r->cfg.obs, to->worker,
                        ps_wire_payload_len(r->cfg.dtype, ps_range_len(keys), 0));
    /* One message of a frame per store chunk, up to PS_MSG_MAX_FRAMES chunks
     * a message; past its worker's share a message waits, and once one waits
     * the later ones queue behind it (key order). */
    for (uint64_t b = keys.begin; b < keys.end; b = h.key_end) {
        const uint64_t e = s_chunk_end(r, b, PS_MSG_MAX_FRAMES);
        h.key_begin = b;
        h.key_end = e < keys.end ? e : keys.end;
        if (r->deferred[to->worker].n > 0 || r->gate_need > r->gate_open ||
            s_send_part(r, to, h) != 0) {
            s_defer(r, to, h);
        }
    }
    ps_trace_span_end(&span);
}
