/*
 * worker/ctr_data.h - click logs in the Criteo layout (the display
 * advertising challenge's train.txt), read into flat arrays.
 *
 * One sample per line, tab-separated: the label (0 or 1), 13 integer
 * ("numeric") fields, then 26 categorical fields of 8 hexadecimal digits (a
 * 32-bit value); any field but the label may be empty (missing). Plain or
 * gzip files alike (zlib). Each categorical value becomes the 64-bit key of
 * one embedding row, ps_ctr_key(): distinct for every (field, value) and for
 * each field's missing value, so fields never share a row. A malformed line
 * is skipped and counted, up to a bound. Loads the whole file; does not
 * shuffle, hash keys to servers or know about models.
 */
#ifndef PS_WORKER_CTR_DATA_H
#define PS_WORKER_CTR_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    PS_CTR_NUM = 13, /* numeric fields per sample (Criteo's I1..I13) */
    PS_CTR_CAT = PS_JOB_ROW_FIELDS, /* categorical fields per sample (C1..C26) */
    PS_CTR_FIELDS = 1 + PS_CTR_NUM + PS_CTR_CAT, /* columns of a line, label first */
};

/* Longest line accepted, without its newline; a longer one is malformed. A
 * Criteo line is at most about 500 bytes. */
#define PS_CTR_MAX_LINE 4096

/* A set of samples, plain data; row i of each array is sample i, in file order. */
typedef struct {
    size_t n;       /* samples */
    float *num;     /* [n*PS_CTR_NUM] numeric fields as sign(x)*log(1+|x|); missing = 0 */
    uint64_t *keys; /* [n*PS_CTR_CAT] categorical fields as ps_ctr_key() */
    float *label;   /* [n] 0 or 1 */
    uint64_t bad;   /* malformed lines skipped */
} ps_ctr_set_t;

/* A borrowed run of rows of a set: valid until the set is finished. */
typedef struct {
    size_t n;             /* samples */
    const float *num;     /* [n*PS_CTR_NUM] */
    const uint64_t *keys; /* [n*PS_CTR_CAT] */
    const float *label;   /* [n] */
} ps_ctr_view_t;

/*
 * The embedding key of categorical field `field` (0..PS_CTR_CAT-1) with the
 * 32-bit value `value`, or of the field's missing value (missing != 0; value
 * ignored): (field + 1) << 40 | value, or (field + 1) << 40 | 1 << 32. Keys
 * of different fields never meet, a missing value never meets a present one,
 * and no key is 0.
 */
static inline uint64_t ps_ctr_key(int field, uint32_t value, int missing)
{
    return ((uint64_t)(field + 1) << 40) | (missing ? (uint64_t)1 << 32 : (uint64_t)value);
}

/* The field of a key made by ps_ctr_key(). */
static inline int ps_ctr_key_field(uint64_t key)
{
    return (int)(key >> 40) - 1;
}

/*
 * Reads up to max_rows samples (0: all) of the Criteo-layout file at path
 * (plain or gzip) into *out, which the call initialises. A malformed line
 * (not 40 fields, a numeric field that is not a decimal integer of at most
 * 18 digits, a categorical field that is not 8 hexadecimal digits, a label
 * that is not 0 or 1, a line longer than PS_CTR_MAX_LINE) is skipped and
 * counted in out->bad; an empty line too. Returns 0, with the first
 * malformed line's reason in why (or why empty when there was none);
 * PS_EINVAL when more than max_bad lines are malformed, with
 * "PATH:LINE: what is wrong (...)" naming the one over the bound;
 * PS_ENOENT (no such file), PS_EIO (unreadable, a directory, a corrupt or
 * truncated gzip stream) or PS_ENOMEM, each with a one-line reason naming
 * path. why (cap bytes) may be NULL. On failure *out is left empty. Caller
 * owns the arrays; release them with ps_ctr_set_fini(). Thread-safe (one
 * set per caller).
 */
int ps_ctr_read(const char *path, size_t max_rows, uint64_t max_bad, ps_ctr_set_t *out,
                char *why, size_t cap);

/* Frees the arrays and zeroes the set; safe on a zeroed or finished set. */
void ps_ctr_set_fini(ps_ctr_set_t *s);

/*
 * Splits s, in file order, into its first rows (*train) and its last
 * round(n * test_frac) rows (*test), test_frac in [0, 1] (clamped): a
 * held-out tail, as the logs are in time order. Either view may be empty.
 * Both borrow s's arrays: valid until ps_ctr_set_fini(s).
 */
void ps_ctr_split(const ps_ctr_set_t *s, double test_frac, ps_ctr_view_t *train,
                  ps_ctr_view_t *test);

#ifdef __cplusplus
}
#endif
#endif
