/*
 * scheduler/failover_impl.h - the failover module's state, shared by its two
 * files: failover_state.c (spares and replacements, without sockets) and
 * failover.c (the scheduler's side: messages, takeovers, hot replicas,
 * through the core's ops). Not for other modules: they use failover.h.
 */
#ifndef PS_SCHEDULER_FAILOVER_IMPL_H
#define PS_SCHEDULER_FAILOVER_IMPL_H

#include "scheduler/failover.h"

struct ps_failover {
    const ps_sched_ops_t *ops; /* the core (borrowed): what the module reads and asks */
    ps_agree_t *agree;         /* abandoned by a rollback (borrowed) */
    const ps_ckpt_t *ckpt;     /* a cold replacement needs its checkpoints (borrowed) */
    int servers;               /* S: ops->cfg->servers */
    ps_node_t spares[PS_FAILOVER_MAX_SPARES]; /* waiting spares (rank: their spare id) */
    int nspares;
    int next_id;           /* the next spare's id: servers + k, never reused */
    int readmit_below;     /* a restarted scheduler: its predecessor's spare ids end here */
    unsigned char *readmitted; /* [readmit_below]: that spare was taken back already */
    int *spare_id;         /* servers: the id the node had as a spare, -1 if none */
    unsigned char *ready;  /* servers: answered the current failover */
    int64_t rolled_from;   /* highest version any server rolled back (async: went on) from */
    ps_failover_rep_t *reps; /* every replacement, in order */
    int nreps, cap_reps;
    ps_route_t retired[PS_FAILOVER_MAX_SPARES]; /* connections of replaced servers (a ring) */
    int nretired;
    /* --replicas K: per server, its replicas' spare ids (PS_MAX_REPLICAS
     * slots, K used; -1: none: ps_failover_replica) and when it lost the one
     * that took over (0: not rebuilding) */
    int *replica_id;
    double *rebuild_since;
    unsigned char *repoint;  /* servers: taken over; the other replicas follow the new
                              * primary once the failover is done (failover.c) */
    unsigned char *bare;     /* servers: a replica slot found no spare, and that was said */
    double rebuild_max, rebuild_sum; /* seconds from a takeover to the new replica in step */
    int rebuilds, takeovers;
};

/* Same connection. */
int ps_failover_same_route(const ps_route_t *a, const ps_route_t *b);

/* The waiting spare on connection r, or NULL. */
ps_node_t *ps_failover_spare_of(ps_failover_t *f, const ps_route_t *r);

/* The waiting spare with spare id id, or NULL. */
ps_node_t *ps_failover_spare_by_id(ps_failover_t *f, int id);

/* A spare of a restarted scheduler's predecessor registering again with its
 * id: added as ps_failover_spare_add does but keeping that id, once per id
 * below ps_failover_readmit_below's; else PS_ESTATE with the reason in *why
 * (an id this scheduler gave or took back already: the spare was forgotten
 * since; an id a waiting spare has). */
int ps_failover_spare_readmit(ps_failover_t *f, const ps_route_t *route, uint32_t pid, int fd,
                              const char *curve_key, int id, double now, ps_node_t **out,
                              const char **why);

/* Slot k (< PS_MAX_REPLICAS) of server r's replicas: a spare id or -1. */
static inline int *ps_failover_replica(ps_failover_t *f, int r, int k)
{
    return &f->replica_id[(size_t)r * PS_MAX_REPLICAS + (size_t)k];
}

/* Takes spare i out of the waiting ones into *spare, now rank r. */
void ps_failover_take_spare(ps_failover_t *f, int i, int r, ps_node_t *spare);

#endif
