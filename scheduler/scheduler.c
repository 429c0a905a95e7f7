/*
 * scheduler/scheduler.c - the scheduler's one event loop.
 *
 * Every node is a row in s->nodes, keyed by its ROUTER routing id. Any message
 * from a node proves it alive; a node silent for peer_timeout is lost and the
 * job is aborted with a SHUTDOWN naming it, so no process waits forever on a
 * dead peer.
 */
#include "scheduler/scheduler.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "proto/codec.h"
#include "proto/curve.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "proto/sock.h"
#include "scheduler/agree.h"
#include "scheduler/failover.h"
#include "scheduler/join.h"
#include "scheduler/manifest.h"
#include "scheduler/preflight.h"
#include "scheduler/scheduler_impl.h"
#include "scheduler/summary.h"

/* Largest frame the scheduler takes: its messages are all small. */
#define PS_SCHEDULER_MAX_MESSAGE (1 << 20)
/* Messages queued per connection: a node has a few in flight (a heartbeat
 * every 0.5 s, a barrier, a report), so these only bound what a stranger
 * that never reads our answers (send) or floods us (receive: its connection
 * is then read as fast as we handle it) costs us. */
#define PS_SCHEDULER_SEND_QUEUE 1000
#define PS_SCHEDULER_RECV_QUEUE 16

/* A node's token: 64 random bits from the kernel, never 0 (0 = no token). */
int ps_scheduler_new_token(uint64_t *token)
{
    do {
        if (getrandom(token, sizeof *token, 0) != (ssize_t)sizeof *token) {
            return PS_EIO;
        }
    } while (*token == 0);
    return 0;
}

/* A message's sender for the log, by the address its connection comes from. */
static const char *s_peer(const ps_msg_t *m)
{
    return m->peer_addr[0] ? m->peer_addr : "an unknown address";
}

static ps_node_t *s_node_of(ps_scheduler_t *s, const ps_route_t *r)
{
    for (int i = 0; i < s->nnodes; i++) {
        ps_node_t *n = &s->nodes[i];
        if (n->used && n->route.len == r->len && !memcmp(n->route.id, r->id, r->len)) {
            return n;
        }
    }
    return NULL;
}

static void s_send_all(ps_scheduler_t *s, ps_msg_type_t type, const void *body, size_t len)
{
    for (int i = 0; i < s->nnodes; i++) {
        if (s->nodes[i].used) {
            ps_msg_send_ctrl(s->router, &s->nodes[i].route, type, PS_ROLE_SCHEDULER, 0, body,
                             len);
        }
    }
    ps_failover_send_spares(s, type, body, len);
}

void ps_scheduler_send_servers(ps_scheduler_t *s, ps_msg_type_t type, const void *body,
                               size_t len)
{
    for (int i = 0; i < s->cfg->servers; i++) {
        ps_msg_send_ctrl(s->router, &s->nodes[i].route, type, PS_ROLE_SCHEDULER, 0, body, len);
    }
}

/* Aborts the job: every node is told why, then the loop ends with status 1. */
static void s_fail(ps_scheduler_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_fail(ps_scheduler_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->failure, sizeof s->failure, fmt, ap);
    va_end(ap);
    ps_log_err("job aborted: %s", s->failure);
    ps_scheduler_phase_event(s, PS_PHASE_EV_ABORT);
    /* The summary first: once the nodes hear of the abort they exit, and a
     * launcher that sees them go may stop this process before it writes. */
    ps_summary_write(s);
    ps_join_state_write(s); /* its nodes are told to go: nothing to bring back */
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_shutdown(PS_ECLOSED, s->failure, &body, &len) == 0) {
        s_send_all(s, PS_MSG_SHUTDOWN, body, len);
        free(body);
    }
}

int ps_scheduler_phase_event(ps_scheduler_t *s, ps_phase_event_t ev)
{
    ps_phase_t to;
    int rc = ps_phase_next(s->phase, ev, &to);
    if (rc != 0) {
        ps_log_err("scheduler: no transition from %s on %s (a bug: the phase stays)",
                   ps_phase_name(s->phase), ps_phase_event_name(ev));
        return rc;
    }
    s->phase = to;
    return 0;
}

void ps_scheduler_fail(ps_scheduler_t *s, const char *reason)
{
    s_fail(s, "%s", reason);
}

void ps_scheduler_send_ack(ps_scheduler_t *s, const ps_node_t *n)
{
    ps_register_ack_t ack = {.rank = n->rank, .token = n->token, .job = s->cfg->job,
                             .run_id = s->run_id};
    snprintf(ack.job_id, sizeof ack.job_id, "%s", s->id.job_id);
    snprintf(ack.job_hash, sizeof ack.job_hash, "%s", s->id.job_hash);
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_register_ack(&ack, &body, &len) == 0) {
        ps_msg_send_ctrl(s->router, &n->route, PS_MSG_REGISTER_ACK, PS_ROLE_SCHEDULER, 0, body,
                         len);
        free(body);
    }
}

static void s_on_register(ps_scheduler_t *s, const ps_msg_t *m)
{
    ps_register_t reg;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (!p || ps_codec_unpack_register(p, len, &reg) != 0) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EPROTO,
                           "registration does not decode");
        return;
    }
    char why[400];
    if (ps_identity_check(&s->id, &reg, why, sizeof why) != 0) {
        s->registrations_refused++;
        ps_ratelog_reject(s->drops, "a registration", s_peer(m), why);
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL, "%s", why);
        return;
    }
    if (reg.run_id) { /* it lost its scheduler: is this one its restart? */
        ps_join_rejoin(s, m, &reg);
        return;
    }
    if (ps_failover_is_spare(s, &reg) && !s_node_of(s, &m->route)) {
        ps_failover_add_spare(s, m, &reg);
        return;
    }
    if (s->phase == PS_PHASE_RUNNING && reg.role == PS_ROLE_WORKER && !s_node_of(s, &m->route)) {
        ps_join_register(s, m, &reg);
        return;
    }
    if (s->phase != PS_PHASE_WAITING || s_node_of(s, &m->route)) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "the job has already started or this node is registered");
        return;
    }
    int is_server = reg.role == PS_ROLE_SERVER;
    int count = is_server ? s->cfg->servers : s->cfg->workers;
    ps_node_t *base = is_server ? s->nodes : s->nodes + s->cfg->servers;
    int rank = reg.rank;
    if (rank < -1 || rank >= count) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "rank %d is out of range: -1 (any) or 0 to %d (the job has %d %ss)",
                           rank, count - 1, count, is_server ? "server" : "worker");
        return;
    }
    if (rank >= 0 && base[rank].used) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "%s%d is already registered", ps_codec_role_tag(reg.role), rank);
        return;
    }
    for (int i = 0; rank < 0 && i < count; i++) {
        if (!base[i].used) {
            rank = i;
        }
    }
    if (rank < 0) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "the job already has all %d %ss", count,
                           is_server ? "server" : "worker");
        return;
    }
    if (s->cfg->secure && !reg.curve_key[0]) {
        /* ZAP admitted its connection; the key it serves with must come too. */
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "a node of a secure job must send its public key");
        return;
    }
    uint64_t token;
    if (ps_scheduler_new_token(&token) != 0) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EIO,
                           "the scheduler cannot draw a token");
        return;
    }
    ps_node_t *n = &base[rank];
    memset(n, 0, sizeof *n);
    n->used = 1;
    n->role = reg.role;
    n->rank = rank;
    n->route = m->route;
    n->pid = reg.pid;
    n->token = token;
    n->last_seen = ps_now();
    n->fd = m->peer_fd;
    snprintf(n->endpoint, sizeof n->endpoint, "%s", reg.endpoint);
    snprintf(n->curve_key, sizeof n->curve_key, "%s", reg.curve_key);
    ps_fix_endpoint(n->endpoint, sizeof n->endpoint, m->peer_addr);

    ps_scheduler_send_ack(s, n);
    char tag[16];
    ps_log_info("registered %s (pid %u%s%s)", ps_node_tag(n, tag, sizeof tag), n->pid,
                n->endpoint[0] ? ", " : "", n->endpoint);
}

/* Checkpoints and resume, into the view: where servers write them, and on
 * --resume the newest complete one (or a fresh start when there is none). */
static int s_checkpoint_setup(ps_scheduler_t *s, uint64_t samples)
{
    const ps_scheduler_config_t *c = s->cfg;
    ps_view_t *v = s->view;
    if (c->resume) {
        if (ps_manifest_find(c->resume, v->num_params, &v->start_step, &v->resume_parts,
                             v->resume_dir, sizeof v->resume_dir) == 0) {
            s->checkpoint = v->start_step;
            ps_log_info("resuming from %s at step %lld (%d parts)", v->resume_dir,
                        (long long)v->start_step, v->resume_parts);
            const int old = ps_manifest_workers(v->resume_dir);
            if (old > 0 && old != c->workers) {
                v->resume_step = v->start_step;
                v->start_step = ps_join_map_step(v->start_step, old, c->workers, c->job.batch,
                                                 samples);
                ps_log_warn("resume: the checkpoint's job had %d workers, this one %d: its "
                            "step %lld maps to step %lld at the same data position",
                            old, c->workers, (long long)v->resume_step,
                            (long long)v->start_step);
            }
        } else {
            ps_log_warn("resume: no complete checkpoint in %s; starting from step 0",
                        c->resume);
        }
    }
    if (c->checkpoint_every > 0 || c->checkpoint_seconds > 0) {
        snprintf(v->checkpoint_dir, sizeof v->checkpoint_dir, "%s", c->checkpoint_dir);
        v->checkpoint_every = c->checkpoint_every;
        if (ps_manifest_new(&s->manifest, v) != 0) {
            s_fail(s, "out of memory");
            return PS_ENOMEM;
        }
    }
    return 0;
}

/* A server's part of a checkpoint is durable. */
static void s_on_checkpoint(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    ps_checkpoint_part_t part;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    char tag[16];
    if (n->role != PS_ROLE_SERVER || !s->manifest || !p ||
        ps_codec_unpack_checkpoint(p, len, &part) != 0) {
        ps_log_warn("dropped a bad checkpoint report from %s",
                    ps_node_tag(n, tag, sizeof tag));
        return;
    }
    if (ps_manifest_add(s->manifest, n->rank, &part) == 1) {
        s->checkpoint = part.step;
        ps_join_state_write(s);
    }
}

static void s_start_workers(ps_scheduler_t *s);

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
                s_fail(s, "workers disagree on the model size: %llu vs %llu parameters",
                       (unsigned long long)p, (unsigned long long)n->num_params);
                return;
            }
            p = n->num_params;
            samples = samples && samples < n->train_samples ? samples : n->train_samples;
        }
    }
    const ps_job_t *j = &s->cfg->job;
    int64_t spe = (int64_t)(samples / ((uint64_t)s->cfg->workers * (uint64_t)j->batch));
    if (spe < 1) {
        s_fail(s, "a global batch of %d x %d is larger than the %llu training samples",
               s->cfg->workers, j->batch, (unsigned long long)samples);
        return;
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
    if (s_checkpoint_setup(s, samples) != 0) {
        return;
    }
    if (s->cfg->servers > 0) {
        ps_range_t ranges[PS_MAX_SERVERS];
        ps_range_split(p, s->cfg->servers, ranges);
        for (int i = 0; i < s->cfg->servers; i++) {
            v->servers[i].rank = i;
            v->servers[i].begin = ranges[i].begin;
            v->servers[i].end = ranges[i].end;
        }
        /* The servers' copy, with the workers' tokens and no endpoints yet:
         * each binds for its shard and says where (s_on_peer_ready). */
        for (int w = 0; w < s->cfg->workers; w++) {
            v->worker_tokens[w] = s->nodes[s->cfg->servers + w].token;
        }
        uint8_t *body;
        size_t len;
        int rc = ps_codec_pack_view(v, &body, &len);
        memset(v->worker_tokens, 0, sizeof v->worker_tokens);
        if (rc != 0) {
            s_fail(s, "cannot encode the cluster view");
            return;
        }
        ps_scheduler_send_servers(s, PS_MSG_VIEW, body, len);
        free(body);
        ps_scheduler_phase_event(s, PS_PHASE_EV_SERVERS_VIEWED);
        return;
    }
    ps_log_info("ring of %d workers over %llu parameters (%.2f MB)", s->cfg->workers,
                (unsigned long long)p, (double)p * 4 / 1e6);
    for (int i = 0; i < s->cfg->workers; i++) {
        ps_worker_info_t *wi = &v->workers[i];
        wi->rank = i;
        snprintf(wi->endpoint, sizeof wi->endpoint, "%s", s->nodes[s->cfg->servers + i].endpoint);
        snprintf(wi->curve_key, sizeof wi->curve_key, "%s",
                 s->nodes[s->cfg->servers + i].curve_key);
        ps_log_info("  W%d %-28s sends to W%d", i, wi->endpoint, (i + 1) % s->cfg->workers);
    }
    s_start_workers(s);
}

/* Every server is bound for its shard (or there are none): the workers get
 * the view with the servers' endpoints, and the job runs. A worker connects
 * only now, so it never meets a server that is not listening yet. */
static void s_start_workers(ps_scheduler_t *s)
{
    ps_view_t *v = s->view;
    const ps_job_t *j = &s->cfg->job;
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
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_view(v, &body, &len) != 0) {
        s_fail(s, "cannot encode the cluster view");
        return;
    }
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        ps_msg_send_ctrl(s->router, &s->nodes[i].route, PS_MSG_VIEW, PS_ROLE_SCHEDULER, 0, body,
                         len);
    }
    free(body);
    ps_scheduler_phase_event(s, PS_PHASE_EV_WORKERS_VIEWED);
    s->t_view = s->last_checkpoint = ps_now();
    ps_join_state_write(s);
    char sched[64], mode[32];
    ps_job_schedule_name(&j->schedule, sched, sizeof sched);
    ps_job_mode_str(j, mode, sizeof mode);
    ps_log_info("job started: model=%s mode=%s servers=%d workers=%d batch=%d epochs=%d "
                "steps=%lld lr=%g schedule=%s momentum=%g seed=%llu",
                j->model, mode, v->num_servers, v->num_workers, j->batch,
                j->epochs, (long long)v->total_steps, j->lr, sched, j->momentum,
                (unsigned long long)j->seed);
    /* A push computed on values M-1 pushes old acts as momentum of its own
     * (docs/design.md, async). */
    if (j->mode == PS_MODE_ASYNC && v->num_workers > 1 && j->momentum >= 0.9 &&
        (strcmp(j->optimizer, "sgd") == 0 || strcmp(j->optimizer, "nesterov") == 0)) {
        ps_log_warn("async over %d workers with momentum %g: staleness adds momentum of its "
                    "own, and about one run in ten of the bundled MLP diverged so (with "
                    "momentum 0.5 none did; docs/design.md)",
                    v->num_workers, j->momentum);
    }
}

/* A server is bound for its shard, at endpoint: once every server is, the
 * workers get the view. */
static void s_on_peer_ready(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    char tag[16];
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    /* While the job runs only a promoted spare binds (scheduler/failover.c):
     * its endpoint goes into the view the workers get once every server
     * rolled back (its PEER_READY comes before its FAILOVER_READY). */
    const int spare = s->phase == PS_PHASE_RUNNING;
    if (n->role != PS_ROLE_SERVER || (s->phase != PS_PHASE_STARTING && !spare) || n->ready || !p ||
        ps_codec_unpack_peer_ready(p, len, n->endpoint, sizeof n->endpoint) != 0) {
        s_fail(s, "%s sent a bad ready message", ps_node_tag(n, tag, sizeof tag));
        return;
    }
    ps_fix_endpoint(n->endpoint, sizeof n->endpoint, m->peer_addr);
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

/* Passes the current barrier once every live worker is in it. */
static void s_barrier_check(ps_scheduler_t *s)
{
    if (s->view->preflight && s->preflight_state != 1) {
        return; /* no step before the preflight passed */
    }
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        if (!s->nodes[i].lost && !s->nodes[i].in_barrier) {
            return;
        }
    }
    ps_log_debug("barrier '%s' passed", s->barrier);
    s->barrier[0] = '\0';
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        s->nodes[i].in_barrier = 0;
        if (!s->nodes[i].lost) {
            ps_msg_send_ctrl(s->router, &s->nodes[i].route, PS_MSG_BARRIER_DONE,
                             PS_ROLE_SCHEDULER, 0, NULL, 0);
        }
    }
}

static void s_on_barrier(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    char name[64];
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (!p || ps_codec_unpack_barrier(p, len, name, sizeof name) != 0 ||
        n->role != PS_ROLE_WORKER || s->phase != PS_PHASE_RUNNING) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EPROTO, "bad barrier");
        return;
    }
    if (s->barrier[0] && strcmp(s->barrier, name)) {
        s_fail(s, "W%d entered barrier '%s' while others are in '%s'", n->rank, name,
               s->barrier);
        return;
    }
    snprintf(s->barrier, sizeof s->barrier, "%s", name);
    n->in_barrier = 1;
    s_barrier_check(s);
}

/* A worker's model size and, in allreduce mode, the endpoint its left
 * neighbour will connect to. */
static void s_on_model_info(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    char tag[16];
    ps_model_info_t mi;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (n->role != PS_ROLE_WORKER || !p ||
        ps_codec_unpack_model_info(p, len, &mi) != 0 || !mi.num_params) {
        s_fail(s, "%s sent a bad model size", ps_node_tag(n, tag, sizeof tag));
        return;
    }
    if (s->cfg->job.mode == PS_MODE_ALLREDUCE) {
        if (!mi.endpoint[0]) {
            s_fail(s, "%s has no ring endpoint (allreduce needs one per worker)",
                   ps_node_tag(n, tag, sizeof tag));
            return;
        }
        snprintf(n->endpoint, sizeof n->endpoint, "%s", mi.endpoint);
        ps_fix_endpoint(n->endpoint, sizeof n->endpoint, m->peer_addr);
        ps_log_info("%s ring endpoint %s", ps_node_tag(n, tag, sizeof tag), n->endpoint);
    }
    n->num_params = mi.num_params;
    n->train_samples = mi.train_samples;
}

/* A preflight result came (or a worker left): once every one is in, the
 * verdict; a pass lets a waiting barrier go. */
static void s_preflight_progress(ps_scheduler_t *s)
{
    char why[512];
    int rc = s->preflight_state == 0 ? ps_preflight_check(s, why, sizeof why) : 0;
    if (rc < 0) {
        s->preflight_state = -1;
        s_fail(s, "%s", why);
    } else if (rc == 1) {
        s->preflight_state = 1;
        if (s->barrier[0]) {
            s_barrier_check(s);
        }
    }
}

static void s_on_message(ps_scheduler_t *s, ps_msg_t *m)
{
    ps_sched_obs_message(s->obs, m->hdr.type);
    s->messages++;
    if (m->hdr.type == PS_MSG_REGISTER) {
        s_on_register(s, m);
        return;
    }
    if (m->hdr.type == PS_MSG_STATUS) { /* read-only: anyone may ask */
        ps_scheduler_status_reply(s, m);
        return;
    }
    /* A node is the connection it registered on: a message from any other
     * connection, or naming another node, changes nothing and gets no data. */
    ps_node_t *n = s_node_of(s, &m->route);
    char tag[16];
    if (ps_failover_on_spare_message(s, m)) {
        return;
    }
    if (!n || m->hdr.role != n->role || m->hdr.sender != n->rank) {
        char claim[64];
        snprintf(claim, sizeof claim, "claims %s%d %s", ps_codec_role_tag(m->hdr.role),
                 m->hdr.sender, n ? "on another node's connection" : "unregistered");
        ps_ratelog_reject(s->drops, ps_codec_type_name(m->hdr.type),
                          n ? ps_node_tag(n, tag, sizeof tag) : s_peer(m), claim);
        s->refused++;
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           n ? "not the node this connection registered as" : "register first");
        return;
    }
    n->last_seen = ps_now();
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    switch (m->hdr.type) {
    case PS_MSG_HEARTBEAT:
        if (p) {
            ps_sched_obs_heartbeat(s->obs, (int)(n - s->nodes), ps_node_tag(n, tag, sizeof tag),
                                   p, len);
        }
        break;
    case PS_MSG_MODEL_INFO:
        if (n->joining) {
            ps_join_model_info(s, n, m);
        } else {
            s_on_model_info(s, n, m);
        }
        break;
    case PS_MSG_JOIN_STEP:
        ps_join_answer(s, n, m);
        break;
    case PS_MSG_BARRIER:
        s_on_barrier(s, n, m);
        break;
    case PS_MSG_DONE:
        if (m->hdr.generation != s->view->generation) {
            break; /* sent before a failover's rollback: it trains again */
        }
        if (!p || ps_codec_unpack_done(p, len, &n->stats) != 0) {
            s_fail(s, "%s sent a bad final report", ps_node_tag(n, tag, sizeof tag));
            break;
        }
        n->done = 1;
        ps_log_info("%s done: %lld steps, %lld samples", ps_node_tag(n, tag, sizeof tag),
                    (long long)n->stats.steps, (long long)n->stats.samples);
        break;
    case PS_MSG_CHECKPOINT:
        s_on_checkpoint(s, n, m);
        break;
    case PS_MSG_PEER_READY:
        s_on_peer_ready(s, n, m);
        break;
    case PS_MSG_PREFLIGHT_RESULT:
        if (ps_preflight_on_result(s, n, m) != 0) {
            s_fail(s, "%s sent a bad preflight result", ps_node_tag(n, tag, sizeof tag));
            break;
        }
        s_preflight_progress(s);
        break;
    case PS_MSG_FAILOVER_READY:
        ps_failover_on_ready(s, n, m);
        break;
    case PS_MSG_REPORT:
        if (n->role != PS_ROLE_SERVER || !p ||
            ps_codec_unpack_report(p, len, &n->report) != 0) {
            s_fail(s, "%s sent a bad report", ps_node_tag(n, tag, sizeof tag));
            break;
        }
        n->reported = 1;
        break;
    case PS_MSG_SHUTDOWN: {
        int status;
        char reason[160] = "";
        if (p) {
            ps_codec_unpack_shutdown(p, len, &status, reason, sizeof reason);
        }
        s->diverged |= p && status == PS_ENONFINITE;
        s_fail(s, "%s failed: %s", ps_node_tag(n, tag, sizeof tag), reason);
        break;
    }
    default:
        ps_ratelog_reject(s->drops, ps_codec_type_name(m->hdr.type),
                          ps_node_tag(n, tag, sizeof tag), "unexpected message type");
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EPROTO,
                           "unexpected %s", ps_codec_type_name(m->hdr.type));
    }
}

static int s_live_workers(const ps_scheduler_t *s)
{
    int live = 0;
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        live += !s->nodes[i].lost;
    }
    return live;
}

/* A silent worker (or one whose connection closed: why says which) under
 * --min-workers: whether the job can go on without it. If so it is left
 * out, and every node gets the new set of live workers (the servers complete
 * steps with them from the next change on). */
static int s_leave(ps_scheduler_t *s, ps_node_t *n, const char *why)
{
    if (n->role != PS_ROLE_WORKER || s->phase <= PS_PHASE_STARTING || n->done ||
        s_live_workers(s) - 1 < (s->cfg->min_workers ? s->cfg->min_workers : s->cfg->workers)) {
        return 0;
    }
    n->used = 0;
    n->lost = 1;
    s->membership_changes++;
    unsigned char live[PS_MAX_WORKERS];
    for (int w = 0; w < s->cfg->workers; w++) {
        live[w] = !s->nodes[s->cfg->servers + w].lost;
    }
    char head[48], tail[128];
    snprintf(head, sizeof head, "membership: lost W%d (pid %u)", n->rank, n->pid);
    snprintf(tail, sizeof tail, ": %s; going on with %d of %d workers (--min-workers %d)",
             why, s_live_workers(s), s->cfg->workers, s->cfg->min_workers);
    ps_join_leave_line(s, head, tail);
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_members(live, s->cfg->workers, &body, &len) != 0) {
        s_fail(s, "cannot encode the membership");
        return 1;
    }
    s_send_all(s, PS_MSG_MEMBERS, body, len);
    free(body);
    s_preflight_progress(s);
    if (s->barrier[0]) {
        s_barrier_check(s);
    }
    ps_join_state_write(s);
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

int ps_scheduler_leave(ps_scheduler_t *s, ps_node_t *n, double silent)
{
    char why[48];
    snprintf(why, sizeof why, "silent for %.1f s", silent);
    return s_leave(s, n, why);
}

/* A connection closed (its process died, most likely): a worker is left out
 * at once when it may be (else its silence decides, as before), one about
 * to join is dropped, a server is replaced (failover.c). */
static void s_on_disconnect(ps_scheduler_t *s, int fd)
{
    for (int w = 0; fd >= 0 && w < s->cfg->workers; w++) {
        ps_node_t *n = &s->nodes[s->cfg->servers + w];
        if (n->used && n->fd == fd) {
            if (n->joining) {
                ps_join_drop(s, n);
            } else {
                s_leave(s, n, "its connection closed");
            }
            return;
        }
    }
    ps_failover_on_disconnect(s, fd);
}

static void s_tick(ps_scheduler_t *s)
{
    double now = ps_now();
    if (now - s->last_beat >= PS_HEARTBEAT_SECONDS) {
        s_send_all(s, PS_MSG_HEARTBEAT, NULL, 0);
        s->last_beat = now;
    }
    ps_failover_tick(s); /* dead spares first: a lost server must not get one */
    for (int i = 0; i < s->nnodes; i++) {
        ps_node_t *n = &s->nodes[i];
        if (n->used && now - n->last_seen > s->cfg->peer_timeout) {
            if (n->joining) {
                ps_join_drop(s, n);
                continue;
            }
            if (ps_scheduler_leave(s, n, now - n->last_seen) ||
                ps_failover_replace(s, n, now - n->last_seen)) {
                continue;
            }
            n->used = 0; /* it cannot be told anything any more */
            s_fail(s, "lost peer %s (pid %u%s%s): silent for %.1f s",
                   ps_node_tag(n, s->lost, sizeof s->lost), n->pid,
                   n->endpoint[0] ? ", " : "", n->endpoint, now - n->last_seen);
            return;
        }
    }
    if (s->phase == PS_PHASE_WAITING && now - s->t_start > s->cfg->wait) {
        char missing[160];
        s_missing(s, missing, sizeof missing);
        s_fail(s, "not every node registered within %.0f s; missing:%s", s->cfg->wait,
               missing[0] ? missing : " model sizes from workers");
        return;
    }
    if (s->phase == PS_PHASE_WAITING && now >= s->next_wait_log) {
        char missing[160];
        int in = s_missing(s, missing, sizeof missing);
        ps_log_info("still waiting for%s (%d/%d registered, %.0f s of --wait %.0f)",
                    missing[0] ? missing : " model sizes from workers", in, s->nnodes,
                    now - s->t_start, s->cfg->wait);
        s->next_wait_log = now + PS_LINK_WAIT_LOG_SECONDS;
    }
    if (s->phase == PS_PHASE_RECOVERING) {
        ps_join_recover_tick(s);
    }
    if (s->phase == PS_PHASE_RUNNING) {
        ps_join_tick(s);
        for (int i = s->cfg->servers; i < s->nnodes; i++) {
            if (!s->nodes[i].done && !s->nodes[i].lost) {
                return;
            }
        }
        ps_scheduler_phase_event(s, PS_PHASE_EV_WORKERS_DONE);
        s->t_end = now;
        ps_scheduler_send_servers(s, PS_MSG_REPORT, NULL, 0);
    }
    if (s->phase == PS_PHASE_REPORTING) {
        for (int i = 0; i < s->cfg->servers; i++) {
            if (!s->nodes[i].reported) {
                return;
            }
        }
        ps_scheduler_phase_event(s, PS_PHASE_EV_REPORTS_IN);
    }
}

static int s_write_endpoint(const char *path, const char *endpoint)
{
    char line[160];
    int n = snprintf(line, sizeof line, "%s\n", endpoint);
    return ps_file_write_atomic(path, (const void *[]){line}, (size_t[]){(size_t)n}, 1,
                                NULL, 0);
}

/* ps_msg_drain's handler: one message from a node (or a malformed one). */
static int s_on_receive(void *arg, ps_msg_t *m, int rc)
{
    ps_scheduler_t *s = arg;
    if (rc == 0) {
        s_on_message(s, m);
    } else {
        ps_ratelog_reject(s->drops, "a malformed message", s_peer(m), m->hdr.error);
    }
    if (s->phase == PS_PHASE_WAITING) {
        s_maybe_start(s);
    }
    return 0;
}

int ps_scheduler_run(const ps_scheduler_config_t *cfg)
{
    ps_scheduler_t s = {.cfg = cfg, .phase = PS_PHASE_WAITING};
    int status = 1;
    /* Tells this run's nodes from another's when they register again. */
    if (getrandom(&s.run_id, sizeof s.run_id, 0) != sizeof s.run_id) {
        s.run_id = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
    }
    s.run_id |= 1; /* never 0: "no job id" */
    s.checkpoint = -1;
    s.nnodes = cfg->servers + cfg->workers;
    s.nodes = calloc((size_t)s.nnodes, sizeof *s.nodes);
    s.view = calloc(1, sizeof *s.view);
    char why[128];
    if (!s.nodes || !s.view || ps_ratelog_new(&s.drops, PS_RATELOG_PERIOD) != 0 ||
        ps_failover_new(&s.failover, cfg->servers) != 0 ||
        ps_agree_new(&s.agree, cfg->servers) != 0 ||
        ps_ctx_new(&s.ctx) != 0) {
        ps_log_err("out of memory");
        goto fail;
    }
    char err[512];
    if (ps_curve_secure_ctx(s.ctx, cfg->secure, cfg->keys, PS_ROLE_SCHEDULER, err,
                            sizeof err) != 0) {
        ps_log_err("%s", err);
        goto fail;
    }
    int rc = ps_sock_new(s.ctx, PS_SOCK_ROUTER, &s.router, why, sizeof why);
    if (rc == 0) {
        /* Registration and control only: a bigger frame is dropped unread. */
        ps_sock_set_max_message(s.router, PS_SCHEDULER_MAX_MESSAGE);
        ps_sock_set_queue_limit(s.router, PS_SCHEDULER_SEND_QUEUE, PS_SCHEDULER_RECV_QUEUE);
        rc = ps_sock_bind(s.router, cfg->bind, s.endpoint, sizeof s.endpoint, why, sizeof why);
    }
    if (rc != 0) {
        ps_log_err("cannot bind %s: %s", cfg->bind, why);
        goto fail;
    }
    /* before the endpoint is announced: a metrics port in use fails the start */
    if (ps_sched_obs_new(cfg->metrics_bind, s.nnodes, &s.obs, why, sizeof why) != 0) {
        ps_log_err("%s", why);
        goto fail;
    }
    if (ps_sock_monitor_disconnects(s.ctx, s.router, &s.monitor, why, sizeof why) != 0) {
        ps_log_warn("closed connections go unseen (%s): lost nodes are found by silence", why);
    }
    if (cfg->endpoint_file && s_write_endpoint(cfg->endpoint_file, s.endpoint) != 0) {
        ps_log_err("cannot write the endpoint to %s", cfg->endpoint_file);
        goto fail;
    }
    ps_identity_init(&s.id, cfg->job_id, &cfg->job, cfg->servers, cfg->workers);
    ps_log_info("listening on %s for %d servers and %d workers (job %s, configuration %s, "
                "build %s)%s", s.endpoint, cfg->servers, cfg->workers, s.id.job_id,
                s.id.job_hash, s.id.build,
                cfg->secure ? " (secure: CurveZMQ, this job's keys only)" : "");
    if (cfg->resume) {
        ps_join_state_load(&s);
    }
    s.t_start = ps_now();
    s.next_wait_log = s.t_start + PS_LINK_WAIT_LOG_SECONDS;
    while (s.phase != PS_PHASE_FINISHED && s.phase != PS_PHASE_FAILED) {
        ps_pollitem_t its[2] = {{.sock = s.router}, {.sock = s.monitor}};
        if ((rc = ps_poll(its, s.monitor ? 2 : 1, 100)) < 0) {
            s_fail(&s, "poll failed: %s", ps_strerror(rc));
            break;
        }
        /* Closed connections first: the fd of one may be reused by a new one
         * whose messages come next. */
        for (int fd; its[1].ready && ps_sock_disconnected(s.monitor, &fd);) {
            s_on_disconnect(&s, fd);
        }
        const ps_pollitem_t it = its[0];
        /* Drain what is queued, but keep ticking so liveness stays checked. */
        if (it.ready) {
            ps_msg_drain(s.router, PS_RECV_ROUTER | PS_RECV_PEER, 256, s_on_receive, &s);
        }
        s_tick(&s);
        ps_ratelog_tick(s.drops);
        ps_scheduler_observe_tick(&s);
    }
    ps_join_leave_flush(&s);
    if (s.phase == PS_PHASE_FINISHED) {
        ps_scheduler_observe_tick(&s);
        ps_sched_obs_mark_end(s.obs);
        int written = ps_summary_write(&s); /* s_fail wrote a failed job's */
        status = written == 0 ? 0 : 1;
        ps_join_state_write(&s);
        uint8_t *body;
        size_t len;
        if (ps_codec_pack_shutdown(0, "job finished", &body, &len) == 0) {
            s_send_all(&s, PS_MSG_SHUTDOWN, body, len);
            free(body);
        }
        ps_sched_obs_hold(s.obs, cfg->metrics_hold);
    }
fail:
    if (status != 0) {
        ps_sock_set_linger(s.router, PS_ABORT_LINGER_MS);
    }
    ps_sock_destroy(&s.monitor);
    ps_sock_destroy(&s.router); /* lingers so the SHUTDOWNs go out */
    ps_ctx_destroy(&s.ctx);
    for (int i = 0; s.nodes && i < s.nnodes; i++) {
        free(s.nodes[i].preflight);
    }
    ps_manifest_destroy(&s.manifest);
    ps_sched_obs_destroy(&s.obs);
    ps_failover_destroy(&s.failover);
    ps_agree_destroy(&s.agree);
    ps_ratelog_destroy(&s.drops);
    free(s.saved);
    free(s.view);
    free(s.nodes);
    return status;
}
