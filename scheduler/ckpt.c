/* scheduler/ckpt.c - checkpoints, resume and timed checkpoints (scheduler/ckpt.h). */
#include "scheduler/ckpt.h"

#include <stdlib.h>

#include "common/error.h"
#include "common/log.h"
#include "scheduler/agree.h"
#include "scheduler/join.h"
#include "scheduler/manifest.h"
#include "scheduler/restart.h"

struct ps_ckpt {
    const ps_scheduler_config_t *cfg;
    ps_manifest_t *manifest; /* which parts are durable; NULL: no checkpoints */
    int64_t newest;          /* the newest complete checkpoint's step, -1 none */
    double last_timed;       /* ps_now() of the last timed checkpoint's agreement */
};

int ps_ckpt_new(ps_ckpt_t **out, const ps_scheduler_config_t *cfg)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        return PS_ENOMEM;
    }
    (*out)->cfg = cfg;
    (*out)->newest = -1;
    return 0;
}

void ps_ckpt_destroy(ps_ckpt_t **cp)
{
    ps_ckpt_t *c = *cp;
    if (c) {
        ps_manifest_destroy(&c->manifest);
        free(c);
        *cp = NULL;
    }
}

/* --resume DIR: the newest complete checkpoint of DIR into the view. */
static void s_resume(ps_ckpt_t *c, ps_view_t *v, uint64_t samples)
{
    const ps_scheduler_config_t *cfg = c->cfg;
    if (ps_manifest_find(cfg->resume, v->num_params, &v->start_step, &v->resume_parts,
                         v->resume_dir, sizeof v->resume_dir) != 0) {
        ps_log_warn("resume: no complete checkpoint in %s; starting from step 0", cfg->resume);
        return;
    }
    c->newest = v->start_step;
    ps_log_info("resuming from %s at step %lld (%d parts)", v->resume_dir,
                (long long)v->start_step, v->resume_parts);
    const int old = ps_manifest_workers(v->resume_dir);
    if (old > 0 && old != cfg->workers) {
        v->resume_step = v->start_step;
        v->start_step =
            ps_join_map_step(v->start_step, old, cfg->workers, cfg->job.batch, samples);
        ps_log_warn("resume: the checkpoint's job had %d workers, this one %d: its step %lld "
                    "maps to step %lld at the same data position",
                    old, cfg->workers, (long long)v->resume_step, (long long)v->start_step);
    }
}

int ps_ckpt_setup(ps_ckpt_t *c, ps_view_t *v, uint64_t samples)
{
    const ps_scheduler_config_t *cfg = c->cfg;
    if (cfg->resume) {
        s_resume(c, v, samples);
    }
    if (cfg->checkpoint_every > 0 || cfg->checkpoint_seconds > 0) {
        snprintf(v->checkpoint_dir, sizeof v->checkpoint_dir, "%s", cfg->checkpoint_dir);
        v->checkpoint_every = cfg->checkpoint_every;
        return ps_manifest_new(&c->manifest, v);
    }
    return 0;
}

int ps_ckpt_saved_job(ps_ckpt_t *c, const ps_view_t *v, int64_t newest)
{
    c->newest = newest;
    if (v->checkpoint_dir[0] && !c->manifest) {
        return ps_manifest_new(&c->manifest, v);
    }
    return 0;
}

int ps_ckpt_enabled(const ps_ckpt_t *c)
{
    return c->manifest != NULL;
}

int64_t ps_ckpt_newest(const ps_ckpt_t *c)
{
    return c->newest;
}

void ps_ckpt_timer_start(ps_ckpt_t *c, double now)
{
    c->last_timed = now;
}

/* A server's part of a checkpoint is durable. */
static int s_on_message(void *self, ps_scheduler_t *s, ps_node_t *n, ps_msg_t *m)
{
    ps_ckpt_t *c = self;
    if (!n || m->hdr.type != PS_MSG_CHECKPOINT) {
        return 0;
    }
    ps_checkpoint_part_t part;
    const Shardps__Checkpoint *cp = ps_msg_unpack_body(m, &shardps__checkpoint__descriptor);
    char tag[16];
    if (n->role != PS_ROLE_SERVER || !c->manifest || !cp ||
        ps_codec_part_from_pb(cp, &part, NULL, 0) != 0) {
        ps_log_warn("dropped a bad checkpoint report from %s",
                    ps_node_tag(n, tag, sizeof tag));
        return 1;
    }
    if (ps_manifest_add(c->manifest, n->rank, &part) == 1) {
        c->newest = part.step;
        ps_restart_save(s->restart, s);
    }
    return 1;
}

/* RUNNING, --checkpoint-every Ns: a checkpoint agreed with every server when
 * one is due and no other agreement runs (a joiner's goes first). */
static void s_on_tick(void *self, ps_scheduler_t *s, double now)
{
    ps_ckpt_t *c = self;
    int64_t J;
    if (s->phase != PS_PHASE_RUNNING) {
        return;
    }
    if (ps_agree_active(s->agree)) {
        if (ps_agree_checkpoint(s->agree) && ps_agree_ready(s->agree, &J)) {
            ps_agree_commit(s->agree, s, J, -1, 0);
            ps_log_debug("timed checkpoint agreed at step %lld", (long long)J);
        }
        return;
    }
    if (c->cfg->checkpoint_seconds > 0 && now - c->last_timed >= c->cfg->checkpoint_seconds) {
        c->last_timed = now;
        ps_agree_start(s->agree, s, -1, 0, 1);
    }
}

const ps_sched_events_t ps_ckpt_events = {
    .on_message = s_on_message,
    .on_tick = s_on_tick,
};
