/*
 * common/safetensors.c - writing and strictly reading safetensors files.
 *
 * The writer builds the header with common/json (jansson). The reader
 * takes it token by token (common/jscan.h), in the shape this format has
 * (one object of tensor objects and one string map), and rejects anything
 * else at the first byte that does not fit, so a flipped byte shows as
 * PS_EPROTO rather than as wrong numbers, and no value it does not keep is
 * ever built: names and metadata stay in the header's own buffer, unescaped
 * in place. Every check is linear in the header (after sorts by offset and
 * by name), so a header of many tensors reads fast. It does not mmap: the
 * data section is read into one malloc'd (so aligned for every dtype)
 * buffer.
 */
#include "common/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/error.h"
#include "common/file.h"
#include "common/jscan.h"
#include "common/json.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this host is not"
#endif

typedef struct s_entry s_entry_t;

struct ps_safetensors {
    char *header;                            /* the header's text: names and metadata
                                                are unescaped in place in it */
    s_entry_t *entries;                      /* n tensors, in header order */
    s_entry_t **by_begin;                    /* the same n, by data offset (file order) */
    const ps_safetensors_tensor_t **by_name; /* the same n, by name */
    int n;
    const char **meta;                       /* n_meta metadata keys, sorted; each one's
                                                value follows its NUL in header */
    int n_meta;
    unsigned char *data;                     /* the data section (malloc'd, so aligned
                                                for every dtype); tensors point into it */
};

/* Shapes and offsets are below 2^62, so sums and products checked against
 * the file's size never overflow. */
#define S_MAX_INT (((int64_t)1 << 62) - 1)

/* The dtypes: their names in the header and their element sizes, by
 * ps_safetensors_dtype_t. */
static const struct {
    const char *name;
    size_t size;
} s_dtypes[] = {
    [PS_SAFETENSORS_F32] = {"F32", 4},
    [PS_SAFETENSORS_U32] = {"U32", 4},
    [PS_SAFETENSORS_U64] = {"U64", 8},
};

#define S_NDTYPES (sizeof s_dtypes / sizeof s_dtypes[0])

/* ---- writing ---- */

static size_t s_numel(const ps_safetensors_tensor_t *t)
{
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        n *= (size_t)t->shape[d];
    }
    return n;
}

/* Bytes of t's data (its dtype checked by the caller). */
static size_t s_bytes(const ps_safetensors_tensor_t *t)
{
    return s_numel(t) * s_dtypes[t->dtype].size;
}

/* Adds the "__metadata__" object of n_meta pairs to root. */
static int s_meta_json(json_t *root, const char *const *meta, int n_meta, const char *path,
                       char *why, size_t why_cap)
{
    json_t *m = json_object();
    if (!m || json_object_set_new(root, "__metadata__", m) != 0) {
        ps_error_format(why, why_cap, "%s: out of memory for the header", path);
        return PS_ENOMEM;
    }
    for (int i = 0; i < n_meta; i++) {
        const char *key = meta[2 * i], *val = meta[2 * i + 1];
        if (!key || !val) {
            ps_error_format(why, why_cap, "%s: metadata pair %d is NULL", path, i);
            return PS_EINVAL;
        }
        if (json_object_get(m, key)) {
            ps_error_format(why, why_cap, "%s: metadata key %d appears twice", path, i);
            return PS_EINVAL;
        }
        json_t *v = json_string(val);
        if (!v || json_object_set_new(m, key, v) != 0) {
            ps_error_format(why, why_cap, "%s: metadata pair %d is not UTF-8", path, i);
            return PS_EINVAL;
        }
    }
    return 0;
}

/* Adds tensor t's entry, its data at [*off, *off + bytes), to root. */
static int s_tensor_json(json_t *root, const ps_safetensors_tensor_t *t, int i, uint64_t *off,
                         const char *path, char *why, size_t why_cap)
{
    if (!t->name || !t->name[0] || !strcmp(t->name, "__metadata__") || t->ndim < 0 ||
        t->ndim > PS_SAFETENSORS_MAX_DIMS) {
        ps_error_format(why, why_cap, "%s: tensor %d has a bad name or rank", path, i);
        return PS_EINVAL;
    }
    if ((unsigned)t->dtype >= S_NDTYPES || *off % s_dtypes[t->dtype].size != 0) {
        ps_error_format(why, why_cap, "%s: tensor %d has a bad dtype or would start at byte "
                        "%llu, not a multiple of its element size", path, i,
                        (unsigned long long)*off);
        return PS_EINVAL;
    }
    if (json_object_get(root, t->name)) {
        ps_error_format(why, why_cap, "%s: tensor %d's name appears twice", path, i);
        return PS_EINVAL;
    }
    json_t *shape = json_array();
    for (int d = 0; shape && d < t->ndim; d++) {
        if (t->shape[d] < 0) {
            json_decref(shape);
            ps_error_format(why, why_cap, "%s: tensor %d has a negative size", path, i);
            return PS_EINVAL;
        }
        if (json_array_append_new(shape, json_integer(t->shape[d])) != 0) {
            json_decref(shape);
            shape = NULL;
        }
    }
    const uint64_t bytes = (uint64_t)s_bytes(t);
    if (bytes && !t->data) {
        json_decref(shape);
        ps_error_format(why, why_cap, "%s: tensor %d has no data", path, i);
        return PS_EINVAL;
    }
    json_t *e = shape ? json_pack("{s:s, s:o, s:[I, I]}", "dtype", s_dtypes[t->dtype].name,
                                  "shape", shape,
                                  "data_offsets", (json_int_t)*off, (json_int_t)(*off + bytes))
                      : NULL;
    if (!e) {
        ps_error_format(why, why_cap, "%s: out of memory for the header", path);
        return PS_ENOMEM;
    }
    if (json_object_set_new(root, t->name, e) != 0) {
        ps_error_format(why, why_cap, "%s: tensor %d's name is not UTF-8", path, i);
        return PS_EINVAL;
    }
    *off += bytes;
    return 0;
}

/* The header JSON for tensors and meta into out, padded with spaces to a
 * multiple of 8 bytes (so that the data section is aligned). */
static int s_header(ps_text_t *out, const ps_safetensors_tensor_t *tensors, int n,
                    const char *const *meta, int n_meta, const char *path, char *why,
                    size_t why_cap)
{
    json_t *root = json_object();
    int rc = root ? 0 : PS_ENOMEM;
    if (rc == 0 && n_meta > 0) {
        rc = s_meta_json(root, meta, n_meta, path, why, why_cap);
    }
    uint64_t off = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        rc = s_tensor_json(root, &tensors[i], i, &off, path, why, why_cap);
    }
    if (rc == 0) {
        ps_json_dump(root, PS_JSON_COMPACT, out);
        while (out->len % 8) {
            ps_text_append(out, " ", 1);
        }
    }
    json_decref(root);
    if (rc == 0 && out->oom) {
        rc = PS_ENOMEM;
    }
    if (rc == PS_ENOMEM) {
        ps_error_format(why, why_cap, "%s: out of memory for the header", path);
    }
    return rc;
}

int ps_safetensors_write(const char *path, const ps_safetensors_tensor_t *tensors, int n,
                         const char *const *meta, int n_meta, char *why, size_t why_cap)
{
    ps_text_t b = {0};
    if (!path || n < 0 || n_meta < 0 || (n > 0 && !tensors) || (n_meta > 0 && !meta)) {
        ps_error_format(why, why_cap, "%s: bad arguments", path ? path : "(null)");
        return PS_EINVAL;
    }
    int rc = s_header(&b, tensors, n, meta, n_meta, path, why, why_cap);
    /* the file: 8-byte header length, the header, each tensor's data */
    const void **parts = rc == 0 ? malloc((size_t)(n + 2) * sizeof *parts) : NULL;
    size_t *lens = parts ? malloc((size_t)(n + 2) * sizeof *lens) : NULL;
    if (rc == 0 && !lens) {
        ps_error_format(why, why_cap, "%s: out of memory for the file's parts", path);
        rc = PS_ENOMEM;
    }
    if (rc == 0) {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) {
            len8[i] = (unsigned char)((uint64_t)b.len >> (8 * i));
        }
        parts[0] = len8;
        lens[0] = sizeof len8;
        parts[1] = b.p;
        lens[1] = b.len;
        for (int i = 0; i < n; i++) {
            parts[2 + i] = tensors[i].data;
            lens[2 + i] = s_bytes(&tensors[i]);
        }
        rc = ps_file_write_atomic(path, parts, lens, n + 2, why, why_cap);
    }
    free(lens);
    free(parts);
    free(b.p);
    return rc;
}

/* ---- reading ---- */

/* A tensor with the span of the data section it claims. */
struct s_entry {
    uint64_t begin, end;
    ps_safetensors_tensor_t t;
};

/* The array a of *cap elements of size bytes, grown when it holds no more
 * than n: the array (maybe moved; large blocks move by mremap, without a
 * copy), or NULL when out of memory (a is kept). */
static void *s_grow(void *a, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) {
        return a;
    }
    const size_t want = *cap ? 2 * *cap : 64;
    void *p = realloc(a, want * size);
    if (p) {
        *cap = want;
    }
    return p;
}

/* The reason a value is wrong (a tensor's field, a metadata value): the
 * scanner's own when its syntax is, else what. */
static const char *s_bad(const ps_jscan_t *js, int rc, const char *what)
{
    return rc == PS_EPROTO ? js->why : what;
}

/* The shape array [d, ...] into t. */
static const char *s_shape(ps_jscan_t *js, ps_safetensors_tensor_t *t)
{
    const char *bad = "has a shape that is not a list of at most 8 dimensions";
    if (ps_jscan_peek(js) != '[') {
        return bad;
    }
    int more = ps_jscan_open(js, '[');
    for (t->ndim = 0; more > 0; t->ndim++) {
        if (t->ndim == PS_SAFETENSORS_MAX_DIMS) {
            return bad;
        }
        const int rc = ps_jscan_uint(js, S_MAX_INT, &t->shape[t->ndim]);
        if (rc != 0) {
            return s_bad(js, rc, "has a size that is not an integer in [0, 2^62)");
        }
        more = ps_jscan_next(js, ']');
    }
    return more < 0 ? js->why : NULL;
}

/* The data_offsets array [begin, end] into e. */
static const char *s_offsets(ps_jscan_t *js, s_entry_t *e)
{
    const char *bad = "has data_offsets that are not two integers in [0, 2^62)";
    int64_t v[2];
    int rc = ps_jscan_peek(js) == '[' ? ps_jscan_open(js, '[') : PS_EINVAL;
    for (int i = 0; i < 2 && rc > 0; i++) {
        rc = ps_jscan_uint(js, S_MAX_INT, &v[i]);
        rc = rc == 0 ? ps_jscan_next(js, ']') : rc;
        if (rc == 0 && i == 0) {
            rc = PS_EINVAL; /* closed after one */
        }
    }
    if (rc != 0) {
        return s_bad(js, rc, bad);
    }
    e->begin = (uint64_t)v[0];
    e->end = (uint64_t)v[1];
    return NULL;
}

/* What is wrong with the tensor entry {"dtype": "F32", "shape": [...],
 * "data_offsets": [begin, end]} (keys in any order) of name, or NULL when
 * it is right: then e has its name, dtype, shape and span. */
static const char *s_entry(ps_jscan_t *js, const char *name, s_entry_t *e)
{
    if (!name[0]) {
        return "has an empty name";
    }
    if (ps_jscan_peek(js) != '{') {
        return "is not an object";
    }
    *e = (s_entry_t){.t.name = name};
    unsigned seen = 0; /* dtype 1, shape 2, data_offsets 4 */
    for (int more = ps_jscan_open(js, '{'); more != 0; more = ps_jscan_next(js, '}')) {
        const char *key, *bad = NULL;
        if (more < 0 || ps_jscan_string(js, &key) != 0 || ps_jscan_take(js, ':') != 0) {
            return js->why;
        }
        const unsigned bit = !strcmp(key, "dtype")          ? 1
                             : !strcmp(key, "shape")        ? 2
                             : !strcmp(key, "data_offsets") ? 4
                                                            : 0;
        if (!bit) {
            return "has an unknown key beside dtype, shape and data_offsets";
        }
        if (seen & bit) {
            return "has a duplicate object key";
        }
        seen |= bit;
        if (bit == 1) {
            const char *dtype = NULL;
            if (ps_jscan_peek(js) == '"' && ps_jscan_string(js, &dtype) != 0) {
                return js->why;
            }
            size_t k = 0;
            while (k < S_NDTYPES && !(dtype && !strcmp(dtype, s_dtypes[k].name))) {
                k++;
            }
            bad = k == S_NDTYPES ? "has a dtype other than F32, U32 and U64" : NULL;
            e->t.dtype = (ps_safetensors_dtype_t)k;
        } else {
            bad = bit == 2 ? s_shape(js, &e->t) : s_offsets(js, e);
        }
        if (bad) {
            return bad;
        }
    }
    return seen == 7 ? NULL : "lacks dtype, shape or data_offsets";
}

/* The "__metadata__" object of string values: its keys into st->meta (each
 * one's value follows its NUL in the text). */
static int s_meta(ps_safetensors_t *st, ps_jscan_t *js, size_t *cap, const char *path,
                  char *why, size_t why_cap)
{
    if (ps_jscan_peek(js) != '{') {
        ps_error_format(why, why_cap, "%s: __metadata__ is not an object", path);
        return PS_EPROTO;
    }
    char q[96];
    for (int more = ps_jscan_open(js, '{'); more != 0; more = ps_jscan_next(js, '}')) {
        const char *key, *val;
        if (more < 0 || ps_jscan_string(js, &key) != 0 || ps_jscan_take(js, ':') != 0) {
            ps_error_format(why, why_cap, "%s: bad header %s", path, js->why);
            return PS_EPROTO;
        }
        if (ps_jscan_peek(js) != '"' || ps_jscan_string(js, &val) != 0) {
            ps_error_format(why, why_cap, "%s: __metadata__ value %s %s", path,
                            ps_json_quote(key, q, sizeof q),
                            ps_jscan_peek(js) == '"' ? js->why : "is not a string");
            return PS_EPROTO;
        }
        const char **m = s_grow(st->meta, cap, (size_t)st->n_meta, sizeof *m);
        if (!m) {
            ps_error_format(why, why_cap, "%s: out of memory for its metadata", path);
            return PS_ENOMEM;
        }
        st->meta = m;
        m[st->n_meta++] = key;
    }
    return 0;
}

/* The header's tensors into st->entries, in header order, and its
 * metadata into st->meta: one pass, no tree (common/jscan.h). Returns 0,
 * PS_EPROTO or PS_ENOMEM with the reason. */
static int s_parse(ps_safetensors_t *st, ps_jscan_t *js, const char *path, char *why,
                   size_t why_cap)
{
    size_t cap = 0, meta_cap = 0;
    int more = ps_jscan_peek(js) == '{' ? ps_jscan_open(js, '{') : PS_EINVAL;
    if (more == PS_EINVAL) {
        ps_error_format(why, why_cap, "%s: bad header: not a JSON object", path);
        return PS_EPROTO;
    }
    int meta_seen = 0, rc = 0;
    char q[96];
    for (; more > 0 && rc == 0; more = ps_jscan_next(js, '}')) {
        const char *key;
        if (ps_jscan_string(js, &key) != 0 || ps_jscan_take(js, ':') != 0) {
            more = PS_EPROTO;
            break;
        }
        if (!strcmp(key, "__metadata__")) {
            if (meta_seen++) {
                ps_error_format(why, why_cap, "%s: bad header: duplicate object key "
                                "\"__metadata__\"", path);
                return PS_EPROTO;
            }
            rc = s_meta(st, js, &meta_cap, path, why, why_cap);
            continue;
        }
        s_entry_t *e = s_grow(st->entries, &cap, (size_t)st->n, sizeof *e);
        if (!e) {
            ps_error_format(why, why_cap, "%s: out of memory for %d tensors", path, st->n);
            return PS_ENOMEM;
        }
        st->entries = e;
        const char *bad = s_entry(js, key, &e[st->n]);
        if (bad) {
            ps_error_format(why, why_cap, "%s: tensor %s %s", path,
                            ps_json_quote(key, q, sizeof q), bad);
            return PS_EPROTO;
        }
        st->n++;
    }
    if (rc == 0 && (more < 0 || ps_jscan_end(js) != 0)) {
        ps_error_format(why, why_cap, "%s: bad header %s", path, js->why);
        rc = PS_EPROTO;
    }
    return rc;
}

static int s_by_begin(const void *a, const void *b)
{
    const s_entry_t *const *x = a, *const *y = b;
    return (*x)->begin < (*y)->begin ? -1 : (*x)->begin > (*y)->begin;
}

static int s_by_name(const void *a, const void *b)
{
    const ps_safetensors_tensor_t *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int s_by_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts st's tensors by name and its metadata keys; the first name or key
 * that appears twice, or NULL. */
static const char *s_repeated(ps_safetensors_t *st)
{
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, s_by_name);
    for (int i = 1; i < st->n; i++) {
        if (!strcmp(st->by_name[i - 1]->name, st->by_name[i]->name)) {
            return st->by_name[i]->name;
        }
    }
    if (st->n_meta) {
        qsort(st->meta, (size_t)st->n_meta, sizeof *st->meta, s_by_key);
    }
    for (int i = 1; i < st->n_meta; i++) {
        if (!strcmp(st->meta[i - 1], st->meta[i])) {
            return st->meta[i];
        }
    }
    return NULL;
}

/* The parsed tensors over the dlen data bytes: each one's shape matching
 * its bytes, the spans contiguous from 0 to the end (so none overlap or
 * leave a gap), no name or metadata key twice. Linear after the sorts, for
 * headers of any size. */
static int s_tensors(ps_safetensors_t *st, uint64_t dlen, const char *path, char *why,
                     size_t why_cap)
{
    const size_t n = (size_t)st->n;
    st->by_begin = malloc((n ? n : 1) * sizeof *st->by_begin);
    st->by_name = malloc((n ? n : 1) * sizeof *st->by_name);
    if (!st->by_begin || !st->by_name) {
        ps_error_format(why, why_cap, "%s: out of memory for %zu tensors", path, n);
        return PS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        st->by_begin[i] = &st->entries[i];
        st->by_name[i] = &st->entries[i].t;
    }
    char q[96];
    const char *twice = s_repeated(st);
    if (twice) {
        ps_error_format(why, why_cap, "%s: bad header: duplicate object key %s", path,
                        ps_json_quote(twice, q, sizeof q));
        return PS_EPROTO;
    }
    qsort(st->by_begin, n, sizeof *st->by_begin, s_by_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        s_entry_t *e = st->by_begin[i];
        ps_safetensors_tensor_t *t = &e->t;
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            /* each dim < 2^62; stop before the product overflows */
            if (t->shape[d] && numel > (dlen + 1) / (uint64_t)t->shape[d]) {
                numel = dlen + 1;
                break;
            }
            numel *= (uint64_t)t->shape[d];
        }
        const size_t esize = s_dtypes[t->dtype].size;
        ps_json_quote(t->name, q, sizeof q);
        if (e->begin % esize != 0) {
            ps_error_format(why, why_cap, "%s: tensor %s starts at byte %llu, not a multiple of "
                            "its %zu-byte elements", path, q, (unsigned long long)e->begin,
                            esize);
            return PS_EPROTO;
        }
        if (e->begin != at || e->end < e->begin || e->end > dlen) {
            ps_error_format(why, why_cap,
                            "%s: tensor %s data_offsets [%llu,%llu] are not contiguous after "
                            "%llu within %llu data bytes",
                            path, q, (unsigned long long)e->begin, (unsigned long long)e->end,
                            (unsigned long long)at, (unsigned long long)dlen);
            return PS_EPROTO;
        }
        if (numel > dlen || numel * esize != e->end - e->begin) {
            ps_error_format(why, why_cap, "%s: tensor %s shape does not match its %llu bytes",
                            path, q, (unsigned long long)(e->end - e->begin));
            return PS_EPROTO;
        }
        t->numel = (size_t)numel;
        /* in place: the buffer is malloc's, so aligned for every dtype, and
         * the offset a multiple of the element size */
        const unsigned char *p = st->data + e->begin;
        if (t->dtype == PS_SAFETENSORS_U64) {
            t->u64 = (const uint64_t *)(const void *)p;
        } else if (t->dtype == PS_SAFETENSORS_U32) {
            t->u32 = (const uint32_t *)(const void *)p;
        } else {
            t->data = (const float *)(const void *)p;
        }
        at = e->end;
    }
    if (at != dlen) {
        ps_error_format(why, why_cap, "%s: %llu data bytes but the tensors cover %llu", path,
                        (unsigned long long)dlen, (unsigned long long)at);
        return PS_EPROTO;
    }
    return 0;
}

int ps_safetensors_read(const char *path, ps_safetensors_t **st_p, char *why, size_t why_cap)
{
    return ps_safetensors_read_sum(path, st_p, NULL, NULL, why, why_cap);
}

int ps_safetensors_read_sum(const char *path, ps_safetensors_t **st_p, uint64_t *bytes,
                            uint32_t *crc, char *why, size_t why_cap)
{
    ps_safetensors_t *st = NULL;
    int rc = PS_EPROTO;
    uint64_t size, hlen = 0;
    *st_p = NULL;
    int fd = ps_file_open_read(path, &size, why, why_cap);
    if (fd < 0) {
        return fd;
    }
    unsigned char len8[8];
    if (size < 8 || ps_file_read_all(fd, len8, 8) < 0) {
        ps_error_format(why, why_cap, "%s: truncated: %llu bytes, no header length", path,
                        (unsigned long long)size);
        goto fail;
    }
    for (int i = 7; i >= 0; i--) {
        hlen = hlen << 8 | len8[i];
    }
    if (hlen < 2 || hlen > PS_SAFETENSORS_MAX_HEADER || hlen > size - 8) {
        ps_error_format(why, why_cap,
                        "%s: header length %llu is impossible for a file of %llu bytes",
                        path, (unsigned long long)hlen, (unsigned long long)size);
        goto fail;
    }
    uint64_t dlen = size - 8 - hlen;
    st = calloc(1, sizeof *st);
    if (st) {
        st->header = malloc(hlen);
        st->data = malloc(dlen ? dlen : 1);
    }
    if (!st || !st->header || !st->data) {
        ps_error_format(why, why_cap, "%s: out of memory for %llu bytes", path,
                        (unsigned long long)size);
        rc = PS_ENOMEM;
        goto fail;
    }
    if (ps_file_read_all(fd, st->header, hlen) < 0 ||
        ps_file_read_all(fd, st->data, dlen) < 0) {
        ps_error_format(why, why_cap, "%s: read failed (file shrank?)", path);
        rc = PS_EIO;
        goto fail;
    }
    if (crc) { /* of the bytes read, so of exactly what is used; before the
                * header's strings are unescaped in place */
        uLong c = crc32(0L, len8, 8);
        c = crc32_z(c, (const Bytef *)st->header, (z_size_t)hlen);
        *crc = (uint32_t)crc32_z(c, (const Bytef *)st->data, (z_size_t)dlen);
    }
    ps_jscan_t js;
    ps_jscan_init(&js, st->header, hlen, 8);
    rc = s_parse(st, &js, path, why, why_cap);
    if (rc == 0) {
        rc = s_tensors(st, dlen, path, why, why_cap);
    }
    if (rc != 0) {
        goto fail;
    }
    if (bytes) {
        *bytes = size;
    }
    close(fd);
    *st_p = st;
    return 0;
fail:
    ps_safetensors_destroy(&st);
    close(fd);
    return rc;
}

void ps_safetensors_destroy(ps_safetensors_t **st_p)
{
    ps_safetensors_t *st = st_p ? *st_p : NULL;
    if (!st) {
        return;
    }
    free(st->header);
    free(st->entries);
    free(st->by_begin);
    free(st->by_name);
    free(st->meta);
    free(st->data);
    free(st);
    *st_p = NULL;
}

int ps_safetensors_count(const ps_safetensors_t *st)
{
    return st->n;
}

const ps_safetensors_tensor_t *ps_safetensors_at(const ps_safetensors_t *st, int i)
{
    return i >= 0 && i < st->n ? &st->by_begin[i]->t : NULL;
}

const ps_safetensors_tensor_t *ps_safetensors_find_dtype(const ps_safetensors_t *st,
                                                         const char *name,
                                                         ps_safetensors_dtype_t dtype)
{
    const ps_safetensors_tensor_t key = {.name = name}, *kp = &key;
    const ps_safetensors_tensor_t *const *hit =
        bsearch(&kp, st->by_name, (size_t)st->n, sizeof *st->by_name, s_by_name);
    return hit && (*hit)->dtype == dtype ? *hit : NULL;
}

const ps_safetensors_tensor_t *ps_safetensors_find(const ps_safetensors_t *st, const char *name)
{
    return ps_safetensors_find_dtype(st, name, PS_SAFETENSORS_F32);
}

const char *ps_safetensors_meta(const ps_safetensors_t *st, const char *key)
{
    const char *const *hit =
        st->n_meta ? bsearch(&key, st->meta, (size_t)st->n_meta, sizeof *st->meta, s_by_key)
                   : NULL;
    return hit ? *hit + strlen(*hit) + 1 : NULL; /* the value follows its key */
}
