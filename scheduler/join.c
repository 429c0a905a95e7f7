/*
 * scheduler/join.c - workers joining a running job, and timed checkpoints,
 * each at a step agreed with every server (scheduler/join.h).
 */
#include "scheduler/join.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "scheduler/agree.h"

static ps_node_t *s_worker(ps_scheduler_t *s, int rank)
{
    return &s->nodes[s->cfg->servers + rank];
}

/* A rank a joining worker may take: lost, and its row free. */
static int s_free_rank(const ps_scheduler_t *s, int rank)
{
    const ps_node_t *n = &s->nodes[s->cfg->servers + rank];
    return n->lost && !n->used;
}

void ps_join_register(ps_scheduler_t *s, const ps_msg_t *m, const ps_register_t *reg)
{
    const int M = s->cfg->workers;
    int rank = reg->rank;
    if (!ps_job_is_stepped(&s->cfg->job)) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "the job has started; a worker joins a running job only in "
                           "sync, ssp and sync:K/N modes");
        return;
    }
    if (rank < -1 || rank >= M) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "rank %d is out of range: -1 (any) or 0 to %d (the job has %d "
                           "workers)", rank, M - 1, M);
        return;
    }
    for (int w = 0; rank < 0 && w < M; w++) {
        rank = s_free_rank(s, w) ? w : -1;
    }
    if (rank < 0 || !s_free_rank(s, rank)) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "the job is running and %s: a worker joins in place of a lost one",
                           rank < 0 ? "no worker is lost" : "that worker is not lost");
        return;
    }
    ps_node_t *n = s_worker(s, rank);
    memset(n, 0, sizeof *n);
    n->used = 1;
    n->lost = 1; /* not counted live before it joins */
    n->joining = 1;
    n->role = PS_ROLE_WORKER;
    n->rank = rank;
    n->route = m->route;
    n->pid = reg->pid;
    n->last_seen = ps_now();
    n->fd = m->peer_fd;
    snprintf(n->curve_key, sizeof n->curve_key, "%s", reg->curve_key);
    if (ps_scheduler_new_token(&n->token) != 0) {
        n->used = 0;
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EIO,
                           "the scheduler cannot draw a token");
        return;
    }
    ps_scheduler_send_ack(s, n);
    ps_log_info("W%d (pid %u) registered to join the running job", rank, n->pid);
}

/* Tells a worker that cannot join why, and forgets it. */
static void s_refuse(ps_scheduler_t *s, ps_node_t *n, const char *reason)
{
    uint8_t *body;
    size_t len;
    ps_log_warn("W%d (pid %u) does not join: %s", n->rank, n->pid, reason);
    if (ps_codec_pack_shutdown(PS_ESTATE, reason, &body, &len) == 0) {
        ps_msg_send_ctrl(s->router, &n->route, PS_MSG_SHUTDOWN, PS_ROLE_SCHEDULER, 0, body,
                         len);
        free(body);
    }
    n->used = 0;
    n->joining = 0;
}

void ps_join_model_info(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    ps_model_info_t mi;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (n->joining != 1 || !p || ps_codec_unpack_model_info(p, len, &mi) != 0 ||
        mi.num_params != s->view->num_params) {
        s_refuse(s, n, "its model is not the job's");
        return;
    }
    n->num_params = mi.num_params;
    n->train_samples = mi.train_samples;
    n->joining = 2;
}

void ps_join_drop(ps_scheduler_t *s, ps_node_t *n)
{
    (void)s;
    ps_log_warn("W%d (pid %u) fell silent before it joined; the job goes on without it",
                n->rank, n->pid);
    n->used = 0;
    n->joining = 0;
}

/* A membership line of ps_join_leave_line, with its step (step < 0: none). */
static void s_leave_log(const char *head, const char *tail, int64_t step)
{
    char at[48] = "";
    if (step >= 0) {
        snprintf(at, sizeof at, " at step %lld", (long long)step);
    }
    ps_log_warn("%s%s%s", head, at, tail);
}

void ps_join_leave_line(ps_scheduler_t *s, const char *head, const char *tail)
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

void ps_join_leave_flush(ps_scheduler_t *s)
{
    for (int i = 0; i < s->nleaves; i++) {
        s_leave_log(s->leaves[i].head, s->leaves[i].tail, -1);
    }
    s->nleaves = 0;
}

void ps_join_answer(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    ps_join_step_t js;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (p && n->role == PS_ROLE_SERVER && ps_codec_unpack_join_step(p, len, &js) == 0 &&
        js.members) {
        /* server 0 answers each MSG_MEMBERS, in order (a promoted spare's,
         * sent with its view, has no line waiting) */
        if (n->rank == 0 && s->nleaves > 0) {
            s_leave_log(s->leaves[0].head, s->leaves[0].tail, js.step);
            s->nleaves--;
            memmove(&s->leaves[0], &s->leaves[1], (size_t)s->nleaves * sizeof s->leaves[0]);
        }
        return;
    }
    if (m->hdr.generation != s->view->generation) {
        return; /* an answer to an agreement a failover abandoned */
    }
    if (n->role != PS_ROLE_SERVER || !p || ps_codec_unpack_join_step(p, len, &js) != 0 ||
        js.members || ps_agree_answer(s->agree, n->rank, js.step) != 0) {
        ps_log_warn("dropped an unexpected join-step message from S%d", n->rank);
    }
}

/* The joining worker's view: the job's, starting at step J. */
static int s_send_view(ps_scheduler_t *s, ps_node_t *n, int64_t step)
{
    ps_view_t *v = malloc(sizeof *v);
    uint8_t *body = NULL;
    size_t len;
    int rc = v ? 0 : PS_ENOMEM;
    if (rc == 0) {
        *v = *s->view;
        v->start_step = step;
        v->joining = 1;
        v->resume_parts = 0;
        v->resume_step = 0;
        v->resume_dir[0] = '\0';
        rc = ps_codec_pack_view(v, &body, &len);
    }
    if (rc == 0) {
        rc = ps_msg_send_ctrl(s->router, &n->route, PS_MSG_VIEW, PS_ROLE_SCHEDULER, 0, body,
                              len);
    }
    free(body);
    free(v);
    return rc;
}

/* Every server answered: J = max(V) + 1. */
static void s_commit(ps_scheduler_t *s, int64_t J)
{
    const int worker = ps_agree_worker(s->agree);
    ps_node_t *n = worker >= 0 ? s_worker(s, worker) : NULL;
    if (n && !(n->used && n->joining == 2)) {
        n = NULL; /* it fell silent meanwhile */
    }
    if (n && J >= s->view->total_steps) {
        s_refuse(s, n, "the job is at its last step");
        n = NULL;
    }
    const int checkpoint = ps_agree_checkpoint(s->agree);
    ps_agree_commit(s->agree, s, J, n ? n->rank : -1, n ? n->token : 0);
    if (checkpoint) {
        ps_log_debug("timed checkpoint agreed at step %lld", (long long)J);
    }
    if (!n) {
        return;
    }
    if (s_send_view(s, n, J) != 0) {
        s_refuse(s, n, "cannot encode its view");
        return;
    }
    n->joining = 0;
    n->lost = 0;
    n->last_seen = ps_now();
    s->membership_changes++;
    s->joins++;
    int live = 0;
    for (int w = 0; w < s->cfg->workers; w++) {
        live += !s_worker(s, w)->lost;
    }
    ps_log_warn("membership: W%d (pid %u) joins at step %lld; going on with %d of %d workers",
                n->rank, n->pid, (long long)J, live, s->cfg->workers);
}

void ps_join_tick(ps_scheduler_t *s)
{
    int64_t J;
    if (ps_agree_active(s->agree)) {
        if (ps_agree_ready(s->agree, &J)) {
            s_commit(s, J);
        }
        return;
    }
    for (int w = 0; w < s->cfg->workers; w++) {
        if (s_worker(s, w)->used && s_worker(s, w)->joining == 2) {
            ps_agree_start(s->agree, s, w, s_worker(s, w)->token, 0);
            return;
        }
    }
    const double now = ps_now();
    if (s->cfg->checkpoint_seconds > 0 && now - s->last_checkpoint >= s->cfg->checkpoint_seconds) {
        s->last_checkpoint = now;
        ps_agree_start(s->agree, s, -1, 0, 1);
    }
}

/* ---- the scheduler's own state, and bringing a job back ------------------ */

static const char s_magic[] = "shardps-scheduler-state-1\n";

static void s_state_path(const char *dir, char *path, size_t cap)
{
    snprintf(path, cap, "%s/scheduler.state", dir);
}

void ps_join_state_write(ps_scheduler_t *s)
{
    const char *dir = s->cfg->checkpoint_dir;
    if (!dir || !s->view->num_params) {
        return;
    }
    ps_sched_state_t st = {.run_id = s->run_id,
                           .membership_changes = s->membership_changes,
                           .workers_joined = s->joins,
                           .restarts = s->restarts,
                           .checkpoint = s->checkpoint,
                           .seconds = ps_now() - s->t_view,
                           .finished = s->phase == PS_PHASE_FINISHED || s->phase == PS_PHASE_FAILED};
    for (int w = 0; w < s->cfg->workers; w++) {
        st.lost[w] = (unsigned char)s_worker(s, w)->lost;
    }
    uint8_t *body;
    size_t len;
    char path[4096], why[256] = "out of memory";
    /* The workers' tokens go with it (the view's servers' copy): a restarted
     * scheduler gives them to a spare that replaces a server. */
    for (int w = 0; w < s->cfg->workers; w++) {
        s->view->worker_tokens[w] = s_worker(s, w)->token;
    }
    int rc = ps_codec_pack_sched_state(&st, s->view, &body, &len);
    memset(s->view->worker_tokens, 0, sizeof s->view->worker_tokens);
    if (rc != 0) {
        ps_log_warn("cannot encode the scheduler's state");
        return;
    }
    const uint32_t crc = (uint32_t)crc32(0L, body, (uInt)len);
    const uint8_t le[4] = {crc & 0xff, (crc >> 8) & 0xff, (crc >> 16) & 0xff, crc >> 24};
    mkdir(dir, 0777); /* servers make it too, maybe later */
    s_state_path(dir, path, sizeof path);
    if (ps_file_write_atomic(path, (const void *[]){s_magic, le, body},
                             (size_t[]){sizeof s_magic - 1, 4, len}, 3, why, sizeof why) != 0) {
        ps_log_warn("the scheduler's state is not saved: %s", why);
    }
    free(body);
}

/* Reads path into a malloc'd buffer (caller frees) of *len bytes, or NULL. */
static uint8_t *s_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    uint8_t *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && n < (1L << 24) && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    *len = (size_t)n;
    fclose(f);
    return buf;
}

/* The saved job is the one these flags describe. */
static int s_same_job(const ps_scheduler_t *s, const ps_view_t *v, char *why, size_t cap)
{
    const ps_scheduler_config_t *c = s->cfg;
    const ps_job_t *a = &c->job, *b = &v->job;
    if (v->num_servers != c->servers || v->num_workers != c->workers) {
        snprintf(why, cap, "its job has %d servers and %d workers, the flags %d and %d",
                 v->num_servers, v->num_workers, c->servers, c->workers);
    } else if (strcmp(a->model, b->model) || a->mode != b->mode || a->batch != b->batch ||
               a->epochs != b->epochs || a->seed != b->seed ||
               strcmp(a->optimizer, b->optimizer)) {
        snprintf(why, cap, "its job's model, mode, batch, epochs, seed or optimizer differ "
                 "from the flags'");
    } else {
        return 1;
    }
    return 0;
}

void ps_join_state_load(ps_scheduler_t *s)
{
    char path[4096], why[200] = "";
    size_t len = 0;
    s_state_path(s->cfg->resume, path, sizeof path);
    uint8_t *buf = s_read(path, &len);
    ps_view_t *v = calloc(1, sizeof *v);
    ps_sched_state_t st;
    const size_t head = sizeof s_magic - 1 + 4;
    if (!buf) {
        ps_log_debug("no scheduler state in %s", s->cfg->resume);
    } else if (!v) {
        snprintf(why, sizeof why, "out of memory");
    } else if (len < head || memcmp(buf, s_magic, sizeof s_magic - 1) ||
               (uint32_t)crc32(0L, buf + head, (uInt)(len - head)) !=
                   ((uint32_t)buf[head - 4] | (uint32_t)buf[head - 3] << 8 |
                    (uint32_t)buf[head - 2] << 16 | (uint32_t)buf[head - 1] << 24) ||
               ps_codec_unpack_sched_state(buf + head, len - head, &st, v) != 0) {
        snprintf(why, sizeof why, "it is corrupt");
    } else if (st.finished) {
        ps_log_info("%s: its job ended; nodes that register start from its newest "
                    "checkpoint", path);
    } else if (s_same_job(s, v, why, sizeof why)) {
        s->saved = v;
        s->saved_state = st;
        s->run_id = st.run_id; /* the job keeps its id */
        v = NULL;
        ps_log_info("%s: job %016llx ran with checkpoint step %lld complete; its nodes may "
                    "register again (else new ones start from that checkpoint)", path,
                    (unsigned long long)st.run_id, (long long)st.checkpoint);
    }
    if (why[0]) {
        ps_log_warn("%s: %s; its nodes cannot register again", path, why);
    }
    free(v);
    free(buf);
}

/* The first node of the saved job registered again: the job is the saved one. */
static void s_recover_begin(ps_scheduler_t *s)
{
    const ps_sched_state_t *st = &s->saved_state;
    *s->view = *s->saved;
    ps_scheduler_phase_event(s, PS_PHASE_EV_SAVED_JOB_BACK);
    s->t_recover = ps_now();
    s->t_view = s->t_recover - st->seconds;
    s->membership_changes = st->membership_changes;
    s->joins = st->workers_joined;
    s->restarts = st->restarts + 1;
    s->checkpoint = st->checkpoint;
    int live = 0;
    for (int w = 0; w < s->cfg->workers; w++) {
        s_worker(s, w)->lost = st->lost[w];
        s_worker(s, w)->token = s->view->worker_tokens[w]; /* the servers hold these */
        live += !st->lost[w];
    }
    memset(s->view->worker_tokens, 0, sizeof s->view->worker_tokens);
    if (s->view->checkpoint_dir[0] && !s->manifest &&
        ps_manifest_new(&s->manifest, s->view) != 0) {
        ps_scheduler_fail(s, "out of memory");
        return;
    }
    ps_log_warn("bringing job %016llx back (scheduler restart %d): waiting up to %.0f s for "
                "%d servers and %d workers to register again", (unsigned long long)s->run_id,
                s->restarts, s->cfg->wait, s->cfg->servers, live);
}


void ps_join_rejoin(ps_scheduler_t *s, const ps_msg_t *m, const ps_register_t *reg)
{
    const int is_server = reg->role == PS_ROLE_SERVER;
    const int count = is_server ? s->cfg->servers : s->cfg->workers;
    const char *tag = ps_codec_role_tag(reg->role);
    if (reg->run_id != s->run_id) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "this scheduler runs another job");
        return;
    }
    if (reg->rank < 0 || reg->rank >= count) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "%s%d is not a node of this job", tag, reg->rank);
        return;
    }
    ps_node_t *n = &s->nodes[(is_server ? 0 : s->cfg->servers) + reg->rank];
    if (n->used && n->route.len == m->route.len &&
        !memcmp(n->route.id, m->route.id, m->route.len)) {
        n->last_seen = ps_now();
        ps_scheduler_send_ack(s, n); /* its first answer was lost, or it lost us for a while */
        return;
    }
    int fresh = 0;
    for (int i = 0; i < s->nnodes; i++) {
        fresh |= s->nodes[i].used;
    }
    if (s->phase == PS_PHASE_WAITING && s->saved && !fresh) {
        s_recover_begin(s);
    }
    const char *no = s->phase != PS_PHASE_RECOVERING ? "the scheduler is not bringing its job back"
                     : !is_server && n->lost   ? "it was left out of the job"
                     : n->used && n->pid != reg->pid ? "that node is registered"
                                                     : NULL;
    if (no) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "%s%d cannot register again: %s", tag, reg->rank, no);
        return;
    }
    n->used = 1;
    n->role = reg->role;
    n->rank = reg->rank;
    n->route = m->route; /* a new connection of the same process replaces the old */
    n->fd = m->peer_fd;  /* its closing is its loss (scheduler.c:s_on_disconnect) */
    n->pid = reg->pid;
    n->last_seen = ps_now();
    if (is_server) {
        snprintf(n->endpoint, sizeof n->endpoint, "%s", s->view->servers[reg->rank].endpoint);
    }
    ps_scheduler_send_ack(s, n);
    ps_log_info("%s%d (pid %u) registered again", tag, reg->rank, n->pid);
}

void ps_join_recover_tick(ps_scheduler_t *s)
{
    const double now = ps_now();
    const int timed_out = now - s->t_recover > s->cfg->wait;
    for (int i = 0; i < s->nnodes; i++) {
        ps_node_t *n = &s->nodes[i];
        if (n->used || n->lost) {
            continue;
        }
        if (!timed_out) {
            return;
        }
        if (i < s->cfg->servers || !ps_scheduler_leave(s, n, now - s->t_recover)) {
            char why[160];
            snprintf(why, sizeof why, "%s%d did not register again within %.0f s (--wait)",
                     i < s->cfg->servers ? "S" : "W",
                     i < s->cfg->servers ? i : i - s->cfg->servers, s->cfg->wait);
            ps_scheduler_fail(s, why);
            return;
        }
    }
    /* Every node is back: a step agreement the old scheduler left open ends. */
    ps_agree_release(s);
    ps_scheduler_phase_event(s, PS_PHASE_EV_ALL_BACK);
    s->last_checkpoint = now;
    ps_log_warn("job %016llx is back: every node registered again within %.1f s",
                (unsigned long long)s->run_id, now - s->t_recover);
    ps_join_state_write(s);
}

int64_t ps_join_map_step(int64_t step, int old_workers, int new_workers, int batch,
                         uint64_t samples)
{
    const int64_t spe_old = (int64_t)(samples / ((uint64_t)old_workers * (uint64_t)batch));
    const int64_t spe_new = (int64_t)(samples / ((uint64_t)new_workers * (uint64_t)batch));
    if (spe_old < 1 || spe_new < 1) {
        return step;
    }
    const int64_t epoch = step / spe_old, k = step % spe_old;
    const int64_t k_new = (k * old_workers + new_workers - 1) / new_workers;
    return k_new >= spe_new ? (epoch + 1) * spe_new : epoch * spe_new + k_new;
}
