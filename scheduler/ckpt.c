/* scheduler/ckpt.c - checkpoints, resume and timed checkpoints (scheduler/ckpt.h). */
#include "scheduler/ckpt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/job.h"
#include "common/log.h"
#include "scheduler/join.h"
#include "scheduler/manifest.h"

/* Where a resume stands: the servers are asked about their parts of the
 * candidate checkpoints before any of them gets the view. */
enum { S_RESUME_NONE, S_RESUME_ASKED, S_RESUME_DONE };

struct ps_ckpt {
    const ps_sched_ops_t *ops; /* the core (borrowed) */
    const ps_scheduler_config_t *cfg; /* ops->cfg */
    ps_agree_t *agree;       /* the timed checkpoints' agreements (borrowed) */
    ps_manifest_t *manifest; /* which parts are durable; NULL: no checkpoints */
    int64_t newest;          /* the newest complete checkpoint's step, -1 none */
    int timer;               /* the timed checkpoints' clock runs (the job ran) */
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
    /* the choice (candidate `at`, whole on every server), for the view */
    int chosen;                             /* one was made */
    int viewed;                             /* and went into the core's view */
    int64_t start_step;                     /* the step the job starts at (mapped) */
    int64_t resume_step;                    /* mapped: the checkpoint's step; else 0 */
    char resume_dir[PS_RESUME_DIR_MAX];     /* DIR/step-N */
    ps_manifest_job_t job;                  /* what this job's manifests record */
    ps_manifest_job_t from;                 /* the chosen checkpoint's job */
    char changed[1024];                     /* "--lr 0.05 -> 0.5, ...": overridden */
};

int ps_ckpt_new(ps_ckpt_t **out, const ps_sched_ops_t *ops, ps_agree_t *agree)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        return PS_ENOMEM;
    }
    (*out)->ops = ops;
    (*out)->cfg = ops->cfg;
    (*out)->agree = agree;
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

/* How a job's flags differ from a checkpoint's. */
typedef struct {
    char changed[1024]; /* allowed: "--lr '0.05' -> '0.5', ..." */
    char theirs[1024];  /* refused, the checkpoint's: "--lr '0.05' --batch '64'" */
    char ours[1024];    /* and the job's: "--lr '0.5' --batch '32'" */
    char names[512];    /* and their names: "lr,batch" */
    int refused;        /* how many */
} s_diff_t;

/* Appends to buf (of cap, used *n) what fmt says, never past its end. */
static void s_add(char *buf, size_t cap, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_add(char *buf, size_t cap, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + *n, cap - *n, fmt, ap);
    va_end(ap);
    *n = w < 0 ? *n : *n + (size_t)w < cap ? *n + (size_t)w : cap - 1;
}

/* The flags of job that differ from checkpoint ck's config, the allowed
 * ones (a mask of resume fields) apart, into *d. */
static void s_diff(const ps_manifest_job_t *ck, const ps_job_t *job, unsigned allowed,
                   s_diff_t *d)
{
    ps_job_field_t now[PS_JOB_RESUME_FIELDS];
    ps_job_resume_fields(job, now);
    size_t nc = 0, nt = 0, no = 0, nn = 0;
    memset(d, 0, sizeof *d);
    for (int i = 0; ck->has_config && i < PS_JOB_RESUME_FIELDS; i++) {
        const char *was = ck->config[i].value, *is = now[i].value, *f = now[i].flag;
        if (!strcmp(was, is)) {
            continue;
        }
        if (allowed & (1u << i)) {
            s_add(d->changed, sizeof d->changed, &nc, "%s--%s '%s' -> '%s'", nc ? ", " : "", f,
                  was, is);
            continue;
        }
        s_add(d->theirs, sizeof d->theirs, &nt, "%s--%s '%s'", nt ? " " : "", f, was);
        s_add(d->ours, sizeof d->ours, &no, "%s--%s '%s'", no ? " " : "", f, is);
        s_add(d->names, sizeof d->names, &nn, "%s%s", nn ? "," : "", f);
        d->refused++;
    }
}

/* --resume DIR: checkpoint step of DIR must have this job's flags, the
 * overridden ones apart. Returns 0, or PS_EINVAL (or the manifest's
 * PS_E*) with a one-line reason in why. warn: say so of a manifest from
 * before configurations were recorded. */
static int s_check_config(const ps_scheduler_config_t *cfg, int64_t step, int warn, char *why,
                          size_t cap)
{
    char stepdir[4200];
    ps_manifest_job_t *ck = malloc(sizeof *ck);
    s_diff_t *d = malloc(sizeof *d);
    snprintf(stepdir, sizeof stepdir, "%s/step-%lld", cfg->resume, (long long)step);
    int rc = ck && d ? ps_manifest_read_job(stepdir, ck, why, cap) : PS_ENOMEM;
    if (rc == 0 && warn) {
        ps_log_warn("resume: %s/manifest.json records no job configuration (written by an "
                    "earlier version): the flags are not checked against it", stepdir);
    }
    if (rc == 1) {
        s_diff(ck, &cfg->job, cfg->resume_override, d);
        rc = d->refused ? PS_EINVAL : 0;
    }
    if (rc == PS_EINVAL) {
        snprintf(why, cap, "--resume %s: step-%lld of job %s ran with %s, this job has %s: "
                 "give the checkpoint's values, or change them with --resume-override %s",
                 cfg->resume, (long long)step, ck->job_id, d->theirs, d->ours, d->names);
    }
    free(d);
    free(ck);
    return rc < 0 ? rc : 0;
}

int ps_scheduler_check_resume(const ps_scheduler_config_t *cfg, char *why, size_t cap)
{
    char path[4200], reason[600];
    struct stat sb;
    int64_t step;
    if (!cfg->resume) {
        if (cfg->checkpoint_dir &&
            ps_manifest_foreign(cfg->checkpoint_dir, cfg->job_id, reason, sizeof reason)) {
            snprintf(why, cap, "--checkpoint-dir %s holds %s: --resume %s continues that job; "
                     "a new job needs a directory of its own", cfg->checkpoint_dir, reason,
                     cfg->checkpoint_dir);
            return PS_EINVAL;
        }
        return 0;
    }
    snprintf(path, sizeof path, "%s/scheduler.state", cfg->resume);
    if (ps_manifest_list(cfg->resume, 0, &step, 1, reason, sizeof reason) > 0) {
        return s_check_config(cfg, step, 1, why, cap);
    }
    if (cfg->resume_or_start || stat(path, &sb) == 0) {
        return 0; /* a saved job's state: the restart module weighs it */
    }
    snprintf(why, cap, "--resume %s: %s (--resume-or-start DIR starts from step 0 instead)",
             cfg->resume, reason);
    return PS_ENOENT;
}

void ps_ckpt_set_job(ps_ckpt_t *c, const char *job_id)
{
    snprintf(c->job.job_id, sizeof c->job.job_id, "%s", job_id);
    ps_job_resume_fields(&c->cfg->job, c->job.config);
    ps_job_resume_hash(c->job.config, c->job.config_hash, sizeof c->job.config_hash);
    c->job.has_config = 1;
}

/* This job descends from the job of checkpoint stepdir (of step): its
 * lineage, and that job itself unless it is this one (a restarted
 * scheduler's). Reads the checkpoint's job into c->from. */
static void s_inherit(ps_ckpt_t *c, const char *stepdir, int64_t step)
{
    ps_manifest_job_t *j = &c->job, *from = &c->from;
    if (ps_manifest_read_job(stepdir, from, NULL, 0) < 0) {
        memset(from, 0, sizeof *from);
    }
    j->nlineage = from->nlineage;
    memcpy(j->lineage, from->lineage, sizeof j->lineage);
    if (strcmp(from->job_id, j->job_id) != 0) {
        if (j->nlineage == PS_MANIFEST_MAX_LINEAGE) { /* the oldest ancestor goes */
            memmove(&j->lineage[0], &j->lineage[1],
                    (PS_MANIFEST_MAX_LINEAGE - 1) * sizeof j->lineage[0]);
            j->nlineage--;
        }
        const int k = j->nlineage++;
        snprintf(j->lineage[k].job_id, sizeof j->lineage[k].job_id, "%s", from->job_id);
        j->lineage[k].step = step;
    }
}

/* Candidate c->at is whole on every server: the choice. It is logged here,
 * once; the view gets it when the core asks (ps_ckpt_view), maybe again. */
static void s_resume_take(ps_ckpt_t *c)
{
    const ps_scheduler_config_t *cfg = c->cfg;
    const int k = c->at;
    c->resume = S_RESUME_DONE;
    c->chosen = 1;
    c->start_step = c->cand[k];
    c->resume_step = 0;
    snprintf(c->resume_dir, sizeof c->resume_dir, "%s/step-%lld", cfg->resume,
             (long long)c->start_step);
    c->newest = c->start_step;
    ps_log_info("resuming from %s at step %lld (%d parts, each whole on its server)",
                c->resume_dir, (long long)c->start_step, c->cand_parts[k]);
    s_inherit(c, c->resume_dir, c->start_step);
    s_diff_t *d = malloc(sizeof *d);
    if (d) {
        s_diff(&c->from, &cfg->job, ~0u, d);
        snprintf(c->changed, sizeof c->changed, "%s", d->changed);
        free(d);
    }
    if (c->changed[0]) {
        ps_log_warn("resume: changed from %s's (--resume-override): %s", c->resume_dir,
                    c->changed);
    }
    const int old = ps_manifest_workers(c->resume_dir);
    if (old > 0 && old != cfg->workers) {
        c->resume_step = c->start_step;
        c->start_step =
            ps_join_map_step(c->start_step, old, cfg->workers, cfg->job.batch, c->samples);
        ps_log_warn("resume: the checkpoint's job had %d workers, this one %d: its step %lld "
                    "maps to step %lld at the same data position",
                    old, cfg->workers, (long long)c->resume_step, (long long)c->start_step);
    }
}

/* Asks every server for the size and CRC-32 of its own part of candidate
 * c->at, as it finds it on its disk (MSG_RESUME_CHECK; a server with no
 * part in it is asked about nothing, and answers). One candidate at a
 * time, newest first: no older part is read once one checks out. */
static void s_resume_ask_next(ps_ckpt_t *c)
{
    const ps_sched_ops_t *ops = c->ops;
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
        ops->send(ops->core, &ops->node(ops->core, PS_ROLE_SERVER, r)->route,
                  PS_MSG_RESUME_CHECK, &q.base);
    }
    ps_log_info("resume: asking the %d servers about their parts of %s/step-%lld",
                c->cfg->servers, c->cfg->resume, (long long)c->cand[k]);
}

/* --resume DIR: the candidates, the checkpoints whose manifests check out
 * (newest first), and the servers asked about the first. Returns 1
 * (asked), 0 (no candidate, --resume-or-start: a fresh start) or a PS_E*
 * (the job failed). */
static int s_resume_ask(ps_ckpt_t *c, const ps_view_t *v)
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
        ps_sched_fail(c->ops, 1, "resume: %s", why);
        return PS_ENOENT;
    }
    if (!c->parts && !(c->parts = calloc((size_t)PS_MAX_RESUME_CHECK * PS_MAX_SERVERS,
                                         sizeof *c->parts))) {
        ps_sched_fail(c->ops, 0, "out of memory");
        return PS_ENOMEM;
    }
    int kept = 0;
    for (int k = 0; k < c->ncand; k++) {
        char stepdir[4200];
        snprintf(stepdir, sizeof stepdir, "%s/step-%lld", cfg->resume, (long long)c->cand[k]);
        if (s_check_config(cfg, c->cand[k], 0, why, sizeof why) != 0) {
            ps_log_warn("resume: skipping checkpoint step-%lld: %s", (long long)c->cand[k], why);
            continue; /* an older one of the lineage, from before a changed flag */
        }
        c->cand[kept] = c->cand[k];
        c->cand_parts[kept] = ps_manifest_check(stepdir, c->cand[k], v->num_params,
                                                &c->parts[(size_t)kept * PS_MAX_SERVERS], why,
                                                sizeof why);
        kept++;
    }
    if ((c->ncand = kept) == 0) {
        c->resume = S_RESUME_DONE;
        ps_sched_fail(c->ops, 1, "resume: no checkpoint of %s has this job's flags (each "
                      "one's reason is logged)", cfg->resume);
        return PS_EINVAL;
    }
    c->resume = S_RESUME_ASKED;
    c->at = 0;
    s_resume_ask_next(c);
    return 1;
}

int ps_ckpt_setup(ps_ckpt_t *c, uint64_t samples)
{
    c->samples = samples;
    if (c->cfg->resume && c->resume == S_RESUME_NONE) {
        const int rc = s_resume_ask(c, c->ops->view(c->ops->core));
        if (rc != 0) {
            return rc;
        }
    }
    return c->resume == S_RESUME_ASKED ? 1 : 0;
}

int ps_ckpt_view(ps_ckpt_t *c, ps_view_t *v)
{
    const ps_scheduler_config_t *cfg = c->cfg;
    /* Written once each: a failover's rollback or a saved job's view may
     * have changed these since, and theirs stand. */
    if ((cfg->checkpoint_every > 0 || cfg->checkpoint_seconds > 0) && !c->manifest) {
        snprintf(v->checkpoint_dir, sizeof v->checkpoint_dir, "%s", cfg->checkpoint_dir);
        v->checkpoint_every = cfg->checkpoint_every;
        if (ps_manifest_new(&c->manifest, v, &c->job) != 0) {
            return PS_ENOMEM;
        }
    }
    if (c->chosen && !c->viewed) {
        const int k = c->at;
        c->viewed = 1;
        v->start_step = c->start_step;
        v->resume_step = c->resume_step;
        v->resume_parts = c->cand_parts[k];
        memcpy(v->resume_files, &c->parts[(size_t)k * PS_MAX_SERVERS],
               (size_t)v->resume_parts * sizeof *v->resume_files);
        snprintf(v->resume_dir, sizeof v->resume_dir, "%s", c->resume_dir);
    }
    return 0;
}

int ps_ckpt_saved_job(ps_ckpt_t *c, const ps_view_t *v, int64_t newest)
{
    c->newest = newest;
    if (newest > 0 && v->checkpoint_dir[0]) {
        char stepdir[4200];
        snprintf(stepdir, sizeof stepdir, "%s/step-%lld", v->checkpoint_dir, (long long)newest);
        s_inherit(c, stepdir, newest); /* the saved job's lineage goes on */
    }
    if (v->checkpoint_dir[0] && !c->manifest) {
        return ps_manifest_new(&c->manifest, v, &c->job);
    }
    return 0;
}

json_t *ps_ckpt_json(const ps_ckpt_t *c)
{
    if (!c->chosen) {
        return json_null();
    }
    const ps_manifest_job_t *f = &c->from;
    return json_pack("{s:s, s:I, s:o, s:o}", "from", c->resume_dir, "step",
                     (json_int_t)(c->resume_step ? c->resume_step : c->start_step), "job_id",
                     f->job_id[0] ? ps_json_text(f->job_id) : json_null(), "changed",
                     c->changed[0] ? ps_json_text(c->changed) : json_null());
}

int ps_ckpt_enabled(const ps_ckpt_t *c)
{
    return c->manifest != NULL;
}

int64_t ps_ckpt_newest(const ps_ckpt_t *c)
{
    return c->newest;
}

/* Server n's part of candidate c->at as it found it (a: its answer): a
 * refusal into c->refused, the first one only, unless it is the manifest's. */
static void s_resume_weigh(ps_ckpt_t *c, const ps_node_t *n, const Shardps__ResumeCheck *a)
{
    const int k = c->at;
    char tag[16];
    if (n->rank >= c->cand_parts[k] || c->refused[0]) {
        return;
    }
    ps_node_tag(n, tag, sizeof tag);
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

/* Server n's answer to the resume check of candidate c->at: it is refused
 * unless n found its part whole. The last answer decides: the choice (and
 * the core sends the servers the view), the next candidate, or, with none
 * left, the end (exit 2: the flags named nothing to resume). */
static void s_on_resume_check(ps_ckpt_t *c, const ps_node_t *n, ps_msg_t *m)
{
    const Shardps__ResumeCheck *a = ps_msg_unpack_body(m, &shardps__resume_check__descriptor);
    char tag[16];
    if (n->role != PS_ROLE_SERVER || c->resume != S_RESUME_ASKED || !a ||
        n->rank < 0 || n->rank >= c->cfg->servers || c->answered[n->rank]) {
        ps_log_warn("dropped a bad resume check answer from %s",
                    ps_node_tag(n, tag, sizeof tag));
        return;
    }
    c->answered[n->rank] = 1;
    s_resume_weigh(c, n, a);
    for (int r = 0; r < c->cfg->servers; r++) {
        if (!c->answered[r]) {
            return;
        }
    }
    if (!c->refused[0]) {
        s_resume_take(c);
        c->ops->start_servers(c->ops->core);
        return;
    }
    ps_log_warn("resume: skipping checkpoint step-%lld: %s", (long long)c->cand[c->at],
                c->refused);
    if (++c->at < c->ncand) {
        s_resume_ask_next(c);
        return;
    }
    c->resume = S_RESUME_DONE;
    ps_sched_fail(c->ops, 1, "resume: no checkpoint of %s is whole on the servers (each "
                  "one's reason is logged above)", c->cfg->resume);
}

/* A server's part of a checkpoint is durable; or its answer to a resume check. */
static int s_on_message(void *self, const ps_node_t *n, ps_msg_t *m)
{
    ps_ckpt_t *c = self;
    if (n && m->hdr.type == PS_MSG_RESUME_CHECK) {
        s_on_resume_check(c, n, m);
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
        c->ops->save_state(c->ops->core);
    }
    return 1;
}

/* RUNNING, --checkpoint-every Ns: a checkpoint agreed with every server when
 * one is due and no other agreement runs (a joiner's goes first). The clock
 * starts on the first tick that finds the job running (its view sent, or a
 * restarted scheduler's job back). */
static void s_on_tick(void *self, double now)
{
    ps_ckpt_t *c = self;
    int64_t J;
    if (ps_sched_phase(c->ops) != PS_PHASE_RUNNING) {
        return;
    }
    if (!c->timer) {
        c->timer = 1;
        c->last_timed = now;
    }
    if (ps_agree_active(c->agree)) {
        if (ps_agree_checkpoint(c->agree) && ps_agree_ready(c->agree, &J)) {
            ps_agree_commit(c->agree, J, -1, 0);
            ps_log_debug("timed checkpoint agreed at step %lld", (long long)J);
        }
        return;
    }
    if (c->cfg->checkpoint_seconds > 0 && now - c->last_timed >= c->cfg->checkpoint_seconds) {
        c->last_timed = now;
        ps_agree_start(c->agree, -1, 0, 1);
    }
}

const ps_sched_events_t ps_ckpt_events = {
    .on_message = s_on_message,
    .on_tick = s_on_tick,
};
