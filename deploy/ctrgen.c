/*
 * deploy/ctrgen.c - the planted click model, its samplers and the writer.
 *
 * Zipf ranks by rejection-inversion (W. Hormann, G. Derflinger, "Rejection-
 * inversion to generate variates from monotone discrete distributions",
 * ACM TOMACS 6(3), 1996), as Apache Commons RNG's
 * RejectionInversionZipfSampler: O(1) memory and about one try per draw,
 * whatever the number of categories (10 million at scale 1). Normals by
 * Box-Muller. The weights of categories are never stored: each is a hash of
 * (seed, field, value). Lines are formatted by hand and written through a
 * 1 MiB buffer, to stdio or to zlib (level 1: gzip's speed, not its size).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "common/auc.h"
#include "common/error.h"
#include "common/rowkey.h"
#include "deploy/ctrgen.h"
#include "worker/rng.h"

/* Samples drawn at start to set the bias b. */
#define S_CALIBRATION_ROWS 32768
/* The ranks that share a field's head weight before it falls as 1/rank
 * (ps_ctrgen_cat_weight). */
#define S_HEAD_RANKS 5.0
/* Mixed into a category's hash to draw its tail weight apart from its sign. */
#define S_TAIL_KEY 0x7A11C0DEULL
/* The writer's buffer. */
#define S_CHUNK ((size_t)1 << 20)

/*
 * The categorical fields C1..C26: the number of categories in Criteo's
 * Kaggle train.txt (as the DLRM benchmark lists them), the Zipf exponent of
 * the ranks (1.05 for the large fields: long tails of rare values; up to 1.2
 * for the small ones), the share of missing values (Criteo's, capped at
 * 40%), and the two scales of the planted weights (ps_ctrgen_cat_weight):
 * head, the weight of the field's most common values and of a missing one,
 * and tail, the spread of the weights of its rarest values, in the five
 * fields of over a million categories only. The head is smaller in the
 * fields of over 100 000 categories, whose many rare values make a model's
 * use of them noisy. At the default scale and 2 million rows the
 * planted model's AUC is about 0.84, about 0.005 less with the weights of
 * the values seen fewer than 5 times zeroed, and the ctr model trained one
 * epoch on 90% of the rows gets within 0.01 of it on the rest
 * (docs/design/rows.md, "Data").
 */
static const struct {
    uint32_t count;
    double zipf, missing, head, tail;
} s_cat[PS_CTRGEN_CAT] = {
    {1460, 1.15, 0.00, 0.36, 0},        {583, 1.15, 0.00, 0.36, 0},
    {10131227, 1.05, 0.03, 0.25, 1.25}, {2202608, 1.05, 0.03, 0.21, 1.04},
    {305, 1.20, 0.00, 0.28, 0},         {24, 1.20, 0.12, 0.28, 0},
    {12517, 1.10, 0.00, 0.48, 0},       {633, 1.15, 0.00, 0.36, 0},
    {3, 1.20, 0.00, 0.14, 0},           {93145, 1.10, 0.00, 0.56, 0},
    {5683, 1.10, 0.00, 0.42, 0},        {8351593, 1.05, 0.03, 0.25, 1.25},
    {3194, 1.10, 0.00, 0.42, 0},        {27, 1.20, 0.00, 0.28, 0},
    {14992, 1.10, 0.00, 0.48, 0},       {5461306, 1.05, 0.03, 0.23, 1.13},
    {10, 1.20, 0.00, 0.20, 0},          {5652, 1.10, 0.00, 0.42, 0},
    {2173, 1.15, 0.40, 0.36, 0},        {4, 1.20, 0.40, 0.20, 0},
    {7046547, 1.05, 0.03, 0.23, 1.13},  {18, 1.20, 0.40, 0.28, 0},
    {15, 1.20, 0.00, 0.28, 0},          {286181, 1.05, 0.03, 0.19, 0},
    {105, 1.20, 0.40, 0.28, 0},         {142572, 1.05, 0.40, 0.19, 0},
};

/*
 * The numeric fields I1..I13: log-normal counts around Criteo's median with
 * a log-scale spread, x = floor((median + 1) * exp(spread * z)) - 1 (so 0 is
 * common), Criteo's share of missing values, the planted weight u_j of
 * t(x), and the share of -1 (I2 only, as in Criteo). They carry about 60%
 * of the planted logit's variance.
 */
static const struct {
    double median, spread, missing, u, minus_one;
} s_num[PS_CTRGEN_NUM] = {
    {1, 1.2, 0.45, 0.51, 0}, {3, 1.8, 0.00, -0.17, 0.04}, {6, 1.5, 0.21, 0.17, 0},
    {4, 1.0, 0.22, 0.34, 0}, {2800, 1.8, 0.03, -0.27, 0}, {33, 1.6, 0.22, 0.17, 0},
    {3, 1.6, 0.04, 0.34, 0}, {7, 1.0, 0.0005, 0.17, 0},   {38, 1.3, 0.04, 0.17, 0},
    {1, 0.6, 0.45, 0.68, 0}, {1, 1.0, 0.04, 0.68, 0},     {0, 1.2, 0.77, 0.34, 0},
    {4, 1.0, 0.22, 0.17, 0},
};

/* One field's Zipf law over ranks 1..n with exponent s (s != 1). */
typedef struct {
    double s, n;
    double h_x1, h_n, sdiv; /* the sampler's constants */
} s_zipf_t;

struct ps_ctrgen {
    uint64_t seed;
    ps_rng_t rng;                 /* the samples' stream */
    double bias;                  /* b */
    uint64_t wkey;                /* the weights' hash key */
    uint32_t card[PS_CTRGEN_CAT]; /* categories per field */
    uint32_t scramble[PS_CTRGEN_CAT];
    s_zipf_t zipf[PS_CTRGEN_CAT];
};

/* ---- Zipf by rejection-inversion ---------------------------------------- */

/* (e^x - 1)/x and log(1 + x)/x, each 1 at 0. */
static double s_expm1_over(double x)
{
    return fabs(x) > 1e-8 ? expm1(x) / x : 1.0 + x / 2;
}

static double s_log1p_over(double x)
{
    return fabs(x) > 1e-8 ? log1p(x) / x : 1.0 - x / 2;
}

/* h(x) = x^-s, and H, an integral of it, and H's inverse. */
static double s_h(const s_zipf_t *z, double x)
{
    return exp(-z->s * log(x));
}

static double s_hint(const s_zipf_t *z, double x)
{
    const double lx = log(x);
    return s_expm1_over((1.0 - z->s) * lx) * lx;
}

static double s_hint_inv(const s_zipf_t *z, double x)
{
    double t = x * (1.0 - z->s);
    if (t < -1.0) {
        t = -1.0;
    }
    return exp(s_log1p_over(t) * x);
}

static void s_zipf_init(s_zipf_t *z, double s, uint32_t n)
{
    z->s = s;
    z->n = n;
    z->h_x1 = s_hint(z, 1.5) - 1.0;
    z->h_n = s_hint(z, n + 0.5);
    z->sdiv = 2.0 - s_hint_inv(z, s_hint(z, 2.5) - s_h(z, 2.0));
}

/* A rank in 1..n. */
static uint32_t s_zipf(const s_zipf_t *z, ps_rng_t *r)
{
    for (;;) {
        const double u = z->h_n + ps_rng_double(r) * (z->h_x1 - z->h_n);
        const double x = s_hint_inv(z, u);
        double k = floor(x + 0.5);
        if (k < 1) {
            k = 1;
        } else if (k > z->n) {
            k = z->n;
        }
        if (k - x <= z->sdiv || u >= s_hint(z, k + 0.5) - s_h(z, k)) {
            return (uint32_t)k;
        }
    }
}

/* ---- the planted model ------------------------------------------------- */

/* MurmurHash3's 32-bit finaliser: ranks to values, one-to-one. */
static uint32_t s_mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

/* s_mix32's inverse: values back to ranks. */
static uint32_t s_unmix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7ed1b41du; /* 0xc2b2ae35^-1 mod 2^32 */
    x ^= (x >> 13) ^ (x >> 26);
    x *= 0xa5cb9243u; /* 0x85ebca6b^-1 mod 2^32 */
    x ^= x >> 16;
    return x;
}

/* A standard normal from 64 hashed bits (Box-Muller, one of the pair). */
static double s_normal_bits(uint64_t h)
{
    const double u1 = ((double)(h >> 32) + 0.5) * (1.0 / 4294967296.0);
    const double u2 = (double)(h & 0xffffffffu) * (1.0 / 4294967296.0);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double s_normal(ps_rng_t *r)
{
    return s_normal_bits(ps_rng_next(r));
}

/* The rank (1..) a value of field k was written for. */
static uint32_t s_rank(const ps_ctrgen_t *g, int k, uint32_t value)
{
    return (s_unmix32(value) ^ g->scramble[k]) + 1;
}

/*
 * w_k(value) = +-head_k * 5 / (r + 4) + tail_k * (r / n_k)^2 * z, r the
 * value's rank, n_k the field's categories, the sign and the standard normal
 * z hashed from (seed, k, value). The head term is learnt from the thousands
 * of samples of the top values, and its sizes are fixed, so the AUC varies
 * little with the seed; the tail term grows towards the field's last ranks
 * and gives the rarest values weights of their own. A missing value weighs
 * +-head_k.
 */
double ps_ctrgen_cat_weight(const ps_ctrgen_t *g, int k, uint32_t value, int missing)
{
    const uint64_t in = ((uint64_t)(k + 1) << 40) | (missing ? (uint64_t)1 << 32 : value);
    const uint64_t h = ps_rowkey_hash(in ^ g->wkey);
    const double head = (h >> 63) ? -s_cat[k].head : s_cat[k].head;
    if (missing) {
        return head;
    }
    const double r = (double)s_rank(g, k, value);
    double w = head * S_HEAD_RANKS / (r + S_HEAD_RANKS - 1);
    if (s_cat[k].tail > 0) {
        const double q = r / g->card[k];
        w += s_cat[k].tail * q * q * s_normal_bits(ps_rowkey_hash(h ^ S_TAIL_KEY));
    }
    return w;
}

/* t(x) = sign(x) log(1 + |x|), as the reader maps numeric fields. */
static double s_t(int64_t x)
{
    const double m = log1p((double)(x < 0 ? -x : x));
    return x < 0 ? -m : m;
}

/* The logit without the bias. */
static double s_logit0(const ps_ctrgen_t *g, const ps_ctrgen_row_t *row)
{
    double z = 0;
    for (int k = 0; k < PS_CTRGEN_CAT; k++) {
        z += ps_ctrgen_cat_weight(g, k, row->cat[k], (int)(row->cat_missing >> k & 1));
    }
    for (int j = 0; j < PS_CTRGEN_NUM; j++) {
        if (!(row->num_missing >> j & 1)) {
            z += s_num[j].u * s_t(row->num[j]);
        }
    }
    return z;
}

double ps_ctrgen_logit(const ps_ctrgen_t *g, const ps_ctrgen_row_t *row)
{
    return g->bias + s_logit0(g, row);
}

/* Draws a row's fields (not p, not the label) from r. */
static void s_draw(const ps_ctrgen_t *g, ps_rng_t *r, ps_ctrgen_row_t *row)
{
    row->num_missing = 0;
    for (int j = 0; j < PS_CTRGEN_NUM; j++) {
        row->num[j] = 0;
        if (ps_rng_double(r) < s_num[j].missing) {
            row->num_missing |= 1u << j;
        } else if (s_num[j].minus_one > 0 && ps_rng_double(r) < s_num[j].minus_one) {
            row->num[j] = -1;
        } else {
            const double x =
                floor((s_num[j].median + 1) * exp(s_num[j].spread * s_normal(r)));
            row->num[j] = x < 1 ? 0 : x > 1e12 ? (int64_t)1e12 : (int64_t)x - 1;
        }
    }
    row->cat_missing = 0;
    for (int k = 0; k < PS_CTRGEN_CAT; k++) {
        row->cat[k] = 0;
        if (s_cat[k].missing > 0 && ps_rng_double(r) < s_cat[k].missing) {
            row->cat_missing |= 1u << k;
        } else {
            const uint32_t rank = s_zipf(&g->zipf[k], r);
            row->cat[k] = s_mix32((rank - 1) ^ g->scramble[k]);
        }
    }
}

static double s_sigmoid(double z)
{
    return 1.0 / (1.0 + exp(-z));
}

/* b such that the mean click probability over draws of a stream of their
 * own is PS_CTRGEN_CTR (bisection: the mean is increasing in b). */
static int s_calibrate(ps_ctrgen_t *g)
{
    double *z = malloc(S_CALIBRATION_ROWS * sizeof *z);
    if (!z) {
        return PS_ENOMEM;
    }
    ps_rng_t r;
    ps_rng_init(&r, g->seed, 0xCA1B);
    ps_ctrgen_row_t row;
    for (int i = 0; i < S_CALIBRATION_ROWS; i++) {
        s_draw(g, &r, &row);
        z[i] = s_logit0(g, &row);
    }
    double lo = -30, hi = 30;
    for (int it = 0; it < 60; it++) {
        const double b = 0.5 * (lo + hi);
        double m = 0;
        for (int i = 0; i < S_CALIBRATION_ROWS; i++) {
            m += s_sigmoid(b + z[i]);
        }
        if (m / S_CALIBRATION_ROWS < PS_CTRGEN_CTR) {
            lo = b;
        } else {
            hi = b;
        }
    }
    g->bias = 0.5 * (lo + hi);
    free(z);
    return 0;
}

int ps_ctrgen_new(uint64_t seed, double scale, ps_ctrgen_t **out)
{
    *out = NULL;
    if (!(scale > 0 && scale <= 1)) {
        return PS_EINVAL;
    }
    ps_ctrgen_t *g = calloc(1, sizeof *g);
    if (!g) {
        return PS_ENOMEM;
    }
    g->seed = seed;
    ps_rng_init(&g->rng, seed, 0xC1C5);
    uint64_t x = seed ^ 0x57A7E5EEDULL;
    g->wkey = ps_rng_splitmix64(&x);
    for (int k = 0; k < PS_CTRGEN_CAT; k++) {
        const uint32_t count = s_cat[k].count;
        const uint32_t floor_card = count < PS_CTRGEN_MIN_CARD ? count : PS_CTRGEN_MIN_CARD;
        const double scaled = floor((double)count * scale + 0.5);
        g->card[k] = scaled > floor_card ? (uint32_t)scaled : floor_card;
        g->scramble[k] = (uint32_t)ps_rng_splitmix64(&x);
        s_zipf_init(&g->zipf[k], s_cat[k].zipf, g->card[k]);
    }
    if (s_calibrate(g) != 0) {
        free(g);
        return PS_ENOMEM;
    }
    *out = g;
    return 0;
}

void ps_ctrgen_destroy(ps_ctrgen_t **g)
{
    if (g && *g) {
        free(*g);
        *g = NULL;
    }
}

uint32_t ps_ctrgen_cardinality(const ps_ctrgen_t *g, int k)
{
    return g->card[k];
}

double ps_ctrgen_bias(const ps_ctrgen_t *g)
{
    return g->bias;
}

void ps_ctrgen_next(ps_ctrgen_t *g, ps_ctrgen_row_t *row)
{
    s_draw(g, &g->rng, row);
    row->p = s_sigmoid(ps_ctrgen_logit(g, row));
    row->label = ps_rng_double(&g->rng) < row->p;
}

/* ---- lines ------------------------------------------------------------- */

/* Decimal digits of x (>= -1) at p; returns the end. */
static char *s_put_int(char *p, int64_t x)
{
    char tmp[24];
    int n = 0;
    if (x < 0) {
        *p++ = '-';
        x = -x;
    }
    do {
        tmp[n++] = (char)('0' + x % 10);
        x /= 10;
    } while (x > 0);
    while (n > 0) {
        *p++ = tmp[--n];
    }
    return p;
}

static char *s_put_hex8(char *p, uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 7; i >= 0; i--) {
        p[i] = digits[v & 15];
        v >>= 4;
    }
    return p + 8;
}

size_t ps_ctrgen_format(const ps_ctrgen_row_t *row, char *buf)
{
    char *p = buf;
    *p++ = row->label ? '1' : '0';
    for (int j = 0; j < PS_CTRGEN_NUM; j++) {
        *p++ = '\t';
        if (!(row->num_missing >> j & 1)) {
            p = s_put_int(p, row->num[j]);
        }
    }
    for (int k = 0; k < PS_CTRGEN_CAT; k++) {
        *p++ = '\t';
        if (!(row->cat_missing >> k & 1)) {
            p = s_put_hex8(p, row->cat[k]);
        }
    }
    *p++ = '\n';
    *p = '\0';
    return (size_t)(p - buf);
}

/* ---- the file ---------------------------------------------------------- */

/* Where lines go: stdio or zlib. */
typedef struct {
    FILE *plain;
    gzFile gz;
} s_sink_t;

static int s_sink_write(s_sink_t *s, const char *buf, size_t len)
{
    if (s->gz) {
        return gzwrite(s->gz, buf, (unsigned)len) == (int)len ? 0 : PS_EIO;
    }
    return fwrite(buf, 1, len, s->plain) == len ? 0 : PS_EIO;
}

/* Closes the sink; returns PS_EIO when anything failed to reach the file. */
static int s_sink_close(s_sink_t *s)
{
    int rc = 0;
    if (s->gz) {
        rc = gzclose(s->gz) == Z_OK ? 0 : PS_EIO;
    } else if (s->plain) {
        rc = (fflush(s->plain) == 0 && !ferror(s->plain)) ? 0 : PS_EIO;
        rc = fclose(s->plain) == 0 ? rc : PS_EIO;
    }
    s->gz = NULL;
    s->plain = NULL;
    return rc;
}

/* Draws and writes the rows; p and y get each row's probability and label. */
static int s_write_rows(ps_ctrgen_t *g, s_sink_t *sink, uint64_t rows, float *p, float *y,
                        ps_ctrgen_report_t *rep)
{
    char *buf = malloc(S_CHUNK);
    if (!buf) {
        return PS_ENOMEM;
    }
    size_t used = 0;
    int rc = 0;
    ps_ctrgen_row_t row;
    for (uint64_t i = 0; i < rows && rc == 0; i++) {
        ps_ctrgen_next(g, &row);
        used += ps_ctrgen_format(&row, buf + used);
        p[i] = (float)row.p;
        y[i] = (float)row.label;
        rep->clicks += (uint64_t)row.label;
        if (used > S_CHUNK - PS_CTRGEN_MAX_LINE) {
            rc = s_sink_write(sink, buf, used);
            used = 0;
        }
    }
    if (rc == 0 && used > 0) {
        rc = s_sink_write(sink, buf, used);
    }
    free(buf);
    return rc;
}

int ps_ctrgen_write(ps_ctrgen_t *g, const char *path, uint64_t rows, int gzip,
                    ps_ctrgen_report_t *rep, char *why, size_t cap)
{
    memset(rep, 0, sizeof *rep);
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >=
        sizeof tmp) {
        ps_error_format(why, cap, "%s: path too long", path);
        return PS_EIO;
    }
    float *p = malloc((rows ? rows : 1) * sizeof *p),
          *y = malloc((rows ? rows : 1) * sizeof *y);
    if (!p || !y) {
        free(p);
        free(y);
        ps_error_format(why, cap, "%s: no memory for %llu rows' probabilities", path,
                        (unsigned long long)rows);
        return PS_ENOMEM;
    }
    s_sink_t sink = {NULL, NULL};
    errno = 0;
    if (gzip) {
        sink.gz = gzopen(tmp, "wb1");
    } else {
        sink.plain = fopen(tmp, "wb");
    }
    int rc = 0;
    if (!sink.gz && !sink.plain) {
        ps_error_format(why, cap, "cannot create %s: %s", path,
                        errno ? strerror(errno) : "out of memory");
        rc = PS_EIO;
    } else {
        rc = s_write_rows(g, &sink, rows, p, y, rep);
        int e = errno;
        if (s_sink_close(&sink) != 0 && rc == 0) {
            rc = PS_EIO;
            e = errno;
        }
        if (rc == 0 && rename(tmp, path) != 0) {
            rc = PS_EIO;
            e = errno;
        }
        if (rc != 0) {
            ps_error_format(why, cap, "cannot write %s: %s", path,
                            rc == PS_ENOMEM ? "out of memory"
                            : e             ? strerror(e)
                                            : "write failed");
            unlink(tmp);
        }
    }
    if (rc == 0) {
        rep->rows = rows;
        rep->auc = ps_auc(p, y, rows);
        rep->logloss = ps_logloss(p, y, rows);
    }
    free(p);
    free(y);
    return rc;
}
