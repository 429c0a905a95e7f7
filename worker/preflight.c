/* worker/preflight.c - probe every server before step 0, report to the scheduler. */
#include "worker/preflight.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "proto/msg.h"

enum {
    S_PINGS = 5,             /* header-only round trips; the median is reported */
    S_CHUNK = 64 * 1024,     /* bytes per bulk message: below any server's frame limit */
    S_CHUNKS = 32,           /* bulk messages in flight at once (2 MiB) */
};

typedef struct {
    ps_link_t *link;
    int replies; /* probe answers counted by s_on_reply */
    int lost;    /* the link said the job is over */
    char *err;
    size_t errlen;
} s_probe_t;

static int s_on_reply(void *arg, ps_msg_t *m, int rc)
{
    s_probe_t *p = arg;
    p->replies += rc == 0 && m->hdr.type == PS_MSG_PREFLIGHT_PROBE;
    return 0;
}

static int s_on_link(void *arg, ps_msg_t *m, int rc)
{
    s_probe_t *p = arg;
    if (rc == 0) {
        ps_link_event_t ev = ps_link_handle(p->link, m, p->err, p->errlen);
        p->lost |= ev == PS_LINK_ABORTED || ev == PS_LINK_SHUTDOWN || ev == PS_LINK_ERROR;
    }
    return 0;
}

/* Waits until `want` answers came from sock or the deadline passed, serving
 * the link meanwhile. Returns 1 when they came, 0 on timeout, PS_ECLOSED when
 * the job is over (reason in p->err). */
static int s_wait(s_probe_t *p, ps_sock_t *sock, int want, double deadline)
{
    while (p->replies < want) {
        double left = deadline - ps_now();
        if (left <= 0) {
            return 0;
        }
        ps_pollitem_t it[2] = {{.sock = sock}, {.sock = ps_link_sock(p->link)}};
        if (ps_poll(it, 2, (long)(left < 0.1 ? left * 1000 + 1 : 100)) < 0) {
            return PS_ECLOSED;
        }
        if (it[0].ready) {
            ps_msg_drain(sock, 0, 256, s_on_reply, p);
        }
        if (it[1].ready) {
            ps_msg_drain(ps_link_sock(p->link), 0, 16, s_on_link, p);
        }
        if (p->lost || ps_link_tick(p->link, p->err, p->errlen) == PS_LINK_LOST) {
            return PS_ECLOSED;
        }
    }
    return 1;
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One server: fills *pair; returns 0 or PS_ECLOSED. */
static int s_probe(ps_ctx_t *ctx, s_probe_t *p, const ps_server_info_t *si, int rank,
                   const void *chunk, Shardps__PreflightPair *pair)
{
    shardps__preflight_pair__init(pair);
    pair->server = si->rank;
    ps_sock_t *sock = NULL;
    char why[128];
    /* --secure: the server serves with its own key, as the KV client expects */
    if (ps_sock_new(ctx, PS_SOCK_DEALER, &sock, why, sizeof why) != 0 ||
        ps_sock_set_peer_key(sock, si->curve_key) != 0 ||
        ps_sock_connect(sock, si->endpoint) != 0) {
        ps_sock_destroy(&sock);
        return 0; /* unreachable: a bad endpoint */
    }
    ps_sock_set_linger(sock, 0);
    double rtt[S_PINGS];
    int rc = 1;
    for (int i = 0; i < S_PINGS && rc == 1; i++) {
        double t0 = ps_now();
        p->replies = 0;
        ps_msg_send_ctrl(sock, NULL, PS_MSG_PREFLIGHT_PROBE, PS_ROLE_WORKER, rank, NULL);
        rc = s_wait(p, sock, 1, t0 + PS_PREFLIGHT_TIMEOUT);
        rtt[i] = (ps_now() - t0) * 1e3;
    }
    if (rc == 1) {
        qsort(rtt, S_PINGS, sizeof rtt[0], s_cmp);
        pair->rtt_ms = rtt[S_PINGS / 2];
        Shardps__Header h;
        ps_msg_header(&h, PS_MSG_PREFLIGHT_PROBE, PS_ROLE_WORKER, rank);
        h.dtype = PS_DTYPE_F32;
        h.key_end = S_CHUNK / sizeof(float);
        ps_frame_t f = {chunk, S_CHUNK};
        double t0 = ps_now();
        p->replies = 0;
        for (int i = 0; i < S_CHUNKS; i++) {
            ps_msg_send(sock, NULL, h, &f, 1, 0); /* chunk is static: no copy */
        }
        rc = s_wait(p, sock, S_CHUNKS, t0 + PS_PREFLIGHT_TIMEOUT);
        pair->mbytes_per_s = (double)S_CHUNKS * S_CHUNK / ((ps_now() - t0) * 1e6);
    }
    pair->reached = rc == 1;
    ps_sock_destroy(&sock);
    return rc < 0 ? rc : 0;
}

int ps_preflight_run(ps_ctx_t *ctx, ps_link_t *link, const ps_view_t *view, int rank, char *err,
                     size_t errlen)
{
    static const char chunk[S_CHUNK]; /* zeros: valid floats, never changed */
    const size_t S = (size_t)view->num_servers;
    Shardps__PreflightPair *pairs = calloc(S + 1, sizeof *pairs);
    Shardps__PreflightPair **ptrs = calloc(S + 1, sizeof *ptrs);
    if (!pairs || !ptrs) {
        free(pairs);
        free(ptrs);
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    s_probe_t p = {.link = link, .err = err, .errlen = errlen};
    int rc = 0;
    /* worker r starts at server r: with as many workers as servers each
     * server takes one worker's bulk at a time, so the probes measure the
     * links, not the workers crowding one server's link (no incast) */
    for (int k = 0; k < view->num_servers && rc == 0; k++) {
        const int i = (rank + k) % view->num_servers;
        rc = s_probe(ctx, &p, &view->servers[i], rank, chunk, &pairs[i]);
        ps_log_debug("preflight: S%d %s rtt %.3f ms, %.1f MB/s", i,
                     pairs[i].reached ? "reached" : "UNREACHABLE", pairs[i].rtt_ms,
                     pairs[i].mbytes_per_s);
    }
    for (size_t i = 0; i < S; i++) {
        ptrs[i] = &pairs[i];
    }
    Shardps__PreflightResult result = SHARDPS__PREFLIGHT_RESULT__INIT;
    result.n_pairs = S;
    result.pairs = ptrs;
    if (rc == 0 && (rc = ps_link_send(link, PS_MSG_PREFLIGHT_RESULT, &result.base)) != 0) {
        snprintf(err, errlen, "cannot send the preflight result: %s", ps_strerror(rc));
    }
    free(ptrs);
    free(pairs);
    return rc;
}
