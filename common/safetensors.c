/*
 * common/safetensors.c - writing and strictly reading safetensors files.
 *
 * The reader parses only the JSON this format needs (one object of tensor
 * objects and one string map) and rejects anything else, so a flipped byte
 * shows as PS_EPROTO rather than as wrong numbers. It does not mmap: the
 * data section is read into one malloc'd (so float-aligned) buffer.
 */
#include "common/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this host is not"
#endif

struct ps_safetensors {
    ps_safetensors_tensor_t *tensors; /* n, sorted by data offset */
    int n;
    char **meta;                      /* 2 * n_meta strings: key, value */
    int n_meta;
    float *data;                      /* the data section; tensors point into it */
};

/* ---- writing ---- */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} s_buf_t;

static void s_put(s_buf_t *b, const char *s, size_t n)
{
    if (b->oom) {
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void s_putf(s_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_putf(s_buf_t *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    s_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal: quotes, backslashes and control bytes escaped. */
static void s_put_str(s_buf_t *b, const char *s)
{
    s_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            s_put(b, esc, 2);
        } else if (c < 0x20) {
            s_putf(b, "\\u%04x", c);
        } else {
            s_put(b, s, 1);
        }
    }
    s_put(b, "\"", 1);
}

static size_t s_numel(const ps_safetensors_tensor_t *t)
{
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        n *= (size_t)t->shape[d];
    }
    return n;
}

/* The header JSON for tensors and meta, padded with spaces to 8 bytes. */
static int s_header(s_buf_t *b, const ps_safetensors_tensor_t *tensors, int n,
                    const char *const *meta, int n_meta, const char *path, char *why,
                    size_t why_cap)
{
    uint64_t off = 0;
    s_put(b, "{", 1);
    if (n_meta > 0) {
        s_put(b, "\"__metadata__\":{", 16);
        for (int i = 0; i < n_meta; i++) {
            if (!meta[2 * i] || !meta[2 * i + 1]) {
                ps_error_format(why, why_cap, "%s: metadata pair %d is NULL", path, i);
                return PS_EINVAL;
            }
            s_put(b, i ? "," : "", i ? 1 : 0);
            s_put_str(b, meta[2 * i]);
            s_put(b, ":", 1);
            s_put_str(b, meta[2 * i + 1]);
        }
        s_put(b, "}", 1);
    }
    for (int i = 0; i < n; i++) {
        const ps_safetensors_tensor_t *t = &tensors[i];
        if (!t->name || !t->name[0] || !strcmp(t->name, "__metadata__") || t->ndim < 0 ||
            t->ndim > PS_SAFETENSORS_MAX_DIMS) {
            ps_error_format(why, why_cap, "%s: tensor %d has a bad name or rank", path, i);
            return PS_EINVAL;
        }
        for (int j = 0; j < i; j++) {
            if (!strcmp(tensors[j].name, t->name)) {
                ps_error_format(why, why_cap, "%s: tensor name '%s' appears twice", path,
                                t->name);
                return PS_EINVAL;
            }
        }
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) {
                ps_error_format(why, why_cap, "%s: tensor '%s' has a negative size", path,
                                t->name);
                return PS_EINVAL;
            }
        }
        uint64_t bytes = (uint64_t)s_numel(t) * sizeof(float);
        if (bytes && !t->data) {
            ps_error_format(why, why_cap, "%s: tensor '%s' has no data", path, t->name);
            return PS_EINVAL;
        }
        s_put(b, (i || n_meta > 0) ? "," : "", (i || n_meta > 0) ? 1 : 0);
        s_put_str(b, t->name);
        s_put(b, ":{\"dtype\":\"F32\",\"shape\":[", 25);
        for (int d = 0; d < t->ndim; d++) {
            s_putf(b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        }
        s_putf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
               (unsigned long long)(off + bytes));
        off += bytes;
    }
    s_put(b, "}", 1);
    while (b->len % 8) {
        s_put(b, " ", 1);
    }
    if (b->oom) {
        ps_error_format(why, why_cap, "%s: out of memory for the header", path);
        return PS_ENOMEM;
    }
    return 0;
}

int ps_safetensors_write(const char *path, const ps_safetensors_tensor_t *tensors, int n,
                         const char *const *meta, int n_meta, char *why, size_t why_cap)
{
    s_buf_t b = {0};
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
            lens[2 + i] = s_numel(&tensors[i]) * sizeof(float);
        }
        rc = ps_file_write_atomic(path, parts, lens, n + 2, why, why_cap);
    }
    free(lens);
    free(parts);
    free(b.p);
    return rc;
}

/* ---- reading: a strict parser of exactly this format's JSON ---- */

typedef struct {
    const char *p, *end;
    const char *err; /* the first error, static text */
} s_json_t;

static void s_ws(s_json_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) {
        j->p++;
    }
}

static int s_fail(s_json_t *j, const char *err)
{
    if (!j->err) {
        j->err = err;
    }
    return -1;
}

/* Consumes c (after whitespace) or fails. */
static int s_expect(s_json_t *j, char c, const char *err)
{
    s_ws(j);
    if (j->p >= j->end || *j->p != c) {
        return s_fail(j, err);
    }
    j->p++;
    return 0;
}

/* Whether the next byte (after whitespace) is c; consumes it if so. */
static int s_accept(s_json_t *j, char c)
{
    s_ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

static int s_hex4(s_json_t *j, unsigned *v)
{
    *v = 0;
    if (j->end - j->p < 4) {
        return s_fail(j, "truncated \\u escape");
    }
    for (int i = 0; i < 4; i++) {
        char c = *j->p++;
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d > 15) {
            return s_fail(j, "bad \\u escape");
        }
        *v = *v * 16 + d;
    }
    return 0;
}

/* A string literal into a new NUL-terminated string (*out; caller frees).
 * Escapes are decoded; raw control bytes and NULs are refused. */
static int s_string(s_json_t *j, char **out)
{
    *out = NULL;
    if (s_expect(j, '"', "expected a string") < 0) {
        return -1;
    }
    /* decoded text is never longer than its literal */
    const char *q = j->p;
    while (q < j->end && *q != '"') {
        q += (*q == '\\' && q + 1 < j->end) ? 2 : 1;
    }
    if (q >= j->end) {
        return s_fail(j, "unterminated string");
    }
    char *s = malloc((size_t)(q - j->p) + 1), *w = s;
    if (!s) {
        return s_fail(j, "out of memory");
    }
    while (*j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        if (c < 0x20) {
            free(s);
            return s_fail(j, "control byte in a string");
        }
        if (c != '\\') {
            *w++ = (char)c;
            continue;
        }
        char e = *j->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            *w++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        unsigned u, lo;
        if (e != 'u' || s_hex4(j, &u) < 0) {
            free(s);
            return s_fail(j, "bad escape in a string");
        }
        if (u >= 0xD800 && u < 0xDC00) { /* a surrogate pair: \uD8xx\uDCxx */
            if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') {
                free(s);
                return s_fail(j, "lone surrogate in a string");
            }
            j->p += 2;
            if (s_hex4(j, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF) {
                free(s);
                return s_fail(j, "bad surrogate pair in a string");
            }
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        } else if ((u >= 0xDC00 && u <= 0xDFFF) || u == 0) {
            free(s);
            return s_fail(j, "bad \\u escape in a string");
        }
        /* UTF-8; a \uXXXX literal (6+ bytes) is longer than its encoding (<= 4) */
        if (u < 0x80) {
            *w++ = (char)u;
        } else if (u < 0x800) {
            *w++ = (char)(0xC0 | (u >> 6));
            *w++ = (char)(0x80 | (u & 0x3F));
        } else if (u < 0x10000) {
            *w++ = (char)(0xE0 | (u >> 12));
            *w++ = (char)(0x80 | ((u >> 6) & 0x3F));
            *w++ = (char)(0x80 | (u & 0x3F));
        } else {
            *w++ = (char)(0xF0 | (u >> 18));
            *w++ = (char)(0x80 | ((u >> 12) & 0x3F));
            *w++ = (char)(0x80 | ((u >> 6) & 0x3F));
            *w++ = (char)(0x80 | (u & 0x3F));
        }
    }
    j->p++;
    *w = '\0';
    *out = s;
    return 0;
}

/* A non-negative integer without sign, fraction or leading zeros, < 2^62. */
static int s_uint(s_json_t *j, uint64_t *v)
{
    s_ws(j);
    *v = 0;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') {
        return s_fail(j, "expected a non-negative integer");
    }
    if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9') {
        return s_fail(j, "leading zero in a number");
    }
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (*v > ((uint64_t)1 << 62) / 10) {
            return s_fail(j, "number too large");
        }
        *v = *v * 10 + (uint64_t)(*j->p++ - '0');
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')) {
        return s_fail(j, "expected an integer");
    }
    return 0;
}

/* A tensor object: {"dtype":"F32","shape":[...],"data_offsets":[b,e]} in any
 * key order, each key exactly once. off[0..1] get the offsets. */
static int s_tensor(s_json_t *j, ps_safetensors_tensor_t *t, uint64_t off[2])
{
    int seen_dtype = 0, seen_shape = 0, seen_off = 0;
    if (s_expect(j, '{', "a tensor entry is not an object") < 0) {
        return -1;
    }
    do {
        char *key;
        if (s_string(j, &key) < 0 || s_expect(j, ':', "expected ':'") < 0) {
            free(key);
            return -1;
        }
        int rc = 0;
        if (!strcmp(key, "dtype") && !seen_dtype++) {
            char *dtype;
            rc = s_string(j, &dtype);
            if (rc == 0 && strcmp(dtype, "F32") != 0) {
                rc = s_fail(j, "dtype is not F32");
            }
            free(dtype);
        } else if (!strcmp(key, "shape") && !seen_shape++) {
            rc = s_expect(j, '[', "shape is not a list");
            t->ndim = 0;
            if (rc == 0 && !s_accept(j, ']')) {
                do {
                    uint64_t d;
                    if (t->ndim == PS_SAFETENSORS_MAX_DIMS) {
                        rc = s_fail(j, "too many dimensions");
                    } else if ((rc = s_uint(j, &d)) == 0) {
                        t->shape[t->ndim++] = (int64_t)d;
                    }
                } while (rc == 0 && s_accept(j, ','));
                if (rc == 0) {
                    rc = s_expect(j, ']', "shape list not closed");
                }
            }
        } else if (!strcmp(key, "data_offsets") && !seen_off++) {
            if (s_expect(j, '[', "data_offsets is not a list") < 0 || s_uint(j, &off[0]) < 0 ||
                s_expect(j, ',', "data_offsets needs two numbers") < 0 ||
                s_uint(j, &off[1]) < 0 || s_expect(j, ']', "data_offsets needs two numbers") < 0) {
                rc = -1;
            }
        } else {
            rc = s_fail(j, "unknown or repeated key in a tensor entry");
        }
        free(key);
        if (rc < 0) {
            return -1;
        }
    } while (s_accept(j, ','));
    if (s_expect(j, '}', "tensor entry not closed") < 0) {
        return -1;
    }
    if (!seen_dtype || !seen_shape || !seen_off) {
        return s_fail(j, "tensor entry lacks dtype, shape or data_offsets");
    }
    return 0;
}

/* The "__metadata__" object: string keys to string values. */
static int s_meta(s_json_t *j, ps_safetensors_t *st)
{
    if (s_expect(j, '{', "__metadata__ is not an object") < 0) {
        return -1;
    }
    if (s_accept(j, '}')) {
        return 0;
    }
    do {
        char *key = NULL, *val = NULL;
        if (s_string(j, &key) < 0 || s_expect(j, ':', "expected ':'") < 0 ||
            s_string(j, &val) < 0) {
            free(key);
            free(val);
            return s_fail(j, "__metadata__ values must be strings");
        }
        if (ps_safetensors_meta(st, key)) {
            free(key);
            free(val);
            return s_fail(j, "repeated __metadata__ key");
        }
        char **m = realloc(st->meta, (size_t)(st->n_meta + 1) * 2 * sizeof *m);
        if (!m) {
            free(key);
            free(val);
            return s_fail(j, "out of memory");
        }
        st->meta = m;
        m[2 * st->n_meta] = key;
        m[2 * st->n_meta + 1] = val;
        st->n_meta++;
    } while (s_accept(j, ','));
    return s_expect(j, '}', "__metadata__ not closed");
}

typedef struct {
    uint64_t begin, end;
} s_span_t;

/* The whole header into st->tensors (names only, data set later) and spans. */
static int s_parse(s_json_t *j, ps_safetensors_t *st, s_span_t **spans_p)
{
    int seen_meta = 0, cap = 0;
    s_span_t *spans = NULL;
    if (s_expect(j, '{', "header is not a JSON object") < 0) {
        return -1;
    }
    if (!s_accept(j, '}')) {
        do {
            char *key;
            if (s_string(j, &key) < 0 || s_expect(j, ':', "expected ':'") < 0) {
                free(key);
                goto fail;
            }
            if (!strcmp(key, "__metadata__")) {
                free(key);
                if (seen_meta++ || s_meta(j, st) < 0) {
                    s_fail(j, "repeated or bad __metadata__");
                    goto fail;
                }
                continue;
            }
            if (ps_safetensors_find(st, key) || !key[0]) {
                free(key);
                s_fail(j, "empty or repeated tensor name");
                goto fail;
            }
            if (st->n == cap) {
                cap = cap ? 2 * cap : 16;
                ps_safetensors_tensor_t *t = realloc(st->tensors, (size_t)cap * sizeof *t);
                s_span_t *s = t ? realloc(spans, (size_t)cap * sizeof *s) : NULL;
                st->tensors = t ? t : st->tensors;
                spans = s ? s : spans;
                if (!t || !s) {
                    free(key);
                    s_fail(j, "out of memory");
                    goto fail;
                }
            }
            ps_safetensors_tensor_t *t = &st->tensors[st->n];
            memset(t, 0, sizeof *t);
            t->name = key;
            st->n++;
            uint64_t off[2] = {0, 0};
            if (s_tensor(j, t, off) < 0) {
                goto fail;
            }
            spans[st->n - 1] = (s_span_t){off[0], off[1]};
        } while (s_accept(j, ','));
        if (s_expect(j, '}', "header object not closed") < 0) {
            goto fail;
        }
    }
    s_ws(j);
    if (j->p != j->end) {
        s_fail(j, "bytes after the header object");
        goto fail;
    }
    *spans_p = spans;
    return 0;
fail:
    free(spans);
    return -1;
}

/* Sorts tensors (with their spans) by begin offset: insertion sort, n is small. */
static void s_sort(ps_safetensors_tensor_t *t, s_span_t *s, int n)
{
    for (int i = 1; i < n; i++) {
        ps_safetensors_tensor_t tt = t[i];
        s_span_t ss = s[i];
        int k = i;
        while (k > 0 && s[k - 1].begin > ss.begin) {
            t[k] = t[k - 1];
            s[k] = s[k - 1];
            k--;
        }
        t[k] = tt;
        s[k] = ss;
    }
}

int ps_safetensors_read(const char *path, ps_safetensors_t **st_p, char *why, size_t why_cap)
{
    ps_safetensors_t *st = NULL;
    char *hdr = NULL;
    s_span_t *spans = NULL;
    struct stat sb;
    int rc = PS_EPROTO;
    *st_p = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ps_error_format(why, why_cap, "%s: cannot open: %s", path, strerror(errno));
        return errno == ENOENT ? PS_ENOENT : PS_EIO;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ps_error_format(why, why_cap, "%s: not a regular file", path);
        rc = PS_EIO;
        goto fail;
    }
    uint64_t size = (uint64_t)sb.st_size, hlen = 0;
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
    s_json_t j = {hdr, hdr + hlen, NULL};
    if (s_parse(&j, st, &spans) < 0) {
        ps_error_format(why, why_cap, "%s: bad header at byte %ld: %s", path,
                        (long)(j.p - hdr) + 8, j.err ? j.err : "parse error");
        goto fail;
    }
    s_sort(st->tensors, spans, st->n);
    uint64_t at = 0;
    for (int i = 0; i < st->n; i++) {
        ps_safetensors_tensor_t *t = &st->tensors[i];
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            /* each dim < 2^62; stop before the product overflows */
            if (t->shape[d] && numel > (dlen + 1) / (uint64_t)t->shape[d]) {
                numel = dlen + 1;
                break;
            }
            numel *= (uint64_t)t->shape[d];
        }
        if (spans[i].begin != at || spans[i].end < spans[i].begin || spans[i].end > dlen) {
            ps_error_format(
                why, why_cap,
                "%s: tensor '%s' data_offsets [%llu,%llu] are not contiguous after %llu "
                "within %llu data bytes",
                path, t->name, (unsigned long long)spans[i].begin,
                (unsigned long long)spans[i].end, (unsigned long long)at,
                (unsigned long long)dlen);
            goto fail;
        }
        if (numel > dlen || numel * sizeof(float) != spans[i].end - spans[i].begin) {
            ps_error_format(why, why_cap,
                            "%s: tensor '%s' shape does not match its %llu bytes", path,
                            t->name, (unsigned long long)(spans[i].end - spans[i].begin));
            goto fail;
        }
        t->numel = (size_t)numel;
        t->data = st->data + spans[i].begin / sizeof(float);
        at = spans[i].end;
    }
    if (at != dlen) {
        ps_error_format(why, why_cap, "%s: %llu data bytes but the tensors cover %llu",
                        path, (unsigned long long)dlen, (unsigned long long)at);
        goto fail;
    }
    free(spans);
    free(hdr);
    close(fd);
    *st_p = st;
    return 0;
fail:
    free(spans);
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
    for (int i = 0; i < st->n; i++) {
        free((char *)st->tensors[i].name);
    }
    for (int i = 0; i < 2 * st->n_meta; i++) {
        free(st->meta[i]);
    }
    free(st->tensors);
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
    return i >= 0 && i < st->n ? &st->tensors[i] : NULL;
}

const ps_safetensors_tensor_t *ps_safetensors_find(const ps_safetensors_t *st, const char *name)
{
    for (int i = 0; i < st->n; i++) {
        if (!strcmp(st->tensors[i].name, name)) {
            return &st->tensors[i];
        }
    }
    return NULL;
}

const char *ps_safetensors_meta(const ps_safetensors_t *st, const char *key)
{
    for (int i = 0; i < st->n_meta; i++) {
        if (!strcmp(st->meta[2 * i], key)) {
            return st->meta[2 * i + 1];
        }
    }
    return NULL;
}
