/* server/observe.c - the server's metrics. */
#include "server/observe.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/error.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/log.h"
#include "proto/codec.h"
#include "proto/msg.h"

/* Series per message type counted: push, pull, init, other. */
enum { S_PUSH, S_PULL, S_PUSH_PULL, S_INIT, S_OTHER, S_NTYPES };

struct ps_server_obs {
    ps_metrics_t *reg;
    ps_http_t *http;
    int workers;
    ps_metric_t *messages[S_NTYPES];
    ps_metric_t *unknown_in; /* bytes from senders that are no worker of the view */
    ps_metric_t *in[PS_MAX_WORKERS], *out[PS_MAX_WORKERS];
    ps_metric_t *apply, *staleness, *version, *rejected, *dropped, *nonfinite, *pushes, *pulls,
        *held, *pending, *resent, *replicated, *replica_bytes, *snapshots, *rows, *rows_bytes,
        *rows_created, *rows_filtered, *rows_refused, *row_keys;
    ps_msg_bytes_metrics_t wire; /* bytes on the wire by type (ps_server_obs_wire) */
};

static void s_render(void *arg, ps_text_t *out)
{
    ps_metrics_render(((ps_server_obs_t *)arg)->reg, out);
}

int ps_server_obs_new(const char *bind, ps_server_obs_t **out, char *err, size_t errlen)
{
    ps_server_obs_t *o = calloc(1, sizeof *o);
    *out = NULL;
    if (!o || ps_metrics_new(&o->reg) != 0) {
        free(o);
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    ps_metrics_t *m = o->reg;
    static const char *const types[S_NTYPES] = {"type=\"push\"", "type=\"pull\"",
                                                "type=\"push_pull\"", "type=\"init\"",
                                                "type=\"other\""};
    for (int i = 0; i < S_NTYPES; i++) {
        o->messages[i] = ps_metrics_counter(m, "shardps_server_messages_total", types[i],
                                            "messages received from workers, by type");
    }
    static const double apply_bounds[] = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3,
                                          0.01, 0.03, 0.1,  0.3,  1};
    static const double stale_bounds[] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
    o->apply = ps_metrics_histogram(m, "shardps_server_apply_seconds", NULL,
                                    "seconds to sum a step's gradients and update the shard",
                                    apply_bounds, (int)(sizeof apply_bounds / sizeof apply_bounds[0]));
    o->staleness = ps_metrics_histogram(m, "shardps_server_staleness", NULL,
                                        "versions between a gradient's and the one it was applied to",
                                        stale_bounds, (int)(sizeof stale_bounds / sizeof stale_bounds[0]));
    o->version = ps_metrics_gauge(m, "shardps_server_version", NULL,
                                  "updates applied (the version of the shard)");
    o->pushes = ps_metrics_counter(m, "shardps_server_pushes_total", NULL, "pushes accepted");
    o->pulls = ps_metrics_counter(m, "shardps_server_pulls_total", NULL, "pulls answered");
    o->rejected = ps_metrics_counter(m, "shardps_server_rejected_total", NULL,
                                     "messages refused (malformed, invalid or non-finite)");
    o->nonfinite = ps_metrics_counter(m, "shardps_server_nonfinite_total", NULL,
                                      "pushes refused for a NaN or an infinity");
    o->dropped = ps_metrics_counter(m, "shardps_server_pushes_dropped_total", NULL,
                                    "pushes dropped: late for their step (sync:K/N) or from a lost worker");
    o->held = ps_metrics_gauge(m, "shardps_server_queue_depth", "queue=\"held_pushes\"",
                               "requests queued: pushes held for an incomplete step, pulls waiting for a version");
    o->pending = ps_metrics_gauge(m, "shardps_server_queue_depth", "queue=\"waiting_pulls\"",
                                  "requests queued: pushes held for an incomplete step, pulls waiting for a version");
    o->resent = ps_metrics_counter(m, "shardps_server_pushes_resent_total", NULL,
                                   "pushes sent again after a takeover for a step applied before");
    o->replicated = ps_metrics_counter(m, "shardps_server_replicated_updates_total", NULL,
                                       "updates sent to this server's hot replica");
    o->replica_bytes = ps_metrics_counter(m, "shardps_server_replication_bytes_total", NULL,
                                          "payload bytes sent to the hot replica, snapshots included");
    o->snapshots = ps_metrics_counter(m, "shardps_server_replica_snapshots_total", NULL,
                                      "whole copies of the shard sent to a hot replica (one per "
                                      "replica attached, and after a rollback)");
    o->rows = ps_metrics_gauge(m, "shardps_server_rows", NULL, "embedding rows held");
    o->rows_bytes = ps_metrics_gauge(m, "shardps_server_rows_bytes", NULL,
                                     "memory the embedding rows hold, with their index");
    o->rows_created = ps_metrics_counter(m, "shardps_server_rows_created_total", NULL,
                                         "embedding rows made by their first update");
    o->rows_filtered = ps_metrics_counter(m, "shardps_server_row_updates_dropped_total",
                                          "why=\"min_count\"",
                                          "updates of keys without a row, dropped");
    o->rows_refused = ps_metrics_counter(m, "shardps_server_row_updates_dropped_total",
                                         "why=\"max_rows\"",
                                         "updates of keys without a row, dropped");
    o->row_keys = ps_metrics_counter(m, "shardps_server_row_keys_pushed_total", NULL,
                                     "keys named by the rows pushes accepted");
    o->unknown_in = ps_metrics_counter(m, "shardps_server_received_bytes_total",
                                       "peer=\"unknown\"", "payload bytes received, by worker");
    char bound[96];
    int rc = bind ? ps_http_new(bind, s_render, o, &o->http, bound, sizeof bound, err, errlen)
                  : 0;
    if (rc != 0) {
        ps_server_obs_destroy(&o);
        return rc;
    }
    if (bind) {
        ps_log_info("metrics on http://%s/metrics", bound);
    }
    *out = o;
    return 0;
}

void ps_server_obs_destroy(ps_server_obs_t **op)
{
    ps_server_obs_t *o = *op;
    if (o) {
        ps_http_destroy(&o->http);
        ps_metrics_destroy(&o->reg);
        free(o);
        *op = NULL;
    }
}

void ps_server_obs_wire(ps_server_obs_t *o, const ps_ctx_t *ctx)
{
    ps_msg_bytes_metrics_init(&o->wire, o->reg, "server", ctx);
}

void ps_server_obs_setup(ps_server_obs_t *o, int workers)
{
    o->workers = workers < PS_MAX_WORKERS ? workers : PS_MAX_WORKERS;
    for (int w = 0; w < o->workers; w++) {
        char peer[32];
        snprintf(peer, sizeof peer, "peer=\"W%d\"", w);
        o->in[w] = ps_metrics_counter(o->reg, "shardps_server_received_bytes_total", peer,
                                      "payload bytes received, by worker");
        o->out[w] = ps_metrics_counter(o->reg, "shardps_server_sent_bytes_total", peer,
                                       "payload bytes sent, by worker");
    }
}

void ps_server_obs_message(ps_server_obs_t *o, int w, int type, uint64_t bytes)
{
    int t = type == PS_MSG_PUSH ? S_PUSH : type == PS_MSG_PULL ? S_PULL
          : type == PS_MSG_PUSH_PULL ? S_PUSH_PULL
          : type == PS_MSG_INIT ? S_INIT : S_OTHER;
    ps_metric_add(o->messages[t], 1);
    ps_metric_add(w >= 0 && w < o->workers ? o->in[w] : o->unknown_in, (double)bytes);
}

void ps_server_obs_reply(ps_server_obs_t *o, int w, uint64_t bytes)
{
    if (w >= 0 && w < o->workers) {
        ps_metric_add(o->out[w], (double)bytes);
    }
}

void ps_server_obs_apply(ps_server_obs_t *o, double seconds)
{
    ps_metric_observe(o->apply, seconds);
}

void ps_server_obs_render(ps_server_obs_t *o, const ps_server_snapshot_t *snap, ps_text_t *text)
{
    const ps_consistency_stats_t *st = snap->stats;
    ps_metric_set(o->version, (double)snap->version);
    ps_metric_set(o->pushes, (double)st->pushes);
    ps_metric_set(o->pulls, (double)st->pulls);
    ps_metric_set(o->rejected, (double)snap->rejected);
    ps_metric_set(o->nonfinite, (double)st->nonfinite);
    ps_metric_set(o->dropped, (double)st->dropped);
    ps_metric_set(o->held, snap->held);
    ps_metric_set(o->pending, snap->pending_pulls);
    ps_metric_set(o->resent, (double)st->resent);
    ps_metric_set(o->replicated, (double)snap->replicated);
    ps_metric_set(o->replica_bytes, (double)snap->replica_bytes);
    ps_metric_set(o->snapshots, (double)snap->replica_snapshots);
    ps_metric_load_values(o->staleness, st->staleness.counts, PS_HIST_BUCKETS,
                          st->staleness.sum);
    if (snap->rows) {
        ps_metric_set(o->rows, (double)snap->rows->rows);
        ps_metric_set(o->rows_bytes, (double)snap->rows_bytes);
        ps_metric_set(o->rows_created, (double)snap->rows->created);
        ps_metric_set(o->rows_filtered, (double)snap->rows->filtered);
        ps_metric_set(o->rows_refused, (double)snap->rows->refused);
        ps_metric_set(o->row_keys, (double)st->row_keys);
    }
    ps_msg_bytes_metrics_update(&o->wire);
    ps_metrics_render(o->reg, text);
}

void ps_server_obs_report(const ps_server_snapshot_t *snap, const ps_ctx_t *ctx,
                          Shardps__ServerReport *r, uint64_t bytes[2][PS_BYTE_TYPES])
{
    const ps_consistency_stats_t *st = snap->stats;
    shardps__server_report__init(r);
    r->pushes = st->pushes;
    r->pulls = st->pulls;
    r->rejected = snap->rejected;
    r->dropped = st->dropped;
    r->nonfinite = st->nonfinite;
    r->version = snap->version;
    r->n_staleness = PS_HIST_BUCKETS;
    r->staleness = (uint64_t *)st->staleness.counts;
    r->staleness_sum = st->staleness.sum;
    r->staleness_max = st->staleness.max;
    r->steps_fewer_workers = st->steps_fewer;
    r->secure_refused = ps_ctx_refused(ctx);
    r->forged = snap->forged;
    r->unread_refused = snap->unread_refused;
    r->cpu_seconds = ps_cpu_seconds();
    r->peak_resident_bytes = ps_alloc_peak_resident();
    if (snap->rows) {
        r->rows = snap->rows->rows;
        r->rows_created = snap->rows->created;
        r->rows_filtered = snap->rows->filtered;
        r->rows_refused = snap->rows->refused;
        r->rows_bytes = snap->rows_bytes;
        r->row_keys_pushed = st->row_keys;
    }
    ps_ctx_bytes(ctx, bytes[0], bytes[1]);
    r->n_bytes_sent = ps_codec_byte_types(bytes[0]);
    r->bytes_sent = bytes[0];
    r->n_bytes_received = ps_codec_byte_types(bytes[1]);
    r->bytes_received = bytes[1];
}

void ps_server_obs_log_totals(const ps_server_snapshot_t *snap)
{
    const ps_consistency_stats_t *st = snap->stats;
    ps_log_info("served %llu pushes and %llu pulls, rejected %llu messages (%llu non-finite), "
                "dropped %llu late pushes and %llu of before a failover, version %lld, "
                "staleness mean %.2f max %lld",
                (unsigned long long)st->pushes, (unsigned long long)st->pulls,
                (unsigned long long)snap->rejected, (unsigned long long)st->nonfinite,
                (unsigned long long)st->dropped, (unsigned long long)snap->stale,
                (long long)snap->version, ps_hist_mean(&st->staleness),
                (long long)(st->staleness.max > 0 ? st->staleness.max : 0));
    if (snap->rows) {
        ps_log_info("rows: %llu (%.1f MB), %llu created, updates dropped: %llu below "
                    "--min-count, %llu at --max-rows",
                    (unsigned long long)snap->rows->rows, (double)snap->rows_bytes / 1e6,
                    (unsigned long long)snap->rows->created,
                    (unsigned long long)snap->rows->filtered,
                    (unsigned long long)snap->rows->refused);
    }
}
