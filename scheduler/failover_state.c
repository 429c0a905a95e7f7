/*
 * scheduler/failover_state.c - the failover module's bookkeeping without
 * sockets: the waiting spares, the replacements and their answers (the
 * protocol is in failover.h; the scheduler's side in failover.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "scheduler/failover_impl.h"

int ps_failover_new(ps_failover_t **out, const ps_sched_ops_t *ops, ps_agree_t *agree,
                    const ps_ckpt_t *ckpt)
{
    *out = NULL;
    const int servers = ops->cfg->servers;
    ps_failover_t *f = calloc(1, sizeof *f);
    size_t n = servers > 0 ? (size_t)servers : 1;
    if (!f || !(f->spare_id = malloc(n * sizeof *f->spare_id)) ||
        !(f->replica_id = malloc(n * PS_MAX_REPLICAS * sizeof *f->replica_id)) ||
        !(f->rebuild_since = calloc(n, sizeof *f->rebuild_since)) ||
        !(f->repoint = calloc(n, 1)) || !(f->bare = calloc(n, 1)) ||
        !(f->ready = calloc(n, 1))) {
        ps_failover_destroy(&f);
        return PS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        f->spare_id[i] = -1;
    }
    for (size_t i = 0; i < n * PS_MAX_REPLICAS; i++) {
        f->replica_id[i] = -1;
    }
    f->ops = ops;
    f->agree = agree;
    f->ckpt = ckpt;
    f->servers = servers;
    f->next_id = servers;
    *out = f;
    return 0;
}

void ps_failover_destroy(ps_failover_t **fp)
{
    ps_failover_t *f = *fp;
    if (f) {
        free(f->spare_id);
        free(f->readmitted);
        free(f->replica_id);
        free(f->rebuild_since);
        free(f->repoint);
        free(f->bare);
        free(f->ready);
        free(f->reps);
        free(f);
        *fp = NULL;
    }
}

int ps_failover_same_route(const ps_route_t *a, const ps_route_t *b)
{
    return a->len == b->len && !memcmp(a->id, b->id, a->len);
}

ps_node_t *ps_failover_spare_of(ps_failover_t *f, const ps_route_t *r)
{
    for (int i = 0; i < f->nspares; i++) {
        if (ps_failover_same_route(&f->spares[i].route, r)) {
            return &f->spares[i];
        }
    }
    return NULL;
}

ps_node_t *ps_failover_spare_by_id(ps_failover_t *f, int id)
{
    for (int i = 0; id >= 0 && i < f->nspares; i++) {
        if (f->spares[i].rank == id) {
            return &f->spares[i];
        }
    }
    return NULL;
}

/* A spare's row on route, with spare id `id`; as ps_failover_spare_add. */
static int s_add(ps_failover_t *f, const ps_route_t *route, uint32_t pid, int fd,
                 const char *curve_key, int id, double now, ps_node_t **out, const char **why)
{
    if (ps_failover_spare_of(f, route)) {
        *why = "this spare is registered already";
        return PS_ESTATE;
    }
    if (f->nspares == PS_FAILOVER_MAX_SPARES) {
        *why = "too many spares wait already";
        return PS_ESTATE;
    }
    ps_node_t *n = &f->spares[f->nspares++];
    memset(n, 0, sizeof *n);
    n->used = 1;
    n->role = PS_ROLE_SERVER;
    n->rank = id;
    n->route = *route;
    n->pid = pid;
    n->last_seen = now;
    n->fd = fd;
    snprintf(n->curve_key, sizeof n->curve_key, "%s", curve_key);
    /* No endpoint yet: a promoted spare binds for its shard and says where
     * (PEER_READY), as every server does. */
    *out = n;
    return 0;
}

int ps_failover_spare_add(ps_failover_t *f, const ps_route_t *route, uint32_t pid, int fd,
                          const char *curve_key, double now, const ps_node_t **out,
                          const char **why)
{
    ps_node_t *n = NULL;
    int rc = s_add(f, route, pid, fd, curve_key, f->next_id, now, &n, why);
    f->next_id += rc == 0;
    *out = n;
    return rc;
}

int ps_failover_spare_readmit(ps_failover_t *f, const ps_route_t *route, uint32_t pid, int fd,
                              const char *curve_key, int id, double now, ps_node_t **out,
                              const char **why)
{
    *out = NULL;
    if (id >= f->readmit_below || f->readmitted[id]) {
        *why = "this spare was left out of the job";
        return PS_ESTATE;
    }
    if (ps_failover_spare_by_id(f, id)) {
        *why = "that spare is registered";
        return PS_ESTATE;
    }
    int rc = s_add(f, route, pid, fd, curve_key, id, now, out, why);
    if (rc == 0) {
        f->readmitted[id] = 1;
    }
    return rc;
}

int ps_failover_next_id(const ps_failover_t *f)
{
    return f->next_id;
}

int ps_failover_readmit_below(ps_failover_t *f, int next_id)
{
    if (next_id <= f->next_id) {
        return 0;
    }
    unsigned char *seen = calloc((size_t)next_id, 1);
    if (!seen) {
        return PS_ENOMEM;
    }
    free(f->readmitted);
    f->readmitted = seen;
    f->readmit_below = f->next_id = next_id;
    return 0;
}

int ps_failover_spares(const ps_failover_t *f)
{
    return f->nspares;
}

int ps_failover_spare_seen(ps_failover_t *f, const ps_route_t *route, int sender, double now)
{
    ps_node_t *n = ps_failover_spare_of(f, route);
    if (!n || n->rank != sender) {
        return 0;
    }
    n->last_seen = now;
    return 1;
}

int ps_failover_spares_expire(ps_failover_t *f, double now, double timeout)
{
    int gone = 0;
    for (int i = 0; i < f->nspares; i++) {
        ps_node_t *n = &f->spares[i];
        if (now - n->last_seen > timeout) {
            ps_log_warn("lost spare S%d (pid %u): silent for %.1f s", n->rank, n->pid,
                        now - n->last_seen);
            f->spares[i--] = f->spares[--f->nspares];
            gone++;
        }
    }
    return gone;
}

int ps_failover_spare_closed(ps_failover_t *f, int fd)
{
    for (int i = 0; fd >= 0 && i < f->nspares; i++) {
        if (f->spares[i].fd == fd) {
            ps_log_warn("lost spare S%d (pid %u): its connection closed", f->spares[i].rank,
                        f->spares[i].pid);
            f->spares[i] = f->spares[--f->nspares];
            return 1;
        }
    }
    return 0;
}

int ps_failover_record(ps_failover_t *f, int r, int64_t generation, int64_t step, double now,
                       double silent, int stepped)
{
    if (f->nreps == f->cap_reps) {
        int cap = f->cap_reps ? 2 * f->cap_reps : 8;
        ps_failover_rep_t *reps = realloc(f->reps, (size_t)cap * sizeof *reps);
        if (!reps) {
            return PS_ENOMEM;
        }
        f->reps = reps;
        f->cap_reps = cap;
    }
    f->reps[f->nreps++] = (ps_failover_rep_t){r, generation, step, 0, 0, 0, now, silent, -1, 0};
    memset(f->ready, 0, (size_t)(f->servers > 0 ? f->servers : 1));
    f->rolled_from = stepped ? step : 0;
    return 0;
}

void ps_failover_take_spare(ps_failover_t *f, int i, int r, ps_node_t *spare)
{
    *spare = f->spares[i];
    f->spares[i] = f->spares[--f->nspares];
    f->spare_id[r] = spare->rank;
    spare->follows = 0;
}

int ps_failover_promote(ps_failover_t *f, int r, ps_node_t *spare)
{
    for (int i = 0; r >= 0 && r < f->servers && i < f->nspares; i++) {
        if (!f->spares[i].follows) { /* a replica runs already: it waits for no view */
            ps_failover_take_spare(f, i, r, spare);
            return 0;
        }
    }
    return PS_ENOENT;
}

int ps_failover_cold_spares(const ps_failover_t *f)
{
    int n = 0;
    for (int i = 0; i < f->nspares; i++) {
        n += !f->spares[i].follows;
    }
    return n;
}

int ps_failover_promoted_id(const ps_failover_t *f, int r)
{
    return r >= 0 && r < f->servers ? f->spare_id[r] : -1;
}

void ps_failover_retire(ps_failover_t *f, const ps_route_t *route)
{
    f->retired[f->nretired++ % PS_FAILOVER_MAX_SPARES] = *route;
}

int ps_failover_retired(const ps_failover_t *f, const ps_route_t *route)
{
    for (int i = 0; i < f->nretired && i < PS_FAILOVER_MAX_SPARES; i++) {
        if (ps_failover_same_route(&f->retired[i], route)) {
            return 1;
        }
    }
    return 0;
}

/* The first step after the rollback: every replacement still open (a server
 * lost during another's recovery) ends with this one. */
static void s_recovered(ps_failover_t *f, int stepped, double now, const char *after)
{
    ps_failover_rep_t *rep = &f->reps[f->nreps - 1];
    if (rep->recover_s >= 0) {
        return;
    }
    for (int i = 0; i < f->nreps; i++) {
        if (f->reps[i].recover_s < 0) {
            f->reps[i].recover_s = now - f->reps[i].t_declared;
        }
    }
    if (rep->takeover) {
        ps_log_info("failover %lld: S%d's replica took over: detected after %.2f s, recovered "
                    "%.3f s later (%s), nothing rolled back",
                    (long long)rep->generation, rep->rank, rep->detect_s, rep->recover_s, after);
    } else if (stepped) {
        ps_log_info("failover %lld: S%d replaced: detected after %.2f s, recovered %.3f s "
                    "later (first step after the rollback), %lld steps lost",
                    (long long)rep->generation, rep->rank, rep->detect_s, rep->recover_s,
                    (long long)rep->steps_lost);
    } else {
        ps_log_info("failover %lld: S%d replaced: detected after %.2f s, recovered %.3f s "
                    "later (first update after), %lld updates lost (its version, taken as "
                    "the others' highest, %lld, minus its checkpoint part's, %lld)",
                    (long long)rep->generation, rep->rank, rep->detect_s, rep->recover_s,
                    (long long)rep->updates_lost, (long long)f->rolled_from,
                    (long long)rep->base);
    }
}

void ps_failover_ended(ps_failover_t *f, double now)
{
    if (f->nreps > 0) {
        s_recovered(f, 1, now, "every server answered; training was over");
    }
}

int ps_failover_ready(ps_failover_t *f, int rank, const Shardps__FailoverReady *rd, int stepped,
                      double now)
{
    if (f->nreps == 0 || rank < 0 || rank >= f->servers) {
        return 0;
    }
    ps_failover_rep_t *rep = &f->reps[f->nreps - 1];
    if (rd->stepped) {
        s_recovered(f, stepped, now, stepped ? "first step after" : "first update after");
        return 0;
    }
    if (f->ready[rank]) {
        return 0;
    }
    f->ready[rank] = 1;
    if (rep->takeover && rank == rep->rank) {
        rep->step = rd->step; /* the replica's version: where the job goes on */
    }
    if (rep->takeover && stepped) {
        /* nothing rolls back */
    } else if (!stepped) {
        /* Async: the spare answers its part's version, the others the one
         * they go on from. Each worker step pushes once to every server,
         * so the lost server stood about where the others' highest is. */
        if (rank == rep->rank) {
            rep->base = rd->step;
        } else if (rd->from_version > f->rolled_from) {
            f->rolled_from = rd->from_version;
        }
        rep->updates_lost = f->rolled_from > rep->base ? f->rolled_from - rep->base : 0;
    } else if (rd->from_version > f->rolled_from) {
        f->rolled_from = rd->from_version;
    }
    rep->steps_lost = stepped && !rep->takeover ? f->rolled_from - rep->step : 0;
    for (int i = 0; i < f->servers; i++) {
        if (!f->ready[i]) {
            return 0;
        }
    }
    return 1;
}

int ps_failover_replacements(const ps_failover_t *f, const ps_failover_rep_t **reps)
{
    *reps = f->reps;
    return f->nreps;
}
