/* proto/range.c - key-range arithmetic, the byte-balanced shard map and the
 * rows' hashed one. */
#include "proto/range.h"

#include "common/error.h"

uint64_t ps_range_intersect(ps_range_t a, ps_range_t b, ps_range_t *out)
{
    uint64_t lo = a.begin > b.begin ? a.begin : b.begin;
    uint64_t hi = a.end < b.end ? a.end : b.end;
    if (hi <= lo) {
        out->begin = out->end = lo;
        return 0;
    }
    out->begin = lo;
    out->end = hi;
    return hi - lo;
}

int ps_range_split(uint64_t p, int s, ps_range_t *out)
{
    if (s < 1) {
        return PS_EINVAL;
    }
    uint64_t base = p / (uint64_t)s, extra = p % (uint64_t)s, at = 0;
    for (int i = 0; i < s; i++) {
        uint64_t n = base + ((uint64_t)i < extra ? 1 : 0);
        out[i].begin = at;
        out[i].end = at + n;
        at += n;
    }
    return 0;
}

int ps_range_find(const ps_range_t *shards, int s, uint64_t key)
{
    int lo = 0, hi = s - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (key < shards[mid].begin) {
            hi = mid - 1;
        } else if (key >= shards[mid].end) {
            lo = mid + 1;
        } else {
            return mid;
        }
    }
    return -1;
}

int ps_range_split_rows(int s, ps_rowrange_t *out)
{
    if (s < 1) {
        return PS_EINVAL;
    }
    /* range i starts at floor(i * 2^64 / s) */
    for (int i = 0; i < s; i++) {
        out[i].first = (uint64_t)(((unsigned __int128)i << 64) / (unsigned)s);
        if (i > 0) {
            out[i - 1].last = out[i].first - 1;
        }
    }
    out[s - 1].last = UINT64_MAX;
    return 0;
}

int ps_range_rows_tile(const ps_rowrange_t *rows, int s)
{
    if (s < 1 || rows[0].first != 0 || rows[s - 1].last != UINT64_MAX) {
        return 0;
    }
    for (int i = 0; i < s; i++) {
        if (rows[i].last < rows[i].first || (i > 0 && rows[i].first != rows[i - 1].last + 1)) {
            return 0;
        }
    }
    return 1;
}

/* The first hash of piece q of r (q = PS_RANGE_ROW_PIECES: one past r):
 * first + ceil(width x q / PIECES). */
static unsigned __int128 s_piece_start(ps_rowrange_t r, int q)
{
    const unsigned __int128 width = (unsigned __int128)(r.last - r.first) + 1;
    return r.first + (width * (unsigned)q + PS_RANGE_ROW_PIECES - 1) / PS_RANGE_ROW_PIECES;
}

ps_rowrange_t ps_range_row_piece(ps_rowrange_t r, int q)
{
    return (ps_rowrange_t){(uint64_t)s_piece_start(r, q),
                           (uint64_t)(s_piece_start(r, q + 1) - 1)};
}

int ps_range_row_piece_of(ps_rowrange_t r, uint64_t h)
{
    const unsigned __int128 width = (unsigned __int128)(r.last - r.first) + 1;
    /* h >= s_piece_start(r, q) exactly when (h - first) * PIECES >= width * q;
     * a hash outside r gets the nearest piece */
    if (h <= r.first || h > r.last) {
        return h <= r.first ? 0 : PS_RANGE_ROW_PIECES - 1;
    }
    return (int)((unsigned __int128)(h - r.first) * PS_RANGE_ROW_PIECES / width);
}

int ps_range_find_row(const ps_rowrange_t *rows, int s, uint64_t key)
{
    const uint64_t h = ps_rowkey_hash(key);
    int lo = 0, hi = s - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (h < rows[mid].first) {
            hi = mid - 1;
        } else if (h > rows[mid].last) {
            lo = mid + 1;
        } else {
            return mid;
        }
    }
    return -1;
}
