/*
 * scheduler/failover.c - spare servers and the replacement of a lost one
 * (the protocol is in failover.h).
 *
 * A spare loads the lost server's keys from the newest complete checkpoint;
 * in stepped modes everyone rolls back to it (a consistent cut), in async
 * the others go on and the lost server's updates since its part are lost
 * (counted). Without checkpoints or without a spare a lost server ends the
 * job, as before, after one line saying which of the two was missing.
 */
#include "scheduler/failover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/json.h"
#include "common/log.h"
#include "scheduler/manifest.h"

/* One lost server replaced: what the summary reports. */
typedef struct {
    int rank;           /* the server lost */
    int64_t generation; /* its failover */
    int64_t step;       /* the checkpoint everyone rolled back to */
    int64_t steps_lost; /* steps applied past it before the loss (max over servers) */
    int64_t base;       /* async: the spare's version (its checkpoint part's) */
    int64_t updates_lost; /* async: the others' highest version minus base */
    double t_declared;  /* ps_now() when it was declared lost */
    double detect_s;    /* last heard -> declared lost */
    double recover_s;   /* declared lost -> first step applied after; < 0 until then */
} s_replacement_t;

struct ps_failover {
    ps_node_t spares[PS_FAILOVER_MAX_SPARES]; /* waiting spares (rank: their spare id) */
    int nspares;
    int next_id;           /* the next spare's id: servers + k, never reused */
    int *spare_id;         /* servers: the id the node had as a spare, -1 if none */
    unsigned char *ready;  /* servers: answered the current failover */
    int64_t rolled_from;   /* highest version any server rolled back (async: went on) from */
    s_replacement_t *reps; /* every replacement, in order */
    int nreps, cap_reps;
    ps_route_t retired[PS_FAILOVER_MAX_SPARES]; /* connections of replaced servers (a ring) */
    int nretired;
};

int ps_failover_new(ps_failover_t **out, int servers)
{
    *out = NULL;
    ps_failover_t *f = calloc(1, sizeof *f);
    size_t n = servers > 0 ? (size_t)servers : 1;
    if (!f || !(f->spare_id = malloc(n * sizeof *f->spare_id)) ||
        !(f->ready = calloc(n, 1))) {
        ps_failover_destroy(&f);
        return PS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        f->spare_id[i] = -1;
    }
    f->next_id = servers;
    *out = f;
    return 0;
}

void ps_failover_destroy(ps_failover_t **fp)
{
    ps_failover_t *f = *fp;
    if (f) {
        free(f->spare_id);
        free(f->ready);
        free(f->reps);
        free(f);
        *fp = NULL;
    }
}

static void s_send(ps_scheduler_t *s, const ps_node_t *n, ps_msg_type_t type, const void *body,
                   size_t len)
{
    ps_msg_send_ctrl(s->router, &n->route, type, PS_ROLE_SCHEDULER, 0, body, len);
}

static ps_node_t *s_spare_of(ps_failover_t *f, const ps_route_t *r)
{
    for (int i = 0; i < f->nspares; i++) {
        ps_node_t *n = &f->spares[i];
        if (n->route.len == r->len && !memcmp(n->route.id, r->id, r->len)) {
            return n;
        }
    }
    return NULL;
}

int ps_failover_is_spare(const ps_scheduler_t *s, const ps_register_t *reg)
{
    return reg->role == PS_ROLE_SERVER && (reg->spare || s->phase != S_WAITING);
}

void ps_failover_add_spare(ps_scheduler_t *s, const ps_msg_t *m, const ps_register_t *reg)
{
    ps_failover_t *f = s->failover;
    const char *why = NULL;
    if (s->cfg->servers == 0) {
        why = "an allreduce job has no servers to replace";
    } else if (s->phase == S_FINISHED || s->phase == S_FAILED || s->phase == S_REPORTING) {
        why = "the job is ending";
    } else if (s_spare_of(f, &m->route)) {
        why = "this spare is registered already";
    } else if (f->nspares == PS_FAILOVER_MAX_SPARES) {
        why = "too many spares wait already";
    }
    if (why) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE, "%s", why);
        return;
    }
    ps_node_t *n = &f->spares[f->nspares++];
    memset(n, 0, sizeof *n);
    n->used = 1;
    n->role = PS_ROLE_SERVER;
    n->rank = f->next_id++;
    n->route = m->route;
    n->pid = reg->pid;
    n->last_seen = ps_now();
    n->fd = m->peer_fd;
    snprintf(n->curve_key, sizeof n->curve_key, "%s", reg->curve_key);
    /* No endpoint yet: a promoted spare binds for its shard and says where
     * (PEER_READY), as every server does. */
    ps_scheduler_send_ack(s, n);
    ps_log_info("registered spare S%d (pid %u); %d spare%s waiting", n->rank, n->pid,
                f->nspares, f->nspares == 1 ? "" : "s");
}

int ps_failover_on_spare_message(ps_scheduler_t *s, const ps_msg_t *m)
{
    ps_failover_t *f = s->failover;
    ps_node_t *n = s_spare_of(f, &m->route);
    if (n && m->hdr.role == PS_ROLE_SERVER && m->hdr.sender == n->rank) {
        n->last_seen = ps_now();
        return 1; /* a heartbeat: a spare says nothing else */
    }
    /* A server declared lost but alive after all (a pause longer than the
     * peer timeout): its place is taken, so it is told to go. */
    for (int i = 0; i < f->nretired && i < PS_FAILOVER_MAX_SPARES; i++) {
        const ps_route_t *r = &f->retired[i];
        if (r->len == m->route.len && !memcmp(r->id, m->route.id, r->len)) {
            uint8_t *body;
            size_t len;
            if (ps_codec_pack_shutdown(PS_ECLOSED, "this server was declared lost and replaced",
                                       &body, &len) == 0) {
                ps_msg_send_ctrl(s->router, &m->route, PS_MSG_SHUTDOWN, PS_ROLE_SCHEDULER, 0,
                                 body, len);
                free(body);
            }
            return 1;
        }
    }
    /* A promoted spare's heartbeats sent before it learnt its new rank. */
    for (int r = 0; r < s->cfg->servers; r++) {
        ps_node_t *p = &s->nodes[r];
        if (f->spare_id[r] >= 0 && m->hdr.sender == f->spare_id[r] &&
            p->route.len == m->route.len && !memcmp(p->route.id, m->route.id, m->route.len)) {
            return m->hdr.type == PS_MSG_HEARTBEAT;
        }
    }
    return 0;
}

void ps_failover_send_spares(ps_scheduler_t *s, ps_msg_type_t type, const void *body,
                             size_t len)
{
    ps_failover_t *f = s->failover;
    if (f && (type == PS_MSG_HEARTBEAT || type == PS_MSG_SHUTDOWN)) {
        for (int i = 0; i < f->nspares; i++) {
            s_send(s, &f->spares[i], type, body, len);
        }
    }
}

void ps_failover_tick(ps_scheduler_t *s)
{
    ps_failover_t *f = s->failover;
    const double now = ps_now();
    for (int i = 0; f && i < f->nspares; i++) {
        ps_node_t *n = &f->spares[i];
        if (now - n->last_seen > s->cfg->peer_timeout) {
            ps_log_warn("lost spare S%d (pid %u): silent for %.1f s", n->rank, n->pid,
                        now - n->last_seen);
            f->spares[i--] = f->spares[--f->nspares];
        }
    }
}

/* Sends the view (as it stands in s->view) to n as a message of type. */
static int s_send_view(ps_scheduler_t *s, const ps_node_t *n, ps_msg_type_t type)
{
    uint8_t *body;
    size_t len;
    ps_view_t *v = s->view;
    for (int w = 0; n->role == PS_ROLE_SERVER && w < s->cfg->workers; w++) {
        v->worker_tokens[w] = s->nodes[s->cfg->servers + w].token; /* servers' copy only */
    }
    int rc = ps_codec_pack_view(v, &body, &len);
    memset(v->worker_tokens, 0, sizeof v->worker_tokens);
    if (rc == 0) {
        s_send(s, n, type, body, len);
        free(body);
    }
    return rc;
}

/* The promoted spare starts with every worker live: when some were left out
 * (--min-workers) it gets the live set right after its view. A superset of
 * the live workers never completes a step early, so the order is safe. */
static void s_send_members(ps_scheduler_t *s, const ps_node_t *n)
{
    unsigned char live[PS_MAX_WORKERS];
    int all = 1;
    for (int w = 0; w < s->cfg->workers; w++) {
        live[w] = !s->nodes[s->cfg->servers + w].lost;
        all &= live[w];
    }
    uint8_t *body;
    size_t len;
    if (!all && ps_codec_pack_members(live, s->cfg->workers, &body, &len) == 0) {
        s_send(s, n, PS_MSG_MEMBERS, body, len);
        free(body);
    }
}

/* ps_failover_replace(); closed: its connection closed (a lost server that
 * cannot be replaced is then left to its silence, which logs why). */
static int s_replace(ps_scheduler_t *s, ps_node_t *n, double silent, int closed)
{
    ps_failover_t *f = s->failover;
    const int r = n->rank;
    if (n->role != PS_ROLE_SERVER || s->phase == S_WAITING || !f ||
        (closed && (s->phase != S_RUNNING || !s->manifest || f->nspares == 0))) {
        return 0;
    }
    if (!s->manifest) {
        ps_log_warn("failover: S%d cannot be replaced: checkpoints are off (--checkpoint-dir "
                    "and --checkpoint-every)", r);
        return 0;
    }
    if (s->phase == S_REPORTING) { /* training is over: only its report is missing */
        ps_log_warn("S%d (pid %u) lost after training ended: its report is missing", r, n->pid);
        n->used = 0;
        n->reported = 1;
        return 1;
    }
    if (f->nspares == 0) {
        ps_log_warn("failover: S%d cannot be replaced: no spare server waits (--spares)", r);
        return 0;
    }
    ps_view_t *v = s->view;
    int64_t step;
    int parts;
    if (ps_manifest_find(v->checkpoint_dir, v->num_params, &step, &parts, v->resume_dir,
                         sizeof v->resume_dir) != 0) {
        if (closed) {
            return 0;
        }
        ps_log_warn("failover: S%d cannot be replaced: no complete checkpoint in %s yet", r,
                    v->checkpoint_dir);
        return 0;
    }
    if (f->nreps == f->cap_reps) {
        int cap = f->cap_reps ? 2 * f->cap_reps : 8;
        s_replacement_t *reps = realloc(f->reps, (size_t)cap * sizeof *reps);
        if (!reps) {
            ps_log_err("failover: out of memory");
            return 0;
        }
        f->reps = reps;
        f->cap_reps = cap;
    }
    const double now = ps_now();
    const ps_node_t spare = f->spares[0];
    f->spares[0] = f->spares[--f->nspares];
    const uint32_t lost_pid = n->pid;
    f->retired[f->nretired++ % PS_FAILOVER_MAX_SPARES] = n->route;
    /* The spare becomes row r: its connection is S<r> from now on. */
    n->route = spare.route;
    n->pid = spare.pid;
    n->fd = spare.fd;
    n->last_seen = now;
    n->reported = 0;
    n->endpoint[0] = '\0'; /* until it binds (scheduler.c:s_on_peer_ready) */
    n->ready = 0;
    snprintf(n->curve_key, sizeof n->curve_key, "%s", spare.curve_key);
    f->spare_id[r] = spare.rank;
    v->generation++;
    v->replaced = r + 1;
    v->start_step = step;
    v->resume_step = 0; /* a resume's other worker count: the parts are of step now */
    v->resume_parts = parts;
    v->servers[r].endpoint[0] = '\0';
    snprintf(v->servers[r].curve_key, sizeof v->servers[r].curve_key, "%s", spare.curve_key);
    const int stepped = ps_job_is_stepped(&s->cfg->job);
    f->reps[f->nreps++] = (s_replacement_t){r, v->generation, step, 0, 0, 0, now, silent, -1};
    memset(f->ready, 0, (size_t)s->cfg->servers);
    f->rolled_from = stepped ? step : 0;
    ps_log_warn("failover %lld: lost S%d (pid %u): %s %.1f s; spare S%d (pid %u) "
                "takes its keys from %s; %s %lld",
                (long long)v->generation, r, lost_pid,
                closed ? "its connection closed, silent for" : "silent for", silent, spare.rank,
                spare.pid, v->resume_dir,
                stepped ? "every node rolls back to step"
                        : "the others go on (async), its updates since are lost: step",
                (long long)step);
    for (int i = 0; i < s->cfg->servers; i++) {
        if (s_send_view(s, &s->nodes[i], i == r ? PS_MSG_VIEW : PS_MSG_FAILOVER) != 0) {
            ps_log_err("failover: cannot encode the view");
            return 0;
        }
    }
    s_send_members(s, n);
    if (s->agree.active) {
        /* The servers' rollback ends their hold, and the spare never had it:
         * the agreement starts again (ps_join_tick), the spare included;
         * the survivors' answers to this one are of the older generation. */
        s->agree.active = 0;
        ps_log_info("failover %lld: the step agreement under way starts again",
                    (long long)v->generation);
    }
    /* Workers finish again after the rollback; DONEs sent before it are
     * of an older generation and ignored. */
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        s->nodes[i].done = 0;
    }
    return 1;
}

int ps_failover_replace(ps_scheduler_t *s, ps_node_t *n, double silent)
{
    return s_replace(s, n, silent, 0);
}

void ps_failover_on_disconnect(ps_scheduler_t *s, int fd)
{
    ps_failover_t *f = s->failover;
    const double now = ps_now();
    for (int i = 0; fd >= 0 && i < f->nspares; i++) {
        if (f->spares[i].fd == fd) {
            ps_log_warn("lost spare S%d (pid %u): its connection closed", f->spares[i].rank,
                        f->spares[i].pid);
            f->spares[i] = f->spares[--f->nspares];
            return;
        }
    }
    for (int r = 0; fd >= 0 && r < s->cfg->servers; r++) {
        ps_node_t *n = &s->nodes[r];
        if (n->used && n->fd == fd) {
            s_replace(s, n, now - n->last_seen, 1);
            return;
        }
    }
}

/* Phase 2: every server stands at the checkpoint; the workers roll back. */
static void s_tell_workers(ps_scheduler_t *s)
{
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        if (s->nodes[i].used && !s->nodes[i].lost) {
            s_send_view(s, &s->nodes[i], PS_MSG_FAILOVER);
        }
    }
    if (ps_job_is_stepped(&s->cfg->job)) {
        ps_log_info("failover %lld: every server is at step %lld; workers roll back",
                    (long long)s->view->generation, (long long)s->view->start_step);
    } else {
        ps_log_info("failover %lld: the spare is ready; workers reconnect and go on",
                    (long long)s->view->generation);
    }
}

void ps_failover_on_ready(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    ps_failover_t *f = s->failover;
    ps_failover_ready_t rd;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (n->role != PS_ROLE_SERVER || !p || ps_codec_unpack_failover_ready(p, len, &rd) != 0 ||
        rd.generation != s->view->generation || f->nreps == 0) {
        return; /* an older failover's: the newer one decides */
    }
    s_replacement_t *rep = &f->reps[f->nreps - 1];
    if (rd.stepped) {
        if (rep->recover_s >= 0) {
            return;
        }
        const double now = ps_now();
        /* Replacements still open (a server lost during another's recovery)
         * end with this one. */
        for (int i = 0; i < f->nreps; i++) {
            if (f->reps[i].recover_s < 0) {
                f->reps[i].recover_s = now - f->reps[i].t_declared;
            }
        }
        if (ps_job_is_stepped(&s->cfg->job)) {
            ps_log_info("failover %lld: S%d replaced: detected after %.2f s, recovered %.3f s "
                        "later (first step after the rollback), %lld steps lost",
                        (long long)rep->generation, rep->rank, rep->detect_s, rep->recover_s,
                        (long long)rep->steps_lost);
        } else {
            ps_log_info("failover %lld: S%d replaced: detected after %.2f s, recovered %.3f s "
                        "later (first update after), %lld updates lost (its version, taken as "
                        "the others' highest, %lld, minus its checkpoint part's, %lld)",
                        (long long)rep->generation, rep->rank, rep->detect_s, rep->recover_s,
                        (long long)rep->updates_lost, (long long)f->rolled_from,
                        (long long)rep->base);
        }
        return;
    }
    if (f->ready[n->rank]) {
        return;
    }
    f->ready[n->rank] = 1;
    if (!ps_job_is_stepped(&s->cfg->job)) {
        /* Async: the spare answers its part's version, the others the one
         * they go on from. Each worker step pushes once to every server,
         * so the lost server stood about where the others' highest is. */
        if (n->rank == rep->rank) {
            rep->base = rd.step;
        } else if (rd.from_version > f->rolled_from) {
            f->rolled_from = rd.from_version;
        }
        rep->updates_lost = f->rolled_from > rep->base ? f->rolled_from - rep->base : 0;
    } else if (rd.from_version > f->rolled_from) {
        f->rolled_from = rd.from_version;
    }
    rep->steps_lost = ps_job_is_stepped(&s->cfg->job) ? f->rolled_from - rep->step : 0;
    for (int i = 0; i < s->cfg->servers; i++) {
        if (!f->ready[i]) {
            return;
        }
    }
    s_tell_workers(s);
}

int ps_failover_json(json_t *doc, const ps_scheduler_t *s)
{
    const ps_failover_t *fo = s->failover;
    json_t *reps = json_array();
    for (int i = 0; reps && fo && i < fo->nreps; i++) {
        const s_replacement_t *r = &fo->reps[i];
        json_t *rep = json_pack("{s:i, s:I, s:o, s:o, s:I, s:I}", "rank", r->rank, "step",
                                (json_int_t)r->step, "detect_s", ps_json_real(r->detect_s, 3),
                                "recover_s", ps_json_real(r->recover_s, 3), "steps_lost",
                                (json_int_t)r->steps_lost, "updates_lost",
                                (json_int_t)r->updates_lost);
        if (json_array_append_new(reps, rep) != 0) {
            json_decref(reps);
            reps = NULL;
        }
    }
    return json_object_set_new(doc, "server_replacements", reps) != 0 ||
                   json_object_set_new(doc, "spares_left", json_integer(fo ? fo->nspares : 0))
               ? PS_ENOMEM
               : 0;
}
