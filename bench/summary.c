/*
 * bench/summary.c - shardps-bench summary: docs/results/README.md, the one
 * table a reader starts from.
 *
 * It measures nothing: it reads the results pages the other subcommands
 * wrote (their CSVs where a page has one, else the page's own markdown
 * table) and writes one row per setting: the topic, the setting, the
 * figure, the page's theory beside it where the page has one, and the
 * commit and date that page was measured on, with a link to it. Which
 * table, rows and cells make each row is the list s_sources below, in
 * templates over the table's column names; a page whose columns no longer
 * match is an error, not a row quietly left out. It never judges a figure.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "common/config.h"
#include "common/error.h"

#define S_PROG "shardps-bench summary"

enum { SUM_COLS = 64, SUM_ROWS = 512, SUM_WORD = 256 };

/* One source: a table of a results page and the rows it gives. Templates:
 * {col} the row's cell in column col ("n/a" when empty), {vs:col} the
 * versus row's, {ratio:col} the row's over the versus row's, {#} the
 * page's "## " heading above the table, {net} the link rate of a
 * simulated network ("simulated network: RATE per link" above it). */
typedef struct {
    const char *topic;
    const char *page;    /* the results page, relative to --results */
    const char *csv;     /* its CSV, the figures' source; NULL: the page's table */
    const char *after;   /* the table is the first after a line starting so (NULL: any) */
    const char *has;     /* ... whose header has this column (NULL with csv) */
    const char *where;   /* "col=value;..." the rows kept (NULL: all) */
    const char *versus;  /* "col=value;..." the row compared with (templates allowed) */
    const char *setting; /* templates */
    const char *figure;
    const char *theory; /* NULL: the page gives none */
} sum_source_t;

#define S_VS_RING "PS vs ring"
#define S_CTR_VS "Where the parameter server wins"
/* The MLP's crossover tables: each parameter-server row, its ratios to the
 * ring's row of the same workers (on the row) and the ring's efficiency. */
#define S_XOVER_FIG                                                                        \
    "PS/ring samples/s {ps_vs_ring}; link efficiency {efficiency} ({bound}), ring "       \
    "{vs:efficiency} ({vs:bound})"
#define S_XOVER_THEORY "PS/ring link-bound samples/s {ps_vs_ring_bound}"
#define S_XOVER(csv, links, design)                                                        \
    {                                                                                      \
        S_VS_RING, "crossover.md", csv, NULL, NULL, "design=" design,                      \
            "design=ring;workers={workers}", "MLP, " links ", {workers} workers, " design,  \
            S_XOVER_FIG, S_XOVER_THEORY                                                    \
    }
#define S_XOVER_1G "crossover_1gbit_0.2ms_dilate40.csv"
#define S_XOVER_10G "crossover_10gbit_0.05ms_dilate400.csv"

/* A CPU run of `compute`: one model per run and section. */
#define S_COMPUTE_CPU(h)                                                                   \
    {                                                                                      \
        "compute vs PyTorch", "compute.md", NULL, h, "shardps/PyTorch", NULL, NULL,        \
            "{model}, CPU, {threads} thread, batch {batch}",                               \
            "shardps/PyTorch samples/s {shardps/PyTorch} (CPU time {shardps/PyTorch (CPU " \
            "time)})",                                                                     \
            NULL                                                                           \
    }

static const sum_source_t s_sources[] = {
    {S_VS_RING, "train_ctr.md", NULL, "### " S_CTR_VS, "dense/PS bytes (measured)", NULL,
     NULL, "click model, {net} links, {workers} workers: the dense ring",
     "dense/PS bytes {dense/PS bytes (measured)}; PS/dense samples/s {PS/dense samples/s}",
     "dense/PS bytes {dense/PS bytes (theory)}"},
    {S_VS_RING, "train_ctr.md", NULL, "### " S_CTR_VS, "allgather/PS bytes (measured)",
     NULL, NULL, "click model, {net} links, {workers} workers: the allgather ring",
     "allgather/PS bytes {allgather/PS bytes (measured)}; PS/allgather samples/s "
     "{PS/allgather samples/s}",
     "allgather/PS bytes {allgather/PS bytes (theory)}"},
    {S_VS_RING, "ctr_8x8/train_ctr.md", "ctr_8x8/train_ctr_vs.csv", NULL, NULL, NULL, NULL,
     "click model, {net} links, {workers} workers: the dense ring",
     "dense/PS bytes {measured_dense_vs_ps}; PS/dense samples/s {ps_vs_dense_speed}",
     "dense/PS bytes {theory_dense_vs_ps}"},
    {S_VS_RING, "ctr_8x8/train_ctr.md", "ctr_8x8/train_ctr_vs.csv", NULL, NULL, NULL, NULL,
     "click model, {net} links, {workers} workers: the allgather ring",
     "allgather/PS bytes {measured_allgather_vs_ps}; PS/allgather samples/s "
     "{ps_vs_allgather_speed}",
     "allgather/PS bytes {theory_allgather_vs_ps}"},
    S_XOVER(S_XOVER_1G, "1gbit links with 0.2 ms delay (dilated 40x)", "PS dedicated"),
    S_XOVER(S_XOVER_1G, "1gbit links with 0.2 ms delay (dilated 40x)", "PS colocated"),
    S_XOVER(S_XOVER_10G, "10gbit links with 0.05 ms delay (dilated 400x)", "PS dedicated"),
    S_XOVER(S_XOVER_10G, "10gbit links with 0.05 ms delay (dilated 400x)", "PS colocated"),
    S_COMPUTE_CPU("## MLP on the CPU"),
    S_COMPUTE_CPU("## CNN on the CPU"),
    {"compute vs PyTorch", "compute_ctr.md", "compute_ctr.csv", NULL, NULL, NULL, NULL,
     "{model}, {device}, {threads} thread, batch {batch}",
     "shardps/PyTorch samples/s {ratio_vs_torch} (CPU time {cpu_ratio_vs_torch})", NULL},
    {"compute vs PyTorch", "compute.md", NULL, "The same sweep in FP32", "shardps / strong",
     NULL, NULL, "{model}, GPU, batch {batch}, FP32",
     "shardps/PyTorch strong samples/s {shardps / strong} ({shardps samples/s} against "
     "{PyTorch strong}; eager {PyTorch eager})",
     NULL},
    {"replicas", "replicas.md", "replicas.csv", NULL, NULL, "round=median", NULL,
     "sync MLP, 3 servers x 2 workers, 2 cores",
     "with/without `--replicas 1` samples/s {ratio} (CPU {cpu_ratio})", NULL},
    {"--secure", "comm_secure.md", "comm_secure.csv", NULL, NULL, "payload=1M", NULL,
     "push+pull of {payload}, {servers} server(s), {inflight} in flight",
     "secure/plain GB/s {ratio} [{ratio_min}, {ratio_max}]", NULL},
    {"time to accuracy", "train.md", NULL, "### Training: mlp", "s to 0.85", "workers=2",
     NULL, "MLP, loopback, {mode}, {workers} workers",
     "s to 0.85: {s to 0.85} (final {final acc})", NULL},
    {"time to accuracy", "train_ctr.md", NULL, "### " S_CTR_VS, "PS s to AUC 0.59", NULL,
     NULL, "click model, {net} links, {workers} workers",
     "s to AUC 0.59: PS {PS s to AUC 0.59}, dense ring {dense s to AUC 0.59}, "
     "allgather ring {allgather s to AUC 0.59}",
     NULL},
    {"time to accuracy", "ctr_8x8/train_ctr.md", "ctr_8x8/train_ctr.csv", NULL, NULL, NULL,
     NULL, "click model, {net} links, {mode}, {workers} workers",
     "s to the page's AUC target: {time_to_target_s} (final {final_auc})", NULL},
};

/* One table read: its header, its rows, and the page's facts about it. */
typedef struct {
    char *page_text, *csv_text; /* the files, split in place */
    char *head[SUM_COLS];
    int ncols;
    char *cell[SUM_ROWS][SUM_COLS];
    int nrows;
    char commit[SUM_WORD], date[SUM_WORD], heading[SUM_WORD], net[SUM_WORD];
} sum_table_t;

static char *s_trim(char *s)
{
    while (*s == ' ') {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\r')) {
        s[--n] = '\0';
    }
    return s;
}

/* Splits a CSV line (sep ',', cells never hold commas) or a markdown table
 * row (sep '|', "| a | b |") in place. Returns the count; cells past cap
 * are left out. */
static int s_split(char *line, char sep, char **cells, int cap)
{
    int n = 0;
    if (sep == '|') {
        line++;
    }
    for (;;) {
        char *end = strchr(line, sep);
        if (end) {
            *end = '\0';
        }
        if (end || sep != '|') {
            if (n == cap) {
                return n;
            }
            cells[n++] = s_trim(line);
        }
        if (!end) {
            return n;
        }
        line = end + 1;
    }
}

/* The first word of s into out. */
static void s_word(const char *s, char *out, size_t cap)
{
    snprintf(out, cap, "%.*s", (int)strcspn(s, " "), s);
}

/* Takes what a page line says about the figures below it: a bench header's
 * "- Commit:" and "- Date:", a hand page's "| commit | date |" table's row
 * (*meta_row: that row is next), a "## " heading, or a simulated network's
 * link rate in a table's heading. */
static void s_meta(sum_table_t *t, char *line, int *meta_row)
{
    if (!strncmp(line, "- Commit: ", 10)) {
        s_word(line + 10, t->commit, sizeof t->commit);
    } else if (!strncmp(line, "- Date: ", 8)) {
        s_word(line + 8, t->date, sizeof t->date);
    } else if (!strncmp(line, "## ", 3)) {
        snprintf(t->heading, sizeof t->heading, "%s", line + 3);
    } else if (line[0] == '#' && strstr(line, "simulated network: ")) {
        s_word(strstr(line, "simulated network: ") + 19, t->net, sizeof t->net);
    } else if (!strncmp(line, "| commit | date |", 17)) {
        *meta_row = 1;
    } else if (*meta_row && line[0] == '|' && strncmp(line, "|---", 4)) {
        char *cells[SUM_COLS];
        if (s_split(line, '|', cells, SUM_COLS) >= 2) {
            s_word(cells[0], t->commit, sizeof t->commit);
            s_word(cells[1], t->date, sizeof t->date);
        }
        *meta_row = 0;
    }
}

/* Reads t->page_text up to the source's table: the facts above it and,
 * without a CSV, the table itself. Returns 0 or PS_ENOENT. */
static int s_scan_page(sum_table_t *t, const sum_source_t *src)
{
    int after = !src->after, meta_row = 0, in = 0;
    char *next;
    for (char *line = t->page_text; line; line = next) {
        if ((next = strchr(line, '\n'))) {
            *next++ = '\0';
        }
        if (in) {
            if (line[0] != '|') {
                return 0;
            }
            if (strncmp(line, "|---", 4) && t->nrows < SUM_ROWS) {
                s_split(line, '|', t->cell[t->nrows++], t->ncols);
            }
            continue;
        }
        if (src->after && !strncmp(line, src->after, strlen(src->after))) {
            after = 1;
        }
        if (!src->has && line[0] == '|') {
            return 0; /* a CSV's page: its header is all we need */
        }
        if (after && line[0] == '|' && !meta_row &&
            strncmp(line, "| commit | date |", 17)) {
            t->ncols = s_split(line, '|', t->head, SUM_COLS);
            for (int c = 0; c < t->ncols && !in; c++) {
                in = !strcmp(t->head[c], src->has);
            }
            continue;
        }
        s_meta(t, line, &meta_row);
    }
    return in ? 0 : PS_ENOENT;
}

/* Reads the CSV t->csv_text: its header line and its rows. */
static void s_read_csv(sum_table_t *t)
{
    char *next = strchr(t->csv_text, '\n');
    if (next) {
        *next++ = '\0';
    }
    t->ncols = s_split(t->csv_text, ',', t->head, SUM_COLS);
    for (char *line = next; line && *line && t->nrows < SUM_ROWS; line = next) {
        if ((next = strchr(line, '\n'))) {
            *next++ = '\0';
        }
        s_split(line, ',', t->cell[t->nrows++], t->ncols);
    }
}

/* Loads the source's table from DIR. Returns 0, or 1 after a line on stderr. */
static int s_load(const char *dir, const sum_source_t *src, sum_table_t *t)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, src->page);
    if (ps_bench_read_file(path, &t->page_text) != 0) {
        fprintf(stderr, S_PROG ": error: cannot read %s\n", path);
        return 1;
    }
    if (s_scan_page(t, src) != 0) {
        fprintf(stderr, S_PROG ": error: %s: no table with a column '%s' after '%s'\n",
                path, src->has, src->after ? src->after : "the start");
        return 1;
    }
    if (src->csv) {
        snprintf(path, sizeof path, "%s/%s", dir, src->csv);
        if (ps_bench_read_file(path, &t->csv_text) != 0) {
            fprintf(stderr, S_PROG ": error: cannot read %s\n", path);
            return 1;
        }
        s_read_csv(t);
    }
    return 0;
}

/* Row r's cell in column name: "n/a" when empty or missing from a short
 * row; NULL when the table has no such column. */
static const char *s_cell(const sum_table_t *t, int r, const char *name)
{
    for (int c = 0; c < t->ncols; c++) {
        if (!strcmp(t->head[c], name)) {
            const char *v = r >= 0 ? t->cell[r][c] : NULL;
            return v && *v ? v : "n/a";
        }
    }
    return NULL;
}

/* One placeholder's value into buf. Returns 0, or PS_EINVAL: no such column. */
static int s_value(const sum_table_t *t, int r, int vs, const char *name, char *buf,
                   size_t cap)
{
    const char *v;
    if (!strcmp(name, "#")) {
        v = t->heading;
    } else if (!strcmp(name, "net")) {
        v = t->net[0] ? t->net : NULL;
    } else if (!strncmp(name, "vs:", 3)) {
        v = s_cell(t, vs, name + 3);
    } else if (!strncmp(name, "ratio:", 6)) {
        const char *a = s_cell(t, r, name + 6), *b = s_cell(t, vs, name + 6);
        char *end_a, *end_b;
        double x = a ? strtod(a, &end_a) : 0, y = b ? strtod(b, &end_b) : 0;
        v = a && b ? "n/a" : NULL;
        if (a && b && *end_a == '\0' && *end_b == '\0' && end_a != a && y != 0) {
            snprintf(buf, cap, "%.2f", x / y);
            return 0;
        }
    } else {
        v = s_cell(t, r, name);
    }
    if (!v) {
        return PS_EINVAL;
    }
    snprintf(buf, cap, "%s", v);
    return 0;
}

/* Expands a template for row r (vs: the versus row, -1 when none) into out.
 * Returns 0, or 1 after a line on stderr naming the missing column. */
static int s_expand(const sum_table_t *t, const char *page, int r, int vs, const char *tpl,
                    ps_bench_str_t *out)
{
    for (const char *p = tpl; *p;) {
        const char *end = *p == '{' ? strchr(p, '}') : NULL;
        if (!end) {
            size_t n = strcspn(p + 1, "{") + 1;
            ps_text_append(out, p, n);
            p += n;
            continue;
        }
        char name[SUM_WORD], val[SUM_WORD];
        snprintf(name, sizeof name, "%.*s", (int)(end - p - 1), p + 1);
        if (s_value(t, r, vs, name, val, sizeof val) != 0) {
            fprintf(stderr, S_PROG ": error: %s: no column '%s'\n", page, name);
            return 1;
        }
        ps_bench_str_addf(out, "%s", val);
        p = end + 1;
    }
    return 0;
}

/* Does row r match filter "col=value;..."? */
static int s_match(const sum_table_t *t, int r, const char *filter)
{
    char buf[1024], *save = NULL;
    snprintf(buf, sizeof buf, "%s", filter);
    for (char *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        const char *v = eq ? (*eq = '\0', s_cell(t, r, kv)) : NULL;
        if (!v || strcmp(v, eq + 1)) {
            return 0;
        }
    }
    return 1;
}

/* The row compared with row r: the first that matches the source's versus
 * filter, expanded for r; -1 when none. */
static int s_versus(const sum_table_t *t, const sum_source_t *src, int r)
{
    ps_bench_str_t filter = {0};
    int vs = -1;
    if (s_expand(t, src->page, r, -1, src->versus, &filter) == 0) {
        for (int i = 0; i < t->nrows && vs < 0; i++) {
            vs = i != r && s_match(t, i, ps_bench_str_get(&filter)) ? i : -1;
        }
    }
    ps_bench_str_fini(&filter);
    return vs;
}

/* Appends the source's rows to the summary table md. Returns 0 or 1. */
static int s_source_rows(const char *dir, const sum_source_t *src, ps_bench_str_t *md)
{
    sum_table_t *t = calloc(1, sizeof *t);
    int rc = !t || s_load(dir, src, t), rows = 0;
    for (int r = 0; !rc && r < t->nrows; r++) {
        if (src->where && !s_match(t, r, src->where)) {
            continue;
        }
        int vs = src->versus ? s_versus(t, src, r) : -1;
        if (src->versus && vs < 0) {
            continue; /* nothing to compare this row with */
        }
        ps_bench_str_addf(md, "| %s | ", src->topic);
        rc = s_expand(t, src->page, r, vs, src->setting, md);
        ps_bench_str_addf(md, " | ");
        rc = rc || s_expand(t, src->page, r, vs, src->figure, md);
        ps_bench_str_addf(md, " | ");
        rc = rc || s_expand(t, src->page, r, vs, src->theory ? src->theory : "n/a", md);
        ps_bench_str_addf(md, " | %s | %s | [%s](%s) |\n", t->commit, t->date, src->page,
                          src->page);
        rows++;
    }
    if (!rc && rows == 0) {
        fprintf(stderr, S_PROG ": error: %s/%s: no row matches '%s'\n", dir, src->page,
                src->where ? src->where : "");
        rc = 1;
    }
    if (t) {
        free(t->page_text);
        free(t->csv_text);
    }
    free(t);
    return rc;
}

/* The page's text: what it is, then the table. Returns 0 or 1. */
static int s_summary(const char *dir, ps_bench_str_t *md)
{
    ps_bench_str_addf(
        md,
        "### Every results page in one table\n\n"
        "Each row one setting of a results page in this directory: its figure (each ratio "
        "named, A/B), the page's theory beside it where the page has one, and the "
        "commit and date that page was measured on, which differ from page to page and "
        "from this page's own ([what the columns mean](../benchmarks.md#summary)). "
        "Figures come from the page's CSV where it has one, else from its table; "
        "regenerate this page after any of them with `shardps-bench summary`.\n\n"
        "| topic | setting | measured | theory | commit | date | page |\n"
        "|---|---|---|---|---|---|---|\n");
    int rc = 0;
    for (size_t i = 0; i < sizeof s_sources / sizeof s_sources[0]; i++) {
        rc |= s_source_rows(dir, &s_sources[i], md);
    }
    ps_bench_str_addf(md, "\n");
    return rc;
}

int ps_bench_summary_main(int argc, char **argv)
{
    const char *dir = "docs/results", *out = NULL;
    ps_flag_t flags[] = {
        {"results", PS_FLAG_STR, &dir, "DIR", "the results pages to read"},
        {"out", PS_FLAG_STR, &out, "FILE", "the page to write (default: DIR/README.md)"},
    };
    int rc =
        ps_config_parse_argv(S_PROG,
                             "Reads the results pages in --results (their CSVs where they "
                             "have them) and writes\none summary table of them, a row per "
                             "setting, each linked to its page.",
                             flags, sizeof flags / sizeof flags[0], argc, argv, NULL);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, S_PROG ": error: --results %s is not a directory\n", dir);
        return 2;
    }
    char path[PATH_MAX], name[PATH_MAX];
    if (out) {
        snprintf(path, sizeof path, "%s", out);
    } else {
        snprintf(path, sizeof path, "%s/README.md", dir);
    }
    char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (!dot || strcmp(dot, ".md") || (slash && dot < slash)) {
        fprintf(stderr, S_PROG ": error: --out %s: expected a FILE.md\n", path);
        return 2;
    }
    *dot = '\0';
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : path);
    if (slash) {
        *slash = '\0';
    }
    ps_bench_str_t md = {0};
    rc = s_summary(dir, &md);
    ps_bench_page_t *page;
    if (ps_bench_page_new(slash ? path : ".", name, argc, argv, &page) != 0) {
        ps_bench_str_fini(&md);
        return 1;
    }
    ps_bench_page_addf(page, "%s", ps_bench_str_get(&md));
    ps_bench_page_destroy(&page);
    ps_bench_str_fini(&md);
    return rc ? 1 : 0;
}
