/*
 * server/control.c - the scheduler's control messages to a server:
 * failover, membership, joins and timed checkpoints, and the server's
 * checkpoints and resume (see control.h).
 */
#include "server/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "server/checkpoint.h"

struct ps_control {
    ps_control_config_t cfg;
    int workers;           /* the view's */
    int64_t generation;    /* failovers seen */
    int64_t rolled_to;     /* the step of the last failover's rollback; -1 once its first
                              step after was reported (or there was none) */
    int64_t checkpointed;  /* the version of the last checkpoint written (or loaded) */
    int64_t checkpoint_at; /* a checkpoint step agreed with the scheduler (timed), or -1 */
    uint64_t stale;        /* data messages of another generation */
};

int ps_control_new(ps_control_t **out, const ps_control_config_t *cfg)
{
    *out = NULL;
    ps_control_t *c = calloc(1, sizeof *c);
    if (!c) {
        return PS_ENOMEM;
    }
    c->cfg = *cfg;
    c->workers = cfg->view->num_workers;
    c->generation = cfg->view->generation;
    c->rolled_to = -1;
    c->checkpoint_at = -1;
    *out = c;
    return 0;
}

void ps_control_destroy(ps_control_t **cp)
{
    if (cp && *cp) {
        free(*cp);
        *cp = NULL;
    }
}

int ps_control_is_stale(ps_control_t *c, int64_t generation, char *why, size_t cap)
{
    if (generation == c->generation) {
        return 0;
    }
    snprintf(why, cap, "of failover %lld, not %lld", (long long)generation,
             (long long)c->generation);
    c->stale++;
    return 1;
}

uint64_t ps_control_stale(const ps_control_t *c)
{
    return c->stale;
}

/* Sends the scheduler a message of type with body. */
static void s_send(ps_control_t *c, ps_msg_type_t type, const ProtobufCMessage *body)
{
    c->cfg.ops.send(c->cfg.ops.ctx, type, body);
}

/* MSG_JOIN_STEP to the scheduler: our version, or (members) the step a
 * membership change took effect at. */
static void s_send_join_step(ps_control_t *c, int64_t step, int members)
{
    Shardps__JoinStep js = SHARDPS__JOIN_STEP__INIT;
    js.step = step;
    js.worker = -1;
    js.members = members != 0;
    s_send(c, PS_MSG_JOIN_STEP, &js.base);
}

/* Tells the scheduler where this server stands in failover generation. */
static void s_failover_ready(ps_control_t *c, int64_t step, int64_t from, int stepped)
{
    Shardps__FailoverReady r = SHARDPS__FAILOVER_READY__INIT;
    r.generation = c->generation;
    r.step = step;
    r.from_version = from;
    r.stepped = stepped != 0;
    s_send(c, PS_MSG_FAILOVER_READY, &r.base);
}

/* The server's rows and the hashes it holds (table NULL: a job without). */
static ps_checkpoint_rows_t s_rows(const ps_control_t *c)
{
    return (ps_checkpoint_rows_t){c->cfg.rows, c->cfg.view->servers[c->cfg.rank].rows};
}

/* After each step (so also each of the several steps one ssp push may
 * complete; async: each push): when the version N is a checkpoint (a
 * multiple of --checkpoint-every, or the step agreed for a timed one),
 * writes the shard and tells the scheduler. Nothing changes the store before
 * this runs, so the part is the cut after step N-1's update. In async a step
 * is one push from each of the M workers (ps_consistency_lr), so checkpoint
 * N is written at version N * M, by each server at its own time: no cut
 * (docs/design/checkpoints.md). A part that cannot be written is logged and
 * skipped: that checkpoint never becomes complete, training goes on. */
void ps_control_stepped(ps_control_t *c)
{
    const ps_view_t *v = c->cfg.view;
    const int64_t version = ps_consistency_version(c->cfg.cons);
    const int64_t per_step = ps_job_is_stepped(&v->job) ? 1 : v->num_workers;
    const int64_t every = (int64_t)v->checkpoint_every * per_step;
    const int due = (every > 0 && version % every == 0) || version == c->checkpoint_at;
    if (!due || version == c->checkpointed) {
        return;
    }
    c->checkpointed = version;
    const ps_checkpoint_info_t info = {.dir = c->cfg.dir ? c->cfg.dir : v->checkpoint_dir,
                                       .step = version / per_step,
                                       .version = version,
                                       .rank = c->cfg.rank,
                                       .servers = v->num_servers,
                                       .workers = v->num_workers,
                                       .num_params = v->num_params,
                                       .job = &v->job,
                                       .rows = s_rows(c)};
    ps_checkpoint_part_t part;
    Shardps__Checkpoint cp;
    char why[256];
    const double t0 = ps_now();
    int rc = ps_checkpoint_write(&info, c->cfg.store, &part, why, sizeof why);
    ps_log_debug("checkpoint step-%lld: %s written in %.1f ms", (long long)version, part.file,
                 (ps_now() - t0) * 1e3);
    if (rc != 0) {
        ps_log_warn("checkpoint of step %lld not written: %s", (long long)version, why);
    } else {
        ps_codec_part_to_pb(&part, &cp);
        s_send(c, PS_MSG_CHECKPOINT, &cp.base);
    }
}

/* Where this server finds the parts of the checkpoint view v names
 * (v->resume_dir, DIR/step-N): its own copy of DIR/step-N with
 * --checkpoint-dir, else the view's path. */
static void s_resume_dir(const ps_control_t *c, const ps_view_t *v, char *out, size_t cap)
{
    const char *step = strrchr(v->resume_dir, '/');
    if (c->cfg.dir && step) {
        snprintf(out, cap, "%s%s", c->cfg.dir, step);
    } else {
        snprintf(out, cap, "%s", v->resume_dir);
    }
}

int ps_control_resume(ps_control_t *c, char *err, size_t errlen)
{
    const ps_view_t *v = c->cfg.view;
    char why[640];
    /* resumed with another number of workers: the parts are of resume_step */
    const int64_t step = v->resume_step ? v->resume_step : v->start_step;
    int64_t version = v->start_step;
    char dir[PS_RESUME_DIR_MAX + PS_DIR_MAX];
    s_resume_dir(c, v, dir, sizeof dir);
    const ps_checkpoint_rows_t rows = s_rows(c);
    int rc = ps_checkpoint_load(dir, v->resume_files, v->resume_parts, step, c->cfg.store,
                                &rows, &v->job, &version, why, sizeof why);
    if (ps_job_is_stepped(&v->job)) {
        version = v->start_step; /* the parts' own, or the step of another worker count */
    }
    rc = rc ? rc : ps_consistency_resume(c->cfg.cons, version);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resume: %s", why);
        return rc;
    }
    c->checkpointed = version;
    ps_log_info("resumed at step %lld from %d parts in %s (each checked against the manifest)",
                (long long)v->start_step, v->resume_parts, dir);
    return 0;
}

void ps_control_takeover(ps_control_t *c)
{
    c->rolled_to = ps_consistency_version(c->cfg.cons); /* async: its part's version */
    s_failover_ready(c, c->rolled_to, c->rolled_to, 0);
}

void ps_control_pushed(ps_control_t *c)
{
    const int64_t version = ps_consistency_version(c->cfg.cons);
    if (c->rolled_to >= 0 && version > c->rolled_to) {
        c->rolled_to = -1;
        s_failover_ready(c, version, version, 1);
    }
}

/* Rolls the shard and the rows back to checkpoint v->start_step (stepped
 * modes; async keeps its store and rows). Returns 0 or a PS_E* with the
 * reason in why. */
static int s_roll_back(ps_control_t *c, const ps_view_t *v, char *why, size_t cap)
{
    if (!ps_job_is_stepped(&c->cfg.view->job)) {
        return 0;
    }
    int rc = ps_store_reset(c->cfg.store);
    if (rc != 0) {
        snprintf(why, cap, "out of memory");
        return rc;
    }
    if (c->cfg.rows) { /* the checkpoint's rows and sightings, none of the later ones */
        ps_rows_clear(c->cfg.rows);
    }
    char dir[PS_RESUME_DIR_MAX + PS_DIR_MAX];
    s_resume_dir(c, v, dir, sizeof dir);
    const ps_checkpoint_rows_t rows = s_rows(c);
    rc = ps_checkpoint_load(dir, v->resume_files, v->resume_parts, v->start_step, c->cfg.store,
                            &rows, &c->cfg.view->job, NULL, why, cap);
    return rc ? rc : ps_consistency_rollback(c->cfg.cons, v->start_step);
}

/* MSG_FAILOVER with takeover: the lost server's replica took its rank in
 * step (this server, when it is that replica), so nothing rolls back: what
 * was held or owed for the step under way is forgotten, since every worker
 * sends it again, and the store, the version and the chunks applied stay. */
static void s_take_over(ps_control_t *c, const ps_view_t *v)
{
    ps_view_t *view = c->cfg.view;
    const int64_t version = ps_consistency_version(c->cfg.cons);
    ps_consistency_forget(c->cfg.cons);
    c->generation = v->generation;
    c->rolled_to = version;
    memcpy(view->servers, v->servers, sizeof v->servers);
    /* a replica heard of no join since its view: the tokens now */
    memcpy(view->worker_tokens, v->worker_tokens, sizeof v->worker_tokens);
    c->cfg.ops.generation(c->cfg.ops.ctx, c->generation);
    if (view->replica_of == v->replaced) {
        view->replica_of = 0;
        /* said under this replica's own tag: the lines after it are S<rank>'s */
        ps_log_info("failover %lld: taking S%d's rank over at version %lld, nothing rolled "
                    "back; logging as S%d from now on", (long long)c->generation,
                    v->replaced - 1, (long long)version, v->replaced - 1);
        if (c->cfg.ops.promoted) {
            c->cfg.ops.promoted(c->cfg.ops.ctx, v->replaced - 1);
        }
    } else {
        ps_log_info("failover %lld: S%d's replica took its rank over; going on at version %lld",
                    (long long)c->generation, v->replaced - 1, (long long)version);
    }
    s_failover_ready(c, version, version, 0);
}

/* MSG_FAILOVER: a lost server was replaced by a spare loading checkpoint N.
 * Every server must be at the same step for a consistent cut, so this one
 * reloads its own keys of checkpoint N too (any number of parts), drops what
 * it held or owed for later steps, and answers FAILOVER_READY; the scheduler
 * sends the workers the rollback once every server has. In async there is
 * no cut to keep: this server keeps its store and version (only the lost
 * server's updates since its checkpoint part are lost) and answers at once.
 * v: the failover's view, unpacked. Returns 0 or the PS_E* of a shard that
 * cannot be reloaded (the job cannot go on). */
static int s_on_failover(ps_control_t *c, const ps_view_t *v)
{
    ps_view_t *view = c->cfg.view;
    if (v->num_servers != view->num_servers || (v->resume_parts < 1 && !v->takeover)) {
        ps_log_warn("dropped a bad failover message from the scheduler");
        return 0;
    }
    if (v->generation <= c->generation) {
        return 0;
    }
    if (v->takeover) {
        s_take_over(c, v);
        return 0;
    }
    const int64_t from = ps_consistency_version(c->cfg.cons);
    const int stepped = ps_job_is_stepped(&view->job);
    const int64_t to = stepped ? v->start_step : from;
    char why[640];
    int rc = s_roll_back(c, v, why, sizeof why);
    if (rc != 0) {
        ps_log_err("failover: cannot roll back to step %lld: %s", (long long)v->start_step, why);
        c->cfg.ops.abort(c->cfg.ops.ctx, why);
        return rc;
    }
    c->generation = v->generation;
    if (stepped && c->cfg.ops.reloaded) {
        c->cfg.ops.reloaded(c->cfg.ops.ctx);
    }
    c->checkpointed = stepped ? v->start_step : c->checkpointed;
    c->rolled_to = to;
    memcpy(view->servers, v->servers, sizeof v->servers);
    c->cfg.ops.generation(c->cfg.ops.ctx, c->generation);
    if (stepped) {
        ps_log_info("failover %lld: rolled back from step %lld to %lld (%s)",
                    (long long)c->generation, (long long)from, (long long)v->start_step,
                    v->resume_dir);
    } else {
        ps_log_info("failover %lld: S%d replaced from %s; going on at version %lld (async)",
                    (long long)c->generation, v->replaced - 1, v->resume_dir, (long long)from);
    }
    s_failover_ready(c, to, from, 0);
    return 0;
}

/* The scheduler's new set of live workers (a worker was lost): steps complete
 * with those from now on; a step the change completes applies (and is
 * checkpointed: ps_control_stepped) at once. Server 0 tells the scheduler
 * the step it took effect at, for its membership line. */
static void s_on_members(ps_control_t *c, const Shardps__Members *m)
{
    unsigned char live[PS_MAX_WORKERS] = {0};
    const int n = m ? m->num_workers : 0;
    if (!m || n != c->workers) {
        ps_log_warn("dropped a bad membership message from the scheduler");
        return;
    }
    for (size_t i = 0; i < m->n_live; i++) { /* checked: each below n */
        live[m->live[i]] = 1;
    }
    int nlive = 0;
    char ranks[256] = "";
    for (int w = 0, at = 0; w < n; w++) {
        nlive += live[w] != 0;
        if (live[w] && at < (int)sizeof ranks - 8) {
            at += snprintf(ranks + at, sizeof ranks - (size_t)at, " W%d", w);
        }
    }
    const int64_t version = ps_consistency_version(c->cfg.cons);
    if (ps_consistency_set_workers(c->cfg.cons, live) != 0) {
        ps_log_warn("membership message with no live worker dropped");
        return;
    }
    ps_log_debug("%d of %d workers live from step %lld:%s", nlive, n, (long long)version,
                 ranks);
    if (c->cfg.rank == 0) { /* the step, for the scheduler's membership line */
        s_send_join_step(c, version, 1);
    }
}

/* The scheduler agrees a future step with every server (server/consistency.h,
 * ps_consistency_hold): we stop at the step in progress and say our version. */
static void s_on_join_prepare(ps_control_t *c, const Shardps__JoinStep *join)
{
    if (join && join->worker >= 0 && join->worker < c->workers) {
        /* the joiner's requests may come before the agreed step is known */
        c->cfg.view->worker_tokens[join->worker] = join->token;
    }
    s_send_join_step(c, ps_consistency_hold(c->cfg.cons), 0);
}

/* The agreed step J: a checkpoint there, a worker live from there; go on. */
static void s_on_join_step(ps_control_t *c, const Shardps__JoinStep *m)
{
    if (!m || m->worker >= c->workers) {
        ps_log_warn("dropped a bad join-step message from the scheduler");
        ps_consistency_join(c->cfg.cons, -1, 0); /* never stay held */
        return;
    }
    const Shardps__JoinStep js = *m;
    if (js.checkpoint) {
        c->checkpoint_at = js.step;
        ps_control_stepped(c); /* held at J already: the cut before any step goes on */
    }
    if (js.worker >= 0) { /* its requests carry the token it registered with */
        c->cfg.view->worker_tokens[js.worker] = js.token;
    }
    if (ps_consistency_join(c->cfg.cons, js.worker, js.step) != 0) {
        ps_log_warn("W%d cannot join at step %lld (version %lld)", (int)js.worker,
                    (long long)js.step, (long long)ps_consistency_version(c->cfg.cons));
    } else if (js.worker >= 0) { /* the scheduler's membership line says it */
        ps_log_debug("W%d live from step %lld", (int)js.worker, (long long)js.step);
    }
}

/* A failover's view: the lost server's replacement, and the rollback. */
static int s_on_failover_view(ps_control_t *c, const Shardps__ClusterView *m)
{
    ps_view_t *v = calloc(1, sizeof *v);
    int rc = 0;
    if (!v || !m || ps_codec_view_from_pb(m, v, NULL, 0) != 0) {
        ps_log_warn("dropped a bad failover message from the scheduler");
    } else {
        rc = s_on_failover(c, v);
    }
    free(v);
    return rc;
}

void ps_control_resume_check(const Shardps__ResumeCheck *q, const char *dir,
                             ps_control_resume_check_t *a)
{
    dir = dir ? dir : q->dir;
    a->msg = (Shardps__ResumeCheck)SHARDPS__RESUME_CHECK__INIT;
    for (size_t i = 0; i < q->n_parts; i++) { /* checked: at most PS_MAX_RESUME_CHECK */
        ps_checkpoint_part_t asked;
        ps_codec_part_from_pb(q->parts[i], &asked, NULL, 0);
        ps_checkpoint_check(dir, &asked, &a->found[i]);
        ps_log_info("resume check: %s/step-%lld/%s: %s", dir, (long long)asked.step,
                    asked.file, a->found[i].size ? "found" : "missing or unreadable");
        ps_codec_part_to_pb(&a->found[i], &a->pb[i]);
        a->ptrs[i] = &a->pb[i];
    }
    a->msg.dir = (char *)dir;
    a->msg.n_parts = q->n_parts;
    a->msg.parts = a->ptrs;
}

int ps_control_handle(ps_control_t *c, ps_msg_type_t type, const void *body, size_t len)
{
    const ProtobufCMessageDescriptor *d =
        type == PS_MSG_FAILOVER ? &shardps__cluster_view__descriptor
        : type == PS_MSG_MEMBERS ? &shardps__members__descriptor
        : type == PS_MSG_JOIN_PREPARE || type == PS_MSG_JOIN_STEP ? &shardps__join_step__descriptor
                                                                   : NULL;
    if (!d) {
        return 0;
    }
    PS_ARENA_ON_STACK(a, 1024);
    const void *m = body ? ps_codec_unpack(d, body, len, a, NULL, 0) : NULL;
    int rc = 0;
    if (type == PS_MSG_FAILOVER) {
        rc = s_on_failover_view(c, m);
    } else if (type == PS_MSG_MEMBERS) {
        s_on_members(c, m);
    } else if (type == PS_MSG_JOIN_PREPARE) {
        s_on_join_prepare(c, m);
    } else {
        s_on_join_step(c, m);
    }
    ps_arena_fini(a);
    return rc;
}
