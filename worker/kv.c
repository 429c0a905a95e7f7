/*
 * worker/kv.c - push/pull client; the thread that waits does the I/O.
 *
 * Every socket and all state belong to whoever holds mu. The trainer sends a
 * request itself when it submits it, and while it waits it polls the sockets
 * itself, so a reply reaches it with no hand-off between threads (on a busy
 * machine each hand-off is a wake-up and a context switch per message). While
 * the trainer computes, a ticker thread takes mu every KV_TICK_MS to handle
 * what arrived (scheduler messages, replies) and send heartbeats. Request ids
 * carry the slot index and a generation, so a late reply to a recycled slot is
 * recognised and dropped.
 */
#include "worker/kv.h"

#include <poll.h>
#include <pthread.h>
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

/* How often the ticker looks at the sockets while nobody waits; also the
 * longest a waiter polls before it checks heartbeats and the job's state. */
enum { KV_TICK_MS = 50 };

typedef enum { SLOT_FREE, SLOT_SENT, SLOT_DONE } slot_state_t;
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
} kv_slot_t;

struct ps_kv {
    int efd;             /* wakes the ticker (to stop) */
    pthread_t ticker;
    int ticker_started;

    pthread_mutex_t mu;  /* guards the sockets and everything below */
    ps_link_t link;
    ps_view_t view;
    void **servers;      /* one DEALER per server */
    zmq_pollitem_t *items; /* the link, then every server */
    uint64_t *next_key;  /* KV_SLOTS*servers: next key each server's pull reply must start at */
    int64_t *versions;   /* last version served by each server */
    kv_slot_t slots[KV_SLOTS];
    int fatal;           /* 0, or why the job is gone; also read without mu (atomic) */
    int stop;            /* destroy() asks the ticker to end */
    int finished;        /* the scheduler ended the job cleanly */
    char error[256];
    uint64_t bytes_pushed, bytes_pulled;
};

/* Records a fatal condition: every wait fails from now on. Caller holds mu. */
static void s_set_fatal(ps_kv_t *kv, int rc, const char *why)
{
    if (!kv->fatal) {
        snprintf(kv->error, sizeof kv->error, "%s", why);
        __atomic_store_n(&kv->fatal, rc, __ATOMIC_RELEASE);
    }
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
    }
}

static uint64_t s_request_id(const kv_slot_t *sl, int idx)
{
    return ((uint64_t)sl->gen << 8) | (uint64_t)idx;
}

/* Sends a data request: one message per server holding part of its keys.
 * Caller holds mu. */
static void s_send_request(ps_kv_t *kv, int idx)
{
    kv_slot_t *sl = &kv->slots[idx];
    ps_msg_type_t type = sl->type == REQ_PUSH ? PS_MSG_PUSH
                       : sl->type == REQ_PULL ? PS_MSG_PULL
                                               : PS_MSG_INIT;
    uint64_t parts = 0;
    for (int i = 0; i < kv->view.num_servers; i++) {
        ps_range_t srv = {kv->view.servers[i].begin, kv->view.servers[i].end}, part;
        if (ps_range_intersect(sl->range, srv, &part)) {
            parts++;
            kv->next_key[(size_t)idx * (size_t)kv->view.num_servers + (size_t)i] = part.begin;
        }
    }
    /* Servers answer a pull in as many messages as they like, in key order. */
    sl->left = type == PS_MSG_PULL ? ps_range_len(sl->range) : parts;
    if (sl->left == 0) {
        sl->state = SLOT_DONE;
    }
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
        if (rc != 0) {
            char why[160];
            snprintf(why, sizeof why, "sending to S%d failed: %s", i, ps_strerror(rc));
            s_part_done(kv, sl, rc, why, 0);
        } else if (type == PS_MSG_PUSH) {
            kv->bytes_pushed += f.len;
        }
    }
}

/* A reply from server i. Caller holds mu. */
static void s_on_server_reply(ps_kv_t *kv, int i, const ps_msg_t *m)
{
    const ps_header_t *h = &m->hdr;
    int idx = (int)(h->request_id & 0xff);
    uint32_t gen = (uint32_t)(h->request_id >> 8);
    kv_slot_t *sl = idx < KV_SLOTS ? &kv->slots[idx] : NULL;
    if (!sl || sl->gen != gen || sl->state != SLOT_SENT || h->role != PS_ROLE_SERVER ||
        h->sender != i) {
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
            memcpy(sl->buf + (r.begin - sl->range.begin), p, len);
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
}

/* Completes the (single) scheduler request of the given type. Caller holds mu. */
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
    if (rc == 1) {
        kv->finished = 1;
        s_complete_sched(kv, REQ_FINISH);
        s_set_fatal(kv, PS_ECLOSED, "the scheduler ended the job");
    } else if (rc < 0) {
        s_set_fatal(kv, PS_ECLOSED, err);
    } else if (rc == PS_MSG_BARRIER_DONE) {
        s_complete_sched(kv, REQ_BARRIER);
    }
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

/* Waits up to timeout_ms for any socket, handles everything that arrived and
 * sends a heartbeat when one is due. Caller holds mu. */
static void s_pump(ps_kv_t *kv, long timeout_ms)
{
    int n = kv->view.num_servers;
    if (zmq_poll(kv->items, n + 1, timeout_ms) > 0) {
        if (kv->items[0].revents & ZMQ_POLLIN) {
            s_drain(kv, kv->link.sock, -1);
        }
        for (int i = 0; i < n; i++) {
            if (kv->items[1 + i].revents & ZMQ_POLLIN) {
                s_drain(kv, kv->servers[i], i);
            }
        }
    }
    char err[256];
    if (ps_link_tick(&kv->link, err, sizeof err) != 0 && !kv->finished) {
        s_set_fatal(kv, PS_ECLOSED, err);
    }
}

/* The ticker: handles the sockets while nobody waits on them. */
static void *s_ticker_main(void *arg)
{
    ps_kv_t *kv = arg;
    for (;;) {
        struct pollfd p = {.fd = kv->efd, .events = POLLIN};
        if (poll(&p, 1, KV_TICK_MS) > 0) {
            uint64_t v;
            ssize_t got = read(kv->efd, &v, sizeof v);
            (void)got;
        }
        pthread_mutex_lock(&kv->mu);
        if (kv->stop) {
            pthread_mutex_unlock(&kv->mu);
            return NULL;
        }
        s_pump(kv, 0);
        pthread_mutex_unlock(&kv->mu);
    }
}

/* Sends a control message to the scheduler. Caller holds mu. */
static int s_send_ctrl(ps_kv_t *kv, req_type_t type, const char *name, const uint8_t *body,
                       size_t len)
{
    if (type == REQ_BARRIER) {
        uint8_t *b;
        size_t blen;
        int rc = ps_codec_pack_barrier(name, &b, &blen);
        if (rc == 0) {
            rc = ps_msg_send_ctrl(kv->link.sock, NULL, PS_MSG_BARRIER, PS_ROLE_WORKER,
                                  kv->link.rank, b, blen);
            free(b);
        }
        return rc;
    }
    return ps_msg_send_ctrl(kv->link.sock, NULL,
                            type == REQ_FINISH ? PS_MSG_DONE : PS_MSG_SHUTDOWN,
                            PS_ROLE_WORKER, kv->link.rank, body, len);
}

/* Takes a free slot, fills it and sends the request. Returns the handle or a
 * PS_E*. Control requests (barrier, finish, abort) carry name or body. */
static int s_submit(ps_kv_t *kv, req_type_t type, uint64_t begin, uint64_t end, float *buf,
                    int64_t step, const char *name, const uint8_t *body, size_t len)
{
    if (end < begin || end > kv->view.num_params) {
        return PS_EINVAL;
    }
    pthread_mutex_lock(&kv->mu);
    if (kv->fatal) {
        pthread_mutex_unlock(&kv->mu);
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
        return PS_ENOMEM;
    }
    kv_slot_t *sl = &kv->slots[idx];
    uint32_t gen = sl->gen + 1;
    *sl = (kv_slot_t){.state = SLOT_SENT, .type = type, .gen = gen & 0xffffff,
                      .range = {begin, end}, .buf = buf, .step = step};
    if (type == REQ_PUSH || type == REQ_PULL || type == REQ_INIT) {
        s_send_request(kv, idx);
    } else {
        sl->left = 1;
        int rc = s_send_ctrl(kv, type, name, body, len);
        if (rc != 0 || type == REQ_ABORT) { /* an abort expects no answer */
            s_part_done(kv, sl, rc, "cannot reach the scheduler", 1);
        }
    }
    pthread_mutex_unlock(&kv->mu);
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
    while (sl->state == SLOT_SENT && !kv->fatal) {
        s_pump(kv, KV_TICK_MS);
    }
    int rc = sl->state == SLOT_DONE ? sl->status : kv->fatal;
    if (sl->type == REQ_FINISH && kv->finished) {
        rc = 0;
    }
    if (sl->state == SLOT_DONE) {
        sl->state = SLOT_FREE;
    }
    pthread_mutex_unlock(&kv->mu);
    return rc;
}

/* Sends a control request to the scheduler and waits for its answer. */
static int s_submit_ctrl(ps_kv_t *kv, req_type_t type, const char *name, const uint8_t *body,
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
    if (rc == 0) {
        rc = s_submit_ctrl(kv, REQ_FINISH, NULL, body, len);
        free(body);
    }
    return rc;
}

void ps_kv_abort(ps_kv_t *kv, const char *reason)
{
    uint8_t *body;
    size_t len;
    if (!ps_kv_status(kv) && ps_codec_pack_shutdown(PS_ECLOSED, reason, &body, &len) == 0) {
        s_submit_ctrl(kv, REQ_ABORT, NULL, body, len);
        free(body);
    }
}

int ps_kv_status(ps_kv_t *kv)
{
    return __atomic_load_n(&kv->fatal, __ATOMIC_ACQUIRE);
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
    kv->view = *view;
    kv->link = *link;
    link->sock = NULL;
    kv->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&kv->mu, NULL);
    int n = view->num_servers;
    /* n = 0 in allreduce mode: the client then only keeps the scheduler link
     * (heartbeats, barriers, the final report, aborts). */
    size_t ns = n > 0 ? (size_t)n : 1;
    kv->servers = calloc(ns, sizeof *kv->servers);
    kv->items = calloc(ns + 1, sizeof *kv->items);
    kv->versions = calloc(ns, sizeof *kv->versions);
    kv->next_key = calloc((size_t)KV_SLOTS * ns, sizeof *kv->next_key);
    if (kv->efd < 0 || !kv->servers || !kv->items || !kv->versions || !kv->next_key) {
        snprintf(err, errlen, "out of memory");
        ps_kv_destroy(&kv);
        return PS_ENOMEM;
    }
    kv->items[0] = (zmq_pollitem_t){.socket = kv->link.sock, .events = ZMQ_POLLIN};
    for (int i = 0; i < n; i++) {
        kv->servers[i] = ps_transport_open(ctx, ZMQ_DEALER);
        if (!kv->servers[i] || ps_transport_connect(kv->servers[i], view->servers[i].endpoint)) {
            snprintf(err, errlen, "cannot connect to S%d at '%s'", i, view->servers[i].endpoint);
            ps_kv_destroy(&kv);
            return PS_EINVAL;
        }
        kv->items[1 + i] = (zmq_pollitem_t){.socket = kv->servers[i], .events = ZMQ_POLLIN};
    }
    if (pthread_create(&kv->ticker, NULL, s_ticker_main, kv) != 0) {
        snprintf(err, errlen, "cannot start the ticker thread");
        ps_kv_destroy(&kv);
        return PS_ENOMEM;
    }
    kv->ticker_started = 1;
    *out = kv;
    return 0;
}

void ps_kv_destroy(ps_kv_t **kvp)
{
    ps_kv_t *kv = *kvp;
    if (!kv) {
        return;
    }
    if (kv->ticker_started) {
        pthread_mutex_lock(&kv->mu);
        kv->stop = 1;
        pthread_mutex_unlock(&kv->mu);
        uint64_t one = 1;
        ssize_t w = write(kv->efd, &one, sizeof one);
        (void)w;
        pthread_join(kv->ticker, NULL);
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
    if (kv->efd >= 0) {
        close(kv->efd);
    }
    pthread_mutex_destroy(&kv->mu);
    free(kv->servers);
    free(kv->items);
    free(kv->versions);
    free(kv->next_key);
    free(kv);
    *kvp = NULL;
}
