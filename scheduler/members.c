/*
 * scheduler/members.c - part of the scheduler's core: the node table and the
 * running job's members (scheduler/members.h). Its own state is the rows,
 * the barrier being collected and the membership lines waiting for their
 * step; everything else it asks of the core through the ops.
 */
#include "scheduler/members.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "proto/addr.h"

struct ps_members {
    const ps_sched_ops_t *ops; /* the core (borrowed) */
    const ps_scheduler_config_t *cfg;
    ps_sched_facts_t *facts;   /* the loop's (borrowed); the phase is read only */
    ps_preflight_t *preflight; /* no step before it passed (borrowed) */
    ps_sched_obs_t *obs;       /* the nodes' metrics reports (borrowed) */
    ps_node_t *nodes;          /* S + M rows: servers first */
    int nnodes;
    char outward[PS_ADDR_MAX]; /* our address toward the job's other hosts; "" while
                                  none is known (ps_members_fix_endpoint) */
    char barrier[64];          /* name of the barrier being collected, "" if none */
    struct {
        char head[48], tail[128];
    } leaves[8]; /* membership lines of workers left out, waiting for
                    the step from server 0; FIFO */
    int nleaves;
};

/* ---- rows ---------------------------------------------------------------- */

int ps_members_new(ps_members_t **out, const ps_sched_ops_t *ops, ps_sched_facts_t *facts,
                   ps_preflight_t *preflight, ps_sched_obs_t *obs)
{
    ps_members_t *mb = calloc(1, sizeof *mb);
    const int n = ops->cfg->servers + ops->cfg->workers;
    if (mb) {
        mb->nodes = calloc((size_t)n, sizeof *mb->nodes);
    }
    if (!mb || !mb->nodes) {
        free(mb);
        *out = NULL;
        return PS_ENOMEM;
    }
    mb->ops = ops;
    mb->cfg = ops->cfg;
    mb->facts = facts;
    mb->preflight = preflight;
    mb->obs = obs;
    mb->nnodes = n;
    *out = mb;
    return 0;
}

/* Frees what row n keeps of its node's end (stats, report). */
static void s_clear(ps_node_t *n)
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

void ps_members_destroy(ps_members_t **mb_p)
{
    ps_members_t *mb = *mb_p;
    if (!mb) {
        return;
    }
    for (int i = 0; i < mb->nnodes; i++) {
        s_clear(&mb->nodes[i]);
    }
    free(mb->nodes);
    free(mb);
    *mb_p = NULL;
}

int ps_members_count(const ps_members_t *mb)
{
    return mb->nnodes;
}

ps_node_t *ps_members_at(ps_members_t *mb, int i)
{
    return &mb->nodes[i];
}

ps_node_t *ps_members_row(ps_members_t *mb, ps_role_t role, int rank)
{
    const int count = role == PS_ROLE_SERVER ? mb->cfg->servers : mb->cfg->workers;
    if (rank < 0 || rank >= count || (role != PS_ROLE_SERVER && role != PS_ROLE_WORKER)) {
        return NULL;
    }
    return &mb->nodes[(role == PS_ROLE_SERVER ? 0 : mb->cfg->servers) + rank];
}

ps_node_t *ps_members_worker(ps_members_t *mb, int w)
{
    return &mb->nodes[mb->cfg->servers + w];
}

ps_node_t *ps_members_node_of(ps_members_t *mb, const ps_route_t *r)
{
    for (int i = 0; i < mb->nnodes; i++) {
        ps_node_t *n = &mb->nodes[i];
        if (n->used && n->route.len == r->len && !memcmp(n->route.id, r->id, r->len)) {
            return n;
        }
    }
    return NULL;
}

int ps_members_new_token(uint64_t *token)
{
    do {
        if (getrandom(token, sizeof *token, 0) != (ssize_t)sizeof *token) {
            return PS_EIO;
        }
    } while (*token == 0);
    return 0;
}

int ps_members_admit(ps_node_t *n, const ps_msg_t *m, const Shardps__Register *reg,
                     int rank, int lost)
{
    uint64_t token;
    if (ps_members_new_token(&token) != 0) {
        return PS_EIO;
    }
    s_clear(n);
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

void ps_members_readmit(ps_members_t *mb, ps_node_t *n, const ps_msg_t *m,
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
        const ps_view_t *v = mb->ops->view(mb->ops->core);
        snprintf(n->endpoint, sizeof n->endpoint, "%s", v->servers[reg->rank].endpoint);
    }
}

void ps_members_saved_job(ps_members_t *mb, const uint64_t *tokens, const int32_t *lost,
                          size_t nlost)
{
    for (int w = 0; w < mb->cfg->workers; w++) {
        ps_node_t *n = ps_members_worker(mb, w);
        n->lost = 0;
        n->token = tokens[w];
    }
    for (size_t i = 0; i < nlost; i++) {
        ps_members_worker(mb, lost[i])->lost = 1;
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
static const char *s_outward(ps_members_t *mb)
{
    if (mb->cfg->advertise && *mb->cfg->advertise) {
        return mb->cfg->advertise;
    }
    for (int i = 0; i < mb->nnodes && !mb->outward[0]; i++) {
        const ps_node_t *n = &mb->nodes[i];
        if (!n->used || !n->addr[0] || ps_addr_is_loopback(n->addr)) {
            continue;
        }
        if (ps_addr_route_from(n->addr, mb->outward, sizeof mb->outward) == 0) {
            ps_log_info("nodes on this host are announced at %s (our route to %s)",
                        mb->outward, n->addr);
        } else {
            mb->outward[0] = '\0';
        }
    }
    return mb->outward;
}

void ps_members_fix_endpoint(ps_members_t *mb, ps_node_t *n, const char *announced,
                             const char *peer)
{
    char tag[16], was[sizeof n->endpoint];
    snprintf(was, sizeof was, "%s", announced);
    snprintf(n->endpoint, sizeof n->endpoint, "%s", was);
    peer = peer[0] ? peer : n->addr;
    /* our outward address matters only for a node on this host */
    const char *outward = !peer[0] || ps_addr_is_loopback(peer) ? s_outward(mb) : "";
    if (ps_addr_fix(n->endpoint, sizeof n->endpoint, peer, outward)) {
        ps_log_debug("%s announced %s: its peers get %s", ps_node_tag(n, tag, sizeof tag),
                     was, n->endpoint);
    }
}

int ps_members_live(const ps_members_t *mb)
{
    int live = 0;
    for (int i = mb->cfg->servers; i < mb->nnodes; i++) {
        live += !mb->nodes[i].lost;
    }
    return live;
}

int ps_members_joined(ps_members_t *mb, ps_node_t *n)
{
    n->lost = 0;
    n->last_seen = ps_now();
    mb->facts->membership_changes++;
    return ps_members_live(mb);
}

void ps_members_unreported(ps_node_t *n)
{
    n->used = 0;
    n->reported = 1;
}

void ps_members_rollback(ps_members_t *mb)
{
    for (int i = mb->cfg->servers; i < mb->nnodes; i++) {
        mb->nodes[i].done = 0;
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
static void s_leave_line(ps_members_t *mb, const char *head, const char *tail)
{
    const int cap = (int)(sizeof mb->leaves / sizeof mb->leaves[0]);
    if (mb->nleaves == cap) {
        s_leave_log(head, tail, -1);
        return;
    }
    snprintf(mb->leaves[mb->nleaves].head, sizeof mb->leaves[0].head, "%s", head);
    snprintf(mb->leaves[mb->nleaves].tail, sizeof mb->leaves[0].tail, "%s", tail);
    mb->nleaves++;
}

void ps_members_leave_flush(ps_members_t *mb)
{
    for (int i = 0; i < mb->nleaves; i++) {
        s_leave_log(mb->leaves[i].head, mb->leaves[i].tail, -1);
    }
    mb->nleaves = 0;
}

/* Server 0 answers each MSG_MEMBERS with the step it took effect at, in
 * order (a promoted spare's, sent with its view, has no line waiting).
 * Returns 1 when m is such an answer. */
static int s_on_members_step(ps_members_t *mb, const ps_node_t *n, ps_msg_t *m)
{
    const Shardps__JoinStep *js = ps_msg_unpack_body(m, &shardps__join_step__descriptor);
    if (!js || n->role != PS_ROLE_SERVER || !js->members) {
        return 0;
    }
    if (n->rank == 0 && mb->nleaves > 0) {
        s_leave_log(mb->leaves[0].head, mb->leaves[0].tail, js->step);
        mb->nleaves--;
        memmove(&mb->leaves[0], &mb->leaves[1], (size_t)mb->nleaves * sizeof mb->leaves[0]);
    }
    return 1;
}

/* ---- barriers and leaving ---------------------------------------------- */

void ps_members_live_set(const ps_members_t *mb, Shardps__Members *m, int32_t *live)
{
    m->num_workers = mb->cfg->workers;
    m->live = live;
    m->n_live = 0;
    for (int w = 0; w < mb->cfg->workers; w++) {
        if (!mb->nodes[mb->cfg->servers + w].lost) {
            live[m->n_live++] = w;
        }
    }
}

void ps_members_barrier_check(ps_members_t *mb)
{
    const ps_view_t *v = mb->ops->view(mb->ops->core);
    if (!mb->barrier[0] || (v->preflight && !ps_preflight_passed(mb->preflight))) {
        return; /* no step before the preflight passed */
    }
    for (int i = mb->cfg->servers; i < mb->nnodes; i++) {
        if (!mb->nodes[i].lost && !mb->nodes[i].in_barrier) {
            return;
        }
    }
    ps_log_debug("barrier '%s' passed", mb->barrier);
    mb->barrier[0] = '\0';
    for (int i = mb->cfg->servers; i < mb->nnodes; i++) {
        mb->nodes[i].in_barrier = 0;
        if (!mb->nodes[i].lost) {
            mb->ops->send(mb->ops->core, &mb->nodes[i].route, PS_MSG_BARRIER_DONE, NULL);
        }
    }
}

static void s_on_barrier(ps_members_t *mb, ps_node_t *n, ps_msg_t *m)
{
    const Shardps__Barrier *b = ps_msg_unpack_body(m, &shardps__barrier__descriptor);
    if (!b || n->role != PS_ROLE_WORKER || mb->facts->phase != PS_PHASE_RUNNING) {
        mb->ops->reply_error(mb->ops->core, m, PS_EPROTO, "bad barrier");
        return;
    }
    if (mb->barrier[0] && strcmp(mb->barrier, b->name)) {
        ps_sched_fail(mb->ops, 0, "W%d entered barrier '%s' while others are in '%s'",
                      n->rank, b->name, mb->barrier);
        return;
    }
    snprintf(mb->barrier, sizeof mb->barrier, "%s", b->name);
    n->in_barrier = 1;
    ps_members_barrier_check(mb);
}

/* A silent worker (or one whose connection closed: why says which) under
 * --min-workers: whether the job can go on without it. If so it is left
 * out, and every node gets the new set of live workers (the servers complete
 * steps with them from the next change on). */
int ps_members_leave(ps_members_t *mb, ps_node_t *n, const char *why)
{
    const ps_sched_ops_t *ops = mb->ops;
    const int min = mb->cfg->min_workers ? mb->cfg->min_workers : mb->cfg->workers;
    if (n->role != PS_ROLE_WORKER || mb->facts->phase <= PS_PHASE_STARTING || n->done ||
        ps_members_live(mb) - 1 < min) {
        return 0;
    }
    n->used = 0;
    n->lost = 1;
    mb->facts->membership_changes++;
    char head[48], tail[128];
    snprintf(head, sizeof head, "membership: lost W%d (pid %u)", n->rank, n->pid);
    snprintf(tail, sizeof tail, ": %s; going on with %d of %d workers (--min-workers %d)",
             why, ps_members_live(mb), mb->cfg->workers, mb->cfg->min_workers);
    s_leave_line(mb, head, tail);
    int32_t live[PS_MAX_WORKERS];
    Shardps__Members members = SHARDPS__MEMBERS__INIT;
    ps_members_live_set(mb, &members, live);
    ops->send_all(ops->core, PS_MSG_MEMBERS, &members.base);
    ps_preflight_progress(mb->preflight);
    ps_members_barrier_check(mb);
    ops->save_state(ops->core);
    return 1;
}

static int s_on_lost(void *self, const ps_node_t *lost, const ps_loss_t *loss)
{
    ps_members_t *mb = self;
    ps_node_t *n = lost ? ps_members_row(mb, lost->role, lost->rank) : NULL;
    if (!n || n->role != PS_ROLE_WORKER) {
        return 0;
    }
    char why[48];
    if (loss->closed) {
        snprintf(why, sizeof why, "its connection closed");
    } else {
        snprintf(why, sizeof why, "silent for %.1f s", loss->silent);
    }
    return ps_members_leave(mb, n, why); /* else closed: its silence decides */
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
static void s_on_end_message(ps_members_t *mb, ps_node_t *n, ps_msg_t *m)
{
    const ps_sched_ops_t *ops = mb->ops;
    char tag[16];
    if (m->hdr.type == PS_MSG_DONE) {
        if (m->hdr.generation != ops->view(ops->core)->generation) {
            return; /* sent before a failover's rollback: it trains again */
        }
        Shardps__Done *d = s_keep(m, &shardps__done__descriptor);
        if (!d) {
            ps_sched_fail(ops, 0, "%s sent a bad final report",
                          ps_node_tag(n, tag, sizeof tag));
            return;
        }
        s_clear(n); /* kept for the summary */
        n->stats = d;
        n->done = 1;
        ps_log_info("%s done: %lld steps, %lld samples", ps_node_tag(n, tag, sizeof tag),
                    (long long)d->steps, (long long)d->samples);
    } else if (m->hdr.type == PS_MSG_REPORT) {
        Shardps__ServerReport *r = n->role == PS_ROLE_SERVER
                                       ? s_keep(m, &shardps__server_report__descriptor)
                                       : NULL;
        if (!r) {
            ps_sched_fail(ops, 0, "%s sent a bad report", ps_node_tag(n, tag, sizeof tag));
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
        mb->facts->diverged |= sd && sd->status == PS_ENONFINITE;
        ps_sched_fail(ops, 0, "%s failed: %.159s", ps_node_tag(n, tag, sizeof tag),
                      sd ? sd->reason : "");
    }
}

static int s_on_message(void *self, const ps_node_t *from, ps_msg_t *m)
{
    ps_members_t *mb = self;
    ps_node_t *n = from ? ps_members_row(mb, from->role, from->rank) : NULL;
    if (!n) {
        return 0;
    }
    char tag[16];
    const Shardps__MetricsReport *r;
    switch (m->hdr.type) {
    case PS_MSG_HEARTBEAT:
        if (m->nframes == 1 &&
            (r = ps_msg_unpack_body(m, &shardps__metrics_report__descriptor)) != NULL) {
            ps_sched_obs_heartbeat(mb->obs, (int)(n - mb->nodes),
                                   ps_node_tag(n, tag, sizeof tag), r);
        }
        return 1;
    case PS_MSG_JOIN_STEP:
        return s_on_members_step(mb, n, m);
    case PS_MSG_BARRIER:
        s_on_barrier(mb, n, m);
        return 1;
    case PS_MSG_DONE:
    case PS_MSG_REPORT:
    case PS_MSG_SHUTDOWN:
        s_on_end_message(mb, n, m);
        return 1;
    default:
        return 0;
    }
}

/* RUNNING: once every live worker is done the servers are asked for their
 * reports (REPORTING); once every report is in the job is FINISHED. */
static void s_on_tick(void *self, double now)
{
    ps_members_t *mb = self;
    const ps_sched_ops_t *ops = mb->ops;
    if (mb->facts->phase == PS_PHASE_RUNNING) {
        for (int i = mb->cfg->servers; i < mb->nnodes; i++) {
            if (!mb->nodes[i].done && !mb->nodes[i].lost) {
                return;
            }
        }
        ops->phase_event(ops->core, PS_PHASE_EV_WORKERS_DONE);
        mb->facts->t_end = now;
        ops->send_servers(ops->core, PS_MSG_REPORT, NULL);
    }
    if (mb->facts->phase == PS_PHASE_REPORTING) {
        for (int i = 0; i < mb->cfg->servers; i++) {
            if (!mb->nodes[i].reported) {
                return;
            }
        }
        ops->phase_event(ops->core, PS_PHASE_EV_REPORTS_IN);
    }
}

const ps_sched_events_t ps_members_events = {
    .on_message = s_on_message,
    .on_lost = s_on_lost,
    .on_tick = s_on_tick,
};
