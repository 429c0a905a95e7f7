/*
 * common/safetensors.c - writing and strictly reading safetensors files.
 *
 * The header goes through common/json (jansson). The reader then accepts
 * only what this format needs (one object of tensor objects and one string
 * map) and rejects anything else, so a flipped byte shows as PS_EPROTO
 * rather than as wrong numbers. Every check is linear in the header (after
 * one sort by offset), so a header of many tensors reads fast. It does not
 * mmap: the data section is read into one malloc'd (so aligned for every dtype)
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
#include "common/json.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this host is not"
#endif

struct ps_safetensors {
    json_t *header;                           /* the parsed header: names and
                                                 metadata borrow from it */
    const json_t *meta;                       /* its "__metadata__", or NULL */
    ps_safetensors_tensor_t *tensors;         /* n, sorted by data offset */
    const ps_safetensors_tensor_t **by_name;  /* the same n, sorted by name */
    int n;
    unsigned char *data;                      /* the data section (malloc'd, so aligned
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
typedef struct {
    uint64_t begin, end;
    ps_safetensors_tensor_t t;
} s_entry_t;

/* What is wrong with a tensor's entry {"dtype": "F32", "shape": [...],
 * "data_offsets": [begin, end]} (keys in any order), or NULL when it is
 * right: then e has its name, dtype, shape and span. */
static const char *s_entry(const char *name, const json_t *v, s_entry_t *e)
{
    if (!json_is_object(v)) {
        return "is not an object";
    }
    const json_t *dtype = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
    const json_t *off = json_object_get(v, "data_offsets");
    if (!dtype || !shape || !off) {
        return "lacks dtype, shape or data_offsets";
    }
    if (json_object_size(v) != 3) {
        return "has an unknown key beside dtype, shape and data_offsets";
    }
    size_t k = 0;
    while (k < S_NDTYPES && !(json_is_string(dtype) &&
                             !strcmp(json_string_value(dtype), s_dtypes[k].name))) {
        k++;
    }
    if (k == S_NDTYPES) {
        return "has a dtype other than F32, U32 and U64";
    }
    if (!json_is_array(shape) || json_array_size(shape) > PS_SAFETENSORS_MAX_DIMS) {
        return "has a shape that is not a list of at most 8 dimensions";
    }
    e->t = (ps_safetensors_tensor_t){.name = name, .ndim = (int)json_array_size(shape),
                                     .dtype = (ps_safetensors_dtype_t)k};
    for (int d = 0; d < e->t.ndim; d++) {
        if (ps_json_int(json_array_get(shape, (size_t)d), 0, S_MAX_INT, &e->t.shape[d]) != 0) {
            return "has a size that is not an integer in [0, 2^62)";
        }
    }
    int64_t begin, end;
    if (!json_is_array(off) || json_array_size(off) != 2 ||
        ps_json_int(json_array_get(off, 0), 0, S_MAX_INT, &begin) != 0 ||
        ps_json_int(json_array_get(off, 1), 0, S_MAX_INT, &end) != 0) {
        return "has data_offsets that are not two integers in [0, 2^62)";
    }
    e->begin = (uint64_t)begin;
    e->end = (uint64_t)end;
    return NULL;
}

static int s_by_begin(const void *a, const void *b)
{
    const s_entry_t *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int s_by_name(const void *a, const void *b)
{
    const ps_safetensors_tensor_t *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* The header's tensors into e[0 .. *n), in file order, and its metadata
 * into st->meta. Returns 0 or PS_EPROTO with the reason. */
static int s_entries(ps_safetensors_t *st, s_entry_t *e, int *n, const char *path, char *why,
                     size_t why_cap)
{
    const char *key;
    json_t *v;
    char q[96];
    *n = 0;
    json_object_foreach(st->header, key, v) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) {
                ps_error_format(why, why_cap, "%s: __metadata__ is not an object", path);
                return PS_EPROTO;
            }
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    ps_error_format(why, why_cap, "%s: __metadata__ value %s is not a string",
                                    path, ps_json_quote(mk, q, sizeof q));
                    return PS_EPROTO;
                }
            }
            st->meta = v;
            continue;
        }
        const char *bad = key[0] ? s_entry(key, v, &e[*n]) : "has an empty name";
        if (bad) {
            ps_error_format(why, why_cap, "%s: tensor %s %s", path, ps_json_quote(key, q, sizeof q),
                            bad);
            return PS_EPROTO;
        }
        (*n)++;
    }
    return 0;
}

/* The tensors of the parsed header over the dlen data bytes: each one's
 * shape matching its bytes, the spans contiguous from 0 to the end (so none
 * overlap or leave a gap). Linear after a sort, for headers of any size. */
static int s_tensors(ps_safetensors_t *st, uint64_t dlen, const char *path, char *why,
                     size_t why_cap)
{
    const size_t cap = json_object_size(st->header);
    s_entry_t *e = malloc((cap ? cap : 1) * sizeof *e);
    st->tensors = malloc((cap ? cap : 1) * sizeof *st->tensors);
    st->by_name = malloc((cap ? cap : 1) * sizeof *st->by_name);
    if (!e || !st->tensors || !st->by_name) {
        free(e);
        ps_error_format(why, why_cap, "%s: out of memory for %zu tensors", path, cap);
        return PS_ENOMEM;
    }
    int n, rc = s_entries(st, e, &n, path, why, why_cap);
    if (rc == 0) {
        qsort(e, (size_t)n, sizeof *e, s_by_begin);
    }
    char q[96];
    uint64_t at = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        ps_safetensors_tensor_t *t = &e[i].t;
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
        if (e[i].begin % esize != 0) {
            ps_error_format(why, why_cap, "%s: tensor %s starts at byte %llu, not a multiple of "
                            "its %zu-byte elements", path, q, (unsigned long long)e[i].begin,
                            esize);
            rc = PS_EPROTO;
        } else if (e[i].begin != at || e[i].end < e[i].begin || e[i].end > dlen) {
            ps_error_format(why, why_cap,
                            "%s: tensor %s data_offsets [%llu,%llu] are not contiguous after "
                            "%llu within %llu data bytes",
                            path, q, (unsigned long long)e[i].begin,
                            (unsigned long long)e[i].end, (unsigned long long)at,
                            (unsigned long long)dlen);
            rc = PS_EPROTO;
        } else if (numel > dlen || numel * esize != e[i].end - e[i].begin) {
            ps_error_format(why, why_cap, "%s: tensor %s shape does not match its %llu bytes",
                            path, q, (unsigned long long)(e[i].end - e[i].begin));
            rc = PS_EPROTO;
        } else {
            t->numel = (size_t)numel;
            /* in place: the buffer is malloc's, so aligned for every dtype,
             * and the offset a multiple of the element size */
            const unsigned char *p = st->data + e[i].begin;
            if (t->dtype == PS_SAFETENSORS_U64) {
                t->u64 = (const uint64_t *)(const void *)p;
            } else if (t->dtype == PS_SAFETENSORS_U32) {
                t->u32 = (const uint32_t *)(const void *)p;
            } else {
                t->data = (const float *)(const void *)p;
            }
            st->tensors[i] = *t;
            st->by_name[i] = &st->tensors[i];
            at = e[i].end;
        }
    }
    free(e);
    if (rc == 0 && at != dlen) {
        ps_error_format(why, why_cap, "%s: %llu data bytes but the tensors cover %llu", path,
                        (unsigned long long)dlen, (unsigned long long)at);
        rc = PS_EPROTO;
    }
    if (rc == 0) {
        st->n = n;
        qsort(st->by_name, (size_t)n, sizeof *st->by_name, s_by_name);
    }
    return rc;
}

int ps_safetensors_read(const char *path, ps_safetensors_t **st_p, char *why, size_t why_cap)
{
    return ps_safetensors_read_sum(path, st_p, NULL, NULL, why, why_cap);
}

int ps_safetensors_read_sum(const char *path, ps_safetensors_t **st_p, uint64_t *bytes,
                            uint32_t *crc, char *why, size_t why_cap)
{
    ps_safetensors_t *st = NULL;
    char *hdr = NULL;
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
    hdr = malloc(hlen);
    if (st) {
        st->data = malloc(dlen ? dlen : 1);
    }
    if (!st || !hdr || !st->data) {
        ps_error_format(why, why_cap, "%s: out of memory for %llu bytes", path,
                        (unsigned long long)size);
        rc = PS_ENOMEM;
        goto fail;
    }
    if (ps_file_read_all(fd, hdr, hlen) < 0 || ps_file_read_all(fd, st->data, dlen) < 0) {
        ps_error_format(why, why_cap, "%s: read failed (file shrank?)", path);
        rc = PS_EIO;
        goto fail;
    }
    char reason[256];
    rc = ps_json_parse(hdr, hlen, 8, &st->header, reason, sizeof reason);
    if (rc != 0) {
        ps_error_format(why, why_cap, "%s: bad header %s", path, reason);
        goto fail;
    }
    if (!json_is_object(st->header)) {
        ps_error_format(why, why_cap, "%s: bad header: not a JSON object", path);
        rc = PS_EPROTO;
        goto fail;
    }
    rc = s_tensors(st, dlen, path, why, why_cap);
    if (rc != 0) {
        goto fail;
    }
    if (bytes) {
        *bytes = size;
    }
    if (crc) { /* of the bytes read, so of exactly what is used */
        uLong c = crc32(0L, len8, 8);
        c = crc32_z(c, (const Bytef *)hdr, (z_size_t)hlen);
        *crc = (uint32_t)crc32_z(c, (const Bytef *)st->data, (z_size_t)dlen);
    }
    free(hdr);
    close(fd);
    *st_p = st;
    return 0;
fail:
    free(hdr);
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
    json_decref(st->header);
    free(st->tensors);
    free(st->by_name);
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
    return i >= 0 && i < st->n ? &st->tensors[i] : NULL;
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
    return json_string_value(json_object_get(st->meta, key));
}
