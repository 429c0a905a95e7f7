/*
 * proto/curve.h - --secure: a job's CurveZMQ keys, and who may connect.
 *
 * shardps-keygen DIR writes one job's keys: job.key (the scheduler's
 * keypair: the job's identity, which every node checks when it connects),
 * server.key and worker.key (each role's keypair), and the public halves
 * job.pub, server.pub and worker.pub. A process reads its own keypair and the
 * public keys; every file must be owner-only (a key file group or others may
 * read or write is refused, naming it; a symlink is resolved first, so a
 * Kubernetes Secret volume's links into ..data/ work, and a root-owned file
 * its group may only read is accepted for a non-root reader: a Secret with
 * fsGroup). With the keys on a context
 * (ps_ctx_secure(), proto/sock.h) every TCP socket of it speaks CurveZMQ, and
 * a ZAP handler thread admits to its bound sockets only the keys of this job
 * that may talk to this role (scheduler: servers and workers; server and a
 * worker's ring: workers), logging a refused peer once per address
 * (common/ratelog.h) and counting it.
 *
 * It does not know the job id (a stale node of an old job is refused because
 * its keys are another job's; the job id check belongs to registration) and
 * it does not bound connections or frames (proto/sock.h, the roles).
 *
 * Thread safety: load and keygen are plain functions; a loaded key set is
 * read-only afterwards except for its ZAP thread's counter, which
 * ps_curve_refused() reads atomically.
 */
#ifndef PS_PROTO_CURVE_H
#define PS_PROTO_CURVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "proto/codec.h"
#include "proto/sock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_curve ps_curve_t;

/* 1 when this libzmq can encrypt (built with CURVE, zmq_has("curve")). */
int ps_curve_available(void);

/*
 * Writes a new job's keys into dir (made 0700 when missing): job, server and
 * worker keypairs (*.key) and public keys (*.pub), each file 0600. Refuses to
 * overwrite a key file already there. Returns 0, or PS_ENOTSUP (no CURVE in
 * libzmq) / PS_EINVAL (a key file exists) / PS_EIO with a one-line reason in
 * err.
 */
int ps_curve_keygen(const char *dir, char *err, size_t errlen);

/* One job's key files in memory: name[i] ("job.key", "job.pub", ...) holds
 * text[i], the file's whole content. */
#define PS_CURVE_NFILES 6
typedef struct {
    char name[PS_CURVE_NFILES][16];
    char text[PS_CURVE_NFILES][256];
} ps_curve_files_t;

/*
 * Makes a new job's keys as ps_curve_keygen() would write them, into *f
 * (wipe it with ps_curve_files_wipe() once written out: it holds secrets).
 * Returns 0, or PS_ENOTSUP / PS_EIO with a one-line reason in err.
 */
int ps_curve_files_make(ps_curve_files_t *f, char *err, size_t errlen);

/* Zeroes *f. */
void ps_curve_files_wipe(ps_curve_files_t *f);

/*
 * Reads the keys a process of role needs from dir: its keypair (the
 * scheduler's is job.key) and job.pub, server.pub, worker.pub. Returns 0 and
 * *out (caller owns the result; destroy with ps_curve_destroy(), or hand it
 * to ps_ctx_secure()), or PS_EINVAL (a file missing, malformed, not
 * owner-only: "key file DIR/worker.key may be read by others (mode 0644);
 * chmod 600 it") / PS_ENOTSUP (no CURVE in libzmq) with the reason in err.
 */
int ps_curve_load(const char *dir, ps_role_t role, ps_curve_t **out, char *err,
                  size_t errlen);

/*
 * A role's start: with secure, loads the keys of role from dir and makes ctx
 * secure (ps_ctx_secure()) before any socket of it is made; without, does
 * nothing. Returns 0, or a PS_E* with a one-line reason in err.
 */
int ps_curve_secure_ctx(ps_ctx_t *ctx, int secure, const char *dir, ps_role_t role,
                        char *err, size_t errlen);

/* Stops its ZAP thread, if any, and frees; NULL-safe; sets *c to NULL. */
void ps_curve_destroy(ps_curve_t **c);

/* The Z85 public key this process serves with (its keypair's). Borrowed. */
const char *ps_curve_public(const ps_curve_t *c);

/* Connections the ZAP handler refused so far. Thread-safe. */
uint64_t ps_curve_refused(const ps_curve_t *c);

/*
 * The --secure and --keys DIR entries of the roles' flag tables (one
 * definition for the scheduler, the server and the worker; dst holds the
 * default and must outlive the table), and their check after parsing: with
 * --secure, --keys must name a directory whose keys for role load (the
 * file's reason as above); --keys without --secure is refused, so that a job
 * meant to be private is not plain by a forgotten flag. Returns 0 or
 * PS_EINVAL / PS_ENOTSUP with a one-line reason in err.
 */
ps_flag_t ps_curve_secure_flag(int *dst);
ps_flag_t ps_curve_keys_flag(const char **dst);
int ps_curve_check_flags(int secure, const char *keys, ps_role_t role, char *err,
                         size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
