/*
 * scheduler/summary.h - the end-of-job summary.
 *
 * When the event loop ends the scheduler writes one "summary:" log line (a
 * finished job only) and, with --summary FILE, a JSON file, finished or
 * failed; its fields are documented in README.md, "The summary JSON". The
 * JSON is built in memory and written atomically, so a reader never sees half
 * of it.
 */
#ifndef PS_SCHEDULER_SUMMARY_H
#define PS_SCHEDULER_SUMMARY_H

#include "scheduler/scheduler_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Logs the summary line when s finished and writes s->cfg->summary if set.
 * Returns 0, or PS_EIO when the file could not be written (logged). */
int ps_summary_write(const ps_scheduler_t *s);

#ifdef __cplusplus
}
#endif
#endif
