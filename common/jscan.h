/*
 * common/jscan.h - a strict reader of JSON tokens in place, for file headers
 * that may be hostile (safetensors).
 *
 * jansson (common/json.h) builds a tree of every value, each a few dozen
 * bytes or more however short its text ("0", "{}"): a hostile header of
 * small values costs many times its size. A header of a few known shapes is read here
 * token by token instead: the caller says what comes next (a '{', a string,
 * an integer ...), so there is no recursion and no depth, and strings are
 * unescaped into the text itself, so reading needs no memory beyond the
 * buffer. What it reads it reads as RFC 8259 says (escapes, UTF-8 checked,
 * no control characters); it also refuses \u0000, as strings come back
 * NUL-terminated. Errors are one line, "at byte N: what". It does not
 * write JSON (common/json.h does) and knows no document's structure.
 * Not thread-safe on one scanner; scanners share nothing.
 */
#ifndef PS_COMMON_JSCAN_H
#define PS_COMMON_JSCAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A scanner over one text: plain data, no resources. */
typedef struct {
    char *p;          /* the next unread byte */
    char *end;        /* one past the text's last byte */
    char *out;        /* where the next unescaped string goes: never past p */
    const char *text; /* the text's first byte */
    size_t origin;    /* the text's offset in its file, added to positions */
    char why[160];    /* the first error, "at byte N: what" */
} ps_jscan_t;

/* Starts s on the len bytes at text (borrowed and rewritten by
 * ps_jscan_string; valid while s and the strings it gave are used). */
void ps_jscan_init(ps_jscan_t *s, char *text, size_t len, size_t origin);

/* Skips whitespace; returns the next byte without taking it, or -1 at the
 * end of the text. */
int ps_jscan_peek(ps_jscan_t *s);

/* Opens an object ('{') or array ('['): returns 1 when a member follows,
 * 0 when it is empty (its close is taken too), or PS_EPROTO. */
int ps_jscan_open(ps_jscan_t *s, char open);

/* After a member of the container that close ('}' or ']') ends: returns 1
 * after a ',' (another member follows), 0 after close, or PS_EPROTO. */
int ps_jscan_next(ps_jscan_t *s, char close);

/* Takes c (':' between a key and its value) after whitespace: 0 or
 * PS_EPROTO. */
int ps_jscan_take(ps_jscan_t *s, char c);

/* Reads a string into *str: its bytes unescaped and NUL-terminated, inside
 * the text (borrowed, like the text). Returns 0 or PS_EPROTO. */
int ps_jscan_string(ps_jscan_t *s, const char **str);

/* Reads a number: 0 with *v when it is an integer in [0, max]; PS_ERANGE
 * when it is a JSON number but not one (negative, a fraction, an exponent,
 * too big), with the reason in s->why; PS_EPROTO when it is no number. */
int ps_jscan_uint(ps_jscan_t *s, int64_t max, int64_t *v);

/* 0 when nothing but whitespace is left, else PS_EPROTO. */
int ps_jscan_end(ps_jscan_t *s);

#ifdef __cplusplus
}
#endif
#endif
