/*
 * deploy/plot.h - PNG plots with gnuplot: a script (data inline) is written
 * beside its PNG and run. Shared by shardps-bench and the launcher's per-run
 * plots; a missing gnuplot costs the PNGs (said once), never the data files.
 */
#ifndef PS_DEPLOY_PLOT_H
#define PS_DEPLOY_PLOT_H

#include "common/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The lines every script starts with: a w x h PNG at DIR/NAME.png. prog
 * names the program in the script's first comment. */
void ps_plot_header(ps_text_t *out, const char *prog, const char *dir, const char *name, int w,
                    int h);

/* Writes DIR/NAME.gp and runs gnuplot on it (its output to DIR/gnuplot.log,
 * removed when gnuplot succeeds).
 * Returns 0, PS_ENOENT when gnuplot is not installed (said once on stderr,
 * prefixed by prog; the script is still written), or PS_EIO. */
int ps_plot_run(const char *prog, const char *dir, const char *name, const char *script);

#ifdef __cplusplus
}
#endif
#endif
