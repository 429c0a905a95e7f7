/*
 * common/json.c - the JSON module on jansson.
 *
 * Reals are rounded to the places the caller asks for and written with 15
 * significant digits: every double nearest to a decimal of at most 15
 * digits prints back as that decimal, so a rounded figure shows as it
 * would from printf, where jansson's default 17 digits would show noise.
 */
#include "common/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"

enum { S_REAL_DIGITS = 15 };

/* The heap jansson 2.14's tree takes per token on glibc, measured on
 * documents of one token repeated and rounded up: chunk headers, and a
 * container's table or buckets just after doubling, included. */
enum {
    S_COST_OBJECT = 240, /* '{': the object and its first buckets */
    S_COST_ARRAY = 144,  /* '[': the array and its first table */
    S_COST_KEY = 112,    /* a member's pair and its share of the buckets (+ the key) */
    S_COST_STRING = 96,  /* a string value (+ its bytes) */
    S_COST_NUMBER = 48,  /* an integer or a real */
    S_COST_WORD = 16,    /* true, false, null: shared values, a table slot each */
};

static size_t s_flags(ps_json_style_t style)
{
    size_t f = JSON_REAL_PRECISION(S_REAL_DIGITS);
    switch (style) {
    case PS_JSON_COMPACT:
        return f | JSON_COMPACT;
    case PS_JSON_INDENT:
        return f | JSON_INDENT(2);
    case PS_JSON_LINE:
    default:
        return f;
    }
}

/* jansson's reason, which quotes the input near the fault, made one
 * printable line: control and non-ASCII bytes become '?'. */
static void s_reason(char *why, size_t cap, size_t at, const char *text)
{
    char clean[JSON_ERROR_TEXT_LENGTH];
    size_t i = 0;
    for (; text[i] && i + 1 < sizeof clean; i++) {
        unsigned char c = (unsigned char)text[i];
        clean[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    clean[i] = '\0';
    ps_error_format(why, cap, "not JSON at byte %zu: %s", at, clean);
}

static int s_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int s_in_number(char c)
{
    return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' ||
           c == '-';
}

/* The heap jansson's tree of the len bytes at text would take at most,
 * from one pass over its tokens that builds nothing; SIZE_MAX when
 * containers nest deeper than PS_JSON_MAX_DEPTH, *deep then the byte.
 * Reads any bytes: what is no JSON, jansson refuses after. */
static size_t s_tree_cost(const char *text, size_t len, size_t *deep)
{
    size_t cost = 0, longest = 0;
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = text[i];
        if (c == '"') {
            size_t end = i + 1, k;
            while (end < len && text[end] != '"') {
                end += text[end] == '\\' ? 2 : 1; /* an escaped quote ends nothing */
            }
            for (k = end + 1; k < len && s_space(text[k]);) {
                k++;
            }
            cost += (k < len && text[k] == ':' ? S_COST_KEY : S_COST_STRING) + (end - i);
            longest = end - i > longest ? end - i : longest;
            i = end;
        } else if (c == '{' || c == '[') {
            if (++depth > PS_JSON_MAX_DEPTH) {
                *deep = i;
                return SIZE_MAX;
            }
            cost += c == '{' ? S_COST_OBJECT : S_COST_ARRAY;
        } else if (c == '}' || c == ']') {
            depth -= depth > 0;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            cost += S_COST_NUMBER;
            while (i + 1 < len && s_in_number(text[i + 1])) {
                i++;
            }
        } else if (c >= 'a' && c <= 'z') {
            cost += S_COST_WORD;
            while (i + 1 < len && text[i + 1] >= 'a' && text[i + 1] <= 'z') {
                i++;
            }
        }
    }
    return cost + 2 * longest; /* the lexer's buffer, grown by doubling to the longest */
}

/* ps_json_parse with the tree bounded by tree_factor: refused before
 * jansson builds any of it when it would take more. */
static int s_parse(const char *buf, size_t len, size_t origin, unsigned tree_factor,
                   json_t **out, char *why, size_t cap)
{
    size_t deep = 0;
    const size_t cost = s_tree_cost(buf, len, &deep);
    *out = NULL;
    if (cost == SIZE_MAX) {
        ps_error_format(why, cap, "at byte %zu: nested deeper than the maximum depth, %d",
                        origin + deep, PS_JSON_MAX_DEPTH);
        return PS_EPROTO;
    }
    if (cost > (size_t)tree_factor * len + PS_JSON_TREE_BASE) {
        ps_error_format(why, cap,
                        "too many small values: parsed they would take about %zu KiB, over "
                        "%u times the %zu bytes of text",
                        cost >> 10, tree_factor, len);
        return PS_EPROTO;
    }
    json_error_t e;
    *out = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
    if (*out) {
        return 0;
    }
    if (json_error_code(&e) == json_error_out_of_memory) {
        ps_error_format(why, cap, "out of memory parsing %zu bytes of JSON", len);
        return PS_ENOMEM;
    }
    s_reason(why, cap, origin + (size_t)(e.position > 0 ? e.position : 0), e.text);
    return PS_EPROTO;
}

int ps_json_parse(const char *buf, size_t len, size_t origin, json_t **out, char *why,
                  size_t cap)
{
    return s_parse(buf, len, origin, PS_JSON_TREE_FACTOR, out, why, cap);
}

int ps_json_read_file(const char *path, size_t max_bytes, json_t **out, char *why,
                      size_t cap)
{
    return ps_json_read_file_within(path, max_bytes, PS_JSON_TREE_FACTOR, out, why, cap);
}

int ps_json_read_file_within(const char *path, size_t max_bytes, unsigned tree_factor,
                             json_t **out, char *why, size_t cap)
{
    char *buf = NULL, reason[256];
    uint64_t size;
    *out = NULL;
    int rc, fd = ps_file_open_read(path, &size, why, cap);
    if (fd < 0) {
        return fd;
    }
    if (size > max_bytes) {
        ps_error_format(why, cap, "%s: %llu bytes, more than the %zu allowed", path,
                        (unsigned long long)size, max_bytes);
        rc = PS_EPROTO;
    } else if (!(buf = malloc(size ? (size_t)size : 1))) {
        ps_error_format(why, cap, "%s: out of memory for %llu bytes", path,
                        (unsigned long long)size);
        rc = PS_ENOMEM;
    } else if (ps_file_read_all(fd, buf, (size_t)size) != 0) {
        ps_error_format(why, cap, "%s: read failed (file shrank?)", path);
        rc = PS_EIO;
    } else if ((rc = s_parse(buf, (size_t)size, 0, tree_factor, out, reason,
                             sizeof reason)) != 0) {
        ps_error_format(why, cap, "%s: %s", path, reason);
    }
    free(buf);
    close(fd);
    return rc;
}

static int s_append(const char *buffer, size_t size, void *data)
{
    ps_text_t *t = data;
    ps_text_append(t, buffer, size);
    return t->oom ? -1 : 0;
}

int ps_json_dump(const json_t *j, ps_json_style_t style, ps_text_t *out)
{
    if (json_dump_callback(j, s_append, out, s_flags(style)) != 0) {
        out->oom = 1;
        return PS_ENOMEM;
    }
    return 0;
}

int ps_json_write_file(const char *path, const json_t *j, ps_json_style_t style, char *why,
                       size_t cap)
{
    ps_text_t t = {0};
    ps_json_dump(j, style, &t);
    ps_text_append(&t, "\n", 1);
    int rc = PS_ENOMEM;
    if (t.oom) {
        ps_error_format(why, cap, "%s: out of memory for its JSON", path);
    } else {
        rc = ps_file_write_atomic(path, (const void *[]){t.p}, (size_t[]){t.len}, 1, why,
                                  cap);
    }
    free(t.p);
    return rc;
}

double ps_json_round(double x, int decimals)
{
    if (decimals < 0) {
        return x;
    }
    double scale = 1;
    for (int i = 0; i < decimals && i < 9; i++) {
        scale *= 10;
    }
    /* from 2^52 on a double has no fraction left to round */
    if (fabs(x * scale) < 0x1p52) {
        x = round(x * scale) / scale;
    }
    return x;
}

json_t *ps_json_real(double x, int decimals)
{
    return isfinite(x) ? json_real(ps_json_round(x, decimals)) : json_null();
}

json_t *ps_json_text(const char *s)
{
    json_t *str = json_string(s);
    char *ascii = str ? NULL : strdup(s);
    if (ascii) { /* not UTF-8: its stray bytes become '?' */
        for (char *c = ascii; *c; c++) {
            *c = (unsigned char)*c >= 0x80 ? '?' : *c;
        }
        str = json_string(ascii);
        free(ascii);
    }
    return str;
}

const char *ps_json_quote(const char *s, char *buf, size_t cap)
{
    if (cap == 0) {
        return buf;
    }
    json_t *str = ps_json_text(s);
    char *text = str ? json_dumps(str, JSON_ENCODE_ANY) : NULL;
    json_decref(str);
    size_t n = text ? strlen(text) : 0;
    for (size_t i = 0; i < n; i++) {
        text[i] = text[i] == 0x7f ? '?' : text[i]; /* JSON lets DEL stand, a log line not */
    }
    if (n == 0) {
        snprintf(buf, cap, "\"?\"");
    } else if (n < cap) {
        memcpy(buf, text, n + 1);
    } else if (cap < 8) {
        snprintf(buf, cap, "\"...\"");
    } else {
        size_t end = cap - 5; /* room for ...", the NUL */
        while (end > 1 && ((unsigned char)text[end] & 0xC0) == 0x80) {
            end--; /* not inside a UTF-8 sequence */
        }
        snprintf(buf, cap, "%.*s...\"", (int)end, text);
    }
    free(text);
    return buf;
}

int ps_json_int(const json_t *v, int64_t min, int64_t max, int64_t *out)
{
    if (!json_is_integer(v)) {
        return PS_EPROTO;
    }
    json_int_t i = json_integer_value(v);
    if (i < min || i > max) {
        return PS_EPROTO;
    }
    *out = (int64_t)i;
    return 0;
}

const json_t *ps_json_path(const json_t *root, const char *path)
{
    const json_t *v = root;
    const char *seg = path;
    while (v && seg) {
        const char *dot = strchr(seg, '.');
        size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
        if (json_is_object(v)) {
            v = json_object_getn(v, seg, len);
        } else if (json_is_array(v) && len > 0 && len < 10 &&
                   strspn(seg, "0123456789") >= len) {
            v = json_array_get(v, (size_t)strtoul(seg, NULL, 10));
        } else {
            v = NULL;
        }
        seg = dot ? dot + 1 : NULL;
    }
    return v;
}

int ps_json_get_int(const json_t *root, const char *path, int64_t min, int64_t max,
                    int64_t *out, char *why, size_t cap)
{
    const json_t *v = ps_json_path(root, path);
    if (!v) {
        ps_error_format(why, cap, "%s is missing", path);
        return PS_EPROTO;
    }
    if (ps_json_int(v, min, max, out) != 0) {
        ps_error_format(why, cap, "%s is not an integer in [%lld, %lld]", path,
                        (long long)min, (long long)max);
        return PS_EPROTO;
    }
    return 0;
}

/* The value at path if json_typeof() gives type (JSON_INTEGER also takes
 * JSON_REAL: a number); else NULL with "PATH is missing" or "PATH is not
 * WHAT" in why. */
static const json_t *s_typed(const json_t *root, const char *path, json_type type,
                             const char *what, char *why, size_t cap)
{
    const json_t *v = ps_json_path(root, path);
    const int ok = v && (json_typeof(v) == type || (type == JSON_INTEGER && json_is_real(v)));
    if (!ok) {
        ps_error_format(why, cap, "%s is %s%s", path, v ? "not " : "missing", v ? what : "");
    }
    return ok ? v : NULL;
}

int ps_json_get_num(const json_t *root, const char *path, double *out, char *why,
                    size_t cap)
{
    const json_t *v = s_typed(root, path, JSON_INTEGER, "a number", why, cap);
    if (v) {
        *out = json_number_value(v);
    }
    return v ? 0 : PS_EPROTO;
}

int ps_json_get_str(const json_t *root, const char *path, const char **out, char *why,
                    size_t cap)
{
    const json_t *v = s_typed(root, path, JSON_STRING, "a string", why, cap);
    if (v) {
        *out = json_string_value(v);
    }
    return v ? 0 : PS_EPROTO;
}
