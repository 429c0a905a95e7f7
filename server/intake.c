/*
 * server/intake.c - the checks of workers' data messages and the holders of
 * held push frames (see intake.h).
 */
#include "server/intake.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "proto/wire.h"

struct ps_intake {
    ps_intake_config_t cfg;
    ps_payload_t *held; /* the frames of the pushes the consistency holds */
    float **decoded;    /* --wire / --compress: held[i]'s gradient as fp32 (what the
                           consistency holds), allocated at its first use */
    int *free;          /* indices of the free holders */
    int nfree;
    uint64_t forged;    /* messages with a token that is not the claimed worker's */
};

int ps_intake_new(ps_intake_t **out, const ps_intake_config_t *cfg)
{
    *out = NULL;
    ps_intake_t *in = calloc(1, sizeof *in);
    if (!in) {
        return PS_ENOMEM;
    }
    in->cfg = *cfg;
    const size_t n = (size_t)cfg->holders;
    in->held = calloc(n, sizeof *in->held);
    in->decoded = calloc(n, sizeof *in->decoded);
    in->free = calloc(n, sizeof *in->free);
    if (!in->held || !in->decoded || !in->free) {
        ps_intake_destroy(&in);
        return PS_ENOMEM;
    }
    for (int i = 0; i < cfg->holders; i++) {
        in->free[in->nfree++] = i;
    }
    *out = in;
    return 0;
}

void ps_intake_destroy(ps_intake_t **inp)
{
    ps_intake_t *in = inp ? *inp : NULL;
    if (!in) {
        return;
    }
    for (int i = 0; in->decoded && i < in->cfg.holders; i++) {
        free(in->decoded[i]);
    }
    free(in->decoded);
    free(in->held);
    free(in->free);
    free(in);
    *inp = NULL;
}

int ps_intake_is_push(ps_msg_type_t type)
{
    return type == PS_MSG_PUSH || type == PS_MSG_PUSH_PULL;
}

int ps_intake_is_rows(ps_msg_type_t type)
{
    return type == PS_MSG_ROWS_PUSH || type == PS_MSG_ROWS_PULL;
}

/* A rows message's payload: nnz keys, and a push's nnz rows, in one frame. */
static int s_check_rows(const ps_intake_t *in, const Shardps__Header *h, int nframes, char *why,
                        size_t cap)
{
    if (!in->cfg.row_dim) {
        snprintf(why, cap, "this job has no embedding rows");
        return PS_ERANGE;
    }
    if (h->key_begin || h->key_end) {
        snprintf(why, cap, "a rows message names keys, not a range");
        return PS_ERANGE;
    }
    if (h->type == PS_MSG_ROWS_PULL && h->nnz == 0) {
        snprintf(why, cap, "a rows pull of no keys");
        return PS_ERANGE;
    }
    if (h->piece >= PS_RANGE_ROW_PIECES) {
        snprintf(why, cap, "rows piece %u of %d", h->piece, PS_RANGE_ROW_PIECES);
        return PS_ERANGE;
    }
    const uint64_t per = sizeof(uint64_t) +
                         (h->type == PS_MSG_ROWS_PUSH ? (uint64_t)in->cfg.row_dim * sizeof(float)
                                                      : 0);
    const uint64_t want = h->nnz * per; /* nnz <= PS_MAX_ROWS_MSG (codec): no overflow */
    if (h->payload_len != want || nframes != (want ? 1 : 0)) {
        snprintf(why, cap, "payload is %llu bytes in %d frames; %llu keys need %llu bytes",
                 (unsigned long long)h->payload_len, nframes, (unsigned long long)h->nnz,
                 (unsigned long long)want);
        return PS_ERANGE;
    }
    return 0;
}

/* The payload's dtype and length against the job's and the keys'. */
static int s_check_payload(const ps_intake_t *in, const Shardps__Header *h, int nframes, char *why,
                           size_t cap)
{
    const uint64_t keys = h->key_end - h->key_begin;
    /* pushes travel as the job says (--wire, --compress); INIT is fp32 */
    const uint32_t dtype = ps_intake_is_push(h->type) ? in->cfg.push_dtype : PS_DTYPE_F32;
    if (h->type != PS_MSG_PULL && h->dtype != dtype) {
        snprintf(why, cap, "payload is %s; this job's %s carries %s",
                 ps_wire_dtype_name(h->dtype), ps_codec_type_name(h->type),
                 ps_wire_dtype_name(dtype));
        return PS_ERANGE;
    }
    if (ps_wire_is_sparse(dtype) && h->nnz == 0) { /* a top-k push sends >= 1 */
        snprintf(why, cap, "a sparse push with no entries");
        return PS_ERANGE;
    }
    if (h->nnz > keys) {
        snprintf(why, cap, "%llu sparse entries for %llu keys", (unsigned long long)h->nnz,
                 (unsigned long long)keys);
        return PS_ERANGE;
    }
    const uint64_t want = h->type == PS_MSG_PULL ? 0 : ps_wire_payload_len(dtype, keys, h->nnz);
    if (h->payload_len != want || nframes != (want ? 1 : 0)) {
        snprintf(why, cap, "payload is %llu bytes in %d frames; the range needs %llu bytes",
                 (unsigned long long)h->payload_len, nframes, (unsigned long long)want);
        return PS_ERANGE;
    }
    return 0;
}

uint64_t ps_intake_forged(const ps_intake_t *in)
{
    return in->forged;
}

int ps_intake_check(ps_intake_t *in, const Shardps__Header *h, int nframes, char *why, size_t cap)
{
    const ps_range_t r = {h->key_begin, h->key_end};
    const ps_range_t shard = in->cfg.shard;
    if (h->role != PS_ROLE_WORKER || h->sender < 0 || h->sender >= in->cfg.workers) {
        snprintf(why, cap, "unknown sender %s%d", ps_codec_role_tag(h->role), h->sender);
        return PS_ENOENT;
    }
    /* A worker is whoever holds its token (from this job's scheduler, in the
     * view): anyone else claiming its rank, a stale node of an old job
     * included (its token is another scheduler's), changes nothing and gets
     * no data. This is the job check on every data message. */
    if (h->token != in->cfg.tokens[h->sender]) {
        in->forged++;
        snprintf(why, cap, "not W%d: its token does not match", h->sender);
        return PS_ENOENT;
    }
    if (ps_intake_is_rows(h->type)) {
        /* its keys are read with its frame, in ps_intake_hold */
    } else if (r.end <= r.begin || !ps_range_contains(shard, r)) {
        snprintf(why, cap, "key range [%llu, %llu) is not inside this server's shard [%llu, %llu)",
                 (unsigned long long)r.begin, (unsigned long long)r.end,
                 (unsigned long long)shard.begin, (unsigned long long)shard.end);
        return PS_ERANGE;
    }
    /* Before any arithmetic on them: steps and versions are counts of
     * updates, far below 2^53 in any real job. */
    if (h->step < 0 || h->step > PS_MSG_MAX_STEP || h->version < 0 ||
        h->version > PS_MSG_MAX_STEP || h->pull_version < 0 ||
        h->pull_version > PS_MSG_MAX_STEP) {
        snprintf(why, cap, "step %lld, version %lld or pull version %lld outside [0, 2^53]",
                 (long long)h->step, (long long)h->version, (long long)h->pull_version);
        return PS_ERANGE;
    }
    return ps_intake_is_rows(h->type) ? s_check_rows(in, h, nframes, why, cap)
                                      : s_check_payload(in, h, nframes, why, cap);
}

/* A checked rows message: its keys (checked now), held with its frame. */
static int s_hold_rows(ps_intake_t *in, ps_msg_t *m, ps_request_t *req, char *why, size_t cap)
{
    size_t len = 0;
    const void *p = m->nframes ? ps_msg_frame(m, 0, &len) : NULL;
    const uint64_t nnz = m->hdr.nnz;
    const ps_rowrange_t piece = ps_range_row_piece(in->cfg.rows, (int)m->hdr.piece);
    if (ps_wire_check_row_keys(p, nnz, &piece, why, cap) != 0) {
        return PS_ERANGE;
    }
    req->piece = (int)m->hdr.piece;
    req->nkeys = nnz;
    req->keys = NULL;
    req->data = NULL;
    req->frame = NULL;
    if (!nnz) {
        return 0;
    }
    ps_payload_t *f = &in->held[in->free[--in->nfree]];
    ps_msg_take_payload(m, 0, f);
    req->keys = ps_payload_data(f, &len);
    req->data = (const unsigned char *)req->keys + nnz * sizeof(uint64_t);
    req->frame = f;
    return 0;
}

int ps_intake_hold(ps_intake_t *in, ps_msg_t *m, ps_request_t *req, char *why, size_t cap)
{
    if (ps_intake_is_rows(m->hdr.type)) {
        return s_hold_rows(in, m, req, why, cap);
    }
    const int next = in->free[in->nfree - 1];
    const float *decoded = NULL;
    if (m->hdr.dtype != PS_DTYPE_F32) { /* decoded before anything is held */
        float **dst = &in->decoded[next];
        if (!*dst && !(*dst = malloc(ps_range_len(in->cfg.shard) * sizeof **dst))) {
            snprintf(why, cap, "out of memory to decode a push");
            return PS_ENOMEM;
        }
        size_t len = 0;
        const void *p = m->nframes ? ps_msg_frame(m, 0, &len) : NULL;
        if (ps_wire_decode_payload(m->hdr.dtype, *dst, ps_range_len(req->range), p, len,
                                   m->hdr.nnz, why, cap)) {
            return PS_ERANGE;
        }
        decoded = *dst;
    }
    ps_payload_t *f = &in->held[in->free[--in->nfree]];
    ps_msg_take_payload(m, 0, f);
    size_t len;
    req->data = decoded ? decoded : ps_payload_data(f, &len);
    req->frame = f;
    return 0;
}

void ps_intake_release(ps_intake_t *in, void *frame)
{
    ps_payload_close(frame);
    in->free[in->nfree++] = (int)((ps_payload_t *)frame - in->held);
}

int ps_intake_held(const ps_intake_t *in)
{
    return in->cfg.holders - in->nfree;
}
