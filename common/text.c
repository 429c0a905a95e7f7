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
