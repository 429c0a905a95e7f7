/* scheduler/ckpt.c - checkpoints, resume and timed checkpoints (scheduler/ckpt.h). */
#include "scheduler/ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/log.h"
#include "scheduler/agree.h"
#include "scheduler/join.h"
#include "scheduler/manifest.h"
#include "scheduler/restart.h"

/* Where a resume stands: the servers are asked about their parts of the
 * candidate checkpoints before any of them gets the view. */
enum { S_RESUME_NONE, S_RESUME_ASKED, S_RESUME_DONE };

struct ps_ckpt {
    const ps_scheduler_config_t *cfg;
    ps_manifest_t *manifest; /* which parts are durable; NULL: no checkpoints */
    int64_t newest;          /* the newest complete checkpoint's step, -1 none */
    double last_timed;       /* ps_now() of the last timed checkpoint's agreement */
    /* --resume: the candidates (newest first) and what the servers found */
    int resume;              /* S_RESUME_* */
    uint64_t samples;        /* the smallest worker's training set */
    int ncand;
    int64_t cand[PS_MAX_RESUME_CHECK];
    int cand_parts[PS_MAX_RESUME_CHECK];    /* parts of each one's manifest */
    ps_checkpoint_part_t *parts;            /* ncand x PS_MAX_SERVERS, as listed */
    int at;                                 /* the candidate the servers are asked about */
    char refused[1024];                     /* the first refusal of it; "" = none */
    unsigned char answered[PS_MAX_SERVERS]; /* servers that answered about it */
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
        free(c->parts);
        free(c);
        *cp = NULL;
    }
}

int ps_scheduler_check_resume(const ps_scheduler_config_t *cfg, char *why, size_t cap)
{
    char path[4200];
    struct stat sb;
    int64_t step;
    snprintf(path, sizeof path, "%s/scheduler.state", cfg->resume ? cfg->resume : "");
    if (!cfg->resume || cfg->resume_or_start || stat(path, &sb) == 0) {
        return 0; /* a saved job's state: the restart module weighs it */
    }
    char reason[600];
    if (ps_manifest_list(cfg->resume, 0, &step, 1, reason, sizeof reason) > 0) {
        return 0;
    }
    snprintf(why, cap, "--resume %s: %s (--resume-or-start DIR starts from step 0 instead)",
             cfg->resume, reason);
    return PS_ENOENT;
}

/* Candidate c->at is whole on every server: it goes into the view. */
static void s_resume_take(ps_ckpt_t *c, ps_view_t *v)
{
    const ps_scheduler_config_t *cfg = c->cfg;
    const int k = c->at;
    c->resume = S_RESUME_DONE;
    v->start_step = c->cand[k];
    v->resume_parts = c->cand_parts[k];
    memcpy(v->resume_files, &c->parts[(size_t)k * PS_MAX_SERVERS],
           (size_t)v->resume_parts * sizeof *v->resume_files);
    snprintf(v->resume_dir, sizeof v->resume_dir, "%s/step-%lld", cfg->resume,
             (long long)v->start_step);
    c->newest = v->start_step;
    ps_log_info("resuming from %s at step %lld (%d parts, each whole on its server)",
                v->resume_dir, (long long)v->start_step, v->resume_parts);
    const int old = ps_manifest_workers(v->resume_dir);
    if (old > 0 && old != cfg->workers) {
        v->resume_step = v->start_step;
        v->start_step =
            ps_join_map_step(v->start_step, old, cfg->workers, cfg->job.batch, c->samples);
        ps_log_warn("resume: the checkpoint's job had %d workers, this one %d: its step %lld "
                    "maps to step %lld at the same data position",
                    old, cfg->workers, (long long)v->resume_step, (long long)v->start_step);
    }
}

/* Asks every server for the size and CRC-32 of its own part of candidate
 * c->at, as it finds it on its disk (MSG_RESUME_CHECK; a server with no
 * part in it is asked about nothing, and answers). One candidate at a
 * time, newest first: no older part is read once one checks out. */
static void s_resume_ask_next(ps_ckpt_t *c, ps_scheduler_t *s)
{
    const int k = c->at;
    memset(c->answered, 0, sizeof c->answered);
    c->refused[0] = '\0';
    for (int r = 0; r < c->cfg->servers; r++) {
        Shardps__Checkpoint pb, *ptr = &pb;
        Shardps__ResumeCheck q = SHARDPS__RESUME_CHECK__INIT;
        q.dir = (char *)c->cfg->resume;
        if (r < c->cand_parts[k]) {
            ps_codec_part_to_pb(&c->parts[(size_t)k * PS_MAX_SERVERS + r], &pb);
            q.n_parts = 1;
            q.parts = &ptr;
        }
        ps_msg_send_ctrl(s->router, &s->nodes[r].route, PS_MSG_RESUME_CHECK, PS_ROLE_SCHEDULER,
                         0, &q.base);
    }
    ps_log_info("resume: asking the %d servers about their parts of %s/step-%lld",
                c->cfg->servers, c->cfg->resume, (long long)c->cand[k]);
}

/* --resume DIR: the candidates, the checkpoints whose manifests check out
 * (newest first), and the servers asked about the first. Returns 1
 * (asked), 0 (no candidate, --resume-or-start: a fresh start) or a PS_E*
 * (the job failed). */
static int s_resume_ask(ps_ckpt_t *c, ps_scheduler_t *s, const ps_view_t *v)
{
    const ps_scheduler_config_t *cfg = c->cfg;
    char why[600];
    c->ncand = ps_manifest_list(cfg->resume, v->num_params, c->cand, PS_MAX_RESUME_CHECK, why,
                                sizeof why);
    if (c->ncand <= 0) {
        c->ncand = 0;
        c->resume = S_RESUME_DONE;
        if (cfg->resume_or_start) {
            ps_log_warn("resume: %s; starting from step 0 (--resume-or-start)", why);
            return 0;
        }
        ps_scheduler_fail_usage(s, "resume: %s", why);
        return PS_ENOENT;
    }
    if (!c->parts && !(c->parts = calloc((size_t)PS_MAX_RESUME_CHECK * PS_MAX_SERVERS,
                                         sizeof *c->parts))) {
        ps_scheduler_fail(s, "out of memory");
        return PS_ENOMEM;
    }
    for (int k = 0; k < c->ncand; k++) {
        char stepdir[4200];
        snprintf(stepdir, sizeof stepdir, "%s/step-%lld", cfg->resume, (long long)c->cand[k]);
        c->cand_parts[k] = ps_manifest_check(stepdir, c->cand[k], v->num_params,
                                             &c->parts[(size_t)k * PS_MAX_SERVERS], why,
                                             sizeof why);
    }
    c->resume = S_RESUME_ASKED;
    c->at = 0;
    s_resume_ask_next(c, s);
    return 1;
}

/* Where servers write checkpoints, and the manifest tracker. */
static int s_setup_dir(ps_ckpt_t *c, ps_view_t *v)
{
    const ps_scheduler_config_t *cfg = c->cfg;
    if ((cfg->checkpoint_every > 0 || cfg->checkpoint_seconds > 0) && !c->manifest) {
        snprintf(v->checkpoint_dir, sizeof v->checkpoint_dir, "%s", cfg->checkpoint_dir);
        v->checkpoint_every = cfg->checkpoint_every;
        return ps_manifest_new(&c->manifest, v);
    }
    return 0;
}

int ps_ckpt_setup(ps_ckpt_t *c, ps_scheduler_t *s, ps_view_t *v, uint64_t samples)
{
    c->samples = samples;
    if (c->cfg->resume && c->resume == S_RESUME_NONE) {
        const int rc = s_resume_ask(c, s, v);
        if (rc != 0) {
            return rc;
        }
    }
    if (c->resume == S_RESUME_ASKED) {
        return 1;
    }
    if (s_setup_dir(c, v) != 0) {
        ps_scheduler_fail(s, "out of memory");
        return PS_ENOMEM;
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

/* Server n's answer to the resume check of candidate c->at: it is refused
 * unless n found its part whole. The last answer decides: the view (and the
 * servers get it), the next candidate, or, with none left, the end (exit 2:
 * the flags named nothing to resume). */
static void s_on_resume_check(ps_ckpt_t *c, ps_scheduler_t *s, ps_node_t *n, ps_msg_t *m)
{
    const Shardps__ResumeCheck *a = ps_msg_unpack_body(m, &shardps__resume_check__descriptor);
    char tag[16];
    ps_node_tag(n, tag, sizeof tag);
    if (n->role != PS_ROLE_SERVER || c->resume != S_RESUME_ASKED || !a ||
        c->answered[n->rank]) {
        ps_log_warn("dropped a bad resume check answer from %s", tag);
        return;
    }
    c->answered[n->rank] = 1;
    const int k = c->at;
    if (n->rank < c->cand_parts[k] && !c->refused[0]) {
        const ps_checkpoint_part_t *want = &c->parts[(size_t)k * PS_MAX_SERVERS + n->rank];
        const Shardps__Checkpoint *got = a->n_parts == 1 ? a->parts[0] : NULL;
        if (!got || got->step != want->step || strcmp(got->file, want->file) || !got->size) {
            snprintf(c->refused, sizeof c->refused, "%s's %s/step-%lld/%s is missing or "
                     "unreadable", tag, a->dir, (long long)want->step, want->file);
        } else if (got->size != want->size || got->crc32 != want->crc32) {
            snprintf(c->refused, sizeof c->refused, "%s's %s/step-%lld/%s is %llu bytes "
                     "with CRC-32 %08x, the manifest says %llu bytes, %08x (truncated or "
                     "corrupt)", tag, a->dir, (long long)want->step, want->file,
                     (unsigned long long)got->size, (unsigned)got->crc32,
                     (unsigned long long)want->size, (unsigned)want->crc32);
        }
    }
    for (int r = 0; r < c->cfg->servers; r++) {
        if (!c->answered[r]) {
            return;
        }
    }
    if (!c->refused[0]) {
        s_resume_take(c, s->view);
        if (s_setup_dir(c, s->view) != 0) {
            ps_scheduler_fail(s, "out of memory");
            return;
        }
        ps_start_servers(s);
        return;
    }
    ps_log_warn("resume: skipping checkpoint step-%lld: %s", (long long)c->cand[k], c->refused);
    if (++c->at < c->ncand) {
        s_resume_ask_next(c, s);
        return;
    }
    c->resume = S_RESUME_DONE;
    ps_scheduler_fail_usage(s, "resume: no checkpoint of %s is whole on the servers (each "
                            "one's reason is logged above)", c->cfg->resume);
}

/* A server's part of a checkpoint is durable; or its answer to a resume check. */
static int s_on_message(void *self, ps_scheduler_t *s, ps_node_t *n, ps_msg_t *m)
{
    ps_ckpt_t *c = self;
    if (n && m->hdr.type == PS_MSG_RESUME_CHECK) {
        s_on_resume_check(c, s, n, m);
        return 1;
    }
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
