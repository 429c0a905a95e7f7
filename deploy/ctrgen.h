/*
 * deploy/ctrgen.h - synthetic click logs in the Criteo layout, labelled by a
 * planted model, for shardps-datagen ctr.
 *
 * A sample has 13 numeric and 26 categorical fields, as the display
 * advertising challenge's train.txt (worker/ctr_data.h reads it). Each
 * categorical field draws ranks from a Zipf law over Criteo Kaggle's
 * published cardinality of that field times a scale, and writes a rank as a
 * per-field bijective scramble of it (8 hex digits); numeric fields are
 * heavy-tailed counts. The label is Bernoulli(p) with
 *   p = sigmoid(b + sum_k w_k(value_k) + sum_j u_j * t(x_j)),
 *   t(x) = sign(x) * log(1 + |x|), a missing numeric field adding 0,
 * where w_k(value) (ps_ctrgen_cat_weight) is a head weight of a hashed sign
 * that falls as 1/rank past the field's five most common values, plus, in
 * the five fields of over a million categories, a hashed normal weight whose
 * spread grows as the square of the rank over the field's cardinality, so
 * that the rarest values weigh most there; a missing value has a head weight
 * of its own. b is set so that about 25% of samples are clicks. The numeric
 * fields carry about 60% of the logit's variance, the common categories
 * most of the rest and the rare ones enough that a model blind to them
 * loses AUC.
 * Everything follows from the seed: same seed, same scale, same build and C
 * library, same bytes. Does not read data or train anything.
 */
#ifndef PS_DEPLOY_CTRGEN_H
#define PS_DEPLOY_CTRGEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    PS_CTRGEN_NUM = 13, /* numeric fields (I1..I13) */
    PS_CTRGEN_CAT = 26, /* categorical fields (C1..C26) */
};

/* The default scale of the cardinalities: Criteo Kaggle's 33.8 million
 * categories become about 2.1 million. */
#define PS_CTRGEN_DEFAULT_SCALE 0.0625
/* No field is scaled below this many categories, or below its own count when
 * that is smaller: the small fields (day, device...) keep their values. */
#define PS_CTRGEN_MIN_CARD 100
/* The click rate b aims at. */
#define PS_CTRGEN_CTR 0.25
/* Longest line ps_ctrgen_format() writes, newline and NUL included. */
#define PS_CTRGEN_MAX_LINE 512

typedef struct ps_ctrgen ps_ctrgen_t;

/* One sample, plain data. */
typedef struct {
    int64_t num[PS_CTRGEN_NUM];  /* numeric values (>= -1); 0 where missing */
    uint32_t num_missing;        /* bit j set: numeric field j is empty */
    uint32_t cat[PS_CTRGEN_CAT]; /* categorical values; 0 where missing */
    uint32_t cat_missing;        /* bit k set: categorical field k is empty */
    double p;                    /* the planted click probability */
    int label;                   /* 0 or 1, drawn from p */
} ps_ctrgen_row_t;

/* What a written file holds. */
typedef struct {
    uint64_t rows;   /* samples written */
    uint64_t clicks; /* of them with label 1 */
    double auc;      /* ROC AUC of the planted p against the labels */
    double logloss;  /* mean log loss of the planted p against the labels */
} ps_ctrgen_report_t;

/*
 * A generator of the samples of seed, its cardinalities Criteo's times scale
 * (each at least min(count, PS_CTRGEN_MIN_CARD)), scale in (0, 1]. Draws a
 * few thousand samples of its own to set b. Returns 0 with *out (caller owns
 * the result; destroy with ps_ctrgen_destroy()), PS_EINVAL (scale out of
 * range) or PS_ENOMEM. One generator per thread.
 */
int ps_ctrgen_new(uint64_t seed, double scale, ps_ctrgen_t **out);

/* Frees *g and sets it to NULL; safe on NULL and on *g == NULL. */
void ps_ctrgen_destroy(ps_ctrgen_t **g);

/* The number of categories of categorical field k (0..PS_CTRGEN_CAT-1). */
uint32_t ps_ctrgen_cardinality(const ps_ctrgen_t *g, int k);

/* The bias b of the planted model. */
double ps_ctrgen_bias(const ps_ctrgen_t *g);

/* w_k(value) of the planted model, or field k's weight of a missing value
 * (missing != 0, value ignored). Depends only on the seed, the scale, k and
 * value. */
double ps_ctrgen_cat_weight(const ps_ctrgen_t *g, int k, uint32_t value, int missing);

/* The planted logit of a row's fields (its p and label ignored). */
double ps_ctrgen_logit(const ps_ctrgen_t *g, const ps_ctrgen_row_t *row);

/* Draws the next sample of the stream into *row, label included. */
void ps_ctrgen_next(ps_ctrgen_t *g, ps_ctrgen_row_t *row);

/* Writes row as one tab-separated line with its newline into buf (at least
 * PS_CTRGEN_MAX_LINE bytes; NUL-terminated). Returns its length. */
size_t ps_ctrgen_format(const ps_ctrgen_row_t *row, char *buf);

/*
 * Writes the next `rows` samples of g to path, gzip-compressed when gzip,
 * through a temporary file beside it (path.tmp.<pid>) renamed at the end, so
 * that path is either whole or as it was. Fills *rep. Returns 0, PS_ENOMEM
 * (the rows' probabilities and labels are kept for the AUC: 8 bytes a row)
 * or PS_EIO with a one-line reason naming path in why (cap bytes; may be
 * NULL).
 */
int ps_ctrgen_write(ps_ctrgen_t *g, const char *path, uint64_t rows, int gzip,
                    ps_ctrgen_report_t *rep, char *why, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
