/*
 * common/jscan.c - JSON tokens read in place.
 *
 * Strings are unescaped to s->out, which starts at the text and never
 * passes s->p: each string's text holds two quotes and its unescaped bytes
 * take at most as many as their escapes, so the one NUL added fits in the
 * quote, and no byte is overwritten before it is read.
 */
#include "common/jscan.h"

#include <stdio.h>

#include "common/error.h"

void ps_jscan_init(ps_jscan_t *s, char *text, size_t len, size_t origin)
{
    s->p = s->out = text;
    s->end = text + len;
    s->text = text;
    s->origin = origin;
    s->why[0] = '\0';
}

/* Records what is wrong at the current byte; returns rc. */
static int s_fail(ps_jscan_t *s, int rc, const char *what)
{
    snprintf(s->why, sizeof s->why, "at byte %zu: %s", s->origin + (size_t)(s->p - s->text),
             what);
    return rc;
}

int ps_jscan_peek(ps_jscan_t *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) {
        s->p++;
    }
    return s->p < s->end ? (unsigned char)*s->p : -1;
}

int ps_jscan_take(ps_jscan_t *s, char c)
{
    if (ps_jscan_peek(s) != (unsigned char)c) {
        char what[40];
        snprintf(what, sizeof what, "'%c' expected", c);
        return s_fail(s, PS_EPROTO, what);
    }
    s->p++;
    return 0;
}

int ps_jscan_open(ps_jscan_t *s, char open)
{
    const char close = open == '{' ? '}' : ']';
    if (ps_jscan_take(s, open) != 0) {
        return PS_EPROTO;
    }
    if (ps_jscan_peek(s) == (unsigned char)close) {
        s->p++;
        return 0;
    }
    return 1;
}

int ps_jscan_next(ps_jscan_t *s, char close)
{
    const int c = ps_jscan_peek(s);
    if (c == ',' || c == (unsigned char)close) {
        s->p++;
        return c == ',';
    }
    char what[40];
    snprintf(what, sizeof what, "',' or '%c' expected", close);
    return s_fail(s, PS_EPROTO, what);
}

int ps_jscan_end(ps_jscan_t *s)
{
    return ps_jscan_peek(s) < 0 ? 0 : s_fail(s, PS_EPROTO, "end of file expected");
}

/* The length of the UTF-8 sequence at p (before end) when it is a valid
 * one (RFC 3629: shortest form, no surrogates, at most U+10FFFF), else 0. */
static int s_utf8(const char *text, const char *end)
{
    const unsigned char *p = (const unsigned char *)text, c = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (end - text < n || p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (int i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf) {
            return 0;
        }
    }
    return n;
}

/* The 4 hex digits at p (before end) as a number, or -1. */
static long s_hex4(const char *p, const char *end)
{
    long v = 0;
    if (end - p < 4) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        const int d = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (d < 0) {
            return -1;
        }
        v = v << 4 | d;
    }
    return v;
}

/* Writes code point cp (valid, not 0) as UTF-8 at *o. */
static void s_put_utf8(char **o, long cp)
{
    unsigned char *u = (unsigned char *)*o;
    if (cp < 0x80) {
        *u++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *u++ = (unsigned char)(0xc0 | cp >> 6);
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *u++ = (unsigned char)(0xe0 | cp >> 12);
        *u++ = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    } else {
        *u++ = (unsigned char)(0xf0 | cp >> 18);
        *u++ = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
        *u++ = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    }
    *o = (char *)u;
}

/* The escape at s->p (just past its backslash) unescaped to *o. */
static int s_escape(ps_jscan_t *s, char **o)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (s->p == s->end) {
        return s_fail(s, PS_EPROTO, "invalid escape at the end");
    }
    for (int i = 0; from[i]; i++) {
        if (*s->p == from[i]) {
            s->p++;
            *(*o)++ = to[i];
            return 0;
        }
    }
    long cp = *s->p == 'u' ? s_hex4(s->p + 1, s->end) : -1;
    if (cp < 0) {
        return s_fail(s, PS_EPROTO, "invalid escape");
    }
    int len = 5;
    if (cp >= 0xd800 && cp <= 0xdbff) { /* a high surrogate: its low half must follow */
        const long lo = s->end - s->p >= 7 && s->p[5] == '\\' && s->p[6] == 'u'
                            ? s_hex4(s->p + 7, s->end)
                            : -1;
        if (lo < 0xdc00 || lo > 0xdfff) {
            return s_fail(s, PS_EPROTO, "invalid Unicode escape: a lone high surrogate");
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        len = 11;
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
        return s_fail(s, PS_EPROTO, "invalid Unicode escape: a lone low surrogate");
    } else if (cp == 0) {
        return s_fail(s, PS_EPROTO, "\\u0000 is not allowed (NUL in a string)");
    }
    s->p += len;
    s_put_utf8(o, cp);
    return 0;
}

int ps_jscan_string(ps_jscan_t *s, const char **str)
{
    if (ps_jscan_peek(s) != '"') {
        return s_fail(s, PS_EPROTO, "a string expected");
    }
    s->p++;
    char *o = s->out;
    *str = o;
    for (;;) {
        if (s->p == s->end) {
            return s_fail(s, PS_EPROTO, "the text ends inside a string");
        }
        const unsigned char c = (unsigned char)*s->p;
        int n = 1;
        if (c == '"') {
            break;
        }
        if (c < 0x20) {
            char what[48];
            snprintf(what, sizeof what, "control character 0x%x in a string", c);
            return s_fail(s, PS_EPROTO, what);
        }
        if (c == '\\') {
            s->p++;
            if (s_escape(s, &o) != 0) {
                return PS_EPROTO;
            }
            continue;
        }
        if (c >= 0x80 && !(n = s_utf8(s->p, s->end))) {
            return s_fail(s, PS_EPROTO, "invalid UTF-8 in a string");
        }
        for (int i = 0; i < n; i++) {
            *o++ = *s->p++;
        }
    }
    s->p++; /* the closing quote, where the NUL fits */
    *o++ = '\0';
    s->out = o;
    return 0;
}

int ps_jscan_uint(ps_jscan_t *s, int64_t max, int64_t *v)
{
    const int neg = ps_jscan_peek(s) == '-';
    const char *p = s->p + neg;
    if (p == s->end || *p < '0' || *p > '9') {
        return s_fail(s, PS_EPROTO, "a number expected");
    }
    int64_t x = 0;
    int big = 0;
    const char *digits = p;
    for (; p < s->end && *p >= '0' && *p <= '9'; p++) {
        const int d = *p - '0';
        if (x > (max - d) / 10) {
            big = 1;
        } else {
            x = x * 10 + d;
        }
    }
    if (*digits == '0' && p - digits > 1) {
        return s_fail(s, PS_EPROTO, "a number with a leading zero");
    }
    int frac = 0;
    if (p < s->end && *p == '.') {
        frac = 1;
        if (++p == s->end || *p < '0' || *p > '9') {
            s->p = (char *)p;
            return s_fail(s, PS_EPROTO, "a digit expected after '.'");
        }
        while (p < s->end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (p < s->end && (*p == 'e' || *p == 'E')) {
        frac = 1;
        p += p + 1 < s->end && (p[1] == '+' || p[1] == '-') ? 2 : 1;
        if (p >= s->end || *p < '0' || *p > '9') {
            s->p = (char *)p;
            return s_fail(s, PS_EPROTO, "a digit expected in the exponent");
        }
        while (p < s->end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (neg || frac || big) {
        s_fail(s, PS_ERANGE, neg ? "a negative number" : frac ? "not an integer" : "too big");
        s->p = (char *)p;
        return PS_ERANGE;
    }
    s->p = (char *)p;
    *v = x;
    return 0;
}
