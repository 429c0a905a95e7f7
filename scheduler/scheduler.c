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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "proto/codec.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"
#include "proto/sock.h"
#include "scheduler/manifest.h"

typedef struct {
    int used;             /* row holds a registered node */
    ps_role_t role;       /* server or worker */
    int rank;             /* rank within the role */
    ps_route_t route;     /* ROUTER routing id */
    char endpoint[128];   /* servers: advertised endpoint; allreduce workers: ring one */
    uint32_t pid;         /* for log lines */
    double last_seen;     /* ps_now() of its last message */
    uint64_t num_params;  /* workers: P of their model (0 until reported) */
    uint64_t train_samples; /* workers: size of their training set */
    int in_barrier;       /* workers: arrived at the current barrier */
    int done;             /* workers: sent DONE */
    int lost;             /* workers: lost and left out of the job (--min-workers) */
    ps_done_t stats;      /* workers: their DONE report */
    int reported;         /* servers: sent their end-of-job report */
    ps_server_report_t report; /* servers: that report */
} ps_node_t;

/* WAITING for nodes -> RUNNING the job -> REPORTING (workers done, servers
 * asked for telemetry) -> FINISHED; any -> FAILED. */
typedef enum { S_WAITING, S_RUNNING, S_REPORTING, S_FINISHED, S_FAILED } ps_phase_t;

typedef struct {
    const ps_scheduler_config_t *cfg;
    ps_ctx_t *ctx;
    ps_sock_t *router;
    char endpoint[128];
    ps_phase_t phase;
    ps_node_t *nodes; /* S + M rows: servers first */
    int nnodes;
    ps_view_t *view;
    char barrier[64]; /* name of the barrier being collected, "" if none */
    double t_start, t_view, t_end, last_beat;
    char failure[256];
    char lost[16]; /* tag of the node lost to silence, "" if none */
    ps_manifest_t *manifest; /* checkpointing: which parts are durable */
    int diverged;  /* a node ended the job for a NaN or an infinity */
    ps_ratelog_t *drops; /* log lines of dropped messages, one per peer and reason */
    int membership_changes; /* workers lost (or joined) while the job ran */
} ps_scheduler_t;

static const char *s_tag(const ps_node_t *n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%d", ps_codec_role_tag(n->role), n->rank);
    return buf;
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
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_shutdown(PS_ECLOSED, s->failure, &body, &len) == 0) {
        s_send_all(s, PS_MSG_SHUTDOWN, body, len);
        free(body);
    }
    s->phase = S_FAILED;
}

/* "tcp://0.0.0.0:5000" (or a "*" host) from a node on 10.0.0.2 becomes
 * "tcp://10.0.0.2:5000": a server (or an allreduce worker) bound to every
 * interface advertises the address the scheduler sees it at. */
static void s_fix_endpoint(char *ep, size_t cap, const char *peer)
{
    const char *wild[] = {"tcp://0.0.0.0:", "tcp://*:"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(wild[i]);
        if (peer[0] && !strncmp(ep, wild[i], n)) {
            char port[32];
            snprintf(port, sizeof port, "%s", ep + n);
            snprintf(ep, cap, "tcp://%s:%s", peer, port);
            return;
        }
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
    if (s->phase != S_WAITING || s_node_of(s, &m->route)) {
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
    if (is_server && !reg.endpoint[0]) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "a server must advertise an endpoint");
        return;
    }
    ps_node_t *n = &base[rank];
    memset(n, 0, sizeof *n);
    n->used = 1;
    n->role = reg.role;
    n->rank = rank;
    n->route = m->route;
    n->pid = reg.pid;
    n->last_seen = ps_now();
    snprintf(n->endpoint, sizeof n->endpoint, "%s", reg.endpoint);
    s_fix_endpoint(n->endpoint, sizeof n->endpoint, m->peer_addr);

    uint8_t *body;
    if (ps_codec_pack_register_ack(rank, &s->cfg->job, &body, &len) == 0) {
        ps_msg_send_ctrl(s->router, &n->route, PS_MSG_REGISTER_ACK, PS_ROLE_SCHEDULER, 0, body,
                         len);
        free(body);
    }
    char tag[16];
    ps_log_info("registered %s (pid %u%s%s)", s_tag(n, tag, sizeof tag), n->pid,
                n->endpoint[0] ? ", " : "", n->endpoint);
}

/* Checkpoints and resume, into the view: where servers write them, and on
 * --resume the newest complete one (or a fresh start when there is none). */
static int s_checkpoint_setup(ps_scheduler_t *s)
{
    const ps_scheduler_config_t *c = s->cfg;
    ps_view_t *v = s->view;
    if (c->resume) {
        if (ps_manifest_find(c->resume, v->num_params, &v->start_step, &v->resume_parts,
                             v->resume_dir, sizeof v->resume_dir) == 0) {
            ps_log_info("resuming from %s at step %lld (%d parts)", v->resume_dir,
                        (long long)v->start_step, v->resume_parts);
        } else {
            ps_log_warn("resume: no complete checkpoint in %s; starting from step 0",
                        c->resume);
        }
    }
    if (c->checkpoint_every > 0) {
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
        ps_codec_unpack_checkpoint(p, len, &part) != 0 ||
        part.step % s->view->checkpoint_every != 0) {
        ps_log_warn("dropped a bad checkpoint report from %s", s_tag(n, tag, sizeof tag));
        return;
    }
    ps_manifest_add(s->manifest, n->rank, &part);
}

/* Everyone is here and every worker told us P: cut the key space and send the view. */
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
    if (s_checkpoint_setup(s) != 0) {
        return;
    }
    ps_range_t ranges[PS_MAX_SERVERS];
    if (s->cfg->servers > 0) {
        ps_range_split(p, s->cfg->servers, ranges);
        ps_log_info("shard map: %llu parameters (%.2f MB) over %d servers",
                    (unsigned long long)p, (double)p * 4 / 1e6, s->cfg->servers);
    } else {
        ps_log_info("ring of %d workers over %llu parameters (%.2f MB)", s->cfg->workers,
                    (unsigned long long)p, (double)p * 4 / 1e6);
        for (int i = 0; i < s->cfg->workers; i++) {
            ps_worker_info_t *wi = &v->workers[i];
            wi->rank = i;
            snprintf(wi->endpoint, sizeof wi->endpoint, "%s",
                     s->nodes[s->cfg->servers + i].endpoint);
            ps_log_info("  W%d %-28s sends to W%d", i, wi->endpoint,
                        (i + 1) % s->cfg->workers);
        }
    }
    for (int i = 0; i < s->cfg->servers; i++) {
        ps_server_info_t *si = &v->servers[i];
        si->rank = i;
        si->begin = ranges[i].begin;
        si->end = ranges[i].end;
        snprintf(si->endpoint, sizeof si->endpoint, "%s", s->nodes[i].endpoint);
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
    s_send_all(s, PS_MSG_VIEW, body, len);
    free(body);
    s->phase = S_RUNNING;
    s->t_view = ps_now();
    char sched[64], mode[32];
    ps_job_schedule_name(&j->schedule, sched, sizeof sched);
    ps_job_mode_str(j, mode, sizeof mode);
    ps_log_info("job started: model=%s mode=%s servers=%d workers=%d batch=%d epochs=%d "
                "steps=%lld lr=%g schedule=%s momentum=%g seed=%llu",
                j->model, mode, v->num_servers, v->num_workers, j->batch,
                j->epochs, (long long)v->total_steps, j->lr, sched, j->momentum,
                (unsigned long long)j->seed);
}

/* Passes the current barrier once every live worker is in it. */
static void s_barrier_check(ps_scheduler_t *s)
{
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
        n->role != PS_ROLE_WORKER || s->phase != S_RUNNING) {
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
        s_fail(s, "%s sent a bad model size", s_tag(n, tag, sizeof tag));
        return;
    }
    if (s->cfg->job.mode == PS_MODE_ALLREDUCE) {
        if (!mi.endpoint[0]) {
            s_fail(s, "%s has no ring endpoint (allreduce needs one per worker)",
                   s_tag(n, tag, sizeof tag));
            return;
        }
        snprintf(n->endpoint, sizeof n->endpoint, "%s", mi.endpoint);
        s_fix_endpoint(n->endpoint, sizeof n->endpoint, m->peer_addr);
        ps_log_info("%s ring endpoint %s", s_tag(n, tag, sizeof tag), n->endpoint);
    }
    n->num_params = mi.num_params;
    n->train_samples = mi.train_samples;
}

static void s_on_message(ps_scheduler_t *s, ps_msg_t *m)
{
    if (m->hdr.type == PS_MSG_REGISTER) {
        s_on_register(s, m);
        return;
    }
    ps_node_t *n = s_node_of(s, &m->route);
    if (!n) {
        ps_ratelog_reject(s->drops, ps_codec_type_name(m->hdr.type), s_peer(m),
                          "unregistered peer");
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "register first");
        return;
    }
    n->last_seen = ps_now();
    char tag[16];
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    switch (m->hdr.type) {
    case PS_MSG_HEARTBEAT:
        break;
    case PS_MSG_MODEL_INFO:
        s_on_model_info(s, n, m);
        break;
    case PS_MSG_BARRIER:
        s_on_barrier(s, n, m);
        break;
    case PS_MSG_DONE:
        if (!p || ps_codec_unpack_done(p, len, &n->stats) != 0) {
            s_fail(s, "%s sent a bad final report", s_tag(n, tag, sizeof tag));
            break;
        }
        n->done = 1;
        ps_log_info("%s done: %lld steps, %lld samples", s_tag(n, tag, sizeof tag),
                    (long long)n->stats.steps, (long long)n->stats.samples);
        break;
    case PS_MSG_CHECKPOINT:
        s_on_checkpoint(s, n, m);
        break;
    case PS_MSG_REPORT:
        if (n->role != PS_ROLE_SERVER || !p ||
            ps_codec_unpack_report(p, len, &n->report) != 0) {
            s_fail(s, "%s sent a bad report", s_tag(n, tag, sizeof tag));
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
        s_fail(s, "%s failed: %s", s_tag(n, tag, sizeof tag), reason);
        break;
    }
    default:
        ps_ratelog_reject(s->drops, ps_codec_type_name(m->hdr.type), s_tag(n, tag, sizeof tag),
                          "unexpected message type");
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

/* A silent worker under --min-workers: whether the job can go on without it.
 * If so it is left out, and every node gets the new set of live workers (the
 * servers complete steps with them from the next change on). */
static int s_leave(ps_scheduler_t *s, ps_node_t *n, double silent)
{
    if (n->role != PS_ROLE_WORKER || s->phase == S_WAITING || n->done ||
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
    ps_log_warn("membership: lost W%d (pid %u): silent for %.1f s; going on with %d of %d "
                "workers (--min-workers %d)", n->rank, n->pid, silent, s_live_workers(s),
                s->cfg->workers, s->cfg->min_workers);
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_members(live, s->cfg->workers, &body, &len) != 0) {
        s_fail(s, "cannot encode the membership");
        return 1;
    }
    s_send_all(s, PS_MSG_MEMBERS, body, len);
    free(body);
    if (s->barrier[0]) {
        s_barrier_check(s);
    }
    return 1;
}

static void s_tick(ps_scheduler_t *s)
{
    double now = ps_now();
    if (now - s->last_beat >= PS_HEARTBEAT_SECONDS) {
        s_send_all(s, PS_MSG_HEARTBEAT, NULL, 0);
        s->last_beat = now;
    }
    for (int i = 0; i < s->nnodes; i++) {
        ps_node_t *n = &s->nodes[i];
        if (n->used && now - n->last_seen > s->cfg->peer_timeout) {
            if (s_leave(s, n, now - n->last_seen)) {
                continue;
            }
            n->used = 0; /* it cannot be told anything any more */
            s_fail(s, "lost peer %s (pid %u%s%s): silent for %.1f s",
                   s_tag(n, s->lost, sizeof s->lost), n->pid, n->endpoint[0] ? ", " : "",
                   n->endpoint, now - n->last_seen);
            return;
        }
    }
    if (s->phase == S_WAITING && now - s->t_start > s->cfg->wait) {
        char missing[160] = "", one[16];
        size_t at = 0;
        int more = 0;
        for (int i = 0; i < s->nnodes; i++) {
            if (!s->nodes[i].used) {
                int is_server = i < s->cfg->servers;
                snprintf(one, sizeof one, " %s%d", is_server ? "S" : "W",
                         is_server ? i : i - s->cfg->servers);
                at += ps_log_list_add(missing, sizeof missing, at, one, &more);
            }
        }
        ps_log_list_end(missing, sizeof missing, at, more);
        s_fail(s, "not every node registered within %.0f s; missing:%s%s", s->cfg->wait,
               missing[0] ? missing : " model sizes from workers", "");
        return;
    }
    if (s->phase == S_RUNNING) {
        for (int i = s->cfg->servers; i < s->nnodes; i++) {
            if (!s->nodes[i].done && !s->nodes[i].lost) {
                return;
            }
        }
        s->phase = S_REPORTING;
        s->t_end = now;
        for (int i = 0; i < s->cfg->servers; i++) {
            ps_msg_send_ctrl(s->router, &s->nodes[i].route, PS_MSG_REPORT, PS_ROLE_SCHEDULER,
                             0, NULL, 0);
        }
    }
    if (s->phase == S_REPORTING) {
        for (int i = 0; i < s->cfg->servers; i++) {
            if (!s->nodes[i].reported) {
                return;
            }
        }
        s->phase = S_FINISHED;
    }
}

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
    int finished = s->phase == S_FINISHED;
    char tag[16];
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
                    s_tag(n, tag, sizeof tag), n->pid);
            s_json_str(f, n->endpoint);
            fputc('}', f);
        }
    }
    fputs("], \"server_reports\": [", f);
    for (int i = 0; finished && i < s->cfg->servers; i++) {
        const ps_server_report_t *r = &s->nodes[i].report;
        fprintf(f,
                "%s{\"rank\": %d, \"keys\": [%llu, %llu], \"pushes\": %llu, \"pulls\": %llu, "
                "\"rejected\": %llu, \"nonfinite\": %llu, \"dropped\": %llu, "
                "\"version\": %lld, \"staleness\": "
                "{\"mean\": %.4f, \"max\": %lld, \"count\": %llu}}",
                i ? ", " : "", i, (unsigned long long)s->view->servers[i].begin,
                (unsigned long long)s->view->servers[i].end, (unsigned long long)r->pushes,
                (unsigned long long)r->pulls, (unsigned long long)r->rejected,
                (unsigned long long)r->nonfinite, (unsigned long long)r->dropped, (long long)r->version,
                ps_hist_mean(&r->staleness),
                (long long)(r->staleness.max > 0 ? r->staleness.max : 0),
                (unsigned long long)r->staleness.n);
    }
    fputs("]}\n", f);
}

/* Writes the job summary: one log line when it finished and, if asked, a JSON
 * file, finished or failed (then without the results). */
static int s_summary(ps_scheduler_t *s)
{
    const ps_job_t *j = &s->cfg->job;
    const ps_done_t *w0 = &s->nodes[s->cfg->servers].stats;
    double acc = w0->num_epochs_evaluated ? w0->test_accuracy[w0->num_epochs_evaluated - 1] : -1;
    uint64_t pushed = 0, pulled = 0, dropped = 0, rejected = 0, nonfinite = 0;
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
    }
    double sps = train > 0 ? (double)samples / train : 0;
    double wall = s->t_end - s->t_view;
    char mode[32], sched[64];
    ps_job_mode_str(j, mode, sizeof mode);
    ps_job_schedule_name(&j->schedule, sched, sizeof sched);
    long long smax = stale.max > 0 ? stale.max : 0;
    if (s->phase == S_FINISHED) {
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
            "\"seed\": %llu, \"staleness_lr\": %s, \"straggler\": ",
            j->model, mode, s->cfg->servers, s->cfg->workers, j->epochs, j->batch, j->optimizer,
            j->lr, sched, j->momentum, j->weight_decay, (unsigned long long)j->seed,
            j->staleness_lr ? "true" : "false");
    if (j->straggler_rank >= 0) {
        fprintf(f, "{\"rank\": %d, \"factor\": %g}, ", j->straggler_rank, j->straggler_factor);
    } else {
        fprintf(f, "null, ");
    }
    if (s->phase == S_FINISHED) {
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
                "\"messages_rejected\": %llu, \"pushes_nonfinite\": %llu, "
                "\"membership_changes\": %d, \"steps_with_fewer_workers\": %lld, "
                "\"worker_wait_seconds\": ",
                w0->final_loss, (long long)samples, sps, train, wall, (unsigned long long)pushed,
                (unsigned long long)pulled, ps_hist_mean(&stale),
                (long long)ps_hist_quantile(&stale, 0.5),
                (long long)ps_hist_quantile(&stale, 0.99), smax, (unsigned long long)stale.n,
                (unsigned long long)dropped, (unsigned long long)rejected,
                (unsigned long long)nonfinite, s->membership_changes, (long long)fewer);
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
    }
    s_json_outcome(f, s);
    int bad = fclose(f) != 0;
    bad = bad || ps_file_write_atomic(s->cfg->summary, (const void *[]){text},
                                      (size_t[]){len}, 1, NULL, 0) != 0;
    free(text);
    if (bad) {
        ps_log_err("cannot write the summary to %s", s->cfg->summary);
        return PS_EIO;
    }
    return 0;
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
    if (s->phase == S_WAITING) {
        s_maybe_start(s);
    }
    return 0;
}

int ps_scheduler_run(const ps_scheduler_config_t *cfg)
{
    ps_scheduler_t s = {.cfg = cfg, .phase = S_WAITING};
    int status = 1;
    s.nnodes = cfg->servers + cfg->workers;
    s.nodes = calloc((size_t)s.nnodes, sizeof *s.nodes);
    s.view = calloc(1, sizeof *s.view);
    char why[128];
    if (!s.nodes || !s.view || ps_ratelog_new(&s.drops, PS_RATELOG_PERIOD) != 0 ||
        ps_ctx_new(&s.ctx) != 0) {
        ps_log_err("out of memory");
        goto fail;
    }
    int rc = ps_sock_new(s.ctx, PS_SOCK_ROUTER, &s.router, why, sizeof why);
    if (rc == 0) {
        rc = ps_sock_bind(s.router, cfg->bind, s.endpoint, sizeof s.endpoint, why, sizeof why);
    }
    if (rc != 0) {
        ps_log_err("cannot bind %s: %s", cfg->bind, why);
        goto fail;
    }
    if (cfg->endpoint_file && s_write_endpoint(cfg->endpoint_file, s.endpoint) != 0) {
        ps_log_err("cannot write the endpoint to %s", cfg->endpoint_file);
        goto fail;
    }
    ps_log_info("listening on %s for %d servers and %d workers", s.endpoint, cfg->servers,
                cfg->workers);
    s.t_start = ps_now();
    while (s.phase != S_FINISHED && s.phase != S_FAILED) {
        ps_pollitem_t it = {.sock = s.router};
        if ((rc = ps_poll(&it, 1, 100)) < 0) {
            s_fail(&s, "poll failed: %s", ps_strerror(rc));
            break;
        }
        /* Drain what is queued, but keep ticking so liveness stays checked. */
        if (it.ready) {
            ps_msg_drain(s.router, PS_RECV_ROUTER | PS_RECV_PEER, 256, s_on_receive, &s);
        }
        s_tick(&s);
        ps_ratelog_tick(s.drops);
    }
    int written = s_summary(&s); /* a failed job's too: why it ended */
    if (s.phase == S_FINISHED) {
        status = written == 0 ? 0 : 1;
        uint8_t *body;
        size_t len;
        if (ps_codec_pack_shutdown(0, "job finished", &body, &len) == 0) {
            s_send_all(&s, PS_MSG_SHUTDOWN, body, len);
            free(body);
        }
    }
fail:
    if (status != 0) {
        ps_sock_set_linger(s.router, PS_ABORT_LINGER_MS);
    }
    ps_sock_destroy(&s.router); /* lingers so the SHUTDOWNs go out */
    ps_ctx_destroy(&s.ctx);
    ps_manifest_destroy(&s.manifest);
    ps_ratelog_destroy(&s.drops);
    free(s.view);
    free(s.nodes);
    return status;
}
