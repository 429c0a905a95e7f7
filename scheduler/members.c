/*
 * scheduler/members.c - part of the scheduler's core (scheduler_impl.h): the
 * node table's rows, and the running job's members.
 *
 * Every change of a row that a module asks for (scheduler/ops.c) is here
 * (a joiner admitted, a node back after a scheduler restart, a spare in a
 * replaced server's row). The running job: barriers, a silent worker left out under
 * --min-workers (MSG_MEMBERS to every node; its one log line once server 0
 * says at which step), DONEs and the servers' reports, and the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "scheduler/scheduler_impl.h"

/* ---- rows ---------------------------------------------------------------- */

void ps_members_clear(ps_node_t *n)
{
    if (n->stats) {
        shardps__done__free_unpacked(n->stats, NULL);
        n->stats = NULL;
    }
    if (n->report) {
        shardps__server_report__free_unpacked(n->report, NULL);
        n->report = NULL;
    }
}

int ps_members_admit(ps_node_t *n, const ps_msg_t *m, const Shardps__Register *reg, int rank,
                     int lost)
{
    uint64_t token;
    if (ps_scheduler_new_token(&token) != 0) {
        return PS_EIO;
    }
    ps_members_clear(n);
    memset(n, 0, sizeof *n);
    n->used = 1;
    n->lost = lost;
    n->role = reg->role;
    n->rank = rank;
    n->route = m->route;
    n->pid = reg->pid;
    n->token = token;
    n->last_seen = ps_now();
    n->fd = m->peer_fd;
    snprintf(n->addr, sizeof n->addr, "%s", m->peer_addr);
    snprintf(n->curve_key, sizeof n->curve_key, "%s", reg->curve_key);
    return 0;
}

void ps_members_readmit(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m,
                        const Shardps__Register *reg)
{
    n->used = 1;
    n->role = reg->role;
    n->rank = reg->rank;
    n->route = m->route; /* a new connection of the same process replaces the old */
    n->fd = m->peer_fd;  /* its closing is its loss (the loop's disconnects) */
    n->pid = reg->pid;
    n->last_seen = ps_now();
    snprintf(n->addr, sizeof n->addr, "%s", m->peer_addr);
    if (reg->role == PS_ROLE_SERVER) {
        snprintf(n->endpoint, sizeof n->endpoint, "%s", s->view->servers[reg->rank].endpoint);
    }
}

void ps_members_swap_in(ps_node_t *n, const ps_node_t *spare)
{
    n->route = spare->route;
    n->pid = spare->pid;
    n->fd = spare->fd;
    snprintf(n->addr, sizeof n->addr, "%s", spare->addr);
    n->last_seen = ps_now();
    n->reported = 0;
    n->endpoint[0] = '\0'; /* until it binds (start.c: its PEER_READY) */
    n->ready = 0;
    snprintf(n->curve_key, sizeof n->curve_key, "%s", spare->curve_key);
}

/* Our address toward the job's other hosts: --advertise, else the local end
 * of our route to the first node seen on another host (kept); "" while every
 * node is on this host. */
static const char *s_outward(ps_scheduler_t *s)
{
    if (s->cfg->advertise && *s->cfg->advertise) {
        return s->cfg->advertise;
    }
    for (int i = 0; i < s->nnodes && !s->outward[0]; i++) {
        const ps_node_t *n = &s->nodes[i];
        if (!n->used || !n->addr[0] || ps_addr_is_loopback(n->addr)) {
            continue;
        }
        if (ps_addr_route_from(n->addr, s->outward, sizeof s->outward) == 0) {
            ps_log_info("nodes on this host are announced at %s (our route to %s)", s->outward,
                        n->addr);
        } else {
            s->outward[0] = '\0';
        }
    }
    return s->outward;
}

void ps_members_fix_endpoint(ps_scheduler_t *s, ps_node_t *n, const char *announced,
                             const char *peer)
{
    char tag[16], was[sizeof n->endpoint];
    snprintf(was, sizeof was, "%s", announced);
    snprintf(n->endpoint, sizeof n->endpoint, "%s", was);
    peer = peer[0] ? peer : n->addr;
    /* our outward address matters only for a node on this host */
    const char *outward = !peer[0] || ps_addr_is_loopback(peer) ? s_outward(s) : "";
    if (ps_addr_fix(n->endpoint, sizeof n->endpoint, peer, outward)) {
        ps_log_debug("%s announced %s: its peers get %s", ps_node_tag(n, tag, sizeof tag), was,
                     n->endpoint);
    }
}

int ps_members_live(const ps_scheduler_t *s)
{
    int live = 0;
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        live += !s->nodes[i].lost;
    }
    return live;
}

int ps_members_joined(ps_scheduler_t *s, ps_node_t *n)
{
    n->lost = 0;
    n->last_seen = ps_now();
    s->facts.membership_changes++;
    return ps_members_live(s);
}

void ps_members_unreported(ps_node_t *n)
{
    n->used = 0;
    n->reported = 1;
}

void ps_members_rollback(ps_scheduler_t *s)
{
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        s->nodes[i].done = 0;
    }
}

/* ---- the membership lines of workers left out ------------------------- */

/* A membership line with its step (step < 0: none). */
static void s_leave_log(const char *head, const char *tail, int64_t step)
{
    char at[48] = "";
    if (step >= 0) {
        snprintf(at, sizeof at, " at step %lld", (long long)step);
    }
    ps_log_warn("%s%s%s", head, at, tail);
}

/* Logs head + " at step N" + tail once server 0 says the step (or at once
 * without it when too many wait). */
static void s_leave_line(ps_scheduler_t *s, const char *head, const char *tail)
{
    const int cap = (int)(sizeof s->leaves / sizeof s->leaves[0]);
    if (s->nleaves == cap) {
        s_leave_log(head, tail, -1);
        return;
    }
    snprintf(s->leaves[s->nleaves].head, sizeof s->leaves[0].head, "%s", head);
    snprintf(s->leaves[s->nleaves].tail, sizeof s->leaves[0].tail, "%s", tail);
    s->nleaves++;
}

void ps_members_leave_flush(ps_scheduler_t *s)
{
    for (int i = 0; i < s->nleaves; i++) {
        s_leave_log(s->leaves[i].head, s->leaves[i].tail, -1);
    }
    s->nleaves = 0;
}

/* Server 0 answers each MSG_MEMBERS with the step it took effect at, in
 * order (a promoted spare's, sent with its view, has no line waiting).
 * Returns 1 when m is such an answer. */
static int s_on_members_step(ps_scheduler_t *s, const ps_node_t *n, ps_msg_t *m)
{
    const Shardps__JoinStep *js = ps_msg_unpack_body(m, &shardps__join_step__descriptor);
    if (!js || n->role != PS_ROLE_SERVER || !js->members) {
        return 0;
    }
    if (n->rank == 0 && s->nleaves > 0) {
        s_leave_log(s->leaves[0].head, s->leaves[0].tail, js->step);
        s->nleaves--;
        memmove(&s->leaves[0], &s->leaves[1], (size_t)s->nleaves * sizeof s->leaves[0]);
    }
    return 1;
}

/* ---- barriers and leaving ---------------------------------------------- */

void ps_members_live_set(const ps_scheduler_t *s, Shardps__Members *m, int32_t *live)
{
    m->num_workers = s->cfg->workers;
    m->live = live;
    m->n_live = 0;
    for (int w = 0; w < s->cfg->workers; w++) {
        if (!ps_scheduler_worker(s, w)->lost) {
            live[m->n_live++] = w;
        }
    }
}

void ps_members_barrier_check(ps_scheduler_t *s)
{
    if (!s->barrier[0] || (s->view->preflight && !ps_preflight_passed(s->preflight))) {
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
                             PS_ROLE_SCHEDULER, 0, NULL);
        }
    }
}

static void s_on_barrier(ps_scheduler_t *s, ps_node_t *n, ps_msg_t *m)
{
    const Shardps__Barrier *b = ps_msg_unpack_body(m, &shardps__barrier__descriptor);
    if (!b || n->role != PS_ROLE_WORKER || s->facts.phase != PS_PHASE_RUNNING) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EPROTO, "bad barrier");
        return;
    }
    if (s->barrier[0] && strcmp(s->barrier, b->name)) {
        ps_scheduler_fail(s, "W%d entered barrier '%s' while others are in '%s'", n->rank,
                          b->name, s->barrier);
        return;
    }
    snprintf(s->barrier, sizeof s->barrier, "%s", b->name);
    n->in_barrier = 1;
    ps_members_barrier_check(s);
}

/* A silent worker (or one whose connection closed: why says which) under
 * --min-workers: whether the job can go on without it. If so it is left
 * out, and every node gets the new set of live workers (the servers complete
 * steps with them from the next change on). */
int ps_members_leave(ps_scheduler_t *s, ps_node_t *n, const char *why)
{
    const int min = s->cfg->min_workers ? s->cfg->min_workers : s->cfg->workers;
    if (n->role != PS_ROLE_WORKER || s->facts.phase <= PS_PHASE_STARTING || n->done ||
        ps_members_live(s) - 1 < min) {
        return 0;
    }
    n->used = 0;
    n->lost = 1;
    s->facts.membership_changes++;
    char head[48], tail[128];
    snprintf(head, sizeof head, "membership: lost W%d (pid %u)", n->rank, n->pid);
    snprintf(tail, sizeof tail, ": %s; going on with %d of %d workers (--min-workers %d)",
             why, ps_members_live(s), s->cfg->workers, s->cfg->min_workers);
    s_leave_line(s, head, tail);
    int32_t live[PS_MAX_WORKERS];
    Shardps__Members mb = SHARDPS__MEMBERS__INIT;
    ps_members_live_set(s, &mb, live);
    ps_scheduler_send_all(s, PS_MSG_MEMBERS, &mb.base);
    ps_preflight_progress(s->preflight);
    ps_members_barrier_check(s);
    ps_scheduler_save_state(s);
    return 1;
}

static int s_on_lost(void *self, const ps_node_t *lost, const ps_loss_t *loss)
{
    ps_scheduler_t *s = self;
    ps_node_t *n = lost ? ps_scheduler_row(s, lost->role, lost->rank) : NULL;
    if (!n || n->role != PS_ROLE_WORKER) {
        return 0;
    }
    char why[48];
    if (loss->closed) {
        snprintf(why, sizeof why, "its connection closed");
    } else {
        snprintf(why, sizeof why, "silent for %.1f s", loss->silent);
    }
    return ps_members_leave(s, n, why); /* else closed: its silence decides */
}

/* ---- the end ----------------------------------------------------------- */

/* m's body as a message of d kept past m (for the summary), checked: caller
 * owns the result; free with protobuf_c_message_free_unpacked(x, NULL). NULL
 * when it has no body or the body is bad. */
static void *s_keep(const ps_msg_t *m, const ProtobufCMessageDescriptor *d)
{
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    return p ? ps_codec_unpack(d, p, len, NULL, NULL, 0) : NULL;
}

/* A worker's DONE, a server's report, a node's failure. */
static void s_on_end_message(ps_scheduler_t *s, ps_node_t *n, ps_msg_t *m)
{
    char tag[16];
    if (m->hdr.type == PS_MSG_DONE) {
        if (m->hdr.generation != s->view->generation) {
            return; /* sent before a failover's rollback: it trains again */
        }
        Shardps__Done *d = s_keep(m, &shardps__done__descriptor);
        if (!d) {
            ps_scheduler_fail(s, "%s sent a bad final report", ps_node_tag(n, tag, sizeof tag));
            return;
        }
        ps_members_clear(n); /* kept for the summary */
        n->stats = d;
        n->done = 1;
        ps_log_info("%s done: %lld steps, %lld samples", ps_node_tag(n, tag, sizeof tag),
                    (long long)d->steps, (long long)d->samples);
    } else if (m->hdr.type == PS_MSG_REPORT) {
        Shardps__ServerReport *r =
            n->role == PS_ROLE_SERVER ? s_keep(m, &shardps__server_report__descriptor) : NULL;
        if (!r) {
            ps_scheduler_fail(s, "%s sent a bad report", ps_node_tag(n, tag, sizeof tag));
            return;
        }
        if (n->report) {
            shardps__server_report__free_unpacked(n->report, NULL);
        }
        n->report = r;
        n->reported = 1;
    } else { /* PS_MSG_SHUTDOWN */
        const Shardps__Shutdown *sd =
            m->nframes ? ps_msg_unpack_body(m, &shardps__shutdown__descriptor) : NULL;
        s->facts.diverged |= sd && sd->status == PS_ENONFINITE;
        ps_scheduler_fail(s, "%s failed: %.159s", ps_node_tag(n, tag, sizeof tag),
                          sd ? sd->reason : "");
    }
}

static int s_on_message(void *self, const ps_node_t *from, ps_msg_t *m)
{
    ps_scheduler_t *s = self;
    ps_node_t *n = from ? ps_scheduler_row(s, from->role, from->rank) : NULL;
    if (!n) {
        return 0;
    }
    char tag[16];
    const Shardps__MetricsReport *r;
    switch (m->hdr.type) {
    case PS_MSG_HEARTBEAT:
        if (m->nframes == 1 &&
            (r = ps_msg_unpack_body(m, &shardps__metrics_report__descriptor)) != NULL) {
            ps_sched_obs_heartbeat(s->obs, (int)(n - s->nodes), ps_node_tag(n, tag, sizeof tag),
                                   r);
        }
        return 1;
    case PS_MSG_JOIN_STEP:
        return s_on_members_step(s, n, m);
    case PS_MSG_BARRIER:
        s_on_barrier(s, n, m);
        return 1;
    case PS_MSG_DONE:
    case PS_MSG_REPORT:
    case PS_MSG_SHUTDOWN:
        s_on_end_message(s, n, m);
        return 1;
    default:
        return 0;
    }
}

/* RUNNING: once every live worker is done the servers are asked for their
 * reports (REPORTING); once every report is in the job is FINISHED. */
static void s_on_tick(void *self, double now)
{
    ps_scheduler_t *s = self;
    if (s->facts.phase == PS_PHASE_RUNNING) {
        for (int i = s->cfg->servers; i < s->nnodes; i++) {
            if (!s->nodes[i].done && !s->nodes[i].lost) {
                return;
            }
        }
        ps_scheduler_phase_event(s, PS_PHASE_EV_WORKERS_DONE);
        s->facts.t_end = now;
        ps_scheduler_send_servers(s, PS_MSG_REPORT, NULL);
    }
    if (s->facts.phase == PS_PHASE_REPORTING) {
        for (int i = 0; i < s->cfg->servers; i++) {
            if (!s->nodes[i].reported) {
                return;
            }
        }
        ps_scheduler_phase_event(s, PS_PHASE_EV_REPORTS_IN);
    }
}

const ps_sched_events_t ps_members_events = {
    .on_message = s_on_message,
    .on_lost = s_on_lost,
    .on_tick = s_on_tick,
};
