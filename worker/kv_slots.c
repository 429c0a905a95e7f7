/* worker/kv_slots.c - request ids, expected answers and pull reassembly. */
#include "worker/kv_slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "proto/wire.h"

_Static_assert(PS_KV_SLOTS <= 256, "the slot index is 8 bits of the request id");

struct ps_kv_slots {
    ps_kv_slot_t slots[PS_KV_SLOTS];
    int n;               /* servers */
    ps_range_t *servers; /* n: each server's keys */
    uint64_t *next_key;  /* PS_KV_SLOTS*n: next key server i's pull reply must start at */
    uint32_t *ack_due;   /* PS_KV_SLOTS*n: acks a push-pull's separate pushes to server i
                            still wait for */
    uint64_t chunk;      /* the least keys per push message, aligned to each server's
                            first key; 0 = one message per server */
    uint64_t piece;      /* keys per push message of the requests opened next */
    uint64_t keys;       /* of every server */
    unsigned char *whole; /* n: 1 where server i's pushes go whole (no paced link) */
    ps_rowrange_t *rows; /* n: each server's embedding rows (hashes) */
    uint64_t *row_lo;    /* PS_KV_SLOTS*n*PS_RANGE_ROW_PIECES: the run of a rows request's
                            keys in piece q of server i's rows (s_row_index) */
    uint64_t *row_hi;
    unsigned char *push; /* a rows push's payload (keys, then rows): grown as needed */
    size_t push_cap;     /* its bytes */
};

int ps_kv_slots_new(const ps_range_t *servers, int n, ps_kv_slots_t **out)
{
    *out = NULL;
    if (n < 0) {
        return PS_EINVAL;
    }
    ps_kv_slots_t *t = calloc(1, sizeof *t);
    size_t ns = n > 0 ? (size_t)n : 1;
    if (t) {
        t->n = n;
        t->servers = calloc(ns, sizeof *t->servers);
        t->whole = calloc(ns, sizeof *t->whole);
        t->next_key = calloc((size_t)PS_KV_SLOTS * ns, sizeof *t->next_key);
        t->ack_due = calloc((size_t)PS_KV_SLOTS * ns, sizeof *t->ack_due);
        t->rows = calloc(ns, sizeof *t->rows);
        t->row_lo = calloc((size_t)PS_KV_SLOTS * ns * PS_RANGE_ROW_PIECES, sizeof *t->row_lo);
        t->row_hi = calloc((size_t)PS_KV_SLOTS * ns * PS_RANGE_ROW_PIECES, sizeof *t->row_hi);
    }
    if (!t || !t->servers || !t->whole || !t->next_key || !t->ack_due || !t->rows ||
        !t->row_lo || !t->row_hi) {
        ps_kv_slots_destroy(&t);
        return PS_ENOMEM;
    }
    if (n > 0) {
        memcpy(t->servers, servers, (size_t)n * sizeof *servers);
        for (int i = 0; i < n; i++) {
            t->keys += ps_range_len(servers[i]);
        }
    }
    *out = t;
    return 0;
}

void ps_kv_slots_destroy(ps_kv_slots_t **tp)
{
    ps_kv_slots_t *t = *tp;
    if (t) {
        free(t->servers);
        free(t->whole);
        free(t->next_key);
        free(t->ack_due);
        free(t->rows);
        free(t->row_lo);
        free(t->row_hi);
        free(t->push);
        free(t);
        *tp = NULL;
    }
}

void ps_kv_slots_set_chunk(ps_kv_slots_t *t, uint64_t keys, uint64_t most)
{
    uint64_t widest = 0;
    for (int i = 0; i < t->n; i++) {
        const uint64_t len = ps_range_len(t->servers[i]);
        widest = len > widest ? len : widest;
    }
    const uint64_t per = keys && most ? (widest + keys * most - 1) / (keys * most) : 1;
    t->chunk = t->piece = keys * (per ? per : 1);
}

/* Keys of whole chunks up to keys, at least one chunk. */
static uint64_t s_whole_chunks(const ps_kv_slots_t *t, double keys)
{
    return keys <= (double)t->chunk ? t->chunk : (uint64_t)keys / t->chunk * t->chunk;
}

void ps_kv_slots_set_pace(ps_kv_slots_t *t, double rate)
{
    if (!t->chunk) {
        return;
    }
    const double paced = rate * PS_KV_PIECE_SECONDS;
    const double shard = (double)t->keys / (t->n * PS_KV_SHARD_PIECES);
    const double most = shard < PS_KV_LINK_PIECE_KEYS ? shard : PS_KV_LINK_PIECE_KEYS;
    t->piece = s_whole_chunks(t, rate == 0 ? PS_KV_PIECE_KEYS : paced < most ? paced : most);
}

void ps_kv_slots_set_whole(ps_kv_slots_t *t, int i, int whole)
{
    t->whole[i] = whole != 0;
}

uint64_t ps_kv_slots_piece_end(const ps_kv_slots_t *t, int idx, int i, uint64_t at, uint64_t end)
{
    const uint64_t piece = t->slots[idx].piece, base = t->servers[i].begin;
    if (!piece || t->whole[i]) {
        return end;
    }
    const uint64_t next = base + ((at - base) / piece + 1) * piece;
    return next < end ? next : end;
}

/* Push messages the push at idx of keys part (inside server i's) takes. */
static uint64_t s_pieces(const ps_kv_slots_t *t, int idx, int i, ps_range_t part)
{
    uint64_t n = 0;
    for (uint64_t at = part.begin; at < part.end; n++) {
        at = ps_kv_slots_piece_end(t, idx, i, at, part.end);
    }
    return n;
}

/* Marks `amount` of a slot answered (acks, or keys of a pull); completes it
 * when nothing is left, or at once on a failure (the first one is kept). */
static void s_part_done(ps_kv_slot_t *sl, int status, const char *why, uint64_t amount)
{
    if (status && !sl->status) {
        sl->status = status;
        snprintf(sl->error, sizeof sl->error, "%s", why);
    }
    sl->left = (status || amount >= sl->left) ? 0 : sl->left - amount;
    if (sl->left == 0) {
        sl->state = PS_KV_DONE;
    }
}

int ps_kv_slots_open(ps_kv_slots_t *t, ps_kv_req_t type, ps_range_t range, float *buf,
                     int64_t step)
{
    int idx = -1;
    for (int i = 0; i < PS_KV_SLOTS; i++) {
        if (t->slots[i].state == PS_KV_FREE) {
            idx = i;
            break;
        }
    }
    if (idx < 0) {
        return PS_ENOMEM;
    }
    ps_kv_slot_t *sl = &t->slots[idx];
    *sl = (ps_kv_slot_t){.state = PS_KV_SENT, .type = type, .gen = (sl->gen + 1) & 0xffffff,
                         .range = range, .buf = buf, .step = step, .left = 1,
                         .piece = t->piece};
    if (type == PS_KV_PUSH || type == PS_KV_PULL || type == PS_KV_PUSH_PULL ||
        type == PS_KV_INIT) {
        uint64_t parts = 0;
        for (int i = 0; i < t->n; i++) {
            ps_range_t part;
            if (ps_range_intersect(range, t->servers[i], &part)) {
                parts += type == PS_KV_PUSH ? s_pieces(t, idx, i, part) : 1;
                t->next_key[(size_t)idx * (size_t)t->n + (size_t)i] = part.begin;
            }
        }
        /* Servers answer a pull in as many messages as they like, in key order. */
        sl->left = type == PS_KV_PULL || type == PS_KV_PUSH_PULL ? ps_range_len(range) : parts;
        if (sl->left == 0) {
            sl->state = PS_KV_DONE;
        }
    }
    return idx;
}

void ps_kv_slots_set_rows(ps_kv_slots_t *t, const ps_rowrange_t *rows)
{
    if (t->n > 0) {
        memcpy(t->rows, rows, (size_t)t->n * sizeof *rows);
    }
}

/* The first of keys[lo, n) whose hash is past h. */
static uint64_t s_past(const uint64_t *keys, uint64_t lo, uint64_t n, uint64_t h)
{
    uint64_t hi = n;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (ps_rowkey_hash(keys[mid]) <= h) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Index of slot idx's run of keys in piece q of server i's rows. */
static size_t s_row_index(const ps_kv_slots_t *t, int idx, int i, int q)
{
    return ((size_t)idx * (size_t)t->n + (size_t)i) * PS_RANGE_ROW_PIECES + (size_t)q;
}

int ps_kv_slots_open_rows(ps_kv_slots_t *t, ps_kv_req_t type, const uint64_t *keys, size_t n,
                          size_t dim, float *buf, int64_t step)
{
    const int idx = ps_kv_slots_open(t, type, (ps_range_t){0, n}, buf, step);
    if (idx < 0) {
        return idx;
    }
    ps_kv_slot_t *sl = &t->slots[idx];
    sl->keys = keys;
    sl->dim = dim;
    uint64_t at = 0, answers = 0;
    for (int i = 0; i < t->n; i++) {
        for (int q = 0; q < PS_RANGE_ROW_PIECES; q++) {
            const size_t k = s_row_index(t, idx, i, q);
            t->row_lo[k] = at;
            at = s_past(keys, at, n, ps_range_row_piece(t->rows[i], q).last);
            t->row_hi[k] = at;
            answers += type == PS_KV_ROWS_PUSH || t->row_hi[k] > t->row_lo[k];
        }
    }
    sl->left = answers;
    sl->state = answers ? PS_KV_SENT : PS_KV_DONE;
    return idx;
}

void ps_kv_slots_row_part(const ps_kv_slots_t *t, int idx, int i, int q, uint64_t *begin,
                          uint64_t *end)
{
    const size_t k = s_row_index(t, idx, i, q);
    *begin = t->row_lo[k];
    *end = t->row_hi[k];
}

int ps_kv_slots_rows_frame(ps_kv_slots_t *t, int idx, int i, int q, ps_frame_t *f,
                           uint64_t *nnz)
{
    const ps_kv_slot_t *sl = &t->slots[idx];
    uint64_t lo, hi;
    ps_kv_slots_row_part(t, idx, i, q, &lo, &hi);
    const size_t kb = (size_t)(hi - lo) * sizeof *sl->keys, rb = (size_t)(hi - lo) * sl->dim * 4;
    *nnz = hi - lo;
    *f = (ps_frame_t){sl->keys + lo, kb};
    if (sl->type != PS_KV_ROWS_PUSH || !*nnz) {
        return 0;
    }
    if (kb + rb > t->push_cap) {
        unsigned char *b = realloc(t->push, kb + rb);
        if (!b) {
            ps_kv_slots_complete(t, idx, PS_ENOMEM, "out of memory for a rows push");
            return PS_ENOMEM;
        }
        t->push = b;
        t->push_cap = kb + rb;
    }
    memcpy(t->push, sl->keys + lo, kb);
    memcpy(t->push + kb, sl->buf + lo * sl->dim, rb);
    *f = (ps_frame_t){t->push, kb + rb};
    return 0;
}

/* The first of server i's chunk boundaries at or after key x, its first
 * and last keys among them (no chunks: every key is one). */
static uint64_t s_boundary(const ps_kv_slots_t *t, int i, uint64_t x)
{
    const ps_range_t s = t->servers[i];
    if (x <= s.begin || x >= s.end) {
        return x <= s.begin ? s.begin : s.end;
    }
    const uint64_t c = t->chunk ? t->chunk : 1;
    const uint64_t at = s.begin + (x - s.begin + c - 1) / c * c;
    return at < s.end ? at : s.end;
}

ps_range_t ps_kv_slots_pull_part(const ps_kv_slots_t *t, int idx, int i)
{
    const ps_kv_slot_t *sl = &t->slots[idx];
    ps_range_t part;
    if (sl->type != PS_KV_PUSH_PULL) {
        ps_range_intersect(sl->range, t->servers[i], &part);
        return part;
    }
    return (ps_range_t){s_boundary(t, i, sl->range.begin), s_boundary(t, i, sl->range.end)};
}

int ps_kv_slots_open_push_pull(ps_kv_slots_t *t, ps_range_t range, float *grad, int64_t step,
                               float *dst, int64_t pull_version)
{
    int idx = ps_kv_slots_open(t, PS_KV_PUSH_PULL, range, grad, step);
    if (idx < 0 || t->slots[idx].state == PS_KV_DONE) {
        return idx;
    }
    ps_kv_slot_t *sl = &t->slots[idx];
    sl->dst = dst;
    sl->pull_version = pull_version;
    sl->left = 0;
    for (int i = 0; i < t->n; i++) {
        const size_t k = (size_t)idx * (size_t)t->n + (size_t)i;
        ps_range_t push, pull;
        const ps_kv_req_t what = ps_kv_slots_plan(t, idx, i, &push, &pull);
        t->ack_due[k] = what == PS_KV_PUSH ? (uint32_t)s_pieces(t, idx, i, push) : 0;
        t->next_key[k] = pull.begin;
        sl->left += t->ack_due[k] + ps_range_len(pull);
    }
    return idx;
}

ps_kv_req_t ps_kv_slots_plan(const ps_kv_slots_t *t, int idx, int i, ps_range_t *push,
                             ps_range_t *pull)
{
    *pull = ps_kv_slots_pull_part(t, idx, i);
    if (!ps_range_intersect(t->slots[idx].range, t->servers[i], push)) {
        return PS_KV_PULL;
    }
    /* keys of more than one push message go as pushes, each sent once it
     * is framed, the pull with them */
    const int same = push->begin == pull->begin && push->end == pull->end;
    return same && s_pieces(t, idx, i, *push) == 1 ? PS_KV_PUSH_PULL : PS_KV_PUSH;
}

const ps_kv_slot_t *ps_kv_slots_get(const ps_kv_slots_t *t, int idx)
{
    return &t->slots[idx];
}

uint64_t ps_kv_slots_id(const ps_kv_slots_t *t, int idx)
{
    return ((uint64_t)t->slots[idx].gen << 8) | (uint64_t)idx;
}

void ps_kv_slots_complete(ps_kv_slots_t *t, int idx, int status, const char *why)
{
    ps_kv_slot_t *sl = &t->slots[idx];
    if (sl->state == PS_KV_SENT) {
        s_part_done(sl, status, why, sl->left);
    }
}

void ps_kv_slots_complete_type(ps_kv_slots_t *t, ps_kv_req_t type)
{
    for (int i = 0; i < PS_KV_SLOTS; i++) {
        if (t->slots[i].state == PS_KV_SENT && t->slots[i].type == type) {
            s_part_done(&t->slots[i], 0, "", 1);
        }
    }
}

/* The bytes of a pull reply's frames when each holds a whole, non-zero
 * number of values of dtype (dense); else 0. */
static size_t s_frames_len(uint32_t dtype, const ps_frame_t *frames, int nframes)
{
    const size_t vs = ps_wire_is_sparse(dtype) ? 0 : ps_wire_value_size(dtype);
    size_t total = 0;
    for (int k = 0; k < nframes; k++) {
        if (!vs || !frames[k].len || frames[k].len % vs) {
            return 0;
        }
        total += frames[k].len;
    }
    return total;
}

/* A pull reply from server i to slot idx (a pull, or a push-pull: its
 * push's ack): in key order, copied into place and widened to fp32. */
static void s_on_pull_reply(ps_kv_slots_t *t, int idx, int i, const Shardps__Header *h,
                            const ps_frame_t *frames, int nframes, uint64_t *pulled)
{
    ps_kv_slot_t *sl = &t->slots[idx];
    char why[256];
    float *dst = sl->type == PS_KV_PULL ? sl->buf : sl->dst;
    ps_range_t r = {h->key_begin, h->key_end};
    /* a server's parts come in key order, each key once */
    uint64_t *next = &t->next_key[(size_t)idx * (size_t)t->n + (size_t)i];
    const size_t len = s_frames_len(h->dtype, frames, nframes);
    if (!len || r.begin != *next || r.end <= r.begin ||
        !ps_range_contains(ps_kv_slots_pull_part(t, idx, i), r) ||
        len != ps_wire_payload_len(h->dtype, ps_range_len(r), 0)) {
        snprintf(why, sizeof why, "S%d sent a pull reply that does not match the request",
                 i);
        s_part_done(sl, PS_EPROTO, why, 0);
        return;
    }
    *next = r.end;
    /* fp32 is a copy; fp16 / bf16 (--wire) widen to fp32 */
    float *at = dst + (r.begin - sl->range.begin);
    for (int k = 0; k < nframes; k++) {
        const uint64_t n = frames[k].len / ps_wire_value_size(h->dtype);
        ps_wire_decode(h->dtype, at, frames[k].data, n);
        at += n;
    }
    *pulled = len;
    s_part_done(sl, 0, "", ps_range_len(r));
}

/* A rows reply (MSG_ROWS) from server i to slot idx: its run of the keys'
 * rows, copied into their place. */
static void s_on_rows(ps_kv_slots_t *t, int idx, int i, const Shardps__Header *h,
                      const ps_frame_t *frames, int nframes, uint64_t *pulled)
{
    ps_kv_slot_t *sl = &t->slots[idx];
    const int q = h->piece < PS_RANGE_ROW_PIECES ? (int)h->piece : 0;
    const size_t k = s_row_index(t, idx, i, q);
    const uint64_t lo = t->row_lo[k], nnz = t->row_hi[k] - lo;
    const size_t bytes = (size_t)nnz * sl->dim * sizeof(float);
    if (!nnz || h->piece != (uint32_t)q || h->nnz != nnz || nframes != 1 ||
        frames[0].len != bytes) {
        char why[256];
        snprintf(why, sizeof why, "S%d sent rows that do not match the request", i);
        s_part_done(sl, PS_EPROTO, why, 0);
        return;
    }
    memcpy(sl->buf + lo * sl->dim, frames[0].data, bytes);
    t->row_hi[k] = lo; /* answered: a second reply does not match */
    *pulled = bytes;
    s_part_done(sl, 0, "", 1);
}

int ps_kv_slots_on_reply(ps_kv_slots_t *t, int i, const Shardps__Header *h, const ps_frame_t *frames,
                         int nframes, uint64_t *pulled)
{
    uint64_t ignored;
    pulled = pulled ? pulled : &ignored;
    *pulled = 0;
    int idx = (int)(h->request_id & 0xff);
    uint32_t gen = (uint32_t)(h->request_id >> 8);
    ps_kv_slot_t *sl = idx < PS_KV_SLOTS ? &t->slots[idx] : NULL;
    if (!sl || sl->gen != gen || sl->state != PS_KV_SENT || h->role != PS_ROLE_SERVER ||
        h->sender != i || i < 0 || i >= t->n) {
        return PS_ENOENT;
    }
    char why[256];
    if (h->type == PS_MSG_ERROR) {
        snprintf(why, sizeof why, "S%d refused: %s", i, h->error);
        s_part_done(sl, h->status < 0 ? h->status : PS_EPROTO, why, 0);
    } else if (h->type == PS_MSG_PULL_REPLY &&
               (sl->type == PS_KV_PULL || sl->type == PS_KV_PUSH_PULL)) {
        s_on_pull_reply(t, idx, i, h, frames, nframes, pulled);
    } else if (h->type == PS_MSG_ROWS && sl->type == PS_KV_ROWS_PULL) {
        s_on_rows(t, idx, i, h, frames, nframes, pulled);
    } else if ((h->type == PS_MSG_PUSH_ACK &&
                (sl->type == PS_KV_PUSH || sl->type == PS_KV_ROWS_PUSH)) ||
               (h->type == PS_MSG_INIT_ACK && sl->type == PS_KV_INIT)) {
        s_part_done(sl, 0, "", 1);
    } else if (h->type == PS_MSG_PUSH_ACK && sl->type == PS_KV_PUSH_PULL &&
               t->ack_due[(size_t)idx * (size_t)t->n + (size_t)i]) {
        t->ack_due[(size_t)idx * (size_t)t->n + (size_t)i]--; /* one of its separate pushes */
        s_part_done(sl, 0, "", 1);
    } else {
        snprintf(why, sizeof why, "S%d answered with an unexpected %s", i,
                 ps_codec_type_name(h->type));
        s_part_done(sl, PS_EPROTO, why, 0);
    }
    return 0;
}

void ps_kv_slots_release(ps_kv_slots_t *t, int idx)
{
    t->slots[idx].state = PS_KV_FREE;
}
