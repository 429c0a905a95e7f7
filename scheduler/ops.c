/*
 * scheduler/ops.c - the ops table of scheduler/module.h, the one door through
 * which the modules (and the core's node table and start) read the core and
 * ask it for changes. Each entry turns core back into the scheduler, a row a
 * module names into the node table's own row, and calls one entry point of
 * the loop (scheduler_impl.h), the node table (members.h) or the start
 * (start.h); it decides nothing itself.
 */
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "scheduler/scheduler_impl.h"

static ps_members_t *s_members(void *core)
{
    return ((ps_scheduler_t *)core)->members;
}

static ps_start_t *s_start(void *core)
{
    return ((ps_scheduler_t *)core)->start;
}

/* The node table's row of the node a module names by its row copy. */
static ps_node_t *s_row(void *core, const ps_node_t *n)
{
    return ps_members_row(s_members(core), n->role, n->rank);
}

static const ps_sched_facts_t *s_facts(void *core)
{
    return &((ps_scheduler_t *)core)->facts;
}

static const ps_view_t *s_view(void *core)
{
    return ps_start_view(s_start(core));
}

static const ps_node_t *s_node(void *core, ps_role_t role, int rank)
{
    return ps_members_row(s_members(core), role, rank);
}

static const ps_node_t *s_node_of(void *core, const ps_route_t *route)
{
    return ps_members_node_of(s_members(core), route);
}

static int s_live(void *core)
{
    return ps_members_live(s_members(core));
}

static void s_live_set(void *core, Shardps__Members *m, int32_t *live)
{
    ps_members_live_set(s_members(core), m, live);
}

static void s_send(void *core, const ps_route_t *to, ps_msg_type_t type,
                   const ProtobufCMessage *body)
{
    ps_msg_send_ctrl(((ps_scheduler_t *)core)->router, to, type, PS_ROLE_SCHEDULER, 0, body);
}

static void s_reply_error(void *core, const ps_msg_t *m, int status, const char *why)
{
    ps_msg_reply_error(((ps_scheduler_t *)core)->router, m, PS_ROLE_SCHEDULER, 0, status, "%s",
                       why);
}

static void s_send_servers(void *core, ps_msg_type_t type, const ProtobufCMessage *body)
{
    ps_scheduler_send_servers(core, type, body);
}

static void s_send_all(void *core, ps_msg_type_t type, const ProtobufCMessage *body)
{
    ps_scheduler_send_all(core, type, body);
}

static int s_send_view(void *core, const ps_node_t *n, ps_msg_type_t type, const ps_view_t *v)
{
    return ps_start_send_view(s_start(core), n, type, v);
}

static void s_send_ack(void *core, const ps_node_t *n)
{
    ps_scheduler_send_ack(core, n);
}

static int s_answer(void *core, const ps_route_t *to, ps_msg_type_t type, uint64_t request_id,
                    const ProtobufCMessage *body)
{
    ps_scheduler_t *s = core;
    Shardps__Header h;
    ps_msg_header(&h, type, PS_ROLE_SCHEDULER, 0);
    h.request_id = request_id;
    return s->router ? ps_msg_send_body(s->router, to, h, body) : PS_ECLOSED;
}

static void s_fail(void *core, int usage, const char *why)
{
    if (usage) {
        ps_scheduler_fail_usage(core, "%s", why);
    } else {
        ps_scheduler_fail(core, "%s", why);
    }
}

static void s_phase_event(void *core, ps_phase_event_t ev)
{
    ps_scheduler_phase_event(core, ev);
}

static void s_save_state(void *core)
{
    ps_scheduler_save_state(core);
}

static int s_new_token(void *core, uint64_t *token)
{
    (void)core;
    return ps_members_new_token(token);
}

static int s_admit(void *core, const ps_msg_t *m, const Shardps__Register *reg, int rank,
                   int lost)
{
    ps_node_t *n = ps_members_row(s_members(core), reg->role, rank);
    return n ? ps_members_admit(n, m, reg, rank, lost) : PS_EINVAL;
}

static void s_readmit(void *core, const ps_msg_t *m, const Shardps__Register *reg)
{
    ps_members_t *mb = s_members(core);
    ps_node_t *n = ps_members_row(mb, reg->role, reg->rank);
    if (n) {
        ps_members_readmit(mb, n, m, reg);
    }
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
    return ps_members_joined(s_members(core), s_row(core, n));
}

static int s_leave(void *core, const ps_node_t *n, const char *why)
{
    return ps_members_leave(s_members(core), s_row(core, n), why);
}

static void s_unreported(void *core, const ps_node_t *n)
{
    ps_members_unreported(s_row(core, n));
}

static void s_rollback(void *core)
{
    ps_members_rollback(s_members(core));
}

static void s_barrier_check(void *core)
{
    ps_members_barrier_check(s_members(core));
}

static void s_fix_endpoint(void *core, ps_node_t *own, const char *announced, const char *peer)
{
    ps_members_fix_endpoint(s_members(core), own, announced, peer);
}

static void s_saved_job(void *core, const ps_view_t *v, const Shardps__JoinSchedulerState *st,
                        double now)
{
    ps_start_saved_job(s_start(core), v, st, now);
}

static void s_replace(void *core, int r, const ps_node_t *spare, int64_t step,
                      const ps_checkpoint_part_t *parts, int nparts, const char *dir)
{
    ps_start_replace(s_start(core), r, spare, step, parts, nparts, dir);
}

static void s_take_over(void *core, int r, const ps_node_t *replica)
{
    ps_start_take_over(s_start(core), r, replica);
}

static void s_start_servers(void *core)
{
    ps_start_servers(s_start(core));
}

void ps_scheduler_ops_init(ps_scheduler_t *s)
{
    s->ops = (ps_sched_ops_t){
        .core = s,
        .cfg = s->cfg,
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
