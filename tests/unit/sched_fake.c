/* tests/unit/sched_fake.c - a scheduler core in memory (sched_fake.h). */
#include "tests/unit/sched_fake.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"

/* ---- rows ---------------------------------------------------------------- */

ps_node_t *ps_fake_row(ps_fake_t *f, ps_role_t role, int rank)
{
    const int count = role == PS_ROLE_SERVER ? f->cfg.servers : f->cfg.workers;
    if (rank < 0 || rank >= count) {
        return NULL;
    }
    return &f->nodes[(role == PS_ROLE_SERVER ? 0 : f->cfg.servers) + rank];
}

static ps_node_t *s_row(ps_fake_t *f, const ps_node_t *n)
{
    return ps_fake_row(f, n->role, n->rank);
}

ps_route_t ps_fake_route(const char *tag)
{
    ps_route_t r = {.len = strlen(tag)};
    memcpy(r.id, tag, r.len);
    return r;
}

/* The tag of the row on route, or "?". */
static void s_tag_of(const ps_fake_t *f, const ps_route_t *to, char *tag, size_t cap)
{
    snprintf(tag, cap, "?");
    for (int i = 0; i < f->nnodes; i++) {
        const ps_node_t *n = &f->nodes[i];
        if (n->route.len == to->len && !memcmp(n->route.id, to->id, to->len)) {
            ps_node_tag(n, tag, cap);
            return;
        }
    }
    if (to->len < cap) { /* a spare or a stranger: its route as text */
        memcpy(tag, to->id, to->len);
        tag[to->len] = '\0';
    }
}

static int s_live(void *core)
{
    ps_fake_t *f = core;
    int live = 0;
    for (int w = 0; w < f->cfg.workers; w++) {
        live += !ps_fake_row(f, PS_ROLE_WORKER, w)->lost;
    }
    return live;
}

/* ---- the ops: reading ---------------------------------------------------- */

static const ps_sched_facts_t *s_facts(void *core)
{
    return &((ps_fake_t *)core)->facts;
}

static const ps_view_t *s_view(void *core)
{
    return &((ps_fake_t *)core)->view;
}

static const ps_node_t *s_node(void *core, ps_role_t role, int rank)
{
    return ps_fake_row(core, role, rank);
}

static const ps_node_t *s_node_of(void *core, const ps_route_t *r)
{
    ps_fake_t *f = core;
    for (int i = 0; i < f->nnodes; i++) {
        const ps_node_t *n = &f->nodes[i];
        if (n->used && n->route.len == r->len && !memcmp(n->route.id, r->id, r->len)) {
            return n;
        }
    }
    return NULL;
}

static void s_live_set(void *core, Shardps__Members *m, int32_t *live)
{
    ps_fake_t *f = core;
    m->num_workers = f->cfg.workers;
    m->live = live;
    m->n_live = 0;
    for (int w = 0; w < f->cfg.workers; w++) {
        if (!ps_fake_row(f, PS_ROLE_WORKER, w)->lost) {
            live[m->n_live++] = w;
        }
    }
}

/* ---- the ops: sending ---------------------------------------------------- */

/* A new record of a message of type to route, body packed. */
static ps_fake_sent_t *s_record(ps_fake_t *f, const ps_route_t *to, ps_msg_type_t type,
                                const ProtobufCMessage *body)
{
    if (f->nsent == PS_FAKE_MAX_SENT) {
        return NULL;
    }
    ps_fake_sent_t *s = &f->sent[f->nsent++];
    memset(s, 0, sizeof *s);
    s->type = type;
    s->to = *to;
    s_tag_of(f, to, s->tag, sizeof s->tag);
    if (body && protobuf_c_message_get_packed_size(body) <= sizeof s->body) {
        s->len = protobuf_c_message_pack(body, s->body);
    }
    return s;
}

static void s_send(void *core, const ps_route_t *to, ps_msg_type_t type,
                   const ProtobufCMessage *body)
{
    s_record(core, to, type, body);
}

static void s_reply_error(void *core, const ps_msg_t *m, int status, const char *why)
{
    ps_fake_sent_t *s = s_record(core, &m->route, PS_MSG_ERROR, NULL);
    if (s) {
        s->status = status;
        s->request_id = m->hdr.request_id;
        snprintf(s->why, sizeof s->why, "%s", why);
    }
}

static void s_send_servers(void *core, ps_msg_type_t type, const ProtobufCMessage *body)
{
    ps_fake_t *f = core;
    for (int r = 0; r < f->cfg.servers; r++) {
        s_record(f, &ps_fake_row(f, PS_ROLE_SERVER, r)->route, type, body);
    }
}

static void s_send_all(void *core, ps_msg_type_t type, const ProtobufCMessage *body)
{
    ps_fake_t *f = core;
    for (int i = 0; i < f->nnodes; i++) {
        if (f->nodes[i].used) {
            s_record(f, &f->nodes[i].route, type, body);
        }
    }
}

static int s_send_view(void *core, const ps_node_t *n, ps_msg_type_t type, const ps_view_t *v)
{
    ps_fake_t *f = core;
    ps_view_pb_t *pb = malloc(sizeof *pb);
    int rc = pb ? ps_codec_view_to_pb(v ? v : &f->view, pb) : PS_ENOMEM;
    if (rc == 0) {
        s_record(f, &n->route, type, &pb->pb.base);
    }
    free(pb);
    return rc;
}

static void s_send_ack(void *core, const ps_node_t *n)
{
    Shardps__RegisterAck ack = SHARDPS__REGISTER_ACK__INIT;
    ack.rank = n->rank;
    ack.token = n->token;
    ack.run_id = ((ps_fake_t *)core)->facts.run_id;
    s_record(core, &n->route, PS_MSG_REGISTER_ACK, &ack.base);
}

static int s_answer(void *core, const ps_route_t *to, ps_msg_type_t type, uint64_t request_id,
                    const ProtobufCMessage *body)
{
    ps_fake_sent_t *s = s_record(core, to, type, body);
    if (s) {
        s->request_id = request_id;
    }
    return s ? 0 : PS_ENOMEM;
}

/* ---- the ops: the job ---------------------------------------------------- */

static void s_fail(void *core, int usage, const char *why)
{
    ps_fake_t *f = core;
    f->failed = 1;
    f->fail_usage = usage;
    snprintf(f->failure, sizeof f->failure, "%s", why);
    snprintf(f->facts.failure, sizeof f->facts.failure, "%s", why);
    f->facts.phase = PS_PHASE_FAILED;
}

static void s_phase_event(void *core, ps_phase_event_t ev)
{
    ps_fake_t *f = core;
    ps_phase_t to;
    if (ps_phase_next(f->facts.phase, ev, &to) == 0) {
        f->facts.phase = to;
    }
}

static void s_save_state(void *core)
{
    ((ps_fake_t *)core)->saves++;
}

static int s_new_token(void *core, uint64_t *token)
{
    *token = ((ps_fake_t *)core)->next_token++;
    return 0;
}

/* ---- the ops: rows ------------------------------------------------------- */

static int s_admit(void *core, const ps_msg_t *m, const Shardps__Register *reg, int rank,
                   int lost)
{
    ps_fake_t *f = core;
    ps_node_t *n = ps_fake_row(f, reg->role, rank);
    memset(n, 0, sizeof *n);
    n->used = 1;
    n->lost = lost;
    n->role = reg->role;
    n->rank = rank;
    n->route = m->route;
    n->pid = reg->pid;
    n->token = f->next_token++;
    n->last_seen = ps_now();
    n->fd = m->peer_fd;
    return 0;
}

static void s_readmit(void *core, const ps_msg_t *m, const Shardps__Register *reg)
{
    ps_node_t *n = ps_fake_row(core, reg->role, reg->rank);
    n->used = 1;
    n->route = m->route;
    n->fd = m->peer_fd;
    n->pid = reg->pid;
    n->last_seen = ps_now();
}

static void s_seen(void *core, const ps_node_t *n)
{
    s_row(core, n)->last_seen = ps_now();
}

static void s_forget(void *core, const ps_node_t *n)
{
    s_row(core, n)->used = 0;
}

static void s_model(void *core, const ps_node_t *n, uint64_t num_params, uint64_t samples)
{
    ps_node_t *row = s_row(core, n);
    row->num_params = num_params;
    row->train_samples = samples;
}

static int s_joined(void *core, const ps_node_t *n)
{
    ps_fake_t *f = core;
    s_row(f, n)->lost = 0;
    f->facts.membership_changes++;
    return s_live(f);
}

static int s_leave(void *core, const ps_node_t *n, const char *why)
{
    ps_fake_t *f = core;
    const int min = f->cfg.min_workers ? f->cfg.min_workers : f->cfg.workers;
    (void)why;
    if (n->role != PS_ROLE_WORKER || n->done || s_live(f) - 1 < min) {
        return 0;
    }
    ps_node_t *row = s_row(f, n);
    row->used = 0;
    row->lost = 1;
    f->facts.membership_changes++;
    return 1;
}

static void s_unreported(void *core, const ps_node_t *n)
{
    ps_node_t *row = s_row(core, n);
    row->used = 0;
    row->reported = 1;
}

static void s_rollback(void *core)
{
    ps_fake_t *f = core;
    f->rollbacks++;
    for (int w = 0; w < f->cfg.workers; w++) {
        ps_fake_row(f, PS_ROLE_WORKER, w)->done = 0;
    }
}

static void s_barrier_check(void *core)
{
    ((ps_fake_t *)core)->barrier_checks++;
}

static void s_fix_endpoint(void *core, ps_node_t *own, const char *announced, const char *peer)
{
    (void)core;
    (void)peer;
    snprintf(own->endpoint, sizeof own->endpoint, "%s", announced);
}

/* ---- the ops: the view --------------------------------------------------- */

static void s_saved_job(void *core, const ps_view_t *v, const Shardps__JoinSchedulerState *st,
                        double now)
{
    ps_fake_t *f = core;
    (void)now;
    f->view = *v;
    f->saved_jobs++;
    f->facts.membership_changes = st->membership_changes;
    s_phase_event(f, PS_PHASE_EV_SAVED_JOB_BACK);
    for (size_t i = 0; i < st->n_lost; i++) {
        ps_fake_row(f, PS_ROLE_WORKER, st->lost[i])->lost = 1;
    }
}

/* Row r takes spare's connection (as members.c's swap-in). */
static void s_swap_in(ps_fake_t *f, int r, const ps_node_t *spare)
{
    ps_node_t *n = ps_fake_row(f, PS_ROLE_SERVER, r);
    n->route = spare->route;
    n->pid = spare->pid;
    n->fd = spare->fd;
    snprintf(n->addr, sizeof n->addr, "%s", spare->addr);
    n->last_seen = ps_now();
    n->reported = 0;
    n->endpoint[0] = '\0';
    n->ready = 0;
    snprintf(n->curve_key, sizeof n->curve_key, "%s", spare->curve_key);
}

static void s_replace(void *core, int r, const ps_node_t *spare, int64_t step,
                      const ps_checkpoint_part_t *parts, int nparts, const char *dir)
{
    ps_fake_t *f = core;
    s_swap_in(f, r, spare);
    f->replaced = r + 1;
    f->view.generation++;
    f->view.replaced = r + 1;
    f->view.takeover = 0;
    f->view.start_step = step;
    f->view.resume_step = 0;
    f->view.resume_parts = nparts;
    memcpy(f->view.resume_files, parts, (size_t)nparts * sizeof *parts);
    snprintf(f->view.resume_dir, sizeof f->view.resume_dir, "%s", dir);
    f->view.servers[r].endpoint[0] = '\0';
    snprintf(f->view.servers[r].curve_key, sizeof f->view.servers[r].curve_key, "%s",
             spare->curve_key);
}

static void s_take_over(void *core, int r, const ps_node_t *replica)
{
    ps_fake_t *f = core;
    s_swap_in(f, r, replica);
    ps_node_t *n = ps_fake_row(f, PS_ROLE_SERVER, r);
    snprintf(n->endpoint, sizeof n->endpoint, "%s", replica->endpoint);
    n->ready = 1;
    f->taken_over = r + 1;
    f->view.generation++;
    f->view.replaced = r + 1;
    f->view.takeover = 1;
    snprintf(f->view.servers[r].endpoint, sizeof f->view.servers[r].endpoint, "%s",
             replica->endpoint);
    snprintf(f->view.servers[r].curve_key, sizeof f->view.servers[r].curve_key, "%s",
             replica->curve_key);
}

static void s_start_servers(void *core)
{
    ((ps_fake_t *)core)->servers_started++;
}

/* ---- setup --------------------------------------------------------------- */

void ps_fake_init(ps_fake_t *f, int servers, int workers)
{
    memset(f, 0, sizeof *f);
    f->sent = calloc(PS_FAKE_MAX_SENT, sizeof *f->sent);
    f->cfg.servers = servers;
    f->cfg.workers = workers;
    ps_job_defaults(&f->cfg.job);
    f->cfg.job.batch = 32;
    f->cfg.job.epochs = 1;
    f->cfg.peer_timeout = 5;
    f->cfg.wait = 10;
    f->nnodes = servers + workers;
    for (int i = 0; i < f->nnodes; i++) {
        f->nodes[i].role = i < servers ? PS_ROLE_SERVER : PS_ROLE_WORKER;
        f->nodes[i].rank = i < servers ? i : i - servers;
        f->nodes[i].fd = -1;
    }
    f->facts.phase = PS_PHASE_WAITING;
    f->facts.run_id = 0x5eed0001;
    f->next_token = 1000;
    f->ops = (ps_sched_ops_t){
        .core = f,
        .cfg = &f->cfg,
        .facts = s_facts,
        .view = s_view,
        .node = s_node,
        .node_of = s_node_of,
        .live = s_live,
        .live_set = s_live_set,
        .send = s_send,
        .reply_error = s_reply_error,
        .send_servers = s_send_servers,
        .send_all = s_send_all,
        .send_view = s_send_view,
        .send_ack = s_send_ack,
        .answer = s_answer,
        .abort_job = s_fail,
        .phase_event = s_phase_event,
        .save_state = s_save_state,
        .new_token = s_new_token,
        .admit = s_admit,
        .readmit = s_readmit,
        .seen = s_seen,
        .forget = s_forget,
        .model = s_model,
        .joined = s_joined,
        .leave = s_leave,
        .unreported = s_unreported,
        .rollback = s_rollback,
        .barrier_check = s_barrier_check,
        .fix_endpoint = s_fix_endpoint,
        .saved_job = s_saved_job,
        .replace = s_replace,
        .take_over = s_take_over,
        .start_servers = s_start_servers,
    };
}

void ps_fake_fini(ps_fake_t *f)
{
    for (int i = 0; i < f->nnodes; i++) {
        if (f->nodes[i].stats) {
            shardps__done__free_unpacked(f->nodes[i].stats, NULL);
        }
        if (f->nodes[i].report) {
            shardps__server_report__free_unpacked(f->nodes[i].report, NULL);
        }
    }
    free(f->sent);
    f->sent = NULL;
}

ps_node_t *ps_fake_register(ps_fake_t *f, ps_role_t role, int rank)
{
    ps_node_t *n = ps_fake_row(f, role, rank);
    char tag[16];
    n->used = 1;
    n->route = ps_fake_route(ps_node_tag(n, tag, sizeof tag));
    n->pid = 1000 + (uint32_t)(n - f->nodes);
    n->token = f->next_token++;
    n->last_seen = ps_now();
    return n;
}

void ps_fake_running(ps_fake_t *f)
{
    for (int i = 0; i < f->nnodes; i++) {
        ps_fake_register(f, f->nodes[i].role, f->nodes[i].rank);
        f->nodes[i].ready = f->nodes[i].role == PS_ROLE_SERVER;
    }
    ps_view_t *v = &f->view;
    v->num_params = 1000;
    v->num_servers = f->cfg.servers;
    v->num_workers = f->cfg.workers;
    v->job = f->cfg.job;
    v->steps_per_epoch = 100;
    v->total_steps = 100;
    for (int r = 0; r < f->cfg.servers; r++) {
        v->servers[r].rank = r;
        v->servers[r].begin = (uint64_t)r * 1000 / (uint64_t)f->cfg.servers;
        v->servers[r].end = (uint64_t)(r + 1) * 1000 / (uint64_t)f->cfg.servers;
        snprintf(v->servers[r].endpoint, sizeof v->servers[r].endpoint,
                 "tcp://127.0.0.1:%d", 7000 + r);
    }
    f->facts.phase = PS_PHASE_RUNNING;
}

/* ---- messages ------------------------------------------------------------ */

void ps_fake_msg(ps_msg_t *m, const ps_route_t *route, ps_role_t role, int sender,
                 ps_msg_type_t type, int64_t generation, const ProtobufCMessage *body)
{
    Shardps__Header h;
    ps_msg_header(&h, type, role, sender);
    h.generation = generation;
    ps_msg_make(m, route, &h, body);
}

void ps_fake_msg_from(ps_fake_t *f, ps_msg_t *m, const ps_node_t *n, ps_msg_type_t type,
                      const ProtobufCMessage *body)
{
    ps_fake_msg(m, &n->route, n->role, n->rank, type, f->view.generation, body);
}

static int s_matches(const ps_fake_sent_t *s, int type, const char *tag)
{
    return (type == PS_MSG_ANY || (int)s->type == type) && (!tag || !strcmp(s->tag, tag));
}

int ps_fake_count(const ps_fake_t *f, int type, const char *tag)
{
    int n = 0;
    for (int i = 0; i < f->nsent; i++) {
        n += s_matches(&f->sent[i], type, tag);
    }
    return n;
}

const ps_fake_sent_t *ps_fake_last(const ps_fake_t *f, int type, const char *tag)
{
    for (int i = f->nsent - 1; i >= 0; i--) {
        if (s_matches(&f->sent[i], type, tag)) {
            return &f->sent[i];
        }
    }
    return NULL;
}

void *ps_fake_unpack(const ps_fake_sent_t *s, const ProtobufCMessageDescriptor *d)
{
    return (void *)protobuf_c_message_unpack(d, NULL, s->len, s->body);
}

void ps_fake_clear(ps_fake_t *f)
{
    f->nsent = 0;
}

static int s_rm(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    return remove(path);
}

void ps_fake_rmtree(const char *dir)
{
    nftw(dir, s_rm, 8, FTW_DEPTH | FTW_PHYS);
}
