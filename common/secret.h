/*
 * common/secret.h - a job's shared secret and the proof that a node holds it.
 *
 * Every job has a secret of PS_SECRET_LEN random bytes, kept in an
 * owner-only file (the launcher makes one per job, shardps-keygen writes one
 * for cluster managers) and named to each role by path (--secret-file or
 * SHARDPS_SECRET_FILE), never by value on a command line. A node registers
 * by answering the scheduler's nonce with HMAC-SHA256(secret, nonce || role
 * || job id): the secret never travels. SHA-256 (FIPS 180-4) and HMAC
 * (RFC 2104) are here because no library we link exposes them; the unit
 * test checks both against the published vectors. This is not encryption:
 * that is --secure (proto/curve.h).
 */
#ifndef PS_COMMON_SECRET_H
#define PS_COMMON_SECRET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PS_SECRET_LEN 32 /* bytes of a job's secret */
#define PS_HMAC_LEN 32   /* bytes of an HMAC-SHA256 tag */

/* Plain data: a job's secret, or none (set == 0). */
typedef struct {
    uint8_t key[PS_SECRET_LEN]; /* the secret's bytes */
    int set;                    /* 1 when key holds a secret */
} ps_secret_t;

/* SHA-256 of the len bytes at msg into out. Thread-safe. */
void ps_sha256(const void *msg, size_t len, uint8_t out[PS_HMAC_LEN]);

/* HMAC-SHA256 with key (klen bytes) of the n parts (parts[i], lens[i] bytes,
 * concatenated) into out. Thread-safe. */
void ps_hmac_sha256(const void *key, size_t klen, const void *const *parts, const size_t *lens,
                    int n, uint8_t out[PS_HMAC_LEN]);

/* 1 when the n bytes at a and b are equal, in time that does not depend on
 * where they differ; else 0. */
int ps_secret_equal(const void *a, const void *b, size_t n);

/* Fills *s with a fresh random secret. Returns 0 or PS_EIO (no randomness). */
int ps_secret_new(ps_secret_t *s);

/* Writes a fresh random secret to path, created owner-only (0600) and never
 * replacing a file. Returns 0, or PS_EINVAL (path exists) / PS_EIO with a
 * one-line reason naming path in err. */
int ps_secret_write(const char *path, char *err, size_t errlen);

/* Reads the secret at path (64 hex digits; lines starting with '#' are
 * comments), after checking it is a regular file only its owner may read or
 * write. Returns 0, or PS_EINVAL with a one-line reason naming path in err. */
int ps_secret_read(const char *path, ps_secret_t *s, char *err, size_t errlen);

/* The registration proof: HMAC-SHA256(secret, nonce || role || job_id) with
 * role as one byte and job_id ("" allowed) without its NUL. */
void ps_secret_proof(const ps_secret_t *s, const void *nonce, size_t nlen, int role,
                     const char *job_id, uint8_t out[PS_HMAC_LEN]);

#ifdef __cplusplus
}
#endif
#endif
