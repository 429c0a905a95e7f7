/*
 * server/consistency_report.c - what the consistency state machine tells
 * the server's loop (who a step waits for, pulls waiting, its version) and
 * the end-of-job report (its stats). It changes no state but the time of
 * the last "waiting for" line.
 */
#include <stdio.h>

#include "common/clock.h"
#include "common/log.h"
#include "server/consistency_impl.h"

void ps_consistency_tick(ps_consistency_t *c)
{
    double now = ps_now(), waited = now - c->step_since, every = c->cfg.report_missing;
    if (!ps_job_is_stepped(&c->cfg.job) || !ps_store_initialized(c->store) || c->n == 0 ||
        waited < every || now - c->missing_logged < every) {
        return;
    }
    char who[256] = "";
    size_t at = 0;
    int any = 0, more = 0;
    for (int w = 0; w < c->workers; w++) {
        uint64_t got = c->covered[ps_consistency_slot(c, c->version, w)];
        any |= got != 0;
        if (c->live[w] && got != c->n) {
            char one[64];
            snprintf(one, sizeof one, " W%d (%llu of %llu keys)", w, (unsigned long long)got,
                     (unsigned long long)c->n);
            at += ps_log_list_add(who, sizeof who, at, one, &more);
        }
    }
    ps_log_list_end(who, sizeof who, at, more);
    if (any) { /* someone pushed and waits on the others */
        ps_log_warn("step %lld of keys [%llu, %llu) has waited %.1f s for:%s",
                    (long long)c->version, (unsigned long long)c->shard.begin,
                    (unsigned long long)c->shard.end, waited, who);
        c->missing_logged = now;
    }
}

int ps_consistency_missing(const ps_consistency_t *c, int *ranks, int cap, double *waited)
{
    *waited = 0;
    if (!ps_job_is_stepped(&c->cfg.job) || !ps_store_initialized(c->store) || c->n == 0) {
        return 0;
    }
    int any = 0, n = 0;
    for (int w = 0; w < c->workers; w++) {
        any |= c->covered[ps_consistency_slot(c, c->version, w)] != 0;
    }
    for (int w = 0; any && w < c->workers; w++) {
        if (c->live[w] && c->covered[ps_consistency_slot(c, c->version, w)] != c->n) {
            if (n < cap) {
                ranks[n] = w;
            }
            n++;
        }
    }
    *waited = n ? ps_now() - c->step_since : 0;
    return n;
}

int ps_consistency_pending_pulls(const ps_consistency_t *c)
{
    return c->npending;
}

int ps_consistency_max_held(const ps_consistency_t *c)
{
    /* with rows: each slot's rows push, and the rows pulls that wait */
    return (int)c->nslots * PS_CONSISTENCY_MAX_PARTS +
           (c->cfg.rows ? (int)c->nslots + c->cap_pending : 0);
}

int64_t ps_consistency_version(const ps_consistency_t *c)
{
    return c->version;
}

const ps_consistency_stats_t *ps_consistency_stats(const ps_consistency_t *c)
{
    return &c->stats;
}
