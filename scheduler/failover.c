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
#include "scheduler/failover_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/json.h"
#include "common/log.h"
#include "scheduler/agree.h"
#include "scheduler/ckpt.h"
#include "scheduler/manifest.h"

/* ---- the core, through its ops ---------------------------------------- */

static void s_send(const ps_failover_t *f, const ps_route_t *to, ps_msg_type_t type,
                   const ProtobufCMessage *body)
{
    f->ops->send(f->ops->core, to, type, body);
}

/* Server r's row (the core's). */
static const ps_node_t *s_server(const ps_failover_t *f, int r)
{
    return f->ops->node(f->ops->core, PS_ROLE_SERVER, r);
}

static const ps_view_t *s_view(const ps_failover_t *f)
{
    return f->ops->view(f->ops->core);
}

/* ---- hot replicas (--replicas) ----------------------------------------- */

static void s_send_members(ps_failover_t *f, const ps_node_t *n);

/* Tells primary r which replicas it has (the ids in r's slots: it drops
 * any other), and where a new one listens (replica; NULL: none new). */
static void s_tell_primary(ps_failover_t *f, int r, const ps_node_t *replica)
{
    Shardps__Replica rp = SHARDPS__REPLICA__INIT;
    int32_t keep[PS_MAX_REPLICAS];
    for (int k = 0; k < f->ops->cfg->replicas; k++) {
        const int id = *ps_failover_replica(f, r, k);
        if (id >= 0) {
            keep[rp.n_keep++] = id;
        }
    }
    rp.keep = keep;
    if (replica) {
        rp.endpoint = (char *)replica->endpoint;
        rp.curve_key = (char *)replica->curve_key;
        rp.token = replica->replica_token;
        rp.rank = replica->rank;
    }
    s_send(f, &s_server(f, r)->route, PS_MSG_REPLICA, &rp.base);
}

/* Spare n becomes the replica of server r: it gets the view with the rank it
 * follows and the token its primary's messages carry, binds for the keys
 * and says where (PEER_READY, s_on_replica_message). That view is a copy:
 * the job's says nothing of replicas, and a failover's replaced and
 * takeover are not this spare's. On the heap: a view is a few hundred KB. */
static void s_follow(ps_failover_t *f, int r, int *slot, ps_node_t *n)
{
    const ps_sched_ops_t *ops = f->ops;
    ps_view_t *v = malloc(sizeof *v);
    if (!v || ops->new_token(ops->core, &n->replica_token) != 0) {
        free(v); /* the next tick tries again */
        return;
    }
    n->follows = r + 1;
    n->in_step = 0;
    n->endpoint[0] = '\0';
    *slot = n->rank;
    *v = *s_view(f);
    v->replaced = v->takeover = 0;
    v->replica_of = r + 1;
    v->replica_token = n->replica_token;
    ops->send_view(ops->core, n, PS_MSG_VIEW, v);
    free(v);
    ps_log_info("spare S%d (pid %u) becomes the replica of S%d", n->rank, n->pid, r);
}

/* Every turn: a replica that is gone (silent, closed) is forgotten and its
 * primary told; a server with fewer than K gets waiting spares (at the
 * start, and after a takeover: the rebuild). */
/* A replica slot of rank r has no spare to fill it (bare): said once, at
 * the warning level, until a spare fills it again. */
static void s_say_bare(ps_failover_t *f, int r, int bare)
{
    if (bare && !f->bare[r]) {
        ps_log_warn("S%d has fewer than --replicas %d replicas: no spare is left to make "
                    "one; a loss of it now costs a failover from a checkpoint or a spare",
                    r, f->ops->cfg->replicas);
    }
    f->bare[r] = (unsigned char)bare;
}

static void s_keep_replicas(ps_failover_t *f)
{
    const ps_scheduler_config_t *cfg = f->ops->cfg;
    if (!cfg->replicas || ps_sched_phase(f->ops) != PS_PHASE_RUNNING) {
        return;
    }
    for (int r = 0; r < cfg->servers; r++) {
        /* a replica that took a rank over gets others once it was heard in
         * it (dead with its primary, it needs a cold spare instead) */
        const int heard = s_server(f, r)->last_seen > f->rebuild_since[r];
        int bare = 0;
        for (int k = 0; k < cfg->replicas; k++) {
            int *id = ps_failover_replica(f, r, k);
            if (*id >= 0 && !ps_failover_spare_by_id(f, *id)) {
                ps_log_warn("lost a replica of S%d (S%d): it is made again from a spare", r,
                            *id);
                *id = -1;
                s_tell_primary(f, r, NULL);
            }
            for (int i = 0; heard && *id < 0 && i < f->nspares; i++) {
                if (!f->spares[i].follows) {
                    s_follow(f, r, id, &f->spares[i]);
                }
            }
            bare |= heard && *id < 0;
        }
        s_say_bare(f, r, bare);
    }
}

/* The replicas of rank r that did not take it over follow the one that did
 * (once it serves: until then any of them may still take over): each gets
 * a new token, so the old primary, if it comes back, cannot write to it,
 * says where it listens, and is in step again after the new primary's
 * snapshot. */
static void s_follow_new_primary(ps_failover_t *f, int r)
{
    for (int k = 0; k < f->ops->cfg->replicas; k++) {
        ps_node_t *n = ps_failover_spare_by_id(f, *ps_failover_replica(f, r, k));
        if (!n || f->ops->new_token(f->ops->core, &n->replica_token) != 0) {
            continue;
        }
        n->in_step = 0;
        n->endpoint[0] = '\0';
        Shardps__Replica rp = SHARDPS__REPLICA__INIT;
        rp.token = n->replica_token;
        s_send(f, &n->route, PS_MSG_REPLICA, &rp.base);
        ps_log_info("replica S%d follows S%d's new primary", n->rank, r);
    }
}

/* A replica's messages, before it takes a rank over: where it listens (its
 * primary is told), and that it is in step. Returns 1 when m was one. */
static int s_on_replica_message(ps_failover_t *f, ps_msg_t *m)
{
    ps_node_t *n = ps_failover_spare_of(f, &m->route);
    if (!n || !n->follows || n->rank != m->hdr.sender) {
        return 0;
    }
    const int r = n->follows - 1;
    if (m->hdr.type == PS_MSG_PEER_READY) {
        const Shardps__PeerReady *pr = ps_msg_unpack_body(m, &shardps__peer_ready__descriptor);
        if (pr && !n->endpoint[0]) {
            f->ops->fix_endpoint(f->ops->core, n, pr->endpoint, m->peer_addr);
            s_tell_primary(f, r, n);
        }
        return 1;
    }
    if (m->hdr.type != PS_MSG_REPLICA || n->in_step) {
        return 0;
    }
    n->in_step = 1;
    if (f->rebuild_since[r] > 0) {
        const double t = ps_now() - f->rebuild_since[r];
        f->rebuild_since[r] = 0;
        f->rebuilds++;
        f->rebuild_sum += t;
        f->rebuild_max = t > f->rebuild_max ? t : f->rebuild_max;
        ps_log_info("the replica of S%d is rebuilt on S%d: in step %.3f s after the takeover",
                    r, n->rank, t);
    } else {
        ps_log_info("S%d is in step with S%d", n->rank, r);
    }
    return 1;
}

/* Rank r is replaced from a checkpoint: its replicas (none in step)
 * follow a primary that is gone, so they go; spares take their places. */
static void s_drop_replicas(ps_failover_t *f, int r)
{
    for (int k = 0; k < PS_MAX_REPLICAS; k++) {
        int *id = ps_failover_replica(f, r, k);
        ps_node_t *rep = ps_failover_spare_by_id(f, *id);
        *id = -1;
        if (rep) {
            Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
            sd.reason = (char *)"the server this replica followed was replaced";
            s_send(f, &rep->route, PS_MSG_SHUTDOWN, &sd.base);
            ps_log_info("replica S%d of S%d is not in step: it goes", rep->rank, r);
            *rep = f->spares[--f->nspares];
        }
    }
    f->repoint[r] = 0;
}

/* Server n is lost and a replica of it is in step: the replica takes the
 * rank over. Every server learns it (MSG_FAILOVER with takeover) and
 * forgets the step under way; once all answered, the workers reconnect and
 * send it again. Nothing rolls back. Once training is over (REPORTING)
 * the workers are left alone and the new primary is asked for the report
 * instead. Returns 1, or 0 when no replica can. */
static int s_take_over(ps_failover_t *f, const ps_node_t *n, double silent)
{
    const ps_sched_ops_t *ops = f->ops;
    const int r = n->rank;
    ps_node_t *rep = NULL;
    int *slot = NULL;
    for (int k = 0; !rep && k < PS_MAX_REPLICAS; k++) {
        slot = ps_failover_replica(f, r, k);
        rep = ps_failover_spare_by_id(f, *slot);
        rep = rep && rep->in_step && rep->endpoint[0] ? rep : NULL;
    }
    if (!rep) {
        return 0;
    }
    const double now = ps_now();
    if (ps_failover_record(f, r, s_view(f)->generation + 1, 0, now, silent,
                           ps_job_is_stepped(&ops->cfg->job)) != 0) {
        return 0;
    }
    f->reps[f->nreps - 1].takeover = 1;
    ps_node_t replica;
    ps_failover_take_spare(f, (int)(rep - f->spares), r, &replica);
    *slot = -1;
    f->repoint[r] = 1;
    f->takeovers++;
    /* the row is the replica's once the core took it: read the lost one first */
    const uint32_t lost_pid = n->pid;
    ps_failover_retire(f, &n->route);
    ops->take_over(ops->core, r, &replica);
    f->rebuild_since[r] = ps_now(); /* after the swap: heard in the rank from then on */
    ps_log_warn("failover %lld: lost S%d (pid %u), silent for %.1f s; its replica S%d "
                "(pid %u) takes the rank over: nothing rolls back",
                (long long)s_view(f)->generation, r, lost_pid, silent, replica.rank,
                replica.pid);
    for (int i = 0; i < ops->cfg->servers; i++) {
        ops->send_view(ops->core, s_server(f, i), PS_MSG_FAILOVER, NULL);
    }
    if (ps_sched_phase(ops) == PS_PHASE_REPORTING) {
        return 1; /* the workers are done: s_tell_workers asks for the report */
    }
    s_send_members(f, s_server(f, r));
    ps_agree_abandon(f->agree);
    ops->rollback(ops->core); /* workers that finished send their DONE again */
    return 1;
}

/* A spare of this job registering again with a restarted scheduler (reg
 * has the job's run id and the spare's id): it keeps its id, and a hot
 * replica the rank it follows, its token and where it listens, so that a
 * takeover still finds it; a replica whose rank has another by now goes.
 * So does a spare this scheduler gave its id, or took back already: it was
 * forgotten since (silent, closed), and a replica's primary no longer sends
 * to it. */
static int s_readmit(ps_failover_t *f, ps_msg_t *m, const Shardps__Register *reg)
{
    const ps_sched_ops_t *ops = f->ops;
    const ps_node_t *known = ps_failover_spare_of(f, &m->route);
    const int r = reg->follows - 1;
    const char *why = NULL;
    if (known) {
        ops->send_ack(ops->core, known); /* its first answer was lost */
        return 1;
    }
    int *slot = NULL;
    for (int k = 0; r >= 0 && r < ops->cfg->servers && !slot && k < ops->cfg->replicas; k++) {
        slot = *ps_failover_replica(f, r, k) < 0 ? ps_failover_replica(f, r, k) : NULL;
    }
    if (r >= ops->cfg->servers || (r >= 0 && (!slot || !reg->endpoint[0]))) {
        why = "the rank it follows has its replicas";
    }
    ps_node_t *n = NULL;
    if (!why && ps_failover_spare_readmit(f, &m->route, reg->pid, m->peer_fd, reg->curve_key,
                                          reg->rank, ps_now(), &n, &why) == 0) {
        if (r >= 0) {
            n->follows = reg->follows;
            n->in_step = reg->in_step;
            n->replica_token = reg->replica_token;
            ops->fix_endpoint(ops->core, n, reg->endpoint, m->peer_addr);
            *slot = n->rank;
        }
        ops->send_ack(ops->core, n);
        char of[64] = "";
        if (r >= 0) {
            snprintf(of, sizeof of, ": the replica of S%d, %s", r,
                     n->in_step ? "in step" : "not in step yet");
        }
        ps_log_info("spare S%d (pid %u) registered again%s", n->rank, n->pid, of);
        return 1;
    }
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.status = PS_ECLOSED; /* it ends failed: the launcher may start a fresh one */
    sd.reason = (char *)why;
    s_send(f, &m->route, PS_MSG_SHUTDOWN, &sd.base);
    ps_log_info("spare S%d (pid %u) cannot register again: %s; it goes", reg->rank, reg->pid,
                why);
    return 1;
}

/* A server's registration that makes a spare: it asked to be one, or the job
 * already runs. Registers it (REGISTER_ACK with its spare id) or refuses it. */
static int s_on_register(void *self, ps_msg_t *m, const Shardps__Register *reg)
{
    ps_failover_t *f = self;
    const ps_sched_ops_t *ops = f->ops;
    const ps_phase_t phase = ps_sched_phase(ops);
    if (reg->role == PS_ROLE_SERVER && reg->run_id &&
        reg->run_id == ops->facts(ops->core)->run_id && reg->rank >= ops->cfg->servers) {
        return s_readmit(f, m, reg);
    }
    if (reg->role != PS_ROLE_SERVER || (!reg->spare && phase == PS_PHASE_WAITING) ||
        ops->node_of(ops->core, &m->route)) {
        return 0;
    }
    const char *why = NULL;
    const ps_node_t *n = NULL;
    if (ops->cfg->servers == 0) {
        why = "an allreduce job has no servers to replace";
    } else if (phase == PS_PHASE_FINISHED || phase == PS_PHASE_FAILED ||
               phase == PS_PHASE_REPORTING) {
        why = "the job is ending";
    } else {
        ps_failover_spare_add(f, &m->route, reg->pid, m->peer_fd, reg->curve_key, ps_now(), &n,
                              &why);
    }
    if (why) {
        ps_sched_refuse(ops, m, PS_ESTATE, "%s", why);
        return 1;
    }
    ops->send_ack(ops->core, n);
    ops->save_state(ops->core); /* its id, for a restarted scheduler */
    ps_log_info("registered spare S%d (pid %u); %d spare%s waiting", n->rank, n->pid,
                f->nspares, f->nspares == 1 ? "" : "s");
    return 1;
}

/* A message from a connection that is no node of the job: a spare's (its
 * heartbeats keep it alive; a promoted spare's last ones under its spare
 * id), or a replaced server's. */
static int s_on_stranger(ps_failover_t *f, ps_msg_t *m)
{
    if (m->hdr.role == PS_ROLE_SERVER && s_on_replica_message(f, m)) {
        ps_failover_spare_seen(f, &m->route, m->hdr.sender, ps_now());
        return 1;
    }
    if (m->hdr.role == PS_ROLE_SERVER && ps_failover_spare_seen(f, &m->route, m->hdr.sender,
                                                                ps_now())) {
        return 1; /* a heartbeat: a spare says nothing else */
    }
    /* A server declared lost but alive after all (a pause longer than the
     * peer timeout): its place is taken, so it is told to go. */
    if (ps_failover_retired(f, &m->route)) {
        Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
        sd.status = PS_ECLOSED;
        sd.reason = (char *)"this server was declared lost and replaced";
        s_send(f, &m->route, PS_MSG_SHUTDOWN, &sd.base);
        return 1;
    }
    /* A promoted spare's heartbeats sent before it learnt its new rank. */
    for (int r = 0; r < f->ops->cfg->servers; r++) {
        if (f->spare_id[r] >= 0 && m->hdr.sender == f->spare_id[r] &&
            ps_failover_same_route(&s_server(f, r)->route, &m->route)) {
            return m->hdr.type == PS_MSG_HEARTBEAT;
        }
    }
    return 0;
}

/* Phase 2: every server stands at the checkpoint, or the replicas that
 * took ranks over serve them; the workers roll back or send the step again
 * (training over: the new primaries are asked for their reports instead). */
static void s_tell_workers(ps_failover_t *f)
{
    const ps_sched_ops_t *ops = f->ops;
    const int training = ps_sched_phase(ops) == PS_PHASE_RUNNING; /* else done: left alone */
    for (int r = 0; r < ops->cfg->servers; r++) {
        if (f->repoint[r]) {
            f->repoint[r] = 0;
            s_follow_new_primary(f, r);
            if (!training) { /* it holds every update: its report stands for the lost one's */
                s_send(f, &s_server(f, r)->route, PS_MSG_REPORT, NULL);
            }
        }
    }
    const ps_node_t *w;
    for (int i = 0; training && (w = ops->node(ops->core, PS_ROLE_WORKER, i)); i++) {
        if (w->used && !w->lost) {
            ops->send_view(ops->core, w, PS_MSG_FAILOVER, NULL);
        }
    }
    const ps_view_t *v = s_view(f);
    if (!training) {
        ps_log_info("failover %lld: every server knows S%d's new primary; training is over",
                    (long long)v->generation, v->replaced - 1);
        ps_failover_ended(f, ps_now());
    } else if (v->takeover) {
        ps_log_info("failover %lld: every server forgot the step under way; workers send it "
                    "again", (long long)v->generation);
    } else if (ps_job_is_stepped(&ops->cfg->job)) {
        ps_log_info("failover %lld: every server is at step %lld; workers roll back",
                    (long long)v->generation, (long long)v->start_step);
    } else {
        ps_log_info("failover %lld: the spare is ready; workers reconnect and go on",
                    (long long)v->generation);
    }
}

static int s_on_message(void *self, const ps_node_t *n, ps_msg_t *m)
{
    ps_failover_t *f = self;
    if (!n) {
        return s_on_stranger(f, m);
    }
    if (m->hdr.type != PS_MSG_FAILOVER_READY) {
        return 0;
    }
    const Shardps__FailoverReady *rd =
        ps_msg_unpack_body(m, &shardps__failover_ready__descriptor);
    if (n->role != PS_ROLE_SERVER || !rd || rd->generation != s_view(f)->generation) {
        return 1; /* an older failover's: the newer one decides */
    }
    if (ps_failover_ready(f, n->rank, rd, ps_job_is_stepped(&f->ops->cfg->job), ps_now())) {
        s_tell_workers(f);
    }
    return 1;
}

/* The promoted spare starts with every worker live: when some were left out
 * (--min-workers) it gets the live set right after its view. A superset of
 * the live workers never completes a step early, so the order is safe. */
static void s_send_members(ps_failover_t *f, const ps_node_t *n)
{
    int32_t live[PS_MAX_WORKERS];
    Shardps__Members mb = SHARDPS__MEMBERS__INIT;
    f->ops->live_set(f->ops->core, &mb, live);
    if (mb.n_live < (size_t)f->ops->cfg->workers) {
        s_send(f, &n->route, PS_MSG_MEMBERS, &mb.base);
    }
}

/* Whether server r, lost at now (closed: its connection closed), can be
 * replaced by a cold spare from a checkpoint: 1 with the newest complete one
 * in *step, parts (PS_MAX_SERVERS), *nparts and dir (the size of the view's
 * resume_dir); 0 when not (one line says why, unless closed: the server is
 * then left to its silence, which logs it). */
static int s_checkpoint(ps_failover_t *f, int r, int closed, double now, int64_t *step,
                        ps_checkpoint_part_t *parts, int *nparts, char *dir)
{
    const ps_view_t *v = s_view(f);
    ps_failover_spares_expire(f, now, f->ops->cfg->peer_timeout); /* a dead spare gets no place */
    if (ps_failover_cold_spares(f) == 0) {
        if (!closed) {
            ps_log_warn("failover: S%d cannot be replaced: no spare server waits (--spares)",
                        r);
        }
        return 0;
    }
    *nparts = ps_manifest_find(v->checkpoint_dir, v->num_params, step, parts, dir,
                               sizeof v->resume_dir);
    if (*nparts <= 0) {
        if (!closed) {
            ps_log_warn("failover: S%d cannot be replaced: no complete checkpoint in %s yet", r,
                        v->checkpoint_dir);
        }
        return 0;
    }
    return 1;
}

/* Server n is lost (silent for `silent` seconds; closed: its connection
 * closed, and a lost server that cannot be replaced is then left to its
 * silence, which logs why). Returns 1 when the job goes on (a replica in
 * step takes the rank over, training or not; a spare takes its place and
 * the job rolls back; or training is over and only its report is missing),
 * 0 when it cannot. */
static int s_replace(ps_failover_t *f, const ps_node_t *n, double silent, int closed)
{
    const ps_sched_ops_t *ops = f->ops;
    const int r = n->rank;
    const int on = ps_ckpt_enabled(f->ckpt);
    const ps_phase_t phase = ps_sched_phase(ops);
    const double now = ps_now();
    if ((phase == PS_PHASE_RUNNING || phase == PS_PHASE_REPORTING) &&
        s_take_over(f, n, silent)) {
        return 1;
    }
    if (phase == PS_PHASE_WAITING ||
        (closed && (phase != PS_PHASE_RUNNING || !on || ps_failover_cold_spares(f) == 0))) {
        return 0;
    }
    if (phase == PS_PHASE_REPORTING) { /* training is over: only its report is missing */
        ps_log_warn("S%d (pid %u) lost after training ended: its report is missing", r, n->pid);
        ops->unreported(ops->core, n);
        return 1;
    }
    if (!on) {
        ps_log_warn("failover: S%d cannot be replaced: checkpoints are off (--checkpoint-dir "
                    "and --checkpoint-every)", r);
        return 0;
    }
    int64_t step;
    int nparts;
    char dir[sizeof s_view(f)->resume_dir];
    ps_checkpoint_part_t parts[PS_MAX_SERVERS];
    const int stepped = ps_job_is_stepped(&ops->cfg->job);
    if (!s_checkpoint(f, r, closed, now, &step, parts, &nparts, dir)) {
        return 0;
    }
    if (ps_failover_record(f, r, s_view(f)->generation + 1, step, now, silent, stepped) != 0) {
        ps_log_err("failover: out of memory");
        return 0;
    }
    ps_node_t spare;
    ps_failover_promote(f, r, &spare);
    s_drop_replicas(f, r);
    /* the row is the spare's once the core took it: read the lost one first */
    const uint32_t lost_pid = n->pid;
    ps_failover_retire(f, &n->route);
    ops->replace(ops->core, r, &spare, step, parts, nparts, dir); /* the spare is S<r> */
    const ps_view_t *v = s_view(f);
    ps_log_warn("failover %lld: lost S%d (pid %u): %s %.1f s; spare S%d (pid %u) "
                "takes its keys from %s; %s %lld",
                (long long)v->generation, r, lost_pid,
                closed ? "its connection closed, silent for" : "silent for", silent, spare.rank,
                spare.pid, v->resume_dir,
                stepped ? "every node rolls back to step"
                        : "the others go on (async), its updates since are lost: step",
                (long long)step);
    for (int i = 0; i < ops->cfg->servers; i++) {
        if (ops->send_view(ops->core, s_server(f, i), i == r ? PS_MSG_VIEW : PS_MSG_FAILOVER,
                           NULL)) {
            ps_log_err("failover: cannot encode the view");
            return 0;
        }
    }
    s_send_members(f, s_server(f, r));
    /* The servers' rollback ends their hold, and the spare never had it: the
     * agreement starts again (its user's tick), the spare included; the
     * survivors' answers to this one are of the older generation. */
    if (ps_agree_abandon(f->agree)) {
        ps_log_info("failover %lld: the step agreement under way starts again",
                    (long long)v->generation);
    }
    /* Workers finish again after the rollback; DONEs sent before it are
     * of an older generation and ignored. */
    ops->rollback(ops->core);
    return 1;
}

/* A lost server is replaced when it can be; a spare whose connection closed
 * is forgotten. */
static int s_on_lost(void *self, const ps_node_t *n, const ps_loss_t *loss)
{
    ps_failover_t *f = self;
    if (!n) {
        return loss->closed && ps_failover_spare_closed(f, loss->fd);
    }
    return n->role == PS_ROLE_SERVER && s_replace(f, n, loss->silent, loss->closed);
}

/* Spares silent for the peer timeout are forgotten. */
static void s_on_tick(void *self, double now)
{
    ps_failover_t *f = self;
    ps_failover_spares_expire(f, now, f->ops->cfg->peer_timeout);
    s_keep_replicas(f);
}

const ps_sched_events_t ps_failover_events = {
    .on_register = s_on_register,
    .on_message = s_on_message,
    .on_lost = s_on_lost,
    .on_tick = s_on_tick,
};

void ps_failover_send_spares(ps_failover_t *f, ps_msg_type_t type,
                             const ProtobufCMessage *body)
{
    if (f && (type == PS_MSG_HEARTBEAT || type == PS_MSG_SHUTDOWN)) {
        for (int i = 0; i < f->nspares; i++) {
            s_send(f, &f->spares[i].route, type, body);
        }
    }
}

ps_failover_counts_t ps_failover_counts(const ps_failover_t *f)
{
    ps_failover_counts_t c = {0};
    for (int i = 0; f && i < f->nreps; i++) {
        c.steps_rolled_back += f->reps[i].steps_lost;
    }
    if (f) {
        c.replacements = f->nreps;
        c.takeovers = f->takeovers;
        c.rebuilds = f->rebuilds;
        c.rebuild_max_s = f->rebuild_max;
        c.rebuild_mean_s = f->rebuilds ? f->rebuild_sum / f->rebuilds : 0;
    }
    return c;
}

int ps_failover_json(json_t *doc, const ps_failover_t *fo)
{
    json_t *reps = json_array();
    for (int i = 0; reps && fo && i < fo->nreps; i++) {
        const ps_failover_rep_t *r = &fo->reps[i];
        json_t *rep = json_pack("{s:i, s:I, s:o, s:o, s:I, s:I, s:b}", "rank", r->rank, "step",
                                (json_int_t)r->step, "detect_s", ps_json_real(r->detect_s, 3),
                                "recover_s", ps_json_real(r->recover_s, 3), "steps_lost",
                                (json_int_t)r->steps_lost, "updates_lost",
                                (json_int_t)r->updates_lost, "takeover", r->takeover);
        if (json_array_append_new(reps, rep) != 0) {
            json_decref(reps);
            reps = NULL;
        }
    }
    const ps_failover_counts_t c = ps_failover_counts(fo);
    json_t *rep = json_pack("{s:i, s:i, s:i, s:o, s:o, s:I}", "per_server",
                            fo ? fo->ops->cfg->replicas : 0,
                            "takeovers", c.takeovers, "rebuilds", c.rebuilds, "rebuild_max_s",
                            ps_json_real(c.rebuild_max_s, 3), "rebuild_mean_s",
                            ps_json_real(c.rebuild_mean_s, 3), "steps_rolled_back",
                            (json_int_t)c.steps_rolled_back);
    return json_object_set_new(doc, "server_replacements", reps) != 0 ||
                   json_object_set_new(doc, "replicas", rep) != 0 ||
                   json_object_set_new(doc, "spares_left",
                                       json_integer(fo ? ps_failover_cold_spares(fo) : 0))
               ? PS_ENOMEM
               : 0;
}
