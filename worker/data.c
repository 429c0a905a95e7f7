/*
 * worker/data.c - Fashion-MNIST IDX reader, normalisation, global sample order.
 *
 * IDX (http://yann.lecun.com/exdb/mnist/): a big-endian u32 magic 0x000008DD
 * (0x08 = unsigned bytes, DD = number of dimensions), DD big-endian u32 sizes,
 * then the bytes. Files are read through zlib's gzread, which also reads
 * uncompressed files. Everything read from disk is validated: magic, sizes,
 * truncation, trailing bytes, label range. Start-up only; no hot-path code
 * except ps_data_gather.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "common/error.h"
#include "worker/data.h"
#include "worker/rng.h"

/* Normalisation of Fashion-MNIST pixels: (x/255 - mean) / std. */
#define PS_DATA_MEAN 0.2860f
#define PS_DATA_STD 0.3530f
/* Largest IDX payload we accept (the training images are 47 MB). */
#define PS_DATA_MAX_BYTES ((size_t)1 << 31)

static void s_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes a one-line reason into err (which may be NULL). */
static void s_seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
}

/* Reads exactly len bytes; returns 0, or PS_EPROTO (short: truncated or
 * corrupt stream) / PS_EIO, with the reason in err. */
static int s_read_exact(gzFile f, const char *path, void *buf, size_t len, char *err,
                        size_t errlen)
{
    unsigned char *p = buf;
    while (len > 0) {
        unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned)len;
        int got = gzread(f, p, chunk);
        if (got < 0) {
            int zerr = 0;
            const char *msg = gzerror(f, &zerr);
            s_seterr(err, errlen, "%s: corrupt gzip data (%s)", path, msg);
            return zerr == Z_ERRNO ? PS_EIO : PS_EPROTO;
        }
        if (got == 0) {
            s_seterr(err, errlen, "%s: file is truncated", path);
            return PS_EPROTO;
        }
        p += got;
        len -= (size_t)got;
    }
    return 0;
}

static uint32_t s_be32(const unsigned char b[4])
{
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) |
           (uint32_t)b[3];
}

/* Opens path for gzread (which reads plain files too). Returns 0, PS_ENOENT,
 * PS_EIO or PS_ENOMEM with the reason in err. */
static int s_idx_open(const char *path, gzFile *f, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            s_seterr(err, errlen, "no such file %s", path);
            return PS_ENOENT;
        }
        s_seterr(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return PS_EIO;
    }
    *f = gzopen(path, "rb");
    if (!*f) {
        s_seterr(err, errlen, "cannot open %s: %s", path,
                 errno ? strerror(errno) : "out of memory");
        return errno ? PS_EIO : PS_ENOMEM;
    }
    return 0;
}

/* The IDX header: the magic, then one big-endian size per dimension, into
 * dims[] (1 past ndim) and *total bytes. Returns 0, or a PS_E* with the
 * reason in err. */
static int s_idx_header(gzFile f, const char *path, uint32_t expect_magic, int dims[3],
                        size_t *total, char *err, size_t errlen)
{
    unsigned char hdr[4];
    int rc = s_read_exact(f, path, hdr, 4, err, errlen);
    if (rc) {
        return rc;
    }
    uint32_t magic = s_be32(hdr);
    int ndim = (int)(magic & 0xff);
    if (magic != expect_magic || (magic >> 8) != 0x08 || ndim < 1 || ndim > 3) {
        s_seterr(err, errlen,
                 "%s: not the expected IDX file (magic 0x%08x, expected 0x%08x)", path,
                 (unsigned)magic, (unsigned)expect_magic);
        return PS_EPROTO;
    }
    *total = 1;
    for (int i = 0; i < 3; i++) {
        dims[i] = 1;
    }
    for (int i = 0; i < ndim; i++) {
        rc = s_read_exact(f, path, hdr, 4, err, errlen);
        if (rc) {
            return rc;
        }
        uint32_t d = s_be32(hdr);
        if (d == 0 || d > PS_DATA_MAX_BYTES / *total) {
            s_seterr(err, errlen, "%s: bad IDX size: dimension %d is %u", path, i,
                     (unsigned)d);
            return PS_EPROTO;
        }
        *total *= d;
        dims[i] = (int)d;
    }
    return 0;
}

/*
 * dims: [count, rows, cols] for 3-D files; unused trailing dims are 1
 * (labels: [count, 1, 1]).
 */
int ps_idx_read(const char *path, uint32_t expect_magic, uint8_t **data, int dims[3],
                char *err, size_t errlen)
{
    gzFile f = NULL;
    uint8_t *buf = NULL;
    unsigned char extra;
    size_t total = 0;
    *data = NULL;
    int rc = s_idx_open(path, &f, err, errlen);
    if (rc) {
        return rc;
    }
    rc = s_idx_header(f, path, expect_magic, dims, &total, err, errlen);
    if (rc) {
        goto fail;
    }
    buf = malloc(total);
    if (!buf) {
        s_seterr(err, errlen, "%s: out of memory", path);
        rc = PS_ENOMEM;
        goto fail;
    }
    rc = s_read_exact(f, path, buf, total, err, errlen);
    if (rc) {
        goto fail;
    }
    if (gzread(f, &extra, 1) != 0) {
        s_seterr(err, errlen, "%s: trailing bytes after the IDX data (sizes inconsistent)",
                 path);
        rc = PS_EPROTO;
        goto fail;
    }
    gzclose(f);
    *data = buf;
    return 0;
fail:
    free(buf);
    gzclose(f);
    return rc;
}

/* Opens dir/name.gz, or dir/name when only the uncompressed file exists. */
static int s_read_named(const char *dir, const char *name, uint32_t magic, uint8_t **data,
                        int dims[3], char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.gz", dir, name);
    int rc = ps_idx_read(path, magic, data, dims, err, errlen);
    if (rc != PS_ENOENT) {
        return rc;
    }
    char plain[4096];
    snprintf(plain, sizeof(plain), "%s/%s", dir, name);
    rc = ps_idx_read(plain, magic, data, dims, err, errlen);
    if (rc == PS_ENOENT) {
        s_seterr(err, errlen,
                 "no such file %s (install the Debian package dataset-fashion-mnist or "
                 "pass --data DIR)",
                 path);
    }
    return rc;
}

int ps_dataset_load(const char *dir, int train, ps_dataset_t *ds, char *err, size_t errlen)
{
    const char *split = train ? "train" : "t10k";
    char name[64];
    uint8_t *pix = NULL, *lab = NULL;
    int idims[3], ldims[3];
    int rc;

    memset(ds, 0, sizeof(*ds));
    if (!dir || !*dir) {
        dir = PS_DATA_DEFAULT_DIR;
    }
    snprintf(name, sizeof(name), "%s-images-idx3-ubyte", split);
    rc = s_read_named(dir, name, 0x00000803u, &pix, idims, err, errlen);
    if (rc) {
        goto fail;
    }
    snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", split);
    rc = s_read_named(dir, name, 0x00000801u, &lab, ldims, err, errlen);
    if (rc) {
        goto fail;
    }
    if (idims[0] != ldims[0]) {
        s_seterr(err, errlen, "%s: %s set has %d images but %d labels", dir, split,
                 idims[0], ldims[0]);
        rc = PS_EPROTO;
        goto fail;
    }
    if (idims[1] != 28 || idims[2] != 28) {
        s_seterr(err, errlen, "%s: %s images are %dx%d, expected 28x28", dir, split,
                 idims[1], idims[2]);
        rc = PS_EPROTO;
        goto fail;
    }
    for (int i = 0; i < ldims[0]; i++) {
        if (lab[i] >= 10) {
            s_seterr(err, errlen, "%s: %s label %d of sample %d is outside [0,10)", dir,
                     split, lab[i], i);
            rc = PS_EPROTO;
            goto fail;
        }
    }
    ds->n = idims[0];
    ds->rows = idims[1];
    ds->cols = idims[2];
    ds->pixels = pix;
    ds->labels = lab;
    return 0;
fail:
    free(pix);
    free(lab);
    ps_dataset_fini(ds);
    return rc;
}

void ps_dataset_fini(ps_dataset_t *ds)
{
    if (!ds) {
        return;
    }
    free(ds->pixels);
    free(ds->labels);
    memset(ds, 0, sizeof(*ds));
}

/* Fisher-Yates (Durstenfeld) over the identity, from the stream (seed, epoch). */
void ps_data_order(uint64_t seed, int epoch, uint32_t *order, int n)
{
    ps_rng_t r;
    ps_rng_init(&r, seed, 0x5EED0000ULL + (uint64_t)(int64_t)epoch);
    for (int i = 0; i < n; i++) {
        order[i] = (uint32_t)i;
    }
    for (int i = n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)ps_rng_below(&r, (uint64_t)i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

void ps_data_norm(float *a, float *c)
{
    *a = 1.0f / (255.0f * PS_DATA_STD);
    *c = -PS_DATA_MEAN / PS_DATA_STD;
}

/* The float of every grey level: (p/255 - mean)/std = p*a + c, folded as the
 * conversion always was, so the inputs stay bitwise what they were. */
static void s_normalise(const uint8_t *p, size_t n, float *x)
{
    float a, c;
    ps_data_norm(&a, &c);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)p[i] * a + c;
    }
}

void ps_data_images(const ps_dataset_t *ds, int first, int count, float *x)
{
    const size_t per = (size_t)ds->rows * ds->cols;
    s_normalise(ds->pixels + (size_t)first * per, (size_t)count * per, x);
}

void ps_data_gather(const ps_dataset_t *ds, const uint32_t *order, int first, int count,
                    float *x, uint8_t *y)
{
    const size_t per = (size_t)ds->rows * ds->cols;
    for (int i = 0; i < count; i++) {
        uint32_t s = order[first + i];
        s_normalise(ds->pixels + (size_t)s * per, per, x + (size_t)i * per);
        y[i] = ds->labels[s];
    }
}
