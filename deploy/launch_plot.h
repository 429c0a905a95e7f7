/*
 * deploy/launch_plot.h - shardps-launch's per-run plots: while the job runs
 * the launcher asks the scheduler for its status (deploy/status.h) every
 * half second and keeps worker 0's step and loss and the workers' summed
 * samples/s; at the end it writes DIR/progress.csv and DIR/progress.png
 * (loss by step, test accuracy by epoch from the summary, samples/s over
 * time).
 */
#ifndef PS_DEPLOY_LAUNCH_PLOT_H
#define PS_DEPLOY_LAUNCH_PLOT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_launch_plot ps_launch_plot_t;

/* Plots into dir (which must exist). Caller owns the result; destroy with
 * ps_launch_plot_destroy(). Returns 0 or PS_ENOMEM. */
int ps_launch_plot_new(const char *dir, ps_launch_plot_t **out);
void ps_launch_plot_destroy(ps_launch_plot_t **p);

/* Called from the launcher's loop: asks the scheduler at endpoint (keys: a
 * --secure job's key directory, or NULL) when half a second has passed since
 * the last answer (waits at most 0.2 s). */
void ps_launch_plot_poll(ps_launch_plot_t *p, const char *endpoint, const char *keys,
                         double now);

/* Writes the CSV and the PNG; summary (or NULL) gives the test accuracy of
 * every epoch. Returns 0, or PS_EIO after logging why. */
int ps_launch_plot_write(ps_launch_plot_t *p, const char *summary);

#ifdef __cplusplus
}
#endif
#endif
