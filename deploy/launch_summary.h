/*
 * deploy/launch_summary.h - the job's summary file, however the job ended.
 *
 * The scheduler writes the --summary file when it ends the job; once every
 * child exited the launcher writes it again: the scheduler's document, with
 * how the launcher saw the end (the status and cause of a child's death, a
 * signal or --timeout, which the scheduler, stopped by SIGTERM, cannot
 * know), or a document of its own when the scheduler wrote none (killed -9,
 * never started the job). So the file says how every job ended.
 */
#ifndef PS_DEPLOY_LAUNCH_SUMMARY_H
#define PS_DEPLOY_LAUNCH_SUMMARY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How the launcher saw the job end. Borrowed for the call. */
typedef struct {
    const char *scheduler_file; /* what the scheduler wrote (may be missing) */
    const char *path;           /* the --summary to write (may be scheduler_file) */
    const char *job_id;         /* the job's id, for a document of our own */
    int exit_code;              /* the launcher's exit status */
    const char *why;            /* the launcher's cause when exit_code != 0 */
} ps_launch_summary_t;

/*
 * Writes s->path: the scheduler's summary with "exit_code" set to the
 * launcher's; when the launcher failed the job and the scheduler's file is
 * missing or says "ok" or "interrupted" (it was stopped, not the one that
 * judged), "status" is "interrupted" (a signal) or "failed", and "failure"
 * the launcher's cause. The final "failure" goes into cause (cap bytes; ""
 * when none). Returns 0 when the scheduler's file was there and written on,
 * 1 when it was missing (a document of our own written), or PS_EIO after
 * logging why the file could not be written.
 */
int ps_launch_summary_write(const ps_launch_summary_t *s, char *cause, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
