/*
 * server/reply_pool.c - a free list of equal buffers under one mutex: taken
 * by the server's loop, given back from the transport's I/O thread.
 */
#include "server/reply_pool.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/error.h"

/* Most memory the pool may take, and how many copies of the shard it holds:
 * enough for a few pulls in flight at once (with 4 servers and 4 rounds in
 * flight, 2 copies ran dry and 16 MB async fell to 93 rounds/s from 108-112
 * with 4). */
#define PS_REPLY_POOL_BYTES (64u << 20)
enum { PS_REPLY_POOL_SHARDS = 4 };

struct ps_reply_pool {
    pthread_mutex_t mu; /* the free list: taken by the loop, given back by the I/O thread */
    float *mem;         /* nbufs buffers of buf_keys floats */
    uint64_t buf_keys;  /* floats per buffer */
    int *free_list;     /* indices of the free buffers */
    int nfree, nbufs;
};

int ps_reply_pool_new(ps_reply_pool_t **out, uint64_t n, uint64_t buf_keys)
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
    pthread_mutex_init(&p->mu, NULL);
    p->mem = malloc((size_t)p->nbufs * buf_keys * sizeof(float));
    p->free_list = malloc((size_t)p->nbufs * sizeof *p->free_list);
    if (!p->mem || !p->free_list) {
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
    pthread_mutex_destroy(&p->mu);
    free(p);
    *pp = NULL;
}

float *ps_reply_pool_take(ps_reply_pool_t *p)
{
    pthread_mutex_lock(&p->mu);
    float *b = p->nfree ? p->mem + (size_t)p->free_list[--p->nfree] * p->buf_keys : NULL;
    pthread_mutex_unlock(&p->mu);
    return b;
}

void ps_reply_pool_give(void *data, void *hint)
{
    ps_reply_pool_t *p = hint;
    pthread_mutex_lock(&p->mu);
    p->free_list[p->nfree++] = (int)(((float *)data - p->mem) / (ptrdiff_t)p->buf_keys);
    pthread_mutex_unlock(&p->mu);
}
