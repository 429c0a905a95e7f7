/* scheduler/preflight.c - the workers' probe results: table, verdict, summary. */
#include "scheduler/preflight.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

int ps_preflight_on_result(ps_scheduler_t *s, ps_node_t *n, const ps_msg_t *m)
{
    size_t len;
    const void *p = m->nframes == 1 ? ps_msg_frame(m, 0, &len) : NULL;
    int S = s->cfg->servers;
    ps_preflight_pair_t *pairs = calloc((size_t)S + 1, sizeof *pairs);
    int got = pairs && p && n->role == PS_ROLE_WORKER && !n->preflight
                  ? ps_codec_unpack_preflight(p, len, pairs)
                  : PS_EPROTO;
    for (int i = 0; got == S && i < S; i++) {
        got = pairs[i].server == i ? got : PS_EPROTO;
    }
    if (got != S) {
        free(pairs);
        return PS_EPROTO;
    }
    n->preflight = pairs;
    return 0;
}

int ps_preflight_check(ps_scheduler_t *s, char *why, size_t cap)
{
    if (!s->view->preflight) {
        return 1;
    }
    for (int i = s->cfg->servers; i < s->nnodes; i++) {
        if (!s->nodes[i].preflight && !s->nodes[i].lost) {
            return 0;
        }
    }
    size_t at = 0;
    int bad = 0;
    why[0] = '\0';
    ps_log_info("preflight: %d workers x %d servers (round trip: median of 5 header-only "
                "probes; bulk: 2 MiB in 64 KiB messages)", s->cfg->workers, s->cfg->servers);
    for (int w = 0; w < s->cfg->workers; w++) {
        const ps_node_t *n = &s->nodes[s->cfg->servers + w];
        for (int k = 0; n->preflight && k < s->cfg->servers; k++) {
            const ps_preflight_pair_t *pp = &n->preflight[k];
            const char *ep = s->view->servers[k].endpoint;
            if (pp->reached) {
                ps_log_info("  W%d -> S%d %-28s rtt %8.3f ms %10.1f MB/s", w, k, ep, pp->rtt_ms,
                            pp->mbytes_per_s);
            } else if (!pp->reached) {
                ps_log_err("  W%d -> S%d %-28s UNREACHABLE (no answer within %.0f s)", w, k, ep,
                           PS_PREFLIGHT_TIMEOUT);
                if (at < cap) {
                    at += (size_t)snprintf(why + at, cap - at, "%sW%d cannot reach S%d at %s",
                                           bad ? "; " : "preflight: ", w, k, ep);
                }
                bad++;
            }
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

json_t *ps_preflight_json(const ps_scheduler_t *s)
{
    json_t *pairs = json_array();
    for (int w = 0; pairs && w < s->cfg->workers; w++) {
        const ps_node_t *n = &s->nodes[s->cfg->servers + w];
        for (int i = 0; n->preflight && i < s->cfg->servers; i++) {
            const ps_preflight_pair_t *pp = &n->preflight[i];
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
