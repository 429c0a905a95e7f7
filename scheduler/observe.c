/*
 * scheduler/observe.c - the job's metrics (ours and the nodes') and its
 * status view. Reads the core only through its ops, and only on the loop's
 * thread; the HTTP thread sees this module's own copies.
 */
#include "scheduler/observe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/http.h"
#include "common/log.h"
#include "common/metrics.h"
#include "proto/codec.h"

/* Status askers remembered for ps_sched_obs_status_final: a `shardps-status
 * --watch` between two questions when the job ends learns how it ended. */
#define S_WATCHERS 8

/* What we keep of one node's reports. */
typedef struct {
    char tag[16];               /* its metrics' node label value */
    char *text;                 /* its last Prometheus text; NULL before the first */
    Shardps__MetricsReport report; /* its last report: text "", waiting_for in waiting */
    int32_t waiting[PS_REPORT_MAX_WAITING];
    int reported;               /* a report arrived */
    double rate_t;              /* the rates' window: its start, and the counts then */
    int64_t rate_step;
    uint64_t rate_samples;
    double steps_per_second, samples_per_second;
} s_node_t;

struct ps_sched_obs {
    const ps_sched_ops_t *ops; /* the core's (borrowed): the loop's thread only */
    pthread_mutex_t mu; /* the nodes' texts and `fresh`, between the loop and the HTTP thread */
    s_node_t *nodes;
    int nnodes;
    int fresh;          /* a node's text arrived since the last merge */
    ps_text_t merged;   /* the nodes' texts merged: the HTTP thread's own */
    ps_metrics_t *reg;
    ps_http_t *http;
    ps_metric_t *messages[PS_MSG_TYPE_MAX + 1];
    ps_metric_t *refused, *membership, *live, *lost, *done, *phase_running;
    ps_metric_t *replaced, *takeovers, *rebuilds, *rebuild_max, *rolled_back;
    unsigned long scrapes_at_end; /* scrapes before the job ended */
    ps_route_t watchers[S_WATCHERS]; /* the latest status askers: told the final state */
    int nwatchers;                   /* used entries */
    int next_watcher;                /* the entry replaced next once all are used */
};

/* The rates' shortest window: two heartbeat periods, so that workers in
 * lockstep show about the same rate whatever their heartbeats' phase. */
#define S_RATE_SECONDS 0.9

/* Merges the nodes' texts into o->merged: copied under the lock, merged
 * outside it, so that a scrape never holds up the event loop's heartbeats. */
static void s_merge_nodes(ps_sched_obs_t *o)
{
    const char *texts[PS_MAX_SERVERS + PS_MAX_WORKERS];
    const char *labels[PS_MAX_SERVERS + PS_MAX_WORKERS];
    char lab[PS_MAX_SERVERS + PS_MAX_WORKERS][32];
    size_t at[PS_MAX_SERVERS + PS_MAX_WORKERS];
    ps_text_t copy = {0};
    int n = 0;
    pthread_mutex_lock(&o->mu);
    o->fresh = 0;
    for (int i = 0; i < o->nnodes; i++) {
        if (o->nodes[i].text) {
            snprintf(lab[n], sizeof lab[n], "node=\"%s\"", o->nodes[i].tag);
            at[n++] = copy.len;
            ps_text_printf(&copy, "%s%c", o->nodes[i].text, '\0'); /* each NUL-ended */
        }
    }
    o->fresh = copy.oom; /* not copied: try again next scrape */
    pthread_mutex_unlock(&o->mu);
    for (int k = 0; k < n && !copy.oom; k++) {
        texts[k] = copy.p + at[k];
        labels[k] = lab[k];
    }
    o->merged.len = 0;
    o->merged.oom = 0;
    if (o->merged.p) {
        o->merged.p[0] = '\0';
    }
    if (!copy.oom) {
        ps_metrics_merge(&o->merged, texts, labels, n);
    }
    free(copy.p);
}

/* A scrape: our series now, the nodes' merged again only when one of them
 * reported since the last scrape. */
void ps_sched_obs_render(ps_sched_obs_t *o, ps_text_t *out)
{
    ps_metrics_render(o->reg, out);
    pthread_mutex_lock(&o->mu);
    const int fresh = o->fresh;
    pthread_mutex_unlock(&o->mu);
    if (fresh || o->merged.oom) {
        s_merge_nodes(o);
    }
    if (o->merged.len) {
        ps_text_printf(out, "%s", o->merged.p);
    }
}

/* The HTTP server's callback, on its one thread. */
static void s_render(void *arg, ps_text_t *out)
{
    ps_sched_obs_render(arg, out);
}

int ps_sched_obs_new(const ps_sched_ops_t *ops, const char *bind, ps_sched_obs_t **out,
                     char *err, size_t errlen)
{
    const int nnodes = ops->cfg->servers + ops->cfg->workers;
    *out = NULL;
    ps_sched_obs_t *o = calloc(1, sizeof *o);
    if (!o || !(o->nodes = calloc((size_t)nnodes, sizeof *o->nodes)) ||
        ps_metrics_new(&o->reg) != 0) {
        if (o) {
            free(o->nodes);
        }
        free(o);
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    pthread_mutex_init(&o->mu, NULL);
    o->ops = ops;
    o->nnodes = nnodes;
    ps_metrics_t *m = o->reg;
    /* the types nodes send us; anything else counts as "other" (index 0) */
    static const int types[] = {PS_MSG_NONE,     PS_MSG_REGISTER, PS_MSG_MODEL_INFO,
                                PS_MSG_BARRIER,  PS_MSG_HEARTBEAT, PS_MSG_SHUTDOWN,
                                PS_MSG_DONE,     PS_MSG_REPORT,   PS_MSG_CHECKPOINT,
                                PS_MSG_STATUS};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const int t = types[k];
        const char *name = t ? ps_codec_type_name(t) : "other";
        char lab[48];
        snprintf(lab, sizeof lab, "type=\"%s\"", name);
        o->messages[t] = ps_metrics_counter(m, "shardps_scheduler_messages_total", lab,
                                            "messages received, by type");
    }
    o->refused = ps_metrics_counter(m, "shardps_scheduler_refused_total", NULL,
                                    "messages refused: from a connection that is not the node it claims");
    o->membership = ps_metrics_counter(m, "shardps_scheduler_membership_changes_total", NULL,
                                       "workers left out (or joined) while the job ran");
    o->live = ps_metrics_gauge(m, "shardps_scheduler_nodes", "state=\"live\"",
                               "nodes by state");
    o->lost = ps_metrics_gauge(m, "shardps_scheduler_nodes", "state=\"lost\"", "nodes by state");
    o->done = ps_metrics_gauge(m, "shardps_scheduler_nodes", "state=\"done\"", "nodes by state");
    o->phase_running = ps_metrics_gauge(m, "shardps_scheduler_running", NULL,
                                        "1 while the job runs (view sent, not finished)");
    o->replaced = ps_metrics_counter(m, "shardps_scheduler_server_replacements_total", NULL,
                                     "lost servers replaced (from a checkpoint, or taken over)");
    o->takeovers = ps_metrics_counter(m, "shardps_scheduler_takeovers_total", NULL,
                                      "lost servers taken over by their hot replica");
    o->rebuilds = ps_metrics_counter(m, "shardps_scheduler_replica_rebuilds_total", NULL,
                                     "new replicas in step after a takeover");
    o->rebuild_max = ps_metrics_gauge(m, "shardps_scheduler_replica_rebuild_seconds_max", NULL,
                                      "longest time from a takeover to the new replica in step");
    o->rolled_back = ps_metrics_counter(m, "shardps_scheduler_steps_rolled_back_total", NULL,
                                        "steps trained again after servers were replaced");
    char bound[96];
    int rc = bind ? ps_http_new(bind, s_render, o, &o->http, bound, sizeof bound, err, errlen)
                  : 0;
    if (rc != 0) {
        ps_sched_obs_destroy(&o);
        return rc;
    }
    if (bind) {
        ps_log_info("metrics on http://%s/metrics", bound);
    }
    *out = o;
    return 0;
}

void ps_sched_obs_destroy(ps_sched_obs_t **op)
{
    ps_sched_obs_t *o = *op;
    if (!o) {
        return;
    }
    ps_http_destroy(&o->http);
    for (int i = 0; i < o->nnodes; i++) {
        free(o->nodes[i].text);
    }
    pthread_mutex_destroy(&o->mu);
    free(o->merged.p);
    ps_metrics_destroy(&o->reg);
    free(o->nodes);
    free(o);
    *op = NULL;
}

void ps_sched_obs_heartbeat(ps_sched_obs_t *o, int i, const char *tag,
                            const Shardps__MetricsReport *r)
{
    char *text = NULL;
    if (i < 0 || i >= o->nnodes || (r->text[0] && !(text = strdup(r->text)))) {
        return;
    }
    s_node_t *n = &o->nodes[i];
    double now = ps_now();
    if (!n->reported || r->step < n->rate_step) {
        n->rate_t = now;
        n->rate_step = r->step;
        n->rate_samples = r->samples;
    } else if (now - n->rate_t >= S_RATE_SECONDS) {
        n->steps_per_second = (double)(r->step - n->rate_step) / (now - n->rate_t);
        n->samples_per_second = (double)(r->samples - n->rate_samples) / (now - n->rate_t);
        n->rate_t = now;
        n->rate_step = r->step;
        n->rate_samples = r->samples;
    }
    pthread_mutex_lock(&o->mu);
    snprintf(n->tag, sizeof n->tag, "%s", tag);
    free(n->text);
    n->text = text;
    n->report = *r; /* the scalars; what it points to is the message's */
    n->report.base.n_unknown_fields = 0;
    n->report.base.unknown_fields = NULL;
    n->report.text = (char *)protobuf_c_empty_string;
    n->report.waiting_for = n->waiting;
    if (r->n_waiting_for) { /* at most PS_REPORT_MAX_WAITING: checked */
        memcpy(n->waiting, r->waiting_for, r->n_waiting_for * sizeof *n->waiting);
    }
    n->reported = 1;
    o->fresh = 1;
    pthread_mutex_unlock(&o->mu);
}

int64_t ps_sched_obs_last_step(ps_sched_obs_t *o)
{
    int64_t last = 0;
    pthread_mutex_lock(&o->mu);
    for (int i = o->ops->cfg->servers; i < o->nnodes; i++) { /* servers first: their
                                                              step is a version */
        last = o->nodes[i].reported && o->nodes[i].report.step > last ? o->nodes[i].report.step
                                                                       : last;
    }
    pthread_mutex_unlock(&o->mu);
    return last;
}

void ps_sched_obs_message(ps_sched_obs_t *o, int type)
{
    int known = type > 0 && type <= PS_MSG_TYPE_MAX && o->messages[type];
    ps_metric_add(o->messages[known ? type : 0], 1);
}

void ps_sched_obs_mark_end(ps_sched_obs_t *o)
{
    o->scrapes_at_end = ps_http_scrapes(o->http);
}

void ps_sched_obs_hold(ps_sched_obs_t *o, double seconds)
{
    if (!o->http || seconds <= 0) {
        return;
    }
    unsigned long before = o->scrapes_at_end;
    double until = ps_now() + seconds;
    ps_log_info("serving the final metrics until they are scraped (at most %.0f s)", seconds);
    while (ps_http_scrapes(o->http) == before && ps_now() < until) {
        ps_sleep(0.02);
    }
}

/* Row i of the core's table, servers first; an unused row where the core
 * has none. */
static const ps_node_t *s_row(const ps_sched_obs_t *o, int i)
{
    static const ps_node_t none;
    const ps_sched_ops_t *ops = o->ops;
    const int servers = ops->cfg->servers;
    const ps_node_t *n = i < servers ? ops->node(ops->core, PS_ROLE_SERVER, i)
                                     : ops->node(ops->core, PS_ROLE_WORKER, i - servers);
    return n ? n : &none;
}

void ps_sched_obs_tick(ps_sched_obs_t *o, ps_failover_counts_t c)
{
    const ps_sched_facts_t *f = o->ops->facts(o->ops->core);
    int live = 0, lost = 0, done = 0;
    for (int i = 0; i < o->nnodes; i++) {
        const ps_node_t *n = s_row(o, i);
        live += n->used && !n->done;
        lost += n->lost;
        done += n->done;
    }
    ps_metric_set(o->live, live);
    ps_metric_set(o->lost, lost);
    ps_metric_set(o->done, done);
    ps_metric_set(o->refused, (double)f->refused);
    ps_metric_set(o->membership, f->membership_changes);
    ps_metric_set(o->phase_running, f->phase == PS_PHASE_RUNNING);
    ps_metric_set(o->replaced, c.replacements);
    ps_metric_set(o->takeovers, c.takeovers);
    ps_metric_set(o->rebuilds, c.rebuilds);
    ps_metric_set(o->rebuild_max, c.rebuild_max_s);
    ps_metric_set(o->rolled_back, (double)c.steps_rolled_back);
}

/* Node i of the cluster view for shardps-status, into sn (borrowing from the
 * core's rows and view v, and from o). */
static void s_status_node(const ps_sched_obs_t *o, int i, const ps_sched_facts_t *f,
                          const ps_view_t *v, double now, Shardps__StatusNode *sn)
{
    static const Shardps__MetricsReport none = SHARDPS__METRICS_REPORT__INIT;
    const ps_node_t *n = s_row(o, i);
    const s_node_t *on = &o->nodes[i];
    const int servers = o->ops->cfg->servers, is_server = i < servers;
    shardps__status_node__init(sn);
    sn->role = is_server ? PS_ROLE_SERVER : PS_ROLE_WORKER;
    sn->rank = is_server ? i : i - servers;
    sn->endpoint = (char *)n->endpoint;
    sn->pid = n->pid;
    if (is_server && f->phase != PS_PHASE_WAITING && i < v->num_servers) {
        sn->key_begin = v->servers[i].begin;
        sn->key_end = v->servers[i].end;
    }
    sn->state = (char *)(n->lost                         ? "lost"
                         : n->done                       ? "done"
                         : !n->used                      ? "missing"
                         : f->phase == PS_PHASE_WAITING ? "registered"
                                                         : "running");
    sn->silent_seconds = n->used ? now - n->last_seen : 0;
    sn->report = (Shardps__MetricsReport *)(on->reported ? &on->report : &none);
    if (on->reported) {
        sn->steps_per_second = on->steps_per_second;
        sn->samples_per_second = on->samples_per_second;
    }
}

/* The cluster view to route, as the answer to request_id (0: unasked, the
 * final state). Returns 0 or a negative PS_E* (PS_ENOMEM: nothing sent). */
static int s_status_send(ps_sched_obs_t *o, const ps_route_t *route, uint64_t request_id)
{
    const ps_sched_ops_t *ops = o->ops;
    const ps_sched_facts_t *f = ops->facts(ops->core);
    const ps_view_t *v = ops->view(ops->core);
    const ps_job_t *j = &ops->cfg->job;
    char mode[PS_STATUS_MODE_MAX];
    ps_job_mode_str(j, mode, sizeof mode);
    Shardps__StatusReply st = SHARDPS__STATUS_REPLY__INIT;
    st.phase = (char *)ps_phase_name(f->phase);
    st.model = (char *)j->model;
    st.mode = mode;
    st.total_steps = v->total_steps;
    st.num_params = v->num_params;
    const double now = ps_now();
    st.elapsed_seconds = now - f->t_start;
    Shardps__StatusNode *nodes = calloc((size_t)o->nnodes + 1, sizeof *nodes);
    st.nodes = calloc((size_t)o->nnodes + 1, sizeof *st.nodes);
    for (int i = 0; nodes && st.nodes && i < o->nnodes; i++) {
        s_status_node(o, i, f, v, now, &nodes[i]);
        st.nodes[i] = &nodes[i];
    }
    st.n_nodes = (size_t)o->nnodes;
    int rc = !nodes || !st.nodes
                 ? PS_ENOMEM
                 : ops->answer(ops->core, route, PS_MSG_STATUS_REPLY, request_id, &st.base);
    free(st.nodes);
    free(nodes);
    return rc;
}

/* Remembers who asked, once, replacing the oldest when all are used. */
static void s_watcher_add(ps_sched_obs_t *o, const ps_route_t *r)
{
    for (int i = 0; i < o->nwatchers; i++) {
        if (o->watchers[i].len == r->len && !memcmp(o->watchers[i].id, r->id, r->len)) {
            return;
        }
    }
    if (o->nwatchers < S_WATCHERS) {
        o->watchers[o->nwatchers++] = *r;
    } else {
        o->watchers[o->next_watcher] = *r;
        o->next_watcher = (o->next_watcher + 1) % S_WATCHERS;
    }
}

void ps_sched_obs_status_reply(ps_sched_obs_t *o, const ps_msg_t *m)
{
    s_watcher_add(o, &m->route);
    if (s_status_send(o, &m->route, m->hdr.request_id) == PS_ENOMEM) {
        o->ops->reply_error(o->ops->core, m, PS_ENOMEM, "out of memory");
    }
}

void ps_sched_obs_status_final(ps_sched_obs_t *o)
{
    for (int i = 0; o && i < o->nwatchers; i++) {
        (void)s_status_send(o, &o->watchers[i], 0); /* one gone is no matter */
    }
}
