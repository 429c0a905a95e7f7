/* scheduler/agree.c - a step agreed with every server (scheduler/agree.h). */
#include "scheduler/agree.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

struct ps_agree {
    const ps_sched_ops_t *ops;
    int servers;         /* S: answers an agreement needs */
    int active;          /* MSG_JOIN_PREPARE sent, answers being collected */
    int worker;          /* the worker joining at the agreed step, or -1 */
    int checkpoint;      /* a timed checkpoint at the agreed step */
    int answers;         /* servers that answered */
    unsigned char answered[PS_MAX_SERVERS];
    int64_t max_version; /* the highest version answered */
};

int ps_agree_new(ps_agree_t **out, const ps_sched_ops_t *ops)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        return PS_ENOMEM;
    }
    (*out)->ops = ops;
    (*out)->servers = ops->cfg->servers;
    (*out)->worker = -1;
    return 0;
}

void ps_agree_destroy(ps_agree_t **a)
{
    free(*a);
    *a = NULL;
}

int ps_agree_active(const ps_agree_t *a)
{
    return a->active;
}

int ps_agree_worker(const ps_agree_t *a)
{
    return a->worker;
}

int ps_agree_checkpoint(const ps_agree_t *a)
{
    return a->checkpoint;
}

/* MSG_JOIN_PREPARE or MSG_JOIN_STEP to every server: from step on, worker
 * (-1: none, with its token) is live and, with checkpoint, one is written. */
static void s_send(const ps_agree_t *a, ps_msg_type_t type, int64_t step, int worker,
                   int checkpoint, uint64_t token)
{
    Shardps__JoinStep js = SHARDPS__JOIN_STEP__INIT;
    js.step = step;
    js.worker = worker;
    js.checkpoint = checkpoint != 0;
    js.token = token;
    a->ops->send_servers(a->ops->core, type, &js.base);
}

int ps_agree_start(ps_agree_t *a, int worker, uint64_t token, int checkpoint)
{
    if (a->active) {
        return PS_ESTATE;
    }
    memset(a->answered, 0, sizeof a->answered);
    a->active = 1;
    a->worker = worker;
    a->checkpoint = checkpoint;
    a->answers = 0;
    a->max_version = -1;
    s_send(a, PS_MSG_JOIN_PREPARE, 0, worker, 0, token);
    return 0;
}

int ps_agree_answer(ps_agree_t *a, int rank, int64_t version)
{
    if (!a->active || rank < 0 || rank >= a->servers || rank >= PS_MAX_SERVERS ||
        a->answered[rank]) {
        return PS_ESTATE;
    }
    a->answered[rank] = 1;
    a->answers++;
    a->max_version = version > a->max_version ? version : a->max_version;
    return 0;
}

int ps_agree_ready(const ps_agree_t *a, int64_t *step)
{
    if (!a->active || a->answers < a->servers) {
        return 0;
    }
    *step = a->max_version + 1;
    return 1;
}

void ps_agree_commit(ps_agree_t *a, int64_t step, int worker, uint64_t token)
{
    s_send(a, PS_MSG_JOIN_STEP, step, worker, a->checkpoint, token);
    a->active = 0;
}

int ps_agree_abandon(ps_agree_t *a)
{
    const int was = a->active;
    a->active = 0;
    return was;
}

void ps_agree_release(ps_agree_t *a)
{
    s_send(a, PS_MSG_JOIN_STEP, 0, -1, 0, 0);
}

/* A server's MSG_JOIN_STEP: its version during an agreement. Server 0's
 * answers to MSG_MEMBERS (members set) are the members' (members.c). */
static int s_on_message(void *self, const ps_node_t *n, ps_msg_t *m)
{
    ps_agree_t *a = self;
    if (!n || m->hdr.type != PS_MSG_JOIN_STEP) {
        return 0;
    }
    const Shardps__JoinStep *js = ps_msg_unpack_body(m, &shardps__join_step__descriptor);
    if (js && n->role == PS_ROLE_SERVER && js->members) {
        return 0;
    }
    if (m->hdr.generation != a->ops->view(a->ops->core)->generation) {
        return 1; /* an answer to an agreement a failover abandoned */
    }
    if (!js || n->role != PS_ROLE_SERVER || ps_agree_answer(a, n->rank, js->step) != 0) {
        ps_log_warn("dropped an unexpected join-step message from S%d", n->rank);
    }
    return 1;
}

const ps_sched_events_t ps_agree_events = {
    .on_message = s_on_message,
};
