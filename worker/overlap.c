/*
 * worker/overlap.c - the communication thread of an overlapped allreduce.
 *
 * One mutex guards the step's state; one condition variable (broadcast)
 * wakes both sides: the thread when a bucket became final or on quit, the
 * trainer when the step finished or failed. The ring is only touched outside
 * the mutex by whichever side the state says owns it: the thread while a step
 * is active, the trainer otherwise. Nothing is allocated per step.
 */
#include "worker/overlap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

struct ps_overlap {
    ps_ring_t *ring;  /* borrowed; the thread's while active */
    float *buf;       /* borrowed; the gradient vector [n] */
    uint64_t n;       /* floats in buf */
    int nb;           /* buckets */
    ps_range_t buckets[PS_OVERLAP_MAX_BUCKETS]; /* [0] = last, reduced first */
    pthread_t thread; /* the communication thread */
    int started;      /* thread is running (join on destroy) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu: */
    int active;      /* a step is in progress: the ring is the thread's */
    int64_t step;    /* its training step */
    uint64_t from;   /* keys [from, n) are final */
    int next;        /* next bucket to reduce */
    int rc;          /* first failure, sticky */
    int quit;        /* destroy: the thread exits */
};

int ps_overlap_plan(const size_t *offsets, size_t ntensors, uint64_t n, size_t cap,
                    ps_range_t *out, int max)
{
    if (!offsets || ntensors == 0 || n == 0 || max < 1 || offsets[0] != 0) {
        return PS_EINVAL;
    }
    for (size_t i = 1; i < ntensors; i++) {
        if (offsets[i] <= offsets[i - 1] || offsets[i] >= n) {
            return PS_EINVAL;
        }
    }
    if (cap == 0) {
        cap = PS_OVERLAP_BUCKET_FLOATS;
    }
    int nb = 0;
    uint64_t end = n;
    for (size_t i = ntensors; i-- > 0;) {
        /* bucket [offsets[i], end) is full, or the plan is down to its last slot */
        if (i == 0 || (end - offsets[i] >= cap && nb < max - 1)) {
            out[nb++] = (ps_range_t){.begin = offsets[i], .end = end};
            end = offsets[i];
        }
    }
    return nb;
}

/* The thread: reduces each step's buckets in order as they become final. */
static void *s_main(void *arg)
{
    ps_overlap_t *o = arg;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (!o->quit &&
               !(o->active && o->next < o->nb && o->buckets[o->next].begin >= o->from)) {
            pthread_cond_wait(&o->cv, &o->mu);
        }
        if (o->quit) {
            break;
        }
        const int b = o->next;
        const ps_range_t r = o->buckets[b];
        const int64_t tag = o->step * o->nb + b;
        pthread_mutex_unlock(&o->mu);
        int rc = ps_ring_allreduce(o->ring, o->buf + r.begin, r.end - r.begin, tag);
        pthread_mutex_lock(&o->mu);
        if (rc != 0) {
            o->rc = rc;
            o->active = 0;
        } else if (++o->next == o->nb) {
            o->active = 0;
        }
        if (!o->active) {
            pthread_cond_broadcast(&o->cv);
        }
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

int ps_overlap_new(ps_ring_t *ring, float *buf, uint64_t n, const ps_range_t *buckets,
                   int nb, ps_overlap_t **out)
{
    *out = NULL;
    if (!ring || !buf || n == 0 || !buckets || nb < 1 || nb > PS_OVERLAP_MAX_BUCKETS) {
        return PS_EINVAL;
    }
    for (int b = 0; b < nb; b++) {
        if (buckets[b].begin >= buckets[b].end || buckets[b].end > n) {
            return PS_EINVAL;
        }
    }
    ps_overlap_t *o = calloc(1, sizeof(*o));
    if (!o) {
        return PS_ENOMEM;
    }
    o->ring = ring;
    o->buf = buf;
    o->n = n;
    o->nb = nb;
    memcpy(o->buckets, buckets, (size_t)nb * sizeof(*buckets));
    o->from = n;
    if (pthread_mutex_init(&o->mu, NULL) != 0) {
        free(o);
        return PS_ENOMEM;
    }
    if (pthread_cond_init(&o->cv, NULL) != 0) {
        pthread_mutex_destroy(&o->mu);
        free(o);
        return PS_ENOMEM;
    }
    if (pthread_create(&o->thread, NULL, s_main, o) != 0) {
        ps_overlap_destroy(&o);
        return PS_ENOMEM;
    }
    o->started = 1;
    *out = o;
    return 0;
}

void ps_overlap_begin(ps_overlap_t *o, int64_t step)
{
    pthread_mutex_lock(&o->mu);
    if (o->rc == 0) {
        o->step = step;
        o->from = o->n;
        o->next = 0;
        o->active = 1;
    }
    pthread_mutex_unlock(&o->mu);
}

void ps_overlap_ready(ps_overlap_t *o, uint64_t from)
{
    pthread_mutex_lock(&o->mu);
    if (o->active && from < o->from) {
        o->from = from;
        pthread_cond_broadcast(&o->cv);
    }
    pthread_mutex_unlock(&o->mu);
}

int ps_overlap_wait(ps_overlap_t *o)
{
    pthread_mutex_lock(&o->mu);
    if (o->active) {
        o->from = 0;
        pthread_cond_broadcast(&o->cv);
    }
    while (o->active) {
        pthread_cond_wait(&o->cv, &o->mu);
    }
    int rc = o->rc;
    pthread_mutex_unlock(&o->mu);
    return rc;
}

void ps_overlap_destroy(ps_overlap_t **op)
{
    if (!op || !*op) {
        return;
    }
    ps_overlap_t *o = *op;
    if (o->started) {
        pthread_mutex_lock(&o->mu);
        o->quit = 1;
        pthread_cond_broadcast(&o->cv);
        pthread_mutex_unlock(&o->mu);
        pthread_join(o->thread, NULL);
    }
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    free(o);
    *op = NULL;
}
