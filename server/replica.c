/*
 * server/replica.c - hot replicas, the primary's side: the snapshot and
 * updates out, and the acknowledgements in (see replica.h; the replica's
 * side is server/replica_follow.c).
 */
#include "server/replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "server/listen.h"

/* One replica of our keys. Messages are numbered across all of them (one
 * update is one number, sent to each): last is the number of the last one
 * this replica was sent, acked the last it acknowledged. */
typedef struct {
    ps_sock_t *sock;       /* NULL: a free slot */
    int id;                /* its spare id */
    uint64_t token;        /* what it checks on our messages */
    int snapshot_due;      /* its snapshot goes before the next update */
    int members_due;       /* send it the members, whatever they are */
    uint64_t last, acked;
} s_target_t;

struct ps_replica {
    ps_ctx_t *ctx;
    ps_store_t *store;
    ps_rows_t *rows;       /* a job with embedding rows: the table; else NULL */
    ps_consistency_t *cons;
    ps_reply_t *reply;
    int rank;
    unsigned char *buf;    /* a rows message's frame, grown as needed */
    size_t buf_cap;
    s_target_t targets[PS_MAX_REPLICAS];
    int ntargets;          /* attached (sock != NULL) */
    uint64_t sent;         /* messages numbered so far */
    /* the live workers and joiners last sent */
    unsigned char live[PS_MAX_WORKERS];
    int64_t join_at[PS_MAX_WORKERS];
    ps_replica_stats_t stats;
};

int ps_replica_new(ps_replica_t **out, ps_ctx_t *ctx, ps_store_t *store, ps_rows_t *rows,
                   ps_consistency_t *cons, ps_reply_t *reply, int rank)
{
    ps_replica_t *r = calloc(1, sizeof *r);
    if (!r) {
        return PS_ENOMEM;
    }
    *r = (ps_replica_t){
        .ctx = ctx, .store = store, .rows = rows, .cons = cons, .reply = reply, .rank = rank};
    *out = r;
    return 0;
}

/* How far replies may go: each replica holds every update of the messages
 * it acknowledged, and one that acknowledged all it was sent holds all
 * there is. With no replica, nothing waits. */
static void s_gate(ps_replica_t *r)
{
    if (r->ntargets == 0) {
        ps_reply_gate(r->reply, r->sent, r->sent);
        return;
    }
    uint64_t open = r->sent;
    for (int i = 0; i < PS_MAX_REPLICAS; i++) {
        const s_target_t *t = &r->targets[i];
        if (t->sock && t->acked != t->last && t->acked < open) {
            open = t->acked;
        }
    }
    ps_reply_gate(r->reply, r->sent, open);
}

/* Forgets replica t; with none left, whatever waited for them goes. */
static void s_detach(ps_replica_t *r, s_target_t *t)
{
    if (!t->sock) {
        return;
    }
    ps_sock_set_linger(t->sock, 0);
    ps_sock_destroy(&t->sock);
    *t = (s_target_t){0};
    r->ntargets--;
    s_gate(r);
}

void ps_replica_destroy(ps_replica_t **rp)
{
    ps_replica_t *r = rp ? *rp : NULL;
    if (!r) {
        return;
    }
    for (int i = 0; i < PS_MAX_REPLICAS; i++) {
        ps_sock_set_linger(r->targets[i].sock, 0); /* a replica gone first must not hold us */
        ps_sock_destroy(&r->targets[i].sock);
    }
    free(r->buf);
    free(r);
    *rp = NULL;
}

/* Whether id is in the scheduler's list of our replicas. */
static int s_kept(const Shardps__Replica *m, int id)
{
    for (size_t i = 0; i < m->n_keep; i++) {
        if (m->keep[i] == id) {
            return 1;
        }
    }
    return 0;
}

int ps_replica_attach(ps_replica_t *r, const Shardps__Replica *m, char *why, size_t cap)
{
    const int named = m->endpoint && m->endpoint[0];
    for (int i = 0; i < PS_MAX_REPLICAS; i++) {
        s_target_t *t = &r->targets[i];
        if (t->sock && !s_kept(m, t->id)) {
            ps_log_info("replica S%d of our keys is gone", t->id);
            s_detach(r, t);
        } else if (t->sock && named && t->id == m->rank) {
            s_detach(r, t); /* it listens elsewhere now */
        }
    }
    if (!named) {
        return 0;
    }
    s_target_t *t = NULL;
    for (int i = 0; !t && i < PS_MAX_REPLICAS; i++) {
        t = r->targets[i].sock ? NULL : &r->targets[i];
    }
    if (!t) {
        snprintf(why, cap, "replica S%d: %d replicas follow our keys already", m->rank,
                 PS_MAX_REPLICAS);
        return PS_ESTATE;
    }
    int rc = ps_sock_new(r->ctx, PS_SOCK_DEALER, &t->sock, why, cap);
    if (rc == 0) {
        ps_sock_set_io_thread(t->sock, PS_REPLICA_IO_THREAD);
    }
    if (rc == 0 && m->curve_key && m->curve_key[0]) {
        rc = ps_sock_set_peer_key(t->sock, m->curve_key);
    }
    rc = rc ? rc : ps_sock_connect(t->sock, m->endpoint);
    if (rc != 0) {
        snprintf(why, cap, "cannot connect to the replica at '%s'", m->endpoint);
        ps_sock_set_linger(t->sock, 0);
        ps_sock_destroy(&t->sock);
        return rc;
    }
    r->ntargets++;
    t->id = m->rank;
    t->token = m->token;
    t->snapshot_due = 1;
    t->members_due = 1;
    t->last = t->acked = r->sent;
    ps_log_info("replica S%d at %s follows our keys from the next update", m->rank,
                m->endpoint);
    return 0;
}

/* Sends body then the data frames (frames[1 .. n]; frames[0] is the body's)
 * as message type, number id, to replica t. */
static int s_send(ps_replica_t *r, s_target_t *t, uint64_t id, ps_msg_type_t type,
                  ps_range_t keys, int64_t version, const ProtobufCMessage *body,
                  ps_frame_t *frames, int n)
{
    uint8_t buf[1024];
    const size_t blen = protobuf_c_message_get_packed_size(body);
    uint8_t *b = blen <= sizeof buf ? buf : malloc(blen);
    if (!b) {
        return PS_ENOMEM;
    }
    protobuf_c_message_pack(body, b);
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, r->rank);
    h.request_id = id;
    h.key_begin = keys.begin;
    h.key_end = keys.end;
    h.version = version;
    h.token = t->token;
    frames[0] = (ps_frame_t){b, blen};
    int rc = ps_msg_send(t->sock, NULL, h, frames, n + 1, PS_SEND_COPY);
    t->last = id;
    for (int i = 0; i <= n; i++) {
        r->stats.bytes += frames[i].len;
    }
    if (b != buf) {
        free(b);
    }
    return rc;
}

/* Bytes of a rows message's largest frame: under the frame limit of the
 * replica's socket, bound for the same shard (server/listen.c: the shard's
 * bytes and 64 KiB), and at most a store chunk's. */
static size_t s_frame_bytes(const ps_replica_t *r)
{
    const uint64_t b = ps_range_len(ps_store_shard(r->store)) * sizeof(float) + (32 << 10);
    const uint64_t most = PS_STORE_CHUNK_KEYS * sizeof(float);
    return (size_t)(b < most ? b : most);
}

/* r->buf holds len bytes at least. Returns 0 or PS_ENOMEM. */
static int s_reserve(ps_replica_t *r, size_t len)
{
    if (len <= r->buf_cap) {
        return 0;
    }
    unsigned char *b = realloc(r->buf, len);
    if (!b) {
        return PS_ENOMEM;
    }
    r->buf = b;
    r->buf_cap = len;
    return 0;
}

/* The rows table after the store's arrays: its rows, then its pending
 * keys, in parts of s_frame_bytes; the last part (of pending keys, maybe
 * none) carries the counters and where the step stands (sn: its cut). */
static int s_snapshot_rows(ps_replica_t *r, s_target_t *t, Shardps__ReplicaSnapshot *sn)
{
    const size_t n = ps_rows_count(r->rows), np = ps_rows_pending_count(r->rows);
    const size_t d = ps_rows_dim(r->rows), bytes = s_frame_bytes(r);
    const size_t row = d * (1 + (size_t)ps_rows_state_floats(r->rows)) * sizeof(float);
    const size_t per = bytes / row ? bytes / row : 1, pper = bytes / sizeof(uint64_t);
    uint64_t *keys = malloc((n + np) * sizeof *keys + 1);
    uint32_t *counts = malloc(np * sizeof *counts + 1);
    int rc = keys && counts ? s_reserve(r, (n < per ? n : per) * row) : PS_ENOMEM;
    if (rc == 0) {
        ps_rows_export_keys(r->rows, keys);
        ps_rows_pending_export(r->rows, keys + n, counts);
    }
    for (size_t at = 0; at < n && rc == 0; at += per) {
        const size_t k = n - at < per ? n - at : per;
        float *v = (float *)(void *)r->buf;
        ps_rows_export_part(r->rows, keys + at, k, v, v + k * d);
        Shardps__ReplicaSnapshot part = SHARDPS__REPLICA_SNAPSHOT__INIT;
        part.rows = 1;
        ps_frame_t f[3] = {{NULL, 0}, {keys + at, k * sizeof *keys}, {v, k * row}};
        rc = s_send(r, t, ++r->sent, PS_MSG_REPLICA_SNAPSHOT, (ps_range_t){0, 0}, sn->version,
                    &part.base, f, 2);
    }
    ps_rows_stats_t st;
    ps_rows_stats(r->rows, &st);
    uint64_t counters[] = {st.created, st.filtered, st.refused, st.nonfinite, st.updates};
    const ProtobufCBinaryData done = sn->done;
    for (size_t at = 0; rc == 0 && !sn->last; at += pper) {
        const size_t k = np - at < pper ? np - at : pper;
        sn->rows = 2;
        sn->last = at + k == np;
        sn->done = sn->last ? done : (ProtobufCBinaryData){0, NULL};
        sn->n_rows_counters = sn->last ? sizeof counters / sizeof *counters : 0;
        sn->rows_counters = counters;
        ps_frame_t f[3] = {{NULL, 0}, {keys + n + at, k * sizeof *keys}, {counts + at, k * 4}};
        rc = s_send(r, t, ++r->sent, PS_MSG_REPLICA_SNAPSHOT, (ps_range_t){0, 0}, sn->version,
                    &sn->base, f, 2);
    }
    free(keys);
    free(counts);
    return rc;
}

/* The store as it is, to replica t, array by array (values first: the
 * replica's store is initialised by them, which zeroes its optimizer
 * state), in ranges of a store chunk, then the rows table; the last message
 * says where the step stands. */
static int s_snapshot(ps_replica_t *r, s_target_t *t)
{
    const ps_range_t shard = ps_store_shard(r->store);
    const uint64_t n = ps_range_len(shard);
    const int arrays = 1 + ps_store_state_arrays(r->store);
    int64_t version;
    const size_t nchunks = ps_consistency_cut(r->cons, &version, NULL, 0);
    unsigned char *done = calloc(nchunks ? nchunks : 1, 1);
    if (!done) {
        return PS_ENOMEM;
    }
    ps_consistency_cut(r->cons, &version, done, nchunks);
    Shardps__ReplicaSnapshot cut = SHARDPS__REPLICA_SNAPSHOT__INIT;
    cut.version = version;
    cut.done = (ProtobufCBinaryData){nchunks, done};
    int rc = 0;
    for (int a = 0; a < arrays && rc == 0; a++) {
        for (uint64_t off = 0; off < n && rc == 0; off += PS_STORE_CHUNK_KEYS) {
            const uint64_t len = n - off < PS_STORE_CHUNK_KEYS ? n - off : PS_STORE_CHUNK_KEYS;
            const ps_range_t keys = {shard.begin + off, shard.begin + off + len};
            const float *src = a == 0 ? ps_store_values(r->store, keys.begin)
                                      : ps_store_state(r->store, a - 1) + off;
            Shardps__ReplicaSnapshot sn = SHARDPS__REPLICA_SNAPSHOT__INIT;
            sn.array = a;
            sn.last = !r->rows && a == arrays - 1 && off + len == n;
            sn.version = version;
            sn.done = sn.last ? cut.done : (ProtobufCBinaryData){0, NULL};
            ps_frame_t f[2] = {{NULL, 0}, {src, len * sizeof(float)}};
            rc = s_send(r, t, ++r->sent, PS_MSG_REPLICA_SNAPSHOT, keys, version, &sn.base, f,
                        1);
        }
    }
    if (rc == 0 && r->rows) {
        rc = s_snapshot_rows(r, t, &cut);
    }
    free(done);
    r->stats.snapshots += rc == 0;
    return rc;
}

void ps_replica_resync(ps_replica_t *r)
{
    for (int i = 0; i < PS_MAX_REPLICAS; i++) {
        r->targets[i].snapshot_due = r->targets[i].members_due = r->targets[i].sock != NULL;
    }
}

/* A send to replica t failed: it is given up (the scheduler makes another). */
static void s_lost(ps_replica_t *r, s_target_t *t, int rc)
{
    ps_log_warn("cannot reach our replica S%d (%s): going on without it", t->id,
                ps_strerror(rc));
    s_detach(r, t);
}

/* The consistency's members into u when they changed since they were last
 * sent, or a replica that gets this message needs them whatever they are
 * (live and join_at point into r). */
static void s_members(ps_replica_t *r, Shardps__ReplicaUpdate *u)
{
    unsigned char live[PS_MAX_WORKERS];
    int64_t join_at[PS_MAX_WORKERS];
    const int n = ps_consistency_members(r->cons, live, join_at);
    int due = 0;
    for (int i = 0; i < PS_MAX_REPLICAS; i++) {
        s_target_t *t = &r->targets[i];
        due |= t->sock && !t->snapshot_due && t->members_due;
        t->members_due = t->members_due && (!t->sock || t->snapshot_due);
    }
    if (!due && !memcmp(live, r->live, (size_t)n) &&
        !memcmp(join_at, r->join_at, (size_t)n * sizeof *join_at)) {
        return;
    }
    memcpy(r->live, live, (size_t)n);
    memcpy(r->join_at, join_at, (size_t)n * sizeof *join_at);
    u->live = (ProtobufCBinaryData){(size_t)n, r->live};
    u->n_join_at = (size_t)n;
    u->join_at = r->join_at;
}

/* MSG_REPLICATE to every replica in step: the update st with its frame
 * (len bytes, copied out before this returns), or none (st NULL), and the
 * members when they changed. Replies due from now on wait for its
 * acknowledgements. */
static void s_send_update(ps_replica_t *r, Shardps__ReplicaStep *st, const void *frame,
                          size_t len)
{
    Shardps__ReplicaUpdate u = SHARDPS__REPLICA_UPDATE__INIT;
    s_members(r, &u);
    if (!st && u.live.len == 0) {
        return;
    }
    ps_range_t keys = ps_store_shard(r->store); /* all of them; the shard without updates */
    ps_frame_t f[2] = {{NULL, 0}, {NULL, 0}};
    if (st) {
        u.n_steps = 1;
        u.steps = &st;
        keys = st->rows ? keys : (ps_range_t){st->key_begin, st->key_end};
        f[1] = (ps_frame_t){frame, len};
    }
    const uint64_t id = ++r->sent;
    for (int k = 0; k < PS_MAX_REPLICAS; k++) {
        s_target_t *t = &r->targets[k];
        if (!t->sock || t->snapshot_due) { /* nothing goes before its snapshot */
            continue;
        }
        int rc = s_send(r, t, id, PS_MSG_REPLICATE, keys, ps_consistency_version(r->cons),
                        &u.base, f, st != NULL);
        if (rc != 0) {
            s_lost(r, t, rc);
        }
    }
    r->stats.updates += st != NULL;
    s_gate(r);
}

void ps_replica_flush(ps_replica_t *r)
{
    if (r->ntargets > 0) {
        s_send_update(r, NULL, NULL, 0);
    }
}

/* The snapshots due go before the next update. */
static void s_snapshots_due(ps_replica_t *r)
{
    for (int i = 0; i < PS_MAX_REPLICAS; i++) {
        s_target_t *t = &r->targets[i];
        if (t->sock && t->snapshot_due) {
            t->snapshot_due = 0;
            int rc = s_snapshot(r, t);
            if (rc != 0) {
                s_lost(r, t, rc);
            }
        }
    }
}

void ps_replica_update(ps_replica_t *r, ps_range_t range, const float *grad, float lr,
                       float scale, int64_t version)
{
    s_snapshots_due(r);
    if (r->ntargets == 0) {
        return;
    }
    Shardps__ReplicaStep st = SHARDPS__REPLICA_STEP__INIT;
    st.key_begin = range.begin;
    st.key_end = range.end;
    st.version = version;
    st.lr = lr;
    st.scale = scale;
    s_send_update(r, &st, grad, ps_range_len(range) * sizeof(float));
}

void ps_replica_update_rows(ps_replica_t *r, const uint64_t *keys, const float *grads,
                            uint64_t n, float lr, float scale, int64_t t, int last)
{
    s_snapshots_due(r);
    if (r->ntargets == 0) {
        return;
    }
    const size_t d = ps_rows_dim(r->rows), row = sizeof *keys + d * sizeof *grads;
    const uint64_t per = s_frame_bytes(r) / row ? s_frame_bytes(r) / row : 1;
    if (s_reserve(r, (n < per ? n : per) * row) != 0) {
        for (int i = 0; i < PS_MAX_REPLICAS; i++) {
            if (r->targets[i].sock) {
                s_lost(r, &r->targets[i], PS_ENOMEM); /* they would miss this update */
            }
        }
        return;
    }
    uint64_t at = 0;
    do { /* one message a part, the keys then their gradient rows */
        const uint64_t k = n - at < per ? n - at : per;
        memcpy(r->buf, keys + at, k * sizeof *keys);
        memcpy(r->buf + k * sizeof *keys, grads + at * d, k * d * sizeof *grads);
        Shardps__ReplicaStep st = SHARDPS__REPLICA_STEP__INIT;
        st.version = t;
        st.lr = lr;
        st.scale = scale;
        st.rows = 1;
        st.more = at + k < n || !last;
        s_send_update(r, &st, r->buf, k * row);
        at += k;
    } while (at < n);
}

int ps_replica_socks(const ps_replica_t *r, ps_sock_t **socks, int max)
{
    int n = 0;
    for (int i = 0; r && i < PS_MAX_REPLICAS && n < max; i++) {
        if (r->targets[i].sock) {
            socks[n++] = r->targets[i].sock;
        }
    }
    return n;
}

/* What ps_msg_drain's handler needs: the replicas, and whose socket. */
typedef struct {
    ps_replica_t *r;
    s_target_t *t;
} s_drain_t;

static int s_on_ack(void *arg, ps_msg_t *m, int rc)
{
    s_drain_t *d = arg;
    s_target_t *t = d->t;
    if (rc != 0 || m->hdr.role != PS_ROLE_SERVER) {
        return 0;
    }
    if (m->hdr.type == PS_MSG_REPLICA_ACK && m->hdr.request_id <= t->last &&
        m->hdr.request_id > t->acked) {
        t->acked = m->hdr.request_id;
    } else if (m->hdr.type == PS_MSG_ERROR) { /* it is out of step: it goes */
        ps_log_warn("our replica S%d refused an update (%s): going on without it", t->id,
                    m->hdr.error ? m->hdr.error : "");
        s_detach(d->r, t);
        return 1;
    }
    return 0;
}

void ps_replica_drain(ps_replica_t *r)
{
    for (int i = 0; i < PS_MAX_REPLICAS; i++) {
        s_drain_t d = {r, &r->targets[i]};
        if (d.t->sock) {
            ps_msg_drain(d.t->sock, 0, 256, s_on_ack, &d);
        }
    }
    s_gate(r);
}

ps_replica_stats_t ps_replica_stats(const ps_replica_t *r)
{
    return r ? r->stats : (ps_replica_stats_t){0};
}
