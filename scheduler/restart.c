/* scheduler/restart.c - the scheduler's own state file, and a job brought
 * back by a restarted scheduler (scheduler/restart.h). */
#include "scheduler/restart.h"

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
#include "scheduler/ckpt.h"
#include "scheduler/join.h"

struct ps_restart {
    const ps_scheduler_config_t *cfg;
    ps_view_t *saved;          /* the view of the saved job, whose nodes may
                                  register again; NULL: none */
    Shardps__JoinSchedulerState *state; /* the rest of that state, as read (owned);
                                           NULL with saved */
    int restarts;              /* scheduler restarts of this job */
    double t_recover;          /* ps_now() when its first node registered again */
};

static const char s_magic[] = "shardps-scheduler-state-1\n";

int ps_restart_new(ps_restart_t **out, const ps_scheduler_config_t *cfg)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        return PS_ENOMEM;
    }
    (*out)->cfg = cfg;
    return 0;
}

void ps_restart_destroy(ps_restart_t **rp)
{
    ps_restart_t *r = *rp;
    if (r) {
        free(r->saved);
        if (r->state) {
            shardps__join_scheduler_state__free_unpacked(r->state, NULL);
        }
        free(r);
        *rp = NULL;
    }
}

int ps_restart_count(const ps_restart_t *r)
{
    return r->restarts;
}

static void s_state_path(const char *dir, char *path, size_t cap)
{
    snprintf(path, cap, "%s/scheduler.state", dir);
}

void ps_restart_save(const ps_restart_t *r, ps_scheduler_t *s)
{
    const char *dir = s->cfg->checkpoint_dir;
    if (!dir || !s->view->num_params) {
        return;
    }
    Shardps__JoinSchedulerState st = SHARDPS__JOIN_SCHEDULER_STATE__INIT;
    int32_t lost[PS_MAX_WORKERS];
    st.run_id = s->run_id;
    st.membership_changes = s->membership_changes;
    st.workers_joined = ps_join_count(s->join);
    st.restarts = r->restarts;
    st.checkpoint = ps_ckpt_newest(s->ckpt);
    st.seconds = ps_now() - s->t_view;
    st.finished = s->phase == PS_PHASE_FINISHED || s->phase == PS_PHASE_FAILED;
    st.lost = lost;
    for (int w = 0; w < s->cfg->workers; w++) {
        if (ps_scheduler_worker(s, w)->lost) {
            lost[st.n_lost++] = w;
        }
    }
    uint8_t *body;
    size_t len;
    char path[4096], why[256] = "out of memory";
    /* The workers' tokens go with it (the view's servers' copy): a restarted
     * scheduler gives them to a spare that replaces a server. */
    if (ps_scheduler_pack_state(s, &st, &body, &len) != 0) {
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
static int s_same_job(const ps_scheduler_config_t *c, const ps_view_t *v, char *why, size_t cap)
{
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

/* The state in buf (len bytes), when its CRC-32 checks out and it decodes
 * (and its view, into v): caller owns the result; free with
 * shardps__join_scheduler_state__free_unpacked(st, NULL). NULL otherwise. */
static Shardps__JoinSchedulerState *s_decode(const uint8_t *buf, size_t len, ps_view_t *v)
{
    const size_t head = sizeof s_magic - 1 + 4;
    if (len < head || memcmp(buf, s_magic, sizeof s_magic - 1) ||
        (uint32_t)crc32(0L, buf + head, (uInt)(len - head)) !=
            ((uint32_t)buf[head - 4] | (uint32_t)buf[head - 3] << 8 |
             (uint32_t)buf[head - 2] << 16 | (uint32_t)buf[head - 1] << 24)) {
        return NULL;
    }
    Shardps__JoinSchedulerState *st = ps_codec_unpack(
        &shardps__join_scheduler_state__descriptor, buf + head, len - head, NULL, NULL, 0);
    Shardps__ClusterView *cv =
        st ? shardps__cluster_view__unpack(NULL, st->view.len, st->view.data) : NULL;
    if (!cv || ps_codec_view_from_pb(cv, v, NULL, 0) != 0) {
        if (st) {
            shardps__join_scheduler_state__free_unpacked(st, NULL);
        }
        st = NULL;
    }
    if (cv) {
        shardps__cluster_view__free_unpacked(cv, NULL);
    }
    return st;
}

int ps_restart_load(ps_restart_t *r, uint64_t *run_id)
{
    if (!r->cfg->resume) {
        return 0;
    }
    char path[4096], why[200] = "";
    size_t len = 0;
    s_state_path(r->cfg->resume, path, sizeof path);
    uint8_t *buf = s_read(path, &len);
    ps_view_t *v = calloc(1, sizeof *v);
    Shardps__JoinSchedulerState *st = NULL;
    if (!buf) {
        ps_log_debug("no scheduler state in %s", r->cfg->resume);
    } else if (!v) {
        snprintf(why, sizeof why, "out of memory");
    } else if (!(st = s_decode(buf, len, v))) {
        snprintf(why, sizeof why, "it is corrupt");
    } else if (st->finished) {
        ps_log_info("%s: its job ended; nodes that register start from its newest "
                    "checkpoint", path);
    } else if (s_same_job(r->cfg, v, why, sizeof why)) {
        r->saved = v;
        r->state = st;
        *run_id = st->run_id; /* the job keeps its id */
        ps_log_info("%s: job %016llx ran with checkpoint step %lld complete; its nodes may "
                    "register again (else new ones start from that checkpoint)", path,
                    (unsigned long long)st->run_id, (long long)st->checkpoint);
        v = NULL;
        st = NULL;
    }
    if (why[0]) {
        ps_log_warn("%s: %s; its nodes cannot register again", path, why);
    }
    if (st) {
        shardps__join_scheduler_state__free_unpacked(st, NULL);
    }
    free(v);
    free(buf);
    return r->saved != NULL;
}

/* The first node of the saved job registered again: the job is the saved one. */
static void s_recover_begin(ps_restart_t *r, ps_scheduler_t *s)
{
    const Shardps__JoinSchedulerState *st = r->state;
    r->t_recover = ps_now();
    ps_start_saved_job(s, r->saved, st, r->t_recover);
    r->restarts = st->restarts + 1;
    ps_join_saved_job(s->join, st->workers_joined);
    if (ps_ckpt_saved_job(s->ckpt, s->view, st->checkpoint) != 0) {
        ps_scheduler_fail(s, "out of memory");
        return;
    }
    ps_log_warn("bringing job %016llx back (scheduler restart %d): waiting up to %.0f s for "
                "%d servers and %d workers to register again", (unsigned long long)s->run_id,
                r->restarts, s->cfg->wait, s->cfg->servers, ps_members_live(s));
}

/* A REGISTER carrying a job id: a node that lost its scheduler. The first
 * one of the saved job starts bringing it back (RECOVERING); the same node
 * again (a lost answer) is answered again; anything else is refused. */
static int s_on_register(void *self, ps_scheduler_t *s, ps_msg_t *m,
                         const Shardps__Register *reg)
{
    ps_restart_t *r = self;
    if (!reg->run_id) {
        return 0;
    }
    const int is_server = reg->role == PS_ROLE_SERVER;
    const int count = is_server ? s->cfg->servers : s->cfg->workers;
    const char *tag = ps_codec_role_tag(reg->role);
    if (reg->run_id != s->run_id) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "this scheduler runs another job");
        return 1;
    }
    if (is_server && reg->rank >= count) {
        return 0; /* a spare of the job (its id is past the ranks): failover.c's */
    }
    if (reg->rank < 0 || reg->rank >= count) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_EINVAL,
                           "%s%d is not a node of this job", tag, reg->rank);
        return 1;
    }
    ps_node_t *n = &s->nodes[(is_server ? 0 : s->cfg->servers) + reg->rank];
    if (n->used && n->route.len == m->route.len &&
        !memcmp(n->route.id, m->route.id, m->route.len)) {
        ps_members_seen(n);
        ps_scheduler_send_ack(s, n); /* its first answer was lost, or it lost us for a while */
        return 1;
    }
    int fresh = 0;
    for (int i = 0; i < s->nnodes; i++) {
        fresh |= s->nodes[i].used;
    }
    if (s->phase == PS_PHASE_WAITING && r->saved && !fresh) {
        s_recover_begin(r, s);
    }
    const char *no = s->phase != PS_PHASE_RECOVERING ? "the scheduler is not bringing its job back"
                     : !is_server && n->lost   ? "it was left out of the job"
                     : n->used && n->pid != reg->pid ? "that node is registered"
                                                     : NULL;
    if (no) {
        ps_msg_reply_error(s->router, m, PS_ROLE_SCHEDULER, 0, PS_ESTATE,
                           "%s%d cannot register again: %s", tag, reg->rank, no);
        return 1;
    }
    ps_members_readmit(s, n, m, reg);
    ps_scheduler_send_ack(s, n);
    ps_log_info("%s%d (pid %u) registered again", tag, reg->rank, n->pid);
    return 1;
}

/* RECOVERING: once every server and live worker registered again the job
 * runs on (servers' holds released); after --wait the missing workers are
 * left out (--min-workers) or the job fails. */
static void s_on_tick(void *self, ps_scheduler_t *s, double now)
{
    ps_restart_t *r = self;
    if (s->phase != PS_PHASE_RECOVERING) {
        return;
    }
    const int timed_out = now - r->t_recover > s->cfg->wait;
    for (int i = 0; i < s->nnodes; i++) {
        ps_node_t *n = &s->nodes[i];
        if (n->used || n->lost) {
            continue;
        }
        if (!timed_out) {
            return;
        }
        char why[160];
        snprintf(why, sizeof why, "silent for %.1f s", now - r->t_recover);
        if (i < s->cfg->servers || !ps_members_leave(s, n, why)) {
            ps_scheduler_fail(s, "%s%d did not register again within %.0f s (--wait)",
                              i < s->cfg->servers ? "S" : "W",
                              i < s->cfg->servers ? i : i - s->cfg->servers, s->cfg->wait);
            return;
        }
    }
    /* Every node is back: a step agreement the old scheduler left open ends. */
    ps_agree_release(s);
    ps_scheduler_phase_event(s, PS_PHASE_EV_ALL_BACK);
    ps_ckpt_timer_start(s->ckpt, now);
    ps_log_warn("job %016llx is back: every node registered again within %.1f s",
                (unsigned long long)s->run_id, now - r->t_recover);
    ps_restart_save(r, s);
}

const ps_sched_events_t ps_restart_events = {
    .on_register = s_on_register,
    .on_tick = s_on_tick,
};
