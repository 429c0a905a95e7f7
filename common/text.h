/*
 * common/text.h - a growing text buffer for what is built piece by piece:
 * metrics expositions, JSON documents, gnuplot scripts.
 */
#ifndef PS_COMMON_TEXT_H
#define PS_COMMON_TEXT_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Plain data. Zero-initialise; free(b.p) when done. */
typedef struct {
    char *p;    /* NUL-terminated text, or NULL while empty */
    size_t len; /* bytes of text, without the NUL */
    size_t cap; /* bytes allocated */
    int oom;    /* an append ran out of memory: the text is incomplete */
} ps_text_t;

/* Appends the n bytes at s to b (b->oom set when out of memory). */
void ps_text_append(ps_text_t *b, const char *s, size_t n);

/* Appends printf-style text to b (b->oom set when out of memory). */
void ps_text_printf(ps_text_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same with a va_list (left for the caller's va_end). */
void ps_text_vprintf(ps_text_t *b, const char *fmt, va_list ap);

/* Makes s valid UTF-8 in place: each byte that does not belong to a
 * well-formed sequence (RFC 3629: no overlong forms, surrogates or code
 * points past U+10FFFF; a sequence cut short by the end) becomes '?'.
 * Returns how many bytes it replaced. For strings that go into protobuf
 * string fields and JSON, which must be UTF-8. */
size_t ps_text_utf8_fix(char *s);

#ifdef __cplusplus
}
#endif
#endif
