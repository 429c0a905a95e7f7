/*
 * server/replica.c - hot replicas: the primary's snapshot and updates out,
 * and the replica's side that applies them (see replica.h).
 */
#include "server/replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

struct ps_replica {
    ps_ctx_t *ctx;
    ps_store_t *store;
    ps_consistency_t *cons;
    ps_reply_t *reply;
    int rank;
    ps_sock_t *sock;       /* to the replica; NULL: none */
    uint64_t token;        /* what the replica checks on our messages */
    int snapshot_due;      /* its snapshot goes before the next update */
    uint64_t sent, acked;  /* messages numbered, and acknowledged in order */
    ps_replica_stats_t stats;
};

int ps_replica_new(ps_replica_t **out, ps_ctx_t *ctx, ps_store_t *store, ps_consistency_t *cons,
                   ps_reply_t *reply, int rank)
{
    ps_replica_t *r = calloc(1, sizeof *r);
    if (!r) {
        return PS_ENOMEM;
    }
    *r = (ps_replica_t){.ctx = ctx, .store = store, .cons = cons, .reply = reply, .rank = rank};
    *out = r;
    return 0;
}

/* Forgets the replica: whatever waited for it goes. */
static void s_detach(ps_replica_t *r)
{
    if (r->sock) {
        ps_sock_set_linger(r->sock, 0);
        ps_sock_destroy(&r->sock);
    }
    r->acked = r->sent;
    r->snapshot_due = 0;
    ps_reply_gate(r->reply, r->sent, r->acked);
}

void ps_replica_destroy(ps_replica_t **rp)
{
    ps_replica_t *r = rp ? *rp : NULL;
    if (!r) {
        return;
    }
    ps_sock_set_linger(r->sock, 0); /* a replica gone first must not hold us */
    ps_sock_destroy(&r->sock);
    free(r);
    *rp = NULL;
}

int ps_replica_attach(ps_replica_t *r, const Shardps__Replica *m, char *why, size_t cap)
{
    s_detach(r);
    if (!m->endpoint || !m->endpoint[0]) {
        ps_log_info("no replica of our keys now");
        return 0;
    }
    int rc = ps_sock_new(r->ctx, PS_SOCK_DEALER, &r->sock, why, cap);
    if (rc == 0 && m->curve_key && m->curve_key[0]) {
        rc = ps_sock_set_peer_key(r->sock, m->curve_key);
    }
    rc = rc ? rc : ps_sock_connect(r->sock, m->endpoint);
    if (rc != 0) {
        snprintf(why, cap, "cannot connect to the replica at '%s'", m->endpoint);
        s_detach(r);
        return rc;
    }
    r->token = m->token;
    r->snapshot_due = 1;
    ps_log_info("replica S%d at %s follows our keys from the next update", m->rank,
                m->endpoint);
    return 0;
}

/* Sends body then data as message type (numbered). */
static int s_send(ps_replica_t *r, ps_msg_type_t type, ps_range_t keys, int64_t version,
                  const ProtobufCMessage *body, const void *data, size_t len)
{
    uint8_t buf[256];
    const size_t blen = protobuf_c_message_get_packed_size(body);
    uint8_t *b = blen <= sizeof buf ? buf : malloc(blen);
    if (!b) {
        return PS_ENOMEM;
    }
    protobuf_c_message_pack(body, b);
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, r->rank);
    h.request_id = ++r->sent;
    h.key_begin = keys.begin;
    h.key_end = keys.end;
    h.version = version;
    h.token = r->token;
    const ps_frame_t f[2] = {{b, blen}, {data, len}};
    int rc = ps_msg_send(r->sock, NULL, h, f, 2, PS_SEND_COPY);
    r->stats.bytes += blen + len;
    if (b != buf) {
        free(b);
    }
    return rc;
}

/* The store as it is, array by array (values first: the replica's store is
 * initialised by them, which zeroes its optimizer state), in ranges of a
 * store chunk; the last message says where the step stands. */
static int s_snapshot(ps_replica_t *r)
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
    int rc = 0;
    for (int a = 0; a < arrays && rc == 0; a++) {
        for (uint64_t off = 0; off < n && rc == 0; off += PS_STORE_CHUNK_KEYS) {
            const uint64_t len = n - off < PS_STORE_CHUNK_KEYS ? n - off : PS_STORE_CHUNK_KEYS;
            const ps_range_t keys = {shard.begin + off, shard.begin + off + len};
            const float *src = a == 0 ? ps_store_values(r->store, keys.begin)
                                      : ps_store_state(r->store, a - 1) + off;
            Shardps__ReplicaSnapshot sn = SHARDPS__REPLICA_SNAPSHOT__INIT;
            sn.array = a;
            sn.last = a == arrays - 1 && off + len == n;
            sn.version = version;
            sn.done = (ProtobufCBinaryData){sn.last ? nchunks : 0, done};
            rc = s_send(r, PS_MSG_REPLICA_SNAPSHOT, keys, version, &sn.base, src,
                        len * sizeof(float));
        }
    }
    free(done);
    r->stats.snapshots += rc == 0;
    return rc;
}

void ps_replica_resync(ps_replica_t *r)
{
    r->snapshot_due = r->sock != NULL;
}

void ps_replica_update(ps_replica_t *r, ps_range_t range, const float *grad, float lr,
                       float scale, int64_t version)
{
    if (!r->sock) {
        return;
    }
    int rc = 0;
    if (r->snapshot_due) {
        r->snapshot_due = 0;
        rc = s_snapshot(r);
    }
    Shardps__ReplicaUpdate u = SHARDPS__REPLICA_UPDATE__INIT;
    u.lr = lr;
    u.scale = scale;
    rc = rc ? rc : s_send(r, PS_MSG_REPLICATE, range, version, &u.base, grad,
                          ps_range_len(range) * sizeof(float));
    if (rc != 0) {
        ps_log_warn("cannot reach our replica (%s): going on without it", ps_strerror(rc));
        s_detach(r);
        return;
    }
    r->stats.updates++;
    ps_reply_gate(r->reply, r->sent, r->acked);
}

ps_sock_t *ps_replica_sock(const ps_replica_t *r)
{
    return r->sock;
}

static int s_on_ack(void *arg, ps_msg_t *m, int rc)
{
    ps_replica_t *r = arg;
    if (rc != 0 || m->hdr.role != PS_ROLE_SERVER) {
        return 0;
    }
    if (m->hdr.type == PS_MSG_REPLICA_ACK && m->hdr.request_id <= r->sent &&
        m->hdr.request_id > r->acked) {
        r->acked = m->hdr.request_id;
    } else if (m->hdr.type == PS_MSG_ERROR) {
        ps_log_warn("our replica refused an update: %s", m->hdr.error ? m->hdr.error : "");
    }
    return 0;
}

void ps_replica_drain(ps_replica_t *r)
{
    if (r->sock) {
        ps_msg_drain(r->sock, 0, 256, s_on_ack, r);
        ps_reply_gate(r->reply, r->sent, r->acked);
    }
}

ps_replica_stats_t ps_replica_stats(const ps_replica_t *r)
{
    return r ? r->stats : (ps_replica_stats_t){0};
}

/* ---- the replica's side ------------------------------------------------- */

static int s_refuse(char *why, size_t cap, const char *what)
{
    snprintf(why, cap, "%s", what);
    return PS_EPROTO;
}

/* A snapshot part: values initialise the store; state arrays are copied
 * over the zeroed state once it is. */
static int s_apply_snapshot(ps_store_t *store, ps_consistency_t *cons,
                            const Shardps__ReplicaSnapshot *sn, ps_range_t keys, const void *data,
                            int *in_step, char *why, size_t cap)
{
    const ps_range_t shard = ps_store_shard(store);
    if (sn->array < 0 || sn->array > ps_store_state_arrays(store)) {
        return s_refuse(why, cap, "snapshot of an unknown array");
    }
    if (sn->array == 0) {
        /* a snapshot again (its primary rolled back): from scratch */
        if (keys.begin == shard.begin && ps_store_initialized(store) && ps_store_reset(store)) {
            return s_refuse(why, cap, "out of memory");
        }
        if (ps_store_init(store, keys, data) < 0) {
            return s_refuse(why, cap, "snapshot values for keys set already");
        }
    } else if (!ps_store_initialized(store)) {
        return s_refuse(why, cap, "snapshot state before the values");
    } else {
        memcpy(ps_store_state(store, sn->array - 1) + (keys.begin - shard.begin), data,
               ps_range_len(keys) * sizeof(float));
    }
    if (sn->last) {
        if (ps_consistency_restore(cons, sn->version, sn->done.data, sn->done.len) != 0) {
            return s_refuse(why, cap, "snapshot ends with a step that does not fit the shard");
        }
        *in_step = 1;
    }
    return 0;
}

int ps_replica_apply(ps_store_t *store, ps_consistency_t *cons, const ps_view_t *view,
                     const ps_msg_t *m, int *in_step, char *why, size_t cap)
{
    const Shardps__Header *h = &m->hdr;
    const ps_range_t shard = ps_store_shard(store), keys = {h->key_begin, h->key_end};
    *in_step = 0;
    if (view->replica_of == 0 || h->role != PS_ROLE_SERVER ||
        h->sender != view->replica_of - 1 || h->token != view->replica_token) {
        snprintf(why, cap, "not from the primary this server follows");
        return PS_ENOENT;
    }
    size_t blen = 0, len = 0;
    const void *body = m->nframes == 2 ? ps_msg_frame(m, 0, &blen) : NULL;
    const void *data = body ? ps_msg_frame(m, 1, &len) : NULL;
    if (!body || keys.begin >= keys.end || !ps_range_contains(shard, keys) ||
        len != ps_range_len(keys) * sizeof(float)) {
        return s_refuse(why, cap, "keys or frames do not match");
    }
    const ProtobufCMessageDescriptor *d = h->type == PS_MSG_REPLICATE
                                              ? &shardps__replica_update__descriptor
                                              : &shardps__replica_snapshot__descriptor;
    ProtobufCMessage *b = ps_codec_unpack(d, body, blen, NULL, why, cap);
    if (!b) {
        return PS_EPROTO;
    }
    float *aligned = NULL;
    if ((uintptr_t)data % sizeof(float) != 0) {
        if (!(aligned = malloc(len))) {
            protobuf_c_message_free_unpacked(b, NULL);
            return s_refuse(why, cap, "out of memory");
        }
        data = memcpy(aligned, data, len);
    }
    int rc;
    if (h->type == PS_MSG_REPLICATE) {
        const Shardps__ReplicaUpdate *u = (const Shardps__ReplicaUpdate *)b;
        rc = ps_consistency_replay(cons, keys, data, u->lr, u->scale, h->version);
        if (rc != 0) {
            snprintf(why, cap, "update to version %lld out of order", (long long)h->version);
        }
    } else {
        rc = s_apply_snapshot(store, cons, (const Shardps__ReplicaSnapshot *)b, keys, data,
                              in_step, why, cap);
    }
    free(aligned);
    protobuf_c_message_free_unpacked(b, NULL);
    return rc;
}
