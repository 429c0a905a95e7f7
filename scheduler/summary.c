/*
 * scheduler/summary.c - the end-of-job summary: the "summary:" log line and
 * the JSON file of README.md, "The summary JSON". Reads the scheduler's state
 * once, after its event loop ended.
 */
#include "scheduler/summary.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "scheduler/failover.h"
#include "scheduler/join.h"
#include "scheduler/preflight.h"
#include "scheduler/restart.h"

/* Prints "[a, b, ...]" of one double per worker. */
/* Node i's DONE (a worker's), or an empty one before it came. */
static const Shardps__Done *s_done(const ps_scheduler_t *s, int i)
{
    static const Shardps__Done none = SHARDPS__DONE__INIT;
    return s->nodes[i].stats ? s->nodes[i].stats : &none;
}

/* Node i's end-of-job report (a server's), or an empty one before it came. */
static const Shardps__ServerReport *s_report(const ps_scheduler_t *s, int i)
{
    static const Shardps__ServerReport none = SHARDPS__SERVER_REPORT__INIT;
    return s->nodes[i].report ? s->nodes[i].report : &none;
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

static void s_json_workers(FILE *f, const ps_scheduler_t *s, size_t field_offset)
{
    fputc('[', f);
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        const double *v = (const double *)((const char *)s_done(s, i) + field_offset);
        fprintf(f, "%s%.3f", i > s->cfg->servers ? ", " : "", *v);
    }
    fputc(']', f);
}

/* Prints str as a JSON string: failure reasons and endpoints come from peers. */
static void s_json_str(FILE *f, const char *str)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
        if (*c == '"' || *c == '\\') {
            fprintf(f, "\\%c", *c);
        } else if (*c < 0x20) {
            fprintf(f, "\\u%04x", *c);
        } else {
            fputc(*c, f);
        }
    }
    fputc('"', f);
}

/* The fields of a finished or a failed job: how it ended, who took part (at
 * the endpoints the view carried) and, once finished, each server's report. */
static void s_json_outcome(FILE *f, const ps_scheduler_t *s)
{
    int finished = s->phase == PS_PHASE_FINISHED;
    char tag[16];
    fputs("\"job_id\": ", f);
    s_json_str(f, s->id.job_id);
    fprintf(f, ", \"job_hash\": \"%s\", \"build\": ", s->id.job_hash);
    s_json_str(f, s->id.build);
    fprintf(f, ", \"registrations_refused\": %llu, ",
            (unsigned long long)s->registrations_refused);
    fprintf(f, "\"status\": \"%s\", \"failure\": ",
            finished ? "ok" : s->diverged ? "diverged" : "failed");
    if (finished) {
        fputs("null", f);
    } else {
        s_json_str(f, s->failure);
    }
    fputs(", \"lost\": ", f);
    if (s->lost[0]) {
        s_json_str(f, s->lost);
    } else {
        fputs("null", f);
    }
    fputs(", \"nodes\": [", f);
    for (int i = 0, k = 0; i < s->nnodes; i++) {
        const ps_node_t *n = &s->nodes[i];
        if (n->route.len) { /* registered, lost or not */
            fprintf(f, "%s{\"node\": \"%s\", \"pid\": %u, \"endpoint\": ", k++ ? ", " : "",
                    ps_node_tag(n, tag, sizeof tag), n->pid);
            s_json_str(f, n->endpoint);
            fputc('}', f);
        }
    }
    fputs("], \"preflight\": ", f);
    ps_preflight_json(s, f);
    fputs(", \"server_reports\": [", f);
    for (int i = 0; finished && i < s->cfg->servers; i++) {
        const Shardps__ServerReport *r = s_report(s, i);
        ps_hist_t staleness;
        s_staleness(r, &staleness);
        fprintf(f,
                "%s{\"rank\": %d, \"keys\": [%llu, %llu], \"pushes\": %llu, \"pulls\": %llu, "
                "\"rejected\": %llu, \"nonfinite\": %llu, \"dropped\": %llu, "
                "\"secure_refused\": %llu, \"version\": %lld, \"staleness\": "
                "{\"mean\": %.4f, \"max\": %lld, \"count\": %llu}, \"cpu_seconds\": %.6f}",
                i ? ", " : "", i, (unsigned long long)s->view->servers[i].begin,
                (unsigned long long)s->view->servers[i].end, (unsigned long long)r->pushes,
                (unsigned long long)r->pulls, (unsigned long long)r->rejected,
                (unsigned long long)r->nonfinite, (unsigned long long)r->dropped,
                (unsigned long long)r->secure_refused, (long long)r->version,
                ps_hist_mean(&staleness),
                (long long)(staleness.max > 0 ? staleness.max : 0),
                (unsigned long long)staleness.n, r->cpu_seconds);
    }
    fputs("]}\n", f);
}

/* Byte counts by message type (n of them; the rest are 0) as a JSON object
 * of the non-zero ones, keyed by the type's name ("pull_reply"). */
static void s_json_type_counts(FILE *f, const uint64_t *c, size_t n)
{
    fputc('{', f);
    for (int t = 0, first = 1; t < PS_BYTE_TYPES && (size_t)t < n; t++) {
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
        fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", name, (unsigned long long)c[t]);
        first = 0;
    }
    fputc('}', f);
}

/* "bytes_by_type": every node's bytes on the wire (header + payload frames)
 * sent and received by message type, and the job's total: every byte sent,
 * counted once, by its sender. */
static void s_json_bytes(FILE *f, const ps_scheduler_t *s)
{
    uint64_t total[PS_BYTE_TYPES], received[PS_BYTE_TYPES];
    ps_ctx_bytes(s->ctx, total, received); /* the scheduler's own, then each node's */
    fprintf(f, "\"bytes_by_type\": {\"scheduler\": {\"sent\": ");
    s_json_type_counts(f, total, PS_BYTE_TYPES);
    fprintf(f, ", \"received\": ");
    s_json_type_counts(f, received, PS_BYTE_TYPES);
    fputc('}', f);
    for (int role = 0; role < 2; role++) {
        const int from = role ? s->cfg->servers : 0, to = role ? s->nnodes : s->cfg->servers;
        fprintf(f, ", \"%s\": [", role ? "workers" : "servers");
        for (int i = from; i < to; i++) {
            const Shardps__Done *d = s_done(s, i);
            const Shardps__ServerReport *r = s_report(s, i);
            const uint64_t *sent = role ? d->bytes_sent : r->bytes_sent;
            const size_t nsent = role ? d->n_bytes_sent : r->n_bytes_sent; /* <= PS_BYTE_TYPES */
            fprintf(f, "%s{\"sent\": ", i > from ? ", " : "");
            s_json_type_counts(f, sent, nsent);
            fprintf(f, ", \"received\": ");
            s_json_type_counts(f, role ? d->bytes_received : r->bytes_received,
                               role ? d->n_bytes_received : r->n_bytes_received);
            fputc('}', f);
            for (size_t t = 0; t < nsent; t++) {
                total[t] += sent[t];
            }
        }
        fputc(']', f);
    }
    fprintf(f, ", \"total\": ");
    s_json_type_counts(f, total, PS_BYTE_TYPES);
    fprintf(f, "}, ");
}

/* What the servers' reports add up to. */
typedef struct {
    ps_hist_t stale;  /* staleness of every applied gradient */
    int64_t fewer;    /* steps with fewer workers (every server applies the same) */
    uint64_t dropped, rejected, nonfinite, secure_refused, forged, unread;
} s_servers_t;

static void s_servers(const ps_scheduler_t *s, s_servers_t *t)
{
    memset(t, 0, sizeof *t);
    ps_hist_init(&t->stale);
    t->secure_refused = ps_ctx_refused(s->ctx); /* the scheduler's own, then servers' */
    for (int i = 0; i < s->cfg->servers; i++) {
        const Shardps__ServerReport *r = s_report(s, i);
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
}

/* What the workers' DONE reports add up to. */
typedef struct {
    uint64_t pushed, pulled; /* payload bytes */
    int64_t samples;
    double train; /* the longest training loop */
} s_workers_t;

static void s_workers(const ps_scheduler_t *s, s_workers_t *w)
{
    memset(w, 0, sizeof *w);
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        const Shardps__Done *d = s_done(s, i);
        w->pushed += d->bytes_pushed;
        w->pulled += d->bytes_pulled;
        w->samples += d->samples;
        w->train = d->train_seconds > w->train ? d->train_seconds : w->train;
    }
}

/* A finished or a failed job's JSON has the settings; only a finished one's
 * has the results. */
int ps_summary_write(const ps_scheduler_t *s)
{
    const ps_job_t *j = &s->cfg->job;
    const Shardps__Done *w0 = s_done(s, s->cfg->servers);
    double acc = w0->n_test_accuracy ? w0->test_accuracy[w0->n_test_accuracy - 1] : -1;
    s_workers_t wt;
    s_workers(s, &wt);
    const uint64_t pushed = wt.pushed, pulled = wt.pulled;
    const int64_t samples = wt.samples;
    const double train = wt.train;
    s_servers_t t;
    s_servers(s, &t);
    const ps_hist_t stale = t.stale;
    double sps = train > 0 ? (double)samples / train : 0;
    double wall = s->t_end - s->t_view;
    char mode[32], sched[64], compress[32];
    ps_job_mode_str(j, mode, sizeof mode);
    ps_job_compress_str(j, compress, sizeof compress);
    ps_job_schedule_name(&j->schedule, sched, sizeof sched);
    long long smax = stale.max > 0 ? stale.max : 0;
    if (s->phase == PS_PHASE_FINISHED) {
        ps_log_info("summary: model=%s mode=%s servers=%d workers=%d epochs=%d batch=%d "
                    "test_accuracy=%.4f samples_per_sec=%.0f wall_seconds=%.2f bytes_pushed=%llu "
                    "bytes_pulled=%llu staleness_mean=%.2f staleness_max=%lld pushes_dropped=%llu",
                    j->model, mode, s->cfg->servers, s->cfg->workers, j->epochs, j->batch, acc,
                    sps, wall, (unsigned long long)pushed, (unsigned long long)pulled,
                    ps_hist_mean(&stale), smax, (unsigned long long)t.dropped);
    }
    if (!s->cfg->summary) {
        return 0;
    }
    char *text = NULL; /* the JSON is built in memory, then written atomically */
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        ps_log_err("cannot write the summary to %s", s->cfg->summary);
        return PS_EIO;
    }
    fprintf(f,
            "{\"model\": \"%s\", \"mode\": \"%s\", \"servers\": %d, \"workers\": %d, "
            "\"epochs\": %d, \"batch\": %d, \"optimizer\": \"%s\", \"lr\": %g, "
            "\"lr_schedule\": \"%s\", \"momentum\": %g, \"weight_decay\": %g, "
            "\"seed\": %llu, \"staleness_lr\": %s, \"secure\": %s, \"wire\": \"%s\", "
            "\"compress\": \"%s\", \"straggler\": ",
            j->model, mode, s->cfg->servers, s->cfg->workers, j->epochs, j->batch, j->optimizer,
            j->lr, sched, j->momentum, j->weight_decay, (unsigned long long)j->seed,
            j->staleness_lr ? "true" : "false", s->cfg->secure ? "true" : "false",
            ps_job_wire_name(j), compress);
    if (j->straggler_rank >= 0) {
        fprintf(f, "{\"rank\": %d, \"factor\": %g}, ", j->straggler_rank, j->straggler_factor);
    } else {
        fprintf(f, "null, ");
    }
    if (s->phase == PS_PHASE_FINISHED) {
        fprintf(f,
                "\"num_params\": %llu, \"steps\": %lld, \"test_accuracy\": %.6f, "
                "\"test_accuracy_per_epoch\": [",
                (unsigned long long)s->view->num_params, (long long)s->view->total_steps, acc);
        for (size_t e = 0; e < w0->n_test_accuracy; e++) {
            fprintf(f, "%s%.6f", e ? ", " : "", w0->test_accuracy[e]);
        }
        fprintf(f,
                "], \"final_loss\": %.6f, \"samples\": %lld, \"samples_per_sec\": %.2f, "
                "\"train_seconds\": %.3f, \"wall_seconds\": %.3f, \"bytes_pushed\": %llu, "
                "\"bytes_pulled\": %llu, \"staleness\": {\"mean\": %.4f, \"p50\": %lld, "
                "\"p99\": %lld, \"max\": %lld, \"count\": %llu}, \"pushes_dropped\": %llu, "
                "\"messages_rejected\": %llu, \"scheduler_refused\": %llu, \"pushes_nonfinite\": %llu, "
                "\"membership_changes\": %d, \"workers_joined\": %d, \"scheduler_restarts\": %d, "
                "\"steps_with_fewer_workers\": %lld, "
                "\"secure_refused\": %llu, \"servers_refused_forged\": %llu, "
                "\"pulls_refused_unread\": %llu, \"scheduler_cpu_seconds\": %.6f, "
                "\"scheduler_messages\": %llu, \"worker_wait_seconds\": ",
                w0->final_loss, (long long)samples, sps, train, wall, (unsigned long long)pushed,
                (unsigned long long)pulled, ps_hist_mean(&stale),
                (long long)ps_hist_quantile(&stale, 0.5),
                (long long)ps_hist_quantile(&stale, 0.99), smax, (unsigned long long)stale.n,
                (unsigned long long)t.dropped, (unsigned long long)t.rejected,
                (unsigned long long)s->refused, (unsigned long long)t.nonfinite,
                s->membership_changes, ps_join_count(s->join), ps_restart_count(s->restart),
                (long long)t.fewer, (unsigned long long)t.secure_refused,
                (unsigned long long)t.forged, (unsigned long long)t.unread, ps_cpu_seconds(),
                (unsigned long long)s->messages);
        s_json_workers(f, s, offsetof(Shardps__Done, wait_seconds));
        fprintf(f, ", \"worker_compute_seconds\": ");
        s_json_workers(f, s, offsetof(Shardps__Done, compute_seconds));
        fprintf(f, ", \"worker_train_seconds\": ");
        s_json_workers(f, s, offsetof(Shardps__Done, train_seconds));
        fprintf(f, ", \"worker_steps\": [");
        for (int i = s->cfg->servers; i < s->nnodes; i++) {
            fprintf(f, "%s%lld", i > s->cfg->servers ? ", " : "",
                    (long long)s_done(s, i)->steps);
        }
        fprintf(f, "], ");
        s_json_bytes(f, s);
    }
    ps_failover_json(f, s);
    s_json_outcome(f, s);
    int bad = fclose(f) != 0;
    /* A failed node's exit makes the launcher stop us with SIGTERM, maybe
     * while this write is under way (its fsync takes a while on a busy
     * disk): the signal waits until the summary is in place (ZeroMQ's own
     * threads block every signal, so none of them takes it instead). */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    bad = bad || ps_file_write_atomic(s->cfg->summary, (const void *[]){text},
                                      (size_t[]){len}, 1, NULL, 0) != 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(text);
    if (bad) {
        ps_log_err("cannot write the summary to %s", s->cfg->summary);
        return PS_EIO;
    }
    return 0;
}
