/*
 * scheduler/flags.h - shardps-scheduler's flags: the one table.
 *
 * The table shardps-scheduler parses (and prints --help from), and the one
 * shardps-launch reads to know which job flags it forwards to the scheduler.
 * docs/usage.md's table of the scheduler's flags is checked against --help by
 * tests/integration/test_flags_doc.sh. This module parses nothing itself
 * (common/config.h does) and runs nothing.
 */
#ifndef PS_SCHEDULER_FLAGS_H
#define PS_SCHEDULER_FLAGS_H

#include <stddef.h>

#include "common/config.h"
#include "scheduler/scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PS_SCHEDULER_PROG "shardps-scheduler"
#define PS_SCHEDULER_ABOUT                                                               \
    "The shardps scheduler: waits for the servers and workers, assigns key ranges,\n"  \
    "runs the job and ends it."
/* Entries in the table. */
#define PS_SCHEDULER_NFLAGS 51

/* What the flags set. Strings are borrowed from argv or environ. */
typedef struct {
    ps_scheduler_config_t cfg; /* cfg.job complete after ps_scheduler_flags_check() */
    const char *model;         /* --model, copied into cfg.job */
    const char *hidden;        /* --hidden, copied into cfg.job ("" = the default) */
    const char *mode;          /* --mode, parsed into cfg.job */
    const char *secret_file;   /* --secret-file, read into cfg.secret */
    const char *optimizer;     /* --optimizer, copied into cfg.job */
    const char *wire;          /* --wire, parsed into cfg.job.wire */
    const char *compress;      /* --compress, parsed into cfg.job.topk */
    const char *ring_rows;     /* --ring-rows, parsed into cfg.job.ring_rows */
    const char *schedule;      /* --lr-schedule, parsed into cfg.job.schedule */
    const char *straggler;     /* --straggler RANK:FACTOR; NULL = none */
    int seed;                  /* --seed */
    int max_steps;             /* --max-steps */
    int max_rows;              /* --max-rows */
    int warmup;                /* --warmup-steps */
    const char *log_level;     /* --log-level, for ps_log_set_level_flag() */
    const char *log_format;    /* --log-format, for ps_log_set_format_flag() */
    const char *checkpoint_every; /* --checkpoint-every N (steps) or Ns (seconds) */
    const char *resume_or_start;  /* --resume-or-start DIR: into cfg.resume, with
                                     cfg.resume_or_start */
    const char *resume_override;  /* --resume-override F1,F2: into cfg.resume_override */
    const char *on_no_progress;   /* --on-no-progress fail|warn: into cfg.no_progress_warn */
} ps_scheduler_flags_t;

/* Fills *f with the defaults (what --help shows). */
void ps_scheduler_flags_init(ps_scheduler_flags_t *f);

/* Writes the table into out[0..PS_SCHEDULER_NFLAGS) and returns its length.
 * Each entry's destination is a field of *f (borrowed: f must outlive the
 * table). Thread-safe for distinct f. */
size_t ps_scheduler_flags_table(ps_scheduler_flags_t *f, ps_flag_t *out);

/* After parsing: turns the text forms into f->cfg.job and checks the job and
 * the cluster (common/job.h) and the timeouts. Returns 0, or PS_EINVAL with a
 * one-line reason in err (the caller prints "PROG: error: REASON"). */
int ps_scheduler_flags_check(ps_scheduler_flags_t *f, char *err, size_t errlen);

/* After ps_scheduler_flags_check(): where the job writes on this host
 * (--summary, --endpoint-file, --checkpoint-dir), checked now so a typo
 * cannot cost the run, and --bind's syntax. Returns 0, or PS_EINVAL with
 * "--NAME PATH: why" in err. (Not part of the job's configuration: a
 * launcher hashing the job flags on another host skips it.) */
int ps_scheduler_flags_check_outputs(const ps_scheduler_flags_t *f, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
