/* deploy/plot.c - gnuplot scripts run into PNGs. */
#include "deploy/plot.h"

#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "common/error.h"
#include "deploy/proc.h"

void ps_plot_header(ps_text_t *out, const char *prog, const char *dir, const char *name, int w,
                    int h)
{
    ps_text_printf(out,
                   "# Written by %s; run with: gnuplot %s.gp\n"
                   "set terminal pngcairo size %d,%d font ',9' noenhanced\n"
                   "set output '%s/%s.png'\n"
                   "set grid\nset key top left\n",
                   prog, name, w, h, dir, name);
}

int ps_plot_run(const char *prog, const char *dir, const char *name, const char *script)
{
    static int warned;
    char gp[PATH_MAX], log[PATH_MAX], exe[PATH_MAX];
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, name);
    FILE *f = fopen(gp, "w");
    if (!f) {
        return PS_EIO;
    }
    fputs(script, f);
    if (fclose(f) != 0) {
        return PS_EIO;
    }
    if (ps_proc_find_exe("gnuplot", NULL, exe, sizeof exe) != 0) {
        if (!warned) {
            fprintf(stderr,
                    "%s: gnuplot is not installed (Debian: gnuplot-nox); no PNG plots, the "
                    "data files and the .gp scripts are written\n",
                    prog);
            warned = 1;
        }
        return PS_ENOENT;
    }
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    char *argv[] = {exe, gp, NULL};
    ps_proc_spec_t spec = {.argv = argv, .log_path = log, .prog = prog};
    char err[PATH_MAX + 64];
    int rc = ps_proc_run(&spec, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "%s: gnuplot failed on %s (%s; see %s)\n", prog, gp,
                rc < 0 ? err : "non-zero exit", log);
        return PS_EIO;
    }
    unlink(log); /* kept only to say why gnuplot failed */
    return 0;
}
