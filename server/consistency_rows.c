/*
 * server/consistency_rows.c - embedding rows in the stepped consistency
 * modes (see consistency_rows.h): each slot's rows push, a message per
 * piece of the server's rows range, held until its step applies the
 * piece; each piece applied once every worker's share of it is in (sync,
 * ssp) or at the step's end (sync:K/N), summed over the step's workers in
 * rank order.
 */
#include "server/consistency_rows.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/optim.h"

struct ps_pieces {
    ps_pieces_config_t cfg;
    /* Slot k's piece q is index k * PS_RANGE_ROW_PIECES + q. */
    ps_rows_part_t *rows;  /* nslots*pieces: each slot's rows push of each piece */
    void **frame;          /* nslots*pieces: its frame; NULL = none held */
    unsigned char *got;    /* nslots*pieces: that piece's push came */
    int *count;            /* nslots: pieces pushed so far */
    /* Sync and ssp apply a step's piece of rows once every worker of the
     * step pushed it, and answer the next step's pulls of that piece at once. */
    unsigned char done[PS_RANGE_ROW_PIECES]; /* applied for the step being applied */
    int ndone;             /* pieces of done set */
    ps_rows_part_t *with;  /* workers: a step's rows pushes in rank order (scratch) */
    uint64_t *sum_keys;    /* a step's rows sum (ps_optim_sum_rows), grown as needed */
    float *sum_grads;
    uint64_t sum_cap;      /* keys they hold */
};

int ps_pieces_new(ps_pieces_t **out, const ps_pieces_config_t *cfg)
{
    *out = NULL;
    ps_pieces_t *p = calloc(1, sizeof *p);
    if (!p) {
        return PS_ENOMEM;
    }
    p->cfg = *cfg;
    if (cfg->rows) {
        const size_t pieces = cfg->nslots * PS_RANGE_ROW_PIECES;
        p->rows = calloc(pieces, sizeof *p->rows);
        p->frame = calloc(pieces, sizeof *p->frame);
        p->got = calloc(pieces, 1);
        p->count = calloc(cfg->nslots, sizeof *p->count);
        p->with = calloc((size_t)cfg->workers, sizeof *p->with);
        if (!p->rows || !p->frame || !p->got || !p->count || !p->with) {
            ps_pieces_destroy(&p);
            return PS_ENOMEM;
        }
    }
    *out = p;
    return 0;
}

void ps_pieces_destroy(ps_pieces_t **pp)
{
    ps_pieces_t *p = *pp;
    if (!p) {
        return;
    }
    for (size_t k = 0; p->got && p->frame && p->count && k < p->cfg.nslots; k++) {
        ps_pieces_release(p, k);
    }
    free(p->rows);
    free(p->frame);
    free(p->got);
    free(p->count);
    free(p->with);
    free(p->sum_keys);
    free(p->sum_grads);
    free(p);
    *pp = NULL;
}

/* Index of slot k's piece q. */
static size_t s_piece(size_t k, int q)
{
    return k * PS_RANGE_ROW_PIECES + (size_t)q;
}

int ps_pieces_hold(ps_pieces_t *p, size_t k, const ps_request_t *r)
{
    const size_t kq = s_piece(k, r->piece);
    if (p->got[kq]) {
        return PS_ESTATE;
    }
    p->rows[kq] = (ps_rows_part_t){r->keys, r->data, r->nkeys, 1.0f};
    p->frame[kq] = r->frame;
    p->got[kq] = 1;
    p->count[k]++;
    return 0;
}

int ps_pieces_count(const ps_pieces_t *p, size_t k)
{
    return p->cfg.rows ? p->count[k] : 0;
}

int ps_pieces_complete(const ps_pieces_t *p, size_t k)
{
    return !p->cfg.rows || p->count[k] == PS_RANGE_ROW_PIECES;
}

void ps_pieces_release(ps_pieces_t *p, size_t k)
{
    for (int q = 0; p->cfg.rows && q < PS_RANGE_ROW_PIECES; q++) {
        const size_t kq = s_piece(k, q);
        if (p->frame[kq] && p->cfg.ops.release) {
            p->cfg.ops.release(p->cfg.ops.ctx, p->frame[kq]);
        }
        p->frame[kq] = NULL;
        p->got[kq] = 0;
    }
    if (p->cfg.rows) {
        p->count[k] = 0;
    }
}

/* Sums the n rows pushes of p->with and applies the sum (ops.apply_rows,
 * with last). A sum with no memory is logged and skipped (its rows keep
 * their values): the job goes on, as with a non-finite update. */
static void s_sum_apply(ps_pieces_t *p, int n, float lr, float scale, int64_t t, int last)
{
    int64_t keys = ps_optim_sum_rows(p->with, n, p->cfg.embed_dim, &p->sum_keys,
                                     &p->sum_grads, &p->sum_cap);
    if (keys < 0) {
        ps_log_err("out of memory to sum the rows of step %lld: not applied", (long long)t);
        keys = 0;
    }
    if (keys > 0 && p->cfg.ops.apply_rows) {
        p->cfg.ops.apply_rows(p->cfg.ops.ctx, p->sum_keys, p->sum_grads, (uint64_t)keys, lr,
                              scale, t, last);
    }
}

/* Whether every worker of with pushed piece q of its rows of step t. */
static int s_piece_in(const ps_pieces_t *p, const ps_held_t *h, int64_t t,
                      const unsigned char *with, int q)
{
    for (int w = 0; w < p->cfg.workers; w++) {
        if (with[w] && !p->got[s_piece(ps_held_slot(h, t, w), q)]) {
            return 0;
        }
    }
    return 1;
}

/* Piece q of step t's rows, applied: the pushes of the workers in with,
 * in rank order, weighted as their dense parts are. */
static void s_apply_piece(ps_pieces_t *p, const ps_held_t *h, int64_t t,
                          const unsigned char *with, int q, float lr, float scale)
{
    int n = 0;
    for (int w = 0; w < p->cfg.workers; w++) {
        if (with[w]) {
            const size_t k = ps_held_slot(h, t, w);
            p->with[n] = p->rows[s_piece(k, q)];
            p->with[n++].weight = ps_held_weight(h, t, k);
        }
    }
    s_sum_apply(p, n, lr, scale, t, 0);
    ps_pieces_mark(p, q);
}

int ps_pieces_apply(ps_pieces_t *p, const ps_held_t *h, int64_t t, const unsigned char *with,
                    float lr, float scale)
{
    int applied = 0;
    for (int q = 0; p->cfg.rows && q < PS_RANGE_ROW_PIECES; q++) {
        if (!p->done[q] && s_piece_in(p, h, t, with, q)) {
            s_apply_piece(p, h, t, with, q, lr, scale);
            applied++;
        }
    }
    return applied;
}

int ps_pieces_end(ps_pieces_t *p, int64_t t, float lr, float scale)
{
    static const uint64_t no_key;
    static const float no_row;
    if (!p->cfg.rows) {
        return 1;
    }
    if (p->ndone < PS_RANGE_ROW_PIECES) {
        return 0;
    }
    if (p->cfg.ops.apply_rows) {
        p->cfg.ops.apply_rows(p->cfg.ops.ctx, &no_key, &no_row, 0, lr, scale, t, 1);
    }
    return 1;
}

void ps_pieces_apply_now(ps_pieces_t *p, const ps_request_t *r, float lr, float scale,
                         int64_t t)
{
    p->with[0] = (ps_rows_part_t){r->keys, r->data, r->nkeys, 1.0f};
    s_sum_apply(p, 1, lr, scale, t, 1);
}

void ps_pieces_mark(ps_pieces_t *p, int q)
{
    p->ndone += !p->done[q];
    p->done[q] = 1;
}

void ps_pieces_restart(ps_pieces_t *p)
{
    memset(p->done, 0, sizeof p->done);
    p->ndone = 0;
}

const unsigned char *ps_pieces_done(const ps_pieces_t *p)
{
    return p->done;
}

int ps_pieces_ndone(const ps_pieces_t *p)
{
    return p->ndone;
}
