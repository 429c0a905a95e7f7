/*
 * common/trace.h - a bounded trace of one process, as Chrome trace-event JSON
 * (chrome://tracing, Perfetto).
 *
 * Spans (name, step, start, duration, thread) go into a fixed ring of events
 * allocated once: when it is full the oldest are overwritten, so memory and
 * the file stay bounded whatever the run's length. Only spans of steps in
 * [from, to) are kept. The file is written at the end (ps_trace_close) or
 * when the process gets SIGUSR1 (at its next ps_trace_poll). Each event is
 * one line of at most PS_TRACE_EVENT_BYTES bytes, so a file never exceeds
 * the --trace-kib budget the ring was sized from.
 *
 * Like the logger, the trace is process-wide: spans are recorded from any
 * thread (a slot is claimed with one atomic add) without a handle, so the
 * worker's client, the ring and the model need no plumbing. Timestamps are
 * this process's monotonic clock; the file records the offset to the
 * scheduler's clock (measured at registration) and `shardps-trace merge`
 * (ps_trace_merge) applies it, so several processes' files line up.
 */
#ifndef PS_COMMON_TRACE_H
#define PS_COMMON_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a span is. Names in the file: ps_trace_name(). */
typedef enum {
    PS_TRACE_STEP,      /* worker: one training step */
    PS_TRACE_FORWARD,   /* worker: forward and the loss */
    PS_TRACE_BACKWARD,  /* worker: backward */
    PS_TRACE_PUSH,      /* worker: sending a push (arg: its first key) */
    PS_TRACE_PULL,      /* worker: a pull, issued to answered */
    PS_TRACE_WAIT,      /* worker: blocked on pushes and the pull (or the ring) */
    PS_TRACE_RING,      /* worker: one ring step of the allreduce (arg: ring step) */
    PS_TRACE_RECEIVE,   /* server: handling one message (arg: its type) */
    PS_TRACE_VALIDATE,  /* server: checking it */
    PS_TRACE_APPLY,     /* server: a push that completed a step: sum and update */
    PS_TRACE_REPLY,     /* server: sending an ack or a pull's part (arg: worker) */
    PS_TRACE_PUSH_MSG,  /* worker: one push message handed to its server's socket (arg: its
                           first key; the key tells the server) */
    PS_TRACE_PULL_MSG,  /* worker: one pull message, the same */
    PS_TRACE_ACK,       /* worker: a push's ack in (arg: the push's first key) */
    PS_TRACE_PULL_PART, /* worker: a pull reply's part in (arg: its first key) */
    PS_TRACE_NNAMES
} ps_trace_name_t;

/* Bytes one event line takes at most; the ring holds kib * 1024 / this events. */
enum { PS_TRACE_EVENT_BYTES = 192 };

/* The step of the span is the process's current one (ps_trace_step). */
#define PS_TRACE_CURRENT_STEP INT64_MIN

/* The flags of a role that traces: --trace FILE, --trace-steps A:B and
 * --trace-kib N. dst hold the defaults on entry; borrowed. */
ps_flag_t ps_trace_file_flag(const char **dst);
ps_flag_t ps_trace_steps_flag(const char **dst);
ps_flag_t ps_trace_kib_flag(int *dst);

/* Checks --trace-steps (NULL: every step) and --trace-kib. Returns 0 or
 * PS_EINVAL with a one-line reason in err. */
int ps_trace_check_flags(const char *steps, int kib, char *err, size_t errlen);

/*
 * Starts tracing into path (NULL: tracing stays off, returns 0): steps
 * "A:B" (spans of steps A <= s < B; NULL = every step), a budget of kib KiB.
 * Installs a SIGUSR1 handler. Returns 0, or PS_EINVAL / PS_ENOMEM with a
 * one-line reason in err. Call once, from main(), before threads start.
 */
int ps_trace_open(const char *path, const char *steps, int kib, char *err, size_t errlen);

/* Names the process in the file ("W0") and sets its clock offset to the
 * scheduler's (ps_link_clock_offset). */
void ps_trace_set_process(const char *tag, double clock_offset);

/* Whether spans are being recorded at all: callers skip taking times when not. */
int ps_trace_enabled(void);

/* The process's current step (the worker's training step), for spans that
 * pass PS_TRACE_CURRENT_STEP. */
void ps_trace_step(int64_t step);

/* Records a span [t0, t1] (ps_now() seconds) of step with an integer arg.
 * Thread-safe; does nothing when tracing is off or the step is outside. */
void ps_trace_span(ps_trace_name_t name, int64_t step, double t0, double t1, int64_t arg);

/* A span being timed: ps_trace_span_begin() takes its start, and
 * ps_trace_span_end() records it, so a caller keeps no timestamps of its
 * own. Plain data, kept on the caller's stack; when tracing is off neither
 * call reads the clock. */
typedef struct {
    ps_trace_name_t name; /* what is timed */
    int64_t step;         /* its step, or PS_TRACE_CURRENT_STEP */
    int64_t arg;          /* its integer argument (see ps_trace_name_t) */
    double t0;            /* ps_now() seconds at the start */
    int on;               /* tracing was on at the start: the span is recorded */
} ps_trace_span_t;

/* Starts timing a span of name for step with arg. Thread-safe. */
ps_trace_span_t ps_trace_span_begin(ps_trace_name_t name, int64_t step, int64_t arg);

/* Records sp from its start to now (ps_trace_span). Thread-safe. */
void ps_trace_span_end(const ps_trace_span_t *sp);

/* Writes the file now if SIGUSR1 arrived since the last call (from a loop). */
void ps_trace_poll(void);

/* Writes the file and stops tracing. Returns 0 or PS_EIO (logged). */
int ps_trace_close(void);

/* The name of a span as written in the file. */
const char *ps_trace_name(ps_trace_name_t name);

/* The file a role writes when every role of a job traces into one path (a
 * launcher's --trace): path with ".TAG" before its extension (t.json, W1:
 * t.W1.json). */
void ps_trace_part_path(const char *path, const char *tag, char *out, size_t cap);

/*
 * Merges trace files written by ps_trace_close into one at out: every
 * event's timestamp shifted by its file's clock offset, so all are on the
 * scheduler's clock. Returns 0, or PS_EIO / PS_EINVAL with a one-line reason.
 */
int ps_trace_merge(const char *const *in, int n, const char *out, char *err, size_t errlen);

/*
 * Merges into path the parts of it (ps_trace_part_path) that the roles
 * tags[0..n) wrote; a role that wrote none (a failed node) is left out.
 * *merged: how many parts were merged (0: none found, path untouched).
 * Returns 0, or PS_ENOMEM / PS_EIO / PS_EINVAL with a one-line reason.
 */
int ps_trace_merge_parts(const char *path, const char *const *tags, int n, int *merged,
                         char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
