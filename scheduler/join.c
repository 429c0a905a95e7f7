/* scheduler/join.c - workers joining a running job (scheduler/join.h). */
#include "scheduler/join.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

/* A worker rank's way into the running job. */
enum { S_NONE, S_REGISTERED, S_MODEL_REPORTED };

struct ps_join {
    const ps_sched_ops_t *ops;
    ps_agree_t *agree;
    unsigned char stage[PS_MAX_WORKERS]; /* [w]: S_*, of the joiner in row w */
    int joins;                           /* workers that joined while the job ran */
};

int ps_join_new(ps_join_t **out, const ps_sched_ops_t *ops, ps_agree_t *agree)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        return PS_ENOMEM;
    }
    (*out)->ops = ops;
    (*out)->agree = agree;
    return 0;
}

void ps_join_destroy(ps_join_t **j)
{
    free(*j);
    *j = NULL;
}

int ps_join_count(const ps_join_t *j)
{
    return j->joins;
}

void ps_join_saved_job(ps_join_t *j, int joined)
{
    j->joins = joined;
}

/* A rank a joining worker may take: lost, and its row free. */
static int s_free_rank(const ps_join_t *j, int rank)
{
    const ps_node_t *n = j->ops->node(j->ops->core, PS_ROLE_WORKER, rank);
    return n->lost && !n->used;
}

/* A worker's REGISTER while the job runs: takes a lost rank, or is refused
 * with the reason. */
static int s_on_register(void *self, ps_msg_t *m, const Shardps__Register *reg)
{
    ps_join_t *j = self;
    const ps_sched_ops_t *ops = j->ops;
    if (ps_sched_phase(ops) != PS_PHASE_RUNNING || reg->role != PS_ROLE_WORKER ||
        ops->node_of(ops->core, &m->route)) {
        return 0;
    }
    const int M = ops->cfg->workers;
    int rank = reg->rank;
    if (!ps_job_is_stepped(&ops->cfg->job)) {
        ps_sched_refuse(ops, m, PS_ESTATE,
                        "the job has started; a worker joins a running job only in "
                        "sync, ssp and sync:K/N modes");
        return 1;
    }
    if (rank < -1 || rank >= M) {
        ps_sched_refuse(ops, m, PS_EINVAL,
                        "rank %d is out of range: -1 (any) or 0 to %d (the job has %d "
                        "workers)", rank, M - 1, M);
        return 1;
    }
    for (int w = 0; rank < 0 && w < M; w++) {
        rank = s_free_rank(j, w) ? w : -1;
    }
    if (rank < 0 || !s_free_rank(j, rank)) {
        ps_sched_refuse(ops, m, PS_ESTATE,
                        "the job is running and %s: a worker joins in place of a lost one",
                        rank < 0 ? "no worker is lost" : "that worker is not lost");
        return 1;
    }
    /* not counted live before it joins */
    if (ops->admit(ops->core, m, reg, rank, 1) != 0) {
        ps_sched_refuse(ops, m, PS_EIO, "the scheduler cannot draw a token");
        return 1;
    }
    const ps_node_t *n = ops->node(ops->core, PS_ROLE_WORKER, rank);
    j->stage[rank] = S_REGISTERED;
    ops->send_ack(ops->core, n);
    ps_log_info("W%d (pid %u) registered to join the running job", rank, n->pid);
    return 1;
}

/* Tells a worker that cannot join why, and forgets it. status 0: nothing
 * is wrong with it, the job ends without it (a clean SHUTDOWN: it exits 0). */
static void s_refuse(ps_join_t *j, const ps_node_t *n, int status, const char *reason)
{
    ps_log_warn("W%d (pid %u) does not join: %s", n->rank, n->pid, reason);
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.status = status;
    sd.reason = (char *)reason;
    j->ops->send(j->ops->core, &n->route, PS_MSG_SHUTDOWN, &sd.base);
    j->stage[n->rank] = S_NONE;
    j->ops->forget(j->ops->core, n);
}

/* Row n's worker is on its way in. */
static int s_joining(const ps_join_t *j, const ps_node_t *n)
{
    return n && n->role == PS_ROLE_WORKER && n->rank >= 0 && n->rank < PS_MAX_WORKERS &&
           j->stage[n->rank] != S_NONE;
}

/* A joining worker's MODEL_INFO: it may join once its model is the job's. */
static int s_on_message(void *self, const ps_node_t *n, ps_msg_t *m)
{
    ps_join_t *j = self;
    if (m->hdr.type != PS_MSG_MODEL_INFO || !s_joining(j, n)) {
        return 0;
    }
    const Shardps__ModelInfo *mi = ps_msg_unpack_body(m, &shardps__model_info__descriptor);
    if (j->stage[n->rank] != S_REGISTERED || !mi ||
        mi->num_params != j->ops->view(j->ops->core)->num_params) {
        s_refuse(j, n, PS_ESTATE, "its model is not the job's");
        return 1;
    }
    j->ops->model(j->ops->core, n, mi->num_params, mi->train_samples);
    j->stage[n->rank] = S_MODEL_REPORTED;
    return 1;
}

/* A joining worker fell silent (or its connection closed) before it joined:
 * it is dropped, the job goes on. */
static int s_on_lost(void *self, const ps_node_t *n, const ps_loss_t *loss)
{
    ps_join_t *j = self;
    (void)loss;
    if (!s_joining(j, n)) {
        return 0;
    }
    ps_log_warn("W%d (pid %u) fell silent before it joined; the job goes on without it",
                n->rank, n->pid);
    j->stage[n->rank] = S_NONE;
    j->ops->forget(j->ops->core, n);
    return 1;
}

/* The joining worker's view: the job's, starting at step J. */
static int s_send_view(const ps_join_t *j, const ps_node_t *n, int64_t step)
{
    ps_view_t *v = malloc(sizeof *v);
    if (!v) {
        return PS_ENOMEM;
    }
    *v = *j->ops->view(j->ops->core);
    v->start_step = step;
    v->joining = 1;
    v->resume_parts = 0;
    v->resume_step = 0;
    v->resume_dir[0] = '\0';
    const int rc = j->ops->send_view(j->ops->core, n, PS_MSG_VIEW, v);
    free(v);
    return rc;
}

/* Every server answered the joiner's agreement: it is live from J on. */
static void s_commit(ps_join_t *j, int64_t J)
{
    const ps_sched_ops_t *ops = j->ops;
    const ps_node_t *n = ops->node(ops->core, PS_ROLE_WORKER, ps_agree_worker(j->agree));
    if (!(n->used && j->stage[n->rank] == S_MODEL_REPORTED)) {
        n = NULL; /* it fell silent meanwhile */
    }
    if (n && J >= ops->view(ops->core)->total_steps) {
        s_refuse(j, n, 0, "the job is at its last step");
        n = NULL;
    }
    ps_agree_commit(j->agree, J, n ? n->rank : -1, n ? n->token : 0);
    if (!n) {
        return;
    }
    if (s_send_view(j, n, J) != 0) {
        s_refuse(j, n, PS_ESTATE, "cannot encode its view");
        return;
    }
    j->stage[n->rank] = S_NONE;
    j->joins++;
    const int live = ops->joined(ops->core, n);
    ps_log_warn("membership: W%d (pid %u) joins at step %lld; going on with %d of %d workers",
                n->rank, n->pid, (long long)J, live, ops->cfg->workers);
}

/* RUNNING: a joiner whose model is in starts an agreement when none runs;
 * its agreement commits once every server answered. */
static void s_on_tick(void *self, double now)
{
    ps_join_t *j = self;
    int64_t J;
    (void)now;
    if (ps_sched_phase(j->ops) != PS_PHASE_RUNNING) {
        return;
    }
    if (ps_agree_active(j->agree)) {
        if (ps_agree_worker(j->agree) >= 0 && ps_agree_ready(j->agree, &J)) {
            s_commit(j, J);
        }
        return;
    }
    for (int w = 0; w < j->ops->cfg->workers; w++) {
        const ps_node_t *n = j->ops->node(j->ops->core, PS_ROLE_WORKER, w);
        if (n->used && j->stage[w] == S_MODEL_REPORTED) {
            ps_agree_start(j->agree, w, n->token, 0);
            return;
        }
    }
}

const ps_sched_events_t ps_join_events = {
    .on_register = s_on_register,
    .on_message = s_on_message,
    .on_lost = s_on_lost,
    .on_tick = s_on_tick,
};

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
