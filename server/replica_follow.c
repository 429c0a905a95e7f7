/*
 * server/replica_follow.c - a hot replica's side: its primary's snapshot
 * and updates checked and applied, acknowledged once a drain's worth is,
 * and a new primary followed after a takeover (see replica_follow.h).
 */
#include "server/replica_follow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

struct ps_follow {
    ps_follow_config_t cfg;
    ps_route_t ack_route;           /* its primary, owed an ack for... */
    uint64_t ack_id;                /* ...everything up to this message (0: none owed) */
    int out_of_step;                /* it refused its primary's message: it ends */
    char endpoint[PS_ENDPOINT_MAX]; /* where the server listens, for a new primary */
};

int ps_follow_new(ps_follow_t **out, const ps_follow_config_t *cfg)
{
    ps_follow_t *f = calloc(1, sizeof *f);
    if (!f) {
        return PS_ENOMEM;
    }
    f->cfg = *cfg;
    *out = f;
    return 0;
}

void ps_follow_destroy(ps_follow_t **fp)
{
    if (fp && *fp) {
        free(*fp);
        *fp = NULL;
    }
}

static int s_refuse(char *why, size_t cap, const char *what)
{
    snprintf(why, cap, "%s", what);
    return PS_EPROTO;
}

/* The snapshot's last message: where the step stands. */
static int s_restore(ps_consistency_t *cons, const Shardps__ReplicaSnapshot *sn, int *in_step,
                     char *why, size_t cap)
{
    if (ps_consistency_restore(cons, sn->version, sn->done.data, sn->done.len) != 0) {
        return s_refuse(why, cap, "snapshot ends with a step that does not fit the shard");
    }
    *in_step = 1;
    return 0;
}

/* A snapshot part: values initialise the store; state arrays are copied
 * over the zeroed state once it is. */
static int s_apply_snapshot(ps_store_t *store, ps_rows_t *rows, ps_consistency_t *cons,
                            const Shardps__ReplicaSnapshot *sn, ps_range_t keys, const void *data,
                            int *in_step, char *why, size_t cap)
{
    const ps_range_t shard = ps_store_shard(store);
    if (sn->array < 0 || sn->array > ps_store_state_arrays(store) || (rows && sn->last)) {
        return s_refuse(why, cap, "snapshot of an unknown array");
    }
    if (sn->array == 0) {
        /* a snapshot again (its primary rolled back): from scratch */
        if (keys.begin == shard.begin && ps_store_initialized(store) && ps_store_reset(store)) {
            return s_refuse(why, cap, "out of memory");
        }
        if (keys.begin == shard.begin && rows) {
            ps_rows_clear(rows);
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
    return sn->last ? s_restore(cons, sn, in_step, why, cap) : 0;
}

/* Copies data to an 8-byte aligned buffer when it is not (a frame may be at
 * any address): returns data, or *copy (free it), or NULL (out of memory). */
static const void *s_aligned(const void *data, size_t len, void **copy)
{
    *copy = NULL;
    if ((uintptr_t)data % sizeof(uint64_t) == 0) {
        return data;
    }
    *copy = malloc(len ? len : 1);
    return *copy ? memcpy(*copy, data, len) : NULL;
}

/* A part of the rows table (rows = 1) or of its pending keys (rows = 2),
 * loaded beside the parts before it; the last carries the counters. */
static int s_apply_rows_part(ps_rows_t *rows, ps_consistency_t *cons,
                             const Shardps__ReplicaSnapshot *sn, const ps_msg_t *m,
                             int *in_step, char *why, size_t cap)
{
    if (!rows || (sn->rows != 1 && sn->rows != 2) || m->nframes != 3 ||
        (sn->last && (sn->rows != 2 || sn->n_rows_counters != 5))) {
        return s_refuse(why, cap, "a snapshot of rows that does not fit the job");
    }
    size_t klen, len;
    const void *kd = ps_msg_frame(m, 1, &klen), *vd = ps_msg_frame(m, 2, &len);
    const size_t n = klen / sizeof(uint64_t), d = ps_rows_dim(rows);
    const size_t row = d * (1 + (size_t)ps_rows_state_floats(rows)) * sizeof(float);
    if (klen % sizeof(uint64_t) != 0 || len != n * (sn->rows == 1 ? row : sizeof(uint32_t))) {
        return s_refuse(why, cap, "a snapshot of rows whose frames do not match");
    }
    void *kc, *vc;
    const uint64_t *keys = s_aligned(kd, klen, &kc);
    const void *v = s_aligned(vd, len, &vc);
    int rc = !keys || !v ? PS_ENOMEM
             : sn->rows == 1
                 ? ps_rows_import_part(rows, n, keys, v, (const float *)v + n * d, 0, NULL, NULL)
                 : ps_rows_import_part(rows, 0, NULL, NULL, NULL, n, keys, v);
    free(kc);
    free(vc);
    if (rc != 0) {
        snprintf(why, cap, "a snapshot of rows refused: %s", ps_strerror(rc));
        return PS_EPROTO;
    }
    if (!sn->last) {
        return 0;
    }
    const uint64_t *c = sn->rows_counters;
    const ps_rows_stats_t st = {
        .created = c[0], .filtered = c[1], .refused = c[2], .nonfinite = c[3], .updates = c[4]};
    ps_rows_set_stats(rows, &st);
    return s_restore(cons, sn, in_step, why, cap);
}

/* A rows update: its frame is the keys, then their gradient rows. */
static int s_replay_rows(ps_consistency_t *cons, ps_rows_t *rows,
                         const Shardps__ReplicaStep *st, const void *data, size_t len,
                         char *why, size_t cap)
{
    const size_t d = rows ? ps_rows_dim(rows) : 0, row = sizeof(uint64_t) + d * sizeof(float);
    if (!rows || len % row != 0) {
        return s_refuse(why, cap, "a rows update that does not fit the job");
    }
    const uint64_t n = len / row;
    void *copy;
    const uint64_t *keys = s_aligned(data, len, &copy);
    int rc = keys ? ps_consistency_replay_rows(cons, keys, (const float *)(keys + n), n, st->lr,
                                               st->scale, st->version, !st->more)
                  : PS_ENOMEM;
    free(copy);
    if (rc != 0) {
        snprintf(why, cap, "rows update of step %lld out of order", (long long)st->version);
    }
    return rc;
}

/* MSG_REPLICATE's updates, applied in order; each must fit the shard, its
 * frame and the next version (a refused one leaves those before applied:
 * the primary gives such a replica up). */
static int s_apply_updates(ps_consistency_t *cons, ps_rows_t *rows, ps_range_t shard,
                           const Shardps__ReplicaUpdate *u, const ps_msg_t *m, char *why,
                           size_t cap)
{
    if (u->n_steps + 1 != (size_t)m->nframes) {
        return s_refuse(why, cap, "updates and frames do not match");
    }
    for (size_t i = 0; i < u->n_steps; i++) {
        const Shardps__ReplicaStep *st = u->steps[i];
        const ps_range_t keys = {st->key_begin, st->key_end};
        size_t len;
        const void *data = ps_msg_frame(m, (int)i + 1, &len);
        if (st->rows) {
            const int rc = s_replay_rows(cons, rows, st, data, len, why, cap);
            if (rc != 0) {
                return rc;
            }
            continue;
        }
        if (keys.begin >= keys.end || !ps_range_contains(shard, keys) ||
            len != ps_range_len(keys) * sizeof(float)) {
            return s_refuse(why, cap, "an update's keys or frame do not match");
        }
        void *copy;
        const float *g = s_aligned(data, len, &copy);
        int rc = g ? ps_consistency_replay(cons, keys, g, st->lr, st->scale, st->version)
                   : PS_ENOMEM;
        free(copy);
        if (rc != 0) {
            snprintf(why, cap, "update to version %lld out of order", (long long)st->version);
            return rc;
        }
    }
    if (u->live.len > 0 &&
        (u->n_join_at != u->live.len ||
         ps_consistency_set_members(cons, u->live.data, u->join_at, (int)u->live.len,
                                    m->hdr.version) != 0)) {
        return s_refuse(why, cap, "the live workers do not fit the view");
    }
    return 0;
}

/* MSG_REPLICA_SNAPSHOT: one range of one array, in the frame after the body. */
static int s_apply_part(ps_store_t *store, ps_rows_t *rows, ps_consistency_t *cons,
                        const Shardps__ReplicaSnapshot *sn, const ps_msg_t *m, int *in_step,
                        char *why, size_t cap)
{
    if (sn->rows) {
        return s_apply_rows_part(rows, cons, sn, m, in_step, why, cap);
    }
    const ps_range_t keys = {m->hdr.key_begin, m->hdr.key_end};
    size_t len = 0;
    const void *data = m->nframes == 2 ? ps_msg_frame(m, 1, &len) : NULL;
    if (!data || keys.begin >= keys.end || !ps_range_contains(ps_store_shard(store), keys) ||
        len != ps_range_len(keys) * sizeof(float)) {
        return s_refuse(why, cap, "keys or frames do not match");
    }
    void *copy;
    const float *v = s_aligned(data, len, &copy);
    int rc = v ? s_apply_snapshot(store, rows, cons, sn, keys, v, in_step, why, cap)
               : s_refuse(why, cap, "out of memory");
    free(copy);
    return rc;
}

/* Checks m and applies it: 0, or PS_ENOENT (not from our primary) or
 * another PS_E* (refused) with the reason in why. */
static int s_apply(ps_follow_t *f, const ps_msg_t *m, int *in_step, char *why, size_t cap)
{
    const ps_view_t *view = f->cfg.view;
    const Shardps__Header *h = &m->hdr;
    if (view->replica_of == 0 || h->role != PS_ROLE_SERVER ||
        h->sender != view->replica_of - 1 || h->token != view->replica_token) {
        snprintf(why, cap, "not from the primary this server follows");
        return PS_ENOENT;
    }
    size_t blen = 0;
    const void *body = m->nframes >= 1 ? ps_msg_frame(m, 0, &blen) : NULL;
    const int update = h->type == PS_MSG_REPLICATE;
    ProtobufCMessage *b =
        body ? ps_codec_unpack(update ? &shardps__replica_update__descriptor
                                      : &shardps__replica_snapshot__descriptor,
                               body, blen, NULL, why, cap)
             : NULL;
    if (!b) {
        return body ? PS_EPROTO : s_refuse(why, cap, "no body");
    }
    ps_store_t *store = f->cfg.store;
    int rc = update ? s_apply_updates(f->cfg.cons, f->cfg.rows, ps_store_shard(store),
                                      (const Shardps__ReplicaUpdate *)b, m, why, cap)
                    : s_apply_part(store, f->cfg.rows, f->cfg.cons,
                                   (const Shardps__ReplicaSnapshot *)b, m, in_step, why, cap);
    protobuf_c_message_free_unpacked(b, NULL);
    return rc;
}

void ps_follow_listening(ps_follow_t *f, const char *endpoint)
{
    const ps_view_t *v = f->cfg.view;
    if (v->replica_of) {
        f->cfg.ops.register_as(f->cfg.ops.ctx, v->replica_of, v->replica_token, endpoint, 0);
    }
    snprintf(f->endpoint, sizeof f->endpoint, "%s", endpoint);
}

void ps_follow_receive(ps_follow_t *f, const ps_msg_t *m)
{
    const ps_follow_ops_t *ops = &f->cfg.ops;
    const ps_view_t *v = f->cfg.view;
    char why[160];
    int in_step = 0;
    const int rc = s_apply(f, m, &in_step, why, sizeof why);
    if (rc != 0) {
        ops->refuse(ops->ctx, m, rc, why);
        if (rc != PS_ENOENT) { /* its primary's: this copy is not the primary's now */
            ps_log_err("out of step with S%d: %s", v->replica_of - 1, why);
            f->out_of_step = 1;
        }
        return;
    }
    f->ack_route = m->route;
    f->ack_id = m->hdr.request_id;
    if (in_step) {
        Shardps__Replica r = SHARDPS__REPLICA__INIT;
        r.version = ps_consistency_version(f->cfg.cons);
        ops->send(ops->ctx, PS_MSG_REPLICA, &r.base);
        ops->register_as(ops->ctx, v->replica_of, v->replica_token, NULL, 1);
        ps_log_info("in step with S%d at version %lld", v->replica_of - 1,
                    (long long)r.version);
    }
}

int ps_follow_flush(ps_follow_t *f)
{
    if (f->ack_id) {
        f->cfg.ops.ack(f->cfg.ops.ctx, &f->ack_route, f->ack_id);
        f->ack_id = 0;
    }
    return f->out_of_step ? PS_ESTATE : 0;
}

void ps_follow_new_primary(ps_follow_t *f, const Shardps__Replica *r)
{
    ps_view_t *v = f->cfg.view;
    const ps_follow_ops_t *ops = &f->cfg.ops;
    v->replica_token = r->token;
    f->ack_id = 0;
    ops->register_as(ops->ctx, v->replica_of, r->token, NULL, 0);
    Shardps__PeerReady ready = SHARDPS__PEER_READY__INIT;
    ready.endpoint = f->endpoint;
    ops->send(ops->ctx, PS_MSG_PEER_READY, &ready.base);
    ps_log_info("S%d has a new primary: following it from its snapshot", v->replica_of - 1);
}
