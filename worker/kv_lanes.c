/* worker/kv_lanes.c - per server, pushes in flight against its credits and
 * the link's pace, and the messages waiting behind them (see kv_lanes.h). */
#include "worker/kv_lanes.h"

#include <stdlib.h>

#include "common/error.h"

/* A push sent and not yet answered: when, its weight (keys or one), and
 * the weight in flight ahead of it then. */
typedef struct {
    double at;
    uint64_t keys;
    uint64_t ahead;
} s_fly_t;

typedef struct {
    ps_kv_out_t *q;   /* cap entries: a ring */
    int head, n;      /* first waiting, count */
    s_fly_t *fly;     /* pushes in flight, oldest first: a ring of fcap */
    int fhead, nfly, fcap;
    uint64_t flying;  /* their weight */
    uint64_t grant;   /* weight the server lets be in flight (0: one push) */
    double rtt;       /* the least push round trip seen, seconds (0: none yet) */
    double got_keys;  /* decaying sums of the keys acked, and of the time */
    double got_secs;  /* between acks, while pushes waited behind the window */
    double last;      /* the previous ack if pushes waited then, else 0 */
    double late;      /* decaying most seconds an ack came after its queue
                         and round trip explain: the acks' jitter */
    int local;        /* the server is on this host: no link to pace */
} s_lane_t;

struct ps_kv_lanes {
    s_lane_t *lane; /* n */
    int n, cap;
    uint64_t unit;  /* keys of one credit; 0: a credit is a push, unpaced */
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
        l->lane[i].fcap = cap;
        if (!(l->lane[i].q = malloc((size_t)cap * sizeof *l->lane[i].q)) ||
            !(l->lane[i].fly = malloc((size_t)cap * sizeof *l->lane[i].fly))) {
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
        free(l->lane[i].fly);
    }
    free(l->lane);
    free(l);
    *lp = NULL;
}

void ps_kv_lanes_set_unit(ps_kv_lanes_t *l, uint64_t keys)
{
    l->unit = keys;
}

int ps_kv_lanes_paced(const ps_kv_lanes_t *l)
{
    return l->unit != 0;
}

/* Lane a's pushes acked per second while they waited behind its window; 0:
 * not measured yet. */
static double s_rate(const s_lane_t *a)
{
    return a->got_secs > 0 ? a->got_keys / a->got_secs : 0;
}

/* What lane a's pace lets be in flight: its rate's round trip plus its
 * acks' jitter, at most PS_KV_QUEUE_SECONDS or, where its share of the link
 * is slow, PS_KV_QUEUE_CREDIT of one credit's time at its rate (a fixed
 * time would make a slow link idle where a fast one does not); 0 when it
 * has none (unpaced, on this host, not measured yet). */
static double s_paced(const ps_kv_lanes_t *l, const s_lane_t *a)
{
    const double rate = s_rate(a);
    if (!l->unit || a->local || rate <= 0) {
        return 0;
    }
    const double credit = PS_KV_QUEUE_CREDIT * (double)l->unit / rate;
    const double most = credit > PS_KV_QUEUE_SECONDS ? credit : PS_KV_QUEUE_SECONDS;
    return rate * (a->rtt + (a->late < most ? a->late : most));
}

uint64_t ps_kv_lanes_window(const ps_kv_lanes_t *l, int i)
{
    const s_lane_t *a = &l->lane[i];
    const double paced = s_paced(l, a);
    return paced > 0 && paced < (double)a->grant ? (uint64_t)paced : a->grant;
}

/* Records a push of keys sent to lane a now. */
static void s_fly(s_lane_t *a, uint64_t keys, double now)
{
    if (a->nfly == a->fcap) { /* only past a full lane: grow, or count it unseen */
        s_fly_t *f = malloc(2 * (size_t)a->fcap * sizeof *f);
        if (f) {
            for (int k = 0; k < a->nfly; k++) {
                f[k] = a->fly[(a->fhead + k) % a->fcap];
            }
            free(a->fly);
            a->fly = f;
            a->fhead = 0;
            a->fcap *= 2;
        }
    }
    if (a->nfly < a->fcap) {
        a->fly[(a->fhead + a->nfly++) % a->fcap] = (s_fly_t){now, keys, a->flying};
    }
    a->flying += keys;
}

/* What a push of keys weighs against the window: its keys, or one. */
static uint64_t s_weight(const ps_kv_lanes_t *l, uint64_t keys)
{
    return l->unit ? keys : 1;
}

/* Whether a push of keys fits lane i's window (a lone push always does):
 * it stays within the grant, and goes while what flies is under the pace,
 * so it may pass the pace by one message. Held to whole messages under the
 * pace, a lane whose window is under two of them keeps one in flight, is
 * acked at one message a round trip, and measures the pace that keeps it
 * there: on a long round trip it could never climb back. */
static int s_fits(const ps_kv_lanes_t *l, int i, uint64_t keys)
{
    const s_lane_t *a = &l->lane[i];
    if (a->flying == 0) {
        return 1;
    }
    const double paced = s_paced(l, a);
    return a->flying + s_weight(l, keys) <= a->grant && (paced == 0 || (double)a->flying < paced);
}

int ps_kv_lanes_admit(ps_kv_lanes_t *l, int i, ps_msg_type_t type, uint64_t keys, double now)
{
    s_lane_t *a = &l->lane[i];
    const int push = ps_kv_lanes_is_push(type);
    if (a->n == l->cap || (a->n == 0 && (!push || s_fits(l, i, keys)))) {
        if (push) {
            s_fly(a, s_weight(l, keys), now);
        }
        return 1;
    }
    return 0;
}

void ps_kv_lanes_queue(ps_kv_lanes_t *l, int i, const ps_kv_out_t *o)
{
    s_lane_t *a = &l->lane[i];
    a->q[(a->head + a->n++) % l->cap] = *o;
}

void ps_kv_lanes_answered(ps_kv_lanes_t *l, int i, uint32_t credits, double now)
{
    s_lane_t *a = &l->lane[i];
    if (credits > 0) {
        a->grant = l->unit ? (uint64_t)credits * l->unit
                           : credits < (uint32_t)l->cap ? credits : (uint64_t)l->cap;
    }
    if (a->nfly == 0) {
        a->flying = 0; /* a late answer, after a reset */
        return;
    }
    const s_fly_t f = a->fly[a->fhead];
    a->fhead = (a->fhead + 1) % a->fcap;
    a->nfly--;
    /* every push answered: none in flight, even one a failed malloc left unseen */
    a->flying = a->nfly == 0 || f.keys > a->flying ? 0 : a->flying - f.keys;
    const double rtt = now - f.at, rate = s_rate(a);
    a->rtt = a->rtt == 0 || rtt < a->rtt ? rtt : a->rtt;
    /* past the least round trip and the pushes ahead of it at the pace */
    const double late = rate > 0 ? rtt - a->rtt - (double)f.ahead / rate : 0;
    a->late = late > a->late ? late : a->late * (1 - PS_KV_PACE_DECAY);
    if (a->last > 0) { /* the link's pace: acks while pushes waited */
        a->got_keys = a->got_keys * (1 - PS_KV_PACE_DECAY) + (double)f.keys;
        a->got_secs = a->got_secs * (1 - PS_KV_PACE_DECAY) + (now - a->last);
    }
    a->last = a->n > 0 ? now : 0;
}

int ps_kv_lanes_next(ps_kv_lanes_t *l, int i, ps_kv_out_t *o, double now)
{
    s_lane_t *a = &l->lane[i];
    if (a->n == 0) {
        return 0;
    }
    const ps_kv_out_t *h = &a->q[a->head];
    const int push = ps_kv_lanes_is_push(h->type);
    if (push && !s_fits(l, i, h->keys)) {
        return 0;
    }
    *o = *h;
    a->head = (a->head + 1) % l->cap;
    a->n--;
    if (push) {
        s_fly(a, s_weight(l, o->keys), now);
    }
    return 1;
}

void ps_kv_lanes_unsend(ps_kv_lanes_t *l, int i, const ps_kv_out_t *o)
{
    s_lane_t *a = &l->lane[i];
    if (ps_kv_lanes_is_push(o->type) && a->nfly > 0) {
        const s_fly_t f = a->fly[(a->fhead + --a->nfly) % a->fcap];
        a->flying -= f.keys < a->flying ? f.keys : a->flying;
    }
}

void ps_kv_lanes_reset(ps_kv_lanes_t *l)
{
    for (int i = 0; i < l->n; i++) {
        s_lane_t *a = &l->lane[i];
        a->head = a->n = a->fhead = a->nfly = 0;
        a->flying = 0;
        a->last = 0;
    }
}

int ps_kv_lanes_inflight(const ps_kv_lanes_t *l, int i)
{
    return l->lane[i].nfly;
}

void ps_kv_lanes_set_local(ps_kv_lanes_t *l, int i, int local)
{
    l->lane[i].local = local;
}

int ps_kv_lanes_local(const ps_kv_lanes_t *l, int i)
{
    return l->lane[i].local;
}

double ps_kv_lanes_rate(const ps_kv_lanes_t *l)
{
    double rate = 0;
    for (int i = 0; i < l->n; i++) {
        const double r = s_rate(&l->lane[i]);
        if (!l->lane[i].local && r == 0) {
            return 0;
        }
        rate += l->lane[i].local ? 0 : r;
    }
    return rate;
}
