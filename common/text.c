/* common/text.c - the growing text buffer. */
#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ps_text_printf(ps_text_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ps_text_vprintf(b, fmt, ap);
    va_end(ap);
}

void ps_text_vprintf(ps_text_t *b, const char *fmt, va_list ap)
{
    if (b->oom) {
        return; /* keep what we have */
    }
    for (;;) {
        size_t room = b->cap - b->len;
        va_list aq;
        va_copy(aq, ap);
        int n = b->p ? vsnprintf(b->p + b->len, room, fmt, aq) : -2;
        va_end(aq);
        if (n >= 0 && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t want = b->cap ? b->cap * 2 : 4096;
        while (n >= 0 && want < b->len + (size_t)n + 1) {
            want *= 2;
        }
        char *p = realloc(b->p, want);
        if (!p || n == -1) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = want;
        b->p[b->len] = '\0';
    }
}

void ps_text_append(ps_text_t *b, const char *s, size_t n)
{
    if (b->oom) {
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t want = b->cap ? b->cap * 2 : 4096;
        while (want < b->len + n + 1) {
            want *= 2;
        }
        char *p = realloc(b->p, want);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = want;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* The length of the well-formed UTF-8 sequence at p, or 0. */
static size_t s_utf8_len(const unsigned char *p)
{
    const unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c < 0x80) {
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* overlong */
        hi = c == 0xed ? 0x9f : 0xbf; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf) { /* the NUL ends it too */
            return 0;
        }
    }
    return n;
}

size_t ps_text_utf8_fix(char *s)
{
    size_t fixed = 0;
    for (unsigned char *p = (unsigned char *)s; *p;) {
        size_t n = s_utf8_len(p);
        if (n == 0) {
            *p++ = '?';
            fixed++;
        } else {
            p += n;
        }
    }
    return fixed;
}
