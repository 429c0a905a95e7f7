/*
 * server/reply_pool.c - a free list of equal buffers under one mutex: taken
 * by the server's loop, given back from the transport's I/O thread; and per
 * peer, how many buffers it holds, so a peer that does not read cannot make
 * us copy without end.
 */
#include "server/reply_pool.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/error.h"

/* Most memory the shared buffers may take, and how many copies of the shard
 * they hold: enough for a few pulls in flight at once (with 4 servers and 4
 * rounds in flight, 2 copies ran dry and 16 MB async fell to 93 rounds/s
 * from 108-112 with 4). */
#define PS_REPLY_POOL_BYTES (64u << 20)
enum { PS_REPLY_POOL_SHARDS = 4 };

/* A peer may hold as many buffers unsent as the shared ones (at least
 * PS_REPLY_POOL_PEER_MIN): its transport reads while it computes, so a peer
 * that reads gives them back as fast as the connection goes, and one that
 * does not cannot hold more. */
enum { PS_REPLY_POOL_PEER_MIN = 4 };

/* A buffer beyond the shared ones is malloc'd with its owner in this header
 * in front (64 bytes keep the floats aligned for vector loads). */
enum { PS_REPLY_EXTRA_HEAD = 64 };

struct ps_reply_pool {
    pthread_mutex_t mu; /* all below: taken by the loop, given back by the I/O thread */
    float *mem;         /* nbufs shared buffers of buf_keys floats */
    uint64_t buf_keys;  /* floats per buffer */
    int *free_list;     /* indices of the free shared buffers */
    int nfree, nbufs;
    int *owner_of;      /* per shared buffer: the peer holding it */
    int *held;          /* per peer: buffers it holds, shared and extra */
    int npeers;
    int per_peer;       /* most buffers one peer may hold */
    int holds;          /* replies out from held values, all peers (ps_reply_pool_hold) */
};

int ps_reply_pool_new(ps_reply_pool_t **out, uint64_t n, uint64_t buf_keys, int peers)
{
    *out = NULL;
    ps_reply_pool_t *p = calloc(1, sizeof *p);
    if (!p) {
        return PS_ENOMEM;
    }
    uint64_t chunks = (n + buf_keys - 1) / buf_keys;
    uint64_t most = PS_REPLY_POOL_BYTES / (buf_keys * sizeof(float));
    chunks = chunks ? chunks : 1;
    p->nbufs = (int)(chunks * PS_REPLY_POOL_SHARDS < most ? chunks * PS_REPLY_POOL_SHARDS : most);
    p->buf_keys = buf_keys;
    p->npeers = peers > 0 ? peers : 1;
    p->per_peer = p->nbufs > PS_REPLY_POOL_PEER_MIN ? p->nbufs : PS_REPLY_POOL_PEER_MIN;
    pthread_mutex_init(&p->mu, NULL);
    p->mem = malloc((size_t)p->nbufs * buf_keys * sizeof(float));
    p->free_list = malloc((size_t)p->nbufs * sizeof *p->free_list);
    p->owner_of = malloc((size_t)p->nbufs * sizeof *p->owner_of);
    p->held = calloc((size_t)p->npeers, sizeof *p->held);
    if (!p->mem || !p->free_list || !p->owner_of || !p->held) {
        ps_reply_pool_destroy(&p);
        return PS_ENOMEM;
    }
    for (int i = 0; i < p->nbufs; i++) {
        p->free_list[i] = i;
    }
    p->nfree = p->nbufs;
    *out = p;
    return 0;
}

void ps_reply_pool_destroy(ps_reply_pool_t **pp)
{
    ps_reply_pool_t *p = *pp;
    if (!p) {
        return;
    }
    free(p->mem);
    free(p->free_list);
    free(p->owner_of);
    free(p->held);
    pthread_mutex_destroy(&p->mu);
    free(p);
    *pp = NULL;
}

float *ps_reply_pool_take(ps_reply_pool_t *p, int peer)
{
    if (peer < 0 || peer >= p->npeers) {
        return NULL;
    }
    float *b = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->held[peer] < p->per_peer) {
        if (p->nfree) {
            int i = p->free_list[--p->nfree];
            p->owner_of[i] = peer;
            b = p->mem + (size_t)i * p->buf_keys;
        } else {
            char *raw = malloc(PS_REPLY_EXTRA_HEAD + p->buf_keys * sizeof(float));
            if (raw) {
                *(int *)raw = peer;
                b = (float *)(raw + PS_REPLY_EXTRA_HEAD);
            }
        }
        p->held[peer] += b != NULL;
    }
    pthread_mutex_unlock(&p->mu);
    return b;
}

int ps_reply_pool_held(ps_reply_pool_t *p, int peer)
{
    if (peer < 0 || peer >= p->npeers) {
        return 0;
    }
    pthread_mutex_lock(&p->mu);
    int n = p->held[peer];
    pthread_mutex_unlock(&p->mu);
    return n;
}

void ps_reply_pool_give(void *data, void *hint)
{
    ps_reply_pool_t *p = hint;
    float *b = data;
    pthread_mutex_lock(&p->mu);
    if (b >= p->mem && b < p->mem + (size_t)p->nbufs * p->buf_keys) {
        int i = (int)((b - p->mem) / (ptrdiff_t)p->buf_keys);
        p->held[p->owner_of[i]]--;
        p->free_list[p->nfree++] = i;
    } else {
        char *raw = (char *)data - PS_REPLY_EXTRA_HEAD;
        p->held[*(int *)raw]--;
        free(raw);
    }
    pthread_mutex_unlock(&p->mu);
}

int ps_reply_pool_hold_cap(const ps_reply_pool_t *p)
{
    return p->nbufs;
}

int ps_reply_pool_hold(ps_reply_pool_t *p, int peer)
{
    if (peer < 0 || peer >= p->npeers) {
        return PS_ENOMEM;
    }
    int rc = PS_ENOMEM;
    pthread_mutex_lock(&p->mu);
    if (p->held[peer] < p->per_peer && p->holds < p->nbufs) {
        p->held[peer]++;
        p->holds++;
        rc = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void ps_reply_pool_unhold(ps_reply_pool_t *p, int peer)
{
    pthread_mutex_lock(&p->mu);
    p->held[peer]--;
    p->holds--;
    pthread_mutex_unlock(&p->mu);
}
