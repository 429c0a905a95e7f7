/* common/metrics.c - counters, gauges and histograms in atomics; Prometheus text. */
#include "common/metrics.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

typedef enum { S_COUNTER, S_GAUGE, S_HISTOGRAM } s_kind_t;

struct ps_metric {
    char name[80];
    char labels[80];
    const char *help;
    s_kind_t kind;
    _Atomic uint64_t value; /* counter, gauge: a double's bits; histogram: the sum's */
    /* histogram only */
    int nbounds;
    double bounds[PS_METRICS_MAX_BUCKETS];
    _Atomic uint64_t buckets[PS_METRICS_MAX_BUCKETS + 1]; /* per bucket, not cumulative */
    _Atomic uint64_t count;
};

struct ps_metrics {
    ps_metric_t *series[PS_METRICS_MAX_SERIES];
    atomic_int n; /* published after the series is built: render reads it acquiring */
};

static double s_bits_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static uint64_t s_double_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

/* Adds v to a double kept as bits: a CAS loop (uncontended: one instruction). */
static void s_add_double(_Atomic uint64_t *a, double v)
{
    uint64_t old = atomic_load_explicit(a, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(a, &old, s_double_bits(s_bits_double(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

int ps_metrics_new(ps_metrics_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : PS_ENOMEM;
}

void ps_metrics_destroy(ps_metrics_t **mp)
{
    ps_metrics_t *m = *mp;
    if (!m) {
        return;
    }
    for (int i = 0; i < atomic_load(&m->n); i++) {
        free(m->series[i]);
    }
    free(m);
    *mp = NULL;
}

static ps_metric_t *s_register(ps_metrics_t *m, s_kind_t kind, const char *name,
                               const char *labels, const char *help)
{
    if (!m || atomic_load(&m->n) == PS_METRICS_MAX_SERIES) {
        return NULL;
    }
    ps_metric_t *x = calloc(1, sizeof *x);
    if (!x) {
        return NULL;
    }
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->labels, sizeof x->labels, "%s", labels ? labels : "");
    x->help = help;
    x->kind = kind;
    atomic_init(&x->value, s_double_bits(0.0));
    int n = atomic_load(&m->n);
    m->series[n] = x;
    atomic_store_explicit(&m->n, n + 1, memory_order_release);
    return x;
}

ps_metric_t *ps_metrics_counter(ps_metrics_t *m, const char *name, const char *labels,
                                const char *help)
{
    return s_register(m, S_COUNTER, name, labels, help);
}

ps_metric_t *ps_metrics_gauge(ps_metrics_t *m, const char *name, const char *labels,
                              const char *help)
{
    return s_register(m, S_GAUGE, name, labels, help);
}

ps_metric_t *ps_metrics_histogram(ps_metrics_t *m, const char *name, const char *labels,
                                  const char *help, const double *bounds, int nbounds)
{
    if (nbounds < 1 || nbounds > PS_METRICS_MAX_BUCKETS) {
        return NULL;
    }
    ps_metric_t *x = s_register(m, S_HISTOGRAM, name, labels, help);
    if (x) {
        x->nbounds = nbounds;
        memcpy(x->bounds, bounds, (size_t)nbounds * sizeof *bounds);
    }
    return x;
}

void ps_metric_add(ps_metric_t *x, double v)
{
    if (x) {
        s_add_double(&x->value, v);
    }
}

void ps_metric_set(ps_metric_t *x, double v)
{
    if (x) {
        atomic_store_explicit(&x->value, s_double_bits(v), memory_order_relaxed);
    }
}

void ps_metric_observe(ps_metric_t *x, double v)
{
    if (!x) {
        return;
    }
    int b = 0;
    while (b < x->nbounds && v > x->bounds[b]) {
        b++;
    }
    atomic_fetch_add_explicit(&x->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->count, 1, memory_order_relaxed);
    s_add_double(&x->value, v);
}

void ps_metric_load_values(ps_metric_t *x, const uint64_t *counts, int n, double sum)
{
    if (!x) {
        return;
    }
    uint64_t per[PS_METRICS_MAX_BUCKETS + 1] = {0}, total = 0;
    for (int v = 0; v < n; v++) {
        int b = 0;
        while (b < x->nbounds && (double)v > x->bounds[b]) {
            b++;
        }
        per[b] += counts[v];
        total += counts[v];
    }
    for (int b = 0; b <= x->nbounds; b++) {
        atomic_store_explicit(&x->buckets[b], per[b], memory_order_relaxed);
    }
    atomic_store_explicit(&x->count, total, memory_order_relaxed);
    atomic_store_explicit(&x->value, s_double_bits(sum), memory_order_relaxed);
}

double ps_metric_value(const ps_metric_t *x)
{
    if (!x) {
        return 0;
    }
    if (x->kind == S_HISTOGRAM) {
        return (double)atomic_load_explicit(&x->count, memory_order_relaxed);
    }
    return s_bits_double(atomic_load_explicit(&x->value, memory_order_relaxed));
}

/* "{labels}" or "" (extra: one more label, or NULL). */
static void s_labels(char *out, size_t cap, const char *labels, const char *extra)
{
    int has = labels[0] != '\0', more = extra && extra[0];
    if (!has && !more) {
        out[0] = '\0';
        return;
    }
    snprintf(out, cap, "{%s%s%s}", labels, has && more ? "," : "", more ? extra : "");
}

/* The value at quantile q, interpolated inside its bucket as Prometheus's
 * histogram_quantile() does; the top bucket answers its lower bound. */
static double s_quantile(const ps_metric_t *x, const uint64_t *counts, uint64_t total, double q)
{
    if (total == 0) {
        return 0;
    }
    double rank = q * (double)total, below = 0;
    for (int b = 0; b <= x->nbounds; b++) {
        double in = (double)counts[b];
        if (below + in >= rank && in > 0) {
            if (b == x->nbounds) {
                return x->bounds[b - 1];
            }
            double lo = b ? x->bounds[b - 1] : 0, hi = x->bounds[b];
            return lo + (hi - lo) * (rank - below) / in;
        }
        below += in;
    }
    return x->bounds[x->nbounds - 1];
}

static void s_render_histogram(const ps_metric_t *x, ps_text_t *out)
{
    uint64_t counts[PS_METRICS_MAX_BUCKETS + 1], total = 0;
    for (int b = 0; b <= x->nbounds; b++) {
        counts[b] = atomic_load_explicit(&x->buckets[b], memory_order_relaxed);
        total += counts[b];
    }
    char lab[200], le[48];
    uint64_t cum = 0;
    for (int b = 0; b <= x->nbounds; b++) {
        cum += counts[b];
        if (b < x->nbounds) {
            snprintf(le, sizeof le, "le=\"%g\"", x->bounds[b]);
        } else {
            snprintf(le, sizeof le, "le=\"+Inf\"");
        }
        s_labels(lab, sizeof lab, x->labels, le);
        ps_text_printf(out, "%s_bucket%s %llu\n", x->name, lab, (unsigned long long)cum);
    }
    s_labels(lab, sizeof lab, x->labels, NULL);
    ps_text_printf(out, "%s_sum%s %.9g\n", x->name, lab,
                   s_bits_double(atomic_load_explicit(&x->value, memory_order_relaxed)));
    ps_text_printf(out, "%s_count%s %llu\n", x->name, lab, (unsigned long long)total);
}

static const char *s_type(s_kind_t k)
{
    return k == S_COUNTER ? "counter" : k == S_GAUGE ? "gauge" : "histogram";
}

void ps_metrics_render(ps_metrics_t *m, ps_text_t *out)
{
    if (!m) {
        return;
    }
    char lab[200];
    const int n = atomic_load_explicit(&m->n, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        const ps_metric_t *x = m->series[i];
        int first = 1; /* a family is rendered at its first series */
        for (int j = 0; j < i && first; j++) {
            first = strcmp(m->series[j]->name, x->name) != 0;
        }
        if (!first) {
            continue;
        }
        ps_text_printf(out, "# HELP %s %s\n# TYPE %s %s\n", x->name, x->help, x->name,
                       s_type(x->kind));
        for (int j = i; j < n; j++) {
            const ps_metric_t *y = m->series[j];
            if (strcmp(y->name, x->name)) {
                continue;
            }
            if (y->kind == S_HISTOGRAM) {
                s_render_histogram(y, out);
            } else {
                s_labels(lab, sizeof lab, y->labels, NULL);
                ps_text_printf(out, "%s%s %.17g\n", y->name, lab, ps_metric_value(y));
            }
        }
        /* quantile estimates beside each histogram family */
        for (int q = 0; x->kind == S_HISTOGRAM && q < 2; q++) {
            const char *suffix = q ? "p99" : "p50";
            ps_text_printf(out, "# HELP %s_%s %s (%s, estimated from the buckets)\n"
                                "# TYPE %s_%s gauge\n",
                           x->name, suffix, x->help, suffix, x->name, suffix);
            for (int j = i; j < n; j++) {
                const ps_metric_t *y = m->series[j];
                if (strcmp(y->name, x->name)) {
                    continue;
                }
                uint64_t counts[PS_METRICS_MAX_BUCKETS + 1], total = 0;
                for (int b = 0; b <= y->nbounds; b++) {
                    counts[b] = atomic_load_explicit(&y->buckets[b], memory_order_relaxed);
                    total += counts[b];
                }
                s_labels(lab, sizeof lab, y->labels, NULL);
                ps_text_printf(out, "%s_%s%s %.9g\n", y->name, suffix, lab,
                               s_quantile(y, counts, total, q ? 0.99 : 0.5));
            }
        }
    }
}

/* The family a sample line belongs to: its name up to '{' or ' ', less a
 * histogram's _bucket/_sum/_count suffix when the family is a histogram. */
static size_t s_name_len(const char *line)
{
    size_t n = strcspn(line, "{ \n");
    return n;
}

/* Appends one sample line with the extra label put first. */
static void s_relabel(ps_text_t *out, const char *line, size_t len, const char *extra)
{
    size_t name = s_name_len(line);
    if (name >= len) {
        return;
    }
    if (line[name] == '{') {
        ps_text_printf(out, "%.*s{%s,%.*s\n", (int)name, line, extra,
                       (int)(len - name - 1), line + name + 1);
    } else {
        ps_text_printf(out, "%.*s{%s}%.*s\n", (int)name, line, extra, (int)(len - name),
                       line + name);
    }
}

/* Appends, from text, every sample line of family `family` (the lines after
 * its "# TYPE" line up to the next comment). */
static void s_family_samples(ps_text_t *out, const char *text, const char *family, size_t flen,
                             const char *extra)
{
    const char *p = text;
    int in = 0;
    while (p && *p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (p[0] == '#') {
            if (!strncmp(p, "# TYPE ", 7)) {
                in = len > 7 + flen && !strncmp(p + 7, family, flen) && p[7 + flen] == ' ';
            }
        } else if (in && len > 0) {
            s_relabel(out, p, len, extra);
        }
        p = end ? end + 1 : NULL;
    }
}

void ps_metrics_merge(ps_text_t *out, const char *const *texts, const char *const *labels,
                      int n)
{
    /* families in first-seen order: walk every text's TYPE lines, and emit a
     * family the first time it is met, with its samples from text i on. The
     * names emitted so far are kept (pointers into the texts), so that a
     * scrape of many nodes stays linear in their texts' size. */
    struct {
        const char *name;
        size_t len;
    } *done = NULL;
    size_t ndone = 0, cap = 0;
    for (int i = 0; i < n && !out->oom; i++) {
        const char *p = texts[i];
        const char *help = NULL;
        size_t help_len = 0;
        while (p && *p) {
            const char *end = strchr(p, '\n');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            if (!strncmp(p, "# HELP ", 7)) {
                help = p;
                help_len = len;
            } else if (!strncmp(p, "# TYPE ", 7)) {
                const char *fam = p + 7;
                size_t flen = strcspn(fam, " \n");
                int seen = 0;
                for (size_t k = 0; k < ndone && !seen; k++) {
                    seen = done[k].len == flen && !memcmp(done[k].name, fam, flen);
                }
                if (!seen && ndone == cap) {
                    cap = cap ? 2 * cap : 64;
                    void *grown = realloc(done, cap * sizeof *done);
                    if (!grown) {
                        out->oom = 1;
                        break;
                    }
                    done = grown;
                }
                if (!seen) {
                    done[ndone].name = fam;
                    done[ndone++].len = flen;
                    if (help && !strncmp(help + 7, fam, flen) && help[7 + flen] == ' ') {
                        ps_text_printf(out, "%.*s\n", (int)help_len, help);
                    }
                    ps_text_printf(out, "%.*s\n", (int)len, p);
                    for (int j = i; j < n; j++) {
                        s_family_samples(out, texts[j], fam, flen, labels[j]);
                    }
                }
            }
            p = end ? end + 1 : NULL;
        }
    }
    free(done);
}
