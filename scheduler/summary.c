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
static void s_json_workers(FILE *f, const ps_scheduler_t *s, size_t field_offset)
{
    fputc('[', f);
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        const double *v = (const double *)((const char *)&s->nodes[i].stats + field_offset);
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
        const ps_server_report_t *r = &s->nodes[i].report;
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
                ps_hist_mean(&r->staleness),
                (long long)(r->staleness.max > 0 ? r->staleness.max : 0),
                (unsigned long long)r->staleness.n, r->cpu_seconds);
    }
    fputs("]}\n", f);
}

/* Byte counts by message type as a JSON object of the non-zero ones, keyed
 * by the type's name ("pull_reply"). */
static void s_json_type_counts(FILE *f, const uint64_t *c)
{
    fputc('{', f);
    for (int t = 0, first = 1; t < PS_BYTE_TYPES; t++) {
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
    s_json_type_counts(f, total);
    fprintf(f, ", \"received\": ");
    s_json_type_counts(f, received);
    fputc('}', f);
    for (int role = 0; role < 2; role++) {
        const int from = role ? s->cfg->servers : 0, to = role ? s->nnodes : s->cfg->servers;
        fprintf(f, ", \"%s\": [", role ? "workers" : "servers");
        for (int i = from; i < to; i++) {
            const ps_byte_counts_t *b =
                role ? &s->nodes[i].stats.bytes : &s->nodes[i].report.bytes;
            fprintf(f, "%s{\"sent\": ", i > from ? ", " : "");
            s_json_type_counts(f, b->sent);
            fprintf(f, ", \"received\": ");
            s_json_type_counts(f, b->received);
            fputc('}', f);
            for (int t = 0; t < PS_BYTE_TYPES; t++) {
                total[t] += b->sent[t];
            }
        }
        fputc(']', f);
    }
    fprintf(f, ", \"total\": ");
    s_json_type_counts(f, total);
    fprintf(f, "}, ");
}

/* A finished or a failed job's JSON has the settings; only a finished one's
 * has the results. */
int ps_summary_write(const ps_scheduler_t *s)
{
    const ps_job_t *j = &s->cfg->job;
    const ps_done_t *w0 = &s->nodes[s->cfg->servers].stats;
    double acc = w0->num_epochs_evaluated ? w0->test_accuracy[w0->num_epochs_evaluated - 1] : -1;
    uint64_t pushed = 0, pulled = 0, dropped = 0, rejected = 0, nonfinite = 0;
    uint64_t secure_refused = ps_ctx_refused(s->ctx); /* the scheduler's own, then servers' */
    uint64_t forged = 0, unread = 0;
    int64_t samples = 0;
    double train = 0;
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        const ps_done_t *d = &s->nodes[i].stats;
        pushed += d->bytes_pushed;
        pulled += d->bytes_pulled;
        samples += d->samples;
        train = d->train_seconds > train ? d->train_seconds : train;
    }
    ps_hist_t stale;
    ps_hist_init(&stale);
    int64_t fewer = 0; /* every server applies the same steps */
    for (int i = 0; i < s->cfg->servers; i++) {
        const int64_t f = s->nodes[i].report.steps_fewer_workers;
        fewer = f > fewer ? f : fewer;
        ps_hist_merge(&stale, &s->nodes[i].report.staleness);
        dropped += s->nodes[i].report.dropped;
        rejected += s->nodes[i].report.rejected;
        nonfinite += s->nodes[i].report.nonfinite;
        secure_refused += s->nodes[i].report.secure_refused;
        forged += s->nodes[i].report.forged;
        unread += s->nodes[i].report.unread_refused;
    }
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
                    ps_hist_mean(&stale), smax, (unsigned long long)dropped);
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
        for (int e = 0; e < w0->num_epochs_evaluated; e++) {
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
                (unsigned long long)dropped, (unsigned long long)rejected,
                (unsigned long long)s->refused, (unsigned long long)nonfinite, s->membership_changes,
                ps_join_count(s->join), ps_restart_count(s->restart), (long long)fewer, (unsigned long long)secure_refused,
                (unsigned long long)forged, (unsigned long long)unread, ps_cpu_seconds(),
                (unsigned long long)s->messages);
        s_json_workers(f, s, offsetof(ps_done_t, wait_seconds));
        fprintf(f, ", \"worker_compute_seconds\": ");
        s_json_workers(f, s, offsetof(ps_done_t, compute_seconds));
        fprintf(f, ", \"worker_train_seconds\": ");
        s_json_workers(f, s, offsetof(ps_done_t, train_seconds));
        fprintf(f, ", \"worker_steps\": [");
        for (int i = s->cfg->servers; i < s->nnodes; i++) {
            fprintf(f, "%s%lld", i > s->cfg->servers ? ", " : "",
                    (long long)s->nodes[i].stats.steps);
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
