/*
 * scheduler/summary.c - the end-of-job summary: the "summary:" log line and
 * the JSON file of README.md, "The summary JSON", built with common/json.
 * Reads the core once, after its event loop ended, through its ops only:
 * rows by (role, rank), the view, the facts. It keeps nothing.
 */
#include "scheduler/summary.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/hist.h"
#include "common/job.h"
#include "common/json.h"
#include "common/log.h"

/* Row i of the core's table, servers first, then workers (the order every
 * list of the summary keeps); an unused row where the core has none. */
static const ps_node_t *s_row(const ps_sched_ops_t *ops, int i)
{
    static const ps_node_t none;
    const int servers = ops->cfg->servers;
    const ps_node_t *n = i < servers ? ops->node(ops->core, PS_ROLE_SERVER, i)
                                     : ops->node(ops->core, PS_ROLE_WORKER, i - servers);
    return n ? n : &none;
}

/* Rows in all: servers and workers. */
static int s_nnodes(const ps_sched_ops_t *ops)
{
    return ops->cfg->servers + ops->cfg->workers;
}

/* Worker w's DONE, or an empty one before it came. */
static const Shardps__Done *s_done(const ps_sched_ops_t *ops, int w)
{
    static const Shardps__Done none = SHARDPS__DONE__INIT;
    const ps_node_t *n = ops->node(ops->core, PS_ROLE_WORKER, w);
    return n && n->stats ? n->stats : &none;
}

/* Server r's end-of-job report, or an empty one before it came. */
static const Shardps__ServerReport *s_report(const ps_sched_ops_t *ops, int r)
{
    static const Shardps__ServerReport none = SHARDPS__SERVER_REPORT__INIT;
    const ps_node_t *n = ops->node(ops->core, PS_ROLE_SERVER, r);
    return n && n->report ? n->report : &none;
}

/* A report's staleness histogram (zero before the report came). */
static void s_staleness(const Shardps__ServerReport *r, ps_hist_t *h)
{
    memset(h, 0, sizeof *h);
    for (size_t i = 0; i < r->n_staleness && i < PS_HIST_BUCKETS; i++) {
        h->counts[i] = r->staleness[i];
        h->n += r->staleness[i];
    }
    h->sum = r->staleness_sum;
    h->max = r->staleness_max;
}

/* Byte counts by message type as they came (n of them, the rest 0) into
 * out[PS_BYTE_TYPES]. */
static void s_counts(const uint64_t *c, size_t n, uint64_t *out)
{
    memset(out, 0, PS_BYTE_TYPES * sizeof *out);
    if (n) { /* at most PS_BYTE_TYPES: checked */
        memcpy(out, c, n * sizeof *out);
    }
}

/* An array of one double per worker (a Shardps__Done field), three decimals. */
static json_t *s_workers(const ps_sched_ops_t *ops, size_t field_offset)
{
    json_t *a = json_array();
    for (int w = 0; a && w < ops->cfg->workers; w++) {
        const double *v = (const double *)((const char *)s_done(ops, w) + field_offset);
        if (json_array_append_new(a, ps_json_real(*v, 3)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

/* Sets key in doc to a new value v (NULL: out of memory); counts failures. */
static void s_set(json_t *doc, const char *key, json_t *v, int *failed)
{
    *failed += json_object_set_new(doc, key, v) != 0;
}

/* Server i's report to the scheduler as a server_reports entry, with its
 * keys in view v. */
static json_t *s_server_report(const ps_sched_ops_t *ops, const ps_view_t *v, int i)
{
    const Shardps__ServerReport *r = s_report(ops, i);
    ps_hist_t staleness;
    s_staleness(r, &staleness);
    return json_pack("{s:i, s:[I, I], s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:{s:o, s:I, s:I}, "
                     "s:o, s:I}",
                     "rank", i, "keys", (json_int_t)v->servers[i].begin,
                     (json_int_t)v->servers[i].end, "pushes", (json_int_t)r->pushes,
                     "pulls", (json_int_t)r->pulls, "rejected", (json_int_t)r->rejected,
                     "nonfinite", (json_int_t)r->nonfinite, "dropped", (json_int_t)r->dropped,
                     "secure_refused", (json_int_t)r->secure_refused, "version",
                     (json_int_t)r->version, "staleness", "mean",
                     ps_json_real(ps_hist_mean(&staleness), 4), "max",
                     (json_int_t)(staleness.max > 0 ? staleness.max : 0), "count",
                     (json_int_t)staleness.n, "cpu_seconds", ps_json_real(r->cpu_seconds, 6),
                     "peak_resident_bytes", (json_int_t)r->peak_resident_bytes);
}

/* The fields of a finished or a failed job: how it ended, who took part (at
 * the endpoints the view carried) and, once finished, each server's report.
 * Names and reasons from peers go through ps_json_text (not always UTF-8). */
static void s_outcome(json_t *doc, const ps_sched_ops_t *ops, const ps_summary_from_t *from,
                      int *failed)
{
    const ps_sched_facts_t *f = ops->facts(ops->core);
    const int finished = f->phase == PS_PHASE_FINISHED;
    char tag[16];
    s_set(doc, "job_id", ps_json_text(from->id->job_id), failed);
    s_set(doc, "job_hash", ps_json_text(from->id->job_hash), failed);
    s_set(doc, "build", ps_json_text(from->id->build), failed);
    s_set(doc, "registrations_refused", json_integer((json_int_t)f->registrations_refused),
          failed);
    const char *status = finished       ? (from->no_progress ? "no_progress" : "ok")
                         : f->diverged  ? "diverged"
                         : from->signal ? "interrupted"
                                        : "failed";
    const char *cause = finished ? from->no_progress : f->failure;
    s_set(doc, "status", json_string(status), failed);
    s_set(doc, "failure", cause ? ps_json_text(cause) : json_null(), failed);
    s_set(doc, "exit_code", json_integer(from->exit_code), failed);
    s_set(doc, "last_step", json_integer((json_int_t)from->last_step), failed);
    s_set(doc, "resume", from->ckpt ? ps_ckpt_json(from->ckpt) : json_null(), failed);
    s_set(doc, "lost", f->lost[0] ? ps_json_text(f->lost) : json_null(), failed);
    json_t *nodes = json_array(), *reports = json_array();
    for (int i = 0; i < s_nnodes(ops); i++) {
        const ps_node_t *n = s_row(ops, i);
        if (n->route.len) { /* registered, lost or not */
            json_t *node = json_pack("{s:s, s:I, s:o}", "node", ps_node_tag(n, tag, sizeof tag),
                                     "pid", (json_int_t)n->pid, "endpoint",
                                     ps_json_text(n->endpoint));
            *failed += json_array_append_new(nodes, node) != 0;
        }
    }
    const ps_view_t *v = ops->view(ops->core);
    for (int i = 0; finished && i < ops->cfg->servers; i++) {
        *failed += json_array_append_new(reports, s_server_report(ops, v, i)) != 0;
    }
    s_set(doc, "nodes", nodes, failed);
    /* without a preflight module: no probes, as ps_preflight_json says it */
    json_t *probes = from->preflight ? ps_preflight_json(from->preflight) : json_array();
    s_set(doc, "preflight", probes, failed);
    s_set(doc, "server_reports", reports, failed);
}

/* Byte counts by message type as a JSON object of the non-zero ones, keyed
 * by the type's name ("pull_reply"). */
static json_t *s_type_counts(const uint64_t *c)
{
    json_t *o = json_object();
    for (int t = 0; o && t < PS_BYTE_TYPES; t++) {
        if (!c[t]) {
            continue;
        }
        char name[32];
        const char *n = ps_codec_type_name(t);
        if (!strcmp(n, "unknown")) {
            snprintf(name, sizeof name, "type_%d", t);
        } else {
            snprintf(name, sizeof name, "%s", n);
        }
        for (char *p = name; *p; p++) {
            *p = *p == '-' ? '_' : *p;
        }
        if (json_object_set_new(o, name, json_integer((json_int_t)c[t])) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* Node i's (a worker's when worker, else a server's) bytes on the wire by
 * message type, sent and received, from its DONE or its report (all 0
 * before it came). */
static void s_node_bytes(const ps_sched_ops_t *ops, int worker, int i, uint64_t *sent,
                         uint64_t *recv)
{
    if (worker) {
        const Shardps__Done *d = s_done(ops, i);
        s_counts(d->bytes_sent, d->n_bytes_sent, sent);
        s_counts(d->bytes_received, d->n_bytes_received, recv);
    } else {
        const Shardps__ServerReport *r = s_report(ops, i);
        s_counts(r->bytes_sent, r->n_bytes_sent, sent);
        s_counts(r->bytes_received, r->n_bytes_received, recv);
    }
}

/* "bytes_by_type": every node's bytes on the wire (header + payload frames)
 * sent and received by message type, and the job's total: every byte sent,
 * counted once, by its sender. */
static json_t *s_bytes(const ps_sched_ops_t *ops, const ps_summary_from_t *from)
{
    uint64_t total[PS_BYTE_TYPES]; /* the scheduler's own, then each node's */
    int failed = 0;
    memcpy(total, from->sent, sizeof total);
    json_t *by = json_pack("{s:{s:o, s:o}}", "scheduler", "sent", s_type_counts(from->sent),
                           "received", s_type_counts(from->received));
    for (int role = 0; by && role < 2; role++) {
        const int count = role ? ops->cfg->workers : ops->cfg->servers;
        json_t *nodes = json_array();
        for (int i = 0; i < count; i++) {
            uint64_t sent[PS_BYTE_TYPES], recv[PS_BYTE_TYPES];
            s_node_bytes(ops, role, i, sent, recv);
            failed += json_array_append_new(nodes, json_pack("{s:o, s:o}", "sent",
                                                             s_type_counts(sent), "received",
                                                             s_type_counts(recv))) != 0;
            for (int t = 0; t < PS_BYTE_TYPES; t++) {
                total[t] += sent[t];
            }
        }
        s_set(by, role ? "workers" : "servers", nodes, &failed);
    }
    if (by) {
        s_set(by, "total", s_type_counts(total), &failed);
    }
    if (failed) {
        json_decref(by);
        return NULL;
    }
    return by;
}

/* What the summary adds up over nodes. */
typedef struct {
    double acc;       /* worker 0's last test accuracy, -1 before an evaluation */
    double auc;       /* a model with rows: its last test AUC, -1 before one (or none) */
    double logloss;   /* and log loss */
    uint64_t pushed, pulled, dropped, rejected, nonfinite, secure_refused, forged, unread;
    int64_t samples;  /* over all workers */
    double train;     /* the longest training loop, seconds */
    double sps, wall; /* samples per second of training; the job's seconds */
    ps_hist_t stale;  /* every server's staleness */
    int64_t fewer;    /* steps applied with fewer workers (every server applies the same) */
} s_totals_t;

static void s_totals(const ps_sched_ops_t *ops, const ps_summary_from_t *from,
                     s_totals_t *t)
{
    const ps_sched_facts_t *f = ops->facts(ops->core);
    const Shardps__Done *w0 = s_done(ops, 0);
    memset(t, 0, sizeof *t);
    t->acc = w0->n_test_accuracy ? w0->test_accuracy[w0->n_test_accuracy - 1] : -1;
    t->auc = w0->n_test_auc ? w0->test_auc[w0->n_test_auc - 1] : -1;
    t->logloss = w0->n_test_logloss ? w0->test_logloss[w0->n_test_logloss - 1] : -1;
    t->secure_refused = from->secure_refused; /* the scheduler's own, then servers' */
    for (int w = 0; w < ops->cfg->workers; w++) {
        const Shardps__Done *d = s_done(ops, w);
        t->pushed += d->bytes_pushed;
        t->pulled += d->bytes_pulled;
        t->samples += d->samples;
        t->train = d->train_seconds > t->train ? d->train_seconds : t->train;
    }
    ps_hist_init(&t->stale);
    for (int i = 0; i < ops->cfg->servers; i++) {
        const Shardps__ServerReport *r = s_report(ops, i);
        ps_hist_t h;
        s_staleness(r, &h);
        t->fewer = r->steps_fewer_workers > t->fewer ? r->steps_fewer_workers : t->fewer;
        ps_hist_merge(&t->stale, &h);
        t->dropped += r->dropped;
        t->rejected += r->rejected;
        t->nonfinite += r->nonfinite;
        t->secure_refused += r->secure_refused;
        t->forged += r->forged;
        t->unread += r->unread_refused;
    }
    t->sps = t->train > 0 ? (double)t->samples / t->train : 0;
    t->wall = f->t_end - f->t_view;
}

/* The job's settings, in every summary. */
static json_t *s_settings(const ps_scheduler_config_t *cfg, const ps_view_t *v)
{
    const ps_job_t *j = &cfg->job;
    const int chunk_kib = v->job.chunk_kib ? v->job.chunk_kib : j->chunk_kib; /* resolved */
    char mode[32], sched[64], compress[32];
    ps_job_mode_str(j, mode, sizeof mode);
    ps_job_compress_str(j, compress, sizeof compress);
    ps_job_schedule_name(&j->schedule, sched, sizeof sched);
    json_t *straggler = j->straggler_rank < 0
                            ? json_null()
                            : json_pack("{s:i, s:o}", "rank", j->straggler_rank, "factor",
                                        ps_json_real(j->straggler_factor, -1));
    double rate;
    const double server_momentum = ps_job_async_momentum(j, cfg->workers, &rate);
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:o, s:s, s:o, s:o, s:o, s:o, s:I, "
                     "s:b, s:b, s:s, s:s, s:o, s:s, s:i, s:s}",
                     "model", j->model, "mode", mode, "servers", cfg->servers, "workers",
                     cfg->workers, "epochs", j->epochs, "batch", j->batch, "optimizer",
                     j->optimizer, "lr", ps_json_real(j->lr, -1), "lr_schedule", sched,
                     "momentum", ps_json_real(j->momentum, -1), "server_momentum",
                     ps_json_real(server_momentum, -1), "server_rate_factor",
                     ps_json_real(rate, -1), "weight_decay",
                     ps_json_real(j->weight_decay, -1), "seed", (json_int_t)j->seed,
                     "staleness_lr", j->staleness_lr, "secure", cfg->secure, "wire",
                     ps_job_wire_name(j), "compress", compress, "straggler", straggler,
                     "hidden", j->hidden, "chunk_kib", chunk_kib, "placement",
                     cfg->placement ? cfg->placement : "dedicated");
}

/* A job with embedding rows: the servers' tables at the end, and the keys
 * a worker's step named (its rows pushes' keys over all servers). */
static json_t *s_rows(const ps_sched_ops_t *ops, const ps_view_t *v)
{
    json_t *per = json_array();
    uint64_t rows = 0, created = 0, filtered = 0, refused = 0, bytes = 0, keys = 0;
    for (int i = 0; i < ops->cfg->servers; i++) {
        const Shardps__ServerReport *r = s_report(ops, i);
        json_array_append_new(per, json_integer((json_int_t)r->rows));
        rows += r->rows;
        created += r->rows_created;
        filtered += r->rows_filtered;
        refused += r->rows_refused;
        bytes += r->rows_bytes;
        keys += r->row_keys_pushed;
    }
    const double steps = (double)v->total_steps * ops->cfg->workers;
    return json_pack("{s:I, s:o, s:I, s:I, s:I, s:I, s:o}", "total", (json_int_t)rows,
                     "per_server", per, "created", (json_int_t)created, "updates_filtered",
                     (json_int_t)filtered, "updates_refused", (json_int_t)refused, "bytes",
                     (json_int_t)bytes, "keys_per_worker_step",
                     ps_json_real(steps > 0 ? (double)keys / steps : 0, 1));
}

/* A finished job's results, added to doc. */
static void s_results(json_t *doc, const ps_sched_ops_t *ops, const ps_summary_from_t *from,
                      const s_totals_t *t, int *failed)
{
    const ps_sched_facts_t *f = ops->facts(ops->core);
    const ps_view_t *v = ops->view(ops->core);
    const Shardps__Done *w0 = s_done(ops, 0);
    json_t *per_epoch = json_array(), *steps = json_array();
    for (size_t e = 0; e < w0->n_test_accuracy; e++) {
        *failed += json_array_append_new(per_epoch, ps_json_real(w0->test_accuracy[e], 6)) != 0;
    }
    for (int w = 0; w < ops->cfg->workers; w++) {
        *failed += json_array_append_new(steps, json_integer(s_done(ops, w)->steps)) != 0;
    }
    const long long smax = t->stale.max > 0 ? t->stale.max : 0;
    json_t *r = json_pack(
        "{s:I, s:I, s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:I, s:I, s:{s:o, s:I, s:I, s:I, s:I}, "
        "s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:o, s:I, s:o, s:o, s:o, s:o, "
        "s:o}",
        "num_params", (json_int_t)v->num_params, "steps", (json_int_t)v->total_steps,
        "test_accuracy", ps_json_real(t->acc, 6), "test_accuracy_per_epoch", per_epoch,
        "final_loss", ps_json_real(w0->final_loss, 6), "samples", (json_int_t)t->samples,
        "samples_per_sec", ps_json_real(t->sps, 2), "train_seconds", ps_json_real(t->train, 3),
        "wall_seconds", ps_json_real(t->wall, 3), "bytes_pushed", (json_int_t)t->pushed,
        "bytes_pulled", (json_int_t)t->pulled, "staleness", "mean",
        ps_json_real(ps_hist_mean(&t->stale), 4), "p50",
        (json_int_t)ps_hist_quantile(&t->stale, 0.5), "p99",
        (json_int_t)ps_hist_quantile(&t->stale, 0.99), "max", (json_int_t)smax, "count",
        (json_int_t)t->stale.n, "pushes_dropped", (json_int_t)t->dropped, "messages_rejected",
        (json_int_t)t->rejected, "scheduler_refused", (json_int_t)f->refused, "pushes_nonfinite",
        (json_int_t)t->nonfinite, "membership_changes", f->membership_changes, "workers_joined",
        from->joins, "scheduler_restarts", from->restarts, "steps_with_fewer_workers",
        (json_int_t)t->fewer, "secure_refused", (json_int_t)t->secure_refused,
        "servers_refused_forged", (json_int_t)t->forged, "pulls_refused_unread",
        (json_int_t)t->unread, "scheduler_cpu_seconds", ps_json_real(ps_cpu_seconds(), 6),
        "scheduler_messages", (json_int_t)f->messages, "worker_wait_seconds",
        s_workers(ops, offsetof(Shardps__Done, wait_seconds)), "worker_compute_seconds",
        s_workers(ops, offsetof(Shardps__Done, compute_seconds)), "worker_train_seconds",
        s_workers(ops, offsetof(Shardps__Done, train_seconds)), "worker_steps", steps,
        "bytes_by_type", s_bytes(ops, from));
    *failed += !r || json_object_update(doc, r) != 0;
    json_decref(r);
    if (ps_job_has_rows(&ops->cfg->job)) {
        *failed += json_object_set_new(doc, "rows", s_rows(ops, v)) != 0;
    }
    if (w0->n_test_auc) { /* a model with embedding rows: ranked, not classified */
        json_t *auc = json_array();
        for (size_t e = 0; e < w0->n_test_auc; e++) {
            *failed += json_array_append_new(auc, ps_json_real(w0->test_auc[e], 6)) != 0;
        }
        *failed += json_object_set_new(doc, "test_auc", ps_json_real(t->auc, 6)) != 0;
        *failed += json_object_set_new(doc, "test_auc_per_epoch", auc) != 0;
        *failed += json_object_set_new(doc, "test_logloss", ps_json_real(t->logloss, 6)) != 0;
    }
}

int ps_summary_no_progress(const ps_sched_ops_t *ops, char *why, size_t cap)
{
    const ps_view_t *v = ops->view(ops->core);
    const Shardps__Done *w0 = s_done(ops, 0);
    const double uniform = log(10.0); /* the loss of a uniform guess over 10 classes */
    if (v->steps_per_epoch <= 0 || v->total_steps < v->steps_per_epoch || !w0->steps) {
        return 0; /* less than an epoch, or no report from worker 0: not judged */
    }
    if (ps_job_has_rows(&ops->cfg->job)) { /* ranked: judged by its AUC alone */
        const double auc = w0->n_test_auc ? w0->test_auc[w0->n_test_auc - 1] : 1;
        if (auc <= PS_SUMMARY_CHANCE_AUC) {
            snprintf(why, cap, "test AUC %.4f is at chance (<= %.2f)", auc,
                     PS_SUMMARY_CHANCE_AUC);
            return 1;
        }
        return 0;
    }
    if (w0->n_test_accuracy) {
        const double acc = w0->test_accuracy[w0->n_test_accuracy - 1];
        if (acc <= PS_SUMMARY_CHANCE_ACCURACY) {
            snprintf(why, cap, "test accuracy %.4f is at chance (<= %.2f for 10 "
                     "classes)", acc, PS_SUMMARY_CHANCE_ACCURACY);
            return 1;
        }
    }
    if (!(w0->final_loss < uniform)) {
        snprintf(why, cap, "training loss %.4f is not below a uniform guess's "
                 "(%.4f)", w0->final_loss, uniform);
        return 1;
    }
    return 0;
}

/* Writes doc as the file path with SIGTERM, SIGINT and SIGHUP held: a failed
 * node's exit makes the launcher stop us with SIGTERM, maybe while this
 * write is under way (its fsync takes a while on a busy disk), so the signal
 * waits until the summary is in place (ZeroMQ's own threads block every
 * signal, so none of them takes it instead). */
static int s_write_held(const char *path, const json_t *doc)
{
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    int rc = ps_json_write_file(path, doc, PS_JSON_LINE, NULL, 0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* A finished or a failed job's JSON has the settings; only a finished one's
 * has the results. */
int ps_summary_write(const ps_sched_ops_t *ops, const ps_summary_from_t *from)
{
    const ps_scheduler_config_t *cfg = ops->cfg;
    const ps_job_t *j = &cfg->job;
    const int finished = ps_sched_phase(ops) == PS_PHASE_FINISHED;
    s_totals_t t;
    s_totals(ops, from, &t);
    if (finished) {
        char mode[32];
        ps_job_mode_str(j, mode, sizeof mode);
        char quality[64];
        if (t.auc >= 0) {
            snprintf(quality, sizeof quality, "test_auc=%.4f test_logloss=%.4f", t.auc,
                     t.logloss);
        } else {
            snprintf(quality, sizeof quality, "test_accuracy=%.4f", t.acc);
        }
        ps_log_info("summary: model=%s mode=%s servers=%d workers=%d epochs=%d batch=%d "
                    "%s samples_per_sec=%.0f wall_seconds=%.2f bytes_pushed=%llu "
                    "bytes_pulled=%llu staleness_mean=%.2f staleness_max=%lld pushes_dropped=%llu",
                    j->model, mode, cfg->servers, cfg->workers, j->epochs, j->batch, quality,
                    t.sps, t.wall, (unsigned long long)t.pushed, (unsigned long long)t.pulled,
                    ps_hist_mean(&t.stale), (long long)(t.stale.max > 0 ? t.stale.max : 0),
                    (unsigned long long)t.dropped);
    }
    if (!cfg->summary) {
        return 0;
    }
    json_t *doc = s_settings(cfg, ops->view(ops->core));
    int failed = !doc;
    if (doc && finished) {
        s_results(doc, ops, from, &t, &failed);
    }
    failed = failed || ps_failover_json(doc, from->failover) != 0;
    if (!failed) {
        s_outcome(doc, ops, from, &failed);
    }
    const int rc = failed ? PS_ENOMEM : s_write_held(cfg->summary, doc);
    json_decref(doc);
    if (rc != 0) {
        ps_log_err("cannot write the summary to %s: %s", cfg->summary, ps_strerror(rc));
        return PS_EIO;
    }
    return 0;
}
