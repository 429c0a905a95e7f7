/*
 * common/error.h - the one error enum of shardps.
 *
 * Fallible functions return 0 (or a count) on success and a negative PS_E*
 * on failure. Foreign errors (errno, zmq_errno(), cudaError_t, protobuf-c
 * NULLs) are translated into these once, at the layer that meets them.
 */
#ifndef PS_COMMON_ERROR_H
#define PS_COMMON_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    PS_OK = 0,
    PS_EINVAL = -1,    /* bad argument or bad input from the outside */
    PS_ENOMEM = -2,    /* allocation failed */
    PS_ETIMEDOUT = -3, /* a peer did not answer in time */
    PS_ECLOSED = -4,   /* the job or a peer has gone away */
    PS_EPROTO = -5,    /* malformed or unexpected message */
    PS_ESTATE = -6,    /* call not valid in the current state */
    PS_EIO = -7,       /* file or socket I/O failed */
    PS_ENOTSUP = -8,   /* not supported (by this build or mode) */
    PS_ENODEV = -9,    /* no such device (no GPU) */
    PS_ERANGE = -10,   /* key range outside the shard, or size mismatch */
    PS_ENOENT = -11,   /* no such file, key or node */
    PS_ENONFINITE = -12, /* a NaN or an infinity where numbers must be finite */
    PS_EAGAIN = -13,   /* abandoned: a lost server was replaced, redo from the rollback step */
};

/* Returns a static, human-readable string for a PS_E* code. Thread-safe. */
const char *ps_strerror(int err);

/* Formats a one-line reason (printf's fmt) into why[cap], for the many
 * functions that return a PS_E* with a reason; does nothing when why is NULL
 * or cap is 0. Thread-safe. */
void ps_error_format(char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
