/*
 * server/server.c - the server's single event loop: receive, validate, apply.
 *
 * All buffers are sized once from the cluster view: parameters, optimizer
 * state, the table of pushes held per step and worker (stepped modes keep the
 * received frames and read them in place when the step is applied), one
 * scratch range (the step's sum; an aligned copy in async), the pool of reply
 * copies and the table of pulls waiting for a newer version. Nothing of ours
 * is allocated per step.
 */
#include "server/server.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/hist.h"
#include "common/log.h"
#include "kernels/optim.h"
#include "proto/link.h"
#include "proto/msg.h"
#include "proto/range.h"

typedef struct {
    ps_route_t route;    /* who asked */
    uint64_t request_id; /* echoed */
    ps_range_t range;    /* what */
    int64_t min_version; /* answered once version >= this */
    int sender;          /* worker rank */
} ps_pending_pull_t;

/* Most separate pushes that may make up one worker's share of a step (one per
 * tensor when gradients are pushed layer by layer). */
enum { PS_MAX_PARTS = 64 };

/* Keys per pull-reply message (1 MiB), and per chunk of a step's update: the
 * update of chunk i overlaps with ZeroMQ sending chunk i-1 to the waiting
 * workers. Each message costs wake-ups on both sides: on 2 cores a 1 MiB pull
 * in one message ran 2,100-2,400 rounds/s against 1,700-1,900 in four. */
enum { PS_REPLY_KEYS = 1 << 18 };

/* Most memory the reply pool below may take, and how many copies of the
 * shard it holds: enough for a few pulls in flight at once (with 4 servers and
 * 4 rounds in flight, 2 copies ran dry and 16 MB async fell to 93 rounds/s
 * from 108-112 with 4). */
#define PS_REPLY_POOL_BYTES (64u << 20)
enum { PS_REPLY_POOL_SHARDS = 4 };

/*
 * Replies that a later update must not change under ZeroMQ's feet (every mode
 * but sync) go out as copies. The copies land in buffers of PS_REPLY_KEYS
 * keys allocated once: ZeroMQ's I/O thread hands each back (the release
 * callback) once its bytes left, so a reply costs one copy into warm memory,
 * not an allocation and fresh pages. When every buffer is out, ZeroMQ copies.
 */
typedef struct {
    pthread_mutex_t mu; /* the free list: taken by the loop, given back by ZeroMQ */
    float *mem;         /* nbufs buffers of PS_REPLY_KEYS floats */
    int *free_list;     /* indices of the free buffers */
    int nfree, nbufs;
} ps_reply_pool_t;

/* One push held for a step: its keys and the received frame, read in place
 * when the step is applied (no copy into a buffer of ours). */
typedef struct {
    uint64_t begin, end; /* keys relative to the shard */
    ps_payload_t msg;    /* the gradient frame; owned until the step is applied */
} ps_part_t;

typedef struct {
    const ps_server_config_t *cfg;
    ps_ctx_t *ctx;
    ps_sock_t *router;
    ps_link_t *link;
    ps_view_t *view;
    int rank;
    int workers;
    ps_range_t shard;    /* our keys */
    uint64_t n;          /* keys in the shard */
    float *w;            /* parameters, n */
    float *state;        /* optimizer state: state_floats arrays of n */
    /* Stepped modes collect each step's pushes per worker before applying.
     * Step t lives in window slot t % window; slot (t, w) below means index
     * (t % window) * workers + w. */
    int window;          /* steps collected at once: s+1 under ssp:s, else 1 */
    size_t nslots;       /* window*workers (1 when not stepped) */
    ps_part_t *parts;    /* nslots*PS_MAX_PARTS: the pushes held so far */
    int *nparts;         /* window*workers */
    uint64_t *covered;   /* window*workers: keys pushed so far */
    int64_t *computed_on; /* window*workers: version the gradient was computed on */
    double step_since;   /* when the step being collected started waiting */
    double missing_logged; /* when we last logged who it waits for */
    float *scratch;      /* n: a step's gradient sum, or an aligned copy of a push */
    uint64_t init_covered;
    int initialized;     /* all initial values received */
    int64_t version;     /* updates applied so far */
    ps_pending_pull_t *pending;
    int npending, cap_pending;
    ps_optim_t opt;
    int64_t applied;     /* updates applied (Adam's t) */
    ps_reply_pool_t pool; /* copies of replies (not sync) */
    /* telemetry, reported to the scheduler at the end */
    uint64_t pushes, pulls, errors, dropped;
    ps_hist_t staleness;
} ps_server_t;

static int s_reply_error(ps_server_t *s, const ps_msg_t *m, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int s_reply_error(ps_server_t *s, const ps_msg_t *m, int status, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    s->errors++;
    ps_log_warn("rejected %s from %s%d: %s", ps_codec_type_name(m->hdr.type),
                ps_codec_role_tag(m->hdr.role), m->hdr.sender, why);
    ps_msg_reply_error(s->router, m, PS_ROLE_SERVER, s->rank, status, "%s", why);
    return status;
}

static int s_pool_init(ps_reply_pool_t *p, uint64_t n)
{
    uint64_t chunks = (n + PS_REPLY_KEYS - 1) / PS_REPLY_KEYS;
    uint64_t most = PS_REPLY_POOL_BYTES / (PS_REPLY_KEYS * sizeof(float));
    p->nbufs = (int)(chunks * PS_REPLY_POOL_SHARDS < most ? chunks * PS_REPLY_POOL_SHARDS
                                                          : most);
    pthread_mutex_init(&p->mu, NULL);
    /* Pages are touched on first use only, so an idle pool costs no memory. */
    p->mem = malloc((size_t)p->nbufs * PS_REPLY_KEYS * sizeof(float));
    p->free_list = malloc((size_t)p->nbufs * sizeof *p->free_list);
    for (int i = 0; p->free_list && i < p->nbufs; i++) {
        p->free_list[i] = i;
    }
    p->nfree = p->nbufs;
    return p->mem && p->free_list ? 0 : PS_ENOMEM;
}

static void s_pool_fini(ps_reply_pool_t *p)
{
    if (!p->nbufs) { /* never set up */
        return;
    }
    free(p->mem);
    free(p->free_list);
    pthread_mutex_destroy(&p->mu);
}

/* A free buffer of PS_REPLY_KEYS floats, or NULL when all are out. */
static float *s_pool_take(ps_reply_pool_t *p)
{
    pthread_mutex_lock(&p->mu);
    float *b = p->nfree ? p->mem + (size_t)p->free_list[--p->nfree] * PS_REPLY_KEYS : NULL;
    pthread_mutex_unlock(&p->mu);
    return b;
}

/* ZeroMQ's release callback (its I/O thread): the buffer is free again. */
static void s_pool_give(void *data, void *hint)
{
    ps_reply_pool_t *p = hint;
    pthread_mutex_lock(&p->mu);
    p->free_list[p->nfree++] = (int)(((float *)data - p->mem) / PS_REPLY_KEYS);
    pthread_mutex_unlock(&p->mu);
}

static void s_reply(ps_server_t *s, const ps_route_t *route, ps_msg_type_t type,
                    uint64_t request_id, ps_range_t r, const float *values)
{
    ps_header_t h;
    ps_msg_header(&h, type, PS_ROLE_SERVER, s->rank);
    h.request_id = request_id;
    h.begin = r.begin;
    h.end = r.end;
    h.version = s->version;
    ps_frame_t f = {values, values ? ps_range_len(r) * sizeof(float) : 0};
    /* sync: values cannot change before the asker pushes again, which it does
     * only after receiving them, so they go zero-copy. Every other mode can
     * apply a step while the reply is queued (async, ssp: the asker already
     * pushed it; sync:k/n: without the asker), so copy. */
    const int must_copy = values && s->view->job.mode != PS_MODE_SYNC;
    float *copy = must_copy && f.len <= PS_REPLY_KEYS * sizeof(float) ? s_pool_take(&s->pool)
                                                                        : NULL;
    int rc;
    if (copy) {
        memcpy(copy, values, f.len);
        f.data = copy;
        rc = ps_msg_send_zc(s->router, route, h, &f, 1, s_pool_give, &s->pool);
    } else { /* sync: zero-copy; the pool ran dry: ZeroMQ copies */
        rc = ps_msg_send(s->router, route, h, &f, values ? 1 : 0, must_copy ? PS_SEND_COPY : 0);
    }
    if (rc != 0) {
        ps_log_warn("reply to a worker failed: %s", ps_strerror(rc));
    }
}

/* Sends the values of keys part (inside p's range) to p's asker. */
static void s_send_pull_part(ps_server_t *s, const ps_pending_pull_t *p, ps_range_t part)
{
    s_reply(s, &p->route, PS_MSG_PULL_REPLY, p->request_id, part,
            s->w + (part.begin - s->shard.begin));
}

/* Answers a pull whole, in messages of at most PS_REPLY_KEYS keys (the
 * client completes a pull when every key arrived, in any number of parts). */
static void s_answer_pull(ps_server_t *s, const ps_pending_pull_t *p)
{
    s->pulls++;
    for (uint64_t b = p->range.begin; b < p->range.end; b += PS_REPLY_KEYS) {
        ps_range_t part = {b, b + PS_REPLY_KEYS < p->range.end ? b + PS_REPLY_KEYS
                                                                : p->range.end};
        s_send_pull_part(s, p, part);
    }
}

/* Answers every waiting pull that the current version satisfies. */
static void s_flush_pulls(ps_server_t *s)
{
    int kept = 0;
    for (int i = 0; i < s->npending; i++) {
        if (s->initialized && s->version >= s->pending[i].min_version) {
            s_answer_pull(s, &s->pending[i]);
        } else {
            s->pending[kept++] = s->pending[i];
        }
    }
    s->npending = kept;
}

/* During an update: sends every pull the new version satisfies its part
 * within the just-updated shard-relative keys [off, off+len). */
static void s_send_ready_chunk(ps_server_t *s, uint64_t off, uint64_t len)
{
    ps_range_t chunk = {s->shard.begin + off, s->shard.begin + off + len}, part;
    for (int i = 0; i < s->npending; i++) {
        if (s->version >= s->pending[i].min_version &&
            ps_range_intersect(s->pending[i].range, chunk, &part)) {
            s_send_pull_part(s, &s->pending[i], part);
        }
    }
}

/* After an update: forgets the pulls it answered chunk by chunk. */
static void s_drop_answered(ps_server_t *s)
{
    int kept = 0;
    for (int i = 0; i < s->npending; i++) {
        if (s->version >= s->pending[i].min_version) {
            s->pulls++;
        } else {
            s->pending[kept++] = s->pending[i];
        }
    }
    s->npending = kept;
}

/* Checks what every data message must satisfy. Returns 0 or the error sent. */
static int s_validate(ps_server_t *s, const ps_msg_t *m, ps_range_t *r)
{
    const ps_header_t *h = &m->hdr;
    r->begin = h->begin;
    r->end = h->end;
    if (h->role != PS_ROLE_WORKER || h->sender < 0 || h->sender >= s->workers) {
        return s_reply_error(s, m, PS_ENOENT, "unknown sender %s%d",
                             ps_codec_role_tag(h->role), h->sender);
    }
    if (r->end <= r->begin || !ps_range_contains(s->shard, *r)) {
        return s_reply_error(s, m, PS_ERANGE,
                             "key range [%llu, %llu) is not inside this server's shard "
                             "[%llu, %llu)",
                             (unsigned long long)r->begin, (unsigned long long)r->end,
                             (unsigned long long)s->shard.begin,
                             (unsigned long long)s->shard.end);
    }
    uint64_t want = h->type == PS_MSG_PULL ? 0 : ps_range_len(*r) * sizeof(float);
    if (h->payload_len != want || m->nframes != (want ? 1 : 0)) {
        return s_reply_error(s, m, PS_ERANGE,
                             "payload is %llu bytes in %d frames; the range needs %llu bytes",
                             (unsigned long long)h->payload_len, m->nframes,
                             (unsigned long long)want);
    }
    return 0;
}

/* The aligned gradient of a push: frames are read in place only when aligned. */
static const float *s_payload(ps_server_t *s, const ps_msg_t *m, float *dst)
{
    size_t len;
    const void *p = ps_msg_frame(m, 0, &len);
    if (!dst && ((uintptr_t)p % sizeof(float)) == 0) {
        return p;
    }
    dst = dst ? dst : s->scratch;
    memcpy(dst, p, len);
    return dst;
}

static void s_on_init(ps_server_t *s, const ps_msg_t *m, ps_range_t r)
{
    if (m->hdr.sender != 0) {
        s_reply_error(s, m, PS_ESTATE, "only worker 0 initialises parameters");
        return;
    }
    if (s->initialized || s->init_covered + ps_range_len(r) > s->n) {
        s_reply_error(s, m, PS_ESTATE, "parameters are already initialised");
        return;
    }
    s_payload(s, m, s->w + (r.begin - s->shard.begin));
    s->init_covered += ps_range_len(r);
    if (s->init_covered == s->n) {
        s->initialized = 1;
        s->step_since = ps_now();
        memset(s->state, 0, s->n * (size_t)ps_optim_state_floats(&s->opt) * sizeof(float));
        ps_log_info("parameters initialised: keys [%llu, %llu)",
                    (unsigned long long)s->shard.begin, (unsigned long long)s->shard.end);
    }
    s_reply(s, &m->route, PS_MSG_INIT_ACK, m->hdr.request_id, r, NULL);
    s_flush_pulls(s);
}

static float s_lr(const ps_server_t *s, int64_t step)
{
    return ps_optim_lr(&s->view->job, step, s->view->steps_per_epoch, s->view->total_steps);
}

/*
 * Staleness-aware learning rate (Zhang, Gupta, Lian, Liu, "Staleness-aware
 * Async-SGD for Distributed Deep Learning", IJCAI 2016): a gradient applied
 * tau > 1 versions after the one it was computed on is weighted 1/tau, when the
 * job asks for it. Fresh gradients (tau <= 1, everything under sync) keep 1.
 */
static float s_stale_weight(const ps_server_t *s, int64_t tau)
{
    return (s->view->job.staleness_lr && tau > 1) ? 1.0f / (float)tau : 1.0f;
}

/* Index of slot (step t, worker w). */
static size_t s_slot(const ps_server_t *s, int64_t t, int w)
{
    return (size_t)(t % s->window) * (size_t)s->workers + (size_t)w;
}

/* Closes the frames held in slot k and empties it. */
static void s_release_parts(ps_server_t *s, size_t k)
{
    ps_part_t *parts = s->parts + k * PS_MAX_PARTS;
    for (int i = 0; i < s->nparts[k]; i++) {
        ps_payload_close(&parts[i].msg);
    }
    s->nparts[k] = 0;
    s->covered[k] = 0;
}

/* acc[0..n) = c * g  (first) or acc += c * g, g read from a frame that may
 * not be float-aligned (memcpy loads; the compiler makes them vector loads). */
static void s_accumulate(float *restrict acc, const unsigned char *restrict g, float c,
                         uint64_t n, int first)
{
    for (uint64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, g + i * sizeof(float), sizeof v);
        acc[i] = first ? c * v : acc[i] + c * v;
    }
}

/*
 * The gradient sum of the step being applied: every complete worker's pushes,
 * in worker-rank order, each weighted by s_stale_weight(). Read in place from
 * the held frames; a lone aligned, unweighted push is used as it is, with no
 * pass at all. Returns a pointer valid until the slot is released.
 */
static const float *s_sum_step(ps_server_t *s, int first)
{
    size_t k0 = s_slot(s, s->version, first);
    const ps_part_t *p0 = s->parts + k0 * PS_MAX_PARTS;
    int lone = 1;
    for (int w = first + 1; w < s->workers; w++) {
        lone &= s->covered[s_slot(s, s->version, w)] != s->n;
    }
    size_t len;
    const void *d0 = s->nparts[k0] == 1 ? ps_payload_data(&p0->msg, &len) : NULL;
    if (lone && d0 && (uintptr_t)d0 % sizeof(float) == 0 &&
        s_stale_weight(s, s->version - s->computed_on[k0]) == 1.0f) {
        return d0;
    }
    for (int w = first; w < s->workers; w++) {
        size_t k = s_slot(s, s->version, w);
        if (s->covered[k] != s->n) {
            continue;
        }
        const float c = s_stale_weight(s, s->version - s->computed_on[k]);
        const ps_part_t *parts = s->parts + k * PS_MAX_PARTS;
        for (int i = 0; i < s->nparts[k]; i++) {
            s_accumulate(s->scratch + parts[i].begin, ps_payload_data(&parts[i].msg, &len), c,
                         parts[i].end - parts[i].begin, w == first);
        }
    }
    return s->scratch;
}

/*
 * Stepped modes: applies every step that has collected enough pushes, in
 * order. sync and ssp need all workers; sync:k/n needs k. The gradients are
 * summed in worker-rank order, so the result does not depend on arrival order.
 */
static void s_try_apply(ps_server_t *s)
{
    const ps_job_t *j = &s->view->job;
    const int need = j->mode == PS_MODE_BACKUP ? j->backup_k : s->workers;
    for (;;) {
        int complete = 0, first = -1;
        for (int w = 0; w < s->workers; w++) {
            if (s->covered[s_slot(s, s->version, w)] == s->n) {
                complete++;
                first = first < 0 ? w : first;
            }
        }
        if (complete < need) {
            return;
        }
        const int64_t t = s->version;
        const float *sum = s_sum_step(s, first);
        const float lr = s_lr(s, t), scale = 1.0f / (float)complete;
        const int64_t applied = ++s->applied;
        s->version = t + 1; /* what the values sent below carry */
        for (uint64_t off = 0; off < s->n; off += PS_REPLY_KEYS) {
            uint64_t len = s->n - off < PS_REPLY_KEYS ? s->n - off : PS_REPLY_KEYS;
            ps_optim_step(&s->opt, lr, applied, s->w + off, s->state + off, s->n, sum + off,
                          scale, len);
            s_send_ready_chunk(s, off, len);
        }
        for (int w = 0; w < s->workers; w++) {
            size_t k = s_slot(s, t, w);
            if (s->covered[k] == s->n) {
                ps_hist_add(&s->staleness, t - s->computed_on[k]);
            } else if (s->covered[k]) {
                s->dropped++; /* a late worker's partial push: its step is over */
            }
            s_release_parts(s, k);
        }
        s->step_since = ps_now();
        s_drop_answered(s);
    }
}

/* Holds the push of keys [r) (shard-relative) in slot k, taking m's frame;
 * refuses overlaps, so a worker's share of a step is complete exactly when
 * every key came once. */
static int s_add_part(ps_server_t *s, size_t k, ps_range_t r, ps_msg_t *m)
{
    ps_part_t *parts = s->parts + k * PS_MAX_PARTS;
    if (s->nparts[k] == PS_MAX_PARTS) {
        return PS_ENOMEM;
    }
    for (int i = 0; i < s->nparts[k]; i++) {
        if (r.begin < parts[i].end && parts[i].begin < r.end) {
            return PS_ESTATE;
        }
    }
    ps_part_t *p = &parts[s->nparts[k]++];
    p->begin = r.begin;
    p->end = r.end;
    ps_msg_take_payload(m, 0, &p->msg);
    s->covered[k] += ps_range_len(r);
    return 0;
}

static void s_on_stepped_push(ps_server_t *s, ps_msg_t *m, ps_range_t r)
{
    const ps_header_t *h = &m->hdr;
    const ps_job_t *j = &s->view->job;
    if (h->step < s->version && j->mode == PS_MODE_BACKUP) {
        /* Late for a step already applied with k pushes: drop, but ack so the
         * worker moves on to the current step. */
        s->dropped++;
        s_reply(s, &m->route, PS_MSG_PUSH_ACK, h->request_id, r, NULL);
        return;
    }
    if (h->step < s->version || h->step >= s->version + s->window) {
        s_reply_error(s, m, PS_ESTATE,
                      "push for step %lld, but steps %lld to %lld are being collected",
                      (long long)h->step, (long long)s->version,
                      (long long)(s->version + s->window - 1));
        return;
    }
    size_t k = s_slot(s, h->step, h->sender);
    ps_range_t rel = {r.begin - s->shard.begin, r.end - s->shard.begin};
    int rc = s_add_part(s, k, rel, m);
    if (rc != 0) {
        s_reply_error(s, m, rc,
                      rc == PS_ESTATE ? "W%d pushed keys of step %lld twice"
                                      : "W%d split step %lld into too many pushes",
                      h->sender, (long long)h->step);
        return;
    }
    if (s->covered[k] == ps_range_len(r) || h->version < s->computed_on[k]) {
        s->computed_on[k] = h->version; /* the stalest part counts */
    }
    s->pushes++;
    s_reply(s, &m->route, PS_MSG_PUSH_ACK, h->request_id, r, NULL);
    s_try_apply(s);
}

/* Stepped modes: logs which workers a step has waited on for too long. */
static void s_log_missing(ps_server_t *s)
{
    double now = ps_now(), waited = now - s->step_since;
    if (!ps_job_is_stepped(&s->view->job) || !s->initialized || s->n == 0 ||
        waited < s->cfg->report_missing || now - s->missing_logged < s->cfg->report_missing) {
        return;
    }
    char who[256] = "";
    size_t at = 0;
    int any = 0;
    for (int w = 0; w < s->workers && at < sizeof who - 32; w++) {
        uint64_t c = s->covered[s_slot(s, s->version, w)];
        any |= c != 0;
        if (c != s->n) {
            at += (size_t)snprintf(who + at, sizeof who - at, " W%d (%llu of %llu keys)", w,
                                   (unsigned long long)c, (unsigned long long)s->n);
        }
    }
    if (any) { /* someone pushed and waits on the others */
        ps_log_warn("step %lld of keys [%llu, %llu) has waited %.1f s for:%s",
                    (long long)s->version, (unsigned long long)s->shard.begin,
                    (unsigned long long)s->shard.end, waited, who);
        s->missing_logged = now;
    }
}

static void s_on_push(ps_server_t *s, ps_msg_t *m, ps_range_t r)
{
    const ps_header_t *h = &m->hdr;
    if (!s->initialized) {
        s_reply_error(s, m, PS_ESTATE, "push before the parameters were initialised");
        return;
    }
    if (ps_job_is_stepped(&s->view->job)) {
        s_on_stepped_push(s, m, r);
        return;
    }
    uint64_t len = ps_range_len(r);
    /* async: apply on arrival, record how stale the gradient was. */
    const float *g = s_payload(s, m, NULL);
    uint64_t off = r.begin - s->shard.begin;
    /* async: M pushes make one step of the sync schedule. */
    const int64_t tau = s->version - h->version;
    ps_optim_step(&s->opt, s_lr(s, s->version / s->workers), ++s->applied, s->w + off,
                  s->state + off, s->n, g, s_stale_weight(s, tau), len);
    ps_hist_add(&s->staleness, tau);
    s->version++;
    s->pushes++;
    s_reply(s, &m->route, PS_MSG_PUSH_ACK, h->request_id, r, NULL);
}

static void s_on_pull(ps_server_t *s, const ps_msg_t *m, ps_range_t r)
{
    ps_pending_pull_t p = {m->route, m->hdr.request_id, r, m->hdr.step, m->hdr.sender};
    if (s->initialized && s->version >= p.min_version) {
        s_answer_pull(s, &p);
        return;
    }
    if (s->npending == s->cap_pending) {
        s_reply_error(s, m, PS_ENOMEM, "too many pulls waiting (%d)", s->cap_pending);
        return;
    }
    s->pending[s->npending++] = p;
}

static void s_on_worker_message(ps_server_t *s, ps_msg_t *m)
{
    ps_range_t r;
    switch (m->hdr.type) {
    case PS_MSG_PUSH:
    case PS_MSG_PULL:
    case PS_MSG_INIT:
        break;
    default:
        s_reply_error(s, m, PS_EPROTO, "unexpected message type %s",
                      ps_codec_type_name(m->hdr.type));
        return;
    }
    if (s_validate(s, m, &r) != 0) {
        return;
    }
    if (m->hdr.type == PS_MSG_PUSH) {
        s_on_push(s, m, r);
    } else if (m->hdr.type == PS_MSG_PULL) {
        s_on_pull(s, m, r);
    } else {
        s_on_init(s, m, r);
    }
}

/* Sends the telemetry the scheduler asked for at the end of the job. */
static void s_send_report(ps_server_t *s)
{
    ps_server_report_t r = {.pushes = s->pushes,
                            .pulls = s->pulls,
                            .rejected = s->errors,
                            .dropped = s->dropped,
                            .version = s->version,
                            .staleness = s->staleness};
    uint8_t *body;
    size_t len;
    if (ps_codec_pack_report(&r, &body, &len) == 0) {
        ps_link_send(s->link, PS_MSG_REPORT, body, len);
        free(body);
    }
}

/* What the loop's drain handlers share: the server, and how the job ended. */
typedef struct {
    ps_server_t *s;
    int status; /* -1 while serving; then 0 (clean shutdown) or 1 */
} ps_loop_t;

/* ps_msg_drain's handler for the workers' socket. */
static int s_on_receive(void *arg, ps_msg_t *m, int rc)
{
    ps_server_t *s = ((ps_loop_t *)arg)->s;
    if (rc == 0) {
        s_on_worker_message(s, m);
    } else {
        s_reply_error(s, m, PS_EPROTO, "malformed message: %s", m->hdr.error);
    }
    return 0;
}

/* ps_msg_drain's handler for the scheduler's messages; stops at the end. */
static int s_on_link(void *arg, ps_msg_t *m, int rc)
{
    ps_loop_t *l = arg;
    char err[256];
    if (rc != 0) {
        return 0;
    }
    switch (ps_link_handle(l->s->link, m, err, sizeof err)) {
    case PS_LINK_SHUTDOWN:
        l->status = 0;
        return 1;
    case PS_LINK_ABORTED:
        ps_log_err("%s", err);
        l->status = 1;
        return 1;
    case PS_LINK_MESSAGE:
        if (m->hdr.type == PS_MSG_REPORT) {
            s_send_report(l->s);
        }
        return 0;
    default:
        return 0;
    }
}

/* Serves until the job ends. Returns 0 (clean shutdown) or 1. */
static int s_loop(ps_server_t *s)
{
    char err[256];
    ps_loop_t l = {s, -1};
    for (;;) {
        ps_pollitem_t items[2] = {{.sock = s->router}, {.sock = ps_link_sock(s->link)}};
        int rc = ps_poll(items, 2, 100);
        if (rc < 0) {
            ps_log_err("poll failed: %s", ps_strerror(rc));
            return 1;
        }
        if (items[0].ready) {
            ps_msg_drain(s->router, PS_RECV_ROUTER, 64, s_on_receive, &l);
        }
        if (items[1].ready) {
            ps_msg_drain(items[1].sock, 0, 64, s_on_link, &l);
            if (l.status >= 0) {
                return l.status;
            }
        }
        if (ps_link_tick(s->link, err, sizeof err) == PS_LINK_LOST) {
            ps_log_err("%s", err);
            return 1;
        }
        s_log_missing(s);
    }
}

static int s_setup(ps_server_t *s, char *err, size_t errlen)
{
    const ps_view_t *v = s->view;
    s->rank = ps_link_rank(s->link);
    s->workers = v->num_workers;
    s->shard.begin = v->servers[s->rank].begin;
    s->shard.end = v->servers[s->rank].end;
    s->n = ps_range_len(s->shard);
    if (ps_optim_from_job(&v->job, &s->opt) != 0) {
        snprintf(err, errlen, "unknown optimizer '%s'", v->job.optimizer);
        return PS_EINVAL;
    }
    size_t n = s->n ? s->n : 1;
    s->cap_pending = 8 * s->workers;
    s->w = calloc(n, sizeof(float));
    s->state = calloc(n * (size_t)(ps_optim_state_floats(&s->opt) + 1), sizeof(float));
    s->scratch = calloc(n, sizeof(float));
    s->window = v->job.mode == PS_MODE_SSP ? v->job.staleness + 1 : 1;
    size_t nslots = ps_job_is_stepped(&v->job) ? (size_t)s->window * (size_t)s->workers : 1;
    s->nslots = nslots;
    s->parts = calloc(nslots * PS_MAX_PARTS, sizeof *s->parts);
    s->nparts = calloc(nslots, sizeof *s->nparts);
    s->covered = calloc(nslots, sizeof *s->covered);
    s->computed_on = calloc(nslots, sizeof *s->computed_on);
    s->pending = calloc((size_t)s->cap_pending, sizeof *s->pending);
    ps_hist_init(&s->staleness);
    int pool_rc = s_pool_init(&s->pool, n);
    if (pool_rc || !s->w || !s->state || !s->scratch || !s->parts || !s->nparts ||
        !s->covered || !s->computed_on || !s->pending) {
        snprintf(err, errlen, "out of memory for a shard of %llu parameters",
                 (unsigned long long)s->n);
        return PS_ENOMEM;
    }
    s->initialized = s->n == 0; /* an empty shard has nothing to wait for */
    s->step_since = ps_now();
    char mode[32];
    ps_job_mode_str(&v->job, mode, sizeof mode);
    ps_log_info("serving keys [%llu, %llu) (%llu parameters) for %d workers, mode %s, "
                "optimizer %s",
                (unsigned long long)s->shard.begin, (unsigned long long)s->shard.end,
                (unsigned long long)s->n, s->workers, mode, v->job.optimizer);
    return 0;
}

int ps_server_run(const ps_server_config_t *cfg)
{
    ps_server_t s = {.cfg = cfg};
    int status = 1;
    char err[256] = "";
    char bound[128], advertise[128];
    ps_job_t job;
    s.view = calloc(1, sizeof *s.view);
    if (!s.view || ps_ctx_new(&s.ctx) != 0) {
        ps_log_err("out of memory");
        goto fail;
    }
    int rc = ps_sock_new(s.ctx, PS_SOCK_ROUTER, &s.router, err, sizeof err);
    if (rc == 0) {
        rc = ps_sock_bind(s.router, cfg->bind, bound, sizeof bound, err, sizeof err);
    }
    if (rc != 0) {
        ps_log_err("cannot bind %s: %s", cfg->bind, err);
        goto fail;
    }
    snprintf(advertise, sizeof advertise, "%s", cfg->advertise ? cfg->advertise : bound);
    rc = ps_link_join(&s.link, s.ctx, cfg->scheduler, PS_ROLE_SERVER, cfg->rank, advertise,
                      cfg->connect_timeout, cfg->peer_timeout, &job, err, sizeof err);
    if (rc != 0) {
        ps_log_err("%s", err);
        goto fail;
    }
    ps_log_set_role("S", ps_link_rank(s.link));
    ps_log_info("registered as S%d, listening on %s", ps_link_rank(s.link), bound);
    if (ps_link_wait_view(s.link, NULL, s.view, err, sizeof err) != 0 ||
        s_setup(&s, err, sizeof err) != 0) {
        ps_log_err("%s", err);
        ps_link_abort(s.link, err);
        goto fail;
    }
    status = s_loop(&s);
    ps_log_info("served %llu pushes and %llu pulls, rejected %llu messages, dropped %llu "
                "late pushes, version %lld, staleness mean %.2f max %lld",
                (unsigned long long)s.pushes, (unsigned long long)s.pulls,
                (unsigned long long)s.errors, (unsigned long long)s.dropped,
                (long long)s.version, ps_hist_mean(&s.staleness),
                (long long)(s.staleness.max > 0 ? s.staleness.max : 0));
fail:
    if (status != 0) {
        ps_sock_set_linger(s.router, PS_ABORT_LINGER_MS);
        ps_sock_set_linger(s.link ? ps_link_sock(s.link) : NULL, PS_ABORT_LINGER_MS);
    }
    ps_link_destroy(&s.link);
    ps_sock_destroy(&s.router);
    ps_ctx_destroy(&s.ctx);
    s_pool_fini(&s.pool); /* after ps_ctx_destroy: ZeroMQ gave every buffer back */
    free(s.w);
    free(s.state);
    for (size_t k = 0; s.nparts && k < s.nslots; k++) {
        s_release_parts(&s, k);
    }
    free(s.scratch);
    free(s.covered);
    free(s.parts);
    free(s.nparts);
    free(s.computed_on);
    free(s.pending);
    free(s.view);
    return status;
}
