/*
 * common/json.h - every JSON document shardps reads or writes, on jansson.
 *
 * Documents are jansson values (json_t): callers build them with jansson's
 * own constructors (json_object, json_pack, ...) and walk them with its
 * getters. What this module adds is what the project needs around that:
 * strict parsing with a one-line reason naming the byte at fault, memory
 * bounded by the text's size (a hostile text of small values is refused
 * before it is built), whole-file reads with a size limit, atomic writes
 * (common/file.h), three output styles, reals written as a printf "%.Nf"
 * would (rounded, no noise digits), typed getters whose failures are
 * one-line reasons, and the one JSON string escaper (jansson's), for
 * quoting outside text in messages.
 * It does not stream: a document is built or parsed whole. Thread-safe on
 * distinct documents, as jansson is.
 */
#ifndef PS_COMMON_JSON_H
#define PS_COMMON_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a document is written. Key order is always insertion order. */
typedef enum {
    PS_JSON_COMPACT, /* {"a":1,"b":[2,3]}: safetensors headers, trace events */
    PS_JSON_LINE,    /* {"a": 1, "b": [2, 3]}: one spaced line (the summary, bench) */
    PS_JSON_INDENT,  /* two-space indentation, one value per line (manifests) */
} ps_json_style_t;

/*
 * What a parsed document may take: jansson's tree costs a few dozen bytes
 * or more per value however short its text ("0", "{}"), so a text of
 * many small values would cost many times its size. Before jansson builds
 * anything, one pass over the tokens bounds the heap its tree would take
 * (by token, as measured on jansson 2.14 and glibc); a text whose bound
 * passes tree_factor times its size plus PS_JSON_TREE_BASE, or that nests
 * deeper than PS_JSON_MAX_DEPTH, is refused. PS_JSON_TREE_FACTOR lets
 * every document shardps writes through (a trace, the densest, bounds at
 * about 18 times); a file kind of its own (a manifest) may ask for less.
 */
enum {
    PS_JSON_TREE_FACTOR = 24,      /* the default tree_factor */
    PS_JSON_TREE_BASE = 256 << 10, /* bytes any text may take: small files pass */
    PS_JSON_MAX_DEPTH = 32,        /* containers in containers */
};

/*
 * Parses the len bytes at buf as one JSON object or array, strictly: nothing
 * but whitespace after it, no repeated key in any object, no NUL in strings,
 * UTF-8 only, nesting at most PS_JSON_MAX_DEPTH, a tree within
 * PS_JSON_TREE_FACTOR (above). origin is added to byte positions in reasons
 * (a header's offset in its file). Caller owns *out; release with
 * json_decref(). Returns 0, PS_EPROTO with what is wrong ("... at byte N:
 * ..." where there is a place) in why (may be NULL; always one line), or
 * PS_ENOMEM.
 */
int ps_json_parse(const char *buf, size_t len, size_t origin, json_t **out, char *why,
                  size_t cap);

/*
 * Reads and parses (as ps_json_parse) the file at path, at most max_bytes
 * long. Caller owns *out; release with json_decref(). Returns 0, PS_ENOENT,
 * PS_EIO (unreadable), PS_EPROTO (too long, or not such JSON) or PS_ENOMEM,
 * with a one-line reason starting with path in why (may be NULL).
 */
int ps_json_read_file(const char *path, size_t max_bytes, json_t **out, char *why,
                      size_t cap);

/* ps_json_read_file with its tree bounded by tree_factor (above) instead
 * of PS_JSON_TREE_FACTOR: peak memory while reading is then the file's
 * size, plus at most tree_factor times it and PS_JSON_TREE_BASE. */
int ps_json_read_file_within(const char *path, size_t max_bytes, unsigned tree_factor,
                             json_t **out, char *why, size_t cap);

/* Appends the text of j (an object or array) in style to *out. Returns 0 or
 * PS_ENOMEM (out->oom is set too). */
int ps_json_dump(const json_t *j, ps_json_style_t style, ps_text_t *out);

/*
 * Writes j in style and a newline as the file path, atomically
 * (ps_file_write_atomic). Returns 0, PS_ENOMEM or PS_EIO with a one-line
 * reason naming path in why (may be NULL). Thread-safe.
 */
int ps_json_write_file(const char *path, const json_t *j, ps_json_style_t style, char *why,
                       size_t cap);

/* x rounded to `decimals` places (0 .. 9; -1: not rounded), as
 * ps_json_real writes it: for json_real_set on a value that is reused. */
double ps_json_round(double x, int decimals);

/* A new real x rounded to `decimals` places (0 .. 9, as printf's "%.Nf";
 * -1: not rounded, 15 significant digits as "%.15g"), written without noise
 * digits ("0.25", not "0.25000000000000001"); null when x is NaN or
 * infinite (JSON has neither). A new reference, or NULL when out of memory:
 * made for json_object_set_new and json_pack's "o". */
json_t *ps_json_real(double x, int decimals);

/* A new string of s, which may come from outside (a peer's reason, an
 * endpoint): bytes that are not UTF-8 become '?'. A new reference, or NULL
 * when out of memory. */
json_t *ps_json_text(const char *s);

/* s as a JSON string literal (quotes and jansson's escapes) into buf[cap],
 * shortened with "..." to fit: for naming outside text (a tensor name, a
 * peer's reason) in a one-line message. Returns buf. */
const char *ps_json_quote(const char *s, char *buf, size_t cap);

/* *out = v when v is a JSON integer in [min, max]. Returns 0 or PS_EPROTO. */
int ps_json_int(const json_t *v, int64_t min, int64_t max, int64_t *out);

/*
 * The value at path in root: object keys and array indices separated by
 * dots ("staleness.mean", "parts.0.size"). Borrowed from root; NULL when
 * absent.
 */
const json_t *ps_json_path(const json_t *root, const char *path);

/* The integer at path, in [min, max], into *out. Returns 0, or PS_EPROTO
 * with "PATH is missing" or "PATH is not an integer in [min, max]" in why
 * (may be NULL). */
int ps_json_get_int(const json_t *root, const char *path, int64_t min, int64_t max,
                    int64_t *out, char *why, size_t cap);

/* The number (integer or real) at path into *out. Returns 0 or PS_EPROTO
 * with a one-line reason in why (may be NULL). */
int ps_json_get_num(const json_t *root, const char *path, double *out, char *why,
                    size_t cap);

/* The string at path; *out is borrowed from root. Returns 0 or PS_EPROTO
 * with a one-line reason in why (may be NULL). */
int ps_json_get_str(const json_t *root, const char *path, const char **out, char *why,
                    size_t cap);

#ifdef __cplusplus
}
#endif
#endif
