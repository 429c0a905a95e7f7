/*
 * worker/kv_impl.h - private: the KV client's state, shared by the two files
 * of the one module: kv.c (dense requests, the sockets, failover) and
 * kv_rows.c (embedding rows requests). Only those include it.
 */
#ifndef PS_WORKER_KV_IMPL_H
#define PS_WORKER_KV_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "proto/sock.h"
#include "worker/kv.h"
#include "worker/kv_encode.h"
#include "worker/kv_lanes.h"
#include "worker/kv_slots.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A server socket's drain handler argument: the client and which server. */
typedef struct {
    ps_kv_t *kv;
    int server;
} kv_peer_t;

struct ps_kv {
    int efd;             /* wakes the ticker (to stop) */
    pthread_t ticker;
    int ticker_started;

    pthread_mutex_t mu;  /* guards the sockets and everything below but fatal */
    ps_ctx_t *ctx;       /* borrowed: for a replaced server's new socket */
    ps_link_t *link;
    ps_view_t view;
    ps_sock_t **servers; /* one DEALER per server */
    kv_peer_t *peers;    /* one per server */
    ps_pollitem_t *items; /* the link, then every server */
    int64_t *versions;   /* last version served by each server */
    ps_kv_slots_t *slots;
    ps_kv_lanes_t *lanes; /* per server: pushes in flight against its credits */
    atomic_int fatal;    /* 0, or why the job is gone; read without mu */
    char fatal_why[256]; /* its reason: written once, before fatal is set */
    int stop;            /* destroy() asks the ticker to end */
    int finished;        /* the scheduler ended the job cleanly */
    char error[256];     /* the last failure a call returned; only the trainer's
                            calls write it (never the ticker) */
    uint64_t bytes_pushed, bytes_pulled;
    int64_t generation;  /* failovers seen; stamped on every request */
    int rollback;        /* a failover waits for ps_kv_rollback(): 1 a rollback, 2 a
                            replica's takeover (nothing rolls back) */
    int64_t rollback_step; /* the step it rolls back to */
    uint64_t rollbacks;    /* ps_kv_rollback() calls that found one pending */
    ps_kv_encode_t *encode; /* --wire / --compress: pushes encoded, sent as a copy;
                               NULL: fp32, zero-copy */
    int local_chunks;    /* 1: pushes to a server on this host go in chunks too
                            (ps_kv_set_local_chunks); 0: whole */
};

/* Why a request of type may not go now (the job is gone, or a rollback
 * waits; an abort goes then too), with the reason in kv->error; or 0.
 * Caller holds mu. */
int ps_kv_refused(ps_kv_t *kv, ps_kv_req_t type);

/* Sends rows request idx to piece q of server i: its run of the keys (a
 * pull of none is not sent; a push is, empty). Caller holds mu. */
void ps_kv_put_rows(ps_kv_t *kv, int idx, int i, int q);

#ifdef __cplusplus
}
#endif
#endif
