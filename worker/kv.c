/*
 * worker/kv.c - push/pull client with a background I/O thread.
 *
 * The trainer thread fills a request slot and queues its index; an eventfd
 * wakes the I/O thread, which owns every ZeroMQ socket. Replies complete the
 * slot's parts; the last part marks it done and signals the condition
 * variable. Request ids carry the slot index and a generation, so a late
 * reply to a recycled slot is recognised and dropped.
 */
#include "worker/kv.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "proto/msg.h"
#include "proto/range.h"

enum { KV_SLOTS = 64 };

typedef enum { SLOT_FREE, SLOT_QUEUED, SLOT_SENT, SLOT_DONE } slot_state_t;
typedef enum { REQ_PUSH, REQ_PULL, REQ_INIT, REQ_BARRIER, REQ_FINISH, REQ_ABORT } req_type_t;

typedef struct {
    slot_state_t state;
    req_type_t type;
    uint32_t gen;       /* bumped at every reuse; part of the request id */
    ps_range_t range;   /* keys asked for */
    float *buf;         /* push/init: source; pull: destination */
    int64_t step;       /* push: step; pull: min version */
    uint64_t left;      /* push/init: acks still missing; pull: keys still missing */
    int status;         /* 0 or the first failure */
    char name[64];      /* barrier name */
    uint8_t *body;      /* finish/abort: packed control body (owned) */
    size_t body_len;
} kv_slot_t;

struct ps_kv {
    void *ctx;
    ps_link_t link;      /* owned by the I/O thread once it runs */
    ps_view_t view;
    void **servers;      /* one DEALER per server, I/O thread's */
    uint64_t *next_key;  /* KV_SLOTS*servers: next key each server's pull reply must start at */
    int64_t *versions;   /* last version served by each server; written by the I/O thread under mu */
    int efd;             /* wakes the I/O thread */
    pthread_t thread;
    int thread_started;

    pthread_mutex_t mu;  /* guards everything below */
    pthread_cond_t cv;
    kv_slot_t slots[KV_SLOTS];
    int queue[KV_SLOTS]; /* slot indices to send, FIFO */
    int qhead, qlen;
    int fatal;           /* 0, or why the job is gone */
    int stop;            /* destroy() asks the thread to end */
    int finished;        /* the scheduler ended the job cleanly */
    char error[256];
    uint64_t bytes_pushed, bytes_pulled;
};

/* Records a fatal condition and wakes every waiter. Caller holds mu. */
static void s_set_fatal(ps_kv_t *kv, int rc, const char *why)
{
    if (!kv->fatal) {
        kv->fatal = rc;
        snprintf(kv->error, sizeof kv->error, "%s", why);
    }
    pthread_cond_broadcast(&kv->cv);
}

/* Marks `amount` of a slot answered (acks, or keys of a pull); completes it
 * when nothing is left, or at once on a failure. Caller holds mu. */
static void s_part_done(ps_kv_t *kv, kv_slot_t *sl, int status, const char *why,
                        uint64_t amount)
{
    if (status && !sl->status) {
        sl->status = status;
        snprintf(kv->error, sizeof kv->error, "%s", why);
    }
    sl->left = (status || amount >= sl->left) ? 0 : sl->left - amount;
    if (sl->left == 0) {
        sl->state = SLOT_DONE;
        pthread_cond_broadcast(&kv->cv);
    }
}

static uint64_t s_request_id(const kv_slot_t *sl, int idx)
{
    return ((uint64_t)sl->gen << 8) | (uint64_t)idx;
}

/* I/O thread: sends one queued request. */
static void s_send_request(ps_kv_t *kv, int idx)
{
    kv_slot_t *sl = &kv->slots[idx];
    ps_msg_type_t type = sl->type == REQ_PUSH ? PS_MSG_PUSH
                       : sl->type == REQ_PULL ? PS_MSG_PULL
                                               : PS_MSG_INIT;
    if (sl->type == REQ_BARRIER || sl->type == REQ_FINISH || sl->type == REQ_ABORT) {
        int rc;
        if (sl->type == REQ_BARRIER) {
            uint8_t *body;
            size_t len;
            rc = ps_codec_pack_barrier(sl->name, &body, &len);
            if (rc == 0) {
                rc = ps_msg_send_ctrl(kv->link.sock, NULL, PS_MSG_BARRIER, PS_ROLE_WORKER,
                                      kv->link.rank, body, len);
                free(body);
            }
        } else {
            rc = ps_msg_send_ctrl(kv->link.sock, NULL,
                                  sl->type == REQ_FINISH ? PS_MSG_DONE : PS_MSG_SHUTDOWN,
                                  PS_ROLE_WORKER, kv->link.rank, sl->body, sl->body_len);
        }
        pthread_mutex_lock(&kv->mu);
        sl->state = SLOT_SENT;
        sl->left = 1;
        if (rc != 0) {
            s_part_done(kv, sl, rc, "cannot reach the scheduler", 1);
        } else if (sl->type == REQ_ABORT) {
            s_part_done(kv, sl, 0, "", 1);
        }
        pthread_mutex_unlock(&kv->mu);
        return;
    }
    uint64_t parts = 0;
    for (int i = 0; i < kv->view.num_servers; i++) {
        ps_range_t srv = {kv->view.servers[i].begin, kv->view.servers[i].end}, part;
        if (ps_range_intersect(sl->range, srv, &part)) {
            parts++;
            kv->next_key[(size_t)idx * (size_t)kv->view.num_servers + (size_t)i] = part.begin;
        }
    }
    pthread_mutex_lock(&kv->mu);
    sl->state = SLOT_SENT;
    /* Servers answer a pull in as many messages as they like, in key order. */
    sl->left = type == PS_MSG_PULL ? ps_range_len(sl->range) : parts;
    if (sl->left == 0) {
        sl->state = SLOT_DONE;
        pthread_cond_broadcast(&kv->cv);
    }
    pthread_mutex_unlock(&kv->mu);
    for (int i = 0; i < kv->view.num_servers; i++) {
        ps_range_t srv = {kv->view.servers[i].begin, kv->view.servers[i].end}, part;
        uint64_t n = ps_range_intersect(sl->range, srv, &part);
        if (!n) {
            continue;
        }
        ps_header_t h;
        ps_msg_header(&h, type, PS_ROLE_WORKER, kv->link.rank);
        h.request_id = s_request_id(sl, idx);
        h.begin = part.begin;
        h.end = part.end;
        h.step = sl->step;
        h.version = kv->versions[i];
        ps_frame_t f = {sl->buf + (part.begin - sl->range.begin), n * sizeof(float)};
        int has_payload = type != PS_MSG_PULL;
        int rc = ps_msg_send(kv->servers[i], NULL, h, &f, has_payload, 0);
        pthread_mutex_lock(&kv->mu);
        if (rc != 0) {
            char why[160];
            snprintf(why, sizeof why, "sending to S%d failed: %s", i, ps_strerror(rc));
            s_part_done(kv, sl, rc, why, 0);
        } else if (type == PS_MSG_PUSH) {
            kv->bytes_pushed += f.len;
        }
        pthread_mutex_unlock(&kv->mu);
    }
}

/* I/O thread: a reply from server i. */
static void s_on_server_reply(ps_kv_t *kv, int i, const ps_msg_t *m)
{
    const ps_header_t *h = &m->hdr;
    int idx = (int)(h->request_id & 0xff);
    uint32_t gen = (uint32_t)(h->request_id >> 8);
    pthread_mutex_lock(&kv->mu);
    kv_slot_t *sl = idx < KV_SLOTS ? &kv->slots[idx] : NULL;
    if (!sl || sl->gen != gen || sl->state != SLOT_SENT || h->role != PS_ROLE_SERVER ||
        h->sender != i) {
        pthread_mutex_unlock(&kv->mu);
        ps_log_warn("dropped a stray %s from S%d", ps_codec_type_name(h->type), i);
        return;
    }
    char why[256];
    if (h->type == PS_MSG_ERROR) {
        snprintf(why, sizeof why, "S%d refused: %s", i, h->error);
        s_part_done(kv, sl, h->status < 0 ? h->status : PS_EPROTO, why, 0);
    } else if (h->type == PS_MSG_PULL_REPLY && sl->type == REQ_PULL) {
        ps_range_t r = {h->begin, h->end}, srv = {kv->view.servers[i].begin,
                                                   kv->view.servers[i].end};
        uint64_t *next = &kv->next_key[(size_t)idx * (size_t)kv->view.num_servers + (size_t)i];
        size_t len = 0;
        const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
        /* Each server's parts must come in key order, each key once. */
        if (!p || r.begin != *next || r.end <= r.begin || !ps_range_contains(sl->range, r) ||
            !ps_range_contains(srv, r) || len != ps_range_len(r) * sizeof(float)) {
            snprintf(why, sizeof why, "S%d sent a pull reply that does not match the request", i);
            s_part_done(kv, sl, PS_EPROTO, why, 0);
        } else {
            *next = r.end;
            kv->versions[i] = h->version;
            kv->bytes_pulled += len;
            /* The copy runs unlocked: the buffer is the waiter's only once the
             * slot is done, which happens below. */
            pthread_mutex_unlock(&kv->mu);
            memcpy(sl->buf + (r.begin - sl->range.begin), p, len);
            pthread_mutex_lock(&kv->mu);
            s_part_done(kv, sl, 0, "", ps_range_len(r));
        }
    } else if ((h->type == PS_MSG_PUSH_ACK && sl->type == REQ_PUSH) ||
               (h->type == PS_MSG_INIT_ACK && sl->type == REQ_INIT)) {
        s_part_done(kv, sl, 0, "", 1);
    } else {
        snprintf(why, sizeof why, "S%d answered with an unexpected %s", i,
                 ps_codec_type_name(h->type));
        s_part_done(kv, sl, PS_EPROTO, why, 0);
    }
    pthread_mutex_unlock(&kv->mu);
}

/* I/O thread: completes the (single) scheduler request of the given type. */
static void s_complete_sched(ps_kv_t *kv, req_type_t type)
{
    for (int i = 0; i < KV_SLOTS; i++) {
        kv_slot_t *sl = &kv->slots[i];
        if (sl->state == SLOT_SENT && sl->type == type) {
            s_part_done(kv, sl, 0, "", 1);
        }
    }
}

static void s_on_sched(ps_kv_t *kv, const ps_msg_t *m)
{
    char err[256];
    int rc = ps_link_handle(&kv->link, m, err, sizeof err);
    pthread_mutex_lock(&kv->mu);
    if (rc == 1) {
        kv->finished = 1;
        s_complete_sched(kv, REQ_FINISH);
        s_set_fatal(kv, PS_ECLOSED, "the scheduler ended the job");
    } else if (rc < 0) {
        s_set_fatal(kv, PS_ECLOSED, err);
    } else if (rc == PS_MSG_BARRIER_DONE) {
        s_complete_sched(kv, REQ_BARRIER);
    }
    pthread_mutex_unlock(&kv->mu);
}

/* Reads every message waiting on sock; server >= 0 for a server socket. */
static void s_drain(ps_kv_t *kv, void *sock, int server)
{
    for (;;) {
        int ev = 0;
        size_t evlen = sizeof ev;
        zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &evlen);
        if (!(ev & ZMQ_POLLIN)) {
            return;
        }
        ps_msg_t m = {0};
        int rc = ps_msg_recv(sock, 0, &m);
        if (rc == 0) {
            if (server >= 0) {
                s_on_server_reply(kv, server, &m);
            } else {
                kv->link.last_seen = ps_now();
                s_on_sched(kv, &m);
            }
        } else if (rc == PS_EPROTO) {
            ps_log_warn("dropped a malformed message from %s: %s",
                        server >= 0 ? "a server" : "the scheduler", m.hdr.error);
        }
        ps_msg_close(&m);
        if (rc != 0 && rc != PS_EPROTO) {
            return;
        }
    }
}

static void *s_io_main(void *arg)
{
    ps_kv_t *kv = arg;
    int n = kv->view.num_servers;
    zmq_pollitem_t *items = calloc((size_t)n + 2, sizeof *items);
    if (!items) {
        pthread_mutex_lock(&kv->mu);
        s_set_fatal(kv, PS_ENOMEM, "out of memory in the I/O thread");
        pthread_mutex_unlock(&kv->mu);
        return NULL;
    }
    items[0].fd = kv->efd;
    items[0].events = ZMQ_POLLIN;
    items[1].socket = kv->link.sock;
    items[1].events = ZMQ_POLLIN;
    for (int i = 0; i < n; i++) {
        items[2 + i].socket = kv->servers[i];
        items[2 + i].events = ZMQ_POLLIN;
    }
    for (;;) {
        zmq_poll(items, n + 2, 100);
        if (items[0].revents & ZMQ_POLLIN) {
            uint64_t v;
            ssize_t got = read(kv->efd, &v, sizeof v);
            (void)got;
        }
        for (;;) {
            pthread_mutex_lock(&kv->mu);
            int stop = kv->stop, idx = -1;
            if (kv->qlen) {
                idx = kv->queue[kv->qhead];
                kv->qhead = (kv->qhead + 1) % KV_SLOTS;
                kv->qlen--;
            }
            pthread_mutex_unlock(&kv->mu);
            if (stop) {
                free(items);
                return NULL;
            }
            if (idx < 0) {
                break;
            }
            s_send_request(kv, idx);
        }
        s_drain(kv, kv->link.sock, -1);
        for (int i = 0; i < n; i++) {
            s_drain(kv, kv->servers[i], i);
        }
        char err[256];
        if (ps_link_tick(&kv->link, err, sizeof err) != 0) {
            pthread_mutex_lock(&kv->mu);
            if (!kv->finished) {
                s_set_fatal(kv, PS_ECLOSED, err);
            }
            pthread_mutex_unlock(&kv->mu);
        }
    }
}

/* Trainer thread: takes a free slot, fills it, queues it. Returns the handle. */
static int s_submit(ps_kv_t *kv, req_type_t type, uint64_t begin, uint64_t end, float *buf,
                    int64_t step, const char *name, uint8_t *body, size_t len)
{
    if (end < begin || end > kv->view.num_params) {
        free(body);
        return PS_EINVAL;
    }
    pthread_mutex_lock(&kv->mu);
    if (kv->fatal) {
        pthread_mutex_unlock(&kv->mu);
        free(body);
        return kv->fatal;
    }
    int idx = -1;
    for (int i = 0; i < KV_SLOTS; i++) {
        if (kv->slots[i].state == SLOT_FREE) {
            idx = i;
            break;
        }
    }
    if (idx < 0) {
        pthread_mutex_unlock(&kv->mu);
        free(body);
        return PS_ENOMEM;
    }
    kv_slot_t *sl = &kv->slots[idx];
    uint32_t gen = sl->gen + 1;
    free(sl->body);
    memset(sl, 0, sizeof *sl);
    sl->gen = gen & 0xffffff;
    sl->state = SLOT_QUEUED;
    sl->type = type;
    sl->range.begin = begin;
    sl->range.end = end;
    sl->buf = buf;
    sl->step = step;
    snprintf(sl->name, sizeof sl->name, "%s", name ? name : "");
    sl->body = body;
    sl->body_len = len;
    kv->queue[(kv->qhead + kv->qlen) % KV_SLOTS] = idx;
    kv->qlen++;
    pthread_mutex_unlock(&kv->mu);
    uint64_t one = 1;
    ssize_t w = write(kv->efd, &one, sizeof one);
    (void)w;
    return idx;
}

int ps_kv_push(ps_kv_t *kv, uint64_t begin, uint64_t end, const float *grad, int64_t step)
{
    return s_submit(kv, REQ_PUSH, begin, end, (float *)grad, step, NULL, NULL, 0);
}

int ps_kv_pull(ps_kv_t *kv, uint64_t begin, uint64_t end, float *dst, int64_t min_version)
{
    return s_submit(kv, REQ_PULL, begin, end, dst, min_version, NULL, NULL, 0);
}

int ps_kv_init(ps_kv_t *kv, uint64_t begin, uint64_t end, const float *values)
{
    return s_submit(kv, REQ_INIT, begin, end, (float *)values, 0, NULL, NULL, 0);
}

int ps_kv_wait(ps_kv_t *kv, int handle)
{
    if (handle < 0 || handle >= KV_SLOTS) {
        return PS_EINVAL;
    }
    pthread_mutex_lock(&kv->mu);
    kv_slot_t *sl = &kv->slots[handle];
    while (sl->state != SLOT_DONE && !kv->fatal) {
        pthread_cond_wait(&kv->cv, &kv->mu);
    }
    int rc = sl->state == SLOT_DONE ? sl->status : kv->fatal;
    if (sl->type == REQ_FINISH && kv->finished) {
        rc = 0;
    }
    if (sl->state == SLOT_DONE) {
        free(sl->body);
        sl->body = NULL;
        sl->state = SLOT_FREE;
    }
    pthread_mutex_unlock(&kv->mu);
    return rc;
}

/* Queues a control request to the scheduler with an optional packed body. */
static int s_submit_ctrl(ps_kv_t *kv, req_type_t type, const char *name, uint8_t *body,
                         size_t len)
{
    int h = s_submit(kv, type, 0, 0, NULL, 0, name, body, len);
    return h < 0 ? h : ps_kv_wait(kv, h);
}

int ps_kv_barrier(ps_kv_t *kv, const char *name)
{
    return s_submit_ctrl(kv, REQ_BARRIER, name, NULL, 0);
}

int ps_kv_finish(ps_kv_t *kv, const ps_done_t *done)
{
    uint8_t *body;
    size_t len;
    int rc = ps_codec_pack_done(done, &body, &len);
    return rc ? rc : s_submit_ctrl(kv, REQ_FINISH, NULL, body, len);
}

void ps_kv_abort(ps_kv_t *kv, const char *reason)
{
    uint8_t *body;
    size_t len;
    pthread_mutex_lock(&kv->mu);
    int gone = kv->fatal != 0;
    pthread_mutex_unlock(&kv->mu);
    if (!gone && ps_codec_pack_shutdown(PS_ECLOSED, reason, &body, &len) == 0) {
        s_submit_ctrl(kv, REQ_ABORT, NULL, body, len);
    }
}

int ps_kv_status(ps_kv_t *kv)
{
    pthread_mutex_lock(&kv->mu);
    int rc = kv->fatal;
    pthread_mutex_unlock(&kv->mu);
    return rc;
}

const char *ps_kv_error(ps_kv_t *kv)
{
    return kv->error;
}

int64_t ps_kv_version(ps_kv_t *kv)
{
    int64_t v = INT64_MAX;
    pthread_mutex_lock(&kv->mu);
    for (int i = 0; i < kv->view.num_servers; i++) {
        if (kv->view.servers[i].end > kv->view.servers[i].begin && kv->versions[i] < v) {
            v = kv->versions[i];
        }
    }
    pthread_mutex_unlock(&kv->mu);
    return v == INT64_MAX ? 0 : v;
}

void ps_kv_bytes(ps_kv_t *kv, uint64_t *pushed, uint64_t *pulled)
{
    pthread_mutex_lock(&kv->mu);
    *pushed = kv->bytes_pushed;
    *pulled = kv->bytes_pulled;
    pthread_mutex_unlock(&kv->mu);
}

int ps_kv_new(void *ctx, ps_link_t *link, const ps_view_t *view, ps_kv_t **out, char *err,
              size_t errlen)
{
    ps_kv_t *kv = calloc(1, sizeof *kv);
    if (!kv) {
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    kv->ctx = ctx;
    kv->view = *view;
    kv->link = *link;
    link->sock = NULL;
    kv->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&kv->mu, NULL);
    pthread_cond_init(&kv->cv, NULL);
    int n = view->num_servers;
    /* n = 0 in allreduce mode: the client then only keeps the scheduler link
     * (heartbeats, barriers, the final report, aborts). */
    kv->servers = calloc(n > 0 ? (size_t)n : 1, sizeof *kv->servers);
    kv->versions = calloc(n > 0 ? (size_t)n : 1, sizeof *kv->versions);
    kv->next_key = calloc((size_t)KV_SLOTS * (n > 0 ? (size_t)n : 1), sizeof *kv->next_key);
    if (kv->efd < 0 || !kv->servers || !kv->versions || !kv->next_key) {
        snprintf(err, errlen, "out of memory");
        ps_kv_destroy(&kv);
        return PS_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        kv->servers[i] = ps_transport_open(ctx, ZMQ_DEALER);
        if (!kv->servers[i] || ps_transport_connect(kv->servers[i], view->servers[i].endpoint)) {
            snprintf(err, errlen, "cannot connect to S%d at '%s'", i, view->servers[i].endpoint);
            ps_kv_destroy(&kv);
            return PS_EINVAL;
        }
    }
    if (pthread_create(&kv->thread, NULL, s_io_main, kv) != 0) {
        snprintf(err, errlen, "cannot start the I/O thread");
        ps_kv_destroy(&kv);
        return PS_ENOMEM;
    }
    kv->thread_started = 1;
    *out = kv;
    return 0;
}

void ps_kv_destroy(ps_kv_t **kvp)
{
    ps_kv_t *kv = *kvp;
    if (!kv) {
        return;
    }
    if (kv->thread_started) {
        pthread_mutex_lock(&kv->mu);
        kv->stop = 1;
        pthread_mutex_unlock(&kv->mu);
        uint64_t one = 1;
        ssize_t w = write(kv->efd, &one, sizeof one);
        (void)w;
        pthread_join(kv->thread, NULL);
    }
    int aborted = kv->fatal && !kv->finished;
    for (int i = 0; kv->servers && i < kv->view.num_servers; i++) {
        if (aborted) {
            ps_transport_set_linger(kv->servers[i], PS_ABORT_LINGER_MS);
        }
        ps_transport_close(&kv->servers[i]);
    }
    if (aborted) {
        ps_transport_set_linger(kv->link.sock, PS_ABORT_LINGER_MS);
    }
    ps_link_close(&kv->link);
    for (int i = 0; i < KV_SLOTS; i++) {
        free(kv->slots[i].body);
    }
    if (kv->efd >= 0) {
        close(kv->efd);
    }
    pthread_mutex_destroy(&kv->mu);
    pthread_cond_destroy(&kv->cv);
    free(kv->servers);
    free(kv->versions);
    free(kv->next_key);
    free(kv);
    *kvp = NULL;
}
