/*
 * worker/kv_rows.c - the KV client's embedding rows requests: a pull or push
 * of a batch's distinct keys, cut by server and by piece of each server's
 * rows (proto/range.h) into messages of their own (see kv.h).
 */
#include <stdio.h>

#include "common/clock.h"
#include "common/error.h"
#include "proto/msg.h"
#include "worker/kv_impl.h"

void ps_kv_put_rows(ps_kv_t *kv, int idx, int i, int q)
{
    const ps_kv_slot_t *sl = ps_kv_slots_get(kv->slots, idx);
    ps_frame_t f;
    uint64_t nnz;
    const int rc = ps_kv_slots_rows_frame(kv->slots, idx, i, q, &f, &nnz);
    if (rc != 0 || (sl->type == PS_KV_ROWS_PULL && !nnz)) {
        return; /* rc: the slot failed, with its reason */
    }
    Shardps__Header h;
    ps_msg_header(&h, sl->type == PS_KV_ROWS_PUSH ? PS_MSG_ROWS_PUSH : PS_MSG_ROWS_PULL,
                  PS_ROLE_WORKER, ps_link_rank(kv->link));
    h.token = ps_link_token(kv->link);
    h.request_id = ps_kv_slots_id(kv->slots, idx);
    h.step = sl->step;
    h.version = kv->versions[i];
    h.generation = kv->generation;
    h.nnz = nnz;
    h.piece = (uint32_t)q;
    /* a push's frame is the slots' buffer, reused for the next server's */
    const int sent = ps_msg_send(kv->servers[i], NULL, h, &f, nnz ? 1 : 0,
                                 sl->type == PS_KV_ROWS_PUSH ? PS_SEND_COPY : 0);
    if (sent != 0) {
        char why[160];
        snprintf(why, sizeof why, "sending to S%d failed: %s", i, ps_strerror(sent));
        ps_kv_slots_complete(kv->slots, idx, sent, why);
    } else if (sl->type == PS_KV_ROWS_PUSH) {
        kv->bytes_pushed += f.len;
    }
}

/* Sends rows request idx to piece q of server i, or, for a push that
 * server i's lane does not admit now, queues it there: rows pushes queue
 * behind the dense pushes and count against the same window, so all a
 * worker pushes keeps to what its link drains (kv_lanes.h). Caller holds
 * mu. */
static void s_send_rows(ps_kv_t *kv, int idx, int i, int q)
{
    const ps_kv_slot_t *sl = ps_kv_slots_get(kv->slots, idx);
    if (sl->type == PS_KV_ROWS_PUSH && ps_kv_lanes_paced(kv->lanes)) {
        uint64_t begin, end;
        ps_kv_slots_row_part(kv->slots, idx, i, q, &begin, &end);
        const ps_kv_out_t o = {idx, ps_kv_slots_id(kv->slots, idx), PS_MSG_ROWS_PUSH,
                               {0, 0}, ps_kv_lanes_row_weight(end - begin, sl->dim), q};
        if (!ps_kv_lanes_admit(kv->lanes, i, o.type, o.keys, ps_now())) {
            ps_kv_lanes_queue(kv->lanes, i, &o);
            return;
        }
    }
    ps_kv_put_rows(kv, idx, i, q);
}

/* Opens and sends a rows request. Returns the handle or a PS_E*. */
static int s_submit_rows(ps_kv_t *kv, ps_kv_req_t type, const uint64_t *keys, size_t n,
                         size_t dim, float *buf, int64_t step)
{
    if (!ps_job_has_rows(&kv->view.job) || dim != (size_t)kv->view.job.embed_dim) {
        return PS_EINVAL;
    }
    pthread_mutex_lock(&kv->mu);
    int rc = ps_kv_refused(kv, type);
    if (rc == 0 && (rc = ps_kv_slots_open_rows(kv->slots, type, keys, n, dim, buf, step)) >= 0) {
        /* piece by piece across the servers, each round from our own rank's:
         * each server has every worker's first pieces early */
        const int me = ps_link_rank(kv->link);
        for (int q = 0; q < PS_RANGE_ROW_PIECES; q++) {
            for (int j = 0; j < kv->view.num_servers; j++) {
                s_send_rows(kv, rc, (me + j) % kv->view.num_servers, q);
            }
        }
    }
    pthread_mutex_unlock(&kv->mu);
    return rc;
}

int ps_kv_rows_pull(ps_kv_t *kv, const uint64_t *keys, size_t n, size_t dim, float *rows,
                    int64_t min_version)
{
    return s_submit_rows(kv, PS_KV_ROWS_PULL, keys, n, dim, rows, min_version);
}

int ps_kv_rows_push(ps_kv_t *kv, const uint64_t *keys, size_t n, size_t dim, const float *grads,
                    int64_t step)
{
    return s_submit_rows(kv, PS_KV_ROWS_PUSH, keys, n, dim, (float *)grads, step);
}

