/*
 * bench/plots.c - shardps-bench's output: a string builder, CSV + markdown
 * tables written row by row, and gnuplot scripts run into PNGs.
 *
 * Every file is flushed as it grows, so a sweep cut short keeps what it
 * measured; a missing gnuplot costs the PNGs, never the tables.
 */
#include "bench/bench.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "deploy/plot.h"
#include "deploy/proc.h"

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

/* ---- output tables ------------------------------------------------------ */

struct ps_bench_table {
    FILE *csv;
    FILE *md;
    char md_path[PATH_MAX];
    int ncols;
    ps_bench_str_t notes; /* markdown paragraphs written after the table */
};

/* Number of comma-separated cells in text. */
static int s_cells(const char *text)
{
    int n = 1;
    for (const char *p = text; *p; p++) {
        n += *p == ',';
    }
    return n;
}

/* Writes text's comma-separated cells as one markdown row. */
static void s_md_row(FILE *f, const char *text, int blank_is_na)
{
    fputs("|", f);
    const char *p = text;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0 && blank_is_na) {
            fputs(" n/a |", f);
        } else {
            fprintf(f, " %.*s |", (int)n, p);
        }
        if (p[n] != ',') {
            break;
        }
        p += n + 1;
    }
    fputs("\n", f);
}

int ps_bench_table_new(const char *dir, const char *name, const char *title,
                       const char *columns, const char *headers, ps_bench_table_t **out)
{
    char path[PATH_MAX];
    ps_bench_table_t *t = calloc(1, sizeof *t);
    if (!t) {
        return PS_ENOMEM;
    }
    t->ncols = s_cells(columns);
    snprintf(path, sizeof path, "%s/%s.csv", dir, name);
    t->csv = fopen(path, "w");
    snprintf(t->md_path, sizeof t->md_path, "%s/%s.md", dir, name);
    t->md = fopen(t->md_path, "w");
    if (!t->csv || !t->md) {
        fprintf(stderr, "shardps-bench: error: cannot write %s: %s\n",
                t->csv ? t->md_path : path, strerror(errno));
        ps_bench_table_destroy(&t, 0);
        return PS_EIO;
    }
    fprintf(t->csv, "%s\n", columns);
    fprintf(t->md, "%s\n\n", title);
    s_md_row(t->md, headers ? headers : columns, 0);
    fputs("|", t->md);
    for (int i = 0; i < t->ncols; i++) {
        fputs("---|", t->md);
    }
    fputs("\n", t->md);
    fflush(t->csv);
    fflush(t->md);
    *out = t;
    return 0;
}

void ps_bench_table_rowf(ps_bench_table_t *t, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(t->csv, "%s\n", line);
    s_md_row(t->md, line, 1);
    fflush(t->csv);
    fflush(t->md);
}

void ps_bench_table_note(ps_bench_table_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ps_bench_str_addf(&t->notes, "\n");
    ps_text_vprintf(&t->notes, fmt, ap);
    ps_bench_str_addf(&t->notes, "\n");
    va_end(ap);
}

void ps_bench_table_destroy(ps_bench_table_t **tp, int echo)
{
    ps_bench_table_t *t = *tp;
    if (!t) {
        return;
    }
    if (t->md) {
        fputs(ps_bench_str_get(&t->notes), t->md);
    }
    if (t->csv) {
        fclose(t->csv);
    }
    int ok = t->md && fclose(t->md) == 0;
    if (ok && echo) {
        char *text = NULL;
        if (ps_bench_read_file(t->md_path, &text) == 0) {
            printf("\n%s", text);
            fflush(stdout);
        }
        free(text);
    }
    ps_bench_str_fini(&t->notes);
    free(t);
    *tp = NULL;
}

/* ---- plots --------------------------------------------------------------- */

void ps_bench_plot_header(ps_bench_str_t *s, const char *dir, const char *name, int w,
                          int h)
{
    ps_plot_header(s, "shardps-bench", dir, name, w, h);
}

int ps_bench_plot(const char *dir, const char *name, const char *script)
{
    return ps_plot_run("shardps-bench", dir, name, script);
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
