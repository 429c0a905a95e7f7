/*
 * worker/flags.h - shardps-worker's flags: the one table.
 *
 * The table shardps-worker parses (and prints --help from), and the one
 * shardps-launch reads to know which flags it forwards to the workers. The
 * table in docs/usage.md is checked against --help by tests/integration/
 * test_flags_doc.sh. This module parses nothing itself (common/config.h does).
 */
#ifndef PS_WORKER_FLAGS_H
#define PS_WORKER_FLAGS_H

#include <stddef.h>

#include "common/config.h"
#include "kernels/threads.h"
#include "worker/worker.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PS_WORKER_PROG "shardps-worker"
#define PS_WORKER_ABOUT                                                                    \
    "A shardps worker: pulls weights, computes gradients on its data shard, pushes them\n" \
    "(or, in allreduce mode, sums them over a ring of workers and updates locally)."
/* Entries in the table. */
#define PS_WORKER_NFLAGS 43

/* What the flags set. Strings are borrowed from argv or environ. */
typedef struct {
    ps_worker_config_t cfg; /* the worker's configuration */
    const char *cpu_gemm;   /* --cpu-gemm, parsed into gemm */
    ps_cpu_gemm_t gemm;     /* after ps_worker_flags_check(): for ps_kernels_set_cpu_gemm() */
    const char *log_level;  /* --log-level, for ps_log_set_level_flag() */
    const char *log_format; /* --log-format, for ps_log_set_format_flag() */
    const char *on_nonfinite; /* --on-nonfinite, parsed into cfg.skip_nonfinite */
    const char *allreduce_backend; /* --allreduce-backend, parsed into cfg.allreduce_mpi */
    const char *conv;       /* --conv, parsed into cfg.conv_dnn */
} ps_worker_flags_t;

/* Fills *f with the defaults (what --help shows). */
void ps_worker_flags_init(ps_worker_flags_t *f);

/* Writes the table into out[0..PS_WORKER_NFLAGS) and returns its length.
 * Each entry's destination is a field of *f (borrowed: f must outlive the
 * table). Thread-safe for distinct f. */
size_t ps_worker_flags_table(ps_worker_flags_t *f, ps_flag_t *out);

/* After parsing: checks the values and parses f->cpu_gemm into f->gemm.
 * Returns 0, or PS_EINVAL with a one-line reason in err (the caller prints
 * "PROG: error: REASON"). */
int ps_worker_flags_check(ps_worker_flags_t *f, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
