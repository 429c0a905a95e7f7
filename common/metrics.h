/*
 * common/metrics.h - a registry of counters, gauges and histograms, and their
 * Prometheus text exposition.
 *
 * A role registers its series once, at start-up, then updates them from any
 * thread: every value is an atomic, so the HTTP server's thread
 * (common/http.h) renders while the role's threads count, without a lock and
 * without ever blocking them. A series is a family name plus an optional
 * label set (`peer="W0"`); series of one family are rendered together under
 * one HELP and TYPE line, as the format requires.
 *
 * Every update function takes NULL and does nothing, so code that counts need
 * not know whether metrics are on.
 */
#ifndef PS_COMMON_METRICS_H
#define PS_COMMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_metrics ps_metrics_t;
typedef struct ps_metric ps_metric_t;

/* Most series in one registry; a registration beyond returns NULL. */
enum { PS_METRICS_MAX_SERIES = 1024, PS_METRICS_MAX_BUCKETS = 16 }; /* series: a server has two per worker */

/* A new, empty registry. Caller owns the result; destroy with ps_metrics_destroy(). */
int ps_metrics_new(ps_metrics_t **out);

/* Frees the registry (after the HTTP server that reads it stopped). NULL-safe. */
void ps_metrics_destroy(ps_metrics_t **m);

/*
 * Registers a series. name: a Prometheus metric name ("shardps_worker_steps_total");
 * labels: NULL or a label list without braces (`peer="S0"`); help: one line,
 * borrowed (a string literal). Returns the series (borrowed; valid until
 * ps_metrics_destroy()), or NULL when m is NULL or full. Register from one
 * thread; a series registered while the HTTP server renders shows from the
 * next scrape on.
 */
ps_metric_t *ps_metrics_counter(ps_metrics_t *m, const char *name, const char *labels,
                                const char *help);
ps_metric_t *ps_metrics_gauge(ps_metrics_t *m, const char *name, const char *labels,
                              const char *help);
/* bounds: nbounds (<= PS_METRICS_MAX_BUCKETS) ascending upper bounds; +Inf is implied.
 * The exposition adds NAME_p50 and NAME_p99 gauges, estimated from the buckets. */
ps_metric_t *ps_metrics_histogram(ps_metrics_t *m, const char *name, const char *labels,
                                  const char *help, const double *bounds, int nbounds);

/* Counter or gauge: adds v. Thread-safe; NULL-safe. */
void ps_metric_add(ps_metric_t *x, double v);
/* Gauge (or a counter mirrored from a count kept elsewhere): sets v. */
void ps_metric_set(ps_metric_t *x, double v);
/* Histogram: records one observation. */
void ps_metric_observe(ps_metric_t *x, double v);
/* Histogram: replaces its contents with counts[v] observations of each
 * integer value v in [0, n) (a histogram of small integers kept elsewhere,
 * common/hist.h) and their sum. Not atomic as a whole: one writer. */
void ps_metric_load_values(ps_metric_t *x, const uint64_t *counts, int n, double sum);
/* The current value of a counter or gauge (a histogram: its count); 0 for NULL. */
double ps_metric_value(const ps_metric_t *x);

/* Appends the exposition of every series to out. Thread-safe with the updates. */
void ps_metrics_render(ps_metrics_t *m, ps_text_t *out);

/*
 * Appends n expositions (texts[i], as rendered by ps_metrics_render) to out,
 * each sample given the extra label labels[i] (`node="W0"`), families merged:
 * one HELP and TYPE per family name, its samples from every text after them.
 * Other lines are skipped. This is how the scheduler serves its nodes'
 * metrics as one exposition.
 */
void ps_metrics_merge(ps_text_t *out, const char *const *texts, const char *const *labels,
                      int n);

#ifdef __cplusplus
}
#endif
#endif
