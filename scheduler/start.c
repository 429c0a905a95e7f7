/*
 * scheduler/start.c - part of the scheduler's core (scheduler_impl.h): a job
 * from the first registration to RUNNING.
 *
 * Servers and workers register and get their rank and token; once every
 * worker reported its model, [0, P) is cut into one byte-balanced range per
 * server and the servers get the cluster view (STARTING); once each is bound
 * for its shard (PEER_READY) the workers get it too, with the servers'
 * endpoints (RUNNING). In allreduce mode there are no servers: the workers
 * get the view with the ring at once. The view changes later only here: a
 * failover's rollback, or a restarted scheduler taking a saved job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "proto/link.h"
#include "proto/range.h"
#include "scheduler/scheduler_impl.h"

/* A REGISTER of a node of the job before it starts: a free rank (its own
 * --rank, or the lowest free one). */
static void s_register(ps_scheduler_t *s, ps_msg_t *m, const Shardps__Register *reg)
{
    if (s->facts.phase != PS_PHASE_WAITING || ps_scheduler_node_of(s, &m->route)) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "the job has already started or this node is registered");
        return;
    }
    const int is_server = reg->role == PS_ROLE_SERVER;
    const int count = is_server ? s->cfg->servers : s->cfg->workers;
    const char *what = is_server ? "server" : "worker";
    ps_node_t *base = is_server ? s->nodes : s->nodes + s->cfg->servers;
    int rank = reg->rank;
    if (rank < -1 || rank >= count) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "rank %d is out of range: -1 (any) or 0 to %d (the job has %d %ss)",
                           rank, count - 1, count, what);
        return;
    }
    if (rank >= 0 && base[rank].used) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "%s%d is already registered", ps_codec_role_tag(reg->role), rank);
        return;
    }
    for (int i = 0; rank < 0 && i < count; i++) {
        if (!base[i].used) {
            rank = i;
        }
    }
    if (rank < 0) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "the job already has all %d %ss", count, what);
        return;
    }
    if (s->cfg->secure && !reg->curve_key[0]) {
        /* ZAP admitted its connection; the key it serves with must come too. */
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "a node of a secure job must send its public key");
        return;
    }
    ps_node_t *n = &base[rank];
    if (ps_members_admit(n, m, reg, rank, 0) != 0) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EIO,
                           "the scheduler cannot draw a token");
        return;
    }
    ps_members_fix_endpoint(s, n, reg->endpoint, m->peer_addr);
    ps_scheduler_send_ack(s, n);
    char tag[16];
    ps_log_info("registered %s (pid %u%s%s)", ps_node_tag(n, tag, sizeof tag), n->pid,
                n->endpoint[0] ? ", " : "", n->endpoint);
    return;
}

static void s_start_workers(ps_scheduler_t *s);

/* The view's job and shard map, once every worker told us P (and its data):
 * P, the steps, and the checkpoint part. Returns 0, 1 when a resume asked
 * the servers first (scheduler/ckpt.h: it sends the servers the view), or a
 * PS_E* when the job failed (the reason is given). */
static int s_view_job(ps_scheduler_t *s, uint64_t p, uint64_t samples)
{
    const ps_job_t *j = &s->cfg->job;
    int64_t spe = (int64_t)(samples / ((uint64_t)s->cfg->workers * (uint64_t)j->batch));
    if (spe < 1) {
        ps_scheduler_fail(s, "a global batch of %d x %d is larger than the %llu training samples",
                          s->cfg->workers, j->batch, (unsigned long long)samples);
        return PS_EINVAL;
    }
    int64_t total = spe * j->epochs;
    ps_view_t *v = s->view;
    v->num_params = p;
    v->num_workers = s->cfg->workers;
    v->num_servers = s->cfg->servers;
    v->job = s->cfg->job;
    v->steps_per_epoch = spe;
    v->total_steps = j->max_steps && j->max_steps < total ? j->max_steps : total;
    v->preflight = s->cfg->preflight && s->cfg->servers > 0;
    v->replicas = s->cfg->replicas;
    ps_range_t ranges[PS_MAX_SERVERS];
    ps_rowrange_t rows[PS_MAX_SERVERS];
    ps_range_split(p, s->cfg->servers, ranges);
    ps_range_split_rows(s->cfg->servers, rows);
    for (int i = 0; i < s->cfg->servers; i++) {
        v->servers[i].rank = i;
        v->servers[i].begin = ranges[i].begin;
        v->servers[i].end = ranges[i].end;
        /* embedding rows: by their keys' hash, so hot ids spread */
        v->servers[i].rows = ps_job_has_rows(j) ? rows[i] : (ps_rowrange_t){0, 0};
    }
    const int rc = ps_ckpt_setup(s->ckpt, samples);
    if (rc == 0 && ps_ckpt_view(s->ckpt, v) != 0) {
        ps_scheduler_fail(s, "out of memory");
        return PS_ENOMEM;
    }
    return rc;
}

/* Everyone is here and every worker told us P: cut the key space and send
 * the servers their copy of the view (allreduce: the workers theirs). */
static void s_maybe_start(ps_scheduler_t *s)
{
    uint64_t p = 0, samples = 0;
    for (int i = 0; i < s->nnodes; i++) {
        ps_node_t *n = &s->nodes[i];
        if (!n->used || (n->role == PS_ROLE_WORKER && !n->num_params)) {
            return;
        }
        if (n->role == PS_ROLE_WORKER) {
            if (p && p != n->num_params) {
                ps_scheduler_fail(s, "workers disagree on the model size: %llu vs %llu "
                                  "parameters", (unsigned long long)p,
                                  (unsigned long long)n->num_params);
                return;
            }
            p = n->num_params;
            samples = samples && samples < n->train_samples ? samples : n->train_samples;
        }
    }
    if (s_view_job(s, p, samples) != 0) {
        return;
    }
    if (s->cfg->servers > 0) {
        ps_start_servers(s);
        return;
    }
    ps_log_info("ring of %d workers over %llu parameters (%.2f MB)", s->cfg->workers,
                (unsigned long long)p, (double)p * 4 / 1e6);
    for (int i = 0; i < s->cfg->workers; i++) {
        ps_worker_info_t *wi = &s->view->workers[i];
        ps_node_t *n = ps_scheduler_worker(s, i);
        /* now that every worker is here: a ring endpoint on this host too */
        ps_members_fix_endpoint(s, n, n->endpoint, "");
        wi->rank = i;
        snprintf(wi->endpoint, sizeof wi->endpoint, "%s", n->endpoint);
        snprintf(wi->curve_key, sizeof wi->curve_key, "%s", n->curve_key);
        ps_log_info("  W%d %-28s sends to W%d", i, wi->endpoint, (i + 1) % s->cfg->workers);
    }
    s_start_workers(s);
}

void ps_start_servers(ps_scheduler_t *s)
{
    if (ps_ckpt_view(s->ckpt, s->view) != 0) {
        ps_scheduler_fail(s, "out of memory");
        return;
    }
    /* The servers' copy, with the workers' tokens and no endpoints yet:
     * each binds for its shard and says where (s_on_peer_ready). */
    for (int i = 0; i < s->cfg->servers; i++) {
        if (ps_scheduler_send_view(s, &s->nodes[i], PS_MSG_VIEW, NULL) != 0) {
            ps_scheduler_fail(s, "cannot encode the cluster view");
            return;
        }
    }
    ps_scheduler_phase_event(s, PS_PHASE_EV_SERVERS_VIEWED);
}

/* The job's first line, and a warning about a setting known to diverge. */
static void s_log_started(const ps_scheduler_t *s)
{
    const ps_view_t *v = s->view;
    const ps_job_t *j = &s->cfg->job;
    char sched[64], mode[32];
    ps_job_schedule_name(&j->schedule, sched, sizeof sched);
    ps_job_mode_str(j, mode, sizeof mode);
    ps_log_info("job started: model=%s mode=%s servers=%d workers=%d batch=%d epochs=%d "
                "steps=%lld lr=%g schedule=%s momentum=%g seed=%llu",
                j->model, mode, v->num_servers, v->num_workers, j->batch,
                j->epochs, (long long)v->total_steps, j->lr, sched, j->momentum,
                (unsigned long long)j->seed);
    double rate;
    const double mu = ps_job_async_momentum(j, v->num_workers, &rate);
    if (rate != 1) {
        ps_log_info("async over %d workers: the servers run momentum %g, the rate x%.3g "
                    "(staleness adds momentum of its own; docs/design.md)",
                    v->num_workers, mu, rate);
    }
    /* A push computed on values M-1 pushes old acts as momentum of its own;
     * --staleness-lr's weights are what keep async stable
     * (docs/design/consistency.md). */
    if (j->mode == PS_MODE_ASYNC && v->num_workers > 1 && !j->staleness_lr &&
        j->momentum >= 0.5 &&
        (strcmp(j->optimizer, "sgd") == 0 || strcmp(j->optimizer, "nesterov") == 0)) {
        ps_log_warn("async over %d workers with momentum %g and --staleness-lr 0: every push "
                    "applies at the full rate, and staleness adds momentum of its own; such "
                    "jobs diverge (docs/design.md)", v->num_workers, j->momentum);
    }
}

/* Every server is bound for its shard (or there are none): the workers get
 * the view with the servers' endpoints, and the job runs. A worker connects
 * only now, so it never meets a server that is not listening yet. */
static void s_start_workers(ps_scheduler_t *s)
{
    ps_view_t *v = s->view;
    if (s->cfg->servers > 0) {
        ps_log_info("shard map: %llu parameters (%.2f MB) over %d servers",
                    (unsigned long long)v->num_params, (double)v->num_params * 4 / 1e6,
                    s->cfg->servers);
    }
    for (int i = 0; i < s->cfg->servers; i++) {
        ps_server_info_t *si = &v->servers[i];
        snprintf(si->endpoint, sizeof si->endpoint, "%s", s->nodes[i].endpoint);
        snprintf(si->curve_key, sizeof si->curve_key, "%s", s->nodes[i].curve_key);
        ps_log_info("  S%d %-28s keys [%llu, %llu) = %llu parameters", i, si->endpoint,
                    (unsigned long long)si->begin, (unsigned long long)si->end,
                    (unsigned long long)(si->end - si->begin));
    }
    for (int i = 0; i < s->cfg->workers; i++) {
        if (ps_scheduler_send_view(s, ps_scheduler_worker(s, i), PS_MSG_VIEW, NULL) != 0) {
            ps_scheduler_fail(s, "cannot encode the cluster view");
            return;
        }
    }
    ps_scheduler_phase_event(s, PS_PHASE_EV_WORKERS_VIEWED);
    s->facts.t_view = ps_now();
    ps_scheduler_save_state(s);
    s_log_started(s);
}

/* A server is bound for its shard, at endpoint: once every server is, the
 * workers get the view. */
static void s_on_peer_ready(ps_scheduler_t *s, ps_node_t *n, ps_msg_t *m)
{
    char tag[16];
    const Shardps__PeerReady *pr = ps_msg_unpack_body(m, &shardps__peer_ready__descriptor);
    /* While the job runs only a promoted spare binds (scheduler/failover.c):
     * its endpoint goes into the view the workers get once every server
     * rolled back (its PEER_READY comes before its FAILOVER_READY). */
    const int spare = s->facts.phase == PS_PHASE_RUNNING;
    if (n->role != PS_ROLE_SERVER || (s->facts.phase != PS_PHASE_STARTING && !spare) || n->ready ||
        !pr) {
        ps_scheduler_fail(s, "%s sent a bad ready message", ps_node_tag(n, tag, sizeof tag));
        return;
    }
    ps_members_fix_endpoint(s, n, pr->endpoint, m->peer_addr);
    n->ready = 1;
    if (spare) {
        ps_server_info_t *si = &s->view->servers[n->rank];
        snprintf(si->endpoint, sizeof si->endpoint, "%s", n->endpoint);
        ps_log_info("S%d listens on %s", n->rank, n->endpoint);
        return;
    }
    for (int i = 0; i < s->cfg->servers; i++) {
        if (!s->nodes[i].ready) {
            return;
        }
    }
    s_start_workers(s);
}

/* A worker's model size and, in allreduce mode, the endpoint its left
 * neighbour will connect to. */
static void s_on_model_info(ps_scheduler_t *s, ps_node_t *n, ps_msg_t *m)
{
    char tag[16];
    const Shardps__ModelInfo *mi = ps_msg_unpack_body(m, &shardps__model_info__descriptor);
    if (n->role != PS_ROLE_WORKER || !mi || !mi->num_params) {
        ps_scheduler_fail(s, "%s sent a bad model size", ps_node_tag(n, tag, sizeof tag));
        return;
    }
    if (s->cfg->job.mode == PS_MODE_ALLREDUCE) {
        if (!mi->endpoint[0]) {
            ps_scheduler_fail(s, "%s has no ring endpoint (allreduce needs one per worker)",
                              ps_node_tag(n, tag, sizeof tag));
            return;
        }
        ps_members_fix_endpoint(s, n, mi->endpoint, m->peer_addr);
        ps_log_info("%s ring endpoint %s", ps_node_tag(n, tag, sizeof tag), n->endpoint);
    }
    n->num_params = mi->num_params;
    n->train_samples = mi->train_samples;
}

static int s_on_message(void *self, const ps_node_t *from, ps_msg_t *m)
{
    ps_scheduler_t *s = self;
    ps_node_t *n = from ? ps_scheduler_row(s, from->role, from->rank) : NULL;
    if (!n) {
        return 0;
    }
    if (m->hdr.type == PS_MSG_MODEL_INFO) {
        s_on_model_info(s, n, m);
    } else if (m->hdr.type == PS_MSG_PEER_READY) {
        s_on_peer_ready(s, n, m);
    } else {
        return 0;
    }
    if (s->facts.phase == PS_PHASE_WAITING) {
        s_maybe_start(s);
    }
    return 1;
}

/* " S1 W3 ..." (the nodes not registered yet, marked "(+N more)" past the
 * line's room) into buf. Returns how many are registered. */
static int s_missing(const ps_scheduler_t *s, char *buf, size_t cap)
{
    char one[16];
    size_t at = 0;
    int more = 0, in = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->nnodes; i++) {
        if (s->nodes[i].used) {
            in++;
            continue;
        }
        int is_server = i < s->cfg->servers;
        snprintf(one, sizeof one, " %s%d", is_server ? "S" : "W",
                 is_server ? i : i - s->cfg->servers);
        at += ps_log_list_add(buf, cap, at, one, &more);
    }
    ps_log_list_end(buf, cap, at, more);
    return in;
}

/* WAITING: the job fails when not every node registered within --wait, and
 * says every few seconds which are missing. */
static void s_on_tick(void *self, double now)
{
    ps_scheduler_t *s = self;
    if (s->facts.phase != PS_PHASE_WAITING) {
        return;
    }
    char missing[160];
    const int in = s_missing(s, missing, sizeof missing);
    if (now - s->facts.t_start > s->cfg->wait) {
        ps_scheduler_fail(s, "not every node registered within %.0f s; missing:%s", s->cfg->wait,
                          missing[0] ? missing : " model sizes from workers");
    } else if (now >= s->next_wait_log) {
        ps_log_info("still waiting for%s (%d/%d registered, %.0f s of --wait %.0f)",
                    missing[0] ? missing : " model sizes from workers", in, s->nnodes,
                    now - s->facts.t_start, s->cfg->wait);
        s->next_wait_log = now + PS_LINK_WAIT_LOG_SECONDS;
    }
}

/* A fresh registration may complete the job: every message checks. */
static int s_on_register(void *self, ps_msg_t *m, const Shardps__Register *reg)
{
    ps_scheduler_t *s = self;
    s_register(s, m, reg);
    if (s->facts.phase == PS_PHASE_WAITING) {
        s_maybe_start(s);
    }
    return 1;
}

const ps_sched_events_t ps_start_events = {
    .on_register = s_on_register,
    .on_message = s_on_message,
    .on_tick = s_on_tick,
};

void ps_start_saved_job(ps_scheduler_t *s, const ps_view_t *v,
                        const Shardps__JoinSchedulerState *st, double now)
{
    *s->view = *v;
    ps_scheduler_phase_event(s, PS_PHASE_EV_SAVED_JOB_BACK);
    s->facts.t_view = now - st->seconds;
    s->facts.membership_changes = st->membership_changes;
    for (int w = 0; w < s->cfg->workers; w++) {
        ps_node_t *n = ps_scheduler_worker(s, w);
        n->lost = 0;
        n->token = s->view->worker_tokens[w]; /* the servers hold these */
    }
    for (size_t i = 0; i < st->n_lost; i++) { /* checked: each a worker of the view */
        ps_scheduler_worker(s, st->lost[i])->lost = 1;
    }
    memset(s->view->worker_tokens, 0, sizeof s->view->worker_tokens);
    ps_join_saved_job(s->join, st->workers_joined);
    if (ps_ckpt_saved_job(s->ckpt, s->view, st->checkpoint) != 0) {
        ps_scheduler_fail(s, "out of memory");
    }
}

void ps_start_replace(ps_scheduler_t *s, int r, const ps_node_t *spare, int64_t step,
                      const ps_checkpoint_part_t *parts, int nparts, const char *dir)
{
    ps_view_t *v = s->view;
    ps_members_swap_in(&s->nodes[r], spare); /* the spare's connection is S<r> from now on */
    v->generation++;
    v->replaced = r + 1;
    v->takeover = 0;
    v->start_step = step;
    v->resume_step = 0; /* a resume's other worker count: the parts are of step now */
    v->resume_parts = nparts;
    memcpy(v->resume_files, parts, (size_t)nparts * sizeof *parts);
    snprintf(v->resume_dir, sizeof v->resume_dir, "%s", dir);
    v->servers[r].endpoint[0] = '\0';
    snprintf(v->servers[r].curve_key, sizeof v->servers[r].curve_key, "%s", spare->curve_key);
}

void ps_start_take_over(ps_scheduler_t *s, int r, const ps_node_t *replica)
{
    ps_view_t *v = s->view;
    ps_node_t *n = &s->nodes[r];
    ps_members_swap_in(n, replica);
    snprintf(n->endpoint, sizeof n->endpoint, "%s", replica->endpoint); /* bound already */
    n->ready = 1;
    v->generation++;
    v->replaced = r + 1;
    v->takeover = 1;
    snprintf(v->servers[r].endpoint, sizeof v->servers[r].endpoint, "%s", replica->endpoint);
    snprintf(v->servers[r].curve_key, sizeof v->servers[r].curve_key, "%s", replica->curve_key);
}
