/*
 * scheduler/join.c - workers joining a running job, and timed checkpoints,
 * each at a step agreed with every server (scheduler/join.h).
 */
#include "scheduler/join.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

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
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_register_ack(rank, &s->cfg->job, s->job_id, &body, &len) == 0) {
        ps_msg_send_ctrl(s->router, &n->route, PS_MSG_REGISTER_ACK, PS_ROLE_SCHEDULER, 0, body,
                         len);
        free(body);
    }
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

void ps_join_answer(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    ps_join_step_t js;
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    if (n->role != PS_ROLE_SERVER || !s->agree.active || s->agree.answered[n->rank] || !p ||
        ps_codec_unpack_join_step(p, len, &js) != 0) {
        ps_log_warn("dropped an unexpected join-step message from S%d", n->rank);
        return;
    }
    s->agree.answered[n->rank] = 1;
    s->agree.answers++;
    s->agree.max_version = js.step > s->agree.max_version ? js.step : s->agree.max_version;
}

static void s_start(ps_scheduler_t *s, int worker, int checkpoint)
{
    memset(&s->agree, 0, sizeof s->agree);
    s->agree.active = 1;
    s->agree.worker = worker;
    s->agree.checkpoint = checkpoint;
    s->agree.max_version = -1;
    for (int i = 0; i < s->cfg->servers; i++) {
        ps_msg_send_ctrl(s->router, &s->nodes[i].route, PS_MSG_JOIN_PREPARE, PS_ROLE_SCHEDULER,
                         0, NULL, 0);
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
static void s_commit(ps_scheduler_t *s)
{
    const int64_t J = s->agree.max_version + 1;
    ps_node_t *n = s->agree.worker >= 0 ? s_worker(s, s->agree.worker) : NULL;
    if (n && !(n->used && n->joining == 2)) {
        n = NULL; /* it fell silent meanwhile */
    }
    if (n && J >= s->view->total_steps) {
        s_refuse(s, n, "the job is at its last step");
        n = NULL;
    }
    ps_join_step_t js = {.step = J, .worker = n ? n->rank : -1,
                         .checkpoint = s->agree.checkpoint};
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_join_step(&js, &body, &len) == 0) {
        for (int i = 0; i < s->cfg->servers; i++) {
            ps_msg_send_ctrl(s->router, &s->nodes[i].route, PS_MSG_JOIN_STEP, PS_ROLE_SCHEDULER,
                             0, body, len);
        }
        free(body);
    }
    s->agree.active = 0;
    if (js.checkpoint) {
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
    if (s->agree.active) {
        if (s->agree.answers == s->cfg->servers) {
            s_commit(s);
        }
        return;
    }
    for (int w = 0; w < s->cfg->workers; w++) {
        if (s_worker(s, w)->used && s_worker(s, w)->joining == 2) {
            s_start(s, w, 0);
            return;
        }
    }
    const double now = ps_now();
    if (s->cfg->checkpoint_seconds > 0 && now - s->last_checkpoint >= s->cfg->checkpoint_seconds) {
        s->last_checkpoint = now;
        s_start(s, -1, 1);
    }
}
