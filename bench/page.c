/*
 * bench/page.c - shardps-bench's results pages and the tables on them.
 *
 * A page is DIR/NAME.md: a header (the command that made it, the build's
 * commit, the date, the machine, the load at the start and at the end; one
 * function, s_header, writes it for every bench), then its sections in order:
 * tables, written row by row (each also as DIR/TABLE.csv), their notes, and
 * the plots' images. The page is rewritten whenever a table grows, so a sweep
 * cut short keeps what it measured; until the page is closed its load line
 * says the run is still going. It never judges a figure.
 */
#include "bench/bench.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "proto/codec.h"

enum { PAGE_MAX_SECTIONS = 32 };

struct ps_bench_page {
    char dir[PATH_MAX];     /* where the page, its CSVs and its plots go */
    char path[PATH_MAX];    /* DIR/NAME.md */
    char bench[64];         /* the subcommand (comm, train, ...): the title */
    ps_bench_str_t command; /* the command line that made it */
    char commit[128];       /* the build's `git describe` and protocol */
    char date[64];          /* when it started, UTC */
    char machine[256];      /* cores and CPU model */
    double load_start[3];   /* 1-, 5-, 15-minute load averages at the start */
    ps_bench_str_t sections[PAGE_MAX_SECTIONS]; /* markdown, in order */
    int nsections;
    int closed;             /* the run is over: the end load is final */
};

/* The 1-, 5- and 15-minute load averages, or -1 each. */
static void s_load(double load[3])
{
    if (getloadavg(load, 3) != 3) {
        load[0] = load[1] = load[2] = -1;
    }
}

/* Is arg safe in a shell command line without quotes? */
static int s_plain_word(const char *arg)
{
    if (!*arg) {
        return 0;
    }
    for (const char *p = arg; *p; p++) {
        if (!isalnum((unsigned char)*p) && !strchr("_./:,=+-@%", *p)) {
            return 0;
        }
    }
    return 1;
}

/* The header every page starts with: what made it, on what, under which load. */
static void s_header(const ps_bench_page_t *page, FILE *f)
{
    double end[3];
    s_load(end);
    fprintf(f, "# shardps-bench %s\n\n", page->bench);
    fprintf(f, "- Command: `%s`\n", ps_bench_str_get(&page->command));
    fprintf(f, "- Commit: %s\n", page->commit);
    fprintf(f, "- Date: %s\n", page->date);
    fprintf(f, "- Machine: %s\n", page->machine);
    fprintf(f, "- Load (1, 5, 15-minute averages): %.2f %.2f %.2f at the start, ",
            page->load_start[0], page->load_start[1], page->load_start[2]);
    if (page->closed) {
        fprintf(f, "%.2f %.2f %.2f at the end\n\n", end[0], end[1], end[2]);
    } else {
        fprintf(f, "%.2f %.2f %.2f so far (still running)\n\n", end[0], end[1], end[2]);
    }
}

/* Rewrites the page: the header, then every section. */
static int s_write(const ps_bench_page_t *page)
{
    FILE *f = fopen(page->path, "w");
    if (!f) {
        fprintf(stderr, "shardps-bench: error: cannot write %s: %s\n", page->path,
                strerror(errno));
        return PS_EIO;
    }
    s_header(page, f);
    for (int i = 0; i < page->nsections; i++) {
        fputs(ps_bench_str_get(&page->sections[i]), f);
    }
    return fclose(f) == 0 ? 0 : PS_EIO;
}

int ps_bench_page_new(const char *dir, const char *name, int argc, char **argv,
                      ps_bench_page_t **out)
{
    *out = NULL;
    ps_bench_page_t *page = calloc(1, sizeof *page);
    if (!page) {
        return PS_ENOMEM;
    }
    snprintf(page->dir, sizeof page->dir, "%s", dir);
    snprintf(page->bench, sizeof page->bench, "%s", argc > 0 ? argv[0] : name);
    snprintf(page->path, sizeof page->path, "%s/%s.md", dir, name);
    ps_bench_str_addf(&page->command, "shardps-bench");
    for (int i = 0; i < argc; i++) {
        ps_bench_str_addf(&page->command, s_plain_word(argv[i]) ? " %s" : " '%s'", argv[i]);
    }
    ps_codec_build_id(page->commit, sizeof page->commit);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(page->date, sizeof page->date, "%Y-%m-%d %H:%M:%S UTC", &tm);
    ps_bench_machine(page->machine, sizeof page->machine);
    s_load(page->load_start);
    int rc = s_write(page);
    if (rc != 0) {
        page->path[0] = '\0'; /* said once; not tried again */
        ps_bench_page_destroy(&page);
        return rc;
    }
    *out = page;
    return 0;
}

const char *ps_bench_page_dir(const ps_bench_page_t *page)
{
    return page->dir;
}

/* A new, empty section at the end; NULL when the page is full. */
static ps_bench_str_t *s_section(ps_bench_page_t *page)
{
    if (page->nsections == PAGE_MAX_SECTIONS) {
        fprintf(stderr, "shardps-bench: %s: more than %d sections; the rest is left out\n",
                page->path, PAGE_MAX_SECTIONS);
        return NULL;
    }
    return &page->sections[page->nsections++];
}

void ps_bench_page_addf(ps_bench_page_t *page, const char *fmt, ...)
{
    ps_bench_str_t *s = s_section(page);
    if (!s) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    ps_text_vprintf(s, fmt, ap);
    va_end(ap);
    s_write(page);
}

void ps_bench_page_destroy(ps_bench_page_t **pagep)
{
    ps_bench_page_t *page = *pagep;
    if (!page) {
        return;
    }
    page->closed = 1;
    if (page->path[0]) {
        s_write(page);
    }
    for (int i = 0; i < page->nsections; i++) {
        ps_bench_str_fini(&page->sections[i]);
    }
    ps_bench_str_fini(&page->command);
    free(page);
    *pagep = NULL;
}

/* ---- tables: a CSV file and a section of the page ---------------------------- */

/* Rewrites the page a table is on, if any. */
static void s_page_write(const ps_bench_page_t *page)
{
    if (page) {
        s_write(page);
    }
}

struct ps_bench_table {
    ps_bench_page_t *page; /* NULL: stdout only */
    ps_bench_str_t *md;    /* its section (own without a page); NULL: no room left */
    ps_bench_str_t own;    /* the markdown of a table without a page */
    FILE *csv;             /* NULL without a page */
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

/* Appends text's comma-separated cells as one markdown row. */
static void s_md_row(ps_bench_str_t *md, const char *text, int blank_is_na)
{
    ps_bench_str_addf(md, "|");
    const char *p = text;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0 && blank_is_na) {
            ps_bench_str_addf(md, " n/a |");
        } else {
            ps_bench_str_addf(md, " %.*s |", (int)n, p);
        }
        if (p[n] != ',') {
            break;
        }
        p += n + 1;
    }
    ps_bench_str_addf(md, "\n");
}

int ps_bench_table_new(ps_bench_page_t *page, const char *name, const char *title,
                       const char *columns, const char *headers, ps_bench_table_t **out)
{
    char path[PATH_MAX];
    ps_bench_table_t *t = calloc(1, sizeof *t);
    if (!t) {
        return PS_ENOMEM;
    }
    t->page = page;
    t->ncols = s_cells(columns);
    if (page) {
        t->csv =
            snprintf(path, sizeof path, "%s/%s.csv", page->dir, name) < (int)sizeof path
                ? fopen(path, "w")
                : NULL;
        if (!t->csv) {
            fprintf(stderr, "shardps-bench: error: cannot write %s: %s\n", path,
                    strerror(errno));
            free(t);
            return PS_EIO;
        }
        fprintf(t->csv, "%s\n", columns);
        fflush(t->csv);
    }
    t->md = page ? s_section(page) : &t->own;
    if (t->md) {
        ps_bench_str_addf(t->md, "%s\n\n", title);
        s_md_row(t->md, headers ? headers : columns, 0);
        ps_bench_str_addf(t->md, "|");
        for (int i = 0; i < t->ncols; i++) {
            ps_bench_str_addf(t->md, "---|");
        }
        ps_bench_str_addf(t->md, "\n");
        s_page_write(page);
    }
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
    if (t->csv) {
        fprintf(t->csv, "%s\n", line);
        fflush(t->csv);
    }
    if (t->md) {
        s_md_row(t->md, line, 1);
        s_page_write(t->page);
    }
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
        ps_bench_str_addf(t->md, "%s\n", ps_bench_str_get(&t->notes));
        s_page_write(t->page);
        if (echo) {
            printf("\n%s", ps_bench_str_get(t->md));
            fflush(stdout);
        }
    }
    if (t->csv) {
        fclose(t->csv);
    }
    ps_bench_str_fini(&t->notes);
    ps_bench_str_fini(&t->own);
    free(t);
    *tp = NULL;
}
