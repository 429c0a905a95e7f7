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
#include "scheduler/manifest.h"

struct ps_restart {
    const ps_sched_ops_t *ops; /* the core (borrowed) */
    const ps_scheduler_config_t *cfg; /* ops->cfg */
    ps_agree_t *agree;         /* the agreement a recovery releases (borrowed) */
    ps_view_t *saved;          /* the view of the saved job, whose nodes may
                                  register again; NULL: none */
    Shardps__JoinSchedulerState *state; /* the rest of that state, as read (owned);
                                           NULL with saved */
    int restarts;              /* scheduler restarts of this job */
    double t_recover;          /* ps_now() when its first node registered again */
    char unusable[200];        /* why the state file, there, could not be used;
                                  "" when it was used or missing */
};

static const char s_magic[] = "shardps-scheduler-state-1\n";

/* The longest state read: one of PS_MAX_SERVERS servers and PS_MAX_WORKERS
 * workers (endpoints, keys, the resumed parts) takes under 200 KiB. What
 * decoding it may take: protobuf-c gives each entry of a repeated message
 * its whole struct (a ServerInfo's 80 bytes) however short its bytes (2
 * for an empty one), so the decode draws on a budget of a small multiple
 * of the file, past which it fails as a corrupt file does. */
enum { S_MAX_BYTES = 1 << 20, S_DECODE_FACTOR = 8, S_DECODE_BASE = 64 << 10 };

/* A ProtobufCAllocator on malloc that refuses past a budget; what it gave
 * is freed as malloc's (free_unpacked with the default allocator). */
typedef struct {
    ProtobufCAllocator pc; /* &b->pc for protobuf-c; allocator_data is b */
    size_t left;           /* bytes it may still give */
} s_budget_t;

static void *s_budget_alloc(void *data, size_t size)
{
    s_budget_t *b = data;
    if (size > b->left) {
        b->left = 0;
        return NULL;
    }
    b->left -= size;
    return malloc(size);
}

static void s_budget_free(void *data, void *p)
{
    (void)data;
    free(p);
}

int ps_restart_new(ps_restart_t **out, const ps_sched_ops_t *ops, ps_agree_t *agree)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        return PS_ENOMEM;
    }
    (*out)->ops = ops;
    (*out)->cfg = ops->cfg;
    (*out)->agree = agree;
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

void ps_restart_save(const ps_restart_t *r, const uint8_t *state, size_t len)
{
    const char *dir = r->cfg->checkpoint_dir;
    if (!dir) {
        return;
    }
    char path[4096], why[256] = "out of memory";
    const uint32_t crc = (uint32_t)crc32(0L, state, (uInt)len);
    const uint8_t le[4] = {crc & 0xff, (crc >> 8) & 0xff, (crc >> 16) & 0xff, crc >> 24};
    mkdir(dir, 0777); /* servers make it too, maybe later */
    s_state_path(dir, path, sizeof path);
    if (ps_file_write_atomic(path, (const void *[]){s_magic, le, state},
                             (size_t[]){sizeof s_magic - 1, 4, len}, 3, why, sizeof why) != 0) {
        ps_log_warn("the scheduler's state is not saved: %s", why);
    }
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
    if (n >= 0 && n <= S_MAX_BYTES && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    *len = n >= 0 ? (size_t)n : 0;
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
 * (and its view, into v) within the budget: caller owns the result; free
 * with shardps__join_scheduler_state__free_unpacked(st, NULL). NULL
 * otherwise. */
static Shardps__JoinSchedulerState *s_decode(const uint8_t *buf, size_t len, ps_view_t *v)
{
    s_budget_t b = {{s_budget_alloc, s_budget_free, NULL}, 0};
    b.pc.allocator_data = &b;
    b.left = S_DECODE_FACTOR * len + S_DECODE_BASE;
    const size_t head = sizeof s_magic - 1 + 4;
    if (len < head || memcmp(buf, s_magic, sizeof s_magic - 1) ||
        (uint32_t)crc32(0L, buf + head, (uInt)(len - head)) !=
            ((uint32_t)buf[head - 4] | (uint32_t)buf[head - 3] << 8 |
             (uint32_t)buf[head - 2] << 16 | (uint32_t)buf[head - 1] << 24)) {
        return NULL;
    }
    Shardps__JoinSchedulerState *st = shardps__join_scheduler_state__unpack(
        &b.pc, len - head, buf + head);
    Shardps__ClusterView *cv =
        st ? shardps__cluster_view__unpack(&b.pc, st->view.len, st->view.data) : NULL;
    int ok = cv && ps_codec_view_from_pb(cv, v, NULL, 0) == 0;
    if (cv) {
        shardps__cluster_view__free_unpacked(cv, NULL);
    }
    /* the state's check decodes its view again, unbudgeted: only once that
     * fit the budget and is freed */
    ok = ok && ps_codec_check(&st->base, NULL, 0) == 0;
    if (!ok && st) {
        shardps__join_scheduler_state__free_unpacked(st, NULL);
        st = NULL;
    }
    return st;
}

int ps_restart_load(ps_restart_t *r, uint64_t *run_id, int *next_spare_id)
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
    if (!buf && len > S_MAX_BYTES) {
        snprintf(why, sizeof why, "%zu bytes, more than the %d a state takes", len,
                 S_MAX_BYTES);
    } else if (!buf) {
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
        *next_spare_id = st->next_spare_id;
        ps_log_info("%s: job %016llx ran with checkpoint step %lld complete; its nodes may "
                    "register again (else new ones start from that checkpoint)", path,
                    (unsigned long long)st->run_id, (long long)st->checkpoint);
        v = NULL;
        st = NULL;
    }
    if (why[0]) {
        ps_log_warn("%s: %s; its nodes cannot register again", path, why);
        snprintf(r->unusable, sizeof r->unusable, "%s", why);
    }
    if (st) {
        shardps__join_scheduler_state__free_unpacked(st, NULL);
    }
    free(v);
    free(buf);
    return r->saved != NULL;
}

/* The first node of the saved job registered again: the job is the saved
 * one (the core takes its view and counters, and gives join and ckpt their
 * parts; it fails the job itself when it cannot). */
static void s_recover_begin(ps_restart_t *r)
{
    const ps_sched_ops_t *ops = r->ops;
    const Shardps__JoinSchedulerState *st = r->state;
    r->t_recover = ps_now();
    r->restarts = st->restarts + 1;
    ops->saved_job(ops->core, r->saved, st, r->t_recover);
    if (ps_sched_phase(ops) == PS_PHASE_FAILED) {
        return;
    }
    ps_log_warn("bringing job %016llx back (scheduler restart %d): waiting up to %.0f s for "
                "%d servers and %d workers to register again",
                (unsigned long long)ops->facts(ops->core)->run_id, r->restarts, r->cfg->wait,
                r->cfg->servers, ops->live(ops->core));
}

/* Row i of the job's nodes: the servers', then the workers'. */
static const ps_node_t *s_row(const ps_restart_t *r, int i)
{
    const int S = r->cfg->servers;
    return r->ops->node(r->ops->core, i < S ? PS_ROLE_SERVER : PS_ROLE_WORKER,
                        i < S ? i : i - S);
}

/* Whether any node of the job registered with this scheduler (fresh or back). */
static int s_any_used(const ps_restart_t *r)
{
    for (int i = 0; i < r->cfg->servers + r->cfg->workers; i++) {
        if (s_row(r, i)->used) {
            return 1;
        }
    }
    return 0;
}

/* A node of the job whose state could not be read registers again: its job
 * cannot be taken back, and waiting only spends the nodes' --scheduler-grace.
 * The job ends at once; its cause names the checkpoint a resume would start
 * from, and the node is told to go. */
static void s_cannot_take_back(ps_restart_t *r, const ps_msg_t *m, const Shardps__Register *reg)
{
    const ps_sched_ops_t *ops = r->ops;
    const char *dir = r->cfg->resume;
    char from[600];
    int64_t step = 0;
    if (ps_manifest_list(dir, 0, &step, 1, from, sizeof from) > 0) {
        snprintf(from, sizeof from, "its newest usable checkpoint is %s/step-%lld: start the "
                 "job again with --resume %s", dir, (long long)step, dir);
    }
    ps_sched_fail(ops, 0, "%s%d's job cannot be taken back: %s/scheduler.state: %s; %s",
                  ps_codec_role_tag(reg->role), reg->rank, dir, r->unusable, from);
    Shardps__Shutdown sd = SHARDPS__SHUTDOWN__INIT;
    sd.status = 1;
    sd.reason = (char *)ops->facts(ops->core)->failure;
    ops->send(ops->core, &m->route, PS_MSG_SHUTDOWN, &sd.base);
}

/* A REGISTER carrying a job id: a node that lost its scheduler. The first
 * one of the saved job starts bringing it back (RECOVERING); the same node
 * again (a lost answer) is answered again; anything else is refused. */
static int s_on_register(void *self, ps_msg_t *m, const Shardps__Register *reg)
{
    ps_restart_t *r = self;
    const ps_sched_ops_t *ops = r->ops;
    if (!reg->run_id) {
        return 0;
    }
    const int is_server = reg->role == PS_ROLE_SERVER;
    const int count = is_server ? r->cfg->servers : r->cfg->workers;
    const char *tag = ps_codec_role_tag(reg->role);
    if (reg->run_id != ops->facts(ops->core)->run_id) {
        if (r->unusable[0] && ps_sched_phase(ops) == PS_PHASE_WAITING) {
            s_cannot_take_back(r, m, reg);
        } else {
            ops->reply_error(ops->core, m, PS_ESTATE, "this scheduler runs another job");
        }
        return 1;
    }
    if (is_server && reg->rank >= count) {
        return 0; /* a spare of the job (its id is past the ranks): failover.c's */
    }
    if (reg->rank < 0 || reg->rank >= count) {
        ps_sched_refuse(ops, m, PS_EINVAL, "%s%d is not a node of this job", tag, reg->rank);
        return 1;
    }
    const ps_node_t *n = ops->node(ops->core, is_server ? PS_ROLE_SERVER : PS_ROLE_WORKER,
                                   reg->rank);
    if (n->used && n->route.len == m->route.len &&
        !memcmp(n->route.id, m->route.id, m->route.len)) {
        ops->seen(ops->core, n);
        ops->send_ack(ops->core, n); /* its first answer was lost, or it lost us for a while */
        return 1;
    }
    if (ps_sched_phase(ops) == PS_PHASE_WAITING && r->saved && !s_any_used(r)) {
        s_recover_begin(r);
    }
    const char *no = ps_sched_phase(ops) != PS_PHASE_RECOVERING
                         ? "the scheduler is not bringing its job back"
                     : !is_server && n->lost         ? "it was left out of the job"
                     : n->used && n->pid != reg->pid ? "that node is registered"
                                                     : NULL;
    if (no) {
        ps_sched_refuse(ops, m, PS_ESTATE, "%s%d cannot register again: %s", tag, reg->rank,
                        no);
        return 1;
    }
    ops->readmit(ops->core, m, reg);
    ops->send_ack(ops->core, n);
    ps_log_info("%s%d (pid %u) registered again", tag, reg->rank, n->pid);
    return 1;
}

/* RECOVERING: once every server and live worker registered again the job
 * runs on (servers' holds released); after --wait the missing workers are
 * left out (--min-workers) or the job fails. */
static void s_on_tick(void *self, double now)
{
    ps_restart_t *r = self;
    const ps_sched_ops_t *ops = r->ops;
    const int S = r->cfg->servers;
    if (ps_sched_phase(ops) != PS_PHASE_RECOVERING) {
        return;
    }
    const int timed_out = now - r->t_recover > r->cfg->wait;
    for (int i = 0; i < S + r->cfg->workers; i++) {
        const ps_node_t *n = s_row(r, i);
        if (n->used || n->lost) {
            continue;
        }
        if (!timed_out) {
            return;
        }
        char why[160];
        snprintf(why, sizeof why, "silent for %.1f s", now - r->t_recover);
        if (i < S || !ops->leave(ops->core, n, why)) {
            ps_sched_fail(ops, 0, "%s%d did not register again within %.0f s (--wait)",
                          i < S ? "S" : "W", i < S ? i : i - S, r->cfg->wait);
            return;
        }
    }
    /* Every node is back: a step agreement the old scheduler left open ends. */
    ps_agree_release(r->agree);
    ops->phase_event(ops->core, PS_PHASE_EV_ALL_BACK);
    ps_log_warn("job %016llx is back: every node registered again within %.1f s",
                (unsigned long long)ops->facts(ops->core)->run_id, now - r->t_recover);
    ops->save_state(ops->core);
}

const ps_sched_events_t ps_restart_events = {
    .on_register = s_on_register,
    .on_tick = s_on_tick,
};
