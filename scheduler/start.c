/*
 * scheduler/start.c - part of the scheduler's core: a job from the first
 * registration to RUNNING, and the cluster view (scheduler/start.h). Its own
 * state is the view; the rows are the node table's (scheduler/members.h),
 * and everything else it asks of the core through the ops.
 */
#include "scheduler/start.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "proto/link.h"
#include "proto/range.h"

struct ps_start {
    const ps_sched_ops_t *ops; /* the core (borrowed) */
    const ps_scheduler_config_t *cfg;
    ps_sched_facts_t *facts; /* the loop's (borrowed); the phase is read only */
    ps_members_t *members;   /* the node table (borrowed) */
    ps_ckpt_t *ckpt;         /* the view's checkpoint part (borrowed) */
    ps_join_t *join;         /* a saved job's joins (borrowed) */
    ps_view_t view;          /* the cluster view */
    double next_wait_log;    /* ps_now() of the next "still waiting" line; 0: unset */
};

int ps_start_new(ps_start_t **out, const ps_sched_ops_t *ops, ps_sched_facts_t *facts,
                 ps_members_t *members, ps_ckpt_t *ckpt, ps_join_t *join)
{
    ps_start_t *st = calloc(1, sizeof *st);
    *out = st;
    if (!st) {
        return PS_ENOMEM;
    }
    st->ops = ops;
    st->cfg = ops->cfg;
    st->facts = facts;
    st->members = members;
    st->ckpt = ckpt;
    st->join = join;
    return 0;
}

void ps_start_destroy(ps_start_t **st_p)
{
    free(*st_p);
    *st_p = NULL;
}

const ps_view_t *ps_start_view(const ps_start_t *st)
{
    return &st->view;
}

/* A view being sent: a copy with the tokens its receiver may see, and its
 * protobuf form, which borrows from the copy. */
typedef struct {
    ps_view_t v;
    ps_view_pb_t pb;
} s_view_msg_t;

/* View v as a ClusterView into out, for node n (NULL: every token, the saved
 * state). The servers' copy carries every worker's token; under allreduce a
 * worker's carries its left neighbour's, whose ring data it takes
 * (worker/ring.h). Returns 0, or PS_ENOMEM / PS_EINVAL (*out NULL). */
static int s_view_msg(ps_start_t *st, const ps_node_t *n, const ps_view_t *v,
                      s_view_msg_t **out)
{
    const int M = st->cfg->workers;
    const int left =
        n && n->role == PS_ROLE_WORKER && st->cfg->job.mode == PS_MODE_ALLREDUCE
            ? (n->rank + M - 1) % M
            : -1;
    s_view_msg_t *vm = malloc(sizeof *vm);
    if (!vm) {
        *out = NULL;
        return PS_ENOMEM;
    }
    vm->v = *v;
    memset(vm->v.worker_tokens, 0, sizeof vm->v.worker_tokens);
    for (int w = 0; w < M; w++) {
        if (!n || n->role == PS_ROLE_SERVER || w == left) {
            vm->v.worker_tokens[w] = ps_members_worker(st->members, w)->token;
        }
    }
    const int rc = ps_codec_view_to_pb(&vm->v, &vm->pb);
    if (rc != 0) {
        free(vm);
        vm = NULL;
    }
    *out = vm;
    return rc;
}

int ps_start_send_view(ps_start_t *st, const ps_node_t *n, ps_msg_type_t type,
                       const ps_view_t *v)
{
    s_view_msg_t *vm;
    const int rc = s_view_msg(st, n, v ? v : &st->view, &vm);
    if (rc == 0) {
        st->ops->send(st->ops->core, &n->route, type, &vm->pb.pb.base);
    }
    free(vm);
    return rc;
}

int ps_start_pack_state(ps_start_t *st, Shardps__JoinSchedulerState *state, uint8_t **body,
                        size_t *len)
{
    s_view_msg_t *vm;
    uint8_t *view = NULL;
    int rc = s_view_msg(st, NULL, &st->view, &vm);
    rc = rc ? rc : ps_codec_pack(&vm->pb.pb.base, &view, &state->view.len);
    state->view.data = view;
    rc = rc ? rc : ps_codec_pack(&state->base, body, len);
    state->view.data = NULL;
    state->view.len = 0;
    free(view);
    free(vm);
    return rc;
}

/* A REGISTER of a node of the job before it starts: a free rank (its own
 * --rank, or the lowest free one). */
static void s_register(ps_start_t *st, ps_msg_t *m, const Shardps__Register *reg)
{
    const ps_sched_ops_t *ops = st->ops;
    if (st->facts->phase != PS_PHASE_WAITING ||
        ps_members_node_of(st->members, &m->route)) {
        ps_sched_refuse(ops, m, PS_ESTATE,
                        "the job has already started or this node is registered");
        return;
    }
    const int is_server = reg->role == PS_ROLE_SERVER;
    const int count = is_server ? st->cfg->servers : st->cfg->workers;
    const char *what = is_server ? "server" : "worker";
    ps_node_t *base = ps_members_at(st->members, is_server ? 0 : st->cfg->servers);
    int rank = reg->rank;
    if (rank < -1 || rank >= count) {
        ps_sched_refuse(ops, m, PS_EINVAL,
                        "rank %d is out of range: -1 (any) or 0 to %d (the job has %d %ss)",
                        rank, count - 1, count, what);
        return;
    }
    if (rank >= 0 && base[rank].used) {
        ps_sched_refuse(ops, m, PS_ESTATE, "%s%d is already registered",
                        ps_codec_role_tag(reg->role), rank);
        return;
    }
    for (int i = 0; rank < 0 && i < count; i++) {
        if (!base[i].used) {
            rank = i;
        }
    }
    if (rank < 0) {
        ps_sched_refuse(ops, m, PS_ESTATE, "the job already has all %d %ss", count, what);
        return;
    }
    if (st->cfg->secure && !reg->curve_key[0]) {
        /* ZAP admitted its connection; the key it serves with must come too. */
        ps_sched_refuse(ops, m, PS_EINVAL,
                        "a node of a secure job must send its public key");
        return;
    }
    ps_node_t *n = &base[rank];
    if (ps_members_admit(n, m, reg, rank, 0) != 0) {
        ps_sched_refuse(ops, m, PS_EIO, "the scheduler cannot draw a token");
        return;
    }
    ps_members_fix_endpoint(st->members, n, reg->endpoint, m->peer_addr);
    ops->send_ack(ops->core, n);
    char tag[16];
    ps_log_info("registered %s (pid %u%s%s)", ps_node_tag(n, tag, sizeof tag), n->pid,
                n->endpoint[0] ? ", " : "", n->endpoint);
    return;
}

static void s_start_workers(ps_start_t *st);

/* The view's job and shard map, once every worker told us P (and its data):
 * P, the steps, and the checkpoint part. Returns 0, 1 when a resume asked
 * the servers first (scheduler/ckpt.h: it sends the servers the view), or a
 * PS_E* when the job failed (the reason is given). */
static int s_view_job(ps_start_t *st, uint64_t p, uint64_t samples)
{
    const ps_job_t *j = &st->cfg->job;
    int64_t spe = (int64_t)(samples / ((uint64_t)st->cfg->workers * (uint64_t)j->batch));
    if (spe < 1) {
        ps_sched_fail(st->ops, 0,
                      "a global batch of %d x %d is larger than the %llu training samples",
                      st->cfg->workers, j->batch, (unsigned long long)samples);
        return PS_EINVAL;
    }
    int64_t total = spe * j->epochs;
    ps_view_t *v = &st->view;
    v->num_params = p;
    v->num_workers = st->cfg->workers;
    v->num_servers = st->cfg->servers;
    v->job = st->cfg->job;
    if (!v->job.chunk_kib) {
        v->job.chunk_kib = ps_job_auto_chunk_kib(p, st->cfg->servers);
    }
    v->steps_per_epoch = spe;
    v->total_steps = j->max_steps && j->max_steps < total ? j->max_steps : total;
    v->preflight = st->cfg->preflight && st->cfg->servers > 0;
    v->replicas = st->cfg->replicas;
    ps_range_t ranges[PS_MAX_SERVERS];
    ps_rowrange_t rows[PS_MAX_SERVERS];
    ps_range_split(p, st->cfg->servers, ranges);
    ps_range_split_rows(st->cfg->servers, rows);
    for (int i = 0; i < st->cfg->servers; i++) {
        v->servers[i].rank = i;
        v->servers[i].begin = ranges[i].begin;
        v->servers[i].end = ranges[i].end;
        /* embedding rows: by their keys' hash, so hot ids spread */
        v->servers[i].rows = ps_job_has_rows(j) ? rows[i] : (ps_rowrange_t){0, 0};
    }
    const int rc = ps_ckpt_setup(st->ckpt, samples);
    if (rc == 0 && ps_ckpt_view(st->ckpt, v) != 0) {
        ps_sched_fail(st->ops, 0, "out of memory");
        return PS_ENOMEM;
    }
    return rc;
}

/* Everyone is here and every worker told us P: cut the key space and send
 * the servers their copy of the view (allreduce: the workers theirs). */
static void s_maybe_start(ps_start_t *st)
{
    uint64_t p = 0, samples = 0;
    for (int i = 0; i < ps_members_count(st->members); i++) {
        ps_node_t *n = ps_members_at(st->members, i);
        if (!n->used || (n->role == PS_ROLE_WORKER && !n->num_params)) {
            return;
        }
        if (n->role == PS_ROLE_WORKER) {
            if (p && p != n->num_params) {
                ps_sched_fail(st->ops, 0,
                              "workers disagree on the model size: %llu vs %llu "
                              "parameters",
                              (unsigned long long)p, (unsigned long long)n->num_params);
                return;
            }
            p = n->num_params;
            samples = samples && samples < n->train_samples ? samples : n->train_samples;
        }
    }
    if (s_view_job(st, p, samples) != 0) {
        return;
    }
    if (st->cfg->servers > 0) {
        ps_start_servers(st);
        return;
    }
    ps_log_info("ring of %d workers over %llu parameters (%.2f MB)", st->cfg->workers,
                (unsigned long long)p, (double)p * 4 / 1e6);
    for (int i = 0; i < st->cfg->workers; i++) {
        ps_worker_info_t *wi = &st->view.workers[i];
        ps_node_t *n = ps_members_worker(st->members, i);
        /* now that every worker is here: a ring endpoint on this host too */
        ps_members_fix_endpoint(st->members, n, n->endpoint, "");
        wi->rank = i;
        snprintf(wi->endpoint, sizeof wi->endpoint, "%s", n->endpoint);
        snprintf(wi->curve_key, sizeof wi->curve_key, "%s", n->curve_key);
        ps_log_info("  W%d %-28s sends to W%d", i, wi->endpoint,
                    (i + 1) % st->cfg->workers);
    }
    s_start_workers(st);
}

void ps_start_servers(ps_start_t *st)
{
    if (ps_ckpt_view(st->ckpt, &st->view) != 0) {
        ps_sched_fail(st->ops, 0, "out of memory");
        return;
    }
    /* The servers' copy, with the workers' tokens and no endpoints yet:
     * each binds for its shard and says where (s_on_peer_ready). */
    for (int i = 0; i < st->cfg->servers; i++) {
        if (ps_start_send_view(st, ps_members_at(st->members, i), PS_MSG_VIEW, NULL) != 0) {
            ps_sched_fail(st->ops, 0, "cannot encode the cluster view");
            return;
        }
    }
    st->ops->phase_event(st->ops->core, PS_PHASE_EV_SERVERS_VIEWED);
}

/* The job's first line, and a warning about a setting known to diverge. */
static void s_log_started(const ps_start_t *st)
{
    const ps_view_t *v = &st->view;
    const ps_job_t *j = &st->cfg->job;
    char sched[64], mode[32];
    ps_job_schedule_name(&j->schedule, sched, sizeof sched);
    ps_job_mode_str(j, mode, sizeof mode);
    ps_log_info("job started: model=%s mode=%s servers=%d workers=%d batch=%d epochs=%d "
                "steps=%lld lr=%g schedule=%s momentum=%g seed=%llu",
                j->model, mode, v->num_servers, v->num_workers, j->batch, j->epochs,
                (long long)v->total_steps, j->lr, sched, j->momentum,
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
        ps_log_warn(
            "async over %d workers with momentum %g and --staleness-lr 0: every push "
            "applies at the full rate, and staleness adds momentum of its own; such "
            "jobs diverge (docs/design.md)",
            v->num_workers, j->momentum);
    }
}

/* Every server is bound for its shard (or there are none): the workers get
 * the view with the servers' endpoints, and the job runs. A worker connects
 * only now, so it never meets a server that is not listening yet. */
static void s_start_workers(ps_start_t *st)
{
    ps_view_t *v = &st->view;
    if (st->cfg->servers > 0) {
        ps_log_info("shard map: %llu parameters (%.2f MB) over %d servers",
                    (unsigned long long)v->num_params, (double)v->num_params * 4 / 1e6,
                    st->cfg->servers);
    }
    for (int i = 0; i < st->cfg->servers; i++) {
        ps_server_info_t *si = &v->servers[i];
        snprintf(si->endpoint, sizeof si->endpoint, "%s",
                 ps_members_at(st->members, i)->endpoint);
        snprintf(si->curve_key, sizeof si->curve_key, "%s",
                 ps_members_at(st->members, i)->curve_key);
        ps_log_info("  S%d %-28s keys [%llu, %llu) = %llu parameters", i, si->endpoint,
                    (unsigned long long)si->begin, (unsigned long long)si->end,
                    (unsigned long long)(si->end - si->begin));
    }
    for (int i = 0; i < st->cfg->workers; i++) {
        if (ps_start_send_view(st, ps_members_worker(st->members, i), PS_MSG_VIEW, NULL) !=
            0) {
            ps_sched_fail(st->ops, 0, "cannot encode the cluster view");
            return;
        }
    }
    st->ops->phase_event(st->ops->core, PS_PHASE_EV_WORKERS_VIEWED);
    st->facts->t_view = ps_now();
    st->ops->save_state(st->ops->core);
    s_log_started(st);
}

/* A server is bound for its shard, at endpoint: once every server is, the
 * workers get the view. */
static void s_on_peer_ready(ps_start_t *st, ps_node_t *n, ps_msg_t *m)
{
    char tag[16];
    const Shardps__PeerReady *pr = ps_msg_unpack_body(m, &shardps__peer_ready__descriptor);
    /* While the job runs only a promoted spare binds (scheduler/failover.c):
     * its endpoint goes into the view the workers get once every server
     * rolled back (its PEER_READY comes before its FAILOVER_READY). */
    const int spare = st->facts->phase == PS_PHASE_RUNNING;
    if (n->role != PS_ROLE_SERVER || (st->facts->phase != PS_PHASE_STARTING && !spare) ||
        n->ready || !pr) {
        ps_sched_fail(st->ops, 0, "%s sent a bad ready message",
                      ps_node_tag(n, tag, sizeof tag));
        return;
    }
    ps_members_fix_endpoint(st->members, n, pr->endpoint, m->peer_addr);
    n->ready = 1;
    if (spare) {
        ps_server_info_t *si = &st->view.servers[n->rank];
        snprintf(si->endpoint, sizeof si->endpoint, "%s", n->endpoint);
        ps_log_info("S%d listens on %s", n->rank, n->endpoint);
        return;
    }
    for (int i = 0; i < st->cfg->servers; i++) {
        if (!ps_members_at(st->members, i)->ready) {
            return;
        }
    }
    s_start_workers(st);
}

/* A worker's model size and, in allreduce mode, the endpoint its left
 * neighbour will connect to. */
static void s_on_model_info(ps_start_t *st, ps_node_t *n, ps_msg_t *m)
{
    char tag[16];
    const Shardps__ModelInfo *mi = ps_msg_unpack_body(m, &shardps__model_info__descriptor);
    if (n->role != PS_ROLE_WORKER || !mi || !mi->num_params) {
        ps_sched_fail(st->ops, 0, "%s sent a bad model size",
                      ps_node_tag(n, tag, sizeof tag));
        return;
    }
    if (st->cfg->job.mode == PS_MODE_ALLREDUCE) {
        if (!mi->endpoint[0]) {
            ps_sched_fail(st->ops, 0,
                          "%s has no ring endpoint (allreduce needs one per worker)",
                          ps_node_tag(n, tag, sizeof tag));
            return;
        }
        ps_members_fix_endpoint(st->members, n, mi->endpoint, m->peer_addr);
        ps_log_info("%s ring endpoint %s", ps_node_tag(n, tag, sizeof tag), n->endpoint);
    }
    n->num_params = mi->num_params;
    n->train_samples = mi->train_samples;
}

static int s_on_message(void *self, const ps_node_t *from, ps_msg_t *m)
{
    ps_start_t *st = self;
    ps_node_t *n = from ? ps_members_row(st->members, from->role, from->rank) : NULL;
    if (!n) {
        return 0;
    }
    if (m->hdr.type == PS_MSG_MODEL_INFO) {
        s_on_model_info(st, n, m);
    } else if (m->hdr.type == PS_MSG_PEER_READY) {
        s_on_peer_ready(st, n, m);
    } else {
        return 0;
    }
    if (st->facts->phase == PS_PHASE_WAITING) {
        s_maybe_start(st);
    }
    return 1;
}

/* " S1 W3 ..." (the nodes not registered yet, marked "(+N more)" past the
 * line's room) into buf. Returns how many are registered. */
static int s_missing(const ps_start_t *st, char *buf, size_t cap)
{
    char one[16];
    size_t at = 0;
    int more = 0, in = 0;
    buf[0] = '\0';
    for (int i = 0; i < ps_members_count(st->members); i++) {
        if (ps_members_at(st->members, i)->used) {
            in++;
            continue;
        }
        int is_server = i < st->cfg->servers;
        snprintf(one, sizeof one, " %s%d", is_server ? "S" : "W",
                 is_server ? i : i - st->cfg->servers);
        at += ps_log_list_add(buf, cap, at, one, &more);
    }
    ps_log_list_end(buf, cap, at, more);
    return in;
}

/* WAITING: the job fails when not every node registered within --wait, and
 * says every few seconds which are missing. */
static void s_on_tick(void *self, double now)
{
    ps_start_t *st = self;
    if (st->facts->phase != PS_PHASE_WAITING) {
        return;
    }
    if (!st->next_wait_log) { /* the first line a few seconds after the start */
        st->next_wait_log = st->facts->t_start + PS_LINK_WAIT_LOG_SECONDS;
    }
    char missing[160];
    const int in = s_missing(st, missing, sizeof missing);
    if (now - st->facts->t_start > st->cfg->wait) {
        ps_sched_fail(st->ops, 0, "not every node registered within %.0f s; missing:%s",
                      st->cfg->wait, missing[0] ? missing : " model sizes from workers");
    } else if (now >= st->next_wait_log) {
        ps_log_info("still waiting for%s (%d/%d registered, %.0f s of --wait %.0f)",
                    missing[0] ? missing : " model sizes from workers", in,
                    ps_members_count(st->members), now - st->facts->t_start, st->cfg->wait);
        st->next_wait_log = now + PS_LINK_WAIT_LOG_SECONDS;
    }
}

/* A fresh registration may complete the job: every message checks. */
static int s_on_register(void *self, ps_msg_t *m, const Shardps__Register *reg)
{
    ps_start_t *st = self;
    s_register(st, m, reg);
    if (st->facts->phase == PS_PHASE_WAITING) {
        s_maybe_start(st);
    }
    return 1;
}

const ps_sched_events_t ps_start_events = {
    .on_register = s_on_register,
    .on_message = s_on_message,
    .on_tick = s_on_tick,
};

void ps_start_saved_job(ps_start_t *st, const ps_view_t *v,
                        const Shardps__JoinSchedulerState *state, double now)
{
    st->view = *v;
    st->ops->phase_event(st->ops->core, PS_PHASE_EV_SAVED_JOB_BACK);
    st->facts->t_view = now - state->seconds;
    st->facts->membership_changes = state->membership_changes;
    /* the servers hold the tokens; the lost are checked: each a worker of the view */
    ps_members_saved_job(st->members, st->view.worker_tokens, state->lost, state->n_lost);
    memset(st->view.worker_tokens, 0, sizeof st->view.worker_tokens);
    ps_join_saved_job(st->join, state->workers_joined);
    if (ps_ckpt_saved_job(st->ckpt, &st->view, state->checkpoint) != 0) {
        ps_sched_fail(st->ops, 0, "out of memory");
    }
}

void ps_start_replace(ps_start_t *st, int r, const ps_node_t *spare, int64_t step,
                      const ps_checkpoint_part_t *parts, int nparts, const char *dir)
{
    ps_view_t *v = &st->view;
    /* the spare's connection is S<r> from now on */
    ps_members_swap_in(ps_members_at(st->members, r), spare);
    v->generation++;
    v->replaced = r + 1;
    v->takeover = 0;
    v->start_step = step;
    v->resume_step = 0; /* a resume's other worker count: the parts are of step now */
    v->resume_parts = nparts;
    memcpy(v->resume_files, parts, (size_t)nparts * sizeof *parts);
    snprintf(v->resume_dir, sizeof v->resume_dir, "%s", dir);
    v->servers[r].endpoint[0] = '\0';
    snprintf(v->servers[r].curve_key, sizeof v->servers[r].curve_key, "%s",
             spare->curve_key);
}

void ps_start_take_over(ps_start_t *st, int r, const ps_node_t *replica)
{
    ps_view_t *v = &st->view;
    ps_node_t *n = ps_members_at(st->members, r);
    ps_members_swap_in(n, replica);
    snprintf(n->endpoint, sizeof n->endpoint, "%s", replica->endpoint); /* bound already */
    n->ready = 1;
    v->generation++;
    v->replaced = r + 1;
    v->takeover = 1;
    snprintf(v->servers[r].endpoint, sizeof v->servers[r].endpoint, "%s",
             replica->endpoint);
    snprintf(v->servers[r].curve_key, sizeof v->servers[r].curve_key, "%s",
             replica->curve_key);
}
