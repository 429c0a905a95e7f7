/* common/error.c - names for the PS_E* codes, and one-line reasons. */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *ps_strerror(int err)
{
    switch (err) {
    case PS_OK: return "success";
    case PS_EINVAL: return "invalid argument";
    case PS_ENOMEM: return "out of memory";
    case PS_ETIMEDOUT: return "timed out";
    case PS_ECLOSED: return "closed";
    case PS_EPROTO: return "protocol error";
    case PS_ESTATE: return "invalid state";
    case PS_EIO: return "I/O error";
    case PS_ENOTSUP: return "not supported";
    case PS_ENODEV: return "no such device";
    case PS_ERANGE: return "out of range";
    case PS_ENOENT: return "not found";
    case PS_ENONFINITE: return "not finite (NaN or infinity)";
    case PS_EAGAIN: return "rolled back (a server was replaced)";
    default: return "unknown error";
    }
}

void ps_error_format(char *why, size_t cap, const char *fmt, ...)
{
    if (!why || !cap) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}
