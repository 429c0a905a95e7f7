/* scheduler/preflight.c - the workers' probe results: table, verdict, summary. */
#include "scheduler/preflight.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

struct ps_preflight {
    const ps_sched_ops_t *ops;
    int servers;
    int workers;
    Shardps__PreflightPair **pairs; /* [w]: worker w's result, one per server in rank
                                       order; NULL until it came; owned */
    int verdict;                 /* 0 waiting for results, 1 passed, -1 failed */
};

int ps_preflight_new(ps_preflight_t **out, const ps_sched_ops_t *ops)
{
    const int workers = ops->cfg->workers;
    ps_preflight_t *p = calloc(1, sizeof *p);
    if (!p || !(p->pairs = calloc((size_t)(workers > 0 ? workers : 1), sizeof *p->pairs))) {
        free(p);
        *out = NULL;
        return PS_ENOMEM;
    }
    p->ops = ops;
    p->servers = ops->cfg->servers;
    p->workers = workers;
    *out = p;
    return 0;
}

void ps_preflight_destroy(ps_preflight_t **pp)
{
    ps_preflight_t *p = *pp;
    if (p) {
        for (int w = 0; w < p->workers; w++) {
            free(p->pairs[w]);
        }
        free(p->pairs);
        free(p);
        *pp = NULL;
    }
}

int ps_preflight_passed(const ps_preflight_t *p)
{
    return p->verdict == 1;
}

/* Records worker n's result (message m). Returns 0, or PS_EPROTO for a result
 * that does not decode or does not cover every server. */
static int s_record(ps_preflight_t *pf, const ps_node_t *n, ps_msg_t *m)
{
    const int S = pf->servers;
    if (n->role != PS_ROLE_WORKER || n->rank < 0 || n->rank >= pf->workers ||
        pf->pairs[n->rank]) {
        return PS_EPROTO;
    }
    const Shardps__PreflightResult *r =
        ps_msg_unpack_body(m, &shardps__preflight_result__descriptor);
    if (!r || r->n_pairs != (size_t)S) {
        return PS_EPROTO;
    }
    Shardps__PreflightPair *pairs = calloc((size_t)S + 1, sizeof *pairs);
    for (int i = 0; pairs && i < S; i++) {
        if (r->pairs[i]->server != i) {
            free(pairs);
            return PS_EPROTO;
        }
        pairs[i] = *r->pairs[i]; /* scalars only (unknown fields dropped) */
        pairs[i].base.n_unknown_fields = 0;
        pairs[i].base.unknown_fields = NULL;
    }
    pf->pairs[n->rank] = pairs;
    return pairs ? 0 : PS_EPROTO;
}

/* Once every live worker's result is in: logs the table, returns 1 when
 * every pair reached, else PS_EIO with every unreachable pair in why; 0
 * while results are missing (1 when none was asked for). */
static int s_check(const ps_preflight_t *pf, char *why, size_t cap)
{
    const ps_sched_ops_t *ops = pf->ops;
    const ps_view_t *v = ops->view(ops->core);
    if (!v->preflight) {
        return 1;
    }
    for (int w = 0; w < pf->workers; w++) {
        if (!pf->pairs[w] && !ops->node(ops->core, PS_ROLE_WORKER, w)->lost) {
            return 0;
        }
    }
    size_t at = 0;
    int bad = 0;
    why[0] = '\0';
    ps_log_info("preflight: %d workers x %d servers (round trip: median of 5 header-only "
                "probes; bulk: 2 MiB in 64 KiB messages)", pf->workers, pf->servers);
    for (int w = 0; w < pf->workers; w++) {
        for (int k = 0; pf->pairs[w] && k < pf->servers; k++) {
            const Shardps__PreflightPair *pp = &pf->pairs[w][k];
            const char *ep = v->servers[k].endpoint;
            if (pp->reached) {
                ps_log_info("  W%d -> S%d %-28s rtt %8.3f ms %10.1f MB/s", w, k, ep, pp->rtt_ms,
                            pp->mbytes_per_s);
                continue;
            }
            ps_log_err("  W%d -> S%d %-28s UNREACHABLE (no answer within %.0f s)", w, k, ep,
                       PS_PREFLIGHT_TIMEOUT);
            if (at < cap) {
                at += (size_t)snprintf(why + at, cap - at, "%sW%d cannot reach S%d at %s",
                                       bad ? "; " : "preflight: ", w, k, ep);
            }
            bad++;
        }
    }
    if (bad) {
        if (at < cap) {
            snprintf(why + at, cap - at, " (no answer within %.0f s)", PS_PREFLIGHT_TIMEOUT);
        }
        return PS_EIO;
    }
    return 1;
}

void ps_preflight_progress(ps_preflight_t *p)
{
    char why[512];
    const int rc = p->verdict == 0 ? s_check(p, why, sizeof why) : 0;
    if (rc < 0) {
        p->verdict = -1;
        p->ops->abort_job(p->ops->core, 0, why);
    } else if (rc == 1) {
        p->verdict = 1;
        p->ops->barrier_check(p->ops->core);
    }
}

static int s_on_message(void *self, const ps_node_t *n, ps_msg_t *m)
{
    ps_preflight_t *p = self;
    if (!n || m->hdr.type != PS_MSG_PREFLIGHT_RESULT) {
        return 0;
    }
    if (s_record(p, n, m) != 0) {
        char tag[16];
        ps_sched_fail(p->ops, 0, "%s sent a bad preflight result",
                      ps_node_tag(n, tag, sizeof tag));
        return 1;
    }
    ps_preflight_progress(p);
    return 1;
}

const ps_sched_events_t ps_preflight_events = {
    .on_message = s_on_message,
};

json_t *ps_preflight_json(const ps_preflight_t *pf)
{
    json_t *pairs = json_array();
    for (int w = 0; pairs && w < pf->workers; w++) {
        for (int i = 0; pf->pairs[w] && i < pf->servers; i++) {
            const Shardps__PreflightPair *pp = &pf->pairs[w][i];
            json_t *pair = json_pack("{s:i, s:i, s:b, s:o, s:o}", "worker", w, "server", i,
                                     "reached", pp->reached, "rtt_ms",
                                     ps_json_real(pp->rtt_ms, 4), "mbytes_per_s",
                                     ps_json_real(pp->mbytes_per_s, 1));
            if (json_array_append_new(pairs, pair) != 0) {
                json_decref(pairs);
                return NULL;
            }
        }
    }
    return pairs;
}
