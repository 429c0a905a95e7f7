/*
 * scheduler/summary.h - the end-of-job summary.
 *
 * When the event loop ends the scheduler writes one "summary:" log line (a
 * finished job only) and, with --summary FILE, a JSON file, however the job
 * ended: ok, no_progress, failed, diverged or interrupted (a signal), with
 * the cause and the last step; its fields are in docs/observe.md. The
 * JSON is built in memory and written atomically, so a reader never sees half
 * of it. The summary reads the core through its ops (rows, view, facts) and
 * the rest from what the core hands it (ps_summary_from_t); it changes
 * nothing and sends nothing. Only scheduler/ includes this header.
 */
#ifndef PS_SCHEDULER_SUMMARY_H
#define PS_SCHEDULER_SUMMARY_H

#include <stdint.h>

#include "proto/codec.h"
#include "scheduler/ckpt.h"
#include "scheduler/failover.h"
#include "scheduler/identity.h"
#include "scheduler/module.h"
#include "scheduler/preflight.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the summary reads besides the core's rows, view and facts. Every
 * pointer is borrowed for the call. */
typedef struct {
    const ps_identity_t *id;         /* the job's id, configuration hash, build
                                        (scheduler/identity.h) */
    const ps_failover_t *failover;   /* replacements, replicas, spares
                                        (scheduler/failover.h) */
    const ps_preflight_t *preflight; /* the probes' results (scheduler/preflight.h);
                                        NULL: none, an empty "preflight" */
    int joins;                       /* workers that joined the running job */
    int restarts;                    /* scheduler restarts of this job */
    /* The scheduler's own bytes on the wire (header + payload frames) by
     * message type, sent and received by its sockets:
     * ps_ctx_bytes(ctx, sent, received) (proto/sock.h). */
    uint64_t sent[PS_BYTE_TYPES], received[PS_BYTE_TYPES];
    uint64_t secure_refused;         /* connections the scheduler's ZAP handler
                                        refused: ps_ctx_refused(ctx) */
    const ps_ckpt_t *ckpt;           /* the resume it made (scheduler/ckpt.h) */
    int signal;                      /* the signal that interrupted the job; 0 none */
    const char *no_progress;         /* a finished job at chance: why; NULL when not,
                                        or under --on-no-progress warn */
    int64_t last_step;               /* the furthest step a worker reported */
    int exit_code;                   /* the scheduler's exit status */
} ps_summary_from_t;

/* Whether a finished job made no progress: it trained at least one epoch
 * (the view's steps) and worker 0's last test accuracy is at most
 * PS_SUMMARY_CHANCE_ACCURACY (10 classes), its test AUC at most
 * PS_SUMMARY_CHANCE_AUC, or its training loss is not below a uniform
 * guess's over 10 classes (ln 10). Returns 1 with the reason in why, else 0. */
#define PS_SUMMARY_CHANCE_ACCURACY 0.15
#define PS_SUMMARY_CHANCE_AUC 0.52
int ps_summary_no_progress(const ps_sched_ops_t *ops, char *why, size_t cap);

/* Logs the summary line when the job finished (ops' phase FINISHED) and
 * writes ops->cfg->summary if set: the settings always, a finished job's
 * results, and how the job ended. Call once the event loop ended; reads
 * every row through ops->node. Returns 0, or PS_EIO when the file could not
 * be written (logged). One thread: the scheduler's loop. */
int ps_summary_write(const ps_sched_ops_t *ops, const ps_summary_from_t *from);

#ifdef __cplusplus
}
#endif
#endif
