/*
 * scheduler/config.h - the scheduler's configuration: plain data, filled
 * from the flags (scheduler/flags.h) and read by the loop and every module
 * (scheduler/module.h gives it to them), borrowed for the whole job. A
 * header of its own so that reading it ties no module to the loop.
 */
#ifndef PS_SCHEDULER_CONFIG_H
#define PS_SCHEDULER_CONFIG_H

#include "common/job.h"
#include "common/secret.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *bind;          /* endpoint to bind, e.g. tcp://0.0.0.0:9000 (port * = any) */
    const char *endpoint_file; /* if set, the bound endpoint is written here (atomically) */
    int servers;               /* S */
    int workers;               /* M */
    ps_job_t job;              /* the job every node will run */
    const char *summary;       /* if set, the job summary is written here as JSON */
    double peer_timeout;       /* seconds of silence after which a node is lost */
    double wait;               /* seconds to wait for every node to register */
    const char *checkpoint_dir; /* servers checkpoint here (DIR/step-N/); NULL = never */
    int checkpoint_every;      /* steps between checkpoints (needs checkpoint_dir) */
    double checkpoint_seconds; /* or seconds between checkpoints (at a step agreed
                                  with the servers: scheduler/join.h) */
    const char *resume;        /* continue from the newest complete checkpoint in this
                                  directory; NULL = start afresh */
    int resume_or_start;       /* with resume: no checkpoint there means a fresh start
                                  (--resume-or-start DIR), not a failure */
    const char *metrics_bind;  /* serve the job's metrics (ours and every node's) on
                                  HOST:PORT; NULL = not served */
    double metrics_hold;       /* after the job, serve them up to this long, until one
                                  scrape took the final values */
    int min_workers;           /* K: the job goes on while K workers live (0 = all:
                                  any loss aborts it) */
    int replicas;              /* hot replicas of each server's keys, from the spares
                                  (0 to PS_MAX_REPLICAS; docs/design.md, "Hot replicas") */
    int secure;                /* CurveZMQ on every socket, only the job's keys admitted */
    const char *keys;          /* --secure: the job's key directory (shardps-keygen) */
    ps_secret_t secret;        /* --secret-file's: nodes prove they hold it at
                                  registration; unset = registration is open */
    const char *job_id;        /* this job's id, checked at registration; NULL = derive
                                  one from the start time (scheduler/identity.h) */
    const char *placement;     /* "dedicated" (servers on hosts of their own) or
                                  "colocated" (server i on worker i's host): recorded in
                                  the summary; the launchers place the nodes */
    int preflight;             /* every worker probes every server before step 0; an
                                  unreachable pair fails the job (scheduler/preflight.h) */
    const char *advertise;     /* this host's address toward the job's other hosts, for
                                  the nodes here that reach us over loopback; NULL = the
                                  local end of our route to a node on another host */
    unsigned resume_override;  /* --resume-override: bit i lets resume field i
                                  (common/job.h, ps_job_resume_fields) differ from the
                                  checkpoint's */
    int no_progress_warn;      /* --on-no-progress warn: a job at chance ends ok, warned */
} ps_scheduler_config_t;

#ifdef __cplusplus
}
#endif
#endif
