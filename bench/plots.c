/*
 * bench/plots.c - shardps-bench's plots: a string builder for gnuplot
 * scripts, run into PNGs that go on the results page (page.c).
 *
 * A missing gnuplot costs the PNGs, never the tables.
 */
#include "bench/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "deploy/plot.h"

/* ---- growable string ---------------------------------------------------- */

void ps_bench_str_addf(ps_bench_str_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ps_text_vprintf(s, fmt, ap);
    va_end(ap);
}

const char *ps_bench_str_get(const ps_bench_str_t *s)
{
    return s->p ? s->p : "";
}

void ps_bench_str_fini(ps_bench_str_t *s)
{
    free(s->p);
    memset(s, 0, sizeof *s);
}

/* ---- plots --------------------------------------------------------------- */

void ps_bench_plot_header(ps_bench_str_t *s, const ps_bench_page_t *page, const char *name,
                          int w, int h)
{
    ps_plot_header(s, "shardps-bench", ps_bench_page_dir(page), name, w, h);
}

int ps_bench_plot(ps_bench_page_t *page, const char *name, const char *script)
{
    int rc = ps_plot_run("shardps-bench", ps_bench_page_dir(page), name, script);
    if (rc == 0) {
        ps_bench_page_addf(page, "![%s](%s.png)\n\n", name, name);
    }
    return rc;
}

/* The x axis of a plot against payload size: log2, tics named 4K, 1M, ... */
void ps_bench_plot_sizes(ps_bench_str_t *gp, const long *sizes, int nsizes,
                         const char *ylabel)
{
    ps_bench_str_addf(gp,
                      "set logscale x 2\nset xlabel 'payload'\nset ylabel '%s'\n"
                      "set yrange [0:*]\nset xtics (",
                      ylabel);
    for (int i = 0; i < nsizes; i++) {
        char name[32];
        ps_bench_size_name(sizes[i], name, sizeof name);
        ps_bench_str_addf(gp, "%s'%s' %ld", i ? ", " : "", name, sizes[i]);
    }
    long lo = sizes[0], hi = sizes[0];
    for (int i = 1; i < nsizes; i++) {
        lo = sizes[i] < lo ? sizes[i] : lo;
        hi = sizes[i] > hi ? sizes[i] : hi;
    }
    /* A margin, so the end points and their tic labels stay inside. */
    ps_bench_str_addf(gp, ")\nset xrange [%g:%g]\n", lo / 1.5, hi * 1.5);
}
