/* worker/kv_lanes.c - per server, pushes in flight against its credits and
 * the messages waiting behind them (see kv_lanes.h). */
#include "worker/kv_lanes.h"

#include <stdlib.h>

#include "common/error.h"

typedef struct {
    ps_kv_out_t *q; /* cap entries: a ring */
    int head, n;    /* first waiting, count */
    int inflight;   /* pushes sent, not answered */
    int window;     /* pushes that may be in flight */
} s_lane_t;

struct ps_kv_lanes {
    s_lane_t *lane; /* n */
    int n, cap;
};

int ps_kv_lanes_new(int n, int cap, ps_kv_lanes_t **out)
{
    *out = NULL;
    if (n < 0 || cap < 1) {
        return PS_EINVAL;
    }
    ps_kv_lanes_t *l = calloc(1, sizeof *l);
    if (!l || !(l->lane = calloc(n > 0 ? (size_t)n : 1, sizeof *l->lane))) {
        free(l);
        return PS_ENOMEM;
    }
    l->n = n;
    l->cap = cap;
    for (int i = 0; i < n; i++) {
        l->lane[i].window = 1;
        if (!(l->lane[i].q = malloc((size_t)cap * sizeof *l->lane[i].q))) {
            ps_kv_lanes_destroy(&l);
            return PS_ENOMEM;
        }
    }
    *out = l;
    return 0;
}

void ps_kv_lanes_destroy(ps_kv_lanes_t **lp)
{
    ps_kv_lanes_t *l = *lp;
    if (!l) {
        return;
    }
    for (int i = 0; i < l->n; i++) {
        free(l->lane[i].q);
    }
    free(l->lane);
    free(l);
    *lp = NULL;
}

int ps_kv_lanes_admit(ps_kv_lanes_t *l, int i, ps_msg_type_t type)
{
    s_lane_t *a = &l->lane[i];
    const int push = type == PS_MSG_PUSH;
    if (a->n == l->cap || (a->n == 0 && (!push || a->inflight < a->window))) {
        a->inflight += push;
        return 1;
    }
    return 0;
}

void ps_kv_lanes_queue(ps_kv_lanes_t *l, int i, const ps_kv_out_t *o)
{
    s_lane_t *a = &l->lane[i];
    a->q[(a->head + a->n++) % l->cap] = *o;
}

void ps_kv_lanes_answered(ps_kv_lanes_t *l, int i, uint32_t credits)
{
    s_lane_t *a = &l->lane[i];
    a->inflight -= a->inflight > 0;
    if (credits > 0) {
        a->window = credits < (uint32_t)l->cap ? (int)credits : l->cap;
    }
}

int ps_kv_lanes_next(ps_kv_lanes_t *l, int i, ps_kv_out_t *o)
{
    s_lane_t *a = &l->lane[i];
    if (a->n == 0 || (a->q[a->head].type == PS_MSG_PUSH && a->inflight >= a->window)) {
        return 0;
    }
    *o = a->q[a->head];
    a->head = (a->head + 1) % l->cap;
    a->n--;
    a->inflight += o->type == PS_MSG_PUSH;
    return 1;
}

void ps_kv_lanes_reset(ps_kv_lanes_t *l)
{
    for (int i = 0; i < l->n; i++) {
        l->lane[i].head = l->lane[i].n = l->lane[i].inflight = 0;
    }
}

int ps_kv_lanes_inflight(const ps_kv_lanes_t *l, int i)
{
    return l->lane[i].inflight;
}

int ps_kv_lanes_window(const ps_kv_lanes_t *l, int i)
{
    return l->lane[i].window;
}
